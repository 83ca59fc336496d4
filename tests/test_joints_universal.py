"""Universal, hinge-2 and prismatic-universal joints against the real ODE
(libode 0.16, double), against analytic mechanics, and their input checks.

All libode comparisons run in ONE world (one jaxode compile): eleven
independent mechanisms (three per joint type, free, with stops, with motors
and joint torques, plus two hinge-2 suspensions), each with its own bodies,
so the islands do not interact. QuickStep runs enough iterations (200) that
PGS converges on both sides: the rows, not their order (ODE shuffles it at
iterations 8 and 16), decide the answer. Measured: positions agree to 5e-15
m (1e-13 m for the PU to the world, the slowest to converge), feedback to
3e-11 N (8e-8 N of 3.5 N for that PU), queries to 3e-15.
"""
from __future__ import annotations

import cmath
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

G = 9.81
H = 0.002          # step [s]
N = 300            # steps
ITER = 200         # QuickStep iterations: PGS converged on both sides

_LINK = jaxode.mass.box(size=(0.2, 0.1, 0.3), total=1.0)
_BASE = jaxode.mass.box(size=(0.3, 0.3, 0.1), total=2.0)


def _quat(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return (math.cos(angle / 2),) + tuple(math.sin(angle / 2) * a)


def _pendulum(anchor, arm, w):
    """A link whose centre is at anchor + arm, turning at ``w`` about the anchor (a
    velocity the joint allows, so the first step starts on the constraint)."""
    arm, w = np.asarray(arm, float), np.asarray(w, float)
    return dict(pos=tuple(np.asarray(anchor) + arm), quat=_quat((1, 2, 3), 0.4),
                vel=tuple(np.cross(w, arm)), angvel=tuple(w), mass=_LINK)


def _base(pos, vel=(0.1, -0.2, 0.3), angvel=(0.2, -0.1, 0.3)):
    return dict(pos=pos, quat=_quat((0, 1, 1), 0.3), vel=vel, angvel=angvel, mass=_BASE)


def _link(pos, vel=(-0.2, 0.1, 0.0), angvel=(1.5, -2.0, 1.0)):
    return dict(pos=pos, quat=_quat((1, 2, 3), 0.4), vel=vel, angvel=angvel, mass=_LINK)


# (type, bodies, body2 is the world?, geometry, params, joint torques applied every step)
CASES = [
    ("universal", [_pendulum((0, 0, 0), (0.3, 0.1, -0.8), (0.8, 1.2, 0.0))], True,
     dict(anchor=(0, 0, 0), axis1=(0, 1, 0), axis2=(1, 0, 0)), {}, None),
    ("universal", [_base((3, 0, 0)), _link((3.4, 0.1, -0.5), angvel=(1.5, -2.0, 3.0))], False,
     dict(anchor=(3.2, 0, -0.2), axis1=(0, 1, 0), axis2=(0, 0, 1)),
     dict(lo_stop=-0.15, hi_stop=0.15, lo_stop2=-0.2, hi_stop2=0.1, bounce2=0.3), None),
    ("universal", [_base((6, 0, 0)), _link((6.4, 0.1, -0.5))], False,
     dict(anchor=(6.2, 0, -0.2), axis1=(0, 1, 0), axis2=(0, 0, 1)),
     dict(vel=1.5, fmax=0.5, vel2=-1.0, fmax2=0.3), (0.2, -0.1)),
    ("hinge2", [_base((0, 3, 0)), _link((0.4, 3.1, -0.5))], False,
     dict(anchor=(0.2, 3, -0.2), axis1=(0, 0, 1), axis2=(0, 1, 0.3)), {}, None),
    ("hinge2", [_base((3, 3, 0)), _link((3.4, 3.1, -0.5))], False,
     dict(anchor=(3.2, 3, -0.2), axis1=(0, 0, 1), axis2=(0, 1, 0)),
     dict(suspension_erp=0.3, suspension_cfm=1e-3, lo_stop=-0.1, hi_stop=0.1, bounce=0.2,
          vel2=3.0, fmax2=0.5), None),
    ("hinge2", [_base((6, 3, 0)), _link((6.4, 3.1, -0.5))], False,
     dict(anchor=(6.2, 3, -0.2), axis1=(0, 0, 1), axis2=(1, 1, 0)),
     dict(vel=1.0, fmax=0.3), (0.1, 0.2)),
    ("pu", [_pendulum((0, 6, 0), (0.3, 0.1, -0.8), (0.3, 0.5, 0.0))], True,
     dict(anchor=(0, 6, 0), axis1=(0, 1, 0), axis2=(1, 0, 0), axis3=(1, 0, 0.2)), {}, None),
    ("pu", [_base((3, 6, 0)), _link((3.4, 6.1, -0.5))], False,
     dict(anchor=(3.2, 6, -0.2), axis1=(0, 1, 0), axis2=(0, 0, 1), axis3=(1, 0, 0.2)),
     dict(lo_stop3=-0.02, hi_stop3=0.02, bounce3=0.5, vel=0.5, fmax=1.0), None),
    ("pu", [_base((6, 6, 0)), _link((6.4, 6.1, -0.5))], False,
     dict(anchor=(6.2, 6, -0.2), axis1=(0, 1, 0), axis2=(0, 0, 1), axis3=(1, 0, 0.2)),
     dict(vel3=0.2, fmax3=3.0, lo_stop2=-0.1, hi_stop2=0.1), None),
]

# hinge-2 suspension: a 1 kg wheel hanging at its centre from a heavy chassis
# (1e6 kg, no gravity), axis 1 vertical; spring kp [N/m] and damping ratio zeta
KP, M_WHEEL = 1000.0, 1.0
SUSPENSION_ZETA = (1.0, 0.05)


def _suspension_case(x, zeta):
    kd = 2 * zeta * math.sqrt(KP * M_WHEEL)
    chassis = dict(pos=(x, -3.0, 0.5), mass=jaxode.mass.box(size=(1, 1, 1), total=1e6),
                   gravity=False)
    wheel = dict(pos=(x, -3.0, 0.0), mass=jaxode.mass.sphere(radius=0.1, total=M_WHEEL))
    return ("hinge2", [chassis, wheel], False,
            dict(anchor=(x, -3.0, 0.0), axis1=(0, 0, 1), axis2=(0, 1, 0)),
            dict(suspension_erp=H * KP / (H * KP + kd), suspension_cfm=1.0 / (H * KP + kd)), None)


NQ = len(CASES)                               # cases with joint queries
QCASES = [0, 1, 3, 6, 7]     # queries compared (tracing them is slow): world and two-body cases
CASES = CASES + [_suspension_case(3.0 * k, z) for k, z in enumerate(SUSPENSION_ZETA)]
IDS = [f"{c[0]}{i % 3}" for i, c in enumerate(CASES[:NQ])] + [
    f"suspension-zeta{z}" for z in SUSPENSION_ZETA]

# our query -> libode getter, per type
QUERIES = {
    "universal": [("universal_angle1", "dJointGetUniversalAngle1"),
                  ("universal_angle2", "dJointGetUniversalAngle2"),
                  ("universal_angle1_rate", "dJointGetUniversalAngle1Rate"),
                  ("universal_angle2_rate", "dJointGetUniversalAngle2Rate")],
    "hinge2": [("hinge2_angle1", "dJointGetHinge2Angle1"),
               ("hinge2_angle2", "dJointGetHinge2Angle2"),
               ("hinge2_angle1_rate", "dJointGetHinge2Angle1Rate"),
               ("hinge2_angle2_rate", "dJointGetHinge2Angle2Rate")],
    "pu": [("pu_position", "dJointGetPUPosition"), ("pu_position_rate", "dJointGetPUPositionRate"),
           ("pu_angle1", "dJointGetPUAngle1"), ("pu_angle2", "dJointGetPUAngle2"),
           ("pu_angle1_rate", "dJointGetPUAngle1Rate"),
           ("pu_angle2_rate", "dJointGetPUAngle2Rate")],
}
TORQUES = {"universal": (jaxode.add_universal_torques, "dJointAddUniversalTorques"),
           "hinge2": (jaxode.add_hinge2_torques, "dJointAddHinge2Torques")}
SAMPLE = list(range(0, N, 25)) + [N - 1]     # steps at which the queries are compared


def _layout():
    """Body indices of each case (bodies in CASES order)."""
    out, k = [], 0
    for c in CASES:
        out.append(list(range(k, k + len(c[1]))))
        k += len(c[1])
    return out


@pytest.fixture(scope="module")
def ode_runs():
    """Every case in jaxode (float64) and in libode: positions, feedback, and the
    joint queries evaluated on ODE's own states."""
    odelib = pytest.importorskip("tools.conformance.odelib")
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")
    bodies = _layout()
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), iterations=ITER)
        joints = []
        for (kind, bds, world, geo, params, _), ids in zip(CASES, bodies):
            for bd in bds:
                b.add_body(**bd)
            joints.append(getattr(b, f"add_{kind}")(ids[0], None if world else ids[1], **geo,
                                                    **params))
        model = b.build()

        def one(s, _):
            for (kind, *_, tq), j in zip(CASES, joints):
                if tq is not None:
                    s = TORQUES[kind][0](model, s, j, *tq)
            s = jaxode.step(model, s, H)
            return s, (s.pos, s.joint_feedback)

        _, (pos, fb) = jax.jit(lambda s: jax.lax.scan(one, s, None, length=N))(jaxode.init(model))
        pos, fb = np.asarray(pos), np.asarray(fb)
        all_queries = jax.jit(lambda s: [jnp.stack([getattr(jaxode, q)(model, s, joints[i])
                                                    for q, _ in QUERIES[CASES[i][0]]])
                                         for i in QCASES])

        w = odelib.OdeWorld(gravity=(0.0, 0.0, -G), iterations=ITER)
        for (kind, bds, *_), ids in zip(CASES, bodies):
            for bd in bds:
                m = bd["mass"]
                w.add_body(bd["pos"], quat=bd.get("quat", (1, 0, 0, 0)),
                           vel=bd.get("vel", (0, 0, 0)), angvel=bd.get("angvel", (0, 0, 0)),
                           mass=m.mass, inertia=m.inertia, gravity=bd.get("gravity", True))
        oj = [w.add_joint(kind, ids[0], None if world else ids[1], **geo, **params)
              for (kind, _, world, geo, params, _), ids in zip(CASES, bodies)]
        opos, ofb = [], []
        queries = {i: [] for i in QCASES}
        getters = {i: [] for i in range(NQ)}
        s0 = jaxode.init(model)
        for n in range(N):
            for (kind, *_, tq), j in zip(CASES, oj):
                if tq is not None:
                    w.joint_call(TORQUES[kind][1], j, *tq)
            w.step(H)
            st = w.state()
            opos.append(st["pos"])
            ofb.append([np.stack(w.joint_feedback(j)) for j in oj])
            if n in SAMPLE:
                ours = all_queries(s0.replace(**{k: jnp.asarray(v) for k, v in st.items()}))
                for i in range(NQ):
                    getters[i].append([w.joint_call(fn, oj[i]) for _, fn in QUERIES[CASES[i][0]]])
                for i, q in zip(QCASES, ours):
                    queries[i].append(np.stack([np.asarray(q), getters[i][-1]], axis=-1))
        w.close()
    return dict(pos=pos, fb=fb, opos=np.array(opos), ofb=np.array(ofb), bodies=bodies,
                queries={i: np.array(v) for i, v in queries.items()},
                getters={i: np.array(v) for i, v in getters.items()}, joints=joints)


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_trajectory_and_feedback_match_ode(ode_runs, i):
    """Positions of the case's bodies over the run, and the joint feedback (force
    and torque on body 1 and body 2) at every step."""
    r = ode_runs
    ids = r["bodies"][i]
    np.testing.assert_allclose(r["pos"][:, ids], r["opos"][:, ids], rtol=0, atol=1e-9)
    nb = 2 if not CASES[i][2] else 1      # ODE leaves f2, t2 untouched without body 2
    fb, ofb = r["fb"][:, r["joints"][i], :2 * nb], r["ofb"][:, i, :2 * nb]
    np.testing.assert_allclose(fb, ofb, rtol=0, atol=1e-7 * max(1.0, np.abs(ofb).max()))


@pytest.mark.parametrize("i", QCASES, ids=[IDS[i] for i in QCASES])
def test_queries_match_ode_getters(ode_runs, i):
    """Angles, positions and rates on ODE's own states against ODE's dJointGet*."""
    q = ode_runs["queries"][i]                 # (samples, queries, [ours, ode])
    np.testing.assert_allclose(q[..., 0], q[..., 1], rtol=0, atol=1e-10)
    # the motion is not trivial: some angle or position leaves zero
    assert np.abs(q[..., 1]).max() > 0.05


def test_stops_and_motors_are_active_in_the_ode_cases(ode_runs):
    """The limited/motored cases exercise their rows (else the comparison proves little)."""
    q = ode_runs["getters"]                    # ODE's dJointGet* at the sampled steps
    # universal1: both angles reach their stops (within the ERP overshoot)
    assert q[1][:, 0].max() > 0.14 or q[1][:, 0].min() < -0.14
    assert q[1][:, 1].max() > 0.09 or q[1][:, 1].min() < -0.19
    # universal2: both motors hold their speeds (1.5 and -1 rad/s) against the joint torques
    np.testing.assert_allclose(q[2][1:, 2:], np.broadcast_to([1.5, -1.0], q[2][1:, 2:].shape),
                               rtol=1e-3)
    # hinge2 1: angle 1 stays within its stops and reaches one; the axis-2 motor spins
    # the wheel at 3 rad/s. hinge2 2: the axis-1 motor steers at 1 rad/s for a while
    assert 0.099 < np.abs(q[4][:, 0]).max() < 0.1 + 0.005
    np.testing.assert_allclose(q[4][1:, 3], 3.0, rtol=1e-3)
    np.testing.assert_allclose(q[5][1:4, 2], 1.0, rtol=0.01)
    # pu1: position held near +-2 cm; pu2: the prismatic motor extends it at 0.2 m/s
    # (ODE's dJointGetPUPositionRate is not d/dt of the position, so use the positions)
    assert np.abs(q[7][:, 0]).max() < 0.02 + 0.005 and np.abs(q[7][:, 0]).max() > 0.015
    np.testing.assert_allclose(np.diff(q[8][:-1, 0]) / (25 * H), 0.2, rtol=0.01)


def _zero_crossings(t, y):
    """Times of upward zero crossings of y(t) (linear interpolation)."""
    i = np.where((y[:-1] < 0) & (y[1:] >= 0))[0]
    return t[i] - y[i] * (t[i + 1] - t[i]) / (y[i + 1] - y[i])


def test_hinge2_suspension_is_the_spring_damper_of_its_erp_cfm(ode_runs):
    """ERP = h kp / (h kp + kd), CFM = 1 / (h kp + kd) make the suspension row the
    spring-damper m x'' = -kp x - kd x' integrated by backward Euler (force from
    x_{n+1} = x_n + h v_{n+1} and v_{n+1}). A wheel released at zero deflection
    settles at m g / kp below the anchor without overshoot (zeta = 1); with zeta
    = 0.05 it rings at the frequency and decay rate of the backward-Euler root
    z = 1 / (1 - h s), s = -zeta wn + i wn sqrt(1 - zeta^2): arg(z) / h and
    -ln|z| / h; the frequency is omega_d = wn sqrt(1 - zeta^2) to O(wn h) (wn h =
    0.063 here). Deflection is measured relative to the chassis."""
    r = ode_runs
    t = H * np.arange(1, N + 1)
    static = M_WHEEL * G / KP
    wn = math.sqrt(KP / M_WHEEL)
    for k, zeta in enumerate(SUSPENSION_ZETA):
        chassis, wheel = r["bodies"][NQ + k]
        x = r["pos"][:, wheel, 2] - r["pos"][:, chassis, 2] + 0.5       # deflection [m]
        y = x + static                                                   # about equilibrium
        if zeta >= 1:
            assert x[-1] == pytest.approx(-static, rel=1e-4)
            assert x.min() > -static * (1 + 1e-4)                       # no overshoot
            continue
        s = complex(-zeta * wn, wn * math.sqrt(1 - zeta ** 2))
        z = 1 / (1 - H * s)
        up = _zero_crossings(t, y)
        period = np.mean(np.diff(up))
        assert 2 * math.pi / period == pytest.approx(cmath.phase(z) / H, rel=1e-4)
        assert 2 * math.pi / period == pytest.approx(s.imag, rel=wn * H * (zeta + wn * H))
        peaks = [y[(t > a) & (t < b)].max() for a, b in zip(up[:-1], up[1:])]
        decay = -np.log(peaks[-1] / peaks[0]) / (period * (len(peaks) - 1))
        assert decay == pytest.approx(-math.log(abs(z)) / H, rel=0.01)


def _two_bodies():
    b = jaxode.WorldBuilder()
    return b, b.add_body(), b.add_body(pos=(1.0, 0.0, 0.0))


BAD = [  # (joint type, text the message must contain after "joint 0 (type)", builder call)
    ("universal", "axis1", lambda b, x, y: b.add_universal(x, y, axis1=(0, 0, 0))),
    ("universal", "parallel", lambda b, x, y: b.add_universal(x, y, axis1=(0, 0, 1),
                                                               axis2=(0, 0, -2))),
    ("universal", "perpendicular", lambda b, x, y: b.add_universal(x, y, axis1=(0, 0, 1),
                                                                    axis2=(0, 1, 1))),
    ("universal", "hi_stop2", lambda b, x, y: b.add_universal(x, y, lo_stop2=0.5, hi_stop2=0.1)),
    ("universal", "suffix '3'", lambda b, x, y: b.add_universal(x, y, lo_stop3=-0.1)),
    ("hinge2", "body2", lambda b, x, y: b.add_hinge2(x, None)),
    ("hinge2", "parallel", lambda b, x, y: b.add_hinge2(x, y, axis1=(1, 0, 0), axis2=(1, 1e-9, 0))),
    ("hinge2", "axis2", lambda b, x, y: b.add_hinge2(x, y, axis2=(0, float("nan"), 0))),
    ("hinge2", "hi_stop2", lambda b, x, y: b.add_hinge2(x, y, hi_stop2=0.3)),
    ("hinge2", "suspension_erp", lambda b, x, y: b.add_hinge2(x, y, suspension_erp=1.5)),
    ("hinge2", "suspension_cfm", lambda b, x, y: b.add_hinge2(x, y, suspension_cfm=-1e-3)),
    ("pu", "axis3", lambda b, x, y: b.add_pu(x, y, axis3=(0, 0, 0))),
    ("pu", "perpendicular", lambda b, x, y: b.add_pu(x, None, axis1=(1, 0, 0), axis2=(1, 1, 0))),
    ("pu", "fmax3", lambda b, x, y: b.add_pu(x, y, fmax3=-1.0)),
    ("pu", "anchor", lambda b, x, y: b.add_pu(x, y, anchor=(0, 1))),
]


@pytest.mark.parametrize("kind,field,make", BAD, ids=[f"{k}-{f}" for k, f, _ in BAD])
def test_bad_input_raises_naming_joint_and_field(kind, field, make):
    b, x, y = _two_bodies()
    with pytest.raises(ValueError, match=rf"joint 0 \({kind}\).*{field}"):
        make(b, x, y)
