"""A one-line "compiling ..." notice when a first call spends long in compilation.

The first call of a jitted function for new shapes traces, lowers and compiles
it with XLA, which for a physics step can take from a second to minutes; later
calls reuse the executable. So that such a pause does not look like a hang,
:func:`sweep <jaxode.tools.sweep.sweep>`, :func:`jaxode.rollout`,
:func:`jaxode.step` and the envs' ``reset_batch``/``step_batch`` run their calls
inside :func:`notice`, which prints ONE line on stderr::

    jaxode: compiling rollout (3 bodies, 300 steps) for these shapes (XLA, once; later calls reuse it) ...

only when the compilation inside that call has lasted longer than the
threshold (:data:`DEFAULT_THRESHOLD_S`, 2 s). The time is that of JAX's own
compile phases (tracing, lowering to MLIR, XLA compile), reported through
``jax.monitoring``; a call that runs long but compiles nothing prints nothing.

Switch it off with the environment variable ``JAXODE_COMPILE_NOTICE=0`` (or
set it to a number of seconds: the threshold), or in Python with
:func:`configure` (``configure(False)``, ``configure(threshold_s=10)``). The
test suite sets ``JAXODE_COMPILE_NOTICE=0`` (tests/conftest.py).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Optional, TextIO

__all__ = ["notice", "configure", "DEFAULT_THRESHOLD_S"]

#: Compile time [s] after which the notice is printed.
DEFAULT_THRESHOLD_S = 2.0

# JAX's compile phases; each records a scalar (its start time) when it begins
# and a duration when it ends (jax._src.dispatch.log_elapsed_time).
_EVENTS = frozenset({"/jax/core/compile/jaxpr_trace_duration",
                     "/jax/core/compile/jaxpr_to_mlir_module_duration",
                     "/jax/core/compile/backend_compile_duration"})

_config = {"enabled": None, "threshold_s": None, "stream": None}
_local = threading.local()
_installed = False
_install_lock = threading.Lock()


def configure(enabled: Optional[bool] = None, threshold_s: Optional[float] = None,
              stream: Optional[TextIO] = None) -> None:
    """Override the environment: ``enabled`` (True/False; None: back to
    ``JAXODE_COMPILE_NOTICE``), ``threshold_s`` (seconds of compilation before
    the notice, >= 0; None: the environment's or 2 s) and ``stream`` (where the
    line goes; None: ``sys.stderr`` at the time of printing)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"configure: enabled must be True, False or None (got {enabled!r})")
    if threshold_s is not None:
        t = float(threshold_s)
        if not t >= 0 or t == float("inf"):
            raise ValueError(f"configure: threshold_s must be a finite number of seconds >= 0 "
                             f"(got {threshold_s!r})")
    _config.update(enabled=enabled, threshold_s=threshold_s, stream=stream)


def _settings() -> tuple[bool, float]:
    """(enabled, threshold [s]) from configure() or JAXODE_COMPILE_NOTICE."""
    raw = os.environ.get("JAXODE_COMPILE_NOTICE", "").strip().lower()
    env_on, env_t = True, DEFAULT_THRESHOLD_S
    if raw in ("0", "off", "false", "no"):
        env_on = False
    elif raw not in ("", "1", "on", "true", "yes"):
        try:
            env_t = float(raw)
        except ValueError:
            raise ValueError("JAXODE_COMPILE_NOTICE must be 0/off, 1/on or a threshold in "
                             f"seconds (got {raw!r})") from None
        if not env_t >= 0:
            raise ValueError(f"JAXODE_COMPILE_NOTICE: the threshold must be >= 0 s (got {raw!r})")
    on = env_on if _config["enabled"] is None else _config["enabled"]
    t = env_t if _config["threshold_s"] is None else float(_config["threshold_s"])
    return on, t


class _Watch:
    """One notice context: counts compile time spent in its thread."""

    __slots__ = ("what", "threshold", "depth", "phase_t0", "spent", "timer", "printed", "lock")

    def __init__(self, what: str, threshold: float):
        self.what, self.threshold = what, threshold
        self.depth, self.phase_t0, self.spent = 0, 0.0, 0.0
        self.timer, self.printed = None, False
        self.lock = threading.Lock()

    def phase_start(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth == 1 and not self.printed:
                self.phase_t0 = time.perf_counter()
                self.timer = threading.Timer(max(0.0, self.threshold - self.spent), self._fire)
                self.timer.daemon = True
                self.timer.start()

    def phase_end(self) -> None:
        with self.lock:
            if self.depth == 0:
                return
            self.depth -= 1
            if self.depth == 0:
                self.spent += time.perf_counter() - self.phase_t0
                self._cancel()

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _fire(self) -> None:
        with self.lock:
            if self.depth == 0 or self.printed:
                return
            self.printed = True
        stream = _config["stream"] or sys.stderr
        try:
            print(f"jaxode: compiling {self.what} for these shapes (XLA, once; later calls "
                  "reuse it) ...", file=stream, flush=True)
        except (ValueError, OSError):  # a closed stream: say nothing
            pass

    def close(self) -> None:
        with self.lock:
            self._cancel()
            self.depth = 0


def _on_scalar(event, value, **kwargs) -> None:
    if event in _EVENTS:
        stack = getattr(_local, "stack", None)
        if stack:
            stack[-1].phase_start()


def _on_duration(event, duration, **kwargs) -> None:
    if event in _EVENTS:
        stack = getattr(_local, "stack", None)
        if stack:
            stack[-1].phase_end()


def _install() -> bool:
    global _installed
    if _installed:
        return True
    with _install_lock:
        if not _installed:
            try:
                from jax import monitoring
                monitoring.register_scalar_listener(_on_scalar)
                monitoring.register_event_duration_secs_listener(_on_duration)
            except (ImportError, AttributeError):  # a jax without these hooks: no notice
                return False
            _installed = True
    return True


class notice:
    """Context manager: print one "jaxode: compiling <what> ..." line on stderr
    if the JAX compilation started inside it lasts longer than the threshold
    (see the module docstring). ``what`` names the thing compiled ("the sweep
    (8 worlds x 200 steps)"); ``enabled=False`` silences this one context.
    Nested contexts: the innermost one reports."""

    __slots__ = ("what", "enabled", "watch", "active")

    def __init__(self, what: str, enabled: bool = True):
        self.what, self.enabled, self.watch, self.active = what, enabled, None, False

    def __enter__(self):
        if not self.enabled:
            return self
        on, threshold = _settings()
        if on and _install():
            self.watch = _Watch(self.what, threshold)
            stack = getattr(_local, "stack", None)
            if stack is None:
                stack = _local.stack = []
            stack.append(self.watch)
            self.active = True
        return self

    def __exit__(self, *exc) -> None:
        if self.active:
            self.active = False
            self.watch.close()
            stack = _local.stack
            if stack and stack[-1] is self.watch:
                stack.pop()
            elif self.watch in stack:
                stack.remove(self.watch)

    @property
    def printed(self) -> bool:
        """Whether this context printed its notice."""
        return self.watch is not None and self.watch.printed

    @property
    def compile_s(self) -> float:
        """Seconds of JAX compilation seen inside this context (0 when it was off)."""
        return 0.0 if self.watch is None else self.watch.spent
