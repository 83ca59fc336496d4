"""The one-line "jaxode: compiling ..." notice (jaxode/compile_notice.py).

Truth: JAX compiles a jitted function on its first call for new shapes and
reuses the executable afterwards (the jit cache), so a context around a first
call that compiles for longer than the threshold prints exactly one line, the
same call again prints nothing, and an uncompiled slow call prints nothing.
A small jitted function of a few hundred operations (well under a second to
compile) with the threshold at 0 s stands in for a slow compile. The sweep's
notice is checked in tests/test_sweep.py on its one compile.
"""
from __future__ import annotations

import io
import time

import jax
import jax.numpy as jnp
import pytest

from jaxode import compile_notice


@pytest.fixture
def capture():
    buf = io.StringIO()
    compile_notice.configure(enabled=True, threshold_s=0.0, stream=buf)
    yield buf
    compile_notice.configure()


def _many_ops(n):
    def f(x):
        for i in range(n):
            x = jnp.sin(x) * x + i
        return x
    return jax.jit(f)


def test_first_call_prints_once_then_cached_call_silent(capture):
    f = _many_ops(60)
    with compile_notice.notice("f (60 ops)") as n1:
        f(jnp.ones(3)).block_until_ready()
    assert n1.compile_s > 0 and n1.printed
    first = capture.getvalue()
    assert first.count("\n") == 1 and first.startswith("jaxode: compiling f (60 ops)")
    with compile_notice.notice("f again") as n2:
        f(jnp.ones(3)).block_until_ready()     # cached: no compile
        time.sleep(0.05)                      # a slow call that compiles nothing
    assert n2.compile_s == 0 and not n2.printed
    assert capture.getvalue() == first
    with compile_notice.notice("f, new shape") as n3:
        f(jnp.ones(4)).block_until_ready()     # new shape: compiles again
    assert n3.printed and capture.getvalue().count("\n") == 2


def test_threshold_and_switches(capture, monkeypatch):
    f = _many_ops(30)
    compile_notice.configure(enabled=True, threshold_s=60.0, stream=capture)
    with compile_notice.notice("f") as n:
        f(jnp.ones(2)).block_until_ready()
    assert 0 < n.compile_s < 60 and not n.printed  # compiled, but faster than the threshold
    compile_notice.configure(stream=capture)       # back to the environment
    monkeypatch.setenv("JAXODE_COMPILE_NOTICE", "0")
    with compile_notice.notice("f") as n:
        f(jnp.ones(5)).block_until_ready()
    assert n.compile_s == 0 and not n.printed
    monkeypatch.setenv("JAXODE_COMPILE_NOTICE", "0.0")  # a threshold of 0 s
    with compile_notice.notice("f") as n:
        f(jnp.ones(6)).block_until_ready()
    assert n.printed
    with compile_notice.notice("f", enabled=False) as n:  # switched off for one call
        f(jnp.ones(7)).block_until_ready()
    assert not n.printed
    assert capture.getvalue().count("jaxode: compiling") == 1
    monkeypatch.setenv("JAXODE_COMPILE_NOTICE", "soon")
    with pytest.raises(ValueError, match="JAXODE_COMPILE_NOTICE .*got 'soon'"):
        with compile_notice.notice("f"):
            pass
    with pytest.raises(ValueError, match="threshold_s must be a finite number.*-1"):
        compile_notice.configure(threshold_s=-1)
