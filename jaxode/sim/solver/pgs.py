"""``pgs``: the rows in QuickStep's order, one unit after another (the conformance reference).

Order (deterministic): the head rows (no friction index: joint rows, then
contact normals) in order, then the tail contacts in order, each contact's
friction block row by row. This is ODE 0.16's initial order
(``quickstep.cpp`` ``dxQuickStepIsland_Stage4LCP_ReorderPrep``: the rows with
findex == -1 first, then the others, each in joint-row order). Box-model
friction rows have no friction index (findex -1), so ODE solves them among the
head rows, right after their contact's normal row; with ``box_head`` (set when
the model has a box-model pair, ``Model.friction_box``) jaxode does the same:
a contact's head unit is its normal row plus its box rows (no-ops for pyramid
and cone contacts), and the tail skips them. (Solving them in the tail instead
made a 1 kg box sliding at 2 m/s on 4 contacts, mu 0.5 N, stop at 1.0057 m
where ODE stops at 0.9900-0.9903 m over its RNG seeds, the exact discrete
answer 0.99 m; see docs/CONFORMANCE.md.)

Before iterations 8, 16, ... ODE 0.16 shuffles the rows with its global random
generator (``quickstep.cpp``: REORDERING_METHOD__RANDOMLY, every
RANDOM_CONSTRAINTS_REORDERING_FREQUENCY = 8 iterations). jaxode shuffles the
joint rows (``reorder`` leading head rows) the same way, with ODE's generator
and shuffle (:mod:`jaxode.sim.solver.reorder`): in one fixed order, the error 20
sweeps leave in ill-conditioned joint chains (light bodies far from their
anchors) repeats step after step and the ERP correction pumped energy in (5.7 %
of fuzzed chains exploded where ODE stays calm). The permutations change from
step to step as ODE's generator's do (a world's step number, ``round(time / h)``,
picks them from a table that repeats after thousands of steps; one fixed
permutation per step still let 1 of 20 fuzzed chains explode). A batch that
shares its rows uses world 0's step number for all its worlds, as ODE's one
global generator serves every world: worlds stepped in lockstep (sweeps,
synchronous RL) are bitwise the same alone and in the batch; a world whose step
count differs from world 0's (an auto-reset episode) gets world 0's
permutations, so replaying it alone reproduces it only where its joint rows
converge (or the scene has no joint rows). Documented differences from ODE:
contact rows keep their order (ODE shuffles all rows, contact rows with the
joint rows: ``ConstraintsReorderingHelper`` over all ``m`` rows; the model
option ``reorder="ode"`` does that, :func:`ode_sweeps`), and ODE's
island walk (``util.cpp`` ``dxProcessIslands``) lists each body's joints newest
first, so it solves one body's contacts in the reverse of the order they were
created, where jaxode solves them in slot order. All only matter where 20
iterations leave the problem unconverged.

``reorder="ode"`` (:func:`ode_sweeps`): every row of the world, joint, normal
and friction rows, in ODE's initial order and shuffled as ODE shuffles its
island's m existing rows, with ODE's generator carried per world
(``State.rng``): a friction row may come before its normal row and is then
bounded by the normal's lambda of the previous sweep, as in ODE. The orders
differ per world, so row data and body forces are gathered per world.

Each sweep is two loops (head rows, then tail contacts) whose per-unit data are
loop inputs; a unit is updated by :func:`jaxode.sim.solver.core.row_update` /
:func:`~jaxode.sim.solver.core.block_update`, vectorised over the trailing world
axis. Sequential updates per sweep: rows + contacts.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxode.sim.solver import core, reorder as reorder_lib
from jaxode.sim.solver.core import Block

# Units per loop trip (loop unrolling).
UNROLL = 4

#: Sweeps over this many worlds or more (the world-minor width: a tile, or the
#: batch) double-buffer their lambdas (:func:`sweeps`); narrower ones, one world
#: alone above all, keep one buffer: the sweep is then traced and compiled once,
#: not twice (boxes at one world: XLA 1.3 s less), and the copies the double
#: buffer saves are a few bytes there. The same arithmetic either way.
DOUBLE_BUFFER_MIN_WORLDS = 16


def _live_count(per_unit_live: jax.Array) -> jax.Array:
    """1 + the index of the last True entry (0 if none): units past it are no-ops."""
    n = per_unit_live.shape[0]
    return jnp.max(jnp.where(per_unit_live, jnp.arange(1, n + 1), 0)).astype(jnp.int32)


def _head_live_count(row_live, h, nj: int, nc: int) -> jax.Array:
    """The head rows a sweep runs: its first ``nj`` rows (the joint rows) always,
    then up to the last of the next ``nc`` (the contacts' normal rows) that is
    live in some world (the rest of ``h`` is padding). Joint rows are
    not counted: they are live in nearly every step (only a trailing inactive
    limit/motor row would be trimmed, an exact no-op either way), and counting
    them cost chain at 512 worlds 0.44 ms of its ~13 ms step (a kernel that
    recomputes every joint row's scaled Jacobian, 14 ns per row and world),
    now 3.5-8 % less wall time with bitwise the same states (bench/RESULTS.md,
    session 36). ``row_live`` (j1, j2, rhs) -> (rows,) bool, over the worlds."""
    assert 0 <= nj and nj + nc <= h.b1.shape[0], (nj, nc, h.b1.shape)
    if not nc:
        return jnp.asarray(nj, jnp.int32)
    rows = slice(nj, nj + nc)
    n = _live_count(row_live(h.j1[rows], h.j2[rows], h.rhs[rows]))
    return (n + nj).astype(jnp.int32)


def _pad_rows(x: jax.Array, multiple: int) -> jax.Array:
    extra = -x.shape[0] % multiple
    if not extra:
        return x
    return jnp.concatenate([x, jnp.zeros((extra,) + x.shape[1:], x.dtype)], axis=0)


def _scan_units(step, carry, xs, ys0, unroll: int, count, order=None):
    """``lax.scan(step, carry, xs)`` over the leading axis, or, with ``count``
    (traced int), over the first ``count`` entries only (the rest of ``ys0`` is
    kept): a while loop of ``unroll`` entries per trip; the leading axis must
    be a multiple of ``unroll``. ``xs`` is ``(rows, ...)``; with ``order`` (int
    (n,), the while loop only) entry k takes row ``order[k]`` of ``rows`` (the
    other parts entry k): the rows are read in that order where they lie, not
    gathered into it first (a shuffled phase's gather of every row table, per
    tile, was 16 % of the chain's step)."""
    if count is None:
        assert order is None, "order: the while loop's (the scan takes rows in order)"
        return jax.lax.scan(step, carry, xs, unroll=unroll)
    assert ys0.shape[0] % unroll == 0, (ys0.shape, unroll)

    def at(k):
        return lambda a: jax.lax.dynamic_index_in_dim(a, k, 0, keepdims=False)

    def trip(i, state):
        c, ys = state
        for u in range(unroll):
            k = i * unroll + u
            if order is None:
                x = jax.tree.map(at(k), xs)
            else:
                x = (jax.tree.map(at(order[k]), xs[0]),) + jax.tree.map(at(k), tuple(xs[1:]))
            c, y = step(c, x)
            ys = jax.lax.dynamic_update_index_in_dim(ys, y, k, 0)
        return c, ys

    return jax.lax.fori_loop(0, (count + unroll - 1) // unroll, trip, (carry, ys0))


def permutations(iterations: int, nrows: int, step, seed: int = reorder_lib.ODE_SEED):
    """(phase lengths, orders): the iterations in phases of ODE's reordering
    frequency and, for each phase after the first, the order of the ``nrows``
    shuffled rows at step number ``step`` (traced int; int32 (phases - 1, nrows)),
    drawn from ODE's generator seeded with ``seed`` (static), or None when nothing
    is shuffled (fewer than 2 rows or one phase)."""
    lengths, orders = reorder_lib.table(iterations, nrows, seed=int(seed))
    if orders is None:
        return lengths, None
    return lengths, jnp.asarray(orders)[jnp.mod(step, orders.shape[0])]


def _box_split(h, t, pyramid, block: int):
    """Split for ODE's order of box-model friction rows (``box_head``).

    Returns (joint head rows, contact units, tail): the head's last ``nc`` rows
    (the contacts' normal rows) paired with their contact's first two tail rows
    where those carry no friction index (box model; other rows zeroed: exact
    no-op updates), and the tail with those box rows zeroed (no-ops there).
    A contact unit is :class:`~jaxode.sim.solver.core.Prepared` with a leading
    axis of 3 rows (normal, t1, t2) per contact.
    """
    nt = t.b1.shape[0]
    nc = nt // block
    nj = h.b1.shape[0] - nc
    box = _box_rows(pyramid, block)                              # (Rt, W or 1)

    def keep(a, m):
        # m (Rt, W or 1); a (Rt, ..., W)
        m = m.reshape(m.shape[:1] + (1,) * (a.ndim - 2) + m.shape[1:])
        return jnp.where(m, a, jnp.zeros((), a.dtype))

    def first2(a):
        return a.reshape((nc, block) + a.shape[1:])[:, :2]

    tail = core.Prepared(t.b1, t.b2, *(keep(a, ~box) for a in t[2:]))
    boxed = [first2(keep(a, box)) if i >= 2 else first2(a) for i, a in enumerate(t)]
    hn = [a[nj:] for a in h]
    unit = core.Prepared(*(jnp.concatenate([n[:, None], b], axis=1) for n, b in zip(hn, boxed)))
    hj = core.Prepared(*(a[:nj] for a in h))
    return hj, unit, tail


def _box_rows(pyramid, block: int):
    """(Rt, W or 1) bool: the tail rows that are box-model friction rows (a contact's
    first two rows without a friction index; ``pyramid`` (Rt,) or per world (Rt, W))."""
    nt = pyramid.shape[0]
    return (~core.row_flags(pyramid)) & (jnp.arange(nt) % block < 2)[:, None]


def _box_split_mask(pyramid, block: int):
    """(contacts, 2, W or 1) bool: :func:`_box_rows` per contact."""
    box = _box_rows(pyramid, block)
    return box.reshape((pyramid.shape[0] // block, block) + box.shape[1:])[:, :2]


def sweeps(p, iterations: int, block: int, cone: bool, live: bool = False,
           unroll: int = UNROLL, reorder: int = 0, box_head: bool = False, seed: int = 0,
           static: bool = False, **_):
    """The SOR sweeps in QuickStep's order. ``p``: a :class:`jaxode.sim.solver.batching.Problem`
    (world-minor). With ``live`` each sweep stops after the last head row and tail
    contact that is active in some world (later units are no-ops: zero Jacobian,
    rhs and bounds). ``reorder`` (static): the number of leading head rows (the
    joint rows) shuffled before iterations 8, 16, ... (module docstring), drawn
    from ODE's generator seeded with ``seed`` (static). ``box_head`` (static): the head's last ``Rt / block`` rows are the contacts'
    normal rows, and a contact's friction rows without a friction index (the
    box model) are solved right after its normal row, among the head rows, as
    ODE orders them (module docstring); otherwise every tail row waits for the tail.

    A sweep is up to three loops: the head rows (with ``box_head`` only the joint
    rows), the contact units of ``box_head`` (normal row + box rows,
    :func:`_box_split`), then the tail contacts' friction blocks.
    With ``p.order`` set (``reorder="ode"``) every row is swept in the
    per-world orders it gives instead (:func:`ode_sweeps`).
    Returns (lambda_head (Rh, W), lambda_tail (Rt, W), fc (B, 6, W)).
    """
    if p.order is not None:
        return ode_sweeps(p, iterations, block, unroll=unroll, static=static)
    h, t = p.head, p.tail
    fidx, pyramid, cone_row = p.fidx, p.pyramid, p.cone_row
    pw = h.b1.ndim == 2          # each world's own body indices (R, W) (core.read)
    nt0 = t.b1.shape[0]
    cu = None
    if box_head and nt0:
        h, cu, t = _box_split(h, t, pyramid, block)
        nc0 = cu.b1.shape[0]
        box = _box_split_mask(pyramid, block)
    nh0 = h.b1.shape[0]
    if live:
        # Whole loop trips with dynamic trip counts: pad once with no-op units.
        pt = block * max(1, unroll // block)
        h = core.Prepared(*(_pad_rows(a, unroll) for a in h))
        if cu is not None:
            cu = core.Prepared(*(_pad_rows(a, unroll) for a in cu))
        t = core.Prepared(*(_pad_rows(a, pt) for a in t))
        fidx, pyramid, cone_row = (_pad_rows(a, pt) for a in (fidx, pyramid, cone_row))
    nh, nt = h.b1.shape[0], t.b1.shape[0]
    w = p.fc0.shape[-1]
    dtype = p.fc0.dtype
    nc = nt // block

    def blocks(x):
        return x.reshape((nc, block) + x.shape[1:])

    def row_live(j1, j2, rhs):
        # per row and world, then over the worlds by a product with ones: XLA's
        # CPU reductions over the minor (world) axis are reduce-window trees that
        # cost several times this (exact: a count below 2^24)
        nz = jnp.any(j1 != 0, axis=-2) | jnp.any(j2 != 0, axis=-2) | (rhs != 0)
        return (nz.astype(rhs.dtype) @ jnp.ones((rhs.shape[-1],), rhs.dtype)) > 0

    if live and nh:
        nc_head = 0 if cu is not None else nt0 // block   # contact normal rows in h
        n_head = _head_live_count(row_live, h, nh0 - nc_head, nc_head)
    else:
        n_head = None
    n_cont = (_live_count(jnp.any(row_live(cu.j1, cu.j2, cu.rhs), axis=1))
              if live and cu is not None else None)
    n_tail = (_live_count(jnp.any(blocks(row_live(t.j1, t.j2, t.rhs)), axis=1))
              if live and nt else None)

    def head_row(fc, x):
        r, lam = x
        return core.row_update(fc, r.b1, r.b2, r.j1, r.j2, r.imj1, r.imj2, r.rhs, r.cfm, lam,
                               r.lo, r.hi, per_world=pw)

    def contact_unit(fc, x):
        # normal row, then the box rows (bounds +-mu: no friction index)
        r, lam = x
        new = []
        for k in range(3):
            fc, lk = core.row_update(fc, r.b1[k], r.b2[k], r.j1[k], r.j2[k], r.imj1[k],
                                     r.imj2[k], r.rhs[k], r.cfm[k], lam[k], r.lo[k], r.hi[k],
                                     per_world=pw)
            new.append(lk)
        return fc, jnp.stack(new)

    def tail_contact(lam_hh, fc, x):
        # lam_n: the lambdas of the block's friction indices, read per unit
        # (a gather of the whole (Rt, W) table per sweep cost more than the
        # tail's updates on CPU)
        u, lam, fi = x
        if not lam_hh.shape[0]:
            lam_n = jnp.zeros_like(lam)
        elif fi.ndim == 2:      # (K, W): each world's own friction index
            lam_n = lam_hh[fi, jnp.arange(w)]
        else:
            lam_n = jnp.stack([jax.lax.dynamic_index_in_dim(lam_hh, fi[k], 0, keepdims=False)
                               for k in range(fi.shape[0])])
        return core.block_update(fc, u, lam, lam_n, cone, per_world=pw)

    tail_units = Block(*(blocks(a) for a in t), blocks(core.row_flags(pyramid)),
                       blocks(core.row_flags(cone_row))) if nt else None

    lengths, orders = permutations(iterations, min(reorder, nh0), p.step, seed)
    if orders is None:
        lengths = (iterations,)
    elif n_head is not None:
        # a shuffle moves rows within the first n_re only: the live prefix
        # covers them all as soon as one row is live
        n_head_sh = jnp.where(n_head > 0, jnp.maximum(n_head, orders.shape[-1]), 0
                              ).astype(n_head.dtype)

    def phase(carry, length, perm, nlive=None):
        # perm: this phase's order of the head rows (None: as given); ``length``
        # its sweeps, static, or (with ``nlive``, the while loops' live head
        # count for this phase, traced) traced (even with the double buffer).
        # ODE sweeps lambda[order[i]]: lambda_head is carried in the phase's order,
        # and the sweeps read the row data where they lie, at order[i].
        hp, order, inv = h, None, None
        if nlive is None:
            nlive = n_head if perm is None or n_head is None else n_head_sh
        if perm is not None:
            inv = jnp.zeros_like(perm).at[perm].set(jnp.arange(nh, dtype=perm.dtype))
            if nlive is None:   # the scan (all units): the rows gathered once per phase
                hp = core.Prepared(*(jnp.take(a, perm, axis=0) for a in h))
            else:               # the while loop: read in place at perm[k]
                order = perm

        def sweep(fc, src, dst):
            # one sweep: reads the lambdas in ``src``, writes them into ``dst`` (the
            # entries past the live counts are zeros in both and stay so)
            lam_h, lam_c, lam_t = src
            out_h, out_c, out_t = dst
            if nh:
                fc, out_h = _scan_units(head_row, fc, (hp, lam_h), out_h, unroll, nlive,
                                        order=order)
            if cu is not None:
                fc, out_c = _scan_units(contact_unit, fc, (cu, lam_c), out_c, unroll, n_cont)
            if nt:
                lam_hh = out_h if inv is None else jnp.take(out_h, inv, axis=0)
                if cu is not None:  # the normals' lambdas sit in the contact units
                    lam_hh = jnp.concatenate([lam_hh[:nh0], out_c[:nc0, 0]], axis=0)
                fc, out_b = _scan_units(functools.partial(tail_contact, lam_hh), fc,
                                        (tail_units, blocks(lam_t), blocks(fidx)),
                                        blocks(out_t), max(1, unroll // block), n_tail)
                out_t = out_b.reshape((nt,) + out_b.shape[2:])
            return fc, (out_h, out_c, out_t)

        def two_sweeps(carry):
            # Double-buffered: the first sweep writes the scratch lambdas, the second
            # the current ones, so every loop reads one buffer and updates the other
            # in place, and each buffer keeps its place in the loop's carry. (One
            # buffer both read and updated made XLA copy it into and out of every
            # loop: four copies a sweep, ~7 % of a bin_16 step. Reading a row's
            # lambda from the loop's own output instead made XLA copy the table
            # per row: 2.5-3.5x slower; bench/RESULTS.md, session 24.)
            fc, cur, scr = carry
            fc, scr = sweep(fc, cur, scr)
            fc, cur = sweep(fc, scr, cur)
            return fc, cur, scr

        fc, cur, scr = carry
        if perm is not None:
            cur = (jnp.take(cur[0], perm, axis=0),) + tuple(cur[1:])
        if not double:
            # one buffer, read and updated by each sweep (the entry a row reads is
            # its own, read before it is written): one sweep per trip
            def one(c):
                f, lam = sweep(c[0], c[1], c[1])
                return f, lam, c[2]
            if isinstance(length, int):
                (fc, cur, scr), _ = jax.lax.scan(lambda c, _: (one(c), None), (fc, cur, scr),
                                                 None, length=length)
            else:
                fc, cur, scr = jax.lax.fori_loop(0, length, lambda _, c: one(c), (fc, cur, scr))
        elif isinstance(length, int):
            (fc, cur, scr), _ = jax.lax.scan(lambda c, _: (two_sweeps(c), None),
                                             (fc, cur, scr), None, length=length // 2)
            if length % 2:
                fc, last = sweep(fc, cur, scr)
                cur, scr = last, cur
        else:
            fc, cur, scr = jax.lax.fori_loop(0, length // 2, lambda _, c: two_sweeps(c),
                                             (fc, cur, scr))
        if perm is not None:
            cur = (jnp.take(cur[0], inv, axis=0),) + tuple(cur[1:])
        return fc, cur, scr

    double = w >= DOUBLE_BUFFER_MIN_WORLDS

    def zeros():
        lam_c0 = jnp.zeros((cu.b1.shape[0], 3, w), dtype) if cu is not None else None
        return jnp.zeros((nh, w), dtype), lam_c0, jnp.zeros((nt, w), dtype)

    carry = (p.fc0, zeros(), zeros() if double else None)
    if orders is None:
        carry = phase(carry, lengths[0], None)
    else:
        # the shuffled phases: orders (phases - 1, n_re), the rows past n_re in place
        n_re = orders.shape[-1]
        perms = jnp.concatenate([orders, jnp.broadcast_to(
            jnp.arange(n_re, nh, dtype=orders.dtype), (orders.shape[0], nh - n_re))], axis=1)
        odd = any(n % 2 for n in lengths)   # the last phase can be
        if n_head is not None and (not odd or not double):
            # Every phase is one trip of one loop over the phases (the first in the
            # given order, as the identity permutation; lengths and live counts
            # are loop data): the sweep is traced and compiled twice (the double
            # buffer; once with one buffer), not that per phase (20 iterations:
            # phases of 8, 8, 4, six copies; chain at one world: XLA 7.1 -> 4.8 s);
            # the same rows in the same order.
            perms = jnp.concatenate([jnp.arange(nh, dtype=perms.dtype)[None], perms])
            xs = (perms, jnp.asarray(lengths, jnp.int32),
                  jnp.stack([n_head] + [n_head_sh] * (len(lengths) - 1)).astype(jnp.int32))
            carry, _ = jax.lax.scan(lambda c, x: (phase(c, x[1], x[0], x[2]), None), carry, xs)
        else:
            carry = phase(carry, lengths[0], None)
            rest = lengths[1:]
            # The run of full phases (FREQUENCY iterations each) is one loop over the
            # phases (the permutation is loop data), so the program's size does not
            # grow with the iterations (1600 iterations: 200 phases); same
            # arithmetic, in order.
            nfull = next((i for i, n in enumerate(rest) if n != rest[0]), len(rest))
            if nfull > 1:
                carry, _ = jax.lax.scan(lambda c, perm: (phase(c, rest[0], perm), None),
                                        carry, perms[:nfull])
            else:
                nfull = 0
            for k in range(nfull, len(rest)):
                carry = phase(carry, rest[k], perms[k])
    fc, (lam_h, lam_c, lam_t), _ = carry
    if cu is None:
        return lam_h[:nh0], lam_t[:nt0], fc
    lam_head = jnp.concatenate([lam_h[:nh0], lam_c[:nc0, 0]], axis=0)
    lt = lam_t[:nt0].reshape((nc0, block, w))
    first = jnp.where(box, lam_c[:nc0, 1:], lt[:, :2])
    lam_tail = jnp.concatenate([first, lt[:, 2:]], axis=1).reshape((nt0, w))
    return lam_head, lam_tail, fc


def ode_sweeps(p, iterations: int, block: int, unroll: int = UNROLL, static: bool = False):
    """The SOR sweeps of ``reorder="ode"``: every row of the world in the order
    of ``p.order`` (int32 (phases, M, W), one order per sweep phase and world,
    from :func:`jaxode.sim.solver.reorder.ode_orders`), over the unified rows
    (the M = Rh + Rt head rows, then the tail rows). A row with a friction index
    is bounded by ``|hi lambda|`` of its normal row's lambda as it is when the
    row is swept (ODE 0.16 ``quickstep.cpp``: ``hi_act = dFabs(hi *
    lambda[findex])``), before or after the normal row in this phase's order.

    Worlds differ in order, so each row update is core's
    (:func:`jaxode.sim.solver.core.row_update` with ``per_world``: ``fc`` read
    and written at per-world body indices, a gather and a scatter over the world
    axis) and the row data are gathered per world once per phase. The phases are
    one loop (the phase's order is loop data; a phase shorter than ODE's
    reordering frequency, the last, skips its missing sweeps), so the program
    does not grow with the iterations. Each sweep stops after the largest number
    of active rows of any world (the rows past a world's ``m`` are no-ops; with
    ``static`` every position is swept, for reverse-mode differentiation).
    Returns (lambda_head (Rh, W), lambda_tail (Rt, W), fc).
    """
    h, t, order = p.head, p.tail, p.order
    nh, nt = h.b1.shape[0], t.b1.shape[0]
    n = nh + nt
    w = p.fc0.shape[-1]
    dtype = p.fc0.dtype
    aw = jnp.arange(w)
    u = core.Prepared(*(jnp.concatenate([a, b], axis=0) for a, b in zip(h, t)))
    # friction flags and indices: shared (M,) or, with per-world rows, (M, W)
    hasf = jnp.concatenate([jnp.zeros((nh,) + p.pyramid.shape[1:], bool), p.pyramid])
    fidx = jnp.concatenate([jnp.zeros((nh,) + p.fidx.shape[1:], jnp.int32),
                            p.fidx.astype(jnp.int32)])
    active = jnp.concatenate([p.head_active, p.tail_active], axis=0)
    count = None if static else jnp.max(jnp.sum(active, axis=0, dtype=jnp.int32))
    npad = n + (-n % unroll)

    def gather(a, o):
        # a (M, ...) shared or (M, ..., W) per world; o (M, W): a[o[k, w], ..., w]
        if a.ndim == 1:
            return a[o]
        oi = o.reshape((o.shape[0],) + (1,) * (a.ndim - 2) + (w,))
        return jnp.take_along_axis(a, jnp.broadcast_to(oi, (o.shape[0],) + a.shape[1:]), axis=0)

    def row(carry, x):
        fc, lam = carry
        k, b1, b2, j1, j2, i1, i2, rhs, cfm, lo, hi, hf, fp = x
        lam_k = jax.lax.dynamic_index_in_dim(lam, k, 0, keepdims=False)
        lo_k, hi_k = core.friction_bounds(2, lo, hi, lam[fp, aw], hf, None, False)
        fc, new = core.row_update(fc, b1, b2, j1, j2, i1, i2, rhs, cfm, lam_k, lo_k, hi_k,
                                  per_world=True)
        return (fc, jax.lax.dynamic_update_index_in_dim(lam, new, k, 0)), None

    def phase(carry, x):
        fc, lam_u = carry
        o, length = x                                              # (M, W), ()
        inv = jnp.zeros_like(o).at[o, aw].set(
            jnp.broadcast_to(jnp.arange(n, dtype=o.dtype)[:, None], o.shape))
        xs = [gather(a, o) for a in u]
        fpos = jnp.take_along_axis(inv, gather(fidx, o), axis=0)
        xs = xs + [gather(hasf, o), fpos]
        if npad > n:
            xs = [_pad_rows(a, unroll) for a in xs]
        xs = [jnp.arange(npad, dtype=jnp.int32)] + xs
        lam = _pad_rows(jnp.take_along_axis(lam_u, o, axis=0), unroll)

        def one_sweep(c):
            if count is None:
                return jax.lax.scan(row, c, xs, unroll=unroll)[0]

            def trip(i, c):
                for k in range(unroll):
                    c, _ = row(c, [jax.lax.dynamic_index_in_dim(a, i * unroll + k, 0,
                                                                keepdims=False) for a in xs])
                return c

            return jax.lax.fori_loop(0, (count + unroll - 1) // unroll, trip, c)

        def sweep(c, s):
            if full:
                return one_sweep(c), None
            return jax.lax.cond(s < length, one_sweep, lambda c: c, c), None

        (fc, lam), _ = jax.lax.scan(sweep, (fc, lam), jnp.arange(longest))
        return (fc, jnp.take_along_axis(lam[:n], inv, axis=0)), None

    lengths, _ = reorder_lib.table(iterations, 0)
    longest = max(lengths)
    full = all(x == longest for x in lengths)
    (fc, lam_u), _ = jax.lax.scan(phase, (p.fc0, jnp.zeros((n, w), dtype)),
                                  (order, jnp.asarray(lengths, jnp.int32)))
    return lam_u[:nh], lam_u[nh:], fc
