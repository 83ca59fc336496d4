"""The one table of jaxode's environments: name, class, Gymnasium id, Brax name.

``make``, Gymnasium's registration (``gym.make("jaxode/CartPole-v0")``) and
Brax's (``brax.envs.get_environment("jaxode_cartpole")``) all read
:data:`REGISTRY`; add an environment here and every adapter knows it.
"""
from __future__ import annotations

import dataclasses
import inspect

from jaxode.tools.envs.cartpole import CartPole
from jaxode.tools.envs.core import Env
from jaxode.tools.envs.mujoco_tasks import TASKS
from jaxode.tools.envs.pendulum import Pendulum
from jaxode.tools.envs.push_box import PushBox
from jaxode.tools.envs.walker import Walker


@dataclasses.dataclass(frozen=True)
class Registered:
    """One environment: ``make(name)`` builds ``cls``; ``gym_id`` for
    ``gymnasium.make``, ``brax_name`` for ``brax.envs.get_environment``."""

    name: str
    cls: type
    gym_id: str
    brax_name: str


REGISTRY = {e.name: e for e in (
    Registered("cartpole", CartPole, "jaxode/CartPole-v0", "jaxode_cartpole"),
    Registered("pendulum", Pendulum, "jaxode/Pendulum-v0", "jaxode_pendulum"),
    Registered("push_box", PushBox, "jaxode/PushBox-v0", "jaxode_push_box"),
    Registered("walker", Walker, "jaxode/Walker-v0", "jaxode_walker"),
    *(Registered(*t) for t in TASKS),
)}

#: name -> Env class
ENVS = {name: e.cls for name, e in REGISTRY.items()}
#: Gymnasium id -> name
GYM_IDS = {e.gym_id: name for name, e in REGISTRY.items()}
#: Brax registry name -> name
BRAX_NAMES = {e.brax_name: name for name, e in REGISTRY.items()}


def make(name: str, **options) -> Env:
    """The environment ``name`` (one of :data:`ENVS`) built with ``options`` (the
    class's arguments); ValueError naming the choices for an unknown name or option."""
    if name not in REGISTRY:
        raise ValueError(f"unknown environment {name!r}; choose from {sorted(REGISTRY)}")
    cls = REGISTRY[name].cls
    allowed = (cls.option_names() if hasattr(cls, "option_names") else
               [p for p in inspect.signature(cls.__init__).parameters if p != "self"])
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"env {name!r}: unknown option(s) {unknown}; options are {allowed}")
    from jaxode import compile_notice
    with compile_notice.notice(f"env {name!r} (building it)"):
        return cls(**options)
