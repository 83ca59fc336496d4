"""Types shared by the narrowphase pair functions.

Every pair function has the signature ``f(g1: GeomWorld, g2: GeomWorld) -> Contact``
for ONE pair of geoms (unbatched; the collision driver vmaps it over all pairs
of that type) and a module-level constant giving its number of contact slots.

Conventions (ODE's, see the manual's Collision Detection chapter):
- ``normal`` is a unit vector in the world frame pointing from geom 2 towards
  geom 1: pushing geom 1 along +normal separates the pair.
- ``depth`` > 0 is penetration depth in metres.
- ``pos`` is the contact point in world coordinates.
- ``valid`` marks the slots that hold a contact; invalid slots carry finite
  (e.g. zero) values so that no NaN reaches the solver or a gradient.
"""
from __future__ import annotations

from typing import NamedTuple

import jax

from jaxode._struct import pytree_dataclass

# Geom type ids (values are stable: they index tables in the model).
PLANE = 0
SPHERE = 1
BOX = 2
CAPSULE = 3
CYLINDER = 4
HEIGHTFIELD = 5
CONVEX = 6
TRIMESH = 7
GEOM_TYPE_NAMES = {PLANE: "plane", SPHERE: "sphere", BOX: "box", CAPSULE: "capsule",
                   CYLINDER: "cylinder", HEIGHTFIELD: "heightfield", CONVEX: "convex",
                   TRIMESH: "trimesh"}


#: ODE keeps a contact when its depth is >= 0. A depth computed in the working
#: dtype carries a rounding error of a few units in the last place (ulps) of
#: the coordinates it comes from (a geom's world position is the body's plus
#: its rotated offset, a plane's distance a dot product); a body resting at
#: depth -> 0 (ODE's ERP drives the depth to zero when the surface layer is 0)
#: then reads a depth a few ulps below 0 in a fraction of its steps, and the
#: contact flickers off and on. In float32 (ulp 2e-8 m at 0.2 m) that made a
#: ball with its centre of mass below its centre (Gazebo's SphereSlip
#: "lowball") lose its contact in 3 % of the steps and slide 3-80 % faster than
#: its slip allows. :func:`touching` counts a depth down to -TOUCH_ULPS ulps
#: of the scale as touching, at depth 0 (no correction, only the
#: no-approach row): within the precision, as ODE in double would see it.
#: Every resting test uses it: the plane pairs (sphere, box, capsule,
#: cylinder, convex, trimesh), the face-clipping pairs (box-box, the hull
#: pairs, cylinder's SAT pairs, hull and ball against a mesh, mesh-mesh),
#: the heightfield samples, and the broadphase AABBs are grown by as much
#: (``kinematics.geom_aabbs``). tests/test_touching.py checks each.
TOUCH_ULPS = 4


def touching(depth, scale):
    """ODE's "contact when depth >= 0" in the working precision: returns
    ``(depth, valid)`` with ``valid = depth >= -TOUCH_ULPS * eps * scale`` and
    the depths in that rounding band read as 0 (depths >= 0 are returned bit for
    bit). ``scale`` [m]: the size of the coordinates the depth was computed from
    (e.g. max |component| of the two geoms' positions plus the geom's extent);
    ``eps`` the dtype's machine epsilon (1.2e-7 float32, 2.2e-16 float64)."""
    import jax.numpy as jnp
    tol = TOUCH_ULPS * jnp.finfo(depth.dtype).eps * scale
    valid = depth >= -tol
    return jnp.where(depth < 0, jnp.zeros_like(depth), depth), valid


def coord_scale(*xs):
    """The ``scale`` for :func:`touching` [m]: the sum of max |component| of
    each array (the positions and extents a depth was computed from)."""
    import jax.numpy as jnp
    return sum(jnp.max(jnp.abs(x)) for x in xs)


class GeomWorld(NamedTuple):
    """One geom placed in the world.

    pos:  (3,) world position of the geom's frame origin [m]. For a plane: the
          point ``normal * offset`` on the plane.
    rot:  (3, 3) rotation matrix, columns are the geom's local axes in world
          coordinates. For a plane, ``rot[:, 2]`` is the unit normal.
    size: (3,) type-specific sizes [m]: sphere ``(r, 0, 0)``; box full side
          lengths ``(lx, ly, lz)`` as ODE's dCreateBox; capsule
          ``(r, length, 0)`` with the cylinder of ``length`` along local z
          (ODE's dCreateCapsule); cylinder ``(r, length, 0)``, flat-ended,
          along local z (ODE's dCreateCylinder); heightfield ``(lx, ly,
          index into the model's heightfield grids)``; convex ``(index into
          the model's hull tables, bounding radius about the geom origin,
          0)``; trimesh ``(index into the model's mesh tables, bounding
          radius about the geom origin, 0)``; plane unused.
    """

    pos: jax.Array
    rot: jax.Array
    size: jax.Array


class Contact(NamedTuple):
    """Fixed-capacity contact set of one geom pair (K slots).

    pos: (K, 3) world contact points [m]; normal: (K, 3) unit normals from
    geom 2 into geom 1; depth: (K,) penetration [m]; valid: (K,) bool.
    """

    pos: jax.Array
    normal: jax.Array
    depth: jax.Array
    valid: jax.Array


@pytree_dataclass
class Hull:
    """Convex hull tables of one convex geom, geom frame (see ``jaxode.hull``).

    The Model stacks them with a leading hull axis (``Model.convex_hulls``);
    tables are padded to the largest hull, padding rows repeating row 0, so a
    max, min or support over a table is the real hull's without a mask.

    verts (V, 3) [m]; normals (F, 3) unit outward face normals; offsets (F,)
    [m] (the solid is ``normals @ x <= offsets``); faces (F, L) int vertex
    loops, counter-clockwise seen from outside, the first ``face_size`` (F,)
    entries real; edges (E, 2) int vertex pairs, each edge once; edge_faces
    (E, 2) int the two faces meeting at the edge; tris (T, 3) int the faces'
    fan triangles; centre (3,) [m] an interior point (the vertex mean); nvert,
    nface () int the real vertex and face counts.
    """

    verts: jax.Array
    normals: jax.Array
    offsets: jax.Array
    faces: jax.Array
    face_size: jax.Array
    edges: jax.Array
    edge_faces: jax.Array
    tris: jax.Array
    centre: jax.Array
    nvert: jax.Array
    nface: jax.Array


@pytree_dataclass
class Mesh:
    """Triangle mesh tables, geom frame (see ``jaxode.meshes``); the same for
    a static mesh and one on a body (only the geom's world pose moves).

    The Model stacks them with a leading mesh axis (``Model.trimeshes``),
    padded to the largest mesh: vertex and triangle rows repeat row 0, cell
    lists are padded with -1.

    verts (V, 3) [m]; tris (T, 3) int vertex indices, counter-clockwise seen
    from the normal side; normals (T, 3) unit face normals; edge_kind (T, 3)
    int (0 concave, 1 flat, 2 convex or boundary) of edge k = corner k to
    k+1; corner_kind (T, 3) int likewise per corner; tri_lo, tri_hi (T, 3)
    [m] triangle bounding boxes; tri_cell (T, 3) int the first grid cell of
    each triangle per axis; origin (3,) [m] the grid's low corner; cell (3,)
    [m] cell sides; dims (3,) int cells per axis; cells (C, M) int triangle
    ids per cell (-1: none), cell index ``(i * ny + j) * nz + k``; ntri ()
    int the real triangle count. Normal cones (``jaxode.meshes.MeshData``):
    edge_normal (T, 3, 3) the neighbour's normal across each edge (zero: a
    boundary edge); per vertex cone_normals, cone_planes (V, R, 3),
    cone_other (V, R) int, cone_count (V,) int (0: no convex cone) and
    vert_open (V,) int (1: a boundary vertex).
    """

    verts: jax.Array
    tris: jax.Array
    normals: jax.Array
    edge_kind: jax.Array
    corner_kind: jax.Array
    tri_lo: jax.Array
    tri_hi: jax.Array
    tri_cell: jax.Array
    origin: jax.Array
    cell: jax.Array
    dims: jax.Array
    cells: jax.Array
    ntri: jax.Array
    edge_normal: jax.Array
    cone_normals: jax.Array
    cone_planes: jax.Array
    cone_other: jax.Array
    cone_count: jax.Array
    vert_open: jax.Array
