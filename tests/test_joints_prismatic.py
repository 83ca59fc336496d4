"""Prismatic-rotoide (PR), piston and plane-2D joints against the real ODE
(libode 0.16, double), against analytic mechanics, and their input checks.

All libode comparisons run in ONE world (one jaxode compile): eight
independent mechanisms, each with its own bodies (tilted, moving and spinning
at the start), so the islands do not interact: per type one joint to the
world without limits, one between two bodies with stops (and bounce), one
between two bodies with both motors and the joint force/torque helper
applied every step; a plane-2D body under off-plane forces, torques and
gravity, and one with its three motors. QuickStep runs enough iterations
(ITER) that PGS converges on both sides: the rows, not their order (ODE
shuffles it at iterations 8 and 16), decide the answer. See the test
docstrings for the measured agreement.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

G = 9.81
H = 0.002          # step [s]
N = 300            # steps
ITER = 300         # QuickStep iterations: PGS converged on both sides
CFM = 1e-10        # world CFM (the float64 default, explicit for the analytic checks)
ERP = 0.2

_LINK = jaxode.mass.box(size=(0.2, 0.1, 0.3), total=1.0)
_BASE = jaxode.mass.box(size=(0.3, 0.3, 0.1), total=2.0)
_PUCK = jaxode.mass.box(size=(0.4, 0.2, 0.1), total=1.5)


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def _quat(axis, angle):
    return (math.cos(angle / 2),) + tuple(math.sin(angle / 2) * _unit(axis))


AXP = _unit((0.3, 0.1, -0.8))                  # PR prismatic axis
AXR = _unit(np.cross(AXP, (0.0, 0.0, 1.0)))    # PR rotoide axis, perpendicular to AXP
AXR_TILT = _unit(AXR + (0.0, 0.0, 0.4))        # a rotoide axis 20 deg off perpendicular
AX = _unit((1.0, 0.0, 0.2))                    # piston axis


def _link(pos, vel=(-0.2, 0.1, 0.0), angvel=(1.5, -2.0, 1.0)):
    return dict(pos=tuple(pos), quat=_quat((1, 2, 3), 0.4), vel=vel, angvel=angvel, mass=_LINK)


def _base(pos, vel=(0.1, -0.2, 0.3), angvel=(0.2, -0.1, 0.3)):
    return dict(pos=tuple(pos), quat=_quat((0, 1, 1), 0.3), vel=vel, angvel=angvel, mass=_BASE)


def _pr_case(x, world, params, torque=None, axr=AXR):
    """A link whose centre lies on the prismatic line through the anchor (ODE's
    PR measures the prismatic limit at body 1's centre: off that line the
    limit row and the position disagree when the link turns)."""
    anchor = np.array([x + 0.2, 0.0, -0.2])
    link = _link(anchor + (0.15 if world else 0.5) * AXP)
    bodies = [link] if world else [_base((x, 0.0, 0.0)), link]
    body1 = 0 if world else 1             # the link is body 1 (it slides)
    return ("pr", bodies, body1, world, dict(anchor=tuple(anchor), axis1=tuple(AXP),
                                             axis2=tuple(axr)), params, torque)


def _piston_case(x, world, params, force=None):
    anchor = (x + 0.2, 3.0, -0.2)
    link = _link((x + 0.4, 3.1, -0.5))
    bodies = [link] if world else [_base((x, 3.0, 0.0)), link]
    return ("piston", bodies, 0, world, dict(anchor=anchor, axis=tuple(AX)), params, force)


# plane-2D: a puck (z a principal axis) at z = 0 turned about z, pushed in and out
# of the plane every step: force F [N] and torque T [N m] (world frame)
F_PUCK, T_PUCK = np.array([1.0, -0.5, 3.0]), np.array([0.4, -0.3, 0.2])
PUCK0 = dict(pos=(0.0, 6.0, 0.0), quat=_quat((0, 0, 1), 0.3), vel=(0.5, -0.2, 0.0),
             angvel=(0.0, 0.0, 2.0), mass=_PUCK, finite_rotation=True)
# a second puck, built 5 cm above the plane and tilted, with all three motors
PUCK1 = dict(pos=(3.0, 6.0, 0.05), quat=_quat((1, 2, 3), 0.2), vel=(0.1, 0.2, 0.3),
             angvel=(0.5, -0.3, 1.0), mass=_PUCK)

# (type, bodies, index of body 1 in bodies, body 2 the world?, geometry, params,
#  joint force/torque applied every step)
CASES = [
    _pr_case(0.0, True, {}),
    _pr_case(3.0, False, dict(lo_stop=-0.02, hi_stop=0.02, bounce=0.5, lo_stop2=-0.2,
                              hi_stop2=0.1)),
    _pr_case(6.0, False, dict(vel=0.2, fmax=30.0, vel2=1.0, fmax2=3.0), torque=0.1,
             axr=AXR_TILT),
    _piston_case(0.0, True, {}),
    _piston_case(3.0, False, dict(lo_stop=-0.02, hi_stop=0.02, bounce=0.3, lo_stop2=-0.05,
                                  hi_stop2=0.05)),
    _piston_case(6.0, False, dict(vel=0.2, fmax=30.0, vel2=-1.0, fmax2=3.0), force=0.5),
    ("plane2d", [PUCK0], 0, True, {}, {}, None),
    ("plane2d", [PUCK1], 0, True, {}, dict(vel=0.3, fmax=2.0, vel2=-0.2, fmax2=2.0, vel3=1.5,
                                           fmax3=0.01), None),
]
IDS = ["pr-world", "pr-stops", "pr-motors", "piston-world", "piston-stops", "piston-motors",
       "plane2d-pushed", "plane2d-motors"]
QCASES = [0, 1, 2, 3, 4, 5]            # cases whose queries are compared with ODE's getters
QUERIES = {
    "pr": [("pr_position", "dJointGetPRPosition"),
           ("pr_position_rate", "dJointGetPRPositionRate"),
           ("pr_angle", "dJointGetPRAngle"), ("pr_angle_rate", "dJointGetPRAngleRate")],
    "piston": [("piston_position", "dJointGetPistonPosition"),
               ("piston_position_rate", "dJointGetPistonPositionRate"),
               ("piston_angle", "dJointGetPistonAngle"),
               ("piston_angle_rate", "dJointGetPistonAngleRate")],
}
HELPERS = {"pr": (jaxode.add_pr_torque, "dJointAddPRTorque"),
           "piston": (jaxode.add_piston_force, "dJointAddPistonForce")}
SAMPLE = list(range(0, N, 25)) + [N - 1]     # steps at which the queries are compared


def _layout():
    """Global body indices of each case (bodies in CASES order)."""
    out, k = [], 0
    for c in CASES:
        out.append(list(range(k, k + len(c[1]))))
        k += len(c[1])
    return out


def _joint_bodies(case, ids):
    _, bodies, i1, world, *_ = case
    return ids[i1], None if world else ids[1 - i1]


def _pushes(model_or_world, s, bodies, ode):
    """The off-plane force and torque on the pushed puck (case 6), every step."""
    b = bodies[6][0]
    if ode:
        model_or_world.add_force(b, F_PUCK)
        model_or_world.add_torque(b, T_PUCK)
        return s
    return jaxode.add_torque(jaxode.add_force(s, b, F_PUCK), b, T_PUCK)


@pytest.fixture(scope="module")
def ode_runs():
    return _run_all()


def _run_all():
    """Every case in jaxode (float64) and in libode: positions, quaternions,
    velocities, feedback, and the joint queries evaluated on ODE's own states."""
    odelib = pytest.importorskip("tools.conformance.odelib")
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")
    bodies = _layout()
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), erp=ERP, cfm=CFM, iterations=ITER)
        joints = []
        for case, ids in zip(CASES, bodies):
            kind, bds, _, _, geo, params, _ = case
            for bd in bds:
                b.add_body(**bd)
            joints.append(getattr(b, f"add_{kind}")(*_joint_bodies(case, ids), **geo, **params))
        model = b.build()

        def one(s, _):
            for (kind, *_, extra), j in zip(CASES, joints):
                if extra is not None:
                    s = HELPERS[kind][0](model, s, j, extra)
            s = _pushes(model, s, bodies, ode=False)
            s = jaxode.step(model, s, H)
            return s, (s.pos, s.quat, s.vel, s.angvel, s.joint_feedback)

        _, traj = jax.jit(lambda s: jax.lax.scan(one, s, None, length=N))(jaxode.init(model))
        pos, quat, vel, angvel, fb = (np.asarray(x) for x in traj)
        all_queries = jax.jit(lambda s: [jnp.stack([getattr(jaxode, q)(model, s, joints[i])
                                                    for q, _ in QUERIES[CASES[i][0]]])
                                         for i in QCASES])

        w = odelib.OdeWorld(gravity=(0.0, 0.0, -G), erp=ERP, cfm=CFM, iterations=ITER)
        for _, bds, *_ in CASES:
            for bd in bds:
                m = bd["mass"]
                w.add_body(bd["pos"], quat=bd["quat"], vel=bd["vel"], angvel=bd["angvel"],
                           mass=m.mass, inertia=m.inertia,
                           finite_rotation=bd.get("finite_rotation", False))
        oj = [w.add_joint(c[0], *_joint_bodies(c, ids), **c[4], **c[5])
              for c, ids in zip(CASES, bodies)]
        opos, ofb = [], []
        queries = {i: [] for i in QCASES}
        s0 = jaxode.init(model)
        for n in range(N):
            for (kind, *_, extra), j in zip(CASES, oj):
                if extra is not None:
                    w.joint_call(HELPERS[kind][1], j, extra)
            _pushes(w, None, bodies, ode=True)
            w.step(H)
            st = w.state()
            opos.append(st["pos"])
            ofb.append([np.stack(w.joint_feedback(j)) for j in oj])
            if n in SAMPLE:
                ours = all_queries(s0.replace(**{k: jnp.asarray(v) for k, v in st.items()}))
                for i, q in zip(QCASES, ours):
                    theirs = [w.joint_call(fn, oj[i]) for _, fn in QUERIES[CASES[i][0]]]
                    queries[i].append(np.stack([np.asarray(q), theirs], axis=-1))
        w.close()
    return dict(pos=pos, quat=quat, vel=vel, angvel=angvel, fb=fb, opos=np.array(opos),
                ofb=np.array(ofb), bodies=bodies, joints=joints, model=model,
                queries={i: np.array(v) for i, v in queries.items()})


@pytest.mark.parametrize("i", range(len(CASES)), ids=IDS)
def test_trajectory_and_feedback_match_ode(ode_runs, i):
    """Positions of the case's bodies over the run and the joint feedback (force
    and torque on body 1, and on body 2 when there is one) at every step.
    Measured (ITER = 300): positions to 4e-15 m and feedback to 2e-11 N, but
    for the PR pendulum to the world, the slowest to converge: 6e-11 m and
    1.2e-6 N of 95 N. At ODE's default 20 iterations the row order shows:
    1e-11 m to 2e-6 m."""
    r = ode_runs
    ids = r["bodies"][i]
    np.testing.assert_allclose(r["pos"][:, ids], r["opos"][:, ids], rtol=0, atol=1e-9)
    nb = 1 if CASES[i][3] else 2          # ODE leaves f2, t2 untouched without body 2
    fb, ofb = r["fb"][:, r["joints"][i], :2 * nb], r["ofb"][:, i, :2 * nb]
    np.testing.assert_allclose(fb, ofb, rtol=0, atol=1e-7 * max(1.0, np.abs(ofb).max()))


@pytest.mark.parametrize("i", QCASES, ids=[IDS[i] for i in QCASES])
def test_queries_match_ode_getters(ode_runs, i):
    """Positions, angles and their rates on ODE's own states against ODE's
    dJointGet*. Measured: 9e-16."""
    q = ode_runs["queries"][i]                 # (samples, queries, [ours, ode])
    np.testing.assert_allclose(q[..., 0], q[..., 1], rtol=0, atol=1e-10)
    assert np.abs(q[..., 1]).max() > 0.05      # the motion is not trivial


def _rot(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _linear_motor_rate(r, i, axis_world):
    """J v of a linear limit/motor row (ODE's addLimot with the midpoint torque
    decoupling ltd = (p2 - p1)/2 x ax): ax . (v1 - v2) + ltd . (w1 + w2), the
    row built at the pose before step n and v after it, for steps 1 .. N-1; ax
    is ``axis_world`` at build time, carried by body 1."""
    b1, b2 = _joint_bodies(CASES[i], r["bodies"][i])
    q0 = np.asarray(CASES[i][1][CASES[i][2]]["quat"])
    ax_body = _rot(q0 / np.linalg.norm(q0)).T @ axis_world
    out = []
    for n in range(1, N):
        ax = _rot(r["quat"][n - 1, b1]) @ ax_body
        ltd = np.cross(0.5 * (r["pos"][n - 1, b2] - r["pos"][n - 1, b1]), ax)
        out.append(ax @ (r["vel"][n, b1] - r["vel"][n, b2])
                   + ltd @ (r["angvel"][n, b1] + r["angvel"][n, b2]))
    return np.array(out)


def test_stops_and_motors_are_active_in_the_ode_cases(ode_runs):
    """The limited/motored cases exercise their rows (else the comparison proves little)."""
    r = ode_runs
    q = {i: v[..., 1] for i, v in r["queries"].items()}   # ODE's getters
    # pr-stops: the position stays within its +-2 cm stops (ERP overshoot aside) and
    # reaches one; the rotoide angle reaches a stop (-0.2 or 0.1 rad)
    assert 0.018 < np.abs(q[1][:, 0]).max() < 0.025
    assert q[1][:, 2].max() > 0.095 or q[1][:, 2].min() < -0.195
    # pr-motors: both motors hold their speeds (0.2 m/s, 1 rad/s) against gravity and
    # the joint torque. The prismatic motor holds its row's velocity, which is not
    # dJointGetPRPositionRate (that one follows body 2's anchor point)
    np.testing.assert_allclose(_linear_motor_rate(r, 2, AXP), 0.2, rtol=1e-6)
    # (the rate getter uses the axis after the step, the row the one before: O(h) apart)
    np.testing.assert_allclose(q[2][1:, 3], 1.0, rtol=1e-4)
    # piston-stops: as pr-stops, rotation stops +-0.05 rad
    assert 0.018 < np.abs(q[4][:, 0]).max() < 0.025
    assert 0.045 < np.abs(q[4][:, 2]).max() < 0.055
    # piston-motors: 0.2 m/s and -1 rad/s
    np.testing.assert_allclose(_linear_motor_rate(r, 5, AX), 0.2, rtol=1e-6)
    np.testing.assert_allclose(q[5][1:, 3], -1.0, rtol=1e-4)


def test_plane2d_motors_drive_the_puck(ode_runs):
    """The x and y motors (2 N on 1.5 kg) accelerate the puck at fmax / m toward
    their speeds and then hold them: v_n = min(v_0 + n h fmax / m, vel) (x;
    mirrored for y); the angular motor (0.01 N m) spins it up toward 1.5 rad/s;
    the puck built 5 cm above the plane is pulled to z = 0 at the world ERP:
    z_n = 0.05 (1 - ERP)^n while the z row alone is solved exactly."""
    r = ode_runs
    b = r["bodies"][7][0]
    n = np.arange(1, N + 1)
    acc = H * 2.0 / _PUCK.mass
    np.testing.assert_allclose(r["vel"][:, b, 0], np.minimum(0.1 + n * acc, 0.3), rtol=0,
                               atol=1e-8)
    np.testing.assert_allclose(r["vel"][:, b, 1], np.maximum(0.2 - n * acc, -0.2), rtol=0,
                               atol=1e-8)
    wz = r["angvel"][:, b, 2]
    assert np.all(np.diff(wz) > 0) and wz[-1] < 1.5
    z = r["pos"][:, b, 2]
    np.testing.assert_allclose(z[:20], 0.05 * 0.8 ** n[:20], rtol=1e-6)


def test_plane2d_keeps_the_body_in_the_plane_analytically(ode_runs):
    """A puck on a plane-2D joint, pushed every step by F = (1, -0.5, 3) N and T =
    (0.4, -0.3, 0.2) N m under gravity: x, y follow the discrete (semi-implicit
    Euler) motion under (Fx, Fy) / m, the angle about z under Tz / Izz with
    finite rotation (angle_n = angle_0 + h sum w_k); the joint's force on the
    puck is (0, 0, m g - Fz) and its torque (-Tx, -Ty, 0). z, the tilt and the
    angular velocity about x and y are zero but for the world CFM, which
    leaves a row's velocity short by CFM times its force: w_xy = CFM T_xy
    (4e-11 rad/s), a tilt of at most n h CFM |T_xy| (the rows have no tilt
    correction), and z settles at -CFM lambda h / ERP (1.2e-11 m) with lambda
    = m g - Fz."""
    r = ode_runs
    b = r["bodies"][6][0]
    m, izz = _PUCK.mass, _PUCK.inertia[2, 2]
    n = np.arange(1, N + 1)
    pos, quat, w = r["pos"][:, b], r["quat"][:, b], r["angvel"][:, b]
    lam = m * G - F_PUCK[2]
    assert np.all(pos[:, 2] < 0) and pos[-1, 2] == pytest.approx(-CFM * lam * H / ERP, rel=1e-4)
    assert np.abs(pos[:, 2]).max() <= CFM * lam * H / ERP * (1 + 1e-4)
    assert np.all(np.linalg.norm(quat[:, 1:3], axis=1)
                  <= 0.5 * n * H * CFM * np.linalg.norm(T_PUCK[:2]) * (1 + 1e-6))
    np.testing.assert_allclose(w[:, :2], np.broadcast_to(CFM * T_PUCK[:2], (N, 2)), rtol=1e-5)
    for k in range(2):
        x = PUCK0["pos"][k] + n * H * PUCK0["vel"][k] + H * H * F_PUCK[k] / m * n * (n + 1) / 2
        np.testing.assert_allclose(pos[:, k], x, rtol=0, atol=1e-12)
    wz = PUCK0["angvel"][2] + n * H * T_PUCK[2] / izz
    np.testing.assert_allclose(w[:, 2], wz, rtol=1e-12)
    angle = 0.3 + H * np.cumsum(wz)
    np.testing.assert_allclose(2 * np.arctan2(quat[:, 3], quat[:, 0]), angle, rtol=0, atol=1e-12)
    f1, t1 = r["fb"][:, r["joints"][6], 0], r["fb"][:, r["joints"][6], 1]
    np.testing.assert_allclose(f1, np.broadcast_to([0, 0, m * G - F_PUCK[2]], f1.shape),
                               rtol=0, atol=1e-6)
    np.testing.assert_allclose(t1, np.broadcast_to([-T_PUCK[0], -T_PUCK[1], 0], t1.shape),
                               rtol=0, atol=1e-6)


def _two_bodies():
    b = jaxode.WorldBuilder()
    return b, b.add_body(), b.add_body(pos=(1.0, 0.0, 0.0))


BAD = [  # (joint type, text the message must contain after "joint 0 (type)", builder call)
    ("pr", "axis1", lambda b, x, y: b.add_pr(x, y, axis1=(0, 0, 0))),
    ("pr", "axis2", lambda b, x, y: b.add_pr(x, y, axis2=(0, float("nan"), 0))),
    ("pr", "parallel", lambda b, x, y: b.add_pr(x, y, axis1=(1, 0, 0), axis2=(-2, 1e-9, 0))),
    ("pr", "hi_stop2", lambda b, x, y: b.add_pr(x, y, lo_stop2=0.5, hi_stop2=0.1)),
    ("pr", "suffix '3'", lambda b, x, y: b.add_pr(x, y, vel3=1.0)),
    ("pr", "anchor", lambda b, x, y: b.add_pr(x, y, anchor=(0, 1))),
    ("piston", "axis", lambda b, x, y: b.add_piston(x, y, axis=(0, 0, 0))),
    ("piston", "fmax2", lambda b, x, y: b.add_piston(x, None, fmax2=-1.0)),
    ("piston", "body2", lambda b, x, y: b.add_piston(x, 7)),
    ("plane2d", "body2", lambda b, x, y: b.add_plane2d(x, y)),
    ("plane2d", "lo_stop3", lambda b, x, y: b.add_plane2d(x, lo_stop3=-0.5)),
    ("plane2d", "bounce", lambda b, x, y: b.add_plane2d(x, bounce=2.0)),
    ("plane2d", "body1", lambda b, x, y: b.add_plane2d(-1)),
]


@pytest.mark.parametrize("kind,field,make", BAD, ids=[f"{k}-{f}" for k, f, _ in BAD])
def test_bad_input_raises_naming_joint_and_field(kind, field, make):
    b, x, y = _two_bodies()
    with pytest.raises(ValueError, match=rf"joint 0 \({kind}\).*{field}"):
        make(b, x, y)
