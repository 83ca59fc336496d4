"""Stage 5: projected Gauss-Seidel with SOR, as ODE's QuickStep (``quickstep.cpp``).

With h the step, the rows are prepared exactly as QuickStep does:

- ``rhs = c/h - J (v/h + M^-1 f_ext)``, ``cfm' = cfm/h`` (f_ext: accumulated
  forces, gravity and the gyroscopic torque);
- ``iMJ = M^-1 J^T`` per row and ``Ad = w / (J iMJ + cfm')`` (w = sor);
- J, rhs and cfm' are pre-multiplied by Ad.

Then ``iterations`` sweeps over the rows; for each row
``delta = rhs - lambda cfm'Ad - J1 . fc[b1] - J2 . fc[b2]``; a row with a
friction index gets the bounds ``hi = |hi lambda[findex]|, lo = -hi``;
``lambda <- clamp(lambda + delta, lo, hi)`` and
``fc[b] += (lambda_new - lambda_old) iMJ``. lambda starts at zero (ODE's
default, no warm starting) and is a force [N]; fc = M^-1 J^T lambda.

Row order (deterministic): the ``head`` rows (no friction index: contact
normals, later joint rows) in order, then the ``tail`` rows (friction) in
order. For the pyramid model this is exactly ODE's initial order (findex == -1
rows first, then the others, each in joint-row order). Two documented
differences: ODE 0.16 shuffles all rows with its global random generator at
iterations 8 and 16, and it solves box-model friction rows (no friction index)
among the head rows. Both only matter where 20 iterations leave the problem
unconverged.

Implementation: each sweep is two ``lax.scan`` passes (head, then tail) whose
per-row data are scan inputs, so rows are read contiguously. When the rows'
bodies are fixed by the model (no contact compaction: every contact slot
belongs to a known geom pair), a batch of worlds shares the body indices and
``fc`` is read and written by dynamic slicing, the fast path. Otherwise a
body's ``fc`` is gathered and updated through one-hot vectors over the (few)
bodies of a world, or by indexed gather/scatter for worlds with many bodies.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode.constraint import Rows

# Above this many bodies per world, index fc directly instead of one-hot.
ONE_HOT_MAX_BODIES = 24
# Rows per scan step (loop unrolling).
UNROLL = 4


class _Prepared(NamedTuple):
    b1: jax.Array
    b2: jax.Array
    j1: jax.Array
    j2: jax.Array
    imj1: jax.Array
    imj2: jax.Array
    rhs: jax.Array
    cfm: jax.Array
    lo: jax.Array
    hi: jax.Array


def _dot6(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a * b, axis=-1)


def _prepare(rows: Rows, inv_mass, inv_inertia, rhs_body, h, sor) -> _Prepared:
    b1, b2 = rows.body1, rows.body2

    def imj(j, b):
        lin = inv_mass[b][:, None] * j[:, :3]
        ang = jnp.einsum("rij,rj->ri", inv_inertia[b], j[:, 3:])
        return jnp.concatenate([lin, ang], axis=-1)

    imj1, imj2 = imj(rows.j1, b1), imj(rows.j2, b2)
    rhs = rows.c / h + _dot6(rows.j1, rhs_body[b1]) + _dot6(rows.j2, rhs_body[b2])
    cfm = rows.cfm / h
    denom = _dot6(rows.j1, imj1) + _dot6(rows.j2, imj2) + cfm
    ad = jnp.where(rows.active, sor / jnp.where(rows.active, denom, 1.0), 0.0)
    return _Prepared(b1, b2, rows.j1 * ad[:, None], rows.j2 * ad[:, None], imj1, imj2,
                     rhs * ad, cfm * ad, rows.lo, rows.hi)


def solve_pgs(head: Rows, tail: Rows, inv_mass: jax.Array, inv_inertia: jax.Array,
              rhs_body: jax.Array, h: jax.Array, sor: jax.Array, iterations: int,
              static_bodies: bool = False) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Run QuickStep's SOR-LCP for one world.

    head, tail: row tables (tail rows' ``findex`` index head rows, -1 = fixed
    bounds). inv_mass (B,), inv_inertia (B, 3, 3) world frame, rhs_body (B, 6)
    = -(v/h + M^-1 f_ext), with B = nbody + 1 (last = static world, zeros).
    static_bodies: the rows' body indices are the same in every world of a
    batch (no contact compaction), so fc is indexed by slicing.
    Returns (lambda_head [N], lambda_tail [N], fc (B, 6) = M^-1 J^T lambda).
    """
    dtype = rhs_body.dtype
    nb = inv_mass.shape[0]
    nh, nt = head.body1.shape[0], tail.body1.shape[0]
    fc0 = jnp.zeros((nb, 6), dtype)
    if nh + nt == 0:
        return jnp.zeros((0,), dtype), jnp.zeros((0,), dtype), fc0
    ph = _prepare(head, inv_mass, inv_inertia, rhs_body, h, sor)
    pt = _prepare(tail, inv_mass, inv_inertia, rhs_body, h, sor)
    one_hot = (not static_bodies) and nb <= ONE_HOT_MAX_BODIES
    bodies = jnp.arange(nb)

    def body_access(b):
        if one_hot:
            return (bodies == b).astype(dtype)
        return b

    def get(fc, acc):
        return jnp.sum(acc[:, None] * fc, axis=0) if one_hot else fc[acc]

    def add(fc, acc, v):
        return fc + acc[:, None] * v[None, :] if one_hot else fc.at[acc].add(v)

    def row_update(fc, x, lo, hi):
        a1, a2, j1, j2, imj1, imj2, rhs, cfm, lam = x
        delta = rhs - lam * cfm - _dot6(j1, get(fc, a1)) - _dot6(j2, get(fc, a2))
        new = jnp.clip(lam + delta, lo, hi)
        d = new - lam
        fc = add(add(fc, a1, d * imj1), a2, d * imj2)
        return fc, new

    acc_h = (jax.vmap(body_access)(ph.b1), jax.vmap(body_access)(ph.b2))
    acc_t = (jax.vmap(body_access)(pt.b1), jax.vmap(body_access)(pt.b2))
    pyramid = tail.findex >= 0
    fidx = jnp.maximum(tail.findex, 0)

    def head_row(fc, x):
        *x, lo, hi = x
        return row_update(fc, x, lo, hi)

    def tail_row(fc, x):
        *x, lam_n, lo, hi, pyr = x
        bound = jnp.where(jnp.isinf(hi), jnp.inf, jnp.abs(hi * lam_n))
        return row_update(fc, x, jnp.where(pyr, -bound, lo), jnp.where(pyr, bound, hi))

    def sweep(carry, _):
        fc, lam_h, lam_t = carry
        if nh:
            fc, lam_h = jax.lax.scan(
                head_row, fc, (*acc_h, ph.j1, ph.j2, ph.imj1, ph.imj2, ph.rhs, ph.cfm, lam_h,
                               ph.lo, ph.hi), unroll=UNROLL)
        if nt:
            lam_n = lam_h[fidx] if nh else jnp.zeros((nt,), dtype)
            fc, lam_t = jax.lax.scan(
                tail_row, fc, (*acc_t, pt.j1, pt.j2, pt.imj1, pt.imj2, pt.rhs, pt.cfm, lam_t,
                               lam_n, pt.lo, pt.hi, pyramid), unroll=UNROLL)
        return (fc, lam_h, lam_t), None

    carry = (fc0, jnp.zeros((nh,), dtype), jnp.zeros((nt,), dtype))
    (fc, lam_h, lam_t), _ = jax.lax.scan(sweep, carry, None, length=iterations)
    return lam_h, lam_t, fc
