"""Angular and linear motors (amotor, lmotor) against the real ODE, analytic
results and conservation laws.

The ODE comparisons run jaxode in float64 against libode 0.16 (double). One
model holds many independent bodies, each with its own motor joints, so one
compile covers every case; bodies that share no joint are separate islands in
ODE and decoupled rows in jaxode, so row order across them cannot matter. The
world runs 100 QuickStep iterations, enough for PGS to converge in every case
(a ball joint's rows couple with an amotor's), so the rows decide, not ODE's
shuffled row order; the conformance scenes cover the default 20 iterations
and float32.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

odelib = pytest.importorskip("tools.conformance.odelib")
try:
    odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"libode not available: {e}", allow_module_level=True)

G = 9.81
H = 0.001
N = 300
ITERATIONS = 100
_M = jaxode.mass.box(size=(0.2, 0.1, 0.3), total=1.0)
_MFREE = jaxode.mass.box(size=(0.4, 0.2, 0.1), total=2.0)
_MBALL = jaxode.mass.sphere(radius=0.1, total=2.0)  # isotropic: no gyroscopic drift
_Q = tuple(np.array([0.9, 0.1, 0.2, 0.3]) / np.linalg.norm([0.9, 0.1, 0.2, 0.3]))
_Q2 = tuple(np.array([0.7, -0.3, 0.5, 0.2]) / np.linalg.norm([0.7, -0.3, 0.5, 0.2]))
_EULER = dict(mode="euler", axes=[(1.0, 0.0, 0.0), (0.0, 0.0, 1.0)])


def _body(x, y=0.0, m=_M, **kw):
    kw.setdefault("quat", _Q)
    kw.setdefault("vel", (0.1, 0.2, 0.0))
    kw.setdefault("angvel", (3.0, 1.0, -2.0))
    return dict(pos=(x, y, 0.0), m=m, **kw)


def _free(x, m=_MFREE, **kw):
    """A 2 kg box without gravity, axes aligned, drifting and spinning about z."""
    kw.setdefault("quat", (1.0, 0.0, 0.0, 0.0))
    kw.setdefault("vel", (0.1, 0.0, 0.0))
    kw.setdefault("angvel", (0.0, 0.0, 0.2))
    return _body(x, 5.0, m=m, gravity=False, **kw)


# (name, bodies (body kwargs, "m" the Mass), joints (kind, body1, body2 (index within the
# case, None the world), keywords as add_<kind> and odelib's add_joint take them))
CASES = [
    ("amotor user, 3 body-1 axes, motors", [_body(0.0)],
     [("amotor", 0, None, dict(axes=[(1, 0, 0), (0, 1, 0), (0, 0, 1)], rel=[1, 1, 1], vel=0.5,
                               fmax=0.02, vel2=-0.3, fmax2=0.01, fmax3=0.03))]),
    ("amotor user, world z axis", [_body(2.0)],
     [("amotor", 0, None, dict(axes=[(0, 0, 1)], vel=1.0, fmax=0.05))]),
    ("amotor user, rel 2 to the world", [_body(4.0)],
     [("amotor", 0, None, dict(axes=[(1, 1, 0), (0, 0, 1)], rel=[2, 1], vel=0.5, fmax=0.02,
                               vel2=2.0, fmax2=0.04))]),
    ("amotor euler, stops on all angles", [_body(6.0)],
     [("amotor", 0, None, dict(**_EULER, lo_stop=-0.3, hi_stop=0.3, lo_stop2=-0.2,
                               hi_stop2=0.2, lo_stop3=-0.5, hi_stop3=0.5, bounce3=0.4))]),
    ("amotor euler, motors and a stop", [_body(8.0)],
     [("amotor", 0, None, dict(mode="euler", axes=[(0, 1, 0), (1, 0, 1)], vel=1.0, fmax=0.1,
                               vel2=0.5, fmax2=0.1, vel3=-1.0, fmax3=0.05, lo_stop3=-0.2,
                               fudge_factor3=0.5))]),
    ("lmotor, world and body-1 axes", [_body(10.0)],
     [("lmotor", 0, None, dict(axes=[(1, 0, 0), (0, 0, 1)], rel=[0, 1], vel=0.5, fmax=2.0,
                               vel2=-0.3, fmax2=5.0))]),
    ("lmotor, rel 2 to the world (ODE: body 1)", [_body(12.0)],
     [("lmotor", 0, None, dict(axes=[(0, 1, 0)], rel=[2], vel=0.5, fmax=2.0))]),
    ("amotor + lmotor between two bodies", [_body(14.0), _body(14.5, quat=_Q2,
                                                               angvel=(-1.0, 0.5, 2.0))],
     [("amotor", 0, 1, dict(axes=[(0, 0, 1), (1, 0, 0)], rel=[2, 1], vel=0.7, fmax=0.03,
                            vel2=-0.4, fmax2=0.02)),
      ("lmotor", 0, 1, dict(axes=[(1, 0, 0), (0, 1, 0), (0, 0, 1)], rel=[1, 2, 0], vel=0.3,
                            fmax=1.0, vel2=-0.2, fmax2=0.5, vel3=0.1, fmax3=20.0))]),
    ("amotor euler between two bodies", [_body(16.0), _body(16.5, quat=_Q2,
                                                            angvel=(-1.0, 0.5, 2.0))],
     [("amotor", 0, 1, dict(**_EULER, vel=0.5, fmax=0.05, lo_stop2=-0.1, hi_stop2=0.1,
                            vel3=-0.5, fmax3=0.02))]),
    ("amotor user, torques only (dJointAddAMotorTorques)", [_body(18.0)],
     [("amotor", 0, None, dict(axes=[(1, 0, 0), (0, 1, 1)], rel=[1, 0]))]),
    ("amotor euler, torques only", [_body(20.0)],
     [("amotor", 0, None, dict(_EULER))]),
    ("amotor euler, no torques (twin)", [_body(20.0)],
     [("amotor", 0, None, dict(_EULER))]),
    # a ball joint plus an Euler amotor: ODE's powered 3-DOF joint
    ("ball + euler amotor to the world", [_body(22.15)],
     [("ball", 0, None, dict(anchor=(22.0, 0.0, 0.0))),
      ("amotor", 0, None, dict(**_EULER, vel=1.0, fmax=0.5, lo_stop2=-0.2, hi_stop2=0.2,
                               vel3=0.5, fmax3=1.0))]),
    ("ball + euler amotor between two bodies", [_body(24.0), _body(24.2, quat=_Q2,
                                                                   angvel=(-1.0, 0.5, 2.0))],
     [("ball", 0, 1, dict(anchor=(24.1, 0.0, 0.0))),
      ("amotor", 0, 1, dict(mode="euler", axes=[(0, 1, 0), (1, 0, 0)], vel=-1.0, fmax=0.2,
                            vel2=0.5, fmax2=0.3, lo_stop3=-0.3, hi_stop3=0.3))]),
    # free bodies without gravity (analytic truths)
    ("lmotor, ample fmax", [_free(0.0)],
     [("lmotor", 0, None, dict(axes=[(1, 0, 0)], vel=0.7, fmax=1e4, cfm=0.0))]),
    ("lmotor, little fmax", [_free(2.0)],
     [("lmotor", 0, None, dict(axes=[(1, 0, 0)], vel=0.7, fmax=0.5, cfm=0.0))]),
    ("amotor, ample fmax", [_free(4.0)],
     [("amotor", 0, None, dict(axes=[(0, 0, 1)], vel=-1.5, fmax=1e4, cfm=0.0))]),
    ("amotor, little fmax", [_free(6.0)],
     [("amotor", 0, None, dict(axes=[(0, 0, 1)], vel=-1.5, fmax=0.01, cfm=0.0))]),
    ("motors between free bodies", [_free(8.0, m=_MBALL, quat=_Q, angvel=(1.0, -2.0, 0.5)),
                                    _free(8.3, m=_MBALL, quat=_Q2, vel=(0.2, 0.4, 0.1))],
     [("lmotor", 0, 1, dict(axes=[(1, 0, 0), (0, 1, 1)], rel=[1, 2], vel=0.4, fmax=3.0,
                            vel2=-0.3, fmax2=1.0)),
      ("amotor", 0, 1, dict(mode="euler", axes=[(0, 1, 0), (0, 0, 1)], vel=1.0, fmax=0.02,
                            vel3=-2.0, fmax3=0.05, lo_stop2=-0.1, hi_stop2=0.1))]),
]
TORQUES = {"amotor user, torques only (dJointAddAMotorTorques)": (0.01, -0.02, 0.0),
           "amotor euler, torques only": (0.01, 0.02, -0.015)}


def _flatten():
    bodies, joints, owner = [], [], []
    for name, bs, js in CASES:
        base = len(bodies)
        bodies += bs
        for kind, b1, b2, kw in js:
            joints.append((kind, base + b1, None if b2 is None else base + b2, kw))
            owner.append(name)
    return bodies, joints, owner


def _torque_calls(joints, owner):
    return [(j, TORQUES[owner[j]]) for j in range(len(joints)) if owner[j] in TORQUES]


#: amotors whose getters are compared (joint index within the case, Euler mode?)
QUERIED = [("amotor user, 3 body-1 axes, motors", 0, False),
           ("amotor user, rel 2 to the world", 0, False),
           ("amotor euler, stops on all angles", 0, True),
           ("amotor euler between two bodies", 0, True),
           ("ball + euler amotor between two bodies", 1, True)]


@pytest.fixture(scope="module")
def ode_run():
    """Both engines on CASES (jaxode float64): per step the state and joint
    feedback, for the QUERIED amotors the Euler angles of the pose before the step
    and the angle rates after it."""
    bodies, joints, owner = _flatten()
    first = {name: owner.index(name) for name in owner[::-1]}
    queried = [(first[name] + k, euler) for name, k, euler in QUERIED]
    torques = _torque_calls(joints, owner)
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), iterations=ITERATIONS)
        for bk in bodies:
            bk = dict(bk)
            b.add_body(mass=bk.pop("m"), **bk)
        for kind, b1, b2, kw in joints:
            getattr(b, f"add_{kind}")(b1, b2, **kw)
        model = b.build()

        def one(s, _):
            for j, t in torques:
                s = jaxode.add_amotor_torques(model, s, j, *t)
            s = jaxode.step(model, s, H)
            return s, s

        s0 = jaxode.init(model)
        _, traj = jax.jit(lambda s: jax.lax.scan(one, s, None, length=N))(s0)
        before = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b[:-1]]), s0, traj)

        def queries(s_before, s_after):
            angles = [jaxode.amotor_angle(model, s_before, j, k)
                      for j, euler in queried if euler for k in range(3)]
            rates = [jaxode.amotor_angle_rate(model, s_after, j, k)
                     for j, _ in queried for k in range(3)]
            return jnp.stack(angles), jnp.stack(rates)

        angles, rates = jax.jit(jax.vmap(queries))(before, traj)
        ours = dict(pos=traj.pos, quat=traj.quat, vel=traj.vel, angvel=traj.angvel,
                    fb=traj.joint_feedback, angles=angles, rates=rates)
        ours = {k: np.asarray(v) for k, v in ours.items()}
    w = odelib.OdeWorld(gravity=(0.0, 0.0, -G), iterations=ITERATIONS)
    for bk in bodies:
        bk = dict(bk)
        m = bk.pop("m")
        w.add_body(mass=m.mass, inertia=m.inertia, **bk)
    for kind, b1, b2, kw in joints:
        w.add_joint(kind, b1, b2, **kw)
    theirs = {k: [] for k in ours}
    for _ in range(N):
        for j, t in torques:
            w.joint_call("dJointAddAMotorTorques", j, *t)
        w.step(H)
        for k, v in w.state().items():
            theirs[k].append(v)
        # ODE caches the Euler angles when it steps: they belong to the pose before the step
        theirs["angles"].append([w.joint_call("dJointGetAMotorAngle", j, k)
                                 for j, euler in queried if euler for k in range(3)])
        theirs["rates"].append([w.joint_call("dJointGetAMotorAngleRate", j, k)
                                for j, _ in queried for k in range(3)])
        theirs["fb"].append([np.stack(w.joint_feedback(j)) for j in range(len(joints))])
    w.close()
    return dict(ours=ours, theirs={k: np.asarray(v) for k, v in theirs.items()})


def _case_bodies(name):
    start = 0
    for n, bs, _ in CASES:
        if n == name:
            return list(range(start, start + len(bs)))
        start += len(bs)
    raise KeyError(name)


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_motor_trajectories_match_ode_to_rounding(ode_run, name):
    """Every case agrees with libode to float64 rounding over 300 steps at 300
    QuickStep iterations (PGS converged: the rows decide, not ODE's shuffled row
    order; measured max differences 1e-13 m, 1e-12 rad/s)."""
    idx = _case_bodies(name)
    a, o = ode_run["ours"], ode_run["theirs"]
    for key, tol in (("pos", 1e-10), ("quat", 1e-10), ("vel", 1e-9), ("angvel", 1e-9)):
        np.testing.assert_allclose(a[key][:, idx], o[key][:, idx], rtol=0, atol=tol, err_msg=key)


def test_motor_joint_feedback_matches_ode(ode_run):
    """dJointFeedback (force and torque on both bodies) of every joint, every step."""
    fb, fbo = ode_run["ours"]["fb"], ode_run["theirs"]["fb"]
    np.testing.assert_allclose(fb, fbo, rtol=0, atol=1e-8)
    assert np.abs(fbo).max() > 0.01  # the motors and stops do push


def test_euler_stops_engage_and_hold(ode_run):
    """The stop case reaches all three Euler stops (so the limits are really tested)
    and stays within them up to the stop ERP's softness."""
    euler = [name for name, _, e in QUERIED if e]
    j = euler.index("amotor euler, stops on all angles")
    peak = np.abs(ode_run["ours"]["angles"][:, 3 * j:3 * j + 3]).max(axis=0)
    assert np.all(peak > [0.29, 0.19, 0.49]) and np.all(peak < [0.31, 0.21, 0.51]), peak


def test_amotor_angles_and_rates_match_ode_getters(ode_run):
    """amotor_angle == dJointGetAMotorAngle (ODE's value after a step is the angle
    of the pose before it) and amotor_angle_rate == dJointGetAMotorAngleRate, for
    user- and Euler-mode amotors (to the world and between bodies) at every step."""
    a, o = ode_run["ours"], ode_run["theirs"]
    np.testing.assert_allclose(a["angles"], o["angles"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(a["rates"], o["rates"], rtol=0, atol=1e-9)
    assert np.abs(a["angles"]).max() > 0.2 and np.abs(a["rates"]).max() > 1.0


def test_add_amotor_torques_matches_ode_and_acts(ode_run):
    """Bodies driven only by dJointAddAMotorTorques move as ODE's (trajectory test)
    and differ from their torque-free twin."""
    a, o = ode_run["ours"]["angvel"], ode_run["theirs"]["angvel"]
    twin = _case_bodies("amotor euler, no torques (twin)")[0]
    for name in TORQUES:
        i = _case_bodies(name)[0]
        np.testing.assert_allclose(a[:, i], o[:, i], rtol=0, atol=1e-9)
        assert np.abs(a[-1, i] - a[-1, twin]).max() > 0.05


# ------------------------------------------------------------------ analytic truths

def test_motor_with_ample_fmax_reaches_target_velocity_in_one_step(ode_run):
    """With cfm = 0 and fmax ample the motor row is an equality: from the first step
    on the velocity along the axis is the target (lmotor 0.7 m/s, amotor -1.5 rad/s)."""
    vel, angvel = ode_run["ours"]["vel"], ode_run["ours"]["angvel"]
    i = _case_bodies("lmotor, ample fmax")[0]
    np.testing.assert_allclose(vel[:, i], np.broadcast_to([0.7, 0.0, 0.0], (N, 3)), atol=1e-12)
    i = _case_bodies("amotor, ample fmax")[0]
    np.testing.assert_allclose(angvel[:, i], np.broadcast_to([0.0, 0.0, -1.5], (N, 3)),
                               atol=1e-12)


def test_motor_with_little_fmax_accelerates_at_fmax_over_inertia(ode_run):
    """A saturated motor pushes with exactly fmax: lmotor dv/dt = fmax / m (0.5 N on
    2 kg); amotor about the principal z axis dw/dt = fmax / I_zz (0.01 N m)."""
    n = np.arange(1, N + 1)
    i = _case_bodies("lmotor, little fmax")[0]
    np.testing.assert_allclose(ode_run["ours"]["vel"][:, i, 0],
                               0.1 + n * H * 0.5 / float(_MFREE.mass), rtol=1e-12)
    i = _case_bodies("amotor, little fmax")[0]
    izz = float(np.asarray(_MFREE.inertia)[2, 2])
    np.testing.assert_allclose(ode_run["ours"]["angvel"][:, i, 2], 0.2 - n * H * 0.01 / izz,
                               rtol=1e-12)


def _rotation_matrices(q):
    """(..., 4) unit quaternions (w, x, y, z) -> (..., 3, 3) rotation matrices."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    rows = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def test_motors_between_free_bodies_conserve_momentum(ode_run):
    """Motor and stop rows are internal: the pair's total linear momentum and its
    angular momentum about the origin stay constant (the lmotor's force acts at the
    midpoint between the bodies, ODE's torque decoupling, so it makes no couple)."""
    idx = _case_bodies("motors between free bodies")
    a = ode_run["ours"]
    pos, quat, vel, angvel = (a[k][:, idx] for k in ("pos", "quat", "vel", "angvel"))
    m, i_body = float(_MBALL.mass), np.asarray(_MBALL.inertia)
    p = m * vel.sum(axis=1)
    np.testing.assert_allclose(p - p[0], 0.0, atol=1e-12)
    rot = _rotation_matrices(quat)
    spin = np.einsum("tbij,jk,tblk,tbl->tbi", rot, i_body, rot, angvel)
    lang = (spin + m * np.cross(pos, vel)).sum(axis=1)
    np.testing.assert_allclose(lang - lang[0], 0.0, atol=1e-10)
    assert np.abs(vel[-1, 0] - vel[0, 0]).max() > 0.01  # the motors act


# ------------------------------------------------------------------ build-time checks

def _builder():
    b = jaxode.WorldBuilder()
    b.add_body(pos=(0.0, 0.0, 0.0))
    b.add_body(pos=(1.0, 0.0, 0.0))
    return b


_X, _Y, _Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


_A, _L = r"joint 0 \(amotor\)", r"joint 0 \(lmotor\)"


@pytest.mark.parametrize("kind,kw,match", [
    ("amotor", dict(num_axes=4, axes=[_X] * 4), _A + r": num_axes must be an integer in \[0, 3\]"),
    ("amotor", dict(num_axes=2, axes=[_X]), _A + r": axes must hold 2"),
    ("amotor", dict(axes=[_X, (0.0, 0.0, 0.0)]), _A + r": axes\[1\] must have non-zero length"),
    ("amotor", dict(axes=[_X, _Y], rel=[1, 3]),
     _A + r": rel must hold 2 value\(s\) in \{0, 1, 2\}"),
    ("amotor", dict(axes=[_X, _Y], rel=[1]), _A + r": rel must hold 2"),
    ("amotor", dict(axes=[_X], mode="xyz"), _A + r": mode must be 'user' or 'euler'"),
    ("amotor", dict(axes=[_X], lo_stop=-0.5), _A + r": lo_stop: a user-mode amotor"),
    ("amotor", dict(axes=[_X], fmax2=1.0), _A + r": has 1 axis\(es\); parameters with suffix '2'"),
    ("amotor", dict(axes=[_X], fmax=-1.0), _A + r": fmax must be in \[0, inf\] N m or N \(inf allowed\) \(got -1.0\)"),
    ("amotor", dict(mode="euler", axes=[_X, _Y, _Z]), _A + r".*axes must hold 2"),
    ("amotor", dict(mode="euler", axes=[_X, (1.0, 1.0, 0.0)]),
     _A + r": axes: in Euler mode axis 2 must be perpendicular"),
    ("amotor", dict(mode="euler", axes=[_X, _Z], rel=[0, 0, 0]),
     _A + r": rel: Euler mode needs axis 0 on body 1"),
    ("amotor", dict(mode="euler", axes=[_X, _Z], num_axes=2),
     _A + r": num_axes must be 3 in Euler mode"),
    ("amotor", dict(mode="euler", axes=[_X, _Z], lo_stop=0.5, hi_stop=0.1),
     _A + r": hi_stop must be >= lo_stop"),
    ("lmotor", dict(axes=[_X], hi_stop=0.1), _L + r": hi_stop: ODE's linear motor has no stops"),
    ("lmotor", dict(num_axes=-1), _L + r": num_axes must be an integer in \[0, 3\]"),
    ("lmotor", dict(axes=[(0.0, float("nan"), 1.0)]), _L + r": axes\[0\] must be finite"),
    ("lmotor", dict(axes=[_X], rel=["body1"]), _L + r": rel must hold 1 value"),
    ("lmotor", dict(axes=[_X], vel3=1.0), _L + r": has 1 axis\(es\); parameters with suffix '3'"),
])
def test_bad_motor_input_names_joint_and_field(kind, kw, match):
    with pytest.raises(ValueError, match=match):
        getattr(_builder(), f"add_{kind}")(0, 1, **kw)


def test_motor_queries_reject_bad_use():
    b = _builder()
    user = b.add_amotor(0, 1, axes=[_X], vel=1.0, fmax=1.0)
    euler = b.add_amotor(0, None, mode="euler", axes=[_X, _Z])
    hinge = b.add_hinge(1, None, axis=_Z)
    model = b.build()
    s = jaxode.init(model)
    with pytest.raises(ValueError, match=r"joint 0 \(amotor\): amotor_angle needs mode='euler'"):
        jaxode.amotor_angle(model, s, user, 0)
    with pytest.raises(ValueError, match=r"joint 1 \(amotor\): axis must be 0, 1 or 2"):
        jaxode.amotor_angle(model, s, euler, 3)
    with pytest.raises(ValueError, match=r"joint 2 is a hinge joint, not amotor"):
        jaxode.amotor_angle_rate(model, s, hinge, 0)
    assert float(jaxode.amotor_angle(model, s, euler, 1)) == 0.0  # zero at the build pose


def test_motor_joints_keep_contacts_on():
    """ODE never excludes contacts of motor-joined bodies (only a near callback that
    asks dAreConnected does): overlapping spheres joined by a motor keep their pair;
    collide=False drops it, as for other joints."""
    def pairs(**kw):
        b = _builder()
        b.add_sphere(0.6, body=0)
        b.add_sphere(0.6, body=1)
        b.add_amotor(0, 1, axes=[_X], **kw)
        b.add_lmotor(0, 1, axes=[_X], **kw)
        return sum(int(g.geom1.shape[0]) for g in b.build().pair_groups)

    assert pairs() == 1
    assert pairs(collide=False) == 0
