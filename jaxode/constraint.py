"""Stage 4: constraint rows of ODE's contact joint (``dxJointContact::getInfo2``).

Every contact slot gives three rows: the normal row and the friction rows
along ``t1`` and ``t2``. They are returned as two tables, ``head`` (rows
without a friction index: normals; joints will join them) and ``tail``
(friction rows), which is the order QuickStep solves them in. A row holds the bodies it couples, the
two 6-vector Jacobian blocks (linear, angular; world frame), the velocity
target ``c`` [m/s], ``cfm``, the bounds ``lo``/``hi`` and the friction index
(the row whose force bounds this one, -1 if none). Invalid slots give inactive
rows (zero Jacobian, zero bounds).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode import math as jm
from jaxode.types import FRICTION_PYRAMID, Contacts, Model, Params


class Rows(NamedTuple):
    """Constraint rows (R = number of rows) in ODE's joint-row order.

    body1, body2 (R,) body indices (``nbody`` = the static world);
    j1, j2 (R, 6) Jacobian blocks [linear | angular], world frame;
    c (R,) velocity target [m/s or rad/s] (ODE's getInfo2 rhs, before 1/h);
    cfm (R,) constraint force mixing; lo, hi (R,) force bounds [N]; for a row
    with a friction index the bound is ``|hi * lambda[findex]|``;
    findex (R,) friction index (-1: none); active (R,) bool.
    """

    body1: jax.Array
    body2: jax.Array
    j1: jax.Array
    j2: jax.Array
    c: jax.Array
    cfm: jax.Array
    lo: jax.Array
    hi: jax.Array
    findex: jax.Array
    active: jax.Array


def _combine_soft(a: jax.Array, b: jax.Array, world: jax.Array, use_min: bool) -> jax.Array:
    """Combine two optional (negative = unset) surface values; both unset -> world."""
    set_a, set_b = a >= 0, b >= 0
    both = jnp.minimum(a, b) if use_min else jnp.maximum(a, b)
    one = jnp.where(set_a, a, b)
    return jnp.where(set_a & set_b, both, jnp.where(set_a | set_b, one, world))


def contact_rows(model: Model, params: Params, contacts: Contacts, body_pos: jax.Array,
                 body_vel: jax.Array, body_angvel: jax.Array, grot: jax.Array,
                 h: jax.Array) -> tuple[Rows, Rows]:
    """Rows of all contact slots for one world: (head, tail).

    head: one normal row per slot (findex -1); tail: two friction rows per
    slot, contact-major, whose ``findex`` is the slot's normal row in head for
    the pyramid model and -1 (constant bounds) for the box model.

    body_pos/vel/angvel are padded with the static world (index nbody); grot
    (ngeom, 3, 3) geom rotations for fdir1; h the step [s].
    """
    dtype = body_pos.dtype
    g1, g2 = contacts.geom1, contacts.geom2
    b1, b2 = model.geom_body[g1], model.geom_body[g2]
    valid = contacts.valid
    # Invalid slots get a harmless unit normal so no 0/0 reaches the rows.
    n = jnp.where(valid[:, None], contacts.normal, jnp.array([0.0, 0.0, 1.0], body_pos.dtype))
    p = params
    # Surface combination (see jaxode.surface).
    mu = jnp.minimum(p.mu[g1], p.mu[g2])
    # mu2 < 0: unset, equal to the geom's mu (ODE without dContactMu2).
    mu2_geom = jnp.where(p.mu2 < 0, p.mu, p.mu2)
    mu2 = jnp.minimum(mu2_geom[g1], mu2_geom[g2])
    bounce = jnp.minimum(p.bounce[g1], p.bounce[g2])
    bounce_vel = jnp.minimum(p.bounce_vel[g1], p.bounce_vel[g2])
    erp = _combine_soft(p.soft_erp[g1], p.soft_erp[g2], p.erp, use_min=True)
    cfm = _combine_soft(p.soft_cfm[g1], p.soft_cfm[g2], p.cfm, use_min=False)
    max_vel = jnp.minimum(jnp.minimum(p.max_vel[g1], p.max_vel[g2]), p.contact_max_correcting_vel)
    min_depth = jnp.minimum(jnp.minimum(p.min_depth[g1], p.min_depth[g2]), p.contact_surface_layer)
    # Friction-row CFM: force-dependent slip where set (ODE dContactSlip1/2), else the world's.
    if p.slip1 is None:
        fcfm = jnp.broadcast_to(p.cfm, (2 * g1.shape[0],))
    else:
        slip2_geom = jnp.where(p.slip2 < 0, p.slip1, p.slip2)
        slip1 = _combine_soft(p.slip1[g1], p.slip1[g2], p.cfm, use_min=True)
        slip2 = _combine_soft(slip2_geom[g1], slip2_geom[g2], p.cfm, use_min=True)
        fcfm = jnp.stack([slip1, slip2], axis=1).reshape(-1)

    # Normal row: c = min(fps * erp * max(depth - min_depth, 0), max_vel), then bounce.
    r1 = contacts.pos - body_pos[b1]
    r2 = contacts.pos - body_pos[b2]
    depth = jnp.maximum(contacts.depth - min_depth, 0.0)
    c = jnp.minimum(erp * depth / h, max_vel)
    jn1 = jnp.concatenate([n, jnp.cross(r1, n)], axis=-1)
    jn2 = jnp.concatenate([-n, jnp.cross(n, r2)], axis=-1)
    outgoing = (jnp.sum(jn1[:, :3] * body_vel[b1], -1) + jnp.sum(jn1[:, 3:] * body_angvel[b1], -1)
                + jnp.sum(jn2[:, :3] * body_vel[b2], -1) + jnp.sum(jn2[:, 3:] * body_angvel[b2], -1))
    bounce_c = bounce * (-outgoing)
    c = jnp.where((-outgoing > bounce_vel) & (bounce_c > c), bounce_c, c)

    # Friction directions: fdir1 of geom 1 (else geom 2) in the world, projected on
    # the contact plane; else dPlaneSpace(n).
    f1 = jnp.einsum("cij,cj->ci", grot[g1], p.fdir1[g1])
    f2 = jnp.einsum("cij,cj->ci", grot[g2], p.fdir1[g2])
    has1 = jnp.sum(p.fdir1[g1] ** 2, -1) > 0
    fd = jnp.where(has1[:, None], f1, f2)
    fd = fd - jnp.sum(fd * n, -1, keepdims=True) * n
    fd2 = jnp.sum(fd * fd, -1, keepdims=True)
    use_fd = fd2 > 1e-12
    fd = fd / jnp.sqrt(jnp.where(use_fd, fd2, 1.0))
    ps1, _ = jax.vmap(jm.plane_space)(n)
    t1 = jnp.where(use_fd, fd, ps1)
    t2 = jnp.cross(n, t1)

    def frow(t):
        return (jnp.concatenate([t, jnp.cross(r1, t)], axis=-1),
                jnp.concatenate([-t, jnp.cross(t, r2)], axis=-1))

    jt1a, jt1b = frow(t1)
    jt2a, jt2b = frow(t2)
    ncon = n.shape[0]
    inf = jnp.full((ncon,), jnp.inf, dtype)
    mu = jnp.maximum(mu, 0.0)
    # Each direction's row is bounded by its own coefficient, as ODE with
    # dContactMu2 (what Gazebo always sets): mu = 0, mu2 > 0 keeps the second row.
    # With mu2 unset it equals mu, so mu = 0 still means no friction at all.
    mu2 = jnp.maximum(mu2, 0.0)
    pyramid = contacts.friction == FRICTION_PYRAMID
    vcol = valid[:, None]
    head = Rows(
        body1=b1, body2=b2,
        j1=jnp.where(vcol, jn1, 0.0), j2=jnp.where(vcol, jn2, 0.0),
        c=jnp.where(valid, c, 0.0), cfm=cfm.astype(dtype),
        lo=jnp.zeros((ncon,), dtype), hi=jnp.where(valid, inf, 0.0),
        findex=jnp.full((ncon,), -1, jnp.int32), active=valid)
    # Friction rows, contact-major: (t1 of contact 0, t2 of contact 0, t1 of contact 1, ...)
    fj1 = jnp.stack([jt1a, jt2a], axis=1).reshape(2 * ncon, 6)
    fj2 = jnp.stack([jt1b, jt2b], axis=1).reshape(2 * ncon, 6)
    vf = jnp.repeat(valid, 2)
    bound = jnp.where(vf, jnp.stack([mu, mu2], axis=1).reshape(2 * ncon), 0.0)
    tail = Rows(
        body1=jnp.repeat(b1, 2), body2=jnp.repeat(b2, 2),
        j1=jnp.where(vf[:, None], fj1, 0.0), j2=jnp.where(vf[:, None], fj2, 0.0),
        c=jnp.zeros((2 * ncon,), dtype), cfm=fcfm.astype(dtype),
        lo=-bound, hi=bound,
        findex=jnp.where(jnp.repeat(pyramid, 2), jnp.repeat(jnp.arange(ncon), 2), -1).astype(jnp.int32),
        active=vf)
    return head, tail
