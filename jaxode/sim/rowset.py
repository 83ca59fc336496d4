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
import jax.numpy as jnp

from jaxode.sim import autodisable, constraint
from jaxode.sim.constraint import Rows
from jaxode.sim.joints import stage as joint_stage
from jaxode.sim.records import Bodies, Collision, RowSet
from jaxode.types import Model, Params, State


def block_width(model: Model) -> int:
    """Tail rows per contact: t1, t2 friction, plus rolling t1, t2 and spinning."""
    return 5 if model.angular_friction else 2


def _cat(tables) -> Rows:
    return Rows(*[jnp.concatenate([getattr(t, f) for t in tables], axis=0) for f in Rows._fields])


def build(model: Model, params: Params, b: Bodies, c: Collision,
          enabled: jax.Array = None) -> RowSet:
    """Joint rows, then contact rows (ODE's contact joint getInfo2), for one world.
    ``enabled`` (nbody,) bool (auto-disable): rows touching no enabled body
    (islands of disabled bodies, which ODE does not step) are made inactive."""
    head, tail, cone_rows = constraint.contact_rows(model, params, c.contacts, b.pos, b.vel,
                                                    b.angvel, c.grot, b.h)
    jt = joint_stage.rows(model, params, b)
    njrows = sum(t.c.shape[0] for t in jt.tables)
    if jt.tables:
        head = _cat(jt.tables + [head])
        tail = tail._replace(findex=jnp.where(tail.findex >= 0, tail.findex + njrows, -1))
    if enabled is not None:
        head = head._replace(active=head.active & autodisable.row_mask(
            enabled, head.body1, head.body2))
        tail = tail._replace(active=tail.active & autodisable.row_mask(
            enabled, tail.body1, tail.body2))
    return RowSet(head=head, tail=tail, cone_rows=cone_rows, joint_wrench=jt.wrench,
                  block=block_width(model), njoint_rows=njrows, joint_layout=jt.layout)


def record(model: Model, state: State, rows: RowSet, c: Collision, lam_head: jax.Array,
           lam_tail: jax.Array, enabled: jax.Array = None) -> dict:
    """State fields the solve fills: the contacts with their forces (normal, fdir1,
    fdir2) [N], and ``joint_feedback``. With ``enabled`` (auto-disable), joints
    of disabled islands keep their previous feedback (ODE does not write it)."""
    dtype = state.pos.dtype
    lam_j, lam_n = lam_head[:rows.njoint_rows], lam_head[rows.njoint_rows:]
    force = jnp.concatenate([lam_n[:, None], lam_tail.reshape(-1, rows.block)[:, :2]], axis=1)
    feedback = joint_stage.feedback(model, rows.head, rows.joint_layout, lam_j,
                                    state.joint_feedback)
    if enabled is not None and state.joint_feedback is not None and model.njoint:
        live = jnp.zeros((model.njoint,), bool)
        for g in model.joint_groups:
            live = live.at[g.ids].set(autodisable.row_mask(enabled, g.body1, g.body2))
        feedback = jnp.where(live[:, None, None], feedback, state.joint_feedback)
    return dict(contacts=c.contacts.replace(force=force.astype(dtype)), joint_feedback=feedback)
