"""Which path a solve takes, in one place: one world, a batch, derivatives.

A solver (:mod:`jaxode.sim.solver.pgs`, :mod:`jaxode.sim.solver.colored`) is a
``sweeps(problem, iterations, block, cone, **options)`` function over a
:class:`Problem` laid out world-minor (every float array has a trailing world
axis W). :func:`solver` wraps one into a function of one world's rows that:

- **alone** (no ``vmap``) runs the sweeps with ``W = MIN_WORLDS`` (the world
  twice: it then rounds as in a batch);
- **under ``jax.vmap``** (a custom batching rule) runs them once for the whole
  batch with the worlds as the trailing axis when the worlds share the row
  structure (the same body indices per row: no contact compaction, or
  :func:`jaxode.sim.batch_rules.compact` gave every world the union of their
  slots); ``pgs`` then stops each sweep after the last unit active in some
  world (``live``), ``colored`` colours the rows active in any world. A batch
  larger than the tile (``Model.batch_tile``, :func:`tile_worlds`) is laid out
  as (tiles, ..., T), its rows prepared for all tiles at once (``vmap`` over
  the tile axis) and swept tile after tile (``lax.map``; tile k holds
  worlds k, k + tiles, ..., so a batch split in blocks over devices keeps its
  share of every tile; padded with copies of the last world): a tile's row
  loops are small enough
  for XLA CPU's small-while-loop option (jaxode/xla.py) to compile each as one
  function instead of ~6 kernels per row, each a pass over the whole world
  axis (bench/RESULTS.md, session 14). Each world's rows are updated in the
  same order with the same arithmetic: bitwise the untiled result. If the
  worlds' body indices differ, each world runs its own one-world sweeps
  (plain vmap: gathers and scatters per world);
- **under differentiation** (``jax.jvp``, ``jax.grad``, forward and reverse)
  runs the one-world sweeps through JAX's own rules (``colored`` with a
  static phase count, so reverse mode can differentiate it); custom_vmap has no
  reverse mode of its own.

Every path feeds the same rows to the same update (:mod:`jaxode.sim.solver.core`).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jaxode.sim.constraint import Rows
from jaxode.sim.math import barrier
from jaxode.sim.solver import core
from jaxode.sim.solver.core import Prepared


class Problem(NamedTuple):
    """One solve's prepared rows, world-minor (trailing world axis W on every float array).

    head, tail: :class:`~jaxode.sim.solver.core.Prepared` rows (tail: ``block``
    rows per contact); fidx (Rt,) the head row bounding each tail row;
    pyramid (Rt,) bool: the row's bound scales with that row's lambda;
    cone_row (Rt,) bool: first two rows of a cone-model contact;
    head_active (Rh, W), tail_active (Rt, W) bool; fc0 (B, 6, W) zeros;
    step () int: the step number (picks pgs' row shuffles; shared by a batch);
    order (phases, M, W) int32 or None: per-world row orders of ``reorder="ode"``
    (pgs sweeps every row in them, :func:`jaxode.sim.solver.pgs.ode_sweeps`).
    """

    head: Prepared
    tail: Prepared
    fidx: jax.Array
    pyramid: jax.Array
    cone_row: jax.Array
    head_active: jax.Array
    tail_active: jax.Array
    fc0: jax.Array
    step: jax.Array
    order: jax.Array = None


class Inputs(NamedTuple):
    """One world's raw solve inputs, flattened for the batching rule.

    idx: what a batch with one row structure shares (body indices, friction
    index and flags: they follow from the rows' geoms and joints);
    data: the rows' float arrays and activity (head, then tail: j1, j2, c,
    cfm, lo, hi, active), the bodies' inv_mass (B,), inv_inertia (B, 3, 3),
    rhs_body (B, 6), and h, sor (scalars).
    """

    idx: tuple
    data: tuple


ROW_FIELDS = ("j1", "j2", "c", "cfm", "lo", "hi", "active")


def inputs(head, tail, fidx, pyramid, cone_row, inv_mass, inv_inertia, rhs_body, h, sor,
           step, order=None) -> Inputs:
    idx = (head.body1, head.body2, tail.body1, tail.body2, fidx, pyramid, cone_row, step)
    data = (*(getattr(head, f) for f in ROW_FIELDS), *(getattr(tail, f) for f in ROW_FIELDS),
            inv_mass, inv_inertia, rhs_body, h, sor) + (() if order is None else (order,))
    return Inputs(idx, data)


def _problem(idx, data) -> Problem:
    """Prepare world-minor ``data`` (every array with a trailing world axis W)."""
    hb1, hb2, tb1, tb2, fidx, pyr, cone, step = idx
    k = len(ROW_FIELDS)

    def rows(b1, b2, d):
        j1, j2, c, cfm, lo, hi, active = d
        return Rows(b1, b2, j1, j2, c, cfm, lo, hi, None, active)

    hr, tr = rows(hb1, hb2, data[:k]), rows(tb1, tb2, data[k:2 * k])
    inv_mass, inv_inertia, rhs_body, h, sor = data[2 * k:2 * k + 5]
    order = data[2 * k + 5] if len(data) > 2 * k + 5 else None
    head = core.prepare(hr, inv_mass, inv_inertia, rhs_body, h, sor)
    tail = core.prepare(tr, inv_mass, inv_inertia, rhs_body, h, sor)
    fc0 = jnp.zeros_like(rhs_body)
    return Problem(head, tail, fidx, pyr, cone, hr.active, tr.active, fc0, step, order)


NIDX = 8

# The world axis is at least this wide (one world is run twice): with a
# degenerate world axis XLA turns the sweeps' column sums into row sums, whose
# order of adds differs, and a world alone would not round as in a batch.
MIN_WORLDS = 2


def _to_world_minor(x, batched: bool, w: int):
    if batched:
        return jnp.moveaxis(x, 0, -1)
    return jnp.broadcast_to(x[..., None], x.shape + (w,))


# Model.batch_tile's default: choose the tile from the batch and the rows (tile_worlds).
AUTO = -1


# AUTO's worlds per tile (bench/RESULTS.md, session 14): on one CPU device 16
# and 32 ran alike (boxes, stack, chain); 8 was slower (XLA then hoists the
# whole 20-sweep loop too, which ran at ~14 ns per row and world against ~4-5
# with only the row loops hoisted); at 64 the row loops passed XLA's threshold.
# A plain jit(vmap) of a batch split over 2 devices keeps 16 per device.
AUTO_TILE = 32


def check_tile(tile) -> int:
    """``Model.batch_tile`` validated: AUTO (-1), 0 (untiled) or at least
    ``MIN_WORLDS`` worlds (a tile of one world would round differently)."""
    if isinstance(tile, (bool, np.bool_)) or not isinstance(tile, (int, np.integer)) or not (
            tile in (AUTO, 0) or tile >= MIN_WORLDS):
        raise ValueError(f"model.batch_tile must be {AUTO} (auto), 0 (untiled) or an integer "
                         f">= {MIN_WORLDS} (worlds per tile of the batched sweeps) "
                         f"(got {tile!r})")
    return int(tile)


def tile_worlds(tile: int, w: int):
    """Worlds per tile of a batch of ``w`` worlds (module docstring), or None:
    the whole batch in one sweep loop. ``tile``: ``Model.batch_tile`` (0:
    untiled, AUTO: ``AUTO_TILE`` on CPU (the default backend), else untiled;
    or the worlds per tile)."""
    if tile == AUTO:
        # CPU only: a GPU runs a whole batch's row update in one kernel launch,
        # and tiles would only serialise it
        tile = AUTO_TILE if jax.default_backend() == "cpu" else 0
    if not tile or w <= tile:
        return None
    return int(tile)


@functools.lru_cache(maxsize=None)
def solver(sweeps, iterations: int, block: int, cone: bool, tile: int = AUTO, **options):
    """One world's solve ``f(*idx, *data) -> (lambda_head, lambda_tail, fc)`` (module
    docstring); ``sweeps`` a solver's sweep function, ``options`` its static options.
    ``idx``/``data``: one world's :class:`Inputs`."""
    options = dict(options)

    def one_world(args, **extra):
        idx, data = args[:NIDX], args[NIDX:]
        # behind a barrier, so that XLA cannot see the copies as a broadcast and
        # move reductions over a row's components inside it (they would then sum
        # in another order than in a batch)
        wm = barrier(tuple(_to_world_minor(d, False, MIN_WORLDS)
                                                for d in data))
        p = _problem(idx, wm)
        out = sweeps(p, iterations, block, cone, **options, **extra)
        return tuple(o[..., 0] for o in out)

    def alone(*args):
        return one_world(args)

    run = custom_vmap(alone)

    @run.def_vmap
    def rule(axis_size, in_batched, *args):
        idx, data = args[:NIDX], args[NIDX:]

        def shared(idx):
            t = tile_worlds(tile, axis_size)
            if t:
                return _tiled(idx, t)
            wm = tuple(_to_world_minor(d, b, axis_size) for d, b in zip(data, in_batched[NIDX:]))
            if axis_size < MIN_WORLDS:
                wm = tuple(jnp.concatenate([d] * MIN_WORLDS, axis=-1) for d in wm)
            # The world-minor copies are made once, here: without the barrier XLA
            # fuses each transpose into every consumer of the rows (the Jacobian
            # is read by five of preparation's kernels), each then reading the
            # batch-major input at a stride of a world's row table.
            wm = barrier(wm)
            out = sweeps(_problem(idx, wm), iterations, block, cone, live=True, **options)
            return tuple(jnp.moveaxis(o[..., :axis_size], -1, 0) for o in out)

        def _tiled(idx, t):
            # the batch in tiles of t worlds, (tiles, ..., t), swept one tile after another
            n = -(-axis_size // t)

            def tiles(d, b):
                if not b:
                    return jnp.broadcast_to(d[None, ..., None], (n,) + d.shape + (t,))
                if n * t > axis_size:  # pad with copies of the last world
                    d = jnp.concatenate([d, jnp.broadcast_to(d[-1:], (n * t - axis_size,)
                                                             + d.shape[1:])], axis=0)
                # tile k holds worlds k, k + n, ..., k + (t - 1) n: a batch split in
                # contiguous blocks over devices keeps each device's worlds in
                # every tile (the tile axis stays split; the loop over tiles is not)
                return jnp.moveaxis(d.reshape((t, n) + d.shape[1:]), 0, -1)

            wm = barrier(
                tuple(tiles(d, b) for d, b in zip(data, in_batched[NIDX:])))

            # The preparation is elementwise per world (and gathers over rows):
            # made for every tile at once (vmap over the tile axis: each of its
            # operations one wide kernel), not tile after tile inside the loop,
            # where each of its small kernels is dispatched once per tile (boxes,
            # 1024 worlds, one device: solve 69 -> 60 ms, stack 185 -> 170).
            # (A solver's own set-up, pgs' padding and live counts, made the
            # same way ran slower: boxes 52 -> 65 ms.)
            ready = jax.vmap(lambda tile: _problem(idx, tile))(wm)

            def one_tile(p):
                return sweeps(p, iterations, block, cone, live=True, **options)

            out = jax.lax.map(one_tile, ready)
            return tuple(jnp.moveaxis(o, -1, 0).reshape((n * t,) + o.shape[1:-1])[:axis_size]
                         for o in out)

        if in_batched[NIDX - 1]:
            # One step number for the batch (world 0's), as ODE's one global
            # generator serves every world: the row order stays shared.
            idx = tuple(idx[:NIDX - 1]) + (idx[NIDX - 1][0],)
            in_batched = tuple(in_batched[:NIDX - 1]) + (False,) + tuple(in_batched[NIDX:])
            args = idx + tuple(data)
        if not any(in_batched[:NIDX]):
            return shared(idx), (True, True, True)
        if axis_size == 1:
            # one world: its indices are trivially shared (no fallback to compile)
            return shared([i[0] if b else i for i, b in zip(idx, in_batched[:NIDX])]), \
                (True, True, True)
        # Per-world indices (contact compaction): if every world has the same
        # ones (batch_rules.compact shares them when it can), run the shared
        # path on world 0's; otherwise vmap the one-world sweeps.
        # (vmapping ``run`` here would re-enter this rule.)
        axes = [0 if b else None for b in in_batched]
        first = [i[0] if b else i for i, b in zip(idx, in_batched[:NIDX])]
        same = jnp.all(jnp.stack([jnp.all(i == i[:1]) for i, b in zip(idx, in_batched[:NIDX])
                                  if b]))
        # (the fallback is not unrolled: it is the rare path, and compile time counts)
        out = jax.lax.cond(same, lambda _: shared(first),
                           lambda _: jax.vmap(lambda *a: one_world(a, unroll=1),
                                              in_axes=axes)(*args), None)
        return out, (True, True, True)

    def differentiable(*args):
        return one_world(args, static=True)

    @jax.custom_jvp
    def solve(*args):
        return run(*args)

    @solve.defjvp
    def solve_jvp(primals, tangents):
        return jax.jvp(differentiable, primals, tangents)

    return solve
