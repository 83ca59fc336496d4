"""Universal joint (ODE's joints/universal.cpp).

A ball-and-socket joint plus one row keeping axis 1 (fixed in body 1) and
axis 2 (fixed in body 2, or in the world) perpendicular: the bodies cannot
turn relative to each other about ``axis1 x axis2``. Both angles are measured
through the "cross", the frame spanned by the two axes, relative to the cross
at build time (``qrel1``, ``qrel2``; ODE's computeInitialRelativeRotations).

Rows: 3 ball rows, 1 perpendicularity row, limit/motor rows for axis 1 and
axis 2 (6). Geometry (body frames, from build time): anchor1, anchor2, axis1
(body 1), axis2 (body 2; world for the world), extra qrel1, qrel2 (w, x, y, z).

The frame helpers here (:func:`mat_from_2axes`, :func:`quat_from_mat`,
:func:`universal_angles`) are written against an array module ``xp`` so the
builder evaluates exactly the same formulas in numpy.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.joints.basic import ball_rows_of, rotational_limit_in_use
from jaxode.sim.joints.common import (UNIVERSAL, BodyPair, JointParams, JointType, assemble, axis,
                                  hinge_angle_from_quat, limot_row, register)


def _conj(q, xp=jnp):
    return xp.stack([q[0], -q[1], -q[2], -q[3]])


def _qmul(p, q, xp=jnp):
    """Hamilton product p q (ODE's dQMultiply0), for numpy or jax arrays."""
    return xp.stack([
        p[0] * q[0] - p[1] * q[1] - p[2] * q[2] - p[3] * q[3],
        p[0] * q[1] + p[1] * q[0] + p[2] * q[3] - p[3] * q[2],
        p[0] * q[2] + p[2] * q[0] + p[3] * q[1] - p[1] * q[3],
        p[0] * q[3] + p[3] * q[0] + p[1] * q[2] - p[2] * q[1]])


def _sum(x, xp):
    """A vector's sum: in index order in the step (:func:`jaxode.sim.math.sum_terms`),
    numpy's at build time."""
    return jm.sum_terms(x) if xp is jnp else xp.sum(x)


def mat_from_2axes(a, b, xp=jnp):
    """ODE's dRFrom2Axes: rotation whose columns are unit ``a``, ``b`` made
    perpendicular to ``a`` and normalised, and their cross product."""
    a = a / xp.sqrt(_sum(a * a, xp))
    b = b - _sum(a * b, xp) * a
    b = b / xp.sqrt(_sum(b * b, xp))
    return xp.stack([a, b, xp.cross(a, b)], axis=1)


def quat_from_mat(r, xp=jnp):
    """ODE's dQfromR (dRtoQ), branch for branch (the sign of the result follows ODE's)."""
    tiny = 1e-30

    def sq(x):
        return xp.sqrt(xp.maximum(x, tiny))

    tr = r[0, 0] + r[1, 1] + r[2, 2]
    s = sq(tr + 1)
    k = 0.5 / s
    q_tr = xp.stack([0.5 * s, (r[2, 1] - r[1, 2]) * k, (r[0, 2] - r[2, 0]) * k,
                     (r[1, 0] - r[0, 1]) * k])
    s = sq((r[0, 0] - (r[1, 1] + r[2, 2])) + 1)
    k = 0.5 / s
    q0 = xp.stack([(r[2, 1] - r[1, 2]) * k, 0.5 * s, (r[0, 1] + r[1, 0]) * k,
                   (r[2, 0] + r[0, 2]) * k])
    s = sq((r[1, 1] - (r[2, 2] + r[0, 0])) + 1)
    k = 0.5 / s
    q1 = xp.stack([(r[0, 2] - r[2, 0]) * k, (r[0, 1] + r[1, 0]) * k, 0.5 * s,
                   (r[1, 2] + r[2, 1]) * k])
    s = sq((r[2, 2] - (r[0, 0] + r[1, 1])) + 1)
    k = 0.5 / s
    q2 = xp.stack([(r[1, 0] - r[0, 1]) * k, (r[2, 0] + r[0, 2]) * k, (r[1, 2] + r[2, 1]) * k,
                   0.5 * s])
    case2 = xp.where(r[1, 1] > r[0, 0], r[2, 2] > r[1, 1], r[2, 2] > r[0, 0])
    case1 = (r[1, 1] > r[0, 0]) & ~case2
    q_else = xp.where(case2, q2, xp.where(case1, q1, q0))
    return xp.where(tr >= 0, q_tr, q_else)


def cross_quat(a, b, xp=jnp):
    """Orientation of the cross spanned by world axes ``a`` then ``b`` (dRtoQ(dRFrom2Axes))."""
    return quat_from_mat(mat_from_2axes(a, b, xp), xp)


def initial_relative_rotations(ax1, ax2, q1, q2):
    """ODE's computeInitialRelativeRotations at build time (numpy, world axes):
    qrel1 = q1^-1 cross(ax1, ax2), qrel2 = q2^-1 cross(ax2, ax1) (q2 = identity
    for the world)."""
    qrel1 = _qmul(_conj(q1, np), cross_quat(ax1, ax2, np), np)
    qrel2 = _qmul(_conj(q2, np), cross_quat(ax2, ax1, np), np)
    return qrel1, qrel2


def world_axes(g, q1, q2):
    """Axis 1 (from body 1) and axis 2 (from body 2, or the world) in the world frame."""
    return jm.mm(jm.quat_to_mat(q1), g.axis1), jm.mm(jm.quat_to_mat(q2), g.axis2)


def universal_angles(g, q1, q2):
    """ODE's dxJointUniversal::getAngles (used for the limits) [rad].

    angle1 about axis 1: body 1 relative to the cross; angle2 about axis 2: body
    2 relative to the cross, whose second orientation is the first turned by pi
    about ax1 + ax2. Zero at build time."""
    ax1, ax2 = world_axes(g, q1, q2)
    qcross = cross_quat(ax1, ax2)
    qrel = _qmul(_qmul(_conj(q1), qcross), _conj(g.extra["qrel1"]))
    angle1 = hinge_angle_from_quat(qrel, g.axis1)
    n = ax1 + ax2
    n = n / jnp.sqrt(jm.sum_terms(n * n))
    qcross2 = _qmul(jnp.concatenate([jnp.zeros(1, n.dtype), n]), qcross)
    qrel = _qmul(_qmul(_conj(q2), qcross2), _conj(g.extra["qrel2"]))
    angle2 = -hinge_angle_from_quat(qrel, g.axis2)
    return angle1, angle2


def universal_angle2(g, q1, q2):
    """ODE's dxJointUniversal::getAngle2 (dJointGetUniversalAngle2) [rad]: the
    cross built from (ax2, ax1) directly. Equals getAngles' angle2 when the axes
    are exactly perpendicular."""
    ax1, ax2 = world_axes(g, q1, q2)
    qrel = _qmul(_qmul(_conj(q2), cross_quat(ax2, ax1)), _conj(g.extra["qrel2"]))
    return -hinge_angle_from_quat(qrel, g.axis2)


def _normalize(v):
    return v / jnp.sqrt(jm.sum_terms(v * v) + jnp.finfo(v.dtype).tiny)


def universal(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointUniversal::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    k = fps * erp_w
    jb1, jb2, cb = ball_rows_of(g, b, k)
    ax1, ax2 = world_axes(g, b.quat1, b.quat2)
    cosang = jm.mm(ax1, ax2)
    p = _normalize(jnp.cross(ax1, ax2 - cosang * ax1))
    z3 = jnp.zeros(3, dtype)
    ju1 = jnp.concatenate([z3, p])[None]
    angle1, angle2 = universal_angles(g, b.quat1, b.quat2)
    dw = b.angvel1 - b.angvel2
    a1, a2 = axis(jp.axes, 0), axis(jp.axes, 1)
    lim1 = limot_row(ax1, True, angle1, jm.mm(ax1, dw), a1, z3, g.has2, fps,
                     rotational_limit_in_use(a1))
    lim2 = limot_row(ax2, True, angle2, jm.mm(ax2, dw), a2, z3, g.has2, fps,
                     rotational_limit_in_use(a2))
    return assemble(jnp.concatenate([jb1, ju1]), jnp.concatenate([jb2, -ju1]),
                    jnp.concatenate([cb, (-k * cosang)[None]]), cfm_w, [lim1, lim2])


def _geometry(geo, frame1, frame2):
    """Body-frame axes and the cross's initial relative rotations (dJointSetUniversal*)."""
    _, r1, q1 = frame1
    r2, q2 = (np.eye(3), np.array([1.0, 0.0, 0.0, 0.0])) if frame2 is None else frame2[1:]
    ax1, ax2 = geo["axis1"], geo["axis2"]
    qrel1, qrel2 = initial_relative_rotations(ax1, ax2, q1, q2)
    return dict(axis1=jm.mm(r1.T, ax1), axis2=jm.mm(r2.T, ax2), qrel1=qrel1, qrel2=qrel2)


register(UNIVERSAL, JointType("universal", 6, 2, universal, _geometry, nlimot=2))
