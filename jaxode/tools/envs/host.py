"""Host-side pieces the Gymnasium and stable-baselines3 adapters share: the env a
name or wrapper stands for, render modes, checked actions, spaces, metadata.
(The adapters themselves: gym_adapter.py, sb3_adapter.py.)"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.tools.envs.core import AutoReset, Env

try:
    from gymnasium import spaces
except ImportError:  # pragma: no cover - optional dependency
    spaces = None

RENDER_MODES = ["rgb_array"]


def as_env(env, where: str) -> Env:
    if isinstance(env, str):
        from jaxode.tools.envs.registry import make
        env = make(env)
    if isinstance(env, AutoReset):
        env = env.env  # the adapters reset finished worlds themselves
    if not isinstance(env, Env):
        raise ValueError(f"{where}: env must be a jaxode.envs.Env (got {type(env).__name__})")
    return env


def check_render_mode(render_mode, where: str):
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"{where}: render_mode must be None or one of {RENDER_MODES} "
                         f"(got {render_mode!r})")
    return render_mode


def single_spaces(env: Env):
    """(observation space, action space) of one world as gymnasium spaces."""
    if spaces is None:
        raise ImportError("the Gymnasium and SB3 adapters need gymnasium >= 1.0: "
                          "pip install 'jaxode[gym]'")
    obs = spaces.Box(np.asarray(env.obs_low, np.float32), np.asarray(env.obs_high, np.float32),
                     (env.observation_size,), np.float32)
    if env.num_actions is not None:
        act = spaces.Discrete(env.num_actions)
    else:
        act = spaces.Box(np.asarray(env.action_low, np.float32),
                         np.asarray(env.action_high, np.float32), (env.action_size,), np.float32)
    return obs, act


def host_actions(env: Env, actions, batch: tuple):
    """Checked actions as a JAX array of fixed dtype and shape (one compile)."""
    env.check_action(np.asarray(actions), batch=batch)
    if env.num_actions is not None:
        return jnp.asarray(np.asarray(actions).astype(np.int32).reshape(batch))
    a = np.asarray(actions, np.float64).reshape(batch + (env.action_size,))
    return jnp.asarray(a, env.dtype)


def render_fn(env: Env, width: int, height: int):
    import jaxode

    cam = env.camera
    return env._jit(("render", width, height, cam),
                    lambda: lambda s: jaxode.render(env.model, s, cam, width, height))


def env_metadata(env: Env) -> dict:
    return {"render_modes": list(RENDER_MODES), "render_fps": max(1, round(1.0 / env.control_dt))}
