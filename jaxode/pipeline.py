"""One QuickStep of one world: the pure function every API entry point wraps.

kinematics -> broadphase/narrowphase -> contact rows -> PGS -> integration.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode import constraint, integrate, kinematics, narrowphase, solver
from jaxode import math as jm
from jaxode.types import Model, Params, State


def _pad(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)], axis=0)


def physics_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """Advance one world by ``dt`` seconds (no validity bookkeeping)."""
    dtype = state.pos.dtype
    h = jnp.asarray(dt, dtype)
    p = params
    rot = jax.vmap(jm.quat_to_mat)(state.quat)
    inertia_w = integrate.world_inertia(rot, p.body_inertia.astype(dtype))
    inv_inertia_w = integrate.world_inertia(rot, jnp.linalg.inv(p.body_inertia.astype(dtype)))
    mass = p.body_mass.astype(dtype)
    inv_mass = 1.0 / mass

    # Accumulated forces + gravity; torques + implicit gyroscopic term.
    facc = state.force + (mass * model.body_gravity)[:, None] * p.gravity[None, :]
    tacc = state.torque + jax.vmap(integrate.gyroscopic_torque, in_axes=(0, 0, None))(
        inertia_w, state.angvel, h)

    # Collision.
    gpos, grot = kinematics.geom_poses(model, state.pos, state.quat)
    lo, hi = kinematics.geom_aabbs(model, gpos, grot)
    contacts, nfound, ovf_pairs, ovf_contacts = narrowphase.collide(model, gpos, grot, lo, hi)

    # Constraint rows and solve.
    pos_p, vel_p, angvel_p = _pad(state.pos), _pad(state.vel), _pad(state.angvel)
    head, tail = constraint.contact_rows(model, p, contacts, pos_p, vel_p, angvel_p, grot, h)
    inv_mass_p = _pad(inv_mass)
    inv_inertia_p = _pad(inv_inertia_w)
    acc_lin = inv_mass[:, None] * facc
    acc_ang = jnp.einsum("nij,nj->ni", inv_inertia_w, tacc)
    rhs_body = _pad(-jnp.concatenate([state.vel / h + acc_lin, state.angvel / h + acc_ang], axis=-1))
    lam_n, lam_f, fc = solver.solve_pgs(head, tail, inv_mass_p, inv_inertia_p, rhs_body, h,
                                        jnp.asarray(p.sor, dtype), model.iterations)
    fc = fc[:-1]

    # Velocity update then dxStepBody.
    vel = state.vel + h * (acc_lin + fc[:, :3])
    angvel = state.angvel + h * (acc_ang + fc[:, 3:])
    pos, quat, vel, angvel = jax.vmap(
        integrate.step_body, in_axes=(0, 0, 0, 0, 0, None, None, None, None, None, None))(
        state.pos, state.quat, vel, angvel, model.body_finite_rotation, h,
        p.max_angular_speed, p.linear_damping, p.angular_damping,
        p.linear_damping_threshold, p.angular_damping_threshold)
    force = jnp.concatenate([lam_n[:, None], lam_f.reshape(-1, 2)], axis=1)
    contacts = contacts.replace(force=force)
    return state.replace(
        pos=pos.astype(dtype), quat=quat.astype(dtype), vel=vel.astype(dtype),
        angvel=angvel.astype(dtype),
        force=jnp.zeros_like(state.force), torque=jnp.zeros_like(state.torque),
        time=(state.time + h).astype(state.time.dtype), contacts=contacts, ncontact=nfound.astype(jnp.int32),
        overflow_pairs=(state.overflow_pairs + ovf_pairs).astype(jnp.int32),
        overflow_contacts=(state.overflow_contacts + ovf_contacts).astype(jnp.int32))


def guarded_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """``physics_step`` that leaves a world untouched (and flagged) once it turns non-finite."""
    new = physics_step(model, state, params, dt)
    finite = (jnp.all(jnp.isfinite(new.pos)) & jnp.all(jnp.isfinite(new.quat))
              & jnp.all(jnp.isfinite(new.vel)) & jnp.all(jnp.isfinite(new.angvel)))
    ok = finite & ~state.nonfinite
    out = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, state)
    return out.replace(nonfinite=state.nonfinite | ~finite)
