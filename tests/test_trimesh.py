"""Static triangle meshes (add_trimesh): pair functions, candidates, raycast, mass, resting.

Independent truths:
- closest distances of points and segments to a triangle from scipy's SLSQP
  over barycentric (and segment) coordinates (a convex problem);
- the penetration depth of a box and a triangle is the distance from the
  origin to the boundary of their Minkowski difference, whose hull scipy
  computes from the pairwise vertex differences;
- the triangles overlapping a query box by brute force (numpy, every triangle);
- a flat mesh is a plane and a closed box mesh a box: ray hits of the
  engine's (ODE-validated) plane and box; a box rests at half its height; a
  sphere launched sliding rolls at 5/7 of its speed (rigid-body mechanics);
- masses from mass.box and the closed form of the right tetrahedron.
Sampled configurations run in ONE jitted vmapped call per pair kind (float64);
the resting scene runs in float32.
"""
import zlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim.collision.contact import TOUCH_ULPS
import pytest
from scipy.optimize import minimize
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation
from truths import box_mesh, grid_mesh

import jaxode
from jaxode.sim import kinematics
from jaxode.build import meshes as mesh_lib
from jaxode.sim.collision import convex as cv
from jaxode.sim.collision import trimesh as tm
from jaxode.sim.collision import contact as ct
from jaxode.sim.collision.contact import GeomWorld, Mesh

from fast_compile import OPTIONS as _OPTS  # noqa: E402
N = 40
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _fresh_rng(request):
    """Each test draws from its own seeded stream: results must not depend on which
    tests ran before it in the same process (pytest-xdist splits modules)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))


def jit(f):
    return jax.jit(f, compiler_options=_OPTS)


def one_triangle(v):
    """Triangles (K = 1) of a lone triangle (all features convex), float64."""
    v = np.asarray(v, np.float64)
    n = np.cross(v[1] - v[0], v[2] - v[0])
    n /= np.linalg.norm(n)
    return v, n


def tri_set(vs, ns):
    """Batched one-triangle Triangles from (B, 3, 3) corners, (B, 3) normals."""
    b = len(vs)
    return tm.Triangles(a=jnp.asarray(vs[:, None, 0]), b=jnp.asarray(vs[:, None, 1]),
                        c=jnp.asarray(vs[:, None, 2]), normal=jnp.asarray(ns[:, None]),
                        edge_kind=jnp.full((b, 1, 3), 2), corner_kind=jnp.full((b, 1, 3), 2),
                        valid=jnp.ones((b, 1), bool))


def random_triangles(n):
    out = []
    for _ in range(n):
        while True:
            v = RNG.uniform(-0.5, 0.5, (3, 3))
            if np.linalg.norm(np.cross(v[1] - v[0], v[2] - v[0])) > 0.1:
                out.append(one_triangle(v))
                break
    return np.array([o[0] for o in out]), np.array([o[1] for o in out])


def tri_dist(p, v):
    """Distance of p to triangle v by SLSQP over barycentric coordinates."""
    f = lambda w: np.sum((v[0] + w[0] * (v[1] - v[0]) + w[1] * (v[2] - v[0]) - p) ** 2)
    cons = [{"type": "ineq", "fun": lambda w: 1 - w[0] - w[1]}]
    best = min((minimize(f, x0, bounds=[(0, 1), (0, 1)], constraints=cons, method="SLSQP",
                         options={"ftol": 1e-14, "maxiter": 200})
                for x0 in ([0.3, 0.3], [0.1, 0.8], [0.8, 0.1])), key=lambda r: r.fun)
    return np.sqrt(max(best.fun, 0.0))


def seg_tri_dist(p0, p1, v):
    f = lambda w: np.sum((v[0] + w[0] * (v[1] - v[0]) + w[1] * (v[2] - v[0])
                          - p0 - w[2] * (p1 - p0)) ** 2)
    cons = [{"type": "ineq", "fun": lambda w: 1 - w[0] - w[1]}]
    best = min((minimize(f, x0, bounds=[(0, 1), (0, 1), (0, 1)], constraints=cons,
                         method="SLSQP", options={"ftol": 1e-14, "maxiter": 300})
                for x0 in ([0.3, 0.3, 0.5], [0.1, 0.8, 0.0], [0.8, 0.1, 1.0])),
               key=lambda r: r.fun)
    return np.sqrt(max(best.fun, 0.0))


def geoms(pos, rot, size):
    return GeomWorld(jnp.asarray(pos), jnp.asarray(rot), jnp.asarray(size))


# ------------------------------------------------------------------ pair functions
@pytest.fixture()
def x64():
    with jax.enable_x64(True):
        yield


def test_sphere_depth_is_exact(x64):
    vs, ns = random_triangles(N)
    r = 0.3
    # centres in front of the plane, within reach of the triangle
    cen = vs.mean(axis=1) + RNG.uniform(-0.5, 0.5, (N, 3))
    cen += ns * (np.abs(np.sum(ns * (cen - vs[:, 0]), 1)) - np.sum(ns * (cen - vs[:, 0]), 1)
                 + 0.01)[:, None]
    eye = np.broadcast_to(np.eye(3), (N, 3, 3))
    c = jit(jax.vmap(tm.sphere_trimesh))(geoms(cen, eye, np.tile([r, 0, 0], (N, 1))),
                                         geoms(np.zeros((N, 3)), eye, np.zeros((N, 3))),
                                         tri_set(vs, ns))
    truth = np.array([r - tri_dist(p, v) for p, v in zip(cen, vs)])
    hit = truth >= 1e-6
    assert 8 < hit.sum() < N
    np.testing.assert_array_equal(np.asarray(c.valid[:, 0])[hit], True)
    np.testing.assert_allclose(np.asarray(c.depth[:, 0])[hit], truth[hit], atol=1e-6)
    assert not np.any(np.asarray(c.valid)[truth < -1e-6])
    assert np.all(np.isfinite(np.asarray(c.pos))) and np.all(np.isfinite(np.asarray(c.normal)))


def test_capsule_depth_is_exact(x64):
    vs, ns = random_triangles(N)
    r, length = 0.15, 0.6
    rot = Rotation.random(N, random_state=3).as_matrix()
    cen = vs.mean(axis=1) + RNG.uniform(-0.4, 0.4, (N, 3)) + 0.35 * ns
    ax = rot[:, :, 2] * length / 2
    p0, p1 = cen - ax, cen + ax
    front = (np.sum(ns * (p0 - vs[:, 0]), 1) > 0) & (np.sum(ns * (p1 - vs[:, 0]), 1) > 0)
    eye = np.broadcast_to(np.eye(3), (N, 3, 3))
    c = jit(jax.vmap(tm.capsule_trimesh))(geoms(cen, rot, np.tile([r, length, 0], (N, 1))),
                                          geoms(np.zeros((N, 3)), eye, np.zeros((N, 3))),
                                          tri_set(vs, ns))
    truth = np.array([r - seg_tri_dist(a, b, v) for a, b, v in zip(p0, p1, vs)])
    hit = front & (truth >= 1e-6)
    assert hit.sum() >= 6
    np.testing.assert_allclose(np.asarray(c.depth[:, 0])[hit], truth[hit], atol=1e-6)
    assert not np.any(np.asarray(c.valid)[front & (truth < -1e-6)])


def test_box_triangle_sat_depth_is_minkowski(x64):
    vs, ns = random_triangles(N)
    size = np.array([0.4, 0.3, 0.2])
    rot = Rotation.random(N, random_state=5).as_matrix()
    cen = vs.mean(axis=1) + RNG.uniform(-0.2, 0.2, (N, 3)) + 0.12 * ns
    s = np.array([-0.5, 0.5])
    corners = np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T * size

    def sat_depth(pos, rot, v, n):
        h = cv.place(cv.box_hull(jnp.asarray(size)), pos, rot)
        sep_t, sep_f, sep_e, _ = tm.triangle_sat(h, v, n)
        return -jnp.maximum(jnp.maximum(sep_t, jnp.max(sep_f)), jnp.max(sep_e))

    got = np.asarray(jit(jax.vmap(sat_depth))(cen, rot, vs, ns))
    checked = 0
    for k in range(N):
        box = cen[k] + corners @ rot[k].T
        diff = (box[:, None, :] - vs[k][None, :, :]).reshape(-1, 3)
        h = ConvexHull(diff)
        dist = -h.equations[:, 3]  # facet offsets: distance of the origin inside
        j = np.argmin(dist)
        if dist[j] < 0:
            assert got[k] < 1e-9  # separated
            continue
        if h.equations[j, :3] @ ns[k] > 0.99:
            continue  # the box moves along -u: through the back, which the one-sided mesh never does
        np.testing.assert_allclose(got[k], dist[j], atol=1e-7)
        checked += 1
    assert checked >= 10


# ------------------------------------------------------------------ candidates
@pytest.fixture(scope="module")
def terrain():
    """A bumpy 12 x 12-quad mesh (288 triangles) and its tables."""
    v, t = grid_mesh(12, 3.0)
    v[:, 2] = 0.1 * np.sin(2 * v[:, 0]) * np.cos(3 * v[:, 1])
    data = mesh_lib.build_mesh(v, t)
    tables = mesh_lib.pad_meshes([data])
    return v, t, data, Mesh(**{k: jnp.asarray(x[0]) for k, x in tables.items()})


def test_gather_finds_every_overlapping_triangle_and_counts_overflow(terrain, x64):
    v, t, data, mesh = terrain
    radius = 0.35
    window = tuple(int(x) for x in mesh_lib.candidate_window(data, radius))
    k = mesh_lib.candidate_count(data, window)
    centres = RNG.uniform(-1.7, 1.7, (N, 3)) * [1, 1, 0.1]
    g2 = geoms(np.zeros(3), np.eye(3), np.zeros(3))

    def run(c, kk):
        lo, hi = c - radius, c + radius
        tris, ovf = tm.gather(mesh, g2, c, lo, hi, radius, window, kk)
        return tris, ovf

    tri_lo, tri_hi = v[t].min(axis=1), v[t].max(axis=1)
    truth = [np.flatnonzero(np.all((tri_lo <= c + radius) & (tri_hi >= c - radius), axis=1))
             for c in centres]
    tris, ovf = jit(jax.vmap(lambda c: run(c, k)))(jnp.asarray(centres))
    assert np.all(np.asarray(ovf) == 0)
    for i in range(N):
        got = np.asarray(tris.a[i])[np.asarray(tris.valid[i])]
        want = v[t[truth[i], 0]]
        assert sorted(map(tuple, np.round(got, 4))) == sorted(map(tuple, np.round(want, 4)))
    small = 3
    _, ovf = jit(jax.vmap(lambda c: run(c, small)))(jnp.asarray(centres))
    np.testing.assert_array_equal(np.asarray(ovf), [max(len(x) - small, 0) for x in truth])


# ------------------------------------------------------------------ raycast
def _ray_model(add):
    b = jaxode.WorldBuilder()
    b.add_body(pos=(50.0, 50.0, 50.0))
    add(b)
    return b.build()


def test_raycast_mesh_equals_box_and_plane(x64):
    size = np.array([0.6, 0.4, 0.3])
    pose = dict(pos=(0.2, -0.1, 0.3), quat=tuple(Rotation.from_rotvec([0.3, -0.2, 0.5]).as_quat()[[3, 0, 1, 2]]))
    v, t = box_mesh(size)
    gv, gt = grid_mesh(3, 4.0)

    def with_mesh(b):
        b.add_trimesh(v, t, **pose)
        b.add_trimesh(gv, gt, pos=(0, 0, -0.5))

    def with_prims(b):
        b.add_box(size, **pose)
        b.add_plane((0, 0, 1), -0.5)

    o = RNG.uniform(-1.0, 1.0, (64, 3))
    o[:8] = [0.2, -0.1, 0.3]  # from inside the box
    d = RNG.normal(size=(64, 3))
    out = []
    for model in (_ray_model(with_mesh), _ray_model(with_prims)):
        state = jaxode.init(model)
        out.append(jit(lambda s: jaxode.raycast(model, s, o, d, max_dist=1.5,
                                                exclude_body=0))(state))
    (dm, pm, nm, gm), (dp, pp, np_, gp) = [[np.asarray(x) for x in r] for r in out]
    np.testing.assert_array_equal(gm, gp)
    assert (gm == 0).sum() > 8 and (gm == 1).sum() > 8
    hit = gm >= 0
    np.testing.assert_allclose(dm[hit], dp[hit], atol=1e-9)
    np.testing.assert_allclose(nm[hit], np_[hit], atol=1e-9)
    assert np.all(np.isinf(dm[~hit]))


# ------------------------------------------------------------------ mass
def test_mass_of_closed_meshes():
    size = np.array([0.6, 0.4, 0.3])
    v, t = box_mesh(size)
    m, ref = jaxode.mass.trimesh(v, t, density=700.0), jaxode.mass.box(size, density=700.0)
    np.testing.assert_allclose(m.mass, ref.mass, rtol=1e-12)
    np.testing.assert_allclose(m.com, 0.0, atol=1e-12)
    np.testing.assert_allclose(m.inertia, ref.inertia, rtol=1e-12, atol=1e-15)
    tv = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float) * 0.5
    tt = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    m = jaxode.mass.trimesh(tv, tt, total=2.0)
    # right tetrahedron of leg a: V = a^3 / 6, com = a / 4, int x^2 = a^5 / 60, int xy = a^5 / 120
    a, rho = 0.5, 2.0 / (0.5 ** 3 / 6)
    np.testing.assert_allclose(m.com, a / 4, rtol=1e-12)
    ii, ij = rho * 2 * a ** 5 / 60, -rho * a ** 5 / 120
    np.testing.assert_allclose(m.inertia, [[ii, ij, ij], [ij, ii, ij], [ij, ij, ii]], rtol=1e-12)
    with pytest.raises(ValueError, match="not closed"):
        jaxode.mass.trimesh(tv, tt[:3], density=1.0)
    with pytest.raises(ValueError, match="counter-clockwise"):
        jaxode.mass.trimesh(tv, tt[:, ::-1], density=1.0)


# ------------------------------------------------------------------ builder
def test_builder_errors():
    v, t = grid_mesh(1, 1.0)
    b = jaxode.WorldBuilder()
    b.add_body()
    with pytest.raises(ValueError, match=r"geom 0 \(trimesh\): triangles: triangle 1 .*outside \[0, 3\]"):
        b.add_trimesh(v, [[0, 1, 2], [0, 2, 4]])
    with pytest.raises(ValueError, match=r"triangle 0 .* degenerate"):
        b.add_trimesh(v, [[0, 1, 1]])
    with pytest.raises(ValueError, match=r"triangle 0 .* degenerate"):
        b.add_trimesh([[0, 0, 0], [1, 0, 0], [2, 0, 0]], [[0, 1, 2]])
    with pytest.raises(ValueError, match=r"vertices must be finite \(vertex 2"):
        b.add_trimesh(np.where(np.arange(4)[:, None] == 2, np.nan, v), t)
    with pytest.raises(ValueError, match=r"vertices must be a \(V, 3\)"):
        b.add_trimesh(v[:, :2], t)
    with pytest.raises(ValueError, match="integer vertex indices"):
        b.add_trimesh(v, t + 0.5)
    with pytest.raises(ValueError, match="MAX_MESH_TRIANGLES"):
        mesh_lib.build_mesh(v, np.tile(t, (3, 1)), "geom 0 (trimesh)", max_triangles=4)
    with pytest.raises(ValueError, match=r"body must be an existing body index in \[0, 0\]"):
        b.add_trimesh(v, t, body=1)
    with pytest.raises(ValueError, match="max_candidates"):
        b.add_trimesh(v, t, max_candidates=0)


def test_mesh_mesh_pairs_build_unless_static_or_filtered():
    """A pair of meshes with one on a body is a trimesh-trimesh pair (the
    mesh on the body as geom 1, see tests/test_trimesh_trimesh.py); two
    static meshes, or a pair the bits filter out, make none."""
    v, t = box_mesh(np.full(3, 0.2))

    def mesh_pairs(body_mesh, bits=0xFFFFFFFF):
        b = jaxode.WorldBuilder()
        i = b.add_body(pos=(0.0, 0.0, 1.0))
        b.add_sphere(0.1, body=i)
        b.add_trimesh(v, t, body=i if body_mesh else None, category_bits=bits, collide_bits=bits)
        b.add_trimesh(v, t, pos=(0.0, 0.0, -1.0), category_bits=1, collide_bits=1)
        model = b.build()
        return [(int(a), int(c)) for g in model.pair_groups
                if (g.type1, g.type2) == (ct.TRIMESH, ct.TRIMESH)
                for a, c in zip(g.geom1, g.geom2)]

    assert mesh_pairs(True) == [(1, 2)]
    assert mesh_pairs(False) == []  # static-static: never collide
    assert mesh_pairs(True, bits=2) == []


def test_edge_kinds():
    v, t = grid_mesh(2, 1.0)
    d = mesh_lib.build_mesh(v, t)
    # interior edges flat, boundary edges (both ends on one side of the square) convex
    def on_side(p, q):
        return any(np.isclose(abs(p[i]), 0.5) and np.isclose(p[i], q[i]) for i in (0, 1))

    boundary = np.array([[on_side(v[tri[k]], v[tri[(k + 1) % 3]]) for k in range(3)] for tri in t])
    assert boundary.sum() == 8
    np.testing.assert_array_equal(d.edge_kind, np.where(boundary, mesh_lib.CONVEX, mesh_lib.FLAT))
    centre = np.flatnonzero(np.all(np.isclose(v, 0), 1))[0]
    assert np.all(d.corner_kind[t == centre] == mesh_lib.FLAT)
    bv, bt = box_mesh(np.ones(3))
    kinds = mesh_lib.build_mesh(bv, bt).edge_kind
    assert set(np.unique(kinds)) == {mesh_lib.FLAT, mesh_lib.CONVEX}  # face diagonals, cube edges
    assert mesh_lib.build_mesh(bv, bt[:, ::-1]).edge_kind.min() == mesh_lib.CONCAVE  # inside out


# ------------------------------------------------------------------ dynamics
@pytest.fixture(scope="module")
def resting():
    """A box dropped flat on an 8 x 8-quad flat mesh (128 coplanar triangles,
    several under the box), a sphere and a box launched sliding across the
    seams (and the quads' diagonals), and another box with a tiny candidate cap on its
    own mesh (overflow); float32, 1.5 s at 100 Hz."""
    v, t = grid_mesh(8, 8.0)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    size = np.array([0.5, 0.4, 0.3])
    box = b.add_body(pos=(0.13, 2.07, 0.16), mass=jaxode.mass.box(size, density=500.0))
    b.add_box(size, body=box, collide_bits=1, category_bits=1)
    ball = b.add_body(pos=(-3.0, -2.3, 0.2), vel=(2.0, 0.0, 0.0),
                      mass=jaxode.mass.sphere(0.2, density=500.0))
    b.add_sphere(0.2, body=ball, surface=jaxode.Surface(mu=0.8), collide_bits=1, category_bits=1)
    slider = b.add_body(pos=(-3.0, -0.4, 0.15), vel=(2.0, 0.0, 0.0),
                        mass=jaxode.mass.box(size, density=500.0))
    b.add_box(size, body=slider, surface=jaxode.Surface(mu=0.05), collide_bits=1, category_bits=1)
    b.add_trimesh(v, t, category_bits=1, collide_bits=1)
    capped = b.add_body(pos=(0.0, 0.0, 10.16), mass=jaxode.mass.box(size, density=500.0))
    b.add_box(size, body=capped, collide_bits=2, category_bits=2)
    b.add_trimesh(v, t, pos=(0.0, 0.0, 10.0), category_bits=2, collide_bits=2, max_candidates=2)
    model = b.build()
    final, traj = jax.jit(lambda s: jaxode.rollout(model, s, 150, 0.01))(jaxode.init(model))
    return model, final, traj, size


def test_box_rests_on_mesh_as_on_plane(resting):
    model, final, traj, size = resting
    pos, quat = np.asarray(traj.pos), np.asarray(traj.quat)
    assert np.all(np.isfinite(pos)) and np.all(np.isfinite(quat))
    np.testing.assert_allclose(pos[-1, 0, 2], size[2] / 2, atol=2e-3)
    np.testing.assert_allclose(pos[-1, 0, :2], [0.13, 2.07], atol=1e-3)
    assert np.all(np.isfinite(np.asarray(final.contacts.pos)))
    tilt = 2 * np.arccos(np.clip(np.abs(quat[50:, 0, 0]), 0, 1))
    assert tilt.max() < 2e-3


def test_sphere_rolls_over_seams_without_catching(resting):
    model, final, traj, size = resting
    vel, pos = np.asarray(traj.vel)[:, 1], np.asarray(traj.pos)[:, 1]
    # sliding with friction turns v0 into rolling at 5/7 v0, whatever mu; then no loss
    rolling = vel[60:]
    np.testing.assert_allclose(rolling[:, 0], 2.0 * 5 / 7, rtol=0.02)
    assert np.abs(rolling[:, 1:]).max() < 0.02
    assert np.abs(pos[20:, 2] - 0.2).max() < 2e-3
    assert pos[-1, 0] > -1.0  # crossed the seams at x = -2 and -1 and diagonals


def test_box_slides_over_seams_without_catching(resting):
    model, final, traj, size = resting
    vel, pos, quat = (np.asarray(x)[:, 2] for x in (traj.vel, traj.pos, traj.quat))
    t = 0.01 * np.arange(1, len(vel) + 1)
    # Coulomb sliding on a plane: v = v0 - mu g t (pyramid friction along x is exact)
    np.testing.assert_allclose(vel[10:, 0], 2.0 - 0.05 * 9.81 * t[10:], atol=0.02)
    assert np.abs(vel[10:, 1:]).max() < 0.01
    np.testing.assert_allclose(pos[10:, 2], size[2] / 2, atol=2e-3)
    assert (2 * np.arccos(np.clip(np.abs(quat[10:, 0]), 0, 1))).max() < 2e-3
    assert pos[-1, 0] > -1.0  # crossed the seams at x = -2 and -1 and diagonals


def test_candidate_overflow_is_counted(resting):
    model, final, traj, size = resting
    groups = [g for g in model.pair_groups if g.type2 == ct.TRIMESH]
    assert {g.candidates for g in groups} and max(g.candidates for g in groups) >= 4
    assert int(final.overflow_pairs) == 0
    assert int(final.overflow_contacts) > 0  # the capped pair, every step it touches


def test_aabb_of_mesh_is_finite(resting):
    model, final, traj, size = resting
    gpos, grot = kinematics.geom_poses(model, final.pos, final.quat)
    lo, hi = kinematics.geom_aabbs(model, gpos, grot)
    g = int(model.trimesh_geom[0])
    # the mesh's exact extremes grown by the documented pad: TOUCH_ULPS ulps of the
    # axis's larger coordinate (4 m in x and y, 0 in z)
    pad = TOUCH_ULPS * np.finfo(np.asarray(lo).dtype).eps * np.array([4.0, 4.0, 0.0])
    np.testing.assert_allclose(np.asarray(lo[g]), np.array([-4, -4, 0]) - pad, atol=1e-6)
    np.testing.assert_allclose(np.asarray(hi[g]), np.array([4, 4, 0]) + pad, atol=1e-6)


def test_convex_and_cylinder_trimesh_run_and_a_box_hull_is_the_box(x64):
    """convex-trimesh with a box's corner hull gives box-trimesh's contacts
    (whose SAT depth is checked against scipy above); cylinder-trimesh is finite."""
    from jaxode.build import hull as hull_lib
    from jaxode.sim.collision.contact import Hull

    n = 20
    vs, ns = random_triangles(n)
    size = np.array([0.4, 0.3, 0.2])
    rot = Rotation.random(n, random_state=11).as_matrix()
    cen = vs.mean(1) + 0.1 * ns
    tris = tri_set(vs, ns)
    g2 = geoms(np.zeros((n, 3)), rot, np.zeros((n, 3)))
    tables = hull_lib.pad_hulls([hull_lib.build_hull(box_mesh(size)[0])])
    hull = Hull(**{k: jnp.asarray(v[0]) for k, v in tables.items()})
    cb = jit(jax.vmap(tm.box_trimesh))(geoms(cen, rot, np.tile(size, (n, 1))), g2, tris)
    cc = jit(jax.vmap(lambda a, b, t: tm.convex_trimesh(a, b, t, hull)))(
        geoms(cen, rot, np.tile([0, np.linalg.norm(size) / 2, 0], (n, 1))), g2, tris)
    assert np.asarray(cb.valid).sum() > 10
    np.testing.assert_array_equal(np.asarray(cb.valid), np.asarray(cc.valid))
    np.testing.assert_allclose(np.asarray(cb.depth), np.asarray(cc.depth), atol=1e-12)
    cy = jit(jax.vmap(tm.cylinder_trimesh))(geoms(cen, rot, np.tile([0.2, 0.3, 0], (n, 1))), g2, tris)
    assert np.asarray(cy.valid).sum() > 10 and np.all(np.isfinite(np.asarray(cy.pos)))


def test_closed_box_mesh_beside_an_edge_is_the_box(x64):
    """A ball and a box beside a face of a closed box mesh, near an adjacent
    face's flat diagonal, get the depth of the box as a convex hull (exact
    signed distance / SAT). Before: the ball took the adjacent face's normal
    with depth r - s > r, the box hull fell back to the triangle normal when
    an edge axis on a flat diagonal was refused (found by hypothesis)."""
    from jaxode.build import hull as hull_lib
    from jaxode.sim.collision.contact import Hull

    size = np.array([0.8, 0.6, 0.5])
    v, t = box_mesh(size)
    data = mesh_lib.build_mesh(v, t)
    hull = Hull(**{k: jnp.asarray(x[0]) for k, x in hull_lib.pad_hulls([hull_lib.build_hull(v)]).items()})
    mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
    tris = tm.place_triangles(mesh, jnp.zeros(3), jnp.eye(3), jnp.arange(len(data.tris)),
                              jnp.ones(len(data.tris), bool))
    mesh_g = geoms(np.zeros(3), np.eye(3), np.zeros(3))
    ball = geoms([0.5513, 0.2675, 0.0], np.eye(3), [0.3, 0, 0])
    a = jit(tm.sphere_trimesh)(ball, mesh_g, tris)
    b = jit(cv.sphere_convex)(ball, mesh_g, hull)
    ball_depths = np.max(np.where(a.valid, a.depth, -1)), b.depth[0]
    r = Rotation.from_rotvec([-2.0238042, 0.5059511, 1.0119021]).as_matrix()
    for p in ([-0.414, 0.24, 0.252], [0.55, 0.1, 0.2]):
        bx = geoms(p, r, [0.4, 0.3, 0.2])
        a = jit(tm.box_trimesh)(bx, mesh_g, tris)
        b = jit(cv.box_convex)(bx, mesh_g, hull)
        np.testing.assert_allclose(np.max(np.where(a.valid, a.depth, -1)),
                                   np.max(np.where(b.valid, b.depth, -1)), atol=1e-9)
    np.testing.assert_allclose(*ball_depths, atol=1e-9)
