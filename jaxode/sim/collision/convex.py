"""Convex hull narrowphase: convex against plane, sphere, box, capsule, cylinder,
convex and heightfield.

A convex geom's shape is a :class:`~jaxode.sim.collision.contact.Hull` (tables in
the geom frame, built on the host by ``jaxode.hull.build_hull``); its
``size`` is ``(hull index, bounding radius, 0)``. Pair functions take the
hull tables of their convex geom(s) as extra arguments after the two geoms
(``fn(g1, g2, hull1)``, ``fn(g1, g2, hull2)`` or ``fn(g1, g2, hull1,
hull2)``: the narrowphase passes geom 1's first). Pure, unbatched, fixed
shapes and iteration counts; padded table rows repeat row 0 (see ``Hull``).

Methods
- convex-plane: the hull's vertices below the plane, the deepest first and
  then spread out (greedy farthest point), at most 4: a hull resting on a
  face is supported at the face's outermost vertices.
- sphere-convex: exact signed distance of the centre. Inside the hull it is
  the largest face-plane distance (that face's normal); outside, the
  distance to the closest point over the hull's triangles (Ericson's
  point-triangle regions). Contact at the closest surface point (at the
  centre when the centre is inside), as ODE's sphere-box.
- capsule-convex: a segment outside the hull: sphere-convex contacts at
  the two segment ends and at the segment point nearest to the hull
  (exact: segment against every hull edge, the two ends against every
  triangle); both ends when both touch (a capsule lying on a face), else
  the single deepest, except that a middle point deeper than both ends by
  1e-3 (r + length / 2) replaces the shallower end (a capsule across an
  edge or corner; capsule-box keeps the ends there). A segment entering
  the hull: the exact penetration, the segment's SAT depth over the hull's
  face normals and the crosses of the axis with the hull's edges, + r,
  with contacts at the ends of the segment clipped to the hull, as
  capsule-box.
- box-, cylinder- and convex-convex: separating-axis test over the face
  normals of both hulls and the cross products of edge pairs that form a
  face of the Minkowski difference (the arcs of the two edges cross on the
  Gauss map; other edge pairs cannot give the minimum), so the penetration
  depth is exact. Edge pairs are ranked by their lines' distance and the
  best 4 re-measured from the hulls' supports (ODE's convex-convex measures
  every axis so): the line distance of nearly parallel edges is mostly
  float32 rounding and once read a resting cube as separated. A face axis (the reference face) wins unless an edge
  axis is shallower by ODE's box-box margin (5 % plus 1e-5 of the sizes);
  then the incident face (the other hull's face most anti-parallel to the
  reference normal) is clipped against the reference face's side planes
  (Sutherland-Hodgman), contacts are the clipped points at or below the
  reference face, on the incident face, at their depth under it (ODE's
  dBoxBox). An edge axis gives one contact midway between the two edges'
  closest points. At most 4 contacts, deepest first then spread out. A box
  is the 8-vertex hull of its corners; a cylinder is approximated by the
  inscribed prism over a regular ``PRISM_SIDES``-gon (16): its surface lies
  at most ``r (1 - cos(pi / 16))`` = 0.019 r inside the cylinder's side.
- convex-heightfield: samples (the vertices, edge midpoints and face
  centroids) against the terrain, as box-heightfield (a box hull samples
  exactly the box's 26 points).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .box import _FLAT_REL, _reduce
from .capsule import _MID_MARGIN, _closest_seg_seg
from .heightfield import _points_contacts
from .contact import Contact, GeomWorld, Hull, coord_scale, touching
from jaxode.sim import math as jm

CONVEX_PLANE_NCON = 4
SPHERE_CONVEX_NCON = 1
CAPSULE_CONVEX_NCON = 2
BOX_CONVEX_NCON = 4
CYLINDER_CONVEX_NCON = 4
CONVEX_CONVEX_NCON = 4
CONVEX_HFIELD_NCON = 4

PRISM_SIDES = 16  # sides of the prism standing in for a cylinder
_BIG = 1e30
_EPS2 = 1e-24  # squared length under which a direction is undefined
_PARALLEL2 = 1e-12  # squared sine under which two edges are parallel (as box-box)
_EDGE_REL = 1.05  # ODE's box-box: an edge axis must be 5 % shallower than the best face
_EDGE_ABS = 1e-5  # ... plus this fraction of the two shapes' summed half extents
_EPS_DIR = 1e-12  # |n . d| under which a segment runs parallel to a face plane (capsule-box)
_EDGE_CANDIDATES = 4  # edge pairs re-measured from the supports (hull_sat)


class PlacedHull(NamedTuple):
    """A hull in the world: verts (V, 3) [m], normals (F, 3), offsets (F,) [m]
    (world planes ``normals @ x <= offsets``), centre (3,) [m] an interior
    point, extent [m] the sum of its local half extents (a size scale), and
    the index tables ``hull``."""

    verts: jax.Array
    normals: jax.Array
    offsets: jax.Array
    centre: jax.Array
    extent: jax.Array
    hull: Hull


def place(hull: Hull, pos, rot) -> PlacedHull:
    """Hull tables moved to the pose (pos [m], rot: columns = geom axes in the world)."""
    dt = pos.dtype
    lv = hull.verts.astype(dt)
    normals = jm.mm(hull.normals.astype(dt), rot.T)
    return PlacedHull(verts=pos + jm.mm(lv, rot.T), normals=normals,
                      offsets=hull.offsets.astype(dt) + jm.mm(normals, pos),
                      centre=pos + jm.mm(rot, hull.centre.astype(dt)),
                      extent=0.5 * jm.sum_terms(jnp.max(lv, axis=0) - jnp.min(lv, axis=0)),
                      hull=hull)


# ------------------------------------------------------------- templates
@functools.lru_cache(maxsize=None)
def _template(kind: str) -> dict:
    """Padded numpy tables of the unit box (corners +-0.5) or the unit prism
    (radius 1, half length 1, PRISM_SIDES sides, a vertex on +x)."""
    from jaxode.build import hull as hull_lib

    if kind == "box":
        s = np.array([-0.5, 0.5])
        pts = np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T
    else:
        ang = 2.0 * np.pi * np.arange(PRISM_SIDES) / PRISM_SIDES
        ring = np.stack([np.cos(ang), np.sin(ang)], axis=1)
        pts = np.concatenate([np.concatenate([ring, np.full((PRISM_SIDES, 1), z)], axis=1)
                              for z in (-1.0, 1.0)])
    tables = hull_lib.pad_hulls([hull_lib.build_hull(pts, f"{kind} template")])
    return {k: v[0] for k, v in tables.items()}


def _scaled_hull(kind: str, scale) -> Hull:
    """The template hull with its vertices scaled per axis by ``scale`` (3,);
    face normals are unchanged by these scalings (axis-aligned box faces;
    the prism's side normals are horizontal and scaled uniformly)."""
    t = _template(kind)
    dt = scale.dtype
    verts = jnp.asarray(t["verts"], dt) * scale
    normals = jnp.asarray(t["normals"], dt)
    first = jnp.asarray(t["faces"][:, 0])
    offsets = jm.sum_terms(normals * verts[first], axis=-1)
    ints = {k: jnp.asarray(t[k]) for k in ("faces", "face_size", "edges", "edge_faces", "tris",
                                            "nvert", "nface")}
    return Hull(verts=verts, normals=normals, offsets=offsets, centre=jnp.zeros(3, dt), **ints)


def box_hull(size) -> Hull:
    """The hull of a box of full side lengths ``size`` (3,) [m], centred."""
    return _scaled_hull("box", size)


def prism_hull(radius, length) -> Hull:
    """The inscribed ``PRISM_SIDES``-gon prism of a cylinder (radius, length
    along local z) [m], centred."""
    r = jnp.asarray(radius)
    return _scaled_hull("prism", jnp.stack([r, r, 0.5 * jnp.asarray(length, r.dtype)]))


# ------------------------------------------------------------ helpers
def _normalize(v, fallback):
    n2 = jm.sum_terms(v * v, axis=-1, keepdims=True)
    ok = n2 > _EPS2
    return jnp.where(ok, v / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


def _safe_div(n, d):
    ok = jnp.abs(d) > 1e-30
    return jnp.where(ok, n / jnp.where(ok, d, 1.0), 0.0)


def _finish(pos, normal, depth, valid) -> Contact:
    return Contact(pos=jnp.where(valid[:, None], pos, 0.0),
                   normal=jnp.where(valid[:, None], normal, 0.0),
                   depth=jnp.where(valid, depth, 0.0), valid=valid)


def closest_on_triangles(p, a, b, c):
    """Closest point to p (3,) on each triangle (a, b, c) (T, 3) [m]: Ericson's
    Voronoi regions (vertex, edge, face), branch-free and division-safe."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = jm.sum_terms(ab * ap, -1), jm.sum_terms(ac * ap, -1)
    bp = p - b
    d3, d4 = jm.sum_terms(ab * bp, -1), jm.sum_terms(ac * bp, -1)
    cp = p - c
    d5, d6 = jm.sum_terms(ab * cp, -1), jm.sum_terms(ac * cp, -1)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    on_ab = a + _safe_div(d1, d1 - d3)[:, None] * ab
    on_ac = a + _safe_div(d2, d2 - d6)[:, None] * ac
    wbc = _safe_div(d4 - d3, (d4 - d3) + (d5 - d6))
    on_bc = b + wbc[:, None] * (c - b)
    den = va + vb + vc
    inner = a + _safe_div(vb, den)[:, None] * ab + _safe_div(vc, den)[:, None] * ac
    q = inner
    q = jnp.where(((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0))[:, None], on_bc, q)
    q = jnp.where(((vb <= 0) & (d2 >= 0) & (d6 <= 0))[:, None], on_ac, q)
    q = jnp.where(((d6 >= 0) & (d5 <= d6))[:, None], c, q)
    q = jnp.where(((vc <= 0) & (d1 >= 0) & (d3 <= 0))[:, None], on_ab, q)
    q = jnp.where(((d3 >= 0) & (d4 <= d3))[:, None], b, q)
    q = jnp.where(((d1 <= 0) & (d2 <= 0))[:, None], a, q)
    return q


def signed_distance(h: PlacedHull, p):
    """Exact signed distance [m] of world point p (3,) to the solid hull
    (negative inside), the closest surface point and the unit outward normal
    there: inside, the nearest face plane; outside, the nearest triangle."""
    plane = jm.mm(h.normals, p) - h.offsets
    k = jnp.argmax(plane)
    inside = plane[k] <= 0
    tris = h.hull.tris
    q_t = closest_on_triangles(p, h.verts[tris[:, 0]], h.verts[tris[:, 1]], h.verts[tris[:, 2]])
    d2 = jm.sum_terms((p - q_t) ** 2, axis=-1)
    j = jnp.argmin(d2)
    ok = d2[j] > _EPS2
    dist = jnp.where(ok, jnp.sqrt(jnp.where(ok, d2[j], 1.0)), 0.0)
    n_out = _normalize(p - q_t[j], h.normals[k])
    sd = jnp.where(inside, plane[k], dist)
    q = jnp.where(inside, p - plane[k] * h.normals[k], q_t[j])
    n = jnp.where(inside, h.normals[k], n_out)
    return sd, q, n


def _ball(h: PlacedHull, c, r):
    """One ball (centre c, radius r) against the hull: (pos, normal from the
    hull into the ball, depth, valid); pos is the closest surface point, or
    the centre when it is inside (ODE's sphere-box)."""
    sd, q, n = signed_distance(h, c)
    depth = r - sd
    return jnp.where(sd <= 0, c, q), n, depth, depth >= 0


# ------------------------------------------------------------ plane, sphere
def convex_plane(g1: GeomWorld, g2: GeomWorld, hull1: Hull) -> Contact:
    """Convex (g1) vs plane half-space (g2): the vertices below the plane,
    deepest first then spread out; 4 slots."""
    h = place(hull1, g1.pos, g1.rot)
    n = g2.rot[:, 2]
    depth, touch = touching(jm.mm(g2.pos, n) - jm.mm(h.verts, n),
                            coord_scale(g1.pos, g2.pos, h.extent))
    ok = (jnp.arange(h.verts.shape[0]) < hull1.nvert) & touch
    sel, sok = _reduce(h.verts, depth, ok, CONVEX_PLANE_NCON, _FLAT_REL * h.extent)
    return _finish(h.verts[sel], jnp.broadcast_to(n, (CONVEX_PLANE_NCON, 3)), depth[sel], sok)


def sphere_convex(g1: GeomWorld, g2: GeomWorld, hull2: Hull) -> Contact:
    """Sphere (g1) vs convex (g2): exact signed distance; 1 slot."""
    pos, n, depth, valid = _ball(place(hull2, g2.pos, g2.rot), g1.pos, g1.size[0])
    return _finish(pos[None], n[None], depth[None], valid[None])


# ------------------------------------------------------------ capsule
def _nearest_on_segment(h: PlacedHull, p0, p1):
    """Point of the segment [p0, p1] nearest to a hull it does not enter:
    the nearest of the segment's closest points to every hull edge and of
    its two ends (nearest to the triangles)."""
    e = h.hull.edges
    ps, qs = jax.vmap(lambda q0, q1: _closest_seg_seg(p0, p1, q0, q1))(h.verts[e[:, 0]],
                                                                       h.verts[e[:, 1]])
    d_edge = jm.sum_terms((ps - qs) ** 2, axis=-1)
    sd0, _, _ = signed_distance(h, p0)
    sd1, _, _ = signed_distance(h, p1)
    cand = jnp.concatenate([ps, p0[None], p1[None]])
    d = jnp.concatenate([d_edge, jnp.stack([sd0 * jnp.abs(sd0), sd1 * jnp.abs(sd1)])])
    return cand[jnp.argmin(d)]


class _SegmentIn(NamedTuple):
    """The capsule's segment against a hull it enters (hull frame, relative
    to the hull's centre): ``inside`` whether the segment meets the open
    solid; ``lo``, ``hi`` the segment parameters [m] of its part in the hull;
    ``normal`` (3,) the unit SAT axis, out of the hull; ``depth`` [m] the
    segment's penetration along it; ``support`` [m] the hull's support
    along it (the depth of a point x is ``support - normal @ x``)."""

    inside: jax.Array
    lo: jax.Array
    hi: jax.Array
    normal: jax.Array
    depth: jax.Array
    support: jax.Array


def _segment_in_hull(hull: Hull, o, d, half) -> _SegmentIn:
    """Segment o + u d, u in [-half, half] (hull frame, o relative to the
    hull's centre, d unit) against the hull: its part inside (clipped by the
    face planes) and its exact penetration by the SAT. The Minkowski sum of
    the hull and the segment is bounded by the hull's face planes and the
    planes through each hull edge along the segment (normals +-(d x e)), so
    the least support overlap over these axes is the exact depth. Axes with
    |d x e| below ``_parallel2`` of |e| are skipped, as ``_edge_pairs``: the
    face they would bound is a sliver whose neighbours' planes pass within
    |e| sin of it. Each overlap is measured from the supports along its unit
    axis, so it is a true overlap whatever the axis's rounding. Padded rows
    repeat row 0 (see ``Hull``): they repeat a real constraint and axis."""
    dt = o.dtype
    cen = hull.centre.astype(dt)
    verts = hull.verts.astype(dt) - cen
    normals = hull.normals.astype(dt)
    # >= 0: o under the plane
    room = hull.offsets.astype(dt) - jm.mm(normals, cen) - jm.mm(normals, o)
    # clipped by each face plane: (normals @ d) u <= room
    nd = jm.mm(normals, d)
    ok = jnp.abs(nd) > _EPS_DIR
    t = room / jnp.where(ok, nd, 1.0)
    lo = jnp.max(jnp.where(ok & (nd < 0), t, -half).clip(-half, half))
    hi = jnp.min(jnp.where(ok & (nd > 0), t, half).clip(-half, half))
    inside = (hi > lo) & jnp.all(ok | (room > 0))
    e = verts[hull.edges[:, 1]] - verts[hull.edges[:, 0]]
    u = jnp.cross(d[None], e)
    u2 = jm.sum_terms(u * u, -1)
    uok = u2 > _parallel2(dt) * jm.sum_terms(e * e, -1)
    u = u / jnp.sqrt(jnp.where(uok, u2, 1.0))[:, None]
    axes = jnp.concatenate([normals, u, -u])
    ax_ok = jnp.concatenate([jnp.ones(normals.shape[0], bool), uok, uok])
    support = jnp.max(jm.mm(axes, verts.T), axis=1)
    ovl = support - jm.mm(axes, o) + half * jnp.abs(jm.mm(axes, d))
    k = jnp.argmin(jnp.where(ax_ok, ovl, jnp.inf))
    return _SegmentIn(inside, lo, hi, axes[k], ovl[k], support[k])


def capsule_convex(g1: GeomWorld, g2: GeomWorld, hull2: Hull) -> Contact:
    """Capsule (g1) vs convex (g2); 2 slots.

    Segment outside the hull: ball contacts at both ends and at the segment
    point nearest to the hull; both ends when both touch (deeper first)
    unless the middle is clearly deeper (then the middle and the deeper
    end), else the single deepest. Segment entering the hull: the exact
    penetration, the segment's SAT depth (``_segment_in_hull``) + r along its
    axis, with contacts at the ends of the segment clipped to the hull
    (deeper first, the deepest at least the SAT depth; the second while the
    clipped part is longer than ``_MID_MARGIN (r + length / 2)``), as
    capsule_box (jaxode.sim.collision.capsule), which it equals on a box's
    hull."""
    h = place(hull2, g2.pos, g2.rot)
    c, a, half, r = g1.pos, g1.rot[:, 2], 0.5 * g1.size[1], g1.size[0]
    p0, p1 = c - half * a, c + half * a
    pmid = _nearest_on_segment(h, p0, p1)
    e0, e1, em = _ball(h, p0, r), _ball(h, p1, r), _ball(h, pmid, r)
    first0 = e0[2] >= e1[2]
    first = [jnp.where(first0, x, y) for x, y in zip(e0, e1)]
    second = [jnp.where(first0, y, x) for x, y in zip(e0, e1)]
    both = first[3] & second[3]
    single = [jnp.where(em[2] > first[2], m, f) for m, f in zip(em, first)]
    # both ends touch but the middle is clearly deeper (a capsule across a
    # hull's edge or corner): the middle and the deeper end; lying flat, the ends
    mid = both & (em[2] > first[2] + _MID_MARGIN * (r + half))
    slot0 = [jnp.where(mid, m, jnp.where(both, f, s)) for m, f, s in zip(em, first, single)]
    slot1 = [jnp.where(mid, f, s) for f, s in zip(first, second)][:3] + [both]

    # the segment itself in the hull: a ball at one segment point would
    # under-report the penetration (the rest of the segment stays inside)
    rot = g2.rot
    o = jm.mm(rot.T, c - g2.pos) - hull2.centre.astype(c.dtype)
    d = jm.mm(rot.T, a)
    s = _segment_in_hull(hull2, o, d, half)
    n_w = jm.mm(rot, s.normal)
    ends = [jnp.minimum(s.lo, s.hi), jnp.maximum(s.lo, s.hi)]
    din = [s.support + r - jm.mm(s.normal, o + ui * d) for ui in ends]
    lo_first = din[0] >= din[1]
    u_sorted = [jnp.where(lo_first, ends[0], ends[1]), jnp.where(lo_first, ends[1], ends[0])]
    # the deepest is at least the SAT depth (the segment's extreme along the
    # axis may lie outside the hull, beyond the clipped part)
    d0 = jnp.maximum(jnp.maximum(din[0], din[1]), s.depth + r)
    d1 = jnp.minimum(din[0], din[1])
    two_in = (ends[1] - ends[0]) > _MID_MARGIN * (r + half)
    in0 = [c + a * u_sorted[0], n_w, d0, jnp.asarray(True)]
    in1 = [c + a * u_sorted[1], n_w, d1, two_in]
    slot0 = [jnp.where(s.inside, x, y) for x, y in zip(in0, slot0)]
    slot1 = [jnp.where(s.inside, x, y) for x, y in zip(in1, slot1)]
    pos, n, depth, valid = (jnp.stack([x, y]) for x, y in zip(slot0, slot1))
    return _finish(pos, n, depth, valid)


# ------------------------------------------------------------ hull-hull
def _clip_plane(pts, cnt, m, e):
    """One Sutherland-Hodgman step: keep pts @ m <= e. pts (N, 3) holds a
    convex polygon's ``cnt`` vertices, compacted at the front in cyclic
    order; returns the clipped polygon in the same format."""
    n = pts.shape[0]
    idx = jnp.arange(n)
    valid = idx < cnt
    nxt = jnp.where(idx + 1 < cnt, idx + 1, 0)
    q = pts[nxt]
    f = jm.mm(pts, m) - e
    fq = f[nxt]
    inside = valid & (f <= 0)
    cross = valid & (((f < 0) & (fq > 0)) | ((f > 0) & (fq < 0)))
    t = jnp.where(cross, f / jnp.where(cross, f - fq, 1.0), 0.0)
    ip = pts + t[:, None] * (q - pts)
    cand = jnp.stack([pts, ip], axis=1).reshape(2 * n, 3)
    keep = jnp.stack([inside, cross], axis=1).reshape(2 * n)
    tgt = jnp.where(keep, jnp.cumsum(keep) - 1, n)
    out = jnp.zeros_like(pts).at[tgt].set(cand, mode="drop")
    return out, jnp.minimum(jnp.sum(keep, dtype=cnt.dtype), n).astype(cnt.dtype)


def _face_manifold(ref: PlacedHull, fr, inc: PlacedHull):
    """Face ``fr`` of ``ref`` as the reference face: the other hull's face most
    anti-parallel to it, clipped against its side planes. Returns the clipped
    points (N, 3) (on the incident face), their depths below the reference
    plane (N,) and validity (N,), N = L_inc + L_ref."""
    n, off = ref.normals[fr], ref.offsets[fr]
    fi = jnp.argmin(jm.mm(inc.normals, n))
    li, lr = inc.hull.faces.shape[1], ref.hull.faces.shape[1]
    rv = ref.verts[ref.hull.faces[fr]]
    nr = ref.hull.face_size[fr]
    poly = jnp.concatenate([inc.verts[inc.hull.faces[fi]], jnp.zeros((lr, 3), n.dtype)])
    cnt = inc.hull.face_size[fi]

    def body(k, carry):
        v0 = rv[k]
        v1 = rv[jnp.where(k + 1 < nr, k + 1, 0)]
        m = jnp.cross(v1 - v0, n)  # outward side normal (the loop runs counter-clockwise)
        clipped = _clip_plane(carry[0], carry[1], m, jm.mm(m, v0))
        return tuple(jnp.where(k < nr, x, y) for x, y in zip(clipped, carry))

    poly, cnt = jax.lax.fori_loop(0, lr, body, (poly, cnt))
    depth, touch = touching(off - jm.mm(poly, n), _scale(ref, inc))
    return poly, depth, (jnp.arange(li + lr) < cnt) & touch


def _scale(a: PlacedHull, b: PlacedHull):
    """Coordinate scale [m] of two placed hulls for ``touching``."""
    return coord_scale(a.centre, b.centre, a.extent, b.extent)


def _edge_pairs(a: PlacedHull, b: PlacedHull):
    """Separations [m] (EA, EB) along the cross products of all edge pairs,
    the axis pointing out of hull a; -BIG where the pair forms no face of
    the Minkowski difference (their Gauss-map arcs do not cross) or the
    edges are (nearly) parallel. The separation is the distance of the two
    edges' lines along u = da x db: exact for a Minkowski face, but its
    rounding grows as 1 / |sin(da, db)|; ``hull_sat`` therefore re-measures
    its best candidates from the hulls' supports. u is formed explicitly
    (|da|^2 |db|^2 - (da . db)^2 cancels to noise of eps |da|^2 |db|^2, so
    near-parallel edges looked crossed in float32) and the points are taken
    relative to a's centre (world coordinates of 1 m add eps * 1 m)."""
    ea, eb = a.hull.edges, b.hull.edges
    pa, pb = a.verts[ea[:, 0]] - a.centre, b.verts[eb[:, 0]] - a.centre
    da, db = a.verts[ea[:, 1]] - a.verts[ea[:, 0]], b.verts[eb[:, 1]] - b.verts[eb[:, 0]]
    na, nb = a.normals[a.hull.edge_faces], -b.normals[b.hull.edge_faces]  # (E, 2, 3)
    bxa = jnp.cross(na[:, 1], na[:, 0])
    dxc = jnp.cross(nb[:, 1], nb[:, 0])
    cba = jm.mm(bxa, nb[:, 0].T)  # (EA, EB)
    dba = jm.mm(bxa, nb[:, 1].T)
    adc = jm.mm(na[:, 0], dxc.T)
    bdc = jm.mm(na[:, 1], dxc.T)
    minkowski = (cba * dba < 0) & (adc * bdc < 0) & (cba * bdc > 0)
    u = jnp.cross(da[:, None], db[None])  # (EA, EB, 3)
    u2 = jm.sum_terms(u * u, -1)
    la2, lb2 = jm.sum_terms(da * da, -1)[:, None], jm.sum_terms(db * db, -1)[None]
    ok = minkowski & (u2 > _parallel2(u2.dtype) * la2 * lb2)
    uw = jm.sum_terms(u * (pb[None] - pa[:, None]), -1)
    out = jm.sum_terms(u * pa[:, None], -1)  # u . (pa - centre): > 0 when u points out of a
    sep = jnp.where(out < 0, -uw, uw) / jnp.sqrt(jnp.where(ok, u2, 1.0))
    return jnp.where(ok, sep, -_BIG)


def _parallel2(dtype):
    """Squared sine under which two edges count as parallel: ``_PARALLEL2``,
    or in a coarse dtype 64 eps (float32: sin < 2.8e-3), below which the
    direction of da x db is mostly rounding (the vertices carry eps * |world
    position| each). A pair skipped there is a sliver face of the Minkowski
    difference whose plane the neighbouring face planes pass within
    |edge| * sin of; the depth can only come out that much deeper."""
    return max(_PARALLEL2, 64.0 * float(jnp.finfo(dtype).eps))


def _edge_axis(a: PlacedHull, b: PlacedHull, i, j):
    """Unit cross product of edge i of a and edge j of b, pointing out of a."""
    ea, eb = a.hull.edges[i], b.hull.edges[j]
    pa = a.verts[ea[0]]
    u = _normalize(jnp.cross(a.verts[ea[1]] - pa, b.verts[eb[1]] - b.verts[eb[0]]),
                   jnp.zeros_like(pa))
    return jnp.where(jm.mm(u, pa - a.centre) < 0, -u, u)


class Sat(NamedTuple):
    """Result of the separating-axis test of two hulls.

    sep_f (FA + FB,) separations [m] along a's then b's face normals; bf the
    best face; sep_e (EA, EB) along the Minkowski edge pairs (-BIG: not one),
    as line distances; ie, je the best edge pair (by its separation from the
    supports);
    depth [m] the penetration depth (minus the largest separation; < 0:
    separated); normal (3,) the best axis as a contact normal, from b into a;
    use_edge: an edge pair rather than a face is the contact feature."""

    sep_f: jax.Array
    bf: jax.Array
    sep_e: jax.Array
    ie: jax.Array
    je: jax.Array
    depth: jax.Array
    normal: jax.Array
    use_edge: jax.Array


def hull_sat(a: PlacedHull, b: PlacedHull) -> Sat:
    """Separating-axis test of hull a (geom 1) and hull b (geom 2) over the
    face normals of both and the Minkowski edge pairs: the exact penetration
    depth and its axis. Faces win unless an edge pair is shallower by ODE's
    box-box margin (5 % and 1e-5 of the summed half extents)."""
    sep_a = jnp.min(jm.mm(a.normals, b.verts.T), axis=1) - a.offsets  # b against a's face planes
    sep_b = jnp.min(jm.mm(b.normals, a.verts.T), axis=1) - b.offsets
    sep_f = jnp.concatenate([sep_a, sep_b])
    bf = jnp.argmax(sep_f)
    sep_e = _edge_pairs(a, b)
    # the best few edge pairs re-measured along their unit axes from the
    # hulls' supports (as ODE's convex-convex measures every axis): a
    # separation so measured is a true one whatever the axis's rounding, so
    # a rounding-inflated line distance cannot report overlapping hulls as
    # separated (a cube resting on a prism lost its contact for a step)
    ne = sep_e.shape[1]
    cand, be = jax.lax.top_k(sep_e.reshape(-1), min(_EDGE_CANDIDATES, sep_e.size))
    axes = jax.vmap(lambda i, j: _edge_axis(a, b, i, j))(be // ne, be % ne)  # (K, 3)
    sup = jnp.min(jm.mm(axes, b.verts.T), axis=1) - jnp.max(jm.mm(axes, a.verts.T), axis=1)
    sup = jnp.where(cand > -0.5 * _BIG, sup, -_BIG)
    k = jnp.argmax(sup)
    ie, je = be[k] // ne, be[k] % ne
    face_s, edge_s = sep_f[bf], sup[k]
    use_edge = (-edge_s + _EDGE_ABS * (a.extent + b.extent)) * _EDGE_REL < -face_s
    all_normals = jnp.concatenate([-a.normals, b.normals])  # face normals from b into a
    normal = jnp.where(use_edge, -axes[k], all_normals[bf])  # the chosen pair's axis
    depth = -jnp.maximum(face_s, edge_s)
    return Sat(sep_f, bf, sep_e, ie, je, depth, normal, use_edge)


def hull_hull(a: PlacedHull, b: PlacedHull, ncon: int) -> Contact:
    """Hull a (geom 1) vs hull b (geom 2): ``hull_sat``, then face clipping or
    one edge-edge contact (see the module docstring); ``ncon`` slots, normals
    from b into a."""
    fa, fb = a.normals.shape[0], b.normals.shape[0]
    sat = hull_sat(a, b)
    sat_depth, touch = touching(sat.depth, _scale(a, b))  # resting at depth -> 0 in float32
    separated = ~touch
    # face case: the reference face on a or on b
    ref_a = sat.bf < fa
    pos_a, dep_a, ok_a = _face_manifold(a, jnp.minimum(sat.bf, fa - 1), b)
    pos_b, dep_b, ok_b = _face_manifold(b, jnp.clip(sat.bf - fa, 0, fb - 1), a)
    fpos = jnp.where(ref_a, pos_a, pos_b)
    fdep = jnp.where(ref_a, dep_a, dep_b)
    fok = jnp.where(ref_a, ok_a, ok_b)
    sel, sok = _reduce(fpos, fdep, fok, ncon, _FLAT_REL * (a.extent + b.extent))
    face_pos, face_dep = fpos[sel], fdep[sel]
    # nothing clipped (round-off at a grazing face): one contact between the supports
    n = sat.normal
    none = ~jnp.any(fok)
    sup = 0.5 * (a.verts[jnp.argmin(jm.mm(a.verts, n))] + b.verts[jnp.argmax(jm.mm(b.verts, n))])
    first = jnp.arange(ncon) == 0
    face_pos = jnp.where(none, jnp.where(first[:, None], sup, 0.0), face_pos)
    face_dep = jnp.where(none, jnp.where(first, sat_depth, 0.0), face_dep)
    sok = jnp.where(none, first, sok)
    # edge case: midway between the two edges' closest points
    ea, eb = a.hull.edges[sat.ie], b.hull.edges[sat.je]
    qa, qb = _closest_seg_seg(a.verts[ea[0]], a.verts[ea[1]], b.verts[eb[0]], b.verts[eb[1]])
    edge_pos = jnp.where(first[:, None], 0.5 * (qa + qb), 0.0)

    pos = jnp.where(sat.use_edge, edge_pos, face_pos)
    depth = jnp.where(sat.use_edge, jnp.where(first, sat_depth, 0.0), face_dep)
    valid = jnp.where(sat.use_edge, first, sok) & ~separated
    return _finish(pos, jnp.broadcast_to(n, (ncon, 3)), depth, valid)


def convex_convex(g1: GeomWorld, g2: GeomWorld, hull1: Hull, hull2: Hull) -> Contact:
    """Convex (g1) vs convex (g2): ``hull_hull``; 4 slots."""
    return hull_hull(place(hull1, g1.pos, g1.rot), place(hull2, g2.pos, g2.rot),
                     CONVEX_CONVEX_NCON)


def box_convex(g1: GeomWorld, g2: GeomWorld, hull2: Hull) -> Contact:
    """Box (g1) vs convex (g2): the box's 8-corner hull through ``hull_hull``; 4 slots."""
    return hull_hull(place(box_hull(g1.size), g1.pos, g1.rot), place(hull2, g2.pos, g2.rot),
                     BOX_CONVEX_NCON)


def cylinder_convex(g1: GeomWorld, g2: GeomWorld, hull2: Hull) -> Contact:
    """Cylinder (g1) vs convex (g2): the cylinder as its inscribed 16-gon prism
    through ``hull_hull`` (depth at most r (1 - cos(pi/16)) short); 4 slots."""
    return hull_hull(place(prism_hull(g1.size[0], g1.size[1]), g1.pos, g1.rot),
                     place(hull2, g2.pos, g2.rot), CYLINDER_CONVEX_NCON)


# ------------------------------------------------------------ heightfield
def convex_heightfield(g1: GeomWorld, g2: GeomWorld, hull1: Hull, heights, dims) -> Contact:
    """Convex (g1) on the terrain (g2): its vertices, edge midpoints and face
    centroids sampled against the triangles below them (see
    ``jaxode.sim.collision.heightfield``); 4 slots."""
    h = place(hull1, g1.pos, g1.rot)
    mids = 0.5 * (h.verts[hull1.edges[:, 0]] + h.verts[hull1.edges[:, 1]])
    inloop = jnp.arange(hull1.faces.shape[1])[None] < hull1.face_size[:, None]
    loops = h.verts[hull1.faces]  # (F, L, 3)
    centroids = (jm.sum_terms(jnp.where(inloop[..., None], loops, 0.0), axis=1)
                 / hull1.face_size[:, None].astype(h.verts.dtype))
    pts = jnp.concatenate([h.verts, mids, centroids])
    return _points_contacts(pts, heights, dims, g2, CONVEX_HFIELD_NCON)

