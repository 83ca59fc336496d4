"""Stage 5: projected Gauss-Seidel with SOR, as ODE's QuickStep (``quickstep.cpp``).

With h the step, the rows are prepared exactly as QuickStep does:

- ``rhs = c/h - J (v/h + M^-1 f_ext)``, ``cfm' = cfm/h`` (f_ext: accumulated
  forces, gravity and the gyroscopic torque);
- ``iMJ = M^-1 J^T`` per row and ``Ad = w / (J iMJ + cfm')`` (w = sor);
- J, rhs and cfm' are pre-multiplied by Ad.

Then ``iterations`` sweeps over the rows, each row:
``delta = rhs - lambda * cfm'Ad - J1 . fc[b1] - J2 . fc[b2]``, bounds from the
friction index when there is one (``hi = |hi * lambda[findex]|, lo = -hi``),
``lambda <- clamp(lambda + delta)``, ``fc[b] += delta_clamped * iMJ``. lambda
starts at zero (no warm starting, ODE's default) and is a force [N].

Row order (deterministic): rows without a friction index first, in joint-row
order, then rows with a friction index in joint-row order; this is ODE's
initial order. ODE 0.16 additionally shuffles all rows with its global random
generator at iterations 8 and 16; we do not (a documented difference that
shows only in scenes the 20 iterations leave unconverged).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.constraint import Rows


def _dot6(a: jax.Array, b: jax.Array) -> jax.Array:
    return jnp.sum(a * b, axis=-1)


def solve_pgs(rows: Rows, inv_mass: jax.Array, inv_inertia: jax.Array, rhs_body: jax.Array,
              h: jax.Array, sor: jax.Array, iterations: int) -> tuple[jax.Array, jax.Array]:
    """Run QuickStep's SOR-LCP on ``rows`` for one world.

    inv_mass (B,), inv_inertia (B, 3, 3) world frame, rhs_body (B, 6) =
    -(v/h + M^-1 f_ext) per body, with B = nbody + 1 (last = static world,
    all zero). Returns (lambda (R,) in the rows' order [N], fc (B, 6) =
    M^-1 J^T lambda, the constraint acceleration per body [m/s^2 | rad/s^2]).
    """
    dtype = rhs_body.dtype
    b1, b2 = rows.body1, rows.body2
    nrow = b1.shape[0]
    nb = inv_mass.shape[0]
    if nrow == 0:
        return jnp.zeros((0,), dtype), jnp.zeros((nb, 6), dtype)

    def imj(j, b):
        lin = inv_mass[b][:, None] * j[:, :3]
        ang = jnp.einsum("rij,rj->ri", inv_inertia[b], j[:, 3:])
        return jnp.concatenate([lin, ang], axis=-1)

    imj1, imj2 = imj(rows.j1, b1), imj(rows.j2, b2)
    rhs = rows.c / h + _dot6(rows.j1, rhs_body[b1]) + _dot6(rows.j2, rhs_body[b2])
    cfm = rows.cfm / h
    denom = _dot6(rows.j1, imj1) + _dot6(rows.j2, imj2) + cfm
    ad = jnp.where(rows.active, sor / jnp.where(rows.active, denom, 1.0), 0.0)
    j1 = rows.j1 * ad[:, None]
    j2 = rows.j2 * ad[:, None]
    rhs = rhs * ad
    cfm_ad = cfm * ad

    # ODE's initial order: findex == -1 rows first, then friction rows (stable).
    order = jnp.argsort((rows.findex >= 0).astype(jnp.int32), stable=True)
    inv = jnp.argsort(order)
    findex = rows.findex[order]
    findex = jnp.where(findex >= 0, inv[jnp.maximum(findex, 0)], -1)
    b1o, b2o = b1[order], b2[order]
    j1o, j2o, imj1o, imj2o = j1[order], j2[order], imj1[order], imj2[order]
    rhso, cfmo, loo, hio = rhs[order], cfm_ad[order], rows.lo[order], rows.hi[order]

    def row_step(i, carry):
        lam, fc = carry
        ib1, ib2 = b1o[i], b2o[i]
        old = lam[i]
        delta = rhso[i] - old * cfmo[i] - _dot6(j1o[i], fc[ib1]) - _dot6(j2o[i], fc[ib2])
        f = findex[i]
        hi_f = jnp.abs(hio[i] * lam[jnp.maximum(f, 0)])
        hi_f = jnp.where(jnp.isinf(hio[i]), jnp.inf, hi_f)
        hi = jnp.where(f >= 0, hi_f, hio[i])
        lo = jnp.where(f >= 0, -hi_f, loo[i])
        new = jnp.clip(old + delta, lo, hi)
        delta = new - old
        lam = lam.at[i].set(new)
        fc = fc.at[ib1].add(delta * imj1o[i]).at[ib2].add(delta * imj2o[i])
        return lam, fc

    def sweep(_, carry):
        return jax.lax.fori_loop(0, nrow, row_step, carry, unroll=min(nrow, 4))

    lam0 = jnp.zeros((nrow,), dtype)
    fc0 = jnp.zeros((nb, 6), dtype)
    lam, fc = jax.lax.fori_loop(0, iterations, sweep, (lam0, fc0))
    return lam[inv], fc
