"""Conformance helpers: drive the real Open Dynamics Engine (via ctypes) so tests
can compare jaxode's results against ODE's.  Nothing here is needed at runtime.

* :mod:`tools.conformance.odelib` -- ctypes bindings to libode 0.16 (double).
* :mod:`tools.conformance.scenes` -- declarative scenes (``SCENES``,
  ``BATCH_SCENES``), each built both as a jaxode model and as an ODE world,
  with its physics metric and its float64 / float32 tolerances and reasons.
* :mod:`tools.conformance.harness` -- runs scenes in ODE and in jaxode
  (float64 and float32) and compares them (``run_scene``, ``run_all``).
* ``python -m tools.conformance --out docs/CONFORMANCE.md`` -- the report.

``scenes`` and ``harness`` import jaxode and JAX; ``odelib`` needs only numpy.
"""
