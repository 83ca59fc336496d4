"""Immutable dataclass pytrees.

``@pytree_dataclass`` makes a frozen dataclass whose fields are pytree leaves,
except those declared with ``static_field()``, which become hashable metadata
(part of the compiled function's cache key: shapes, capacities, type tables).
"""
from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax

T = TypeVar("T")


def static_field(**kwargs: Any) -> Any:
    """A dataclass field that is static metadata, not a pytree leaf."""
    metadata = dict(kwargs.pop("metadata", {}))
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def pytree_dataclass(cls: type[T]) -> type[T]:
    """Freeze ``cls`` as a dataclass and register it as a JAX pytree."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    data = [f.name for f in fields if not f.metadata.get("static", False)]
    meta = [f.name for f in fields if f.metadata.get("static", False)]
    jax.tree_util.register_dataclass(cls, data_fields=data, meta_fields=meta)

    def replace(self: T, **changes: Any) -> T:
        """Return a copy with ``changes`` applied (fields by name)."""
        return dataclasses.replace(self, **changes)

    cls.replace = replace  # type: ignore[attr-defined]
    return cls
