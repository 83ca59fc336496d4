"""Piston joint (ODE's joints/piston.cpp): a slider that may also turn about
its axis. Body 1 slides along and turns about the axis (fixed in body 1)
through the anchor on body 2.

Rows (ODE's dxJointPiston::getInfo2, in this order):
  0, 1  angular, about p and q (dPlaneSpace of the world axis ax1 of body 1),
        keeping body 2's axis on body 1's (as the hinge's axis rows);
  2, 3  linear, along p and q, keeping the anchor on body 2 on the line through
        body 1's anchor point along ax1; the force acts at body 2's anchor;
  4     prismatic limit/motor (axis 1 of the builder, dParam*): linear along
        ax1, ODE's addLimot with the midpoint torque decoupling;
  5     rotational limit/motor (axis 2, dParam*2): about ax1. Unlike the
        hinge, ODE's piston tests stops whenever one is finite (no [-pi, pi]
        rule).
Rows 4 and 5 are masked when off.

Geometry (build time, as dJointSetPistonAnchor / Axis store it): anchor1
(body 1 frame), anchor2 (body 2 frame; the world point for the world), axis1
(body 1 frame), axis2 (body 2 frame; world for the world), qrel (conj(q1) q2;
conj(q1) for the world): the builder's defaults. Units: m, rad.
"""
from __future__ import annotations

import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.sim.joints.basic import hinge_axis_rows
from jaxode.sim.joints.common import (PISTON, BodyPair, anchor_gap, JointParams, JointType, assemble, axis,
                                  hinge_angle_from_quat, limot_row, register, relative_quat)


def piston_position(g, pos1, q1, pos2, q2):
    """dJointGetPistonPosition [m]: ax1 . (anchor point of body 1 - anchor on
    body 2), ax1 the world axis of body 1; zero at build time."""
    r1 = jm.quat_to_mat(q1)
    gap = -anchor_gap(pos1, jm.mm(r1, g.anchor1), pos2, jm.mm(jm.quat_to_mat(q2), g.anchor2))
    return jm.mm(jm.mm(r1, g.axis1), gap)


def piston_angle(g, q1, q2):
    """dJointGetPistonAngle [rad]: hinge angle about the axis, zero at build."""
    return hinge_angle_from_quat(relative_quat(g.qrel, q1, q2), g.axis1)


def _finite_stops(a):
    return ((a.lo_stop > -jnp.inf) | (a.hi_stop < jnp.inf)) & (a.lo_stop <= a.hi_stop)


def piston(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointPiston::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    k = fps * erp_w
    z3 = jnp.zeros(3, dtype)
    r1, r2 = jm.quat_to_mat(b.quat1), jm.quat_to_mat(b.quat2)
    ax1 = jm.mm(r1, g.axis1)
    ja1, ja2, ca = hinge_axis_rows(ax1, jm.mm(r2, g.axis2), k)
    # body 2's anchor relative to its centre, and relative to body 1's centre (for
    # the world r2 = I, pos2 = 0: anchor2 - pos1, as ODE)
    lanchor2 = jm.mm(r2, g.anchor2)
    dist = (b.pos2 - b.pos1) + lanchor2
    p, q = jm.plane_space(ax1)
    dirs = jnp.stack([p, q])
    jl1 = jnp.concatenate([dirs, jnp.cross(dist, dirs)], axis=1)
    jl2 = jnp.concatenate([-dirs, jnp.cross(dirs, lanchor2)], axis=1)
    cl = k * jm.mm(dirs, dist - jm.mm(r1, g.anchor1))
    ap, ar = axis(jp.axes, 0), axis(jp.axes, 1)
    position = piston_position(g, b.pos1, b.quat1, b.pos2, b.quat2)
    ltd = jnp.cross(0.5 * (b.pos2 - b.pos1), ax1)
    limp = limot_row(ax1, False, position, jm.mm(ax1, b.vel1 - b.vel2), ap, ltd, g.has2, fps,
                     _finite_stops(ap))
    limr = limot_row(ax1, True, piston_angle(g, b.quat1, b.quat2),
                     jm.mm(ax1, b.angvel1 - b.angvel2), ar, z3, g.has2, fps, _finite_stops(ar))
    return assemble(jnp.concatenate([ja1, jl1]), jnp.concatenate([ja2, jl2]),
                    jnp.concatenate([ca, cl]), cfm_w, [limp, limr])


register(PISTON, JointType("piston", 6, 2, piston, nlimot=2))
