"""Box-plane and box-box narrowphase (ODE's dCollideBoxPlane / dBoxBox).

Pure, unbatched functions of one geom pair; they jit, vmap and differentiate
(no Python control flow on traced values, safe norms and divisions, fixed-size
arrays with validity masks). Conventions are those of ``types.py``: normal from
geom 2 into geom 1, depth > 0 penetration, invalid slots hold zeros.

Deviations from ODE (all deliberate, for fixed shapes / smooth batching):
- box_plane keeps the (up to) 4 deepest corners below the plane, deepest
  first, instead of ODE's early-out ordering of the 8 corners.
- box_box: the edge-axis bias is applied as "best edge pen * 1.05 < best face
  pen" (ODE applies fudge_factor sequentially over the 15 axes) and the
  +1e-5 ``fudge2`` is added to |R_ij| for the edge axes only and only for the
  axis choice; the separation test and the reported edge depth are unfudged
  (ODE also tests separation with the fudged values, which can report a
  contact across a gap of ~1e-5 * box size).
- Face case: contact points are the clipped incident-face points (as ODE),
  depth is their distance below the reference face; the reduction to 4
  points is greedy farthest-point (deepest first) rather than cullPoints.
- Contacts are kept when depth >= 0 (touching counts), as ODE's clipper.
"""
from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp

from jaxode.sim import math as jm

from .contact import Contact, GeomWorld, coord_scale, touching

BOX_PLANE_NCON = 4
BOX_BOX_NCON = 4

_CORNER_SIGNS = np.array(
    [[sx, sy, sz] for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)]
)
_FACE_SIGNS = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
_BIG = 1e30
_EDGE_REL = 1.05  # ODE fudge_factor: an edge axis must be 5% better than the best so far
_DUP_TOL2 = 1e-14  # squared distance under which two contact points coincide


def _sgn(x):
    """Sign with sgn(0) = +1 (zero gradient everywhere)."""
    return jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype)


def _finish(pos, normal, depth, valid) -> Contact:
    z = jnp.zeros_like
    return Contact(
        pos=jnp.where(valid[:, None], pos, z(pos)),
        normal=jnp.where(valid[:, None], normal, z(normal)),
        depth=jnp.where(valid, depth, z(depth)),
        valid=valid,
    )


# ----------------------------------------------------------------- box-plane
def box_plane(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Box (g1) against plane (g2): deepest (<= 4) box corners below the plane."""
    dt = g1.pos.dtype
    n = g2.rot[:, 2]
    half = 0.5 * g1.size
    corners = g1.pos + jm.mm(jnp.asarray(_CORNER_SIGNS, dt) * half, g1.rot.T)  # (8,3)
    depth_all = jm.mm(g2.pos, n) - jm.mm(corners, n)
    depth, idx = jm.top_k_small(depth_all, BOX_PLANE_NCON)
    depth, valid = touching(depth, coord_scale(g1.pos, g2.pos, half))
    normal = jnp.broadcast_to(n, (BOX_PLANE_NCON, 3))
    return _finish(corners[idx], normal, depth, valid)


# ------------------------------------------------------------------- box-box
def _safe_normalize(v, eps=1e-12):
    n2 = jm.sq_norm(v)[..., None]
    ok = n2 > eps
    inv = 1.0 / jnp.sqrt(jnp.where(ok, n2, 1.0))
    return jnp.where(ok, v * inv, 0.0), ok[..., 0]


def _rect_quad(loc, e1, e2):
    """The vertices of a convex quad clipped to the rectangle |x| <= e1, |y| <= e2,
    as a fixed candidate set (ODE's intersectRectQuad2 computes the same polygon
    by four Sutherland-Hodgman steps).

    ``loc``: (4,3) the incident face's corners in the reference face's frame,
    in cyclic order (a parallelogram: ``loc[0] + loc[2] = loc[1] + loc[3]``);
    z is their height above the reference face. Returns (16,3) points on the
    incident face and their (16,) validity:

    - its 4 corners that lie in the rectangle;
    - the rectangle's 4 corners that lie in the quad (z from the face's plane);
    - per side line of the rectangle, the quad's edge crossing it inwards and
      the one crossing it outwards, where the crossing lies on the side (a
      crossing needs a strict sign change, as a clip step's).

    Every vertex of the intersection polygon is one of these; a vertex on the
    boundary may come twice (the reduction skips duplicates). Each candidate is
    elementwise arithmetic, where the four clip steps were each a gather and a
    compaction in a loop (14 ms of the 21-box stack's step at 256 worlds;
    in-process A/B, median 73.2 -> 66.9 ms per step with all 16 edge / line
    crossings as candidates, 65.3 -> 63.9 more with two per line;
    bench/RESULTS.md, session 31).
    """
    dt = loc.dtype
    ext = jnp.stack([e1, e2]).astype(dt)
    # the quad's corners in the rectangle
    in_a = (jnp.abs(loc[:, 0]) <= e1) & (jnp.abs(loc[:, 1]) <= e2)
    # the rectangle's corners in the quad: solve corner = o + u a1 + v a2 with
    # o the quad's centre and a1, a2 its half-edge vectors (|u|, |v| <= 1 inside)
    o = 0.5 * (loc[0] + loc[2])
    a1, a2 = 0.5 * (loc[0] - loc[1]), 0.5 * (loc[0] - loc[3])
    det = a1[0] * a2[1] - a1[1] * a2[0]
    det_ok = jnp.abs(det) > 0
    inv = 1.0 / jnp.where(det_ok, det, 1.0)
    rc = jnp.asarray(_FACE_SIGNS, dt) * ext  # (4,2)
    dx, dy = rc[:, 0] - o[0], rc[:, 1] - o[1]
    u = (dx * a2[1] - dy * a2[0]) * inv
    v = (a1[0] * dy - a1[1] * dx) * inv
    in_b = det_ok & (jnp.abs(u) <= 1.0) & (jnp.abs(v) <= 1.0)
    corners = jnp.concatenate([rc, (o[2] + u * a1[2] + v * a2[2])[:, None]], axis=1)
    # the edges' crossings with the side lines s * x[axis] = e (static slices,
    # not an index gather: XLA recomputed the quad inside a gather). A convex
    # quad crosses a line at most twice, entering (f from > 0 to < 0) on one
    # edge and leaving on another: per line, the first edge of each kind.
    p, q = loc, jnp.concatenate([loc[1:], loc[:1]], axis=0)  # edge i: p[i] -> q[i]
    sgn = jnp.asarray([1.0, -1.0, 1.0, -1.0], dt)
    bound = jnp.stack([e1, e1, e2, e2]).astype(dt)

    def lines(v):  # (4,3) -> (edge, line) coordinate across each line
        return jnp.stack([v[:, 0], v[:, 0], v[:, 1], v[:, 1]], axis=1)

    fp = sgn * lines(p) - bound
    fq = sgn * lines(q) - bound

    def crossing(mask):  # (edge, line) -> per line: the point (4,3) and whether any
        f0, f1 = fp[3], fq[3]
        p0, q0 = jnp.broadcast_to(p[3], (4, 3)), jnp.broadcast_to(q[3], (4, 3))
        for i in (2, 1, 0):
            m = mask[i]
            f0, f1 = jnp.where(m, fp[i], f0), jnp.where(m, fq[i], f1)
            p0, q0 = jnp.where(m[:, None], p[i], p0), jnp.where(m[:, None], q[i], q0)
        hit = mask[0] | mask[1] | mask[2] | mask[3]
        t = jnp.where(hit, f0 / jnp.where(hit, f0 - f1, 1.0), 0.0)
        x = p0 + t[:, None] * (q0 - p0)
        # on the side: the other coordinate within the rectangle
        along = jnp.concatenate([jnp.abs(x[:2, 1]) <= e2, jnp.abs(x[2:, 0]) <= e1])
        return x, hit & along

    x_in, in_c = crossing((fp > 0) & (fq < 0))
    x_out, out_c = crossing((fp < 0) & (fq > 0))
    pts = jnp.concatenate([loc, corners, x_in, x_out], axis=0)
    valid = jnp.concatenate([in_a, in_b, in_c, out_c])
    return pts, valid


_TIE_REL = 1e-3  # relative near-tie of squared distances in _reduce's flat mode
#: flat_tol of _reduce for contact sets of our own design (not ODE's, which
#: keep ODE's deepest first): this fraction of the shapes' extent, a tilt of
#: about 1e-3 rad across them, counts as flat
_FLAT_REL = 1e-3


def _reduce(pos, depth, valid, k, flat_tol=None):
    """Pick k of the candidate points: deepest first, then greedily the point
    farthest from those already chosen. Returns indices ordered deepest-first
    and their validity. The k - 1 greedy picks are one ``lax.scan`` body.

    ``flat_tol`` [m] (optional): points within it of the deepest count as
    equally deep, and among those the lowest index comes first (in the pick
    and in the returned order); a greedy pick takes the lowest index among
    the points whose squared distance is within ``_TIE_REL`` of the largest. A face resting flat on more than k points
    (a hexagonal prism on the ground: 6 vertices, 4 slots) then keeps the
    same k contacts from step to step instead of a set chosen by which
    vertex the micro-rocking left deepest; each switch of the support set
    jolted the body and what rests on it by ~2 mm/s (60 PGS iterations)."""
    N = pos.shape[0]
    key = jnp.where(valid, depth, -_BIG)
    if flat_tol is None:
        first = jnp.argmax(key)
    else:
        flat = valid & (key >= jnp.max(key) - flat_tol)
        first = jnp.argmax(flat)
    chosen = jnp.arange(N) == first
    mind = jm.sq_norm(pos - pos[first])

    def pick(carry, _):
        chosen, mind = carry
        cand = valid & ~chosen & (mind > _DUP_TOL2)
        score = jnp.where(cand, mind, -1.0)
        if flat_tol is None:
            j = jnp.argmax(score)
        else:  # near-ties (a regular polygon's vertices) to the lowest index
            j = jnp.argmax(cand & (score >= (1.0 - _TIE_REL) * jnp.max(score)))
        chosen = chosen | (jnp.arange(N) == j)
        mind = jnp.minimum(mind, jm.sq_norm(pos - pos[j]))
        return (chosen, mind), (j, cand[j])

    _, (rest, rest_ok) = jax.lax.scan(pick, (chosen, mind), None, length=k - 1)
    sel = jnp.concatenate([first[None], rest])
    ok = jnp.concatenate([valid[first][None], rest_ok])
    if flat_tol is None:
        _, order = jm.top_k_small(jnp.where(ok, depth[sel], -_BIG), k)
    else:  # the flat ones by index, then the others deepest first, invalid last
        fl = ok & flat[sel]
        group = jnp.where(fl, 0, jnp.where(ok, 1, 2))
        order = jm.lexsort_small((jnp.where(fl, sel.astype(depth.dtype), -depth[sel]), group))
    return sel[order], ok[order]


def box_box(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Box (g1) against box (g2), ODE dBoxBox: 15-axis SAT, face clipping or
    a single edge-edge contact; at most 4 contacts, deepest first."""
    dt = g1.pos.dtype
    K = BOX_BOX_NCON
    p1, p2, R1, R2 = g1.pos, g2.pos, g1.rot, g2.rot
    h1, h2 = 0.5 * g1.size, 0.5 * g2.size
    d = p1 - p2  # box2 -> box1

    # --- separating axis test -------------------------------------------
    af = jnp.concatenate([R1.T, R2.T], axis=0)  # (6,3) face axes (rows)
    pf = (jm.mm(jnp.abs(jm.mm(af, R1)), h1) + jm.mm(jnp.abs(jm.mm(af, R2)), h2)
          - jnp.abs(jm.mm(af, d)))
    cr = jnp.cross(R1.T[:, None, :], R2.T[None, :, :]).reshape(9, 3)
    ue, eok = _safe_normalize(cr)
    ad = jnp.abs(jm.mm(ue, d))
    ue1, ue2 = jnp.abs(jm.mm(ue, R1)), jnp.abs(jm.mm(ue, R2))
    pe = jm.mm(ue1, h1) + jm.mm(ue2, h2) - ad
    # ODE 0.16's dBoxBox compares the edge axes' plain penetrations (no fudge2
    # on |R_ij|: that is Bullet's btBoxBoxDetector; with it jaxode took a face
    # where libode takes a near-tie edge)
    pe_f = jnp.where(eok, pe, _BIG)
    # separation uses the exact edge penetrations (as ODE), so a valid
    # contact never has negative depth
    # (a face resting at depth -> 0 reads a few ulps below 0 in float32: touching)
    scale = coord_scale(p1, p2, h1, h2)
    separated = ~(touching(jnp.min(pf), scale)[1]
                  & touching(jnp.min(jnp.where(eok, pe, _BIG)), scale)[1])
    bf = jnp.argmin(pf)
    # ODE's dBoxBox walks the nine edge axes in order (TST, code 7 + 3 i + j)
    # and takes one when it beats the best so far, face OR earlier edge, by
    # the fudge factor (s2 * fudge_factor > s): a later edge axis needs 5 % less
    # penetration than an earlier one too, not just than the faces (the plain
    # argmin over the edges picked another axis than libode in deep overlaps,
    # 12 of 1,783 random overlapping poses; issue 19; ODE box.cpp TST)
    # (penetrations in the touching band, a few ulps below 0, count as 0: ODE
    # has returned before with any negative one, and 1.05 x a negative number
    # would favour the edges)
    best, be = jnp.maximum(pf[bf], 0.0), jnp.asarray(-1)
    for e in range(9):
        pen = jnp.maximum(pe_f[e], 0.0)
        take = pen * _EDGE_REL < best
        best, be = jnp.where(take, pen, best), jnp.where(take, e, be)
    use_edge = be >= 0
    be = jnp.maximum(be, 0)

    # --- face case: clip incident face against reference face --------------
    u = af[bf]
    n_face = u * _sgn(jm.mm(u, d))  # from box2 into box1
    ref1 = bf < 3
    a = bf % 3
    p_ref, R_ref, h_ref = (jnp.where(ref1, x, y) for x, y in ((p1, p2), (R1, R2), (h1, h2)))
    p_inc, R_inc, h_inc = (jnp.where(ref1, y, x) for x, y in ((p1, p2), (R1, R2), (h1, h2)))
    n_ref = jnp.where(ref1, -n_face, n_face)  # outward normal of reference face
    c_ref = p_ref + n_ref * h_ref[a]
    i1, i2 = (a + 1) % 3, (a + 2) % 3
    t1, t2 = R_ref[:, i1], R_ref[:, i2]
    e1, e2 = h_ref[i1], h_ref[i2]
    proj = jm.mm(n_ref, R_inc)
    b = jnp.argmax(jnp.abs(proj))
    c_inc = p_inc - _sgn(proj[b]) * R_inc[:, b] * h_inc[b]
    b1, b2 = (b + 1) % 3, (b + 2) % 3
    fs = jnp.asarray(_FACE_SIGNS, dt)
    verts = (c_inc + fs[:, :1] * (h_inc[b1] * R_inc[:, b1])
             + fs[:, 1:] * (h_inc[b2] * R_inc[:, b2]))  # (4,3) cyclic
    frame = jnp.stack([t1, t2, n_ref], axis=1)  # world -> ref-local via rel @ frame
    loc = jm.mm(verts - c_ref, frame)
    poly, inrect = _rect_quad(loc, e1, e2)
    fdepth, ftouch = touching(-poly[:, 2], scale)
    fvalid = inrect & ftouch
    # the reduction's distances in the reference frame (the same up to
    # rounding), only the 4 kept points taken to world
    sel, fok = _reduce(poly, fdepth, fvalid, K)
    face_pos = c_ref + jm.mm(poly[sel], frame.T)  # points on the incident face (ODE)
    face_depth = fdepth[sel]

    # --- edge-edge case --------------------------------------------------
    ie, je = be // 3, be % 3
    ue_b = ue[be]
    n_edge = ue_b * _sgn(jm.mm(ue_b, d))
    ua, ub = R1[:, ie], R2[:, je]
    k3 = jnp.arange(3)
    pa = p1 + jm.mm(R1, jnp.where(k3 != ie, -_sgn(jm.mm(n_edge, R1)) * h1, 0.0))
    pb = p2 + jm.mm(R2, jnp.where(k3 != je, _sgn(jm.mm(n_edge, R2)) * h2, 0.0))
    pp = pb - pa
    uaub = jm.mm(ua, ub)
    q1, q2 = jm.mm(ua, pp), -jm.mm(ub, pp)
    den = 1.0 - uaub * uaub
    dok = den > 1e-4
    dens = jnp.where(dok, den, 1.0)
    alpha = jnp.where(dok, (q1 + uaub * q2) / dens, 0.0)
    beta = jnp.where(dok, (uaub * q1 + q2) / dens, 0.0)
    epos = 0.5 * (pa + alpha * ua + pb + beta * ub)
    slot0 = jnp.arange(K) == 0
    # the two cases' results computed once (jm.materialize): the selects below
    # write each contact slot's coordinates, and XLA otherwise recomputed the
    # edge case's closest points inside each of the 12 (stack, 256 worlds:
    # box-box kernels 19.9 -> 17.8 ms per step)
    epos, face_pos, face_depth = jm.materialize((epos, face_pos, face_depth))

    pos = jnp.where(use_edge, jnp.where(slot0[:, None], epos, 0.0), face_pos)
    depth = jnp.where(use_edge, jnp.where(slot0, touching(pe[be], scale)[0], 0.0), face_depth)
    valid = jnp.where(use_edge, slot0, fok) & ~separated
    normal = jnp.broadcast_to(jnp.where(use_edge, n_edge, n_face), (K, 3))
    return _finish(pos, normal, depth, valid)
