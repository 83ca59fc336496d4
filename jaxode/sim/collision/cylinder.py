"""Cylinder narrowphase: cylinder-plane, -sphere, -box, -capsule, -cylinder.

A cylinder's size is ``(r, length, 0)``: a flat-ended solid cylinder of radius r
whose axis of ``length`` runs along the local z axis (``rot[:, 2]``), centred at
``pos`` (ODE's dCreateCylinder). Pure, unbatched, jit/vmap friendly functions
with fixed shapes and fixed iteration counts (no data-dependent loops).

Methods
- cylinder-plane: ODE's dCollideCylinderPlane contact set: with the axis
  parallel to the plane normal (within ODE's tolerance, 1e-4 in float32 and
  1e-7 in float64 on 1 - |cos|) the 4 rim points of the lower cap at 90
  degrees, else the deepest rim point of each cap. Slots deepest first.
- cylinder-sphere: ODE's dCollideCylinderSphere (exact signed distance: side,
  cap or rim region), one contact.
- cylinder-box, -capsule, -cylinder: separating-axis test over a fixed set of
  candidate axes built from the features (face normals, axes, their cross
  products, radial directions, rim-vertex and rim-edge directions), refined by
  a fixed-step pattern search on the sphere of directions; the overlap along
  a unit axis u is exact for these centrally symmetric shapes,
  ``rho_1(u) + rho_2(u) - |u . (c1 - c2)|`` with the support half-extents rho,
  so the minimum over all u is the penetration depth (and minus the distance
  when separated). The contact manifold is the two support features facing
  each other (box face, cylinder cap as an 8-gon or side line, capsule line)
  clipped against each other in the plane normal to the contact normal:
  vertices inside the other feature plus edge crossings, each with its own
  depth along the normal; at most 4 (capsule: 2) kept, deepest first, then
  spread out. ODE's own colliders have no cylinder-capsule or
  cylinder-cylinder; a libode built with libccd (Debian's is) adds them as
  single-contact MPR, whose depth is an upper bound of this minimum.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .box import _CORNER_SIGNS, _reduce
from .sphere import _pack
from .contact import Contact, GeomWorld, coord_scale, touching
from jaxode.sim import math as jm

CYLINDER_PLANE_NCON = 4
CYLINDER_SPHERE_NCON = 1
CYLINDER_BOX_NCON = 4
CYLINDER_CAPSULE_NCON = 2
CYLINDER_CYLINDER_NCON = 4

_BIG = 1e30
_EPS2 = 1e-24  # squared length under which a direction is undefined
_CAP_COS = math.sqrt(0.5)  # |n . axis| above which the cap (not the side) faces the normal
_NDISC = 8  # vertices of the cap polygon used for clipping (ODE's cylinder-box uses 8)
_NSTART = 4  # candidate axes refined independently
_REFINE_ITERS = 40
_REFINE_STEP = 0.15  # [rad] first (and largest) pattern-search step
_REFINE_SHRINK = 0.5  # step factor after an iteration without improvement
_STEP_GROW = 1.5  # step factor after an improving iteration
_CLIP_REL_TOL = 1e-3  # clipping tolerance relative to the pair's size
_CIRCLE_ITERS = 3  # alternating projections for circle-segment / circle-circle axes

# box edges as pairs of corner indices (corners differ in exactly one sign)
_BOX_EDGES = np.array([(i, j) for i in range(8) for j in range(i + 1, 8)
                       if np.sum(_CORNER_SIGNS[i] != _CORNER_SIGNS[j]) == 1])


# ------------------------------------------------------------------ helpers
def _flat_tol(dtype) -> float:
    """ODE's parallel tolerance on 1 - |cos(axis, normal)| (dSINGLE / dDOUBLE)."""
    return 1e-7 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _normalize(v, fallback=None):
    """Unit vectors along the last axis and a mask of the well-defined ones."""
    n2 = jm.sum_terms(v * v, axis=-1, keepdims=True)
    ok = n2 > _EPS2
    u = v / jnp.sqrt(jnp.where(ok, n2, 1.0))
    if fallback is not None:
        u = jnp.where(ok, u, fallback)
    return u, ok[..., 0]


def _sgn(x):
    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)


def _any_perp(a):
    """A unit vector perpendicular to unit ``a``."""
    e = jnp.where(jnp.abs(a[0]) < 0.6, jnp.array([1.0, 0.0, 0.0], a.dtype),
                  jnp.array([0.0, 1.0, 0.0], a.dtype))
    return _normalize(jnp.cross(a, e))[0]


def _perp(v, a):
    """Component of v (..., 3) perpendicular to unit a."""
    return v - jm.mm(v, a)[..., None] * a


def _rim_point(cc, a, r, p):
    """Closest point to p (..., 3) on the circle of centre cc, unit normal a, radius r."""
    w, _ = _normalize(_perp(p - cc, a), _any_perp(a))
    return cc + r * w


def _closest_on_seg(p, p0, p1):
    """Closest point to p (..., 3) on the segment [p0, p1] (broadcasting)."""
    e = p1 - p0
    ee = jm.sum_terms(e * e, axis=-1, keepdims=True)
    t = jm.sum_terms((p - p0) * e, axis=-1, keepdims=True) / jnp.where(ee > _EPS2, ee, 1.0)
    return p0 + jnp.clip(t, 0.0, 1.0) * e


def _closest_seg_seg(p0, p1, q0, q1):
    """Closest points between segments [p0,p1] and [q0,q1] (Ericson 5.1.9), safe."""
    d1, d2, rr = p1 - p0, q1 - q0, p0 - q0
    a, e, f = jm.mm(d1, d1), jm.mm(d2, d2), jm.mm(d2, rr)
    c, b = jm.mm(d1, rr), jm.mm(d1, d2)
    den = a * e - b * b
    ok = den > 1e-12 * (1.0 + a * e)
    s = jnp.where(ok, jnp.clip((b * f - c * e) / jnp.where(ok, den, 1.0), 0.0, 1.0), 0.0)
    t = (b * s + f) / jnp.where(e > _EPS2, e, 1.0)
    sa = jnp.clip(-c / jnp.where(a > _EPS2, a, 1.0), 0.0, 1.0)
    sb = jnp.clip((b - c) / jnp.where(a > _EPS2, a, 1.0), 0.0, 1.0)
    s = jnp.where(t < 0, sa, jnp.where(t > 1, sb, s))
    t = jnp.clip(t, 0.0, 1.0)
    return p0 + s * d1, q0 + t * d2


def _circle_seg_axes(cc, a, r, p0, p1):
    """Two candidate axes between a circle (cc, unit normal a, r) and segments
    [p0, p1] (..., 3): the direction between their closest points (a few
    alternating projections) and ODE's edge-circle axis (the normal of the plane
    through the edge that touches the circle where the edge line meets the
    circle's plane). Returns (..., 2, 3), not normalised (zero = undefined)."""
    p = _closest_on_seg(jnp.broadcast_to(cc, p0.shape), p0, p1)
    q = _rim_point(cc, a, r, p)
    for _ in range(_CIRCLE_ITERS):
        p = _closest_on_seg(q, p0, p1)
        q = _rim_point(cc, a, r, p)
    ax1 = p - q
    e, _ = _normalize(p1 - p0)
    ea = jm.mm(e, a)
    ok = jnp.abs(ea) > 1e-5
    x = p0 + e * (jm.mm(cc - p0, a) / jnp.where(ok, ea, 1.0))[..., None]
    tangent = jnp.cross(cc - x, a)
    ax2 = jnp.where(ok[..., None], jnp.cross(tangent, e), 0.0)
    return jnp.stack([ax1, ax2], axis=-2)


# ------------------------------------------------------ support half-extents
def _cyl_extent(a, h, r, u):
    """Half-extent of a cylinder (unit axis a, half length h, radius r) along unit u (..., 3)."""
    t = jm.mm(u, a)
    s2 = 1.0 - t * t
    ok = s2 > 1e-12
    s = jnp.where(ok, jnp.sqrt(jnp.where(ok, s2, 1.0)), 0.0)
    return h * jnp.abs(t) + r * s


def _box_extent(rot, half, u):
    return jm.mm(jnp.abs(jm.mm(u, rot)), half)


def _caps_extent(a, h, r, u):
    return h * jnp.abs(jm.mm(u, a)) + r


# ----------------------------------------------------- support features
class Feature(NamedTuple):
    """The support feature of a shape facing the other one.

    verts (K, 3): a convex polygon in cyclic order (a cap as an inscribed
    8-gon, a box face) or, when ``is_seg``, a segment [verts[0], verts[1]]
    padded with verts[1]; is_disc: the polygon stands for the exact disc of
    ``centre`` and ``radius``; m: the polygon's plane normal (world)."""

    verts: jax.Array
    is_seg: jax.Array
    is_disc: jax.Array
    m: jax.Array
    centre: jax.Array
    radius: jax.Array


def _cyl_feature(c, a, h, r, d) -> Feature:
    """Support feature of a cylinder in unit direction d: the cap (8-gon whose
    first vertex is the extreme rim point) when |d . a| >= cos 45 deg, else
    the side line."""
    t = jm.mm(d, a)
    w, _ = _normalize(d - t * a, _any_perp(a))
    w2 = jnp.cross(a, w)
    cap_c = c + _sgn(t) * h * a
    ang = jnp.asarray(2.0 * np.pi * np.arange(_NDISC) / _NDISC, c.dtype)
    disc = cap_c + r * (jnp.cos(ang)[:, None] * w + jnp.sin(ang)[:, None] * w2)
    p_lo, p_hi = c + r * w - h * a, c + r * w + h * a
    line = jnp.concatenate([p_lo[None], jnp.broadcast_to(p_hi, (_NDISC - 1, 3))], axis=0)
    is_seg = jnp.abs(t) < _CAP_COS
    return Feature(jnp.where(is_seg, line, disc), is_seg, ~is_seg, _sgn(t) * a, cap_c, r)


def _box_feature(c, rot, half, d) -> Feature:
    """Support face of a box in unit direction d (4 vertices in cyclic order)."""
    proj = jm.mm(d, rot)
    i = jnp.argmax(jnp.abs(proj))
    s = _sgn(proj[i])
    onehot = (jnp.arange(3) == i).astype(c.dtype)
    ei = jm.mm(rot, onehot)
    j, k = (i + 1) % 3, (i + 2) % 3
    ej, ek = rot[:, j], rot[:, k]
    fc = c + s * half[i] * ei
    sg = jnp.asarray([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]], c.dtype)
    verts = fc + sg[:, :1] * (half[j] * ej) + sg[:, 1:] * (half[k] * ek)
    no = jnp.asarray(False)
    return Feature(verts, no, no, s * ei, fc, jnp.zeros((), c.dtype))


def _caps_feature(c, a, h, r, d) -> Feature:
    """Support line of a capsule in unit direction d: its segment moved by r d."""
    verts = jnp.stack([c - h * a + r * d, c + h * a + r * d])
    return Feature(verts, jnp.asarray(True), jnp.asarray(False), d, c, r)


# ------------------------------------------------------------ SAT + refine
def _sat(overlap, axes, kinks):
    """Smallest overlap over candidate axes (M, 3), refined by a pattern search.

    ``overlap(u)`` maps unit axes (..., 3) to overlaps (...); it is smooth
    except on the great circles normal to the ``kinks`` (P, 3) (the shapes'
    axes and face normals, the centre line) and at a cylinder's axis, where
    minima often lie. The ``_NSTART`` best candidates are refined
    independently (a local search from the single best one can end in a
    local minimum): each of the ``_REFINE_ITERS`` fixed iterations tries 8
    moves of the current axis in its tangent plane and, to slide along the
    creases, rotations about every kink vector (which keep ``u . k``), by the
    current step; a successful iteration grows the step by ``_STEP_GROW``
    (at most ``_REFINE_STEP``), a failed one shrinks it by
    ``_REFINE_SHRINK``. ``kinks[0]`` must be a unit vector (it replaces
    kinks of zero length). Returns (unit axis, overlap)."""
    u, ok = _normalize(axes)
    ov = jnp.where(ok, overlap(u), _BIG)
    _, idx = jax.lax.top_k(-ov, _NSTART)
    k, kok = _normalize(kinks)
    # an undefined kink (the centre line of coincident centres) would make the
    # rotations below shrink u, and a shorter u has a smaller "overlap":
    # stand in the first kink (a cylinder's axis, always a unit vector)
    k = jnp.where(kok[:, None], k, k[0])
    dt = axes.dtype
    sq = math.sqrt(0.5)
    pattern = jnp.asarray([[1, 0], [-1, 0], [0, 1], [0, -1], [sq, sq], [-sq, sq], [sq, -sq],
                           [-sq, -sq]], dt)
    sgn = jnp.asarray([1.0, -1.0], dt)

    def body(_, carry):
        uk, ovk, step = carry
        t1 = _any_perp(uk)
        t2 = jnp.cross(uk, t1)
        free, _ = _normalize(uk + step * (pattern[:, :1] * t1 + pattern[:, 1:] * t2))
        # rotations of uk about each kink vector by +-step (Rodrigues)
        cs, sn = jnp.cos(step), jnp.sin(step) * sgn[:, None, None]
        kxu = jnp.cross(k, uk)[None]
        rot = uk * cs + kxu * sn + k[None] * (jm.mm(k, uk) * (1.0 - cs))[None, :, None]
        cand = jnp.concatenate([free, rot.reshape(-1, 3)], axis=0)
        oc = overlap(cand)
        j = jnp.argmin(oc)
        better = oc[j] < ovk
        step = jnp.where(better, jnp.minimum(step * _STEP_GROW, _REFINE_STEP),
                         step * _REFINE_SHRINK)
        return jnp.where(better, cand[j], uk), jnp.where(better, oc[j], ovk), step

    def refine(u0, ov0):
        uk, ovk, _ = jax.lax.fori_loop(0, _REFINE_ITERS, body,
                                       (u0, ov0, jnp.asarray(_REFINE_STEP, dt)))
        return uk, ovk

    us, ovs = jax.vmap(refine)(u[idx], ov[idx])
    b = jnp.argmin(ovs)
    return us[b], ovs[b]


# ------------------------------------------------------------ clipping
def _cross2(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _plane_z(x, f2, fz, m, n, frame):
    """Height along n, at 2-D points x (..., 2), of the plane through the
    feature's vertex 0 with normal m."""
    mn = jm.mm(m, n)
    mn_safe = jnp.where(jnp.abs(mn) > 1e-6, mn, 1.0)
    return fz[0] - jm.mm(x - f2[0], jm.mm(m, frame)) / mn_safe


def _height(x, f2, fz, f: Feature, n, frame):
    """Height along n of a feature at 2-D points x (N, 2): its plane for
    polygons, linear along the segment [v0, v1] (clamped) for segments."""
    e = f2[1] - f2[0]
    ee = jm.mm(e, e)
    t = jnp.clip(jm.mm(x - f2[0], e) / jnp.where(ee > _EPS2, ee, 1.0), 0.0, 1.0)
    z_seg = fz[0] + t * (fz[1] - fz[0])
    return jnp.where(f.is_seg, z_seg, _plane_z(x, f2, fz, f.m, n, frame))


def _inside(x, f2, fz, f: Feature, n, frame, tol):
    """Points x (N, 2) over the feature: within tol of a segment, inside the
    polygon (repeated vertices allowed) or, for a disc, lifted onto its plane
    within the exact radius."""
    e = jnp.roll(f2, -1, axis=0) - f2
    area2 = jm.sum_terms(_cross2(f2, jnp.roll(f2, -1, axis=0)))
    sg = jnp.where(area2 >= 0, 1.0, -1.0)
    c = _cross2(e[None], x[:, None] - f2[None])
    le = jnp.sqrt(jm.sum_terms(e * e, axis=-1))
    in_poly = jnp.all(sg * c >= -tol * le[None], axis=1)
    q = _closest_on_seg(x, f2[0], f2[1])
    in_seg = jm.sum_terms((x - q) ** 2, axis=-1) <= tol * tol
    lift = jm.mm(x, frame.T) + _plane_z(x, f2, fz, f.m, n, frame)[:, None] * n - f.centre
    in_disc = jm.sum_terms(lift * lift, axis=-1) <= (f.radius + tol) ** 2
    return jnp.where(f.is_seg, in_seg, jnp.where(f.is_disc, in_disc, in_poly))


def _edge_circle(p2, pz, q2, qz, q: Feature, n, frame):
    """Crossings of the edges of polygon p (2-D p2 (K, 2), heights pz) with the
    exact rim of disc feature q: (x (2K, 2), z on p, z on q, ok)."""
    e2 = jnp.roll(p2, -1, axis=0) - p2
    ez = jnp.roll(pz, -1) - pz
    def lift(x):
        return jm.mm(x, frame.T) + _plane_z(x, q2, qz, q.m, n, frame)[..., None] * n
    x0 = lift(p2) - q.centre
    x1 = lift(p2 + e2) - q.centre - x0
    qa = jm.sum_terms(x1 * x1, -1)
    qb = jm.sum_terms(x0 * x1, -1)
    qc = jm.sum_terms(x0 * x0, -1) - q.radius ** 2
    disc = qb * qb - qa * qc
    ok = (qa > _EPS2) & (disc >= 0) & q.is_disc
    sd = jnp.sqrt(jnp.where(ok, disc, 0.0))
    qa_s = jnp.where(ok, qa, 1.0)
    s = jnp.stack([(-qb - sd) / qa_s, (-qb + sd) / qa_s], axis=1)  # (K, 2)
    ok = ok[:, None] & (s >= 0) & (s <= 1)
    x = (p2[:, None] + s[..., None] * e2[:, None]).reshape(-1, 2)
    zp = (pz[:, None] + s * ez[:, None]).reshape(-1)
    return x, zp, _plane_z(x, q2, qz, q.m, n, frame), ok.reshape(-1)


def _order_segment(f: Feature, n, lowest) -> Feature:
    """For a segment feature, put the endpoint nearest the other shape first
    (lowest along n for shape 1, highest for shape 2) and pad with the second."""
    v, z = f.verts, jm.mm(f.verts, n)
    swap = f.is_seg & jnp.where(lowest, z[1] < z[0], z[1] > z[0])
    v0 = jnp.where(swap, v[1], v[0])
    v1 = jnp.where(swap, v[0], v[1])
    seg = jnp.concatenate([v0[None], jnp.broadcast_to(v1, (v.shape[0] - 1, 3))], axis=0)
    return f._replace(verts=jnp.where(f.is_seg, seg, v))


def _manifold(n, fa: Feature, fb: Feature, tol):
    """Candidate contacts between feature A (facing -n) and feature B (facing +n).

    Candidates: A's vertices over B, B's vertices under A, crossings of their
    polygon edges, and crossings of each polygon's edges with the other's
    exact rim when that one is a disc. Returns world positions (N, 3) (midway
    between the features), depths (N,) along n and the candidates that
    exist (N,) (the caller keeps those at depth >= 0)."""
    t1 = _any_perp(n)
    t2 = jnp.cross(n, t1)
    frame = jnp.stack([t1, t2], axis=1)  # (3, 2)
    fa = _order_segment(fa, n, True)
    fb = _order_segment(fb, n, False)
    a2, az = jm.mm(fa.verts, frame), jm.mm(fa.verts, n)
    b2, bz = jm.mm(fb.verts, frame), jm.mm(fb.verts, n)
    # (i) A's vertices over B, (ii) B's vertices under A
    ok_a = _inside(a2, b2, bz, fb, n, frame, tol)
    ok_b = _inside(b2, a2, az, fa, n, frame, tol)
    # (iii) polygon edge crossings
    ea = jnp.roll(a2, -1, axis=0) - a2
    eaz = jnp.roll(az, -1) - az
    eb = jnp.roll(b2, -1, axis=0) - b2
    ebz = jnp.roll(bz, -1) - bz
    den = _cross2(ea[:, None], eb[None])  # (KA, KB)
    la = jnp.sqrt(jm.sum_terms(ea * ea, -1))[:, None]
    lb = jnp.sqrt(jm.sum_terms(eb * eb, -1))[None]
    dok = jnp.abs(den) > 1e-9 * la * lb + 1e-30
    dsafe = jnp.where(dok, den, 1.0)
    w = b2[None] - a2[:, None]
    s = _cross2(w, eb[None]) / dsafe
    u = _cross2(w, ea[:, None]) / dsafe
    ok_x = dok & (s >= 0) & (s <= 1) & (u >= 0) & (u <= 1)
    x_x = a2[:, None] + s[..., None] * ea[:, None]
    za_x = az[:, None] + s * eaz[:, None]
    zb_x = bz[None] + u * ebz[None]
    # (iv) A's edges x B's rim, (v) B's edges x A's rim
    x4, za4, zb4, ok4 = _edge_circle(a2, az, b2, bz, fb, n, frame)
    x5, zb5, za5, ok5 = _edge_circle(b2, bz, a2, az, fa, n, frame)
    x = jnp.concatenate([a2, b2, x_x.reshape(-1, 2), x4, x5], axis=0)
    za = jnp.concatenate([az, _height(b2, a2, az, fa, n, frame), za_x.reshape(-1), za4, za5])
    zb = jnp.concatenate([_height(a2, b2, bz, fb, n, frame), bz, zb_x.reshape(-1), zb4, zb5])
    ok = jnp.concatenate([ok_a, ok_b, ok_x.reshape(-1), ok4, ok5])
    depth = zb - za
    pos = jm.mm(x, frame.T) + (0.5 * (za + zb))[:, None] * n
    return pos, depth, ok


def _convex_contacts(ncon, n, ov, fa: Feature, fb: Feature, sup_a, sup_b, tol):
    """Clip the features and keep ncon contacts (deepest first, then spread);
    none when separated (ov < 0); one midway between the support points, at
    the SAT depth, when the clip finds nothing."""
    pos, depth, ok = _manifold(n, fa, fb, tol)
    # depth >= 0 within the working precision (resting at depth -> 0)
    scale = coord_scale(sup_a, sup_b)
    depth, touch = touching(depth, scale)
    ov, ov_touch = touching(ov, scale)
    ok = ok & touch
    sel, sok = _reduce(pos, depth, ok, ncon)
    cpos, cdep = pos[sel], depth[sel]
    none = ~jnp.any(ok)
    first = jnp.arange(ncon) == 0
    cpos = jnp.where(none, jnp.where(first[:, None], 0.5 * (sup_a + sup_b), 0.0), cpos)
    cdep = jnp.where(none, jnp.where(first, ov, 0.0), cdep)
    valid = jnp.where(none, first, sok) & ov_touch
    normal = jnp.broadcast_to(n, (ncon, 3))
    return Contact(pos=jnp.where(valid[:, None], cpos, 0.0),
                   normal=jnp.where(valid[:, None], normal, 0.0),
                   depth=jnp.where(valid, cdep, 0.0), valid=valid)


def _cyl(g: GeomWorld):
    """(centre, unit axis, half length, radius) of a cylinder or capsule."""
    return g.pos, g.rot[:, 2], 0.5 * g.size[1], g.size[0]


def _cyl_support(c, a, h, r, d):
    """A support point of a cylinder in unit direction d (cap/side centre on ties)."""
    t = jm.mm(d, a)
    w, ok = _normalize(d - t * a)
    tie = jnp.abs(t) < 1e-9
    return c + jnp.where(tie, 0.0, jnp.sign(t)) * h * a + jnp.where(ok, r, 0.0) * w


# ------------------------------------------------------------ pair functions
def cylinder_plane(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Cylinder (g1) vs plane half-space (g2): ODE's contact set, deepest first."""
    c, a, h, r = _cyl(g1)
    n = g2.rot[:, 2]
    off = jm.mm(n, g2.pos)
    dt = c.dtype
    tol = _flat_tol(dt)
    p1, p2 = c - h * a, c + h * a
    na = jm.mm(n, a)
    flat = jnp.abs(jnp.abs(na) - 1.0) < tol
    # flat: the lower cap's rim at 90 degree steps (ODE's V1, V2 construction)
    s, t = off - jm.mm(n, p1), off - jm.mm(n, p2)
    p = jnp.where(s >= t, p1, p2)
    scale = coord_scale(c, g2.pos, h + r)
    cap_in = touching(jnp.maximum(s, t), scale)[1]
    ex, ey = jnp.array([1.0, 0.0, 0.0], dt), jnp.array([0.0, 1.0, 0.0], dt)
    v1 = a + jnp.where(jnp.abs(a[0]) < tol, ex, ey)
    v2 = _normalize(jnp.cross(v1, a))[0] * r
    v1 = jnp.cross(v2, a)
    flat_pts = jnp.stack([p + v1, p - v1, p + v2, p - v2])
    flat_dep, flat_touch = touching(off - jm.mm(flat_pts, n), scale)
    flat_ok = cap_in & flat_touch
    # tilted: the deepest rim point of each cap
    cdir, _ = _normalize(a * na - n)
    tilt_pts = jnp.stack([p1 + r * cdir, p2 + r * cdir, p1, p2])
    tilt_dep, tilt_touch = touching(off - jm.mm(tilt_pts, n), scale)
    tilt_ok = (jnp.arange(4) < 2) & tilt_touch
    pts = jnp.where(flat, flat_pts, tilt_pts)
    dep = jnp.where(flat, flat_dep, tilt_dep)
    ok = jnp.where(flat, flat_ok, tilt_ok)
    _, idx = jm.top_k_small(jnp.where(ok, dep, -_BIG), CYLINDER_PLANE_NCON)
    valid = ok[idx]
    return Contact(pos=jnp.where(valid[:, None], pts[idx], 0.0),
                   normal=jnp.where(valid[:, None], jnp.broadcast_to(n, (4, 3)), 0.0),
                   depth=jnp.where(valid, dep[idx], 0.0), valid=valid)


def cylinder_sphere(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Cylinder (g1) vs sphere (g2): ODE's dCollideCylinderSphere, one contact.

    Regions by the sphere centre's axial coordinate s (from the lower cap) and
    distance t from the axis: rim (outside radius and beyond a cap), side
    (penetrating the side no deeper than either cap) or cap."""
    c, a, h, r = _cyl(g1)
    sp, rs = g2.pos, g2.size[0]
    dt = c.dtype
    length = 2.0 * h
    p1, p2 = c - h * a, c + h * a
    s = jm.mm(sp - p1, a)
    cvec = p1 + s * a - sp  # from the sphere centre to the axis, perpendicular to it
    t2 = jm.mm(cvec, cvec)
    tok = t2 > _EPS2
    t = jnp.where(tok, jnp.sqrt(jnp.where(tok, t2, 1.0)), 0.0)
    cdir = jnp.where(tok, cvec / jnp.where(tok, t, 1.0), -_any_perp(a))
    # rim region
    rim = (t > r) & ((s < 0) | (s > length))
    below = s <= 0
    ds = jnp.where(below, s, s - length)
    dist_rim2 = ds * ds + (t - r) * (t - r)
    dist_rim = jnp.sqrt(jnp.where(dist_rim2 > _EPS2, dist_rim2, 1.0))
    dist_rim = jnp.where(dist_rim2 > _EPS2, dist_rim, 0.0)
    rim_pos = jnp.where(below, p1, p2) - cdir * r
    rim_n, _ = _normalize(rim_pos - sp, a * jnp.where(below, 1.0, -1.0).astype(dt))
    rim_depth = rs - dist_rim
    # side region
    side = ~rim & ((r - t) <= s) & ((r - t) <= (length - s))
    tol = _flat_tol(dt)
    side_pos = jnp.where(t > rs + tol, sp + cdir * rs, sp + cvec)
    side_depth = rs + r - t
    # cap region
    first = s <= h
    cap_n = jnp.where(first, a, -a)
    cap_pos = sp + rs * cap_n
    cap_depth = jnp.where(first, s + rs, rs + length - s)
    pos = jnp.where(rim, rim_pos, jnp.where(side, side_pos, cap_pos))
    nrm = jnp.where(rim, rim_n, jnp.where(side, cdir, cap_n))
    depth = jnp.where(rim, rim_depth, jnp.where(side, side_depth, cap_depth))
    inrange = (s >= -rs) & (s <= length + rs) & (t <= r + rs)
    valid = inrange & (depth >= 0)
    return _pack([pos], [nrm], [depth], [valid])


def _tol(scale):
    """Clipping tolerance [m]: a point this close to the other feature counts as
    over it (covers the refined normal's angular error, ~1e-4 rad)."""
    return _CLIP_REL_TOL * scale


def _normal(u, d):
    return u * _sgn(jm.mm(u, d))


def sat_cylinder_box(g1: GeomWorld, g2: GeomWorld):
    """(unit normal from the box into the cylinder, overlap [m]) of cylinder g1
    and box g2: SAT over 80 candidate axes + refinement. The overlap is the
    penetration depth (minus the distance when separated)."""
    c, a, h, r = _cyl(g1)
    cb, rot, half = g2.pos, g2.rot, 0.5 * g2.size
    d = c - cb

    def overlap(u):
        return _cyl_extent(a, h, r, u) + _box_extent(rot, half, u) - jnp.abs(jm.mm(u, d))

    verts = cb + jm.mm(jnp.asarray(_CORNER_SIGNS, c.dtype) * half, rot.T)
    rims = jnp.stack([c - h * a, c + h * a])
    e0, e1 = verts[_BOX_EDGES[:, 0]], verts[_BOX_EDGES[:, 1]]
    edge_axes = jnp.concatenate([_circle_seg_axes(cc, a, r, e0, e1).reshape(-1, 3) for cc in rims])
    vert_rim = jnp.concatenate([verts - _rim_point(cc, a, r, verts) for cc in rims])
    axes = jnp.concatenate([
        rot.T, a[None], jnp.cross(a, rot.T), jnp.cross(a, jnp.cross(a, verts - c)),
        vert_rim, edge_axes, d[None], jnp.cross(d, a)[None], jnp.cross(d, rot.T)], axis=0)
    u, ov = _sat(overlap, axes, jnp.concatenate([a[None], rot.T, d[None]]))
    return _normal(u, d), ov


def cylinder_box(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Cylinder (g1) vs box (g2): SAT (``sat_cylinder_box``), the box's support
    face clipped against the cylinder's cap polygon or side line; 4 contacts."""
    c, a, h, r = _cyl(g1)
    cb, rot, half = g2.pos, g2.rot, 0.5 * g2.size
    n, ov = sat_cylinder_box(g1, g2)
    fa = _cyl_feature(c, a, h, r, -n)
    fb = _box_feature(cb, rot, half, n)
    sup_a = _cyl_support(c, a, h, r, -n)
    sup_b = cb + jm.mm(rot, jnp.sign(jm.mm(rot.T, n)) * half)
    tol = _tol(r + h + jnp.max(half))
    return _convex_contacts(CYLINDER_BOX_NCON, n, ov, fa, fb, sup_a, sup_b, tol)


def sat_cylinder_capsule(g1: GeomWorld, g2: GeomWorld):
    """(normal from the capsule into the cylinder, overlap [m]) of cylinder g1
    and capsule g2: SAT of the cylinder against the capsule's segment (the
    capsule's radius adds to every extent) over 16 axes + refinement."""
    c, a, h, r = _cyl(g1)
    cb, b, hb, rb = _cyl(g2)
    d = c - cb

    def overlap(u):
        return _cyl_extent(a, h, r, u) + _caps_extent(b, hb, rb, u) - jnp.abs(jm.mm(u, d))

    s0, s1 = cb - hb * b, cb + hb * b
    ends = jnp.stack([s0, s1])
    rims = jnp.stack([c - h * a, c + h * a])
    pa, pb = _closest_seg_seg(rims[0], rims[1], s0, s1)
    axes = jnp.concatenate([
        a[None], b[None], jnp.cross(a, b)[None], jnp.cross(a, jnp.cross(a, ends - c)),
        (pb - pa)[None], jnp.cross(a, jnp.cross(a, pb - c))[None],
        jnp.concatenate([ends - _rim_point(cc, a, r, ends) for cc in rims]),
        jnp.concatenate([_circle_seg_axes(cc, a, r, s0, s1) for cc in rims]),
        d[None], jnp.cross(d, a)[None], jnp.cross(d, b)[None]], axis=0)
    u, ov = _sat(overlap, axes, jnp.stack([a, b, d]))
    return _normal(u, d), ov


def cylinder_capsule(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Cylinder (g1) vs capsule (g2): SAT (``sat_cylinder_capsule``), the
    capsule's support line clipped against the cylinder's cap polygon or side
    line; 2 contacts."""
    c, a, h, r = _cyl(g1)
    cb, b, hb, rb = _cyl(g2)
    n, ov = sat_cylinder_capsule(g1, g2)
    fa = _cyl_feature(c, a, h, r, -n)
    fb = _caps_feature(cb, b, hb, rb, n)
    sup_a = _cyl_support(c, a, h, r, -n)
    tb = jm.mm(n, b)
    sup_b = cb + jnp.where(jnp.abs(tb) < 1e-9, 0.0, jnp.sign(tb)) * hb * b + rb * n
    tol = _tol(r + h + rb + hb)
    return _convex_contacts(CYLINDER_CAPSULE_NCON, n, ov, fa, fb, sup_a, sup_b, tol)


def _circle_circle_axis(c1, a1, r1, c2, a2, r2):
    """Direction between nearly closest points of two circles (alternating projections)."""
    q1 = _rim_point(c1, a1, r1, c2)
    q2 = _rim_point(c2, a2, r2, q1)
    for _ in range(_CIRCLE_ITERS):
        q1 = _rim_point(c1, a1, r1, q2)
        q2 = _rim_point(c2, a2, r2, q1)
    return q1 - q2


def sat_cylinder_cylinder(g1: GeomWorld, g2: GeomWorld):
    """(normal from g2 into g1, overlap [m]) of two cylinders: SAT over 19
    candidate axes (axes, their cross product, closest axis points, radial,
    rim-rim and rim-axis directions) + refinement."""
    c, a, h, r = _cyl(g1)
    cb, b, hb, rb = _cyl(g2)
    d = c - cb

    def overlap(u):
        return _cyl_extent(a, h, r, u) + _cyl_extent(b, hb, rb, u) - jnp.abs(jm.mm(u, d))

    rims_a = [c - h * a, c + h * a]
    rims_b = [cb - hb * b, cb + hb * b]
    pa, pb = _closest_seg_seg(rims_a[0], rims_a[1], rims_b[0], rims_b[1])
    rr = [_circle_circle_axis(ca, a, r, cc, b, rb)[None] for ca in rims_a for cc in rims_b]
    rs = [_circle_seg_axes(ca, a, r, rims_b[0], rims_b[1]) for ca in rims_a]
    rs += [_circle_seg_axes(cc, b, rb, rims_a[0], rims_a[1]) for cc in rims_b]
    axes = jnp.concatenate([
        a[None], b[None], jnp.cross(a, b)[None], (pb - pa)[None],
        jnp.cross(a, jnp.cross(a, pb - c))[None], jnp.cross(b, jnp.cross(b, pa - cb))[None],
        *rr, *rs, d[None], jnp.cross(d, a)[None], jnp.cross(d, b)[None]], axis=0)
    u, ov = _sat(overlap, axes, jnp.stack([a, b, d]))
    return _normal(u, d), ov


def cylinder_cylinder(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Cylinder (g1) vs cylinder (g2): SAT (``sat_cylinder_cylinder``), the two
    support features (cap polygons or side lines) clipped; 4 contacts."""
    c, a, h, r = _cyl(g1)
    cb, b, hb, rb = _cyl(g2)
    n, ov = sat_cylinder_cylinder(g1, g2)
    fa = _cyl_feature(c, a, h, r, -n)
    fb = _cyl_feature(cb, b, hb, rb, n)
    sup_a = _cyl_support(c, a, h, r, -n)
    sup_b = _cyl_support(cb, b, hb, rb, n)
    tol = _tol(r + h + rb + hb)
    return _convex_contacts(CYLINDER_CYLINDER_NCON, n, ov, fa, fb, sup_a, sup_b, tol)
