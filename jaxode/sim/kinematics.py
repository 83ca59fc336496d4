"""Stage 1: geom world poses and axis-aligned bounding boxes from body poses."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.sim.collision import contact as ct
from jaxode.types import Model


def geom_poses(model: Model, pos: jax.Array, quat: jax.Array) -> tuple[jax.Array, jax.Array]:
    """World position (ngeom, 3) [m] and rotation (ngeom, 3, 3) of every geom.

    A geom on a body sits at its offset (body frame) from the body pose; a
    static geom (body index ``nbody``) keeps its own world pose.
    """
    body_pos = jnp.concatenate([pos, jnp.zeros((1, 3), pos.dtype)], axis=0)
    ident = jnp.zeros((1, 4), quat.dtype).at[0, 0].set(1.0)
    body_quat = jnp.concatenate([quat, ident], axis=0)
    bq = body_quat[model.geom_body]
    bp = body_pos[model.geom_body]
    brot = jax.vmap(jm.quat_to_mat)(bq)
    gpos = bp + jm.einsum("gij,gj->gi", brot, model.geom_pos)
    grot = jm.einsum("gij,gjk->gik", brot, jax.vmap(jm.quat_to_mat)(model.geom_quat))
    return gpos, grot


def geom_aabbs(model: Model, gpos: jax.Array, grot: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Lower and upper AABB corners (ngeom, 3) [m], world frame; planes are
    unbounded, heightfields bounded in x and y only; convex hulls and triangle
    meshes exact (the extremes of their rotated vertices); all grown by
    ``contact.TOUCH_ULPS`` ulps of their larger coordinate on each axis."""
    size = model.geom_size
    t = model.geom_type[:, None]
    r = size[:, 0:1]
    half_box = 0.5 * jm.einsum("gij,gj->gi", jnp.abs(grot), size)
    axis = grot[:, :, 2]
    half_caps = jnp.abs(axis) * (0.5 * size[:, 1:2]) + r
    # cylinder: the cap discs' extent r * sqrt(1 - axis_i^2) plus the half axis;
    # 1 - axis_i^2 as the other two components' squares (1 - a_z^2 cancels to
    # 0 in float32 for a tilt under 3e-4 rad, and the AABB missed the rim's
    # r * tilt below the cap: a standing cylinder resting on a hull lost the pair)
    a2 = axis * axis
    disc2 = jnp.roll(a2, 1, axis=1) + jnp.roll(a2, 2, axis=1)
    disc = jnp.where(disc2 > 0, jnp.sqrt(jnp.where(disc2 > 0, disc2, 1.0)), 0.0)
    half_cyl = jnp.abs(axis) * (0.5 * size[:, 1:2]) + r * disc
    half = jnp.where(t == ct.SPHERE, jnp.broadcast_to(r, half_box.shape),
                     jnp.where(t == ct.BOX, half_box,
                               jnp.where(t == ct.CYLINDER, half_cyl, half_caps)))
    inf = jnp.full_like(half, jnp.inf)
    half = jnp.where(t == ct.PLANE, inf, half)
    half_hf = jnp.concatenate([0.5 * size[:, :2], jnp.full_like(size[:, :1], jnp.inf)], axis=1)
    half = jnp.where(t == ct.HEIGHTFIELD, half_hf, half)
    lo = jnp.where(t == ct.PLANE, -inf, gpos - half)
    hi = jnp.where(t == ct.PLANE, inf, gpos + half)
    # convex hulls and meshes: exact, from their vertices (padding repeats a vertex)
    for tables, g in ((model.convex_hulls, model.convex_geom),
                      (model.trimeshes, model.trimesh_geom)):
        if tables is not None:
            v = gpos[g][:, None, :] + jm.einsum("hij,hvj->hvi", grot[g],
                                                 tables.verts.astype(gpos.dtype))
            lo = lo.at[g].set(jnp.min(v, axis=1))
            hi = hi.at[g].set(jnp.max(v, axis=1))
    # grown by the contact's rounding band (``contact.touching``): two bodies
    # resting face on face have AABBs that touch, and a few ulps of rounding
    # must not part them before the pair function sees them
    ext = jnp.maximum(jnp.where(jnp.isfinite(lo), jnp.abs(lo), 0.0),
                      jnp.where(jnp.isfinite(hi), jnp.abs(hi), 0.0))
    pad = ct.TOUCH_ULPS * jnp.finfo(lo.dtype).eps * ext
    return lo - pad, hi + pad
