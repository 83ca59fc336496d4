"""Joints (ball, hinge, slider, fixed) against analytic mechanics and the real ODE."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

G = 9.81


def _agm(a, b):
    for _ in range(30):
        a, b = 0.5 * (a + b), math.sqrt(a * b)
    return a


def _period_physical_pendulum(i_pivot, m, length, theta0):
    """Exact period of a physical pendulum: 4 sqrt(I/(m g L)) K(sin(theta0/2)), K by the AGM."""
    k = math.sin(theta0 / 2)
    K = math.pi / (2 * _agm(1.0, math.sqrt(1 - k * k)))
    return 4 * math.sqrt(i_pivot / (m * G * length)) * K


def _zero_crossing_period(angle, h):
    """Period from successive upward zero crossings (linear interpolation)."""
    s = np.sign(angle)
    idx = np.where((s[:-1] < 0) & (s[1:] >= 0))[0]
    t = [(i + angle[i] / (angle[i] - angle[i + 1])) * h for i in idx]
    return float(np.mean(np.diff(t)))


@pytest.fixture(scope="module")
def pendulum():
    """A 1 kg sphere (r 0.05 m) on a 1 m massless hinge, two amplitudes in one vmapped call."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    m = jaxode.mass.sphere(radius=0.05, total=1.0)
    bob = b.add_body(pos=(0.0, 0.0, -1.0), mass=m)
    j = b.add_hinge(bob, None, anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0))
    model = b.build()
    h, n = 0.001, 5000
    amps = [0.05, math.pi / 2]

    def start(a):
        s = jaxode.init(model)
        # rotate the bob about the hinge axis by a: position and orientation
        pos = jnp.asarray([[-math.sin(a), 0.0, -math.cos(a)]], s.pos.dtype)
        quat = jnp.asarray([[math.cos(a / 2), 0.0, math.sin(a / 2), 0.0]], s.quat.dtype)
        return s.replace(pos=pos, quat=quat)

    states = jax.tree.map(lambda *x: jnp.stack(x), *[start(a) for a in amps])
    _, traj = jax.vmap(lambda s: jaxode.rollout(model, s, n, h))(states)
    angle = np.asarray(jax.vmap(jax.vmap(lambda p, q: jaxode.hinge_angle(
        model, jaxode.init(model).replace(pos=p, quat=q), j)))(traj.pos, traj.quat))
    return dict(model=model, m=m, h=h, amps=amps, angle=angle, traj=traj, joint=j)


@pytest.mark.parametrize("k", [0, 1])
def test_pendulum_period_matches_exact_physical_pendulum(pendulum, k):
    m = pendulum["m"]
    i_pivot = m.inertia[1, 1] + m.mass * 1.0
    theta0 = pendulum["amps"][k]
    expected = _period_physical_pendulum(i_pivot, m.mass, 1.0, theta0)
    measured = _zero_crossing_period(pendulum["angle"][k], pendulum["h"])
    assert abs(measured - expected) / expected < 0.01, (measured, expected)
    # the hinge angle starts where we placed the bob (ODE's sign: rotation of body 1 about the axis)
    assert abs(abs(pendulum["angle"][k][0]) - theta0) < 0.01


def test_pendulum_anchor_error_stays_small_and_energy_does_not_grow(pendulum):
    pos = np.asarray(pendulum["traj"].pos[:, :, 0])          # (2, n, 3)
    radius = np.linalg.norm(pos, axis=-1)
    assert np.abs(radius - 1.0).max() < 2e-3
    vel = np.asarray(pendulum["traj"].vel[:, :, 0])
    w = np.asarray(pendulum["traj"].angvel[:, :, 0])
    m = pendulum["m"]
    energy = 0.5 * m.mass * (vel ** 2).sum(-1) + 0.5 * m.inertia[1, 1] * (w ** 2).sum(-1) \
        + m.mass * G * pos[..., 2]
    assert np.all(energy[:, -1] <= energy[:, 0] + 1e-3 * m.mass * G)


@pytest.fixture(scope="module")
def wheel():
    """A disc-like body on a hinge to the world, no gravity, for motors and stops."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
    m = jaxode.mass.cylinder(radius=0.2, length=0.05, direction=2, total=2.0)
    body = b.add_body(mass=m)
    j = b.add_hinge(body, None, anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0))
    return b.build(), j, m.inertia[1, 1]


def test_motor_reaches_target_in_one_step_or_accelerates_at_fmax_over_inertia(wheel):
    model, j, inertia = wheel
    h = 0.01
    p = model.params
    fmax = jnp.asarray([100.0, 0.05], p.joint_fmax.dtype)
    params = jaxode.batch(p, 2)
    params = params.replace(joint_vel=params.joint_vel.at[:, j, 0].set(3.0),
                            joint_fmax=params.joint_fmax.at[:, j, 0].set(fmax))
    states = jaxode.batch(jaxode.init(model), 2)
    finals, traj = jax.vmap(lambda s, q: jaxode.rollout(model, s, 10, h, params=q))(states, params)
    rate = np.asarray(traj.angvel[:, :, 0, 1])
    # strong motor: the target in the first step (up to the CFM softness of the motor row)
    assert rate[0, 0] == pytest.approx(3.0, rel=1e-3)
    # weak motor: constant acceleration fmax / I
    np.testing.assert_allclose(rate[1], 0.05 / inertia * h * np.arange(1, 11), rtol=1e-3)


def test_stops_hold_and_bounce(wheel):
    model, j, inertia = wheel
    h = 0.001
    s0 = jaxode.init(model)
    s = s0.replace(angvel=jnp.asarray([[0.0, 2.0, 0.0]], s0.angvel.dtype))
    results = {}
    for bounce in (0.0, 0.5):
        p = model.params.replace(
            joint_lo_stop=model.params.joint_lo_stop.at[j, 0].set(-0.2),
            joint_hi_stop=model.params.joint_hi_stop.at[j, 0].set(0.2),
            joint_bounce=model.params.joint_bounce.at[j, 0].set(bounce))
        final, traj = jaxode.rollout(model, s, 400, h, params=p)
        angle = np.asarray(jax.vmap(lambda q: jaxode.hinge_angle(
            model, final.replace(quat=q), j))(traj.quat))
        results[bounce] = (angle, np.asarray(traj.angvel[:, 0, 1]))
    angle, rate = results[0.0]
    assert angle.max() < 0.2 + 2e-3          # the stop holds (ERP-limited overshoot)
    # without bounce the only outgoing speed is the ERP correction of the overshoot,
    # at most stop_erp * (incoming speed * h) / h = 0.2 * 2 rad/s
    assert rate[-1] <= 0.0 and abs(rate[-1]) <= 0.2 * 2.0 + 1e-3
    angle, rate = results[0.5]
    assert angle.max() < 0.2 + 2e-3
    assert rate[-1] == pytest.approx(-1.0, rel=0.05)   # rebounds at bounce * incoming speed


def test_fixed_joint_keeps_relative_pose_and_feedback_carries_the_weight():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    m = jaxode.mass.box(size=(0.1, 0.2, 0.3), total=2.0)
    a = b.add_body(pos=(0.0, 0.0, 1.0), angvel=(1.0, 2.0, 3.0), mass=m)
    c = b.add_body(pos=(0.3, 0.1, 1.2), quat=(0.9, 0.3, 0.1, 0.0), angvel=(1.0, 2.0, 3.0), mass=m)
    b.add_fixed(c, a)
    hang = b.add_body(pos=(2.0, 0.0, -1.0), mass=jaxode.mass.sphere(radius=0.1, total=3.0))
    jh = b.add_ball(hang, None, anchor=(2.0, 0.0, 0.0))
    model = b.build()
    s0 = jaxode.init(model)
    final, _ = jaxode.rollout(model, s0, 300, 0.005)

    def rel(s):
        q = np.asarray(s.quat)
        wa, xa, ya, za = q[0]
        ra = np.array([[1 - 2 * (ya * ya + za * za), 2 * (xa * ya - wa * za), 2 * (xa * za + wa * ya)],
                       [2 * (xa * ya + wa * za), 1 - 2 * (xa * xa + za * za), 2 * (ya * za - wa * xa)],
                       [2 * (xa * za - wa * ya), 2 * (ya * za + wa * xa), 1 - 2 * (xa * xa + ya * ya)]])
        return ra.T @ (np.asarray(s.pos[1]) - np.asarray(s.pos[0]))

    np.testing.assert_allclose(rel(final), rel(s0), atol=2e-3)
    f1, t1, f2, t2 = jaxode.joint_feedback(final, jh)
    np.testing.assert_allclose(np.asarray(f1), [0.0, 0.0, 3.0 * G], atol=1e-3 * 3.0 * G)


def test_slider_motor_and_position_queries():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(pos=(0.0, 0.0, 1.0), mass=jaxode.mass.box(size=(0.1, 0.1, 0.1), total=1.0))
    j = b.add_slider(body, None, axis=(0.0, 0.0, 1.0), vel=0.5, fmax=50.0)
    model = b.build()
    final, _ = jaxode.rollout(model, jaxode.init(model), 100, 0.01)
    assert float(jaxode.slider_position_rate(model, final, j)) == pytest.approx(0.5, rel=1e-3)
    assert float(jaxode.slider_position(model, final, j)) == pytest.approx(0.5, rel=1e-2)
    f1, _, _, _ = jaxode.joint_feedback(final, j)
    assert float(f1[2]) == pytest.approx(G, rel=1e-3)        # the motor carries the weight


BAD = [
    ("axis", lambda b, x: b.add_hinge(x, None, axis=(0, 0, 0))),
    ("body1", lambda b, x: b.add_hinge(7, None)),
    ("body2", lambda b, x: b.add_ball(x, 9)),
    ("different", lambda b, x: b.add_fixed(x, x)),
    ("hi_stop", lambda b, x: b.add_hinge(x, None, lo_stop=0.5, hi_stop=-0.5)),
    ("fmax", lambda b, x: b.add_slider(x, None, fmax=-1.0)),
    ("unknown", lambda b, x: b.add_hinge(x, None, spring=3.0)),
]


@pytest.mark.parametrize("field,make", BAD, ids=[f for f, _ in BAD])
def test_bad_joint_input_raises(field, make):
    b = jaxode.WorldBuilder()
    x = b.add_body()
    with pytest.raises(ValueError, match=field):
        make(b, x)


def test_joint_to_world_keeps_contacts_with_static_geoms():
    """A body hinged to the world still lands on the static plane (only contacts
    between the two jointed bodies are switched off, as in ODE)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(normal=(0, 0, 1), offset=0.0)
    body = b.add_body(pos=(0.5, 0.0, 0.3), mass=jaxode.mass.sphere(radius=0.1, total=1.0))
    b.add_sphere(radius=0.1, body=body)
    b.add_slider(body, None, axis=(0.0, 0.0, 1.0))
    model = b.build()
    final, _ = jaxode.rollout(model, jaxode.init(model), 100, 0.01)
    # Falls 0.2 m along the slider, then rests on the plane at z = radius.
    assert abs(float(final.pos[0, 2]) - 0.1) < 2e-3
