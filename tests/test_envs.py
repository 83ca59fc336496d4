"""RL environments (jaxode.envs) against independent truths.

- cart-pole: the Barto-Sutton-Anderson equations (Gymnasium's CartPole
  equations, uniform pole of half-length l), integrated here with RK4 at
  1 ms, for the per-world masses drawn by domain randomisation, free and
  with a constant push; termination at 12 deg.
- auto-reset: a tossed ball (exact semi-implicit Euler) ends by falling or by
  the time limit; the next episode is a new draw or the first one again.
- pendulum: Gymnasium's Pendulum-v1 reward formula.
- Gymnasium adapter (cart-pole): spaces, dtypes, seeding, next-step autoreset,
  Gymnasium's own RecordEpisodeStatistics wrapper on top.
- push-box: a box sliding on the plane after the pusher lets go decelerates
  at mu g (Coulomb), for per-world mu.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode.tools.envs as envs

THETA_LIMIT = 12 * 2 * math.pi / 360


# ------------------------------------------------------------------- truths
def barto_rhs(y, force, m_cart, m_pole, l=0.5, g=9.8):
    """Cart-pole (Barto et al. 1983; Gymnasium CartPole-v1): y = (x, x', th, th')."""
    x, xd, th, thd = y
    s, c = math.sin(th), math.cos(th)
    total = m_cart + m_pole
    temp = (force + m_pole * l * thd * thd * s) / total
    thacc = (g * s - c * temp) / (l * (4.0 / 3.0 - m_pole * c * c / total))
    xacc = temp - m_pole * l * thacc * c / total
    return np.array([xd, xacc, thd, thacc])


def rk4(f, y, t_end, h=1e-3):
    for _ in range(int(round(t_end / h))):
        k1 = f(y)
        k2 = f(y + 0.5 * h * k1)
        k3 = f(y + 0.5 * h * k2)
        k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


# --------------------------------------------------------------- validation
def test_make_and_randomize_validation():
    with pytest.raises(ValueError, match="unknown environment 'hoppr'"):
        envs.make("hoppr")
    with pytest.raises(ValueError, match="unknown option.*'forse'"):
        envs.make("cartpole", forse=5.0)
    with pytest.raises(ValueError, match="frame_skip must be an integer >= 1"):
        envs.make("pendulum", frame_skip=0)
    with pytest.raises(ValueError, match="'mass' is not a per-world parameter"):
        envs.make("cartpole", randomize={"mass": (0.5, 1.0)})
    with pytest.raises(ValueError, match=r"randomize\['mu'\]: lo must be <= hi"):
        envs.make("cartpole", randomize={"mu": (1.0, 0.5)})
    with pytest.raises(ValueError, match=r"randomize\['body_mass'\]: values must be in \(0, inf\) kg"):
        envs.make("cartpole", randomize={"body_mass": (0.0, 1.0)})
    with pytest.raises(ValueError, match=r"randomize\['body_mass'\]: bounds of shapes \(3,\)"):
        envs.make("cartpole", randomize={"body_mass": ([1, 1, 1], [2, 2, 2])})
    with pytest.raises(ValueError, match=r"randomize\['erp'\] must be a pair"):
        envs.make("cartpole", randomize={"erp": 0.5})


# ---------------------------------------------------------------- cart-pole
N_CART = 6
CART_STEPS = 40


@pytest.fixture(scope="module")
def cartpole_env():
    """Continuous cart-pole at dt 2 ms x 10 with randomised cart and pole masses
    (one compiled step_batch shared by the tests)."""
    return envs.make("cartpole", continuous=True, dt=0.002, frame_skip=10,
                     randomize={"body_mass": ([0.5, 0.05], [1.5, 0.2])})


@pytest.fixture(scope="module")
def cartpole_run(cartpole_env):
    """Six worlds, 40 env steps; worlds 3-5 push with a = +0.3 (3 N). Returns the
    env, the stacked states and the Barto truth at each env step."""
    env = cartpole_env
    start = env.reset_batch(jax.random.split(jax.random.PRNGKey(7), N_CART))
    y0 = np.array([[0.0, 0.0, 0.05, 0.0], [0.1, -0.2, -0.03, -0.1], [0.0, 0.1, 0.04, 0.2],
                   [0.0, 0.0, 0.0, 0.0], [-0.05, 0.0, 0.04, 0.0], [0.0, 0.0, -0.05, 0.1]])
    phys = jax.jit(jax.vmap(env.physics_from))(*jnp.asarray(y0.T, jnp.float32))
    state = start.replace(physics=phys, obs=jnp.asarray(y0, jnp.float32))
    action = jnp.asarray([[0.0]] * 3 + [[0.3]] * 3, jnp.float32)
    states = [state]
    for _ in range(CART_STEPS):
        states.append(env.step_batch(states[-1], action))
    st = jax.tree.map(lambda *x: np.stack([np.asarray(a) for a in x]), *states)
    force = np.asarray(action[:, 0]) * env.force
    truth = np.zeros((CART_STEPS + 1, N_CART, 4))
    for w in range(N_CART):
        mc, mp = (float(v) for v in st.params.body_mass[0, w])
        truth[0, w] = y = y0[w]
        for k in range(1, CART_STEPS + 1):
            truth[k, w] = y = rk4(lambda y: barto_rhs(y, force[w], mc, mp), y, env.control_dt)
    return env, st, truth


def test_cartpole_matches_barto_equations(cartpole_run):
    env, st, truth = cartpole_run
    checked = 0
    for w in range(N_CART):
        for k in range(1, CART_STEPS + 1):
            if abs(truth[k, w, 2]) > THETA_LIMIT:
                break
            # jaxode's semi-implicit step at 2 ms vs the continuous equations:
            # first-order error, <= 1.7e-3 (rad, rad/s, m, m/s) by 12 degrees
            np.testing.assert_allclose(st.obs[k, w], truth[k, w], atol=3e-3, rtol=0,
                                       err_msg=f"world {w} step {k}")
            checked += 1
    assert checked > 12 * N_CART  # every world ran well into the fall


def test_cartpole_termination(cartpole_run):
    env, st, truth = cartpole_run
    for w in range(N_CART):
        ends = np.flatnonzero(st.done[1:, w]) + 1
        assert ends.size, f"world {w}: the pole should fall within {CART_STEPS} steps"
        k = ends[0]
        # the truth crosses 12 degrees between steps k-1 and k (allow 2 ms of timing)
        th = np.abs(truth[:, w, 2])
        assert th[k - 1] < THETA_LIMIT + 2e-3 and th[k] > THETA_LIMIT - 2e-3, (w, k, th[k - 1:k + 1])
        assert np.abs(st.obs[k, w, 2]) > THETA_LIMIT >= np.abs(st.obs[k - 1, w, 2])
        assert np.all(st.reward[1:k + 1, w] == 1.0) and np.all(st.info["steps"][:k + 1, w] == np.arange(k + 1))
        assert not st.info["truncation"][k, w]


def test_domain_randomisation_draws(cartpole_run):
    env, st, _ = cartpole_run
    m = st.params.body_mass[0]                       # (worlds, 2): cart, pole
    assert np.all((m[:, 0] >= 0.5) & (m[:, 0] <= 1.5) & (m[:, 1] >= 0.05) & (m[:, 1] <= 0.2))
    assert len(np.unique(m[:, 0])) == N_CART and len(np.unique(m[:, 1])) == N_CART
    # inertia follows the mass (same rod, new density): I / m unchanged
    base = env.model.params
    ratio = st.params.body_inertia[0] / m[:, :, None, None]
    np.testing.assert_allclose(ratio, np.broadcast_to(
        np.asarray(base.body_inertia) / np.asarray(base.body_mass)[:, None, None], ratio.shape),
        rtol=1e-5, atol=1e-9)
    # untouched fields stay the model's
    np.testing.assert_array_equal(st.params.gravity[0], np.broadcast_to(base.gravity, (N_CART, 3)))
    # a scalar range gives one value per world shared by all entries
    ranges = envs.check_randomize(base, {"mu": (0.2, 0.9)})
    mu = jax.jit(jax.vmap(lambda k: envs.randomize_params(k, base, ranges).mu))(
        jax.random.split(jax.random.PRNGKey(0), 64))
    assert mu.shape == (64, base.mu.shape[0]) and np.all(mu == mu[:, :1])
    assert 0.2 <= float(mu.min()) and float(mu.max()) <= 0.9 and float(mu.std()) > 0.1


# --------------------------------------------------------------- auto-reset
TOSS_LIMIT = 20


class Toss(envs.Env):
    """A ball tossed up at v0 ~ U(1, 2) m/s from 0.1 m; terminated when it falls
    below the ground (no collision), truncated after 20 steps of 0.02 s.
    Semi-implicit Euler makes the truth exact: v_k = v0 - k g h,
    z_k = z0 + h sum_{i=1..k} v_i."""

    name = "toss"
    observation_size, action_size, num_actions = 2, 1, None

    def __init__(self, randomize):
        import jaxode
        b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
        self.ball = b.add_body(pos=(0, 0, 0.1))
        super().__init__(b.build(), dt=0.01, frame_skip=2, episode_length=TOSS_LIMIT,
                         randomize=randomize)
        self.action_low, self.action_high = -np.ones(1), np.ones(1)

    def init_physics(self, key, params):
        import jaxode
        ph = jaxode.init(self.model)
        return ph.replace(vel=ph.vel.at[0, 2].set(jax.random.uniform(key, (), ph.vel.dtype, 1, 2))), {}

    def control(self, physics, params, action):
        return physics, params

    def observe(self, physics, params, info):
        return jnp.stack([physics.pos[0, 2], physics.vel[0, 2]])

    def reward_done(self, before, physics, action):
        return jnp.ones(()), physics.pos[0, 2] < 0


def toss_truth(v0, g, n_sub):
    """Heights after each physics substep (exact semi-implicit Euler)."""
    h = 0.01
    v = v0 - g * h * np.arange(1, n_sub + 1)
    return 0.1 + h * np.cumsum(v)


def test_auto_reset_resample_and_first_state():
    env = Toss(randomize={"gravity": ([0, 0, -12.0], [0, 0, -8.0])})
    new, keep = envs.AutoReset(env), envs.AutoReset(env, resample=False)
    n = 4

    @jax.jit
    def run(keys):
        s1, s2 = new.reset_batch(keys), keep.reset_batch(keys)

        def one(c, _):
            c = (new.step_batch(c[0], jnp.zeros((n, 1))), keep.step_batch(c[1], jnp.zeros((n, 1))))
            return c, c
        return (s1, s2), jax.lax.scan(one, (s1, s2), None, length=2 * TOSS_LIMIT)[1]

    (f1, f2), (t1, t2) = run(jax.random.split(jax.random.PRNGKey(2), n))
    kinds = set()
    for first, tr, resample in ((f1, t1, True), (f2, t2, False)):
        for w in range(n):
            g, v0 = -float(first.params.gravity[w, 2]), float(first.obs[w, 1])
            assert 8.0 <= g <= 12.0 and 1.0 <= v0 <= 2.0
            z = toss_truth(v0, g, 4 * TOSS_LIMIT)[1::2]   # after each env step (2 substeps)
            fall = int(np.argmax(z < 0))                   # env step (0-based) where it falls
            k = min(fall, TOSS_LIMIT - 1)                  # ... unless the time limit is first
            truncated = fall > TOSS_LIMIT - 1
            kinds.add(truncated)
            done = np.asarray(tr.done[:, w])
            assert done[k] and not done[:k].any(), (w, k, np.flatnonzero(done))
            assert bool(tr.info["truncation"][k, w]) == truncated
            np.testing.assert_allclose(tr.obs[:k, w, 0], z[:k], rtol=1e-5, atol=1e-6)
            assert tr.reward[k, w] == 1.0
            # the state after the ending step is the next episode's start
            assert tr.info["steps"][k, w] == 0 and tr.obs[k, w, 0] == pytest.approx(0.1)
            assert not tr.info["truncation"][k + 1, w]
            g2, v2 = -float(tr.params.gravity[k, w, 2]), float(tr.obs[k, w, 1])
            if resample:   # new draws
                assert g2 != g and v2 != v0 and 8.0 <= g2 <= 12.0 and 1.0 <= v2 <= 2.0
            else:          # the world's first episode again
                assert g2 == g and v2 == v0
    assert kinds == {True, False}                    # both endings were exercised
    assert len(np.unique(np.asarray(f1.params.gravity[:, 2]))) == n   # differs per world


# ----------------------------------------------------------------- pendulum
def test_pendulum_reward_is_gymnasium_formula():
    env = envs.make("pendulum")
    s = env.reset_batch(jax.random.split(jax.random.PRNGKey(4), 64))
    u = jnp.linspace(-3.0, 3.0, 64)[:, None]               # beyond +-2: clipped
    rew, term = jax.jit(jax.vmap(lambda s, a: env.reward_done(s, s.physics, env._action(a))))(s, u)
    ph = s.physics
    # the state from the bodies: angle from upright (+ toward +x) and rate about y
    th = np.arctan2(np.asarray(ph.pos[:, 0, 0]), np.asarray(ph.pos[:, 0, 2]))
    thd = np.asarray(ph.angvel[:, 0, 1])
    uc = np.clip(np.asarray(u[:, 0]), -2.0, 2.0)
    norm = ((th + np.pi) % (2 * np.pi)) - np.pi              # Gymnasium's angle_normalize
    np.testing.assert_allclose(rew, -(norm ** 2 + 0.1 * thd ** 2 + 0.001 * uc ** 2), rtol=2e-5, atol=1e-5)
    assert not np.any(term)
    assert np.all(np.abs(thd) <= 1.0) and np.ptp(th) > 4.0   # Gymnasium's start distribution


# ------------------------------------------------------------------ gymnasium
def test_gymnasium_vector_env(cartpole_env):
    gym = pytest.importorskip("gymnasium")
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    n = N_CART  # the fixture's batch size: the compiled step is shared
    venv = envs.to_gymnasium(cartpole_env, n, seed=0)
    assert isinstance(venv, gym.vector.VectorEnv)
    assert venv.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    assert venv.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert venv.observation_space.shape == (n, 4) and venv.action_space.shape == (n, 1)
    obs_a, info = venv.reset(seed=11)
    np.testing.assert_array_equal(venv.reset(seed=11)[0], obs_a)     # seeded resets repeat
    assert not np.allclose(venv.reset(seed=12)[0], obs_a)
    assert info == {} and obs_a.dtype == np.float32 and obs_a in venv.observation_space
    assert np.all(np.abs(obs_a) <= 0.05)                            # CartPole-v1's start

    stats = RecordEpisodeStatistics(venv)
    obs, _ = stats.reset(seed=11)
    venv.action_space.seed(0)
    length = np.zeros(n, int)
    ended = np.zeros(n, bool)
    episodes = 0
    for k in range(120):
        a = venv.action_space.sample()
        assert a in venv.action_space
        new, rew, term, trunc, info = stats.step(a)
        assert new.dtype == np.float32 and new in venv.observation_space
        assert rew.dtype == np.float32 and term.dtype == bool and trunc.dtype == bool
        assert new.flags.writeable and rew.flags.writeable        # copies, not JAX buffers
        assert not trunc.any()                                      # 500-step limit not reached
        # next-step autoreset: worlds that ended last step restart, ignoring the action
        np.testing.assert_array_equal(rew, np.where(ended, 0.0, 1.0))
        assert not term[ended].any() and np.all(np.abs(new[ended]) <= 0.05)
        length = np.where(ended, 0, length + 1)
        # termination where the observation leaves the CartPole-v1 limits
        out = (np.abs(new[:, 0]) > 2.4) | (np.abs(new[:, 2]) > THETA_LIMIT)
        np.testing.assert_array_equal(term, out & ~ended)
        if term.any():
            assert "episode" in info                                # RecordEpisodeStatistics
            np.testing.assert_array_equal(info["episode"]["l"][term], length[term])
            np.testing.assert_allclose(info["episode"]["r"][term], length[term])
            episodes += int(term.sum())
        ended = term | trunc
    assert episodes >= n
    venv.close()


# ----------------------------------------------------------------- push box
def test_push_box_released_box_decelerates_at_mu_g():
    n = 4
    env = envs.make("push_box", speed=1.0, randomize={"mu": (0.1, 0.4)})
    s = env.reset_batch(jax.random.split(jax.random.PRNGKey(5), n))
    # the box at the origin, the pusher just behind it on -x; target far away
    pos = s.physics.pos.at[:, env.box, :2].set(0.0).at[:, env.pusher, :2].set(
        jnp.asarray([-0.151, 0.0]))
    s = s.replace(physics=s.physics.replace(pos=pos),
                  info={**s.info, "target": jnp.tile(jnp.asarray([3.0, 3.0]), (n, 1))})
    push = jnp.tile(jnp.asarray([1.0, 0.0]), (n, 1))
    vel, rew, obs = [], [], []
    for k in range(24):
        s = env.step_batch(s, push if k < 8 else -push)
        vel.append(np.asarray(s.physics.vel[:, env.box]))
        rew.append(np.asarray(s.reward))
        obs.append(np.asarray(s.obs))
    vel, rew, obs = np.array(vel), np.array(rew), np.array(obs)
    mu = np.asarray(s.params.mu[:, 0])
    assert np.all(vel[7, :, 0] > 0.9)             # pushed up to the pusher's speed
    measured = 0
    for w in range(n):
        for k in range(8, 23):
            if vel[k, w, 0] > 0.02 and vel[k + 1, w, 0] > 0.02:   # sliding through the interval
                decel = (vel[k, w, 0] - vel[k + 1, w, 0]) / env.control_dt
                np.testing.assert_allclose(decel, mu[w] * 9.81, rtol=1e-4, err_msg=f"world {w}")
                measured += 1
    assert measured >= 2 * n
    assert np.all(vel[-1, :, 0] == pytest.approx(0.0, abs=1e-4))   # at rest: static friction holds
    # reward: minus the box's distance to the target (obs[13:15] = box - target)
    np.testing.assert_allclose(rew, -np.linalg.norm(obs[:, :, 13:15], axis=-1), rtol=1e-6)
    assert not np.any(s.done)


# ------------------------------------------------------------------ walker
def test_walker_resets_standing():
    env = envs.make("walker")
    s = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 2))
    assert s.obs.shape == (2, env.observation_size) and env.action_size == 8
    np.testing.assert_allclose(s.obs[:, 0], env.model.init_pos[env.torso, 2], rtol=1e-6)
    assert not np.any(s.done)
