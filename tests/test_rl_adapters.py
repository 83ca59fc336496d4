"""RL-library adapters (jaxode.envs.to_brax / to_gymnasium / to_sb3) against the
libraries' own code and exact truths.

Default tier (cheap: one body, no joints or geoms):
- Brax: a pushed ball through Brax's own ``training.wrap`` (VmapWrapper or
  DomainRandomizationVmapWrapper, EpisodeWrapper, AutoResetWrapper). Truth:
  exact semi-implicit Euler heights for the per-world gravity drawn by the
  randomization_fn and the force Brax's action maps to; float ``done``; one
  truncation at Brax's episode_length (the adapter counts none itself);
  auto-reset to the first state.
- Gymnasium: gymnasium.utils.env_checker.check_env on the ball; writable
  float32 outputs; the registered ids build through gym.make / gym.make_vec.
Extended tier: Brax PPO trains cart-pole to a return near 500; Brax PPO runs
on pendulum and walker; check_env on the four registered envs with
rendering; SB3 PPO on cart-pole through to_sb3.
"""
import numpy as np
import jax
import jax.numpy as jnp
import pytest

import jaxode
import jaxode.envs as envs

G_LO, G_HI = 8.0, 12.0     # m/s^2, drawn gravity range
H, SKIP = 0.01, 2          # physics step [s], physics steps per env step
F_LO, F_HI = -2.0, 12.0    # N, force range of the env's action (1 kg ball; 12 N >= m g)


class Ball(envs.Env):
    """A 1 kg ball tossed up at v0 ~ U(1, 2) m/s from 0.1 m, pushed up by the
    action force [N]; terminated below the ground (no collision). Semi-implicit
    Euler makes the truth exact: v_k = v_{k-1} + h (F/m - g), z_k = z_{k-1} + h v_k."""

    name = "ball"
    observation_size, action_size, num_actions = 2, 1, None

    def __init__(self, episode_length=1000, randomize=None):
        b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
        self.ball = b.add_body(pos=(0, 0, 0.1), mass=jaxode.mass.box((0.1, 0.1, 0.1), total=1.0))
        super().__init__(b.build(), dt=H, frame_skip=SKIP, episode_length=episode_length,
                         randomize=randomize)
        self.action_low, self.action_high = np.array([F_LO]), np.array([F_HI])
        self.obs_low, self.obs_high = np.array([-np.inf, -np.inf]), np.array([np.inf, np.inf])

    def init_physics(self, key, params):
        ph = jaxode.init(self.model)
        return ph.replace(vel=ph.vel.at[0, 2].set(jax.random.uniform(key, (), ph.vel.dtype, 1, 2))), {}

    def control(self, physics, params, action):
        return jaxode.add_force(physics, self.ball, jnp.stack([0.0, 0.0, action[0]])), params

    def observe(self, physics, params, info):
        return jnp.stack([physics.pos[0, 2], physics.vel[0, 2]])

    def reward_done(self, before, physics, action):
        return physics.pos[0, 2], physics.pos[0, 2] < 0


def ball_truth(z0, v0, g, force, n_env_steps):
    """Heights after each env step (SKIP substeps), exact semi-implicit Euler."""
    z, v, out = z0, v0, []
    for _ in range(n_env_steps):
        for _ in range(SKIP):
            v = v + H * (force - g)
            z = z + H * v
        out.append(z)
    return np.array(out)


# -------------------------------------------------------------------- brax
@pytest.mark.extended  # needs brax: test-extended's extra, not test's
def test_brax_wrappers_episode_truncation_randomization():
    pytest.importorskip("brax")
    from brax.envs.base import Env as BraxEnvBase, State
    from brax.envs.wrappers import training

    benv = envs.to_brax(Ball(episode_length=7))
    assert isinstance(benv, BraxEnvBase) and benv.backend == "jaxode"
    assert benv.dt == pytest.approx(H * SKIP) and benv.physics_dt == H   # dt: control period
    assert benv.observation_size == 2 and benv.action_size == 1 and benv.episode_length == 7
    n, limit = 6, 24                                   # Brax's limit, not the env's 7
    rand = envs.brax_randomization({"gravity": ([0, 0, -G_HI], [0, 0, -G_LO])})
    rng = jax.random.split(jax.random.PRNGKey(3), n)
    env = training.wrap(benv, episode_length=limit, randomization_fn=lambda sys: rand(sys, rng))
    # Brax's actions, in [-1, 1]: -1 pushes down (the ball falls before the limit), 1 holds
    # it up (truncated)
    a = jnp.array([[-1.0], [-1.0], [-0.5], [0.0], [1.0], [1.0]])
    force = F_LO + (np.asarray(a[:, 0]) + 1) / 2 * (F_HI - F_LO)

    @jax.jit
    def run(keys):
        s0 = env.reset(keys)
        def one(s, _):
            s = env.step(s, a)
            return s, s
        return s0, jax.lax.scan(one, s0, None, 2 * limit)[1]

    s0, tr = run(jax.random.split(jax.random.PRNGKey(0), n))
    assert isinstance(s0, State) and s0.metrics == {} and s0.done.dtype == jnp.float32
    g = -np.asarray(s0.info["params"].gravity[:, 2])
    assert np.all((g >= G_LO) & (g <= G_HI)) and len(np.unique(g)) == n   # one draw per world
    assert tr.done.dtype == jnp.float32 and tr.info["truncation"].dtype == jnp.float32
    kinds = set()
    for w in range(n):
        z = ball_truth(0.1, float(s0.obs[w, 1]), g[w], force[w], 2 * limit)
        fall = int(np.argmax(z < 0)) if np.any(z < 0) else 10 ** 6
        k = min(fall, limit - 1)
        done, trunc = np.asarray(tr.done[:, w]), np.asarray(tr.info["truncation"][:, w])
        np.testing.assert_allclose(tr.pipeline_state.pos[:k, w, 0, 2], z[:k], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(tr.reward[:k + 1, w], z[:k + 1], rtol=1e-5, atol=1e-5)
        assert done[k] == 1.0 and not done[:k].any(), (w, k, done)
        assert trunc[k] == (1.0 if fall > limit - 1 else 0.0) and trunc[:k].sum() == 0
        kinds.add(fall > limit - 1)
        # AutoResetWrapper: the state after the ending step is the world's first state
        assert tr.obs[k, w, 0] == pytest.approx(0.1) and tr.obs[k, w, 1] == s0.obs[w, 1]
        assert tr.info["params"].gravity[k, w, 2] == -g[w]                 # its own gravity kept
        assert tr.info["episode_metrics"]["length"][k, w] == k + 1
    assert kinds == {True, False}                     # both endings exercised


@pytest.mark.extended  # needs brax: test-extended's extra, not test's
def test_brax_action_mapping_and_errors():
    pytest.importorskip("brax")
    ball = envs.to_brax(Ball())
    a = jnp.array([[-1.0], [-0.5], [0.0], [1.0], [3.0]])          # 3.0: clipped to 1
    np.testing.assert_allclose(jax.vmap(ball.env_action)(a)[:, 0], [F_LO, 1.5, 5.0, F_HI, F_HI])
    # a discrete env of n actions: [-1, 1] cut into n equal bins
    cart = envs.to_brax("cartpole")
    assert cart.action_size == 1 and cart.dt == pytest.approx(0.02)
    bins = jax.vmap(cart.env_action)(jnp.array([[-1.0], [-1e-3], [0.0], [1.0]]))
    np.testing.assert_array_equal(bins, [0, 0, 1, 1])
    with pytest.raises(ValueError, match="to_brax: env must be a jaxode.envs.Env"):
        envs.to_brax(object())
    with pytest.raises(ValueError, match="unknown environment 'nope'"):
        envs.to_brax("nope")
    rand = envs.brax_randomization({"friction": (0.1, 0.2)})
    with pytest.raises(ValueError, match=r"'friction' is not a per-world parameter of this model"):
        rand(ball.sys, jax.random.split(jax.random.PRNGKey(0), 2))


# --------------------------------------------------------------- gymnasium
def test_gymnasium_check_env_and_writable_outputs():
    gym = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    genv = envs.to_gymnasium(Ball(episode_length=4))
    assert isinstance(genv, gym.Env)
    check_env(genv, skip_render_check=True)             # raises on any failure
    obs, info = genv.reset(seed=1)
    obs2, r, term, trunc, info = genv.step(np.array([1.0], np.float32))
    obs2[0] = 5.0                                       # writable (SB3 writes into them)
    assert obs.dtype == np.float32 and isinstance(r, float) and type(term) is bool
    z = ball_truth(0.1, float(obs[1]), 9.81, 1.0, 4)
    lengths = [1]
    while not (term or trunc):
        _, r, term, trunc, _ = genv.step(np.array([1.0], np.float32))
        lengths.append(len(lengths) + 1)
    assert trunc and not term and len(lengths) == 4 and r == pytest.approx(z[3], rel=1e-5)



def test_gymnasium_registered_ids():
    gym = pytest.importorskip("gymnasium")
    assert set(envs.GYM_IDS) <= set(gym.registry)       # registered by import jaxode
    env = gym.make("jaxode/CartPole-v0", render_mode="rgb_array", continuous=True)
    assert env.spec.id == "jaxode/CartPole-v0" and env.render_mode == "rgb_array"
    assert env.spec.max_episode_steps is None           # the env truncates, no second TimeLimit
    assert env.unwrapped.env.continuous and env.metadata["render_fps"] == 50
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    venv = gym.make_vec("jaxode/Pendulum-v0", num_envs=5)
    assert isinstance(venv, gym.vector.VectorEnv) and venv.num_envs == 5
    assert venv.spec.id == "jaxode/Pendulum-v0" and venv.single_observation_space.shape == (3,)
    with pytest.raises(ValueError, match="render_mode must be None or one of"):
        envs.to_gymnasium("cartpole", render_mode="human")


# ---------------------------------------------------------------- extended
@pytest.mark.extended
def test_brax_ppo_trains_cartpole():
    pytest.importorskip("brax")
    from brax.training.agents.ppo import train as ppo

    env = envs.to_brax("cartpole")
    evals = []
    ppo.train(environment=env, num_timesteps=400_000, episode_length=env.episode_length,
              num_envs=256, batch_size=256, num_minibatches=8, unroll_length=10,
              num_updates_per_batch=4, learning_rate=1e-3, entropy_cost=1e-2, discounting=0.99,
              normalize_observations=True, reward_scaling=0.1, num_evals=5, num_eval_envs=64,
              seed=0, progress_fn=lambda n, m: evals.append(float(m["eval/episode_reward"])))
    assert evals[0] < 100 and max(evals[-2:]) >= 450, evals   # cart-pole's max is 500


@pytest.mark.extended
@pytest.mark.parametrize("name", ["pendulum", "walker"])
def test_brax_ppo_runs(name):
    pytest.importorskip("brax")
    from brax.training.agents.ppo import train as ppo

    env = envs.to_brax(name)
    evals = []
    # pendulum also through Brax's DomainRandomizationVmapWrapper
    rand = envs.brax_randomization({"body_mass": (0.5, 1.5)}) if name == "pendulum" else None
    ppo.train(environment=env, num_timesteps=2_000, episode_length=50, num_envs=16,
              randomization_fn=rand,
              batch_size=16, num_minibatches=2, unroll_length=8, num_updates_per_batch=1,
              num_evals=2, num_eval_envs=4, seed=0,
              progress_fn=lambda n, m: evals.append(float(m["eval/episode_reward"])))
    assert len(evals) == 2 and np.all(np.isfinite(evals))


@pytest.mark.extended
@pytest.mark.parametrize("gid", ["jaxode/CartPole-v0", "jaxode/Pendulum-v0", "jaxode/Walker-v0",
                                 "jaxode/PushBox-v0"])
def test_gymnasium_check_env_registered(gid):
    gym = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    env = gym.make(gid, render_mode="rgb_array")
    check_env(env.unwrapped)
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (240, 320, 3) and frame.dtype == np.uint8 and frame.std() > 0


@pytest.mark.extended
def test_sb3_ppo_cartpole():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    venv = VecMonitor(envs.to_sb3("cartpole", 8, seed=0))
    model = PPO("MlpPolicy", venv, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=1e-3, seed=0)   # rl-zoo's CartPole
    model.learn(2_000)
    first = np.mean([e["r"] for e in model.ep_info_buffer])            # ~random policy: ~20
    model.learn(10_000, reset_num_timesteps=False)
    last = np.mean([e["r"] for e in list(model.ep_info_buffer)[-20:]])
    assert last > max(3 * first, 100), (first, last)


@pytest.mark.extended
def test_sb3_sac_pendulum_runs():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3 import SAC

    venv = envs.to_sb3("pendulum", 2, seed=0)
    model = SAC("MlpPolicy", venv, learning_starts=50, batch_size=32, seed=0)
    model.learn(300)
    buf = model.replay_buffer
    # 300 transitions from 2 worlds in [-2, 2] N m, rewards Pendulum-v1's (<= 0, >= -16.3)
    assert buf.pos == 150 and np.all(np.abs(buf.actions[:150]) <= 2.0)
    assert np.all(buf.rewards[:150] <= 0) and np.all(buf.rewards[:150] >= -16.3)


@pytest.mark.extended
def test_brax_render_draws_the_pole():
    pytest.importorskip("brax")
    env = envs.to_brax("cartpole")
    up = env.env.physics_from(*[jnp.float32(0.0)] * 4)
    leaning = env.env.physics_from(jnp.float32(0.0), jnp.float32(0.0), jnp.float32(0.2), jnp.float32(0.0))
    a, b = env.render([up, leaning], height=60, width=80)
    assert a.shape == (60, 80, 3) and a.dtype == np.uint8
    diff = np.any(a != b, axis=-1)
    assert diff.any() and not diff[-10:].any()     # the pole moved, the cart (lower rows) did not
