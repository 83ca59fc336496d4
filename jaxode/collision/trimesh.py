"""Shapes against a triangle mesh (ODE's dCreateTriMesh), static or on a body.

A mesh geom is a :class:`~jaxode.collision.types.Mesh` (tables in the geom
frame, built on the host by ``jaxode.trimesh.build_mesh``); its ``size`` is
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
  separating-axis test of the triangle (a flat polygon) against the hull over
  the triangle normal, the hull's face normals and all triangle-edge x
  hull-edge cross products (exact separation and depth), then face clipping
  as hull-hull (the triangle, or the hull's face, as the reference) or one
  edge-edge contact. The triangle normal wins ties, a hull face or edge axis
  must be shallower by ODE's box-box margin.
- one-sided: a sphere (or segment point) whose centre is behind the
  triangle's plane by more than its radius, or a hull whose centre is behind
  the plane, makes no contact with that triangle.

Internal edges. The normal of a contact on an edge or corner of the triangle
depends on that feature's kind (``jaxode.trimesh``): FLAT (shared with a
coplanar neighbour) uses the face normal and the depth along it, exactly the
neighbour's face contact, so nothing catches on the seams of a flat mesh
(for balls only while the centre projects onto the triangle, within 1e-4
r: beyond a flat edge the coplanar neighbour owns the contact, e.g. its
convex edge at a box mesh's ridge); CONCAVE drops the contact (the
neighbour's face is at least as close); CONVEX (a ridge or the mesh's
boundary) keeps its own normal. For hulls the feature is the triangle's part
that touches along the chosen axis; a non-convex one falls back to the
triangle-normal face case. The cross axes of a flat or concave edge (the
triangle's split from its neighbour, not a feature of the surface) only
prove separation: they never become the contact axis, so the hull's face
axis (when its touching feature is allowed), else the triangle normal, takes
over (taken, they made a hull past a box mesh's ridge as deep as under the
face).

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

from . import types as ct
from .capsule import _closest_seg_seg
from .convex import (_EDGE_ABS, _EDGE_REL, PlacedHull, _face_manifold, _normalize, box_hull,
                     closest_on_triangles, place, prism_hull)
from .types import Contact, GeomWorld, Hull, Mesh

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


class Triangles(NamedTuple):
    """K candidate triangles in the world: corners a, b, c (K, 3) [m], unit
    normals (K, 3), edge_kind and corner_kind (K, 3) int (see ``Mesh``),
    valid (K,) bool (invalid rows repeat a real triangle, masked)."""

    a: jax.Array
    b: jax.Array
    c: jax.Array
    normal: jax.Array
    edge_kind: jax.Array
    corner_kind: jax.Array
    valid: jax.Array


# ------------------------------------------------------------ candidates
def bounding_radius(gtype, size):
    """Radius [m] of a ball about the geom origin containing the geom;
    size (..., 3) as ``GeomWorld.size`` (a convex geom's is its size[1])."""
    r, ln = size[..., 0], size[..., 1]
    return jnp.where(gtype == ct.SPHERE, r, jnp.where(
        gtype == ct.BOX, 0.5 * jnp.sqrt(jnp.sum(size * size, -1)), jnp.where(
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
    c_l = rt @ (0.5 * (lo + hi) - g2.pos)
    h_l = jnp.abs(rt) @ (0.5 * (hi - lo))
    o_l = rt @ (centre - g2.pos)
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
    corners = g2.pos + mesh.verts.astype(dt)[mesh.tris[t]] @ g2.rot.T  # (k, 3, 3)
    tris = Triangles(a=corners[:, 0], b=corners[:, 1], c=corners[:, 2],
                     normal=mesh.normals[t].astype(dt) @ g2.rot.T,
                     edge_kind=mesh.edge_kind[t], corner_kind=mesh.corner_kind[t], valid=valid)
    return tris, jnp.maximum(count - cap, 0).astype(jnp.int32)


# ------------------------------------------------------------ reduction
def reduce_contacts(pos, normal, depth, ok, ncon: int, scale) -> Contact:
    """``ncon`` of the candidate contacts (N,): the deepest, then greedily
    the farthest from those kept in position and normal (scaled by
    ``scale`` [m]); candidates within 1e-3 scale of a kept one merge into it.
    Slots ordered deepest first, invalid slots zero."""
    dup2 = (_DUP_REL * scale) ** 2

    def dist2(j):
        return (jnp.sum((pos - pos[j]) ** 2, axis=-1)
                + scale * scale * jnp.sum((normal - normal[j]) ** 2, axis=-1))

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
    area = jnp.sum(jnp.cross(b - a, c - a) * n, -1)
    w = jnp.stack([jnp.sum(jnp.cross(b - q, c - q) * n, -1), jnp.sum(jnp.cross(c - q, a - q) * n, -1),
                   jnp.sum(jnp.cross(a - q, b - q) * n, -1)], -1) / area[:, None]
    return w <= _BARY_TOL


def ball_triangles(tris: Triangles, centre, r):
    """A ball (centre (3,), radius r) against each triangle: (pos (K, 3),
    normal (K, 3) from the mesh into the ball, depth (K,), valid (K,)), with
    the module's one-sided and internal-edge rules."""
    q = closest_on_triangles(centre, tris.a, tris.b, tris.c)
    n = tris.normal
    s = jnp.sum(n * (centre - tris.a), -1)  # signed distance to the triangle's plane
    zero = _bary_zero(q, tris.a, tris.b, tris.c, n)
    nz = jnp.sum(zero, -1)
    # an edge: the zero coordinate j is opposite edge (j + 1) % 3; a corner: the nonzero one
    edge = (jnp.argmax(zero, -1) + 1) % 3
    corner = jnp.argmin(zero, -1)
    kind = jnp.where(nz == 0, _FLAT, jnp.where(
        nz == 1, jnp.take_along_axis(tris.edge_kind, edge[:, None], 1)[:, 0],
        jnp.take_along_axis(tris.corner_kind, corner[:, None], 1)[:, 0]))
    d_vec = centre - q
    d2 = jnp.sum(d_vec * d_vec, -1)
    dist = jnp.sqrt(jnp.where(d2 > 0, d2, 1.0)) * (d2 > 0)
    n_true = _normalize(d_vec, n)
    convex = kind == _CONVEX
    normal = jnp.where(convex[:, None], n_true, n)
    depth = jnp.where(convex, r - dist, r - s)
    touches = dist <= r  # the ball reaches this triangle
    # a face contact (flat feature) only where the centre projects onto the
    # triangle: across a flat edge the coplanar neighbour owns it, and a centre
    # projecting beyond the flat region (a ball beside a box mesh, behind this
    # face's plane) must not get this face's normal and depth r - s > r
    lateral = jnp.sqrt(jnp.sum((centre - s[:, None] * n - q) ** 2, -1))
    face_ok = convex | (lateral <= _FLAT_LAT_REL * r)
    valid = (tris.valid & (kind != _CONCAVE) & touches & (depth >= 0) & face_ok
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
    s0 = jnp.sum(tris.normal * (p0 - tris.a), -1)
    s1 = jnp.sum(tris.normal * (p1 - tris.a), -1)
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
    i = jnp.asarray
    hull = Hull(verts=v, normals=jnp.stack([n, -n]), offsets=jnp.stack([n @ v[0], -(n @ v[0])]),
                faces=i(_TRI_FACES), face_size=i(np.array([3, 3])), edges=i(_TRI_EDGES),
                edge_faces=i(np.zeros((3, 2), np.int64) + [0, 1]), tris=i(_TRI_FACES[:1]),
                centre=jnp.mean(v, 0), nvert=i(3), nface=i(2))
    return PlacedHull(verts=v, normals=hull.normals, offsets=hull.offsets, centre=hull.centre,
                      extent=0.5 * jnp.sum(jnp.max(v, 0) - jnp.min(v, 0)), hull=hull)


def _allowed(nu, v, edge_kind, corner_kind, tol):
    """Whether the triangle's part touching along nu (3,) (from the triangle
    into the hull) is its face or a convex edge or corner."""
    proj = v @ nu
    touch = proj >= jnp.max(proj) - tol
    nt = jnp.sum(touch)
    edge = (jnp.argmin(touch) + 1) % 3  # the edge opposite the one vertex not touching
    return (nt == 3) | ((nt == 2) & (edge_kind[edge] == _CONVEX)) | (
        (nt == 1) & (corner_kind[jnp.argmax(touch)] == _CONVEX))


def triangle_sat(h: PlacedHull, v, n):
    """Separations [m] of hull h and the triangle v (3, 3) (unit normal n)
    along the triangle normal (one-sided: h above the plane), h's face
    normals (F,), and the triangle edge x hull edge axes (3, E) (-BIG where
    parallel), with those unit axes u (3, E, 3) pointing out of h. The
    penetration depth is minus the largest separation."""
    sep_t = jnp.min(h.verts @ n) - n @ v[0]
    sep_f = jnp.min(h.normals @ v.T, axis=1) - h.offsets
    te = v[jnp.array([1, 2, 0])] - v
    e = h.hull.edges
    hp = h.verts[e[:, 0]]
    he = h.verts[e[:, 1]] - hp
    u = jnp.cross(te[:, None, :], he[None, :, :])  # (3, E, 3)
    u2 = jnp.sum(u * u, -1)
    ok = u2 > _PARALLEL2 * jnp.sum(te * te, -1)[:, None] * jnp.sum(he * he, -1)[None]
    u = u / jnp.sqrt(jnp.where(ok, u2, 1.0))[..., None]
    u = jnp.where((jnp.sum(u * (hp - h.centre)[None], -1) < 0)[..., None], -u, u)
    sep_e = (jnp.min(jnp.einsum("iek,jk->iej", u, v), -1)
             - jnp.max(jnp.einsum("iek,vk->iev", u, h.verts), -1))
    return sep_t, sep_f, jnp.where(ok, sep_e, -_BIG), u


def hull_triangle(h: PlacedHull, v, n, edge_kind, corner_kind, valid):
    """Hull h (geom 1) against one triangle (v (3, 3), normal n): SAT over the
    triangle normal, h's faces and all edge pairs (``triangle_sat``), then
    face clipping or one edge contact (module docstring). Returns (pos (N, 3),
    normal (N, 3), depth (N,), valid (N,)), N = h's face loop length + 3."""
    t = _triangle_hull(v, n)
    scale = h.extent + t.extent
    e = h.hull.edges
    sep_t, sep_f, sep_all, u = triangle_sat(h, v, n)
    separated = jnp.maximum(jnp.maximum(sep_t, jnp.max(sep_f)), jnp.max(sep_all)) > 0
    # the axes of a flat or concave edge are no feature of the surface (the
    # triangle's split from its neighbour): they only prove separation
    sep_e = jnp.where((edge_kind == _CONVEX)[:, None], sep_all, -_BIG)
    bf = jnp.argmax(sep_f)
    be = jnp.argmax(sep_e.reshape(-1))
    ie, je = be // sep_e.shape[1], be % sep_e.shape[1]
    edge_s = sep_e[ie, je]
    abs_m = _EDGE_ABS * scale
    use_hf = (-sep_f[bf] + abs_m) * _EDGE_REL < -sep_t
    face_s = jnp.where(use_hf, sep_f[bf], sep_t)
    use_edge = (-edge_s + abs_m) * _EDGE_REL < -face_s
    tol = _FEATURE_REL * scale
    hf_ok = _allowed(-h.normals[bf], v, edge_kind, corner_kind, tol)
    use_hf = use_hf & ~use_edge & hf_ok
    # triangle as the reference face (also the fallback for non-convex features)
    p_t, d_t, ok_t = _face_manifold(t, 0, h)
    # the hull's face as the reference, the triangle clipped against it
    p_h, d_h, ok_h = _face_manifold(h, bf, t)
    # one edge-edge contact
    qa, qb = _closest_seg_seg(v[ie], v[(ie + 1) % 3], h.verts[e[je, 0]], h.verts[e[je, 1]])
    first = jnp.arange(p_t.shape[0]) == 0
    p_e = jnp.where(first[:, None], 0.5 * (qa + qb), 0.0)
    d_e = jnp.where(first, -edge_s, 0.0)
    normal = jnp.where(use_edge, -u[ie, je], jnp.where(use_hf, -h.normals[bf], n))
    pos = jnp.where(use_edge, p_e, jnp.where(use_hf, p_h, p_t))
    depth = jnp.where(use_edge, d_e, jnp.where(use_hf, d_h, d_t))
    ok = jnp.where(use_edge, first, jnp.where(use_hf, ok_h, ok_t))
    front = n @ (h.centre - v[0]) >= 0
    ok = ok & valid & front & ~separated
    return pos, jnp.broadcast_to(normal, pos.shape), depth, ok


def hull_trimesh(h: PlacedHull, tris: Triangles, ncon: int, scale) -> Contact:
    """Hull vs every candidate triangle, reduced to ``ncon`` slots."""
    v = jnp.stack([tris.a, tris.b, tris.c], axis=1)
    pos, n, depth, ok = jax.vmap(lambda *x: hull_triangle(h, *x))(
        v, tris.normal, tris.edge_kind, tris.corner_kind, tris.valid)
    return reduce_contacts(pos.reshape(-1, 3), n.reshape(-1, 3), depth.reshape(-1),
                           ok.reshape(-1), ncon, scale)


def box_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Box (g1) vs mesh (g2): the box's 8-corner hull per triangle; 8 slots."""
    return hull_trimesh(place(box_hull(g1.size), g1.pos, g1.rot), tris, BOX_TRIMESH_NCON,
                        0.5 * jnp.sqrt(jnp.sum(g1.size * g1.size)))


def cylinder_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles) -> Contact:
    """Cylinder (g1) vs mesh (g2): its inscribed 16-gon prism per triangle
    (surface at most r (1 - cos(pi/16)) inside the side); 8 slots."""
    r, ln = g1.size[0], g1.size[1]
    return hull_trimesh(place(prism_hull(r, ln), g1.pos, g1.rot), tris, CYLINDER_TRIMESH_NCON,
                        jnp.sqrt(r * r + 0.25 * ln * ln))


def convex_trimesh(g1: GeomWorld, g2: GeomWorld, tris: Triangles, hull1: Hull) -> Contact:
    """Convex (g1) vs mesh (g2): its hull per triangle; 8 slots."""
    return hull_trimesh(place(hull1, g1.pos, g1.rot), tris, CONVEX_TRIMESH_NCON, g1.size[1])
