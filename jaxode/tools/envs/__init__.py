"""Reinforcement-learning environments on jaxode, in Brax's functional style.

::

    import jax, jaxode.envs as envs

    env = envs.AutoReset(envs.make("cartpole", randomize={"body_mass": ([0.5, 0.05], [1.5, 0.2])}))
    states = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 256))  # own masses each
    states = env.step_batch(states, actions)       # states.obs, .reward, .done, .info

One world: ``env.reset(key)`` and ``env.step(state, action)``; a batch is
``jax.vmap`` of them (``reset_batch`` / ``step_batch``, jitted once per env;
inside your own ``jit``/``scan`` call either form). ``AutoReset``
restarts finished worlds inside the step.

Adapters for RL libraries (docs/RL.md): ``to_brax(env)`` (a
``brax.envs.base.Env`` for Brax's training agents), ``to_gymnasium(env)``
(a ``gymnasium.Env``; ``to_gymnasium(env, num_envs)``: a
``gymnasium.vector.VectorEnv``), ``to_sb3(env, num_envs)`` (a
stable-baselines3 ``VecEnv``). With gymnasium installed, ``import jaxode``
registers ``jaxode/CartPole-v0``, ``jaxode/Pendulum-v0``,
``jaxode/Walker-v0`` and ``jaxode/PushBox-v0`` for ``gym.make`` /
``gym.make_vec``.

Environments (``make(name, **options)``; options are the class's arguments):
``"cartpole"`` (:class:`CartPole`, Gymnasium CartPole-v1), ``"pendulum"``
(:class:`Pendulum`, Gymnasium Pendulum-v1), ``"push_box"``
(:class:`PushBox`), ``"walker"`` (:class:`Walker`, the quadruped of
``examples/walker.py``). Every env takes ``dt``, ``frame_skip``,
``episode_length``, ``iterations`` and ``randomize``.

Gymnasium v5's MuJoCo tasks (:mod:`jaxode.tools.envs.mujoco_tasks`): ``"ant"``,
``"halfcheetah"``, ``"hopper"``, ``"humanoid"``, ``"humanoidstandup"``,
``"inverted_pendulum"``, ``"inverted_double_pendulum"``, ``"pusher"``,
``"reacher"``, ``"swimmer"``, ``"walker2d"`` (registered as ``jaxode/Ant-v0``
...), with v5's option names; :func:`from_mjcf` for any MJCF file.
"""
from __future__ import annotations

from jaxode.tools.envs.cartpole import CartPole
from jaxode.tools.envs.core import AutoReset, Env, EnvState
from jaxode.tools.envs.gym_adapter import GYM_IDS, register_gymnasium, to_gymnasium, to_sb3
from jaxode.tools.envs.mujoco_tasks import MujocoEnv, from_mjcf
from jaxode.tools.envs.pendulum import Pendulum
from jaxode.tools.envs.push_box import PushBox
from jaxode.tools.envs.randomize import check_randomize, param_names, randomize_params
from jaxode.tools.envs.registry import BRAX_NAMES, ENVS, REGISTRY, make
from jaxode.tools.envs.walker import Walker


def to_brax(env, **options):
    """A ``brax.envs.base.Env`` running ``env`` (an env or a name for :func:`make`
    with ``options``); needs brax (``pip install jaxode[brax]``). See
    :mod:`jaxode.tools.envs.brax_adapter`."""
    from jaxode.tools.envs.brax_adapter import to_brax as _to_brax

    return _to_brax(env, **options)


def brax_randomization(randomize: dict):
    """Brax's ``randomization_fn(sys, rng) -> (sys_v, in_axes)`` from jaxode's
    ``randomize={field: (lo, hi)}`` (:mod:`jaxode.tools.envs.brax_adapter`)."""
    from jaxode.tools.envs.brax_adapter import brax_randomization as _f

    return _f(randomize)


def register_brax() -> list:
    """Add ``jaxode_cartpole``, ``jaxode_pendulum``, ``jaxode_walker``,
    ``jaxode_push_box`` to Brax's registry (``brax.envs.get_environment``)."""
    from jaxode.tools.envs.brax_adapter import register_brax as _f

    return _f()


register_gymnasium()  # gym.make("jaxode/CartPole-v0") after import jaxode (no-op without gymnasium)

__all__ = ["make", "ENVS", "REGISTRY", "BRAX_NAMES", "Env", "EnvState", "AutoReset", "to_gymnasium", "to_sb3", "to_brax",
           "brax_randomization", "register_brax", "register_gymnasium", "GYM_IDS", "CartPole",
           "Pendulum", "PushBox", "Walker", "randomize_params", "check_randomize", "param_names",
           "MujocoEnv", "from_mjcf"]
