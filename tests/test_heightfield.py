"""Heightfield (static terrain) against sphere, box, capsule and cylinder.

Independent truths: a planar heightfield IS a plane, so its heights, normals
and the shapes' penetration depths follow from the plane's closed form
(depth = support half-extent along n minus the centre's height over the
plane); the triangulated surface is continuous (a cell's two triangles agree
on their shared diagonal) and passes through the grid samples; shapes resting
on a flat heightfield move exactly as on a plane at the same height.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxode
from jaxode.sim.collision import heightfield as hfc
from jaxode.sim.collision.contact import GeomWorld

from fast_compile import OPTIONS as _OPTS  # noqa: E402
N = 32
LX, LY, NX, NY = 4.0, 3.0, 9, 7
HPOS = np.array([0.5, -0.2, 0.3])
SLOPE = np.array([0.15, -0.1])  # dh/dx, dh/dy


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


def grid_xy():
    xs = HPOS[0] + np.linspace(-LX / 2, LX / 2, NX)
    ys = HPOS[1] + np.linspace(-LY / 2, LY / 2, NY)
    return np.meshgrid(xs, ys, indexing="ij")


def planar_heights():
    X, Y = grid_xy()
    return SLOPE[0] * (X - HPOS[0]) + SLOPE[1] * (Y - HPOS[1]) + 0.05


def hf_geom(n=None):
    g = GeomWorld(jnp.asarray(HPOS), jnp.eye(3), jnp.asarray([LX, LY, 0.0]))
    if n is None:
        return g
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), g)


def plane_of_terrain():
    """(unit normal, a point) of the planar terrain."""
    n = np.array([-SLOPE[0], -SLOPE[1], 1.0])
    return n / np.linalg.norm(n), HPOS + np.array([0.0, 0.0, 0.05])


def test_surface_is_the_plane_for_planar_heights_and_continuous_on_a_rough_grid():
    surf = jax.jit(hfc.surface)
    rng = np.random.default_rng(0)
    xy = HPOS[:2] + rng.uniform(-0.5, 0.5, (200, 2)) * [LX, LY]
    h, n, inside = map(np.asarray, surf(jnp.asarray(planar_heights()), jnp.array([NX, NY]),
                                        hf_geom(), jnp.asarray(xy)))
    pn, p0 = plane_of_terrain()
    exact = p0[2] - ((xy - p0[:2]) @ pn[:2]) / pn[2]
    assert inside.all()
    np.testing.assert_allclose(h, exact, atol=1e-12)
    np.testing.assert_allclose(n, np.broadcast_to(pn, n.shape), atol=1e-12)
    # rough grid: through the samples, continuous across each cell's diagonal
    H = rng.normal(size=(NX, NY)) * 0.3
    X, Y = grid_xy()
    pts = np.stack([X.ravel(), Y.ravel()], 1)
    hv, _, ins = map(np.asarray, surf(jnp.asarray(H), jnp.array([NX, NY]), hf_geom(), jnp.asarray(pts)))
    np.testing.assert_allclose(hv, H.ravel() + HPOS[2], atol=1e-12)
    assert ins.all()
    dx, dy = LX / (NX - 1), LY / (NY - 1)
    i, j = rng.integers(0, NX - 1, 50), rng.integers(0, NY - 1, 50)
    t = rng.uniform(0, 1, 50)
    base = np.stack([X[i, j], Y[i, j]], 1)
    diag = base + np.stack([(1 - t) * dx, t * dy], 1)  # on the diagonal (i+1, j)-(i, j+1)
    eps = 1e-9 * np.array([[1.0, 1.0]])
    ha = np.asarray(surf(jnp.asarray(H), jnp.array([NX, NY]), hf_geom(), jnp.asarray(diag - eps))[0])
    hb = np.asarray(surf(jnp.asarray(H), jnp.array([NX, NY]), hf_geom(), jnp.asarray(diag + eps))[0])
    lin = (1 - t) * H[i + 1, j] + t * H[i, j + 1] + HPOS[2]
    np.testing.assert_allclose(ha, lin, atol=1e-7)
    np.testing.assert_allclose(hb, lin, atol=1e-7)
    # outside the rectangle: no terrain
    out = np.array([[HPOS[0] + LX, HPOS[1]], [HPOS[0], HPOS[1] - LY]])
    assert not np.asarray(surf(jnp.asarray(H), jnp.array([NX, NY]), hf_geom(), jnp.asarray(out))[2]).any()


def rho(kind, rot, size, u):
    a = rot[:, 2]
    if kind == "box":
        return np.abs(u @ rot) @ (0.5 * np.asarray(size))
    if kind == "sphere":
        return size[0]
    t = u @ a
    if kind == "capsule":
        return 0.5 * size[1] * abs(t) + size[0]
    return 0.5 * size[1] * abs(t) + size[0] * np.sqrt(max(1 - t * t, 0.0))


@pytest.mark.parametrize("kind", ["sphere", "box", "capsule", "cylinder"])
def test_shapes_on_planar_terrain_get_the_plane_depth_and_normal(kind):
    """Random poses over a sloped planar heightfield: the deepest contact's
    depth is the plane penetration ``rho(n) - (n . c - n . p0)`` (cylinders:
    within the 8-point rim sampling error r (1 - cos 22.5 deg)); normals are the
    plane's; separated or off-terrain poses give no contact."""
    rng = np.random.default_rng(len(kind))
    pn, p0 = plane_of_terrain()
    rots = Rotation.random(N, random_state=5).as_matrix()
    rots[:4] = np.eye(3)
    size = {"sphere": (0.3, 0, 0), "box": (0.5, 0.3, 0.4), "capsule": (0.2, 0.6, 0),
            "cylinder": (0.25, 0.5, 0)}[kind]
    ext = np.array([rho(kind, rots[k], size, pn) for k in range(N)])
    xy = HPOS[:2] + rng.uniform(-0.3, 0.3, (N, 2)) * [LX, LY]
    gap = ext * rng.uniform(-0.3, 0.3, N)  # centre height over the plane minus the extent
    centres = np.concatenate([xy, np.zeros((N, 1))], 1)
    centres[:, 2] = p0[2] - ((xy - p0[:2]) @ pn[:2]) / pn[2]
    centres += ((ext + gap) / 1.0)[:, None] * pn  # distance along the normal
    centres[-2:, :2] = HPOS[:2] + np.array([[LX, 0], [0, -LY]])  # off the terrain
    g1 = GeomWorld(jnp.asarray(centres), jnp.asarray(rots),
                   jnp.broadcast_to(jnp.asarray(size, float), (N, 3)))
    fn = jax.jit(jax.vmap(getattr(hfc, f"{kind}_heightfield"), in_axes=(0, 0, None, None)),
                 compiler_options=_OPTS)
    c = jax.tree.map(np.asarray, fn(g1, hf_geom(N), jnp.asarray(planar_heights()), jnp.array([NX, NY])))
    tol = 0.25 * (1 - np.cos(np.pi / 8)) + 1e-9 if kind == "cylinder" else 1e-9
    for k in range(N - 2):
        v = c.valid[k]
        if -gap[k] > tol:
            assert v.any(), (k, gap[k])
            np.testing.assert_allclose(c.depth[k][v].max(), -gap[k], atol=tol)
            np.testing.assert_allclose(c.normal[k][v], np.broadcast_to(pn, (v.sum(), 3)), atol=1e-12)
            # the contact points lie on the shape's side of the terrain, depth below it
            assert np.all(c.depth[k][v] >= 0) and np.all(c.depth[k][v] <= -gap[k] + tol)
        elif -gap[k] < 0:
            assert not v.any(), (k, gap[k])
    assert not c.valid[-2:].any()


def test_shapes_rest_on_flat_terrain_exactly_as_on_a_plane_for_1000_steps():
    """One world (float32): a box and a cylinder on a plane at z = 0, and the
    same two on a flat heightfield at z = 0.2 whose
    rectangle excludes the first group (bodies collide with the static world
    only), all released 5 mm above rest. Each terrain body follows its plane
    twin within 0.1 mm over 1000 steps of 0.01 s (measured: < 3e-6 m), and
    all come to rest within 2 mm of their rest poses."""
    with jax.enable_x64(False):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
        surf = jaxode.Surface(mu=0.8)
        static = dict(surface=surf, category_bits=1, collide_bits=2)
        b.add_plane(**static)
        off = np.array([8.0, 0.0, 0.2])
        b.add_heightfield(np.zeros((6, 5)), size=(4.0, 4.0), pos=tuple(off), **static)
        drop = 0.005  # released 5 mm above their rest heights
        shapes = [("box", (0.3, 0.1, 0.1 + drop), (1, 0, 0, 0), jaxode.mass.box((0.4, 0.3, 0.2), total=1.0)),
                  ("cylinder", (1.0, 0.6, 0.1 + drop), (1, 0, 0, 0),
                   jaxode.mass.cylinder(0.12, 0.2, total=1.0))]
        for shift in (np.zeros(3), off):
            for kind, pos, quat, m in shapes:
                i = b.add_body(pos=tuple(np.asarray(pos) + shift), quat=quat, mass=m)
                geo = dict(body=i, surface=surf, category_bits=2, collide_bits=1)
                if kind == "box":
                    b.add_box((0.4, 0.3, 0.2), **geo)
                else:
                    b.add_cylinder(0.12, 0.2, **geo)
        model = b.build()
        run = jax.jit(lambda s: jaxode.rollout(model, s, 1000, 0.01), compiler_options=_OPTS)
        final, traj = run(jaxode.init(model))
        pos = np.asarray(traj.pos, np.float64)
    np.testing.assert_allclose(pos[:, 2:] - off, pos[:, :2], atol=1e-4)
    p0 = np.array([s[1] for s in shapes]) - [0.0, 0.0, drop]
    assert np.abs(pos[-1, :2] - p0).max() < 2e-3
    assert np.abs(np.asarray(traj.vel)[-500:]).max() < 1e-3
    assert int(final.overflow_contacts) == 0 and not bool(final.nonfinite)


@pytest.mark.parametrize("bad, match", [
    (dict(heights=np.zeros(5)), "2-D array"),
    (dict(heights=np.zeros((1, 4))), "2 x 2"),
    (dict(heights=np.full((3, 3), np.nan)), "finite"),
    (dict(size=(1.0, 0.0)), "lx, ly > 0"),
])
def test_bad_heightfield_raises_value_error_naming_the_field(bad, match):
    args = dict(heights=np.zeros((3, 3)), size=(1.0, 1.0)) | bad
    with pytest.raises(ValueError, match=match):
        jaxode.WorldBuilder().add_heightfield(**args)


def test_raycast_finds_the_terrain_surface():
    """Two heightfields of different grid shapes in one model (padding): a rough
    9 x 7 grid and a sloped planar 5 x 4 one. Vertical rays onto grid samples
    hit at the sample heights; slanted rays onto the planar terrain hit where
    the line meets the plane (normal = the plane's, facing the origin, and its
    opposite from below); a slanted ray over the rough grid stops on the
    surface with no crossing before it; rays off the rectangle miss."""
    rng = np.random.default_rng(3)
    H = rng.normal(size=(NX, NY)) * 0.2
    off = np.array([10.0, 0.0, 0.0])  # the planar terrain: the same rectangle, moved
    pn, p0 = plane_of_terrain()
    p0 = p0 + off
    b = jaxode.WorldBuilder()
    b.add_body(pos=(0.0, 0.0, 50.0))
    b.add_heightfield(H, size=(LX, LY), pos=tuple(HPOS))
    X5, Y5 = np.meshgrid(np.linspace(-LX / 2, LX / 2, 5), np.linspace(-LY / 2, LY / 2, 4), indexing="ij")
    b.add_heightfield(SLOPE[0] * X5 + SLOPE[1] * Y5 + 0.05, size=(LX, LY), pos=tuple(HPOS + off))
    model = b.build()
    X, Y = grid_xy()
    vert_o = np.stack([X.ravel(), Y.ravel(), np.full(X.size, 3.0)], 1)
    slant_o = HPOS + off + np.concatenate([rng.uniform(-1, 1, (20, 2)), np.full((20, 1), 2.0)], 1)
    slant_d = np.concatenate([rng.uniform(-0.5, 0.5, (20, 2)), -np.ones((20, 1))], 1)
    below_o = HPOS + off + np.array([[0.3, 0.2, -1.0]])
    rough_o = np.array([[HPOS[0] - 1.8, HPOS[1] - 1.3, 2.0]])
    rough_d = np.array([[1.0, 0.7, -0.6]])
    miss_o = np.array([[HPOS[0] + 3.0, HPOS[1], 3.0]])
    o = np.concatenate([vert_o, slant_o, below_o, rough_o, miss_o])
    d = np.concatenate([np.tile([[0.0, 0.0, -1.0]], (X.size, 1)), slant_d, [[0.1, 0.0, 1.0]],
                        rough_d, [[0.0, 0.0, -1.0]]])
    dist, point, normal, geom = jax.tree.map(
        np.asarray, jax.jit(lambda s: jaxode.raycast(model, s, o, d), compiler_options=_OPTS)(
            jaxode.init(model)))
    nv = X.size
    np.testing.assert_allclose(point[:nv, 2], H.ravel() + HPOS[2], atol=1e-9)
    assert np.all(geom[:nv] == 0)
    # slanted rays onto the plane: t = (p0 - o) . n / (d . n) with unit d
    du = d / np.linalg.norm(d, axis=1, keepdims=True)
    sl = slice(nv, nv + 21)
    t_exact = ((p0 - o[sl]) @ pn) / (du[sl] @ pn)
    np.testing.assert_allclose(dist[sl], t_exact, atol=1e-9)
    assert np.all(geom[sl] == 1)
    np.testing.assert_allclose(normal[nv:nv + 20], np.broadcast_to(pn, (20, 3)), atol=1e-9)
    np.testing.assert_allclose(normal[nv + 20], -pn, atol=1e-9)  # from below, facing the origin
    # the slanted ray over the rough grid: on the surface, above it before the hit
    i = nv + 21
    surf = jax.jit(hfc.surface)
    hdims, hg = jnp.array([NX, NY]), hf_geom()
    h_hit = np.asarray(surf(jnp.asarray(H), hdims, hg, jnp.asarray(point[i:i + 1, :2]))[0])
    assert np.isfinite(dist[i]) and abs(point[i, 2] - h_hit[0]) < 1e-9
    ts = np.linspace(0, dist[i] * (1 - 1e-6), 2000)
    pts = o[i] + ts[:, None] * du[i]
    hs, _, ins = map(np.asarray, surf(jnp.asarray(H), hdims, hg, jnp.asarray(pts[:, :2])))
    assert np.all(~ins | (pts[:, 2] >= hs - 1e-12))
    assert np.isinf(dist[-1]) and geom[-1] == -1
