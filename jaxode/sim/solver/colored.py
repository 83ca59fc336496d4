"""``colored``: graph-coloured projected Gauss-Seidel (rows of a colour at once).

The same rows, preparation and row update as every solver
(:mod:`jaxode.sim.solver.core`), in an order that lets many rows be updated at once:

- once per step, the active units are coloured greedily in row order: a unit
  gets the smallest colour not yet used by a unit on either of its bodies (the
  static world, index ``nbody``, conflicts with nothing: its velocity never
  changes). Head rows (joint rows and contact normals) are coloured one row
  at a time; tail contacts (a contact's friction block, solved row after row
  inside the contact as QuickStep does) one contact at a time. At most
  ``colours`` colours; a unit that finds none free gets a phase of its own
  after them, so no limit is ever exceeded;
- each sweep then runs the head phases, then the tail phases, in colour
  order; a phase updates all its units together. Units of one colour share no
  moving body, so updating them together is exactly updating them one after
  another: each sweep is a Gauss-Seidel sweep in the colour-sorted order (a
  permutation of QuickStep's order, as ODE's own row shuffling at iterations 8
  and 16 is), with Gauss-Seidel's convergence, not Jacobi's.

A phase holds at most one unit per moving body, so it is a slice of
``min(units, nbody)`` sorted units: a gather of body velocities, the update and
a scatter-add, vectorised over the trailing world axis too. Sequential updates
per sweep: the number of colours (about the largest number of rows on one body)
instead of the number of rows. In a batch the colouring is computed once from
the rows active in any world (:mod:`jaxode.sim.solver.batching`), so every world
runs the same phases; a world's order can then depend on the rows the other
worlds have (use ``pgs`` where a world must give bitwise the same result alone
and in any batch).

With ``static`` the phase loops run every possible phase (a static trip count:
reverse mode can differentiate it); otherwise only the phases in use.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode.sim.solver import core
from jaxode.sim.solver.core import Block

# Colours per step before units get phases of their own (a unit conflicts with
# the units on its two bodies: greedy colouring needs at most 2 x the largest
# number of units on one body - 1).
COLOURS = 64


def colour(b1: jax.Array, b2: jax.Array, active: jax.Array, static_body: int,
           colours: int = COLOURS) -> jax.Array:
    """Greedy colouring in unit order: phase (R,) int32 of each unit (row or contact).

    An active unit gets the smallest colour not used by an earlier unit on
    body ``b1`` or ``b2`` (``static_body`` is shared freely); if all
    ``colours`` are taken it gets phase ``colours + k`` (the k-th such unit),
    a phase of its own. Inactive units get a phase past every real one.
    Phases in use are 0 .. P-1 without gaps. Body indices (R,) shared by the
    worlds, or (R, W) each world's own: a unit's colour is then one free on
    its bodies in every world (one phase structure for the batch, and in each
    world a phase's units share no moving body).
    """
    n = b1.shape[0]
    nb = static_body + 1
    never = jnp.int32(colours + n)
    ws = b1.shape[1:]                                   # () or (W,)
    aw = jnp.arange(ws[0]) if ws else None

    def body(i, carry):
        used, phase, nover = carry
        a, b = b1[i], b2[i]
        if ws:      # used (nb, colours, W): read (W, colours) per world
            ua, ub = used[a, :, aw], used[b, :, aw]
            free = ~jnp.any(ua | ub, axis=0)
        else:
            ua, ub = used[a], used[b]
            free = ~(ua | ub)
        c = jnp.argmax(free).astype(jnp.int32)
        ok = free[c]
        act = active[i]
        ph = jnp.where(act, jnp.where(ok, c, colours + nover), never)
        bit = (jnp.arange(colours) == c) & ok & act
        # (a == b only for the static world, which is never marked)
        mark_a = (a != static_body)[..., None] & bit
        mark_b = (b != static_body)[..., None] & bit
        if ws:
            used = used.at[a, :, aw].set(ua | mark_a).at[b, :, aw].set(ub | mark_b)
        else:
            used = used.at[a].set(ua | mark_a).at[b].set(ub | mark_b)
        return used, phase.at[i].set(ph), nover + (act & ~ok).astype(jnp.int32)

    init = (jnp.zeros((nb, colours) + ws, bool), jnp.full((n,), never, jnp.int32),
            jnp.int32(0))
    return jax.lax.fori_loop(0, n, body, init)[1]


class Order(NamedTuple):
    """Units sorted by phase: ``order`` (sorted -> original), ``inverse``,
    ``start`` (P_max + 1,) first sorted unit of each phase, ``count`` phases in use
    (P), ``max_count`` every possible phase (static)."""

    order: jax.Array
    inverse: jax.Array
    start: jax.Array
    count: jax.Array
    max_count: int


def order_of(phase: jax.Array, colours: int) -> Order:
    n = phase.shape[0]
    order = jnp.argsort(phase, stable=True).astype(jnp.int32)
    inverse = jnp.zeros((n,), jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    start = jnp.searchsorted(phase[order], jnp.arange(colours + n + 1), side="left"
                             ).astype(jnp.int32)
    count = jnp.max(jnp.where(phase < colours + n, phase + 1, 0)).astype(jnp.int32)
    return Order(order, inverse, start, count, colours + n)


def _sorted(x: jax.Array, order: jax.Array, width: int, axis: int = 0) -> jax.Array:
    """``x`` permuted along ``axis`` by ``order`` and padded with ``width`` zero units."""
    x = jnp.take(x, order, axis=axis)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, width)
    return jnp.pad(x, pad)


def _loop(count, max_count: int, body, carry, static: bool):
    return jax.lax.fori_loop(0, max_count if static else count, body, carry)


def sweeps(p, iterations: int, block: int, cone: bool, static: bool = False,
           colours: int = COLOURS, **_):
    """The SOR sweeps by colour phases. ``p``: a :class:`jaxode.sim.solver.batching.Problem`
    (world-minor; the colouring uses the rows active in any of its worlds).
    Returns (lambda_head (Rh, W), lambda_tail (Rt, W), fc (B, 6, W)).
    """
    h, t = p.head, p.tail
    nb = p.fc0.shape[0]
    ndyn = nb - 1
    nh, nt = h.b1.shape[0], t.b1.shape[0]
    nc = nt // block
    w = p.fc0.shape[-1]
    dtype = p.fc0.dtype
    pw = h.b1.ndim == 2          # each world's own body indices (R, W) (core.read)

    # Head: one unit per row.
    wh = max(1, min(nh, ndyn))
    oh = order_of(colour(h.b1, h.b2, jnp.any(p.head_active, axis=-1), ndyn, colours), colours)
    hs = core.Prepared(*(_sorted(a, oh.order, wh) for a in h))

    def head_phase(q, carry):
        fc, lam = carry
        s = oh.start[q]
        r = core.Prepared(*(jax.lax.dynamic_slice_in_dim(a, s, wh) for a in hs))
        live = (jnp.arange(wh) < oh.start[q + 1] - s)[:, None]
        lam_q = jax.lax.dynamic_slice_in_dim(lam, s, wh)
        fc, new = core.row_update(fc, r.b1, r.b2, r.j1, r.j2, r.imj1, r.imj2, r.rhs, r.cfm,
                                  lam_q, r.lo, r.hi, live, per_world=pw)
        return fc, jax.lax.dynamic_update_slice_in_dim(lam, new, s, 0)

    # Tail: one unit per contact (its block of rows), arrays (K, contacts, ...).
    wt = max(1, min(nc, ndyn))
    if nc:
        def kmajor(x):
            return jnp.moveaxis(x.reshape((nc, block) + x.shape[1:]), 1, 0)

        tact = jnp.any(jnp.any(p.tail_active, axis=-1).reshape(nc, block), axis=1)
        def first(b):
            return b.reshape((nc, block) + b.shape[1:])[:, 0]

        ot = order_of(colour(first(t.b1), first(t.b2), tact, ndyn, colours), colours)
        ts = Block(*(_sorted(kmajor(a), ot.order, wt, axis=1) for a in t),
                   _sorted(kmajor(core.row_flags(p.pyramid)), ot.order, wt, axis=1),
                   _sorted(kmajor(core.row_flags(p.cone_row)), ot.order, wt, axis=1))
        fidx_sorted = _sorted(kmajor(oh.inverse[p.fidx]), ot.order, wt, axis=1)

    def tail_phase(lam_h, q, carry):
        fc, lam = carry
        s = ot.start[q]
        u = Block(*(jax.lax.dynamic_slice_in_dim(a, s, wt, axis=1) for a in ts))
        live = (jnp.arange(wt) < ot.start[q + 1] - s)[:, None]
        lam_q = jax.lax.dynamic_slice_in_dim(lam, s, wt, axis=1)
        fi = jax.lax.dynamic_slice_in_dim(fidx_sorted, s, wt, axis=1)   # (K, wt[, W])
        lam_n = lam_h[fi, jnp.arange(w)] if fi.ndim == 3 else jnp.take(lam_h, fi, axis=0)
        fc, new = core.block_update(fc, u, lam_q, lam_n, cone, live, per_world=pw)
        return fc, jax.lax.dynamic_update_slice_in_dim(lam, new, s, 1)

    def sweep(_, carry):
        fc, lam_h, lam_t = carry
        fc, lam_h = _loop(oh.count, oh.max_count, head_phase, (fc, lam_h), static)
        if nc:
            fc, lam_t = _loop(ot.count, ot.max_count, lambda q, c: tail_phase(lam_h, q, c),
                              (fc, lam_t), static)
        return fc, lam_h, lam_t

    carry = (p.fc0, jnp.zeros((nh + wh, w), dtype), jnp.zeros((block, nc + wt, w), dtype))
    fc, lam_h, lam_t = jax.lax.fori_loop(0, iterations, sweep, carry)
    lam_h = jnp.take(lam_h[:nh], oh.inverse, axis=0)
    if nc:
        lam_t = jnp.take(lam_t[:, :nc], ot.inverse, axis=1)          # (K, nc, W)
        lam_t = jnp.moveaxis(lam_t, 0, 1).reshape((nt, w))
    else:
        lam_t = jnp.zeros((nt, w), dtype)
    return lam_h, lam_t, fc
