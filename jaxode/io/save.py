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
import zipfile
import zlib
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


def _decode(node: Any, arrays, where: str, key: str = "") -> Any:
    if isinstance(node, dict):
        if "a" in node:
            if node["a"] not in arrays:
                raise ValueError(f"load: {where}: {key}: array {node['a']!r} is missing from "
                                 f"the archive")
            return jnp.asarray(arrays[node["a"]])
        if "t" in node:
            return tuple(_decode(v, arrays, where, f"{key}/{i}") for i, v in enumerate(node["t"]))
        if "l" in node:
            return [_decode(v, arrays, where, f"{key}/{i}") for i, v in enumerate(node["l"])]
        if "d" in node:
            return {k: _decode(v, arrays, where, f"{key}/{k}") for k, v in node["d"].items()}
        if "dc" in node:
            if not isinstance(node["dc"], str) or not isinstance(node.get("f"), dict):
                raise ValueError(f"load: {where}: {key}: malformed class node {node!r}")
            mod, _, name = node["dc"].partition(":")
            if not (mod == "jaxode" or mod.startswith("jaxode.")):
                raise ValueError(f"load: {where}: refusing to build class {node['dc']!r} (not jaxode)")
            try:
                cls = getattr(importlib.import_module(mod), name)
            except (ImportError, AttributeError, ValueError):
                raise ValueError(f"load: {where}: {key}: unknown class {node['dc']!r} (tampered "
                                 f"or written by another jaxode version)") from None
            if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
                raise ValueError(f"load: {where}: {key}: {node['dc']!r} is not a jaxode "
                                 f"dataclass")
            fields = {k: _decode(v, arrays, where, f"{key}/{k}") for k, v in node["f"].items()}
            try:
                return cls(**fields)
            except TypeError as e:
                raise ValueError(f"load: {where}: {key}: the fields stored for {node['dc']!r} "
                                 f"do not fit it ({e})") from None
        raise ValueError(f"load: {where}: {key}: malformed structure node {node!r}")
    return node


def _is_tree_of_data(x: Any) -> bool:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return True
    if isinstance(x, (jax.Array, np.ndarray)):
        return True
    if isinstance(x, (tuple, list)):
        return len(x) > 0 and all(_is_tree_of_data(v) for v in x)
    if isinstance(x, dict):
        return len(x) > 0 and all(_is_tree_of_data(v) for v in x.values())
    return False


def _check_pair(model, states, who: str) -> None:
    from jaxode import params_spec
    from jaxode.api import check_state
    from jaxode.types import Model, State
    if not isinstance(model, Model):
        raise TypeError(f"{who}: model must be a jaxode.Model (got {type(model).__name__})")
    if model.params is not None:
        params_spec.check_params(model, model.params, where=f"{who}: model.params")
    if isinstance(states, State):
        nb = max(len(np.shape(states.time)), 0)
        check_state(model, states, where=f"{who}: states", batch_ndim=nb)


def save(path, model, states) -> None:
    """Write ``model`` (a :class:`jaxode.Model`) and ``states`` (a
    :class:`jaxode.State`, batched or not, or a tuple/list/dict of jaxode
    dataclasses and arrays) to the ``.npz`` file ``path`` (format in the module
    docstring). TypeError for anything else (a string, a number, None);
    ValueError for a state whose shapes do not fit the model."""
    if not _is_tree_of_data(states):
        raise TypeError(f"save: {os.fspath(path)}: states must be a jaxode.State (batched or "
                        f"not) or a tuple/list/dict of jaxode dataclasses and arrays (got "
                        f"{type(states).__name__}: {states!r:.80})")
    _check_pair(model, states, f"save: {os.fspath(path)}")
    arrays: dict = {}
    structure = {"model": _encode(model, "model", arrays), "states": _encode(states, "states", arrays)}
    payload = {"__jaxode_format__": np.int64(FORMAT_VERSION),
               "__structure__": np.array(json.dumps(structure))}
    payload.update(arrays)
    with open(os.fspath(path), "wb") as f:
        np.savez(f, **payload)


def load(path):
    """Read a file written by :func:`save`; returns ``(model, states)`` with the
    saved dtypes, shapes and bits. ValueError naming the file and what is wrong
    for a file that is not a readable archive (truncated, garbage bytes), not a
    jaxode save file, of another format version, with corrupted JSON, an unknown
    or foreign class, a missing array, or arrays whose shapes do not fit the model."""
    path = os.fspath(path)
    with open(path, "rb") as f:  # FileNotFoundError / IsADirectoryError as they are
        head = f.read(4)
    if head[:2] != b"PK":
        raise ValueError(f"load: {path}: not a .npz save file: a .npz is a zip archive and "
                         f"starts with b'PK' (got {len(head)} byte(s) {head!r} at the start"
                         f"{'; the file is empty' if not head else ''})")
    try:
        with np.load(path, allow_pickle=False) as z:
            if "__jaxode_format__" not in z.files or "__structure__" not in z.files:
                raise ValueError(f"load: {path}: not a jaxode save file (no __jaxode_format__ key)")
            try:
                version = int(z["__jaxode_format__"])
            except (TypeError, ValueError):
                raise ValueError(f"load: {path}: __jaxode_format__ is not an integer format "
                                 f"version") from None
            if version != FORMAT_VERSION:
                raise ValueError(f"load: {path}: format version {version} is not supported "
                                 f"(this jaxode reads version {FORMAT_VERSION})")
            raw = z["__structure__"]
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise
    except ValueError as e:
        if str(e).startswith("load: "):
            raise
        raise ValueError(f"load: {path}: not a readable .npz save file ({e})") from None
    except (OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"load: {path}: not a readable .npz save file (truncated or "
                         f"corrupted: {type(e).__name__}: {e})") from None
    try:
        structure = json.loads(str(raw))
    except json.JSONDecodeError as e:
        raise ValueError(f"load: {path}: __structure__ is not valid JSON ({e})") from None
    if not isinstance(structure, dict) or not {"model", "states"} <= set(structure):
        raise ValueError(f"load: {path}: __structure__ must be a JSON object with 'model' and "
                         f"'states'")
    model = _decode(structure["model"], arrays, path, "model")
    states = _decode(structure["states"], arrays, path, "states")
    try:
        _check_pair(model, states, f"load: {path}")
    except TypeError as e:
        raise ValueError(str(e)) from None
    return model, states
