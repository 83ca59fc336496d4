"""Joint queries and joint-space force helpers (dJointGet*, dJointAdd*).

``j`` is the global joint index returned by the builder's ``add_*`` method.
All functions take one world's state; vmap them for a batch.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import joints as jt
from jaxode.sim import math as jm
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


def _sign(g, like) -> jax.Array:
    """-1 for a joint attached world-first (ODE's dJOINT_REVERSE getters), else +1."""
    return jt.reverse_sign(g, jnp.asarray(like).dtype)


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
    """dJointGetHingeAngle [rad]: zero at the build-time pose, ODE's sign convention
    (negated for a joint attached world-first, as ODE's dJOINT_REVERSE)."""
    g = _joint(model, j, (jt.HINGE,))
    q1 = state.quat[g.body1]
    _, q2, _, _ = _body(state, g.body2, g.has2)
    ang = jt.hinge_angle_from_quat(jt.relative_quat(g.qrel, q1, q2), g.axis1)
    return ang * _sign(g, ang)


def hinge_angle_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHingeAngleRate [rad/s]: axis . (w1 - w2) (negated world-first)."""
    g = _joint(model, j, (jt.HINGE,))
    ax = jm.mm(jm.quat_to_mat(state.quat[g.body1]), g.axis1)
    _, _, _, w2 = _body(state, g.body2, g.has2)
    r = jm.mm(ax, state.angvel[g.body1] - w2)
    return r * _sign(g, r)


def slider_position(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetSliderPosition [m]: zero at the build-time pose (negated world-first)."""
    g = _joint(model, j, (jt.SLIDER,))
    ax = jm.mm(jm.quat_to_mat(state.quat[g.body1]), g.axis1)
    p2, q2, _, _ = _body(state, g.body2, g.has2)
    x = jm.mm(ax, state.pos[g.body1] - jm.mm(jm.quat_to_mat(q2), g.offset) - p2)
    return x * _sign(g, x)


def slider_position_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetSliderPositionRate [m/s]: axis . (v1 - v2) (negated world-first)."""
    g = _joint(model, j, (jt.SLIDER,))
    ax = jm.mm(jm.quat_to_mat(state.quat[g.body1]), g.axis1)
    _, _, v2, _ = _body(state, g.body2, g.has2)
    r = jm.mm(ax, state.vel[g.body1] - v2)
    return r * _sign(g, r)


def joint_feedback(state: State, j: int):
    """dJointFeedback of the last step: (f1, t1, f2, t2), force [N] and torque [N m]
    the joint applied to body 1 and body 2 (world frame, about the body origins)."""
    fb = state.joint_feedback[j]
    return fb[0], fb[1], fb[2], fb[3]


def add_hinge_torque(model: Model, state: State, j: int, torque) -> State:
    """dJointAddHingeTorque: +torque about the axis on body 1, -torque on body 2 [N m]
    (a joint attached world-first: -torque on its body, as ODE)."""
    g = _joint(model, j, (jt.HINGE,))
    ax = jm.mm(jm.quat_to_mat(state.quat[g.body1]), g.axis1)
    t = ax * (torque * _sign(g, ax))
    tq = state.torque.at[g.body1].add(t)
    n = state.pos.shape[0]
    tq = tq.at[jnp.minimum(g.body2, n - 1)].add(jnp.where(g.body2 < n, -t, 0.0))
    return state.replace(torque=tq)


def add_slider_force(model: Model, state: State, j: int, force) -> State:
    """dJointAddSliderForce: +force along the axis on body 1, -force on body 2 [N],
    applied at the midpoint between the bodies (ODE's torque decoupling)."""
    g = _joint(model, j, (jt.SLIDER,))
    ax = jm.mm(jm.quat_to_mat(state.quat[g.body1]), g.axis1)
    f = ax * (force * _sign(g, ax))
    n = state.pos.shape[0]
    b2 = jnp.minimum(g.body2, n - 1)
    real = g.body2 < n
    ltd = jnp.where(real, jnp.cross(0.5 * (state.pos[b2] - state.pos[g.body1]), f), 0.0)
    fr = state.force.at[g.body1].add(f).at[b2].add(jnp.where(real, -f, 0.0))
    tq = state.torque.at[g.body1].add(ltd).at[b2].add(jnp.where(real, ltd, 0.0))
    return state.replace(force=fr, torque=tq)


def _pair(model: Model, state: State, j: int, jtype):
    """Joint ``j`` (checked to be of ``jtype``) and its bodies' pose and velocity
    (the world: identity pose, zero velocity)."""
    g = _joint(model, j, (jtype,))
    b1 = (state.pos[g.body1], state.quat[g.body1], state.vel[g.body1], state.angvel[g.body1])
    return g, b1, _body(state, g.body2, g.has2)


def _rate(ax, w1, w2):
    return jm.mm(ax, w1 - w2)


def universal_angle1(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetUniversalAngle1 [rad]: body 1 about axis 1, relative to the cross; zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.UNIVERSAL)
    return jt.universal.universal_angles(g, q1, q2)[0]


def universal_angle2(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetUniversalAngle2 [rad]: body 2 about axis 2, relative to the cross
    (ODE's sign: minus the hinge angle); zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.UNIVERSAL)
    return jt.universal.universal_angle2(g, q1, q2)


def universal_angle1_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetUniversalAngle1Rate [rad/s]: axis1 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.UNIVERSAL)
    return _rate(jt.universal.world_axes(g, q1, q2)[0], w1, w2)


def universal_angle2_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetUniversalAngle2Rate [rad/s]: axis2 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.UNIVERSAL)
    return _rate(jt.universal.world_axes(g, q1, q2)[1], w1, w2)


def hinge2_angle1(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHinge2Angle1 [rad]: the steering angle about axis 1; zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.HINGE2)
    return jt.hinge2.hinge2_angle1(g, q1, q2)


def hinge2_angle2(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHinge2Angle2 [rad]: the wheel angle about axis 2; zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.HINGE2)
    return jt.hinge2.hinge2_angle2(g, q1, q2)


def hinge2_angle1_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHinge2Angle1Rate [rad/s]: axis1 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.HINGE2)
    return _rate(jt.hinge2.world_axes(g, q1, q2)[0], w1, w2)


def hinge2_angle2_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetHinge2Angle2Rate [rad/s]: axis2 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.HINGE2)
    return _rate(jt.hinge2.world_axes(g, q1, q2)[1], w1, w2)


def pu_position(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUPosition [m]: extension of the prismatic axis (axis 3); zero at build."""
    g, (p1, q1, _, _), (p2, q2, _, _) = _pair(model, state, j, jt.PU)
    return jt.pu.pu_position(g, p1, q1, p2, q2)


def pu_position_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUPositionRate [m/s] (ODE's formula, see joints.pu.pu_position_rate)."""
    g, b1, b2 = _pair(model, state, j, jt.PU)
    return jt.pu.pu_position_rate(g, *b1, *b2)


def pu_angle1(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUAngle1 [rad]: as universal_angle1."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.PU)
    return jt.universal.universal_angles(g, q1, q2)[0]


def pu_angle2(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUAngle2 [rad]: as universal_angle2."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.PU)
    return jt.universal.universal_angle2(g, q1, q2)


def pu_angle1_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUAngle1Rate [rad/s]: axis1 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.PU)
    return _rate(jt.universal.world_axes(g, q1, q2)[0], w1, w2)


def pu_angle2_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPUAngle2Rate [rad/s]: axis2 . (w1 - w2)."""
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.PU)
    return _rate(jt.universal.world_axes(g, q1, q2)[1], w1, w2)


def _add_axis_torques(model: Model, state: State, j: int, jtype, world_axes, t1, t2) -> State:
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jtype)
    ax1, ax2 = world_axes(g, q1, q2)
    t = ax1 * t1 + ax2 * t2
    n = state.pos.shape[0]
    tq = state.torque.at[g.body1].add(t)
    tq = tq.at[jnp.minimum(g.body2, n - 1)].add(jnp.where(g.body2 < n, -t, 0.0))
    return state.replace(torque=tq)


def add_universal_torques(model: Model, state: State, j: int, torque1, torque2) -> State:
    """dJointAddUniversalTorques: torque1 about axis 1 plus torque2 about axis 2 [N m]
    on body 1, the opposite on body 2."""
    return _add_axis_torques(model, state, j, jt.UNIVERSAL, jt.universal.world_axes,
                             torque1, torque2)


def add_hinge2_torques(model: Model, state: State, j: int, torque1, torque2) -> State:
    """dJointAddHinge2Torques: torque1 about axis 1 (steering) plus torque2 about
    axis 2 (wheel) [N m] on body 1, the opposite on body 2."""
    return _add_axis_torques(model, state, j, jt.HINGE2, jt.hinge2.world_axes, torque1, torque2)


def _amotor_axis_index(j: int, k) -> int:
    if isinstance(k, bool) or not hasattr(k, "__index__") or k.__index__() not in (0, 1, 2):
        raise ValueError(f"joint {j} (amotor): axis must be 0, 1 or 2 (got {k!r})")
    return k.__index__()


def amotor_angle(model: Model, state: State, j: int, axis: int) -> jax.Array:
    """dJointGetAMotorAngle [rad] of an Euler-mode amotor: Euler angle ``axis`` (0
    about axis 0 on body 1, 1 the tilt about axis 1, 2 about axis 2 on body 2),
    zero at the build-time pose, evaluated at the state's pose. ODE caches the
    angles when it steps (getInfo1), so its getter returns the pose at the start
    of the last step. User mode: ODE returns the angle set with
    dJointSetAMotorAngle, which jaxode does not keep: ValueError."""
    k = _amotor_axis_index(j, axis)
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.AMOTOR)
    euler = g.extra["euler"]
    if not isinstance(euler, jax.core.Tracer) and not float(euler) > 0:
        raise ValueError(f"joint {j} (amotor): amotor_angle needs mode='euler' (a user-mode "
                         "amotor's angles are set by the user in ODE; jaxode does not keep them)")
    return jt.amotor.euler_angles(g, jm.quat_to_mat(q1), jm.quat_to_mat(q2))[k]


def amotor_angle_rate(model: Model, state: State, j: int, axis: int) -> jax.Array:
    """dJointGetAMotorAngleRate [rad/s]: row axis ``axis`` . (w1 - w2), with ODE's
    axes (dJointGetAMotorAxis): user mode the axis itself; Euler mode ax1 x ax2,
    ax1, ax0 x ax1 (the rate of Euler angle ``axis`` when the axes are unit)."""
    k = _amotor_axis_index(j, axis)
    g, (_, q1, _, w1), (_, q2, _, w2) = _pair(model, state, j, jt.AMOTOR)
    return _rate(jt.amotor.row_axes(g, jm.quat_to_mat(q1), jm.quat_to_mat(q2))[k], w1, w2)


def add_amotor_torques(model: Model, state: State, j: int, torque0, torque1=0.0,
                       torque2=0.0) -> State:
    """dJointAddAMotorTorques: torque_i [N m] about axis i (i < num_axes; Euler mode
    ax0, ax1, ax2) on body 1, the opposite on body 2."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.AMOTOR)
    ax = jt.amotor.torque_axes(g, jm.quat_to_mat(q1), jm.quat_to_mat(q2))
    dtype = state.torque.dtype
    tq = jnp.stack([jnp.asarray(t, dtype) for t in (torque0, torque1, torque2)])
    tq = jnp.where(jnp.arange(3) < g.extra["num"], tq, 0.0)
    t = jm.mm(tq, ax)
    n = state.pos.shape[0]
    out = state.torque.at[g.body1].add(t)
    out = out.at[jnp.minimum(g.body2, n - 1)].add(jnp.where(g.body2 < n, -t, 0.0))
    return state.replace(torque=out)


def pr_position(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPRPosition [m]: prismatic axis . (anchor point of body 1 - anchor on
    body 2), world frame; zero at build, grows as body 1 moves along +axis 1."""
    g, (p1, q1, _, _), (p2, q2, _, _) = _pair(model, state, j, jt.PR)
    return jt.pr.pr_position(g, p1, q1, p2, q2)


def pr_position_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPRPositionRate [m/s]: prismatic axis . (v1 - velocity of body 2's
    anchor point)."""
    g, (_, q1, v1, _), (_, q2, v2, w2) = _pair(model, state, j, jt.PR)
    return jt.pr.pr_position_rate(g, q1, v1, q2, v2, w2)


def pr_angle(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPRAngle [rad]: rotoide angle (ODE's hinge sign), zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.PR)
    return jt.pr.pr_angle(g, q1, q2)


def pr_angle_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPRAngleRate [rad/s]: rotoide axis (body 1) . (w1 - w2)."""
    g, (_, q1, _, w1), (_, _, _, w2) = _pair(model, state, j, jt.PR)
    return _rate(jm.mm(jm.quat_to_mat(q1), g.axis1), w1, w2)


def piston_position(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPistonPosition [m]: axis . (anchor point of body 1 - anchor on body
    2), world frame; zero at build."""
    g, (p1, q1, _, _), (p2, q2, _, _) = _pair(model, state, j, jt.PISTON)
    return jt.piston.piston_position(g, p1, q1, p2, q2)


def piston_position_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPistonPositionRate [m/s]: axis (body 1) . (v1 - v2)."""
    g, (_, q1, v1, _), (_, _, v2, _) = _pair(model, state, j, jt.PISTON)
    return _rate(jm.mm(jm.quat_to_mat(q1), g.axis1), v1, v2)


def piston_angle(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPistonAngle [rad]: angle about the axis (ODE's hinge sign), zero at build."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.PISTON)
    return jt.piston.piston_angle(g, q1, q2)


def piston_angle_rate(model: Model, state: State, j: int) -> jax.Array:
    """dJointGetPistonAngleRate [rad/s]: axis (body 1) . (w1 - w2)."""
    g, (_, q1, _, w1), (_, _, _, w2) = _pair(model, state, j, jt.PISTON)
    return _rate(jm.mm(jm.quat_to_mat(q1), g.axis1), w1, w2)


def add_pr_torque(model: Model, state: State, j: int, torque) -> State:
    """dJointAddPRTorque: +torque [N m] about the rotoide axis (body 1's) on body 1,
    the opposite on body 2."""
    g, (_, q1, _, _), _ = _pair(model, state, j, jt.PR)
    t = (jm.mm(jm.quat_to_mat(q1), g.axis1)) * torque
    n = state.pos.shape[0]
    tq = state.torque.at[g.body1].add(t)
    tq = tq.at[jnp.minimum(g.body2, n - 1)].add(jnp.where(g.body2 < n, -t, 0.0))
    return state.replace(torque=tq)


def add_piston_force(model: Model, state: State, j: int, force) -> State:
    """dJointAddPistonForce: F = force [N] along the axis (body 1's) on body 1 and
    -F on body 2. With two bodies ODE also adds the torques a1 x F to body 1 and
    a2 x F to body 2 (a1, a2 each body's anchor relative to its centre, world
    frame; the same sign on both, as ODE 0.16 does)."""
    g, (_, q1, _, _), (_, q2, _, _) = _pair(model, state, j, jt.PISTON)
    r1 = jm.quat_to_mat(q1)
    f = (jm.mm(r1, g.axis1)) * force
    n = state.pos.shape[0]
    b2 = jnp.minimum(g.body2, n - 1)
    real = g.body2 < n
    fr = state.force.at[g.body1].add(f).at[b2].add(jnp.where(real, -f, 0.0))
    t1 = jnp.where(real, jnp.cross(jm.mm(r1, g.anchor1), f), 0.0)
    t2 = jnp.where(real, jnp.cross(jm.mm(jm.quat_to_mat(q2), g.anchor2), f), 0.0)
    tq = state.torque.at[g.body1].add(t1).at[b2].add(t2)
    return state.replace(force=fr, torque=tq)
