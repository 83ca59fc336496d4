"""Batch-aware building blocks: what a batch of worlds can share, it shares.

Under ``jax.vmap`` every world runs the same static-shape program, so work is
sized by capacities, not by what happens. Two rules here let a batch of
similar worlds (the RL and parameter-sweep case) skip that work without
changing any world's result:

- :func:`compact` keeps the first ``capacity`` True entries of a mask. Alone,
  each world gets its own indices. Under vmap, if the union of the worlds'
  entries fits the capacity, all worlds get the same indices (the union, in
  order): each world's entries keep their relative order, interleaved with
  entries that are False in that world (marked invalid). Downstream, shared
  indices mean shared body indices, which the solver's fast path needs
  (:mod:`jaxode.sim.solver`). If the union does not fit, every world falls back to
  its own indices, exactly as unbatched.
- :func:`unless_none` runs a function only if its mask has a True entry in
  some world of the batch, and returns zeros otherwise: a pair kind with no
  overlapping pair anywhere in the batch costs nothing. :func:`in_chunks`
  does the same per chunk of a long compacted list (its live entries first),
  so the unused tail of a capacity costs nothing either.

Both are ``custom_vmap`` rules whose decisions depend on the whole batch, but
whose per-world results do not (invalid entries carry no force). Derivatives
pass through the plain (unbatched) versions.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap


def batch_trace_of(tree, front: bool = False):
    """(the batch trace, the batch size) when the leaves of ``tree`` come from one
    ``jax.vmap`` that a ``jit`` (or ``shard_map``) traces, with nothing else
    between: every batched leaf is that vmap's tracer over a jit tracer, the
    other leaves are jit tracers or values. ``front``: every one of the vmap's
    tracers batched on axis 0. None otherwise: nested vmaps, a jvp or grad
    inside the vmap, an eager vmap (values that are not jit tracers), no batched
    leaf, or JAX internals that moved. The test behind :func:`rule_on_batch` and
    ``jaxode.api``'s direct batched calls."""
    try:
        from jax._src.interpreters.batching import BatchTracer
        from jax._src.interpreters.partial_eval import DynamicJaxprTracer
    except ImportError:  # JAX moved its tracers: the general path
        return None
    trace, sizes, jit_traces = None, set(), set()
    for x in jax.tree.leaves(tree):
        if isinstance(x, BatchTracer):
            if (trace is not None and x._trace is not trace) \
                    or not isinstance(x.val, DynamicJaxprTracer) \
                    or (front and x.batch_dim != 0):
                return None
            trace = x._trace
            jit_traces.add(id(x.val._trace))
            if x.batch_dim is not None:    # None: JAX's "not mapped"
                sizes.add(x.val.shape[x.batch_dim])
        elif isinstance(x, DynamicJaxprTracer):
            jit_traces.add(id(x._trace))
        elif isinstance(x, jax.core.Tracer):
            return None
    if trace is None or len(sizes) != 1:
        return None
    # every jit tracer of the one trace right under the vmap: a loop body traced
    # inside the vmap that closes over the vmap's tracers (an env's fori_loop of
    # steps reading the batch's params) mixes the body's tracers with the vmap's,
    # and running the rule at the vmap's level would leak the body's
    if jit_traces != {id(getattr(trace, "parent_trace", None))}:
        return None
    return trace, sizes.pop()


def rule_on_batch(rule, args: tuple):
    """``rule(axis_size, in_batched, *args)`` run directly when ``args`` come from
    one ``jax.vmap`` that a ``jit`` traces (:func:`batch_trace_of`), or None
    (call the ``custom_vmap`` then). ``rule`` is a ``custom_vmap`` rule: it
    returns (out, out_batched), out_batched a tree of bools shaped as out.

    ``custom_vmap`` traces its one-world function whenever it is called, also
    under a vmap, where only the rule's batched program is kept: the solver's
    one world (rows, preparation, sweeps) was about a third of a bench scene's
    trace (chain, one world, ``cProfile``: 2.4 of 7.7 s; bench/RESULTS.md,
    session 28). Here the vmap's tracers are unwrapped (their values, the batch
    axis moved to the front as custom_vmap does), the rule runs at the trace
    above the vmap, and its results are handed back as the vmap's tracers: the
    same operations as through custom_vmap, so the same bits.
    """
    found = batch_trace_of(args)
    if found is None:
        return None
    trace, size = found
    try:
        from jax._src import core as jax_src_core
        from jax._src.interpreters.batching import BatchTracer
        parent, set_trace = trace.parent_trace, jax_src_core.set_current_trace
    except (ImportError, AttributeError):  # JAX moved its internals: the general path
        return None
    leaves, tree = jax.tree.flatten(args)
    with set_trace(parent):
        vals, batched = [], []
        for x in leaves:
            b = isinstance(x, BatchTracer) and x.batch_dim is not None
            if isinstance(x, BatchTracer):
                x = jnp.moveaxis(x.val, x.batch_dim, 0) if b and x.batch_dim != 0 else x.val
            vals.append(x)
            batched.append(b)
        out, out_batched = rule(size, list(jax.tree.unflatten(tree, batched)),
                                *jax.tree.unflatten(tree, vals))
    return jax.tree.map(lambda b, v: BatchTracer(trace, v, 0 if b else None),
                        out_batched, out)


def _own(mask: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array]:
    """Indices of the first ``capacity`` True entries of one mask and their validity."""
    count = jnp.sum(mask, dtype=jnp.int32)
    (idx,) = jnp.nonzero(mask, size=capacity, fill_value=0)
    return idx.astype(jnp.int32), jnp.arange(capacity) < count


@functools.lru_cache(maxsize=None)
def _compact_fn(capacity: int):
    run = custom_vmap(lambda mask: _own(mask, capacity))

    @run.def_vmap
    def rule(axis_size, in_batched, mask):
        if not in_batched[0]:
            idx, valid = _own(mask, capacity)
            return (jnp.broadcast_to(idx, (axis_size, capacity)),
                    jnp.broadcast_to(valid, (axis_size, capacity))), (True, True)
        if axis_size == 1:
            # one world: the union is its own mask (no second branch to compile)
            idx, valid = _own(mask[0], capacity)
            return (idx[None], valid[None]), (True, True)
        union = jnp.any(mask, axis=0)

        def shared(_):
            idx, in_union = _own(union, capacity)
            valid = jnp.take(mask, idx, axis=1) & in_union[None, :]
            return jnp.broadcast_to(idx, (axis_size, capacity)), valid

        def own(_):
            return jax.vmap(lambda m: _own(m, capacity))(mask)

        fits = jnp.sum(union, dtype=jnp.int32) <= capacity
        return jax.lax.cond(fits, shared, own, None), (True, True)

    return run


def compact(mask: jax.Array, capacity: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The first ``capacity`` True entries of ``mask`` (n,): (indices (capacity,) int32,
    validity (capacity,) bool, overflow = entries that did not fit, int32).

    With ``capacity >= n`` nothing is dropped and the indices are ``arange(n)``.
    Under vmap the indices may be shared by the batch (module docstring); the
    valid entries, their order and the overflow are each world's own.
    """
    n = mask.shape[0]
    count = jnp.sum(mask, dtype=jnp.int32)
    if capacity >= n:
        return jnp.arange(n, dtype=jnp.int32), mask, jnp.zeros((), jnp.int32)
    idx, valid = _compact_fn(capacity)(jax.lax.stop_gradient(mask))
    return idx, valid, jnp.maximum(count - capacity, 0).astype(jnp.int32)


def _plain_jvp(run, fn, tree):
    """``run(mask, *flat)`` whose derivative is ``fn``'s on every entry (the batch-wide
    skipping of :func:`unless_none` / :func:`in_chunks` is not differentiated; the
    mask is boolean)."""
    @jax.custom_jvp
    def guarded(m, *flat):
        return run(m, *flat)

    @guarded.defjvp
    def guarded_jvp(primals, tangents):
        m, *flat = primals
        _, *tflat = tangents
        return jax.jvp(lambda *f: fn(*jax.tree.unflatten(tree, f)), tuple(flat), tuple(tflat))

    return guarded


def unless_none(mask: jax.Array, fn, *args):
    """``fn(*args)`` if any entry of ``mask`` is True (in any world of a batch), else
    zeros of the same structure (a pytree of arrays). ``fn`` must give zeros'
    worth of meaning where the mask is False (callers mark such slots invalid)."""
    # One Python trace of ``fn``: as a jitted function its jaxpr is cached for
    # the unbatched shapes (eval_shape, custom_vmap's primal) and vmap batches
    # that jaxpr (the rule) without running ``fn`` again.
    fn = jax.jit(fn)
    out_shape = jax.eval_shape(fn, *args)

    def zeros(*_):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

    leaves, tree = jax.tree.flatten(args)

    def call(m, *flat):
        a = jax.tree.unflatten(tree, flat)
        return jax.lax.cond(jnp.any(m), lambda: fn(*a), zeros)

    run = custom_vmap(call)

    @run.def_vmap
    def rule(axis_size, in_batched, m, *flat):
        def full(_):
            axes = [0 if b else None for b in in_batched[1:]]
            a = jax.vmap(lambda *f: fn(*jax.tree.unflatten(tree, f)), in_axes=axes)(*flat)
            return a

        def none(_):
            return jax.tree.map(lambda s: jnp.zeros((axis_size,) + s.shape, s.dtype), out_shape)

        out = jax.lax.cond(jnp.any(m), full, none, None)
        return out, jax.tree.map(lambda _: True, out)

    return _plain_jvp(run, fn, tree)(mask, *leaves)


@functools.lru_cache(maxsize=None)
def _batch_any_fn():
    run = custom_vmap(lambda mask: mask)

    @run.def_vmap
    def rule(axis_size, in_batched, mask):
        return (jnp.any(mask, axis=0) if in_batched[0] else mask), False

    return run


def batch_any(mask: jax.Array) -> jax.Array:
    """``mask`` itself for one world; under vmap, True where any world of the batch
    has True (not batched: one value for the whole batch)."""
    return _batch_any_fn()(jax.lax.stop_gradient(mask))


def in_chunks(mask: jax.Array, fn, *args, chunk: int):
    """``fn(*args)`` for a function mapped over the leading axis (n entries) of
    ``mask`` (n,) and every leaf of ``args``, run ``chunk`` entries at a time up
    to the chunk holding the last True entry of ``mask`` in any world of a batch
    (:func:`batch_any`); the entries after it are zeros (skipped), so for a list
    compacted live-first (:func:`compact`) the unused tail of a capacity costs
    nothing. One loop (``fori_loop`` with a batch-wide trip count) slicing the
    entry axis in place; the last chunk is padded with copies of the last entry
    (valid inputs, their results cut off). Each evaluated entry's result is
    ``fn``'s on that entry. Derivatives (a custom jvp) are those of ``fn`` on all
    entries, as :func:`unless_none`'s."""
    n = mask.shape[0]
    nchunk = -(-n // chunk)
    pad = nchunk * chunk - n
    fn = jax.jit(fn)
    leaves, tree = jax.tree.flatten(args)

    def padded(x):
        if not pad:
            return x
        return jnp.concatenate([x, jnp.broadcast_to(x[-1:], (pad,) + x.shape[1:])], axis=0)

    out_shape = jax.eval_shape(fn, *jax.tree.unflatten(tree, [x[:chunk] for x in leaves]))

    def run(m, *flat):
        flat = [padded(x) for x in flat]
        live = batch_any(m)
        last = jnp.max(jnp.where(live, jnp.arange(1, n + 1), 0))   # slots up to the last live
        trips = (last + chunk - 1) // chunk

        def body(k, out):
            part = [jax.lax.dynamic_slice_in_dim(x, k * chunk, chunk) for x in flat]
            r = fn(*jax.tree.unflatten(tree, part))
            return jax.tree.map(lambda o, v: jax.lax.dynamic_update_slice_in_dim(
                o, v, k * chunk, 0), out, r)

        out0 = jax.tree.map(lambda s: jnp.zeros((nchunk * chunk,) + s.shape[1:], s.dtype),
                            out_shape)
        out = jax.lax.fori_loop(0, trips, body, out0)
        return jax.tree.map(lambda x: x[:n], out)

    return _plain_jvp(run, fn, tree)(mask, *leaves)
