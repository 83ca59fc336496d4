"""Joint constraint rows (ODE's ``joints/*.cpp`` getInfo2), one function per joint type.

Every joint of a type is described by body-frame geometry fixed at build time
(as ODE's dJointSet* functions store it) and per-axis parameters in
``Params``. A joint function maps one joint and its two bodies to a fixed
number of rows (inactive rows, e.g. a limit/motor row of a free, unpowered
axis, are masked). Body 2 may be the static world (index ``nbody``: zero
inverse mass, identity pose); ``has2`` says whether a real body is attached,
for the few terms where ODE's arithmetic differs.

Frames: anchors and axes are stored in the body frames; rows are in the world
frame. Units SI; angles in radians.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode import math as jm
from jaxode._struct import pytree_dataclass, static_field

BALL, HINGE, SLIDER, FIXED, UNIVERSAL, HINGE2 = range(6)
JOINT_TYPE_NAMES = {BALL: "ball", HINGE: "hinge", SLIDER: "slider", FIXED: "fixed",
                    UNIVERSAL: "universal", HINGE2: "hinge2"}
# Rows per joint (the last ``naxis`` are limit/motor rows).
JOINT_ROWS = {BALL: 3, HINGE: 6, SLIDER: 6, FIXED: 6, UNIVERSAL: 6, HINGE2: 6}


@pytree_dataclass
class JointGroup:
    """All joints of one type (J joints), body-frame geometry from build time.

    ids (J,) global joint indices; body1, body2 (J,) body indices (body2 =
    nbody: the world); has2 (J,) 1.0 when body2 is a body; anchor1, anchor2
    (J, 3) anchor in body 1 / body 2 frames (world point for the world);
    axis1 (J, 3) in body 1's frame; axis2 (J, 3) in body 2's frame (world for
    the world); qrel (J, 4) initial relative rotation as ODE stores it; offset
    (J, 3) slider/fixed offset as ODE stores it.
    """

    ids: jax.Array
    body1: jax.Array
    body2: jax.Array
    has2: jax.Array
    anchor1: jax.Array
    anchor2: jax.Array
    axis1: jax.Array
    axis2: jax.Array
    qrel: jax.Array
    offset: jax.Array
    type: int = static_field()


class BodyPair(NamedTuple):
    """Pose and velocity of a joint's two bodies (world frame)."""

    pos1: jax.Array
    quat1: jax.Array
    vel1: jax.Array
    angvel1: jax.Array
    pos2: jax.Array
    quat2: jax.Array
    vel2: jax.Array
    angvel2: jax.Array


class JointRows(NamedTuple):
    """Rows of one joint (m rows) and the motor-at-limit forces ODE adds to the bodies.

    j1, j2 (m, 6); c, cfm, lo, hi (m,); active (m,) bool;
    extra1, extra2 (6,) [force | torque] added to the bodies' accumulators.
    """

    j1: jax.Array
    j2: jax.Array
    c: jax.Array
    cfm: jax.Array
    lo: jax.Array
    hi: jax.Array
    active: jax.Array
    extra1: jax.Array
    extra2: jax.Array


class AxisParams(NamedTuple):
    """Per-axis limit/motor parameters of one joint axis (ODE's dxJointLimitMotor)."""

    lo_stop: jax.Array
    hi_stop: jax.Array
    vel: jax.Array
    fmax: jax.Array
    fudge_factor: jax.Array
    bounce: jax.Array
    cfm: jax.Array
    stop_erp: jax.Array
    stop_cfm: jax.Array


def _cross_minus(a):
    z = jnp.zeros_like(a[0])
    return jnp.array([[z, a[2], -a[1]], [-a[2], z, a[0]], [a[1], -a[0], z]])


def _conj(q):
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], q.dtype)


def relative_quat(qrel, q1, q2):
    """ODE's q1^-1 q2 qrel^-1 (body 2 = world: q2 = identity)."""
    return jm.quat_mul(jm.quat_mul(_conj(q1), q2), _conj(qrel))


def hinge_angle_from_quat(qrel_now, axis):
    """ODE's getHingeAngleFromRelativeQuat: angle about ``axis`` (body 1 frame)."""
    cost2 = qrel_now[0]
    sint2 = jnp.sqrt(jnp.sum(qrel_now[1:] ** 2) + jnp.finfo(qrel_now.dtype).tiny)
    pos = jnp.dot(qrel_now[1:], axis) >= 0
    theta = jnp.where(pos, 2 * jnp.arctan2(sint2, cost2), 2 * jnp.arctan2(sint2, -cost2))
    theta = jnp.where(theta > jnp.pi, theta - 2 * jnp.pi, theta)
    return -theta


def limot_row(ax, rotational: bool, value, rate_in, p: AxisParams, ltd, has2, h, use_limits):
    """ODE's dxJointLimitMotor (testRotationalLimit / slider limit + addLimot) for one axis.

    ax (3,) world axis; value: the joint angle or position; rate_in: joint rate
    along ax (body 1 minus body 2) for bounce; ltd: the slider's torque
    decoupling vector (zero for rotational axes). Returns
    (j1, j2, c, cfm, lo, hi, active, extra1, extra2).
    """
    dtype = ax.dtype
    inf = jnp.asarray(jnp.inf, dtype)
    lo_hit = use_limits & (value <= p.lo_stop)
    hi_hit = use_limits & ~lo_hit & (value >= p.hi_stop)
    limit = jnp.where(lo_hit, 1, jnp.where(hi_hit, 2, 0))
    err = jnp.where(lo_hit, value - p.lo_stop, jnp.where(hi_hit, value - p.hi_stop, 0.0))
    powered = p.fmax > 0
    pinned = (limit > 0) & (p.lo_stop == p.hi_stop)
    powered_eff = powered & ~pinned
    zero3 = jnp.zeros(3, dtype)
    if rotational:
        j1 = jnp.concatenate([zero3, ax])
        j2 = jnp.concatenate([zero3, -ax]) * has2
    else:
        j1 = jnp.concatenate([ax, ltd * has2])
        j2 = jnp.concatenate([-ax, ltd]) * has2
    # motor
    c = jnp.where(powered_eff & (limit == 0), p.vel, 0.0)
    cfm = jnp.where(powered_eff, p.cfm, 0.0)
    lo = jnp.where(powered_eff & (limit == 0), -p.fmax, -inf)
    hi = jnp.where(powered_eff & (limit == 0), p.fmax, inf)
    # motor working against a limit: ODE adds the (fudged) motor force to the bodies
    fm = jnp.where((p.vel > 0) | ((p.vel == 0) & (limit == 2)), -p.fmax, p.fmax)
    away = ((limit == 1) & (p.vel > 0)) | ((limit == 2) & (p.vel < 0))
    fm = jnp.where(away, fm * p.fudge_factor, fm)
    fm = jnp.where(powered_eff & (limit > 0), fm, 0.0)
    if rotational:
        extra1 = jnp.concatenate([zero3, -fm * ax])
        extra2 = jnp.concatenate([zero3, fm * ax]) * has2
    else:
        extra1 = jnp.concatenate([-fm * ax, -fm * ltd * has2])
        extra2 = jnp.concatenate([fm * ax, -fm * ltd]) * has2
    # limit
    c_lim = -(p.stop_erp / h) * err
    b_lo = (limit == 1) & (rate_in < 0)
    b_hi = (limit == 2) & (rate_in > 0)
    newc = -p.bounce * rate_in
    bounce_on = (p.bounce > 0) & ~pinned
    c_lim = jnp.where(bounce_on & b_lo & (newc > c_lim), newc, c_lim)
    c_lim = jnp.where(bounce_on & b_hi & (newc < c_lim), newc, c_lim)
    lim = limit > 0
    c = jnp.where(lim, c_lim, c)
    cfm = jnp.where(lim, p.stop_cfm, cfm)
    lo = jnp.where(lim, jnp.where(pinned | (limit == 2), -inf, 0.0), lo)
    hi = jnp.where(lim, jnp.where(pinned | (limit == 1), inf, 0.0), hi)
    active = powered | lim
    return j1, j2, c, cfm, lo, hi, active, extra1, extra2


def _ball_rows(g, b: BodyPair, k, cfm_w):
    r1, r2 = jm.quat_to_mat(b.quat1), jm.quat_to_mat(b.quat2)
    a1, a2 = r1 @ g.anchor1, r2 @ g.anchor2
    eye = jnp.eye(3, dtype=a1.dtype)
    j1 = jnp.concatenate([eye, _cross_minus(a1)], axis=1)
    j2 = jnp.concatenate([-eye, -_cross_minus(a2)], axis=1)
    c = k * (a2 + b.pos2 - a1 - b.pos1)
    return j1, j2, c


def _fixed_orientation_rows(g, b: BodyPair, k):
    eye = jnp.eye(3, dtype=b.pos1.dtype)
    z = jnp.zeros((3, 3), b.pos1.dtype)
    j1 = jnp.concatenate([z, eye], axis=1)
    j2 = jnp.concatenate([z, -eye], axis=1)
    qerr = relative_quat(g.qrel, b.quat1, b.quat2)
    qerr = jnp.where(qerr[0] < 0, -qerr, qerr)
    e = jm.quat_to_mat(b.quat1) @ qerr[1:]
    return j1, j2, 2.0 * k * e


def _pad_rows(j1, j2, c, m, dtype):
    n = c.shape[0]
    if n == m:
        return j1, j2, c
    pad = m - n
    return (jnp.concatenate([j1, jnp.zeros((pad, 6), dtype)]),
            jnp.concatenate([j2, jnp.zeros((pad, 6), dtype)]),
            jnp.concatenate([c, jnp.zeros((pad,), dtype)]))


def joint_rows(jtype: int, g, b: BodyPair, axis: AxisParams, erp_w, cfm_w, h) -> JointRows:
    """Rows of one joint of type ``jtype`` (unbatched; vmapped over a JointGroup).

    ``g``: the joint's fields of its JointGroup; ``axis``: AxisParams of its
    first axis (rows beyond the geometric ones); erp_w, cfm_w: the world's
    ERP/CFM (ODE passes the world ERP to getInfo2; joint rows start with the
    world CFM); h: step [s].
    """
    dtype = b.pos1.dtype
    k = erp_w / h
    m = JOINT_ROWS[jtype]
    zero6 = jnp.zeros(6, dtype)
    cfm = jnp.full((m,), cfm_w, dtype)
    lo = jnp.full((m,), -jnp.inf, dtype)
    hi = jnp.full((m,), jnp.inf, dtype)
    active = jnp.ones((m,), bool)
    extra1 = extra2 = zero6
    r1 = jm.quat_to_mat(b.quat1)
    if jtype == BALL:
        j1, j2, c = _ball_rows(g, b, k, cfm_w)
    elif jtype == FIXED:
        jr1, jr2, cr = _fixed_orientation_rows(g, b, k)
        ofs = r1 @ g.offset
        eye = jnp.eye(3, dtype=dtype)
        jl1 = jnp.concatenate([eye, -_cross_minus(ofs) * g.has2], axis=1)
        jl2 = jnp.concatenate([-eye, jnp.zeros((3, 3), dtype)], axis=1)
        cl = jnp.where(g.has2 > 0, k * (b.pos2 - b.pos1 + ofs), k * (g.offset - b.pos1))
        j1, j2, c = (jnp.concatenate([jl1, jr1]), jnp.concatenate([jl2, jr2]),
                     jnp.concatenate([cl, cr]))
    elif jtype == HINGE:
        jb1, jb2, cb = _ball_rows(g, b, k, cfm_w)
        ax1 = r1 @ g.axis1
        p, q = jm.plane_space(ax1)
        ax2 = jm.quat_to_mat(b.quat2) @ g.axis2
        bb = jnp.cross(ax1, ax2)
        z3 = jnp.zeros(3, dtype)
        jh1 = jnp.stack([jnp.concatenate([z3, p]), jnp.concatenate([z3, q])])
        jh2 = -jh1
        ch = k * jnp.stack([jnp.dot(bb, p), jnp.dot(bb, q)])
        angle = hinge_angle_from_quat(relative_quat(g.qrel, b.quat1, b.quat2), g.axis1)
        rate = jnp.dot(ax1, b.angvel1) - jnp.dot(ax1, b.angvel2)
        use = ((axis.lo_stop >= -jnp.pi) | (axis.hi_stop <= jnp.pi)) & (axis.lo_stop <= axis.hi_stop)
        lj1, lj2, lc, lcfm, llo, lhi, lact, extra1, extra2 = limot_row(
            ax1, True, angle, rate, axis, jnp.zeros(3, dtype), g.has2, h, use)
        j1 = jnp.concatenate([jb1, jh1, lj1[None]])
        j2 = jnp.concatenate([jb2, jh2, lj2[None]])
        c = jnp.concatenate([cb, ch, lc[None]])
        cfm = cfm.at[5].set(lcfm)
        lo, hi = lo.at[5].set(llo), hi.at[5].set(lhi)
        active = active.at[5].set(lact)
    elif jtype == SLIDER:
        jr1, jr2, cr = _fixed_orientation_rows(g, b, k)
        ax1 = r1 @ g.axis1
        p, q = jm.plane_space(ax1)
        r2 = jm.quat_to_mat(b.quat2)
        cc = (b.pos2 - b.pos1) * g.has2
        z3 = jnp.zeros(3, dtype)
        ang_p = 0.5 * jnp.cross(cc, p)
        ang_q = 0.5 * jnp.cross(cc, q)
        js1 = jnp.stack([jnp.concatenate([p, ang_p]), jnp.concatenate([q, ang_q])])
        js2 = jnp.stack([jnp.concatenate([-p, ang_p]), jnp.concatenate([-q, ang_q])])
        ofs_vec = jnp.where(g.has2 > 0, b.pos2 - b.pos1 + r2 @ g.offset, g.offset - b.pos1)
        cs = k * jnp.stack([jnp.dot(p, ofs_vec), jnp.dot(q, ofs_vec)])
        position = jnp.dot(ax1, b.pos1 - r2 @ g.offset - b.pos2)
        rate = jnp.dot(ax1, b.vel1) - jnp.dot(ax1, b.vel2)
        use = ((axis.lo_stop > -jnp.inf) | (axis.hi_stop < jnp.inf)) & (axis.lo_stop <= axis.hi_stop)
        ltd = jnp.cross(0.5 * (b.pos2 - b.pos1), ax1)
        lj1, lj2, lc, lcfm, llo, lhi, lact, extra1, extra2 = limot_row(
            ax1, False, position, rate, axis, ltd, g.has2, h, use)
        j1 = jnp.concatenate([jr1, js1, lj1[None]])
        j2 = jnp.concatenate([jr2, js2, lj2[None]])
        c = jnp.concatenate([cr, cs, lc[None]])
        cfm = cfm.at[5].set(lcfm)
        lo, hi = lo.at[5].set(llo), hi.at[5].set(lhi)
        active = active.at[5].set(lact)
    else:
        raise NotImplementedError(f"joint type {JOINT_TYPE_NAMES.get(jtype, jtype)} has no rows yet")
    j2 = j2 * g.has2
    return JointRows(j1=j1, j2=j2, c=c, cfm=cfm, lo=lo, hi=hi, active=active,
                     extra1=extra1, extra2=extra2)
