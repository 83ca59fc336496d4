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
  world (``live``), ``colored`` colours the rows active in any world, and a
  batch of ``SLOT_SIZES_MIN_WORLDS`` or more builds and prepares the contact
  rows only for the first slots live in some world (:func:`_problem_sized`,
  ``Model.slot_sizes``). A batch
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
  worlds' body indices differ (their contacts overflow the shared slots), the
  same world-minor sweeps run on each world's own indices: the contact rows
  built per world, the bodies gathered and scattered per (body, world) pair
  (:func:`jaxode.sim.solver.core.take_bodies`, ``per_world`` in
  :mod:`jaxode.sim.solver.core`); ``colored`` then colours a unit with a colour
  free on its bodies in every world. Bitwise the world alone still; ~2-4x
  the shared path's time per step (session 20: boxes 4,717 against 18,211
  world-steps/s at 1024 worlds on one device; the one-world sweeps vmapped,
  before, ran 704);
- **under differentiation** (``jax.jvp``, ``jax.grad``, forward and reverse)
  runs the one-world sweeps through JAX's own rules (``colored`` with a
  static phase count, so reverse mode can differentiate it); custom_vmap has no
  reverse mode of its own.

Every path feeds the same rows to the same update (:mod:`jaxode.sim.solver.core`).
The contact rows may come as their source (:class:`Inputs` ``contacts``, from the
solve stage): :func:`_problem` then builds them with
:func:`jaxode.sim.constraint.rows_of` on the world-minor data, on every path.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jaxode.sim import autodisable, batch_rules, constraint
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
    """One world's raw solve inputs (two dicts of arrays) for the batching rule.

    idx: what a batch with one row structure shares (body indices, friction
    index and flags, the step number: they follow from the rows' geoms and
    joints); data: the rows' float arrays and activity (j1, j2, c, cfm, lo,
    hi, active), the bodies' inv_mass (B,), inv_inertia (B, 3, 3), rhs_body
    (B, 6), and h, sor (scalars). The contact rows come either built (``tail``
    and the head's end) or, from the solve stage, as their
    :class:`~jaxode.sim.constraint.ContactSource` (``contacts``; with the
    surface params and the auto-disable mask), built by :func:`_problem` in the
    sweeps' own layout.
    """

    idx: dict
    data: dict


ROW_FIELDS = ("j1", "j2", "c", "cfm", "lo", "hi", "active")


def _row_data(rows) -> tuple:
    return tuple(getattr(rows, f) for f in ROW_FIELDS)


def inputs(head, tail, fidx, pyramid, cone_row, inv_mass, inv_inertia, rhs_body, h, sor,
           step, order=None, contacts=None, surface=None, enabled=None) -> Inputs:
    """A world's :class:`Inputs`: rows ``head`` and ``tail`` (tail rows' head row
    ``fidx``, ``pyramid`` and ``cone_row`` flags), or, with ``contacts`` (a
    :class:`~jaxode.sim.constraint.ContactSource`), ``head`` the joint rows only
    and the contact rows made from ``contacts`` and ``surface``
    (:class:`~jaxode.sim.constraint.SurfaceParams`) by the solve itself
    (``tail``, ``fidx``, ``pyramid``, ``cone_row`` unused); ``enabled``
    (nbody,) bool or None: auto-disable's mask for them."""
    idx = dict(head=(head.body1, head.body2), step=step)
    data = dict(head=_row_data(head), inv_mass=inv_mass, inv_inertia=inv_inertia,
                rhs_body=rhs_body, h=h, sor=sor, order=order)
    if contacts is None:
        idx.update(tail=(tail.body1, tail.body2), fidx=fidx, pyramid=pyramid, cone=cone_row)
        data["tail"] = _row_data(tail)
    else:
        idx["contacts"] = {f: getattr(contacts, f) for f in constraint.SOURCE_INDEX}
        data["contacts"] = {f: getattr(contacts, f) for f in constraint.SOURCE_DATA}
        data["surface"] = surface
        data["enabled"] = enabled
    return Inputs(idx, data)


def _rows(b1, b2, d) -> Rows:
    j1, j2, c, cfm, lo, hi, active = d
    return Rows(b1, b2, j1, j2, c, cfm, lo, hi, None, active)


def _slot_normal_rows(nj: int, nt: int, block: int) -> jax.Array:
    """(nt,) int32: each of ``nt`` contact tail rows' friction index, its slot's
    normal row (head row ``nj + slot``; used where the row has one, ``pyramid``),
    the same for every world."""
    return nj + jnp.arange(nt, dtype=jnp.int32) // block


def _problem(idx, data, block: int, per_world: bool = False) -> Problem:
    """Prepare world-minor ``data`` (every array with a trailing world axis W),
    building the contact rows first where they come as a source. ``idx``: shared
    by the worlds, or with ``per_world`` (static) laid out like ``data`` (each
    world's own body indices, flags and contact slots; the step number stays
    shared): the contact rows are then built per world (``vmap`` over the
    world axis) and every solver reads its bodies per world
    (:func:`jaxode.sim.solver.core.take_bodies`, :func:`jaxode.sim.solver.core.read`)."""
    hr = _rows(*idx["head"], data["head"])
    if "contacts" in idx:
        def contact_rows(ix, dx, surface, enabled):
            src = constraint.ContactSource(**ix, **dx)
            ch, tr, cone = constraint.rows_of(src, surface, angular=block == 5)
            if enabled is not None:
                ch = ch._replace(active=ch.active & autodisable.row_mask(enabled, ch.body1,
                                                                         ch.body2))
                tr = tr._replace(active=tr.active & autodisable.row_mask(enabled, tr.body1,
                                                                         tr.body2))
            return ch, tr, cone

        build = jax.vmap(contact_rows, in_axes=-1, out_axes=-1) if per_world else contact_rows
        ch, tr, cone = build(idx["contacts"], data["contacts"], data["surface"],
                             data["enabled"])
        nj = hr.body1.shape[0]
        hr = Rows(*(None if f == "findex" else jnp.concatenate([getattr(hr, f), getattr(ch, f)])
                    for f in Rows._fields))
        fidx = _slot_normal_rows(nj, tr.findex.shape[0], block)
        pyr = tr.findex >= 0
    else:
        tr = _rows(*idx["tail"], data["tail"])
        fidx, pyr, cone = idx["fidx"], idx["pyramid"], idx["cone"]
    inv_mass, inv_inertia, rhs_body = data["inv_mass"], data["inv_inertia"], data["rhs_body"]
    h, sor, order = data["h"], data["sor"], data["order"]
    head = core.prepare(hr, inv_mass, inv_inertia, rhs_body, h, sor)
    tail = core.prepare(tr, inv_mass, inv_inertia, rhs_body, h, sor)
    fc0 = jnp.zeros_like(rhs_body)
    return Problem(head, tail, fidx, pyr, cone, hr.active, tr.active, fc0, idx["step"], order)


# The world axis is at least this wide (one world is run twice): with a
# degenerate world axis XLA turns the sweeps' column sums into row sums, whose
# order of adds differs, and a world alone would not round as in a batch.
MIN_WORLDS = 2


def _to_world_minor(x, batched: bool, w: int):
    if batched:
        return jnp.moveaxis(x, 0, -1)
    return jnp.broadcast_to(x[..., None], x.shape + (w,))


# Model.slot_sizes applies to batches of at least this many worlds (a smaller
# one runs the full capacity: too few worlds to repay compiling the contact
# rows more than once).
SLOT_SIZES_MIN_WORLDS = 16


def check_slot_sizes(n) -> int:
    """``Model.slot_sizes`` validated: an integer >= 0."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError("model.slot_sizes must be an integer >= 0 (contact-slot counts "
                         "below the capacity a batch's solve also prepares its contact "
                         f"rows for; 0: the capacity only) (got {n!r})")
    return int(n)


def slot_counts(ncon: int, smaller: int) -> tuple:
    """The contact-slot counts a batched solve is compiled for, ascending, the last
    ``ncon`` (the capacity): each step runs the smallest that holds every slot
    live in some world of the batch (slots are compacted live-first, so the rest
    are empty in every world). Building and preparing a slot's rows costs the
    same whether it is live or not (~0.45 us of CPU per slot and world-step,
    bench/RESULTS.md, session 22), and the builder's capacity is sized for the
    worst case (boxes: 72 slots, ~32 live at rest). Up to ``smaller``
    (``Model.slot_sizes``) halvings of the capacity, rounded up to 8, each at
    least 16 slots smaller than the last and not below 16."""
    sizes = [ncon]
    for _ in range(smaller):
        half = -(-(sizes[-1] // 2) // 8) * 8
        if half < 16 or sizes[-1] - half < 16:
            break
        sizes.append(half)
    return tuple(sorted(sizes))


def _problem_sized(idx, data, block: int, per_world: bool, sized) -> Problem:
    """:func:`_problem`, or with ``sized`` = (k, sizes) (:func:`slot_counts`) the
    contact rows built and prepared for the first ``sizes[k]`` slots only and the
    :class:`Problem` padded to the capacity with no-op rows (zero Jacobian, rhs
    and bounds, inactive, on the static world): the sweeps see the same rows
    as at the full capacity, since the slots after the live ones are empty in
    every world, and are compiled once; only this preparation is compiled
    per size (a ``lax.switch``)."""
    if sized is None:
        return _problem(idx, data, block, per_world)
    k, sizes = sized
    ncon = sizes[-1]

    def at(size):
        def run(idx, data):
            ic = {f: v[:size] for f, v in idx["contacts"].items()}
            dc = {f: (v[:size] if f in constraint.SOURCE_SLOT else v)
                  for f, v in data["contacts"].items()}
            p = _problem(dict(idx, contacts=ic), dict(data, contacts=dc), block, per_world)
            return _pad_problem(p, ncon - size, block, data["inv_mass"].shape[0] - 1)
        return run

    return jax.lax.switch(k, [at(s) for s in sizes], idx, data)


def _pad_problem(p: Problem, n: int, block: int, static_body: int) -> Problem:
    """``p`` with ``n`` empty contact slots appended: a normal row at the head's
    end and ``block`` tail rows each, no-ops (zeros; inactive; both bodies the
    static world ``static_body``); the tail rows' friction index for the
    padded slots as :func:`_problem` gives it (:func:`_slot_normal_rows`)."""
    if not n:
        return p

    def pad(a, k, fill=0):
        return jnp.concatenate([a, jnp.full((k,) + a.shape[1:], fill, a.dtype)])

    def rows(prep: Prepared, k: int) -> Prepared:
        return Prepared(pad(prep.b1, k, static_body), pad(prep.b2, k, static_body),
                        *(pad(a, k) for a in prep[2:]))

    nt = p.tail.b1.shape[0] + n * block
    nj = p.head.b1.shape[0] - p.tail.b1.shape[0] // block
    return p._replace(head=rows(p.head, n), tail=rows(p.tail, n * block),
                      fidx=_slot_normal_rows(nj, nt, block),
                      pyramid=pad(p.pyramid, n * block), cone_row=pad(p.cone_row, n * block),
                      head_active=pad(p.head_active, n), tail_active=pad(p.tail_active, n * block))


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


def tile_columns(x: jax.Array, tile: int) -> jax.Array:
    """A batch (leading axis of ``w`` worlds) as (tile, n, ...), n = ceil(w / tile):
    world j n + k at [j, k], so tile k (column k) holds worlds k, k + n, ...,
    k + (tile - 1) n (a batch split in contiguous blocks over devices keeps its
    share of every tile); the positions past ``w`` are copies of the last world.
    A reshape, no copy, unless padded. :func:`from_tile_columns` undoes it."""
    w = x.shape[0]
    n = -(-w // tile)
    if n * tile > w:
        x = jnp.concatenate([x, jnp.broadcast_to(x[-1:], (n * tile - w,) + x.shape[1:])])
    return x.reshape((tile, n) + x.shape[1:])


def from_tile_columns(x: jax.Array, w: int) -> jax.Array:
    """The batch of ``w`` worlds from its (tile, n, ...) layout (:func:`tile_columns`)."""
    return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])[:w]


def map_tiles(fn, xs: list, tile: int):
    """``fn`` over a batch's tiles of ``tile`` worlds, one tile after another.

    ``xs``: arrays with a leading axis of the same ``w`` worlds; ``fn`` takes the
    list of one tile's arrays (``tile`` worlds each) and returns a pytree of
    arrays with a leading axis of ``tile`` worlds; the result is that pytree for
    the whole batch, each world in its place. Tile k is column k of
    :func:`tile_columns`: worlds k, k + n, ..., k + (tile - 1) n, n = ceil(w /
    tile), padded with copies of the last world.

    Each input is laid out (tile, n, ...) (:func:`tile_columns`, a reshape with
    no copy), and the loop reads column k in place.
    Transposing every input to tile-major order first (what ``lax.map`` over
    the tiles needs) is a kernel per leaf for XLA to compile (chain at 64
    worlds, one device: 428 fusion kernels so, 343 now; boxes 1,194 and 1,073;
    bench/RESULTS.md, session 33). The outputs, stacked tile-major by the loop,
    are still transposed back (a loop that wrote them column by column would
    need their shapes first, i.e. ``fn`` traced twice)."""
    w = xs[0].shape[0]
    cols = [tile_columns(x, tile) for x in xs]

    def column(k):
        return [jax.lax.dynamic_index_in_dim(c, k, axis=1, keepdims=False) for c in cols]

    out = jax.lax.map(lambda k: fn(column(k)), jnp.arange(cols[0].shape[1]))
    return jax.tree.map(lambda o: from_tile_columns(jnp.swapaxes(o, 0, 1), w), out)


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
def solver(sweeps, iterations: int, block: int, cone: bool, tile: int = AUTO,
           slot_sizes: int = 0, **options):
    """One world's solve ``f(idx, data) -> (lambda_head, lambda_tail, fc)`` (module
    docstring); ``sweeps`` a solver's sweep function, ``options`` its static options.
    ``idx``/``data``: one world's :class:`Inputs`."""
    options = dict(options)

    def one_world(idx, data, **extra):
        # behind a barrier, so that XLA cannot see the copies as a broadcast and
        # move reductions over a row's components inside it (they would then sum
        # in another order than in a batch)
        wm = barrier(jax.tree.map(lambda d: _to_world_minor(d, False, MIN_WORLDS), data))
        p = _problem(idx, wm, block)
        out = sweeps(p, iterations, block, cone, **options, **extra)
        return tuple(o[..., 0] for o in out)

    run = custom_vmap(lambda idx, data: one_world(idx, data))

    @run.def_vmap
    def rule(axis_size, in_batched, idx, data):
        idx_b, data_b = in_batched
        step = idx["step"]
        if idx_b["step"]:
            # One step number for the batch (world 0's), as ODE's one global
            # generator serves every world: the row order stays shared.
            step = step[0]
        idx = {k: v for k, v in idx.items() if k != "step"}
        idx_b = {k: v for k, v in idx_b.items() if k != "step"}

        def _extra(per_world):
            # the per-world path is the rare one, and compile time counts: its loops
            # are not unrolled (boxes, 1024 worlds: first call 29.8 -> 26.1 s; that
            # path's step 7 % slower)
            return {"unroll": 1} if per_world else {}

        def batch(idx, per_world: bool):
            """The sweeps of the whole batch: ``data`` world-minor, ``idx`` shared
            or, with ``per_world``, laid out like it (each world's own)."""
            t = tile_worlds(tile, axis_size)
            sized = _live_slot_size(idx, per_world)
            if t:
                return _tiled(idx, per_world, t, sized)

            def lay(d, b):
                d = _to_world_minor(d, b, axis_size)
                if axis_size < MIN_WORLDS:
                    d = jnp.concatenate([d] * MIN_WORLDS, axis=-1)
                return d

            wm = jax.tree.map(lay, data, data_b)
            if per_world:
                idx = jax.tree.map(lay, idx, idx_b)
            # The world-minor copies are made once, here: without the barrier XLA
            # fuses each transpose into every consumer of the rows (the Jacobian
            # is read by five of preparation's kernels), each then reading the
            # batch-major input at a stride of a world's row table.
            wm = barrier(wm)
            p = _problem_sized({**idx, "step": step}, wm, block, per_world, sized)
            out = sweeps(p, iterations, block, cone, live=True, **options, **_extra(per_world))
            return tuple(jnp.moveaxis(o[..., :axis_size], -1, 0) for o in out)

        def _live_slot_size(idx, per_world):
            """(the index into :func:`slot_counts` of the smallest that holds the
            contact slots live in some world of the batch, the sizes), or None:
            one size (no contact source, each world's own indices, or a batch
            under ``SLOT_SIZES_MIN_WORLDS``)."""
            if "contacts" not in idx or per_world or axis_size < SLOT_SIZES_MIN_WORLDS:
                return None
            ncon = idx["contacts"]["body1"].shape[0]
            sizes = slot_counts(ncon, slot_sizes)
            if len(sizes) == 1:
                return None
            valid = data["contacts"]["valid"]
            if data_b["contacts"]["valid"]:
                valid = jnp.any(valid, axis=0)
            last = jnp.max(jnp.where(valid, jnp.arange(1, ncon + 1), 0))
            return jnp.sum(last > jnp.asarray(sizes[:-1]), dtype=jnp.int32), sizes

        def _tiled(idx, per_world, t, sized):
            # the batch in tiles of t worlds, (tiles, ..., t), swept one tile after another
            n = -(-axis_size // t)

            def tiles(d, b):
                if not b:
                    return jnp.broadcast_to(d[None, ..., None], (n,) + d.shape + (t,))
                # the batch's tile columns (tile_columns), the world axis moved last
                return jnp.moveaxis(tile_columns(d, t), 0, -1)

            wm = barrier(jax.tree.map(tiles, data, data_b))

            # The preparation is elementwise per world (and gathers over rows):
            # made for every tile at once (vmap over the tile axis: each of its
            # operations one wide kernel), not tile after tile inside the loop,
            # where each of its small kernels is dispatched once per tile (boxes,
            # 1024 worlds, one device: solve 69 -> 60 ms, stack 185 -> 170).
            # (A solver's own set-up, pgs' padding and live counts, made the
            # same way ran slower: boxes 52 -> 65 ms.)
            if per_world:
                it = jax.tree.map(tiles, idx, idx_b)
                ready = jax.vmap(lambda i, d: _problem({**i, "step": step}, d, block, True)
                                 )(it, wm)
            else:
                ready = jax.vmap(lambda d: _problem_sized({**idx, "step": step}, d, block,
                                                          False, sized))(wm)

            def one_tile(p):
                return sweeps(p, iterations, block, cone, live=True, **options,
                              **_extra(per_world))

            out = jax.lax.map(one_tile, ready)
            return tuple(from_tile_columns(jnp.moveaxis(o, -1, 0), axis_size) for o in out)

        batched = [i for i, b in zip(jax.tree.leaves(idx), jax.tree.leaves(idx_b)) if b]
        if not batched:
            return batch(idx, False), (True, True, True)
        first = jax.tree.map(lambda i, b: i[0] if b else i, idx, idx_b)
        if axis_size == 1:
            # one world: its indices are trivially shared (no second path to compile)
            return batch(first, False), (True, True, True)
        # Per-world indices (contact compaction): if every world has the same
        # ones (batch_rules.compact shares them when it can), run on world 0's,
        # shared; otherwise on each world's own (gathers per world in the rows
        # and the sweeps; the same rows, order and arithmetic per world).
        same = jnp.all(jnp.stack([jnp.all(i == i[:1]) for i in batched]))
        out = jax.lax.cond(same, lambda _: batch(first, False), lambda _: batch(idx, True), None)
        return out, (True, True, True)

    def differentiable(idx, data):
        return one_world(idx, data, static=True)

    @jax.custom_jvp
    def solve(idx, data):
        # under a vmap, the rule itself (custom_vmap would also trace one_world)
        out = batch_rules.rule_on_batch(rule, (idx, data))
        return run(idx, data) if out is None else out

    @solve.defjvp
    def solve_jvp(primals, tangents):
        return jax.jvp(differentiable, primals, tangents)

    return solve
