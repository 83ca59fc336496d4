"""Sphere narrowphase: sphere-plane, sphere-sphere, sphere-box (ODE semantics).

All functions are pure, unbatched (one pair), jit/vmap friendly and NaN-free in
values and gradients (safe norms with the double-``where`` trick).
"""
from __future__ import annotations

import jax.numpy as jnp

from .contact import Contact, GeomWorld, coord_scale, touching
from jaxode.sim import math as jm

SPHERE_PLANE_NCON = 1
SPHERE_SPHERE_NCON = 1
SPHERE_BOX_NCON = 1

# Squared distance below which a direction is considered undefined.
_EPS_SQ = 1e-12


def _safe_norm_dir(v, fallback):
    """Return (|v|, v/|v|) with ``fallback`` direction (and 0 length) when |v|~0.

    Gradients stay finite: the sqrt/division only ever see safe inputs.
    """
    sq = jm.mm(v, v)
    ok = sq > _EPS_SQ
    n = jnp.sqrt(jnp.where(ok, sq, 1.0))
    length = jnp.where(ok, n, 0.0)
    direction = jnp.where(ok, v / n, fallback)
    return length, direction, ok


def _pack(pos, normal, depth, valid) -> Contact:
    """Stack single contacts (lists) into a Contact; zero the invalid slots."""
    pos = jnp.stack(pos)
    normal = jnp.stack(normal)
    depth = jnp.stack(depth)
    valid = jnp.stack(valid)
    return Contact(
        pos=jnp.where(valid[:, None], pos, 0.0),
        normal=jnp.where(valid[:, None], normal, 0.0),
        depth=jnp.where(valid, depth, 0.0),
        valid=valid,
    )


def _ex(dtype):
    return jnp.array([1.0, 0.0, 0.0], dtype=dtype)


def sphere_sphere_core(c1, r1, c2, r2, fallback=None):
    """ODE dCollideSpheres. Returns (pos, normal, depth, valid) for one contact.

    ``fallback``: the unit normal used when the centres coincide (closer than
    1e-6 m); ODE's (1, 0, 0) when None."""
    d, n, ok = _safe_norm_dir(c1 - c2, _ex(c1.dtype) if fallback is None else fallback)
    depth = r1 + r2 - d
    valid = d <= r1 + r2
    # ODE: pos = p1 + n * 0.5*(r2 - r1 - d) (midpoint of the two surface points);
    # for coincident centres pos = p1, normal = fallback, depth = r1 + r2.
    pos = jnp.where(ok, c1 + n * (0.5 * (r2 - r1 - d)), c1)
    return pos, n, depth, valid


def sphere_box_core(c, r, bpos, brot, bsize):
    """ODE dCollideSphereBox. Returns (pos, normal, depth, valid)."""
    half = 0.5 * bsize
    t = jm.mm(brot.T, c - bpos)  # centre in box frame
    q_loc = jnp.clip(t, -half, half)
    outside = jnp.any(jnp.abs(t) > half)
    # --- inside: push out along the axis of least penetration
    face = half - jnp.abs(t)
    i = jnp.argmin(face)
    onehot = jnp.arange(3) == i
    sgn = jnp.where(t > 0, 1.0, -1.0)
    n_in = jm.mm(brot, jnp.where(onehot, sgn, 0.0).astype(c.dtype))
    depth_in = r + jnp.min(face)
    # --- outside: closest point q on the box surface; a centre within
    # sqrt(_EPS_SQ) of the surface takes the outward normal of the face it is
    # farthest out of (the limit of c - q), not a fixed axis
    q = bpos + jm.mm(brot, q_loc)
    d, n_out, _ = _safe_norm_dir(c - q, n_in)
    depth_out = r - d
    pos = jnp.where(outside, q, c)
    normal = jnp.where(outside, n_out, n_in)
    depth, valid = touching(jnp.where(outside, depth_out, depth_in),
                            coord_scale(c, bpos, half) + r)
    return pos, normal, depth, valid


def sphere_plane(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Sphere (g1) vs plane half-space (g2). 1 slot."""
    c, r = g1.pos, g1.size[0]
    n = g2.rot[:, 2]
    depth, valid = touching(r - jm.mm(n, c - g2.pos),
                            jnp.max(jnp.abs(c)) + jnp.max(jnp.abs(g2.pos)) + r)
    pos = c - n * r
    return _pack([pos], [n], [depth], [valid])


def sphere_sphere(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Sphere (g1) vs sphere (g2). 1 slot."""
    p, n, d, v = sphere_sphere_core(g1.pos, g1.size[0], g2.pos, g2.size[0])
    return _pack([p], [n], [d], [v])


def sphere_box(g1: GeomWorld, g2: GeomWorld) -> Contact:
    """Sphere (g1) vs box (g2). 1 slot."""
    p, n, d, v = sphere_box_core(g1.pos, g1.size[0], g2.pos, g2.rot, g2.size)
    return _pack([p], [n], [d], [v])
