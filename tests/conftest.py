"""Shared pytest configuration: small thread pools, CPU only."""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
