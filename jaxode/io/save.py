"""Save and restore a model and a (batch of) states: one ``.npz`` file.

Format (version ``FORMAT_VERSION``), a plain numpy ``.npz`` archive:

* ``__jaxode_format__``: int64 scalar, the format version (2: the model
  carries its initial state and ``geom_dataid``; version 1 files, whose models
  had neither, are refused).
* ``__structure__``: a JSON string (0-d unicode array) describing the two
  trees ``model`` and ``states``. A node is one of
  ``{"dc": "module:Class", "f": {field: node}}`` (a jaxode pytree dataclass;
  static fields are stored in the JSON, array fields as nodes),
  ``{"a": "key"}`` (an array stored in the archive under ``key``),
  ``{"t": [node, ...]}`` (tuple), ``{"l": [...]}`` (list), ``{"d": {k: node}}``
  (dict), or a JSON scalar (int, float, str, bool, null).
* one entry per array leaf, named by its path (``model/params/mu``,
  ``states/pos``, ...), with its exact dtype and shape (a batch axis included).

Arrays are written bit for bit (``np.savez`` stores raw bytes), so a rollout
continued from a loaded state is identical to the uninterrupted one on the same
backend. Only classes from the ``jaxode`` package are reconstructed on load (no
pickle; ``allow_pickle=False``).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

FORMAT_VERSION = 2


def _encode(x: Any, key: str, arrays: dict) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        cls = type(x)
        if not cls.__module__.startswith("jaxode"):
            raise ValueError(f"save: {key}: only jaxode dataclasses can be saved (got {cls.__module__}.{cls.__qualname__})")
        return {"dc": f"{cls.__module__}:{cls.__qualname__}",
                "f": {f.name: _encode(getattr(x, f.name), f"{key}/{f.name}", arrays)
                      for f in dataclasses.fields(x)}}
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        arrays[key] = np.asarray(x)
        return {"a": key}
    if isinstance(x, tuple):
        return {"t": [_encode(v, f"{key}/{i}", arrays) for i, v in enumerate(x)]}
    if isinstance(x, list):
        return {"l": [_encode(v, f"{key}/{i}", arrays) for i, v in enumerate(x)]}
    if isinstance(x, dict):
        for k in x:
            if not isinstance(k, str):
                raise ValueError(f"save: {key}: dict keys must be strings (got {k!r})")
        return {"d": {k: _encode(v, f"{key}/{k}", arrays) for k, v in x.items()}}
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise ValueError(f"save: {key}: cannot store a value of type {type(x).__name__}")


def _decode(node: Any, arrays, where: str) -> Any:
    if isinstance(node, dict):
        if "a" in node:
            return jnp.asarray(arrays[node["a"]])
        if "t" in node:
            return tuple(_decode(v, arrays, where) for v in node["t"])
        if "l" in node:
            return [_decode(v, arrays, where) for v in node["l"]]
        if "d" in node:
            return {k: _decode(v, arrays, where) for k, v in node["d"].items()}
        if "dc" in node:
            mod, _, name = node["dc"].partition(":")
            if not (mod == "jaxode" or mod.startswith("jaxode.")):
                raise ValueError(f"load: {where}: refusing to build class {node['dc']!r} (not jaxode)")
            cls = getattr(importlib.import_module(mod), name)
            return cls(**{k: _decode(v, arrays, where) for k, v in node["f"].items()})
        raise ValueError(f"load: {where}: malformed structure node {node!r}")
    return node


def save(path, model, states) -> None:
    """Write ``model`` (a :class:`jaxode.Model`) and ``states`` (a
    :class:`jaxode.State`, batched or not, or any pytree of jaxode dataclasses
    and arrays) to the ``.npz`` file ``path`` (format in the module docstring)."""
    arrays: dict = {}
    structure = {"model": _encode(model, "model", arrays), "states": _encode(states, "states", arrays)}
    payload = {"__jaxode_format__": np.int64(FORMAT_VERSION),
               "__structure__": np.array(json.dumps(structure))}
    payload.update(arrays)
    with open(os.fspath(path), "wb") as f:
        np.savez(f, **payload)


def load(path):
    """Read a file written by :func:`save`; returns ``(model, states)`` with the
    saved dtypes, shapes and bits."""
    path = os.fspath(path)
    with np.load(path, allow_pickle=False) as z:
        if "__jaxode_format__" not in z.files or "__structure__" not in z.files:
            raise ValueError(f"load: {path}: not a jaxode save file (no __jaxode_format__ key)")
        version = int(z["__jaxode_format__"])
        if version != FORMAT_VERSION:
            raise ValueError(f"load: {path}: format version {version} is not supported "
                             f"(this jaxode reads version {FORMAT_VERSION})")
        structure = json.loads(str(z["__structure__"]))
        arrays = {k: z[k] for k in z.files}
    return (_decode(structure["model"], arrays, path), _decode(structure["states"], arrays, path))
