"""Stage 4: constraint rows of ODE's contact joint (``dxJointContact::getInfo2``).

Every contact slot gives three rows: the normal row and the friction rows
along ``t1`` and ``t2`` (plus, with rolling and spinning
friction, three angular rows about t1, t2 and the normal, ODE 0.16's dContactRolling).
Per-contact parameters combine the two geoms' surfaces (see
:mod:`jaxode.build.surface`) and, between two geoms with materials, the material
pair table (:mod:`jaxode.build.materials`). They are returned as two tables, ``head`` (rows
without a friction index: normals; joints will join them) and ``tail``
(friction rows), which is the order QuickStep solves them in. A row holds the bodies it couples, the
two 6-vector Jacobian blocks (linear, angular; world frame), the velocity
target ``c`` [m/s], ``cfm``, the bounds ``lo``/``hi`` and the friction index
(the row whose force bounds this one, -1 if none). Invalid slots give inactive
rows (zero Jacobian, zero bounds).

The rows are made from a :class:`ContactSource` (the contacts, the bodies'
motion, the geoms' fdir1) and the surface params by :func:`rows_of`, written
once for two layouts: one world, and world-minor, in which the solver
(:mod:`jaxode.sim.solver.batching`) builds them for a whole batch, in the
layout its sweeps read (at 1024 worlds of ``boxes`` the step ran 15-30 %
faster than building them per world and transposing the tables:
bench/RESULTS.md, session 18).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode import params_spec
from jaxode._struct import pytree_dataclass, static_field
from jaxode.sim import math as jm
from jaxode.types import FRICTION_BOX, FRICTION_CONE, Contacts, Model, Params


def erp_cfm_from_kp_kd(kp, kd, dt):
    """ERP and CFM that make a constraint a spring of stiffness ``kp`` [N/m]
    and damper ``kd`` [N s/m] at step ``dt`` [s] (ODE manual, "Soft constraint
    and constraint force mixing"): ``erp = dt kp / (dt kp + kd)``,
    ``cfm = 1 / (dt kp + kd)`` [m/(s N)], the same effect as the spring-damper
    integrated implicitly (first order). A body of mass m resting on such a
    contact sinks to the depth ``m g / kp``.

    For contacts set them per geom: ``Surface(soft_erp=erp, soft_cfm=cfm)``,
    or at run time (differentiable in kp and kd) ``params.replace(
    soft_erp=params.soft_erp.at[g].set(erp), soft_cfm=params.soft_cfm.at[g].set(cfm))``.
    Soft contacts are the smoothing knob for gradients through contact
    forces (see README, Gradients). Works on floats and JAX arrays.
    """
    hk = dt * kp
    return hk / (hk + kd), 1.0 / (hk + kd)


class Rows(NamedTuple):
    """Constraint rows (R = number of rows) in ODE's joint-row order.

    body1, body2 (R,) body indices (``nbody`` = the static world);
    j1, j2 (R, 6) Jacobian blocks [linear | angular], world frame;
    c (R,) velocity target [m/s or rad/s] (ODE's getInfo2 rhs, before 1/h);
    cfm (R,) constraint force mixing; lo, hi (R,) force bounds [N]; for a row
    with a friction index the bound is ``|hi * lambda[findex]|``;
    findex (R,) friction index (-1: none); active (R,) bool.
    """

    body1: jax.Array
    body2: jax.Array
    j1: jax.Array
    j2: jax.Array
    c: jax.Array
    cfm: jax.Array
    lo: jax.Array
    hi: jax.Array
    findex: jax.Array
    active: jax.Array


# ---------------------------------------------------------------- layout
# The contact rows are written once for two layouts: one world (a contact's
# arrays (C,), its vectors (C, 3)) and world-minor (the solver's layout, a
# trailing world axis W on every float array: (C, W), vectors (C, 3, W), the
# world's scalars (W,)). Vector components are always axis 1, the world shape
# ``ws`` (``()`` or ``(W,)``) is the step's ``h.shape``, and every 3-term sum is
# written as adds in component order, so a world's rows round the same in
# either layout and in any batch.

def _dot3(a: jax.Array, b: jax.Array) -> jax.Array:
    """Dot product over the component axis 1 (:func:`jaxode.sim.math.sum_terms`:
    adds in component order)."""
    return jm.sum_terms(a * b, 1)


def _cross3(a: jax.Array, b: jax.Array) -> jax.Array:
    """Cross product over the component axis 1."""
    return jnp.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                      a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                      a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], axis=1)


class ContactSource(NamedTuple):
    """What one world's contact rows are made of (:func:`rows_of`), in either layout.

    Shared by a batch with one row structure (integer, (C,)): body1, body2 the
    contact's bodies (``nbody`` = the static world), geom1, geom2, mat1, mat2
    (the geoms' material indices, -1: none) and friction (the friction model
    id). Per world: pos, normal (C, 3) [m, unit, from geom 2 into geom 1],
    depth (C,) [m], valid (C,) bool; body_pos, body_vel, body_angvel (B, 3)
    padded with the static world [m, m/s, rad/s]; fdir (G, 3) each geom's fdir1
    in the world, has_fdir (G,) bool (fdir1 set); h () the step [s].
    """

    body1: jax.Array
    body2: jax.Array
    geom1: jax.Array
    geom2: jax.Array
    mat1: jax.Array
    mat2: jax.Array
    friction: jax.Array
    pos: jax.Array
    normal: jax.Array
    depth: jax.Array
    valid: jax.Array
    body_pos: jax.Array
    body_vel: jax.Array
    body_angvel: jax.Array
    fdir: jax.Array
    has_fdir: jax.Array
    h: jax.Array


# the fields a batch with one row structure shares, and the rest
SOURCE_INDEX = ("body1", "body2", "geom1", "geom2", "mat1", "mat2", "friction")
SOURCE_DATA = tuple(f for f in ContactSource._fields if f not in SOURCE_INDEX)
# the fields with one entry per contact slot (the rest are per body, geom or world)
SOURCE_SLOT = SOURCE_INDEX + ("pos", "normal", "depth", "valid")


# The Params fields the contact rows read, by entity (jaxode.params_spec): the
# world's, each geom's (fdir1 reaches the rows turned into the world, through
# ContactSource.fdir) and the material pairs' tables.
WORLD_SURFACE = ("erp", "cfm", "contact_max_correcting_vel", "contact_surface_layer")
GEOM_SURFACE = tuple(s.name for s in params_spec.SPECS.values()
                     if s.entity == "geom" and s.name != "fdir1")
PAIR_SURFACE = tuple(s.name for s in params_spec.SPECS.values()
                     if s.entity == "material_pair")


@pytree_dataclass
class SurfaceParams:
    """A world's params as the contact rows read them (:func:`surface_params`),
    packed: one array per entity, so that laying them out for the solver
    moves three arrays, not ~30, and a contact reads all of a geom's values
    with one gather, not one per field (each a kernel run per step on XLA CPU:
    one world's step 231 -> 213; bench/RESULTS.md, session 26).

    world (4,): the :data:`WORLD_SURFACE` values; geom (G, F): column k is the
    per-geom field ``geom_fields[k]`` (those of :data:`GEOM_SURFACE` the params
    carry, in that order); pair (M, M, P) or None: column k the material-pair
    table ``pair_fields[k]``. Either layout: world-minor adds a trailing world
    axis W to each array.
    """

    world: jax.Array
    geom: jax.Array
    pair: jax.Array | None
    geom_fields: tuple = static_field(default=())
    pair_fields: tuple = static_field(default=())

    def has(self, name: str) -> bool:
        """Whether the params carry the geom or material-pair field ``name``."""
        return name in self.geom_fields or name in self.pair_fields

    def world_value(self, name: str) -> jax.Array:
        """The world field ``name`` of :data:`WORLD_SURFACE`: () or (W,)."""
        return self.world[WORLD_SURFACE.index(name)]

    def at(self, geoms: jax.Array) -> dict:
        """The per-geom fields at ``geoms`` (C,) int: {field: (C,) or (C, W)}."""
        rows = self.geom[geoms]
        return {f: rows[:, k] for k, f in enumerate(self.geom_fields)}

    def pair_at(self, i1: jax.Array, i2: jax.Array) -> dict:
        """The material-pair tables at (i1, i2) (C,) int: {field: (C,) or (C, W)}."""
        rows = self.pair[i1, i2]
        return {f: rows[:, k] for k, f in enumerate(self.pair_fields)}


def surface_params(params: Params) -> SurfaceParams:
    """The contact rows' share of a world's params (:class:`SurfaceParams`)."""
    world = jnp.stack([jnp.asarray(getattr(params, f)) for f in WORLD_SURFACE])
    gf = tuple(f for f in GEOM_SURFACE if getattr(params, f, None) is not None)
    geom = jnp.stack([getattr(params, f) for f in gf], axis=1)   # mu etc. always present
    pf = tuple(f for f in PAIR_SURFACE if getattr(params, f, None) is not None)
    pair = jnp.stack([getattr(params, f) for f in pf], axis=2) if pf else None
    return SurfaceParams(world=world, geom=geom, pair=pair, geom_fields=gf, pair_fields=pf)


def source(model: Model, params: Params, contacts: Contacts, body_pos: jax.Array,
           body_vel: jax.Array, body_angvel: jax.Array, grot: jax.Array,
           h: jax.Array) -> ContactSource:
    """One world's :class:`ContactSource` (grot (ngeom, 3, 3) the geoms' rotations)."""
    g1, g2 = contacts.geom1, contacts.geom2
    if model.geom_material is not None:
        mat = jnp.asarray(model.geom_material, jnp.int32)
        m1, m2 = mat[g1], mat[g2]
    else:
        m1 = m2 = jnp.full(g1.shape, -1, jnp.int32)
    # (turned per geom, then read per contact: a contact's (3, 3) rotation
    # gathered per world cost more than the whole friction frame)
    fdir = jm.einsum("gij,gj->gi", grot, params.fdir1)
    has_fdir = jm.sum_terms(params.fdir1 ** 2, -1) > 0
    return ContactSource(
        body1=model.geom_body[g1], body2=model.geom_body[g2], geom1=g1, geom2=g2,
        mat1=m1, mat2=m2, friction=contacts.friction, pos=contacts.pos,
        normal=contacts.normal, depth=contacts.depth, valid=contacts.valid,
        body_pos=body_pos, body_vel=body_vel, body_angvel=body_angvel, fdir=fdir,
        has_fdir=has_fdir, h=jnp.asarray(h, body_pos.dtype))


class ContactSurface(NamedTuple):
    """The combined surface of each contact slot (C,): Gazebo's ODE plugin's rules
    (:mod:`jaxode.build.surface`), then the material pair table where both geoms name
    materials, then static friction's pair values.

    mu, mu2 [- or N for the box model]; bounce, bounce_vel [m/s]; erp, cfm (soft
    or world); fcfm1, fcfm2 the two friction rows' CFM (slip1/slip2 or the
    world's cfm); smu, vs [m/s] static friction coefficient and speed; roll [-],
    spin [m] rolling/spinning coefficients (0: off); max_vel [m/s], min_depth [m]
    (surface and world combined); motion_n, motion1, motion2 [m/s] the surfaces'
    relative velocities (ODE's motionN, motion1/2). Either layout (see above).
    """

    mu: jax.Array
    mu2: jax.Array
    bounce: jax.Array
    bounce_vel: jax.Array
    erp: jax.Array
    cfm: jax.Array
    fcfm1: jax.Array
    fcfm2: jax.Array
    smu: jax.Array
    vs: jax.Array
    roll: jax.Array
    spin: jax.Array
    max_vel: jax.Array
    min_depth: jax.Array
    motion_n: jax.Array
    motion1: jax.Array
    motion2: jax.Array


def _unset(side: dict, name: str, like: jax.Array) -> jax.Array:
    """A geom field at the contacts, or unset (-1) where the params lack it."""
    v = side.get(name)
    return jnp.full(like.shape, -1.0, like.dtype) if v is None else v


def mix_surfaces(src: ContactSource, params: SurfaceParams, angular: bool,
                 sides: tuple) -> ContactSurface:
    """Surface mixing: the two geoms' surface parameters (and the world's, where a
    surface leaves one unset) combined into each contact's (:class:`ContactSurface`).
    ``angular`` (static): the model has rolling/spinning friction. ``params``: a
    world's :class:`SurfaceParams`, in either layout; ``sides``: its per-geom
    fields at the contacts' geoms 1 and 2 (``params.at``; :func:`rows_of` reads
    them once for this and the torsional bound)."""
    a, b = sides
    h = src.h
    dtype = src.depth.dtype
    shape = src.depth.shape                     # (C,) + ws
    p = params
    w_erp, w_cfm = p.world_value("erp"), p.world_value("cfm")
    # Surface combination: each field by its rule (params_spec.COMBINE_RULES).
    def rule(name, va, vb, neither=None):
        return params_spec.combine(name, va, vb, neither)

    mu = rule("mu", a["mu"], b["mu"])
    # mu2 < 0: unset, equal to the geom's mu (ODE without dContactMu2).
    mu2 = rule("mu2", jnp.where(a["mu2"] < 0, a["mu"], a["mu2"]),
               jnp.where(b["mu2"] < 0, b["mu"], b["mu2"]))
    bounce = rule("bounce", a["bounce"], b["bounce"])
    bounce_vel = rule("bounce_vel", a["bounce_vel"], b["bounce_vel"])
    erp = rule("soft_erp", a["soft_erp"], b["soft_erp"], w_erp)
    cfm = rule("soft_cfm", a["soft_cfm"], b["soft_cfm"], w_cfm)
    if p.has("kp"):
        # kp/kd where set (springs in series, dampers in parallel): the step's ERP/CFM.
        has_kp = (a["kp"] >= 0) | (b["kp"] >= 0)
        # kp > 0 where set (validated); kp = 1 on the other lanes: no zero divisor.
        kp = rule("kp", a["kp"], b["kp"], 1.0)
        kd = rule("kd", _unset(a, "kd", a["kp"]), _unset(b, "kd", b["kp"]))
        erp_kp, cfm_kp = erp_cfm_from_kp_kd(kp, kd, h)
        erp = jnp.where(has_kp, erp_kp, erp)
        cfm = jnp.where(has_kp, cfm_kp, cfm)
    max_vel = rule("max_vel", a["max_vel"], b["max_vel"],
                   p.world_value("contact_max_correcting_vel"))
    min_depth = rule("min_depth", a["min_depth"], b["min_depth"],
                     p.world_value("contact_surface_layer"))
    # Friction-row CFM: force-dependent slip where set (ODE dContactSlip1/2), else the world's.
    if not p.has("slip1"):
        fcfm1 = fcfm2 = jnp.broadcast_to(w_cfm, shape)
    else:
        fcfm1 = rule("slip1", a["slip1"], b["slip1"], w_cfm)
        fcfm2 = rule("slip2", jnp.where(a["slip2"] < 0, a["slip1"], a["slip2"]),
                     jnp.where(b["slip2"] < 0, b["slip1"], b["slip2"]), w_cfm)

    # Pair values of the static, rolling and spinning friction from the surfaces.
    zero = jnp.zeros_like(mu)
    smu, vs = mu, zero
    if p.has("static_mu"):
        smu = rule("static_mu", a["static_mu"], b["static_mu"], mu)
        vs = rule("static_speed", _unset(a, "static_speed", a["static_mu"]),
                  _unset(b, "static_speed", b["static_mu"]), zero)
    roll = spin = zero
    if angular:
        roll = rule("rolling", _unset(a, "rolling", a["mu"]), _unset(b, "rolling", b["mu"]),
                    zero)
        spin = rule("spinning", _unset(a, "spinning", a["mu"]),
                    _unset(b, "spinning", b["mu"]), zero)

    # Material pairs (both geoms name a material): the table replaces those values.
    if p.pair is not None:
        m1, m2 = src.mat1, src.mat2
        use = (m1 >= 0) & (m2 >= 0)
        # the upper triangle is read (a sweep may set one element of a pair)
        pt = p.pair_at(jnp.maximum(jnp.minimum(m1, m2), 0), jnp.maximum(jnp.maximum(m1, m2), 0))
        if len(shape) > 1:
            use = use[:, None]

        def pick(name, cur):
            v = pt[name]
            return jnp.where(use & (v >= 0), v, cur)

        mu = pick("mat_friction", mu)
        mu2 = pick("mat_friction", mu2)
        bounce = pick("mat_restitution", bounce)
        bounce_vel = pick("mat_restitution_threshold", bounce_vel)
        erp = pick("mat_soft_erp", erp)
        cfm = pick("mat_soft_cfm", cfm)
        smu = pick("mat_static_friction", jnp.where(use, mu, smu))
        vs = pick("mat_static_speed", jnp.where(use, 0.0, vs))
        roll = pick("mat_rolling", jnp.where(use, 0.0, roll))
        spin = pick("mat_spinning", jnp.where(use, 0.0, spin))

    motion_n = (jnp.zeros(shape, dtype) if not p.has("motionN")
                else rule("motionN", a["motionN"], b["motionN"]))
    if not p.has("motion1"):
        motion1 = motion2 = jnp.zeros(shape, dtype)
    else:
        motion1 = rule("motion1", a["motion1"], b["motion1"])
        motion2 = rule("motion2", a["motion2"], b["motion2"])
    return ContactSurface(mu, mu2, bounce, bounce_vel, erp, cfm, fcfm1, fcfm2, smu, vs, roll,
                          spin, max_vel, min_depth, motion_n, motion1, motion2)


def _torsional_bound(a: dict, b: dict, depth, spin):
    """Gazebo's torsional friction (its ODE's dContactMu3 row, contact.cpp): where
    either geom sets ``torsional``, the spin row's bound per unit normal force is
    ``3 pi/16 * mu3 * a`` [m] (uniform pressure over a disc of radius a), with
    mu3 = min of the torsional values set, a = max(patch_radius) when both
    geoms use_patch_radius, else sqrt(R depth), R = 1/(1/R_1 + 1/R_2)
    (ODEPhysics::Collide) and depth past min_depth [m]; elsewhere ``spin``.
    ``a``, ``b``: the geom fields at the contacts' two geoms (SurfaceParams.at)."""
    t1, t2 = a["torsional"], b["torsional"]
    has = (t1 >= 0) | (t2 >= 0)
    mu3 = params_spec.combine("torsional", t1, t2, jnp.zeros_like(spin))
    patch = params_spec.combine("patch_radius", a["patch_radius"], b["patch_radius"])
    radius = params_spec.combine("surface_radius", a["surface_radius"], b["surface_radius"])
    use_patch = params_spec.combine("use_patch_radius", a["use_patch_radius"],
                                    b["use_patch_radius"]) > 0.5
    rd = jnp.where(depth > 0, radius * depth, 0.0)
    ok = (rd > 0) & jnp.isfinite(rd)               # (double where: finite gradients)
    a_r = jnp.where(ok, jnp.sqrt(jnp.where(ok, rd, 1.0)), jnp.where(rd > 0, jnp.inf, 0.0))
    ar = jnp.where(use_patch, patch, a_r)
    bound = jnp.where(mu3 > 0, (3.0 * jnp.pi / 16.0) * mu3 * ar, 0.0)
    return jnp.where(has, bound, spin)


def friction_dir1(n, fdir_a, fdir_b, has_a):
    """(C, 3) first friction direction of contacts with normals ``n`` (C, 3):
    fdir1 of geom 1 (``fdir_a``, used where ``has_a``) else of geom 2
    (``fdir_b``), in the world, projected on the contact plane; where that is
    zero (no fdir1, or one along the normal), ODE's dPlaneSpace(n). The second
    is ``n x t1``. The one rule for the rows (:func:`rows_of`) and for reading
    contact forces back (:func:`friction_frame`)."""
    fd = params_spec.combine("fdir1", fdir_a, fdir_b, set_a=has_a)
    fd = fd - _dot3(fd, n)[:, None] * n
    fd2 = _dot3(fd, fd)[:, None]
    use_fd = fd2 > 1e-12
    fd = fd / jnp.sqrt(jnp.where(use_fd, fd2, 1.0))
    ps1, _ = jm.plane_space(jnp.moveaxis(n, 1, 0))          # elementwise: any layout
    return jnp.where(use_fd, fd, jnp.moveaxis(ps1, 0, 1))


def friction_frame(n, fdir_a, fdir_b, has_a):
    """(t1, t2) the contacts' friction directions (:func:`friction_dir1`; t2 = n x t1)."""
    t1 = friction_dir1(n, fdir_a, fdir_b, has_a)
    return t1, _cross3(n, t1)


def rows_of(src: ContactSource, params: SurfaceParams, angular: bool
            ) -> tuple[Rows, Rows, jax.Array]:
    """The rows of a world's contact slots (ODE's contact joint getInfo2): (head, tail,
    cone_rows), in either layout (one world, or world-minor with the world axis
    trailing: :mod:`jaxode.sim.solver.batching` builds them so, in the solver's
    own layout). Integer fields (body indices, findex) never carry the world axis.

    head: one normal row per slot (findex -1); tail: ``K`` rows per slot,
    contact-major: the two friction rows (t1, t2), then, with ``angular``
    (static: rolling/spinning friction, K = 5), rolling about t1 and
    t2 and spinning about the normal; K = 2 otherwise. A tail row's
    ``findex`` is the slot's normal row for the pyramid and cone models
    (bound = hi * normal force) and -1 (constant bounds) for the box model;
    angular rows always scale with the normal force. cone_rows (tail rows,)
    marks the friction rows of cone-model contacts (projected jointly by the
    solver).
    """
    dtype = src.depth.dtype
    ws = jnp.shape(src.h)                      # () or (W,)
    ncon = src.geom1.shape[0]
    b1, b2 = src.body1, src.body2
    valid = src.valid
    vcol = valid[:, None]
    # Invalid slots get a harmless unit normal so no 0/0 reaches the rows.
    unit_z = jnp.array([0.0, 0.0, 1.0], dtype).reshape((3,) + (1,) * len(ws))
    n = jnp.where(vcol, src.normal, unit_z)
    p = params
    sides = (p.at(src.geom1), p.at(src.geom2))
    sf = mix_surfaces(src, p, angular, sides)
    mu, mu2, bounce, bounce_vel = sf.mu, sf.mu2, sf.bounce, sf.bounce_vel
    erp, cfm, smu, vs = sf.erp, sf.cfm, sf.smu, sf.vs
    roll, spin, max_vel, min_depth = sf.roll, sf.spin, sf.max_vel, sf.min_depth
    fps = 1.0 / src.h

    # Normal row: c = min(fps * erp * max(depth - min_depth, 0) + motionN, max_vel), then bounce.
    r1 = src.pos - src.body_pos[b1]
    r2 = src.pos - src.body_pos[b2]
    v1, w1 = src.body_vel[b1], src.body_angvel[b1]
    v2, w2 = src.body_vel[b2], src.body_angvel[b2]
    depth = jnp.maximum(src.depth - min_depth, 0.0)
    # Both surfaces moving outward push the bodies apart (ODE: pushout + motionN,
    # capped by max_vel; the bounce is measured relative to motionN).
    motion_n = sf.motion_n
    c = jnp.minimum(fps * erp * depth + motion_n, max_vel)   # ODE: k = fps erp; k depth
    a1, a2 = _cross3(r1, n), _cross3(n, r2)
    jn1 = jnp.concatenate([n, a1], axis=1)
    jn2 = jnp.concatenate([-n, a2], axis=1)
    outgoing = _dot3(n, v1) + _dot3(a1, w1) - _dot3(n, v2) + _dot3(a2, w2)
    incoming = motion_n - outgoing
    bounce_c = bounce * incoming + motion_n
    c = jnp.where((incoming > bounce_vel) & (bounce_c > c), bounce_c, c)

    t1 = friction_dir1(n, src.fdir[src.geom1], src.fdir[src.geom2], src.has_fdir[src.geom1])
    # computed once (jm.materialize): each is read by several of the rows'
    # entries, and XLA would otherwise recompute the friction frame inside every
    # one (rows_of's Jacobian kernels: 4-6 ns per entry and world, bin_16 at
    # 512 worlds, against ~1.5 with it materialized)
    n, t1, r1, r2 = jm.materialize((n, t1, r1, r2))
    t2 = _cross3(n, t1)

    # Static friction (RaiSim's material pair): below static_speed the
    # coefficient blends linearly from static_mu (at rest) to mu (at static_speed),
    # using the tangential contact speed at the start of the step.
    if p.has("static_mu") or p.pair is not None:
        vrel = v1 + _cross3(w1, r1) - v2 - _cross3(w2, r2)
        vt = vrel - _dot3(vrel, n)[:, None] * n
        vt2 = _dot3(vt, vt)
        speed = jnp.where(vt2 > 0, jnp.sqrt(jnp.where(vt2 > 0, vt2, 1.0)), 0.0)
        wgt = jnp.where(vs > 0, jnp.clip(1.0 - speed / jnp.where(vs > 0, vs, 1.0), 0.0, 1.0), 0.0)
        dmu = jnp.where(wgt > 0, wgt * (smu - mu), 0.0)
        mu = jnp.where(wgt > 0, mu + dmu, mu)
        mu2 = jnp.where(wgt > 0, mu2 + dmu, mu2)

    def frow(t):
        return (jnp.concatenate([t, _cross3(r1, t)], axis=1),
                jnp.concatenate([-t, _cross3(t, r2)], axis=1))

    def arow(t):
        z = jnp.zeros_like(t)
        return jnp.concatenate([z, t], axis=1), jnp.concatenate([z, -t], axis=1)

    jt1a, jt1b = frow(t1)
    jt2a, jt2b = frow(t2)
    shape = (ncon,) + ws
    inf = jnp.full(shape, jnp.inf, dtype)
    mu = jnp.maximum(mu, 0.0)
    # Each direction's row is bounded by its own coefficient, as ODE with
    # dContactMu2 (what Gazebo always sets): mu = 0, mu2 > 0 keeps the second row.
    # With mu2 unset it equals mu, so mu = 0 still means no friction at all.
    mu2 = jnp.maximum(mu2, 0.0)
    scaled = src.friction != FRICTION_BOX
    cone = src.friction == FRICTION_CONE
    head = Rows(
        body1=b1, body2=b2,
        j1=jnp.where(vcol, jn1, 0.0), j2=jnp.where(vcol, jn2, 0.0),
        c=jnp.where(valid, c, 0.0), cfm=cfm.astype(dtype),
        lo=jnp.zeros(shape, dtype), hi=jnp.where(valid, inf, 0.0),
        findex=jnp.full((ncon,), -1, jnp.int32), active=valid)
    # Friction rows' target: the surfaces' relative velocity (ODE's motion1/2).
    ja = [jt1a, jt2a]
    jb = [jt1b, jt2b]
    bounds = [mu, mu2]
    tc = [sf.motion1, sf.motion2]
    tcfm = [sf.fcfm1, sf.fcfm2]
    rscale = [scaled, scaled]
    ract = [valid, valid]
    if angular:
        # Rolling (about t1, t2) and spinning (about n) friction: angular rows
        # bounded by rolling * r_e * lambda_n and spinning * lambda_n (ODE 0.16's
        # dContactRolling rows with rho = rolling * r_e, rhoN = spinning); r_e the
        # rolling radius: the dynamic body's centre's distance from the contact
        # plane (mean of the two when both are dynamic).
        nbody = src.body_pos.shape[0] - 1
        dyn1 = b1 < nbody
        dyn2 = b2 < nbody
        if ws:
            dyn1, dyn2 = dyn1[:, None], dyn2[:, None]
        n1 = jnp.abs(_dot3(r1, n))
        n2 = jnp.abs(_dot3(r2, n))
        ndyn = dyn1.astype(dtype) + dyn2.astype(dtype)
        r_e = (jnp.where(dyn1, n1, 0.0) + jnp.where(dyn2, n2, 0.0)) / jnp.maximum(ndyn, 1.0)
        if p.has("torsional"):
            spin = jnp.where(valid, _torsional_bound(*sides, depth, spin), spin)
        for t, bnd in ((t1, roll * r_e), (t2, roll * r_e), (n, spin)):
            a, b = arow(t)
            ja.append(a)
            jb.append(b)
            bounds.append(bnd)
            tc.append(jnp.zeros(shape, dtype))
            tcfm.append(jnp.broadcast_to(p.world_value("cfm"), shape))
            rscale.append(jnp.ones((ncon,), bool))
            ract.append(valid & (bnd > 0))
    k = len(ja)

    def inter(xs):
        x = jnp.stack(xs, axis=1)
        return x.reshape((ncon * k,) + x.shape[2:])

    fj1, fj2 = inter(ja), inter(jb)
    vf = inter(ract)
    bound = jnp.where(vf, inter(bounds), 0.0)
    tail = Rows(
        body1=jnp.repeat(b1, k), body2=jnp.repeat(b2, k),
        j1=jnp.where(vf[:, None], fj1, 0.0), j2=jnp.where(vf[:, None], fj2, 0.0),
        c=jnp.where(vf, inter(tc), 0.0).astype(dtype), cfm=inter(tcfm).astype(dtype),
        lo=-bound, hi=bound,
        findex=jnp.where(inter(rscale), jnp.repeat(jnp.arange(ncon), k), -1).astype(jnp.int32),
        active=vf)
    cone_rows = jnp.repeat(cone, k) & (jnp.tile(jnp.arange(k), ncon) < 2)
    return head, tail, cone_rows
