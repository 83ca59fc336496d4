"""Ball, hinge, slider and fixed joints (ODE's ball.cpp, hinge.cpp, slider.cpp,
fixed.cpp getInfo2). Rows in the world frame; geometry from build time in the
body frames (see :class:`JointGroup`)."""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.sim.joints.common import (BALL, FIXED, HINGE, SLIDER, BodyPair, JointParams, JointType,
                                  assemble, axis, cross_minus, hinge_angle_from_quat, limot_row,
                                  register, relative_quat, reverse_sign, anchor_gap)


def ball_rows_of(g, b: BodyPair, k):
    """The three ball-and-socket rows: anchor points of both bodies coincide."""
    r1, r2 = jm.quat_to_mat(b.quat1), jm.quat_to_mat(b.quat2)
    a1, a2 = jm.mm(r1, g.anchor1), jm.mm(r2, g.anchor2)
    eye = jnp.eye(3, dtype=a1.dtype)
    j1 = jnp.concatenate([eye, cross_minus(a1)], axis=1)
    j2 = jnp.concatenate([-eye, -cross_minus(a2)], axis=1)
    c = k * anchor_gap(b.pos1, a1, b.pos2, a2)
    return j1, j2, c


def fixed_orientation_rows(g, b: BodyPair, k):
    """Three rows keeping the relative orientation at ``g.qrel`` (ODE's setFixedOrientation)."""
    eye = jnp.eye(3, dtype=b.pos1.dtype)
    z = jnp.zeros((3, 3), b.pos1.dtype)
    j1 = jnp.concatenate([z, eye], axis=1)
    j2 = jnp.concatenate([z, -eye], axis=1)
    qerr = relative_quat(g.qrel, b.quat1, b.quat2)
    qerr = jnp.where(qerr[0] < 0, -qerr, qerr)
    e = jm.mm(jm.quat_to_mat(b.quat1), qerr[1:])
    return j1, j2, 2.0 * k * e


def ball(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    j1, j2, c = ball_rows_of(g, b, fps * erp_w)
    return assemble(j1, j2, c, cfm_w)


def fixed(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    dtype = b.pos1.dtype
    k = fps * erp_w
    jr1, jr2, cr = fixed_orientation_rows(g, b, k)
    ofs = jm.mm(jm.quat_to_mat(b.quat1), g.offset)
    eye = jnp.eye(3, dtype=dtype)
    jl1 = jnp.concatenate([eye, -cross_minus(ofs) * g.has2], axis=1)
    jl2 = jnp.concatenate([-eye, jnp.zeros((3, 3), dtype)], axis=1)
    cl = jnp.where(g.has2 > 0, k * (b.pos2 - b.pos1 + ofs), k * (g.offset - b.pos1))
    return assemble(jnp.concatenate([jl1, jr1]), jnp.concatenate([jl2, jr2]),
                    jnp.concatenate([cl, cr]), cfm_w)


def hinge_axis_rows(ax1, ax2, k):
    """Two rows keeping body 2's axis ``ax2`` parallel to body 1's ``ax1`` (world)."""
    p, q = jm.plane_space(ax1)
    z3 = jnp.zeros(3, ax1.dtype)
    j1 = jnp.stack([jnp.concatenate([z3, p]), jnp.concatenate([z3, q])])
    bb = jnp.cross(ax1, ax2)
    return j1, -j1, k * jnp.stack([jm.mm(bb, p), jm.mm(bb, q)])


def rotational_limit_in_use(a):
    """ODE's hinge rule: stops are active only when at least one lies in [-pi, pi]."""
    return ((a.lo_stop >= -jnp.pi) | (a.hi_stop <= jnp.pi)) & (a.lo_stop <= a.hi_stop)


class Coordinate(NamedTuple):
    """A one-axis joint's own coordinate, as its limit/motor row reads it.

    axis (3,) world axis of the row (body 1 minus body 2); value: the angle
    [rad] or position [m] the stops test; rate: its time derivative [rad/s or
    m/s], ``axis . (w1 - w2)`` or ``axis . (v1 - v2)``; ltd (3,): the slider's
    torque decoupling vector (zeros for a hinge); rotational: static."""

    axis: jnp.ndarray
    value: jnp.ndarray
    rate: jnp.ndarray
    ltd: jnp.ndarray
    rotational: bool


def hinge_coordinate(g, b: BodyPair) -> Coordinate:
    """The hinge's angle (ODE's internal one, zero at the build pose) and rate."""
    ax1 = jm.mm(jm.quat_to_mat(b.quat1), g.axis1)
    angle = hinge_angle_from_quat(relative_quat(g.qrel, b.quat1, b.quat2), g.axis1)
    rate = jm.mm(ax1, b.angvel1) - jm.mm(ax1, b.angvel2)
    return Coordinate(ax1, angle, rate, jnp.zeros(3, ax1.dtype), True)


def slider_coordinate(g, b: BodyPair) -> Coordinate:
    """The slider's position and rate along its limit/motor axis: attached
    world-first, ODE negates the axis and the position its stops test
    (slider.cpp: dJOINT_REVERSE)."""
    ax1 = jm.mm(jm.quat_to_mat(b.quat1), g.axis1)
    r2 = jm.quat_to_mat(b.quat2)
    axl = ax1 * reverse_sign(g, ax1.dtype)
    position = jm.mm(axl, (b.pos1 - b.pos2) - jm.mm(r2, g.offset))
    rate = jm.mm(axl, b.vel1) - jm.mm(axl, b.vel2)
    ltd = jnp.cross(0.5 * (b.pos2 - b.pos1), axl)
    return Coordinate(axl, position, rate, ltd, False)


def hinge(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    k = fps * erp_w
    jb1, jb2, cb = ball_rows_of(g, b, k)
    ax2 = jm.mm(jm.quat_to_mat(b.quat2), g.axis2)
    co = hinge_coordinate(g, b)
    jh1, jh2, ch = hinge_axis_rows(co.axis, ax2, k)
    a = axis(jp.axes, 0)
    lim = limot_row(co.axis, True, co.value, co.rate, a, co.ltd, g.has2, fps,
                    rotational_limit_in_use(a))
    return assemble(jnp.concatenate([jb1, jh1]), jnp.concatenate([jb2, jh2]),
                    jnp.concatenate([cb, ch]), cfm_w, [lim])


def slider(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    k = fps * erp_w
    jr1, jr2, cr = fixed_orientation_rows(g, b, k)
    ax1 = jm.mm(jm.quat_to_mat(b.quat1), g.axis1)
    p, q = jm.plane_space(ax1)
    r2 = jm.quat_to_mat(b.quat2)
    cc = (b.pos2 - b.pos1) * g.has2
    ang_p = 0.5 * jnp.cross(cc, p)
    ang_q = 0.5 * jnp.cross(cc, q)
    js1 = jnp.stack([jnp.concatenate([p, ang_p]), jnp.concatenate([q, ang_q])])
    js2 = jnp.stack([jnp.concatenate([-p, ang_p]), jnp.concatenate([-q, ang_q])])
    ofs_vec = jnp.where(g.has2 > 0, b.pos2 - b.pos1 + jm.mm(r2, g.offset), g.offset - b.pos1)
    cs = k * jnp.stack([jm.mm(p, ofs_vec), jm.mm(q, ofs_vec)])
    co = slider_coordinate(g, b)
    a = axis(jp.axes, 0)
    use = ((a.lo_stop > -jnp.inf) | (a.hi_stop < jnp.inf)) & (a.lo_stop <= a.hi_stop)
    lim = limot_row(co.axis, False, co.value, co.rate, a, co.ltd, g.has2, fps, use)
    return assemble(jnp.concatenate([jr1, js1]), jnp.concatenate([jr2, js2]),
                    jnp.concatenate([cr, cs]), cfm_w, [lim])


register(BALL, JointType("ball", 3, 0, ball))
register(HINGE, JointType("hinge", 6, 1, hinge, nlimot=1))
register(SLIDER, JointType("slider", 6, 1, slider, nlimot=1))
def _fixed_geometry(geo, frame1, frame2):
    p1, r1, _ = frame1
    return {"offset": p1 if frame2 is None else jm.mm(r1.T, p1 - frame2[0])}


register(FIXED, JointType("fixed", 6, 0, fixed, _fixed_geometry))
