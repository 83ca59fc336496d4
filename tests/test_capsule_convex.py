"""capsule_convex with the capsule's segment entering the hull (issue 19).

The capsule is the segment swept by a ball of radius r, so its penetration
into a hull is the segment's + r, and the segment's is the distance from the
origin to the boundary of conv(segment - hull). Independent truths:
- that distance from scipy's ConvexHull of the differences of the segment's
  ends and the hull's vertices (no code shared with the engine's SAT);
- the brute-force minimum over directions of the support-function overlap
  (the hull's support + the capsule's), a dense sphere of directions refined
  locally (tests/test_collision_capsule_libode.py does the same for boxes);
- the part of the segment in the hull, clipped by scipy's face planes;
- on a box's hull, capsule_box, which collides the capsule's bounding box
  with the segment inside as ODE does (tests/test_capsule_box_odelib.py):
  the box contains the capsule, so its depth bounds ours from above.
Three hulls padded to one table (a box, a hexagonal prism off its centre, a
random 20-point hull), random poses with the capsule's centre in the hull,
capsule axes along, or 1e-6 / 1e-3 rad off, a hull edge (the
near-parallel axes the SAT skips), and a capsule poking 1e-5 m into a
face. One jitted vmapped call per dtype.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation

from jaxode.build import hull as hull_lib
from jaxode.sim.collision import capsule as cp
from jaxode.sim.collision import convex as cv
from jaxode.sim.collision.contact import GeomWorld, Hull

from fast_compile import OPTIONS as _OPTS  # noqa: E402
import truths  # noqa: E402

BOX = np.array([0.5, 0.3, 0.4])
_ANG = np.pi / 3 * np.arange(6)
HEX = np.concatenate([np.c_[0.2 * np.cos(_ANG), 0.2 * np.sin(_ANG), np.full(6, z)]
                      for z in (-0.25, 0.25)]) + [0.05, -0.03, 0.02]
RAND = np.random.default_rng(3).normal(size=(20, 3)) * [0.3, 0.2, 0.25]
S = 0.5 * np.array([-1.0, 1.0])
BOX_PTS = np.array(np.meshgrid(S, S, S, indexing="ij")).reshape(3, -1).T * BOX
HULLS = [BOX_PTS, HEX, RAND]
MARGIN = 1e-3  # capsule._MID_MARGIN: a second contact while the clipped part is longer


def poses(seed, n_per):
    """Capsule and hull poses per hull: n_per random (the capsule centre in
    the hull), 3 near-parallel, 1 poking 1e-5 m into a face."""
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("hid", "c", "R1", "size", "p2", "R2")}
    for hid, pts in enumerate(HULLS):
        data = hull_lib.build_hull(pts)
        e = data.verts[data.edges[0, 1]] - data.verts[data.edges[0, 0]]
        e /= np.linalg.norm(e)
        perp = np.cross(e, [0.3, 0.5, 0.8])
        perp /= np.linalg.norm(perp)
        R2 = Rotation.random(n_per + 4, random_state=seed + hid).as_matrix()
        face_c = data.verts[list(data.faces[0])].mean(0)
        for k in range(n_per + 4):
            w = rng.dirichlet(np.ones(len(data.verts)))
            local = 0.8 * (w @ data.verts) + 0.2 * data.verts.mean(0)  # inside the hull
            if k < n_per:
                axis = Rotation.random(random_state=rng.integers(1 << 30)).as_matrix()[:, 2]
            elif k < n_per + 3:  # along the first edge, 1e-6 and 1e-3 rad off
                ang = (0.0, 1e-6, 1e-3)[k - n_per]
                axis = math.cos(ang) * e + math.sin(ang) * perp
            R1l = Rotation.align_vectors([axis], [[0, 0, 1.0]])[0].as_matrix()
            p2 = rng.normal(size=3) * 0.5
            size = [rng.uniform(0.02, 0.1), rng.uniform(0.05, 0.8), 0.0]
            if k == n_per + 3:  # poking 1e-5 m through face 0 along its normal: one contact
                axis = data.normals[0]
                R1l = Rotation.align_vectors([axis], [[0, 0, 1.0]])[0].as_matrix()
                local = face_c + (0.5 * size[1] - 1e-5) * axis
            out["hid"].append(hid)
            out["p2"].append(p2)
            out["R2"].append(R2[k])
            out["c"].append(p2 + R2[k] @ local)
            out["R1"].append(R2[k] @ R1l)
            out["size"].append(size)
    return {k: np.array(v) for k, v in out.items()}


def tables(hid):
    t = hull_lib.pad_hulls([hull_lib.build_hull(p) for p in HULLS])
    return Hull(**{k: jnp.asarray(v[hid]) for k, v in t.items()})


def run(g, dtype):
    """capsule_convex and capsule_box (whose box is BOX) on every pose, one jitted call."""
    f = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    n = len(g["hid"])
    g1 = GeomWorld(f(g["c"]), f(g["R1"]), f(g["size"]))
    g2 = GeomWorld(f(g["p2"]), f(g["R2"]), f(np.broadcast_to(BOX, (n, 3))))
    h = tables(g["hid"])
    h = Hull(**{k: (f(v) if jnp.issubdtype(v.dtype, jnp.floating) else v)
                for k, v in vars(h).items()})
    fn = jax.jit(lambda a, b, h: (jax.vmap(cv.capsule_convex)(a, b, h), jax.vmap(cp.capsule_box)(a, b)),
                 compiler_options=_OPTS)
    return jax.tree.map(np.asarray, fn(g1, g2, h))


def world(g, k):
    """Hull vertices and face equations (world), capsule ends, axis, r, half length."""
    v = g["p2"][k] + hull_lib.build_hull(HULLS[g["hid"][k]]).verts @ g["R2"][k].T
    a, r, half = g["R1"][k][:, 2], g["size"][k][0], 0.5 * g["size"][k][1]
    ends = g["c"][k] + np.outer([-half, half], a)
    return v, ConvexHull(v).equations, ends, a, r, half


def exact_depth(v, ends, r):
    """r + the origin's distance to the boundary of conv(segment - hull)."""
    md = ConvexHull((ends[:, None] - v[None]).reshape(-1, 3))
    return r + float(np.min(-md.equations[:, 3]))


def overlap(n, v, ends, r):
    """How far the capsule must move along the unit rows n to clear the hull."""
    return (v @ n.T).max(0) - (ends @ n.T).min(0) + r


_FIB = truths.sphere_directions(6000)


def search_depth(v, ends, r):
    """Brute-force min over directions of the overlap (an upper bound of the
    depth, equal to it up to the search's reach): tests/truths.py."""
    return truths.min_over_directions(lambda n: overlap(n, v, ends, r), _FIB)


def clipped(eq, ends):
    """Parameters [0, 1] along ends[0] -> ends[1] of the segment's part in the hull."""
    p, d = ends[0], ends[1] - ends[0]
    lo, hi = 0.0, 1.0
    for a, b in zip(eq[:, :3] @ d, eq[:, :3] @ p + eq[:, 3]):  # a t + b <= 0
        if abs(a) < 1e-15:
            assert b < 0
        elif a > 0:
            hi = min(hi, -b / a)
        else:
            lo = max(lo, -b / a)
    return lo, hi


@pytest.fixture(scope="module")
def entering():
    with jax.enable_x64(True):
        g = poses(0, 9)
        return g, run(g, jnp.float64), run(g, jnp.float32)


def check_pose(g, c, k, atol):
    """The contacts of pose k against the truths; returns (ours, exact)."""
    v, eq, ends, a, r, half = world(g, k)
    truth = exact_depth(v, ends, r)
    val = c.valid[k]
    assert val[0], k
    n = c.normal[k][0]
    assert abs(np.linalg.norm(n) - 1) < atol
    np.testing.assert_allclose(c.depth[k][0], truth, atol=atol, err_msg=str(k))
    # the normal attains the depth: moving the capsule by it along n separates
    np.testing.assert_allclose(overlap(n[None], v, ends, r)[0], truth, atol=atol, err_msg=str(k))
    # contacts at the ends of the clipped segment, at their depth along n
    lo, hi = clipped(eq, ends)
    pts = ends[0] + np.outer([lo, hi], ends[1] - ends[0])
    two = (hi - lo) * 2 * half > MARGIN * (r + half)
    if abs((hi - lo) * 2 * half - MARGIN * (r + half)) > atol:
        assert val[1] == two, k
    sup = (v @ n).max()
    for p, d, nn in zip(c.pos[k][val], c.depth[k][val], c.normal[k][val]):
        np.testing.assert_allclose(nn, n, atol=atol)
        assert np.min(np.linalg.norm(pts - p, axis=1)) < 10 * atol, (k, p, pts)
        assert np.max(eq[:, :3] @ p + eq[:, 3]) < 10 * atol, k  # in the hull
        assert d <= c.depth[k][0] + atol
        if val.sum() == 2 and d < c.depth[k][0]:
            np.testing.assert_allclose(d, sup + r - n @ p, atol=atol)
    return c.depth[k][0], truth


def test_capsule_entering_a_hull_has_the_exact_penetration(entering):
    """float64: the deepest contact's depth is the exact penetration (scipy)
    to 1e-9 and equals the overlap along its normal; the contacts lie at the
    ends of the segment clipped to the hull (2 while the clipped part is
    longer than 1e-3 (r + length / 2)) at their depths along the normal;
    near-parallel axes included. The brute-force search over directions
    finds nothing shallower, and reaches the same depth."""
    g, (c, _), _ = entering
    gap = []
    for k in range(len(g["hid"])):
        ours, truth = check_pose(g, c, k, 1e-9)
        if k % 4 == 0 or g["hid"][k] == 1:  # the search on a third of the poses (time)
            v, _, ends, _, r, _ = world(g, k)
            search = search_depth(v, ends, r)
            assert ours <= search + 1e-9, (k, ours, search)
            gap.append(search - ours)
    assert np.mean(np.asarray(gap) < 1e-6) > 0.9, gap
    assert (c.valid[:, 1]).any() and (~c.valid[:, 1]).any()


def test_capsule_entering_a_box_hull_is_no_deeper_than_capsule_box(entering):
    """On the box's hull capsule_convex's exact depth is at most capsule_box's
    (ODE's bounding-box fallback: the capsule's box contains the capsule, so
    its penetration is no smaller), and strictly less where the box's corners
    reach deeper than the capsule."""
    g, c, _ = entering
    conv, box = c
    n = 0
    for k in np.flatnonzero(g["hid"] == 0):
        d_box = box.depth[k][box.valid[k]].max()
        assert conv.valid[k][0] and conv.depth[k][0] <= d_box + 1e-9, (k, conv.depth[k], d_box)
        n += conv.depth[k][0] < d_box - 1e-6
    assert n > 0, "ODE's bounding box never deeper: the fallback was not exercised"


def test_capsule_entering_a_hull_float32(entering):
    """float32, the same poses: the exact depth to 1e-6 m (hulls of ~0.5 m,
    poses within ~1 m of the origin), contacts where float64 puts them."""
    g, c64, c32 = entering
    c64, c32 = c64[0], c32[0]
    for k in range(len(g["hid"])):
        _, truth = check_pose(g, c64, k, 1e-9)
        assert c32.valid[k][0]
        np.testing.assert_allclose(c32.depth[k][0], truth, atol=1e-6, err_msg=str(k))
        np.testing.assert_allclose(c32.normal[k][0], c64.normal[k][0], atol=1e-3, err_msg=str(k))


@pytest.mark.extended
def test_capsule_entering_hulls_brute_force_many_poses():
    """201 poses (+ 12 special): float64 depth = the exact penetration
    to 1e-9, never above the brute-force search, which reaches it in > 90 %."""
    with jax.enable_x64(True):
        g = poses(7, 67)
        c = run(g, jnp.float64)[0]
    gap = []
    for k in range(len(g["hid"])):
        ours, _ = check_pose(g, c, k, 1e-9)
        v, _, ends, _, r, _ = world(g, k)
        search = search_depth(v, ends, r)
        assert ours <= search + 1e-9, (k, ours, search)
        gap.append(search - ours)
    assert np.mean(np.asarray(gap) < 1e-6) > 0.9
