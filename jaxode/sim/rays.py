"""Ray casts against the geoms of one world (ODE's ray class, as a sensor).

Rays are not geoms here: they make no contacts and exert no force; they read
the scene (lidar, height scans, visibility). Each ray returns its nearest hit
with ODE's ray conventions (manual, "Ray class"; ``dCollideRay*``):

- ``dist``: distance from the ray origin to the hit point [m] (ODE's depth);
- ``point``: the hit point on the geom's surface, world frame [m];
- ``normal``: the surface normal at the hit point, facing the ray's origin
  (the outward normal when the ray starts outside the geom; when it starts
  inside a solid geom the ray hits the surface on its way out and the normal
  points inwards, as ODE, so it is always oriented for reflection);
- a plane is a half-space: a ray starting below it hits it only going up;
- a heightfield is searched along the ray (``ray_heightfield``): the first
  crossing of its surface, the normal facing the origin's side;
- a convex hull is the intersection of its face half-spaces (``ray_convex``):
  entry at the last plane entered, exit at the first plane left;
- a triangle mesh is a surface (``ray_trimesh``): the nearest triangle hit
  at t >= 0 (Moller-Trumbore over all its triangles), from either side, the
  normal facing the origin.

Every other geom is a convex solid, so a ray meets it in one parameter interval
``[t_in, t_out]``; the hit is ``t_in`` when ``t_in >= 0`` and ``t_out`` when
the origin is inside (``t_in < 0 <= t_out``), as ODE's per-class colliders.
Fixed shapes: every (ray, geom) pair is evaluated; one world per call (vmap
over worlds).
"""
from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxode.sim import kinematics
from jaxode.sim.collision import heightfield as hfc
from jaxode.sim.collision import contact as ct
from jaxode.types import Model, State
from jaxode.sim import math as jm

_TINY = 1e-30


def _div(n, d):
    """n / d where d != 0, else +-inf by the sign of n (a slab never left or never entered)."""
    ok = jnp.abs(d) > _TINY
    return jnp.where(ok, n / jnp.where(ok, d, 1.0), jnp.where(n >= 0, jnp.inf, -jnp.inf))


def _slab(s, v, h):
    """Interval of t with |s + t v| <= h (entry, exit); all t when v = 0 and
    |s| <= h (boundary included, as ODE's ray-box), none when v = 0 and |s| > h."""
    t1, t2 = _div(-h - s, v), _div(h - s, v)
    par = jnp.abs(v) <= _TINY
    inside = jnp.abs(s) <= h
    lo = jnp.where(par, jnp.where(inside, -jnp.inf, jnp.inf), jnp.minimum(t1, t2))
    hi = jnp.where(par, jnp.where(inside, jnp.inf, -jnp.inf), jnp.maximum(t1, t2))
    return lo, hi


def _unit(v, fallback):
    n2 = jm.sum_terms(v * v, axis=-1, keepdims=True)
    ok = n2 > 1e-24
    return jnp.where(ok, v / jnp.sqrt(jnp.where(ok, n2, 1.0)), fallback)


def _sphere_interval(s, v, r):
    """Ray s + t v (v unit) against the ball |x| <= r: (t_in, t_out), empty as (inf, -inf)."""
    b = jm.mm(s, v)
    c = jm.mm(s, s) - r * r
    k = b * b - c
    ok = k >= 0
    sk = jnp.sqrt(jnp.where(ok, k, 0.0))
    return jnp.where(ok, -b - sk, jnp.inf), jnp.where(ok, -b + sk, -jnp.inf)


def _disc_interval(s, v, r):
    """Ray against the infinite solid cylinder x^2 + y^2 <= r^2 (local frame)."""
    a = v[0] * v[0] + v[1] * v[1]
    b = s[0] * v[0] + s[1] * v[1]
    c = s[0] * s[0] + s[1] * s[1] - r * r
    par = a <= 1e-24
    k = b * b - a * c
    ok = k >= 0
    sk = jnp.sqrt(jnp.where(ok, k, 0.0))
    asafe = jnp.where(par, 1.0, a)
    t_in = jnp.where(ok, (-b - sk) / asafe, jnp.inf)
    t_out = jnp.where(ok, (-b + sk) / asafe, -jnp.inf)
    # parallel to the axis: inside for all t or never
    t_in = jnp.where(par, jnp.where(c <= 0, -jnp.inf, jnp.inf), t_in)
    t_out = jnp.where(par, jnp.where(c <= 0, jnp.inf, -jnp.inf), t_out)
    return t_in, t_out


def ray_geom(origin, direction, gtype, pos, rot, size):
    """One unit-direction ray against one geom (world frame).

    Returns (t_in, t_out, n_in, n_out): the parameter interval [m] where the
    ray is inside the solid (t_in = inf when it misses) and the outward
    surface normals at its ends. ``gtype``/``size`` as the model's geom tables.
    """
    dt = origin.dtype
    s = jm.mm(rot.T, origin - pos)  # local frame
    v = jm.mm(rot.T, direction)
    r, length = size[0], size[1]
    h = 0.5 * length
    ez = jnp.array([0.0, 0.0, 1.0], dt)

    # sphere
    sp_in, sp_out = _sphere_interval(s, v, r)
    # box: three slabs
    lo, hi = _slab(s, v, 0.5 * size)
    b_in, b_out = jnp.max(lo), jnp.min(hi)
    i_in, i_out = jnp.argmax(lo), jnp.argmin(hi)
    sv = jnp.where(v >= 0, 1.0, -1.0).astype(dt)
    b_nin = -sv * (jnp.arange(3) == i_in)
    b_nout = sv * (jnp.arange(3) == i_out)
    # cylinder (flat caps) and the capsule's shaft: disc x slab along z
    d_in, d_out = _disc_interval(s, v, r)
    z_in, z_out = _slab(s[2], v[2], h)
    cy_in, cy_out = jnp.maximum(d_in, z_in), jnp.minimum(d_out, z_out)
    cap_entry = z_in >= d_in
    cap_exit = z_out <= d_out

    def radial(t):
        p = s + jnp.where(jnp.isfinite(t), t, 0.0) * v
        return _unit(p * jnp.array([1.0, 1.0, 0.0], dt), jnp.array([1.0, 0.0, 0.0], dt))

    cy_nin = jnp.where(cap_entry, -jnp.sign(v[2]) * ez, radial(cy_in))
    cy_nout = jnp.where(cap_exit, jnp.sign(v[2]) * ez, radial(cy_out))
    # capsule = shaft u two end balls (convex: the union of the intervals)
    e1_in, e1_out = _sphere_interval(s - h * ez, v, r)
    e2_in, e2_out = _sphere_interval(s + h * ez, v, r)
    ca_in = jnp.minimum(jnp.minimum(jnp.where(cy_in <= cy_out, cy_in, jnp.inf), e1_in), e2_in)
    ca_out = jnp.maximum(jnp.maximum(jnp.where(cy_in <= cy_out, cy_out, -jnp.inf), e1_out), e2_out)

    def caps_normal(t):
        p = s + jnp.where(jnp.isfinite(t), t, 0.0) * v
        return _unit(p - ez * jnp.clip(p[2], -h, h), ez)

    # plane: half-space z <= 0 in the plane frame (rot[:, 2] = normal, pos on the plane)
    pl_t = _div(-s[2], v[2])
    up = v[2] > 0
    pl_ok = jnp.abs(v[2]) > _TINY
    pl_in = jnp.where(pl_ok, jnp.where(up, -jnp.inf, pl_t), jnp.inf)
    pl_out = jnp.where(pl_ok, jnp.where(up, pl_t, jnp.inf), -jnp.inf)

    def sel(plane, sphere, box, capsule, cylinder):
        return jnp.where(gtype == ct.PLANE, plane, jnp.where(
            gtype == ct.SPHERE, sphere, jnp.where(
                gtype == ct.BOX, box, jnp.where(gtype == ct.CAPSULE, capsule, cylinder))))

    t_in = sel(pl_in, sp_in, b_in, ca_in, cy_in)
    t_out = sel(pl_out, sp_out, b_out, ca_out, cy_out)
    sph_n = lambda t: _unit(s + jnp.where(jnp.isfinite(t), t, 0.0) * v, ez)  # noqa: E731
    n_in = sel(ez, sph_n(t_in), b_nin, caps_normal(t_in), cy_nin)
    n_out = sel(ez, sph_n(t_out), b_nout, caps_normal(t_out), cy_nout)
    known = ((gtype == ct.PLANE) | (gtype == ct.SPHERE) | (gtype == ct.BOX)
             | (gtype == ct.CAPSULE) | (gtype == ct.CYLINDER))
    empty = ~(t_in <= t_out) | ~known
    t_in = jnp.where(empty, jnp.inf, t_in)
    t_out = jnp.where(empty, -jnp.inf, t_out)
    return t_in, t_out, jm.mm(rot, n_in), jm.mm(rot, n_out)


def ray_convex(origin, direction, normals, offsets):
    """One unit-direction ray against a convex hull given by its world face
    planes ``normals @ x <= offsets`` (F, 3), (F,): (t_in, t_out, n_in, n_out)
    as ``ray_geom`` (t_in = inf on a miss). A ray parallel to a face plane
    and outside it misses; on the plane it counts as inside (as the box)."""
    v = jm.mm(normals, direction)
    s = offsets - jm.mm(normals, origin)  # > 0: the origin is inside that plane
    lo, hi = _slab_half(s, v)
    i_in, i_out = jnp.argmax(lo), jnp.argmin(hi)
    t_in, t_out = lo[i_in], hi[i_out]
    empty = ~(t_in <= t_out)
    return (jnp.where(empty, jnp.inf, t_in), jnp.where(empty, -jnp.inf, t_out),
            normals[i_in], normals[i_out])


def ray_trimesh(origin, direction, a, b, c, normals):
    """One unit-direction ray against triangles with world corners a, b, c
    (T, 3) and unit normals (T, 3) (Moller-Trumbore): (t, normal) of the
    nearest hit at t >= 0, the normal facing the origin; t = inf on a miss."""
    e1, e2 = b - a, c - a
    p = jnp.cross(direction, e2)
    det = jm.sum_terms(e1 * p, -1)
    ok = jnp.abs(det) > _TINY
    inv = 1.0 / jnp.where(ok, det, 1.0)
    s = origin - a
    u = jm.sum_terms(s * p, -1) * inv
    q = jnp.cross(s, e1)
    v = jm.mm(q, direction) * inv
    t = jm.sum_terms(e2 * q, -1) * inv
    hit = ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0)
    t = jnp.where(hit, t, jnp.inf)
    i = jnp.argmin(t)
    n = normals[i]
    return t[i], jnp.where(jm.mm(n, direction) > 0, -n, n)


def _slab_half(s, v):
    """Interval of t with t v <= s for each half-space (entry, exit): entered at
    s / v going in (v < 0), left at s / v going out (v > 0); parallel: all t
    when s >= 0, none otherwise."""
    t = _div(s, v)
    par = jnp.abs(v) <= _TINY
    lo = jnp.where(par, jnp.where(s >= 0, -jnp.inf, jnp.inf), jnp.where(v < 0, t, -jnp.inf))
    hi = jnp.where(par, jnp.where(s >= 0, jnp.inf, -jnp.inf), jnp.where(v > 0, t, jnp.inf))
    return lo, hi


_BISECT_ITERS = 40


def ray_heightfield(origin, direction, pos, size, heights, dims):
    """One unit-direction ray against a heightfield (see ``add_heightfield``).

    The ray is clipped to the terrain's bounding box (its rectangle times the
    heights' range), sampled at ``2 (NX + NY) + 8`` evenly spaced points, and
    the first change of side (above/below the triangulated surface) is refined
    by ``_BISECT_ITERS`` bisections. Returns (t [m], unit normal facing the
    origin's side: the surface normal from above, its opposite from below as
    ODE's plane); t = inf on a miss. Features thinner than the sample spacing
    along the ray can be stepped over; vertical rays are exact.
    """
    dt = origin.dtype
    nx, ny = dims[0], dims[1]
    NX, NY = heights.shape
    valid = (jnp.arange(NX)[:, None] < nx) & (jnp.arange(NY)[None, :] < ny)
    hmin = jnp.min(jnp.where(valid, heights, jnp.inf)) + pos[2]
    hmax = jnp.max(jnp.where(valid, heights, -jnp.inf)) + pos[2]
    centre = jnp.stack([pos[0], pos[1], 0.5 * (hmin + hmax)])
    half = jnp.stack([0.5 * size[0], 0.5 * size[1], 0.5 * (hmax - hmin) + 1e-6])
    lo, hi = _slab(origin - centre, direction, half)
    ta = jnp.maximum(jnp.max(lo), 0.0)
    tb = jnp.min(hi)
    ok = ta <= tb
    tb = jnp.where(ok, tb, ta)
    g = ct.GeomWorld(pos, jnp.eye(3, dtype=dt), size)
    k = 2 * (NX + NY) + 8
    ts = ta + (tb - ta) * jnp.linspace(0.0, 1.0, k, dtype=dt)

    def side(t):
        p = origin + t[..., None] * direction
        h, _, _ = hfc.surface(heights, dims, g, p[..., :2].reshape(-1, 2))
        return p[..., 2].reshape(-1) - h  # > 0 above

    f = side(ts)
    above0 = f[0] > 0
    change = (f[1:] > 0) != above0
    ok = ok & jnp.any(change)
    j = jnp.argmax(change)
    a, b = ts[j], ts[j + 1]

    def bisect(_, ab):
        a, b = ab
        m = 0.5 * (a + b)
        same = (side(m[None])[0] > 0) == above0
        return jnp.where(same, m, a), jnp.where(same, b, m)

    a, b = jax.lax.fori_loop(0, _BISECT_ITERS, bisect, (a, b))
    t = 0.5 * (a + b)
    p = origin + t * direction
    _, n, _ = hfc.surface(heights, dims, g, p[None, :2])
    n = jnp.where(above0, n[0], -n[0])
    return jnp.where(ok, t, jnp.inf), n


def raycast(model: Model, state: State, origins, directions, max_dist=jnp.inf,
            exclude_body: Optional[int] = None, geom_mask=None):
    """Nearest hit of each ray in one world (ODE's dCollide of a ray, all geoms).

    origins, directions: (..., 3) world frame [m]; directions need not be unit
    (they are normalised, as dGeomRaySet does; a zero direction misses).
    max_dist [m]: the ray length (dGeomRaySetLength), a scalar or one per ray
    (broadcast to the rays' batch shape); farther hits are misses.
    exclude_body: a body index whose geoms the rays ignore (e.g. the sensor's
    own body); geom_mask: optional (ngeom,) bool, False = ignored.

    Returns ``dist`` (...,) [m] (``inf`` on a miss), ``point`` (..., 3) [m],
    ``normal`` (..., 3) (unit, facing the ray origin; zero on a miss) and
    ``geom`` (...,) int32 (-1 on a miss). Batch worlds with ``jax.vmap``.
    """
    dtype = state.pos.dtype
    o = jnp.asarray(origins, dtype)
    d = jnp.asarray(directions, dtype)
    if o.shape[-1:] != (3,) or d.shape[-1:] != (3,):
        raise ValueError(f"raycast: origins and directions must have a last axis of 3 "
                         f"(got {o.shape} and {d.shape})")
    shape = jnp.broadcast_shapes(o.shape, d.shape)
    maxd = jnp.broadcast_to(jnp.asarray(max_dist, dtype), shape[:-1]).reshape(-1)
    o = jnp.broadcast_to(o, shape).reshape(-1, 3)
    d = jnp.broadcast_to(d, shape).reshape(-1, 3)
    n2 = jm.sum_terms(d * d, axis=-1, keepdims=True)
    dok = n2[:, 0] > 0
    d = d / jnp.sqrt(jnp.where(n2 > 0, n2, 1.0))
    # computed once (jm.materialize): every ray reads every geom's pose, and XLA
    # would recompute the poses inside the ray tests, per ray
    gpos, grot = jm.materialize(kinematics.geom_poses(model, state.pos, state.quat))
    use = jnp.ones((model.ngeom,), bool)
    if exclude_body is not None:
        use = use & (model.geom_body != exclude_body)
    if geom_mask is not None:
        use = use & jnp.asarray(geom_mask, bool).reshape(model.ngeom)

    per_geom = jax.vmap(ray_geom, in_axes=(None, None, 0, 0, 0, 0))
    t_in, t_out, n_in, n_out = jax.vmap(per_geom, in_axes=(0, 0, None, None, None, None))(
        o, d, model.geom_type, gpos, grot, model.geom_size.astype(dtype))  # (R, G)
    inside = t_in < 0
    t = jnp.where(inside, t_out, t_in)
    nrm = jnp.where(inside[..., None], -n_out, n_in)
    if model.hfield_heights is not None:  # heightfields: their own search, one column each
        nhf = model.hfield_heights.shape[0]
        is_hf = model.geom_type == ct.HEIGHTFIELD
        gi = jnp.argmax(is_hf[None] & (model.geom_dataid[None, :] == jnp.arange(nhf)[:, None]),
                        axis=1)  # (nhf,)
        per_hf = jax.vmap(ray_heightfield, in_axes=(None, None, 0, 0, 0, 0))
        t_hf, n_hf = jax.vmap(per_hf, in_axes=(0, 0, None, None, None, None))(
            o, d, gpos[gi], model.geom_size[gi].astype(dtype),
            model.hfield_heights.astype(dtype), model.hfield_dims)  # (R, nhf)
        t = t.at[:, gi].set(t_hf)
        nrm = nrm.at[:, gi].set(n_hf)
    if model.convex_hulls is not None:  # convex hulls: their face planes, one column each
        gc = model.convex_geom
        hulls = model.convex_hulls
        normals = jm.einsum("hij,hfj->hfi", grot[gc], hulls.normals.astype(dtype))
        offsets = hulls.offsets.astype(dtype) + jm.einsum("hfi,hi->hf", normals, gpos[gc])
        per_hull = jax.vmap(ray_convex, in_axes=(None, None, 0, 0))
        tc_in, tc_out, nc_in, nc_out = jax.vmap(per_hull, in_axes=(0, 0, None, None))(
            o, d, normals, offsets)  # (R, nhull)
        inside_c = tc_in < 0
        t = t.at[:, gc].set(jnp.where(inside_c, tc_out, tc_in))
        nrm = nrm.at[:, gc].set(jnp.where(inside_c[..., None], -nc_out, nc_in))
    if model.trimeshes is not None:  # triangle meshes: every triangle, one column each
        gm = model.trimesh_geom
        ms = model.trimeshes
        verts = gpos[gm][:, None, :] + jm.einsum("mij,mvj->mvi", grot[gm], ms.verts.astype(dtype))
        corners = jax.vmap(lambda v, t: v[t])(verts, ms.tris)  # (nmesh, T, 3, 3)
        normals = jm.einsum("mij,mtj->mti", grot[gm], ms.normals.astype(dtype))
        per_mesh = jax.vmap(ray_trimesh, in_axes=(None, None, 0, 0, 0, 0))
        tm, nm = jax.vmap(per_mesh, in_axes=(0, 0, None, None, None, None))(
            o, d, corners[:, :, 0], corners[:, :, 1], corners[:, :, 2], normals)  # (R, nmesh)
        t = t.at[:, gm].set(tm)
        nrm = nrm.at[:, gm].set(nm)
    hit = (t >= 0) & (t <= maxd[:, None]) & jnp.isfinite(t) & use[None] & dok[:, None]
    t = jnp.where(hit, t, jnp.inf)
    g = jnp.argmin(t, axis=1)
    dist = jnp.take_along_axis(t, g[:, None], axis=1)[:, 0]
    any_hit = jnp.isfinite(dist)
    normal = jnp.take_along_axis(nrm, g[:, None, None], axis=1)[:, 0]
    point = o + jnp.where(any_hit, dist, 0.0)[:, None] * d
    out_shape = shape[:-1]
    return (dist.reshape(out_shape),
            jnp.where(any_hit[:, None], point, 0.0).reshape(out_shape + (3,)),
            jnp.where(any_hit[:, None], normal, 0.0).reshape(out_shape + (3,)),
            jnp.where(any_hit, g, -1).astype(jnp.int32).reshape(out_shape))
