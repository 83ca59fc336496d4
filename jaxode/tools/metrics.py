"""Scalar summaries of one rollout, for parameter sweeps and tests.

Every metric is a plain function ``metric(model, traj, final) -> scalar`` of
ONE world: ``model`` carries that world's ``params``, ``traj`` is the
:class:`~jaxode.Trajectory` of ``rollout`` (leading axis: steps, each entry
the state *after* a step) and ``final`` the final :class:`~jaxode.State`.
They are jax-traceable, so :func:`jaxode.tools.sweep` evaluates them inside its
compiled, batched call; on a rollout's output they work as they are::

    final, traj = jaxode.rollout(model, state, 500, 0.01)
    depth = jaxode.metrics.max_penetration(model, traj, final)

Options are keyword-only with defaults; bind them with ``functools.partial``
(``partial(metrics.stop_distance, body=2, speed=0.01)``). Write your own
metric the same way: any function of (model, traj, final) returning a scalar
(or a small fixed-shape array) per world.

The trajectory does not hold the initial state, so quantities "since the
start" are measured from the state after the first step, except where noted.
Units SI; positions and velocities in the world frame.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import joints as jt
from jaxode.sim import math as jm
from jaxode.types import Model, State, Trajectory

__all__ = ["max_penetration", "resting_penetration", "stop_distance", "bounce_height",
           "energy", "energy_drift", "joint_error", "nonfinite", "overflow", "unit_of"]


def _depths(traj: Trajectory) -> jax.Array:
    if traj.max_depth is None:
        raise ValueError("traj.max_depth is missing: use the Trajectory that jaxode.rollout returns")
    return traj.max_depth


def max_penetration(model: Model, traj: Trajectory, final: State) -> jax.Array:
    """Deepest contact penetration over the whole run [m] (0 if nothing touched).

    The depth is each step's collision depth (the overlap ODE's dContactGeom
    reports before the constraint solve), maximised over all contacts and steps.
    """
    del model, final
    return jnp.max(_depths(traj))


def resting_penetration(model: Model, traj: Trajectory, final: State, *,
                        last: int | None = None) -> jax.Array:
    """Resting penetration depth [m]: mean over the last ``last`` steps of each
    step's deepest contact (default: the last 10% of the run, at least one step).

    For a body at rest on a plane under ODE's ERP/CFM this tends to the
    constraint's fixed point ``depth = cfm * m * g * h / erp`` (a spring of
    stiffness ``erp / (h cfm)`` carrying the weight).
    """
    del model, final
    d = _depths(traj)
    n = d.shape[0]
    k = max(1, n // 10) if last is None else int(last)
    if not 1 <= k <= n:
        raise ValueError(f"resting_penetration: last must be in [1, {n}] steps (got {last!r})")
    return jnp.mean(d[n - k:])


def stop_distance(model: Model, traj: Trajectory, final: State, *, body: int = 0,
                  speed: float = 1e-3) -> jax.Array:
    """Path length [m] of ``body``'s centre of mass until it comes to rest for good.

    "At rest" means the linear speed stays below ``speed`` [m/s] for the rest
    of the run; the distance counts every step up to the last one at which the
    speed was ``>= speed`` (the whole run if it never stops, 0 if it never
    moves). The first step's displacement is included: under ODE's
    integrator the position advances by ``h * v`` with the step's new
    velocity, so it is ``h |v_1|`` (exact without damping).
    """
    del final
    _check_body(model, body, "stop_distance")
    x = traj.pos[:, body]
    v = traj.vel[:, body]
    n = x.shape[0]
    h = traj.time[1] - traj.time[0] if n > 1 else traj.time[0]
    first = h * jnp.linalg.norm(v[0])
    seg = jnp.concatenate([first[None], jnp.linalg.norm(x[1:] - x[:-1], axis=-1)])
    moving = jnp.linalg.norm(v, axis=-1) >= speed
    # index of the last moving step (-1 if never moving)
    last = jnp.max(jnp.where(moving, jnp.arange(n), -1))
    return jnp.sum(jnp.where(jnp.arange(n) <= last, seg, 0.0))


def _up(model: Model, dtype) -> jax.Array:
    g = model.params.gravity.astype(dtype)
    gn = jnp.linalg.norm(g)
    return jnp.where(gn > 0, -g / jnp.where(gn > 0, gn, 1.0), jnp.array([0.0, 0.0, 1.0], dtype))


def bounce_height(model: Model, traj: Trajectory, final: State, *, body: int = 0,
                  relative: bool = False) -> jax.Array:
    """Apex height [m] of ``body``'s centre after its first impact.

    Height is measured along "up" (minus the gravity direction; +z without
    gravity) from the world origin. The first impact is the first step at
    which the upward velocity turns from negative to ``>= 0`` (a falling body
    stopped or reflected). ``relative=True`` gives the rise above the height
    at that step instead. NaN when the body never lands during the run.
    """
    del final
    _check_body(model, body, "bounce_height")
    up = _up(model, traj.pos.dtype)
    z = traj.pos[:, body] @ up
    vz = traj.vel[:, body] @ up
    n = z.shape[0]
    idx = jnp.arange(n)
    hit = jnp.concatenate([jnp.zeros((1,), bool), (vz[:-1] < 0) & (vz[1:] >= 0)])
    first = jnp.min(jnp.where(hit, idx, n))
    apex = jnp.max(jnp.where(idx >= first, z, -jnp.inf))
    base = z[jnp.minimum(first, n - 1)]
    out = apex - base if relative else apex
    return jnp.where(first < n, out, jnp.nan)


def energy(model: Model, traj: Trajectory, *, body=None) -> jax.Array:
    """Total mechanical energy [J] after each step, shape (n_steps,).

    Sum over all bodies (or the index / list of indices ``body``) of
    ``m |v|^2 / 2 + w . (R I R^T) w / 2 - m g . x``: linear and rotational
    kinetic energy (I the body-frame inertia about the centre of mass, R the
    body's rotation) and the potential of uniform gravity for bodies in
    gravity mode, zero at the world origin. Joint springs and contacts store
    no energy in this account.
    """
    p = model.params
    dtype = traj.pos.dtype
    m = p.body_mass.astype(dtype)
    inertia = p.body_inertia.astype(dtype)
    rot = jax.vmap(jax.vmap(jm.quat_to_mat))(traj.quat)  # (n, nbody, 3, 3)
    w_body = jnp.einsum("nbji,nbj->nbi", rot, traj.angvel)  # R^T w
    kin_rot = 0.5 * jnp.einsum("nbi,bij,nbj->nb", w_body, inertia, w_body)
    kin_lin = 0.5 * m * jnp.sum(traj.vel ** 2, axis=-1)
    pot = -(m * model.body_gravity.astype(dtype)) * (traj.pos @ p.gravity.astype(dtype))
    e = kin_lin + kin_rot + pot
    if body is not None:
        bodies = [body] if isinstance(body, int) else list(body)
        for b in bodies:
            _check_body(model, b, "energy")
        e = e[:, jnp.asarray(bodies, jnp.int32)]
    return jnp.sum(e, axis=-1)


def energy_drift(model: Model, traj: Trajectory, final: State, *, body=None,
                 relative: bool = True) -> jax.Array:
    """Change of total mechanical energy (see :func:`energy`; all bodies or
    ``body``) from the first to the last recorded step: ``(E_last - E_first) /
    |E_first|`` (dimensionless), or in joules with ``relative=False``. Measure
    it without contacts, joints or damping for a conservation check; the
    potential's zero is the world origin, so place the scene where ``E_first``
    is not near zero. (ODE's semi-implicit Euler itself changes the energy of
    a body falling freely by ``-m |g|^2 h^2 / 2`` per step.)
    """
    del final
    e = energy(model, traj, body=body)
    de = e[-1] - e[0]
    if not relative:
        return de
    scale = jnp.abs(e[0])
    return de / jnp.where(scale > 0, scale, 1.0)


_ANCHORED = ("ball", "hinge", "universal", "hinge2")


def joint_error(model: Model, traj: Trajectory, final: State, *,
                types: tuple = _ANCHORED) -> jax.Array:
    """Largest anchor separation [m] over the run and over the joints of the
    given ``types`` (names; default: ball, hinge, universal, hinge-2, whose rows
    make the two anchor points coincide). 0 when the model has no such joint.

    Each joint's anchor is stored once per body frame (``anchor1`` on body 1,
    ``anchor2`` on body 2, or a world point when body 2 is the world); the
    error is ``|x1 + R1 anchor1 - (x2 + R2 anchor2)|``.
    """
    del final
    names = {v: k for k, v in jt.JOINT_TYPE_NAMES.items()}
    unknown = [t for t in types if t not in names]
    if unknown:
        raise ValueError(f"joint_error: unknown joint type(s) {unknown}; "
                         f"valid: {sorted(names)}")
    wanted = {names[t] for t in types}
    dtype = traj.pos.dtype
    n = traj.pos.shape[0]
    pos = jnp.concatenate([traj.pos, jnp.zeros((n, 1, 3), dtype)], axis=1)
    ident = jnp.zeros((n, 1, 4), dtype).at[..., 0].set(1.0)
    rot = jax.vmap(jax.vmap(jm.quat_to_mat))(jnp.concatenate([traj.quat, ident], axis=1))
    worst = jnp.zeros((), dtype)
    for g in model.joint_groups:
        if g.type not in wanted:
            continue
        a1 = pos[:, g.body1] + jnp.einsum("njik,jk->nji", rot[:, g.body1], g.anchor1.astype(dtype))
        # body 2 = the world (index nbody): zero position and identity rotation,
        # so its world-point anchor passes through unchanged.
        a2 = pos[:, g.body2] + jnp.einsum("njik,jk->nji", rot[:, g.body2], g.anchor2.astype(dtype))
        worst = jnp.maximum(worst, jnp.max(jnp.linalg.norm(a1 - a2, axis=-1)))
    return worst


def nonfinite(model: Model, traj: Trajectory, final: State) -> jax.Array:
    """True for a world whose state turned non-finite (NaN/inf) during the run
    (it was frozen at its last finite state); sum the column to count them."""
    del model, traj
    return final.nonfinite


def overflow(model: Model, traj: Trajectory, final: State) -> jax.Array:
    """Candidate pairs plus contacts dropped for lack of capacity over the run
    (an int; 0 means the run's collision capacity was always sufficient)."""
    del model, traj
    return final.overflow_pairs + final.overflow_contacts


def _check_body(model: Model, body, name: str) -> None:
    if not isinstance(body, int) or not 0 <= body < model.nbody:
        raise ValueError(f"{name}: body must be a body index in [0, {model.nbody - 1}] "
                         f"(got {body!r})")


# Units of the metrics above (SI), for tables and plot labels; "" = dimensionless.
_UNITS = {max_penetration: "m", resting_penetration: "m", stop_distance: "m",
          bounce_height: "m", energy: "J", joint_error: "m", nonfinite: "", overflow: ""}


def unit_of(fn) -> str | None:
    """The unit of metric ``fn`` ("m", "J", "" for dimensionless), or None when
    unknown. A function of your own declares it with an attribute
    (``my_metric.unit = "m/s"``); ``functools.partial`` of a metric keeps its unit
    (``energy_drift`` is dimensionless, or J with ``relative=False``)."""
    unit = getattr(fn, "unit", None)
    if isinstance(unit, str):
        return unit
    kw = {}
    while hasattr(fn, "func") and hasattr(fn, "keywords"):  # functools.partial
        kw = {**fn.keywords, **kw}
        fn = fn.func
        unit = getattr(fn, "unit", None)
        if isinstance(unit, str):
            return unit
    if fn is energy_drift:
        return "" if kw.get("relative", True) else "J"
    try:
        return _UNITS.get(fn)
    except TypeError:  # an unhashable callable
        return None
