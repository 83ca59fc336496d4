"""XLA options jaxode sets for its users, before JAX starts its CPU backend.

``import jaxode`` adds three flags to ``XLA_FLAGS`` when JAX's backends have not
started yet (nothing has created an array or asked for devices) and the flag
is not set already:

- ``--xla_force_host_platform_device_count=<cores>``: one XLA CPU device per
  core. One CPU device runs a batch's sequential solver loop on one core;
  :func:`jaxode.batch` places a batch whose size the device count divides
  sharded over the devices (:mod:`jaxode.sharding`), so ``jax.jit(jax.vmap(
  rollout))`` on it runs on every core with nothing else to set (about 2x on
  two cores for the bench's scenes).
- ``--xla_cpu_max_isa=AVX`` (x86-64 only): no fused multiply-add. XLA's CPU
  compiler contracts ``a * b + c`` into one FMA wherever both land in one
  fused kernel, and which ops share a kernel depends on the shapes, so a world
  would round differently alone and in a batch of 1024 (2.65 cm apart after
  100 steps of ``boxes`` in float32). Without FMA every operation rounds as
  IEEE says whatever the fusion, and a world's trajectory is bitwise the same
  alone and in any batch (tests/test_batch_invariance.py). AVX's 256-bit
  vectors stay; the measured cost is within this VM's run-to-run noise
  (bench/RESULTS.md).

- ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=100000``:
  XLA's CPU compiler compiles a while loop whose buffers total less than this
  many bytes (default 1024) into one function instead of running its body as
  a chain of kernels, each dispatched by the runtime (~0.1-0.2 us apiece). The
  solver's row loops of one world (or a few) are such loops: a row update is
  a handful of tiny kernels, so at batch 1 the dispatch was most of the step.
  With the threshold, ``boxes`` at batch 1 ran 5,600 world-steps/s instead of
  1,060 and ``chain`` 11,250 instead of 1,950 (bench/RESULTS.md, session 13);
  a batch's loops (bytes grow with the batch) stay as they were. Same
  arithmetic (bitwise the same trajectories). Not set when ``XLA_FLAGS``
  already has ``--xla_backend_extra_options`` (give it the key yourself).
Not set: ``--xla_cpu_use_fusion_emitters=false`` (jaxlib below 0.11) compiles
a step in about 60 % of the time but runs ``chain`` at 1024 worlds 42 % slower
(33,500 against 58,000 world-steps/s, measured 2026-11-24); the test suite
uses it (tests/fast_compile.py), where compile time is what counts.

Set ``JAXODE_XLA_DEFAULTS=0`` to leave ``XLA_FLAGS`` alone. If JAX started
before jaxode was imported, nothing is changed: :func:`status` says what is in
effect (one CPU device: a batch runs on one core; FMA on: a world alone may
differ from the same world in a batch in the last bits, which float32 chaos
grows). Import jaxode first, or set the flags yourself.
"""
from __future__ import annotations

import os
import platform

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
MAX_ISA_FLAG = "--xla_cpu_max_isa"
NO_FMA_ISA = "AVX"
EXTRA_OPTIONS_FLAG = "--xla_backend_extra_options"
SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 100_000

# What configure() did: flags added, or why none were.
_applied: dict = {"flags": [], "reason": "not run"}


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # noqa: BLE001 - private API moved: assume not started
        return False


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def configure() -> list[str]:
    """Add jaxode's XLA flags (module docstring) if JAX's backends have not started.
    Returns the flags added (none when disabled, already set or too late)."""
    if os.environ.get("JAXODE_XLA_DEFAULTS", "1").strip().lower() in ("0", "false", "no", "off"):
        _applied.update(flags=[], reason="JAXODE_XLA_DEFAULTS=0")
        return []
    if _backends_started():
        _applied.update(flags=[], reason="JAX's backends started before jaxode was imported")
        return []
    current = os.environ.get("XLA_FLAGS", "")
    added = []
    if DEVICE_COUNT_FLAG not in current:
        added.append(f"{DEVICE_COUNT_FLAG}={os.cpu_count() or 1}")
    if _x86() and MAX_ISA_FLAG not in current:
        added.append(f"{MAX_ISA_FLAG}={NO_FMA_ISA}")
    if EXTRA_OPTIONS_FLAG not in current:
        added.append(f"{EXTRA_OPTIONS_FLAG}={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}")
    if added:
        os.environ["XLA_FLAGS"] = " ".join([current] + added).strip()
    _applied.update(flags=added, reason="set at import" if added else "already in XLA_FLAGS")
    return added


def status() -> dict:
    """What is in effect: CPU devices, whether FMA contraction is off, and what
    :func:`configure` did (``flags`` added and ``reason``)."""
    import jax

    flags = os.environ.get("XLA_FLAGS", "")
    try:
        ncpu = len(jax.devices("cpu"))
    except RuntimeError:
        ncpu = 0
    no_fma = _x86() and f"{MAX_ISA_FLAG}={NO_FMA_ISA}" in flags
    return {"cpu_devices": ncpu, "fma_off": no_fma, "xla_flags": flags, **_applied}
