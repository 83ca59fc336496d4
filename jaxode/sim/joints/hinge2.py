"""Hinge-2 joint (ODE's joints/hinge2.cpp): two hinges in series, e.g. a
steered, driven wheel (axis 1 = steering axis on body 1, the chassis; axis 2
= wheel axle on body 2), with a soft suspension along axis 1.

Rows: 3 ball rows whose first row lies along axis 1 and uses the suspension
ERP/CFM (ODE's setBall2; a spring-damper of stiffness kp and damping kd has
ERP = h kp / (h kp + kd), CFM = 1 / (h kp + kd)); 1 row keeping the angle
between the axes at its build-time value (sin s0, cos s0); a limit/motor row
for axis 1 and a motor row for axis 2 (ODE never limits axis 2): 6 rows.
ODE requires two bodies.

Geometry (from build time): anchor1, anchor2, axis1 (body 1 frame), axis2
(body 2 frame); extra: v1, v2 (body 1 frame) and w1, w2 (body 2 frame), the
reference directions of the angle measurements (ODE's makeV1andV2,
makeW1andW2), s0, c0 (sin and cos of the build-time angle between the axes).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.joints.basic import rotational_limit_in_use
from jaxode.sim.joints.common import (HINGE2, BodyPair, anchor_gap, JointParams, JointType, assemble, axis,
                                  limot_row, register)


def world_axes(g, q1, q2):
    """Axis 1 (from body 1) and axis 2 (from body 2) in the world frame."""
    return jm.mm(jm.quat_to_mat(q1), g.axis1), jm.mm(jm.quat_to_mat(q2), g.axis2)


def hinge2_angle1(g, q1, q2):
    """ODE's measureAngle1 (dJointGetHinge2Angle1) [rad]: axis 2 seen from body 1,
    measured in the plane normal to axis 1 against v1, v2."""
    d = jm.mm(jm.quat_to_mat(q1).T, jm.mm(jm.quat_to_mat(q2), g.axis2))
    return -jnp.arctan2(jm.mm(g.extra["v2"], d), jm.mm(g.extra["v1"], d))


def hinge2_angle2(g, q1, q2):
    """ODE's measureAngle2 (dJointGetHinge2Angle2) [rad]: axis 1 seen from body 2,
    measured in the plane normal to axis 2 against w1, w2."""
    d = jm.mm(jm.quat_to_mat(q2).T, jm.mm(jm.quat_to_mat(q1), g.axis1))
    return -jnp.arctan2(jm.mm(g.extra["w2"], d), jm.mm(g.extra["w1"], d))


def hinge2(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointHinge2::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    k = fps * erp_w
    ax1, ax2 = world_axes(g, b.quat1, b.quat2)
    cr = jnp.cross(ax1, ax2)
    s = jnp.sqrt(jm.sum_terms(cr * cr))
    c = jm.mm(ax1, ax2)
    q = cr / jnp.maximum(s, jnp.finfo(dtype).tiny)
    # ball rows along (ax1, p, q) (setBall2); the ax1 row is the suspension
    pa, pb = jm.plane_space(ax1)
    dirs = jnp.stack([ax1, pa, pb])
    a1 = jm.mm(jm.quat_to_mat(b.quat1), g.anchor1)
    a2 = jm.mm(jm.quat_to_mat(b.quat2), g.anchor2)
    jb1 = jnp.concatenate([dirs, jnp.cross(a1, dirs)], axis=1)
    jb2 = jnp.concatenate([-dirs, jnp.cross(dirs, a2)], axis=1)
    gap = jm.mm(dirs, anchor_gap(b.pos1, a1, b.pos2, a2))
    cb = jnp.stack([fps * jp.suspension_erp, k, k]) * gap
    # the row keeping the angle between the axes
    z3 = jnp.zeros(3, dtype)
    jh = jnp.concatenate([z3, q])[None]
    ch = (k * (g.extra["c0"] * s - g.extra["s0"] * c))[None]
    dw = b.angvel1 - b.angvel2
    a_1, a_2 = axis(jp.axes, 0), axis(jp.axes, 1)
    lim1 = limot_row(ax1, True, hinge2_angle1(g, b.quat1, b.quat2), jm.mm(ax1, dw), a_1, z3,
                     g.has2, fps, rotational_limit_in_use(a_1))
    lim2 = limot_row(ax2, True, jnp.zeros((), dtype), jm.mm(ax2, dw), a_2, z3, g.has2, fps,
                     jnp.zeros((), bool))
    cfm = jnp.stack([jp.suspension_cfm, cfm_w, cfm_w, cfm_w]).astype(dtype)
    return assemble(jnp.concatenate([jb1, jh]), jnp.concatenate([jb2, -jh]),
                    jnp.concatenate([cb, ch]), cfm_w, [lim1, lim2], cfm=cfm)


def _unit(v):
    return v / np.linalg.norm(v)


def _geometry(geo, frame1, frame2):
    """Body-frame axes, angle references and the build-time angle between the axes
    (dJointSetHinge2Anchor / dJointSetHinge2Axes)."""
    _, r1, _ = frame1
    r2 = frame2[1]
    axis1, axis2 = jm.mm(r1.T, geo["axis1"]), jm.mm(r2.T, geo["axis2"])
    ax1, ax2 = jm.mm(r1, axis1), jm.mm(r2, axis2)
    ax2p = _unit(ax2 - np.dot(ax1, ax2) * ax1)
    ax1p = _unit(ax1 - np.dot(ax2, ax1) * ax2)
    return dict(axis1=axis1, axis2=axis2,
                v1=jm.mm(r1.T, ax2p), v2=jm.mm(r1.T, np.cross(ax1, ax2p)),
                w1=jm.mm(r2.T, ax1p), w2=jm.mm(r2.T, np.cross(ax2, ax1p)),
                s0=np.linalg.norm(np.cross(ax1, ax2)), c0=np.dot(ax1, ax2))


register(HINGE2, JointType("hinge2", 6, 2, hinge2, _geometry, nlimot=2))
