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

Row order (deterministic): the ``head`` rows (no friction index: joint rows,
then contact normals) in order, then the ``tail`` rows (friction) in order.
For the pyramid model this is exactly ODE's initial order (findex == -1 rows
first, then the others, each in joint-row order). Before iterations 8, 16, ...
ODE 0.16 shuffles the rows with its global random generator; jaxode shuffles
the joint rows (``reorder`` leading head rows) the same way, with ODE's
generator (:mod:`jaxode.reorder`): without it, 20 sweeps in one order pumped
energy into ill-conditioned joint chains. Two documented differences remain:
contact rows keep their order (ODE shuffles them with the joint rows), and ODE
solves box-model friction rows (no friction index) among the head rows. Both
only matter where 20 iterations leave the problem unconverged.

Friction rows are solved contact by contact (a block of 2 rows, or 5 with
rolling and spinning rows). Cone-model contacts (``cone``, static) solve
their two friction rows as a block (row t2 sees the velocities before row
t1's update) and project the pair onto the ellipse
``(l1/mu)^2 + (l2/mu2)^2 <= lambda_n^2``; pyramid and box contacts are
untouched, so worlds without the cone model run the same arithmetic as
before.

Implementation: each sweep is two ``lax.scan`` passes (head rows, then tail
contacts) whose per-row data are scan inputs. Under ``jax.vmap`` a custom batching rule lays
the worlds out as the trailing, contiguous axis ("world-minor"), so a row
update is a few vector operations across all worlds; when the rows' bodies are
fixed by the model (no contact compaction: every slot belongs to a known geom
pair) the batch shares the body indices and ``fc`` is read and written by
dynamic slicing. Measured 2.2x faster than plain vmap on CPU (bench/).
Derivatives (forward and reverse) go through the same loop without the
custom rule.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

from jaxode import reorder as reorder_lib
from jaxode.constraint import Rows

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


def friction_bounds(k: int, lo, hi, lam_n, pyramid, cone_row, cone: bool):
    """Bounds (lo, hi) [N] of row ``k`` of a contact's friction block (elementwise).

    A row with a friction index (``pyramid``) gets ``+-|hi lambda_n|``
    (mu = inf: unbounded); with ``cone`` (static) the first two rows of a
    cone contact are left unbounded here (a direction with mu = 0 stays at
    zero): :func:`cone_project` bounds them jointly.
    """
    # The inner where keeps inf * lambda out of the derivative (0 * inf = NaN
    # in reverse mode) without changing values.
    unbounded = jnp.isinf(hi)
    bound = jnp.where(unbounded, jnp.inf, jnp.abs(jnp.where(unbounded, 0.0, hi) * lam_n))
    lo_k = jnp.where(pyramid, -bound, lo)
    hi_k = jnp.where(pyramid, bound, hi)
    if cone and k < 2:
        free = jnp.where(hi > 0, jnp.inf, 0.0)
        lo_k = jnp.where(cone_row, -free, lo_k)
        hi_k = jnp.where(cone_row, free, hi_k)
    return lo_k, hi_k


def cone_project(l0, l1, mu1, mu2, lam_n, cone_row):
    """Project a cone contact's friction pair onto ``(l0/mu1)^2 + (l1/mu2)^2 <= lambda_n^2``
    (elementwise; rows without ``cone_row`` are returned unchanged)."""
    def scaled(l, m):
        ok = (m > 0) & jnp.isfinite(m)
        return jnp.where(ok, l / jnp.where(ok, m, 1.0), 0.0)

    s2 = scaled(l0, mu1) ** 2 + scaled(l1, mu2) ** 2
    ln = jnp.maximum(lam_n, 0.0)
    over = cone_row & (s2 > ln * ln)
    scale = jnp.where(over, ln / jnp.sqrt(jnp.where(over, s2, 1.0)), 1.0)
    return l0 * scale, l1 * scale


def _live_count(per_row_live: jax.Array) -> jax.Array:
    """1 + the index of the last True entry (0 if none): rows past it are no-ops."""
    n = per_row_live.shape[0]
    return jnp.max(jnp.where(per_row_live, jnp.arange(1, n + 1), 0)).astype(jnp.int32)


def _pad_rows(x: jax.Array, multiple: int) -> jax.Array:
    extra = -x.shape[0] % multiple
    if not extra:
        return x
    return jnp.concatenate([x, jnp.zeros((extra,) + x.shape[1:], x.dtype)], axis=0)


def _scan_rows(step, carry, xs, ys0, unroll: int, count):
    """``lax.scan(step, carry, xs)`` over the leading axis, or, with ``count``
    (traced int), over the first ``count`` entries only (the rest of ``ys0`` is
    kept): a while loop of ``unroll`` entries per trip; the leading axis must
    be a multiple of ``unroll`` (``_sweeps`` pads it with no-op rows)."""
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


def _sweeps(iterations: int, block: int, cone: bool, b1h, b2h, b1t, b2t, fidx, pyramid,
            conerow, step, *rows, live: bool = False, unroll: int = UNROLL, reorder: int = 0):
    """The SOR sweeps, world-minor: every float array carries a trailing world axis W.

    rows = (head: j1, j2, imj1, imj2 (R, 6, W), rhs, cfm, lo, hi (R, W);
            tail: the same, then fc0 (B, 6, W)). Body indices are shared by all
    W worlds, so fc is read and written by dynamic slicing. With ``live``
    each sweep stops after the last row (head) and contact (tail) that is
    active in some world: later rows are no-ops (zero Jacobian and rhs), so
    skipping them changes nothing. ``unroll``: rows per loop trip.

    The tail is solved one contact at a time, ``block`` rows per contact (its
    friction rows, then any rolling/spinning rows), in row order. With
    ``cone`` (static) a contact whose ``conerow`` flag is set has its first two
    rows unbounded individually and then projected jointly onto the ellipse
    ``(l1/mu)^2 + (l2/mu2)^2 <= lambda_n^2`` (mu, mu2 = the rows' ``hi``):
    Gazebo's cone friction model, isotropic when mu2 = mu.

    ``reorder`` (static): the first ``reorder`` head rows (the joint rows) are
    shuffled before iterations 8, 16, ... as ODE 0.16's QuickStep does, with
    the shuffles of step number ``step`` (int scalar) of :func:`reorder.table`;
    the other rows keep their order.
    """
    (hj1, hj2, hi1, hi2, hrhs, hcfm, hlo, hhi,
     tj1, tj2, ti1, ti2, trhs, tcfm, tlo, thi, fc0) = rows
    nh0, nt0 = b1h.shape[0], b1t.shape[0]
    if live:
        # Whole loop trips with dynamic trip counts: pad once, here, with no-op
        # rows (zero Jacobian, rhs, cfm and bounds), not inside every sweep.
        ph, pt = unroll, block * max(1, unroll // block)
        b1h, b2h, hj1, hj2, hi1, hi2, hrhs, hcfm, hlo, hhi = (
            _pad_rows(a, ph) for a in (b1h, b2h, hj1, hj2, hi1, hi2, hrhs, hcfm, hlo, hhi))
        b1t, b2t, fidx, pyramid, conerow, tj1, tj2, ti1, ti2, trhs, tcfm, tlo, thi = (
            _pad_rows(a, pt) for a in (b1t, b2t, fidx, pyramid, conerow, tj1, tj2, ti1, ti2,
                                        trhs, tcfm, tlo, thi))
    nh, nt = b1h.shape[0], b1t.shape[0]
    w = fc0.shape[-1]
    dtype = fc0.dtype
    nc = nt // block if block else 0

    # A row's write of its two bodies' fc: body 1 by a dynamic-update-slice of
    # "read + change", body 2 by a one-row scatter-add. Two dynamic-update-
    # slices of values read before the first write (or re-read after it, which
    # XLA's simplifier folds back into the earlier read) keep the pre-write fc
    # alive past the first in-place write, so XLA copied all of fc (B x 6 x W)
    # per row; the scatter-add's operands do not read fc, and XLA lowers the
    # one-row scatter in place. Same values either way: a row's two bodies
    # differ, or are both the static world, whose inverse mass (i1, i2) is 0.

    def update(fc, a1, a2, j1, j2, i1, i2, rhs, cfm, lam, lo, hi):
        v1 = jax.lax.dynamic_index_in_dim(fc, a1, 0, keepdims=False)
        v2 = jax.lax.dynamic_index_in_dim(fc, a2, 0, keepdims=False)
        delta = rhs - lam * cfm - jnp.sum(j1 * v1, axis=0) - jnp.sum(j2 * v2, axis=0)
        new = jnp.clip(lam + delta, lo, hi)
        d = new - lam
        return write(fc, a1, a2, v1, d * i1, d * i2), new

    def write(fc, a1, a2, v1, c1, c2):
        fc = jax.lax.dynamic_update_index_in_dim(fc, v1 + c1, a1, 0)
        return fc.at[a2].add(c2)

    def apply(fc, a1, a2, i1, i2, d):
        v1 = jax.lax.dynamic_index_in_dim(fc, a1, 0, keepdims=False)
        return write(fc, a1, a2, v1, d * i1, d * i2)

    def head_row(fc, x):
        return update(fc, *x)

    def tail_contact(fc, x):
        a1, a2, j1, j2, i1, i2, rhs, cfm, lam, lam_n, lo, hi, pyr, cn = x
        new = []
        for k in range(block):
            lo_k, hi_k = friction_bounds(k, lo[k], hi[k], lam_n[k], pyr[k], cn[k], cone)
            rhs_k = rhs[k]
            if cone and k == 1:
                # The cone pair is solved as a block (Jacobi within the contact):
                # row t2 sees the velocities before row t1's update, so neither
                # direction is favoured.
                d0 = new[0] - lam[0]
                back = jnp.sum(j1[1] * i1[0], axis=0) + jnp.sum(j2[1] * i2[0], axis=0)
                rhs_k = jnp.where(cn[1], rhs_k + d0 * back, rhs_k)
            fc, lk = update(fc, a1[k], a2[k], j1[k], j2[k], i1[k], i2[k], rhs_k, cfm[k],
                            lam[k], lo_k, hi_k)
            new.append(lk)
        if cone:
            l0, l1 = new[0], new[1]
            n0, n1 = cone_project(l0, l1, hi[0], hi[1], lam_n[0], cn[0])
            fc = apply(fc, a1[0], a2[0], i1[0], i2[0], n0 - l0)
            fc = apply(fc, a1[1], a2[1], i1[1], i2[1], n1 - l1)
            new[0], new[1] = n0, n1
        return fc, jnp.stack(new)

    def blocks(x):
        return x.reshape((nc, block) + x.shape[1:])

    def row_live(j1, j2, rhs):
        return (jnp.any(j1 != 0, axis=(1, 2)) | jnp.any(j2 != 0, axis=(1, 2))
                | jnp.any(rhs != 0, axis=1))

    n_tail = (_live_count(jnp.any(blocks(row_live(tj1, tj2, trhs)), axis=1))
              if live and nt else None)
    head0 = (b1h, b2h, hj1, hj2, hi1, hi2, hrhs, hcfm, hlo, hhi)
    n_head = _live_count(row_live(hj1, hj2, hrhs)) if live and nh else None
    lengths, orders = reorder_lib.table(iterations, min(reorder, nh))
    if orders is None:
        lengths = (iterations,)  # one order throughout: one loop
    else:
        # this step's shuffles (traced: the step picks a row of the static table)
        n_re = orders.shape[-1]
        orders = jnp.asarray(orders)[jnp.mod(step, orders.shape[0])]
        rest = jnp.arange(n_re, nh, dtype=jnp.int32)
        # a shuffle moves rows within the first n_re only: the live prefix
        # covers them all as soon as one row is live
        n_head_re = None if n_head is None else jnp.where(
            n_head > 0, jnp.maximum(n_head, n_re), 0).astype(n_head.dtype)

    def phase(carry, length, p):
        # p: this phase's index among the shuffled ones (None: the given order).
        # ODE sweeps lambda[order[i]]: lambda_head is carried in the phase's order.
        perm = inv = hp = None
        if p is not None:
            perm = jnp.concatenate([orders[p], rest])
            inv = jnp.zeros_like(perm).at[perm].set(jnp.arange(nh, dtype=perm.dtype))
            # the row data gathered once into the phase's order: its sweeps then
            # read rows in sequence (reading them in place through the order, at
            # random, cost 20 % of a 256-world chain step; the copies cost 5 %)
            hp = tuple(jnp.take(a, perm, axis=0) for a in head0)

        def sweep(carry, _):
            fc, lam_h, lam_t = carry
            if nh and perm is None:
                fc, lam_h = _scan_rows(
                    head_row, fc, (b1h, b2h, hj1, hj2, hi1, hi2, hrhs, hcfm, lam_h, hlo, hhi),
                    lam_h, unroll, n_head)
            elif nh:
                fc, lam_h = _scan_rows(head_row, fc, (*hp[:8], lam_h, *hp[8:]), lam_h, unroll,
                                       n_head_re)
            if nt:
                lam_hh = lam_h if perm is None else jnp.take(lam_h, inv, axis=0)
                lam_n = lam_hh[fidx] if nh else jnp.zeros((nt, w), dtype)
                xs = tuple(blocks(a) for a in (b1t, b2t, tj1, tj2, ti1, ti2, trhs, tcfm, lam_t,
                                               lam_n, tlo, thi, pyramid, conerow))
                fc, lam_t = _scan_rows(tail_contact, fc, xs, blocks(lam_t),
                                       max(1, unroll // block), n_tail)
                lam_t = lam_t.reshape((nt,) + lam_t.shape[2:])
            return (fc, lam_h, lam_t), None

        fc, lam_h, lam_t = carry
        if perm is not None:
            lam_h = jnp.take(lam_h, perm, axis=0)
        (fc, lam_h, lam_t), _ = jax.lax.scan(sweep, (fc, lam_h, lam_t), None, length=length)
        if perm is not None:
            lam_h = jnp.take(lam_h, inv, axis=0)
        return fc, lam_h, lam_t

    carry = (fc0, jnp.zeros((nh, w), dtype), jnp.zeros((nt, w), dtype))
    for k, length in enumerate(lengths):
        carry = phase(carry, length, None if (k == 0 or orders is None) else k - 1)
    fc, lam_h, lam_t = carry
    return lam_h[:nh0], lam_t[:nt0], fc


def _to_world_minor(x, batched: bool, w: int):
    if batched:
        return jnp.moveaxis(x, 0, -1)
    return jnp.broadcast_to(x[..., None], x.shape + (w,))


@functools.lru_cache(maxsize=None)
def _batched_sweeps(iterations: int, block: int = 2, cone: bool = False, reorder: int = 0):
    """``_sweeps`` for one world, with a vmap rule that runs a batch world-minor.

    Under ``jax.vmap`` the worlds become the trailing (contiguous) axis of
    every float array, so each row update is a handful of vector operations
    over all worlds. If the body indices differ between worlds (contact
    compaction), the rule falls back to plain vmap (gather/scatter).
    """
    nidx = 8

    def plain(*args, unroll=UNROLL):
        idx, rows = args[:nidx], args[nidx:]
        out = _sweeps(iterations, block, cone, *idx, *(r[..., None] for r in rows),
                      unroll=unroll, reorder=reorder)
        return tuple(o[..., 0] for o in out)

    run = custom_vmap(plain)

    @run.def_vmap
    def rule(axis_size, in_batched, *args):
        idx, rows = args[:nidx], args[nidx:]

        def shared(idx):
            wm = [_to_world_minor(r, b, axis_size) for r, b in zip(rows, in_batched[nidx:])]
            out = _sweeps(iterations, block, cone, *idx, *wm, live=True, reorder=reorder)
            return tuple(jnp.moveaxis(o, -1, 0) for o in out)

        if in_batched[nidx - 1]:
            # One shuffle sequence for the batch (world 0's step), as ODE's one
            # global generator serves every world: the row order stays shared.
            idx = idx[:-1] + (idx[-1][0],)
            in_batched = tuple(in_batched[:nidx - 1]) + (False,) + tuple(in_batched[nidx:])
            args = idx + tuple(rows)
        if not any(in_batched[:nidx]):
            return shared(idx), (True, True, True)
        # Per-world indices (contact compaction): if every world has the same
        # ones (batch_rules.compact shares them when it can), run the shared
        # path on world 0's; otherwise vmap the plain loop (gather/scatter).
        # (vmapping ``run`` here would re-enter this rule.)
        axes = [0 if b else None for b in in_batched]
        first = [i[0] if b else i for i, b in zip(idx, in_batched[:nidx])]
        same = jnp.all(jnp.stack([jnp.all(i == i[:1]) for i, b in zip(idx, in_batched[:nidx])
                                  if b]))
        # (the fallback is not unrolled: it is the rare path, and compile time counts)
        out = jax.lax.cond(same, lambda _: shared(first),
                           lambda _: jax.vmap(functools.partial(plain, unroll=1),
                                              in_axes=axes)(*args), None)
        return out, (True, True, True)

    # custom_vmap has no reverse mode; derivatives come from the plain loop
    # (same arithmetic, world-major under vmap), forward and reverse alike.
    @jax.custom_jvp
    def solve(*args):
        return run(*args)

    @solve.defjvp
    def solve_jvp(primals, tangents):
        return jax.jvp(plain, primals, tangents)

    return solve


def solve_pgs(head: Rows, tail: Rows, inv_mass: jax.Array, inv_inertia: jax.Array,
              rhs_body: jax.Array, h: jax.Array, sor: jax.Array, iterations: int,
              block: int = 2, cone: bool = False, cone_rows: jax.Array = None,
              reorder: int = 0, step=0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Run QuickStep's SOR-LCP for one world.

    head, tail: row tables (tail rows' ``findex`` index head rows, -1 = fixed
    bounds). inv_mass (B,), inv_inertia (B, 3, 3) world frame, rhs_body (B, 6)
    = -(v/h + M^-1 f_ext), with B = nbody + 1 (last = static world, zeros).
    The tail holds ``block`` rows per contact (static); ``cone`` (static)
    enables the joint projection of the first two rows of contacts whose
    ``cone_rows`` (per tail row, bool) is set. ``reorder`` (static): the
    number of leading head rows (the joint rows) that QuickStep shuffles before
    iterations 8, 16, ...; ``step`` (int scalar) picks the step's shuffles
    (:mod:`jaxode.reorder`).
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
    pyramid = tail.findex >= 0
    fidx = jnp.maximum(tail.findex, 0)
    if cone_rows is None:
        cone_rows = jnp.zeros((nt,), bool)
    if nt % block:
        raise ValueError(f"tail rows ({nt}) must be a multiple of block ({block})")
    run = _batched_sweeps(iterations, block, bool(cone), int(reorder))
    return run(ph.b1, ph.b2, pt.b1, pt.b2, fidx, pyramid, cone_rows, jnp.asarray(step, jnp.int32),
               ph.j1, ph.j2, ph.imj1, ph.imj2, ph.rhs, ph.cfm, ph.lo, ph.hi,
               pt.j1, pt.j2, pt.imj1, pt.imj2, pt.rhs, pt.cfm, pt.lo, pt.hi, fc0)
