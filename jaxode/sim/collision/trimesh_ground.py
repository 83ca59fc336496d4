"""A triangle mesh on a body against the static ground: plane and heightfield.

The mesh is geom 1 (its ``size`` is ``(mesh index, bounding radius, 0)``),
the plane or heightfield geom 2; the pair functions take the mesh's tables
(geom frame) as extra arguments: ``fn(g1, g2, verts (V, 3) [m], tris (T, 3)
int[, heights, dims])``. Padding rows of the tables repeat row 0 (see
``jaxode.meshes.pad_meshes``): they give exact duplicates of a real
point, which both reductions merge, so no mask is needed.

- mesh-plane (ODE's dCollideTrimeshPlane): every mesh vertex below the
  plane is a contact at the vertex, with the plane's normal and depth
  ``offset - n . v``; the deepest point of a polyhedron below a half-space
  is always one of its vertices, so the deepest depth is exact. The
  vertices are reduced to ``TRIMESH_PLANE_NCON`` slots as the mesh pairs do
  (``trimesh.reduce_contacts``: deepest first, then the farthest from those
  kept), so a mesh box resting on a face keeps its four corners.
- mesh-heightfield: the mesh's vertices, triangle-edge midpoints and
  triangle centroids are sampled against the terrain triangle below each
  (``heightfield._points_contacts``, as convex-heightfield samples a hull):
  exact on planar terrain; terrain features narrower than the mesh's
  triangles can poke between the samples. Cost: V + 4 T points per pair.

Normals point from the ground into the mesh (ODE's convention).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from .heightfield import _points_contacts
from .trimesh import reduce_contacts
from .contact import Contact, GeomWorld, coord_scale, touching
from jaxode.sim import math as jm

TRIMESH_PLANE_NCON = 4
TRIMESH_HFIELD_NCON = 4


def world_vertices(g1: GeomWorld, verts) -> jax.Array:
    """The mesh's vertices (V, 3) [m] in the world frame."""
    return g1.pos + jm.mm(verts.astype(g1.pos.dtype), g1.rot.T)


def trimesh_plane(g1: GeomWorld, g2: GeomWorld, verts, tris) -> Contact:
    """Mesh (g1) vs plane half-space (g2): the vertices below the plane,
    deepest first then spread out; 4 slots."""
    v = world_vertices(g1, verts)
    n = g2.rot[:, 2]
    depth, touch = touching(jm.mm(g2.pos, n) - jm.mm(v, n), coord_scale(g1.pos, g2.pos, g1.size[1]))
    normal = jnp.broadcast_to(n, v.shape)
    return reduce_contacts(v, normal, depth, touch, TRIMESH_PLANE_NCON, g1.size[1])


def trimesh_heightfield(g1: GeomWorld, g2: GeomWorld, verts, tris, heights, dims) -> Contact:
    """Mesh (g1) on the terrain (g2): vertices, triangle-edge midpoints and
    centroids sampled against the triangles below them; 4 slots."""
    v = world_vertices(g1, verts)
    corners = v[tris]  # (T, 3, 3)
    mids = 0.5 * (corners + jnp.roll(corners, -1, axis=1))
    pts = jnp.concatenate([v, mids.reshape(-1, 3), jm.sum_terms(corners, 1) / 3])
    return _points_contacts(pts, heights, dims, g2, TRIMESH_HFIELD_NCON)
