"""All constraint rows of a step in one :class:`~jaxode.sim.records.RowSet`, and their results back.

:func:`build` puts the joints' rows (:mod:`jaxode.sim.joints.stage`) before the
contacts' normal rows in the head, shifts the friction rows' index past the
joint rows, and fixes the friction block width (2 rows per contact, 5 with
rolling and spinning friction): the one place that knows the row layout.
:func:`record` maps the solved lambdas back: each contact's (normal, t1, t2)
force and each joint's dJointFeedback.
"""
from __future__ import annotations

import jax
import numpy as np
import jax.numpy as jnp

from jaxode.sim import autodisable, constraint
from jaxode.sim.constraint import Rows
from jaxode.sim.joints import stage as joint_stage
from jaxode.sim.records import Bodies, Collision, RowSet
from jaxode.types import Model, Params, State


def block_width(model: Model) -> int:
    """Tail rows per contact: t1, t2 friction, plus rolling t1, t2 and spinning."""
    return 5 if model.angular_friction else 2


def joint_group_rows(model: Model, layout: tuple) -> list:
    """Per global joint, its rows' positions in the joint groups' row blocks
    (``layout`` (m, nj) per group, in ``model.joint_groups``' order): a list of
    ranges, joint by joint in the global order."""
    start, offset = {}, 0
    for g, (m, nj) in zip(model.joint_groups, layout):
        start[g.type] = (offset, m)
        offset += m * nj
    out = []
    for t, k in model.joint_index:
        off, m = start[t]
        out.append(range(off + k * m, off + (k + 1) * m))
    return out


def joint_row_order(model: Model, layout: tuple):
    """The joint rows' positions (the groups' order, ``layout`` (m, nj) per group)
    listed joint by joint in ``Model.joint_order`` (ODE's island walk), a numpy
    permutation; None when that is the groups' order already (or no order is set)."""
    if not model.joint_order:
        return None
    rows = joint_group_rows(model, layout)
    offset = sum(m * nj for m, nj in layout)
    perm = [i for j in model.joint_order for i in rows[j]]
    perm = np.asarray(perm, dtype=np.int32)
    if perm.shape[0] != offset:
        raise ValueError(f"Model.joint_order lists {len(model.joint_order)} joints whose rows "
                         f"number {perm.shape[0]}; the joint groups have {offset} rows")
    return None if np.array_equal(perm, np.arange(offset)) else perm


def joint_head_rows(model: Model, layout: tuple) -> tuple:
    """Per global joint, its rows' positions in the RowSet's head (static):
    :func:`joint_group_rows` through :func:`joint_row_order`'s permutation."""
    perm = joint_row_order(model, layout)
    offset = sum(m * nj for m, nj in layout)
    where = np.arange(offset) if perm is None else np.argsort(perm)
    return tuple(tuple(int(where[i]) for i in r) for r in joint_group_rows(model, layout))


def _cat(tables) -> Rows:
    return Rows(*[jnp.concatenate([getattr(t, f) for t in tables], axis=0) for f in Rows._fields])


def build(model: Model, params: Params, b: Bodies, c: Collision,
          enabled: jax.Array = None) -> RowSet:
    """Joint rows, then contact rows (ODE's contact joint getInfo2), for one world.
    ``enabled`` (nbody,) bool (auto-disable): rows touching no enabled body
    (islands of disabled bodies, which ODE does not step) are made inactive."""
    src = constraint.source(model, params, c.contacts, b.pos, b.vel, b.angvel, c.grot, b.h)
    surface = constraint.surface_params(params)
    head, tail, cone_rows = constraint.rows_of(src, surface, model.angular_friction)
    jt = joint_stage.rows(model, params, b)
    njrows = sum(t.c.shape[0] for t in jt.tables)
    if jt.tables:
        joint_head = _cat(jt.tables)
        perm = joint_row_order(model, jt.layout)
        if perm is not None:   # ODE's island order (Model.joint_order)
            joint_head = Rows(*(jnp.take(a, perm, axis=0) for a in joint_head))
        head = _cat([joint_head, head])
        tail = tail._replace(findex=jnp.where(tail.findex >= 0, tail.findex + njrows, -1))
    if enabled is not None:
        head = head._replace(active=head.active & autodisable.row_mask(
            enabled, head.body1, head.body2))
        tail = tail._replace(active=tail.active & autodisable.row_mask(
            enabled, tail.body1, tail.body2))
    return RowSet(head=head, tail=tail, cone_rows=cone_rows, joint_wrench=jt.wrench,
                  contacts=src, surface=surface, enabled=enabled,
                  block=block_width(model), njoint_rows=njrows, joint_layout=jt.layout)


def record(model: Model, state: State, rows: RowSet, c: Collision, lam_head: jax.Array,
           lam_tail: jax.Array, enabled: jax.Array = None) -> dict:
    """State fields the solve fills: the contacts with their forces (normal, fdir1,
    fdir2) [N], and ``joint_feedback``. With ``enabled`` (auto-disable), joints
    of disabled islands keep their previous feedback (ODE does not write it)."""
    dtype = state.pos.dtype
    lam_j, lam_n = lam_head[:rows.njoint_rows], lam_head[rows.njoint_rows:]
    force = jnp.concatenate([lam_n[:, None], lam_tail.reshape(-1, rows.block)[:, :2]], axis=1)
    joint_head = rows.head
    perm = joint_row_order(model, rows.joint_layout)
    if perm is not None:   # back to the joint groups' order
        inv = np.argsort(perm)
        lam_j = jnp.take(lam_j, inv, axis=0)
        joint_head = Rows(*(jnp.take(a[:rows.njoint_rows], inv, axis=0) for a in rows.head))
    feedback = joint_stage.feedback(model, joint_head, rows.joint_layout, lam_j,
                                    state.joint_feedback)
    if enabled is not None and state.joint_feedback is not None and model.njoint:
        live = jnp.zeros((model.njoint,), bool)
        for g in model.joint_groups:
            live = live.at[g.ids].set(autodisable.row_mask(enabled, g.body1, g.body2))
        feedback = jnp.where(live[:, None, None], feedback, state.joint_feedback)
    return dict(contacts=c.contacts.replace(force=force.astype(dtype)), joint_feedback=feedback)
