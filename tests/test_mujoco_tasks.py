"""Gymnasium v5's MuJoCo tasks on jaxode (jaxode.envs.make("ant"), ...), checked
against Gymnasium's own envs and MuJoCo 4 run in the test.

Truths: Gymnasium's ``_get_obs`` / ``_get_rew`` / ``is_healthy`` on a MuJoCo state
(qpos, qvel, ctrl) equal to jaxode's; MuJoCo's ``mj_forward`` body quantities
(xpos, xipos, subtree_com, cinert, cvel, site_xpos) and ``qfrc_fluid``; statics
(contact forces of a body at rest carry its weight, with no torque about its
centre of mass); MuJoCo's Euler trajectory of the inverted pendulum.
"""
from __future__ import annotations

import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.tools import mujoco_data as md
from jaxode.tools.envs import make
from jaxode.tools.envs.core import EnvState

gym = pytest.importorskip("gymnasium")
mujoco = pytest.importorskip("mujoco")
from gymnasium.envs.mujoco.humanoid_v5 import mass_center  # noqa: E402

ASSETS = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets")

GYM_IDS = {
    "ant": "Ant-v5", "halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5",
    "humanoid": "Humanoid-v5", "humanoidstandup": "HumanoidStandup-v5",
    "inverted_pendulum": "InvertedPendulum-v5",
    "inverted_double_pendulum": "InvertedDoublePendulum-v5", "pusher": "Pusher-v5",
    "reacher": "Reacher-v5", "swimmer": "Swimmer-v5", "walker2d": "Walker2d-v5",
}


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _gym_env(gid):
    return gym.make(gid).unwrapped


def _gym_reward(name, g0, g1, action):
    """Gymnasium's reward and termination for the step g0 -> g1 (both envs with
    fresh kinematics: ``set_state`` ran ``mj_forward``), from the env's own
    ``_get_rew`` / ``is_healthy`` and its definitions of the forward velocity."""
    dt = g0.dt
    if name == "ant":
        vx = (g1.data.body(1).xpos[0] - g0.data.body(1).xpos[0]) / dt
        return g1._get_rew(vx, action)[0], not g1.is_healthy
    if name == "humanoid":
        vx = (mass_center(g1.model, g1.data)[0] - mass_center(g0.model, g0.data)[0]) / dt
        return g1._get_rew(vx, action)[0], not g1.is_healthy
    if name == "humanoidstandup":
        return g1._get_rew(g1.data.qpos[2], action)[0], False
    if name in ("halfcheetah", "hopper", "walker2d", "swimmer"):
        vx = (g1.data.qpos[0] - g0.data.qpos[0]) / dt
        healthy = g1.is_healthy if hasattr(g1, "is_healthy") else True
        return g1._get_rew(vx, action)[0], not healthy
    if name == "inverted_pendulum":
        term = bool(abs(g1._get_obs()[1]) > 0.2)
        return float(not term), term
    if name == "inverted_double_pendulum":
        x, _, y = g1.data.site_xpos[0]
        term = bool(y <= 1)
        return g1._get_rew(x, y, term)[0], term
    return g1._get_rew(action)[0], False


@pytest.mark.parametrize("name", sorted(GYM_IDS))
def test_observation_and_reward_are_gymnasiums(name):
    """Start from Gymnasium's reset state, step MuJoCo with a random action;
    jaxode's env given the same two states (qpos, qvel) and ctrl observes and
    rewards as Gymnasium does (observation: sizes, order, values; reward;
    termination). The contact terms (cfrc_ext, qfrc_constraint) need a step's
    contact forces, which a state set from qpos has not: they are zero on both
    sides here and checked against statics below."""
    env = make(name)
    g0, g1 = _gym_env(GYM_IDS[name]), _gym_env(GYM_IDS[name])
    g0.reset(seed=1)
    g1.reset(seed=2)
    rng = np.random.default_rng(3)
    q0, v0 = g0.data.qpos.copy(), g0.data.qvel.copy()
    if g0.model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        # Gymnasium's reset noise leaves the free joint's quaternion unnormalised in
        # qpos (MuJoCo normalises it where it uses it); jaxode's qpos is normalised
        q0[3:7] /= np.linalg.norm(q0[3:7])
        g0.set_state(q0, v0)
    a = rng.uniform(env.action_low, env.action_high)
    sim = mujoco.MjData(g0.model)
    sim.qpos[:], sim.qvel[:], sim.ctrl[:] = q0, v0, a
    mujoco.mj_step(g0.model, sim, nstep=g0.frame_skip)
    g1.data.ctrl[:] = a
    g1.set_state(sim.qpos.copy(), sim.qvel.copy())
    obs = g1._get_obs()
    reward, term = _gym_reward(name, g0, g1, a)

    assert env.observation_size == obs.shape[0] == g1.observation_space.shape[0]
    assert env.action_size == g1.action_space.shape[0]
    np.testing.assert_allclose(env.action_low, g1.action_space.low)
    np.testing.assert_allclose(env.action_high, g1.action_space.high)
    assert env.frame_skip == g1.frame_skip and env.dt == pytest.approx(g1.model.opt.timestep)
    dt = env.dtype
    st0 = env.coords.set(env._init_state, jnp.asarray(q0, dt), jnp.asarray(v0, dt))
    st1 = env.coords.set(env._init_state, jnp.asarray(sim.qpos, dt), jnp.asarray(sim.qvel, dt))
    info = {"ctrl": jnp.asarray(a, dt), "steps": jnp.zeros((), jnp.int32),
            "truncation": jnp.zeros((), bool)}
    before = EnvState(physics=st0, params=env.model.params, obs=None, reward=None, done=None,
                      key=None, info=info)
    o = np.asarray(env.observe(st1, env.model.params, info))
    r, t = env.reward_done(before, st1, jnp.asarray(a, dt))
    # float32 state: relative 1e-5 of each entry (cinert's entries reach 10 kg m^2)
    np.testing.assert_allclose(o, obs, rtol=1e-5, atol=2e-5)
    assert float(r) == pytest.approx(reward, rel=1e-5, abs=2e-5)
    assert bool(t) == bool(term)
    # the reset state's observation too (Gymnasium's reset, no step yet)
    o0 = np.asarray(env.observe(st0, env.model.params, info))
    g0.data.ctrl[:] = a
    mujoco.mj_forward(g0.model, g0.data)
    np.testing.assert_allclose(o0, g0._get_obs(), rtol=1e-5, atol=2e-5)


def test_unhealthy_states_terminate_as_gymnasium():
    """Hopper, walker2d, ant and humanoid: states outside Gymnasium's healthy
    ranges (each bound crossed in turn) terminate, with the healthy reward gone."""
    for name, idx, values in (("hopper", 1, (0.69, 0.71)), ("hopper", 2, (-0.21, 0.19)),
                              ("walker2d", 1, (0.79, 2.01, 1.2)), ("ant", 2, (0.19, 1.01, 0.5)),
                              ("humanoid", 2, (0.99, 2.01, 1.4))):
        env = make(name)
        g = _gym_env(GYM_IDS[name])
        g.reset(seed=0)
        rd = env.reward_done
        for v in values:
            q = g.data.qpos.copy()
            q[idx] = v
            g.set_state(q, np.zeros_like(g.data.qvel))
            st = env.coords.set(env._init_state, jnp.asarray(q, env.dtype))
            before = EnvState(physics=st, params=env.model.params, obs=None, reward=None,
                              done=None, key=None, info={})
            _, term = rd(before, st, jnp.zeros(env.action_size, env.dtype))
            assert bool(term) == (not g.is_healthy), (name, idx, v)


def test_body_quantities_are_mujocos():
    """xpos, xmat, xipos, subtree_com, cinert, cvel and site_xpos of random
    states (float64) equal MuJoCo's mj_forward: humanoid (13 bodies, 3-hinge
    bodies with intermediates), pusher (welded bodies), the double pendulum's
    site."""
    with jax.enable_x64(True):
        for f in ("humanoid.xml", "pusher_v5.xml", "inverted_double_pendulum.xml"):
            b = jaxode.load_mjcf(os.path.join(ASSETS, f))
            m = b.build()
            co, table = b.mjcf_info["coordinates"], b.mjcf_info["mj_bodies"]
            mm = mujoco.MjModel.from_xml_path(os.path.join(ASSETS, f))
            d = mujoco.MjData(mm)
            rng = np.random.default_rng(0)
            qpos = mm.qpos0 + rng.uniform(-0.4, 0.4, mm.nq)
            if mm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
                qpos[3:7] /= np.linalg.norm(qpos[3:7])
            qvel = rng.normal(size=mm.nv)
            d.qpos[:], d.qvel[:] = qpos, qvel
            mujoco.mj_forward(mm, d)
            s = co.set(jaxode.init(m), qpos, qvel)
            data = md.body_data(table, s)
            assert table.nbody == mm.nbody
            np.testing.assert_allclose(table.mass, mm.body_mass, atol=1e-12)
            for k in ("xpos", "xipos", "subtree_com", "cinert", "cvel"):
                np.testing.assert_allclose(np.asarray(getattr(data, k)), getattr(d, k),
                                           atol=1e-10, err_msg=f"{f} {k}")
            np.testing.assert_allclose(np.asarray(data.xmat).reshape(-1, 9), d.xmat, atol=1e-10)
            for name in table.sites:
                np.testing.assert_allclose(np.asarray(md.site_xpos(table, data, name)),
                                           d.site(name).xpos, atol=1e-10)
            np.testing.assert_allclose(float(md.mass_center(table, data)[0]),
                                       mass_center(mm, d)[0], atol=1e-10)


def test_fluid_forces_are_mujocos():
    """Swimmer's inertia-box drag (density 4000, viscosity 0.1) at random states:
    the body forces mapped to joint space with MuJoCo's mj_applyFT equal
    MuJoCo's qfrc_fluid (float64)."""
    path = os.path.join(ASSETS, "swimmer.xml")
    with jax.enable_x64(True):
        b = jaxode.load_mjcf(path)
        m = b.build()
        co, table, fluid = (b.mjcf_info[k] for k in ("coordinates", "mj_bodies", "fluid"))
        assert (fluid.density, fluid.viscosity) == (4000.0, 0.1)
        mm = mujoco.MjModel.from_xml_path(path)
        d = mujoco.MjData(mm)
        rng = np.random.default_rng(1)
        for _ in range(3):
            qpos, qvel = mm.qpos0 + rng.uniform(-0.5, 0.5, mm.nq), rng.normal(size=mm.nv)
            d.qpos[:], d.qvel[:] = qpos, qvel
            mujoco.mj_forward(mm, d)
            s = co.set(jaxode.init(m), qpos, qvel)
            data = md.body_data(table, s)
            ft = np.asarray(md.fluid_forces(table, s, fluid, data))
            q = np.zeros(mm.nv)
            for i in range(1, table.nbody):
                mujoco.mj_applyFT(mm, d, ft[i, 3:].copy(), ft[i, :3].copy(),
                                  np.asarray(data.xipos[i]).copy(), i, q)
            np.testing.assert_allclose(q, d.qfrc_fluid, rtol=1e-9, atol=1e-9)
            assert np.abs(d.qfrc_fluid).max() > 100  # the drag is not negligible here


RESTING = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 0.1">
      <freejoint/>
      <geom name="a" type="box" size="0.2 0.1 0.1" mass="2"/>
      <body name="side" pos="0.3 0 0">
        <geom name="b" type="box" size="0.1 0.1 0.1" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_cfrc_ext_of_a_resting_body_carries_its_weight():
    """A free body of two MJCF bodies (the second welded to it: one ODE body)
    resting on a plane: the contact forces on the two bodies (cfrc_ext, by the
    geom each was written in) add up to m g upward, with no torque about the
    centre of mass (statics), and each body's force is where its geom touches
    (both carry load: the centre of mass lies between them)."""
    b = jaxode.load_mjcf(RESTING)
    b.iterations = 50
    m = b.build()
    table = b.mjcf_info["mj_bodies"]
    s = jax.jit(lambda s: jaxode.rollout(m, s, 200, 0.005)[0])(jaxode.init(m))
    c = np.asarray(md.cfrc_ext(m, table, s))
    data = md.body_data(table, s)
    total = c[1] + c[2]
    weight = 3.0 * 9.81
    np.testing.assert_allclose(total[3:], [0, 0, weight], atol=1e-3 * weight)
    # both bodies share the root's subtree com, so their torques add about it
    np.testing.assert_allclose(total[:3], 0.0, atol=1e-3 * weight * 0.1)
    assert c[1, 5] > 0.1 * weight and c[2, 5] > 0.1 * weight
    assert np.all(c[0] == 0)
    # each body's load acts inside its own geom's footprint: the torque about y of a
    # force (f_x, f_z) at (x, 0) on the floor is (0 - z_com) f_x - (x - x_com) f_z (the
    # split among the 8 corners is statically indeterminate, the footprint is not)
    x_com, z_com = float(data.subtree_com[1, 0]), float(data.subtree_com[1, 2])
    for body, half in ((1, 0.2), (2, 0.1)):
        x_load = x_com + (-z_com * c[body, 3] - c[body, 1]) / c[body, 5]
        x_geom = float(data.xpos[body, 0])
        assert abs(x_load - x_geom) <= half + 1e-4, (body, x_load, x_geom)


def test_inverted_pendulum_falls_as_in_mujoco():
    """jaxode's InvertedPendulum (batched reset and step, action 0.3) against
    MuJoCo's Euler from the same four start states: the cart and the pole
    (falling 0.8 rad in 0.48 s) agree to 1e-2 over 12 env steps; then the
    episodes terminate as the pole passes 0.2 rad."""
    env = make("inverted_pendulum")
    s = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 4))
    q0 = np.asarray(jax.vmap(env.qpos)(s.physics), np.float64)
    v0 = np.asarray(jax.vmap(env.qvel)(s.physics), np.float64)
    assert np.all(np.abs(q0 - env.init_qpos) <= 0.01 + 1e-7) and np.all(np.abs(v0) <= 0.01 + 1e-7)
    mm = mujoco.MjModel.from_xml_path(env.xml_path)
    mm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    ds = [mujoco.MjData(mm) for _ in range(4)]
    for d, q, v in zip(ds, q0, v0):
        d.qpos[:], d.qvel[:] = q, v
    done_at = np.full(4, -1)
    for k in range(12):
        s = env.step_batch(s, np.full((4, 1), 0.3, np.float32))
        q = np.asarray(jax.vmap(env.qpos)(s.physics))
        for w, d in enumerate(ds):
            d.ctrl[:] = 0.3
            mujoco.mj_step(mm, d, nstep=env.frame_skip)
            np.testing.assert_allclose(q[w], d.qpos, atol=1e-2)
            if done_at[w] < 0 and bool(s.done[w]):
                done_at[w] = k
                assert abs(d.qpos[1]) > 0.19
        np.testing.assert_array_equal(np.asarray(s.reward), np.where(np.asarray(s.done), 0, 1))
    assert np.all(done_at >= 0)  # every pole fell past 0.2 rad and ended its episode


def test_registered_and_options_checked():
    """gym ids registered; v5's options reach the env; bad options name the field."""
    for gid in ("jaxode/Ant-v0", "jaxode/Humanoid-v0", "jaxode/Walker2d-v0", "jaxode/Reacher-v0"):
        assert gid in gym.registry
    env = make("hopper", ctrl_cost_weight=0.5, healthy_z_range=(0.5, 2.0), reset_noise_scale=0.0)
    assert env.options["ctrl_cost_weight"] == 0.5 and env.options["healthy_z_range"] == (0.5, 2.0)
    s = env.reset(jax.random.PRNGKey(0))
    np.testing.assert_allclose(np.asarray(env.qpos(s.physics)), env.init_qpos, atol=1e-6)
    with pytest.raises(ValueError, match="unknown option.*ctrl_weight"):
        make("hopper", ctrl_weight=1.0)
    with pytest.raises(ValueError, match="healthy_z_range must be a \\(low, high\\) pair"):
        make("hopper", healthy_z_range=0.7)
    with pytest.raises(ValueError, match="reset_noise_scale must be a number >= 0"):
        make("ant", reset_noise_scale=-1)
    with pytest.raises(ValueError, match="xml_file 'nope.xml'"):
        make("ant", xml_file="nope.xml")
    no_cfrc = make("ant", include_cfrc_ext_in_observation=False)
    assert no_cfrc.observation_size == 27


def test_from_mjcf_takes_the_users_functions():
    """from_mjcf: default observation qpos + qvel (MuJoCo's sizes), the user's
    reward and termination, the actuators' ctrlrange as the action bounds; a
    reward that returns no (reward, terminated) pair is refused by name."""
    from jaxode.tools.envs import from_mjcf

    path = os.path.join(ASSETS, "reacher.xml")
    mm = mujoco.MjModel.from_xml_path(path)

    def reward(env, before, physics, action):
        x = env.body_xpos(physics, "fingertip")
        return -x[0], x[0] > 10.0

    env = from_mjcf(path, reward=reward, frame_skip=2)
    assert env.observation_size == mm.nq + mm.nv
    np.testing.assert_allclose(env.action_low, mm.actuator_ctrlrange[:, 0])
    s = env.reset(jax.random.PRNGKey(0))
    data = mujoco.MjData(mm)
    mujoco.mj_forward(mm, data)
    r, t = env.reward_done(s, s.physics, jnp.zeros(2))
    assert float(r) == pytest.approx(-data.body("fingertip").xpos[0], abs=1e-6) and not bool(t)
    bad = from_mjcf(path, reward=lambda env, b, p, a: 0.0)
    with pytest.raises(ValueError, match="must return \\(reward, terminated\\)"):
        bad.reward_done(s, s.physics, jnp.zeros(2))
