"""jaxode: batched rigid-body physics with the semantics of the Open Dynamics Engine.

Build a scene with :class:`WorldBuilder`, then ``init``, ``step`` and
``rollout`` it; ``jax.vmap`` over states and ``Params`` steps many worlds.
``raycast`` reads the scene with rays (lidar, height scans).
"""
# Before anything creates an array: XLA flags for every core and bitwise batch
# invariance (see jaxode/xla.py; JAXODE_XLA_DEFAULTS=0 leaves XLA_FLAGS alone).
from jaxode import xla  # noqa: E402,I001
xla.configure()

from jaxode.build import mass  # noqa: E402
from jaxode.api import (add_force, add_force_at_pos, add_force_at_rel_pos, add_rel_force,
                        add_rel_force_at_pos, add_rel_force_at_rel_pos, add_rel_torque,
                        add_torque, init, rollout, step)
from jaxode.api import disable, enable, is_enabled  # noqa: E402
from jaxode.build.builder import WorldBuilder
from jaxode.joint_api import (add_hinge_torque, add_slider_force, hinge_angle, hinge_angle_rate,
                              joint_feedback, slider_position, slider_position_rate)
from jaxode.joint_api import (add_hinge2_torques, add_universal_torques, hinge2_angle1,  # noqa: E402
                              hinge2_angle1_rate, hinge2_angle2, hinge2_angle2_rate, pu_angle1,
                              pu_angle1_rate, pu_angle2, pu_angle2_rate, pu_position,
                              pu_position_rate, universal_angle1, universal_angle1_rate,
                              universal_angle2, universal_angle2_rate)
from jaxode.joint_api import add_amotor_torques, amotor_angle, amotor_angle_rate  # noqa: E402
from jaxode.joint_api import (add_piston_force, add_pr_torque, piston_angle,  # noqa: E402
                              piston_angle_rate, piston_position, piston_position_rate, pr_angle,
                              pr_angle_rate, pr_position, pr_position_rate)
from jaxode.sim.rays import raycast  # noqa: E402  (the module is jaxode.sim.rays)
from jaxode.build.surface import Surface  # noqa: E402
from jaxode.sim.constraint import erp_cfm_from_kp_kd  # noqa: E402
from jaxode.build.materials import MaterialTable, load_materials, set_pair as set_material_pair
from jaxode.tools import metrics  # noqa: E402
from jaxode.tools.sweep import SweepResult, sweep  # noqa: E402
from jaxode.overflow_report import CapacityWarning, warn_overflow  # noqa: E402
from jaxode.tools.capacity import Capacities, needed_capacities  # noqa: E402
from jaxode.tools.rendering import Camera, render, render_trajectory, save_gif  # noqa: E402
from jaxode.tools.rendering import grid as render_grid  # noqa: E402
from jaxode.sharding import map_worlds, shard_worlds, world_mesh  # noqa: E402
from jaxode.types import AutoDisableState, Contacts, Model, Params, State, Trajectory, batch
from jaxode import params_spec  # noqa: E402
from jaxode.params_spec import check_params  # noqa: E402
from jaxode.api import check_state  # noqa: E402
from jaxode.io import load, save  # noqa: E402
from jaxode.io.xml_util import JaxodeFormatWarning  # noqa: E402
from jaxode.io.sdf import load_sdf  # noqa: E402
from jaxode.io.urdf import load_urdf  # noqa: E402
from jaxode.io.mjcf import load_mjcf  # noqa: E402

# The user-facing modules keep their short public paths: ``jaxode.mass.box``,
# ``import jaxode.envs``, ``from jaxode.robots import build_walker`` (the package
# is laid out as sim/ build/ io/ tools/, see docs/ARCHITECTURE.md).
from jaxode.build import hull, meshes, robots  # noqa: E402
from jaxode.tools import envs, plot  # noqa: E402
import sys as _sys  # noqa: E402
for _name, _module in {"mass": mass, "hull": hull, "meshes": meshes, "robots": robots,
                       "envs": envs, "plot": plot, "metrics": metrics}.items():
    _sys.modules.setdefault(f"jaxode.{_name}", _module)
del _sys, _name, _module

__version__ = "0.1.0"
__all__ = [
    "check_params", "check_state", "params_spec",
    "WorldBuilder", "Surface", "erp_cfm_from_kp_kd", "MaterialTable", "load_materials",
    "set_material_pair", "Model", "Params", "State", "Contacts", "Trajectory",
    "AutoDisableState",
    "init", "step", "rollout", "batch", "mass", "sweep", "SweepResult", "metrics",
    "needed_capacities", "Capacities", "warn_overflow", "CapacityWarning",
    "add_force", "add_torque", "add_rel_force", "add_rel_torque", "add_force_at_pos",
    "add_force_at_rel_pos", "add_rel_force_at_pos", "add_rel_force_at_rel_pos",
    "enable", "disable", "is_enabled",
    "hinge_angle", "hinge_angle_rate", "slider_position", "slider_position_rate",
    "joint_feedback", "add_hinge_torque", "add_slider_force",
    "universal_angle1", "universal_angle2", "universal_angle1_rate", "universal_angle2_rate",
    "add_universal_torques", "hinge2_angle1", "hinge2_angle2", "hinge2_angle1_rate",
    "hinge2_angle2_rate", "add_hinge2_torques", "pu_position", "pu_position_rate", "pu_angle1",
    "pu_angle2", "pu_angle1_rate", "pu_angle2_rate",
    "amotor_angle", "amotor_angle_rate", "add_amotor_torques",
    "pr_position", "pr_position_rate", "pr_angle", "pr_angle_rate", "add_pr_torque",
    "piston_position", "piston_position_rate", "piston_angle", "piston_angle_rate",
    "add_piston_force", "raycast",
    "Camera", "render", "render_grid", "render_trajectory", "save_gif",
    "map_worlds", "shard_worlds", "world_mesh",
    "save", "load", "load_sdf", "load_urdf", "load_mjcf", "JaxodeFormatWarning",
]
