"""ODE's auto-disable (docs/ODE_FEATURES.md section 5) against libode 0.16 (double).

One scene, built in both engines, holds every case: a box dropped on a plane
(settles, disables itself), a sphere flying without gravity at it (re-enables
it on contact), a sphere dropped far away with its own thresholds, average
samples, steps and time, and three floating spheres joined by ball joints
(the walk re-enables bodies through joints; the three fall asleep together).
Three worlds of it run in one vmapped, jitted float64 scan (one compile):
w0 as built, w1 with every body's flag off (params per world), w2 with
``jaxode.enable`` (dBodyEnable) called on the dropped sphere mid-way. Each is
compared step by step with its own ODE world: which bodies are enabled after
every step, and the positions.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.build import mass as mass_lib

odelib = pytest.importorskip("tools.conformance.odelib")
try:
    odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"libode not available: {e}", allow_module_level=True)

DT = 0.01
CHUNK = 10          # steps per call of the compiled scan
NCHUNK = 12         # 120 steps
ENABLE_AT = 40      # w2: dBodyEnable(body 2) after this many steps
R = 0.25


def _sphere_inertia(m=1.0, r=R):
    return np.eye(3) * 0.4 * m * r * r


# body: pos, vel, gravity, geom, mass, inertia, auto-disable overrides (None: world's)
BODIES = [
    dict(pos=(0.0, 0.0, 0.6), geom=("box", (1.0, 1.0, 1.0)), inertia=np.eye(3) / 6.0,
         bits=(2, 1)),
    dict(pos=(-2.0, 0.0, 0.5), vel=(2.0, 0.0, 0.0), gravity=False, geom=("sphere", R),
         bits=(0, 2)),
    dict(pos=(5.0, 0.0, 0.4), geom=("sphere", R), bits=(0, 1),
         adis=dict(linear_threshold=0.05, angular_threshold=0.05, average_samples=3, steps=4,
                   time=0.055)),
    dict(pos=(0.0, 6.0, 3.0), gravity=False, geom=("sphere", R), bits=(0, 0)),
    dict(pos=(1.0, 6.0, 3.0), gravity=False, geom=("sphere", R), bits=(0, 0)),
    dict(pos=(2.0, 6.0, 3.0), gravity=False, geom=("sphere", R), bits=(0, 0)),
]
# (category, collide) bits: only box-plane, sphere 1-box and sphere 2-plane can
# collide (fewer pair kinds: a cheaper compile); the plane is (1, 0).
JOINTS = [(3, 4, (0.5, 6.0, 3.0)), (4, 5, (1.5, 6.0, 3.0))]
START_DISABLED = (4, 5)     # dBodyDisable before the first step (w0, w2)


def _inertia(bd):
    return bd.get("inertia", _sphere_inertia())


def _build_jaxode():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81), auto_disable=True)
    b.add_plane(category_bits=1, collide_bits=0)
    for bd in BODIES:
        kw = {f"auto_disable_{k}": v for k, v in bd.get("adis", {}).items()}
        i = b.add_body(pos=bd["pos"], vel=bd.get("vel", (0, 0, 0)),
                       mass=mass_lib.from_inertia(1.0, _inertia(bd)),
                       gravity=bd.get("gravity", True), **kw)
        kind, size = bd["geom"]
        (b.add_box if kind == "box" else b.add_sphere)(
            size, body=i, category_bits=bd["bits"][0], collide_bits=bd["bits"][1])
    for b1, b2, anchor in JOINTS:
        b.add_ball(b1, b2, anchor=anchor)
    return b.build()


_ODE_SET = dict(linear_threshold="dBodySetAutoDisableLinearThreshold",
                angular_threshold="dBodySetAutoDisableAngularThreshold",
                average_samples="dBodySetAutoDisableAverageSamplesCount",
                steps="dBodySetAutoDisableSteps", time="dBodySetAutoDisableTime")


def _run_ode(flag: bool, disabled=(), enable_at=None):
    """(enabled (n, nbody) bool, pos (n, nbody, 3)) after every step in libode."""
    en, pos = [], []
    with odelib.OdeWorld(gravity=(0, 0, -9.81), reverse_contacts=True) as w:
        w.world_call("dWorldSetAutoDisableFlag", int(flag))
        w.add_plane((0, 0, 1), 0.0, category_bits=1, collide_bits=0)
        for bd in BODIES:
            i = w.add_body(bd["pos"], vel=bd.get("vel", (0, 0, 0)), mass=1.0,
                           inertia=_inertia(bd), gravity=bd.get("gravity", True))
            for k, v in bd.get("adis", {}).items():
                w.body_call(_ODE_SET[k], i, v)
            kind, size = bd["geom"]
            (w.add_box if kind == "box" else w.add_sphere)(
                size, body=i, category_bits=bd["bits"][0], collide_bits=bd["bits"][1])
        for b1, b2, anchor in JOINTS:
            w.add_joint("ball", b1, b2, anchor=anchor)
        for i in disabled:
            w.body_call("dBodyDisable", i)
        for k in range(CHUNK * NCHUNK):
            if k == enable_at:
                w.body_call("dBodyEnable", 2)
            w.step(DT)
            en.append([bool(w.body_call("dBodyIsEnabled", i)) for i in range(len(BODIES))])
            pos.append(w.state()["pos"])
    return np.array(en), np.array(pos)


@functools.partial(jax.jit, static_argnums=())
def _chunk(model, states, params):
    def one(s, p):
        def body(s, _):
            s = jaxode.step(model, s, DT, p)
            return s, (s.body_enabled, s.pos)
        return jax.lax.scan(body, s, None, length=CHUNK)
    return jax.vmap(one)(states, params)


@pytest.fixture(scope="module")
def runs():
    with jax.enable_x64(True):
        model = _build_jaxode()
        s0 = jaxode.init(model)
        sd = s0
        for i in START_DISABLED:
            sd = jaxode.disable(sd, i)
        p = model.params
        p_off = p.replace(body_auto_disable=jnp.zeros_like(p.body_auto_disable))
        states = jax.tree.map(lambda *x: jnp.stack(x), sd, s0, sd)
        params = jax.tree.map(lambda *x: jnp.stack(x), p, p_off, p)
        en, pos = [], []
        for c in range(NCHUNK):
            if c * CHUNK == ENABLE_AT:
                w2 = jaxode.enable(jax.tree.map(lambda x: x[2], states), 2)
                states = jax.tree.map(lambda a, b: a.at[2].set(b), states, w2)
            states, (e, x) = _chunk(model, states, params)
            en.append(np.asarray(e))
            pos.append(np.asarray(x))
        en = np.concatenate(en, axis=1)    # (3 worlds, steps, nbody)
        pos = np.concatenate(pos, axis=1)
    ode = [_run_ode(True, START_DISABLED), _run_ode(False),
           _run_ode(True, START_DISABLED, enable_at=ENABLE_AT)]
    return dict(model=model, en=en, pos=pos, ode=ode, final=states)


def _first(col, value, start=0):
    idx = np.flatnonzero(col[start:] == value)
    return int(idx[0]) + start + 1 if idx.size else None   # step number (1-based)


def test_box_disables_at_odes_step(runs):
    """(1) The dropped box settles; ODE and jaxode disable it after the same step,
    and every body's enabled flag agrees with ODE after every step."""
    en, (oen, _) = runs["en"][0], runs["ode"][0]
    step = _first(en[:, 0], False)
    assert step is not None and 10 < step < 60
    assert step == _first(oen[:, 0], False)
    np.testing.assert_array_equal(en, oen)


def test_box_reenabled_by_contact_at_odes_step(runs):
    """(2) The flying sphere (no gravity, never idle-tested before it touches
    anything) re-enables the sleeping box on the step of its first contact,
    the step the gap 2 - 0.5 - R = 1.25 m closes at 2 m/s, as in ODE."""
    en, (oen, opos) = runs["en"][0], runs["ode"][0]
    off = _first(en[:, 0], False)
    back = _first(en[:, 0], True, start=off)
    assert back == _first(oen[:, 0], True, start=off)
    # contact is found at the start of a step, on the positions before it
    x_before = -2.0 + 2.0 * DT * (back - 1)
    assert x_before + R >= -0.5 - 1e-9 > -2.0 + 2.0 * DT * (back - 2) + R
    assert en[back - 1, 1]   # the sphere itself stayed enabled


def test_per_body_thresholds_samples_and_time(runs):
    """(3) The far sphere has its own thresholds (0.05), 3 averaged samples, 4
    steps and 0.055 s: it sleeps at ODE's step, not the box's; the floating
    jointed spheres (two disabled at the start) are re-enabled through the
    joints on step 1 and fall asleep together, as in ODE."""
    en, (oen, _) = runs["en"][0], runs["ode"][0]
    s2 = _first(en[:, 2], False)
    assert s2 is not None and s2 == _first(oen[:, 2], False)
    assert s2 != _first(en[:, 0], False)
    assert en[0, 3:].all() and oen[0, 3:].all()
    s3 = _first(en[:, 3], False)
    assert s3 == _first(en[:, 4], False) == _first(en[:, 5], False) == _first(oen[:, 3], False)


def test_positions_and_frozen_bodies(runs):
    """Positions follow ODE's: the one-contact and jointed spheres (bodies 2-5)
    to 1e-9 m over all steps; the box and the flying sphere to 1e-6 m until they
    meet (the box's four contacts: QuickStep's row shuffle, ~1e-8 m; after the
    impact the multi-contact solve drifts apart, docs/CONFORMANCE.md). A
    disabled body does not move."""
    hit = _first(runs["en"][0][:, 0], True, start=_first(runs["en"][0][:, 0], False))
    for w in range(3):
        ours, ode = runs["pos"][w], runs["ode"][w][1]
        np.testing.assert_allclose(ours[:, 2:], ode[:, 2:], atol=1e-9, rtol=0)
        np.testing.assert_allclose(ours[:hit, :2], ode[:hit, :2], atol=1e-6, rtol=0)
    en, pos = runs["en"][0], runs["pos"][0]
    for k in range(1, en.shape[0]):
        asleep = ~en[k] & ~en[k - 1]
        np.testing.assert_array_equal(pos[k][asleep], pos[k - 1][asleep])


def test_flag_off_per_world(runs):
    """World 1 (params.body_auto_disable = 0 in one world of the batch): nothing
    ever sleeps, as ODE without auto-disable."""
    assert runs["en"][1].all() and runs["ode"][1][0].all()


def test_enable_restarts_the_countdown(runs):
    """dBodyEnable resets adis_stepsleft / adis_timeleft: with jaxode.enable on
    the dropped sphere after step 40, world 2 agrees with ODE's world, where
    dBodyEnable was called at the same point."""
    en, (oen, _) = runs["en"][2], runs["ode"][2]
    np.testing.assert_array_equal(en, oen)
    assert not runs["en"][0][ENABLE_AT - 1, 2]          # asleep when enabled
    # Counted by hand: the countdowns restart at 4 steps and 0.055 s; the sphere
    # is idle (zero velocity) from the first step, so steps_left <= 0 after 4
    # steps and time_left <= 0 after 6: awake for 5 steps, asleep after the 6th
    # (without the reset it would sleep again after the first).
    assert en[ENABLE_AT:ENABLE_AT + 5, 2].all() and not en[ENABLE_AT + 5, 2]


def test_save_load_round_trip(runs, tmp_path):
    model, final = runs["model"], runs["final"]
    with jax.enable_x64(True):
        jaxode.save(tmp_path / "w.npz", model, final)
        m2, s2 = jaxode.load(tmp_path / "w.npz")
    assert m2.auto_disable and m2.auto_disable_buffer == model.auto_disable_buffer
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(s2)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(s2.auto_disable.lvel, final.auto_disable.lvel)


def test_errors():
    b = jaxode.WorldBuilder()
    b.add_sphere(0.1, body=b.add_body())
    m = b.build()
    s = jaxode.init(m)
    assert not m.auto_disable and s.body_enabled is None
    with pytest.raises(ValueError, match="without auto-disable"):
        jaxode.disable(s, 0)
    with pytest.raises(ValueError, match="auto_disable_steps must be an integer >= 0"):
        jaxode.WorldBuilder(auto_disable_steps=2.5)
    with pytest.raises(ValueError, match="auto_disable_linear_threshold"):
        jaxode.WorldBuilder().add_body(auto_disable_linear_threshold=-1.0)
    with pytest.raises(ValueError, match="auto_disable must be True or False"):
        jaxode.WorldBuilder(auto_disable=1)
    b = jaxode.WorldBuilder(auto_disable=True)
    b.add_body()
    s = jaxode.init(b.build())
    with pytest.raises(ValueError, match=r"body must be an existing body index in \[0, 0\]"):
        jaxode.enable(s, 3)
    assert bool(jaxode.is_enabled(jaxode.disable(s, 0), 0)) is False
