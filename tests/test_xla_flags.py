"""The XLA flags ``import jaxode`` adds (jaxode/xla.py), checked in fresh processes.

XLA reads ``XLA_FLAGS`` once, when JAX starts its backend, and an unknown flag
is fatal there; so each case runs in a new interpreter whose ``XLA_FLAGS`` is
what the case says. Truth: XLA itself (the process compiles and runs a program,
which it would not with a flag it does not know), jaxlib's installed version
(its metadata) and the machine's core count.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

from jaxode import xla

PROBE = textwrap.dedent("""
    import json
    import jaxode
    import jax, jax.numpy as jnp
    y = jax.jit(lambda x: x * 2 + 1)(jnp.float32(3))
    print(json.dumps({"y": float(y), "flags": jaxode.xla.status()["xla_flags"],
                      "cpu_devices": len(jax.devices("cpu"))}))
""")


def _probe(xla_flags: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAXODE_XLA_DEFAULTS")}
    env.update(JAX_PLATFORMS="cpu", JAXODE_XLA_CACHE="0")
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_adds_flags_that_this_xla_accepts():
    r = _probe(None)
    assert r["y"] == 7.0
    flags = r["flags"].split()
    assert f"{xla.DEVICE_COUNT_FLAG}={os.cpu_count()}" in flags
    assert r["cpu_devices"] == os.cpu_count()
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert f"{xla.MAX_ISA_FLAG}=AVX" in flags
    # the older CPU code generator only where jaxlib still has it (below 0.11)
    legacy = f"{xla.LEGACY_EMITTER_FLAG}=false"
    assert (legacy in flags) == (xla.jaxlib_version() < (0, 11)), (xla.jaxlib_version(), flags)


def test_a_users_own_setting_of_a_flag_is_kept():
    if not xla.has_legacy_emitter():
        pytest.skip("this jaxlib has no older CPU code generator to choose")
    r = _probe(f"{xla.LEGACY_EMITTER_FLAG}=true")
    flags = r["flags"].split()
    assert f"{xla.LEGACY_EMITTER_FLAG}=true" in flags
    assert f"{xla.LEGACY_EMITTER_FLAG}=false" not in flags
    assert r["y"] == 7.0
