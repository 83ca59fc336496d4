"""Gradient tools: ``rollout(checkpoint_every=k)`` and ``jaxode.tools.smooth``.

Truths: the checkpointed rollout is the same steps in the same order, so its
forward values must equal the plain rollout's bit for bit (and its reverse-mode
gradient the plain one's). The smoothed gradients are checked on functions
whose Gaussian smoothing is analytic: for f(x) = relu(w.x - c) and eps ~
N(0, I), E f(x + sigma eps) = u Phi(u/s) + s phi(u/s) with u = w.x - c,
s = sigma |w|, so its gradient is Phi(u/s) w; for the step 1[w.x > c] it is
phi(u/s)/s w (where every pathwise gradient is 0: the first-order estimator's
bias at a jump); for a quadratic it is the quadratic's own gradient.

Default tier: one tiny scene (a free tumbling box, 7 steps) and closed-form
functions; the contact scene (a ball bouncing on a plane) and the
checkpointed gradient are extended. The walker and system-identification targets of
docs/GRADIENTS.md are ``extended`` tests.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.tools import smooth

# ------------------------------------------------------------ checkpointed rollout


@pytest.fixture(scope="module")
def ball():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5, bounce=0.5))
    i = b.add_body(pos=(0.0, 0.0, 0.12), vel=(0.3, 0.0, -1.0),
                   mass=jaxode.mass.sphere(radius=0.1, total=1.0))
    b.add_sphere(radius=0.1, body=i, surface=jaxode.Surface(mu=0.5, bounce=0.5))
    model = b.build()
    return model, jaxode.init(model)


@pytest.fixture(scope="module")
def tumbler():
    """A free asymmetric box tumbling under gravity (no geoms: the cheapest compile)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(pos=(0.0, 0.0, 1.0), vel=(0.3, 0.0, 1.0), angvel=(0.5, 3.0, 0.2),
               mass=jaxode.mass.box(size=(0.1, 0.2, 0.4), total=1.0))
    model = b.build()
    return model, jaxode.init(model)


N_STEPS, EVERY = 7, 3  # two checkpointed blocks of 3 and a remainder of 1


def _assert_bitwise(model, s0):
    plain = jaxode.rollout(model, s0, N_STEPS, 0.01)
    ckpt = jaxode.rollout(model, s0, N_STEPS, 0.01, checkpoint_every=EVERY)
    assert plain[1].pos.shape == ckpt[1].pos.shape == (N_STEPS, model.nbody, 3)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(ckpt)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    return plain


def test_checkpointed_rollout_is_bitwise_the_plain_one(tumbler):
    plain = _assert_bitwise(*tumbler)
    # and it is a rollout: the centre of mass follows the free-fall parabola
    t = 0.01 * np.arange(1, N_STEPS + 1)
    np.testing.assert_allclose(np.asarray(plain[1].pos[:, 0, 2]), 1.0 + t - 0.5 * 9.81 * t * (t + 0.01),
                               atol=1e-5)


@pytest.mark.extended  # the contact scene's two compiles: ~1 min on a loaded 2-core machine
def test_checkpointed_rollout_is_bitwise_the_plain_one_with_contacts(ball):
    plain = _assert_bitwise(*ball)
    assert int(jnp.max(plain[1].ncontact)) > 0  # the ball lands (and bounces) within it


@pytest.mark.extended  # two reverse-mode compiles: ~1-2 min on a loaded 2-core machine
def test_checkpointed_rollout_gradient(ball):
    model, s0 = ball

    def loss(v, every):
        s = s0.replace(vel=s0.vel.at[0].set(v))
        final, traj = jaxode.rollout(model, s, N_STEPS, 0.01, checkpoint_every=every)
        return final.pos[0, 0] + jnp.sum(traj.pos[:, 0, 2])

    v = jnp.array([0.3, 0.0, -1.0])
    g_plain = jax.grad(loss)(v, None)
    g_ckpt = jax.grad(loss)(v, EVERY)
    np.testing.assert_allclose(np.asarray(g_ckpt), np.asarray(g_plain), rtol=1e-6, atol=1e-7)
    # d x_final / d vx0 = the flight time with friction rolling it: positive, < N dt
    assert 0.0 < float(g_plain[0]) <= N_STEPS * 0.01 + 1e-6


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_checkpoint_every_bad_value(ball, bad):
    model, s0 = ball
    with pytest.raises(ValueError, match="checkpoint_every must be None"):
        jaxode.rollout(model, s0, 4, 0.01, checkpoint_every=bad)


# ------------------------------------------------------------ smoothing: analytic truths

D = 5
W = jnp.array([1.0, -2.0, 0.5, 0.0, 1.5])
C = 0.3
SIGMA = 0.4
X = jnp.array([0.2, 0.1, -0.3, 0.7, 0.25])  # u = w.x - c = -0.225 (within the smoothing width)
S = SIGMA * float(jnp.linalg.norm(W))
U = float(W @ X) - C
PHI = 0.5 * (1 + math.erf(U / S / math.sqrt(2)))
DENS = math.exp(-0.5 * (U / S) ** 2) / math.sqrt(2 * math.pi)
RELU_GRAD = PHI * np.asarray(W)
STEP_GRAD = DENS / S * np.asarray(W)
RELU_VALUE = U * PHI + S * DENS
relu = lambda x: jax.nn.relu(W @ x - C)
step = lambda x: (W @ x > C).astype(x.dtype)


def _check_unbiased(est, truth, k=4.5):
    """|est - truth| within k standard errors, per input; the error bar is not vacuous."""
    g, se = np.asarray(est.grad), np.asarray(est.grad_stderr)
    assert np.all(np.isfinite(se)) and np.all(se < 0.1 * np.abs(truth).max() + 1e-3), se
    assert np.all(np.abs(g - truth) <= k * se + 1e-6), (g, truth, se)


@pytest.mark.parametrize("method,antithetic,cv", [
    ("zeroth", True, None), ("zeroth", False, None), ("zeroth", False, "baseline"),
    ("zeroth", True, "linear"), ("first", True, None), ("first", False, None),
    ("blend", True, None)])
def test_smoothed_relu_gradient_is_unbiased(method, antithetic, cv):
    est = jax.jit(smooth(relu, SIGMA, 4096, method=method, antithetic=antithetic,
                         control_variate=cv))(X, jax.random.key(1))
    _check_unbiased(est, RELU_GRAD)
    assert abs(float(est.value) - RELU_VALUE) <= 4.5 * float(est.value_stderr) + 1e-6


def test_step_function_zeroth_unbiased_first_order_blind():
    """At a jump every pathwise gradient is 0 (the first-order estimator's bias);
    the zeroth-order estimator still sees the smoothed slope."""
    est = jax.jit(smooth(step, SIGMA, 8192, method="blend"))(X, jax.random.key(2))
    np.testing.assert_array_equal(np.asarray(est.first_grad), 0.0)
    zo = est.replace(grad=est.zeroth_grad,
                     grad_stderr=jax.jit(smooth(step, SIGMA, 8192, method="zeroth"))(
                         X, jax.random.key(2)).grad_stderr)
    _check_unbiased(zo, STEP_GRAD)


def test_quadratic_smoothed_gradient_is_its_gradient_and_linear_cv_is_exact():
    """For f = x'Ax/2 + b'x the smoothed gradient is A x + b; the linear control
    variate leaves only the even (curvature) part, which antithetic pairs cancel:
    the estimate is exact up to rounding."""
    a = jnp.array([[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 3.0]])
    b = jnp.array([0.1, -1.0, 0.4])
    f = lambda x: 0.5 * x @ a @ x + b @ x
    x = jnp.array([0.3, -0.2, 1.0])
    truth = np.asarray(a @ x + b)
    plain = jax.jit(smooth(f, 0.5, 2048, method="zeroth", antithetic=False))(x, jax.random.key(3))
    _check_unbiased(plain, truth)
    exact = jax.jit(smooth(f, 0.5, 64, method="zeroth", control_variate="linear"))(
        x, jax.random.key(3))
    np.testing.assert_allclose(np.asarray(exact.grad), truth, atol=1e-5)
    assert np.all(np.asarray(exact.grad_stderr) < 1e-5)


def test_pytree_inputs_sigma_per_leaf_and_common_random_numbers():
    """x a dict with per-leaf sigma: the relu truth with the noise of each input
    scaled by its own sigma (s = |w * sigma|), and the same key gives the same
    perturbations (value differences are common-random-number differences)."""
    sig = {"a": jnp.array([0.4, 0.2]), "b": 0.3}
    w = jnp.array([1.0, -2.0, 0.5])
    f = lambda t: jax.nn.relu(w[:2] @ t["a"] + w[2] * t["b"] - 0.1)
    x = {"a": jnp.array([0.1, 0.05]), "b": jnp.asarray(0.2)}
    u = float(w[:2] @ x["a"] + w[2] * x["b"]) - 0.1
    s = float(jnp.linalg.norm(w * jnp.array([0.4, 0.2, 0.3])))
    phi = 0.5 * (1 + math.erf(u / s / math.sqrt(2)))
    est = jax.jit(smooth(f, sig, 4096, method="first"))(x, jax.random.key(4))
    g = np.concatenate([np.asarray(est.grad["a"]), np.asarray(est.grad["b"])[None]])
    se = np.concatenate([np.asarray(est.grad_stderr["a"]), np.asarray(est.grad_stderr["b"])[None]])
    assert np.all(np.abs(g - phi * np.asarray(w)) <= 4.5 * se + 1e-6), (g, phi * np.asarray(w))
    again = jax.jit(smooth(f, sig, 4096, method="first"))(x, jax.random.key(4))
    assert float(again.value) == float(est.value)


@pytest.mark.parametrize("kw,match", [
    (dict(method="second"), "method must be one of"),
    (dict(control_variate="mean"), "control_variate must be one of"),
    (dict(num_samples=7), "num_samples must be even"),
    (dict(num_samples=1, antithetic=False), "num_samples must be an integer >= 2"),
    (dict(sigma=-0.1), "sigma must be finite and > 0"),
    (dict(chunk=0), "chunk must be None or an integer >= 1"),
])
def test_smooth_bad_arguments(kw, match):
    args = dict(sigma=0.1, num_samples=8)
    args.update(kw)
    sigma, n = args.pop("sigma"), args.pop("num_samples")
    with pytest.raises(ValueError, match=match):  # at construction, before any tracing
        smooth(relu, sigma, n, **args)


def test_chunked_evaluation_is_the_same_estimate():
    a = jax.jit(smooth(relu, SIGMA, 64, method="blend"))(X, jax.random.key(5))
    b = jax.jit(smooth(relu, SIGMA, 64, method="blend", chunk=16))(X, jax.random.key(5))
    np.testing.assert_allclose(np.asarray(b.grad), np.asarray(a.grad), rtol=1e-5, atol=1e-6)
