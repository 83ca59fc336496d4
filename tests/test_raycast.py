"""jaxode.raycast: rays against plane, sphere, box, capsule and cylinder.

Independent truths: the analytic ray-surface intersections of the shapes (a
vertical height scan over a scene whose top surfaces are known in closed form)
and the real libode 0.16 (dCreateRay + dGeomRaySet + dCollide, ODE's ray
contact conventions: depth = distance from the origin, pos on the surface,
normal = the surface normal oriented for reflection, i.e. facing the origin's
side, inwards when the ray starts inside a solid). One compile per test.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxode
from tools.conformance import odelib

from fast_compile import OPTIONS as _OPTS  # noqa: E402


def jit(f):
    return jax.jit(f, compiler_options=_OPTS)


# --------------------------------------------------- analytic height scan
# Five shapes on the floor z = 0, separated in x; centres and sizes.
SPH = dict(c=(-4.0, 0.0, 0.5), r=0.5)
BOX = dict(c=(-2.0, 0.0, 0.3), size=(0.8, 0.6, 0.6))
CAP = dict(c=(0.0, 0.0, 0.3), r=0.3, length=0.8)  # lying along x
CYL_UP = dict(c=(2.0, 0.0, 0.45), r=0.4, length=0.9)  # standing
CYL_SIDE = dict(c=(4.0, 0.0, 0.35), r=0.35, length=1.0)  # lying along y
Q_X = tuple(Rotation.from_euler("y", 90, degrees=True).as_quat()[[3, 0, 1, 2]])  # z -> x
Q_Y = tuple(Rotation.from_euler("x", 90, degrees=True).as_quat()[[3, 0, 1, 2]])  # z -> -y


def scene(float_bodies=True):
    b = jaxode.WorldBuilder()
    b.add_plane()
    body = b.add_body(pos=SPH["c"], mass=jaxode.mass.sphere(SPH["r"], density=1.0))
    b.add_sphere(SPH["r"], body=body)
    b.add_box(BOX["size"], pos=BOX["c"])
    b.add_capsule(CAP["r"], CAP["length"], pos=CAP["c"], quat=Q_X)
    b.add_cylinder(CYL_UP["r"], CYL_UP["length"], pos=CYL_UP["c"])
    b.add_cylinder(CYL_SIDE["r"], CYL_SIDE["length"], pos=CYL_SIDE["c"], quat=Q_Y)
    return b.build()


def analytic_top(x, y):
    """(height, unit outward normal, geom index) of the topmost surface at (x, y)."""
    best = (0.0, np.array([0.0, 0.0, 1.0]), 0)

    def up(z, n, g):
        nonlocal best
        if z > best[0]:
            best = (z, np.asarray(n, float) / np.linalg.norm(n), g)

    cx, cy, cz = SPH["c"]
    rr = (x - cx) ** 2 + (y - cy) ** 2
    if rr < SPH["r"] ** 2:
        dz = np.sqrt(SPH["r"] ** 2 - rr)
        up(cz + dz, (x - cx, y - cy, dz), 1)
    cx, cy, cz = BOX["c"]
    if abs(x - cx) < BOX["size"][0] / 2 and abs(y - cy) < BOX["size"][1] / 2:
        up(cz + BOX["size"][2] / 2, (0, 0, 1), 2)
    cx, cy, cz = CAP["c"]  # axis along x: nearest axis point (clamped x), then a sphere
    ax = np.clip(x - cx, -CAP["length"] / 2, CAP["length"] / 2) + cx
    rr = (x - ax) ** 2 + (y - cy) ** 2
    if rr < CAP["r"] ** 2:
        dz = np.sqrt(CAP["r"] ** 2 - rr)
        up(cz + dz, (x - ax, y - cy, dz), 3)
    cx, cy, cz = CYL_UP["c"]
    if (x - cx) ** 2 + (y - cy) ** 2 < CYL_UP["r"] ** 2:
        up(cz + CYL_UP["length"] / 2, (0, 0, 1), 4)
    cx, cy, cz = CYL_SIDE["c"]  # axis along y
    if abs(y - cy) < CYL_SIDE["length"] / 2 and abs(x - cx) < CYL_SIDE["r"]:
        dz = np.sqrt(CYL_SIDE["r"] ** 2 - (x - cx) ** 2)
        up(cz + dz, (x - cx, 0, dz), 5)
    return best


def test_height_scan_hits_every_shape_where_the_analytic_surface_is():
    """A 2-D grid of vertical rays (float32, the default precision): distance,
    point, normal and geom of the topmost surface, by closed-form geometry."""
    model = scene()
    xs = np.linspace(-4.7, 4.7, 95)
    ys = np.linspace(-0.65, 0.65, 14)
    X, Y = np.meshgrid(xs, ys, indexing="ij")
    origins = np.stack([X, Y, np.full_like(X, 3.0)], -1)
    down = np.array([0.0, 0.0, -2.0])  # not unit: normalised as dGeomRaySet
    dist, point, normal, geom = jax.tree.map(
        np.asarray, jit(lambda s: jaxode.raycast(model, s, origins, down))(jaxode.init(model)))
    assert dist.shape == X.shape and point.shape == X.shape + (3,) and geom.dtype == np.int32
    hit_kinds = set()
    for i in np.ndindex(X.shape):
        z, n, g = analytic_top(X[i], Y[i])
        # the analytic top is discontinuous at silhouette edges: skip rays within 1e-3 of one
        zs = [analytic_top(X[i] + dx, Y[i] + dy)[2] for dx, dy in
              ((1e-3, 0), (-1e-3, 0), (0, 1e-3), (0, -1e-3))]
        if any(k != g for k in zs):
            continue
        hit_kinds.add(g)
        assert geom[i] == g, (i, geom[i], g)
        np.testing.assert_allclose(dist[i], 3.0 - z, atol=2e-5)
        np.testing.assert_allclose(point[i], [X[i], Y[i], z], atol=2e-5)
        np.testing.assert_allclose(normal[i], n, atol=2e-3 if g in (1, 3, 5) else 1e-5)
    assert hit_kinds == {0, 1, 2, 3, 4, 5}


def test_misses_max_dist_exclusions_and_batched_worlds():
    model = scene()
    s0 = jaxode.init(model)
    origins = np.array([[0.0, 5.0, 1.0],  # horizontal, above nothing: misses everything
                        [-4.0, 0.0, 3.0],  # down onto the sphere (body 0): 2.0 away
                        [-4.0, 0.0, 3.0],  # same, max_dist 1.5: a miss
                        [9.0, 0.0, -1.0],  # below the floor going down: ODE misses
                        [9.0, 0.0, -1.0],  # below the floor going up: hits from below
                        [1.0, 1.0, 1.0]])  # zero direction: a miss
    dirs = np.array([[1.0, 0, 0], [0, 0, -1], [0, 0, -1], [0, 0, -1], [0, 0, 1], [0, 0, 0]])
    maxd = np.array([np.inf, np.inf, 1.5, np.inf, np.inf, np.inf])

    @jit
    def cast(s, excl_mask):
        return jaxode.raycast(model, s, origins, dirs, max_dist=maxd, geom_mask=excl_mask)

    ones = np.ones(model.ngeom, bool)
    dist, point, normal, geom = jax.tree.map(np.asarray, cast(s0, ones))
    miss = np.array([1, 0, 1, 1, 0, 1], bool)
    assert np.all(np.isinf(dist[miss])) and np.all(geom[miss] == -1)
    assert np.all(point[miss] == 0) and np.all(normal[miss] == 0)
    np.testing.assert_allclose(dist[1], 2.0, atol=1e-6)
    assert geom[1] == 1
    np.testing.assert_allclose(dist[4], 1.0, atol=1e-6)
    np.testing.assert_allclose(normal[4], [0, 0, -1])  # facing the origin below (ODE)
    assert geom[4] == 0
    # the sphere masked out: the ray goes on to the floor
    dist_m, _, _, geom_m = jax.tree.map(np.asarray, cast(s0, np.arange(model.ngeom) != 1))
    np.testing.assert_allclose(dist_m[1], 3.0, atol=1e-6)
    assert geom_m[1] == 0
    # exclude_body: the sensor's own body is ignored
    d_ex, _, _, g_ex = jit(lambda s: jaxode.raycast(model, s, origins[1], dirs[1],
                                                    exclude_body=0))(s0)
    assert float(d_ex) == pytest.approx(3.0, abs=1e-6) and int(g_ex) == 0
    # vmapped over worlds: the sphere's body at different heights
    heights = np.array([0.5, 1.0, 1.7, 2.2])
    states = jax.vmap(lambda z: s0.replace(pos=s0.pos.at[0, 2].set(z)))(jnp.asarray(heights, s0.pos.dtype))
    dist_b, _, _, geom_b = jax.tree.map(np.asarray, jax.vmap(cast, in_axes=(0, None))(states, ones))
    assert dist_b.shape == (4, 6)
    np.testing.assert_allclose(dist_b[:, 1], 3.0 - heights - 0.5, atol=1e-5)
    assert np.all(geom_b[:, 1] == 1)
    with pytest.raises(ValueError, match="last axis of 3"):
        jaxode.raycast(model, s0, np.zeros((4, 2)), np.zeros((4, 3)))


# ------------------------------------------------------------- vs libode
def sdf(spec, x):
    """Signed distance [m] of point x to the solid of an odelib spec (negative inside)."""
    kind = spec[0]
    if kind == "plane":
        return np.asarray(spec[1]) @ x - spec[2]
    if kind == "sphere":
        return np.linalg.norm(x - spec[2]) - spec[1]
    rot = Rotation.from_quat(np.asarray(spec[-1])[[1, 2, 3, 0]]).as_matrix()
    p = (x - np.asarray(spec[-2])) @ rot
    if kind == "box":
        d = np.abs(p) - 0.5 * np.asarray(spec[1])
        return np.linalg.norm(np.maximum(d, 0)) + min(d.max(), 0)
    r, h = spec[1], 0.5 * spec[2]
    if kind == "capsule":
        return np.linalg.norm(p - [0, 0, np.clip(p[2], -h, h)]) - r
    d = np.array([np.linalg.norm(p[:2]) - r, abs(p[2]) - h])
    return np.linalg.norm(np.maximum(d, 0)) + min(d.max(), 0)


def test_random_rays_agree_with_libode_for_every_shape():
    """400 random rays (about half aimed at the shape, many starting inside it)
    against each shape alone (geom_mask), compared with libode's dCollide of a
    ray: hit or miss, depth, position and normal to 1e-9 in float64."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        b = jaxode.WorldBuilder()
        b.add_body(pos=(50.0, 50.0, 50.0))
        q = tuple(Rotation.random(random_state=3).as_quat()[[3, 0, 1, 2]])
        pn = np.array([0.1, 0.2, 1.0])
        pn /= np.linalg.norm(pn)
        c = (0.1, 0.2, 0.3)
        b.add_plane(normal=tuple(pn), offset=0.1)
        b.add_sphere(0.5, pos=c)
        b.add_box((0.6, 0.8, 1.0), pos=c, quat=q)
        b.add_capsule(0.3, 0.8, pos=c, quat=q)
        b.add_cylinder(0.4, 0.9, pos=c, quat=q)
        model = b.build()
        state = jaxode.init(model)
        n = 400
        o = rng.uniform(-1.2, 1.2, (n, 3))
        d = rng.normal(size=(n, 3))
        d[: n // 2] = np.array(c) + 0.3 * rng.normal(size=(n // 2, 3)) - o[: n // 2]
        d[n // 2: n // 2 + 20] = [0.0, 0.0, 1.0]  # axis-parallel rays
        d[n // 2 + 20: n // 2 + 40] = [1.0, 0.0, 0.0]
        masks = np.eye(model.ngeom, dtype=bool)
        f = jit(jax.vmap(lambda m: jaxode.raycast(model, state, o, d, max_dist=3.0, geom_mask=m)))
        dist, point, normal, geom = jax.tree.map(np.asarray, f(masks))
    specs = [("plane", pn, 0.1), ("sphere", 0.5, c), ("box", (0.6, 0.8, 1.0), c, q),
             ("capsule", 0.3, 0.8, c, q), ("cylinder", 0.4, 0.9, c, q)]
    for gi, spec in enumerate(specs):
        hits = inside = 0
        for i in range(n):
            cs = odelib.collide(("ray", o[i], d[i], 3.0), spec, max_contacts=4)
            assert len(cs) == np.isfinite(dist[gi, i]), (spec[0], i, len(cs), dist[gi, i])
            if cs:
                hits += 1
                inside += bool(sdf(spec, o[i]) < 0)
                np.testing.assert_allclose(dist[gi, i], cs[0].depth, atol=1e-9)
                np.testing.assert_allclose(point[gi, i], cs[0].pos, atol=1e-9)
                np.testing.assert_allclose(normal[gi, i], cs[0].normal, atol=1e-9)
                assert geom[gi, i] == gi
        assert hits >= 100, (spec[0], hits)
        assert inside >= 10, (spec[0], inside)  # rays from inside (and from under the plane)
