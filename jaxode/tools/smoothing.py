"""Randomized smoothing: gradients of the expected loss over a batch of perturbed worlds.

The gradient that ``jax.grad`` gives through a rollout is the exact derivative
of one trajectory. Through contacts that derivative is piecewise: a bounce, a
stick/slip switch or a contact onset makes the loss a staircase of smooth
pieces, and the exact slope of the current piece says little about the loss
at the step sizes an optimiser takes (docs/GRADIENTS.md shows examples).
:func:`smooth` estimates instead the gradient of the smoothed loss

    F_sigma(x) = E_eps [ f(x + sigma * eps) ],     eps ~ N(0, I),

from ``num_samples`` perturbed copies of the input, evaluated as ONE batch
(``jax.vmap`` over the samples: a batch of worlds, which is what jaxode is
built to step). ``sigma`` is the noise scale per input (a scalar or a pytree
like ``x``): the width over which the loss is averaged, chosen at the scale of
the optimiser's steps (and of the features that should not trap it).

Estimators (``method``; Suh, Simchowitz, Zhang, Tedrake, "Do differentiable
simulators give better policy gradients?", ICML 2022, sections 2-3):

``"zeroth"`` (score function / Gaussian smoothing, Nesterov & Spokoiny 2017):
    grad F_sigma(x) = E[(f(x + sigma eps) - b(eps)) eps] / sigma (+ E[grad b]).
    Only values of ``f``: unbiased for grad F_sigma for ANY integrable ``f``,
    discontinuous ones included. Variance ~ Var(f) d / (sigma^2 n): it grows
    with the number of inputs d and as sigma -> 0. Control variates cut it:
    ``antithetic=True`` pairs eps with -eps (cancels every even part of f,
    the constant baseline included); ``control_variate="baseline"`` subtracts
    b = f(x) (one more evaluation; a no-op with antithetic pairs);
    ``control_variate="linear"`` subtracts b(eps) = f(x) + sigma grad f(x).eps
    and adds grad f(x) back (its expectation): still unbiased whatever
    grad f(x) is (it is fixed, not sampled), and the variance left is that of
    the curvature and the jumps only.

``"first"`` (pathwise, "randomized smoothing"): the average of the exact
    gradients grad f(x + sigma eps) (``jax.grad`` through every perturbed
    world). Unbiased for grad F_sigma when f is continuous with an
    almost-everywhere gradient (Lipschitz); where f JUMPS (a hard contact that
    switches on, a trajectory that lands on another side of an obstacle) the
    average misses the jump's contribution (the "empirical bias" of Suh et
    al.). Its variance does not grow with d nor as sigma -> 0, but it is the
    variance of the exact gradients, which is huge (heavy-tailed) where a
    rollout is stiff or chaotic (exploding gradients of long contact-rich
    rollouts). ``antithetic=True`` averages grad f(x + sigma eps) and
    grad f(x - sigma eps) (cancels the part linear in eps).

``"blend"`` (the alpha-order estimator of Suh et al.): both of the above from
    the same samples, combined per input with weights inversely proportional
    to their sample variances. The weights come from the same samples, so the
    blend carries a bias of order 1/n; where the first-order one is biased
    (jumps) and has the smaller variance, the blend inherits its bias.

Whatever the estimator, F_sigma is not f: for smooth f, F_sigma(x) =
f(x) + sigma^2 tr(H)/2 + O(sigma^4), and the minimiser of F_sigma moves with
sigma (by O(sigma^2) near a smooth minimum). Optimise with a sigma of the
scale of the basin's features first, then shrink it (see
docs/GRADIENTS.md's system-identification recipe).

The standard errors returned (``grad_stderr``, ``value_stderr``) are the
sample standard deviations of the independent per-sample (or per-pair)
estimates divided by the square root of their number: the Monte-Carlo error
of this estimate, not its smoothing bias.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from jaxode._struct import pytree_dataclass, static_field

METHODS = ("zeroth", "first", "blend")
CONTROL_VARIATES = (None, "baseline", "linear")


@pytree_dataclass
class SmoothedGradient:
    """An estimate of the smoothed loss F_sigma(x) and of its gradient.

    value: sample mean of f over the perturbed inputs (estimates F_sigma(x));
    grad: estimated grad F_sigma(x), a pytree like x; value_stderr,
    grad_stderr (a pytree like x): Monte-Carlo standard errors of those;
    zeroth_grad, first_grad: the two estimators' gradients where ``method``
    computed them (None otherwise); method: the estimator used.
    """

    value: Any
    grad: Any
    value_stderr: Any
    grad_stderr: Any
    zeroth_grad: Any = None
    first_grad: Any = None
    method: str = static_field(default="first")


def _check(sigma, num_samples, method, antithetic, control_variate, chunk):
    """ValueError naming the argument, what it must be and the value received."""
    if method not in METHODS:
        raise ValueError(f"smooth: method must be one of {METHODS} (got {method!r})")
    if control_variate not in CONTROL_VARIATES:
        raise ValueError(f"smooth: control_variate must be one of {CONTROL_VARIATES} "
                         f"(got {control_variate!r})")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 2:
        raise ValueError(f"smooth: num_samples must be an integer >= 2 perturbed inputs "
                         f"(got {num_samples!r})")
    if antithetic and num_samples % 2:
        raise ValueError(f"smooth: num_samples must be even with antithetic=True (pairs eps, "
                         f"-eps) (got {num_samples})")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"smooth: chunk must be None or an integer >= 1 samples per batch "
                         f"(got {chunk!r})")
    for leaf in jax.tree.leaves(sigma):
        if isinstance(leaf, jax.core.Tracer):
            continue  # a traced sigma (e.g. an annealing schedule) is the caller's to keep > 0
        v = np.asarray(leaf, dtype=float)
        bad = ~(np.isfinite(v) & (v > 0))
        if np.any(bad):
            raise ValueError(f"smooth: sigma must be finite and > 0 for every input (in the "
                             f"units of x) (got {v[bad][:4]} among its values)")


def smooth(fun: Callable, sigma, num_samples: int = 32, *, method: str = "first",
           antithetic: bool = True, control_variate: Optional[str] = None,
           chunk: Optional[int] = None) -> Callable:
    """A function ``(x, key) -> SmoothedGradient`` estimating grad E[fun(x + sigma eps)].

    fun: x -> scalar loss (differentiable with ``jax.grad`` for the "first"
    and "blend" methods, and for control_variate="linear"); x a pytree of
    float arrays (e.g. a vector of parameters, an action sequence). sigma: the
    noise scale [units of x], a positive scalar or a pytree like x (leaves
    broadcast to the leaf's shape). num_samples: perturbed inputs per call,
    evaluated as one ``vmap`` batch (``chunk``: at most that many at once,
    ``lax.map`` over the rest, to bound memory). method, antithetic,
    control_variate: see the module docstring (bias and variance of each).
    key: a ``jax.random`` key; the same key gives the same perturbations
    (common random numbers: differences of ``value`` between two x are then
    differences of the same sample average).

    The returned function is traceable (jit it; vmap it over keys for
    repeated estimates).
    """
    _check(sigma, num_samples, method, antithetic, control_variate, chunk)

    def estimate(x, key) -> SmoothedGradient:
        flat, unravel = ravel_pytree(x)
        if not jnp.issubdtype(flat.dtype, jnp.floating):
            raise TypeError(f"smooth: x must hold float arrays (got dtype {flat.dtype})")
        sig = jax.tree.map(lambda s, leaf: jnp.broadcast_to(jnp.asarray(s, flat.dtype),
                                                            jnp.shape(leaf)),
                           sigma if jax.tree.structure(sigma) == jax.tree.structure(x)
                           else jax.tree.map(lambda _: sigma, x), x)
        sig_flat, _ = ravel_pytree(sig)
        d = flat.shape[0]
        f = lambda v: fun(unravel(v))
        n = num_samples // 2 if antithetic else num_samples
        eps = jax.random.normal(key, (n, d), flat.dtype)
        if antithetic:
            eps = jnp.concatenate([eps, -eps])
        xs = flat + sig_flat * eps

        need_grad = method in ("first", "blend")
        per = jax.value_and_grad(f) if need_grad else f

        def batch(fn, xs_):
            if chunk is None or chunk >= xs_.shape[0]:
                return jax.vmap(fn)(xs_)
            return jax.lax.map(fn, xs_, batch_size=chunk)

        out = batch(per, xs)
        vals, grads = out if need_grad else (out, None)

        def pairs(a):  # per independent estimate: average over a pair (eps, -eps)
            return 0.5 * (a[:n] + a[n:]) if antithetic else a

        def mean_se(a):
            m = jnp.mean(a, axis=0)
            se = jnp.std(a, axis=0, ddof=1) / jnp.sqrt(a.shape[0])
            return m, se

        value, value_se = mean_se(pairs(vals))
        zo = fo = zo_se = fo_se = None
        if method in ("zeroth", "blend"):
            base = 0.0
            lin_grad = jnp.zeros_like(flat)
            if control_variate in ("baseline", "linear"):
                if control_variate == "linear":
                    f0, lin_grad = jax.value_and_grad(f)(flat)
                    base = f0 + (sig_flat * eps) @ lin_grad
                else:
                    base = f(flat)
            r = (vals - base)[:, None] * eps / sig_flat
            zo, zo_se = mean_se(pairs(r))
            zo = zo + lin_grad
        if need_grad:
            fo, fo_se = mean_se(pairs(grads))
        if method == "zeroth":
            g, g_se = zo, zo_se
        elif method == "first":
            g, g_se = fo, fo_se
        else:
            vz, vf = zo_se ** 2, fo_se ** 2
            tiny = jnp.finfo(flat.dtype).tiny
            w = jnp.where(vz + vf > tiny, vz / jnp.maximum(vz + vf, tiny), 0.5)  # on first
            g = w * fo + (1 - w) * zo
            g_se = jnp.sqrt(w ** 2 * vf + (1 - w) ** 2 * vz)
        un = lambda a: None if a is None else unravel(a)
        return SmoothedGradient(value=value, grad=unravel(g), value_stderr=value_se,
                                grad_stderr=unravel(g_se), zeroth_grad=un(zo),
                                first_grad=un(fo), method=method)

    return estimate
