"""Triangle mesh against triangle mesh (jaxode.sim.collision.trimesh_trimesh).

Independent truths:
- a closed 12-triangle box mesh is a box: a box mesh A whose lowest corner
  (any orientation) sits d below the top face of a box mesh B, well inside
  that face, penetrates by exactly d along B's face normal (analytic), and
  ODE's dBoxBox (``box.box_box``, ODE-validated) says the same for the two
  boxes; face-face poses are the orientation with A's face down;
- moving and turning both meshes together changes nothing (rigid motion);
  swapping which mesh is geom 1 flips the normal; lifted clear, nothing;
- a box mesh on a tiled mesh floor (128 coplanar triangles, seams under
  the box) behaves as a box geom on a plane (ODE's box-plane): resting
  height, no tilt, no creep, contact depth; and slides as v0 - mu g t
  (Coulomb, ODE's semi-implicit step).
Pair checks go through the whole narrowphase (gather, builder windows) in
float64; the dynamic scene is float32. Compiled functions are module-scoped.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation
from truths import box_mesh, grid_mesh, slide_recursion

import jaxode
from jaxode.sim import kinematics, narrowphase
from jaxode.sim.collision import box as box_pairs
from jaxode.sim.collision import contact as ct
from jaxode.sim.collision.contact import GeomWorld

SIZE_A = np.array([0.5, 0.4, 0.3])  # [m] the mesh that pokes in
SIZE_B = np.array([1.2, 1.0, 0.2])  # [m] the mesh poked into
STATIC_AT = np.array([10.0, 0.0, 0.0])  # [m] where the static copy of B sits
FAR = np.array([[-10.0, 0.0, 0.0], [-20.0, 0.0, 0.0], [-30.0, 0.0, 0.0]])  # parking spots
SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
ID = (1.0, 0.0, 0.0, 0.0)
from fast_compile import OPTIONS as _OPTS  # noqa: E402


def jit(f):
    """jax.jit with cheap compilation (these are small, run-once functions)."""
    return jax.jit(f, compiler_options=_OPTS)


def quat_of(rot):
    return np.asarray(Rotation.from_matrix(rot).as_quat()[[3, 0, 1, 2]])


@pytest.fixture()
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def scene():
    """float64 model: geom 0 a static box mesh B at STATIC_AT (added first,
    so the builder must swap it into geom 2); body 0: mesh A (geom 1),
    body 1: mesh B (geom 2), body 2: mesh A (geom 3). Pair (1, 2) is A vs B,
    pair (2, 3) the same meshes with the roles swapped, (1, 0) A vs static
    B. Returns the model and a compiled contacts(pos (3, 3), quat (3, 4))."""
    va, ta = box_mesh(SIZE_A)
    vb, tb = box_mesh(SIZE_B)
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
        b.add_trimesh(vb, tb, pos=STATIC_AT)
        for verts, tris in ((va, ta), (vb, tb), (va, ta)):
            b.add_trimesh(verts, tris, body=b.add_body(mass=jaxode.mass.box(SIZE_A, density=500.0)))
        model = b.build(pair_capacity=3)  # at most 3 pairs touch in any call below

    @jit
    def contacts(pos, quat):
        gpos, grot = kinematics.geom_poses(model, pos, quat)
        lo, hi = kinematics.geom_aabbs(model, gpos, grot)
        c, _, _, ovf = narrowphase.collide(model, gpos, grot, lo, hi)
        return c, ovf

    return model, contacts


def pair(c, g1, g2):
    """The valid contacts of geoms (g1, g2): depth (n,), normal (n, 3), pos (n, 3)."""
    c = jax.tree.map(np.asarray, c)
    m = c.valid & (c.geom1 == g1) & (c.geom2 == g2)
    return c.depth[m], c.normal[m], c.pos[m]


def deepest(c, g1, g2):
    d, n, _ = pair(c, g1, g2)
    assert len(d) > 0, f"no contact between geoms {g1} and {g2}"
    k = np.argmax(d)
    return d[k], n[k]


def poke(rot_a, lateral, d):
    """A (rotation rot_a) placed so that its lowest corner is d [m] below B's
    top face (B centred, unrotated), centre offset ``lateral`` (2,) [m]."""
    corners = box_mesh(SIZE_A)[0] @ rot_a.T
    z = SIZE_B[2] / 2 - d - corners[:, 2].min()
    return np.array([lateral[0], lateral[1], z])


def moved(motion, pos, rot):
    """A rigid motion (R, t) applied to a pose."""
    r, t = motion
    return r @ pos + t, r @ rot


def run(contacts, poses):
    """contacts of body poses [(pos, rot) x 3] (None: parked)."""
    pos = np.array([FAR[k] if p is None else p[0] for k, p in enumerate(poses)])
    quat = np.array([ID if p is None else quat_of(p[1]) for p in poses])
    c, ovf = contacts(jnp.asarray(pos), jnp.asarray(quat))
    assert int(ovf) == 0
    return c


_BOX_BOX = jit(box_pairs.box_box)


def box_box(pos1, rot1, pos2, rot2):
    """ODE's dBoxBox for the two boxes (A geom 1): deepest depth and normal."""
    g = [GeomWorld(jnp.asarray(p), jnp.asarray(r), jnp.asarray(s))
         for p, r, s in ((pos1, rot1, SIZE_A), (pos2, rot2, SIZE_B))]
    c = _BOX_BOX(*g)
    k = int(np.argmax(np.where(c.valid, c.depth, -1.0)))
    return float(c.depth[k]), np.asarray(c.normal[k])


rotations = st.integers(0, 2**31 - 1).map(lambda s: Rotation.random(random_state=s).as_matrix())
faces_down = st.sampled_from([np.eye(3), Rotation.from_rotvec([np.pi / 2, 0, 0]).as_matrix(),
                              Rotation.from_rotvec([0, np.pi / 2, 0]).as_matrix()])
yaws = st.floats(0.0, 2 * np.pi).map(lambda a: Rotation.from_rotvec([0, 0, a]).as_matrix())
laterals = st.tuples(st.floats(-0.1, 0.1), st.floats(-0.1, 0.1))
depths = st.floats(0.002, 0.04)
motions = st.tuples(rotations, st.tuples(*[st.floats(-2.0, 2.0)] * 3).map(np.array))


# ------------------------------------------------------------------ pair checks
@SETTINGS
@given(rot=rotations, lateral=laterals, d=depths, motion=motions)
def test_corner_into_face_is_the_analytic_depth(scene, x64, rot, lateral, d, motion):
    """Any orientation, lowest corner d deep: depth d along B's face normal,
    as dBoxBox; rigid-motion invariant; swapped roles flip the normal."""
    _, contacts = scene
    pa, ra = moved(motion, poke(rot, lateral, d), rot)
    pb, rb = moved(motion, np.zeros(3), np.eye(3))
    up = motion[0][:, 2]
    depth, normal = deepest(run(contacts, [(pa, ra), (pb, rb), None]), 1, 2)
    np.testing.assert_allclose(depth, d, atol=1e-9)
    np.testing.assert_allclose(normal, up, atol=1e-9)
    ode_depth, ode_normal = box_box(pa, ra, pb, rb)
    np.testing.assert_allclose(depth, ode_depth, atol=1e-9)
    np.testing.assert_allclose(normal, ode_normal, atol=1e-9)
    # roles swapped: mesh B (geom 2) is geom 1 of the pair with mesh A (geom 3)
    depth_s, normal_s = deepest(run(contacts, [None, (pb, rb), (pa, ra)]), 2, 3)
    np.testing.assert_allclose(depth_s, d, atol=1e-9)
    np.testing.assert_allclose(normal_s, -up, atol=1e-9)


@SETTINGS
@given(rot=faces_down, yaw=yaws, lateral=laterals, d=depths, motion=motions)
def test_face_on_face_is_the_analytic_depth(scene, x64, rot, yaw, lateral, d, motion):
    """A face down on B's top face, any yaw: every contact d deep along
    B's normal, as dBoxBox; both roles; against the static copy of B too."""
    _, contacts = scene
    ra0 = yaw @ rot
    pa, ra = moved(motion, poke(ra0, lateral, d), ra0)
    pb, rb = moved(motion, np.zeros(3), np.eye(3))
    up = motion[0][:, 2]
    c = run(contacts, [(pa, ra), (pb, rb), None])
    dep, nor, _ = pair(c, 1, 2)
    assert len(dep) >= 4  # the face's support polygon, not a point
    np.testing.assert_allclose(dep, d, atol=1e-9)
    np.testing.assert_allclose(nor, np.broadcast_to(up, nor.shape), atol=1e-9)
    ode_depth, ode_normal = box_box(pa, ra, pb, rb)
    np.testing.assert_allclose(dep.max(), ode_depth, atol=1e-9)
    np.testing.assert_allclose(up, ode_normal, atol=1e-9)
    depth_s, normal_s = deepest(run(contacts, [None, (pb, rb), (pa, ra)]), 2, 3)
    np.testing.assert_allclose(depth_s, d, atol=1e-9)
    np.testing.assert_allclose(normal_s, -up, atol=1e-9)
    # the static B (geom 0, unmoved) under body 0: the pair is (1, 0)
    c = run(contacts, [(poke(ra0, lateral, d) + STATIC_AT, ra0), None, None])
    depth_t, normal_t = deepest(c, 1, 0)
    np.testing.assert_allclose(depth_t, d, atol=1e-9)
    np.testing.assert_allclose(normal_t, [0.0, 0.0, 1.0], atol=1e-9)


@SETTINGS
@given(rot=rotations, lateral=laterals, gap=st.floats(1e-4, 0.05), motion=motions)
def test_separated_meshes_make_no_contact(scene, x64, rot, lateral, gap, motion):
    _, contacts = scene
    pa, ra = moved(motion, poke(rot, lateral, -gap), rot)
    pb, rb = moved(motion, np.zeros(3), np.eye(3))
    c = run(contacts, [(pa, ra), (pb, rb), (pa, ra)])
    assert len(pair(c, 1, 2)[0]) == 0 and len(pair(c, 2, 3)[0]) == 0


# ------------------------------------------------------------------ builder
def test_builder_pairs_meshes_with_one_on_a_body(scene):
    model, _ = scene
    (grp,) = [g for g in model.pair_groups if (g.type1, g.type2) == (ct.TRIMESH, ct.TRIMESH)]
    got = sorted(zip(np.asarray(grp.geom1).tolist(), np.asarray(grp.geom2).tolist()))
    # static geom 0 is always geom 2; bodies' meshes in index order
    assert got == [(1, 0), (1, 2), (1, 3), (2, 0), (2, 3), (3, 0)]
    assert grp.candidates == 12 and grp.candidates1 == 12  # all of a box mesh's triangles


def test_two_static_meshes_make_no_pair():
    v, t = box_mesh(SIZE_A)
    b = jaxode.WorldBuilder()
    b.add_trimesh(v, t)
    b.add_trimesh(v, t, pos=(0.1, 0.0, 0.0))
    b.add_sphere(0.1, body=b.add_body(pos=(5.0, 0.0, 0.0), mass=jaxode.mass.sphere(0.1, density=1.0)))
    model = b.build()
    assert all((g.type1, g.type2) != (ct.TRIMESH, ct.TRIMESH) for g in model.pair_groups)


def test_a_pair_without_collider_is_still_refused(monkeypatch):
    table = dict(narrowphase.PAIR_FUNCTIONS)
    del table[(ct.TRIMESH, ct.TRIMESH)]
    monkeypatch.setattr(narrowphase, "PAIR_FUNCTIONS", table)
    v, t = box_mesh(SIZE_A)
    b = jaxode.WorldBuilder()
    b.add_trimesh(v, t)
    b.add_trimesh(v, t, body=b.add_body(mass=jaxode.mass.box(SIZE_A, density=1.0)))
    with pytest.raises(ValueError, match=r"\(trimesh-trimesh\): no collider"):
        b.build()


# ------------------------------------------------------------------ dynamics
STEPS = 150
EDGE = 0.4  # [m] the regular tetrahedron's edge
TETRA_AT = np.array([-1.2, 1.2, 0.3])
STACK_AT = np.array([1.2, -1.0])


def tetrahedron(edge):
    """A regular tetrahedron of ``edge`` [m] centred on its centroid:
    vertices (4, 3), triangles (4, 3) counter-clockwise seen from outside."""
    v = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float) * edge / 8**0.5
    t = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    outward = np.einsum("ij,ij->i", np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]),
                        v[t].mean(1))
    t[outward < 0] = t[outward < 0][:, ::-1]
    return v, t


@pytest.fixture(scope="module")
def floor():
    """float32, 1.5 s at 100 Hz. On the static tiled floor mesh (z = 0): box
    mesh A resting at (0.1, 1.05), across the seams (body 0); box mesh A
    thrown at 2 m/s along x with mu 0.2 (body 1); at STACK_AT a box mesh
    (body 3) with another on top (body 4, offset by (0.05, -0.05)); a
    regular tetrahedron mesh dropped turned from 0.3 m at TETRA_AT (body 5).
    On a plane (its own collide bits): a box geom of A's size (body 2), the
    reference."""
    va, ta = box_mesh(SIZE_A)
    m = jaxode.mass.trimesh(va, ta, density=500.0)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    mine = dict(category_bits=1, collide_bits=1)
    b.add_trimesh(*grid_mesh(8, 4.0), **mine)
    b.add_trimesh(va, ta, body=b.add_body(pos=(0.1, 1.05, 0.16), mass=m), **mine)
    b.add_trimesh(va, ta, body=b.add_body(pos=(-1.5, -1.0, 0.15), vel=(2.0, 0.0, 0.0), mass=m),
                  surface=jaxode.Surface(mu=0.2), **mine)
    ref = dict(category_bits=2, collide_bits=2)
    b.add_plane(**ref)
    b.add_box(SIZE_A, body=b.add_body(pos=(0.0, 5.0, 0.16), mass=m), **ref)
    for z, dxy in ((0.16, (0.0, 0.0)), (0.47, (0.05, -0.05))):
        b.add_trimesh(va, ta, body=b.add_body(pos=(*(STACK_AT + dxy), z), mass=m), **mine)
    vt, tt = tetrahedron(EDGE)
    turned = quat_of(Rotation.from_rotvec([0.3, 0.5, 0.1]).as_matrix())
    b.add_trimesh(vt, tt, body=b.add_body(pos=TETRA_AT, quat=tuple(turned),
                                          mass=jaxode.mass.trimesh(vt, tt, density=500.0)), **mine)
    model = b.build(pair_capacity=5)  # the meshes on the floor, and the stack
    final, traj = jit(lambda s: jaxode.rollout(model, s, STEPS, 0.01))(jaxode.init(model))
    return model, final, traj


def tilt_of(quat):
    """Angle [rad] between a body's z axis and the world's (float32-safe:
    from the quaternion's x, y parts, not from w)."""
    return 2 * np.arcsin(np.minimum(1.0, np.hypot(quat[..., 1], quat[..., 2])))


def test_box_mesh_rests_on_a_mesh_floor_as_a_box_on_a_plane(floor):
    """As the box geom on the plane (ODE's box-plane): the same 4 corner
    contacts at the same depths (ODE's soft contacts, each a CFM spring,
    sink 3.7e-5 m here), the same height, no creep, tilt or jitter; the
    floor's seams under the box add no contact."""
    model, final, traj = floor
    pos, quat = np.asarray(traj.pos), np.asarray(traj.quat)
    assert np.all(np.isfinite(pos)) and int(final.overflow_contacts) == 0
    np.testing.assert_allclose(pos[-1, 0, 2], SIZE_A[2] / 2, atol=2e-3)
    np.testing.assert_allclose(pos[50:, 0, 2], pos[50:, 2, 2], atol=1e-6)
    np.testing.assert_allclose(pos[50:, 0, :2], np.broadcast_to([0.1, 1.05], (STEPS - 50, 2)),
                               atol=1e-5)
    assert tilt_of(quat[50:, 0]).max() < 1e-5
    assert np.ptp(pos[100:, 0, 2]) < 1e-6
    c = jax.tree.map(np.asarray, final.contacts)
    mesh = c.valid & (c.geom1 == 1)
    ref = c.valid & (c.geom1 == 4)
    assert mesh.sum() == 4 and ref.sum() == 4
    np.testing.assert_allclose(c.normal[mesh], np.broadcast_to([0, 0, 1], (4, 3)), atol=1e-5)
    corners = np.array([[x, y] for x in (-0.15, 0.35) for y in (0.85, 1.25)])
    np.testing.assert_allclose(np.sort(c.pos[mesh][:, :2], 0), np.sort(corners, 0), atol=1e-4)
    np.testing.assert_allclose(np.sort(c.depth[mesh]), np.sort(c.depth[ref]), atol=1e-6)


def test_box_mesh_slides_on_a_mesh_floor_as_coulomb(floor):
    _, _, traj = floor
    vel, pos = (np.asarray(x)[:, 1] for x in (traj.vel, traj.pos))
    t = 0.01 * np.arange(1, len(vel) + 1)
    np.testing.assert_allclose(vel[5:, 0], np.maximum(2.0 - 0.2 * 9.81 * t[5:], 0.0), atol=0.02)
    np.testing.assert_allclose(pos[-1, 0] + 1.5, slide_recursion(2.0, 0.2, 0.01, STEPS),
                               atol=0.01)
    assert np.abs(vel[5:, 1]).max() < 0.01
    np.testing.assert_allclose(pos[5:, 2], SIZE_A[2] / 2, atol=2e-3)


def test_box_mesh_rests_on_a_box_mesh(floor):
    """Both meshes on bodies: the top box rests one box height above the
    bottom one (within the two soft-contact sinks), unmoved, not tilted
    (box geoms in this pose, ODE's dBoxBox: top at 0.44986-0.44989 m)."""
    _, final, traj = floor
    pos, quat = np.asarray(traj.pos), np.asarray(traj.quat)
    np.testing.assert_allclose(pos[50:, 3, 2], SIZE_A[2] / 2, atol=2e-4)
    np.testing.assert_allclose(pos[50:, 4, 2], 1.5 * SIZE_A[2], atol=2e-4)
    np.testing.assert_allclose(pos[50:, 4, :2] - STACK_AT, np.broadcast_to(
        [0.05, -0.05], (STEPS - 50, 2)), atol=5e-4)
    assert tilt_of(quat[50:, 3:5]).max() < 1e-3
    c = jax.tree.map(np.asarray, final.contacts)
    both = c.valid & (c.geom1 == 5) & (c.geom2 == 6)  # geom 1 the lower index
    # (some of) the overlap rectangle's corners: one of each box's, two rim
    # crossings; as dBoxBox, a corner whose sink is gone drops out at times
    assert 3 <= both.sum() <= 4
    np.testing.assert_allclose(c.normal[both], np.broadcast_to([0, 0, -1], (int(both.sum()), 3)),
                               atol=1e-3)
    x0, y0 = STACK_AT
    want = np.array([[x, y] for x in (x0 - 0.2, x0 + 0.25) for y in (y0 - 0.2, y0 + 0.15)])
    assert all(np.min(np.linalg.norm(want - p[:2], axis=1)) < 1e-3 for p in c.pos[both])


def test_tetrahedron_mesh_lands_face_down_at_its_inradius(floor):
    """Dropped turned, it tumbles onto a face (a regular tetrahedron has no
    other stable rest) and stays: centroid at the inradius edge / sqrt(24)."""
    _, _, traj = floor
    pos, quat = np.asarray(traj.pos)[:, 5], np.asarray(traj.quat)[:, 5]
    np.testing.assert_allclose(pos[100:, 2], EDGE / 24**0.5, atol=2e-4)
    np.testing.assert_allclose(pos[100:] - pos[100], 0.0, atol=1e-4)
    v, t = tetrahedron(EDGE)
    rot = Rotation.from_quat(quat[-1][[1, 2, 3, 0]]).as_matrix()
    n = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]) @ rot.T
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    assert n[:, 2].min() < -1 + 1e-6  # a face lies on the floor
