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

from jaxode import params_spec
from jaxode._struct import pytree_dataclass, static_field

# Friction models (per geom surface; ``pyramid`` is Gazebo's default).
FRICTION_PYRAMID = 0  # ODE dContactApprox1: bound = mu * normal force (friction index)
FRICTION_BOX = 1  # ODE without Approx1: constant bound, mu in newtons
FRICTION_CONE = 2  # Gazebo's cone_model: (l1/mu)^2 + (l2/mu2)^2 <= (normal force)^2
FRICTION_MODELS = {"pyramid": FRICTION_PYRAMID, "box": FRICTION_BOX, "cone": FRICTION_CONE}


def _make_params() -> type:
    """``Params``: its fields, their order and its docstring come from the one
    declaration of every per-world parameter, :mod:`jaxode.params_spec`
    (units, ranges, defaults, unset encodings, combination rules)."""
    ns = {"__annotations__": {}, "__module__": __name__, "__qualname__": "Params",
          "__doc__": params_spec.params_doc()}
    for name, typ, *fld in params_spec.params_fields():
        ns["__annotations__"][name] = typ
        if fld:
            ns[name] = fld[0]
    return pytree_dataclass(type("Params", (), ns))


#: Per-world physical parameters (one field per entry of
#: :data:`jaxode.params_spec.SPECS`, in that order; see its docstring).
Params = _make_params()


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
    (``jaxode.sim.collision.trimesh.gather``), of which ``candidate_cap``
    (npair,) int per pair (its mesh's ``max_candidates``); 0, () and None
    otherwise. The mesh-mesh group also gathers geom 1's own triangles:
    ``candidates1``, ``mesh_window1`` and ``candidate_cap1`` likewise
    (``jaxode.sim.collision.trimesh_trimesh``).
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
    Convex hulls: convex_hulls, a :class:`jaxode.sim.collision.contact.Hull` whose
      tables carry a leading hull axis (nhull, ...), padded to the largest
      hull, geom frame; convex_geom (nhull,) int the geom of each hull (a
      convex geom's ``geom_dataid`` is its hull's index); None without any.
    Triangle meshes: trimeshes, a :class:`jaxode.sim.collision.contact.Mesh` with
      a leading mesh axis (nmesh, ...), padded to the largest, geom frame;
      trimesh_geom (nmesh,) int the geom of each mesh (a mesh geom's
      ``geom_dataid`` is its index); None without any.
    Collision: pair_groups (static structure), contact_capacity (contacts kept
      per step, all pairs together).
    Joints: joint_groups (one JointGroup per joint type), njoint, joint_index
      (per global joint: (type, position in its group), static); joint_order
      (static): the joints in the order ODE's island walk hands them to
      QuickStep (:func:`jaxode.build.builder.ode_joint_order`; empty: group order),
      the order of the joint rows the solver sweeps; joint_bodies (static): per
      global joint its (body1, body2) as its rows attach them (nbody = the
      static world), the joint graph ``solver="articulated"`` factorises.
    Solver: iterations (QuickStep iterations, static), solver name ("auto": pgs
      on a CPU, colored on a GPU, at trace time; :func:`jaxode.sim.solver.resolve`), reorder_seed
      (the seed of ODE's generator for pgs' row shuffles, static), reorder
      (which rows pgs shuffles: "joints" or "ode", static; see
      docs/ODE_FEATURES.md 6); batch_tile (static): worlds per tile when a batch
      (``jax.vmap`` of ``step``/``rollout``, jaxode/api.py) runs tile after
      tile (-1, the default: 32 for batches of more than 32 worlds when the
      default backend is CPU, else untiled; 0: the
      whole batch at once; an integer >= 2: that tile). A tile's solver row
      loops are small enough for XLA CPU to compile as one function each
      (jaxode/xla.py's small-loop option) and its data stay in cache: at 1024
      worlds on one CPU device boxes stepped 2x faster (bench/RESULTS.md,
      session 14). A world's results are bitwise the same in any tile; the
      batch-wide choices (shared contact slots, the pgs row shuffle taken from
      the batch's first world's step number) are made per tile, as
      jaxode.map_worlds makes them per device. A ``vmap`` of the lower-level
      ``physics_step`` tiles the solver's sweeps alone. slot_sizes (static):
      how many contact-slot counts below ``contact_capacity`` (halves of it,
      :func:`jaxode.sim.solver.batching.slot_counts`) a batch's solve also
      builds and prepares its contact rows for, each step taking the smallest
      that holds the slots live in some world (default 2; 0: the capacity
      only). Each size compiles the contact rows once more (~3-6 s more XLA
      on CPU for boxes) and saves their preparation on the empty slots
      (boxes 1.2x, bin_16 1.2-1.5x at 128-1024 worlds; bench/RESULTS.md,
      session 23); the results are bitwise the same; batches under 16 worlds
      and a world alone always use the capacity.
    Friction features (static, set by the builder so that unused features cost
    nothing): friction_cone (some pair uses the cone model), angular_friction
    (some surface has rolling or spinning friction: three extra rows per contact),
    friction_box (some pair uses the box model: ``pgs`` then solves those
    friction rows among the normal rows, in ODE's order).
    Auto-disable (ODE's dBodySetAutoDisable*, docs/ODE_FEATURES.md section 5):
    auto_disable (static) the step carries the enable/disable machinery (set
    when the world or a body had the flag at build time; off: the step is the
    one without it, bit for bit); body_auto_disable_samples (nbody,) int32
    dBodySetAutoDisableAverageSamplesCount per body (0: never idle);
    auto_disable_buffer (static) the velocity ring buffer's length, the
    largest of them (at least 1). The other settings are per-world
    ``Params.body_auto_disable*``.
    Joint-space passive dynamics (docs/ODE_FEATURES.md, "Joint damping,
    armature and springs"): joint_passive (static) hinge and slider joints
    carry one more row, the implicit damper and armature (``Params.
    joint_damping``, ``joint_armature``), and their springs (``joint_stiffness``,
    ``joint_springref``) act (set by the builder when some hinge or slider has
    one of them, or by ``WorldBuilder(joint_passive=True)``; off: the step is
    the one without them, bit for bit); joint_damping_explicit (static)
    ``joint_damping`` is Gazebo's explicit torque from the start-of-step rate
    instead of a row (``WorldBuilder(joint_damping="explicit")``).
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
    joint_order: tuple = static_field(default=())
    joint_bodies: tuple = static_field(default=())
    iterations: int = static_field(default=20)
    solver: str = static_field(default="auto")
    friction_cone: bool = static_field(default=False)
    angular_friction: bool = static_field(default=False)
    material_names: tuple = static_field(default=())
    friction_box: bool = static_field(default=False)
    reorder_seed: int = static_field(default=0)
    auto_disable: bool = static_field(default=False)
    body_auto_disable_samples: jax.Array = None
    auto_disable_buffer: int = static_field(default=1)
    reorder: str = static_field(default="joints")
    batch_tile: int = static_field(default=-1)
    slot_sizes: int = static_field(default=2)
    joint_passive: bool = static_field(default=False)
    joint_damping_explicit: bool = static_field(default=True)


#: Model.reorder values: which rows pgs shuffles (docs/ODE_FEATURES.md 6)
REORDERS = ("joints", "ode")


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


def empty_contacts(capacity: int, dtype) -> Contacts:
    """``capacity`` contact slots, all invalid and zero (an initial state's, a
    scene without pairs')."""
    zi = jnp.zeros((capacity,), jnp.int32)
    return Contacts(pos=jnp.zeros((capacity, 3), dtype), normal=jnp.zeros((capacity, 3), dtype),
                    depth=jnp.zeros((capacity,), dtype), geom1=zi, geom2=zi, friction=zi,
                    valid=jnp.zeros((capacity,), bool), force=jnp.zeros((capacity, 3), dtype))


@pytree_dataclass
class AutoDisableState:
    """ODE's per-body auto-disable bookkeeping (dxBody's average_* and adis_*
    fields; util.cpp dInternalHandleAutoDisabling).

    lvel, avel (nbody, S, 3): the ring buffer of sampled linear [m/s] and
    angular [rad/s] velocities (S = ``Model.auto_disable_buffer``; a body uses
    its first ``body_auto_disable_samples`` slots); counter (nbody,) int32 the
    next slot; ready (nbody,) bool the buffer has been filled once;
    steps_left (nbody,) idle steps still to go, time_left (nbody,) [s] idle
    time still to go; reset (nbody,) bool: the countdowns restart from the
    params' ``body_auto_disable_steps`` / ``_time`` at the next step (set by
    :func:`jaxode.init` and :func:`jaxode.enable`, as dBodyCreate and
    dBodyEnable do).
    """

    lvel: jax.Array
    avel: jax.Array
    counter: jax.Array
    ready: jax.Array
    steps_left: jax.Array
    time_left: jax.Array
    reset: jax.Array


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
    nonfinite: set when a step produced a non-finite state (that step is undone),
      and also when ``step``/``rollout`` found, at run time (traced values
      inside jit/vmap), invalid inputs for this world: params out of their
      declared range (:mod:`jaxode.params_spec`), dt outside
      [DT_MIN, DT_MAX], a zero or non-finite quaternion (the state is then
      left as it was); either way the world is frozen until reset and the
      other worlds of a batch are untouched;
    joint_feedback (njoint, 4, 3): ODE's dJointFeedback f1, t1, f2, t2 [N, N m]
      of the last step (force and torque each joint applied to its bodies);
    rng () uint32: ODE's random generator state (dRandGetSeed) from which a
      model with ``reorder="ode"`` draws QuickStep's row shuffles, per world
      (``init`` sets ``model.reorder_seed``; set it per world to seed a batch);
      None for other models;
    body_enabled (nbody,) bool: dBodyIsEnabled (a disabled body is frozen:
      not stepped, zero velocity kept, accumulators kept); auto_disable: the
      :class:`AutoDisableState`. Both None unless ``Model.auto_disable``;
    lcp_unsolved () int32: ``solver="direct"`` only (else None), a running
      total of steps whose dWorldStep LCP did not meet its complementarity
      tolerance within the pass cap (or hit a non-finite solve); such a step
      used the best bound-feasible iterate (:mod:`jaxode.sim.solver.direct`),
      0 means every step was solved.
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
    body_enabled: jax.Array = None
    auto_disable: AutoDisableState = None
    rng: jax.Array = None
    lcp_unsolved: jax.Array = None


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


def _jaxlib_at_least(major: int, minor: int) -> bool:
    import jaxlib
    parts = []
    for x in jaxlib.__version__.split(".")[:2]:
        digits = "".join(ch for ch in x if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= (major, minor)


# jaxode.batch shards over the local devices only where the sharded plain
# jit(vmap(step)) was not seen to deadlock (jaxlib 0.11+; see batch()).
_SHARD_BATCHES = _jaxlib_at_least(0, 11)


def batch(tree: Any, n: int) -> Any:
    """Stack ``n`` copies of a pytree along a new leading axis (per-world batch).

    With several local devices (one CPU device per core by default, see
    :mod:`jaxode.xla`), ``n`` a multiple of their number and jaxlib 0.11 or
    newer, the batch is placed sharded over them (:func:`jaxode.shard_worlds`):
    a ``jax.jit`` of a ``vmap``-ed step or rollout on it runs on every device.
    Otherwise it stays on the default device: with jaxlib 0.9/0.10 such a
    sharded ``jit(vmap(step))`` called back to back deadlocked in a cross-device
    all-reduce on a 2-core CPU (tests/test_no_hang.py); use
    :func:`jaxode.map_worlds` there for every core.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"batch: n must be an integer >= 1 (got {n!r})")
    out = jax.tree.map(lambda x: jnp.repeat(jnp.asarray(x)[None], n, axis=0), tree)
    ndev = jax.local_device_count()
    if ndev > 1 and n % ndev == 0 and jax.tree.leaves(out) and _SHARD_BATCHES:
        from jaxode.sharding import shard_worlds
        out = shard_worlds(out)
    return out
