"""The step's elementwise stand-ins for XLA library ops (jaxode.sim.math, session 29):
``top_k_small`` and ``lexsort_small`` give exactly ``jax.lax.top_k``'s and
``jnp.lexsort``'s orders (ties, signed zeros, infinities, NaNs of either sign),
and ``materialize`` is an exact copy that derivatives pass through."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxode.sim import math as jm


def _awkward(rng, shape, dtype):
    """Small integers (many ties) with some +-0, +-inf and NaNs of both signs."""
    x = rng.integers(-3, 4, size=shape).astype(dtype)
    for value, p in ((-0.0, 0.15), (np.inf, 0.1), (-np.inf, 0.1), (np.nan, 0.1)):
        x[rng.random(shape) < p] = value
    neg_nan = rng.random(shape) < 0.05
    x[neg_nan] = -np.abs(np.asarray(np.nan, dtype))
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_top_k_small_is_lax_top_k(dtype):
    rng = np.random.default_rng(0)
    for n in range(1, jm.SMALL_ORDER + 1):
        for k in sorted({1, (n + 1) // 2, n}):
            x = _awkward(rng, (6, n), np.float32) if dtype == np.float32 else \
                rng.integers(-2, 3, size=(6, n)).astype(dtype)
            want_v, want_i = jax.lax.top_k(jnp.asarray(x), k)
            got_v, got_i = jax.jit(jax.vmap(lambda r, k=k: jm.top_k_small(r, k)))(jnp.asarray(x))
            np.testing.assert_array_equal(np.asarray(got_i), np.asarray(want_i), err_msg=f"{x}")
            assert got_i.dtype == want_i.dtype
            # the same bits (signed zeros and NaN payloads included)
            assert np.asarray(got_v).tobytes() == np.asarray(want_v).tobytes()


def test_lexsort_small_is_jnp_lexsort():
    rng = np.random.default_rng(1)
    for n in range(1, jm.SMALL_ORDER + 1):
        x = _awkward(rng, (6, n), np.float32)
        g = rng.integers(0, 3, size=(6, n)).astype(np.int32)
        want = jax.vmap(lambda a, b: jnp.lexsort((a, b)))(jnp.asarray(x), jnp.asarray(g))
        got = jax.jit(jax.vmap(lambda a, b: jm.lexsort_small((a, b))))(jnp.asarray(x),
                                                                      jnp.asarray(g))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"{x}\n{g}")


def test_small_orders_fall_back_past_their_size():
    x = jnp.asarray(np.random.default_rng(2).normal(size=jm.SMALL_ORDER + 3), jnp.float32)
    np.testing.assert_array_equal(jm.top_k_small(x, 4)[1], jax.lax.top_k(x, 4)[1])
    np.testing.assert_array_equal(jm.lexsort_small((x,)), jnp.lexsort((x,)))


def test_materialize_is_an_exact_copy_with_plain_derivatives():
    rng = np.random.default_rng(3)
    tree = {"a": jnp.asarray(rng.normal(size=(4, 3)), jnp.float32),
            "b": (jnp.asarray([-0.0, np.inf, np.nan], jnp.float32), jnp.arange(5)),
            "c": jnp.asarray(rng.normal(size=(2, 2, 2)), jnp.float32)}
    out = jax.jit(jm.materialize)(tree)
    for got, want in zip(jax.tree.leaves(out), jax.tree.leaves(tree)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
    batched = jax.jit(jax.vmap(jm.materialize))(jax.tree.map(lambda x: jnp.stack([x, x]), tree))
    assert np.asarray(batched["a"][1]).tobytes() == np.asarray(tree["a"]).tobytes()

    def f(x):
        y = jm.materialize({"x": x * x})["x"]
        return jnp.sum(jnp.sin(y))

    x = jnp.asarray(rng.normal(size=7), jnp.float32)
    np.testing.assert_allclose(jax.grad(f)(x), jnp.cos(x * x) * 2 * x, rtol=1e-6)
