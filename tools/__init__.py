"""Developer tools that are not part of the installed ``jaxode`` package.

* :mod:`tools.conformance` -- the libode (ctypes) conformance harness:
  ``python -m tools.conformance --out docs/CONFORMANCE.md`` from the repository root.
"""
