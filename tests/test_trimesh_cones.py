"""Hulls against a closed convex triangle mesh are hulls against the solid it
bounds (the mesh's normal cones, ``jaxode.meshes`` and
``jaxode.sim.collision.trimesh``).

Independent truths (numpy / scipy, float64):
- the cone tables of a box mesh are the box's: three face normals at every
  corner, the far ends of its three box edges, the neighbour's normal
  across every triangle edge (the adjacent face's, or the same face's
  across a diagonal); a flat grid has one normal inside and open boundary
  vertices; an inside-out box has no convex cone;
- the solid's overlap with a hull along a unit direction n is
  max over mesh vertices of n.x - min over hull vertices of n.y; no contact
  is deeper than it along its own normal;
- the exact penetration depth d* of the two solids is the smallest of those
  overlaps over the facets of their Minkowski difference (scipy's hull of
  the pairwise vertex differences); the deepest contact equals it when d*
  is below the mesh's drop along the minimising axis from its support
  feature to the next vertex (then every triangle the hull touches has that
  axis among its own) and the hull's centre is outside the solid;
- a flat mesh is a plane: a box above its inside touches it at its lowest
  corner's depth, every contact along the face normal.
Shapes: a box, the cylinder's 16-gon prism and a random convex hull, against
the 12-triangle box mesh and the triangulated hull of random points.
"""
from __future__ import annotations

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation

from jaxode.build import hull as hull_lib
from jaxode.build import meshes as mesh_lib
from jaxode.sim.collision import trimesh as tm
from jaxode.sim.collision.convex import place
from jaxode.sim.collision.contact import GeomWorld, Hull, Mesh
from truths import box_points, grid_mesh, oriented_hull

POSES = 160


@pytest.fixture(autouse=True)
def _x64():
    with jax.enable_x64(True):
        yield


def ellipsoid_points(n, seed, radii):
    p = np.random.default_rng(seed).normal(size=(n, 3))
    return p / np.linalg.norm(p, axis=1, keepdims=True) * np.asarray(radii)


MESHES = {
    "box": oriented_hull(box_points([0.8, 0.6, 0.5])),
    "random": oriented_hull(ellipsoid_points(30, 11, [0.4, 0.32, 0.24])),
}
CYL = (0.2, 0.5)
PRISM = np.array([[CYL[0] * np.cos(a), CYL[0] * np.sin(a), z] for a in np.arange(16) * np.pi / 8
                  for z in (-0.5 * CYL[1], 0.5 * CYL[1])])
CONVEX = ellipsoid_points(20, 3, [0.25, 0.2, 0.15])
SHAPES = {"box": box_points([0.4, 0.3, 0.2]), "cylinder": PRISM, "convex": CONVEX}


def tables(data):
    return Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})


# ------------------------------------------------------------------ tables
def test_box_mesh_cones_are_the_box():
    v, t = MESHES["box"]
    d = mesh_lib.build_mesh(v, t)
    assert np.all(d.cone_count == 3) and not d.vert_open.any()
    for p in range(len(v)):
        want = np.eye(3) * np.sign(v[p])  # the three faces at this corner
        got = d.cone_normals[p, :3]
        assert sorted(map(tuple, np.round(got, 12))) == sorted(map(tuple, want))
        ends = v[d.cone_other[p, :3]] - v[p]  # the three box edges
        assert sorted(np.argmax(np.abs(ends), 1)) == [0, 1, 2]
        assert np.allclose(np.sort(np.abs(ends).max(1)), np.sort([0.8, 0.6, 0.5]))
        # counter-clockwise about the outside, side planes inwards: the
        # corner's outward diagonal is inside, its opposite is not
        diag = np.sign(v[p]) / np.sqrt(3)
        assert np.all(d.cone_planes[p, :3] @ diag > 0)
        assert np.all(np.cross(got, np.roll(got, -1, 0)) @ diag > 0)
    for i, tri in enumerate(t):
        for k in range(3):
            a, b = v[tri[k]], v[tri[(k + 1) % 3]]
            n = d.normals[i]
            same = np.isclose(a, b)  # the coordinates the edge keeps
            if same.sum() == 2:  # a box edge: the other face through it
                axis = [j for j in range(3) if same[j] and abs(n[j]) < 0.5][0]
                want = np.eye(3)[axis] * np.sign(a[axis])
            else:  # a diagonal: the same face
                want = n
            np.testing.assert_allclose(d.edge_normal[i, k], want, atol=1e-12)


def test_flat_and_inside_out_cones():
    v, t = grid_mesh(4, 4.0)  # vertices on the integers -2 .. 2
    d = mesh_lib.build_mesh(v, t)
    inner = (np.abs(v[:, 0]) < 1.5) & (np.abs(v[:, 1]) < 1.5)
    np.testing.assert_array_equal(d.cone_count, np.where(inner, 1, 0))
    np.testing.assert_array_equal(d.vert_open, ~inner)
    np.testing.assert_allclose(d.cone_normals[inner, 0], np.tile([0, 0, 1.0], (inner.sum(), 1)))
    bv, bt = MESHES["box"]
    inv = mesh_lib.build_mesh(bv, bt[:, ::-1])
    assert np.all(inv.cone_count == 0) and not inv.vert_open.any()


# ------------------------------------------------------------------ the solid
# every mesh and every shape padded into one table each, so that one compiled
# function serves all six cases (the box and the 16-gon prism as the hulls
# of their corners: box_trimesh and cylinder_trimesh are hull_trimesh on
# those hulls)
_MESH_KEYS, _SHAPE_KEYS = sorted(MESHES), sorted(SHAPES)
_MESH_T = mesh_lib.pad_meshes([mesh_lib.build_mesh(*MESHES[k]) for k in _MESH_KEYS])
_HULL_T = hull_lib.pad_hulls([hull_lib.build_hull(SHAPES[k]) for k in _SHAPE_KEYS])
_NT = _MESH_T["tris"].shape[1]


@jax.jit
def _solid_contacts(mesh_t, ntri, hull, pos, rots):
    """Contacts (normal, depth, valid) of the hull at each pose against the
    mesh, all its triangles candidates."""
    scale = jnp.max(jnp.linalg.norm(hull.verts, axis=-1))

    def one(p, r):
        tris = tm.place_triangles(mesh_t, jnp.zeros(3), jnp.eye(3), jnp.arange(_NT),
                                  jnp.arange(_NT) < ntri)
        c = tm.hull_trimesh(place(hull, p, r), tris, tm.CONVEX_TRIMESH_NCON, scale)
        return c.normal, c.depth, c.valid

    return jax.vmap(one)(pos, rots)


def _solid(mv, hv):
    """Exact penetration depth d* (<= 0: apart) and whether it is shallow."""
    h = ConvexHull((mv[:, None] - hv[None]).reshape(-1, 3))
    k = np.argmin(-h.equations[:, 3])
    d, a = -h.equations[k, 3], h.equations[k, :3]
    proj = mv @ a
    rest = proj[proj < proj.max() - 1e-9]
    return d, d < proj.max() - rest.max()


@pytest.mark.parametrize("mesh", sorted(MESHES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_hull_against_closed_mesh_is_the_solid(mesh, shape):
    mv, mt = MESHES[mesh]
    im, ih = _MESH_KEYS.index(mesh), _SHAPE_KEYS.index(shape)
    mesh_t = Mesh(**{k: jnp.asarray(x[im]) for k, x in _MESH_T.items()})
    hull = Hull(**{k: jnp.asarray(x[ih]) for k, x in _HULL_T.items()})
    hpts = SHAPES[shape]
    centre = np.asarray(hull.centre)
    rng = np.random.default_rng(zlib.crc32(f"{mesh} {shape}".encode()))
    rots = Rotation.random(POSES, random_state=rng.integers(1 << 31)).as_matrix()
    ext = np.max(np.abs(mv), 0) + np.max(np.linalg.norm(hpts, axis=1))
    pos = rng.uniform(-0.9, 0.9, (POSES, 3)) * ext
    # half the poses near the surface: overlap 0 to 0.04 m along a random direction
    u = rng.normal(size=(POSES // 2, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    reach = (np.max(u @ mv.T, 1) + np.max(np.einsum("nij,kj,ni->nk", rots[:POSES // 2], hpts, -u), 1)
             - rng.uniform(0.0, 0.04, POSES // 2))
    pos[:POSES // 2] = u * reach[:, None]
    cn, cd, cv = (np.asarray(x) for x in _solid_contacts(
        mesh_t, len(mt), hull, jnp.asarray(pos), jnp.asarray(rots)))
    eq = ConvexHull(mv).equations
    checked = 0
    for i in range(POSES):
        hv = pos[i] + hpts @ rots[i].T
        for k in np.nonzero(cv[i])[0]:
            over = np.max(mv @ cn[i, k]) - np.min(hv @ cn[i, k])
            assert cd[i, k] <= over + 1e-9, (i, k)
        c = pos[i] + rots[i] @ centre
        if np.max(eq[:, :3] @ c + eq[:, 3]) <= 1e-9:
            continue  # centre inside: the one-sided mesh sees nothing
        dstar, shallow = _solid(mv, hv)
        if not shallow:
            continue
        deep = np.max(np.where(cv[i], cd[i], 0.0))
        # ties within 1e-5 of the sizes go to a face axis (module docstring)
        np.testing.assert_allclose(deep, max(dstar, 0.0), atol=2e-6, err_msg=str(i))
        checked += dstar > 0
    assert checked >= 10


def test_box_above_a_flat_mesh_is_on_a_plane():
    """Random tilted boxes over the inside of a 128-triangle flat mesh: the
    deepest contact is the lowest corner's depth, every normal is +z."""
    v, t = grid_mesh(8, 2.0)
    mesh_t = tables(mesh_lib.build_mesh(v, t))
    size = np.array([0.4, 0.3, 0.2])
    rng = np.random.default_rng(5)
    rots = Rotation.random(POSES, random_state=6).as_matrix()
    pos = np.c_[rng.uniform(-0.5, 0.5, (POSES, 2)), rng.uniform(0.0, 0.2, POSES)]

    @jax.jit
    @jax.vmap
    def contacts(p, r):
        g2 = GeomWorld(jnp.zeros(3), jnp.eye(3), jnp.zeros(3))
        tris = tm.place_triangles(mesh_t, g2.pos, g2.rot, jnp.arange(len(t)), jnp.ones(len(t), bool))
        c = tm.box_trimesh(GeomWorld(p, r, jnp.asarray(size)), g2, tris)
        return c.normal, c.depth, c.valid

    cn, cd, cv = (np.asarray(x) for x in contacts(jnp.asarray(pos), jnp.asarray(rots)))
    for i in range(POSES):
        low = -np.min((pos[i] + box_points(size) @ rots[i].T)[:, 2])
        deep = np.max(np.where(cv[i], cd[i], 0.0))
        np.testing.assert_allclose(deep, max(low, 0.0), atol=1e-9)
        np.testing.assert_allclose(cn[i][cv[i]], np.tile([0, 0, 1.0], (cv[i].sum(), 1)), atol=1e-12)
