"""QuickStep's reordering of the constraint rows during the SOR sweeps (ODE 0.16).

ODE 0.16's quickstep.cpp is built with ``CONSTRAINTS_REORDERING_METHOD ==
REORDERING_METHOD__RANDOMLY`` and ``RANDOM_CONSTRAINTS_REORDERING_FREQUENCY
8``: before iterations 8, 16, 24, ... of the SOR-LCP
(``IsSORConstraintsReorderRequiredForIteration``) the row order is shuffled by
``dxQuickStepIsland_Stage4LCP_ConstraintsShuffling``, a Fisher-Yates pass
``for i in 1..m-1: swap(order[i], order[dRandInt(i + 1)])`` over the current
order (so the shuffles compound), drawing from ODE's global generator
(misc.cpp: ``seed = 1664525 seed + 1013904223 mod 2^32`` and ``dRandInt``).

The reordering is not cosmetic: sweeping 20 iterations in one fixed order
leaves ill-conditioned problems (light or small bodies far from their
anchors, chains of them) with a residual that repeats from step to step in the
same direction, and the ERP correction of the drift it leaves feeds energy in;
ODE's shuffles break that pattern (see tests/test_energy_chains.py).

:func:`permutations` gives the shuffles as static index arrays, drawn with
ODE's generator and dRandInt from ODE's default seed 0 at the start of every
step: every step sees the same shuffles (ODE's continue the global sequence,
so its exact orders depend on everything stepped before; its results over
seeds are a spread, see ``conformance.harness.ode_spread``). Static orders
keep the row data of a batch of worlds aligned (one order for all worlds).

``reorder="ode"`` (the functions at the end: :func:`ode_orders`) draws instead,
in the traced step and per world, ODE's very shuffles of all the world's
existing rows from the generator state carried in ``State.rng``: exact for a
world that is one ODE island (ODE shuffles each island's rows separately, one
island after the other).
"""
from __future__ import annotations

import functools

import numpy as np

#: ODE 0.16 quickstep.cpp: RANDOM_CONSTRAINTS_REORDERING_FREQUENCY
FREQUENCY = 8
#: dRandSetSeed's value at library start (misc.cpp: ``static duint32 seed = 0``)
ODE_SEED = 0


class OdeRandom:
    """ODE's global generator (misc.cpp dRand, dRandInt), in Python integers."""

    def __init__(self, seed: int = ODE_SEED):
        self.seed = int(seed) & 0xFFFFFFFF

    def rand(self) -> int:
        self.seed = (1664525 * self.seed + 1013904223) & 0xFFFFFFFF
        return self.seed

    def randint(self, n: int) -> int:
        """dRandInt(n): an integer in [0, n)."""
        r, un = self.rand(), n
        if un <= 0x10:
            r ^= r >> 16
            r ^= r >> 8
            r ^= r >> 4
            if un <= 2:
                r ^= r >> 2
                r ^= r >> 1
                return r & (un >> 1)
            if un <= 4:
                r ^= r >> 2
                return ((r & 0x03) * un) >> 2
            return ((r & 0x0F) * un) >> 4
        if un <= 0x100:
            r ^= r >> 16
            r ^= r >> 8
            return ((r & 0xFF) * un) >> 8
        if un <= 0x10000:
            r ^= r >> 16
            return ((r & 0xFFFF) * un) >> 16
        return (r * un) >> 32


def shuffle(order: list, rng: OdeRandom) -> list:
    """ConstraintsShuffling's Fisher-Yates pass over ``order`` (a new list)."""
    order = list(order)
    for i in range(1, len(order)):
        j = rng.randint(i + 1)
        order[i], order[j] = order[j], order[i]
    return order


@functools.lru_cache(maxsize=None)
def permutations(iterations: int, n: int, seed: int = ODE_SEED) -> tuple:
    """The sweep phases of one step: a tuple of (iterations in the phase, order)
    where order is None (the initial order) or an int32 array of the ``n`` row
    positions in the order the phase sweeps them."""
    phases, order, rng = [], list(range(n)), OdeRandom(seed)
    start = 0
    while start < iterations:
        length = min(FREQUENCY, iterations - start)
        if start > 0 and n > 1:
            order = shuffle(order, rng)
        perm = None if order == list(range(n)) else np.asarray(order, np.int32)
        phases.append((length, perm))
        start += length
    return tuple(phases)


#: the table of :func:`table` covers between MIN_STEPS and MAX_STEPS steps, as
#: many as fit in TABLE_ENTRIES row indices; the sequence then repeats
MIN_STEPS, MAX_STEPS, TABLE_ENTRIES = 64, 4096, 1 << 18


@functools.lru_cache(maxsize=None)
def table(iterations: int, n: int, steps: int = None, seed: int = ODE_SEED):
    """The shuffles of ``steps`` consecutive steps: (phase lengths, orders) with
    orders an int32 array (steps, phases - 1, n): the order of the ``n`` rows in
    each phase after the first (the first sweeps them as given), drawn as ODE
    0.16 draws them for a world of ``n`` rows: one generator from ``seed``
    continued from step to step, each step starting from the initial order. So a
    world whose ``n`` rows are all active (ODE's m = n), stepped from the seed,
    gets ODE's very orders for the first ``steps`` steps. ``steps`` None: as
    many as fit in TABLE_ENTRIES (MIN_STEPS to MAX_STEPS). orders is None when
    nothing is reordered (n < 2 or at most FREQUENCY iterations)."""
    lengths = []
    start = 0
    while start < iterations:
        lengths.append(min(FREQUENCY, iterations - start))
        start += lengths[-1]
    if n < 2 or len(lengths) < 2:
        return tuple(lengths), None
    if steps is None:
        steps = int(np.clip(TABLE_ENTRIES // ((len(lengths) - 1) * n), MIN_STEPS, MAX_STEPS))
    rng = OdeRandom(seed)
    out = np.zeros((steps, len(lengths) - 1, n), np.int32)
    for k in range(steps):
        order = list(range(n))
        for p in range(len(lengths) - 1):
            order = shuffle(order, rng)
            out[k, p] = order
    return tuple(lengths), out


# --------------------------------------------------------------- reorder="ode"
# ODE 0.16 shuffles all m rows of an island (ConstraintsReorderingHelper over
# m_m): joint rows, contact normals and friction rows together. m counts only
# the rows that exist this step, so the draws a step takes from the generator
# (m - 1 per shuffle) depend on the step's contacts: the generator's state is
# carried from step to step (``State.rng``) and the shuffles are drawn in the
# traced step, per world, with the functions below (uint32 arithmetic wraps
# mod 2**32 as ODE's duint32 does).

#: the traced ``dRandInt`` covers n up to this (2**32 - 1 rows would need more)
RANDINT_MAX = 0xFFFFFFFF


def jnp_rand(seed):
    """dRand: the generator's next state (uint32 array, elementwise)."""
    import jax.numpy as jnp
    seed = jnp.asarray(seed, jnp.uint32)
    return seed * jnp.uint32(1664525) + jnp.uint32(1013904223)


def jnp_randint_from(r, n):
    """dRandInt(n) given the generator's new state ``r`` (uint32) and ``n``
    (uint32, 1 <= n): the branches of misc.cpp's dRandInt, elementwise."""
    import jax.numpy as jnp
    u = jnp.uint32
    r = jnp.asarray(r, u)
    n = jnp.asarray(n, u)
    a = r ^ (r >> u(16))
    b = a ^ (a >> u(8))
    c = b ^ (b >> u(4))
    d = c ^ (c >> u(2))
    e = d ^ (d >> u(1))
    le2 = e & (n >> u(1))
    le4 = ((d & u(0x03)) * n) >> u(2)
    le16 = ((c & u(0x0F)) * n) >> u(4)
    le256 = ((b & u(0xFF)) * n) >> u(8)
    le64k = ((a & u(0xFFFF)) * n) >> u(16)
    # (r * n) >> 32 in 16-bit halves
    rh, rl, nh, nl = r >> u(16), r & u(0xFFFF), n >> u(16), n & u(0xFFFF)
    mid1, mid2, low = rh * nl, rl * nh, rl * nl
    carry = ((mid1 & u(0xFFFF)) + (mid2 & u(0xFFFF)) + (low >> u(16))) >> u(16)
    big = rh * nh + (mid1 >> u(16)) + (mid2 >> u(16)) + carry
    return jnp.where(n <= 2, le2, jnp.where(n <= 4, le4, jnp.where(
        n <= 0x10, le16, jnp.where(n <= 0x100, le256, jnp.where(n <= 0x10000, le64k, big)))))


def jnp_shuffle(order, m, rng):
    """ConstraintsShuffling on the first ``m`` entries of ``order`` (int32 (M,),
    one world, traced m): ``for i in 1..m-1: swap(order[i], order[dRandInt(i + 1)])``.
    Returns (order, rng) with the generator advanced m - 1 times (none if m < 2)."""
    import jax
    import jax.numpy as jnp

    def body(i, carry):
        o, r = carry
        r = jnp_rand(r)
        j = jnp_randint_from(r, (i + 1).astype(jnp.uint32)).astype(o.dtype)
        oi, oj = o[i], o[j]
        return o.at[i].set(oj).at[j].set(oi), r

    return jax.lax.fori_loop(1, jnp.maximum(m, 1).astype(jnp.int32), body,
                             (order, jnp.asarray(rng, jnp.uint32)))


def ode_initial_order(exists, has_findex, ode_index):
    """ODE's initial order (``Stage4LCP_ReorderPrep``) of one world's rows:
    the existing rows without a friction index in ODE's row numbering
    (``ode_index``, static (M,)), then the existing rows with one, then the rows
    that do not exist this step (never swept as ODE rows: no-ops). Returns
    (order int32 (M,), m int32 = the number of existing rows)."""
    import jax.numpy as jnp
    n = ode_index.shape[0]
    idx = jnp.asarray(ode_index, jnp.int32)
    key = jnp.where(exists, jnp.where(has_findex, n, 0) + idx, 2 * n + idx)
    order = jnp.argsort(key, stable=True).astype(jnp.int32)
    return order, jnp.sum(exists, dtype=jnp.int32)


def ode_orders(exists, has_findex, ode_index, rng, iterations: int):
    """The order of every sweep phase of one step of one world, as ODE 0.16
    orders its island's rows: phase 0 the initial order
    (:func:`ode_initial_order`), each later phase (before iterations 8, 16, ...)
    the previous order shuffled over the ``m`` existing rows with ODE's
    generator from state ``rng`` (uint32). Returns (orders int32 (phases, M),
    the generator's state after the step)."""
    import jax
    import jax.numpy as jnp
    lengths, _ = table(iterations, 0)
    order, m = ode_initial_order(exists, has_findex, ode_index)
    rng = jnp.asarray(rng, jnp.uint32)
    if len(lengths) < 2:
        return order[None], rng

    def shuffle(carry, _):
        o, r = jnp_shuffle(carry[0], m, carry[1])
        return (o, r), o

    # one loop over the phases (each shuffles the previous order), not one copy each
    (_, rng), later = jax.lax.scan(shuffle, (order, rng), None, length=len(lengths) - 1)
    return jnp.concatenate([order[None], later], axis=0), rng
