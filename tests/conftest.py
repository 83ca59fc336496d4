"""Shared pytest configuration: CPU only, and XLA compiling for speed of compilation.

JAX compile time dominates this suite. XLA's CPU backend optimisation level 0 and
the older (non-"fusion emitter") CPU code generator (jaxlib < 0.11 only, see
fast_compile.py) compile about 1.5-2.5x faster
and change no semantics (the ODE conformance tests agree to the same rounding);
they make the compiled code slower, which no test measures (the two tests whose
programs run longer than they compile ask for level 2: fast_compile.RUN_HEAVY). A user's
XLA_FLAGS are kept; ours are only added when the flag is not set already.
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# No Python tracebacks in the MLIR locations of every lowered op: ~5-10% off tracing
# and lowering, which cost as much as XLA's own compile here; error messages are unchanged.
os.environ.setdefault("JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "0")
# No "jaxode: compiling ..." notices in test output (jaxode/compile_notice.py); the
# tests of the notice switch it on for themselves with compile_notice.configure.
os.environ.setdefault("JAXODE_COMPILE_NOTICE", "0")
# No persistent compilation cache (jaxode/xla.py) unless asked for: a clean clone
# (CI) starts with an empty cache, so writing entries only costs (test_batch_invariance:
# 42.4 s CPU with a cold cache, 38.8 s without; test_joints_batch + test_capacity 30.6
# against 29.4 s; bench/RESULTS.md session 14), and the suite leaves the user's
# ~/.cache alone. JAXODE_XLA_CACHE=1 pytest ... reruns with a warm cache (23.4 s there).
os.environ.setdefault("JAXODE_XLA_CACHE", "0")
# (the settings above come first: fast_compile imports jaxode, and with it JAX)
from fast_compile import XLA_FLAGS as _FAST_COMPILE  # noqa: E402  (jaxlib-dependent)
_flags = os.environ.get("XLA_FLAGS", "")
for _f in _FAST_COMPILE:
    if _f.split("=")[0] not in _flags:
        _flags = f"{_flags} {_f}".strip()
os.environ["XLA_FLAGS"] = _flags


def pytest_sessionstart(session):
    """Under CI (``CI=true``) the real ODE library is part of what the suite needs (the
    README's test command installs Debian's libode-dev): a missing or unloadable
    libode fails the run here, once, with the reason, instead of ~90 tests that take
    it as their truth skipping one by one. Elsewhere they skip (and ``-rs`` lists them)."""
    if os.environ.get("CI", "").lower() != "true":
        return
    try:
        from tools.conformance import odelib
        odelib.load()
    except Exception as e:  # noqa: BLE001 - any failure to load is the same failure
        raise RuntimeError(
            "CI=true but the real ODE library (libode 0.16, Debian's libode-dev) cannot be "
            f"loaded: {type(e).__name__}: {e}. The tests compare against it; install it "
            "with the README's test command (apt-get install -y libode-dev)") from None
