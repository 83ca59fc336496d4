"""What is kept when more pairs or contacts are found than there are slots.

The narrowphase has static capacities (:class:`jaxode.types.PairGroup`
``capacity`` per pair kind, ``Model.contact_capacity`` over all pairs). When a
world finds more than fit, these rules choose which to keep, so that a short
capacity degrades the contact set instead of removing whole bodies' support
(docs/COLLISION.md, "Capacity and overflow"):

- pairs (:func:`keep_pairs`): a pair's *level* is its rank among the
  overlapping pairs of the same kind that touch one of its dynamic bodies,
  ordered by an estimated gap (:func:`pair_gap`), the closest first; the
  ``capacity`` pairs with the lowest (level, gap) are kept. Every body's
  closest pair comes before any body's second one.
- contacts (:func:`keep_contacts`): within a pair, the contacts are ranked
  deepest first and then each the farthest from those already ranked (greedy
  farthest point, the spread a reduced contact set needs to hold a body up);
  the ``capacity`` contacts with the lowest (rank, -depth) are kept: every pair
  keeps its deepest contact before any pair keeps a second, and so on.

Both return a mask that is the input mask itself when nothing overflows (the
kept entries are then compacted in their usual order by
:func:`jaxode.sim.batch_rules.compact`, so a world that fits is bitwise
unchanged), and otherwise marks exactly ``capacity`` entries, still compacted
in index order. The choice depends only on the world's own values (batch
invariant); under ``jax.vmap`` it is skipped when no world of the batch
overflows (:func:`jaxode.sim.batch_rules.unless_none`). No gradient flows
through the choice (it is a discrete selection, as ``compact``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.batch_rules import unless_none
from jaxode.sim.collision import contact as ct

_BIG = 1 << 30


def _first_by(keys: tuple, valid: jax.Array, capacity: int) -> jax.Array:
    """Mask of the ``capacity`` valid entries first in the lexicographic order of
    ``keys`` (primary key first), ties by index."""
    n = valid.shape[0]
    order = jnp.lexsort(keys[::-1])
    take = order[:capacity]
    return jnp.zeros((n,), bool).at[take].set(True) & valid


def _guarded(mask: jax.Array, capacity: int, fn, *args) -> jax.Array:
    """``mask`` if it has at most ``capacity`` True entries, else ``fn(*args)``
    (computed only if some world of a batch overflows)."""
    over = jnp.sum(mask, dtype=jnp.int32) > capacity
    args = jax.tree.map(jax.lax.stop_gradient, args)
    chosen = unless_none(over[None], fn, *args)
    return jnp.where(over, chosen, mask)


def spread_rank(pos: jax.Array, depth: jax.Array, valid: jax.Array) -> jax.Array:
    """Rank (K,) int of one pair's K contact slots: the deepest valid slot 0,
    then each next the valid slot farthest from those already ranked (ties by
    slot index); invalid slots get K. pos (K, 3) [m], depth (K,) [m]."""
    k = depth.shape[0]
    first = jnp.argmax(jnp.where(valid, depth, -jnp.inf))
    rank = jnp.full((k,), k, jnp.int32).at[first].set(jnp.where(valid[first], 0, k))
    mind = jm.sum_terms((pos - pos[first]) ** 2, axis=-1)

    def pick(t, carry):   # a loop, not unrolled: compiled once
        rank, mind = carry
        free = valid & (rank == k)
        nxt = jnp.argmax(jnp.where(free, mind, -1.0))
        rank = rank.at[nxt].set(jnp.where(free[nxt], t, rank[nxt]))
        mind = jnp.minimum(mind, jm.sum_terms((pos - pos[nxt]) ** 2, axis=-1))
        return rank, mind

    rank, _ = jax.lax.fori_loop(1, k, pick, (rank, mind))
    return rank


def _spread_ranks(parts: list) -> list:
    """:func:`spread_rank` of every pair of every part, flattened per part (in
    the parts' order). The pairs of all parts with the same number of slots
    run as one vmap (one compiled loop per slot count, not per pair group;
    each pair's ranks are its own, whatever it is batched with)."""
    by_k: dict = {}
    for i, (p, _, _) in enumerate(parts):
        by_k.setdefault(p.shape[1], []).append(i)
    ranks = [None] * len(parts)
    for idx in by_k.values():
        cat = [jnp.concatenate([parts[i][j] for i in idx]) for j in range(3)]
        r = jax.vmap(spread_rank)(*cat)
        sizes = np.cumsum([parts[i][1].shape[0] for i in idx])[:-1]
        for i, ri in zip(idx, jnp.split(r, sizes)):
            ranks[i] = ri.reshape(-1)
    return ranks


def keep_contacts(valid: jax.Array, capacity: int, parts: list) -> jax.Array:
    """Which of the concatenated contact slots to keep (mask like ``valid``).

    parts: per pair group, (pos (npair, k, 3), depth (npair, k), valid (npair, k)),
    in the order they are concatenated into ``valid`` (n,). With more than
    ``capacity`` valid slots, keeps ``capacity`` of them by (spread rank in the
    pair, deepest first)."""
    def choose(valid, parts):
        ranks = _spread_ranks(parts)
        depth = jnp.concatenate([d.reshape(-1) for _, d, _ in parts])
        level = jnp.where(valid, jnp.concatenate(ranks), _BIG)
        return _first_by((level, -depth), valid, capacity)

    return _guarded(valid, capacity, choose, valid, parts)


def pair_gap(type2: int, a: jax.Array, b: jax.Array, gpos: jax.Array, grot: jax.Array,
             lo: jax.Array, hi: jax.Array) -> jax.Array:
    """Estimated gap (npair,) [m] between geoms a and b (negative: overlapping):
    for a plane (geom 2) the distance of geom 1's AABB from it, otherwise the
    distance between the AABB centres less their half diagonals (a bounding
    sphere each; an unbounded axis, as a heightfield's z, counts as the geom
    origin with no extent). A ranking heuristic, not a narrowphase."""
    def sphere(g):
        finite = jnp.isfinite(lo[g]) & jnp.isfinite(hi[g])
        c = jnp.where(finite, 0.5 * (lo[g] + hi[g]), gpos[g])
        h = jnp.where(finite, 0.5 * (hi[g] - lo[g]), 0.0)
        return c, h

    c1, h1 = sphere(a)
    if type2 == ct.PLANE:
        n = grot[b][:, :, 2]
        return (jm.sum_terms(n * (c1 - gpos[b]), axis=-1) - jm.sum_terms(jnp.abs(n) * h1, axis=-1))
    c2, h2 = sphere(b)
    return (jnp.sqrt(jm.sq_norm(c1 - c2)) - jnp.sqrt(jm.sq_norm(h1))
            - jnp.sqrt(jm.sq_norm(h2)))


def keep_pairs(overlap: jax.Array, capacity: int, type2: int, a: jax.Array, b: jax.Array,
               gpos: jax.Array, grot: jax.Array, lo: jax.Array, hi: jax.Array,
               body1: jax.Array, body2: jax.Array, nbody: int) -> jax.Array:
    """Which of a group's candidate pairs (geoms ``a``, ``b`` of bodies ``body1``,
    ``body2``) to pass to the narrowphase (mask like ``overlap`` (npair,)). With
    more than ``capacity`` overlapping, keeps ``capacity`` of them by (level,
    gap): gap is :func:`pair_gap`, level the pair's rank, closest first, among
    the overlapping pairs of its dynamic body (the better of its two bodies');
    body ``nbody`` is the static world. Nothing is computed unless some world
    overflows."""
    def choose(overlap, a, b, gpos, grot, lo, hi, body1, body2):
        gap = pair_gap(type2, a, b, gpos, grot, lo, hi)
        npair = overlap.shape[0]
        body = jnp.concatenate([body1, body2])
        live = jnp.concatenate([overlap, overlap]) & (body < nbody)
        key = jnp.where(live, body, nbody + 1)
        g2 = jnp.concatenate([gap, gap])
        order = jnp.lexsort((g2, key))
        kb = key[order]
        pos = jnp.arange(2 * npair)
        start = jnp.concatenate([jnp.ones((1,), bool), kb[1:] != kb[:-1]])
        first = jax.lax.cummax(jnp.where(start, pos, 0))
        rank = jnp.zeros((2 * npair,), jnp.int32).at[order].set((pos - first).astype(jnp.int32))
        rank = jnp.where(live, rank, _BIG)
        level = jnp.where(overlap, jnp.minimum(rank[:npair], rank[npair:]), _BIG)
        return _first_by((level, gap), overlap, capacity)

    return _guarded(overlap, capacity, choose, overlap, a, b, gpos, grot, lo, hi, body1, body2)
