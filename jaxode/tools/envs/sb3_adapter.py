"""stable-baselines3 ``VecEnv`` over a batch of jaxode worlds (``jaxode.envs.to_sb3``).

SB3 (2.x) takes its own ``VecEnv``, not Gymnasium's vector API, so this
subclasses ``stable_baselines3.common.vec_env.VecEnv``: one jitted, vmapped
call per ``step`` that also restarts the worlds that ended (SB3's in-step
autoreset, ``terminal_observation`` and ``TimeLimit.truncated`` infos as in
its ``DummyVecEnv``). Outputs are fresh writable numpy arrays.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as e:  # pragma: no cover - optional dependency
    raise ImportError("jaxode.envs.to_sb3 needs stable-baselines3: "
                      "pip install 'jaxode[sb3]'") from e

from jaxode.tools.envs.core import Env
from jaxode.tools.envs.host import (as_env, check_render_mode, host_actions, env_metadata,
                                    render_fn, single_spaces)


def _step_and_restart(env: Env):
    """vmap'd step that restarts ended worlds: (new states, last obs)."""
    def one(state, action):
        s = env.step(state, action)
        fresh = env.reset(s.key)
        new = jax.tree.map(lambda a, b: jnp.where(s.done, a, b), fresh, s)
        return new.replace(reward=s.reward, done=s.done,
                           info={**new.info, "truncation": s.info["truncation"]}), s.obs
    return jax.jit(jax.vmap(one))


class JaxodeSB3VecEnv(VecEnv):
    """``num_envs`` worlds of a jaxode env as an SB3 VecEnv (see ``to_sb3``)."""

    def __init__(self, env: Union[Env, str], num_envs: int, seed: Optional[int] = None,
                 render_mode: Optional[str] = None, width: int = 320, height: int = 240):
        env = as_env(env, "to_sb3")
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"to_sb3: num_envs must be an integer >= 1 (got {num_envs!r})")
        self.env = env
        self.render_mode = check_render_mode(render_mode, "to_sb3")
        self.width, self.height = int(width), int(height)
        obs_space, act_space = single_spaces(env)
        super().__init__(int(num_envs), obs_space, act_space)
        self.metadata = {**env_metadata(env), **self.metadata}
        self._base_seed = seed
        self._state = None
        self._pending_actions = None
        self._step = env._jit("sb3_step", lambda: _step_and_restart(env))

    # -------------------------------------------------------------- VecEnv
    def reset(self) -> np.ndarray:
        seed = self._seeds[0] if self._seeds[0] is not None else self._base_seed
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0])
        self._base_seed = None
        self._key = jax.random.PRNGKey(int(seed))
        self._key, k = jax.random.split(self._key)
        self._state = self.env.reset_batch(jax.random.split(k, self.num_envs))
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return np.array(self._state.obs, np.float32)

    def step_async(self, actions: np.ndarray) -> None:
        self._pending_actions = actions

    def step_wait(self):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        a = host_actions(self.env, self._pending_actions, (self.num_envs,))
        self._state, last = self._step(self._state, a)
        s = self._state
        self.env._watch_overflow(s.physics)
        obs = np.array(s.obs, np.float32)
        rew = np.array(s.reward, np.float32)
        done = np.array(s.done, bool)
        trunc = np.array(s.info["truncation"], bool)
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if done.any():
            last = np.array(last, np.float32)
            for i in np.flatnonzero(done):
                infos[i] = {"terminal_observation": last[i],
                            "TimeLimit.truncated": bool(trunc[i])}
        return obs, rew, done, infos

    def seed(self, seed: Optional[int] = None) -> Sequence[Optional[int]]:
        """Seed the next ``reset`` (one key for the batch; worlds get split keys)."""
        self._seeds = [seed] * self.num_envs
        return self._seeds

    def close(self) -> None:
        self._state = None

    def get_images(self) -> Sequence[Optional[np.ndarray]]:
        if self.render_mode != "rgb_array" or self._state is None:
            return [None] * self.num_envs
        fn = self.env._jit(("render_batch", self.width, self.height),
                           lambda: jax.vmap(render_fn(self.env, self.width, self.height)))
        return list(np.array(fn(self._state.physics)))

    # ---------------------------------------------------------- attributes
    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        if attr_name == "render_mode":
            return [getattr(self, "render_mode", None)] * len(self._get_indices(indices))
        return [getattr(self.env, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise AttributeError(f"to_sb3: the worlds share one jaxode env; cannot set "
                             f"{attr_name!r} per world (build the env with the value instead)")

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list:
        return [getattr(self.env, method_name)(*method_args, **method_kwargs)
                for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._get_indices(indices))
