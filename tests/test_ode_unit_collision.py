"""ODE's own unit tests ``tests/collision.cpp``, ported by name.

- ``test_collision_trimesh_sphere_exact``: a sphere of radius 4 just touching
  a two-triangle square (the diagonal edge under it) gives contacts of depth
  exactly 0 with the triangle's normal, also with both geoms moved to
  (10, 30, 40) and with the mesh turned 90 deg about x. ODE calls
  ``dCollide(trimesh, sphere)``, whose normal (0, 0, -1) points into the
  first geom; jaxode's pair function takes the sphere first, so the same
  contact has the normal (0, 0, 1). ODE returns one contact per triangle (2,
  at the same point); jaxode one, at that point (the touching point under the
  sphere's centre): the same constraint.
- ``test_collision_heightfield_ray_fail``: a ray outside a 4 x 4 byte
  heightfield's bounds must not fail (ODE's AABB bug); here: a clean miss.
- ``test_collision_ray_convex``: a ray against ODE's demo prism (a 20 x 2 x 2
  box as a convex: 8 points, 6 planes) at the origin, moved and turned: hit
  point, normal (facing the ray's origin) and distance 9 m, or a miss after
  the 90 deg turn (CHECK_CLOSE dEpsilon: float32's epsilon here).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.build import meshes as mesh_lib
from jaxode.sim.collision import trimesh as tm
from jaxode.sim.collision.contact import GeomWorld, Mesh

EPS = float(np.finfo(np.float32).eps)


def test_collision_trimesh_sphere_exact():
    v = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], float)
    t = np.array([[0, 1, 2], [0, 2, 3]])
    data = mesh_lib.build_mesh(v, t)
    mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
    radius = 4.0
    rot_x90 = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], float)
    cases = [((0, 0, 0), np.eye(3), (0, 0, radius), (0, 0, 1)),
             ((10, 30, 40), np.eye(3), (10, 30, 40 + radius), (0, 0, 1)),
             ((10, 30, 40), rot_x90, (10, 30 - radius, 40), (0, -1, 0))]

    @jax.jit
    def collide(mpos, mrot, spos):
        tris = tm.place_triangles(mesh, mpos, mrot, jnp.arange(len(data.tris)),
                                  jnp.ones(len(data.tris), bool))
        dt = mpos.dtype
        ball = GeomWorld(spos, jnp.eye(3, dtype=dt), jnp.asarray([radius, 0, 0], dt))
        return tm.sphere_trimesh(ball, GeomWorld(mpos, mrot, jnp.zeros(3, dt)), tris)

    for mpos, mrot, spos, normal in cases:
        dt = jnp.zeros(()).dtype
        c = collide(jnp.asarray(mpos, dt), jnp.asarray(mrot, dt), jnp.asarray(spos, dt))
        valid = np.asarray(c.valid)
        assert valid.sum() >= 1, (mpos, spos)
        np.testing.assert_array_equal(np.asarray(c.depth)[valid], 0.0)
        np.testing.assert_array_equal(np.asarray(c.normal)[valid],
                                      np.broadcast_to(normal, (valid.sum(), 3)))
        np.testing.assert_allclose(np.asarray(c.pos)[valid],
                                   np.broadcast_to(mpos, (valid.sum(), 3)), atol=1e-5)


def test_collision_heightfield_ray_fail():
    # ODE: 4 x 4 samples of the bytes "1234...6" over 4 x 4 m, scale 1, bounds '0'..'9'
    heights = np.frombuffer(b"1234567890123456", np.uint8).astype(float).reshape(4, 4)
    b = jaxode.WorldBuilder()
    b.add_heightfield(heights, (4.0, 4.0))
    m = b.build()
    # ODE's ray (5, 10, 1) along -y, length 20, in its y-up frame: outside the
    # field's x range; in jaxode's z-up frame it runs down from z = 10 at x = 5
    dist, point, normal, geom = jaxode.raycast(m, jaxode.init(m), jnp.asarray([5.0, -1.0, 10.0]),
                                               jnp.asarray([0.0, 0.0, -1.0]), max_dist=20.0)
    assert np.isinf(float(dist)) and int(geom) == -1
    assert np.all(np.isfinite(np.asarray(point))) and np.all(np.asarray(normal) == 0)


def test_collision_ray_convex():
    pts = [(x, y, z) for z in (-1.0, 1.0) for x, y in ((10, 1), (10, -1), (-10, -1), (-10, 1))]
    b = jaxode.WorldBuilder()
    k = b.add_body(pos=(0, 0, 0), mass=jaxode.mass.box(size=(20, 2, 2), total=1.0))
    b.add_convex(np.asarray(pts, float), body=k)
    m = b.build()
    s0 = jaxode.init(m)
    ray = jax.jit(lambda s, o, d: jaxode.raycast(m, s, o, d, max_dist=20.0))

    def cast(pos, quat, origin, direction):
        s = s0.replace(pos=s0.pos.at[0].set(jnp.asarray(pos, s0.pos.dtype)),
                       quat=s0.quat.at[0].set(jnp.asarray(quat, s0.quat.dtype)))
        return ray(s, jnp.asarray(origin, s0.pos.dtype), jnp.asarray(direction, s0.pos.dtype))

    def check(hit, point, normal, dist=9.0):
        d, p, n, g = hit
        assert int(g) == 0
        np.testing.assert_allclose(np.asarray(p), point, atol=EPS * max(1, np.abs(point).max()))
        np.testing.assert_allclose(np.asarray(n), normal, atol=EPS)
        np.testing.assert_allclose(float(d), dist, atol=EPS * 10)

    one = (1.0, 0.0, 0.0, 0.0)
    rz90 = (np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))
    check(cast((0, 0, 0), one, (0, -10, 0), (0, 1, 0)), (0, -1, 0), (0, -1, 0))
    check(cast((0, 0, 0), one, (5, -10, 0), (0, 1, 0)), (5, -1, 0), (0, -1, 0))
    miss = cast((0, 0, 0), rz90, (5, -10, 0), (0, 1, 0))
    assert int(miss[3]) == -1 and np.isinf(float(miss[0]))
    check(cast((0, 0, 0), rz90, (10, 0, 0), (-1, 0, 0)), (1, 0, 0), (1, 0, 0))
    check(cast((0, 1000, 1000), rz90, (10, 1000, 1000), (-1, 0, 0)), (1, 1000, 1000), (1, 0, 0))
