"""Reinforcement-learning environments on jaxode, in Brax's functional style.

::

    import jax, jaxode.envs as envs

    env = envs.AutoReset(envs.make("cartpole", randomize={"body_mass": ([0.5, 0.05], [1.5, 0.2])}))
    states = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 256))  # own masses each
    states = env.step_batch(states, actions)       # states.obs, .reward, .done, .info

One world: ``env.reset(key)`` and ``env.step(state, action)``; a batch is
``jax.vmap`` of them (``reset_batch`` / ``step_batch``, jitted once per env;
inside your own ``jit``/``scan`` call either form). ``AutoReset``
restarts finished worlds inside the step; ``to_gymnasium(env, num_envs)``
gives a ``gymnasium.vector.VectorEnv``.

Environments (``make(name, **options)``; options are the class's arguments):
``"cartpole"`` (:class:`CartPole`, Gymnasium CartPole-v1), ``"pendulum"``
(:class:`Pendulum`, Gymnasium Pendulum-v1), ``"push_box"``
(:class:`PushBox`), ``"walker"`` (:class:`Walker`, the quadruped of
``examples/walker.py``). Every env takes ``dt``, ``frame_skip``,
``episode_length``, ``iterations`` and ``randomize``.
"""
from __future__ import annotations

import inspect

from jaxode.tools.envs.cartpole import CartPole
from jaxode.tools.envs.core import AutoReset, Env, EnvState
from jaxode.tools.envs.gym_adapter import to_gymnasium
from jaxode.tools.envs.pendulum import Pendulum
from jaxode.tools.envs.push_box import PushBox
from jaxode.tools.envs.randomize import check_randomize, param_names, randomize_params
from jaxode.tools.envs.walker import Walker

ENVS = {"cartpole": CartPole, "pendulum": Pendulum, "push_box": PushBox, "walker": Walker}


def make(name: str, **options) -> Env:
    """The environment ``name`` (one of ``ENVS``) built with ``options``."""
    if name not in ENVS:
        raise ValueError(f"unknown environment {name!r}; choose from {sorted(ENVS)}")
    cls = ENVS[name]
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"env {name!r}: unknown option(s) {unknown}; options are {allowed}")
    from jaxode import compile_notice
    with compile_notice.notice(f"env {name!r} (building it)"):
        return cls(**options)


__all__ = ["make", "ENVS", "Env", "EnvState", "AutoReset", "to_gymnasium", "CartPole",
           "Pendulum", "PushBox", "Walker", "randomize_params", "check_randomize", "param_names"]
