"""Joint queries and joint-space force helpers (dJointGet*, dJointAdd*).

``j`` is the global joint index returned by the builder's ``add_*`` method.
All functions take one world's state; vmap them for a batch.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode import joints as jt
from jaxode import math as jm
from jaxode.types import Model, State


def _joint(model: Model, j: int, jtype=None):
    if not isinstance(j, int) or not 0 <= j < model.njoint:
        raise ValueError(f"joint must be an existing joint index in [0, {model.njoint - 1}] (got {j!r})")
    t, k = model.joint_index[j]
    if jtype is not None and t not in jtype:
        names = ", ".join(jt.JOINT_TYPE_NAMES[x] for x in jtype)
        raise ValueError(f"joint {j} is a {jt.JOINT_TYPE_NAMES[t]} joint, not {names}")
    g = next(g for g in model.joint_groups if g.type == t)
    return jax.tree.map(lambda x: x[k], g)


def _body(state: State, b, has2):
    n = state.pos.shape[0]
    idx = jnp.minimum(b, n - 1)
    real = b < n
    pos = jnp.where(real, state.pos[idx], 0.0)
    quat = jnp.where(real, state.quat[idx], jnp.array([1.0, 0.0, 0.0, 0.0], state.quat.dtype))
    vel = jnp.where(real, state.vel[idx], 0.0)
    angvel = jnp.where(real, state.angvel[idx], 0.0)
    return pos, quat, vel, angvel


def hinge_angle(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHingeAngle [rad]: zero at the build-time pose, ODE's sign convention."""
    g = _joint(model, j, (jt.HINGE,))
    q1 = state.quat[g.body1]
    _, q2, _, _ = _body(state, g.body2, g.has2)
    return jt.hinge_angle_from_quat(jt.relative_quat(g.qrel, q1, q2), g.axis1)


def hinge_angle_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHingeAngleRate [rad/s]: axis . (w1 - w2)."""
    g = _joint(model, j, (jt.HINGE,))
    ax = jm.quat_to_mat(state.quat[g.body1]) @ g.axis1
    _, _, _, w2 = _body(state, g.body2, g.has2)
    return jnp.dot(ax, state.angvel[g.body1] - w2)


def slider_position(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetSliderPosition [m]: zero at the build-time pose."""
    g = _joint(model, j, (jt.SLIDER,))
    ax = jm.quat_to_mat(state.quat[g.body1]) @ g.axis1
    p2, q2, _, _ = _body(state, g.body2, g.has2)
    return jnp.dot(ax, state.pos[g.body1] - jm.quat_to_mat(q2) @ g.offset - p2)


def slider_position_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetSliderPositionRate [m/s]: axis . (v1 - v2)."""
    g = _joint(model, j, (jt.SLIDER,))
    ax = jm.quat_to_mat(state.quat[g.body1]) @ g.axis1
    _, _, v2, _ = _body(state, g.body2, g.has2)
    return jnp.dot(ax, state.vel[g.body1] - v2)


def joint_feedback(state: State, j: int):
    """dJointFeedback of the last step: (f1, t1, f2, t2), force [N] and torque [N m]
    the joint applied to body 1 and body 2 (world frame, about the body origins)."""
    fb = state.joint_feedback[j]
    return fb[0], fb[1], fb[2], fb[3]


def add_hinge_torque(model: Model, state: State, j: int, torque) -> State:
    """dJointAddHingeTorque: +torque about the axis on body 1, -torque on body 2 [N m]."""
    g = _joint(model, j, (jt.HINGE,))
    t = (jm.quat_to_mat(state.quat[g.body1]) @ g.axis1) * torque
    tq = state.torque.at[g.body1].add(t)
    n = state.pos.shape[0]
    tq = tq.at[jnp.minimum(g.body2, n - 1)].add(jnp.where(g.body2 < n, -t, 0.0))
    return state.replace(torque=tq)


def add_slider_force(model: Model, state: State, j: int, force) -> State:
    """dJointAddSliderForce: +force along the axis on body 1, -force on body 2 [N],
    applied at the midpoint between the bodies (ODE's torque decoupling)."""
    g = _joint(model, j, (jt.SLIDER,))
    f = (jm.quat_to_mat(state.quat[g.body1]) @ g.axis1) * force
    n = state.pos.shape[0]
    b2 = jnp.minimum(g.body2, n - 1)
    real = g.body2 < n
    ltd = jnp.where(real, jnp.cross(0.5 * (state.pos[b2] - state.pos[g.body1]), f), 0.0)
    fr = state.force.at[g.body1].add(f).at[b2].add(jnp.where(real, -f, 0.0))
    tq = state.torque.at[g.body1].add(ltd).at[b2].add(jnp.where(real, ltd, 0.0))
    return state.replace(force=fr, torque=tq)
