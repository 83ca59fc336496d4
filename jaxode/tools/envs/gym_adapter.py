"""Gymnasium adapters (gymnasium >= 1.0, ``pip install jaxode[gym]``).

- ``to_gymnasium(env)`` (``num_envs=None``): one world as a ``gymnasium.Env``
  (passes ``gymnasium.utils.env_checker.check_env``); ``render_mode=
  "rgb_array"`` draws with :func:`jaxode.render` from the env's camera.
- ``to_gymnasium(env, num_envs, seed)``: ``num_envs`` worlds as one
  ``gymnasium.vector.VectorEnv``, one jitted, vmapped call per ``step``.
- Registered ids (on ``import jaxode``, when gymnasium is installed):
  ``jaxode/CartPole-v0``, ``jaxode/Pendulum-v0``, ``jaxode/Walker-v0``,
  ``jaxode/PushBox-v0``; ``gym.make(id, **options)`` gives the single env
  (``options``: the env's, e.g. ``continuous=True``, plus ``render_mode``),
  ``gym.make_vec(id, num_envs, **options)`` the jitted vector env.

Every output is a fresh, writable numpy array (never a view of a JAX
buffer): observations float32 ``(obs_size,)`` / ``(num_envs, obs_size)``,
rewards a float / float32 array, terminated and truncated bool.

Episode ends: ``terminated`` is the env's own end (a fall, cart-pole's
limits, a non-finite world); ``truncated`` comes from the jaxode env's
``episode_length`` (the spec's ``max_episode_steps`` is None, so
``gym.make`` adds no second ``TimeLimit``; pass ``episode_length=`` to change
it, or ``max_episode_steps=`` to add Gymnasium's own on top).

The vector env's autoreset is Gymnasium's default, ``AutoresetMode.NEXT_STEP``
(``metadata["autoreset_mode"]``): the step that ends an episode returns that
episode's last observation with ``terminated`` or ``truncated`` set; the next
``step`` resets those worlds (their actions are ignored) and returns the new
episode's first observation with reward 0 and both flags False. ``reset``'s
``options`` are not used.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.tools.envs.core import Env
from jaxode.tools.envs.host import (RENDER_MODES, as_env, check_render_mode, host_actions,
                                    env_metadata, render_fn, single_spaces)
from jaxode.tools.envs.registry import GYM_IDS

try:
    import gymnasium
    from gymnasium.vector import VectorEnv
    from gymnasium.vector.utils import batch_space
    GymEnv = gymnasium.Env
except ImportError:  # pragma: no cover - optional dependency
    gymnasium = None
    VectorEnv = object
    GymEnv = object

def _need_gymnasium(what: str) -> None:
    if gymnasium is None:
        raise ImportError(f"{what} needs gymnasium >= 1.0: pip install 'jaxode[gym]'")



class JaxodeGymEnv(GymEnv):
    """One world of a jaxode :class:`Env` as a ``gymnasium.Env`` (module docstring).

    render_mode: None or ``"rgb_array"`` (``render()`` returns a (height,
    width, 3) uint8 array); width, height: picture size [pixels].
    """

    metadata = {"render_modes": list(RENDER_MODES)}

    def __init__(self, env: Union[Env, str], render_mode: Optional[str] = None,
                 width: int = 320, height: int = 240):
        _need_gymnasium("to_gymnasium")
        self.env = as_env(env, "to_gymnasium")
        self.render_mode = check_render_mode(render_mode, "to_gymnasium")
        self.width, self.height = int(width), int(height)
        self.metadata = env_metadata(self.env)
        self.observation_space, self.action_space = single_spaces(self.env)
        self._key = None
        self._state = None
        self._reset = self.env._jit("reset", lambda: self.env.reset)
        self._step = self.env._jit("step", lambda: self.env.step)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        """A new episode; ``seed`` makes it and the later episodes reproducible."""
        super().reset(seed=seed)
        if seed is not None or self._key is None:
            s = int(self.np_random.integers(2 ** 31)) if seed is None else int(seed)
            self._key = jax.random.PRNGKey(s)
        self._key, k = jax.random.split(self._key)
        self._state = self._reset(k)
        return np.array(self._state.obs, np.float32), {}

    def step(self, action):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        s = self._step(self._state, host_actions(self.env, action, ()))
        self._state = s
        self.env._watch_overflow(s.physics)
        trunc = bool(s.info["truncation"])
        term = bool(s.done) and not trunc
        return np.array(s.obs, np.float32), float(s.reward), term, trunc, {}

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode (pass render_mode="
                                  "'rgb_array' to gym.make or to_gymnasium)")
            return None
        if self._state is None:
            raise RuntimeError("call reset() before render()")
        return np.array(render_fn(self.env, self.width, self.height)(self._state.physics))

    def close(self):
        self._state = None


def _merge(mask, fresh, stepped):
    """Per world: ``fresh`` where ``mask`` (a new episode: reward 0, done False), else ``stepped``."""
    pick = lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)
    return jax.tree.map(pick, fresh, stepped)


class JaxodeVectorEnv(VectorEnv):
    """``num_envs`` worlds of a jaxode :class:`Env` behind Gymnasium's VectorEnv API."""

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP} if gymnasium else {}

    def __init__(self, env: Env, num_envs: int, seed: Optional[int] = None,
                 render_mode: Optional[str] = None, width: int = 320, height: int = 240):
        _need_gymnasium("to_gymnasium")
        env = as_env(env, "to_gymnasium")
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"to_gymnasium: num_envs must be an integer >= 1 (got {num_envs!r})")
        self.env = env
        self.num_envs = int(num_envs)
        self.render_mode = check_render_mode(render_mode, "to_gymnasium")
        self.width, self.height = int(width), int(height)
        self.metadata = {**env_metadata(env),
                         "autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}
        self.single_observation_space, self.single_action_space = single_spaces(env)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._seed = np.random.SeedSequence(seed).generate_state(1)[0] if seed is None else int(seed)
        self._key = jax.random.PRNGKey(self._seed)
        self._state = None
        self._needs_reset = None
        self._merge_fn = jax.jit(_merge)

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every world; ``seed`` makes this and all later episodes reproducible."""
        super().reset(seed=seed)
        if seed is not None:
            self._key = jax.random.PRNGKey(int(seed))
        self._key, k = jax.random.split(self._key)
        self._state = self.env.reset_batch(jax.random.split(k, self.num_envs))
        self._needs_reset = np.zeros((self.num_envs,), bool)
        return np.array(self._state.obs, np.float32), {}

    def step(self, actions):
        """One env step of every world (NEXT_STEP autoreset, see the module docstring)."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        new = self.env.step_batch(self._state, host_actions(self.env, actions, (self.num_envs,)))
        if np.any(self._needs_reset):
            # worlds that ended last step start a new episode (their actions are ignored)
            new = self._merge_fn(self._needs_reset, self.env.reset_batch(self._state.key), new)
        self._state = new
        trunc = np.array(new.info["truncation"], bool)
        term = np.array(new.done, bool) & ~trunc
        self._needs_reset = term | trunc
        return (np.array(new.obs, np.float32), np.array(new.reward, np.float32), term, trunc, {})

    def render(self):
        """One (height, width, 3) uint8 frame per world (render_mode "rgb_array")."""
        if self.render_mode is None or self._state is None:
            return None
        fn = self.env._jit(("render_batch", self.width, self.height),
                           lambda: jax.vmap(render_fn(self.env, self.width, self.height)))
        return tuple(np.array(fn(self._state.physics)))

    def close_extras(self, **kwargs):
        self._state = None


def to_gymnasium(env: Union[Env, str], num_envs: Optional[int] = None, seed: Optional[int] = None,
                 render_mode: Optional[str] = None, **kw):
    """``num_envs=None``: one world as a ``gymnasium.Env`` (``seed`` is then
    given to ``reset``); else a ``gymnasium.vector.VectorEnv`` of ``num_envs``
    worlds, ``seed`` seeding its first ``reset``. ``kw``: width, height of
    rendered pictures. See the module docstring."""
    if num_envs is None:
        g = JaxodeGymEnv(env, render_mode=render_mode, **kw)
        if seed is not None:
            g.reset(seed=seed)
        return g
    return JaxodeVectorEnv(env, num_envs, seed, render_mode=render_mode, **kw)


# ------------------------------------------------------------- registration
def _split_options(options: dict) -> tuple[dict, dict]:
    view = {k: options.pop(k) for k in ("width", "height") if k in options}
    return options, view


def make_gym_env(name: str, render_mode: Optional[str] = None, **options) -> JaxodeGymEnv:
    """gym.make entry point: ``jaxode.envs.make(name, **options)`` as a gymnasium.Env."""
    from jaxode.tools.envs.registry import make

    options, view = _split_options(options)
    return JaxodeGymEnv(make(name, **options), render_mode=render_mode, **view)


def make_gym_vector_env(name: str, num_envs: int = 1, render_mode: Optional[str] = None,
                        seed: Optional[int] = None, **options) -> JaxodeVectorEnv:
    """gym.make_vec entry point (``max_episode_steps``, if given, is the env's
    ``episode_length``)."""
    from jaxode.tools.envs.registry import make

    options, view = _split_options(options)
    if "max_episode_steps" in options:
        options["episode_length"] = options.pop("max_episode_steps")
    return JaxodeVectorEnv(make(name, **options), num_envs, seed, render_mode=render_mode, **view)


def register_gymnasium() -> list[str]:
    """Register :data:`GYM_IDS` with gymnasium (done on ``import jaxode`` when
    gymnasium is installed; repeated calls are no-ops). Returns the ids."""
    if gymnasium is None:
        return []
    for gid, name in GYM_IDS.items():
        if gid not in gymnasium.registry:
            gymnasium.register(
                id=gid, entry_point="jaxode.tools.envs.gym_adapter:make_gym_env",
                vector_entry_point="jaxode.tools.envs.gym_adapter:make_gym_vector_env",
                kwargs={"name": name}, max_episode_steps=None)
    return list(GYM_IDS)


# ---------------------------------------------------------- stable-baselines3
def to_sb3(env: Union[Env, str], num_envs: int, seed: Optional[int] = None,
           render_mode: Optional[str] = None, **kw):
    """``num_envs`` worlds of ``env`` as a stable-baselines3 ``VecEnv`` (SB3
    takes no Gymnasium VectorEnv): ``PPO("MlpPolicy", to_sb3(env, 8))``.

    SB3's conventions: ``reset()`` returns observations only; a world that
    ends is reset inside the same ``step``, which returns the new episode's
    first observation with ``done`` True, the last one in
    ``infos[i]["terminal_observation"]`` and ``infos[i]["TimeLimit.truncated"]``
    True when the episode ended by the step limit. ``seed`` (or ``venv.seed(s)``
    before ``reset``) makes the episodes reproducible.
    """
    from jaxode.tools.envs.sb3_adapter import JaxodeSB3VecEnv

    return JaxodeSB3VecEnv(env, num_envs, seed, render_mode=render_mode, **kw)
