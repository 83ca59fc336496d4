"""Benchmarks (measurements, not tests): run with ``python -m bench``."""
