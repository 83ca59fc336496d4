"""A triangle mesh on a body (geom 1, "A") against another mesh (geom 2,
"B", static or on a body): ODE's dCollideTTL, by our own method.

Both geoms' ``size`` is ``(mesh index, bounding radius, 0)``; both meshes'
tables are in their geom frames and every step reads the world poses, as
the other mesh pairs (``jaxode.sim.collision.trimesh``).

Candidates. The query box is the intersection of the two geoms' world
AABBs; ``trimesh.gather`` takes the first ``K_B`` triangles of B overlapping
it (B's window and K as for any geom against B) and the first ``K_A``
triangles of A overlapping it grown by ``QUERY_MARGIN`` of A's radius (a
triangle of A sunk below a flat B is outside B's flat box; K_A: the most
distinct triangles of A such a query can reach, at most A's triangle
count, capped by A's ``max_candidates`` or
``jaxode.meshes.DEFAULT_MAX_CANDIDATES``). Triangles beyond either K are counted in ``State.overflow_contacts``. Of the K_A x
K_B triangle pairs, those that can touch (bounding boxes overlapping, A's
grown by ``QUERY_MARGIN``; A's triangle facing B's; A's origin in front of
B's triangle) are compacted and the first ``pair_budget(K_A, K_B)`` =
min(K_A K_B, 2 (K_A + K_B)) of them are tested in full, the rest counted
in ``State.overflow_contacts`` too (static shapes, no data-dependent
loops).

Per triangle pair. Two one-sided surfaces have no volume: two parallel
triangles a millimetre apart never intersect, though the solids behind them
overlap. Each triangle of A is therefore made solid: the prism under it,
from the triangle down along -n_A to the plane through A's geom origin
parallel to it (for a box mesh centred on its origin: down to the centre
plane; at least ``_MIN_THICK`` of A's radius where the plane passes through
or behind the origin, e.g. in a concave part). That prism is a hull against
B's lone triangle: SAT over B's normal (one-sided), the prism's faces and
the edge pairs (``trimesh.triangle_sat``), the axis chosen with ODE's
box-box margins, then face clipping (B's triangle or a prism face as the
reference) or one edge-edge contact. (Hull-trimesh restricts each
triangle's axes by the mesh's normal cones instead, ``trimesh.hull_triangle``;
the prism pair does not use the cones yet.) The
normal points from B into A (ODE's convention), depth > 0 penetration.

One-sidedness. B's triangle is one-sided on A's geom origin: the pair
counts only while A's origin lies in front of B's triangle plane (as
hull-trimesh uses the hull's centre; the prism's own centre would lie
behind B's plane as soon as a box mesh's bottom face sinks into a floor).
A's triangle is one-sided by construction (its solid side is the prism)
and, further, meets only B triangles it faces (n_A . n_B < 0): a triangle
turned away from B has no business touching it, its prism's back and sides
are not A's surface.

Internal edges, both meshes. B's: the axes of B's flat or concave edges
only prove separation; a prism face axis is used only where B's touching
feature is convex (``_allowed``). A's: the prism's back face and the side
faces and edges standing on A's flat or concave edges are not A's surface,
so their axes only prove separation too; a lateral prism edge is a feature
only at a corner both of whose triangle edges are convex. So neither mesh's
seams can make a contact normal: a box mesh sliding on a tiled floor sees
a plane, from both sides of the seams.

Support points. Of a face contact's clipped points, only those at a
convex corner of either mesh, or where convex edges of both cross, and
(with B's triangle the reference) on A's own triangle carry support
(``supports``); the rest are seam crossings strictly between the contact
polygon's outer points, or points of a prism side inside A. Kept, they
made the reduced contacts uneven springs under ODE's soft contacts (a box
mesh on a tiled floor tilted by 1e-4 rad; a stack of two rocked).

Reduction. The budget's 7 candidate contacts per triangle pair are reduced to
``TRIMESH_TRIMESH_NCON`` slots by ``trimesh.reduce_contacts`` (deepest
first, then spread out; duplicates merged at 1e-3 of A's radius).

Approximations: a triangle pair reports nothing once B's triangle is
deeper than A's prism (past A's origin plane: as hull-trimesh, a body
pushed through to its centre falls through); A's prisms stand in for A's
solid, exact for convex A whose interior dihedral angles are 90 degrees or
more (boxes), otherwise their sides may stick out of A by up to their thickness
times the cotangent of the sharpest dihedral angle, where only B's
triangles that A's triangle faces can meet them; depth and normal are not
swap symmetric in general (face-face poses are: the deepest depth is the
same and the normal flips), since A's triangles are the prisms and B's the
one-sided surfaces.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .capsule import _closest_seg_seg
from .convex import _EDGE_ABS, _EDGE_REL, PlacedHull, _face_manifold
from .trimesh import (_BIG, _CONVEX, _FEATURE_REL, Triangles, _triangle_hull, reduce_contacts,
                      triangle_sat)
from .contact import Contact, GeomWorld, Hull, coord_scale, touching
from jaxode.sim import math as jm

TRIMESH_TRIMESH_NCON = 8
#: A's triangles are gathered from the AABB intersection grown by this
#: fraction of A's bounding radius: a triangle of A that has sunk below a
#: flat B lies outside B's (flat) box, so the plain intersection would miss it.
QUERY_MARGIN = 0.25
_MIN_THICK = 0.05  # fraction of A's radius: the thinnest prism

# prism over triangle (0, 1, 2) with its copy (3, 4, 5) shifted by -t n:
# faces top (the triangle, normal n), back (-n), then the side on edge k
# (corner k to k + 1); loops counter-clockwise seen from outside, padded by
# repeating their first vertex
_PRISM_FACES = np.array([[0, 1, 2, 0], [3, 5, 4, 3], [0, 3, 4, 1], [1, 4, 5, 2], [2, 5, 3, 0]])
_PRISM_FACE_SIZE = np.array([3, 3, 4, 4, 4])
# edges: top k (k, k + 1), back k, lateral at corner k; their two faces
_PRISM_EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [0, 3], [1, 4], [2, 5]])
_PRISM_EDGE_FACES = np.array([[0, 2], [0, 3], [0, 4], [1, 2], [1, 3], [1, 4],
                              [4, 2], [2, 3], [3, 4]])
_PRISM_TRIS = np.array([[0, 1, 2], [3, 5, 4], [0, 3, 4], [0, 4, 1], [1, 4, 5], [1, 5, 2],
                        [2, 5, 3], [2, 3, 0]])


def triangle_prism(u, n, thick) -> PlacedHull:
    """The prism under one triangle of A: corners u (3, 3) [m] (world,
    counter-clockwise about the outward unit normal n (3,)) and their copies
    ``thick`` [m] behind, along -n. Five faces (top, back, three sides),
    nine edges (top, back, lateral), as a placed hull."""
    verts = jnp.concatenate([u, u - thick * n])
    side = jnp.cross(u[jnp.array([1, 2, 0])] - u, n)
    side = side / jnp.sqrt(jm.sum_terms(side * side, -1, keepdims=True))
    normals = jnp.concatenate([jnp.stack([n, -n]), side])
    offsets = jnp.concatenate([jnp.stack([jm.mm(n, u[0]), -jm.mm(n, verts[3])]),
                               jm.sum_terms(side * u, -1)])
    centre = jm.sum_terms(verts, 0) / verts.shape[0]
    def i(x):
        return jnp.asarray(x, jnp.int32)

    hull = Hull(verts=verts, normals=normals, offsets=offsets, faces=i(_PRISM_FACES),
                face_size=i(_PRISM_FACE_SIZE), edges=i(_PRISM_EDGES),
                edge_faces=i(_PRISM_EDGE_FACES), tris=i(_PRISM_TRIS), centre=centre,
                nvert=i(6), nface=i(5))
    extent = 0.5 * jm.sum_terms(jnp.max(verts, 0) - jnp.min(verts, 0))
    return PlacedHull(verts=verts, normals=normals, offsets=offsets, centre=centre,
                      extent=extent, hull=hull)


def _allowed(nu, v, edge_kind, corner_kind, tol):
    """Whether B's triangle's part touching along nu (3,) (from the triangle
    into A's prism) is its face or a convex edge or corner. (Hull-trimesh
    replaced this rule by normal cones, ``trimesh.hull_triangle``; the prism
    pair keeps it: its A side has its own masks, ``_prism_masks``.)"""
    proj = jm.mm(v, nu)
    touch = proj >= jnp.max(proj) - tol
    nt = jm.sum_terms(touch)
    edge = (jnp.argmin(touch) + 1) % 3  # the edge opposite the one vertex not touching
    return (nt == 3) | ((nt == 2) & (edge_kind[edge] == _CONVEX)) | (
        (nt == 1) & (corner_kind[jnp.argmax(touch)] == _CONVEX))


def _prism_masks(edge_kind_a):
    """Which of the prism's faces (5,) and edges (9,) are features of A's
    surface, from A's triangle edge kinds (3,): the top face always, a side
    face and a top edge where A's edge is convex, a lateral edge where both
    triangle edges at its corner are convex; never the back."""
    cvx = edge_kind_a == _CONVEX
    faces = jnp.concatenate([jnp.array([True, False]), cvx])
    lateral = cvx & cvx[jnp.array([2, 0, 1])]  # corner k: edges k and k - 1
    edges = jnp.concatenate([cvx, jnp.zeros(3, bool), lateral])
    return faces, edges


def convex_features(q, v, n, edge_kind, corner_kind):
    """Where points q (N, 3) [m] lie on the triangle v (3, 3) (unit normal
    n; barycentric coordinates, projected along n, within ``_FEATURE_REL``
    of zero): (at a convex corner (N,), on a convex edge or corner (N,))."""
    area = jm.mm(jnp.cross(v[1] - v[0], v[2] - v[0]), n)
    d = v[None] - q[:, None]  # (N, 3 corners, 3)
    w = jnp.stack([jm.mm(jnp.cross(d[:, 1], d[:, 2]), n), jm.mm(jnp.cross(d[:, 2], d[:, 0]), n),
                   jm.mm(jnp.cross(d[:, 0], d[:, 1]), n)], -1) / area
    zero = w <= _FEATURE_REL
    nz = jm.sum_terms(zero, -1)
    edge = (jnp.argmax(zero, -1) + 1) % 3  # the zero coordinate j is opposite edge j + 1
    corner = (nz >= 2) & (corner_kind[jnp.argmin(zero, -1)] == _CONVEX)
    return corner, corner | ((nz == 1) & (edge_kind[edge] == _CONVEX))


def supports(q, v, n, kinds, u, n_a, kinds_a):
    """Which points q (N, 3) of a face contact between B's triangle v (unit
    normal n, (edge, corner) kinds) and A's triangle u (n_a, kinds_a) carry
    support: a convex corner of either mesh, or where convex edges of both
    cross. The others are seam crossings (a flat or concave feature of
    either mesh), strictly between the contact polygon's outer points along
    a line or inside it: kept, they would make the reduction's springs
    uneven (a box on a tiled floor would tilt)."""
    corner_b, edge_b = convex_features(q, v, n, *kinds)
    corner_a, edge_a = convex_features(q, u, n_a, *kinds_a)
    return corner_a | corner_b | (edge_a & edge_b)


def prism_triangle(p: PlacedHull, kind_a, corner_a, n_a, v, n, edge_kind, corner_kind, valid,
                   origin):
    """A's prism p (kinds ``kind_a``, ``corner_a`` (3,) of its triangle's
    edges and corners, outward normal n_a) against B's triangle v (3, 3)
    (unit normal n, kinds (3,)): SAT (``trimesh.triangle_sat``) with both
    meshes' internal-edge masks, then face clipping (the points that carry
    support, ``supports``) or one edge contact; one-sided on A's origin
    (3,). Returns (pos (7, 3), normal (7, 3) from B into A, depth (7,)
    [m], valid (7,))."""
    t = _triangle_hull(v, n)
    scale = p.extent + t.extent
    sep_t, sep_f_all, sep_e_all, u = triangle_sat(p, v, n)
    # (resting at depth -> 0 reads a few ulps apart in float32: touching)
    separated = ~touching(-jnp.maximum(jnp.maximum(sep_t, jnp.max(sep_f_all)), jnp.max(sep_e_all)),
                          coord_scale(p.centre, v, scale))[1]
    face_a, edge_a = _prism_masks(kind_a)
    sep_f = jnp.where(face_a, sep_f_all, -_BIG)
    sep_e = jnp.where((edge_kind == _CONVEX)[:, None] & edge_a[None, :], sep_e_all, -_BIG)
    bf = jnp.argmax(sep_f)
    be = jnp.argmax(sep_e.reshape(-1))
    ie, je = be // sep_e.shape[1], be % sep_e.shape[1]
    edge_s = sep_e[ie, je]
    abs_m = _EDGE_ABS * scale
    use_pf = (-sep_f[bf] + abs_m) * _EDGE_REL < -sep_t
    face_s = jnp.where(use_pf, sep_f[bf], sep_t)
    use_edge = (-edge_s + abs_m) * _EDGE_REL < -face_s
    pf_ok = _allowed(-p.normals[bf], v, edge_kind, corner_kind, _FEATURE_REL * scale)
    use_pf = use_pf & ~use_edge & pf_ok
    p_t, d_t, ok_t = _face_manifold(t, 0, p)  # B's triangle as the reference
    p_p, d_p, ok_p = _face_manifold(p, bf, t)  # a prism face as the reference
    e = p.hull.edges
    qa, qb = _closest_seg_seg(v[ie], v[(ie + 1) % 3], p.verts[e[je, 0]], p.verts[e[je, 1]])
    first = jnp.arange(p_t.shape[0]) == 0
    p_e = jnp.where(first[:, None], 0.5 * (qa + qb), 0.0)
    d_e = jnp.where(first, touching(-edge_s, coord_scale(p.centre, v, scale))[0], 0.0)
    normal = jnp.where(use_edge, -u[ie, je], jnp.where(use_pf, -p.normals[bf], n))
    pos = jnp.where(use_edge, p_e, jnp.where(use_pf, p_p, p_t))
    depth = jnp.where(use_edge, d_e, jnp.where(use_pf, d_p, d_t))
    ok = jnp.where(use_edge, first, jnp.where(use_pf, ok_p, ok_t))
    front = jm.mm(n, origin - v[0]) >= 0
    facing = jm.mm(n_a, n) < 0
    # only points on A's own triangle, or on B's under it (A's face the
    # reference), are on A's surface; not those of a prism side standing in
    # for A's inside (a box's side triangle, tilted by 1e-4 rad, has a prism
    # side in its top face)
    on_a = ((use_pf & (bf == 0))
            | (jnp.abs(jm.mm(pos - p.verts[0], n_a)) <= _FEATURE_REL * scale))
    support = use_edge | (on_a & supports(pos, v, n, (edge_kind, corner_kind), p.verts[:3], n_a,
                                          (kind_a, corner_a)))
    ok = ok & valid & front & facing & ~separated & support
    return pos, jnp.broadcast_to(normal, pos.shape), depth, ok


def _corners(tris: Triangles):
    return jnp.stack([tris.a, tris.b, tris.c], axis=1)


def pair_budget(k_a: int, k_b: int) -> int:
    """Triangle pairs given the full test per mesh pair and step: each
    candidate triangle meeting about two of the other mesh's (a face on a
    face), at most all K_A x K_B."""
    return min(k_a * k_b, 2 * (k_a + k_b))


def _maybe(u, tris_a: Triangles, v, tris_b: Triangles, origin, margin):
    """Which triangle pairs (K_A, K_B) can touch: bounding boxes overlapping
    (A's grown by ``margin`` [m], the depth its prisms are looked for at),
    A's triangle facing B's (n_A . n_B < 0), A's origin in front of B's."""
    lo_a, hi_a = jnp.min(u, 1) - margin, jnp.max(u, 1) + margin
    lo_b, hi_b = jnp.min(v, 1), jnp.max(v, 1)
    overlap = jnp.all((lo_a[:, None] <= hi_b[None]) & (lo_b[None] <= hi_a[:, None]), -1)
    facing = jm.mm(tris_a.normal, tris_b.normal.T) < 0
    front = jm.sum_terms(tris_b.normal * (origin - tris_b.a), -1) >= 0
    return overlap & facing & front[None] & tris_a.valid[:, None] & tris_b.valid[None]


def trimesh_trimesh(g1: GeomWorld, g2: GeomWorld, tris_a: Triangles,
                    tris_b: Triangles) -> tuple[Contact, jax.Array]:
    """Mesh A (g1, on a body) vs mesh B (g2): the candidate triangle pairs
    that can touch (``_maybe``), the first ``pair_budget`` of them tested in
    full (A's triangle as its prism, see the module docstring), reduced to 8
    slots; normals from B into A. Returns the contacts and the number of
    possible triangle pairs beyond the budget (int32)."""
    radius = g1.size[1]
    u, v = _corners(tris_a), _corners(tris_b)
    maybe = _maybe(u, tris_a, v, tris_b, g1.pos, QUERY_MARGIN * radius)
    budget = pair_budget(u.shape[0], v.shape[0])
    count = jnp.sum(maybe, dtype=jnp.int32)
    ia, ib = jnp.nonzero(maybe, size=budget, fill_value=0)
    live = jnp.arange(budget) < count
    n_a = tris_a.normal[ia]
    thick = jnp.maximum(jm.sum_terms(n_a * (u[ia, 0] - g1.pos), -1), _MIN_THICK * radius)

    def one(ua, na, t, kind_a, corner_a, vb, nb, ek, ck, ok):
        p = triangle_prism(ua, na, t)
        return prism_triangle(p, kind_a, corner_a, na, vb, nb, ek, ck, ok, g1.pos)

    pos, n, depth, ok = jax.vmap(one)(u[ia], n_a, thick, tris_a.edge_kind[ia],
                                      tris_a.corner_kind[ia], v[ib],
                                      tris_b.normal[ib], tris_b.edge_kind[ib],
                                      tris_b.corner_kind[ib], live)
    c = reduce_contacts(pos.reshape(-1, 3), n.reshape(-1, 3), depth.reshape(-1),
                        ok.reshape(-1), TRIMESH_TRIMESH_NCON, radius)
    return c, jnp.maximum(count - budget, 0).astype(jnp.int32)
