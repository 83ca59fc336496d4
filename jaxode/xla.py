"""XLA options jaxode sets for its users, before JAX starts its CPU backend.

``import jaxode`` adds these flags to ``XLA_FLAGS`` when JAX's backends have not
started yet (nothing has created an array or asked for devices) and the flag
is not set already (four for the CPU, two for the GPU; XLA reads every flag
whatever the backend, and a CPU-only jaxlib accepts the GPU ones):

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
  (bench/RESULTS.md; session 28: chain at 1,024 worlds, medians of three
  alternating rounds 92.8k world-steps/s against 100.1k under ``AVX2``). The
  cap has no AVX2-without-FMA setting: XLA's AVX tier is the one that drops
  both (``xla/backends/cpu/codegen/cpu_features.cc``).

- ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000``:
  XLA's CPU compiler compiles a while loop one trip of which accesses fewer
  than this many bytes (XLA's cost analysis of the body; default 1024) into
  one function instead of running its body as a chain of kernels, each
  dispatched by the runtime (~0.1-0.2 us apiece). The solver's row loops of
  one world (or a few) are such loops: a row update is a handful of tiny
  kernels, so at batch 1 the dispatch was most of the step. With a threshold
  of 100,000, ``boxes`` at batch 1 ran 5,600 world-steps/s instead of 1,060
  and ``chain`` 11,250 instead of 1,950 (bench/RESULTS.md, session 13). At
  1,000,000 the loop over a tile's sweeps (32 worlds, every reorder phase and
  iteration) qualifies too, not only its row loops: at 1,024 worlds on two
  devices ``boxes`` ran ~13 %, ``walker`` ~15 % and ``chain`` ~7 % faster,
  ``stack`` alike (medians of alternating runs with the loop hoisted, session
  26, bench/studies/xla_flags_ab.py); the rollout's
  step loop and an untiled batch's sweeps stay over it. Same arithmetic
  (bitwise the same trajectories). Not set when ``XLA_FLAGS`` already has
  ``--xla_backend_extra_options`` (give it the key yourself).
- ``--xla_cpu_use_fusion_emitters=false`` (jaxlib below 0.11 only, where the
  switch exists; jaxlib 0.11 removed XLA CPU's older code generator, and an
  unknown flag is fatal in ``XLA_FLAGS``): XLA CPU's older elemental code
  generator instead of its MLIR fusion emitters. The step compiles in 70-85 % of
  the time and runs as fast, with bitwise the same results (bench/RESULTS.md,
  session 36: a cold first compile at 1,024 worlds on two devices, boxes 21.3 ->
  15.0 s, stack 24.0 -> 19.4, bin_16 28.3 -> 24.0, walker 13.8 -> 9.9, chain 6.7
  -> 5.2; world-steps/s the same within this VM's noise in alternating
  processes; the final states' SHA-256 the same either way). On 2026-11-24,
  before the step's short sums became chains of adds, the same switch ran
  ``chain`` 42 % slower, so it was not set then. The test suite has used it all
  along (tests/fast_compile.py).
- ``--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL`` and
  ``--xla_gpu_graph_min_graph_size=1`` (GPU): XLA records while loops and
  conditionals into CUDA graphs (conditional nodes) instead of running them
  from the host. Without it every trip of a loop whose trip count depends on
  the data (the solver's live row counts and colour phases) copies its
  predicate to the host and waits for the GPU to drain: ~19-22 us a trip
  against ~7 us. Measured on an H200 (bench/RESULTS.md, "GPU probe"): 1024
  worlds 1.1-1.5x faster (boxes pgs 9.4 -> 6.3 ms per step, chain colored
  6.3 -> 4.3, stack colored 24.7 -> 19.7), the same physics. Not set when
  ``XLA_FLAGS`` already names either option.
**Persistent compilation cache.** ``import jaxode`` also points JAX's
persistent compilation cache (``jax_compilation_cache_dir``) at a per-user
folder, ``$XDG_CACHE_HOME/jaxode/xla/<cpu>`` (``~/.cache/jaxode/xla/<cpu>``
when ``XDG_CACHE_HOME`` is unset), so a second process (a notebook restart,
the next training run) loads a compiled step from disk instead of running XLA
again: the bench scenes' first call went from 6-16 s to 1.5-2.5 s of CPU time
(trace and lowering remain; bench/RESULTS.md, session 14), with bitwise the same
results. Loading an entry makes XLA log one line on stderr ("Assume version
compatibility. PjRt-IFRT does not track XLA executable versions."). JAX caches a program only if
it took at least ``jax_persistent_cache_min_compile_time_secs`` (JAX's default,
1 s) to compile. The entry's key is JAX's: a hash of the lowered program (its
dtypes, so x64 on or off differ), the jaxlib version, the platform, every
flag in ``XLA_FLAGS`` (the no-FMA ISA cap and the small-loop threshold
above included: a program compiled under other flags is compiled again, not
loaded) and the compile options. JAX does not hash which CPU it compiled for
(XLA emits code for the host's instruction set), so ``<cpu>`` is a short hash
of the processor's model and feature flags: a home directory shared by
different machines keeps one folder per kind of CPU. Entries are not evicted
(JAX's ``jax_compilation_cache_max_size``, -1: no limit; a bench scene's
rollout is 0.4-0.8 MB); delete the folder to clear it.

Nothing is changed when the folder cannot be created or written (a
read-only home: ``cache_reason`` says so), when the cache folder is set already (``jax.config`` or
``JAX_COMPILATION_CACHE_DIR``) or JAX's cache is switched off
(``JAX_ENABLE_COMPILATION_CACHE=false``). ``JAXODE_XLA_CACHE=0`` leaves the
cache off; ``JAXODE_XLA_CACHE=/some/folder`` uses that folder (as is, no
``<cpu>`` subfolder). :func:`status` says which folder is in use
(``cache_dir``, None when off) and why (``cache_reason``).

Set ``JAXODE_XLA_DEFAULTS=0`` to leave ``XLA_FLAGS`` alone. If JAX started
before jaxode was imported, nothing is changed: :func:`status` says what is in
effect (one CPU device: a batch runs on one core; FMA on: a world alone may
differ from the same world in a batch in the last bits, which float32 chaos
grows). Import jaxode first, or set the flags yourself. The cache folder is
set either way (JAX opens it at its first compile that uses it), and
``JAXODE_XLA_DEFAULTS`` does not touch it.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re

DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"
MAX_ISA_FLAG = "--xla_cpu_max_isa"
NO_FMA_ISA = "AVX"
EXTRA_OPTIONS_FLAG = "--xla_backend_extra_options"
SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000
LEGACY_EMITTER_FLAG = "--xla_cpu_use_fusion_emitters"
COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer"
COMMAND_BUFFER_TYPES = "+WHILE,+CONDITIONAL"
GRAPH_SIZE_FLAG = "--xla_gpu_graph_min_graph_size"

CACHE_ENV = "JAXODE_XLA_CACHE"
_OFF = ("0", "false", "no", "off")

# What configure() did: flags added, or why none were; the cache folder set, or why none.
_applied: dict = {"flags": [], "reason": "not run", "cache_dir": None, "cache_reason": "not run"}


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge
        return bool(getattr(xla_bridge, "_backends", {}))
    except Exception:  # noqa: BLE001 - private API moved: assume not started
        return False


def jaxlib_version() -> tuple[int, int]:
    """(major, minor) of the installed jaxlib, read from its metadata without
    importing it ((0, 0) when it is not installed)."""
    try:
        v = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return (0, 0)
    m = re.match(r"(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def has_legacy_emitter() -> bool:
    """Whether this jaxlib's XLA CPU still has its older code generator, i.e.
    knows ``--xla_cpu_use_fusion_emitters`` (jaxlib below 0.11)."""
    return jaxlib_version() < (0, 11)


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")


def cpu_tag() -> str:
    """``<machine>-<8 hex>``: the architecture and a hash of the processor's model
    and feature flags (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`),
    naming one cache folder per kind of CPU (XLA's CPU code targets the host)."""
    ident = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
        keys = ("model name", "flags", "Features", "CPU implementer", "CPU part", "isa")
        seen = {}
        for line in lines:
            k, _, v = line.partition(":")
            k = k.strip()
            if k in keys and k not in seen:
                seen[k] = v.strip()
        if seen:
            ident = repr(sorted(seen.items()))
    except OSError:
        pass
    digest = hashlib.sha256(ident.encode("utf-8")).hexdigest()[:8]
    return f"{platform.machine().lower() or 'cpu'}-{digest}"


def default_cache_dir() -> str:
    """``$XDG_CACHE_HOME/jaxode/xla/<cpu_tag()>``, ``~/.cache/...`` without XDG_CACHE_HOME."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxode", "xla", cpu_tag())


def configure_cache() -> str | None:
    """Point JAX's persistent compilation cache at jaxode's folder (module
    docstring) unless ``JAXODE_XLA_CACHE=0``, a folder is set already or JAX's
    cache is switched off. Returns the folder set (None when nothing was set)."""
    import jax

    choice = os.environ.get(CACHE_ENV, "").strip()
    if choice.lower() in _OFF:
        _applied.update(cache_dir=None, cache_reason=f"{CACHE_ENV}={choice}")
        return None
    if jax.config.jax_compilation_cache_dir:
        _applied.update(cache_dir=jax.config.jax_compilation_cache_dir,
                        cache_reason="set before jaxode was imported (left as it was)")
        return None
    if not jax.config.jax_enable_compilation_cache:
        _applied.update(cache_dir=None, cache_reason="jax_enable_compilation_cache is False")
        return None
    path = choice if choice and choice.lower() not in ("1", "true", "yes", "on") \
        else default_cache_dir()
    # A folder that cannot be made or written (read-only home) leaves the cache off
    # here, once, instead of JAX warning at every compile.
    try:
        os.makedirs(path, exist_ok=True)
        writable = os.access(path, os.W_OK | os.X_OK)
    except OSError as e:
        writable, path = False, f"{path} ({e.strerror})"
    if not writable:
        _applied.update(cache_dir=None, cache_reason=f"cannot write {path}: cache left off")
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    _applied.update(cache_dir=path, cache_reason=f"set at import ({CACHE_ENV}={choice})"
                    if choice else "set at import")
    return path


def configure() -> list[str]:
    """Add jaxode's XLA flags (module docstring) if JAX's backends have not started,
    then set up the compilation cache (:func:`configure_cache`).
    Returns the flags added (none when disabled, already set or too late)."""
    added = _configure_flags()
    configure_cache()
    return added


def _configure_flags() -> list[str]:
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
    if has_legacy_emitter() and LEGACY_EMITTER_FLAG not in current:
        added.append(f"{LEGACY_EMITTER_FLAG}=false")
    if EXTRA_OPTIONS_FLAG not in current:
        added.append(f"{EXTRA_OPTIONS_FLAG}={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}")
    if COMMAND_BUFFER_FLAG not in current and GRAPH_SIZE_FLAG not in current:
        added += [f"{COMMAND_BUFFER_FLAG}={COMMAND_BUFFER_TYPES}", f"{GRAPH_SIZE_FLAG}=1"]
    if added:
        os.environ["XLA_FLAGS"] = " ".join([current] + added).strip()
    _applied.update(flags=added, reason="set at import" if added else "already in XLA_FLAGS")
    return added


def status() -> dict:
    """What is in effect: CPU devices, whether FMA contraction is off, what
    :func:`configure` did (``flags`` added and ``reason``), and the persistent
    compilation cache's folder (``cache_dir``, None when off; ``cache_reason``)."""
    import jax

    flags = os.environ.get("XLA_FLAGS", "")
    try:
        ncpu = len(jax.devices("cpu"))
    except RuntimeError:
        ncpu = 0
    no_fma = _x86() and f"{MAX_ISA_FLAG}={NO_FMA_ISA}" in flags
    out = {"cpu_devices": ncpu, "fma_off": no_fma, "xla_flags": flags, **_applied}
    # what is in effect now (a user may have changed it after the import)
    out["cache_dir"] = jax.config.jax_compilation_cache_dir \
        if jax.config.jax_enable_compilation_cache else None
    return out
