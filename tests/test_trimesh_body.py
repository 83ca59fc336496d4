"""Triangle meshes on moving bodies (add_trimesh(body=i)).

Independent truths:
- the deepest point of a polyhedron below a plane is a vertex: mesh-plane
  and mesh-heightfield (planar terrain) depths equal the numpy maximum over
  the box's corners;
- sphere against a box mesh at a random pose: the depth is r minus the
  distance from the centre to the solid box (numpy clamp in the box frame);
- a closed 12-triangle box mesh on a body is a box: it rests on a plane at
  half its height with the box geom's contact depths, on a static box, and
  on a planar slope with its face on the slope; it slides as v0 - mu g t
  (Coulomb, ODE's semi-implicit step); a head-on elastic hit (bounce 1) of
  equal masses swaps the velocities, off a static sphere it reverses them;
- raycast and AABB of a tumbling, offset mesh: numpy slab intersection and
  corner extremes of the box at the body's pose read from the state;
- mass.trimesh of the offset mesh: the box's closed form moved by the
  parallel-axis theorem.
Dynamic scenes: two compiled rollouts (float32), module-scoped.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation
from truths import box_mesh, slide_recursion

import jaxode
from jaxode.sim import kinematics
from jaxode.build import meshes as mesh_lib
from jaxode.sim.collision import trimesh as tm
from jaxode.sim.collision import trimesh_ground as tg
from jaxode.sim.collision.contact import GeomWorld, Mesh

from fast_compile import OPTIONS as _OPTS  # noqa: E402
SIZE = np.array([0.5, 0.4, 0.3])


def jit(f):
    return jax.jit(f, compiler_options=_OPTS)


def quat_of(rot):
    return tuple(Rotation.from_matrix(rot).as_quat()[[3, 0, 1, 2]])


def mat_of(q):
    return Rotation.from_quat(np.asarray(q)[..., [1, 2, 3, 0]]).as_matrix()


@pytest.fixture()
def x64():
    with jax.enable_x64(True):
        yield


# ------------------------------------------------------------------ pair functions
def test_mesh_plane_and_heightfield_depth_is_the_deepest_corner(x64):
    n = 40
    rng = np.random.default_rng(1)
    v, t = box_mesh(SIZE)
    rot = Rotation.random(n, random_state=2).as_matrix()
    pos = rng.uniform(-0.3, 0.3, (n, 3)) + [0.0, 0.0, 0.35]
    size1 = np.tile([0.0, np.linalg.norm(SIZE) / 2, 0.0], (n, 1))
    g1 = GeomWorld(jnp.asarray(pos), jnp.asarray(rot), jnp.asarray(size1))
    corners = pos[:, None] + np.einsum("nij,vj->nvi", rot, v)  # (n, 8, 3)
    # plane z = 0.05 (frame z axis = normal)
    plane = GeomWorld(jnp.tile(jnp.array([0.0, 0.0, 0.05]), (n, 1)),
                      jnp.tile(jnp.eye(3), (n, 1, 1)), jnp.zeros((n, 3)))
    c = jit(jax.vmap(lambda a, b: tg.trimesh_plane(a, b, jnp.asarray(v), jnp.asarray(t))))(
        g1, plane)
    below = 0.05 - corners[..., 2]
    nbelow = (below >= 0).sum(1)
    assert 5 < (nbelow > 0).sum() < n
    np.testing.assert_array_equal(np.asarray(c.valid).sum(1), np.minimum(nbelow, 4))
    hit = nbelow > 0
    np.testing.assert_allclose(np.asarray(c.depth[:, 0])[hit], below.max(1)[hit], atol=1e-12)
    got = np.asarray(c.pos)[np.asarray(c.valid)]
    want = corners[below >= 0]
    assert all(np.min(np.linalg.norm(want - p, axis=1)) < 1e-12 for p in got)
    np.testing.assert_allclose(np.asarray(c.normal)[np.asarray(c.valid)], [[0, 0, 1]] * len(got))
    # planar terrain z = 0.05 + 0.2 x - 0.1 y over [-1, 1]^2 (3 x 4 samples)
    xs, ys = np.linspace(-1, 1, 3), np.linspace(-1, 1, 4)
    heights = 0.2 * xs[:, None] - 0.1 * ys[None, :]
    hf = GeomWorld(jnp.tile(jnp.array([0.0, 0.0, 0.05]), (n, 1)), jnp.tile(jnp.eye(3), (n, 1, 1)),
                   jnp.tile(jnp.array([2.0, 2.0, 0.0]), (n, 1)))
    c = jit(jax.vmap(lambda a, b: tg.trimesh_heightfield(
        a, b, jnp.asarray(v), jnp.asarray(t), jnp.asarray(heights), jnp.array([3, 4]))))(g1, hf)
    nrm = np.array([-0.2, 0.1, 1.0]) / np.linalg.norm([-0.2, 0.1, 1.0])
    terrain = 0.05 + 0.2 * corners[..., 0] - 0.1 * corners[..., 1]
    below = (terrain - corners[..., 2]) * nrm[2]  # distance below the terrain plane
    hit = below.max(1) > 1e-9
    assert 5 < hit.sum() < n
    np.testing.assert_array_equal(np.asarray(c.valid[:, 0]), hit)
    np.testing.assert_allclose(np.asarray(c.depth[:, 0])[hit], below.max(1)[hit], atol=1e-12)
    np.testing.assert_allclose(np.asarray(c.normal[:, 0])[hit], np.tile(nrm, (hit.sum(), 1)),
                               atol=1e-12)


def test_sphere_against_a_moving_box_mesh_is_sphere_box(x64):
    """gather + sphere_trimesh with the mesh at random world poses: depth r -
    distance to the solid box (numpy), normal from the box to the centre."""
    n, r = 40, 0.15
    rng = np.random.default_rng(3)
    v, t = box_mesh(SIZE)
    data = mesh_lib.build_mesh(v, t)
    mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
    rot = Rotation.random(n, random_state=4).as_matrix()
    pos = rng.uniform(-2, 2, (n, 3))
    # centres outside the box, within r of it: a point on the surface pushed out
    local = rng.uniform(-0.5, 0.5, (n, 3)) * SIZE
    ax = rng.integers(0, 3, n)
    local[np.arange(n), ax] = np.sign(local[np.arange(n), ax]) * (SIZE[ax] / 2)
    local += rng.uniform(-0.5, 2.0, (n, 3)) * 0.1 * np.sign(local)
    closest = np.clip(local, -SIZE / 2, SIZE / 2)
    dist = np.linalg.norm(local - closest, axis=1)
    keep = (dist > 1e-3) & (dist < r - 1e-3)
    cen = pos + np.einsum("nij,nj->ni", rot, local)
    window = tuple(int(x) for x in mesh_lib.candidate_window(data, r))
    k = mesh_lib.candidate_count(data, window)

    def one(c, p, R):
        g1 = GeomWorld(c, jnp.eye(3), jnp.array([r, 0.0, 0.0]))
        g2 = GeomWorld(p, R, jnp.array([0.0, data.radius, 0.0]))
        tris, ovf = tm.gather(mesh, g2, c, c - r, c + r, r, window, k)
        return tm.sphere_trimesh(g1, g2, tris), ovf

    c, ovf = jit(jax.vmap(one))(jnp.asarray(cen), jnp.asarray(pos), jnp.asarray(rot))
    assert keep.sum() >= 20 and np.all(np.asarray(ovf) == 0)
    np.testing.assert_array_equal(np.asarray(c.valid[:, 0])[keep], True)
    np.testing.assert_allclose(np.asarray(c.depth[:, 0])[keep], (r - dist)[keep], atol=1e-9)
    want_n = np.einsum("nij,nj->ni", rot, (local - closest) / np.maximum(dist, 1e-12)[:, None])
    np.testing.assert_allclose(np.asarray(c.normal[:, 0])[keep], want_n[keep], atol=1e-9)
    far = dist > r + 1e-3
    assert far.sum() >= 3 and not np.any(np.asarray(c.valid)[far])



def test_box_against_a_moving_box_mesh_is_never_too_deep(x64):
    """gather + box_trimesh with both at random poses: the deepest contact is
    never deeper than the penetration depth (scipy's Minkowski-difference
    hull) by more than ODE's 5 % face margin, at most 12 % shallower, and
    there is none when the boxes are apart. Boxes whose centre is inside the
    one-sided mesh are left out."""
    n = 120
    rng = np.random.default_rng(6)
    v, t = box_mesh(SIZE)
    data = mesh_lib.build_mesh(v, t)
    mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
    s1 = np.array([0.3, 0.2, 0.25])
    r1 = np.linalg.norm(s1) / 2
    rot1 = Rotation.random(n, random_state=7).as_matrix()
    rot2 = Rotation.random(n, random_state=8).as_matrix()
    p2 = rng.uniform(-1, 1, (n, 3))
    d = rng.normal(size=(n, 3))
    p1 = p2 + d / np.linalg.norm(d, axis=1)[:, None] * rng.uniform(0.3, 0.55, (n, 1))
    window = tuple(int(x) for x in mesh_lib.candidate_window(data, r1))
    k = mesh_lib.candidate_count(data, window)

    def one(a, ra, b, rb):
        g1 = GeomWorld(a, ra, jnp.asarray(s1))
        g2 = GeomWorld(b, rb, jnp.array([0.0, data.radius, 0.0]))
        half = jnp.abs(ra) @ (s1 / 2)
        tris, _ = tm.gather(mesh, g2, a, a - half, a + half, r1, window, k)
        return tm.box_trimesh(g1, g2, tris)

    c = jit(jax.vmap(one))(*map(jnp.asarray, (p1, rot1, p2, rot2)))
    got = np.where(np.asarray(c.valid[:, 0]), np.asarray(c.depth[:, 0]), -1.0)
    s = np.array([-0.5, 0.5])
    unit = np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T
    truth = np.empty(n)
    for i in range(n):
        a, b = p1[i] + (unit * s1) @ rot1[i].T, p2[i] + (unit * SIZE) @ rot2[i].T
        truth[i] = np.min(-ConvexHull((a[:, None] - b[None]).reshape(-1, 3)).equations[:, 3])
    inside = np.all(np.abs(np.einsum("nij,ni->nj", rot2, p1 - p2)) < SIZE / 2, axis=1)
    hit = (truth > 1e-6) & ~inside
    assert hit.sum() > 40
    assert np.all(got[hit] >= 0.88 * truth[hit])
    assert np.all(got[hit] <= 1.05 * truth[hit] + 1e-4)
    assert not np.any(got[truth < -1e-6] >= 0)


# ------------------------------------------------------------------ dynamics under gravity
SLOPE = 0.15  # [rad], the terrain z = 0.5 + tan(SLOPE) (x - 6)


def _own(k):
    """Bits of the k-th mesh body: it meets the ground and primitives, never another mesh."""
    return dict(category_bits=1 << k, collide_bits=1 << k)


@pytest.fixture(scope="module")
def ground():
    """On a plane z = 0: a mesh box (body 0) and a box geom (body 1) dropped
    flat, a mesh box sliding at 2 m/s with mu 0.2 (body 2), a mesh box on a
    static box pedestal of top z = 0.4 (body 3); on a planar heightfield slope
    a mesh box resting face down (body 4). float32, 1.5 s at 100 Hz."""
    v, t = box_mesh(SIZE)
    m = jaxode.mass.trimesh(v, t, density=500.0)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane()
    geoms = {}
    body = b.add_body(pos=(0.0, 0.0, 0.16), mass=m)
    geoms["mesh"] = b.add_trimesh(v, t, body=body, **_own(0))
    body = b.add_body(pos=(3.0, 0.0, 0.16), mass=jaxode.mass.box(SIZE, density=500.0))
    geoms["box"] = b.add_box(SIZE, body=body)
    body = b.add_body(pos=(-3.0, -2.0, 0.15), vel=(2.0, 0.0, 0.0), mass=m)
    b.add_trimesh(v, t, body=body, surface=jaxode.Surface(mu=0.2), **_own(1))
    b.add_box((1.0, 1.0, 0.4), pos=(-6.0, 0.0, 0.2))
    body = b.add_body(pos=(-6.1, 0.05, 0.4 + 0.16), mass=m)
    b.add_trimesh(v, t, body=body, **_own(2))
    xs = np.linspace(-1.0, 1.0, 9)
    b.add_heightfield(np.tile(np.tan(SLOPE) * xs[:, None], (1, 9)), size=(2.0, 2.0),
                      pos=(6.0, 0.0, 0.5))
    normal = np.array([-np.sin(SLOPE), 0.0, np.cos(SLOPE)])
    rot = Rotation.from_rotvec([0.0, -SLOPE, 0.0]).as_matrix()  # local z onto the normal
    body = b.add_body(pos=np.array([6.0, 0.0, 0.5]) + (SIZE[2] / 2 + 0.005) * normal,
                      quat=quat_of(rot), mass=m)
    b.add_trimesh(v, t, body=body, **_own(3))
    model = b.build()
    final, traj = jax.jit(lambda s: jaxode.rollout(model, s, 150, 0.01))(jaxode.init(model))
    return model, final, traj, geoms, m


def test_mesh_box_rests_on_plane_as_a_box(ground):
    model, final, traj, geoms, _ = ground
    pos, quat = np.asarray(traj.pos), np.asarray(traj.quat)
    assert np.all(np.isfinite(pos)) and int(final.overflow_contacts) == 0
    np.testing.assert_allclose(pos[-1, 0, 2], SIZE[2] / 2, atol=2e-3)
    np.testing.assert_allclose(pos[-1, 0, :2], [0.0, 0.0], atol=1e-4)
    tilt = 2 * np.arccos(np.clip(np.abs(quat[50:, 0, 0]), 0, 1))
    assert tilt.max() < 1e-3
    # same resting height and contact depths as the box geom (ODE-validated box-plane)
    np.testing.assert_allclose(pos[50:, 0, 2], pos[50:, 1, 2], atol=1e-5)
    c = jax.tree.map(np.asarray, final.contacts)
    depth = {k: np.sort(c.depth[c.valid & ((c.geom1 == g) | (c.geom2 == g))])
             for k, g in geoms.items()}
    assert len(depth["mesh"]) == 4
    np.testing.assert_allclose(depth["mesh"], depth["box"], atol=1e-5)


def test_mesh_box_slides_as_coulomb(ground):
    _, _, traj, _, _ = ground
    vel, pos, quat = (np.asarray(x)[:, 2] for x in (traj.vel, traj.pos, traj.quat))
    t = 0.01 * np.arange(1, len(vel) + 1)
    np.testing.assert_allclose(vel[5:, 0], np.maximum(2.0 - 0.2 * 9.81 * t[5:], 0.0), atol=0.02)
    np.testing.assert_allclose(pos[-1, 0] + 3.0, slide_recursion(2.0, 0.2, 0.01, 150), atol=0.01)
    assert np.abs(vel[5:, 1]).max() < 0.01
    np.testing.assert_allclose(pos[5:, 2], SIZE[2] / 2, atol=2e-3)


def test_mesh_box_rests_on_a_static_box(ground):
    _, _, traj, _, _ = ground
    pos = np.asarray(traj.pos)[:, 3]
    np.testing.assert_allclose(pos[-1], [-6.1, 0.05, 0.4 + SIZE[2] / 2], atol=2e-3)


def test_mesh_box_rests_on_a_heightfield_slope(ground):
    _, _, traj, _, _ = ground
    pos, quat = np.asarray(traj.pos)[:, 4], np.asarray(traj.quat)[:, 4]
    normal = np.array([-np.sin(SLOPE), 0.0, np.cos(SLOPE)])
    # height of the centre above the slope's plane, along its normal
    above = (pos - [6.0, 0.0, 0.5]) @ normal
    np.testing.assert_allclose(above[50:], SIZE[2] / 2, atol=2e-3)
    np.testing.assert_allclose(mat_of(quat[-1])[:, 2], normal, atol=1e-3)  # face on the slope
    np.testing.assert_allclose(pos[-1] - pos[50], 0.0, atol=2e-3)  # static friction holds


# ------------------------------------------------------------------ free flight
OFFSET = np.array([0.1, -0.05, 0.2])  # [m] the mesh's centre in its geom frame
R_OFF = Rotation.from_rotvec([0.2, 0.4, -0.3]).as_matrix()  # geom frame in the body frame


def test_mass_of_an_offset_mesh_is_the_box_moved():
    v, t = box_mesh(SIZE)
    m, ref = jaxode.mass.trimesh(v + OFFSET, t, density=700.0), jaxode.mass.box(SIZE, density=700.0)
    np.testing.assert_allclose(m.mass, 700.0 * np.prod(SIZE), rtol=1e-12)
    np.testing.assert_allclose(m.com, OFFSET, atol=1e-12)
    # inertia about the geom origin: the box's (m / 12 (b^2 + c^2), ...) plus the parallel axis
    box_i = m.mass / 12 * np.diag([SIZE[1] ** 2 + SIZE[2] ** 2, SIZE[0] ** 2 + SIZE[2] ** 2,
                                   SIZE[0] ** 2 + SIZE[1] ** 2])
    np.testing.assert_allclose(ref.inertia, box_i, rtol=1e-12)
    shifted = box_i + m.mass * (OFFSET @ OFFSET * np.eye(3) - np.outer(OFFSET, OFFSET))
    np.testing.assert_allclose(m.inertia, shifted, rtol=1e-12, atol=1e-15)


@pytest.fixture(scope="module")
def free():
    """No gravity, bounce 1, rigid contacts (cfm 0): a mesh box at 1 m/s hits a resting sphere of the
    same mass head-on (bodies 0, 1), another hits a static sphere (body 2); a
    mesh box off its geom origin, on a rotated geom offset, tumbles (body 3,
    no collisions). float32, 0.6 s at 100 Hz."""
    v, t = box_mesh(SIZE)
    m = jaxode.mass.trimesh(v, t, density=500.0)
    hard = jaxode.Surface(bounce=1.0)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0), cfm=0.0)  # rigid contacts
    body = b.add_body(pos=(-0.6, 0.0, 0.0), vel=(1.0, 0.0, 0.0), mass=m)
    b.add_trimesh(v, t, body=body, surface=hard, **_own(0))
    body = b.add_body(mass=jaxode.mass.sphere(0.15, total=m.mass))
    b.add_sphere(0.15, body=body, surface=hard)
    body = b.add_body(pos=(-0.6, 2.0, 0.0), vel=(1.0, 0.0, 0.0), mass=m)
    b.add_trimesh(v, t, body=body, surface=hard, **_own(1))
    b.add_sphere(0.15, pos=(0.0, 2.0, 0.0), surface=hard)
    mt = jaxode.mass.trimesh(v + OFFSET, t, density=500.0)
    mt = jaxode.mass.rotate(jaxode.mass.translate(mt, -OFFSET), R_OFF)
    body = b.add_body(pos=(0.3, -5.0, 0.2), vel=(0.2, 0.1, 0.0), angvel=(0.3, 1.0, -0.5), mass=mt)
    tumbler = b.add_trimesh(v + OFFSET, t, body=body, pos=-R_OFF @ OFFSET, quat=quat_of(R_OFF),
                            category_bits=0, collide_bits=0)
    model = b.build()
    final, traj = jax.jit(lambda s: jaxode.rollout(model, s, 60, 0.01))(jaxode.init(model))
    return model, final, traj, tumbler


def test_elastic_hits_of_a_moving_mesh(free):
    _, _, traj, _ = free
    vel, angvel = np.asarray(traj.vel), np.asarray(traj.angvel)
    after = slice(35, None)  # contact from t = 0.2 s
    # equal masses, head-on, elastic: the velocities swap (momentum and energy)
    np.testing.assert_allclose(vel[after, 0, 0], 0.0, atol=1e-3)
    np.testing.assert_allclose(vel[after, 1, 0], 1.0, atol=1e-3)
    np.testing.assert_allclose(vel[:, 0, 0] + vel[:, 1, 0], 1.0, atol=1e-5)
    # off a static sphere: the velocity reverses
    np.testing.assert_allclose(vel[after, 2, 0], -1.0, atol=1e-3)
    assert np.abs(vel[:, :3, 1:]).max() < 1e-4 and np.abs(angvel[:, :3]).max() < 1e-3


def test_raycast_and_aabb_of_a_tumbling_offset_mesh(free):
    model, final, traj, tumbler = free
    centre = np.asarray(final.pos)[3].astype(np.float64)  # the mesh's centre is the body origin
    rot = mat_of(np.asarray(final.quat)[3].astype(np.float64)) @ R_OFF
    assert np.linalg.norm(centre - [0.3, -5.0, 0.2]) > 0.1  # it moved and turned
    assert np.degrees(np.arccos((np.trace(rot.T @ R_OFF) - 1) / 2)) > 20
    corners = centre + box_mesh(SIZE)[0] @ rot.T
    gpos, grot = kinematics.geom_poses(model, final.pos, final.quat)
    lo, hi = kinematics.geom_aabbs(model, gpos, grot)
    np.testing.assert_allclose(np.asarray(lo[tumbler]), corners.min(0), atol=1e-5)
    np.testing.assert_allclose(np.asarray(hi[tumbler]), corners.max(0), atol=1e-5)
    rng = np.random.default_rng(5)
    o = centre + rng.normal(size=(64, 3)) * 0.6
    d = centre + rng.uniform(-0.3, 0.3, (64, 3)) - o
    mask = np.arange(model.ngeom) == tumbler
    dist, point, normal, geom = (np.asarray(x) for x in jit(
        lambda s: jaxode.raycast(model, s, o, d, max_dist=5.0, geom_mask=mask))(final))
    # slab method in the box frame
    ol, dl = (o - centre) @ rot, d @ rot / np.linalg.norm(d, axis=1)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (-SIZE / 2 - ol) / dl, (SIZE / 2 - ol) / dl
    tin = np.minimum(t1, t2).max(1)
    tout = np.maximum(t1, t2).min(1)
    outside = np.any(np.abs(ol) > SIZE / 2, axis=1)
    hit = outside & (tin <= tout) & (tin > 0)
    assert hit.sum() > 20
    np.testing.assert_array_equal(geom[hit], tumbler)
    np.testing.assert_allclose(dist[hit], tin[hit], atol=1e-5)
    face = np.argmax(np.minimum(t1, t2), axis=1)
    want_n = -np.sign(dl[np.arange(64), face])[:, None] * rot.T[face]
    np.testing.assert_allclose(normal[hit], want_n[hit], atol=1e-5)
    assert np.all(geom[outside & ~hit] == -1)
