"""Stage 5, parallel variant: graph-coloured projected Gauss-Seidel.

The same rows, the same preparation (``rhs``, ``cfm/h``, ``Ad``, SOR factor,
friction index, box/pyramid/cone bounds) and the same row update as
:mod:`jaxode.solver` (QuickStep's SOR-LCP), in a different order that lets
many rows be updated at once:

- once per step, the active rows are coloured greedily in row order: a row
  gets the smallest colour not yet used by a row on either of its bodies (the
  static world, index ``nbody``, conflicts with nothing: its velocity never
  changes). Head rows (joint rows and contact normals) are coloured one row
  at a time; tail contacts (a contact's friction block, solved row after row
  inside the contact as QuickStep does) one contact at a time. At most
  ``colours`` colours; a row that finds none free gets a phase of its own
  after them, so no limit is ever exceeded;
- each sweep then runs the head phases, then the tail phases, in colour
  order; a phase updates all its rows together. Rows of one colour share no
  moving body, so updating them together is exactly updating them one after
  another: each sweep is a Gauss-Seidel sweep in the colour-sorted row
  order (a permutation of QuickStep's order, as ODE's own row shuffling at
  iterations 8 and 16 is), with Gauss-Seidel's convergence, not Jacobi's.

A phase holds at most one row per moving body, so every phase is a slice of
``min(rows, nbody)`` rows: a gather of body velocities, the row update and a
scatter-add. Per sweep that is one sequential step per colour (about the
largest number of rows on one body, e.g. 10 for a hinge chain's inner link)
instead of one per row: the layout for GPUs, where each sequential step is a
kernel launch. On CPU, where the batch is vectorised over worlds, the
sequential solver (:mod:`jaxode.solver`, world-minor) is faster
(``python -m bench``).

Derivatives (forward and reverse) run the same phases in a loop of static
length (every possible phase), so reverse mode can differentiate it.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxode.constraint import Rows
from jaxode.solver import _prepare, cone_project, friction_bounds

# Colours per step before rows get phases of their own (a row conflicts with
# the rows on its two bodies: greedy colouring needs at most 2 x the largest
# number of rows on one body - 1).
COLOURS = 64


def colour(b1: jax.Array, b2: jax.Array, active: jax.Array, static_body: int,
           colours: int = COLOURS) -> jax.Array:
    """Greedy colouring in row order: phase (R,) int32 of each unit (row or contact).

    An active unit gets the smallest colour not used by an earlier unit on
    body ``b1`` or ``b2`` (``static_body`` is shared freely); if all
    ``colours`` are taken it gets phase ``colours + k`` (the k-th such unit),
    a phase of its own. Inactive units get a phase past every real one.
    Phases in use are 0 .. P-1 without gaps.
    """
    n = b1.shape[0]
    nb = static_body + 1
    never = jnp.int32(colours + n)

    def body(i, carry):
        used, phase, nover = carry
        a, b = b1[i], b2[i]
        free = ~(used[a] | used[b])
        c = jnp.argmax(free).astype(jnp.int32)
        ok = free[c]
        act = active[i]
        ph = jnp.where(act, jnp.where(ok, c, colours + nover), never)
        bit = (jnp.arange(colours) == c) & ok & act
        used = used.at[a].set(used[a] | (bit & (a != static_body)))
        used = used.at[b].set(used[b] | (bit & (b != static_body)))
        return used, phase.at[i].set(ph), nover + (act & ~ok).astype(jnp.int32)

    init = (jnp.zeros((nb, colours), bool), jnp.full((n,), never, jnp.int32), jnp.int32(0))
    return jax.lax.fori_loop(0, n, body, init)[1]


class _Order:
    """Units sorted by phase: ``order`` (sorted -> original), ``inverse``,
    ``start`` (P_max + 1,) first sorted unit of each phase, ``count`` P."""

    def __init__(self, phase: jax.Array, colours: int):
        n = phase.shape[0]
        self.order = jnp.argsort(phase, stable=True)
        self.inverse = jnp.zeros((n,), jnp.int32).at[self.order].set(
            jnp.arange(n, dtype=jnp.int32))
        sphase = phase[self.order]
        self.start = jnp.searchsorted(sphase, jnp.arange(colours + n + 1), side="left"
                                      ).astype(jnp.int32)
        real = phase < colours + n
        self.count = jnp.max(jnp.where(real, phase + 1, 0)).astype(jnp.int32)
        self.max_count = colours + n


def _pad_sorted(x: jax.Array, order: jax.Array, width: int) -> jax.Array:
    x = x[order]
    return jnp.concatenate([x, jnp.zeros((width,) + x.shape[1:], x.dtype)], axis=0)


def _loop(count, max_count, body, carry, static: bool):
    if static:
        return jax.lax.fori_loop(0, max_count, body, carry)
    return jax.lax.fori_loop(0, count, body, carry)


def _solve(head: Rows, tail: Rows, inv_mass, inv_inertia, rhs_body, h, sor, iterations: int,
           block: int, cone: bool, cone_rows, colours: int, static: bool):
    dtype = rhs_body.dtype
    nb = inv_mass.shape[0]
    ndyn = nb - 1
    nh, nt = head.body1.shape[0], tail.body1.shape[0]  # nh >= 1: contacts have normal rows
    nc = nt // block
    ph = _prepare(head, inv_mass, inv_inertia, rhs_body, h, sor)
    pt = _prepare(tail, inv_mass, inv_inertia, rhs_body, h, sor)
    fc = jnp.zeros((nb, 6), dtype)

    # Head: one unit per row.
    wh = max(1, min(nh, ndyn))
    oh = _Order(colour(ph.b1, ph.b2, head.active, ndyn, colours), colours)
    hs = [_pad_sorted(a, oh.order, wh) for a in ph]
    # Tail: one unit per contact (its block of rows).
    wt = max(1, min(nc, ndyn))

    def blocks(x):
        return x.reshape((nc, block) + x.shape[1:])

    if nc:
        tact = jnp.any(blocks(tail.active), axis=1)
        ot = _Order(colour(blocks(pt.b1)[:, 0], blocks(pt.b2)[:, 0], tact, ndyn, colours),
                    colours)
        fidx = jnp.maximum(tail.findex, 0)
        # friction index into the sorted head rows
        fidx_sorted = oh.inverse[fidx]
        ts = [_pad_sorted(blocks(a), ot.order, wt)
              for a in (*pt, tail.findex >= 0, fidx_sorted, cone_rows)]

    def head_phase(p, carry):
        fc, lam = carry
        b1, b2, j1, j2, i1, i2, rhs, cfm, lo, hi = (
            jax.lax.dynamic_slice_in_dim(a, oh.start[p], wh) for a in hs)
        live = jnp.arange(wh) < oh.start[p + 1] - oh.start[p]
        lam_p = jax.lax.dynamic_slice_in_dim(lam, oh.start[p], wh)
        v1, v2 = fc[b1], fc[b2]
        delta = rhs - lam_p * cfm - jnp.sum(j1 * v1, -1) - jnp.sum(j2 * v2, -1)
        new = jnp.where(live, jnp.clip(lam_p + delta, lo, hi), lam_p)
        d = (new - lam_p)[:, None]
        fc = fc.at[b1].add(d * i1).at[b2].add(d * i2)
        return fc, jax.lax.dynamic_update_slice_in_dim(lam, new, oh.start[p], 0)

    def tail_phase(lam_h, p, carry):
        fc, lam = carry
        (b1, b2, j1, j2, i1, i2, rhs, cfm, lo, hi, pyr, fi, cn) = (
            jax.lax.dynamic_slice_in_dim(a, ot.start[p], wt) for a in ts)
        live = (jnp.arange(wt) < ot.start[p + 1] - ot.start[p])
        lam_p = jax.lax.dynamic_slice_in_dim(lam, ot.start[p], wt)
        lam_n = lam_h[fi]
        new = []
        for k in range(block):
            lo_k, hi_k = friction_bounds(k, lo[:, k], hi[:, k], lam_n[:, k], pyr[:, k],
                                         cn[:, k], cone)
            a1, a2 = b1[:, k], b2[:, k]
            v1, v2 = fc[a1], fc[a2]
            rhs_k = rhs[:, k]
            if cone and k == 1:
                # as the sequential solver: row t2 sees the velocities before t1's update
                d0 = new[0] - lam_p[:, 0]
                back = jnp.sum(j1[:, 1] * i1[:, 0], -1) + jnp.sum(j2[:, 1] * i2[:, 0], -1)
                rhs_k = jnp.where(cn[:, 1], rhs_k + d0 * back, rhs_k)
            delta = (rhs_k - lam_p[:, k] * cfm[:, k] - jnp.sum(j1[:, k] * v1, -1)
                     - jnp.sum(j2[:, k] * v2, -1))
            nk = jnp.where(live, jnp.clip(lam_p[:, k] + delta, lo_k, hi_k), lam_p[:, k])
            d = (nk - lam_p[:, k])[:, None]
            fc = fc.at[a1].add(d * i1[:, k]).at[a2].add(d * i2[:, k])
            new.append(nk)
        if cone:
            n0, n1 = cone_project(new[0], new[1], hi[:, 0], hi[:, 1], lam_n[:, 0], cn[:, 0])
            n0, n1 = jnp.where(live, n0, new[0]), jnp.where(live, n1, new[1])
            for k, nk in ((0, n0), (1, n1)):
                d = (nk - new[k])[:, None]
                fc = fc.at[b1[:, k]].add(d * i1[:, k]).at[b2[:, k]].add(d * i2[:, k])
            new[0], new[1] = n0, n1
        return fc, jax.lax.dynamic_update_slice_in_dim(lam, jnp.stack(new, 1), ot.start[p], 0)

    def sweep(_, carry):
        fc, lam_h, lam_t = carry
        fc, lam_h = _loop(oh.count, oh.max_count, head_phase, (fc, lam_h), static)
        if nc:
            fc, lam_t = _loop(ot.count, ot.max_count, functools.partial(tail_phase, lam_h),
                              (fc, lam_t), static)
        return fc, lam_h, lam_t

    carry = (fc, jnp.zeros((nh + wh,), dtype), jnp.zeros((nc + wt, block), dtype))
    fc, lam_h, lam_t = jax.lax.fori_loop(0, iterations, sweep, carry)
    lam_h = lam_h[:nh][oh.inverse]
    lam_t = lam_t[:nc][ot.inverse].reshape(-1) if nc else jnp.zeros((nt,), dtype)
    return lam_h, lam_t, fc


@functools.lru_cache(maxsize=None)
def _solver(iterations: int, block: int, cone: bool, colours: int):
    def run(static, *args):
        return _solve(*args[:7], iterations, block, cone, args[7], colours, static)

    @jax.custom_jvp
    def solve(*args):
        return run(False, *args)

    @solve.defjvp
    def solve_jvp(primals, tangents):
        # (the static-length loop: reverse mode cannot differentiate a loop
        # whose trip count is computed)
        return jax.jvp(functools.partial(run, True), primals, tangents)

    return solve


def solve_colored(head: Rows, tail: Rows, inv_mass: jax.Array, inv_inertia: jax.Array,
                  rhs_body: jax.Array, h: jax.Array, sor: jax.Array, iterations: int,
                  block: int = 2, cone: bool = False, cone_rows: jax.Array = None,
                  colours: int = COLOURS) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Solve one world's rows by graph-coloured projected Gauss-Seidel.

    Arguments and results as :func:`jaxode.solver.solve_pgs`: head rows
    (joint rows, then one normal row per contact), tail rows (``block`` per
    contact; ``findex`` indexes head rows, -1 = fixed bounds), inv_mass (B,),
    inv_inertia (B, 3, 3) world frame, rhs_body (B, 6) with B = nbody + 1
    (last = static world); ``cone`` enables the elliptic projection of the
    first two rows of contacts whose ``cone_rows`` flag is set. Returns
    (lambda_head, lambda_tail [N], fc (B, 6) = M^-1 J^T lambda).
    """
    dtype = rhs_body.dtype
    nh, nt = head.body1.shape[0], tail.body1.shape[0]
    if nh + nt == 0:
        return (jnp.zeros((0,), dtype), jnp.zeros((0,), dtype),
                jnp.zeros((inv_mass.shape[0], 6), dtype))
    if nt % block:
        raise ValueError(f"tail rows ({nt}) must be a multiple of block ({block})")
    if cone_rows is None:
        cone_rows = jnp.zeros((nt,), bool)
    return _solver(iterations, block, bool(cone), colours)(
        head, tail, inv_mass, inv_inertia, rhs_body, h, sor, cone_rows)
