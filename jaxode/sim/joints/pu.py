"""Prismatic-universal joint (ODE's joints/pu.cpp): body 1 slides along axis 3
(the prismatic axis, fixed in body 1) relative to a universal joint whose
centre is the anchor on body 2.

Rows: 1 row keeping the universal axes perpendicular (axis 1 on body 1, axis
2 on body 2, or the world), 2 rows keeping the anchor point of body 2 on the
line through body 1's anchor point along axis 3, then limit/motor rows for
axis 1, axis 2 (rotational; angles as the universal joint's) and axis 3
(linear, ODE's addTwoPointLimot: the force acts at the two anchor points): 6.

Geometry (from build time): anchor1 (body 1 frame; the point of body 1 at the
anchor), anchor2 (body 2 frame, world point for the world), axis1 (body 1),
axis2 (body 2; world for the world); extra: axis_p (axis 3, body 1 frame),
qrel1, qrel2 (the universal cross's initial relative rotations).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.joints.basic import rotational_limit_in_use
from jaxode.sim.joints.common import (PU, BodyPair, anchor_gap, JointParams, JointType, assemble, axis,
                                  limot_row, register)
from jaxode.sim.joints.universal import initial_relative_rotations, universal_angles, world_axes


def pu_position(g, pos1, q1, pos2, q2):
    """dJointGetPUPosition [m]: axis 3 . (anchor on body 1 - anchor on body 2);
    zero at build time, grows as body 1 moves along +axis 3."""
    r1 = jm.quat_to_mat(q1)
    gap = -anchor_gap(pos1, jm.mm(r1, g.anchor1), pos2, jm.mm(jm.quat_to_mat(q2), g.anchor2))
    return jm.mm(jm.mm(r1, g.extra["axis_p"]), gap)


def pu_position_rate(g, pos1, q1, vel1, w1, pos2, q2, vel2, w2):
    """dJointGetPUPositionRate [m/s], ODE's formula: axis 3 . (v1 + r x w1 - v2 -
    a2 x w2), r = body 1's centre relative to body 2's anchor point, a2 = body
    2's anchor relative to its centre (world frame)."""
    r1 = jm.quat_to_mat(q1)
    a2 = jm.mm(jm.quat_to_mat(q2), g.anchor2)
    r = pos1 - (a2 + pos2)
    rel = jnp.cross(r, w1) + vel1 - (jnp.cross(a2, w2) + vel2)
    return jm.mm(jm.mm(r1, g.extra["axis_p"]), rel)


def pu(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointPU::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    k = fps * erp_w
    z3 = jnp.zeros(3, dtype)
    ax1, ax2 = world_axes(g, b.quat1, b.quat2)
    perp = jnp.cross(ax1, ax2)
    perp = perp / jnp.sqrt(jm.sum_terms(perp * perp) + jnp.finfo(dtype).tiny)
    ju1 = jnp.concatenate([z3, perp])
    cu = -k * jm.mm(ax1, ax2)
    # the two rows normal to the prismatic axis, at the anchor points
    r1 = jm.quat_to_mat(b.quat1)
    axp = jm.mm(r1, g.extra["axis_p"])
    pt1 = jm.mm(r1, g.anchor1)                      # anchor of body 1, relative to its centre
    pt2 = jm.mm(jm.quat_to_mat(b.quat2), g.anchor2)  # anchor of body 2, relative to its centre
    sep = anchor_gap(b.pos1, pt1, b.pos2, pt2)
    p, q = jm.plane_space(axp)
    dirs = jnp.stack([p, q])
    j1 = jnp.concatenate([ju1[None], jnp.concatenate([dirs, jnp.cross(pt1, dirs)], axis=1)])
    j2 = jnp.concatenate([-ju1[None], jnp.concatenate([-dirs, jnp.cross(dirs, pt2)], axis=1)])
    c = jnp.concatenate([cu[None], k * jm.mm(dirs, sep)])
    # limits and motors: axis 1, axis 2 (rotational), axis 3 (two-point linear)
    angle1, angle2 = universal_angles(g, b.quat1, b.quat2)
    dw = b.angvel1 - b.angvel2
    a1, a2, ap = axis(jp.axes, 0), axis(jp.axes, 1), axis(jp.axes, 2)
    lim1 = limot_row(ax1, True, angle1, jm.mm(ax1, dw), a1, z3, g.has2, fps,
                     rotational_limit_in_use(a1))
    lim2 = limot_row(ax2, True, angle2, jm.mm(ax2, dw), a2, z3, g.has2, fps,
                     rotational_limit_in_use(a2))
    limp = two_point_limot_row(axp, pt1, pt2, pu_position(g, b.pos1, b.quat1, b.pos2, b.quat2),
                               b, ap, g.has2, fps)
    return assemble(j1, j2, c, cfm_w, [lim1, lim2, limp])


def two_point_limot_row(ax, pt1, pt2, position, b: BodyPair, a, has2, fps):
    """ODE's dxJointLimitMotor::addTwoPointLimot: a linear limit/motor row along
    world ``ax`` whose force acts at ``pt1`` on body 1 and ``pt2`` on body 2
    (world-frame offsets from the body centres): J1 = [ax, pt1 x ax], J2 =
    [-ax, pt2 x -ax]. Returns limot_row's tuple.

    limot_row's linear row takes one angular vector (``ltd``) for both bodies,
    as [ax, ltd] and [-ax, ltd]; here the bodies' angular parts differ, so body
    1's half (J1, its extra wrench) comes from a call with ltd = pt1 x ax and
    body 2's half from a call with ltd = pt2 x -ax. Limit state, rhs, CFM and
    bounds do not depend on ltd."""
    t1, t2 = jnp.cross(pt1, ax), jnp.cross(pt2, -ax)
    rate = (jm.mm(ax, b.vel1) + jm.mm(t1, b.angvel1)
            + has2 * (jm.mm(-ax, b.vel2) + jm.mm(t2, b.angvel2)))
    use = ((a.lo_stop > -jnp.inf) | (a.hi_stop < jnp.inf)) & (a.lo_stop <= a.hi_stop)
    one = jnp.ones((), ax.dtype)
    r1 = limot_row(ax, False, position, rate, a, t1, one, fps, use)
    r2 = limot_row(ax, False, position, rate, a, t2, has2, fps, use)
    return (r1[0], r2[1]) + tuple(r1[2:8]) + (r2[8],)


def _geometry(geo, frame1, frame2):
    """Body-frame axes and the universal cross's initial relative rotations
    (dJointSetPUAnchor / Axis1 / Axis2 / Axis3)."""
    _, r1, q1 = frame1
    r2, q2 = (np.eye(3), np.array([1.0, 0.0, 0.0, 0.0])) if frame2 is None else frame2[1:]
    ax1, ax2 = geo["axis1"], geo["axis2"]
    qrel1, qrel2 = initial_relative_rotations(ax1, ax2, q1, q2)
    return dict(axis1=jm.mm(r1.T, ax1), axis2=jm.mm(r2.T, ax2), axis_p=jm.mm(r1.T, geo["axis3"]),
                qrel1=qrel1, qrel2=qrel2)


register(PU, JointType("pu", 6, 3, pu, _geometry, nlimot=3))
