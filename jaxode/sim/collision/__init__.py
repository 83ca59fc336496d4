"""Narrowphase contact generation between primitive geoms."""
