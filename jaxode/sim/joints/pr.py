"""Prismatic-rotoide joint (ODE's joints/pr.cpp): body 1 slides along the
prismatic axis (fixed in body 1) relative to a hinge (the rotoide) whose
centre is the anchor on body 2.

Rows (ODE's dxJointPR::getInfo2, in this order):
  0, 1  angular, about axP and q = axR x axP (axR the rotoide axis of body 1,
        axP the prismatic axis, world frame; q is not normalised), keeping
        body 2's rotoide axis on body 1's;
  2, 3  linear, along axR and q, keeping the anchor on body 2 on the line
        through body 1's anchor point along axP; the force acts at body 2's
        anchor point;
  4     prismatic limit/motor (axis 1 of the builder, dParam*): linear along
        axP, ODE's addLimot with the midpoint torque decoupling;
  5     rotoide limit/motor (axis 2, dParam*2): about axR, hinge stop rule
        (stops take effect only when one lies in [-pi, pi]).
Rows 4 and 5 are masked when off (ODE then leaves them out; the order of the
remaining rows is ODE's).

ODE's arithmetic, kept: the prismatic limit/motor row acts along axP on body
1's centre, while the position is measured at body 1's anchor point. The two
agree only when body 1's centre lies on the prismatic line through the
anchor; off it, turning body 1 moves the position without the row seeing it,
and the stop does not hold (seen in libode and here alike: a PR to the world
with +-2 cm stops drifted by metres).

Geometry (build time, as dJointSetPRAnchor / Axis1 / Axis2 store it):
anchor1 (ODE's ``offset``: the anchor in body 1's frame), anchor2 (body 2's
frame; the world point for the world), axis1 = axisR1 (rotoide, body 1
frame), axis2 = axisR2 (rotoide, body 2 frame; world for the world), qrel
(initial relative rotation: conj(q1) q2, conj(q1) for the world), extra
axis_p = axisP1 (prismatic, body 1 frame). Units: m, rad.
"""
from __future__ import annotations

import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.sim.joints.basic import rotational_limit_in_use
from jaxode.sim.joints.common import (PR, BodyPair, anchor_gap, JointParams, JointType, assemble, axis,
                                  hinge_angle_from_quat, limot_row, register, relative_quat)


def pr_position(g, pos1, q1, pos2, q2):
    """dJointGetPRPosition [m]: axP . (anchor point of body 1 - anchor on body 2),
    axP the world prismatic axis; zero at build time (body 2 = world: pos2 = 0,
    q2 = identity, anchor2 a world point)."""
    r1 = jm.quat_to_mat(q1)
    gap = -anchor_gap(pos1, jm.mm(r1, g.anchor1), pos2, jm.mm(jm.quat_to_mat(q2), g.anchor2))
    return jm.mm(jm.mm(r1, g.extra["axis_p"]), gap)


def pr_position_rate(g, q1, vel1, q2, vel2, w2):
    """dJointGetPRPositionRate [m/s]: axP . (v1 - (v2 + w2 x a2)), a2 body 2's
    anchor relative to its centre (world frame); body 1's rotation does not enter."""
    axp = jm.mm(jm.quat_to_mat(q1), g.extra["axis_p"])
    a2 = jm.mm(jm.quat_to_mat(q2), g.anchor2)       # the world: w2 = 0, v2 = 0
    return jm.mm(axp, vel1) - jm.mm(axp, vel2 + jnp.cross(w2, a2))


def pr_angle(g, q1, q2):
    """dJointGetPRAngle [rad]: hinge angle about the rotoide axis, zero at build."""
    return hinge_angle_from_quat(relative_quat(g.qrel, q1, q2), g.axis1)


def pr(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointPR::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    k = fps * erp_w
    z3 = jnp.zeros(3, dtype)
    r1, r2 = jm.quat_to_mat(b.quat1), jm.quat_to_mat(b.quat2)
    axp = jm.mm(r1, g.extra["axis_p"])
    ax1 = jm.mm(r1, g.axis1)                       # rotoide axis on body 1
    ax2 = jm.mm(r2, g.axis2)                       # rotoide axis on body 2 (world axis: r2 = I)
    q = jnp.cross(ax1, axp)
    # body 2's anchor relative to its centre, and relative to body 1's centre (for
    # the world r2 = I, pos2 = 0: anchor2 - pos1, as ODE)
    wanchor2 = jm.mm(r2, g.anchor2)
    dist = (b.pos2 - b.pos1) + wanchor2
    bb = jnp.cross(ax1, ax2)
    dirs_a = jnp.stack([axp, q])
    ja1 = jnp.concatenate([jnp.zeros((2, 3), dtype), dirs_a], axis=1)
    ca = k * jm.mm(dirs_a, bb)
    dirs_l = jnp.stack([ax1, q])
    jl1 = jnp.concatenate([dirs_l, jnp.cross(dist, dirs_l)], axis=1)
    # ODE uses body 2's rotoide axis for the angular term of row 2 (equal to ax1
    # when the joint holds)
    jl2 = jnp.concatenate([-dirs_l, jnp.cross(jnp.stack([ax2, q]), wanchor2)], axis=1)
    err = dist - jm.mm(r1, g.anchor1)
    cl = k * jm.mm(dirs_l, err)
    # limit/motor rows: prismatic (axis 1), rotoide (axis 2)
    ap, ar = axis(jp.axes, 0), axis(jp.axes, 1)
    use_p = ((ap.lo_stop > -jnp.inf) | (ap.hi_stop < jnp.inf)) & (ap.lo_stop <= ap.hi_stop)
    position = pr_position(g, b.pos1, b.quat1, b.pos2, b.quat2)
    ltd = jnp.cross(0.5 * (b.pos2 - b.pos1), axp)
    limp = limot_row(axp, False, position, jm.mm(axp, b.vel1 - b.vel2), ap, ltd, g.has2, fps,
                     use_p)
    angle = pr_angle(g, b.quat1, b.quat2)
    limr = limot_row(ax1, True, angle, jm.mm(ax1, b.angvel1 - b.angvel2), ar, z3, g.has2, fps,
                     rotational_limit_in_use(ar))
    return assemble(jnp.concatenate([ja1, jl1]), jnp.concatenate([-ja1, jl2]),
                    jnp.concatenate([ca, cl]), cfm_w, [limp, limr])


def _geometry(geo, frame1, frame2):
    """dJointSetPRAxis1 (prismatic, body 1 frame) and Axis2 (rotoide, body 1 and
    body 2 frames; world for the world)."""
    r1 = frame1[1]
    axr = geo["axis2"]
    return dict(axis1=jm.mm(r1.T, axr), axis2=axr if frame2 is None else jm.mm(frame2[1].T, axr),
                axis_p=jm.mm(r1.T, geo["axis1"]))


register(PR, JointType("pr", 6, 2, pr, _geometry, nlimot=2))
