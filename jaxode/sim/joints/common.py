"""Shared joint machinery: the JointGroup pytree, the per-type registry, ODE's
limit/motor row (dxJointLimitMotor) and small rotation helpers.

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

from typing import Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode._struct import pytree_dataclass, static_field

BALL, HINGE, SLIDER, FIXED, UNIVERSAL, HINGE2, PR, PU, PISTON, AMOTOR, LMOTOR, PLANE2D = range(12)
# Joint types that may be attached world-first (body1 None, body2 a body):
# ODE swaps the bodies and sets dJOINT_REVERSE (ode.cpp dJointAttach). Its
# effects (ODE 0.16): ball, fixed, hinge: none on the rows (hinge.cpp's limits
# and motor use the internal angle); dJointGetHingeAngle/AngleRate and
# dJointAddHingeTorque change sign. slider: dJointGetSliderPosition/
# PositionRate and dJointAddSliderForce change sign, and so do the limit and
# motor row's axis (slider.cpp getInfo1/getInfo2): stops and motor velocity
# act on the reported (reversed) position.
REVERSIBLE = frozenset({BALL, HINGE, SLIDER, FIXED})

JOINT_TYPE_NAMES = {BALL: "ball", HINGE: "hinge", SLIDER: "slider", FIXED: "fixed",
                    UNIVERSAL: "universal", HINGE2: "hinge2", PR: "pr", PU: "pu",
                    PISTON: "piston", AMOTOR: "amotor", LMOTOR: "lmotor", PLANE2D: "plane2d"}


@pytree_dataclass
class JointGroup:
    """All joints of one type (J joints), body-frame geometry from build time.

    ids (J,) global joint indices; body1, body2 (J,) body indices (body2 =
    nbody: the world); has2 (J,) 1.0 when body2 is a body; anchor1, anchor2
    (J, 3) anchor in body 1 / body 2 frames (world point for the world);
    axis1 (J, 3) in body 1's frame; axis2 (J, 3) in body 2's frame (world for
    the world); qrel (J, 4) initial relative rotation as ODE stores it; offset
    (J, 3) slider/fixed offset as ODE stores it; extra: type-specific geometry
    (name -> (J, ...) array), from the type's ``geometry`` function; reverse
    (J,) bool (None: all False): attached world-first, ``dJointAttach(j, 0,
    body)``, which ODE stores as (body, world) with its dJOINT_REVERSE flag
    (:data:`REVERSIBLE`).
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
    extra: dict
    type: int = static_field()
    reverse: jax.Array = None


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
    """Limit/motor parameters of joint axes (ODE's dxJointLimitMotor); inside a
    row function each leaf has shape (3,), one entry per axis (ODE's dParam*,
    dParam*2, dParam*3); world-valued defaults (negative cfm/erp) are resolved."""

    lo_stop: jax.Array
    hi_stop: jax.Array
    vel: jax.Array
    fmax: jax.Array
    fudge_factor: jax.Array
    bounce: jax.Array
    cfm: jax.Array
    stop_erp: jax.Array
    stop_cfm: jax.Array


def reverse_sign(g, dtype) -> jax.Array:
    """-1 for a joint attached world-first (``g.reverse``), else +1."""
    if g.reverse is None:
        return jnp.ones((), dtype)
    return jnp.where(g.reverse, -1.0, 1.0).astype(dtype)


def anchor_gap(pos1, a1, pos2, a2):
    """(pos2 + a2) - (pos1 + a1) [m], world frame: the gap between a joint's two
    anchor points, body origin ``pos`` plus the anchor ``a`` rotated into the
    world frame (for the world as body 2: pos2 = 0 and a2 the world point).

    ODE (ball.cpp setBall, hinge2.cpp, ...) sums ``a2 + pos2 - a1 - pos1``; in
    float32 that rounds the absolute anchor a2 + pos2 (a body 5 m from the
    origin: ulp 4.8e-7 m) before the near-cancelling subtraction, a spurious gap
    that ERP / h turns into a velocity error of ~5e-5 m/s per row per step (the
    fuzz campaign's float32 ball chains diverged from float64 by 1.7e-4 rad/s
    in ONE step, 1 iteration). Subtracting the two nearby large terms first
    (pos2 - pos1, or a2 - pos1 for the world; exact by Sterbenz's lemma when
    they are within a factor 2) and adding the small offsets after keeps the
    gap's error at the offsets' ulp. The same value in exact arithmetic."""
    return ((pos2 - pos1) + a2) - a1


def cross_minus(a):
    """ODE's dSetCrossMatrixMinus: the matrix M with M @ b = b x a."""
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
    # |sin(theta/2)|: exactly 0 at the reference pose (ODE reads 0 there), and a
    # finite gradient (double where: sqrt never sees 0 on the taken branch).
    s2 = jm.sum_terms(qrel_now[1:] ** 2)
    nz = s2 > 0
    sint2 = jnp.where(nz, jnp.sqrt(jnp.where(nz, s2, 1.0)), 0.0)
    pos = jm.mm(qrel_now[1:], axis) >= 0
    theta = jnp.where(pos, 2 * jnp.arctan2(sint2, cost2), 2 * jnp.arctan2(sint2, -cost2))
    theta = jnp.where(theta > jnp.pi, theta - 2 * jnp.pi, theta)
    return 0.0 - theta  # +0.0, not -0.0, at the reference pose


def axis_rows(ax, rotational: bool, ltd, has2):
    """(j1, j2) (6,): the row along a one-axis coordinate (dxJointLimitMotor's):
    ``ax`` (3,) world axis, body 1 minus body 2; a linear axis carries the slider's
    torque decoupling ``ltd`` on both bodies. ``J^T f`` is the joint force f on the
    bodies (dJointAddHingeTorque / dJointAddSliderForce)."""
    if rotational:
        z = jnp.zeros(3, ax.dtype)
        return jnp.concatenate([z, ax]), jnp.concatenate([z, -ax]) * has2
    return jnp.concatenate([ax, ltd * has2]), jnp.concatenate([-ax, ltd]) * has2


def limot_row(ax, rotational: bool, value, rate_in, p: AxisParams, ltd, has2, fps, use_limits):
    """ODE's dxJointLimitMotor (testRotationalLimit / slider limit + addLimot) for one axis.

    ax (3,) world axis; value: the joint angle or position; rate_in: joint rate
    along ax (body 1 minus body 2) for bounce; ltd: the slider's torque
    decoupling vector (zero for rotational axes); fps: 1/h [1/s] (ODE's
    ``k = fps * stop_erp``). Returns (j1, j2, c, cfm, lo, hi, active, extra1, extra2).
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
    j1, j2 = axis_rows(ax, rotational, ltd, has2)
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
    c_lim = -(fps * p.stop_erp) * err
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




class JointParams(NamedTuple):
    """Per-joint parameters passed to a row function: ``axes`` (AxisParams with
    (3,) leaves) and hinge-2's suspension_erp, suspension_cfm (world values
    when unset)."""

    axes: AxisParams
    suspension_erp: jax.Array
    suspension_cfm: jax.Array


def axis(axes: AxisParams, k: int) -> AxisParams:
    """The parameters of axis ``k`` (0, 1, 2) as scalars."""
    return AxisParams(*[x[k] for x in axes])


class JointType(NamedTuple):
    """A joint type's implementation, registered in :data:`REGISTRY`.

    nrows: rows per joint (static; rows that are off are masked with ``active``),
      limit/motor rows included.
    naxis: axes that take per-axis parameters (builder suffixes "", "2", "3").
    rows(g, b, jp, erp_w, cfm_w, fps) -> JointRows: one joint (vmapped over the
      group); g the joint's JointGroup slice, b its BodyPair, jp JointParams.
    geometry(geo, frame1, frame2) -> dict: build-time (numpy) body-frame
      geometry from the builder's world-frame ``geo`` dict; frame = (pos (3,),
      R (3, 3), quat (4,)) of a body at build time, frame2 None for the world.
      Keys naming JointGroup fields replace the defaults, others go to
      ``extra``. None: the default fields only.
    nlimot: the limit/motor rows, the last ``nlimot`` of the ``nrows``
      (:func:`assemble` puts them there); the others are geometric rows with
      no bounds (lo = -inf, hi = +inf) whatever the parameters: the only rows
      that can be bounded are these (``solver="articulated"`` builds responses
      for them alone; tests/test_articulated.py checks every type).
    """

    name: str
    nrows: int
    naxis: int
    rows: Callable
    geometry: Optional[Callable] = None
    nlimot: int = 0


REGISTRY: dict[int, JointType] = {}


def register(jtype: int, impl: JointType) -> None:
    REGISTRY[jtype] = impl


class Limot(NamedTuple):
    """One limit/motor row (the outputs of :func:`limot_row`)."""

    j1: jax.Array
    j2: jax.Array
    c: jax.Array
    cfm: jax.Array
    lo: jax.Array
    hi: jax.Array
    active: jax.Array
    extra1: jax.Array
    extra2: jax.Array


def assemble(j1, j2, c, cfm_w, limots=(), cfm=None, lo=None, hi=None, active=None) -> JointRows:
    """JointRows from k geometric rows (j1, j2 (k, 6), c (k,), world CFM unless
    ``cfm``/``lo``/``hi``/``active`` (k,) say otherwise) followed by limit/motor rows."""
    dtype = c.dtype
    k = c.shape[0]
    cfm = jnp.full((k,), cfm_w, dtype) if cfm is None else cfm
    lo = jnp.full((k,), -jnp.inf, dtype) if lo is None else lo
    hi = jnp.full((k,), jnp.inf, dtype) if hi is None else hi
    active = jnp.ones((k,), bool) if active is None else active
    zero6 = jnp.zeros(6, dtype)
    extra1 = extra2 = zero6
    if limots:
        L = [Limot(*x) for x in limots]
        j1 = jnp.concatenate([j1, jnp.stack([x.j1 for x in L])])
        j2 = jnp.concatenate([j2, jnp.stack([x.j2 for x in L])])
        c = jnp.concatenate([c, jnp.stack([x.c for x in L])])
        cfm = jnp.concatenate([cfm, jnp.stack([x.cfm for x in L])])
        lo = jnp.concatenate([lo, jnp.stack([x.lo for x in L])])
        hi = jnp.concatenate([hi, jnp.stack([x.hi for x in L])])
        active = jnp.concatenate([active, jnp.stack([x.active for x in L])])
        extra1 = sum(x.extra1 for x in L)
        extra2 = sum(x.extra2 for x in L)
    return JointRows(j1=j1, j2=j2, c=c, cfm=cfm, lo=lo, hi=hi, active=active,
                     extra1=extra1, extra2=extra2)
