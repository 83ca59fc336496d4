"""Brax adapter: a jaxode env as a ``brax.envs.base.Env`` (``pip install jaxode[brax]``).

``to_brax(env)`` (or ``to_brax("cartpole", **options)``) gives an env that
Brax's training code takes unchanged, e.g.
``brax.training.agents.ppo.train(environment=to_brax(env), episode_length=
benv.episode_length, ...)``. It is a subclass of ``brax.envs.base.Env`` (not a
second protocol on jaxode's own :class:`~jaxode.envs.Env`) so that Brax's
wrappers (``VmapWrapper``, ``EpisodeWrapper``, ``AutoResetWrapper``,
``DomainRandomizationVmapWrapper``, ``EvalWrapper``), ``isinstance`` checks
and ``unwrapped`` work as for Brax's own envs, while jaxode's envs keep
their Gymnasium-like conventions (bool ``done``, their own step limit).

What changes from jaxode's :class:`~jaxode.envs.EnvState` to Brax's ``State``:

- ``State(pipeline_state, obs, reward, done, metrics, info)``:
  ``pipeline_state`` is the jaxode physics :class:`jaxode.State`; ``done``
  is a float (1.0 on termination), as Brax's wrappers and losses expect;
  ``metrics`` is an empty dict; ``info["params"]`` holds the world's
  :class:`jaxode.Params` (see randomisation below).
- No step limit: the adapter only terminates (a fall, a non-finite world);
  truncation is Brax's ``EpisodeWrapper``'s, which sets ``info["steps"]``
  and ``info["truncation"]`` after ``episode_length`` env steps. Pass
  ``episode_length=benv.episode_length`` (the jaxode env's own limit) to
  ``ppo.train`` to keep the jaxode env's episodes.
- ``dt`` is the control period, ``frame_skip * dt`` of the jaxode env [s]
  (Brax's ``PipelineEnv.dt``: ``sys.opt.timestep * n_frames``);
  ``physics_dt`` is the jaxode physics step.
- Actions are Brax's: ``action_size`` numbers in [-1, 1] (the range of its
  tanh policies). A continuous jaxode env gets them mapped affinely onto
  ``[action_low, action_high]``; a discrete env of ``n`` actions takes one
  number, cut into ``n`` equal bins (cart-pole: a < 0 pushes -x, a >= 0 +x).
- A non-finite world terminates with reward 0 (jaxode freezes it, the
  auto-reset restarts it).

Randomisation. ``sys`` is the model's :class:`jaxode.Params`, so a Brax
``randomization_fn(sys, rng) -> (sys_v, in_axes)`` returns batched
``Params`` and the matching ``in_axes`` (a ``Params`` of 0 / None), and
``DomainRandomizationVmapWrapper`` swaps each world's ``sys`` in as for Brax's
own systems. :func:`brax_randomization` builds one from jaxode's
``randomize={field: (lo, hi)}`` ranges. An env made with ``randomize=`` also
draws at every ``reset`` from the ``sys`` in force; the draw is kept in
``info["params"]`` and steps use it (Brax's ``AutoResetWrapper`` restarts a
world from its first state and keeps its info, so a world keeps its draw, as
under Brax's domain randomisation).
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

try:
    from brax.envs.base import Env as BraxBaseEnv
    from brax.envs.base import State
except ImportError as e:  # pragma: no cover - optional dependency
    raise ImportError("jaxode.envs.to_brax needs brax: pip install 'jaxode[brax]'") from e

import jaxode
from jaxode.tools.envs.core import AutoReset, Env, EnvState, _raw_key
from jaxode.tools.envs.randomize import check_randomize, randomize_params
from jaxode.types import Params


class BraxEnv(BraxBaseEnv):
    """A jaxode :class:`~jaxode.envs.Env` behind ``brax.envs.base.Env`` (module docstring).

    Attributes: ``env`` (the jaxode env), ``sys`` (its model's Params; Brax's
    domain randomisation replaces it per world), ``dt`` [s] (control period),
    ``physics_dt`` [s], ``episode_length`` (the jaxode env's step limit, for
    Brax's ``episode_length``).
    """

    def __init__(self, env: Env):
        if isinstance(env, AutoReset):
            env = env.env  # Brax's AutoResetWrapper restarts finished worlds
        if not isinstance(env, Env):
            raise ValueError(f"to_brax: env must be a jaxode.envs.Env or an env name "
                             f"(got {type(env).__name__})")
        self.env = env
        self.sys = env.model.params

    # ------------------------------------------------------------ properties
    @property
    def observation_size(self) -> int:
        return int(self.env.observation_size)

    @property
    def action_size(self) -> int:
        return 1 if self.env.num_actions is not None else int(self.env.action_size)

    @property
    def backend(self) -> str:
        return "jaxode"

    @property
    def dt(self) -> float:
        """Control period [s]: ``frame_skip`` physics steps of ``physics_dt``."""
        return self.env.control_dt

    @property
    def physics_dt(self) -> float:
        return self.env.dt

    @property
    def episode_length(self) -> int:
        return self.env.episode_length

    @property
    def model(self):
        return self.env.model

    # ------------------------------------------------------------------ API
    def reset(self, rng: jax.Array) -> State:
        """A new episode of one world from ``rng`` (vmap it for a batch)."""
        env = self.env
        k_params, k_state = jax.random.split(_raw_key(rng))
        params = randomize_params(k_params, self.sys, env.randomize)
        physics, extra = env.init_physics(k_state, params)
        info = {**extra, "params": params}
        obs = env.observe(physics, params, info)
        zero = jnp.zeros((), obs.dtype)
        return State(pipeline_state=physics, obs=obs, reward=zero, done=zero, metrics={},
                     info=info)

    def step(self, state: State, action: jax.Array) -> State:
        """One env step (``frame_skip`` physics steps) with Brax's action in [-1, 1]."""
        env = self.env
        a = self.env_action(action)
        params = state.info["params"]
        physics = env.advance(state.pipeline_state, params, a)
        before = EnvState(physics=state.pipeline_state, params=params, obs=state.obs,
                          reward=state.reward, done=state.done, key=jnp.zeros(2, jnp.uint32),
                          info=state.info)
        reward, terminated = env.reward_done(before, physics, a)
        bad = physics.nonfinite
        terminated = jnp.asarray(terminated, bool) | bad
        obs = env.observe(physics, params, state.info)
        reward = jnp.where(bad, 0.0, jnp.asarray(reward, obs.dtype)).astype(obs.dtype)
        return state.replace(pipeline_state=physics, obs=obs, reward=reward,
                             done=terminated.astype(obs.dtype))

    def env_action(self, action: jax.Array) -> jax.Array:
        """Brax's action (``action_size`` numbers in [-1, 1], clipped there) as
        the jaxode env's: affine onto [action_low, action_high], or the bin
        ``floor((a + 1) / 2 * n)`` of a discrete env of ``n`` actions."""
        env = self.env
        dt = env.dtype
        a = jnp.clip(jnp.asarray(action, dt).reshape(self.action_size), -1.0, 1.0)
        if env.num_actions is not None:
            n = env.num_actions
            return jnp.clip(jnp.floor((a[0] + 1.0) * (n / 2.0)), 0, n - 1).astype(jnp.int32)
        lo, hi = jnp.asarray(env.action_low, dt), jnp.asarray(env.action_high, dt)
        return lo + (a + 1.0) * (0.5 * (hi - lo))

    def render(self, trajectory: Union[jaxode.State, List[jaxode.State]], height: int = 240,
               width: int = 320, camera: Optional[jaxode.Camera] = None) -> Sequence[np.ndarray]:
        """RGB frames (height, width, 3) uint8 of a list of ``pipeline_state``
        (or one), drawn by :func:`jaxode.render` (``camera``: the env's own
        by default). Brax's ``PipelineEnv.render`` signature."""
        states = [trajectory] if isinstance(trajectory, jaxode.State) else list(trajectory)
        cam = self.env.camera if camera is None else camera
        fn = self.env._jit(("render", width, height, cam),
                           lambda: lambda s: jaxode.render(self.env.model, s, cam, width, height))
        return [np.array(fn(s)) for s in states]

    def __repr__(self) -> str:
        return f"BraxEnv({self.env!r})"


def to_brax(env: Union[Env, str], **options) -> BraxEnv:
    """A ``brax.envs.base.Env`` running ``env`` (a jaxode env, or a name for
    :func:`jaxode.envs.make` with ``options``); see the module docstring."""
    if isinstance(env, str):
        from jaxode.tools.envs import make
        env = make(env, **options)
    elif options:
        raise ValueError(f"to_brax: options {sorted(options)} are for an env name, "
                         f"not an env instance")
    return BraxEnv(env)


def brax_randomization(randomize: dict) -> Callable:
    """A Brax ``randomization_fn(sys, rng) -> (sys_v, in_axes)`` drawing the
    fields of ``randomize={field: (lo, hi)}`` uniformly, one draw per key of
    ``rng`` (jaxode's :func:`~jaxode.envs.randomize_params`: same ranges and
    rules, ``body_inertia`` scaled with a drawn ``body_mass``). ``in_axes`` maps
    only the drawn fields. Pass it as ``ppo.train(randomization_fn=...)``."""
    if not isinstance(randomize, dict) or not randomize:
        raise ValueError(f"brax_randomization: randomize must be a non-empty dict "
                         f"{{params field: (lo, hi)}} (got {randomize!r})")

    def randomization_fn(sys: Params, rng: jax.Array):
        if not isinstance(sys, Params):
            raise ValueError(f"brax_randomization: sys must be the jaxode Params of a "
                             f"to_brax env (got {type(sys).__name__})")
        ranges = check_randomize(sys, randomize, "brax_randomization")
        keys = jax.vmap(_raw_key)(rng) if jnp.ndim(rng) > 1 else _raw_key(rng)
        drawn = sorted(set(ranges) | ({"body_inertia"} if "body_mass" in ranges else set()))
        fields = jax.vmap(lambda k: {n: getattr(randomize_params(k, sys, ranges), n)
                                     for n in drawn})(keys)
        sys_v = sys.replace(**fields)   # the other fields stay one shared value
        in_axes = jax.tree.map(lambda _: None, sys).replace(**{n: 0 for n in drawn})
        return sys_v, in_axes

    return randomization_fn


def register_brax() -> list[str]:
    """Add the jaxode envs to Brax's registry as ``jaxode_cartpole``,
    ``jaxode_pendulum``, ``jaxode_walker`` and ``jaxode_push_box``
    (``brax.envs.get_environment(name, **options)``); returns the names."""
    import brax.envs

    from jaxode.tools.envs.registry import BRAX_NAMES
    for bname, name in BRAX_NAMES.items():
        brax.envs.register_environment(bname, lambda _n=name, **kw: to_brax(_n, **kw))
    return sorted(BRAX_NAMES)
