"""XLA options that make this suite compile faster, for the installed jaxlib.

Optimisation level 0 and, where it still exists, the older (non-"fusion emitter")
CPU code generator compile 1.5-2.5x faster and change no semantics (see
conftest.py). jaxlib 0.11 removed the older generator: its switch
``xla_cpu_use_fusion_emitters`` is then an unknown flag, fatal in ``XLA_FLAGS``
and "No such compile option" in ``compiler_options``, so it is only used below
0.11 (:func:`jaxode.xla.has_legacy_emitter`; ``import jaxode`` sets it there too).
``OPTIONS`` is for ``jax.jit(..., compiler_options=OPTIONS)``, ``XLA_FLAGS`` for the
environment (conftest.py); ``RUN_HEAVY`` for the few tests whose compiled program
runs longer than it compiles.
"""
from __future__ import annotations

from jaxode import xla

OPTIONS: dict = {"xla_backend_optimization_level": 0}
if xla.has_legacy_emitter():
    OPTIONS[xla.LEGACY_EMITTER_FLAG.lstrip("-")] = False

XLA_FLAGS: tuple = tuple(f"--{k}={str(v).lower()}" for k, v in OPTIONS.items())

# For the few tests whose compiled program runs long enough that its speed, not its
# compile, dominates (a 100-iteration float64 jvp through 40 steps of 96 worlds:
# test_gradients' fixture 18 s compile + 98 s run at level 0, 27 s + 20 s at level 2;
# AMD EPYC x2, jaxlib 0.10.2, session 19). Level 2 and not 3: 3 compiled 7 s longer
# to run 3 s faster (34 s + 18 s).
RUN_HEAVY: dict = {**OPTIONS, "xla_backend_optimization_level": 2}
