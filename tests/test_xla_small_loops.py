"""jaxode's XLA option for small while loops (jaxode/xla.py).

A while loop whose buffers total under ``xla_cpu_small_while_loop_byte_threshold``
bytes is compiled by XLA's CPU backend into one function (a ``call`` marked
``xla_cpu_small_call``) instead of a chain of runtime-dispatched kernels; jaxode
raises the threshold from XLA's 1,024 bytes to 1,000,000 so that one world's
solver loops qualify, and a 32-world tile's sweeps (bench/RESULTS.md, sessions
13 and 26). Truth: XLA's own marking
of the compiled program, and plain Python arithmetic for the loop's result.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode


def test_a_loop_over_xlas_default_threshold_is_compiled_as_one_call():
    st = jaxode.xla.status()
    if jaxode.xla.SMALL_LOOP_OPTION not in st["xla_flags"]:
        pytest.skip(f"jaxode's XLA flags not in effect here: {st['reason']}")
    if jax.default_backend() != "cpu":
        pytest.skip("the option is XLA CPU's")
    # 16 kB carried (4096 float32): over XLA's default 1,024 bytes, under jaxode's 1,000,000
    x = np.arange(4096, dtype=np.float32) / 4096

    def f(x):
        return jax.lax.fori_loop(0, 5, lambda i, v: v * 0.5 + jnp.float32(1.0), x)

    compiled = jax.jit(f).lower(x).compile()
    assert "xla_cpu_small_call" in compiled.as_text()
    want = x.copy()
    for _ in range(5):
        want = want * np.float32(0.5) + np.float32(1.0)
    np.testing.assert_array_equal(np.asarray(compiled(x)), want)
