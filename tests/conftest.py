"""Shared pytest configuration: CPU only, and XLA compiling for speed of compilation.

JAX compile time dominates this suite. XLA's CPU backend optimisation level 0 and
the older (non-"fusion emitter") CPU code generator compile about 1.5-2.5x faster
and change no semantics (the ODE conformance tests agree to the same rounding);
they make the compiled code somewhat slower, which no test measures. A user's
XLA_FLAGS are kept; ours are only added when the flag is not set already.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_FAST_COMPILE = ("--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0")
_flags = os.environ.get("XLA_FLAGS", "")
for _f in _FAST_COMPILE:
    if _f.split("=")[0] not in _flags:
        _flags = f"{_flags} {_f}".strip()
os.environ["XLA_FLAGS"] = _flags
# No Python tracebacks in the MLIR locations of every lowered op: ~5-10% off tracing
# and lowering, which cost as much as XLA's own compile here; error messages are unchanged.
os.environ.setdefault("JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "0")
