"""The step's small products (``jaxode.sim.math.mm``, ``einsum``, ``sum_terms``).

Truths: numpy's matmul/einsum in float64 (the value, to float32 rounding) and a
left-to-right float32 fold of the terms in index order (the exact bits: the
order of adds is what keeps a world's rounding the same in any batch), and
the same result for a row computed alone and inside a vmapped batch.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.sim import math as jm

# The exact bits need XLA's FMA contraction off (jaxode/xla.py sets it when jaxode is
# imported before JAX starts); with FMA a product and the add after it round once.
EXACT = jaxode.xla.status()["fma_off"]


def _fold(terms):
    """float32 sum of the terms in index order (axis 0), one add at a time."""
    out = terms[0].astype(np.float32)
    for t in terms[1:]:
        out = (out + t.astype(np.float32)).astype(np.float32)
    return out


@pytest.mark.parametrize("shapes", [((3, 3), (3,)), ((3,), (3, 3)), ((4, 6), (6, 2)),
                                    ((5, 3, 3), (5, 3, 3)), ((3,), (3,))])
def test_mm_is_matmul_added_in_index_order(shapes):
    rng = np.random.default_rng(0)
    a = rng.normal(size=shapes[0]).astype(np.float32)
    b = rng.normal(size=shapes[1]).astype(np.float32)
    got = np.asarray(jax.jit(jm.mm)(a, b))
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)
    # the exact bits: products rounded to float32, then added k = 0, 1, ... in order
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    prods = a2[..., :, :, None] * b2[..., None, :, :]           # (..., i, k, j)
    want = _fold(np.moveaxis(prods, -2, 0))
    if b.ndim == 1:
        want = want[..., 0]
    if a.ndim == 1:
        want = want[..., 0] if b.ndim == 1 else want[..., 0, :]
    if EXACT:
        np.testing.assert_array_equal(got, want)


def test_einsum_matches_numpy_and_contracts_in_index_order():
    rng = np.random.default_rng(1)
    r = rng.normal(size=(7, 3, 3)).astype(np.float32)
    v = rng.normal(size=(7, 5, 3)).astype(np.float32)
    got = np.asarray(jax.jit(lambda r, v: jm.einsum("hij,hvj->hvi", r, v))(r, v))
    np.testing.assert_allclose(got, np.einsum("hij,hvj->hvi", r.astype(np.float64), v),
                               rtol=1e-5, atol=1e-5)
    want = _fold([r[:, None, :, k] * v[:, :, k, None] for k in range(3)])
    if EXACT:
        np.testing.assert_array_equal(got, want)
    # two contracted indices (3 x 2 = 6 terms, index order: the first letter slowest)
    x = rng.normal(size=(3, 2, 4)).astype(np.float32)
    y = rng.normal(size=(3, 2)).astype(np.float32)
    got2 = np.asarray(jax.jit(lambda x, y: jm.einsum("abn,ab->n", x, y))(x, y))
    want2 = _fold([x[i, j] * y[i, j] for i in range(3) for j in range(2)])
    np.testing.assert_allclose(got2, np.einsum("abn,ab->n", x.astype(np.float64), y),
                               rtol=1e-5, atol=1e-5)
    if EXACT:
        np.testing.assert_array_equal(got2, want2)


def test_sum_terms_long_axis_and_batch_independence():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(40, 5)).astype(np.float32)
    # more terms than UNROLL_TERMS: XLA's reduction, the value to rounding
    long = np.asarray(jax.jit(lambda x: jm.sum_terms(x, 0))(x))
    np.testing.assert_allclose(long, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    # a world's product alone and inside a batch of any size: the same bits
    m = rng.normal(size=(9, 3, 3)).astype(np.float32)
    w = rng.normal(size=(9, 3)).astype(np.float32)
    batched = np.asarray(jax.jit(jax.vmap(jm.mm))(m, w))
    for i in range(9):
        alone = np.asarray(jax.jit(jm.mm)(m[i], w[i]))
        np.testing.assert_array_equal(alone, batched[i])
    for n in (1, 2, 5):
        np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(jm.mm))(m[:n], w[:n])),
                                      batched[:n])
    assert jm.sum_terms(jnp.ones((0, 3)), 0).shape == (3,)
