"""Convex hull geoms (add_convex): pair functions, raycast, AABB, mass, resting bodies.

Independent truths:
- a hull built from a box's 8 corners IS the box, so its contacts must be
  those of the ODE-validated box code (box-plane, sphere-box, box-box,
  capsule-box, box-heightfield) and its ray hits those of the box;
- the penetration depth of two convex polytopes is the distance from the
  origin to the boundary of their Minkowski difference, whose hull scipy
  computes from the pairwise vertex differences (no code shared with the
  engine's separating-axis test); a cylinder's depth is minimised over
  directions by brute force from the analytic support functions;
- signed distances of points and segments to a hull come from scipy's
  optimisers (SLSQP for the distance, linprog for the depth inside);
- masses from the closed forms of the box and the regular tetrahedron, and
  the ball's volume bounds for an inscribed polyhedron;
- bodies rest at the heights their geometry gives.
Sampled configurations are evaluated in ONE jitted vmapped call per pair
kind (float64); the resting scene runs in float32.
"""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linprog, minimize
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation

import jaxode
from jaxode.build import hull as hull_lib
from jaxode.sim import kinematics
from jaxode.sim.collision import box as bx
from jaxode.sim.collision import capsule as cp
from jaxode.sim.collision import convex as cv
from jaxode.sim.collision import heightfield as hfc
from jaxode.sim.collision import sphere as sp
from jaxode.sim.collision.contact import GeomWorld, Hull

from fast_compile import OPTIONS as _OPTS  # noqa: E402
N = 48  # sampled configurations per pair kind
BOX1 = np.array([0.4, 0.3, 0.2])
BOX2 = np.array([0.5, 0.25, 0.35])


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def jit(f):
    return jax.jit(f, compiler_options=_OPTS)


def corners(size):
    s = np.array([-0.5, 0.5])
    return np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T * size


def cloud(seed, n, scale):
    return np.random.default_rng(seed).normal(size=(n, 3)) * scale


def hull(points, n=N) -> Hull:
    """Hull tables of points, broadcast over n configurations."""
    t = hull_lib.pad_hulls([hull_lib.build_hull(points)])
    return Hull(**{k: jnp.broadcast_to(jnp.asarray(v[0]), (n,) + v.shape[1:]) for k, v in t.items()})


def gw(pos, rot, size):
    n = len(pos)
    return GeomWorld(jnp.asarray(pos, jnp.float64), jnp.asarray(rot, jnp.float64),
                     jnp.broadcast_to(jnp.asarray(size, jnp.float64), (n, 3)))


def host(c):
    return jax.tree.map(np.asarray, c)


def rots(seed, n=N):
    r = Rotation.random(n, random_state=seed).as_matrix()
    r[:3] = np.eye(3)  # axis-aligned poses (ties, flat faces) among the random ones
    return r


def assert_same_contacts(c1, c2, k, atol=1e-9):
    """Same number of contacts, and the same contacts (point, depth, normal) as a set."""
    v1, v2 = c1.valid[k], c2.valid[k]
    assert v1.sum() == v2.sum(), (k, c1.depth[k], c2.depth[k])
    p2, d2, n2 = c2.pos[k][v2], c2.depth[k][v2], c2.normal[k][v2]
    for p, d, n in zip(c1.pos[k][v1], c1.depth[k][v1], c1.normal[k][v1]):
        j = np.argmin(np.linalg.norm(p2 - p, axis=1))
        assert np.linalg.norm(p2[j] - p) < atol, (k, p, p2)
        np.testing.assert_allclose(d2[j], d, atol=atol)
        np.testing.assert_allclose(n2[j], n, atol=atol)


# ------------------------------------------------------------ box hull == box
@pytest.fixture(scope="module")
def box_pairs():
    """Random poses of a box (or its corner hull) against plane, sphere, box,
    capsule and a rough heightfield; both codes in one jitted call per pair kind."""
    rng = np.random.default_rng(0)
    R1, R2 = rots(1), rots(2)
    hb1, hb2 = hull(corners(BOX1)), hull(corners(BOX2))
    out = {}
    # box-box: box 1 around box 2 (about 3/4 of the poses overlap)
    g1 = gw(rng.normal(size=(N, 3)) * 0.25, R1, BOX1)
    g2 = gw(np.zeros((N, 3)), R2, BOX2)
    out["box_box"] = host(jit(lambda a, b, h1, h2: (
        jax.vmap(bx.box_box)(a, b), jax.vmap(cv.box_convex)(a, b, h2),
        jax.vmap(cv.convex_convex)(a, b, h1, h2)))(g1, g2, hb1, hb2))
    # plane z = 0: the box hull from just above to 5 cm deep, the last 8 sunk deeper
    plane = gw(np.zeros((N, 3)), np.broadcast_to(np.eye(3), (N, 3, 3)), np.zeros(3))
    ext = np.abs(R2[:, 2, :]) @ (0.5 * BOX2)  # half extent along z
    sink = np.concatenate([rng.uniform(-0.01, 0.05, N - 8), ext[-8:] * rng.uniform(0.5, 1.5, 8)])
    pos = np.concatenate([rng.uniform(-1, 1, (N, 2)), (ext - sink)[:, None]], 1)
    gb = gw(pos, R2, BOX2)
    out["plane"] = host(jit(lambda a, b, h: (jax.vmap(bx.box_plane)(a, b),
                                              jax.vmap(cv.convex_plane)(a, b, h)))(gb, plane, hb2))
    out["plane_corners"] = pos[:, None, :] + np.einsum("nij,vj->nvi", R2, corners(BOX2))
    # spheres around the box: inside, touching, outside
    gs = gw(rng.normal(size=(N, 3)) * 0.3, R1, (0.1, 0.0, 0.0))
    out["sphere"] = host(jit(lambda a, b, h: (jax.vmap(sp.sphere_box)(a, b),
                                               jax.vmap(cv.sphere_convex)(a, b, h)))(gs, g2, hb2))
    # capsules around the box
    gc = gw(rng.normal(size=(N, 3)) * 0.35, R1, (0.1, 0.4, 0.0))
    out["capsule_geoms"] = (np.asarray(gc.pos), R1, R2)
    out["capsule"] = host(jit(lambda a, b, h: (jax.vmap(cp.capsule_box)(a, b),
                                                jax.vmap(cv.capsule_convex)(a, b, h)))(gc, g2, hb2))
    # a rough heightfield under the box
    heights = jnp.asarray(rng.normal(size=(9, 7)) * 0.05)
    dims = jnp.array([9, 7])
    ghf = gw(np.zeros((N, 3)), np.broadcast_to(np.eye(3), (N, 3, 3)), (4.0, 3.0, 0.0))
    pos_h = np.concatenate([rng.uniform(-1, 1, (N, 2)), (ext - rng.uniform(-0.02, 0.08, N))[:, None]], 1)
    gbh = gw(pos_h, R2, BOX2)
    out["hfield"] = host(jit(lambda a, b, h, z, d: (
        jax.vmap(hfc.box_heightfield, in_axes=(0, 0, None, None))(a, b, z, d),
        jax.vmap(cv.convex_heightfield, in_axes=(0, 0, 0, None, None))(a, b, h, z, d)))(
            gbh, ghf, hb2, heights, dims))
    return out


def test_box_hull_box_box_contacts_equal_odes_box_box(box_pairs):
    """Box vs box hull (box_convex) and box hull vs box hull (convex_convex)
    give box_box's contacts: same count, depths, normal and points."""
    ref, c_box, c_hull = box_pairs["box_box"]
    assert 0.5 * N < ref.valid.any(1).sum() < N  # both overlapping and separated poses
    for k in range(N):
        assert_same_contacts(ref, c_box, k)
        assert_same_contacts(ref, c_hull, k)


def test_box_hull_on_plane_gives_box_plane_corners(box_pairs):
    """With at most 4 corners below the plane, convex_plane's contacts are
    box_plane's; deeper, both start with the deepest corner and convex_plane
    keeps 4 corners that are below the plane and spread out."""
    ref, c = box_pairs["plane"]
    below = (box_pairs["plane_corners"][..., 2] <= 0).sum(1)
    assert (below == 4).any() and (below > 4).any() and (below == 0).any()
    for k in range(N):
        if below[k] <= 4:
            assert_same_contacts(ref, c, k)
        else:
            assert c.valid[k].all()
            np.testing.assert_allclose(c.depth[k][0], ref.depth[k][0], atol=1e-12)
            z = box_pairs["plane_corners"][k]
            for p, d in zip(c.pos[k], c.depth[k]):
                assert np.min(np.linalg.norm(z - p, axis=1)) < 1e-12 and abs(d + p[2]) < 1e-12


def test_box_hull_sphere_and_heightfield_contacts_equal_the_boxs(box_pairs):
    """sphere_convex is sphere_box; convex_heightfield samples the box's 26
    points (corners, edge midpoints, face centres) as box_heightfield."""
    ref, c = box_pairs["sphere"]
    assert 0 < ref.valid.sum() < N
    for k in range(N):
        assert_same_contacts(ref, c, k)
    # heightfield: the same 26 samples; with more than 4 under the terrain the
    # greedy spread meets exact distance ties (symmetric samples), broken by
    # sample order: then the same count and the same deepest contact
    ref, c = box_pairs["hfield"]
    assert 0 < ref.valid.any(1).sum() < N and (ref.valid.sum(1) == 4).any()
    for k in range(N):
        if ref.valid[k].sum() < 4:
            assert_same_contacts(ref, c, k)
        else:
            assert c.valid[k].all()
            for x in ("pos", "depth", "normal"):
                np.testing.assert_allclose(getattr(c, x)[k][0], getattr(ref, x)[k][0], atol=1e-9)


def segment_enters_box(p0, p1, R, size):
    """Whether the segment [p0, p1] (world) meets the box (centred, rotation R)."""
    a, d = R.T @ p0, R.T @ (p1 - p0)
    lo, hi = 0.0, 1.0
    for i in range(3):
        if abs(d[i]) < 1e-15:
            if abs(a[i]) > 0.5 * size[i]:
                return False
            continue
        t1, t2 = sorted(((-0.5 * size[i] - a[i]) / d[i], (0.5 * size[i] - a[i]) / d[i]))
        lo, hi = max(lo, t1), min(hi, t2)
    return lo <= hi


def test_box_hull_capsule_contacts_equal_capsule_box_or_are_deeper(box_pairs):
    """capsule_convex follows capsule_box (end balls, a middle point) except
    (i) a segment entering the box: capsule_box collides the capsule's
    bounding box (ODE's dCollideCapsuleBox fallback,
    tests/test_capsule_box_odelib.py), ours takes the segment's SAT depth + r
    (tests/test_capsule_convex.py): at least r, and the bounding box contains
    the capsule, so no deeper than capsule_box's; (ii) both ends touch and the
    middle is deeper than the deeper end by 1e-3 (r + length/2): ours keeps
    the middle and the deeper end."""
    ref, c = box_pairs["capsule"]
    g = box_pairs["capsule_geoms"]
    assert 0 < ref.valid.any(1).sum() < N
    margin = 1e-3 * (0.1 + 0.2)
    n_enter = n_mid = 0
    for k in range(N):
        p0, p1 = g[0][k] - 0.2 * g[1][k][:, 2], g[0][k] + 0.2 * g[1][k][:, 2]
        if segment_enters_box(p0, p1, g[2][k], BOX2):
            n_enter += 1
            assert c.valid[k][0] and 0.1 - 1e-12 <= c.depth[k][0] <= ref.depth[k].max() + 1e-12
        elif ref.valid[k][:2].all() and c.depth[k][0] > ref.depth[k][0] + margin:
            n_mid += 1
            assert c.valid[k].all()
            np.testing.assert_allclose(c.depth[k][1], ref.depth[k][0], atol=1e-9)
            np.testing.assert_allclose(c.pos[k][1], ref.pos[k][0], atol=1e-9)
        else:
            assert_same_contacts(ref, c, k)
    assert 0 < n_enter < N


# --------------------------------------------- SAT against the Minkowski difference
def md_depth(va, vb):
    """Penetration depth of hulls of va, vb (world vertices): the origin's
    distance to the boundary of conv{a - b} (negative: the largest separation)."""
    md = ConvexHull((va[:, None] - vb[None]).reshape(-1, 3))
    return float(np.min(-md.equations[:, 3]))


def cyl_depth(c, R, r, length, vb):
    """Cylinder (centre c, rotation R) vs hull vertices vb: min over unit u of
    the support overlap, brute force (dense directions + Nelder-Mead)."""
    a, h = R[:, 2], 0.5 * length

    def overlap(u):
        u = np.atleast_2d(u)
        u = u / np.linalg.norm(u, axis=1, keepdims=True)
        t = u @ a
        rho = h * np.abs(t) + r * np.sqrt(np.clip(1 - t * t, 0, None))
        return (u @ c) + rho - (vb @ u.T).min(0)  # push the cylinder along -u

    i = np.arange(6000) + 0.5
    phi, th = np.arccos(1 - 2 * i / 6000), np.pi * (1 + 5 ** 0.5) * i
    dirs = np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], 1)
    ov = overlap(dirs)
    best = ov.min()
    for j in np.argsort(ov)[:4]:
        res = minimize(lambda x: overlap(x)[0], dirs[j], method="Nelder-Mead",
                       options=dict(xatol=1e-10, fatol=1e-13))
        best = min(best, res.fun)
    return best


@pytest.fixture(scope="module")
def hull_pairs():
    """Two random hulls (and a box, a cylinder) in random relative poses."""
    rng = np.random.default_rng(11)
    pa, pb = cloud(3, 14, [0.3, 0.2, 0.15]), cloud(4, 20, [0.2, 0.25, 0.2])
    R1, R2 = rots(5), rots(6)
    p1 = rng.normal(size=(N, 3)) * 0.35
    ha, hb = hull(pa), hull(pb)
    g1 = gw(p1, R1, (0.0, 0.0, 0.0))
    g2 = gw(np.zeros((N, 3)), R2, (0.0, 0.0, 0.0))
    gbox = gw(p1, R1, BOX1)
    gcyl = gw(p1, R1, (0.15, 0.3, 0.0))

    def run(g1, g2, gbox, gcyl, ha, hb):
        sat = jax.vmap(lambda g1, g2, h1, h2: cv.hull_sat(cv.place(h1, g1.pos, g1.rot),
                                                          cv.place(h2, g2.pos, g2.rot)))
        prism = jax.vmap(lambda g, h2, g2: cv.hull_sat(
            cv.place(cv.prism_hull(g.size[0], g.size[1]), g.pos, g.rot),
            cv.place(h2, g2.pos, g2.rot)).depth)
        return (sat(g1, g2, ha, hb), jax.vmap(cv.convex_convex)(g1, g2, ha, hb),
                jax.vmap(cv.box_convex)(gbox, g2, hb), jax.vmap(cv.cylinder_convex)(gcyl, g2, hb),
                prism(gcyl, hb, g2))

    sat, c_hh, c_box, c_cyl, d_prism = host(jit(run)(g1, g2, gbox, gcyl, ha, hb))
    vb = np.einsum("nij,vj->nvi", R2, hull_lib.build_hull(pb).verts)
    va = p1[:, None] + np.einsum("nij,vj->nvi", R1, hull_lib.build_hull(pa).verts)
    vbox = p1[:, None] + np.einsum("nij,vj->nvi", R1, corners(BOX1))
    return dict(sat=sat, hh=c_hh, box=c_box, cyl=c_cyl, prism=d_prism, va=va, vb=vb, vbox=vbox, p1=p1, R1=R1,
                eqb=[ConvexHull(v).equations for v in vb], eqa=[ConvexHull(v).equations for v in va],
                eqbox=[ConvexHull(v).equations for v in vbox])


def check_manifold(c, k, eq1, eq2, depth):
    """Contacts exist iff the depth is >= 0, each at a depth in [0, 1.05
    depth + 1e-5] (the face bias). With scipy's face planes: a point is never
    farther outside either solid than its depth (clipped points lie on the
    incident face, under the reference face's plane by their depth, within
    its side planes; an edge contact is midway between the edges), and each
    point of a multi-point (face) manifold lies on one of the two surfaces."""
    v = c.valid[k]
    assert v.any() == (depth >= 0), (k, depth)
    for p, d in zip(c.pos[k][v], c.depth[k][v]):
        s1, s2 = np.max(eq1[:, :3] @ p + eq1[:, 3]), np.max(eq2[:, :3] @ p + eq2[:, 3])
        assert -1e-12 <= d <= 1.05 * depth + 1e-5 + 1e-9
        assert s1 <= d + 1e-9 and s2 <= d + 1e-9, (k, s1, s2, d)
        if v.sum() > 1:
            assert min(abs(s1), abs(s2)) < 1e-9, (k, s1, s2)


def test_hull_sat_depth_is_the_minkowski_difference_depth(hull_pairs):
    """Random 14- and 20-point hulls, 48 poses (some separated): the SAT depth
    equals the Minkowski-difference depth to 1e-9; the overlap along the
    chosen normal is within the face bias (5 % + 1e-5 of the sizes)."""
    hp = hull_pairs
    sat = hp["sat"]
    truth = np.array([md_depth(hp["va"][k], hp["vb"][k]) for k in range(N)])
    assert (truth > 0).sum() > N // 4 and (truth < 0).sum() > N // 4
    np.testing.assert_allclose(sat.depth, truth, atol=1e-9)
    assert sat.use_edge.any() and (~sat.use_edge).any()
    for k in range(N):
        n = sat.normal[k]
        ov = (hp["va"][k] @ -n).max() - (hp["vb"][k] @ -n).min()
        assert truth[k] - 1e-9 <= ov <= truth[k] * 1.05 + 1e-4 or truth[k] < 0
        check_manifold(hp["hh"], k, hp["eqa"][k], hp["eqb"][k], truth[k])


def test_box_and_cylinder_against_a_hull(hull_pairs):
    """box_convex: the box corners' Minkowski-difference depth, points in both
    solids. cylinder_convex: the inscribed 16-gon prism, so its depth lies
    within r (1 - cos(pi/16)) below the cylinder's brute-force depth."""
    hp = hull_pairs
    c = hp["box"]
    for k in range(N):
        truth = md_depth(hp["vbox"][k], hp["vb"][k])
        if c.valid[k].any():
            assert c.depth[k].max() <= 1.05 * truth + 1e-5
        check_manifold(c, k, hp["eqbox"][k], hp["eqb"][k], truth)
    r, length = 0.15, 0.3
    bound = r * (1 - math.cos(math.pi / 16))
    c = hp["cyl"]
    for k in range(0, N, 2):  # brute force on every other pose (time)
        truth = cyl_depth(hp["p1"][k], hp["R1"][k], r, length, hp["vb"][k])
        if truth >= 0:  # overlapping: exact depths (separated, SAT only bounds the distance)
            assert truth - bound - 1e-7 <= hp["prism"][k] <= truth + 1e-7, (k, hp["prism"][k], truth)
        else:
            assert hp["prism"][k] < 0
        assert c.valid[k].any() == (hp["prism"][k] >= 0)
        if c.valid[k].any():
            assert np.all(c.depth[k][c.valid[k]] <= 1.05 * truth + 1e-5)
    assert (hp["prism"] > 0).sum() > N // 4


# ------------------------------------------------------------ sphere, capsule
PTS_HULL = cloud(21, 16, [0.3, 0.2, 0.25])
CAPS_R, CAPS_HALF = 0.1, 0.03


def hull_eq():
    eq = ConvexHull(PTS_HULL).equations
    return eq[:, :3], eq[:, 3]


def qp_distance(A, off, p):
    """Distance from p to the polytope A x + off <= 0 and the nearest point (SLSQP)."""
    x0 = PTS_HULL.mean(0)
    res = minimize(lambda x: np.sum((x - p) ** 2), x0, jac=lambda x: 2 * (x - p), method="SLSQP",
                   constraints=[dict(type="ineq", fun=lambda x: -(A @ x + off), jac=lambda x: -A)],
                   options=dict(ftol=1e-16, maxiter=500))
    return math.sqrt(max(res.fun, 0.0)), res.x


@pytest.fixture(scope="module")
def ball_pairs():
    rng = np.random.default_rng(8)
    R2 = rots(9)
    centres = rng.normal(size=(N, 3)) * 0.3
    r = 0.08
    hb = hull(PTS_HULL)
    g2 = gw(np.zeros((N, 3)), R2, (0.0, 0.0, 0.0))
    # capsules: random, and the last two lying flat 1 cm into a face, along
    # one of its edges and across it (the face the widest around its centroid)
    caps_c, caps_R = rng.normal(size=(N, 3)) * 0.3, rots(10)
    h = hull_lib.build_hull(PTS_HULL)

    def room(f):
        q = h.verts[f]
        c = q.mean(0)
        e = np.roll(q, -1, axis=0) - q
        w = c - q
        return np.min(np.linalg.norm(np.cross(e, w), axis=1) / np.linalg.norm(e, axis=1))

    face = max(range(len(h.faces)), key=lambda f: room(h.faces[f]))
    assert room(h.faces[face]) > 1.5 * CAPS_HALF
    n_face = h.normals[face]
    face_c = h.verts[h.faces[face]].mean(0)
    e = h.verts[h.faces[face][1]] - h.verts[h.faces[face][0]]
    e /= np.linalg.norm(e)
    for k, axis in ((N - 2, e), (N - 1, np.cross(n_face, e))):
        caps_R[k] = R2[k] @ Rotation.align_vectors([axis], [[0, 0, 1.0]])[0].as_matrix()
        caps_c[k] = R2[k] @ (face_c + (CAPS_R - 0.01) * n_face)
    gs = gw(centres, rots(3), (r, 0.0, 0.0))
    gc = gw(caps_c, caps_R, (CAPS_R, 2 * CAPS_HALF, 0.0))
    s, c = host(jit(lambda gs, gc, g2, hb: (jax.vmap(cv.sphere_convex)(gs, g2, hb),
                                            jax.vmap(cv.capsule_convex)(gc, g2, hb)))(gs, gc, g2, hb))
    return dict(s=s, c=c, centres=centres, R2=R2, r=r, caps_c=caps_c, caps_R=caps_R,
                face_normal=[R2[k] @ n_face for k in range(N)])


def test_sphere_convex_is_the_exact_signed_distance(ball_pairs):
    """Inside the hull: depth r + distance to the nearest face plane (scipy's
    planes), normal = that plane's, contact at the centre; outside: r - the
    SLSQP distance, contact at the nearest point, normal towards the centre."""
    bp = ball_pairs
    s, r = bp["s"], bp["r"]
    A, off = hull_eq()
    n_in = n_out = 0
    for k in range(N):
        p = bp["R2"][k].T @ bp["centres"][k]  # hull frame
        plane = A @ p + off
        if plane.max() <= 0:
            n_in += 1
            np.testing.assert_allclose(s.depth[k][0], r - plane.max(), atol=1e-12)
            np.testing.assert_allclose(s.normal[k][0], bp["R2"][k] @ A[np.argmax(plane)], atol=1e-9)
            np.testing.assert_allclose(s.pos[k][0], bp["centres"][k], atol=1e-12)
            continue
        d, q = qp_distance(A, off, p)
        assert s.valid[k][0] == (d <= r)
        if d > r:
            continue
        n_out += 1
        np.testing.assert_allclose(s.depth[k][0], r - d, atol=1e-7)
        np.testing.assert_allclose(s.pos[k][0], bp["R2"][k] @ q, atol=1e-6)
        np.testing.assert_allclose(s.normal[k][0], bp["R2"][k] @ (p - q) / d, atol=1e-5)
    assert n_in > 2 and n_out > 2


def test_capsule_convex_deepest_contact_is_the_segments_signed_distance(ball_pairs):
    """Segment outside the hull: the deepest contact has depth r - the
    segment's distance to the hull (SLSQP over (segment parameter, hull
    point)). Segment entering the hull (linprog: the least largest plane
    distance over the segment is < 0): r + the origin's distance to the
    boundary of conv(segment - hull) (scipy), the capsule's exact
    penetration. A capsule lying on a face gets 2 contacts at its ends,
    depth 1 cm, the face normal."""
    bp = ball_pairs
    c = bp["c"]
    A, off = hull_eq()
    r, h = CAPS_R, CAPS_HALF
    n_in = 0
    for k in range(N - 2):
        R2 = bp["R2"][k]
        cc, a = R2.T @ bp["caps_c"][k], R2.T @ bp["caps_R"][k][:, 2]
        # min t s.t. A (cc + u a) + off <= t, -h <= u <= h
        lp = linprog([0, 1], A_ub=np.stack([A @ a, -np.ones(len(A))], 1), b_ub=-(A @ cc + off),
                     bounds=[(-h, h), (None, None)], method="highs")
        sd = lp.fun
        if sd < 0:
            n_in += 1
            ends = cc + np.outer([-h, h], a)
            np.testing.assert_allclose(c.depth[k][0], r + md_depth(ends, PTS_HULL), atol=1e-9)
            continue
        if sd > 0:
            res = minimize(lambda x: np.sum((x[:3] - cc - x[3] * a) ** 2), np.r_[PTS_HULL.mean(0), 0.0],
                           method="SLSQP", bounds=[(None, None)] * 3 + [(-h, h)],
                           constraints=[dict(type="ineq", fun=lambda x: -(A @ x[:3] + off))],
                           options=dict(ftol=1e-16, maxiter=500))
            sd = math.sqrt(max(res.fun, 0.0))
        assert c.valid[k][0] == (sd <= r), (k, sd)
        if sd <= r:
            np.testing.assert_allclose(c.depth[k][0], r - sd, atol=2e-7)
    assert 0 < c.valid[:N - 2].any(1).sum() < N - 2 and n_in > 2
    for k in (N - 2, N - 1):
        n = bp["face_normal"][k]
        assert c.valid[k].all()
        np.testing.assert_allclose(c.depth[k], 0.01, atol=1e-9)
        np.testing.assert_allclose(c.normal[k], np.broadcast_to(n, (2, 3)), atol=1e-9)
        ends = bp["caps_c"][k] + np.outer([-h, h], bp["caps_R"][k][:, 2]) - (r - 0.01) * n
        for p in ends:  # on the face, under the two ends
            assert np.min(np.linalg.norm(c.pos[k] - p, axis=1)) < 1e-9


# ------------------------------------------------------------ raycast and AABB
def test_raycast_and_aabb_of_a_box_hull_equal_the_boxs():
    """A static box and its corner hull in the same pose 3 m apart: every ray
    (from outside, from inside, grazing, missing) hits both at the same
    distance with the same normal; the AABBs are equal (shifted)."""
    rng = np.random.default_rng(4)
    q = tuple(Rotation.random(random_state=2).as_quat()[[3, 0, 1, 2]])
    shift = np.array([3.0, 0.0, 0.0])
    b = jaxode.WorldBuilder()
    b.add_body(pos=(0.0, 0.0, 50.0))
    b.add_box(BOX2, pos=(0.0, 0.0, 0.0), quat=q)
    b.add_convex(corners(BOX2), pos=tuple(shift), quat=q)
    model = b.build()
    o = np.concatenate([rng.normal(size=(40, 3)) * 0.8, rng.normal(size=(10, 3)) * 0.05])
    d = rng.normal(size=(50, 3))
    o2 = np.concatenate([o, o + shift])
    d2 = np.concatenate([d, d])
    mask_box, mask_hull = np.array([True, False]), np.array([False, True])
    st = jaxode.init(model)
    cast = jit(lambda s: (jaxode.raycast(model, s, o2[:50], d2[:50], geom_mask=mask_box),
                          jaxode.raycast(model, s, o2[50:], d2[50:], geom_mask=mask_hull)))
    (db, pb, nb, gb), (dc, pc, nc, gc) = host(cast(st))
    hit = np.isfinite(db)
    assert 10 < hit.sum() < 50
    np.testing.assert_array_equal(np.isfinite(dc), hit)
    np.testing.assert_allclose(dc[hit], db[hit], atol=1e-12)
    np.testing.assert_allclose(nc[hit], nb[hit], atol=1e-12)
    np.testing.assert_allclose(pc[hit], pb[hit] + shift, atol=1e-12)
    assert np.all(gb[hit] == 0) and np.all(gc[hit] == 1) and np.all(gc[~hit] == -1)
    gpos, grot = kinematics.geom_poses(model, st.pos, st.quat)
    lo, hi = map(np.asarray, kinematics.geom_aabbs(model, gpos, grot))
    np.testing.assert_allclose(lo[1], lo[0] + shift, atol=1e-12)
    np.testing.assert_allclose(hi[1], hi[0] + shift, atol=1e-12)


# ------------------------------------------------------------ mass
def test_mass_of_box_corners_is_mass_box_and_translates():
    m, ref = jaxode.mass.convex(corners(BOX2), density=700.0), jaxode.mass.box(BOX2, density=700.0)
    assert m.allclose(ref, rtol=1e-12, atol=1e-14)
    off = np.array([0.3, -1.0, 2.0])
    m = jaxode.mass.convex(corners(BOX2) + off, total=2.0)
    assert m.allclose(jaxode.mass.translate(jaxode.mass.box(BOX2, total=2.0), off), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="mass.com must be"):
        jaxode.WorldBuilder().add_body(mass=m)


def test_mass_of_a_regular_tetrahedron_is_the_closed_form():
    """Edge a, mass M: I = M a^2 / 20 about every axis through the centroid."""
    a = 0.3
    t = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) * a / (2 * math.sqrt(2)) + [0.1, 0.2, 0.3]
    m = jaxode.mass.convex(t, density=1000.0)
    vol = a ** 3 / (6 * math.sqrt(2))
    np.testing.assert_allclose(m.mass, 1000.0 * vol, rtol=1e-12)
    np.testing.assert_allclose(m.com, [0.1, 0.2, 0.3], atol=1e-14)
    np.testing.assert_allclose(m.inertia_about_com(), m.mass * a * a / 20 * np.eye(3), atol=1e-15)


def test_mass_of_a_sampled_sphere_is_within_the_inscribed_polyhedron_bounds():
    """The hull of n points on a sphere of radius r lies between the ball of
    radius r_in (its nearest face, from scipy's planes) and the sphere, so
    its volume and its inertia per mass (2/5 rho^2 for a ball of radius rho)
    lie between the two balls'; the volume error shrinks from 16 to 64 points."""
    r = 0.5
    errors = []
    for n in (16, 64):
        i = np.arange(n) + 0.5
        phi, th = np.arccos(1 - 2 * i / n), np.pi * (1 + 5 ** 0.5) * i
        pts = r * np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], 1)
        r_in = float(np.min(-ConvexHull(pts).equations[:, 3]))
        m = jaxode.mass.convex(pts, density=1.0)
        assert 4 / 3 * math.pi * r_in ** 3 < m.mass < 4 / 3 * math.pi * r ** 3
        per_mass = np.linalg.eigvalsh(m.inertia_about_com()) / m.mass
        assert np.all(per_mass > 0.4 * r_in ** 2) and np.all(per_mass < 0.4 * r ** 2)
        errors.append(1 - m.mass / (4 / 3 * math.pi * r ** 3))
    assert errors[1] < 0.5 * errors[0]


# ------------------------------------------------------------ builder errors
@pytest.mark.parametrize("points, match", [
    (corners(BOX2)[:4] * [1, 1, 0], "coplanar"),
    (np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [4, 0, 0]]), "coplanar or collinear"),
    (np.zeros((3, 3)), "at least 4 points"),
    (np.zeros((6, 3)), "coincident"),
    (np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, np.inf]]), "finite"),
    (np.zeros((5, 2)), r"\(N, 3\)"),
    ((lambda p: p / np.linalg.norm(p, axis=1, keepdims=True))(np.random.default_rng(1).normal(size=(300, 3))),
     "more than the limit MAX_HULL_VERTICES = 64"),
])
def test_bad_convex_points_raise_naming_the_geom_and_field(points, match):
    b = jaxode.WorldBuilder()
    b.add_plane()
    with pytest.raises(ValueError, match=match) as e:
        b.add_convex(points)
    assert str(e.value).startswith("geom 1 (convex): points")
    assert len(b.geoms) == 1 and not b.hulls  # nothing half-added


# ------------------------------------------------------------ resting bodies
def resting_scene():
    """The resting scene (float32 build): (model, {body: rest height of its centre [m]}).
    60 QuickStep iterations: at 20, a small box stacked on a box keeps shaking
    at ~5 cm/s in float32 here, with box_box as with the hulls (measured)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), iterations=60)
    surf = jaxode.Surface(mu=0.9)
    # bits: plane 1, slab 8; bodies collide with their support only (the
    # cube also with the prism), so that only the pairs under test compile
    floor = dict(surface=surf, collide_bits=1)
    on_slab = dict(surface=surf, category_bits=2, collide_bits=8)
    b.add_plane(surface=surf, category_bits=1, collide_bits=0)
    a = 0.3
    tet = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) * a / (2 * math.sqrt(2))
    down = Rotation.align_vectors([[0, 0, 1.0]], [tet[0]])[0].as_quat()[[3, 0, 1, 2]]
    rest = {}
    i = b.add_body(pos=(0, 0, a * math.sqrt(2 / 3) / 4 + 0.01), quat=tuple(down),
                   mass=jaxode.mass.convex(tet, total=1.0))
    b.add_convex(tet, body=i, category_bits=2, **floor)
    rest[i] = a * math.sqrt(2 / 3) / 4
    ang = np.arange(6) * np.pi / 3
    hexp = np.concatenate([np.stack([0.2 * np.cos(ang), 0.2 * np.sin(ang), np.full(6, z)], 1)
                           for z in (-0.1, 0.1)])
    i = b.add_body(pos=(1.0, 0, 0.11), mass=jaxode.mass.convex(hexp, total=1.0))
    b.add_convex(hexp, body=i, category_bits=4, **floor)
    rest[i] = 0.1
    cube = corners((0.15, 0.15, 0.15))
    i = b.add_body(pos=(1.0, 0.02, 0.285), mass=jaxode.mass.convex(cube, total=0.5))
    b.add_convex(cube, body=i, surface=surf, category_bits=2, collide_bits=4)
    rest[i] = 0.2 + 0.075
    top = 0.6
    b.add_convex(corners((3.0, 1.0, 0.2)), pos=(3.0, 0.0, top - 0.1), surface=surf,
                 category_bits=8, collide_bits=0)
    shapes = [("sphere", 0.1), ("box", 0.08), ("capsule", 0.07), ("cylinder", 0.12)]
    for j, (kind, up) in enumerate(shapes):
        x = 2.0 + 0.6 * j
        if kind == "sphere":
            i = b.add_body(pos=(x, 0, top + up + 0.005), mass=jaxode.mass.sphere(0.1, total=1.0))
            b.add_sphere(0.1, body=i, **on_slab)
        elif kind == "box":
            i = b.add_body(pos=(x, 0, top + up + 0.005), mass=jaxode.mass.box((0.2, 0.3, 0.16), total=1.0))
            b.add_box((0.2, 0.3, 0.16), body=i, **on_slab)
        elif kind == "capsule":
            i = b.add_body(pos=(x, 0, top + up + 0.005), quat=(math.sqrt(0.5), math.sqrt(0.5), 0, 0),
                           mass=jaxode.mass.capsule(0.07, 0.3, total=1.0))
            b.add_capsule(0.07, 0.3, body=i, **on_slab)
        else:
            i = b.add_body(pos=(x, 0, top + up + 0.005), mass=jaxode.mass.cylinder(0.1, 0.24, total=1.0))
            b.add_cylinder(0.1, 0.24, body=i, **on_slab)
        rest[i] = top + up
    return b.build(), rest


def test_convex_bodies_come_to_rest_at_their_geometric_heights():
    """float32, 400 steps of 0.01 s: a regular tetrahedron on a face (centroid
    at a sqrt(2/3)/4), a hexagonal prism on its cap (half height) with a cube
    hull on top (convex-convex), and on a static convex slab a sphere (slab
    top + r), a box (+ half height), a lying capsule (+ r) and a standing
    cylinder (+ half length). All rest within 1 mm with no NaN, penetration
    under 1 mm, nothing dropped for capacity. At rest = every body slower than
    1 mm/s over each of the last 100 steps, and every body in contact with its
    support in each of them: a resting body that loses its contact for one
    step free-falls g dt = 0.098 m/s (the cube on the prism did, in isolated
    steps, when a rounding-inflated edge-pair distance read the pair as
    separated), and a support set that switches from step to step jolts
    (the prism's 4 of 6 cap vertices, chosen by which one the micro-rocking
    left deepest, shook the cube at 2-4 mm/s)."""
    with jax.enable_x64(False):
        model, rest = resting_scene()
        assert {(g.type1, g.type2) for g in model.pair_groups} == {
            (6, 0), (6, 6), (1, 6), (2, 6), (3, 6), (4, 6)}
        geom_body = jnp.asarray(model.geom_body)
        nbody = len(rest)

        def one(s, _):
            s = jaxode.step(model, s, 0.01)
            c = s.contacts
            b1 = jnp.where(c.valid, geom_body[c.geom1], nbody)
            b2 = jnp.where(c.valid, geom_body[c.geom2], nbody)
            touched = (jnp.zeros(nbody + 1, bool).at[b1].set(True).at[b2].set(True))[:nbody]
            return s, (s.pos, s.vel, touched, jnp.max(jnp.where(c.valid, c.depth, 0.0)))

        run = jit(lambda s: jax.lax.scan(one, s, None, 400))
        final, (pos, vel, touched, max_depth) = run(jaxode.init(model))
        pos = np.asarray(pos, np.float64)
        assert np.all(np.isfinite(pos)) and not bool(final.nonfinite)
        assert int(final.overflow_contacts) == 0 and int(final.overflow_pairs) == 0
    for i, z in rest.items():
        assert abs(pos[-1, i, 2] - z) < 1e-3, (i, pos[-1, i], z)
    touched = np.asarray(touched)[-100:]
    lost = {i: int((~touched[:, i]).sum()) for i in rest if not touched[:, i].all()}
    assert not lost, f"steps (of the last 100) a resting body had no contact: {lost}"
    speed = np.abs(np.asarray(vel)[-100:]).max(axis=(0, 2))
    assert speed.max() < 1e-3, {i: float(speed[i]) for i in rest}
    assert float(np.max(np.asarray(max_depth)[100:])) < 1e-3
