"""Conformance helpers: drive the real Open Dynamics Engine (via ctypes) so tests
can compare jaxode's results against ODE's.  Nothing here is needed at runtime."""
