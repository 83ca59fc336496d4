"""The solver core: QuickStep's row preparation, row update and friction block, written once.

Every solver (:mod:`jaxode.sim.solver.pgs`, :mod:`jaxode.sim.solver.colored`) is an
order or partition of the rows fed to the two update functions here; nothing
else in the package computes a row update.

Preparation (ODE 0.16 ``quickstep.cpp``), with h the step, done world-minor
after the raw rows are laid out so (transposing the prepared rows instead cost
8x more at 512 worlds: XLA recomputed the gathers in transpose order):

- ``rhs = c/h - J (v/h + M^-1 f_ext)``, ``cfm' = cfm/h`` (f_ext: accumulated
  forces, gravity and the gyroscopic torque);
- ``iMJ = M^-1 J^T`` per row and ``Ad = w / (J iMJ + cfm')`` (w = sor);
- J, rhs and cfm' pre-multiplied by Ad.

Row update (one Gauss-Seidel step of the projected SOR-LCP):
``delta = rhs - lambda cfm'Ad - J1 . fc[b1] - J2 . fc[b2]``,
``lambda <- clamp(lambda + delta, lo, hi)``, ``fc[b] += (lambda_new - lambda_old) iMJ``.
lambda starts at zero (ODE's default, no warm starting) and is a force [N];
``fc = M^-1 J^T lambda`` [m/s^2, rad/s^2] per body.

Layout: every float array carries a trailing world axis ``W`` (world-minor;
``W = 1`` for one world), so a batch of worlds that shares the row structure
runs each update as a few vector operations over all worlds. The body axis of
``fc`` is leading: ``fc (B, 6, W)`` with ``B = nbody + 1`` (the last is the
static world: zero inverse mass, never moves). A *unit* is what one update
touches: a row (head: joint rows and contact normals) or a contact's friction
block (tail: ``K`` rows, 2 or 5 with rolling/spinning). Units are updated one
at a time (``index`` a scalar, PGS), several at once (``index`` a vector of
units that share no moving body, a colour phase), and its body indices are
shared by the worlds or each world's own (``per_world``: ``index`` (W,) or
(U, W): ``reorder="ode"``, where each world sweeps its own row order, and a batch
whose worlds' contacts lie in different slots); the arithmetic is the same.

Sums over the 6 Jacobian entries run in one order for every world whatever the
batch, so a world's rounding does not depend on the batch it is in: in the
sweeps (:func:`dot6`) as a column reduction over a non-minor axis (the world
axis, at least 2 wide, is minor), in the preparation (:func:`_dot6_adds`) as
explicit adds in index order, which XLA CPU runs faster outside the sweeps'
hoisted loops and which are elementwise in any layout.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode.sim.math import sum_terms


class Prepared(NamedTuple):
    """Rows ready for the sweeps (R rows; trailing world axis W on float arrays).

    b1, b2 (R,) body indices; j1, j2 (R, 6, W) Jacobian blocks scaled by Ad;
    imj1, imj2 (R, 6, W) ``M^-1 J^T`` per body; rhs, cfm (R, W) scaled by Ad;
    lo, hi (R, W) bounds [N] (a friction row's ``hi`` is its mu).
    """

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


def dot6(a: jax.Array, b: jax.Array, axis: int = -2) -> jax.Array:
    """``sum(a * b, axis)`` over the 6 Jacobian entries.

    In the sweeps the summed axis is never the minor one (the world axis is,
    and :mod:`jaxode.sim.solver.batching` keeps it at least 2 wide), so XLA emits a
    column reduction: the same order of adds for every world, whatever the
    batch size. (A chain of six explicit adds gives that too, but XLA's CPU
    fusion made it 10-30x slower per row.)
    """
    return jnp.sum(a * b, axis=axis)


def _dot6_adds(a: jax.Array, b: jax.Array) -> jax.Array:
    """``sum(a * b, -2)`` over the 6 Jacobian entries as a chain of adds in index
    order (:func:`jaxode.sim.math.sum_terms`), for the preparation: elementwise,
    so the same bits in any layout (a tile, a vmap of tiles, one world), and
    outside the sweeps' hoisted loops XLA CPU's column reduction cost 3x it
    (boxes' preparation of 1024 worlds in tiles, one device: 11.8 -> 3.8 ms)."""
    return sum_terms(a * b, -2)


def take_bodies(table: jax.Array, b: jax.Array) -> jax.Array:
    """Rows of a world-minor body table ``table`` (B, ..., W) at body indices ``b``:
    (R,) shared by the worlds (a gather of whole rows), or (R, W) each world's
    own (``table[b[r, w], ..., w]``, a gather over (body, world) pairs). (R, ..., W)."""
    if b.ndim == 1:
        return jnp.take(table, b, axis=0)
    return _take_per_world(table, b)


def _take_per_world(table: jax.Array, b: jax.Array) -> jax.Array:
    """``table[b[..., w], ..., w]`` for ``table`` (B, *mid, W) and ``b`` (*lead, W):
    (*lead, *mid, W). (Measured slower in boxes' sweeps, bench/RESULTS.md session
    20: a one-dimensional gather at linear indices, ~3.8x; a gather batched over
    the world axis, ~2.9x; and for :func:`write`, a select over every body
    instead of the scatter-add, ~3x, though XLA CPU can then compile the row
    loop as one function.)"""
    if table.ndim == 3:    # (B, 6, W) (fc, rhs_body): advanced indexing
        return jnp.swapaxes(table[b, :, jnp.arange(table.shape[-1])], -1, -2)
    idx = b.reshape(b.shape[:1] + (1,) * (table.ndim - 2) + b.shape[1:])
    return jnp.take_along_axis(table, jnp.broadcast_to(idx, b.shape[:1] + table.shape[1:]),
                               axis=0)


def prepare(rows, inv_mass, inv_inertia, rhs_body, h, sor) -> Prepared:
    """QuickStep's per-step row data, world-minor (module docstring).

    rows: a :class:`jaxode.sim.constraint.Rows` table whose float fields carry the
    trailing world axis W (j1, j2 (R, 6, W); c, cfm, lo, hi, active (R, W)) and
    whose body indices are (R,), shared by the worlds, or (R, W), each world's
    own (:func:`take_bodies`); inv_mass (B, W), inv_inertia (B, 3, 3, W) world
    frame, rhs_body (B, 6, W) = -(v/h + M^-1 f_ext); h [s] and sor (W,).
    """
    b1, b2 = rows.body1, rows.body2

    def imj(j, b):
        lin = take_bodies(inv_mass, b)[:, None, :] * j[:, :3]
        inv = take_bodies(inv_inertia, b)                      # (R, 3, 3, W)
        ja = j[:, 3:]
        ang = inv[:, :, 0] * ja[:, None, 0] + inv[:, :, 1] * ja[:, None, 1] \
            + inv[:, :, 2] * ja[:, None, 2]
        return jnp.concatenate([lin, ang], axis=1)

    imj1, imj2 = imj(rows.j1, b1), imj(rows.j2, b2)
    # c and cfm times 1/h, as ODE (``*= stepsizeRecip``), not divided by h: XLA
    # turns a division by a broadcast into a product with its reciprocal in some
    # programs and not others (a batch split over devices rounded the rows' rhs
    # 1 ulp off the world alone); the explicit product is what both give.
    fps = 1.0 / h
    rhs = (rows.c * fps + _dot6_adds(rows.j1, take_bodies(rhs_body, b1))
           + _dot6_adds(rows.j2, take_bodies(rhs_body, b2)))
    cfm = rows.cfm * fps
    denom = _dot6_adds(rows.j1, imj1) + _dot6_adds(rows.j2, imj2) + cfm
    ad = jnp.where(rows.active, sor / jnp.where(rows.active, denom, 1.0), 0.0)
    return Prepared(b1, b2, rows.j1 * ad[:, None], rows.j2 * ad[:, None], imj1, imj2,
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


# ------------------------------------------------------------- reading fc
# A unit's index is a scalar (one unit: dynamic slicing), a vector (several
# units that share no moving body: gather / scatter-add) or, with ``per_world``,
# one index per world (each world at its own row: gather / scatter-add over
# (body, world) pairs).

def read(fc: jax.Array, b: jax.Array, per_world: bool = False) -> jax.Array:
    """fc rows of bodies ``b``: (6, W) for a scalar index, (U, 6, W) for a vector;
    with ``per_world`` (static) ``b`` (W,) or (U, W) gives each world its own body
    (``reorder="ode"``: each world sweeps its own row order; worlds of a batch
    whose contacts differ): ``fc[b[..., w], :, w]``, (6, W) or (U, 6, W)."""
    if per_world:
        return _take_per_world(fc, b)
    if b.ndim == 0:
        return jax.lax.dynamic_index_in_dim(fc, b, 0, keepdims=False)
    return jnp.take(fc, b, axis=0)


def write(fc: jax.Array, b1, b2, v1, c1, c2, per_world: bool = False) -> jax.Array:
    """fc with ``c1`` added to body ``b1`` (whose current value ``v1`` was read)
    and ``c2`` to body ``b2``.

    One unit: body 1 by a dynamic-update-slice of ``v1 + c1``, body 2 by a
    one-row scatter-add. (Two dynamic-update-slices of values read before the
    first write keep the pre-write fc alive past the first in-place write, so
    XLA copied all of fc per row; the scatter-add's operands do not read fc and
    it is lowered in place.) Same values either way: a row's two bodies differ,
    or are both the static world, whose ``c`` is zero. Several units: two
    scatter-adds (their moving bodies are distinct; the static world only ever
    receives zeros). ``per_world`` (static): ``b1``, ``b2`` (W,) or (U, W), each
    world's own bodies, and ``c1``, ``c2`` (6, W) or (U, 6, W): two scatter-adds
    over (body, world) pairs.
    """
    if per_world:
        aw = jnp.arange(fc.shape[-1])
        return (fc.at[b1, :, aw].add(jnp.swapaxes(c1, -1, -2))
                .at[b2, :, aw].add(jnp.swapaxes(c2, -1, -2)))
    if b1.ndim == 0:
        fc = jax.lax.dynamic_update_index_in_dim(fc, v1 + c1, b1, 0)
        return fc.at[b2].add(c2)
    return fc.at[b1].add(c1).at[b2].add(c2)


def row_update(fc, b1, b2, j1, j2, i1, i2, rhs, cfm, lam, lo, hi, live=None,
               per_world: bool = False):
    """One QuickStep row update of a unit of rows (module docstring).

    Returns (fc, lambda_new). ``live`` (optional, bool like ``lam``): rows where it
    is False keep their lambda and change nothing. ``per_world`` (static): one row
    per world, each world's own (``b1``, ``b2`` (W,); :func:`read`, :func:`write`).
    """
    v1, v2 = read(fc, b1, per_world), read(fc, b2, per_world)
    delta = rhs - lam * cfm - dot6(j1, v1) - dot6(j2, v2)
    new = jnp.clip(lam + delta, lo, hi)
    if live is not None:
        new = jnp.where(live, new, lam)
    d = (new - lam)[..., None, :]
    return write(fc, b1, b2, v1, d * i1, d * i2, per_world), new


def _apply(fc, b1, b2, i1, i2, d, per_world: bool = False):
    d = d[..., None, :]
    v1 = None if per_world else read(fc, b1)
    return write(fc, b1, b2, v1, d * i1, d * i2, per_world)


def row_flags(f: jax.Array) -> jax.Array:
    """Per-row flags (pyramid, cone rows) with a world axis, as :class:`Block` holds
    them: (R, W) where each world has its own, else (R, 1)."""
    return f if f.ndim == 2 else f[:, None]


class Block(NamedTuple):
    """A unit of the tail: one contact's friction block (or a phase of them).

    Every field has the block's ``K`` rows as its leading axis; then, for
    several units at once, the unit axis U; then the row's own axes and the
    world axis: b1, b2 (K[, U][, W]) ints (W: each world's own bodies); j1, j2, imj1, imj2 (K[, U], 6, W);
    rhs, cfm, lo, hi (K[, U], W); pyramid, cone_row (K[, U], W or 1) bools.
    """

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
    pyramid: jax.Array
    cone_row: jax.Array


def block_update(fc, u: Block, lam, lam_n, cone: bool, live=None, per_world: bool = False):
    """Update a contact's friction block row by row (QuickStep's order within it).

    lam (K[, U], W) the block's lambdas; lam_n (K[, U], W) the lambda of each
    row's friction index (its contact's normal row). With ``cone`` (static) a contact whose
    ``cone_row`` is set solves its two friction rows as a block (row t2 sees
    the velocities before row t1's update) and projects the pair onto the
    ellipse ``(l1/mu)^2 + (l2/mu2)^2 <= lambda_n^2`` (mu, mu2 = the rows'
    ``hi``): Gazebo's cone friction model. ``per_world`` (static): the body
    indices carry the world axis (:func:`read`). Returns (fc, new lambdas).
    """
    new = []
    for k in range(lam.shape[0]):
        lo_k, hi_k = friction_bounds(k, u.lo[k], u.hi[k], lam_n[k], u.pyramid[k], u.cone_row[k],
                                     cone)
        rhs_k = u.rhs[k]
        if cone and k == 1:
            d0 = new[0] - lam[0]
            back = dot6(u.j1[1], u.imj1[0]) + dot6(u.j2[1], u.imj2[0])
            rhs_k = jnp.where(u.cone_row[1], rhs_k + d0 * back, rhs_k)
        fc, lk = row_update(fc, u.b1[k], u.b2[k], u.j1[k], u.j2[k], u.imj1[k], u.imj2[k],
                            rhs_k, u.cfm[k], lam[k], lo_k, hi_k, live, per_world)
        new.append(lk)
    if cone:
        l0, l1 = new[0], new[1]
        n0, n1 = cone_project(l0, l1, u.hi[0], u.hi[1], lam_n[0], u.cone_row[0])
        if live is not None:
            n0, n1 = jnp.where(live, n0, l0), jnp.where(live, n1, l1)
        fc = _apply(fc, u.b1[0], u.b2[0], u.imj1[0], u.imj2[0], n0 - l0, per_world)
        fc = _apply(fc, u.b1[1], u.b2[1], u.imj1[1], u.imj2[1], n1 - l1, per_world)
        new[0], new[1] = n0, n1
    return fc, jnp.stack(new)
