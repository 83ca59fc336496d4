"""Model, per-world parameters and state: immutable pytrees, structure of arrays.

Frames and units: SI throughout; positions and velocities in the world frame
unless a name says ``body``; quaternions are ``(w, x, y, z)`` as in ODE.

Index conventions: ``nbody`` dynamic bodies are ``0 .. nbody-1``; index
``nbody`` is the static world (a padding body with zero inverse mass and zero
velocity), so constraint code never branches on "attached to the world".
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxode._struct import pytree_dataclass, static_field

# Friction models (per geom surface; ``pyramid`` is Gazebo's default).
FRICTION_PYRAMID = 0  # ODE dContactApprox1: bound = mu * normal force (friction index)
FRICTION_BOX = 1  # ODE without Approx1: constant bound, mu in newtons
FRICTION_CONE = 2  # Gazebo's cone_model: (l1/mu)^2 + (l2/mu2)^2 <= (normal force)^2
FRICTION_MODELS = {"pyramid": FRICTION_PYRAMID, "box": FRICTION_BOX, "cone": FRICTION_CONE}


@pytree_dataclass
class Params:
    """Per-world physical parameters. Every leaf may carry a leading batch axis.

    World (the ODE manual's World chapter, same meaning and defaults):
      gravity (3,) [m/s^2]; erp, cfm: global error reduction and constraint
      force mixing; sor: SOR relaxation w of QuickStep; contact_max_correcting_vel
      [m/s]; contact_surface_layer [m]; linear_damping, angular_damping: scale
      in [0, 1] applied per step; *_damping_threshold [m/s, rad/s]: damping only
      above this speed; max_angular_speed [rad/s].
    Bodies: body_mass (nbody,) [kg]; body_inertia (nbody, 3, 3) [kg m^2], body
      frame, about the centre of mass (which is the body origin, as in ODE).
    Geom surfaces (ngeom,): mu, mu2 (friction coefficients, or newtons for the
      box model; mu2 < 0 means unset: equal to mu, so sweeping mu alone changes
      both directions), fdir1 (ngeom, 3) first friction direction in the geom frame
      (zero vector = unset), bounce (restitution in [0, 1]), bounce_vel [m/s]
      (minimum incoming speed for a bounce), soft_erp, soft_cfm (negative =
      unset: the world's erp/cfm apply), max_vel [m/s], min_depth [m],
      slip1, slip2 [m/(s N)] force-dependent slip, the CFM of the two
      friction rows (negative = unset: the world's cfm; slip2 unset with
      slip1 set = slip1).
      kp [N/m], kd [N s/m] (negative = unset): contact stiffness and damping;
      where set they replace soft_erp/soft_cfm by ERP = h kp / (h kp + kd),
      CFM = 1 / (h kp + kd) at the step h.
      motion1, motion2, motionN [m/s]: surface velocity of the geom along
      the contact's friction directions and outward along its normal
      (ODE's dContactMotion1/2/N; a conveyor belt).
      static_mu (negative = unset: mu), static_speed [m/s]: static friction
      coefficient and the tangential speed below which it blends in.
      rolling [-], spinning [m] (0 = off): rolling and spinning friction
      bounds rolling * r_e * normal force and spinning * normal force.
    Material pairs (M, M), symmetric, present when the scene names materials
      (see jaxode.materials; negative = unset): mat_friction,
      mat_restitution, mat_restitution_threshold [m/s], mat_static_friction,
      mat_static_speed [m/s], mat_rolling, mat_spinning [m], mat_soft_erp,
      mat_soft_cfm; they replace the surfaces' values for contacts between
      two geoms with materials.
    Joints (njoint, 3), one column per joint axis (ODE's dParam*, dParam*2,
      dParam*3): joint_lo_stop, joint_hi_stop [rad or m]; joint_vel [rad/s or
      m/s] motor target; joint_fmax [N m or N] motor force limit (0 = no
      motor); joint_fudge_factor; joint_bounce; joint_cfm (motor row CFM),
      joint_stop_erp, joint_stop_cfm (limit rows); negative CFM/ERP values mean
      "the world's value" (ODE copies the world's at joint creation).
      joint_suspension_erp, joint_suspension_cfm (njoint,): hinge-2's
      suspension (dParamSuspensionERP/CFM; negative = the world's erp/cfm).
    """

    gravity: jax.Array
    erp: jax.Array
    cfm: jax.Array
    sor: jax.Array
    contact_max_correcting_vel: jax.Array
    contact_surface_layer: jax.Array
    linear_damping: jax.Array
    angular_damping: jax.Array
    linear_damping_threshold: jax.Array
    angular_damping_threshold: jax.Array
    max_angular_speed: jax.Array
    body_mass: jax.Array
    body_inertia: jax.Array
    mu: jax.Array
    mu2: jax.Array
    fdir1: jax.Array
    bounce: jax.Array
    bounce_vel: jax.Array
    soft_erp: jax.Array
    soft_cfm: jax.Array
    max_vel: jax.Array
    min_depth: jax.Array
    joint_lo_stop: jax.Array = None
    joint_hi_stop: jax.Array = None
    joint_vel: jax.Array = None
    joint_fmax: jax.Array = None
    joint_fudge_factor: jax.Array = None
    joint_bounce: jax.Array = None
    joint_cfm: jax.Array = None
    joint_stop_erp: jax.Array = None
    joint_stop_cfm: jax.Array = None
    joint_suspension_erp: jax.Array = None
    joint_suspension_cfm: jax.Array = None
    slip1: jax.Array = None
    slip2: jax.Array = None
    kp: jax.Array = None
    kd: jax.Array = None
    motion1: jax.Array = None
    motion2: jax.Array = None
    motionN: jax.Array = None
    static_mu: jax.Array = None
    static_speed: jax.Array = None
    rolling: jax.Array = None
    spinning: jax.Array = None
    mat_friction: jax.Array = None
    mat_restitution: jax.Array = None
    mat_restitution_threshold: jax.Array = None
    mat_static_friction: jax.Array = None
    mat_static_speed: jax.Array = None
    mat_rolling: jax.Array = None
    mat_spinning: jax.Array = None
    mat_soft_erp: jax.Array = None
    mat_soft_cfm: jax.Array = None


@pytree_dataclass
class PairGroup:
    """All candidate geom pairs of one (type1, type2) kind.

    ``geom1``/``geom2`` (npair,) are ordered so that the narrowphase function
    for ``(type1, type2)`` applies. At most ``capacity`` pairs whose bounding
    boxes overlap are passed to the narrowphase each step (the rest are counted
    as overflow); ``ncontact`` is the number of contact slots kept per pair.
    ``max_contacts`` (npair,) is the per-pair limit min(max_contacts_1,
    max_contacts_2); ``friction`` (npair,) the pair's friction model id.
    Mesh groups (type2 a triangle mesh) gather ``candidates`` triangles per
    pair from a block of ``mesh_window`` (3 ints) grid cells
    (``jaxode.collision.trimesh.gather``), of which ``candidate_cap``
    (npair,) int per pair (its mesh's ``max_candidates``); 0, () and None
    otherwise. The mesh-mesh group also gathers geom 1's own triangles:
    ``candidates1``, ``mesh_window1`` and ``candidate_cap1`` likewise
    (``jaxode.collision.trimesh_trimesh``).
    """

    geom1: jax.Array
    geom2: jax.Array
    max_contacts: jax.Array
    friction: jax.Array
    type1: int = static_field()
    type2: int = static_field()
    capacity: int = static_field()
    ncontact: int = static_field()
    candidate_cap: jax.Array = None
    candidates: int = static_field(default=0)
    mesh_window: tuple = static_field(default=())
    candidate_cap1: jax.Array = None
    candidates1: int = static_field(default=0)
    mesh_window1: tuple = static_field(default=())


@pytree_dataclass
class Model:
    """Everything fixed for one compiled step, plus the default ``params``.

    Bodies: body_gravity (nbody,) 1.0 where gravity acts (dBodySetGravityMode);
      body_finite_rotation (nbody,) 1.0 for ODE's finite rotation mode.
    Initial state (what :func:`jaxode.init` returns, as built): init_pos
      (nbody, 3) [m], init_quat (nbody, 4) (w, x, y, z), init_vel (nbody, 3)
      [m/s], init_angvel (nbody, 3) [rad/s], world frame. Ordinary leaves, so
      ``replace``, ``jax.tree.map`` and save/load keep them; None on a Model
      made by hand (init then raises).
    Geoms: geom_type (ngeom,) type id; geom_body (ngeom,) body index (nbody for
      static geoms); geom_pos (ngeom, 3) / geom_quat (ngeom, 4) offset from the
      body frame (world pose for static geoms); geom_size (ngeom, 3) [m]
      (sphere: radius; box: sides; capsule, cylinder: radius, length;
      heightfield: lx, ly; convex hull and mesh: size[1] their bounding radius);
      geom_dataid (ngeom,) int32 the index of the geom's hull, mesh or
      heightfield in its table below (-1 for the other types; MuJoCo's name);
      (friction model and max contacts are resolved per pair, see PairGroup);
      geom_material (ngeom,) index into material_names (-1: none).
    Heightfields: hfield_heights (nhfield, NX, NY) [m] grids padded to the
      largest, hfield_dims (nhfield, 2) int their (nx, ny); None without any.
    Convex hulls: convex_hulls, a :class:`jaxode.collision.types.Hull` whose
      tables carry a leading hull axis (nhull, ...), padded to the largest
      hull, geom frame; convex_geom (nhull,) int the geom of each hull (a
      convex geom's ``geom_dataid`` is its hull's index); None without any.
    Triangle meshes: trimeshes, a :class:`jaxode.collision.types.Mesh` with
      a leading mesh axis (nmesh, ...), padded to the largest, geom frame;
      trimesh_geom (nmesh,) int the geom of each mesh (a mesh geom's
      ``geom_dataid`` is its index); None without any.
    Collision: pair_groups (static structure), contact_capacity (contacts kept
      per step, all pairs together).
    Joints: joint_groups (one JointGroup per joint type), njoint, joint_index
      (per global joint: (type, position in its group), static).
    Solver: iterations (QuickStep iterations, static), solver name.
    Friction features (static, set by the builder so that unused features cost
    nothing): friction_cone (some pair uses the cone model), angular_friction
    (some surface has rolling or spinning friction: three extra rows per contact).
    """

    nbody: int = static_field()
    ngeom: int = static_field()
    body_gravity: jax.Array = None
    body_finite_rotation: jax.Array = None
    init_pos: jax.Array = None
    init_quat: jax.Array = None
    init_vel: jax.Array = None
    init_angvel: jax.Array = None
    geom_type: jax.Array = None
    geom_body: jax.Array = None
    geom_pos: jax.Array = None
    geom_quat: jax.Array = None
    geom_size: jax.Array = None
    geom_dataid: jax.Array = None
    hfield_heights: jax.Array = None
    hfield_dims: jax.Array = None
    convex_hulls: Any = None
    convex_geom: jax.Array = None
    trimeshes: Any = None
    trimesh_geom: jax.Array = None
    geom_material: jax.Array = None
    pair_groups: tuple = ()
    joint_groups: tuple = ()
    params: Params = None
    contact_capacity: int = static_field(default=0)
    njoint: int = static_field(default=0)
    joint_index: tuple = static_field(default=())
    iterations: int = static_field(default=20)
    solver: str = static_field(default="pgs")
    friction_cone: bool = static_field(default=False)
    angular_friction: bool = static_field(default=False)
    material_names: tuple = static_field(default=())


@pytree_dataclass
class Contacts:
    """The contacts of the last step, compacted into ``contact_capacity`` slots.

    pos (C, 3) world point [m]; normal (C, 3) unit, from geom 2 into geom 1;
    depth (C,) [m]; geom1, geom2 (C,) geom indices; friction (C,) friction
    model id; valid (C,) bool;
    force (C, 3) constraint force on geom 1's body in (normal, fdir1, fdir2)
    coordinates [N] (the solver's lambda).
    """

    pos: jax.Array
    normal: jax.Array
    depth: jax.Array
    geom1: jax.Array
    geom2: jax.Array
    friction: jax.Array
    valid: jax.Array
    force: jax.Array


@pytree_dataclass
class State:
    """Dynamic state of one world (structure of arrays).

    pos (nbody, 3) [m] and quat (nbody, 4) (w, x, y, z) of the body frames;
    vel (nbody, 3) [m/s] and angvel (nbody, 3) [rad/s], world frame;
    force, torque (nbody, 3) [N, N m]: world-frame accumulators, applied by the
      next step and then zeroed (as dBodyAddForce and friends);
    time [s]; contacts: the last step's contacts; ncontact: valid contacts found
      in the last step (before capacity truncation);
    overflow_pairs, overflow_contacts: running totals of candidate pairs and
      contacts dropped for lack of capacity (0 means nothing was ever dropped);
    nonfinite: set when a step produced a non-finite state; that step is undone
      and the world is frozen until reset;
    joint_feedback (njoint, 4, 3): ODE's dJointFeedback f1, t1, f2, t2 [N, N m]
      of the last step (force and torque each joint applied to its bodies).
    """

    pos: jax.Array
    quat: jax.Array
    vel: jax.Array
    angvel: jax.Array
    force: jax.Array
    torque: jax.Array
    time: jax.Array
    contacts: Contacts
    ncontact: jax.Array
    overflow_pairs: jax.Array
    overflow_contacts: jax.Array
    nonfinite: jax.Array
    joint_feedback: jax.Array = None


@pytree_dataclass
class Trajectory:
    """Per-step record of a rollout: leading axis is the step (after each step).

    pos, quat, vel, angvel, time as in :class:`State`; ncontact: contacts found
    in the step; max_depth [m]: the deepest valid contact of the step's
    collision pass (0 without contact; the penetration metrics use it).
    """

    pos: jax.Array
    quat: jax.Array
    vel: jax.Array
    angvel: jax.Array
    time: jax.Array
    ncontact: jax.Array
    max_depth: jax.Array = None


def batch(tree: Any, n: int) -> Any:
    """Stack ``n`` copies of a pytree along a new leading axis (per-world batch)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"batch: n must be an integer >= 1 (got {n!r})")
    return jax.tree.map(lambda x: jnp.repeat(jnp.asarray(x)[None], n, axis=0), tree)
