"""The joints' part of the step: every joint group's rows, and their feedback.

:func:`rows` evaluates each :class:`~jaxode.sim.joints.common.JointGroup`'s
getInfo2 (vmapped over its joints) with the per-joint parameters resolved
(negative ERP/CFM = the world's, as ODE copies the world's at creation) and
returns one row table per group plus the wrenches joints apply directly;
:func:`feedback` turns the solved lambdas back into dJointFeedback
(f1, t1, f2, t2 per joint).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode.sim import joints
from jaxode.sim import math as jm
from jaxode.sim.joints import passive
from jaxode.sim.constraint import Rows
from jaxode.sim.records import Bodies
from jaxode.types import Model, Params


class JointRowTables(NamedTuple):
    """tables: one :class:`~jaxode.sim.constraint.Rows` per joint group (joint-major);
    wrench (nbody, 6) [N | N m] applied directly to the bodies; layout: per
    group (rows per joint, number of joints)."""

    tables: list
    wrench: jax.Array
    layout: tuple


def _world_or(value: jax.Array, world: jax.Array) -> jax.Array:
    return jnp.where(value < 0, world, value)


def _with_passive_row(g, bp, p: Params, fps, dtype, explicit: bool, jr):
    """``jr`` (a group's rows, joint-major (J, m)) with each joint's passive row
    appended (jaxode.sim.joints.passive: implicit damper + armature, m + 1 rows),
    and the springs' wrenches (w1, w2) (J, 6) on body 1 and body 2."""
    ids = g.ids

    def first_axis(x):
        return x[ids, 0].astype(dtype)

    zero = jnp.zeros(ids.shape, dtype)
    damping = zero if explicit or p.joint_damping is None else first_axis(p.joint_damping)
    armature = zero if p.joint_armature is None else first_axis(p.joint_armature)
    stiffness = zero if p.joint_stiffness is None else first_axis(p.joint_stiffness)
    springref = zero if p.joint_springref is None else first_axis(p.joint_springref)
    pr = jax.vmap(lambda gg, bb, a, d, k, q0: passive.row(g.type, gg, bb, a, d, k, q0, fps))(
        g, bp, armature, damping, stiffness, springref)
    inf = jnp.full(ids.shape + (1,), jnp.inf, dtype)
    jr = jr._replace(
        j1=jnp.concatenate([jr.j1, pr.j1[:, None].astype(jr.j1.dtype)], 1),
        j2=jnp.concatenate([jr.j2, pr.j2[:, None].astype(jr.j2.dtype)], 1),
        c=jnp.concatenate([jr.c, pr.c[:, None].astype(jr.c.dtype)], 1),
        cfm=jnp.concatenate([jr.cfm, pr.cfm[:, None].astype(jr.cfm.dtype)], 1),
        lo=jnp.concatenate([jr.lo, -inf.astype(jr.lo.dtype)], 1),
        hi=jnp.concatenate([jr.hi, inf.astype(jr.hi.dtype)], 1),
        active=jnp.concatenate([jr.active, pr.active[:, None]], 1))
    return jr, pr.w1.astype(dtype), pr.w2.astype(dtype)


def rows(model: Model, p: Params, b: Bodies) -> JointRowTables:
    """Rows of all joints (module docstring). Gazebo's joint friction (``joint_friction``
    > 0) replaces the axis's motor by a zero-velocity one with fmax = friction;
    joint damping adds :func:`passive.explicit_damping` to the joint wrench where the
    model is built explicit (Gazebo's form), else it is the passive row's; with
    ``Model.joint_passive`` each hinge and slider has one more row (implicit
    damper and armature) and its spring's wrench (:mod:`jaxode.sim.joints.passive`)."""
    dtype = b.pos.dtype
    nb = b.pos.shape[0] - 1
    tables, layout = [], []
    extra = jnp.zeros((nb + 1, 6), dtype)
    for g in model.joint_groups:
        vel, fmax = p.joint_vel[g.ids], p.joint_fmax[g.ids]
        if p.joint_friction is not None:
            fr = p.joint_friction[g.ids]
            vel = jnp.where(fr > 0, 0.0, vel)
            fmax = jnp.where(fr > 0, fr, fmax)
        ax = joints.AxisParams(
            lo_stop=p.joint_lo_stop[g.ids], hi_stop=p.joint_hi_stop[g.ids],
            vel=vel, fmax=fmax,
            fudge_factor=p.joint_fudge_factor[g.ids], bounce=p.joint_bounce[g.ids],
            cfm=_world_or(p.joint_cfm[g.ids], p.cfm),
            stop_erp=_world_or(p.joint_stop_erp[g.ids], p.erp),
            stop_cfm=_world_or(p.joint_stop_cfm[g.ids], p.cfm))
        jp = joints.JointParams(ax, _world_or(p.joint_suspension_erp[g.ids], p.erp),
                                _world_or(p.joint_suspension_cfm[g.ids], p.cfm))
        jp = jax.tree.map(lambda x: x.astype(dtype), jp)
        bp = joints.BodyPair(b.pos[g.body1], b.quat[g.body1], b.vel[g.body1], b.angvel[g.body1],
                             b.pos[g.body2], b.quat[g.body2], b.vel[g.body2], b.angvel[g.body2])
        jr = jax.vmap(lambda gg, bb, a: joints.joint_rows(g.type, gg, bb, a, p.erp, p.cfm, b.fps))(
            g, bp, jp)
        explicit = model.joint_damping_explicit
        if explicit and p.joint_damping is not None and g.type in passive.PASSIVE:
            w1, w2 = jax.vmap(lambda gg, bb, d: passive.explicit_damping(g.type, gg, bb, d))(
                g, bp, p.joint_damping[g.ids, 0].astype(dtype))
            extra = extra.at[g.body1].add(w1.astype(dtype)).at[g.body2].add(w2.astype(dtype))
        if model.joint_passive and g.type in passive.PASSIVE:
            jr, w1, w2 = _with_passive_row(g, bp, p, b.fps, dtype, explicit, jr)
            extra = extra.at[g.body1].add(w1).at[g.body2].add(w2)
        nj, m = jr.c.shape
        layout.append((m, nj))
        extra = extra.at[g.body1].add(jr.extra1).at[g.body2].add(jr.extra2)
        tables.append(Rows(
            body1=jnp.repeat(g.body1, m), body2=jnp.repeat(g.body2, m),
            j1=jr.j1.reshape(nj * m, 6).astype(dtype), j2=jr.j2.reshape(nj * m, 6).astype(dtype),
            c=jr.c.reshape(-1).astype(dtype), cfm=jr.cfm.reshape(-1).astype(dtype),
            lo=jr.lo.reshape(-1).astype(dtype), hi=jr.hi.reshape(-1).astype(dtype),
            findex=jnp.full((nj * m,), -1, jnp.int32), active=jr.active.reshape(-1)))
    return JointRowTables(tables, extra[:-1], tuple(layout))


def feedback(model: Model, head: Rows, layout: tuple, lam: jax.Array,
             previous: jax.Array) -> jax.Array:
    """dJointFeedback (njoint, 4, 3): f1, t1, f2, t2 [N, N m] each joint applied to
    its bodies, from the joint rows at the start of ``head`` and their lambdas."""
    fb_all = previous
    start = 0
    for g, (m, nj) in zip(model.joint_groups, layout):
        n = m * nj
        lam_g = lam[start:start + n].reshape(nj, m)
        j1 = head.j1[start:start + n].reshape(nj, m, 6)
        j2 = head.j2[start:start + n].reshape(nj, m, 6)
        f1 = jm.einsum("jm,jmk->jk", lam_g, j1)
        f2 = jm.einsum("jm,jmk->jk", lam_g, j2)
        fb = jnp.stack([f1[:, :3], f1[:, 3:], f2[:, :3], f2[:, 3:]], axis=1)
        fb_all = fb_all.at[g.ids].set(fb.astype(previous.dtype))
        start += n
    return fb_all
