"""Friction models and surface features against independent truths (issue 5).

Every scene is one compiled rollout shared by a module fixture; cases are
bodies of one world or worlds of one vmapped batch.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from truths import slide_recursion

# Compile quickly (same semantics): compile time dominates these tests.
from fast_compile import OPTIONS as _FAST  # noqa: E402


def _jit(fn):
    return jax.jit(fn, compiler_options=_FAST)

G = 9.81
H = 0.01




# ------------------------------------------------- Gazebo's friction_pyramid scene
ANGLES = [0.0, 10.0, 20.0, 30.0, 45.0, 60.0, 75.0, 155.0, 250.0]
V0, MU = 2.0, 0.5


@pytest.fixture(scope="module")
def friction_ring():
    """Boxes on two circles pushed outward at V0 (Gazebo's friction_pyramid world):
    the inner ring uses the world's friction model (cone), the outer ring names
    the pyramid model on its surfaces. One world, one compile."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), friction_model="cone")
    b.add_plane(surface=jaxode.Surface(mu=MU), category_bits=1, collide_bits=2)
    for radius, model in ((1.0, None), (3.0, "pyramid")):
        for a in ANGLES:
            th = math.radians(a)
            body = b.add_body(pos=(radius * math.cos(th), radius * math.sin(th), 0.1),
                              vel=(V0 * math.cos(th), V0 * math.sin(th), 0.0),
                              mass=jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0))
            b.add_box(size=(0.2, 0.2, 0.2), body=body, category_bits=2, collide_bits=1,
                      surface=jaxode.Surface(mu=MU, friction=model))
    model = b.build()
    s0 = jaxode.init(model)
    n = 60
    final, traj = _jit(lambda s: jaxode.rollout(model, s, n, H))(s0)
    return dict(model=model, n=n, d=np.asarray(final.pos - s0.pos), vel=np.asarray(final.vel),
                zmin=float(jnp.min(traj.pos[:, :, 2])), zmax=float(jnp.max(traj.pos[:, :, 2])))


def _heading(d):
    return math.degrees(math.atan2(d[1], d[0]))


def _angle_diff(a, b):
    return abs((a - b + 180.0) % 360.0 - 180.0)


def test_cone_friction_boxes_travel_radially_and_equally_far(friction_ring):
    r = friction_ring
    assert r["model"].friction_cone
    ref = slide_recursion(V0, MU, H, r["n"])
    for i, a in enumerate(ANGLES):
        d = r["d"][i]
        assert _angle_diff(_heading(d), a) < 1.0, (a, _heading(d))
        # isotropic: the same discrete stop distance as a slide along an axis
        assert abs(np.hypot(d[0], d[1]) - ref) / ref < 0.01, (a, np.hypot(d[0], d[1]), ref)
        assert np.abs(r["vel"][i]).max() < 1e-3


def test_pyramid_friction_bends_boxes_toward_an_axis(friction_ring):
    """Pyramid: each world axis decelerates at mu g independently, so the
    displacement is (vx|vx|, vy|vy|) / (2 mu g): heading atan2(vy|vy|, vx|vx|);
    boxes on the axes and diagonals keep going radially (Gazebo tutorial)."""
    r = friction_ring
    k = len(ANGLES)
    for i, a in enumerate(ANGLES):
        d = r["d"][k + i]
        vx, vy = math.cos(math.radians(a)), math.sin(math.radians(a))
        pred = math.degrees(math.atan2(vy * abs(vy), vx * abs(vx)))
        assert _angle_diff(_heading(d), pred) < 1.0, (a, _heading(d), pred)
        if a % 45.0 == 0.0:
            assert _angle_diff(_heading(d), a) < 0.1
        else:
            assert _angle_diff(_heading(d), a) > 2.0  # visibly bent toward an axis


def test_friction_ring_stays_on_the_ground(friction_ring):
    # no sinking or lift-off beyond the ERP/CFM penetration (under 1 mm)
    assert friction_ring["zmin"] > 0.099 and friction_ring["zmax"] < 0.101


# --------------------------------------------------------------- kp / kd contacts
KP_CASES = [(1.0e4, 0.01), (4.0e4, 0.01), (1.0e4, 0.005)]  # (kp [N/m], step [s])


@pytest.fixture(scope="module")
def kp_rest():
    """A 1 kg sphere and a 1 kg box resting on a kp/kd plane; a batch of worlds
    over (kp, dt): kp is a Params field, dt a traced step argument (one compile)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    plane = b.add_plane(surface=jaxode.Surface(kp=1.0e4, kd=150.0))
    ball = b.add_body(pos=(0.0, 0.0, 0.1), mass=jaxode.mass.sphere(radius=0.1, total=1.0))
    b.add_sphere(radius=0.1, body=ball)
    box = b.add_body(pos=(1.0, 0.0, 0.1), mass=jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0))
    b.add_box(size=(0.2, 0.2, 0.2), body=box)
    model = b.build()
    n = len(KP_CASES)
    params = jaxode.batch(model.params, n)
    kp = jnp.asarray([c[0] for c in KP_CASES], params.kp.dtype)
    params = params.replace(kp=params.kp.at[:, plane].set(kp),
                            kd=params.kd.at[:, plane].set(2.0 * jnp.sqrt(kp)))  # ~critical
    dts = jnp.asarray([c[1] for c in KP_CASES], params.mu.dtype)
    steps = 300  # 1.5 s or more of simulated time
    states = jaxode.batch(jaxode.init(model), n)

    def run(s, p, dt):
        def body(st, _):
            return jaxode.step(model, st, dt, params=p), None
        return jax.lax.scan(body, s, None, length=steps)[0]

    finals = _jit(jax.vmap(run))(states, params, dts)
    times = np.asarray(finals.time)
    return dict(z=np.asarray(finals.pos[:, :, 2]), times=times)


@pytest.mark.parametrize("case", range(len(KP_CASES)))
def test_kp_contact_sinks_weight_over_stiffness_per_contact(kp_rest, case):
    """ODE's soft contact with ERP/CFM from kp/kd is a spring of stiffness kp per
    contact: a sphere (one contact) sinks m g / kp, a box on four contacts m g / (4 kp)."""
    kp, _ = KP_CASES[case]
    sphere_depth = 0.1 - kp_rest["z"][case, 0]
    box_depth = 0.1 - kp_rest["z"][case, 1]
    assert abs(sphere_depth - G / kp) / (G / kp) < 0.05, (sphere_depth, G / kp)
    assert abs(box_depth - G / (4 * kp)) / (G / (4 * kp)) < 0.05, (box_depth, G / (4 * kp))


def test_vmapped_batch_with_contact_compaction_steps():
    """Regression: with fewer contact slots than pairs the solver's row bodies
    differ between worlds and its batching rule falls back to plain vmap (it
    used to recurse forever). The sphere whose contact does not fit falls freely."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    b.add_plane()
    for i in range(3):
        body = b.add_body(pos=(float(i), 0.0, 0.1))
        b.add_sphere(radius=0.1, body=body)
    model = b.build(contact_capacity=2)
    states = jaxode.batch(jaxode.init(model), 2)
    out = _jit(jax.vmap(lambda s: jaxode.step(model, s, H)))(states)
    z = np.asarray(out.pos[:, :, 2])
    np.testing.assert_allclose(z[:, 2], 0.1 - G * H * H, rtol=1e-5)  # semi-implicit Euler
    assert np.all(np.abs(z[:, :2] - 0.1) < 1e-4)
    assert np.all(np.asarray(out.overflow_contacts) == 1)


# ------------- conveyor (motion1), FDS slip, static friction, restitution threshold
BELT = [0.5, -0.3, 0.2]  # belt speed along world x [m/s], one world each
PUSH = [1.0, 2.0, 4.0]  # force on the slipping box [N]
SLIP, MU_BELT = 0.01, 0.4
ALPHA = math.radians(25.0)  # tan = 0.466: between mu = 0.3 and static_mu = 0.6
MU_DYN, MU_STATIC = 0.3, 0.6
THRESH, E_BOUNCE = 1.0, 0.5
V_IMPACT = [0.8, 1.5, 1.2]  # below and above the restitution threshold [m/s]


@pytest.fixture(scope="module")
def surface_worlds():
    """One scene for the conveyor, slip, static-friction and restitution cases,
    each body on its own plane (category bits), three worlds (one compile):

    body 0: box on a belt (plane with fdir1 = x, motion1 = BELT[k]);
    body 1: box on a plane with slip1 = slip2 = SLIP, pushed along x by PUSH[k];
    body 2: box at rest on a 25 degree incline, static friction on in worlds 0
            and 2, off in world 1;
    body 3: sphere hitting a floor at V_IMPACT[k] (restitution 0.5, threshold 1 m/s).
    """
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    belt = b.add_plane(surface=jaxode.Surface(mu=MU_BELT, fdir1=(1.0, 0.0, 0.0), motion1=0.5),
                       category_bits=1, collide_bits=16)
    b.add_plane(surface=jaxode.Surface(mu=5.0, slip1=SLIP), category_bits=2, collide_bits=32)
    n = np.array([-math.sin(ALPHA), 0.0, math.cos(ALPHA)])
    b.add_plane(normal=n, surface=jaxode.Surface(mu=MU_DYN), category_bits=4, collide_bits=64)
    b.add_plane(surface=jaxode.Surface(mu=0.0, bounce=E_BOUNCE, restitution_threshold=THRESH),
                category_bits=8, collide_bits=128)
    box_mass = jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0)
    a = b.add_body(pos=(0.0, 0.0, 0.1), mass=box_mass)
    b.add_box(size=(0.2, 0.2, 0.2), body=a, category_bits=16, collide_bits=1,
              surface=jaxode.Surface(mu=MU_BELT))
    bb = b.add_body(pos=(0.0, 2.0, 0.1), mass=box_mass)
    b.add_box(size=(0.2, 0.2, 0.2), body=bb, category_bits=32, collide_bits=2,
              surface=jaxode.Surface(mu=5.0))
    q = (math.cos(-ALPHA / 2), 0.0, math.sin(-ALPHA / 2), 0.0)  # box tilted with the incline
    box = b.add_body(pos=tuple(0.1 * n), quat=q, mass=box_mass)
    gbox = b.add_box(size=(0.2, 0.2, 0.2), body=box, category_bits=64, collide_bits=4,
                     surface=jaxode.Surface(mu=MU_DYN, static_mu=MU_STATIC, static_speed=0.01))
    ball = b.add_body(pos=(5.0, 0.0, 0.1), mass=jaxode.mass.sphere(radius=0.1, total=1.0))
    b.add_sphere(radius=0.1, body=ball, category_bits=128, collide_bits=8,
                 surface=jaxode.Surface(mu=0.0, bounce=E_BOUNCE, restitution_threshold=THRESH))
    model = b.build()
    nw = len(BELT)
    params = jaxode.batch(model.params, nw)
    params = params.replace(
        motion1=params.motion1.at[:, belt].set(jnp.asarray(BELT, params.mu.dtype)),
        static_mu=params.static_mu.at[1, gbox].set(-1.0))  # world 1: no static friction
    push = jnp.asarray(PUSH, params.mu.dtype)
    states = jaxode.batch(jaxode.init(model), nw)
    states = states.replace(vel=states.vel.at[:, ball, 2].set(
        -jnp.asarray(V_IMPACT, states.vel.dtype)))
    steps = 100

    def run(s, p, f):
        def body(st, _):
            st = jaxode.add_force(st, bb, jnp.stack([f, 0.0 * f, 0.0 * f]))
            st = jaxode.step(model, st, H, params=p)
            return st, st.vel
        return jax.lax.scan(body, s, None, length=steps)

    finals, vel = _jit(jax.vmap(run))(states, params, push)
    return dict(vel=np.asarray(vel), steps=steps, n=n,
                d=np.asarray(finals.pos - states.pos))


@pytest.fixture(scope="module")
def conveyor_slip(surface_worlds):
    return surface_worlds


@pytest.mark.parametrize("world", range(len(BELT)))
def test_box_on_conveyor_reaches_belt_speed(conveyor_slip, world):
    """Friction accelerates the box at mu g (semi-implicit Euler: v_k = min(k mu g h,
    v_belt)) until it moves with the belt."""
    vb = BELT[world]
    v = conveyor_slip["vel"][world, :, 0, 0]
    assert abs(v[-1] - vb) < 1e-3, (v[-1], vb)
    ref = np.sign(vb) * np.minimum(np.arange(1, v.size + 1) * MU_BELT * G * H, abs(vb))
    np.testing.assert_allclose(v, ref, atol=0.01 * abs(vb) + 1e-3)
    assert np.all(np.abs(conveyor_slip["vel"][world, -10:, 0, 1:]) < 1e-3)


def test_force_dependent_slip_steady_speed_is_slip_times_force(conveyor_slip):
    """FDS (ODE's dContactSlip): the friction rows' CFM = slip, so at steady state
    J v = slip * lambda per contact; four contacts share the push F equally:
    v = slip * F / 4, proportional to F."""
    # median over the last 0.2 s: a step where the 4-point manifold flickers
    # (float32 depths at rest) leaves an isolated spike under 20 PGS iterations
    v = np.median(conveyor_slip["vel"][:, -20:, 1, 0], axis=1)
    ref = SLIP * np.asarray(PUSH) / 4.0
    np.testing.assert_allclose(v, ref, rtol=0.03)
    # not rotating or tipping while it slips
    assert np.all(np.abs(conveyor_slip["vel"][:, -1, 1, 1:]) < 1e-4)




@pytest.fixture(scope="module")
def static_bounce(surface_worlds):
    r = surface_worlds
    return dict(steps=r["steps"], d=r["d"][:, 2], vel=r["vel"][:, :, 3:4])


def test_static_friction_holds_box_that_dynamic_friction_lets_slide(static_bounce):
    r = static_bounce
    down = np.array([-math.cos(ALPHA), 0.0, -math.sin(ALPHA)])  # down the slope
    t = r["steps"] * H
    # world 0: tan(alpha) < static_mu: held (only the contact's ERP/CFM creep)
    assert np.linalg.norm(r["d"][0]) < 1e-3, r["d"][0]
    # world 1: dynamic friction only: slides with a = g (sin - mu cos) (semi-implicit Euler)
    a = G * (math.sin(ALPHA) - MU_DYN * math.cos(ALPHA))
    ref = a * H * H * r["steps"] * (r["steps"] + 1) / 2
    s = float(np.dot(r["d"][1], down))
    assert abs(s - ref) / ref < 0.03, (s, ref, t)


def test_restitution_threshold_stops_bouncing_below_threshold_speed(static_bounce):
    vz = static_bounce["vel"][:, 0, 0, 2]  # sphere's vertical velocity after the impact step
    assert abs(vz[0]) < 0.05, vz  # 0.8 m/s < 1 m/s: no bounce
    # above: full restitution (ODE), less the CFM's give cfm/h * lambda ~ 2.3e-3 m/s
    assert abs(vz[1] - E_BOUNCE * V_IMPACT[1]) < 4e-3, vz
    assert abs(vz[2] - E_BOUNCE * V_IMPACT[2]) < 4e-3, vz


# --------------------------------------------------- rolling and spinning friction
R_BALL, L_CAP, V_ROLL, W_SPIN = 0.1, 0.4, 0.5, 10.0
MU_R, MU_SPIN = 0.1, 0.01


@pytest.fixture(scope="module")
def rolling():
    """A sphere and a capsule (lying along y) rolling along x at V_ROLL, and a
    sphere spinning about z at W_SPIN on a frictionless contact. World 0 has
    rolling friction MU_R and spinning friction MU_SPIN [m], world 1 none
    (the same compiled model: the rows exist but are bounded by zero)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    b.add_plane(surface=jaxode.Surface(mu=1.0), category_bits=1, collide_bits=2)
    ball_m = jaxode.mass.sphere(radius=R_BALL, total=1.0)
    ball = b.add_body(pos=(0.0, 0.0, R_BALL), vel=(V_ROLL, 0.0, 0.0),
                      angvel=(0.0, V_ROLL / R_BALL, 0.0), mass=ball_m)
    b.add_sphere(R_BALL, body=ball, category_bits=2, collide_bits=1,
                 surface=jaxode.Surface(mu=1.0, rolling=MU_R))
    cap_m = jaxode.mass.capsule(radius=R_BALL, length=L_CAP, total=1.0)
    q = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)  # long axis along y
    cap = b.add_body(pos=(0.0, 2.0, R_BALL), quat=q, vel=(V_ROLL, 0.0, 0.0),
                     angvel=(0.0, V_ROLL / R_BALL, 0.0), mass=cap_m)
    b.add_capsule(R_BALL, L_CAP, body=cap, category_bits=2, collide_bits=1,
                  surface=jaxode.Surface(mu=1.0, rolling=MU_R))
    spin = b.add_body(pos=(0.0, 4.0, R_BALL), angvel=(0.0, 0.0, W_SPIN), mass=ball_m)
    b.add_sphere(R_BALL, body=spin, category_bits=2, collide_bits=1,
                 surface=jaxode.Surface(mu=0.0, spinning=MU_SPIN))
    model = b.build()
    assert model.angular_friction
    params = jaxode.batch(model.params, 2)
    params = params.replace(rolling=params.rolling.at[1].set(-1.0),
                            spinning=params.spinning.at[1].set(-1.0))
    steps = 100
    _, traj = _jit(jax.vmap(lambda p: jaxode.rollout(model, jaxode.init(model), steps, H,
                                                        params=p)))(params)
    return dict(vel=np.asarray(traj.vel), angvel=np.asarray(traj.angvel),
                z=np.asarray(traj.pos[..., 2]), steps=steps,
                i_cap=float(np.asarray(cap_m.inertia)[2, 2]), i_ball=float(np.asarray(ball_m.inertia)[0, 0]))


def test_rolling_friction_stops_sphere_and_capsule_at_the_analytic_rate(rolling):
    """Rolling resistance torque MU_R r m g on a body rolling without slip:
    a = MU_R g / (1 + I / (m r^2)) (I about the rolling axis)."""
    t = 0.3  # s, before either stops
    k = int(round(t / H)) - 1
    for body, inertia in ((0, rolling["i_ball"]), (1, rolling["i_cap"])):
        a = MU_R * G / (1.0 + inertia / (1.0 * R_BALL ** 2))
        v = rolling["vel"][0, k, body, 0]
        assert abs((V_ROLL - v) - a * t) / (a * t) < 0.03, (body, V_ROLL - v, a * t)
        t_stop = V_ROLL / a
        assert t_stop < rolling["steps"] * H
        assert abs(rolling["vel"][0, -1, body, 0]) < 1e-3  # stopped and stays stopped
        # the rolling axis (y); the capsule's tip about x is ODE's seesaw, see
        # test_rolling_capsule_seesaw_is_no_larger_than_libodes
        assert abs(rolling["angvel"][0, -1, body, 1]) < 1e-2
        if body == 0:
            assert np.abs(rolling["angvel"][0, -1, body]).max() < 1e-2
        # without rolling friction it keeps rolling
        assert rolling["vel"][1, -1, body, 0] > 0.99 * V_ROLL


def test_spinning_friction_alone_stops_a_spinning_sphere(rolling):
    """Spin torque bound MU_SPIN m g: alpha = MU_SPIN m g / I (Coulomb mu = 0)."""
    alpha = MU_SPIN * G / rolling["i_ball"]
    k = 19  # after 0.2 s
    w = rolling["angvel"][0, k, 2, 2]
    assert abs((W_SPIN - w) - alpha * 0.2) / (alpha * 0.2) < 0.03, (W_SPIN - w, alpha * 0.2)
    assert abs(rolling["angvel"][0, -1, 2, 2]) < 1e-3
    assert abs(rolling["angvel"][1, -1, 2, 2] - W_SPIN) < 1e-3 * W_SPIN  # off: keeps spinning
    assert np.abs(rolling["vel"][:, :, 2, :2]).max() < 1e-4  # no sliding


def test_angular_friction_neither_sinks_nor_lifts(rolling):
    dz = rolling["z"] - R_BALL
    # the capsule's first step is a free fall of about g h^2 = 1 mm before its
    # contact appears; ERP then restores it
    assert np.all(np.abs(dz) < 1.5e-3), (dz.min(), dz.max())
    # with angular friction every body ends at rest at the ERP/CFM penetration
    # (no drift either way); without it the rolling capsule keeps dipping by up to
    # g h^2 where its contact lapses at zero depth, with or without these rows.
    # The capsule at rest rocks end to end with a period of ~16 steps (ODE's
    # seesaw, see test_rolling_capsule_seesaw_is_no_larger_than_libodes), so it
    # is at rest once in each of its last 16 steps, the balls at the last one.
    assert np.all(np.abs(dz[0, -1, [0, 2]]) < 1e-4), dz[0, -1]
    assert np.abs(dz[0, -16:, 1]).min() < 1e-4, dz[0, -16:, 1]


def test_rolling_capsule_seesaw_is_no_larger_than_libodes(rolling):
    """A capsule lying on a plane with rolling friction rocks end to end once
    it stops, in ODE 0.16 itself: the rolling rows about the horizontal axis
    across the capsule (t1/t2 at both end contacts, bounded by rho lambda_n)
    hold back the ERP's levelling of a slight tilt until one end's normal
    impulse drops to zero; that end lifts off, and for one step the capsule
    pivots about the other end (|w_x| ~ 0.25 rad/s), then ERP levels it again.
    libode (double) rests on the same scene with rho = MU_R r for 300 steps:
    it has steps with one contact and the same kick; jaxode's rocking (float32)
    must be no larger."""
    odelib = pytest.importorskip("tools.conformance.odelib")
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")
    m = jaxode.mass.capsule(radius=R_BALL, length=L_CAP, total=1.0)
    q = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)
    w = odelib.OdeWorld(gravity=(0.0, 0.0, -G))
    w.add_plane((0, 0, 1), 0.0, surface=dict(mu=1.0))
    bb = w.add_body(mass=float(m.mass), inertia=np.asarray(m.inertia), pos=(0.0, 2.0, R_BALL),
                    quat=q, vel=(V_ROLL, 0.0, 0.0), angvel=(0.0, V_ROLL / R_BALL, 0.0))
    w.add_capsule(R_BALL, L_CAP, body=bb, surface=dict(mu=1.0, rho=MU_R * R_BALL))
    single, wx = 0, []
    for k in range(300):
        w.step(H)
        single += k >= 10 and w.ncontacts_last < 2
        wx.append(abs(w.angvel(0)[0]))
    w.close()
    ode_kick = max(wx[10:])
    assert single >= 5 and ode_kick > 0.1, (single, ode_kick)  # ODE rocks
    ours = np.abs(rolling["angvel"][0, 10:, 1, 0]).max()
    assert ours < 1.05 * ode_kick, (ours, ode_kick)


# ----------------------------------------------- against libode 0.16 (float64)
def test_rolling_spinning_and_conveyor_rows_match_libode():
    """ODE 0.16's dContactRolling rows (rho = rolling * r for a sphere on a plane,
    rhoN = spinning) and dContactMotion1/2/N with a bounce (measured relative to
    motionN) on one scene: a sphere rolling, spinning and hopping on a moving
    floor. jaxode in float64 must agree to rounding."""
    odelib = pytest.importorskip("tools.conformance.odelib")
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")
    m = jaxode.mass.sphere(radius=R_BALL, total=2.0)
    body_kw = dict(pos=(0.0, 0.0, R_BALL - 1e-3), vel=(0.8, -0.3, 0.0), angvel=(1.0, 3.0, 6.0))
    floor = dict(mu=0.6, motion1=0.3, motion2=-0.2, motionN=0.05, bounce=0.3, bounce_vel=0.01)
    ball = dict(mu=0.6, bounce=0.3, bounce_vel=0.01)
    n, h = 120, 0.01
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
        b.add_plane(surface=jaxode.Surface(**floor))
        body = b.add_body(mass=m, **body_kw)
        b.add_sphere(R_BALL, body=body, surface=jaxode.Surface(rolling=0.05, spinning=0.004,
                                                                **ball))
        model = b.build()
        _, traj = _jit(lambda s: jaxode.rollout(model, s, n, h))(jaxode.init(model))
        ours = jax.tree.map(np.asarray, traj)
    w = odelib.OdeWorld(gravity=(0.0, 0.0, -G))
    w.add_plane((0, 0, 1), 0.0, surface=floor)
    bb = w.add_body(mass=m.mass, inertia=m.inertia, **body_kw)
    w.add_sphere(R_BALL, body=bb, surface=dict(rho=0.05 * R_BALL, rhoN=0.004, **ball))
    pos, angvel = [], []
    for _ in range(n):
        w.step(h)
        st = w.state()
        pos.append(st["pos"][0])
        angvel.append(st["angvel"][0])
    w.close()
    np.testing.assert_allclose(ours.pos[:, 0], np.asarray(pos), atol=1e-9)
    np.testing.assert_allclose(ours.angvel[:, 0], np.asarray(angvel), atol=1e-8)
    # and the floor carried it: it ends moving with the belt, not spinning
    assert abs(np.hypot(*ours.vel[-1, 0, :2]) - math.hypot(0.3, 0.2)) < 0.02
