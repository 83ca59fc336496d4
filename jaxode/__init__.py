"""jaxode: batched rigid-body physics with the semantics of the Open Dynamics Engine.

Build a scene with :class:`WorldBuilder`, then ``init``, ``step`` and
``rollout`` it; ``jax.vmap`` over states and ``Params`` steps many worlds.
"""
from jaxode import mass
from jaxode.api import (add_force, add_force_at_pos, add_force_at_rel_pos, add_rel_force,
                        add_rel_force_at_pos, add_rel_force_at_rel_pos, add_rel_torque,
                        add_torque, init, rollout, step)
from jaxode.builder import WorldBuilder
from jaxode.joint_api import (add_hinge_torque, add_slider_force, hinge_angle, hinge_angle_rate,
                              joint_feedback, slider_position, slider_position_rate)
from jaxode.surface import Surface
from jaxode.types import Contacts, Model, Params, State, Trajectory, batch

__version__ = "0.1.0"
__all__ = [
    "WorldBuilder", "Surface", "Model", "Params", "State", "Contacts", "Trajectory",
    "init", "step", "rollout", "batch", "mass",
    "add_force", "add_torque", "add_rel_force", "add_rel_torque", "add_force_at_pos",
    "add_force_at_rel_pos", "add_rel_force_at_pos", "add_rel_force_at_rel_pos",
    "hinge_angle", "hinge_angle_rate", "slider_position", "slider_position_rate",
    "joint_feedback", "add_hinge_torque", "add_slider_force",
]
