"""Shapes against a static heightfield (terrain), ODE's dCreateHeightfield in spirit.

A heightfield is a grid of ``nx x ny`` heights over the rectangle ``lx x ly``
centred at its geom position (axis-aligned: world x along the first index,
world y along the second), heights added to the position's z. Each grid cell
is split along its diagonal from (i+1, j) to (i, j+1) into two triangles, so
the surface is continuous and piecewise planar; outside the rectangle there is
no terrain (no contact).

Contacts come from sampling: a fixed set of points on each shape's lower
surface (box corners, edge midpoints and face centres; cylinder rim and cap
centre points; convex hulls' vertices, edge midpoints and face centroids,
in ``convex.py``; the support points of spheres, capsules' end and middle
spheres, in the direction of the terrain normal below them) is tested
against the triangle below or above each point. A point under the surface
gives a contact at the point, with the triangle's upward normal and the
depth ``(h(x, y) - z) n_z`` (its distance to the triangle's plane). The
candidates are reduced to the pair's slots, deepest first then spread out.
Terrain features narrower than the sampling (a spike poking into a box's
face between sample points) are missed: the method suits terrain that is
smooth at the scale of the shapes, as walking terrain is.

Pair functions take the heightfield's grid as extra arguments:
``fn(g1, g2, heights (NX, NY) padded, dims (2,) int = (nx, ny))``, with
``g2.size = (lx, ly, index)``. Normal from the heightfield into the shape.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .box import _FLAT_REL, _reduce
from .contact import Contact, GeomWorld, coord_scale, touching
from jaxode.sim import math as jm

SPHERE_HFIELD_NCON = 4
BOX_HFIELD_NCON = 4
CAPSULE_HFIELD_NCON = 4
CYLINDER_HFIELD_NCON = 4

# box samples: corners, edge midpoints, face centres (all sign vectors in {-1,0,1}^3 but 0)
_BOX_SAMPLES = np.array([(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)
                         if (a, b, c) != (0, 0, 0)], dtype=np.float64)
_NRIM = 8
_SPHERE_OFFSETS = np.array([(0, 0), (0.5, 0), (-0.5, 0), (0, 0.5), (0, -0.5)], dtype=np.float64)


def surface(heights, dims, g2: GeomWorld, xy):
    """Terrain height [m] (world z), unit upward normal and an inside mask at
    world points xy (K, 2)."""
    dt = xy.dtype
    nx, ny = dims[0], dims[1]
    lx, ly = g2.size[0], g2.size[1]
    cx = lx / (nx - 1).astype(dt)
    cy = ly / (ny - 1).astype(dt)
    u = (xy[:, 0] - (g2.pos[0] - 0.5 * lx)) / cx
    v = (xy[:, 1] - (g2.pos[1] - 0.5 * ly)) / cy
    inside = (u >= 0) & (u <= (nx - 1)) & (v >= 0) & (v <= (ny - 1))
    i = jnp.clip(jnp.floor(u).astype(jnp.int32), 0, nx - 2)
    j = jnp.clip(jnp.floor(v).astype(jnp.int32), 0, ny - 2)
    fu = jnp.clip(u - i, 0.0, 1.0)
    fv = jnp.clip(v - j, 0.0, 1.0)
    h00, h10 = heights[i, j], heights[i + 1, j]
    h01, h11 = heights[i, j + 1], heights[i + 1, j + 1]
    lower = fu + fv <= 1.0
    hu = jnp.where(lower, h10 - h00, h11 - h01)  # dh/du on the triangle
    hv = jnp.where(lower, h01 - h00, h11 - h10)
    h = jnp.where(lower, h00 + fu * hu + fv * hv, h11 - (1.0 - fu) * hu - (1.0 - fv) * hv)
    n = jnp.stack([-hu / cx, -hv / cy, jnp.ones_like(hu)], axis=-1)
    n = n / jnp.sqrt(jm.sum_terms(n * n, axis=-1, keepdims=True))
    return h.astype(dt) + g2.pos[2], n.astype(dt), inside


def _points_contacts(pts, heights, dims, g2, ncon):
    """Contacts of sample points (K, 3) under the terrain, reduced to ncon."""
    h, n, inside = surface(heights, dims, g2, pts[:, :2])
    raw = (h - pts[:, 2]) * n[:, 2]
    depth, touch = touching(raw, coord_scale(pts, g2.pos, heights))
    extent = 0.5 * jm.sum_terms(jnp.max(pts, axis=0) - jnp.min(pts, axis=0))
    flat_tol = _FLAT_REL * extent
    # A face resting on the terrain: its samples within the flat band of the
    # deepest touching one are in contact (at depth 0) even where the body's
    # micro-rocking has lifted them a few ulps off. Otherwise which samples
    # touch changes from step to step, the reduced set with it (two sets
    # alternating, then a lopsided one), and a hexagonal prism resting on
    # flat terrain was jolted to 1.8 cm/s after 785 steps (tests/test_resting.py).
    contact = inside & touch
    deepest = jnp.max(jnp.where(contact, raw, -jnp.inf))
    near = inside & jnp.any(contact) & (raw >= deepest - flat_tol)
    ok = inside & (touch | near)   # (touching() already reads a separation as depth 0)
    sel, sok = _reduce(pts, depth, ok, ncon, flat_tol)
    return Contact(pos=jnp.where(sok[:, None], pts[sel], 0.0),
                   normal=jnp.where(sok[:, None], n[sel], 0.0),
                   depth=jnp.where(sok, depth[sel], 0.0), valid=sok)


def _ball_points(centres, r, heights, dims, g2):
    """Support points of balls (M, 3) of radius r against the terrain normals
    below 5 points around each centre: (5 M, 3)."""
    off = jnp.asarray(_SPHERE_OFFSETS, centres.dtype) * r
    xy = (centres[:, None, :2] + off[None]).reshape(-1, 2)
    _, n, _ = surface(heights, dims, g2, xy)
    return (jnp.repeat(centres, off.shape[0], axis=0) - r * n)


def sphere_heightfield(g1: GeomWorld, g2: GeomWorld, heights, dims) -> Contact:
    """Sphere (g1) on the terrain (g2)."""
    pts = _ball_points(g1.pos[None], g1.size[0], heights, dims, g2)
    return _points_contacts(pts, heights, dims, g2, SPHERE_HFIELD_NCON)


def capsule_heightfield(g1: GeomWorld, g2: GeomWorld, heights, dims) -> Contact:
    """Capsule (g1) on the terrain (g2): its end and middle spheres."""
    a = g1.rot[:, 2] * (0.5 * g1.size[1])
    centres = jnp.stack([g1.pos - a, g1.pos, g1.pos + a])
    pts = _ball_points(centres, g1.size[0], heights, dims, g2)
    return _points_contacts(pts, heights, dims, g2, CAPSULE_HFIELD_NCON)


def box_heightfield(g1: GeomWorld, g2: GeomWorld, heights, dims) -> Contact:
    """Box (g1) on the terrain (g2): 8 corners, 12 edge midpoints, 6 face centres."""
    local = jnp.asarray(_BOX_SAMPLES, g1.pos.dtype) * (0.5 * g1.size)
    pts = g1.pos + jm.mm(local, g1.rot.T)
    return _points_contacts(pts, heights, dims, g2, BOX_HFIELD_NCON)


def cylinder_heightfield(g1: GeomWorld, g2: GeomWorld, heights, dims) -> Contact:
    """Cylinder (g1) on the terrain (g2): 8 rim points and the centre of each cap."""
    dt = g1.pos.dtype
    r, h = g1.size[0], 0.5 * g1.size[1]
    ang = jnp.asarray(2 * np.pi * np.arange(_NRIM) / _NRIM, dt)
    ring = jnp.stack([r * jnp.cos(ang), r * jnp.sin(ang), jnp.zeros_like(ang)], -1)
    ring = jnp.concatenate([ring, jnp.zeros((1, 3), dt)])
    local = jnp.concatenate([ring + jnp.array([0.0, 0.0, h], dt), ring - jnp.array([0.0, 0.0, h], dt)])
    pts = g1.pos + jm.mm(local, g1.rot.T)
    return _points_contacts(pts, heights, dims, g2, CYLINDER_HFIELD_NCON)
