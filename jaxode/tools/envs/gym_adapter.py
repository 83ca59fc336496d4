"""Gymnasium vector-environment adapter (gymnasium >= 1.0, ``pip install jaxode[gym]``).

``to_gymnasium(env, num_envs, seed)`` runs ``num_envs`` worlds of a jaxode env
as one ``gymnasium.vector.VectorEnv``: one jitted, vmapped call per ``step``.
Observations come back as float32 numpy arrays ``(num_envs, obs_size)``;
rewards float32 and terminations / truncations bool arrays ``(num_envs,)``;
infos an empty dict.

Autoreset follows Gymnasium's default, ``AutoresetMode.NEXT_STEP``
(``metadata["autoreset_mode"]``): the step that ends an episode returns that
episode's last observation with ``terminated`` or ``truncated`` set; the next
``step`` resets those worlds (their actions are ignored) and returns the new
episode's first observation with reward 0 and both flags False. ``reset``'s
``options`` are not used.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.tools.envs.core import AutoReset, Env

try:
    import gymnasium
    from gymnasium import spaces
    from gymnasium.vector import VectorEnv
    from gymnasium.vector.utils import batch_space
except ImportError:  # pragma: no cover - optional dependency
    gymnasium = None
    VectorEnv = object


def single_spaces(env: Env):
    """(observation space, action space) of one world as gymnasium spaces."""
    obs = spaces.Box(np.asarray(env.obs_low, np.float32), np.asarray(env.obs_high, np.float32),
                     (env.observation_size,), np.float32)
    if env.num_actions is not None:
        act = spaces.Discrete(env.num_actions)
    else:
        act = spaces.Box(np.asarray(env.action_low, np.float32),
                         np.asarray(env.action_high, np.float32), (env.action_size,), np.float32)
    return obs, act


def _merge(mask, fresh, stepped):
    """Per world: ``fresh`` where ``mask`` (a new episode: reward 0, done False), else ``stepped``."""
    pick = lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b)
    return jax.tree.map(pick, fresh, stepped)


class JaxodeVectorEnv(VectorEnv):
    """``num_envs`` worlds of a jaxode :class:`Env` behind Gymnasium's VectorEnv API."""

    metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP} if gymnasium else {}

    def __init__(self, env: Env, num_envs: int, seed: Optional[int] = None):
        if gymnasium is None:
            raise ImportError("to_gymnasium needs gymnasium >= 1.0: pip install 'jaxode[gym]'")
        if isinstance(env, AutoReset):
            env = env.env  # Gymnasium's next-step autoreset is done here
        if not isinstance(env, Env):
            raise ValueError(f"to_gymnasium: env must be a jaxode.envs.Env (got {type(env).__name__})")
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"to_gymnasium: num_envs must be an integer >= 1 (got {num_envs!r})")
        self.env = env
        self.num_envs = int(num_envs)
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
        return np.asarray(self._state.obs, np.float32), {}

    def step(self, actions):
        """One env step of every world (NEXT_STEP autoreset, see the module docstring)."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        env = self.env
        env.check_action(np.asarray(actions), batch=(self.num_envs,))
        if env.num_actions is not None:
            a = np.asarray(actions).astype(np.int32).reshape(self.num_envs)
        else:
            a = np.asarray(actions, np.float64).reshape(self.num_envs, env.action_size)
        a = jnp.asarray(a, jnp.int32 if env.num_actions is not None else env.dtype)
        new = self.env.step_batch(self._state, a)
        if np.any(self._needs_reset):
            # worlds that ended last step start a new episode (their actions are ignored)
            new = self._merge_fn(self._needs_reset, self.env.reset_batch(self._state.key), new)
        self._state = new
        trunc = np.asarray(new.info["truncation"], bool)
        term = np.asarray(new.done, bool) & ~trunc
        self._needs_reset = term | trunc
        return (np.asarray(new.obs, np.float32), np.asarray(new.reward, np.float32), term, trunc, {})

    def close_extras(self, **kwargs):
        self._state = None


def to_gymnasium(env: Env, num_envs: int, seed: Optional[int] = None) -> JaxodeVectorEnv:
    """A ``gymnasium.vector.VectorEnv`` running ``num_envs`` worlds of ``env``
    (see the module docstring); ``seed`` seeds the first ``reset``."""
    return JaxodeVectorEnv(env, num_envs, seed)
