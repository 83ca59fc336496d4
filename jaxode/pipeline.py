"""One QuickStep of one world: the pure function every API entry point wraps.

kinematics -> broadphase/narrowphase -> contact rows -> PGS -> integration.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode import (constraint, integrate, joints, kinematics, narrowphase, solver,
                    solver_colored)
from jaxode.constraint import Rows
from jaxode import math as jm
from jaxode.types import Model, Params, State

# Model.solver -> the row solver (both take the same arguments; see each module).
SOLVERS = {"pgs": solver.solve_pgs, "colored": solver_colored.solve_colored}


def _pad(x: jax.Array) -> jax.Array:
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)], axis=0)


def _world_or(value: jax.Array, world: jax.Array) -> jax.Array:
    return jnp.where(value < 0, world, value)


def joint_rows(model: Model, p: Params, pos_p, quat_p, vel_p, angvel_p, h):
    """Rows of all joints (Rows table in joint order) and the joints' extra body wrenches.

    Returns (rows, extra (nbody+1, 6) [force | torque] to add to the accumulators,
    per-group row counts for feedback).
    """
    dtype = pos_p.dtype
    tables, counts = [], []
    extra = jnp.zeros((pos_p.shape[0], 6), dtype)
    for g in model.joint_groups:
        ax = joints.AxisParams(
            lo_stop=p.joint_lo_stop[g.ids], hi_stop=p.joint_hi_stop[g.ids],
            vel=p.joint_vel[g.ids], fmax=p.joint_fmax[g.ids],
            fudge_factor=p.joint_fudge_factor[g.ids], bounce=p.joint_bounce[g.ids],
            cfm=_world_or(p.joint_cfm[g.ids], p.cfm),
            stop_erp=_world_or(p.joint_stop_erp[g.ids], p.erp),
            stop_cfm=_world_or(p.joint_stop_cfm[g.ids], p.cfm))
        jp = joints.JointParams(ax, _world_or(p.joint_suspension_erp[g.ids], p.erp),
                                _world_or(p.joint_suspension_cfm[g.ids], p.cfm))
        jp = jax.tree.map(lambda x: x.astype(dtype), jp)
        bp = joints.BodyPair(pos_p[g.body1], quat_p[g.body1], vel_p[g.body1], angvel_p[g.body1],
                             pos_p[g.body2], quat_p[g.body2], vel_p[g.body2], angvel_p[g.body2])
        jr = jax.vmap(lambda gg, b, a: joints.joint_rows(g.type, gg, b, a, p.erp, p.cfm, h))(
            g, bp, jp)
        nj, m = jr.c.shape
        counts.append((g, m))
        extra = extra.at[g.body1].add(jr.extra1).at[g.body2].add(jr.extra2)
        tables.append(Rows(
            body1=jnp.repeat(g.body1, m), body2=jnp.repeat(g.body2, m),
            j1=jr.j1.reshape(nj * m, 6).astype(dtype), j2=jr.j2.reshape(nj * m, 6).astype(dtype),
            c=jr.c.reshape(-1).astype(dtype), cfm=jr.cfm.reshape(-1).astype(dtype),
            lo=jr.lo.reshape(-1).astype(dtype), hi=jr.hi.reshape(-1).astype(dtype),
            findex=jnp.full((nj * m,), -1, jnp.int32), active=jr.active.reshape(-1)))
    return tables, extra, counts


def _cat_rows(tables):
    return Rows(*[jnp.concatenate([getattr(t, f) for t in tables], axis=0) for f in Rows._fields])


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

    # Constraint rows (joints first, then contacts) and solve.
    pos_p, vel_p, angvel_p = _pad(state.pos), _pad(state.vel), _pad(state.angvel)
    ident = jnp.zeros((1, 4), dtype).at[0, 0].set(1.0)
    quat_p = jnp.concatenate([state.quat, ident], axis=0)
    head, tail, cone_rows = constraint.contact_rows(model, p, contacts, pos_p, vel_p, angvel_p, grot, h)
    jtables, jextra, jcounts = joint_rows(model, p, pos_p, quat_p, vel_p, angvel_p, h)
    njrows = sum(t.c.shape[0] for t in jtables)
    if jtables:
        head = _cat_rows(jtables + [head])
        tail = tail._replace(findex=jnp.where(tail.findex >= 0, tail.findex + njrows, -1))
        facc = facc + jextra[:-1, :3]
        tacc = tacc + jextra[:-1, 3:]
    inv_mass_p = _pad(inv_mass)
    inv_inertia_p = _pad(inv_inertia_w)
    acc_lin = inv_mass[:, None] * facc
    acc_ang = jnp.einsum("nij,nj->ni", inv_inertia_w, tacc)
    rhs_body = _pad(-jnp.concatenate([state.vel / h + acc_lin, state.angvel / h + acc_ang], axis=-1))
    if model.solver not in SOLVERS:
        raise ValueError(f"model.solver must be one of {tuple(SOLVERS)} (got {model.solver!r})")
    solve = SOLVERS[model.solver]
    # QuickStep's shuffles of the joint rows at iterations 8, 16, ... (jaxode.reorder)
    reorder = {"reorder": njrows, "step": jnp.round(state.time / h).astype(jnp.int32)
               } if model.solver == "pgs" else {}
    lam_n, lam_f, fc = solve(head, tail, inv_mass_p, inv_inertia_p, rhs_body, h,
                             jnp.asarray(p.sor, dtype), model.iterations,
                             block=5 if model.angular_friction else 2,
                             cone=model.friction_cone, cone_rows=cone_rows, **reorder)
    fc = fc[:-1]

    # Velocity update then dxStepBody.
    vel = state.vel + h * (acc_lin + fc[:, :3])
    angvel = state.angvel + h * (acc_ang + fc[:, 3:])
    pos, quat, vel, angvel = jax.vmap(
        integrate.step_body, in_axes=(0, 0, 0, 0, 0, None, None, None, None, None, None))(
        state.pos, state.quat, vel, angvel, model.body_finite_rotation, h,
        p.max_angular_speed, p.linear_damping, p.angular_damping,
        p.linear_damping_threshold, p.angular_damping_threshold)
    lam_j, lam_n = lam_n[:njrows], lam_n[njrows:]
    nblk = 5 if model.angular_friction else 2
    force = jnp.concatenate([lam_n[:, None], lam_f.reshape(-1, nblk)[:, :2]], axis=1)
    contacts = contacts.replace(force=force)
    feedback = state.joint_feedback
    start = 0
    for (g, m), t in zip(jcounts, jtables):
        lam = lam_j[start:start + t.c.shape[0]].reshape(-1, m)
        j1 = t.j1.reshape(-1, m, 6)
        j2 = t.j2.reshape(-1, m, 6)
        f1 = jnp.einsum("jm,jmk->jk", lam, j1)
        f2 = jnp.einsum("jm,jmk->jk", lam, j2)
        fb = jnp.stack([f1[:, :3], f1[:, 3:], f2[:, :3], f2[:, 3:]], axis=1)
        feedback = feedback.at[g.ids].set(fb.astype(dtype))
        start += t.c.shape[0]
    return state.replace(
        pos=pos.astype(dtype), quat=quat.astype(dtype), vel=vel.astype(dtype),
        angvel=angvel.astype(dtype),
        force=jnp.zeros_like(state.force), torque=jnp.zeros_like(state.torque),
        time=(state.time + h).astype(state.time.dtype), contacts=contacts, ncontact=nfound.astype(jnp.int32),
        overflow_pairs=(state.overflow_pairs + ovf_pairs).astype(jnp.int32),
        overflow_contacts=(state.overflow_contacts + ovf_contacts).astype(jnp.int32),
        joint_feedback=feedback)


def guarded_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """``physics_step`` that leaves a world untouched (and flagged) once it turns non-finite."""
    new = physics_step(model, state, params, dt)
    finite = (jnp.all(jnp.isfinite(new.pos)) & jnp.all(jnp.isfinite(new.quat))
              & jnp.all(jnp.isfinite(new.vel)) & jnp.all(jnp.isfinite(new.angvel)))
    ok = finite & ~state.nonfinite
    out = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, state)
    return out.replace(nonfinite=state.nonfinite | ~finite)
