"""Shapes against a triangle mesh (ODE's dCreateTriMesh), static or on a body.

A mesh geom is a :class:`~jaxode.sim.collision.contact.Mesh` (tables in the geom
frame, built on the host by ``jaxode.meshes.build_mesh``); its ``size`` is
``(mesh index, bounding radius, 0)``. Everything below reads the mesh's
world pose of the current step (``GeomWorld``), so a mesh on a body and a
static one are the same; the other geom may be static too. The mesh against
plane and heightfield is in ``trimesh_ground``. Meshes are one-sided surfaces: a
triangle's normal (right-handed about its winding) points to the outside.

Candidates. Every step, for each (geom, mesh) pair, ``gather`` reads a fixed
block of ``window`` grid cells around the geom's bounding box (expressed in
the mesh frame, intersected with the cube of its bounding radius) and keeps
the first ``K`` distinct triangles whose bounding boxes overlap it. ``window``
and ``K`` are static per pair kind; the builder takes them from the grid and
the geoms' radii so that, by default, no triangle can be missed (K = the
largest number of distinct triangles in any block of cells, capped by
``add_trimesh(max_candidates=)``). Triangles beyond K are counted, per world,
in ``State.overflow_contacts``.

Per triangle (vmapped over the K candidates):
- sphere: exact closest point of the triangle (Ericson's regions); capsule:
  the same at six points of its segment (both ends, its closest points to the
  three triangle edges and its crossing of the triangle's plane), so a
  capsule lying on a face gets both ends;
- box, cylinder (its inscribed 16-gon prism, as cylinder-convex) and convex:
  the hull against the triangle as part of the solid the mesh bounds. The
  triangle's own separating-axis test (its normal, the hull's face normals,
  its edges x the hull's edges) decides separation only. The depth is the
  smallest overlap over the axes whose support feature on the solid lies
  on the triangle, from its normal cones (``Cones``): its normal; the face
  normals around its corners (the neighbours'); the hull's face normals,
  negated, inside one of its corners' cones; its convex edges and the other
  convex edges at its corners x the hull's edges whose Gauss arcs cross
  (Gregorius' Minkowski-face test, as convex-convex prunes). Along each
  such axis the triangle's own vertices give the solid's exact overlap.
  Ties within ODE's 1e-5 of the sizes go to the triangle's face, then the
  hull's face, a neighbour's face, an edge. Contacts: the hull's incident
  face clipped to the triangle's prism (for a neighbour's normal also to
  below the triangle's plane), the triangle clipped against the hull's face,
  or one edge-edge point; nothing clipped gives one point between the
  supports. A boundary edge or corner (an open mesh, a lone triangle) keeps
  every axis: there the triangle is its own solid.
- one-sided: a sphere (or segment point) whose centre is behind the
  triangle's plane by more than its radius, or a hull whose centre is behind
  the plane, makes no contact with that triangle.

Internal edges. The normal of a ball's contact on an edge or corner of the triangle
depends on that feature's kind (``jaxode.meshes``): FLAT (shared with a
coplanar neighbour) uses the face normal and the depth along it, exactly the
neighbour's face contact, so nothing catches on the seams of a flat mesh
(for balls only while the centre projects onto the triangle, within 1e-4
r: beyond a flat edge the coplanar neighbour owns the contact, e.g. its
convex edge at a box mesh's ridge); CONCAVE drops the contact (the
neighbour's face is at least as close); CONVEX (a ridge or the mesh's
boundary) keeps its own normal. Hulls need no such rule: a flat edge has
no axis of its own (its arc is a point, the face's normal), a concave edge
or a non-convex corner (saddle, concave edge) no cone, so only the face
normal and the convex features' axes remain.

Reduction. All per-triangle contacts are reduced to the pair's slots: the
deepest first, then greedily the one farthest (in position, and in normal
scaled by the geom's radius) from those kept; near-duplicates (closer than
1e-3 of the radius, the same normal) are merged, so a body across several
coplanar triangles keeps a spread support polygon, as on a plane.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import contact as ct
from .capsule import _closest_seg_seg
from .convex import (_EDGE_ABS, PlacedHull, _clip_plane, _face_manifold, _normalize, box_hull,
                     closest_on_triangles, place, prism_hull)
from .contact import Contact, GeomWorld, Hull, Mesh, coord_scale, touching
from jaxode.sim import math as jm

SPHERE_TRIMESH_NCON = 4
CAPSULE_TRIMESH_NCON = 4
BOX_TRIMESH_NCON = 8
CYLINDER_TRIMESH_NCON = 8
CONVEX_TRIMESH_NCON = 8

_BIG = 1e30
_BARY_TOL = 1e-6  # a barycentric coordinate below this puts a point on an edge
_FEATURE_REL = 1e-4  # triangle vertices this close (times the sizes) along an axis touch together
_PARALLEL2 = 1e-12
_FLAT_LAT_REL = 1e-4  # a face contact needs the centre's projection this close (times r)
_DUP_REL = 1e-3  # contacts closer than this times the geom radius (and same normal) merge
_CONCAVE, _FLAT, _CONVEX = 0, 1, 2


class Cones(NamedTuple):
    """The mesh's normal cones at K triangles (see ``jaxode.meshes``), world
    frame: edge_normal (K, 3, 3) the neighbour's normal across edge k (zero:
    a boundary edge); per corner, normals and planes (K, 3, R, 3) the cone's
    face normals and inward side planes, other (K, 3, R, 3) [m] the far end
    of the convex mesh edge between normals r and r + 1, foreign (K, 3, R)
    bool that edge is not one of the triangle's own, count (K, 3) int the
    number of normals (0: no convex cone), open (K, 3) bool a boundary
    vertex."""

    edge_normal: jax.Array
    normals: jax.Array
    planes: jax.Array
    other: jax.Array
    foreign: jax.Array
    count: jax.Array
    open: jax.Array


class Triangles(NamedTuple):
    """K candidate triangles in the world: corners a, b, c (K, 3) [m], unit
    normals (K, 3), edge_kind and corner_kind (K, 3) int (see ``Mesh``),
    valid (K,) bool (invalid rows repeat a real triangle, masked), cones
    (``Cones`` or None: lone triangles, every edge and corner a boundary)."""

    a: jax.Array
    b: jax.Array
    c: jax.Array
    normal: jax.Array
    edge_kind: jax.Array
    corner_kind: jax.Array
    valid: jax.Array
    cones: Cones | None = None


def place_triangles(mesh: Mesh, pos, rot, t, valid) -> Triangles:
    """Triangles ``t`` (K,) int of the mesh placed at the geom pose (pos [m],
    rot), with their normal cones; valid (K,) bool."""
    dt = pos.dtype
    ids = mesh.tris[t]  # (K, 3)
    mv = mesh.verts.astype(dt)
    corners = pos + jm.mm(mv[ids], rot.T)  # (K, 3, 3)
    oth = mesh.cone_other[ids]  # (K, 3, R)
    foreign = jnp.all(oth[..., None] != ids[:, None, None, :], axis=-1)
    cones = Cones(edge_normal=jm.mm(mesh.edge_normal[t].astype(dt), rot.T),
                  normals=jm.mm(mesh.cone_normals[ids].astype(dt), rot.T),
                  planes=jm.mm(mesh.cone_planes[ids].astype(dt), rot.T),
                  other=pos + jm.mm(mv[oth], rot.T), foreign=foreign, count=mesh.cone_count[ids],
                  open=mesh.vert_open[ids] > 0)
    return Triangles(a=corners[:, 0], b=corners[:, 1], c=corners[:, 2],
                     normal=jm.mm(mesh.normals[t].astype(dt), rot.T), edge_kind=mesh.edge_kind[t],
                     corner_kind=mesh.corner_kind[t], valid=valid, cones=cones)


# ------------------------------------------------------------ candidates
def bounding_radius(gtype, size):
    """Radius [m] of a ball about the geom origin containing the geom;
    size (..., 3) as ``GeomWorld.size`` (a convex geom's is its size[1])."""
    r, ln = size[..., 0], size[..., 1]
    return jnp.where(gtype == ct.SPHERE, r, jnp.where(
        gtype == ct.BOX, 0.5 * jnp.sqrt(jm.sum_terms(size * size, -1)), jnp.where(
            gtype == ct.CAPSULE, r + 0.5 * ln, jnp.where(
                gtype == ct.CYLINDER, jnp.sqrt(r * r + 0.25 * ln * ln), ln))))


def gather(mesh: Mesh, g2: GeomWorld, centre, lo, hi, radius, window: tuple,
           k: int, cap=None) -> tuple[Triangles, jax.Array]:
    """The first ``k`` distinct triangles of the mesh (g2) whose bounding
    boxes overlap the query box: the world AABB ``lo, hi`` (3,) of the other
    geom, in the mesh frame, intersected with the cube of half ``radius``
    about its origin ``centre`` (3,). ``window`` (3 ints) cells are read per
    axis. Returns the triangles (world frame) and how many overlapping
    triangles did not fit (int32)."""
    dt = g2.pos.dtype
    rt = g2.rot.T
    c_l = jm.mm(rt, 0.5 * (lo + hi) - g2.pos)
    h_l = jm.mm(jnp.abs(rt), 0.5 * (hi - lo))
    o_l = jm.mm(rt, centre - g2.pos)
    q_lo = jnp.maximum(c_l - h_l, o_l - radius)
    q_hi = jnp.minimum(c_l + h_l, o_l + radius)
    origin, cell, dims = mesh.origin.astype(dt), mesh.cell.astype(dt), mesh.dims
    i0 = jnp.clip(jnp.floor((q_lo - origin) / cell).astype(jnp.int32), 0, dims - 1)
    i1 = jnp.clip(jnp.floor((q_hi - origin) / cell).astype(jnp.int32), 0, dims - 1)
    off = np.stack(np.meshgrid(*[np.arange(w) for w in window], indexing="ij"), -1).reshape(-1, 3)
    ci = i0 + jnp.asarray(off, jnp.int32)  # (C, 3)
    cvalid = jnp.all(ci <= i1, axis=-1)
    ci = jnp.minimum(ci, dims - 1)
    ids = mesh.cells[(ci[:, 0] * dims[1] + ci[:, 1]) * dims[2] + ci[:, 2]]  # (C, M)
    tid = jnp.maximum(ids, 0)
    first = jnp.maximum(mesh.tri_cell[tid], i0)  # count each triangle in its first cell only
    keep = ((ids >= 0) & cvalid[:, None] & jnp.all(first == ci[:, None, :], axis=-1)
            & jnp.all((mesh.tri_lo[tid].astype(dt) <= q_hi)
                      & (mesh.tri_hi[tid].astype(dt) >= q_lo), axis=-1)).reshape(-1)
    count = jnp.sum(keep, dtype=jnp.int32)
    (sel,) = jnp.nonzero(keep, size=k, fill_value=0)
    t = tid.reshape(-1)[sel]
    cap = k if cap is None else cap
    valid = jnp.arange(k) < jnp.minimum(count, cap)
    tris = place_triangles(mesh, g2.pos, g2.rot, t, valid)
    return tris, jnp.maximum(count - cap, 0).astype(jnp.int32)


# ------------------------------------------------------------ reduction
def reduce_contacts(pos, normal, depth, ok, ncon: int, scale) -> Contact:
    """``ncon`` of the candidate contacts (N,): the deepest, then greedily
    the farthest from those kept in position and normal (scaled by
    ``scale`` [m]); candidates within 1e-3 scale of a kept one merge into it.
    Slots ordered deepest first, invalid slots zero."""
    dup2 = (_DUP_REL * scale) ** 2

    def dist2(j):
        return (jm.sum_terms((pos - pos[j]) ** 2, axis=-1)
                + scale * scale * jm.sum_terms((normal - normal[j]) ** 2, axis=-1))

    first = jnp.argmax(jnp.where(ok, depth, -_BIG))
    sel, sel_ok = [first], [ok[first]]
    mind = dist2(first)
    for _ in range(ncon - 1):
        cand = ok & (mind > dup2)
        j = jnp.argmax(jnp.where(cand, mind, -1.0))
        sel.append(j)
        sel_ok.append(cand[j])
        mind = jnp.minimum(mind, dist2(j))
    sel, sok = jnp.stack(sel), jnp.stack(sel_ok)
    _, order = jax.lax.top_k(jnp.where(sok, depth[sel], -_BIG), ncon)
    sel, sok = sel[order], sok[order]
    return Contact(pos=jnp.where(sok[:, None], pos[sel], 0.0),
                   normal=jnp.where(sok[:, None], normal[sel], 0.0),
                   depth=jnp.where(sok, depth[sel], 0.0), valid=sok)


# ------------------------------------------------------------ balls
def _bary_zero(q, a, b, c, n):
    """Which barycentric coordinates of q (K, 3) on its triangle vanish (K, 3) bool."""
    area = jm.sum_terms(jnp.cross(b - a, c - a) * n, -1)
    w = jnp.stack([jm.sum_terms(jnp.cross(b - q, c - q) * n, -1), jm.sum_terms(jnp.cross(c - q, a - q) * n, -1),
                   jm.sum_terms(jnp.cross(a - q, b - q) * n, -1)], -1) / area[:, None]
    return w <= _BARY_TOL


def ball_triangles(tris: Triangles, centre, r):
    """A ball (centre (3,), radius r) against each triangle: (pos (K, 3),
    normal (K, 3) from the mesh into the ball, depth (K,), valid (K,)), with
    the module's one-sided and internal-edge rules."""
    q = closest_on_triangles(centre, tris.a, tris.b, tris.c)
    n = tris.normal
    s = jm.sum_terms(n * (centre - tris.a), -1)  # signed distance to the triangle's plane
    zero = _bary_zero(q, tris.a, tris.b, tris.c, n)
    nz = jm.sum_terms(zero, -1)
    # an edge: the zero coordinate j is opposite edge (j + 1) % 3; a corner: the nonzero one
    edge = (jnp.argmax(zero, -1) + 1) % 3
    corner = jnp.argmin(zero, -1)
    kind = jnp.where(nz == 0, _FLAT, jnp.where(
        nz == 1, jnp.take_along_axis(tris.edge_kind, edge[:, None], 1)[:, 0],
        jnp.take_along_axis(tris.corner_kind, corner[:, None], 1)[:, 0]))
    d_vec = centre - q
    d2 = jm.sum_terms(d_vec * d_vec, -1)
    dist = jnp.sqrt(jnp.where(d2 > 0, d2, 1.0)) * (d2 > 0)
    n_true = _normalize(d_vec, n)
    convex = kind == _CONVEX
    normal = jnp.where(convex[:, None], n_true, n)
    scale = coord_scale(centre, tris.a, r)  # resting at depth -> 0: touching
    depth, touch = touching(jnp.where(convex, r - dist, r - s), scale)
    touches = touching(r - dist, scale)[1]  # the ball reaches this triangle
    # a face contact (flat feature) only where the centre projects onto the
    # triangle: across a flat edge the coplanar neighbour owns it, and a centre
    # projecting beyond the flat region (a ball beside a box mesh, behind this
    # face's plane) must not get this face's normal and depth r - s > r
    lateral = jnp.sqrt(jm.sum_terms((centre - s[:, None] * n - q) ** 2, -1))
    face_ok = convex | (lateral <= _FLAT_LAT_REL * r)
    valid = (tris.valid & (kind != _CONCAVE) & touches & touch & face_ok
             & jnp.where(convex, s > 0, s >= -r))
    return q, normal, depth, valid


def sphere_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Sphere (g1) vs mesh (g2): exact closest points; 4 slots."""
    r = g1.size[0]
    pos, n, depth, ok = ball_triangles(tris, g1.pos, r)
    return reduce_contacts(pos, n, depth, ok, SPHERE_TRIMESH_NCON, r)


def _segment_points(p0, p1, tris: Triangles):
    """Six points per triangle on the segment [p0, p1]: its ends, its closest
    points to the triangle's three edges, and its crossing of the plane
    (or p0 when it does not cross). Returns (K, 6, 3)."""
    k = tris.a.shape[0]
    ends = jnp.broadcast_to(jnp.stack([p0, p1]), (k, 2, 3))
    seg = jax.vmap(lambda u, v: _closest_seg_seg(p0, p1, u, v)[0])
    e = jnp.stack([seg(tris.a, tris.b), seg(tris.b, tris.c), seg(tris.c, tris.a)], axis=1)
    s0 = jm.sum_terms(tris.normal * (p0 - tris.a), -1)
    s1 = jm.sum_terms(tris.normal * (p1 - tris.a), -1)
    cross = s0 * s1 < 0
    t = jnp.where(cross, s0 / jnp.where(cross, s0 - s1, 1.0), 0.0)
    x = p0 + t[:, None] * (p1 - p0)
    return jnp.concatenate([ends, e, x[:, None]], axis=1)


def capsule_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Capsule (g1) vs mesh (g2): ball contacts at six points of the segment
    per triangle (see ``_segment_points``); 4 slots."""
    r, half = g1.size[0], 0.5 * g1.size[1]
    a = g1.rot[:, 2] * half
    pts = _segment_points(g1.pos - a, g1.pos + a, tris)  # (K, 6, 3)
    pos, n, depth, ok = jax.vmap(lambda c: ball_triangles(tris, c, r), in_axes=1, out_axes=1)(pts)
    return reduce_contacts(pos.reshape(-1, 3), n.reshape(-1, 3), depth.reshape(-1),
                           ok.reshape(-1), CAPSULE_TRIMESH_NCON, r + half)


# ------------------------------------------------------------ hulls
_TRI_FACES = np.array([[0, 1, 2], [0, 2, 1]])
_TRI_EDGES = np.array([[0, 1], [1, 2], [2, 0]])


def _triangle_hull(v, n) -> PlacedHull:
    """One triangle (v (3, 3) world corners, unit normal n) as a flat hull of
    two faces (front and back), for ``_face_manifold``."""
    def i(x):  # int32 index tables, with or without jax_enable_x64
        return jnp.asarray(x, jnp.int32)

    hull = Hull(verts=v, normals=jnp.stack([n, -n]), offsets=jnp.stack([jm.mm(n, v[0]),
                                                                      -jm.mm(n, v[0])]),
                faces=i(_TRI_FACES), face_size=i(np.array([3, 3])), edges=i(_TRI_EDGES),
                edge_faces=i(np.zeros((3, 2), np.int64) + [0, 1]), tris=i(_TRI_FACES[:1]),
                centre=jm.sum_terms(v, 0) / 3, nvert=i(3), nface=i(2))
    return PlacedHull(verts=v, normals=hull.normals, offsets=hull.offsets, centre=hull.centre,
                      extent=0.5 * jm.sum_terms(jnp.max(v, 0) - jnp.min(v, 0)), hull=hull)


def triangle_sat(h: PlacedHull, v, n):
    """Separations [m] of hull h and the triangle v (3, 3) (unit normal n)
    along the triangle normal (one-sided: h above the plane), h's face
    normals (F,), and the triangle edge x hull edge axes (3, E) (-BIG where
    parallel), with those unit axes u (3, E, 3) pointing out of h. The
    penetration depth is minus the largest separation."""
    sep_t = jnp.min(jm.mm(h.verts, n)) - jm.mm(n, v[0])
    sep_f = jnp.min(jm.mm(h.normals, v.T), axis=1) - h.offsets
    te = v[jnp.array([1, 2, 0])] - v
    e = h.hull.edges
    hp = h.verts[e[:, 0]]
    he = h.verts[e[:, 1]] - hp
    u = jnp.cross(te[:, None, :], he[None, :, :])  # (3, E, 3)
    u2 = jm.sum_terms(u * u, -1)
    ok = u2 > _PARALLEL2 * jm.sum_terms(te * te, -1)[:, None] * jm.sum_terms(he * he, -1)[None]
    u = u / jnp.sqrt(jnp.where(ok, u2, 1.0))[..., None]
    u = jnp.where((jm.sum_terms(u * (hp - h.centre)[None], -1) < 0)[..., None], -u, u)
    sep_e = (jnp.min(jm.einsum("iek,jk->iej", u, v), -1)
             - jnp.max(jm.einsum("iek,vk->iev", u, h.verts), -1))
    return sep_t, sep_f, jnp.where(ok, sep_e, -_BIG), u


def _lone_cone(n):
    """The cone data of a lone triangle: every edge and corner a boundary."""
    z = jnp.zeros((3, 1, 3), n.dtype)
    return Cones(edge_normal=jnp.zeros((3, 3), n.dtype), normals=z, planes=z, other=z,
                 foreign=jnp.zeros((3, 1), bool), count=jnp.zeros(3, jnp.int32),
                 open=jnp.ones(3, bool))


def _arcs_cross(a, b, c, d):
    """Whether the Gauss arcs a-b (a mesh edge: its faces' normals) and c-d
    (a hull edge: its faces' normals negated) cross (Gregorius' Minkowski
    face test; touching arcs do not count). Broadcasts over leading axes."""
    bxa, dxc = jnp.cross(b, a), jnp.cross(d, c)
    cba, dba = jm.sum_terms(c * bxa, -1), jm.sum_terms(d * bxa, -1)
    adc, bdc = jm.sum_terms(a * dxc, -1), jm.sum_terms(b * dxc, -1)
    return (cba * dba < 0) & (adc * bdc < 0) & (cba * bdc > 0)


def _unit_cross(x, y):
    """Unit x cross y and whether x, y are not parallel (broadcasting)."""
    u = jnp.cross(x, y)
    u2 = jm.sum_terms(u * u, -1)
    ok = u2 > _PARALLEL2 * jm.sum_terms(x * x, -1) * jm.sum_terms(y * y, -1)
    return u / jnp.sqrt(jnp.where(ok, u2, 1.0))[..., None], ok


def _clip_triangle_prism(poly, cnt, v, n, top):
    """The convex polygon (poly (N, 3), cnt) clipped to the prism over the
    triangle v (3, 3) (normal n), and below its plane when ``top``."""
    side = jnp.cross(v[jnp.array([1, 2, 0])] - v, n)  # outward side planes (counter-clockwise loop)
    planes = jnp.concatenate([side, n[None]])
    offs = jnp.concatenate([jm.sum_terms(side * v, -1), jnp.where(top, jm.mm(n, v[0]), _BIG)[None]])

    def body(k, carry):  # one loop body: a quarter of the code of four unrolled steps
        return _clip_plane(carry[0], carry[1], planes[k], offs[k])

    return jax.lax.fori_loop(0, 4, body, (poly, cnt))


def hull_triangle(h: PlacedHull, v, n, edge_kind, valid, cones: Cones | None = None):
    """Hull h (geom 1) against one triangle (v (3, 3), normal n) of the solid
    the mesh bounds: separation by the triangle's full SAT (as
    ``triangle_sat``, edge axes both ways), depth and normal by the axes whose support feature
    on the solid lies on the triangle (its normal cones ``cones``; None: a
    lone triangle), then face clipping or one edge contact (module
    docstring); the cones replace the corner kinds. Returns
    (pos (N, 3), normal (N, 3), depth (N,), valid (N,)), N = h's face loop
    length + 4."""
    cn = _lone_cone(n) if cones is None else cones
    dt = v.dtype
    t = _triangle_hull(v, n)
    scale = h.extent + t.extent
    tol = 100.0 * jnp.finfo(dt).eps
    e = h.hull.edges
    hv = h.verts
    # the triangle's full SAT (separation): its normal, h's faces, and its
    # edges x h's edges in both directions
    sep_t = jnp.min(jm.mm(hv, n)) - jm.mm(n, v[0])
    sep_f = jnp.min(jm.mm(h.normals, v.T), axis=1) - h.offsets
    hp = hv[e[:, 0]]
    he = hv[e[:, 1]] - hp
    te = v[jnp.array([1, 2, 0])] - v
    u_o, par_o = _unit_cross(te[:, None, :], he[None])  # (3, E, 3)
    pt, ph = jm.mm(u_o, v.T), jm.mm(u_o, hv.T)
    up = jnp.max(pt, -1) - jnp.min(ph, -1)  # overlap along +u
    down = jnp.max(ph, -1) - jnp.min(pt, -1)  # along -u
    sep_o = jnp.where(par_o, -jnp.minimum(up, down), -_BIG)
    tscale = coord_scale(h.centre, v, h.extent)  # resting at depth -> 0: touching
    separated = ~touching(-jnp.maximum(jnp.maximum(sep_t, jnp.max(sep_f)), jnp.max(sep_o)),
                          tscale)[1]

    def overlap(a):  # the triangle's overlap with h along a (from the mesh into h)
        return jnp.max(jm.mm(a, v.T), -1) - jnp.min(jm.mm(a, hv.T), -1)

    big = jnp.asarray(_BIG, dt)
    nr = cn.normals.shape[1]
    r_idx = jnp.arange(nr)
    in_cnt = r_idx[None, :] < cn.count[:, None]  # (3, R)
    # the neighbours' normals at the corners (the cones' extreme rays)
    d_c = jnp.where(in_cnt, overlap(cn.normals), big)
    # the hull's faces whose normal (negated) lies in a corner's cone, or
    # that touch a boundary corner (there the triangle is its own solid)
    a_f = -h.normals
    inside = jnp.all((jm.einsum("fk,jrk->fjr", a_f, cn.planes) >= -tol) | ~in_cnt[None], -1)
    proj = jm.mm(a_f, v.T)  # (F, 3)
    supp = proj >= jnp.max(proj, -1, keepdims=True) - _FEATURE_REL * scale
    ok_f = jnp.any((inside & (cn.count >= 3)[None]) | (supp & cn.open[None]), -1)
    d_f = jnp.where(ok_f, -sep_f, big)
    # the hull's edges' Gauss arcs (its faces' normals negated)
    hn = -h.normals[h.hull.edge_faces]  # (E, 2, 3)
    # own edges: a convex one within its arc (n, neighbour), a boundary one
    # always, pointing into h
    m = cn.edge_normal
    boundary = jm.sum_terms(m * m, -1) < 0.25
    into_h = jm.sum_terms(u_o * (hp - h.centre)[None], -1) < 0
    arc_side = jm.sum_terms(u_o * (n + m)[:, None], -1) > 0
    plus = jnp.where(boundary[:, None], into_h, arc_side)
    u_o = jnp.where(plus[..., None], u_o, -u_o)
    arc_o = _arcs_cross(n, m[:, None], hn[None, :, 0], hn[None, :, 1])
    ok_o = par_o & (boundary[:, None] | ((edge_kind == _CONVEX)[:, None] & arc_o))
    d_o = jnp.where(ok_o, jnp.where(plus, up, down), big)
    # the other convex edges at the corners, within their arcs (none where
    # no vertex has two normals: a flat mesh)
    if nr >= 2:
        # every quantity a triple product (as convex._edge_pairs): with the
        # mesh edge d from corner v_j, the hull edge g from hp, u = d x g,
        # u . (v_j - hp) = g . (v_j x d) - d . (g x hp), |u|^2 = |d|^2 |g|^2 - (d . g)^2
        nxt = jnp.where(r_idx + 1 < cn.count[:, None], r_idx + 1, 0)
        n_next = jnp.take_along_axis(cn.normals, nxt[..., None], 1)  # (3, R, 3)
        d = cn.other - v[:, None]  # (3, R, 3)

        def dot(x, y):  # (3, R, 3) . (E, 3) -> (3, R, E); small: a fusion, not a batched matmul
            return jm.sum_terms(x[:, :, None] * y[None, None], -1)

        dd, gg, dg = jm.sum_terms(d * d, -1)[..., None], jm.sum_terms(he * he, -1), dot(d, he)
        u2 = dd * gg - dg * dg  # (3, R, E)
        uw = dot(jnp.cross(v[:, None], d), he) - dot(d, jnp.cross(he, hp))
        side = dot(jnp.cross(cn.normals + n_next, d), he)  # u . (n_r + n_(r+1))
        bxa = jnp.cross(n_next, cn.normals)
        dxc = jnp.cross(hn[:, 1], hn[:, 0])
        cba, dba = dot(bxa, hn[:, 0]), dot(bxa, hn[:, 1])
        adc, bdc = dot(cn.normals, dxc), dot(n_next, dxc)
        arc_x = (cba * dba < 0) & (adc * bdc < 0) & (cba * bdc > 0)
        ok_x = ((u2 > _PARALLEL2 * dd * gg) & arc_x
                & (in_cnt & cn.foreign & (cn.count >= 2)[:, None])[..., None])
        # crossing arcs: both supports lie on the two edges, so the overlap
        # is the axis (oriented out of the mesh) times the offset between them
        d_x = jnp.where(ok_x, jnp.where(side < 0, -uw, uw) / jnp.sqrt(jnp.where(ok_x, u2, 1.0)),
                        big)
    else:
        d = jnp.zeros((3, 1, 3), dt)
        d_x = jnp.full((3, 1, e.shape[0]), big)
        n_next = cn.normals
    # the shallowest axis; ties (within ODE's 1e-5 of the sizes) go to the
    # triangle's face, then the hull's face, a neighbour's face, an edge
    bf = jnp.argmin(d_f)
    bc = jnp.argmin(d_c.reshape(-1))
    bo = jnp.argmin(d_o.reshape(-1))
    bx = jnp.argmin(d_x.reshape(-1))
    d_e = jnp.minimum(d_o.reshape(-1)[bo], d_x.reshape(-1)[bx])
    own_e = d_o.reshape(-1)[bo] <= d_x.reshape(-1)[bx]
    cands = jnp.stack([-sep_t, d_f[bf], d_c.reshape(-1)[bc], d_e])
    kind = jnp.argmax(cands <= jnp.min(cands) + _EDGE_ABS * scale)
    depth_sat = touching(cands[kind], tscale)[0]
    # contact normals per kind
    n_c = cn.normals.reshape(-1, 3)[bc]
    ie, je = bo // e.shape[0], bo % e.shape[0]
    ne = e.shape[0]
    jx, rx, kx = bx // (d_x.shape[1] * ne), (bx // ne) % d_x.shape[1], bx % ne
    u_x = _normalize(jnp.cross(d[jx, rx], he[kx]), n)
    u_x = jnp.where(jm.mm(u_x, cn.normals[jx, rx] + n_next[jx, rx]) < 0, -u_x, u_x)
    u_e = jnp.where(own_e, u_o[ie, je], u_x)
    axis = jnp.where(kind == 0, n, jnp.where(kind == 1, a_f[bf], jnp.where(kind == 2, n_c, u_e)))
    # the triangle's face or a neighbour's: h's incident face clipped to the
    # triangle's prism (below its plane for a neighbour's), depths along the axis
    fi = jnp.argmin(jm.mm(h.normals, axis))
    lh = h.hull.faces.shape[1]
    poly = jnp.concatenate([hv[h.hull.faces[fi]], jnp.zeros((4, 3), dt)])
    poly, cnt = _clip_triangle_prism(poly, h.hull.face_size[fi], v, n, kind == 2)
    d_t, t_touch = touching(jnp.max(jm.mm(v, axis)) - jm.mm(poly, axis), tscale)
    ok_t = (jnp.arange(lh + 4) < cnt) & t_touch
    # the hull's face as the reference, the triangle clipped against it
    p_h, d_h, ok_h = _face_manifold(h, bf, t)
    p_h, d_h, ok_h = (jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])
                      for x in (p_h, d_h, ok_h))
    # one edge-edge contact
    s0 = jnp.where(own_e, v[ie], v[jx])
    s1 = jnp.where(own_e, v[(ie + 1) % 3], cn.other[jx, rx])
    ke = jnp.where(own_e, je, kx)
    qa, qb = _closest_seg_seg(s0, s1, hv[e[ke, 0]], hv[e[ke, 1]])
    first = jnp.arange(lh + 4) == 0
    p_e = jnp.where(first[:, None], 0.5 * (qa + qb), 0.0)
    dep_e = jnp.where(first, depth_sat, 0.0)
    pos = jnp.where(kind == 3, p_e, jnp.where(kind == 1, p_h, poly))
    depth = jnp.where(kind == 3, dep_e, jnp.where(kind == 1, d_h, d_t))
    ok = jnp.where(kind == 3, first, jnp.where(kind == 1, ok_h, ok_t))
    # nothing clipped (the touching part lies outside the clipped region):
    # one contact between the two supports along the axis, at the axis' depth
    none = ~jnp.any(ok)
    sup = 0.5 * (v[jnp.argmax(jm.mm(v, axis))] + hv[jnp.argmin(jm.mm(hv, axis))])
    pos = jnp.where(none, jnp.where(first[:, None], sup, 0.0), pos)
    depth = jnp.where(none, jnp.where(first, depth_sat, 0.0), depth)
    ok = jnp.where(none, first, ok)
    front = jm.mm(n, h.centre - v[0]) >= 0
    ok = ok & valid & front & ~separated
    return pos, jnp.broadcast_to(axis, pos.shape), depth, ok


def hull_trimesh(h: PlacedHull, tris: Triangles, ncon: int, scale) -> Contact:
    """Hull vs every candidate triangle, reduced to ``ncon`` slots."""
    v = jnp.stack([tris.a, tris.b, tris.c], axis=1)
    pos, n, depth, ok = jax.vmap(lambda *x: hull_triangle(h, *x))(
        v, tris.normal, tris.edge_kind, tris.valid, tris.cones)
    return reduce_contacts(pos.reshape(-1, 3), n.reshape(-1, 3), depth.reshape(-1),
                           ok.reshape(-1), ncon, scale)


def box_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Box (g1) vs mesh (g2): the box's 8-corner hull per triangle; 8 slots."""
    return hull_trimesh(place(box_hull(g1.size), g1.pos, g1.rot), tris, BOX_TRIMESH_NCON,
                        0.5 * jnp.sqrt(jm.sum_terms(g1.size * g1.size)))


def cylinder_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Cylinder (g1) vs mesh (g2): its inscribed 16-gon prism per triangle
    (surface at most r (1 - cos(pi/16)) inside the side); 8 slots."""
    r, ln = g1.size[0], g1.size[1]
    return hull_trimesh(place(prism_hull(r, ln), g1.pos, g1.rot), tris, CYLINDER_TRIMESH_NCON,
                        jnp.sqrt(r * r + 0.25 * ln * ln))


def convex_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles, hull1: Hull) -> Contact:
    """Convex (g1) vs mesh (g2): its hull per triangle; 8 slots."""
    return hull_trimesh(place(hull1, g1.pos, g1.rot), tris, CONVEX_TRIMESH_NCON, g1.size[1])
