"""Capsule narrowphase: capsule-plane, -sphere, -capsule, -box (ODE semantics).

Capsule size is ``(r, length, 0)``: a segment of ``length`` along the local z
axis (``rot[:, 2]``) centred at ``pos``, swept by a sphere of radius r.
Pure, unbatched, jit/vmap friendly, NaN-free in values and gradients.
"""
from __future__ import annotations

import jax.numpy as jnp

from .box import BOX_BOX_NCON, box_box
from .sphere import _pack, _safe_norm_dir, sphere_box_core, sphere_sphere_core
from .contact import Contact, GeomWorld, coord_scale, touching
from jaxode.sim import math as jm

CAPSULE_PLANE_NCON = 2
CAPSULE_SPHERE_NCON = 1
CAPSULE_CAPSULE_NCON = 2
CAPSULE_BOX_NCON = BOX_BOX_NCON  # 2 sphere-box slots, or box-box's with the segment inside

# ODE dCollideCapsuleCapsule: axes treated as parallel when 1 - (a1.a2)^2 < tol.
_PARALLEL_TOL = 1e-5
_DIV_EPS = 1e-12
_MID_MARGIN = 1e-3  # relative depth (of r + length / 2) by which the middle must beat the ends
# ODE dCollideCapsuleBox: the segment counts as inside the box when its closest
# points to the box are nearer than this [m] (dSINGLE 1e-6, double 1e-15)
_INSIDE_DIST = {4: 1e-6, 8: 1e-15}


def _safe_div(n, d):
    ok = jnp.abs(d) > _DIV_EPS
    return jnp.where(ok, n / jnp.where(ok, d, 1.0), 0.0)


def _seg(g: GeomWorld):
    """(centre, unit axis, half length, radius)."""
    return g.pos, g.rot[:, 2], 0.5 * g.size[1], g.size[0]


def _closest_on_seg(p, c, a, h):
    """Closest point to p on the segment c + s*a, s in [-h, h]."""
    s = jnp.clip(jm.mm(p - c, a), -h, h)
    return c + s * a


def capsule_plane(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Capsule (g1) vs plane half-space (g2). 2 slots, deeper end first."""
    c, a, h, r = _seg(g1)
    n = g2.rot[:, 2]
    # ODE: sign = (n.a > 0) ? -1 : 1  -> the lower end cap comes first.
    sign = jnp.where(jm.mm(n, a) > 0, -1.0, 1.0)
    ends = [c + a * (h * sign), c - a * (h * sign)]
    scale = coord_scale(c, g2.pos, h + r)
    depths, touch = zip(*(touching(r - jm.mm(n, e - g2.pos), scale) for e in ends))
    pos = [e - n * r for e in ends]
    v0 = touch[0]
    v1 = v0 & touch[1]
    return _pack(pos, [n, n], depths, [v0, v1])


def capsule_sphere(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Capsule (g1) vs sphere (g2). 1 slot.

    ODE's dCollideCapsuleSphere: the sphere against the ball of radius r at
    the segment point closest to its centre. One departure: with the centre
    ON the segment (closer than 1e-6 m), ODE's dCollideSpheres gives the
    normal (1, 0, 0), which does not separate the pair when the segment runs
    along x; we use the capsule's local x axis ``rot[:, 0]`` (perpendicular
    to the segment, turning with the capsule), with ODE's depth r1 + r2, so
    that pushing the capsule by the depth along the normal separates them."""
    c, a, h, r = _seg(g1)
    p = _closest_on_seg(g2.pos, c, a, h)
    pp, n, d, v = sphere_sphere_core(p, r, g2.pos, g2.size[0], fallback=g1.rot[:, 0])
    return _pack([pp], [n], [d], [v])


def _closest_seg_seg(p1, q1, p2, q2):
    """Closest points between segments [p1,q1], [p2,q2] (Ericson 5.1.9), safe."""
    d1, d2, rr = q1 - p1, q2 - p2, p1 - p2
    a, e, f = jm.mm(d1, d1), jm.mm(d2, d2), jm.mm(d2, rr)
    c, b = jm.mm(d1, rr), jm.mm(d1, d2)
    denom = a * e - b * b
    s = jnp.where(denom > _DIV_EPS * (1.0 + a * e),
                  jnp.clip(_safe_div(b * f - c * e, denom), 0.0, 1.0), 0.0)
    t = _safe_div(b * s + f, e)
    s = jnp.where(t < 0, jnp.clip(_safe_div(-c, a), 0.0, 1.0),
                  jnp.where(t > 1, jnp.clip(_safe_div(b - c, a), 0.0, 1.0), s))
    t = jnp.clip(t, 0.0, 1.0)
    return p1 + d1 * s, p2 + d2 * t


def capsule_capsule(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Capsule (g1) vs capsule (g2). 2 slots.

    (Nearly) parallel axes with overlapping projections: 2 contacts at the ends
    of the overlap interval (falls back to one at its middle when one of those
    misses), else 1 contact between the closest segment points. Where the
    segments touch (closest points closer than 1e-6 m) the normal is
    ``a1 x a2`` normalised (capsule 1's local x axis when parallel), with
    depth r1 + r2, instead of ODE's (1, 0, 0), which need not separate.
    """
    c1, a1, h1, r1 = _seg(g1)
    c2, a2, h2, r2 = _seg(g2)
    a1a2 = jm.mm(a1, a2)
    parallel = (1.0 - a1a2 * a1a2) < _PARALLEL_TOL
    # projections of segment 2's ends on axis 1 (relative to c1)
    k = jm.mm(a1, c2 - c1)
    ext = jnp.abs(a1a2) * h2
    lo = jnp.maximum(-h1, k - ext)
    hi = jnp.minimum(h1, k + ext)
    overlap = parallel & (lo <= hi)

    # normal where the segments touch (coincident closest points): perpendicular
    # to both axes (capsule 1's local x when parallel), not ODE's (1, 0, 0)
    _, touch_n, _ = _safe_norm_dir(jnp.cross(a1, a2), g1.rot[:, 0])

    def pair_at(alpha):
        s1 = c1 + a1 * alpha
        s2 = _closest_on_seg(s1, c2, a2, h2)
        return sphere_sphere_core(s1, r1, s2, r2, fallback=touch_n)

    clo, chi, cmid = pair_at(lo), pair_at(hi), pair_at(0.5 * (lo + hi))
    two = overlap & (lo < hi) & clo[3] & chi[3]
    # general case: closest points between the segments
    s1, s2 = _closest_seg_seg(c1 - a1 * h1, c1 + a1 * h1, c2 - a2 * h2, c2 + a2 * h2)
    cgen = sphere_sphere_core(s1, r1, s2, r2, fallback=touch_n)

    slot0 = [jnp.where(two, x, jnp.where(overlap, y, z)) for x, y, z in zip(clo, cmid, cgen)]
    slot1 = list(chi[:3]) + [two]
    return _pack(*[[u, w] for u, w in zip(slot0, slot1)])


def capsule_box(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Capsule (g1) vs box (g2). 2 slots.

    Segment outside the box: sphere(r)-box contacts at both end points and at
    the segment point closest to the box (exact: zero of the piecewise-linear
    derivative of the squared distance). Both end contacts are kept when both
    penetrate (deeper first), unless the middle is deeper than both by
    ``_MID_MARGIN (r + length / 2)`` (a capsule lying across a box's edge or a
    beam narrower than it): then the middle and the deeper end; otherwise the
    single deepest candidate (ODE keeps one contact, the closest points).

    Segment inside the box (its distance to the box below ``_INSIDE_DIST``, as
    ODE 0.16 ``dCollideCapsuleBox``, capsule.cpp: ``dClosestLineBoxPoints``
    then ``dCalcPointsDistance3(pl, pb) < mindist``): the closest points give
    no normal, and ODE collides the capsule's bounding box (sides 2r, 2r,
    length + 2r, the capsule's frame) with the box by ``dBoxBox``, one normal
    for every contact; so does jaxode (:func:`box.box_box`, up to
    ``BOX_BOX_NCON`` contacts). A ball at the segment point instead (one
    contact) let a capsule pushed into a box pivot about that point while the
    box-box patch holds it (fuzz world 14:2:417, issue 19).
    """
    c, a, h, r = _seg(g1)
    crot = g1.rot
    bpos, brot, bsize = g2.pos, g2.rot, g2.size
    half = 0.5 * bsize

    # Segment point closest to the box: f(u) = dist^2(c + u a, box) is convex and
    # piecewise quadratic in u, so f' is piecewise linear and nondecreasing with
    # kinks where a local coordinate crosses a face plane; locate its zero exactly.
    o = jm.mm(brot.T, c - bpos)
    d = jm.mm(brot.T, a)
    kinks = jnp.concatenate([_safe_div(half - o, d), _safe_div(-half - o, d)])
    kinks = jnp.where(jnp.abs(jnp.concatenate([d, d])) > _DIV_EPS, kinks, -h)
    u = jnp.sort(jnp.concatenate([jnp.clip(kinks, -h, h), jnp.stack([-h, h])]))

    def dfdu(ui):
        x = o + ui * d
        return jm.mm(x - jnp.clip(x, -half, half), d)

    g = jnp.stack([dfdu(ui) for ui in u])
    pos_g = g >= 0
    i = jnp.clip(jnp.argmax(pos_g), 1, u.shape[0] - 1)
    u0, u1, g0, g1 = u[i - 1], u[i], g[i - 1], g[i]
    u_star = jnp.clip(u0 - _safe_div(g0 * (u1 - u0), g1 - g0), u0, u1)
    u_star = jnp.where(pos_g[0], -h, jnp.where(jnp.any(pos_g), u_star, h))
    p = c + a * u_star

    ea, eb = c + a * h, c - a * h
    ca = sphere_box_core(ea, r, bpos, brot, bsize)
    cb = sphere_box_core(eb, r, bpos, brot, bsize)
    cm = sphere_box_core(p, r, bpos, brot, bsize)
    both = ca[3] & cb[3]
    a_first = ca[2] >= cb[2]
    first = [jnp.where(a_first, x, y) for x, y in zip(ca, cb)]
    second = [jnp.where(a_first, y, x) for x, y in zip(ca, cb)]
    # single deepest of the three candidates (invalid ones have depth < 0)
    best_end = first
    use_mid = cm[2] > best_end[2]
    single = [jnp.where(use_mid, m, e) for m, e in zip(cm, best_end)]
    mid = both & (cm[2] > first[2] + _MID_MARGIN * (r + h))
    slot0 = [jnp.where(mid, m, jnp.where(both, f, s)) for m, f, s in zip(cm, first, single)]
    slot1 = [jnp.where(mid, f, s) for f, s in zip(first, second)][:3] + [both]
    outside = _pack(*[[u, w] for u, w in zip(slot0, slot1)])
    pad = CAPSULE_BOX_NCON - 2
    outside = Contact(*[jnp.concatenate([x, jnp.zeros((pad,) + x.shape[1:], x.dtype)])
                        for x in outside])

    x = o + u_star * d  # the segment's closest point, box frame
    gap2 = jm.sum_terms((x - jnp.clip(x, -half, half)) ** 2)
    eps = _INSIDE_DIST[jnp.finfo(c.dtype).bits // 8]
    inside = gap2 < eps * eps
    cbox = GeomWorld(c, crot, jnp.stack([2 * r, 2 * r, 2 * h + 2 * r]))
    bb = box_box(g2, cbox)  # ODE's dBoxBox(box, capsule's box): its axis order and ties
    bb = bb._replace(normal=-bb.normal)  # into the capsule (geom 1)
    return Contact(*[jnp.where(inside, u, w) for u, w in zip(bb, outside)])
