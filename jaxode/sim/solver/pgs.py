"""``pgs``: the rows in QuickStep's order, one unit after another (the conformance reference).

Order (deterministic): the head rows (no friction index: joint rows, then
contact normals) in order, then the tail contacts in order, each contact's
friction block row by row. For the pyramid model this is exactly ODE's initial
order (findex == -1 rows first, then the others, each in joint-row order).

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
contact rows keep their order (ODE shuffles them with the joint rows), and ODE
solves box-model friction rows (no friction index) among the head rows. All only matter where 20 iterations leave
the problem unconverged.

Each sweep is two loops (head rows, then tail contacts) whose per-unit data are
loop inputs; a unit is updated by :func:`jaxode.sim.solver.core.row_update` /
:func:`~jaxode.sim.solver.core.block_update`, vectorised over the trailing world
axis. Sequential updates per sweep: rows + contacts.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim.solver import core, reorder as reorder_lib
from jaxode.sim.solver.core import Block

# Units per loop trip (loop unrolling).
UNROLL = 4


def _live_count(per_unit_live: jax.Array) -> jax.Array:
    """1 + the index of the last True entry (0 if none): units past it are no-ops."""
    n = per_unit_live.shape[0]
    return jnp.max(jnp.where(per_unit_live, jnp.arange(1, n + 1), 0)).astype(jnp.int32)


def _pad_rows(x: jax.Array, multiple: int) -> jax.Array:
    extra = -x.shape[0] % multiple
    if not extra:
        return x
    return jnp.concatenate([x, jnp.zeros((extra,) + x.shape[1:], x.dtype)], axis=0)


def _scan_units(step, carry, xs, ys0, unroll: int, count):
    """``lax.scan(step, carry, xs)`` over the leading axis, or, with ``count``
    (traced int), over the first ``count`` entries only (the rest of ``ys0`` is
    kept): a while loop of ``unroll`` entries per trip; the leading axis must
    be a multiple of ``unroll``."""
    if count is None:
        return jax.lax.scan(step, carry, xs, unroll=unroll)
    assert ys0.shape[0] % unroll == 0, (ys0.shape, unroll)

    def trip(i, state):
        c, ys = state
        for u in range(unroll):
            k = i * unroll + u
            x = jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, k, 0, keepdims=False), xs)
            c, y = step(c, x)
            ys = jax.lax.dynamic_update_index_in_dim(ys, y, k, 0)
        return c, ys

    return jax.lax.fori_loop(0, (count + unroll - 1) // unroll, trip, (carry, ys0))


def permutations(iterations: int, nrows: int, step):
    """(phase lengths, orders): the iterations in phases of ODE's reordering
    frequency and, for each phase after the first, the order of the ``nrows``
    shuffled rows at step number ``step`` (traced int; int32 (phases - 1, nrows)),
    or None when nothing is shuffled (fewer than 2 rows or one phase)."""
    lengths, orders = reorder_lib.table(iterations, nrows)
    if orders is None:
        return lengths, None
    return lengths, jnp.asarray(orders)[jnp.mod(step, orders.shape[0])]


def sweeps(p, iterations: int, block: int, cone: bool, live: bool = False,
           unroll: int = UNROLL, reorder: int = 0, **_):
    """The SOR sweeps in QuickStep's order. ``p``: a :class:`jaxode.sim.solver.batching.Problem`
    (world-minor). With ``live`` each sweep stops after the last head row and tail
    contact that is active in some world (later units are no-ops: zero Jacobian,
    rhs and bounds). ``reorder`` (static): the number of leading head rows (the
    joint rows) shuffled before iterations 8, 16, ... (module docstring).
    Returns (lambda_head (Rh, W), lambda_tail (Rt, W), fc (B, 6, W)).
    """
    h, t = p.head, p.tail
    fidx, pyramid, cone_row = p.fidx, p.pyramid, p.cone_row
    nh0, nt0 = h.b1.shape[0], t.b1.shape[0]
    if live:
        # Whole loop trips with dynamic trip counts: pad once with no-op units.
        ph, pt = unroll, block * max(1, unroll // block)
        h = core.Prepared(*(_pad_rows(a, ph) for a in h))
        t = core.Prepared(*(_pad_rows(a, pt) for a in t))
        fidx, pyramid, cone_row = (_pad_rows(a, pt) for a in (fidx, pyramid, cone_row))
    nh, nt = h.b1.shape[0], t.b1.shape[0]
    w = p.fc0.shape[-1]
    dtype = p.fc0.dtype
    nc = nt // block

    def blocks(x):
        return x.reshape((nc, block) + x.shape[1:])

    def row_live(j1, j2, rhs):
        return (jnp.any(j1 != 0, axis=(1, 2)) | jnp.any(j2 != 0, axis=(1, 2))
                | jnp.any(rhs != 0, axis=1))

    n_head = _live_count(row_live(h.j1, h.j2, h.rhs)) if live and nh else None
    n_tail = (_live_count(jnp.any(blocks(row_live(t.j1, t.j2, t.rhs)), axis=1))
              if live and nt else None)

    def head_row(fc, x):
        r, lam = x
        return core.row_update(fc, r.b1, r.b2, r.j1, r.j2, r.imj1, r.imj2, r.rhs, r.cfm, lam,
                               r.lo, r.hi)

    def tail_contact(fc, x):
        u, lam, lam_n = x
        return core.block_update(fc, u, lam, lam_n, cone)

    tail_units = Block(*(blocks(a) for a in t), blocks(pyramid[:, None]),
                       blocks(cone_row[:, None])) if nt else None

    lengths, orders = permutations(iterations, min(reorder, nh0), p.step)
    if orders is None:
        lengths = (iterations,)
    elif n_head is not None:
        # a shuffle moves rows within the first n_re only: the live prefix
        # covers them all as soon as one row is live
        n_head_sh = jnp.where(n_head > 0, jnp.maximum(n_head, orders.shape[-1]), 0
                              ).astype(n_head.dtype)

    def phase(carry, length, perm):
        # perm: this phase's order of the head rows (None: as given).
        # ODE sweeps lambda[order[i]]: lambda_head is carried in the phase's order,
        # and the row data are gathered once into it, so the sweeps read in sequence.
        hp, inv, nlive = h, None, n_head
        if perm is not None:
            inv = jnp.zeros_like(perm).at[perm].set(jnp.arange(nh, dtype=perm.dtype))
            hp = core.Prepared(*(jnp.take(a, perm, axis=0) for a in h))
            nlive = n_head_sh if n_head is not None else None

        def sweep(carry, _):
            fc, lam_h, lam_t = carry
            if nh:
                fc, lam_h = _scan_units(head_row, fc, (hp, lam_h), lam_h, unroll, nlive)
            if nt:
                lam_hh = lam_h if inv is None else jnp.take(lam_h, inv, axis=0)
                lam_n = lam_hh[fidx] if nh else jnp.zeros((nt, w), dtype)
                fc, lam_b = _scan_units(tail_contact, fc,
                                        (tail_units, blocks(lam_t), blocks(lam_n)),
                                        blocks(lam_t), max(1, unroll // block), n_tail)
                lam_t = lam_b.reshape((nt,) + lam_b.shape[2:])
            return (fc, lam_h, lam_t), None

        fc, lam_h, lam_t = carry
        if perm is not None:
            lam_h = jnp.take(lam_h, perm, axis=0)
        (fc, lam_h, lam_t), _ = jax.lax.scan(sweep, (fc, lam_h, lam_t), None, length=length)
        if perm is not None:
            lam_h = jnp.take(lam_h, inv, axis=0)
        return fc, lam_h, lam_t

    carry = (p.fc0, jnp.zeros((nh, w), dtype), jnp.zeros((nt, w), dtype))
    for k, length in enumerate(lengths):
        perm = None
        if k > 0 and orders is not None:
            perm = jnp.concatenate([orders[k - 1],
                                    jnp.arange(orders.shape[-1], nh, dtype=orders.dtype)])
        carry = phase(carry, length, perm)
    fc, lam_h, lam_t = carry
    return lam_h[:nh0], lam_t[:nt0], fc
