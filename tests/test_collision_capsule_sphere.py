"""Sphere/capsule narrowphase against hand geometry (ODE conventions)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxode.sim.collision import capsule as cap
from jaxode.sim.collision import sphere as sph
from jaxode.sim.collision.contact import GeomWorld

FUNCS = {
    "sphere_plane": (sph.sphere_plane, sph.SPHERE_PLANE_NCON),
    "sphere_sphere": (sph.sphere_sphere, sph.SPHERE_SPHERE_NCON),
    "sphere_box": (sph.sphere_box, sph.SPHERE_BOX_NCON),
    "capsule_plane": (cap.capsule_plane, cap.CAPSULE_PLANE_NCON),
    "capsule_sphere": (cap.capsule_sphere, cap.CAPSULE_SPHERE_NCON),
    "capsule_capsule": (cap.capsule_capsule, cap.CAPSULE_CAPSULE_NCON),
    "capsule_box": (cap.capsule_box, cap.CAPSULE_BOX_NCON),
}
# one jitted vmapped wrapper per function, reused by every test
JV = {k: jax.jit(jax.vmap(f)) for k, (f, _) in FUNCS.items()}

I3 = np.eye(3)


def rot_axis_angle(axis, ang):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return I3 + np.sin(ang) * K + (1 - np.cos(ang)) * K @ K


def geom(pos, rot=I3, size=(0, 0, 0)):
    return GeomWorld(np.asarray(pos, np.float32), np.asarray(rot, np.float32),
                     np.asarray(size, np.float32))


def batch(gs):
    return GeomWorld(*[jnp.stack([jnp.asarray(getattr(g, f)) for g in gs])
                       for f in GeomWorld._fields])


def collide(name, g1, g2):
    c = JV[name](batch([g1]), batch([g2]))
    out = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), c)
    assert out.depth.shape == (FUNCS[name][1],)
    for x in (out.pos, out.normal, out.depth):
        assert np.all(np.isfinite(x))
    # invalid slots are zeros, valid normals unit
    inv = ~out.valid
    assert np.all(out.depth[inv] == 0) and np.all(out.pos[inv] == 0)
    np.testing.assert_allclose(np.linalg.norm(out.normal[out.valid], axis=-1), 1, atol=1e-5)
    return out


def check_separates(name, g1, g2, c, tol=2e-4):
    """Moving geom 1 by +normal*depth (deepest valid slot) resolves the contact."""
    i = int(np.argmax(np.where(c.valid, c.depth, -np.inf)))
    moved = g1._replace(pos=(g1.pos + c.normal[i] * (c.depth[i] + 1e-6)).astype(np.float32))
    c2 = collide(name, moved, g2)
    assert np.all(np.where(c2.valid, c2.depth, 0) <= tol), c2.depth


def valid_sorted(c):
    return c.depth[c.valid]


# ---------------------------------------------------------------- sphere-plane
def test_sphere_plane_resting():
    s, p = geom([1, 2, 0.4], size=(0.5, 0, 0)), geom([0, 0, 0])
    c = collide("sphere_plane", s, p)
    assert c.valid[0]
    np.testing.assert_allclose(c.depth[0], 0.1, atol=1e-6)
    np.testing.assert_allclose(c.normal[0], [0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(c.pos[0], [1, 2, -0.1], atol=1e-6)
    check_separates("sphere_plane", s, p, c)
    c = collide("sphere_plane", geom([0, 0, 0.6], size=(0.5, 0, 0)), p)
    assert not c.valid[0]
    # centre below the plane: half-space, deep contact
    c = collide("sphere_plane", geom([0, 0, -2.0], size=(0.5, 0, 0)), p)
    assert c.valid[0] and abs(c.depth[0] - 2.5) < 1e-6


def test_sphere_plane_tilted():
    R = rot_axis_angle([1, 0, 0], 0.3)
    n = R[:, 2]
    p0 = np.array([0.2, -0.1, 0.5])
    p = geom(p0, R)
    s = geom(p0 + n * 0.7 + R[:, 0] * 0.3, size=(1.0, 0, 0))
    c = collide("sphere_plane", s, p)
    np.testing.assert_allclose(c.depth[0], 0.3, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], n, atol=1e-6)
    check_separates("sphere_plane", s, p, c)


# --------------------------------------------------------------- sphere-sphere
def test_sphere_sphere():
    a, b = geom([0, 0, 0], size=(1, 0, 0)), geom([3, 0, 0], size=(1, 0, 0))
    assert not collide("sphere_sphere", a, b).valid[0]
    b = geom([0, 1.5, 0], size=(1, 0, 0))
    c = collide("sphere_sphere", a, b)
    assert c.valid[0]
    np.testing.assert_allclose(c.depth[0], 0.5, atol=1e-6)
    np.testing.assert_allclose(c.normal[0], [0, -1, 0], atol=1e-6)
    np.testing.assert_allclose(c.pos[0], [0, 0.75, 0], atol=1e-6)
    check_separates("sphere_sphere", a, b, c)
    # concentric: finite, ODE fallback normal (1,0,0), depth r1+r2
    c = collide("sphere_sphere", a, geom([0, 0, 0], size=(0.5, 0, 0)))
    assert c.valid[0]
    np.testing.assert_allclose(c.normal[0], [1, 0, 0])
    np.testing.assert_allclose(c.depth[0], 1.5)


# ------------------------------------------------------------------ sphere-box
R_BOX = rot_axis_angle([1, 2, 3], 0.7)
BOX = geom([0.3, -0.2, 0.1], R_BOX, (2.0, 1.0, 0.6))


def _in_box(local):
    return BOX.pos + R_BOX @ np.asarray(local, float)


@pytest.mark.parametrize("local,depth,nloc", [
    ([1.2, 0.1, 0.0], 0.3, [1, 0, 0]),                         # face
    ([1.1, 0.6, 0.0], 0.5 - np.sqrt(0.02), [1 / np.sqrt(2), 1 / np.sqrt(2), 0]),  # edge
    ([-1.1, -0.6, -0.4], 0.5 - np.sqrt(0.03), -np.ones(3) / np.sqrt(3)),        # corner
    ([0.2, 0.1, 0.25], 0.5 + 0.05, [0, 0, 1]),                 # inside, nearest face +z
    ([-0.9, 0.0, 0.0], 0.5 + 0.1, [-1, 0, 0]),                 # inside, nearest face -x
])
def test_sphere_box(local, depth, nloc):
    s = geom(_in_box(local), size=(0.5, 0, 0))
    c = collide("sphere_box", s, BOX)
    assert c.valid[0]
    np.testing.assert_allclose(c.depth[0], depth, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], R_BOX @ np.asarray(nloc), atol=1e-5)
    check_separates("sphere_box", s, BOX, c)


def test_sphere_box_miss():
    assert not collide("sphere_box", geom(_in_box([1.6, 0, 0]), size=(0.5, 0, 0)), BOX).valid[0]
    assert not collide("sphere_box", geom(_in_box([1.4, 0.8, 0.6]), size=(0.5, 0, 0)), BOX).valid[0]


# -------------------------------------------------------------- capsule-plane
def test_capsule_plane_flat_and_vertical():
    plane = geom([0, 0, 0])
    Ry = rot_axis_angle([0, 1, 0], np.pi / 2)  # axis along x
    c1 = geom([0, 0, 0.45], Ry, (0.5, 2.0, 0))
    c = collide("capsule_plane", c1, plane)
    assert c.valid.all()
    np.testing.assert_allclose(c.depth, [0.05, 0.05], atol=1e-6)
    np.testing.assert_allclose(c.normal, [[0, 0, 1]] * 2, atol=1e-6)
    np.testing.assert_allclose(sorted(c.pos[:, 0]), [-1, 1], atol=1e-6)
    np.testing.assert_allclose(c.pos[:, 2], [-0.05, -0.05], atol=1e-6)
    check_separates("capsule_plane", c1, plane, c)
    # vertical capsule (axis exactly on the normal): only the lower cap
    for R in (I3, rot_axis_angle([1, 0, 0], np.pi)):
        cv = geom([0, 0, 1.4], R, (0.5, 2.0, 0))
        c = collide("capsule_plane", cv, plane)
        assert c.valid.tolist() == [True, False]
        np.testing.assert_allclose(c.depth[0], 0.1, atol=1e-6)
        np.testing.assert_allclose(c.pos[0], [0, 0, -0.1], atol=1e-6)
    # tilted: deeper end first
    for sgn in (1, -1):
        ct = geom([0, 0, 0.3], rot_axis_angle([0, 1, 0], sgn * 1.4), (0.5, 2.0, 0))
        c = collide("capsule_plane", ct, plane)
        assert c.valid.all()
        np.testing.assert_allclose(c.depth, [0.2 + np.cos(1.4), 0.2 - np.cos(1.4)], atol=1e-5)
        np.testing.assert_allclose(c.pos[:, 2], -c.depth, atol=1e-5)


# -------------------------------------------------------------- capsule-sphere
def test_capsule_sphere():
    cp = geom([0, 0, 0], I3, (0.5, 2.0, 0))
    s = geom([0.8, 0, 0.5], size=(0.5, 0, 0))  # beside the cylinder
    c = collide("capsule_sphere", cp, s)
    np.testing.assert_allclose(c.depth[0], 0.2, atol=1e-6)
    np.testing.assert_allclose(c.normal[0], [-1, 0, 0], atol=1e-6)
    check_separates("capsule_sphere", cp, s, c)
    s = geom([0, 0, 1.8], size=(0.5, 0, 0))  # above the top cap
    c = collide("capsule_sphere", cp, s)
    np.testing.assert_allclose(c.depth[0], 0.2, atol=1e-6)
    np.testing.assert_allclose(c.normal[0], [0, 0, -1], atol=1e-6)
    assert not collide("capsule_sphere", cp, geom([1.1, 0, 0], size=(0.5, 0, 0))).valid[0]
    # sphere centre on the axis: finite
    c = collide("capsule_sphere", cp, geom([0, 0, 0.3], size=(0.5, 0, 0)))
    assert c.valid[0] and abs(c.depth[0] - 1.0) < 1e-6


@pytest.mark.parametrize("axis", [[0, 1, 0], [1, 1, 0], [0.3, -0.4, 0.2]])
def test_capsule_sphere_centre_on_segment_separates(axis):
    """Sphere centre exactly on the segment: the depth is r1 + r2 and the
    normal must be perpendicular to the segment, so that pushing the capsule
    by the depth along it leaves them touching (ODE's (1, 0, 0) fails when
    the segment runs along x: the first axis turns local z onto world x)."""
    R = rot_axis_angle(axis, np.pi / 2)
    cp = geom([0.1, 0.2, 0.3], R, (0.2, 1.0, 0))
    for s in (0.0, 0.3, 0.5):  # middle, inside, at the end of the segment
        sp = geom(np.array([0.1, 0.2, 0.3]) + s * R[:, 2], size=(0.3, 0, 0))
        c = collide("capsule_sphere", cp, sp)
        assert c.valid[0]
        np.testing.assert_allclose(c.depth[0], 0.5, atol=1e-6)
        assert abs(c.normal[0] @ R[:, 2]) < 1e-6
        check_separates("capsule_sphere", cp, sp, c)


def test_capsule_capsule_touching_segments_separate():
    """Crossing segments meeting in a point, and coaxial overlapping ones:
    pushing capsule 1 by the depth (r1 + r2) along the normal separates."""
    a = geom([0, 0, 0], rot_axis_angle([0, 1, 0], np.pi / 2), (0.3, 2.0, 0))  # along x
    for b in (geom([0.2, 0, 0], rot_axis_angle([1, 1, 0], np.pi / 2), (0.2, 1.0, 0)),
              geom([0.5, 0, 0], rot_axis_angle([0, 1, 0], np.pi / 2), (0.2, 1.0, 0))):
        c = collide("capsule_capsule", a, b)
        np.testing.assert_allclose(c.depth[c.valid], 0.5, atol=1e-6)
        check_separates("capsule_capsule", a, b, c)


# ------------------------------------------------------------- capsule-capsule
def test_capsule_capsule_crossing():
    a = geom([0, 0, 0], rot_axis_angle([0, 1, 0], np.pi / 2), (0.3, 2.0, 0))  # along x
    b = geom([0.2, -0.1, 0.5], rot_axis_angle([1, 0, 0], np.pi / 2), (0.3, 2.0, 0))  # along y
    c = collide("capsule_capsule", a, b)
    assert c.valid.tolist() == [True, False]
    np.testing.assert_allclose(c.depth[0], 0.1, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], [0, 0, -1], atol=1e-5)
    np.testing.assert_allclose(c.pos[0], [0.2, 0, 0.25], atol=1e-5)
    check_separates("capsule_capsule", a, b, c)


@pytest.mark.parametrize("flip", [False, True])
def test_capsule_capsule_parallel(flip):
    a = geom([0, 0, 0], I3, (0.3, 2.0, 0))
    Rb = rot_axis_angle([1, 0, 0], np.pi) if flip else I3
    b = geom([0.5, 0, 0.6], Rb, (0.3, 2.0, 0))
    c = collide("capsule_capsule", a, b)
    assert c.valid.all()
    np.testing.assert_allclose(c.depth, [0.1, 0.1], atol=1e-5)
    np.testing.assert_allclose(c.normal, [[-1, 0, 0]] * 2, atol=1e-5)
    np.testing.assert_allclose(sorted(c.pos[:, 2]), [-0.4, 1.0], atol=1e-5)
    check_separates("capsule_capsule", a, b, c)
    # parallel, coaxial end to end (no overlap interval): single cap contact
    c = collide("capsule_capsule", a, geom([0, 0, 2.5], I3, (0.3, 2.0, 0)))
    assert c.valid.tolist() == [True, False]
    np.testing.assert_allclose(c.depth[0], 0.1, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], [0, 0, -1], atol=1e-5)
    # parallel, separated
    assert not collide("capsule_capsule", a, geom([0.7, 0, 0], I3, (0.3, 2.0, 0))).valid.any()


# ----------------------------------------------------------------- capsule-box
def test_capsule_box_lying_on_face():
    box = geom([0, 0, -0.5], I3, (4.0, 4.0, 1.0))
    Ry = rot_axis_angle([0, 1, 0], np.pi / 2)
    cp = geom([0.3, 0.2, 0.45], Ry, (0.5, 2.0, 0))
    c = collide("capsule_box", cp, box)
    assert c.valid.tolist() == [True, True, False, False]
    np.testing.assert_allclose(c.depth[:2], [0.05, 0.05], atol=1e-5)
    np.testing.assert_allclose(c.normal[:2], [[0, 0, 1]] * 2, atol=1e-5)
    np.testing.assert_allclose(sorted(c.pos[:2, 0]), [-0.7, 1.3], atol=1e-5)
    check_separates("capsule_box", cp, box, c)


def test_capsule_box_single():
    box = geom([0, 0, 0], I3, (1.0, 1.0, 1.0))
    # vertical capsule standing on the top face: one contact
    cp = geom([0.1, 0.1, 0.5 + 1.0 + 0.3 - 0.02], I3, (0.3, 2.0, 0))
    c = collide("capsule_box", cp, box)
    assert c.valid.tolist() == [True, False, False, False]
    np.testing.assert_allclose(c.depth[0], 0.02, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], [0, 0, 1], atol=1e-5)
    check_separates("capsule_box", cp, box, c)
    # long horizontal capsule across the top of a small box: mid contact only
    Ry = rot_axis_angle([0, 1, 0], np.pi / 2)
    cp = geom([0.0, 0.1, 0.5 + 0.3 - 0.04], Ry, (0.3, 6.0, 0))
    c = collide("capsule_box", cp, box)
    assert c.valid.tolist() == [True, False, False, False]
    np.testing.assert_allclose(c.depth[0], 0.04, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], [0, 0, 1], atol=1e-5)
    check_separates("capsule_box", cp, box, c)
    # over an edge (capsule along y, above the +x top edge at 45 deg)
    d = 0.3 - 0.05
    cp = geom([0.5 + d / np.sqrt(2), 0, 0.5 + d / np.sqrt(2)], rot_axis_angle([1, 0, 0], np.pi / 2),
              (0.3, 4.0, 0))
    c = collide("capsule_box", cp, box)
    assert c.valid.tolist() == [True, False, False, False]
    np.testing.assert_allclose(c.depth[0], 0.05, atol=1e-5)
    np.testing.assert_allclose(c.normal[0], [1 / np.sqrt(2), 0, 1 / np.sqrt(2)], atol=1e-5)
    # far away
    assert not collide("capsule_box", geom([3, 0, 0], I3, (0.3, 1.0, 0)), box).valid.any()


# ------------------------------------------------------------------ vmap/grad
def test_vmap_batch():
    g1 = [geom([0, 0, z], size=(0.5, 0, 0)) for z in (0.4, 0.3, 0.6, -1.0)]
    g2 = [geom([0, 0, 0])] * 4
    c = JV["sphere_plane"](batch(g1), batch(g2))
    assert c.depth.shape == (4, 1) and c.pos.shape == (4, 1, 3)
    np.testing.assert_allclose(np.asarray(c.depth[:, 0]), [0.1, 0.2, 0.0, 1.5], atol=1e-6)
    assert np.asarray(c.valid[:, 0]).tolist() == [True, True, False, True]
    caps = [geom([0, 0, 0], I3, (0.3, 2.0, 0))] * 3
    others = [geom([0.5, 0, 0.6], I3, (0.3, 2.0, 0)),
              geom([0.2, -0.1, 0.5], rot_axis_angle([1, 0, 0], np.pi / 2), (0.3, 2.0, 0)),
              geom([3, 0, 0], I3, (0.3, 2.0, 0))]
    c = JV["capsule_capsule"](batch(caps), batch(others))
    assert np.asarray(c.valid).sum(-1).tolist() == [2, 1, 0]


DEGENERATE = [
    ("sphere_sphere", geom([0, 0, 0], size=(1, 0, 0)), geom([0, 0, 0], size=(0.5, 0, 0))),
    ("sphere_box", geom([0, 0, 0], size=(0.5, 0, 0)), geom([0, 0, 0], I3, (1, 1, 1))),
    ("sphere_box", geom([0.5, 0.5, 0.5], size=(0.5, 0, 0)), geom([0, 0, 0], I3, (1, 1, 1))),
    ("sphere_plane", geom([0, 0, 0], size=(0.5, 0, 0)), geom([0, 0, 0])),
    ("capsule_plane", geom([0, 0, 0.5], I3, (0.5, 1, 0)), geom([0, 0, 0])),
    ("capsule_sphere", geom([0, 0, 0], I3, (0.5, 1, 0)), geom([0, 0, 0.2], size=(0.5, 0, 0))),
    ("capsule_capsule", geom([0, 0, 0], I3, (0.5, 1, 0)), geom([0, 0, 0], I3, (0.5, 1, 0))),
    ("capsule_capsule", geom([0, 0, 0], I3, (0.5, 1, 0)), geom([0.5, 0, 0.3], I3, (0.5, 1, 0))),
    ("capsule_capsule", geom([0, 0, 0], I3, (0.5, 1, 0)),
     geom([0, 0, 0], rot_axis_angle([1, 0, 0], np.pi / 2), (0.5, 1, 0))),
    ("capsule_box", geom([0, 0, 0], I3, (0.5, 1, 0)), geom([0, 0, 0], I3, (1, 1, 1))),
    ("capsule_box", geom([0, 0, 1.0], I3, (0.5, 1, 0)), geom([0, 0, 0], I3, (1, 1, 1))),
]


def _loss(name):
    f = FUNCS[name][0]

    def loss(p1, p2, g1, g2):
        c = f(g1._replace(pos=p1), g2._replace(pos=p2))
        return jnp.sum(c.depth) + jnp.sum(c.pos) + jnp.sum(c.normal)
    return jax.jit(jax.grad(loss, argnums=(0, 1)))


GRADS = {}


@pytest.mark.parametrize("i", range(len(DEGENERATE)))
def test_grad_finite_degenerate(i):
    name, g1, g2 = DEGENERATE[i]
    if name not in GRADS:
        GRADS[name] = _loss(name)
    gp1, gp2 = GRADS[name](jnp.asarray(g1.pos), jnp.asarray(g2.pos), g1, g2)
    assert np.all(np.isfinite(gp1)) and np.all(np.isfinite(gp2))
    c = collide(name, g1, g2)
    assert c.valid.any()


def test_float64():
    enable_x64 = getattr(jax, "enable_x64", None)
    if enable_x64 is None:
        pytest.skip("no x64 context manager in this jax")
    with enable_x64(True):
        cases = DEGENERATE[:8]

        @jax.jit
        def run_all(gs):
            return [FUNCS[n][0](a, b) for (n, _, _), (a, b) in zip(cases, gs)]

        to64 = lambda g: GeomWorld(*[jnp.asarray(x, jnp.float64) for x in g])  # noqa: E731
        out = run_all([(to64(a), to64(b)) for _, a, b in cases])
        for c in out:
            assert c.depth.dtype == jnp.float64 and c.pos.dtype == jnp.float64
            assert np.all(np.isfinite(np.asarray(c.depth))) and bool(c.valid.any())


@pytest.mark.parametrize("name", ["sphere_sphere", "capsule_sphere"])
def test_depth_gradient_is_the_closed_form(name):
    """Away from degenerate poses the penetration depth is differentiable and its
    gradient is the closed form: depth = r1 + r2 - |p_closest - c| (p_closest: the
    sphere's centre, or the capsule axis' closest point), so d depth / d c = u and
    d depth / d p1 = -u, with u the unit vector from c to p_closest (the capsule's
    closest point moves with it, rigidly, when its centre moves). Also against
    central finite differences of the depth itself."""
    r1, r2 = 0.5, 0.3
    c = np.array([0.25, 0.6, 0.1], np.float32)           # beside the capsule's middle
    g1 = geom([0.0, 0.0, 0.0], rot_axis_angle([0, 1, 0], 0.3), (r1, 1.0, 0) if
              name == "capsule_sphere" else (r1, 0, 0))
    g2 = geom(c, size=(r2, 0, 0))
    f = FUNCS[name][0]

    def depth(p1, p2):
        out = f(g1._replace(pos=p1), g2._replace(pos=p2))
        return out.depth[0]

    d1, d2 = jax.jit(jax.grad(depth, argnums=(0, 1)))(jnp.asarray(g1.pos), jnp.asarray(c))
    if name == "sphere_sphere":
        closest = np.zeros(3)
    else:  # the capsule's axis is its local z, turned about y by 0.3 rad
        ax = np.asarray(g1.rot, np.float64)[:, 2]
        closest = ax * float(np.dot(c, ax))           # |c . ax| < half length 0.5
    u = (closest - c) / np.linalg.norm(closest - c)
    np.testing.assert_allclose(np.asarray(d2), u, atol=2e-6)
    np.testing.assert_allclose(np.asarray(d1), -u, atol=2e-6)
    assert float(depth(jnp.asarray(g1.pos), jnp.asarray(c))) == pytest.approx(
        r1 + r2 - np.linalg.norm(closest - c), abs=1e-6)
    with jax.enable_x64(True):                          # finite differences in float64
        g1d = GeomWorld(*[jnp.asarray(x, jnp.float64) for x in g1])
        g2d = GeomWorld(*[jnp.asarray(x, jnp.float64) for x in g2])
        eps = 1e-6
        for k in range(3):
            e = jnp.zeros(3, jnp.float64).at[k].set(eps)
            fd = (f(g1d, g2d._replace(pos=g2d.pos + e)).depth[0]
                  - f(g1d, g2d._replace(pos=g2d.pos - e)).depth[0]) / (2 * eps)
            assert abs(float(fd) - u[k]) < 1e-6, (k, float(fd), u[k])


def _generic_pairs(rng, n=12):
    """Overlapping pairs in general position (no tie between closest features):
    (name, g1, g2) with random poses, float64."""
    out = []
    while len(out) < 4 * n:
        name = ["sphere_sphere", "capsule_sphere", "capsule_capsule", "sphere_plane"][len(out) % 4]
        r1, r2 = rng.uniform(0.3, 0.6, 2)
        rot1 = rot_axis_angle(rng.normal(size=3), rng.uniform(0, np.pi))
        rot2 = rot_axis_angle(rng.normal(size=3), rng.uniform(0, np.pi))
        p2 = np.zeros(3)
        p1 = rng.normal(size=3) * 0.4
        if name == "sphere_sphere":
            g1, g2 = (r1, 0, 0), (r2, 0, 0)
        elif name == "capsule_sphere":
            g1, g2 = (r1, rng.uniform(0.5, 1.5), 0), (r2, 0, 0)
        elif name == "capsule_capsule":
            g1, g2 = (r1, rng.uniform(0.5, 1.5), 0), (r2, rng.uniform(0.5, 1.5), 0)
        else:   # a sphere under the plane z = 0 by less than its radius
            p1 = np.array([*rng.normal(size=2), -rng.uniform(0.05, 0.25)])
            g1, g2, rot2 = (r1, 0, 0), (0, 0, 0), I3
        pair = (name, GeomWorld(p1, rot1, np.asarray(g1, float)),
                GeomWorld(p2, rot2, np.asarray(g2, float)))
        with jax.enable_x64(True):
            c = FUNCS[name][0](*(GeomWorld(*(jnp.asarray(a) for a in g)) for g in pair[1:]))
            depth = np.asarray(c.depth)[np.asarray(c.valid)]
        if depth.size == 1 and depth[0] > 0.02:      # one contact, clearly overlapping
            out.append(pair)
    return out


def test_depth_gradient_is_the_contact_normal():
    """The gradient of a contact's depth by the geoms' positions is the closed
    form: moving geom 1 along the normal (from geom 2 into geom 1) separates
    them at unit rate, so d depth / d p1 = -normal and d depth / d p2 =
    +normal (sphere-sphere, capsule-sphere, capsule-capsule in general position,
    sphere-plane); float64, to 1e-9."""
    rng = np.random.default_rng(11)
    with jax.enable_x64(True):
        for name, g1, g2 in _generic_pairs(rng):
            f = FUNCS[name][0]
            g1j = GeomWorld(*(jnp.asarray(a) for a in g1))
            g2j = GeomWorld(*(jnp.asarray(a) for a in g2))

            def depth(p1, p2):
                c = f(g1j._replace(pos=p1), g2j._replace(pos=p2))
                return jnp.sum(jnp.where(c.valid, c.depth, 0.0))

            d1, d2 = jax.grad(depth, argnums=(0, 1))(g1j.pos, g2j.pos)
            c = f(g1j, g2j)
            n = np.asarray(c.normal)[np.asarray(c.valid)][0]
            np.testing.assert_allclose(np.asarray(d1), -n, atol=1e-9, err_msg=name)
            np.testing.assert_allclose(np.asarray(d2), n, atol=1e-9, err_msg=name)
