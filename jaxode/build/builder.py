"""Host-side scene builder: names, defaults and validation live here.

``WorldBuilder`` collects bodies and geoms with ODE's parameter names and
defaults, checks every value (raising ``ValueError`` that names the field and
its allowed range), and ``build()`` turns the scene into a :class:`Model` of
arrays plus static structure (pair tables, capacities) for the jitted step.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.build import hull as hull_lib
from jaxode.build import meshes as mesh_lib
from jaxode.build import mass as mass_lib
from jaxode.sim.collision import trimesh as trimesh_nc
from jaxode.sim.collision import trimesh_trimesh
from jaxode.sim.collision import contact as ct
from jaxode.build.surface import Surface
from jaxode.build import materials as mat_lib
from jaxode.types import FRICTION_MODELS, REORDERS, Model, PairGroup, Params
from jaxode.sim import joints as jt
from jaxode.sim.joints import passive as passive_lib
from jaxode.sim import narrowphase, pipeline
from jaxode import params_spec

_DEFAULT_SURFACE = Surface()   # frozen; shared by every geom added without a surface


def _vec(name: str, value, n: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a sequence of {n} numbers (got {value!r})") from None
    if a.shape != (n,):
        raise ValueError(f"{name} must have {n} components (got {a.size})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, no NaN or inf (got {value!r})")
    # ODE bounds no position or velocity; a finite value must stay finite in the
    # working dtype (float32 unless jax_enable_x64).
    big = np.finfo(np.float64 if jax.config.jax_enable_x64 else np.float32).max
    if np.any(np.abs(a) > big):
        raise ValueError(f"{name} must be finite in the working dtype, |x| <= {big:.3g} "
                         f"(got {value!r})")
    return a


def _state_vec(name: str, value) -> np.ndarray:
    """A body's initial pos [m], vel [m/s] or angvel [rad/s]: a finite 3-vector
    whose squared length stays finite in the working dtype (the step computes
    squared speeds and distances): every component within
    :func:`jaxode.params_spec.state_bound` (1.07e19 in float32, 7.7e153 in
    float64). ODE bounds no position or velocity; beyond that bound nothing the
    step computes from the value is meaningful."""
    a = _vec(name, value, 3)
    bound = params_spec.state_bound(np.float64 if jax.config.jax_enable_x64 else np.float32)
    if np.any(np.abs(a) > bound):
        raise ValueError(f"{name} must have every component within +-{bound:.3g} (its squared "
                         f"length must stay finite in the working dtype) (got {value!r})")
    return a


def _scalar(name: str, value, lo=None, hi=None, lo_open=False, hi_open=False, allow_inf=False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number (got {value!r})") from None
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be finite (got {value!r})")
    lo_ok = lo is None or (v > lo if lo_open else v >= lo)
    hi_ok = hi is None or (v < hi if hi_open else v <= hi)
    if not (lo_ok and hi_ok):
        lb = "-inf" if lo is None else f"{lo}"
        ub = "inf" if hi is None else f"{hi}"
        rng = ("(" if lo_open else "[") + f"{lb}, {ub}" + (")" if hi_open else "]")
        raise ValueError(f"{name} must be in {rng} (got {v!r})")
    return v


def _param(field: str, value, label: Optional[str] = None) -> float:
    """A scalar per-world parameter checked against its declaration
    (:mod:`jaxode.params_spec`): ValueError naming ``label``, the range and the value."""
    spec = params_spec.SPECS[field]
    label = label or field
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{label} must be a number in {spec.range_text(False)} "
                         f"(got {value!r})") from None
    return params_spec.check_value(field, v, label=label)


def _quat(name: str, q) -> np.ndarray:
    q = _vec(name, q, 4)
    n = np.linalg.norm(q)
    if n < 1e-12:
        raise ValueError(f"{name} must be a non-zero quaternion (w, x, y, z) (got "
                         f"{tuple(float(x) for x in q)})")
    return q / n


def _bits(name: str, v) -> int:
    if not isinstance(v, (int, np.integer)) or v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"{name} must be an integer in [0, 2**32-1] (got {v!r})")
    return int(v)


def _group_by_identity(objs: list) -> list:
    """[(obj, indices)] for each distinct object (by identity) of ``objs``, in
    order of first appearance; indices an int array into ``objs``."""
    groups: dict[int, tuple] = {}
    for k, o in enumerate(objs):
        groups.setdefault(id(o), (o, []))[1].append(k)
    return [(o, np.asarray(idx, np.int64)) for o, idx in groups.values()]


def _state_round(v) -> np.ndarray:
    """``v`` as float64 after rounding to the active float dtype (what jnp.asarray
    stores: float32 unless jax_enable_x64; the identity with x64)."""
    return np.asarray(jnp.asarray(np.asarray(v, np.float64)), np.float64)


def _quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def _mat_to_quat(r: np.ndarray) -> np.ndarray:
    """Rotation matrix to unit quaternion (w, x, y, z), w >= 0."""
    t = np.trace(r)
    if t > 0:
        s = math.sqrt(t + 1.0) * 2
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(r)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = math.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k]) * 2
        q = [0.0] * 4
        q[0] = (r[k, j] - r[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[j, i] + r[i, j]) / s
        q[1 + k] = (r[k, i] + r[i, k]) / s
    q = np.asarray(q)
    return q * (1 if q[0] >= 0 else -1) / np.linalg.norm(q)


_ADIS_KEYS = ("flag", "linear_threshold", "angular_threshold", "average_samples", "steps",
              "time")


def _auto_disable_settings(where: str, flag, linear_threshold, angular_threshold,
                           average_samples, steps, time) -> dict:
    """ODE's auto-disable settings of the world or a body, checked (ValueError
    naming the keyword, the range and the value)."""
    if not isinstance(flag, (bool, np.bool_)):
        raise ValueError(f"{where}: auto_disable must be True or False (got {flag!r})")
    for name, v in (("auto_disable_average_samples", average_samples),
                    ("auto_disable_steps", steps)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{where}: {name} must be an integer >= 0 (got {v!r})")
    return dict(
        flag=bool(flag),
        linear_threshold=_param("body_auto_disable_linear_threshold", linear_threshold,
                                f"{where}: auto_disable_linear_threshold"),
        angular_threshold=_param("body_auto_disable_angular_threshold", angular_threshold,
                                 f"{where}: auto_disable_angular_threshold"),
        average_samples=int(average_samples), steps=int(steps),
        time=_param("body_auto_disable_time", time, f"{where}: auto_disable_time"))


def ode_joint_order(nbody: int, joints) -> tuple:
    """The joints (indices into ``joints``, a list of (body1, body2) with None for
    the static world) in the order ODE 0.16 hands them to QuickStep when they
    were created in list order after the bodies: ``dxProcessIslands``
    (``util.cpp``) walks the islands depth first from ``world->firstbody`` (the
    body created last: ODE prepends new bodies), and lists each body's joints
    newest first (``dJointAttach`` prepends). jaxode sweeps the joint rows in
    this order (the order decides what 20 unconverged iterations leave, and an
    order other than ODE's let fuzzed joint chains gain energy where ODE stays
    calm: docs/RELIABILITY.md). Contacts, which ODE's walk also follows, are
    left out: jaxode's contact rows come after the joint rows."""
    lists = {b: [] for b in range(nbody)}
    for ji, (b1, b2) in enumerate(joints):
        for b in (b1, b2):
            if b is not None:
                lists[b].insert(0, ji)
    tagged_b, tagged_j, order = set(), set(), []
    for start in reversed(range(nbody)):
        if start in tagged_b:
            continue
        tagged_b.add(start)
        stack, b = [], start
        while True:
            for ji in lists[b]:
                if ji in tagged_j:
                    continue
                tagged_j.add(ji)
                order.append(ji)
                b1, b2 = joints[ji]
                other = b2 if b1 == b else b1
                if other is not None and other not in tagged_b:
                    tagged_b.add(other)
                    stack.append(other)
            if not stack:
                break
            b = stack.pop()
    return tuple(order)


class WorldBuilder:
    """Collects a scene with ODE's World parameters (ODE manual, World chapter).

    gravity (3,) [m/s^2]; erp in [0, 1]; cfm >= 0 (default 1e-5 in float32,
    1e-10 with ``jax_enable_x64``, as ODE single/double); iterations >= 1
    (QuickStep); sor in (0, 2) (QuickStep w); contact_max_correcting_vel >= 0
    [m/s] (0: no penetration correction velocity, as ODE); contact_surface_layer >= 0 [m]; linear/angular_damping in [0, 1];
    *_damping_threshold >= 0 [m/s, rad/s]; max_angular_speed > 0 [rad/s]
    (inf = no limit); friction_model: the default for surfaces that name none
    ("pyramid", "box" or "cone"; see :class:`jaxode.Surface`); solver: how
    QuickStep's rows are swept: ``"auto"`` (the default: ``"pgs"`` when the
    step is traced for a CPU, ``"colored"`` for a GPU, each the faster there by
    measurement, bench/RESULTS.md; :func:`jaxode.sim.solver.resolve`), ``"pgs"``
    (row after row in QuickStep's order, :mod:`jaxode.sim.solver`; the
    conformance reference) or ``"colored"`` (the same Gauss-Seidel
    sweeps with the rows sorted by a greedy graph colouring, each colour
    updated at once, :mod:`jaxode.sim.solver.colored`; for GPUs), both with
    ``iterations`` and ``sor``, or ``"direct"``: ODE's big-matrix ``dWorldStep``
    instead of QuickStep, one dense LCP per world solved exactly
    (:mod:`jaxode.sim.solver.direct`; ``iterations`` and ``sor`` unused; pyramid
    and box friction, no cone), or ``"articulated"``: the joints' unbounded rows
    (constraint, damping/armature, unbounded motor rows) solved exactly on the
    joint tree and ``iterations`` QuickStep sweeps with ``sor`` on the bounded rows
    (limits, motors, contacts) only (:mod:`jaxode.sim.solver.articulated`; robots
    whose joints are much stiffer than their links: MuJoCo's armature, URDF
    damping on light links).
    reorder_seed: the seed of ODE's generator (dRandSetSeed) from which pgs draws
    QuickStep's row shuffles (default 0, ODE's at library start; a static model
    option: see docs/ODE_FEATURES.md).
    reorder: which rows ``pgs`` shuffles before iterations 8, 16, ...:
    ``"joints"`` (the default: the joint rows, drawn from a table indexed by the
    step number; contact rows keep ODE's initial order) or ``"ode"`` (every
    row of the world, as ODE 0.16's QuickStep shuffles its island's rows, from
    ODE's generator carried per world in ``State.rng``, seeded with
    ``reorder_seed``; pgs only, no cone friction). See docs/ODE_FEATURES.md 6.
    joint_damping: how hinge and slider ``damping`` acts: ``"implicit"`` (the
    default: a row of the solve, the force from the end-of-step rate, as
    MuJoCo's Euler; stable for any damping and inertia) or ``"explicit"``
    (Gazebo's ODEJoint::ApplyExplicitStiffnessDamping: the torque from the
    start-of-step rate, added before the step; unstable once damping * dt
    exceeds about twice the joint's effective inertia). joint_passive: build
    the passive rows (implicit damping, armature, springs;
    :mod:`jaxode.sim.joints.passive`) even when no joint has them at build time,
    so that per-world params may switch them on later (None: when some hinge or
    slider has them).
    Auto-disable (ODE's dWorldSetAutoDisable*, the defaults of bodies added
    later; docs/ODE_FEATURES.md section 5): auto_disable (bool, default off as
    in ODE); auto_disable_linear_threshold >= 0 [m/s] and
    auto_disable_angular_threshold >= 0 [rad/s] (ODE's 0.01); an idle body's
    averaged velocities are at most these; auto_disable_average_samples
    (integer >= 0, ODE's 1; 0: never idle) velocity samples averaged;
    auto_disable_steps (integer >= 0, ODE's 10) and auto_disable_time >= 0
    [s] (ODE's 0): a body disables once idle for both. ``add_body`` takes the
    same keywords per body (dBodySetAutoDisable*).
    """

    SOLVERS = tuple(pipeline.SOLVERS)

    def __init__(self, gravity: Sequence[float] = (0.0, 0.0, 0.0), erp: float = 0.2,
                 cfm: Optional[float] = None, iterations: int = 20, sor: float = 1.3,
                 contact_max_correcting_vel: float = math.inf,
                 contact_surface_layer: float = 0.0, linear_damping: float = 0.0,
                 angular_damping: float = 0.0, linear_damping_threshold: float = 0.01,
                 angular_damping_threshold: float = 0.01,
                 max_angular_speed: float = math.inf, friction_model: str = "pyramid",
                 solver: str = "auto", reorder_seed: int = 0, auto_disable: bool = False,
                 auto_disable_linear_threshold: float = 0.01,
                 auto_disable_angular_threshold: float = 0.01,
                 auto_disable_average_samples: int = 1, auto_disable_steps: int = 10,
                 auto_disable_time: float = 0.0, reorder: str = "joints",
                 joint_damping: str = "implicit", joint_passive: Optional[bool] = None):
        if solver not in (pipeline.AUTO_SOLVER,) + self.SOLVERS:
            raise ValueError(f"solver must be one of {(pipeline.AUTO_SOLVER,) + self.SOLVERS} "
                             f"(got {solver!r})")
        self.solver = solver
        if reorder not in REORDERS:
            raise ValueError(f"reorder must be one of {REORDERS} (got {reorder!r})")
        if reorder == "ode" and solver not in ("pgs", pipeline.AUTO_SOLVER):
            raise ValueError(f"reorder='ode' (ODE 0.16's shuffle of every row) needs solver "
                             f"'pgs' (got solver {solver!r})")
        self.reorder = reorder
        if not isinstance(reorder_seed, (int, np.integer)) or not 0 <= reorder_seed < 2 ** 32:
            raise ValueError(f"reorder_seed must be an integer in [0, 2**32) (ODE's dRandSetSeed; "
                             f"got {reorder_seed!r})")
        self.reorder_seed = int(reorder_seed)
        if cfm is None:
            cfm = 1e-10 if jax.config.jax_enable_x64 else 1e-5
        if joint_damping not in ("implicit", "explicit"):
            raise ValueError(f"joint_damping must be 'implicit' or 'explicit' (got "
                             f"{joint_damping!r})")
        if joint_passive is not None and not isinstance(joint_passive, bool):
            raise ValueError(f"joint_passive must be True, False or None (got {joint_passive!r})")
        self.joint_damping = joint_damping
        self.joint_passive = joint_passive
        self.gravity = _vec("gravity", gravity, 3)
        if not isinstance(iterations, (int, np.integer)) or iterations < 1:
            raise ValueError(f"iterations must be an integer >= 1 (got {iterations!r})")
        self.iterations = int(iterations)
        # World parameters: ranges from jaxode.params_spec.
        for name, v in (("erp", erp), ("cfm", cfm), ("sor", sor),
                        ("contact_max_correcting_vel", contact_max_correcting_vel),
                        ("contact_surface_layer", contact_surface_layer),
                        ("linear_damping", linear_damping), ("angular_damping", angular_damping),
                        ("linear_damping_threshold", linear_damping_threshold),
                        ("angular_damping_threshold", angular_damping_threshold),
                        ("max_angular_speed", max_angular_speed)):
            setattr(self, name, _param(name, v))
        if friction_model not in FRICTION_MODELS:
            raise ValueError(f"friction_model must be one of {sorted(FRICTION_MODELS)} (got {friction_model!r})")
        self.friction_model = friction_model
        self.auto_disable = _auto_disable_settings(
            "WorldBuilder", auto_disable, auto_disable_linear_threshold,
            auto_disable_angular_threshold, auto_disable_average_samples, auto_disable_steps,
            auto_disable_time)
        self.bodies: list[dict] = []
        self.geoms: list[dict] = []
        self.materials = mat_lib.MaterialTable()
        self.joints: list[dict] = []
        self.hfields: list[np.ndarray] = []
        self.hulls: list[tuple[int, hull_lib.HullData]] = []  # (geom, hull tables)
        self.meshes: list[tuple[int, mesh_lib.MeshData, Optional[int]]] = []  # (geom, tables, K cap)
        self.excluded_pairs: set[frozenset] = set()  # body pairs that never collide
        self._valid_surfaces: dict[int, Surface] = {}  # id -> Surface checked (kept alive)

    # --------------------------------------------------------------- materials
    def add_material(self, name: str, **props) -> None:
        """Declare material ``name`` with per-material values used by the
        combination rule for pairs not in the table (properties of
        :mod:`jaxode.build.materials`: friction, restitution, restitution_threshold,
        static_friction, static_speed, rolling, spinning, soft_erp, soft_cfm)."""
        self.materials.add_material(name, **props)

    def set_material_pair(self, name1: str, name2: str, **props) -> None:
        """Properties of the material pair (order-free; RaiSim's setMaterialPairProp)."""
        self.materials.set_pair(name1, name2, **props)

    def set_default_material(self, rule: Optional[str] = None, **props) -> None:
        """The default pair's properties (RaiSim's setDefaultMaterial) and the rule
        for pairs not in the table: "default", "agx" or "gazebo"."""
        if rule is not None:
            self.materials.set_rule(rule)
        self.materials.set_default(**props)

    def use_materials(self, table: "mat_lib.MaterialTable") -> None:
        """Add a table read by :func:`jaxode.load_materials` (its rule applies)."""
        if not isinstance(table, mat_lib.MaterialTable):
            raise ValueError(f"use_materials: expected a MaterialTable (got {type(table).__name__})")
        self.materials.merge(table)

    # ------------------------------------------------------------------ bodies
    def add_body(self, pos: Sequence[float] = (0.0, 0.0, 0.0), quat: Sequence[float] = (1.0, 0.0, 0.0, 0.0),
                 vel: Sequence[float] = (0.0, 0.0, 0.0), angvel: Sequence[float] = (0.0, 0.0, 0.0),
                 mass: Optional[mass_lib.Mass] = None, gravity: bool = True,
                 finite_rotation: bool = False, auto_disable: Optional[bool] = None,
                 auto_disable_linear_threshold: Optional[float] = None,
                 auto_disable_angular_threshold: Optional[float] = None,
                 auto_disable_average_samples: Optional[int] = None,
                 auto_disable_steps: Optional[int] = None,
                 auto_disable_time: Optional[float] = None) -> int:
        """Add a rigid body (dBodyCreate); returns its index.

        pos [m], quat (w, x, y, z), vel [m/s], angvel [rad/s] in the world frame.
        mass: a :class:`jaxode.mass.Mass` whose centre of mass is the body
        origin (ODE requires it; translate the geoms instead). ``None`` gives
        ODE's default body mass: 1 kg, identity inertia.
        gravity: dBodySetGravityMode; finite_rotation: dBodySetFiniteRotationMode.
        auto_disable, auto_disable_*: the body's dBodySetAutoDisable* settings
        (None: the builder's, as dBodySetAutoDisableDefaults; see
        :class:`WorldBuilder`).
        """
        i = len(self.bodies)
        where = f"body {i}"
        if mass is None:
            mass = mass_lib.from_inertia(1.0, np.eye(3))
        if not isinstance(mass, mass_lib.Mass):
            raise ValueError(f"{where}: mass must be a jaxode.mass.Mass (got {type(mass).__name__})")
        mass_lib.validate(mass, f"{where}: mass")
        com = np.asarray(mass.com, dtype=np.float64)
        if np.linalg.norm(com) > 1e-9 * max(1.0, float(np.abs(mass.inertia).max())):
            raise ValueError(
                f"{where}: mass.com must be (0, 0, 0): as in ODE the centre of mass is the body "
                f"origin (got {tuple(com)}); place the body at the centre of mass and offset its geoms")
        w = self.auto_disable
        adis = _auto_disable_settings(
            where, *(w[k] if v is None else v for k, v in zip(
                _ADIS_KEYS, (auto_disable, auto_disable_linear_threshold,
                             auto_disable_angular_threshold, auto_disable_average_samples,
                             auto_disable_steps, auto_disable_time))))
        self.bodies.append(dict(
            adis=adis,
            pos=_state_vec(f"{where}: pos", pos), quat=_quat(f"{where}: quat", quat),
            vel=_state_vec(f"{where}: vel", vel), angvel=_state_vec(f"{where}: angvel", angvel),
            mass=float(mass.mass), inertia=np.asarray(mass.inertia, dtype=np.float64),
            gravity=bool(gravity), finite_rotation=bool(finite_rotation)))
        return i

    # ------------------------------------------------------------------- geoms
    def _add_geom(self, gtype: int, size: np.ndarray, body: Optional[int], pos, quat,
                  surface: Optional[Surface], category_bits: int, collide_bits: int) -> int:
        i = len(self.geoms)
        where = f"geom {i} ({ct.GEOM_TYPE_NAMES[gtype]})"
        if body is not None:
            if not isinstance(body, (int, np.integer)) or not 0 <= body < len(self.bodies):
                raise ValueError(f"{where}: body must be an existing body index in "
                                 f"[0, {len(self.bodies) - 1}] or None (got {body!r})")
            body = int(body)
        surface = _DEFAULT_SURFACE if surface is None else surface
        if not isinstance(surface, Surface):
            raise ValueError(f"{where}: surface must be a jaxode.Surface (got {type(surface).__name__})")
        if id(surface) not in self._valid_surfaces:
            # a Surface is frozen: checked once per object, however many geoms share it
            surface.validate(f"{where}: surface")
            self._valid_surfaces[id(surface)] = surface
        self.geoms.append(dict(
            type=gtype, size=size, body=body, pos=_vec(f"{where}: pos", pos, 3),
            quat=_quat(f"{where}: quat", quat), surface=surface,
            category=_bits(f"{where}: category_bits", category_bits),
            collide=_bits(f"{where}: collide_bits", collide_bits)))
        return i

    def add_plane(self, normal: Sequence[float] = (0.0, 0.0, 1.0), offset: float = 0.0,
                  surface: Optional[Surface] = None, category_bits: int = 0xFFFFFFFF,
                  collide_bits: int = 0xFFFFFFFF) -> int:
        """Static half-space ``n . x <= offset`` (dCreatePlane); normal need not be unit."""
        n = _vec("plane normal", normal, 3)
        ln = np.linalg.norm(n)
        if ln < 1e-12:
            raise ValueError(f"plane normal must have non-zero length (got {tuple(n)})")
        offset = _scalar("plane offset", offset)
        n = n / ln
        # Plane frame: z axis = normal, origin = n * offset (offset scaled as ODE normalises).
        z = n
        x = np.cross([0.0, 1.0, 0.0], z) if abs(z[1]) < 0.9 else np.cross(z, [1.0, 0.0, 0.0])
        x /= np.linalg.norm(x)
        y = np.cross(z, x)
        q = _mat_to_quat(np.stack([x, y, z], axis=1))
        return self._add_geom(ct.PLANE, np.zeros(3), None, n * offset / ln, q, surface,
                              category_bits, collide_bits)

    def add_sphere(self, radius: float, body: Optional[int] = None, pos=(0.0, 0.0, 0.0),
                   quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                   category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF) -> int:
        """Sphere of ``radius`` [m]. With a body, pos/quat are the offset in the body
        frame (dGeomSetOffsetPosition/Quaternion); without, the world pose (static)."""
        r = _scalar("sphere radius", radius, 0.0, None, lo_open=True)
        return self._add_geom(ct.SPHERE, np.array([r, 0.0, 0.0]), body, pos, quat, surface,
                              category_bits, collide_bits)

    def add_box(self, size: Sequence[float], body: Optional[int] = None, pos=(0.0, 0.0, 0.0),
                quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF) -> int:
        """Box with full side lengths ``size`` [m] (dCreateBox); pose as add_sphere."""
        s = _vec("box size", size, 3)
        if np.any(s <= 0):
            raise ValueError(f"box size must have all sides > 0 m (got {tuple(s)})")
        return self._add_geom(ct.BOX, s, body, pos, quat, surface, category_bits, collide_bits)

    def add_capsule(self, radius: float, length: float, body: Optional[int] = None,
                    pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                    category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF) -> int:
        """Capsule (dCreateCapsule): cylinder of ``length`` [m] along local z with
        hemispherical caps of ``radius`` [m]; pose as add_sphere."""
        r = _scalar("capsule radius", radius, 0.0, None, lo_open=True)
        ln = _scalar("capsule length", length, 0.0, None, lo_open=True)
        return self._add_geom(ct.CAPSULE, np.array([r, ln, 0.0]), body, pos, quat, surface,
                              category_bits, collide_bits)

    def add_cylinder(self, radius: float, length: float, body: Optional[int] = None,
                     pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                     category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF) -> int:
        """Flat-ended cylinder (dCreateCylinder) of ``radius`` [m] and ``length`` [m]
        along local z, centred on its frame; pose as add_sphere. Mass:
        ``jaxode.mass.cylinder(radius, length, ...)`` (dMassSetCylinder)."""
        r = _scalar("cylinder radius", radius, 0.0, None, lo_open=True)
        ln = _scalar("cylinder length", length, 0.0, None, lo_open=True)
        return self._add_geom(ct.CYLINDER, np.array([r, ln, 0.0]), body, pos, quat, surface,
                              category_bits, collide_bits)

    def add_convex(self, points, body: Optional[int] = None, pos=(0.0, 0.0, 0.0),
                   quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                   category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF,
                   planes=None, polygons=None) -> int:
        """Convex polyhedron: the convex hull of ``points`` (N, 3) [m] in the geom
        frame (ODE's dCreateConvex builds it from planes and polygons; here the
        hull is computed: coplanar triangles merge into polygon faces, interior
        points are ignored). At least 4 points spanning a volume, at most
        ``jaxode.hull.MAX_HULL_VERTICES`` (64) hull vertices. Pose as
        add_sphere (no body: static). Mass: ``jaxode.mass.convex(points, ...)``,
        whose centre of mass is in general not the geom origin: translate the
        mass by ``-com`` and give the geom ``pos=-com`` (body at the centre of
        mass). Collides with every other geom type (cylinders as 16-gon prisms;
        see docs/COLLISION.md); ``raycast`` sees it.

        ODE's form: ``add_convex(points, planes=planes, polygons=polygons)``
        takes dCreateConvex's arguments as they are (planes (F, 4) ``(nx, ny,
        nz, d)`` with outward normals, the flat polygon index list ``[k, i_1 ..
        i_k, ...]``), checks that they describe one closed convex polyhedron
        (``jaxode.hull.from_ode``) and builds the same hull."""
        where = f"geom {len(self.geoms)} (convex)"
        if (planes is None) != (polygons is None):
            raise ValueError(f"{where}: planes and polygons come together (ODE's dCreateConvex "
                             f"form), or neither (points only)")
        if planes is not None:
            data = hull_lib.from_ode(planes, points, polygons, where)
        else:
            data = hull_lib.build_hull(points, f"{where}: points")
        i = self._add_geom(ct.CONVEX, np.array([0.0, data.radius, 0.0]), body, pos,
                           quat, surface, category_bits, collide_bits)
        self.geoms[i]["dataid"] = len(self.hulls)
        self.hulls.append((i, data))
        return i

    def add_heightfield(self, heights, size: Sequence[float], pos=(0.0, 0.0, 0.0),
                        surface: Optional[Surface] = None, category_bits: int = 0xFFFFFFFF,
                        collide_bits: int = 0xFFFFFFFF) -> int:
        """Static terrain: ``heights`` [m], a 2-D (nx, ny) array (nx, ny >= 2) of
        heights over the rectangle ``size = (lx, ly)`` [m] centred at ``pos``
        (world x along the first index, y along the second; heights add to
        pos z), triangulated per cell. Collides with spheres, boxes, capsules,
        cylinders and convex hulls by sampling their lower surfaces (see
        ``jaxode.sim.collision.heightfield``); ``raycast`` sees it."""
        h = np.asarray(heights, dtype=np.float64)
        i = len(self.geoms)
        where = f"geom {i} (heightfield)"
        if h.ndim != 2 or h.shape[0] < 2 or h.shape[1] < 2:
            raise ValueError(f"{where}: heights must be a 2-D array with at least 2 x 2 "
                             f"samples (got shape {h.shape})")
        if not np.all(np.isfinite(h)):
            raise ValueError(f"{where}: heights must be finite")
        sz = _vec(f"{where}: size", size, 2)
        if not np.all(sz > 0):
            raise ValueError(f"{where}: size must be (lx, ly) with lx, ly > 0 (got {tuple(sz)})")
        i = self._add_geom(ct.HEIGHTFIELD, np.array([sz[0], sz[1], 0.0]), None, pos,
                           (1.0, 0.0, 0.0, 0.0), surface, category_bits, collide_bits)
        self.geoms[i]["dataid"] = len(self.hfields)
        self.hfields.append(h)
        return i

    def add_trimesh(self, vertices, triangles, body: Optional[int] = None, pos=(0.0, 0.0, 0.0),
                    quat=(1.0, 0.0, 0.0, 0.0), surface: Optional[Surface] = None,
                    category_bits: int = 0xFFFFFFFF, collide_bits: int = 0xFFFFFFFF,
                    max_candidates: Optional[int] = None) -> int:
        """Triangle mesh (ODE's dCreateTriMesh): ``vertices`` (V, 3) [m] in the
        geom frame, ``triangles`` (T, 3) int vertex indices, counter-clockwise
        seen from outside (the normal side; the mesh is one-sided), at most
        ``jaxode.meshes.MAX_MESH_TRIANGLES``; no degenerate triangles.
        Without a body the mesh is static and ``pos``/``quat`` are its world
        pose; with ``body`` it moves with the body and ``pos``/``quat`` are
        the offset in the body frame, as add_sphere (give the body the mass
        of a closed mesh, ``jaxode.mass.trimesh``, translated to its centre
        of mass). Collides with spheres, boxes, capsules, cylinders and
        convex hulls (see ``jaxode.sim.collision.trimesh``), and, on a body,
        with planes and heightfields (``jaxode.sim.collision.trimesh_ground``)
        and with other meshes, static or on bodies
        (``jaxode.sim.collision.trimesh_trimesh``; two static meshes never
        collide). ``raycast`` sees it.
        max_candidates: upper bound on the triangles examined per (geom,
        mesh) pair and step (default: the grid's worst case for the geom's
        size, at most ``jaxode.meshes.DEFAULT_MAX_CANDIDATES`` = 64); what
        does not fit is counted in ``State.overflow_contacts``."""
        where = f"geom {len(self.geoms)} (trimesh)"
        if max_candidates is not None and (not isinstance(max_candidates, (int, np.integer))
                                           or max_candidates < 1):
            raise ValueError(f"{where}: max_candidates must be an integer >= 1 or None "
                             f"(got {max_candidates!r})")
        data = mesh_lib.build_mesh(vertices, triangles, where)
        i = self._add_geom(ct.TRIMESH, np.array([0.0, data.radius, 0.0]), body, pos,
                           quat, surface, category_bits, collide_bits)
        self.geoms[i]["dataid"] = len(self.meshes)
        self.meshes.append((i, data, None if max_candidates is None else int(max_candidates)))
        return i

    def _mesh_candidates(self, pairs) -> tuple[int, tuple, np.ndarray]:
        """Candidates K, cell window and per-pair caps of a mesh group: per
        pair, the block of cells the geom's bounding cube can overlap and the
        largest number of distinct triangles in such a block (capped); the
        group takes the largest of each."""
        by_geom = {gi: (data, cap) for gi, data, cap in self.meshes}
        k, window, caps = 1, np.ones(3, dtype=np.int64), []
        for a, b, _, _ in pairs:
            data, cap = by_geom[b]
            g = self.geoms[a]
            radius = float(trimesh_nc.bounding_radius(g["type"], np.asarray(g["size"])))
            w = mesh_lib.candidate_window(data, radius)
            kk = min(mesh_lib.candidate_count(data, w), len(data.tris))
            kk = min(kk, cap if cap is not None else mesh_lib.DEFAULT_MAX_CANDIDATES)
            k, window = max(k, kk), np.maximum(window, w)
            caps.append(kk)
        return k, tuple(int(x) for x in window), np.array(caps, dtype=np.int32)

    def _own_candidates(self, pairs) -> tuple[int, tuple, np.ndarray]:
        """Candidates K, cell window and per-pair caps of geom 1's own
        triangles in a mesh-mesh group: the query (both geoms' AABBs
        intersected, grown by QUERY_MARGIN of its radius) lies within the
        other mesh's bounding cube so grown, so the
        window is the block that cube can overlap (at most the whole grid);
        K is the largest number of distinct triangles in such a block, at
        most the mesh's ``max_candidates`` or DEFAULT_MAX_CANDIDATES."""
        by_geom = {gi: (data, cap) for gi, data, cap in self.meshes}
        k, window, caps = 1, np.ones(3, dtype=np.int64), []
        for a, b, _, _ in pairs:
            data, cap = by_geom[a]
            w = mesh_lib.candidate_window(
                data, by_geom[b][0].radius + trimesh_trimesh.QUERY_MARGIN * data.radius)
            kk = min(mesh_lib.candidate_count(data, w), len(data.tris))
            kk = min(kk, cap if cap is not None else mesh_lib.DEFAULT_MAX_CANDIDATES)
            k, window = max(k, kk), np.maximum(window, w)
            caps.append(kk)
        return k, tuple(int(x) for x in window), np.array(caps, dtype=np.int32)

    # ------------------------------------------------------------------ joints
    _AXIS_DEFAULTS = dict(lo_stop=-math.inf, hi_stop=math.inf, vel=0.0, fmax=0.0,
                          fudge_factor=1.0, bounce=0.0, cfm=None, stop_erp=None, stop_cfm=None,
                          damping=0.0, friction=0.0, armature=0.0, stiffness=0.0,
                          springref=0.0)
    # damping, armature and springs act on a joint's one coordinate: hinge and slider
    # (jaxode.sim.joints.passive.PASSIVE)
    _DAMPED = passive_lib.PASSIVE

    def _add_joint(self, jtype: int, body1, body2, naxis: Optional[int], collide: bool,
                   geometry: dict, params: dict, scalars: Optional[dict] = None) -> int:
        """Record joint ``jtype``: ``geometry`` (world frame, checked by the caller),
        per-axis ``params`` (checked here; suffix 2/3 for axes 2/3; ``naxis`` None:
        the registered type's count) and per-joint ``scalars``
        (suspension_erp, suspension_cfm; None = the world's value)."""
        i = len(self.joints)
        if naxis is None:
            naxis = jt.REGISTRY[jtype].naxis
        where = f"joint {i} ({jt.JOINT_TYPE_NAMES[jtype]})"
        nb = len(self.bodies)
        reverse = False
        if body1 is None and body2 is not None:
            # dJointAttach(j, 0, body): ODE swaps the bodies and sets dJOINT_REVERSE
            # (ode.cpp); the joint then acts as (body, world) but for the sign
            # conventions of the joint type (jaxode.sim.joints.common.REVERSIBLE)
            if jtype not in jt.REVERSIBLE:
                raise ValueError(
                    f"{where}: body1 is None (the static world) with body2 = {body2!r}: "
                    f"world-first attachment is supported for "
                    f"{sorted(jt.JOINT_TYPE_NAMES[t] for t in jt.REVERSIBLE)} joints; pass the "
                    f"body as body1 and body2=None")
            body1, body2, reverse = body2, None, True
        for name, b in (("body1", body1), ("body2", body2)):
            if b is None and name == "body2":
                continue
            if not isinstance(b, (int, np.integer)) or not 0 <= b < nb:
                raise ValueError(f"{where}: {name} must be an existing body index in [0, {nb - 1}]"
                                 + (" or None (the static world)" if name == "body2" else "")
                                 + f" (got {b!r})")
        if body2 is not None and int(body1) == int(body2):
            raise ValueError(f"{where}: body1 and body2 must be different bodies (got {body1} twice)")
        axes = []
        suffixes = ["", "2", "3"][:3]
        for k, suf in enumerate(suffixes):
            ax = {}
            for key, default in self._AXIS_DEFAULTS.items():
                v = params.pop(key + suf, default)
                if v is None:
                    ax[key] = -1.0
                    continue
                ax[key] = _param(f"joint_{key}", v, f"{where}: {key}{suf}")
            for key in ("damping", "armature", "stiffness", "springref"):
                if ax[key] != 0 and jtype not in self._DAMPED:
                    raise ValueError(f"{where}: {key}{suf} applies to hinge and slider joints "
                                     f"(their one coordinate), got {ax[key]!r}")
            if ax["friction"] > 0 and ax["fmax"] > 0:
                raise ValueError(f"{where}: friction{suf} ({ax['friction']!r}) is the axis's "
                                 f"zero-velocity motor (Gazebo); it cannot be combined with "
                                 f"fmax{suf} ({ax['fmax']!r})")
            if ax["hi_stop"] < ax["lo_stop"]:
                raise ValueError(f"{where}: hi_stop{suf} must be >= lo_stop{suf} "
                                 f"(got lo {ax['lo_stop']}, hi {ax['hi_stop']})")
            if k >= naxis and any(ax[key] != (self._AXIS_DEFAULTS[key] if self._AXIS_DEFAULTS[key]
                                              is not None else -1.0) for key in ax):
                raise ValueError(f"{where}: has {naxis} axis(es); parameters with suffix "
                                 f"{suf!r} do not apply")
            axes.append(ax)
        if params:
            raise ValueError(f"{where}: unknown parameter(s) {sorted(params)}")
        sc = {"suspension_erp": -1.0, "suspension_cfm": -1.0}
        for key, v in (scalars or {}).items():
            if key not in sc:
                raise ValueError(f"{where}: unknown parameter {key!r}")
            if v is not None:
                sc[key] = _param(f"joint_{key}", v, f"{where}: {key}")
        self.joints.append(dict(type=jtype, body1=int(body1), body2=None if body2 is None else int(body2),
                                collide=bool(collide), geometry=geometry, axes=axes, scalars=sc,
                                reverse=reverse))
        return i

    def _passive_on(self) -> bool:
        """Whether the model carries the passive rows (``joint_passive``; None:
        some hinge or slider has armature, a stiffness or, implicit, damping)."""
        if self.joint_passive is not None:
            return self.joint_passive
        # (a springref without a stiffness does nothing)
        keys = ("armature", "stiffness") + (("damping",) if self.joint_damping == "implicit"
                                            else ())
        return any(j["axes"][0][k] != 0 for j in self.joints if j["type"] in self._DAMPED
                   for k in keys)

    def _axis(self, where: str, name: str, v) -> np.ndarray:
        a = _vec(f"{where}: {name}", v, 3)
        n = np.linalg.norm(a)
        if n < 1e-12:
            raise ValueError(f"{where}: {name} must have non-zero length (got {tuple(a)})")
        return a / n

    def add_ball(self, body1: Optional[int], body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
                 collide: bool = False) -> int:
        """Ball-and-socket joint (dJointCreateBall) at world point ``anchor`` [m]."""
        where = f"joint {len(self.joints)} (ball)"
        return self._add_joint(jt.BALL, body1, body2, 0, collide,
                               dict(anchor=_vec(f"{where}: anchor", anchor, 3)), {})

    def add_hinge(self, body1: Optional[int], body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
                  axis=(0.0, 0.0, 1.0), collide: bool = False, **params) -> int:
        """Hinge (dJointCreateHinge): world ``anchor`` [m] and ``axis``; per-axis
        lo_stop, hi_stop [rad], vel [rad/s], fmax [N m], fudge_factor, bounce,
        cfm, stop_erp, stop_cfm; friction [N m] (Gazebo's: a zero-velocity motor;
        every joint type takes it); damping [N m s/rad] (implicit unless the builder
        says ``joint_damping="explicit"``), armature [kg m^2], stiffness [N m/rad]
        and springref [rad] (the angle where the spring is relaxed): MuJoCo's
        joint-space terms (:mod:`jaxode.sim.joints.passive`). The angle is
        zero at the build-time pose. ``body1`` None with ``body2`` a body: attached
        world-first (ODE's dJointAttach(j, 0, body); its angle reads negated)."""
        where = f"joint {len(self.joints)} (hinge)"
        return self._add_joint(jt.HINGE, body1, body2, 1, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis=self._axis(where, "axis", axis)), params)

    def _two_axes(self, where: str, axis1, axis2, perpendicular: bool):
        """Unit world axes 1 and 2; they must not be parallel (and, for the
        universal and PU joints, must be perpendicular as ODE assumes)."""
        a1, a2 = self._axis(where, "axis1", axis1), self._axis(where, "axis2", axis2)
        if np.linalg.norm(np.cross(a1, a2)) < 1e-6:
            raise ValueError(f"{where}: axis2 must not be parallel to axis1 "
                             f"(got {tuple(a1)} and {tuple(a2)})")
        if perpendicular and abs(float(np.dot(a1, a2))) > 1e-6:
            raise ValueError(f"{where}: axis2 must be perpendicular to axis1 (ODE drives them "
                             f"perpendicular; got cos = {float(np.dot(a1, a2)):.3g})")
        return a1, a2

    def add_universal(self, body1: int, body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
                      axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0), collide: bool = False,
                      **params) -> int:
        """Universal joint (dJointCreateUniversal): world ``anchor`` [m], ``axis1``
        (turns with body 1) perpendicular to ``axis2`` (turns with body 2).
        Per-axis parameters as add_hinge, suffix "" for axis 1 and "2" for axis 2
        (stops [rad], fmax [N m]). Both angles are zero at the build-time pose."""
        where = f"joint {len(self.joints)} (universal)"
        a1, a2 = self._two_axes(where, axis1, axis2, perpendicular=True)
        return self._add_joint(jt.UNIVERSAL, body1, body2, 2, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis1=a1, axis2=a2), params)

    def add_hinge2(self, body1: int, body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
                   axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0), suspension_erp=None,
                   suspension_cfm=None, collide: bool = False, **params) -> int:
        """Hinge-2 joint (dJointCreateHinge2) between two bodies (ODE needs both):
        world ``anchor`` [m], ``axis1`` on body 1 (steering and suspension axis),
        ``axis2`` on body 2 (wheel axle), not parallel. Axis 1 takes stops
        [rad] and a motor; axis 2 (suffix "2") a motor only, no stops.
        suspension_erp in [0, 1], suspension_cfm >= 0 soften the anchor along
        axis 1 (None: the world's ERP/CFM); for a spring kp [N/m] and damper
        kd [N s/m] at step h: erp = h kp / (h kp + kd), cfm = 1 / (h kp + kd)."""
        where = f"joint {len(self.joints)} (hinge2)"
        if body2 is None:
            raise ValueError(f"{where}: body2 must be a body: ODE's hinge-2 joint needs two "
                             "bodies (got None)")
        a1, a2 = self._two_axes(where, axis1, axis2, perpendicular=False)
        for key in ("lo_stop2", "hi_stop2"):
            if key in params and math.isfinite(_scalar(f"{where}: {key}", params[key],
                                                       allow_inf=True)):
                raise ValueError(f"{where}: {key}: axis 2 of a hinge-2 joint has no stops "
                                 f"(ODE ignores them; got {params[key]!r})")
        return self._add_joint(jt.HINGE2, body1, body2, 2, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis1=a1, axis2=a2), params,
            scalars=dict(suspension_erp=suspension_erp, suspension_cfm=suspension_cfm))

    def add_pu(self, body1: int, body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
               axis1=(0.0, 1.0, 0.0), axis2=(0.0, 0.0, 1.0), axis3=(1.0, 0.0, 0.0),
               collide: bool = False, **params) -> int:
        """Prismatic-universal joint (dJointCreatePU): body 1 slides along
        ``axis3`` (fixed in body 1) relative to a universal joint at world
        ``anchor`` [m] with ``axis1`` (body 1) perpendicular to ``axis2`` (body
        2). Per-axis parameters: suffix "" axis 1 and "2" axis 2 (rotational:
        stops [rad], fmax [N m]), "3" axis 3 (prismatic: stops [m], fmax [N]).
        Angles and position are zero at the build-time pose."""
        where = f"joint {len(self.joints)} (pu)"
        a1, a2 = self._two_axes(where, axis1, axis2, perpendicular=True)
        return self._add_joint(jt.PU, body1, body2, 3, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis1=a1, axis2=a2,
            axis3=self._axis(where, "axis3", axis3)), params)

    def add_slider(self, body1: Optional[int], body2: Optional[int] = None, axis=(0.0, 0.0, 1.0),
                   collide: bool = False, **params) -> int:
        """Slider (dJointCreateSlider) along world ``axis``; per-axis parameters as
        add_hinge with stops in metres, fmax and friction in newtons, damping in
        N s/m, armature in kg, stiffness in N/m and springref in metres. Position zero at build time. ``body1`` None with ``body2`` a body:
        attached world-first (ODE reverses the position, its stops and motor)."""
        where = f"joint {len(self.joints)} (slider)"
        return self._add_joint(jt.SLIDER, body1, body2, 1, collide,
                               dict(axis=self._axis(where, "axis", axis)), params)

    def add_pr(self, body1: int, body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
               axis1=(0.0, 1.0, 0.0), axis2=(1.0, 0.0, 0.0), collide: bool = False,
               **params) -> int:
        """Prismatic-rotoide joint (dJointCreatePR): body 1 slides along ``axis1``
        (prismatic, fixed in body 1) relative to a hinge about ``axis2`` (rotoide)
        at world ``anchor`` [m] on body 2; the axes must not be parallel (ODE is
        tested with them perpendicular). Per-axis parameters: suffix "" the
        prismatic axis (stops [m], vel [m/s], fmax [N]), "2" the rotoide
        (stops [rad], vel [rad/s], fmax [N m]). Position and angle are zero at
        the build-time pose."""
        where = f"joint {len(self.joints)} (pr)"
        a1, a2 = self._two_axes(where, axis1, axis2, perpendicular=False)
        return self._add_joint(jt.PR, body1, body2, 2, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis1=a1, axis2=a2), params)

    def add_piston(self, body1: int, body2: Optional[int] = None, anchor=(0.0, 0.0, 0.0),
                   axis=(1.0, 0.0, 0.0), collide: bool = False, **params) -> int:
        """Piston joint (dJointCreatePiston): body 1 slides along and turns about
        ``axis`` (fixed in body 1) through world ``anchor`` [m] on body 2.
        Per-axis parameters: suffix "" the prismatic motion (stops [m], vel
        [m/s], fmax [N]), "2" the rotation about the axis (stops [rad], vel
        [rad/s], fmax [N m]; ODE tests them whenever one is finite). Position
        and angle are zero at the build-time pose."""
        where = f"joint {len(self.joints)} (piston)"
        return self._add_joint(jt.PISTON, body1, body2, 2, collide, dict(
            anchor=_vec(f"{where}: anchor", anchor, 3), axis=self._axis(where, "axis", axis)),
            params)

    def add_plane2d(self, body1: int, body2: Optional[int] = None, collide: bool = False,
                    **params) -> int:
        """Plane-2D joint (dJointCreatePlane2D): keeps ``body1`` in the world plane
        z = 0 (the body's centre is pulled there with the world ERP) and stops
        its angular velocity about world x and y; body2 must be None (ODE's
        rows act on body 1 alone). Motors, no stops: suffix "" = world x
        (dJointSetPlane2DXParam: vel [m/s], fmax [N]), "2" = world y
        (dJointSetPlane2DYParam), "3" = rotation about world z
        (dJointSetPlane2DAngleParam: vel [rad/s], fmax [N m]); also cfm."""
        where = f"joint {len(self.joints)} (plane2d)"
        if body2 is not None:
            raise ValueError(f"{where}: body2 must be None: ODE's plane-2D joint constrains "
                             f"body 1 against the static world (got {body2!r})")
        for suf in ("", "2", "3"):
            for key in ("lo_stop" + suf, "hi_stop" + suf):
                if key in params and math.isfinite(_scalar(f"{where}: {key}", params[key],
                                                           allow_inf=True)):
                    raise ValueError(f"{where}: {key}: ODE's plane-2D joint has motors only "
                                     f"(it never tests stops; got {params[key]!r})")
        return self._add_joint(jt.PLANE2D, body1, None, 3, collide, {}, params)

    def add_fixed(self, body1: Optional[int], body2: Optional[int] = None, collide: bool = False) -> int:
        """Fixed joint (dJointCreateFixed + dJointSetFixed): keeps the build-time relative pose."""
        return self._add_joint(jt.FIXED, body1, body2, 0, collide, {}, {})

    def exclude_pair(self, body1: int, body2: int) -> None:
        """Geoms of bodies ``body1`` and ``body2`` never collide (what an ODE near
        callback does when it skips a pair; MuJoCo's ``<contact><exclude>``).
        Joints with ``collide=False`` already exclude the two bodies they join."""
        nb = len(self.bodies)
        for name, b in (("body1", body1), ("body2", body2)):
            if not isinstance(b, (int, np.integer)) or not 0 <= b < nb:
                raise ValueError(f"exclude_pair: {name} must be an existing body index in "
                                 f"[0, {nb - 1}] (got {b!r})")
        if int(body1) == int(body2):
            raise ValueError(f"exclude_pair: body1 and body2 must differ (got {body1} twice)")
        self.excluded_pairs.add(frozenset((int(body1), int(body2))))

    def _motor_axes(self, where: str, num_axes, axes, rel, naxes=None):
        """(num_axes, unit world axes, rel padded to 3) of an amotor/lmotor; ``naxes``
        the number of axis vectors expected (default num_axes)."""
        if num_axes is None:
            num_axes = len(axes) if naxes is None else 3
        if not isinstance(num_axes, (int, np.integer)) or not 0 <= num_axes <= 3:
            raise ValueError(f"{where}: num_axes must be an integer in [0, 3] (got {num_axes!r})")
        num_axes = int(num_axes)
        naxes = num_axes if naxes is None else naxes
        try:
            axes = list(axes)
        except TypeError:
            raise ValueError(f"{where}: axes must be a sequence of {naxes} 3-vectors "
                             f"(got {axes!r})") from None
        if len(axes) != naxes:
            raise ValueError(f"{where}: axes must hold {naxes} axis vector(s) for num_axes = "
                             f"{num_axes} (got {len(axes)})")
        axes = [self._axis(where, f"axes[{i}]", a) for i, a in enumerate(axes)]
        rel = (0,) * num_axes if rel is None else rel
        try:
            rel = list(rel)
        except TypeError:
            raise ValueError(f"{where}: rel must be a sequence of {num_axes} values in "
                             f"{{0, 1, 2}} (got {rel!r})") from None
        if len(rel) != num_axes or any(not isinstance(r, (int, np.integer)) or r not in (0, 1, 2)
                                       for r in rel):
            raise ValueError(f"{where}: rel must hold {num_axes} value(s) in {{0, 1, 2}} "
                             f"(0 world, 1 body 1, 2 body 2) (got {rel!r})")
        return num_axes, axes, tuple(int(r) for r in rel) + (0,) * (3 - num_axes)

    def add_amotor(self, body1: int, body2: Optional[int] = None, num_axes: Optional[int] = None,
                   axes=(), rel=None, mode: str = "user", collide: bool = True, **params) -> int:
        """Angular motor (dJointCreateAMotor): limit/motor rows about up to 3 axes.

        mode "user": ``num_axes`` in [0, 3] (default len(axes)) world ``axes``,
        each fixed in the frame ``rel[i]`` names (0 world, the default; 1 body
        1; 2 body 2, or the world when body2 is None). Motors only: ODE tests
        user-mode stops against angles set with dJointSetAMotorAngle, which
        jaxode does not keep, so stops are rejected.
        mode "euler": ``axes=(axis0, axis2)``, perpendicular world axes, axis 0
        fixed in body 1 and axis 2 in body 2 (or the world); rel is implied
        (1, 0, 2); three axes. Rows act on the Euler angles (see
        :func:`jaxode.amotor_angle`), which the stops [rad] limit.
        Per-axis parameters as add_hinge with suffix "", "2", "3" for axes 0,
        1, 2 (vel [rad/s], fmax [N m]). ``collide``: ODE does not exclude
        contacts between motor-joined bodies, so contacts stay on (False
        excludes them, as a near callback using dAreConnected would)."""
        where = f"joint {len(self.joints)} (amotor)"
        if mode not in ("user", "euler"):
            raise ValueError(f"{where}: mode must be 'user' or 'euler' (got {mode!r})")
        if mode == "euler":
            if num_axes not in (None, 3):
                raise ValueError(f"{where}: num_axes must be 3 in Euler mode (got {num_axes!r})")
            try:
                rel_ok = rel is None or tuple(int(r) for r in rel) == (1, 0, 2)
            except (TypeError, ValueError):
                rel_ok = False
            if not rel_ok:
                raise ValueError(f"{where}: rel: Euler mode needs axis 0 on body 1 and axis 2 on "
                                 f"body 2, rel = (1, 0, 2); leave rel unset (got {rel!r})")
            num, ax, _ = self._motor_axes(where + " (Euler mode: axes=(axis0, axis2))", 3,
                                          axes, None, naxes=2)
            cos = float(np.dot(ax[0], ax[1]))
            if abs(cos) > 1e-6:
                raise ValueError(f"{where}: axes: in Euler mode axis 2 must be perpendicular to "
                                 f"axis 0 at build time (ODE assumes it; got cos = {cos:.3g})")
            geo = dict(mode="euler", num_axes=3, axes=ax, rel=(1, 0, 2))
        else:
            num, ax, rr = self._motor_axes(where, num_axes, axes, rel)
            for suf in ("", "2", "3"):
                for key in ("lo_stop" + suf, "hi_stop" + suf):
                    if key in params and math.isfinite(
                            _scalar(f"{where}: {key}", params[key], allow_inf=True)):
                        raise ValueError(
                            f"{where}: {key}: a user-mode amotor has no joint angles (ODE takes "
                            "them from dJointSetAMotorAngle, which jaxode does not keep), so "
                            f"stops do not apply; use mode='euler' (got {params[key]!r})")
            geo = dict(mode="user", num_axes=num, axes=ax, rel=rr)
        return self._add_joint(jt.AMOTOR, body1, body2, num, collide, geo, params)

    def add_lmotor(self, body1: int, body2: Optional[int] = None, num_axes: Optional[int] = None,
                   axes=(), rel=None, collide: bool = True, **params) -> int:
        """Linear motor (dJointCreateLMotor): motor rows along up to 3 axes.

        ``num_axes`` in [0, 3] (default len(axes)) world ``axes``, each fixed in
        the frame ``rel[i]`` names (0 world, the default; 1 body 1; 2 body 2,
        which ODE turns into body 1 when body2 is None). Per-axis vel [m/s],
        fmax [N], cfm with suffix "", "2", "3"; ODE's lmotor never tests stops,
        so stops are rejected. ``collide`` as add_amotor."""
        where = f"joint {len(self.joints)} (lmotor)"
        num, ax, rr = self._motor_axes(where, num_axes, axes, rel)
        for suf in ("", "2", "3"):
            for key in ("lo_stop" + suf, "hi_stop" + suf):
                if key in params and math.isfinite(_scalar(f"{where}: {key}", params[key],
                                                           allow_inf=True)):
                    raise ValueError(f"{where}: {key}: ODE's linear motor has no stops (it "
                                     f"never tests them; got {params[key]!r})")
        return self._add_joint(jt.LMOTOR, body1, body2, num, collide,
                               dict(num_axes=num, axes=ax, rel=rr), params)

    def _joint_groups(self, nbody: int):
        """Body-frame geometry of every joint as ODE's dJointSet* would store it."""
        groups: dict[int, list] = {}
        index = []
        for i, j in enumerate(self.joints):
            b1 = self.bodies[j["body1"]]
            p1, r1, q1 = b1["pos"], _quat_to_mat(b1["quat"]), b1["quat"]
            if j["body2"] is None:
                p2, r2, q2, has2, bi2 = np.zeros(3), np.eye(3), np.array([1.0, 0, 0, 0]), 0.0, nbody
            else:
                b2 = self.bodies[j["body2"]]
                p2, r2, q2, has2, bi2 = b2["pos"], _quat_to_mat(b2["quat"]), b2["quat"], 1.0, j["body2"]
            geo = j["geometry"]
            anchor = geo.get("anchor", p1)
            # the body-frame anchors and offset from the positions as the State
            # holds them (float32 unless x64): with the exact positions, float32's
            # rounding of a body 5 m out (2.4e-7 m) is a joint error at t = 0 that
            # ERP / h turns into ~5e-5 m/s (jaxode.sim.joints.common.anchor_gap)
            p1, p2, anchor = (_state_round(v) for v in (p1, p2, anchor))
            axis = geo.get("axis", np.array([0.0, 0.0, 1.0]))
            qc = q1 * np.array([1.0, -1, -1, -1])
            w1, x1, y1, z1 = qc
            w2, x2, y2, z2 = q2
            qrel = np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                             w1 * y2 + y1 * w2 + z1 * x2 - x1 * z2, w1 * z2 + z1 * w2 + x1 * y2 - y1 * x2])
            row = dict(body1=j["body1"], body2=bi2, has2=has2,
                       anchor1=r1.T @ (anchor - p1), anchor2=r2.T @ (anchor - p2) if has2 else anchor,
                       axis1=r1.T @ axis, axis2=r2.T @ axis if has2 else axis, qrel=qrel,
                       offset=r2.T @ (p1 - p2) if has2 else p1, extra={},
                       reverse=bool(j.get("reverse", False)))
            geometry_fn = jt.REGISTRY[j["type"]].geometry
            if geometry_fn is not None:
                for key, v in geometry_fn(geo, (p1, r1, q1), (p2, r2, q2) if has2 else None).items():
                    if key in row and key != "extra":
                        row[key] = v
                    else:
                        row["extra"][key] = np.asarray(v, dtype=np.float64)
            lst = groups.setdefault(j["type"], [])
            index.append((j["type"], len(lst)))
            lst.append((i, row))
        out = []
        for jtype in sorted(groups):
            rows = groups[jtype]
            f = lambda key: jnp.asarray(np.array([r[key] for _, r in rows]))
            out.append(jt.JointGroup(
                ids=jnp.asarray(np.array([i for i, _ in rows], dtype=np.int32)),
                body1=jnp.asarray(np.array([r["body1"] for _, r in rows], dtype=np.int32)),
                body2=jnp.asarray(np.array([r["body2"] for _, r in rows], dtype=np.int32)),
                has2=f("has2"), anchor1=f("anchor1"), anchor2=f("anchor2"), axis1=f("axis1"),
                axis2=f("axis2"), qrel=f("qrel"), offset=f("offset"),
                extra={key: jnp.asarray(np.array([r["extra"][key] for _, r in rows]))
                       for key in rows[0][1]["extra"]},
                type=jtype,
                reverse=jnp.asarray(np.array([r["reverse"] for _, r in rows], dtype=bool))))
        return tuple(out), tuple(index)

    # ------------------------------------------------------------------- build
    def _pair_friction(self, g1: dict, g2: dict, i: int, j: int) -> int:
        f1, f2 = g1["surface"].friction, g2["surface"].friction
        if f1 is not None and f2 is not None and f1 != f2:
            raise ValueError(
                f"geoms {i} and {j} can collide but their surfaces name different friction "
                f"models ({f1!r} and {f2!r}); give them the same model")
        name = f1 or f2 or self.friction_model
        return FRICTION_MODELS[name]

    def _candidate_pairs(self, jointed: set) -> dict:
        """The geom pairs that may collide, grouped by (type1, type2): a dict
        key -> int32 array (n, 4) of rows (geom1, geom2, max_contacts,
        friction model), rows in (i, j) order of the geoms (i < j).

        A pair is a candidate unless both geoms are static, they share a body,
        neither's category_bits meets the other's collide_bits, or their bodies
        are in ``jointed`` (joined without collide=True, or exclude_pair).
        geom1 is the one whose type comes first in the narrowphase's table
        (a mesh on a body is geom 1 of a mesh-mesh pair).

        Cost: proportional to (dynamic geoms) x (all geoms), never to
        (static geoms)^2: a pair has a dynamic geom, so the pairs are made as
        two families, (i dynamic, j > i any) and (i static, j > i dynamic),
        each in chunks of whole numpy arrays, and the two i-sorted families are
        merged by one stable sort (a linear merge of two runs)."""
        geoms, ng = self.geoms, len(self.geoms)
        if ng < 2:
            return {}
        nb = len(self.bodies)
        body = np.array([nb if g["body"] is None else g["body"] for g in geoms], np.int32)
        dyn = body < nb
        cat = np.array([g["category"] for g in geoms], np.int64)
        col = np.array([g["collide"] for g in geoms], np.int64)
        typ = np.array([g["type"] for g in geoms], np.int32)
        maxc = np.array([g["surface"].max_contacts for g in geoms], np.int32)
        fric = np.array([FRICTION_MODELS[g["surface"].friction] if g["surface"].friction
                         else -1 for g in geoms], np.int32)
        default_fric = FRICTION_MODELS[self.friction_model]
        ntype = int(typ.max()) + 1
        # per (type_i, type_j): 0 = (i, j) in table order, 1 = swapped, 2 = no collider
        order = np.full((ntype, ntype), 2, np.int8)
        for t1 in range(ntype):
            for t2 in range(ntype):
                if (t1, t2) in narrowphase.PAIR_FUNCTIONS:
                    order[t1, t2] = 0
                elif (t2, t1) in narrowphase.PAIR_FUNCTIONS:
                    order[t1, t2] = 1
        # body pairs that never collide, as sorted keys lo * (nb + 1) + hi (static = nb)
        excl = sorted({min(u, v) * (nb + 1) + max(u, v) for u, v in
                       ((nb if x is None else int(x) for x in pair)
                        for pair in jointed if len(pair) == 2)})
        excl = np.asarray(excl, np.int64)

        def family(rows_i: np.ndarray, cols: np.ndarray) -> list:
            """Kept (i, j) pairs, i from rows_i, j > i from cols; i-major order."""
            out = []
            chunk = max(1, (1 << 22) // max(1, cols.size))
            for s in range(0, rows_i.size, chunk):
                i = rows_i[s:s + chunk, None]
                j = cols[None, :]
                keep = (j > i) & (body[i] != body[j])
                keep &= ((cat[i] & col[j]) != 0) | ((cat[j] & col[i]) != 0)
                ii, jj = np.nonzero(keep)
                ii, jj = rows_i[s + ii], cols[jj]
                if excl.size:
                    bi, bj = body[ii], body[jj]
                    key = np.minimum(bi, bj).astype(np.int64) * (nb + 1) + np.maximum(bi, bj)
                    sel = ~np.isin(key, excl)
                    ii, jj = ii[sel], jj[sel]
                out.append((ii, jj))
            return out

        allidx = np.arange(ng, dtype=np.int32)
        parts = family(allidx[dyn], allidx) + family(allidx[~dyn], allidx[dyn])
        i = np.concatenate([p[0] for p in parts])
        j = np.concatenate([p[1] for p in parts])
        if not i.size:
            return {}
        by_i = np.argsort(i, kind="stable")     # merges the two i-sorted runs
        i, j = i[by_i], j[by_i]
        ti, tj = typ[i], typ[j]
        how = order[ti, tj]
        fi, fj = fric[i], fric[j]
        bad = np.flatnonzero(how == 2)
        clash = np.flatnonzero((fi >= 0) & (fj >= 0) & (fj != fi))
        if bad.size and (not clash.size or bad[0] <= clash[0]):
            k = bad[0]
            names = [ct.GEOM_TYPE_NAMES[t] for t in (ti[k], tj[k])]
            raise ValueError(
                f"geoms {i[k]} and {j[k]} ({names[0]}-{names[1]}): no collider for this "
                f"pair, and one of them is on a body; use add_convex (the convex "
                f"hull, or convex pieces) for one of them, or category_bits / "
                f"collide_bits so that they never collide")
        swap = how == 1
        # the mesh on a body is geom 1 of a mesh-mesh pair (its triangles become prisms)
        swap |= (ti == ct.TRIMESH) & (tj == ct.TRIMESH) & ~dyn[i]
        a = np.where(swap, j, i)
        b = np.where(swap, i, j)
        if clash.size:
            k = clash[0]
            self._pair_friction(geoms[int(a[k])], geoms[int(b[k])], int(a[k]), int(b[k]))
        f = np.where(fi >= 0, fi, np.where(fj >= 0, fj, default_fric))
        allr = np.stack([a, b, np.minimum(maxc[i], maxc[j]), f], axis=1).astype(np.int32)
        keys = typ[a] * ntype + typ[b]
        by_key = np.argsort(keys, kind="stable")   # (i, j) order kept within a group
        keys, allr = keys[by_key], allr[by_key]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ends = np.r_[starts[1:], keys.size]
        return {(int(keys[s]) // ntype, int(keys[s]) % ntype): np.ascontiguousarray(allr[s:e])
                for s, e in zip(starts, ends)}

    def build(self, contact_capacity: Optional[int] = None, pair_capacity: Optional[int] = None) -> Model:
        """Freeze the scene into a :class:`Model`.

        contact_capacity: contacts kept per step over all pairs (default: all
        slots when there are at most 128, which keeps each slot tied to its
        geom pair and lets the solver index bodies statically; otherwise 8 per
        dynamic geom + 8: a box resting across two others has 8 contacts, and
        in a batch the solver skips the unused tail of the slots); pair_capacity: candidate pairs
        passed to the narrowphase per (type, type) group (default: all pairs of
        the group, at most 64 + 2 per geom). What does not fit is counted in
        ``State.overflow_contacts`` / ``overflow_pairs``.
        """
        nbody, ngeom = len(self.bodies), len(self.geoms)
        # Only body-body pairs: a joint to the static world (body2 None) must not
        # switch off the body's contacts with static geoms (ODE's near callback
        # tests dAreConnectedExcluding only for two real bodies).
        jointed = {frozenset((j["body1"], j["body2"])) for j in self.joints
                   if not j["collide"] and j["body2"] is not None} | self.excluded_pairs
        groups = self._candidate_pairs(jointed)
        ndyn = sum(g["body"] is not None for g in self.geoms)
        if pair_capacity is not None and (not isinstance(pair_capacity, int) or pair_capacity < 1):
            raise ValueError(f"pair_capacity must be an integer >= 1 (got {pair_capacity!r})")
        pair_groups = []
        total_slots = 0
        for key in sorted(groups):
            arr = groups[key]
            pairs = arr.tolist() if ct.TRIMESH in key else None
            _, nslot = narrowphase.PAIR_FUNCTIONS[key]
            ncon = min(nslot, int(arr[:, 2].max()))
            cap = pair_capacity if pair_capacity is not None else min(len(arr), 64 + 2 * ngeom)
            cap = min(cap, len(arr))
            kcand, window, caps = (self._mesh_candidates(pairs) if key[1] == ct.TRIMESH
                                   else (0, (), None))
            kcand1, window1, caps1 = (self._own_candidates(pairs) if key[0] == ct.TRIMESH
                                      and key[1] == ct.TRIMESH else (0, (), None))
            pair_groups.append(PairGroup(
                geom1=jnp.asarray(arr[:, 0]), geom2=jnp.asarray(arr[:, 1]),
                max_contacts=jnp.asarray(arr[:, 2]), friction=jnp.asarray(arr[:, 3]),
                type1=key[0], type2=key[1], capacity=cap, ncontact=ncon,
                candidate_cap=None if caps is None else jnp.asarray(caps),
                candidates=kcand, mesh_window=window,
                candidate_cap1=None if caps1 is None else jnp.asarray(caps1),
                candidates1=kcand1, mesh_window1=window1))
            total_slots += cap * ncon
        if contact_capacity is None:
            # Small scenes keep every slot (static rows: the solver's fast path);
            # large ones compact the valid contacts into fewer slots.
            contact_capacity = total_slots if total_slots <= 128 else min(total_slots, 8 * ndyn + 8)
        elif not isinstance(contact_capacity, int) or contact_capacity < 0:
            raise ValueError(f"contact_capacity must be an integer >= 0 (got {contact_capacity!r})")
        contact_capacity = max(min(contact_capacity, total_slots), 0)

        f = jnp.asarray
        b, g = self.bodies, self.geoms
        surf = [gg["surface"] for gg in g]
        surf_groups = _group_by_identity(surf)

        values = dict(
            gravity=self.gravity,
            body_mass=np.array([bb["mass"] for bb in b], dtype=np.float64).reshape(nbody),
            body_inertia=np.array([bb["inertia"] for bb in b], dtype=np.float64).reshape(nbody, 3, 3),
            **{key: getattr(self, key) for key in (
                "erp", "cfm", "sor", "contact_max_correcting_vel", "contact_surface_layer",
                "linear_damping", "angular_damping", "linear_damping_threshold",
                "angular_damping_threshold", "max_angular_speed")})
        for spec in params_spec.SPECS_LIST:
            if spec.entity == "geom":
                # The Surface attribute named by the declaration; None = unset (its default).
                # One array per field; the Python work is per distinct Surface, not per geom.
                arr = np.empty((ngeom,) + tuple(spec.shape), np.float64)
                for s, idx in surf_groups:
                    v = getattr(s, spec.surface_attr)
                    arr[idx] = np.asarray(spec.default if v is None else v, np.float64)
                values[spec.name] = arr
            elif spec.entity == "joint_axis":
                key = spec.name[len("joint_"):]
                values[spec.name] = np.array([[ax[key] for ax in j["axes"]] for j in self.joints],
                                             dtype=np.float64).reshape(len(self.joints), 3)
            elif spec.entity == "joint":
                key = spec.name[len("joint_"):]
                values[spec.name] = np.array([j["scalars"][key] for j in self.joints],
                                             dtype=np.float64).reshape(len(self.joints))
        for key in _ADIS_KEYS:
            if key != "average_samples":
                name = "body_auto_disable" + ("" if key == "flag" else "_" + key)
                values[name] = np.array([float(bb["adis"][key]) for bb in b],
                                        dtype=np.float64).reshape(nbody)
        params = Params(**{k: f(v) for k, v in values.items()})
        samples = np.array([bb["adis"]["average_samples"] for bb in b], dtype=np.int32)
        adis_on = any(bb["adis"]["flag"] for bb in b) or self.auto_disable["flag"]
        for k, s in enumerate(surf):
            if s.material is not None and s.material not in self.materials.materials:
                raise ValueError(
                    f"geom {k}: surface.material {s.material!r} is not a material of this "
                    f"builder (add_material / set_material_pair / use_materials; known: "
                    f"{sorted(self.materials.materials)})")
        used = [s.material for s in surf if s.material is not None]
        mat_names = tuple(self.materials.materials) if used else ()
        angular = any(s.angular for s in surf)
        if mat_names:
            tabs = self.materials.tables(list(mat_names))
            params = params.replace(**{"mat_" + k: f(v) for k, v in tabs.items()})
            angular = angular or bool(np.any(tabs["rolling"] > 0) or np.any(tabs["spinning"] > 0))
        geom_material = np.array([-1 if s.material is None else mat_names.index(s.material)
                                  for s in surf], dtype=np.int32).reshape(ngeom)
        joint_groups, joint_index = self._joint_groups(nbody)
        hf_heights = hf_dims = None
        if self.hfields:
            nx = max(h.shape[0] for h in self.hfields)
            ny = max(h.shape[1] for h in self.hfields)
            pad = np.zeros((len(self.hfields), nx, ny))
            for k, h in enumerate(self.hfields):
                pad[k, :h.shape[0], :h.shape[1]] = h
            hf_heights = f(pad)
            hf_dims = f(np.array([h.shape for h in self.hfields], dtype=np.int32))
        hulls = hull_geom = None
        if self.hulls:
            tables = hull_lib.pad_hulls([h for _, h in self.hulls])
            hulls = ct.Hull(**{k: f(v) for k, v in tables.items()})
            hull_geom = f(np.array([gi for gi, _ in self.hulls], dtype=np.int32))
        meshes = mesh_geom = None
        if self.meshes:
            tables = mesh_lib.pad_meshes([m for _, m, _ in self.meshes])
            meshes = ct.Mesh(**{k: f(v) for k, v in tables.items()})
            mesh_geom = f(np.array([gi for gi, _, _ in self.meshes], dtype=np.int32))
        joint_pairs = [(j["body1"], j["body2"]) for j in self.joints]
        model = Model(
            nbody=nbody, ngeom=ngeom,
            body_gravity=f(np.array([float(bb["gravity"]) for bb in b])),
            body_finite_rotation=f(np.array([float(bb["finite_rotation"]) for bb in b])),
            geom_type=f(np.array([gg["type"] for gg in g], dtype=np.int32).reshape(ngeom)),
            geom_body=f(np.array([nbody if gg["body"] is None else gg["body"] for gg in g],
                                 dtype=np.int32).reshape(ngeom)),
            geom_pos=f(np.array([gg["pos"] for gg in g]).reshape(ngeom, 3)),
            geom_quat=f(np.array([gg["quat"] for gg in g]).reshape(ngeom, 4)),
            geom_size=f(np.array([gg["size"] for gg in g]).reshape(ngeom, 3)),
            geom_dataid=f(np.array([gg.get("dataid", -1) for gg in g], dtype=np.int32).reshape(ngeom)),
            hfield_heights=hf_heights, hfield_dims=hf_dims,
            convex_hulls=hulls, convex_geom=hull_geom,
            trimeshes=meshes, trimesh_geom=mesh_geom,
            pair_groups=tuple(pair_groups), joint_groups=joint_groups, params=params,
            njoint=len(self.joints), joint_index=joint_index,
            joint_order=ode_joint_order(nbody, joint_pairs),
            joint_bodies=tuple((nbody if b1 is None else int(b1), nbody if b2 is None else int(b2))
                               for b1, b2 in joint_pairs),
            contact_capacity=int(contact_capacity), iterations=self.iterations, solver=self.solver,
            reorder_seed=self.reorder_seed, reorder=self.reorder,
            auto_disable=bool(adis_on),
            joint_passive=self._passive_on(),
            joint_damping_explicit=self.joint_damping == "explicit",
            body_auto_disable_samples=f(samples.reshape(nbody)) if adis_on else None,
            auto_disable_buffer=int(max(1, samples.max(initial=1))) if adis_on else 1,
            friction_cone=any(int(grp.friction.max()) == FRICTION_MODELS["cone"]
                              for grp in pair_groups if grp.geom1.shape[0]),
            friction_box=any(bool(np.any(np.asarray(grp.friction) == FRICTION_MODELS["box"]))
                             for grp in pair_groups if grp.geom1.shape[0]),
            angular_friction=angular, material_names=mat_names,
            geom_material=f(geom_material),
            init_pos=f(np.array([bb["pos"] for bb in b], dtype=np.float64).reshape(nbody, 3)),
            init_quat=f(np.array([bb["quat"] for bb in b], dtype=np.float64).reshape(nbody, 4)),
            init_vel=f(np.array([bb["vel"] for bb in b], dtype=np.float64).reshape(nbody, 3)),
            init_angvel=f(np.array([bb["angvel"] for bb in b], dtype=np.float64).reshape(nbody, 3)))
        return model
