"""Stage 6 of QuickStep and the body-level pieces it and the force preamble use
(ODE 0.16 arithmetic). All vectors in the world frame.

- ``world_inertia``: ``R I R^T``, a body-frame tensor in the world frame.
- ``gyroscopic_torque``: the implicit gyroscopic torque of ODE 0.16
  (Lacoursiere 2006) for one body: ``L = I w``, ``I~ = I - h [L]x``,
  ``tau0 = (I I~^-1 - 1) L / h`` (zero when I~ is singular, as ODE skips it);
  jaxode.sim.dynamics adds it, with gravity ``m g``, to the accumulators.
- ``step_body``: ODE's dxStepBody for one body after its velocity update:
  cap |w| at max_angular_speed; ``x += h v``; infinitesimal rotation
  ``q += h/2 (0, w) q`` or, in finite-rotation mode,
  ``q <- (cos(|w| h/2), sinc(|w| h/2) h/2 w) q``; normalise; then damping:
  ``v *= 1 - linear_damping`` when ``|v| > linear_damping_threshold`` (same
  for w).
- ``advance``: the stage: ``v += h (acc + fc)`` (the unconstrained
  accelerations plus the constraint ones), ``step_body`` per body, force
  accumulators zeroed, time advanced.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import math as jm


def world_inertia(rot: jax.Array, inertia_body: jax.Array) -> jax.Array:
    """``R I R^T`` for (N, 3, 3) rotations and body-frame tensors."""
    return jax.vmap(lambda r, i: jm.mm(jm.mm(r, i), r.T))(rot, inertia_body)


def _cross_minus(a: jax.Array) -> jax.Array:
    """ODE's dSetCrossMatrixMinus: the matrix of ``v -> -(a x v)``."""
    z = jnp.zeros_like(a[0])
    return jnp.array([[z, a[2], -a[1]], [-a[2], z, a[0]], [a[1], -a[0], z]])


def _cofactors(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The transposed cofactor matrix (adjugate) of a 3x3 matrix and its
    determinant, the triple product of the rows (ODE's dInvertMatrix3), not an
    LU factorisation: XLA's CPU LU of many small matrices cost more than the
    rest of the body pass."""
    cof = jnp.stack([jnp.cross(m[1], m[2]), jnp.cross(m[2], m[0]), jnp.cross(m[0], m[1])], axis=1)
    return cof, jm.sum_terms(m[0] * cof[:, 0], -1)


def _pow2_scale(m: jax.Array) -> jax.Array:
    """A power of two c with c * m of order one (from m's diagonal; 1 for a zero
    diagonal). Cofactors and determinant of c * m are exact powers of c times
    those of m, so inverting c * m and scaling back by c rounds as inverting m
    does, but the determinant (a triple product: 1e-39 for a 1e-13 kg m^2
    inertia, below float32's smallest normal) no longer underflows or overflows."""
    tr = jnp.abs(m[0, 0]) + jnp.abs(m[1, 1]) + jnp.abs(m[2, 2])
    _, e = jnp.frexp(tr)
    return jnp.where(tr > 0, jnp.ldexp(jnp.ones_like(tr), -e), jnp.ones_like(tr))


def _inv3(m: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Inverse of a 3x3 matrix by cofactors and whether it exists (det != 0)."""
    c = _pow2_scale(m)
    cof, det = _cofactors(m * c)
    ok = det != 0
    return cof / jnp.where(ok, det, 1.0) * c, ok


def inverse3(m: jax.Array) -> jax.Array:
    """Inverse of (..., 3, 3) matrices by cofactors of the matrix scaled by a power
    of two (:func:`_pow2_scale`: tiny and huge inertias invert in float32); a
    singular one gives non-finite entries, as a division by its zero determinant."""
    def one(a):
        c = _pow2_scale(a)
        cof, det = _cofactors(a * c)
        return cof / det * c
    f = one
    for _ in range(m.ndim - 2):
        f = jax.vmap(f)
    return f(m)


def gyroscopic_torque(inertia_world: jax.Array, angvel: jax.Array, h: jax.Array) -> jax.Array:
    """Implicit gyroscopic torque of ODE 0.16 for one body [N m]."""
    L = jm.mm(inertia_world, angvel)
    itild = inertia_world + h * _cross_minus(L)
    inv, ok = _inv3(itild)
    # L scaled by 1/h as ODE (dScaleVector3(L, dRecip(h))): a product, never a
    # division by the step (jaxode.sim.records.Bodies: fps)
    tau = jm.mm(jm.mm(inertia_world, inv) - jnp.eye(3, dtype=angvel.dtype), L * (1.0 / h))
    return jnp.where(ok, tau, 0.0)


def step_body(pos, quat, vel, angvel, finite, h, max_angular_speed,
              lin_damp, ang_damp, lin_thr, ang_thr):
    """ODE's dxStepBody for one body after its velocity update."""
    w2 = jm.sq_norm(angvel)
    over = w2 > max_angular_speed * max_angular_speed
    # (both branches stay finite so that gradients never see 0 * inf)
    scale = jnp.where(over, max_angular_speed, 1.0) / jnp.sqrt(jnp.where(over, w2, 1.0))
    # computed once into memory: each of the norms below reads it as three slices
    # (jm.sum_terms), and XLA would recompute the clamp inside every one of them
    # (walker at 1,024 worlds: the two materializations here and in advance
    # took back the 5-8 % that the norms as adds had cost; bench/RESULTS.md, session 34)
    angvel = jm.materialize(jnp.where(over, angvel * scale, angvel))
    pos = pos + h * vel
    # Infinitesimal rotation: q += h * 0.5 * (0, w) * q
    wq = jnp.concatenate([jnp.zeros((1,), quat.dtype), angvel])
    q_inf = quat + h * 0.5 * jm.quat_mul(wq, quat)
    # Finite rotation: q <- (cos(theta), sinc(theta) h/2 w) * q, theta = |w| h / 2
    wlen = jnp.sqrt(jm.sq_norm(angvel) + jnp.finfo(quat.dtype).tiny)
    hh = 0.5 * h
    theta = wlen * hh
    dq = jnp.concatenate([jnp.cos(theta)[None], angvel * (jm.sinc(theta) * hh)])
    q_fin = jm.quat_mul(dq, quat)
    quat = jm.quat_normalize(jnp.where(finite > 0, q_fin, q_inf))
    v2 = jm.sq_norm(vel)
    vel = jnp.where(v2 > lin_thr * lin_thr, vel * (1 - lin_damp), vel)
    w2 = jm.sq_norm(angvel)
    angvel = jnp.where(w2 > ang_thr * ang_thr, angvel * (1 - ang_damp), angvel)
    return pos, quat, vel, angvel


def advance(model, params, state, bodies, fc: jax.Array, enabled: jax.Array = None):
    """The integration stage: ``v += h (acc + fc)`` (fc = M^-1 J^T lambda, the
    constraint accelerations, static world row dropped), then ODE's dxStepBody
    per body (:func:`step_body`). Returns the state with the new pos, quat, vel,
    angvel, the force accumulators zeroed and the time advanced. ``enabled``
    (nbody,) bool (auto-disable): disabled bodies are in no island, so ODE
    neither steps them nor clears their accumulators: all six kept."""
    dtype = state.pos.dtype
    h = bodies.h
    nb = state.pos.shape[0]
    fc = fc[:nb]
    vel = state.vel + h * (bodies.acc[:, :3] + fc[:, :3])
    angvel = state.angvel + h * (bodies.acc[:, 3:] + fc[:, 3:])
    vel, angvel = jm.materialize((vel, angvel))    # read by step_body's norms (there)
    p = params
    pos, quat, vel, angvel = jax.vmap(
        step_body, in_axes=(0, 0, 0, 0, 0, None, None, None, None, None, None))(
        state.pos, state.quat, vel, angvel, model.body_finite_rotation, h,
        p.max_angular_speed, p.linear_damping, p.angular_damping,
        p.linear_damping_threshold, p.angular_damping_threshold)
    out = dict(pos=pos.astype(dtype), quat=quat.astype(dtype), vel=vel.astype(dtype),
               angvel=angvel.astype(dtype), force=jnp.zeros_like(state.force),
               torque=jnp.zeros_like(state.torque))
    if enabled is not None:
        out = {k: jnp.where(enabled[:, None], v, getattr(state, k)) for k, v in out.items()}
    return state.replace(**out, time=(state.time + h).astype(state.time.dtype))
