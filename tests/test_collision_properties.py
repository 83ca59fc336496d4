"""Property tests of the narrowphase (hypothesis): what any contact generator
must satisfy, on configurations hypothesis draws (and shrinks when one fails).

For every pair kind with an exact penetration depth, convex hulls included (a
hexagonal prism through the general hull code), capsule-convex (the
segment's SAT depth + r with the segment in the hull) and capsule-box, whose
depth is exact only while the capsule's segment stays outside the box (with
the segment inside, jaxode collides the capsule's bounding box as ODE's
dCollideCapsuleBox does: not the overlap), so its separation property is
checked only there:
- rigid-motion invariance: moving and turning both geoms together leaves the
  deepest depth unchanged (the normal may differ where the deepest direction
  is not unique, e.g. a sphere at a box's centre);
- separation: translating geom 1 along the deepest contact's normal by its
  depth (plus 1e-7 m) leaves no penetration deeper than 1e-5 m, and by its
  depth less 1e-4 m (or half the depth) leaves some (the depth is not
  overestimated: the separation test alone passes any larger depth) (the normal
  points into geom 1 and the depth is the overlap along it, ODE's convention;
  1e-5 m allows for the normal's direction when two capsule axes nearly
  intersect);
- unit normals and finite numbers in every slot, valid or not;
- swapping two geoms of the same type gives the same depth.
Float64; derandomised, so CI runs the same examples every time.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxode.build import hull as hull_lib
from jaxode.sim import math as jm
from jaxode.sim.collision import box, capsule, convex, cylinder, sphere
from jaxode.sim.collision.contact import GeomWorld, Hull

EPS = 1e-7
SHORT = 1e-4   # the push short of the depth that must leave the geoms overlapping [m]
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# name -> (pair function, size of geom 1, size of geom 2, geom 2 is a plane)
PAIRS = {
    "sphere-plane": (sphere.sphere_plane, (0.3, 0, 0), (0, 0, 0), True),
    "box-plane": (box.box_plane, (0.4, 0.3, 0.2), (0, 0, 0), True),
    "capsule-plane": (capsule.capsule_plane, (0.1, 0.4, 0), (0, 0, 0), True),
    "sphere-sphere": (sphere.sphere_sphere, (0.3, 0, 0), (0.2, 0, 0), False),
    "sphere-box": (sphere.sphere_box, (0.2, 0, 0), (0.4, 0.3, 0.2), False),
    "box-box": (box.box_box, (0.4, 0.3, 0.2), (0.3, 0.3, 0.5), False),
    "capsule-sphere": (capsule.capsule_sphere, (0.1, 0.4, 0), (0.2, 0, 0), False),
    "capsule-capsule": (capsule.capsule_capsule, (0.1, 0.4, 0), (0.15, 0.3, 0), False),
    "cylinder-sphere": (cylinder.cylinder_sphere, (0.2, 0.5, 0), (0.15, 0, 0), False),
    "capsule-box": (capsule.capsule_box, (0.1, 0.4, 0), (0.4, 0.3, 0.2), False),
}
# pairs whose depth is the overlap only while geom 1's segment is outside the
# box (geom 2): ODE's capsule-box
SEGMENT_OUTSIDE_ONLY = {"capsule-box"}
# a hexagonal prism (radius 0.25 m, height 0.3 m) through the convex code
_HEX = np.array([[0.25 * np.cos(a), 0.25 * np.sin(a), z]
                 for a in np.arange(6) * np.pi / 3 for z in (-0.15, 0.15)])
_TABLES = hull_lib.pad_hulls([hull_lib.build_hull(_HEX)])
HULL = Hull(**{k: v[0] for k, v in _TABLES.items()})
# convex pairs: (function, size 1, size 2, plane?, hulls of geom 1 / geom 2)
CONVEX_PAIRS = {
    "convex-plane": (convex.convex_plane, (0, 0, 0), (0, 0, 0), True, (True, False)),
    "sphere-convex": (convex.sphere_convex, (0.2, 0, 0), (0, 0, 0), False, (False, True)),
    "box-convex": (convex.box_convex, (0.4, 0.3, 0.2), (0, 0, 0), False, (False, True)),
    "capsule-convex": (convex.capsule_convex, (0.1, 0.4, 0), (0, 0, 0), False, (False, True)),
    "convex-convex": (convex.convex_convex, (0, 0, 0), (0, 0, 0), False, (True, True)),
}
PAIRS.update({k: v[:4] for k, v in CONVEX_PAIRS.items()})
SAME_TYPE = {"sphere-sphere", "box-box", "capsule-capsule", "convex-convex"}



@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def _deepest(c):
    d = jnp.where(c.valid, c.depth, -jnp.inf)
    k = jnp.argmax(d)
    return jnp.where(jnp.any(c.valid), c.depth[k], 0.0), c.normal[k], jnp.any(c.valid)


@jax.jit
def _rot(q):
    return jm.quat_to_mat(q / jnp.linalg.norm(q))


_CHECKS = {}


def _checks(name):
    """One jitted function per pair kind: everything the properties need."""
    if name in _CHECKS:
        return _CHECKS[name]
    fn, s1, s2, plane = PAIRS[name]
    hulls = CONVEX_PAIRS[name][4] if name in CONVEX_PAIRS else (False, False)
    if any(hulls):
        pair, extra = fn, [jax.tree.map(jnp.asarray, HULL) for h in hulls if h]
        fn = lambda a, b: pair(a, b, *extra)  # noqa: E731

    def run(p1, r1, p2, r2, rm, t):
        g1 = GeomWorld(p1, r1, jnp.asarray(s1, p1.dtype))
        g2 = GeomWorld(p2, r2, jnp.asarray(s2, p1.dtype))
        c = fn(g1, g2)
        depth, normal, hit = _deepest(c)
        # the same pair moved and turned together (a plane's point moves with it)
        m1 = GeomWorld(rm @ p1 + t, rm @ r1, g1.size)
        m2 = GeomWorld(rm @ p2 + t, rm @ r2, g2.size)
        dm = _deepest(fn(m1, m2))[0]
        # geom 1 pushed out along the normal
        moved = GeomWorld(p1 + normal * jnp.where(hit, depth + EPS, 0.0), r1, g1.size)
        d_out, _, _ = _deepest(fn(moved, g2))
        # ... and pushed a little less than its depth: still overlapping (an
        # overestimated depth would separate the geoms here)
        short = jnp.minimum(SHORT, 0.5 * depth)
        part = GeomWorld(p1 + normal * jnp.where(hit, depth - short, 0.0), r1, g1.size)
        d_in, _, hit_in = _deepest(fn(part, g2))
        swapped = _deepest(fn(g2, g1))[0] if not plane and name in SAME_TYPE else depth
        finite = (jnp.all(jnp.isfinite(c.pos)) & jnp.all(jnp.isfinite(c.normal))
                  & jnp.all(jnp.isfinite(c.depth)))
        unit = jnp.all(jnp.where(c.valid, jnp.abs(jnp.linalg.norm(c.normal, axis=-1) - 1), 0.0)
                       < 1e-9)
        return dict(depth=depth, normal=normal, hit=hit, dm=dm, d_out=d_out,
                    d_in=jnp.where(hit_in, d_in, 0.0), short=short,
                    swapped=swapped, finite=finite, unit=unit)

    _CHECKS[name] = jax.jit(run)
    return _CHECKS[name]


unit_float = st.floats(-1.0, 1.0, allow_nan=False)
quat = st.tuples(unit_float, unit_float, unit_float, unit_float).filter(
    lambda q: np.linalg.norm(q) > 0.1)
offset = st.tuples(*[st.floats(-0.6, 0.6, allow_nan=False)] * 3)


def _segment_meets_box(p, rot, length, bpos, brot, bsize):
    """Whether the capsule's segment (centre p, axis rot[:, 2], length [m])
    meets the box (Liang-Barsky clipping in the box frame)."""
    o = brot.T @ (p - bpos)
    d = brot.T @ rot[:, 2] * length
    lo, hi, half = -0.5, 0.5, np.asarray(bsize) / 2
    for k in range(3):
        if abs(d[k]) < 1e-15:
            if abs(o[k]) > half[k]:
                return False
            continue
        t0, t1 = sorted(((-half[k] - o[k]) / d[k], (half[k] - o[k]) / d[k]))
        lo, hi = max(lo, t0), min(hi, t1)
    return lo <= hi


@pytest.mark.parametrize("name", sorted(PAIRS))
@SETTINGS
@given(q1=quat, q2=quat, qm=quat, off=offset, t=offset)
def test_contact_properties(name, q1, q2, qm, off, t):
    plane = PAIRS[name][3]
    p1 = np.array([0.1, -0.2, 0.3])
    r1 = np.asarray(_rot(jnp.asarray(q1, jnp.float64)))
    r2 = np.asarray(_rot(jnp.asarray(q2, jnp.float64)))
    p2 = p1 + np.asarray(off)
    if plane:  # the plane's point is its normal times its offset
        p2 = r2[:, 2] * np.dot(r2[:, 2], p2)
    rm = np.asarray(_rot(jnp.asarray(qm, jnp.float64)))
    out = jax.tree.map(np.asarray, _checks(name)(p1, r1, p2, r2, rm, np.asarray(t)))
    assert out["finite"] and out["unit"], out
    np.testing.assert_allclose(out["dm"], out["depth"], atol=1e-9)
    exact = name not in SEGMENT_OUTSIDE_ONLY or not _segment_meets_box(
        p1, r1, PAIRS[name][1][1], p2, r2, PAIRS[name][2])
    if out["hit"] and out["depth"] > 1e-6 and exact:
        assert out["d_out"] <= 1e-5, (out["depth"], out["d_out"], out["normal"])
        # not overestimated: pushed out by depth - short, some overlap is left
        assert out["d_in"] > 0.0, (out["depth"], out["short"], out["d_in"], out["normal"])
    np.testing.assert_allclose(out["swapped"], out["depth"], atol=1e-9)


def _segment_box_distance(c, axis, length, bsize):
    """Distance [m] from the segment (centre c, unit axis, length, box frame)
    to the box (sizes bsize, centred at the origin) and the direction from
    the box's closest point to the segment's: the squared distance is convex
    along the segment, so ternary search finds its minimum."""
    half = np.asarray(bsize) / 2

    def f(u):
        x = c + u * axis
        return np.sum((x - np.clip(x, -half, half)) ** 2)

    lo, hi = -length / 2, length / 2
    for _ in range(200):
        m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
        lo, hi = (lo, m2) if f(m1) <= f(m2) else (m1, hi)
    x = c + 0.5 * (lo + hi) * axis
    v = x - np.clip(x, -half, half)
    return np.linalg.norm(v), v / max(np.linalg.norm(v), 1e-300)


@SETTINGS
@given(q1=quat, q2=quat, face=st.integers(0, 5), uv=st.tuples(unit_float, unit_float),
       gap=st.floats(0.0, 0.12))
def test_capsule_box_depth_with_the_segment_outside(q1, q2, face, uv, gap):
    """Capsule-box (ODE's dCollideCapsuleBox) with the segment outside the box
    (beyond one face's plane by ``gap``): the deepest contact is r minus the
    segment-box distance (numpy, ternary search), along the direction from the
    box to the segment; no contact beyond r."""
    r, length = PAIRS["capsule-box"][1][:2]
    bsize = np.asarray(PAIRS["capsule-box"][2])
    r1 = np.asarray(_rot(jnp.asarray(q1, jnp.float64)))
    r2 = np.asarray(_rot(jnp.asarray(q2, jnp.float64)))
    k, sign = face // 2, 1.0 if face % 2 else -1.0
    n = np.eye(3)[k] * sign  # the face's outward normal, box frame
    surf = n * bsize / 2
    surf[[(k + 1) % 3, (k + 2) % 3]] = np.asarray(uv) * bsize[[(k + 1) % 3, (k + 2) % 3]] / 2
    axis = r2.T @ r1[:, 2]  # capsule axis in the box frame
    c = surf + n * (0.5 * length * abs(axis @ n) + gap + 1e-9)
    p2 = np.array([0.3, -0.1, 0.2])
    p1 = p2 + r2 @ c
    dist, v = _segment_box_distance(c, axis, length, bsize)
    out = jax.tree.map(np.asarray, _checks("capsule-box")(p1, r1, p2, r2, np.eye(3), np.zeros(3)))
    assert out["finite"] and out["unit"], out
    if dist > r + 1e-9:
        assert not out["hit"] or out["depth"] <= 1e-9, (dist, out["depth"])
    elif dist < r - 1e-9:
        assert out["hit"]
        np.testing.assert_allclose(out["depth"], r - dist, atol=1e-9)
        np.testing.assert_allclose(out["normal"], r2 @ v, atol=1e-6)
