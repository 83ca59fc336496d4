"""A sweep's results on disk: one file per finished chunk, so a killed sweep resumes.

``jaxode.sweep(..., out=DIR)`` keeps its results in ``DIR``:

* ``sweep.json``: what the sweep is (format version, the scene's digest, n_steps,
  dt, the parameter and metric names, the grid's shape and digest, the batch per
  chunk, units); written once, atomically. A later call with the same ``out``
  must describe the same sweep (else ValueError naming what differs).
* ``grid.npz``: the parameter columns and grid axes (the table's left half).
* ``chunk_000000.npz``, ...: one per finished chunk: each metric over the chunk's
  ``batch`` worlds (padding rows included) and the overflow counters the capacity
  warning reads. Written to a temporary name in ``DIR`` and renamed into place
  (``os.replace``, atomic on POSIX), so a kill at any moment leaves either the
  whole chunk or none of it.

The scene digest is SHA-256 over the model's and the initial state's structure
(jaxode/io/save.py's encoding: static fields, dtypes, shapes) and array bytes, with
n_steps and dt; the grid digest over every Params field of every variant. Arrays
are stored bit for bit (``np.savez``), so a resumed sweep returns the same table as
an uninterrupted one on the same backend.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import tempfile
import zipfile
import zlib
from typing import Optional

import numpy as np

FORMAT = 1
MANIFEST = "sweep.json"
GRID = "grid.npz"
_DROPS = ("pairs", "contacts", "found")


def _hash_arrays(h, arrays: dict) -> None:
    for key in sorted(arrays):
        a = np.ascontiguousarray(np.asarray(arrays[key]))
        h.update(f"{key}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())


def scene_digest(model, state, n_steps: int, dt: float) -> str:
    """SHA-256 (hex) of the model, the initial state, n_steps and dt."""
    save = importlib.import_module("jaxode.io.save")  # the module (jaxode.io.save is also a function)
    arrays: dict = {}
    structure = {"model": save._encode(model, "model", arrays),
                 "state": save._encode(state, "state", arrays)}
    h = hashlib.sha256(json.dumps(structure, sort_keys=True).encode())
    h.update(f"n_steps={int(n_steps)}|dt={float(dt)!r}|".encode())
    _hash_arrays(h, arrays)
    return h.hexdigest()


def grid_digest(full: dict) -> str:
    """SHA-256 (hex) of every variant's parameters (field -> (n, ...) array)."""
    h = hashlib.sha256()
    _hash_arrays(h, full)
    return h.hexdigest()


def _atomic_write(path: str, write) -> None:
    """``write(file)`` to a temporary file next to ``path``, then rename it into place."""
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# What a rerun must repeat exactly, and how to name a difference.
_COMPARED = (("format", "the file format"), ("n_steps", "n_steps"), ("dt", "dt"),
             ("params", "the swept parameters"), ("grid_shape", "the grid's shape"),
             ("zip", "zip"), ("grid", "the grid's values"), ("metrics", "the metric names"),
             ("batch", "the batch per chunk (chunk_size)"),
             ("scene", "the scene (the model or the initial state)"))


class Store:
    """The directory of one sweep (see the module docstring)."""

    def __init__(self, path: str, manifest: dict):
        self.path, self.manifest = path, manifest
        self.n_chunks = int(manifest["n_chunks"])

    # ------------------------------------------------------------ opening
    @classmethod
    def open(cls, path, manifest: dict, columns: dict, axes: dict) -> "Store":
        """Create ``path`` for this sweep, or check that it holds this same sweep."""
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"sweep: out={path!r} is a file, not a directory")
        os.makedirs(path, exist_ok=True)
        mpath = os.path.join(path, MANIFEST)
        if os.path.exists(mpath):
            stored = read_manifest(path)
            for key, what in _COMPARED:
                if stored.get(key) != manifest.get(key):
                    a, b = stored.get(key), manifest.get(key)
                    shown = "" if key in ("scene", "grid") else f": stored {a!r}, this call {b!r}"
                    raise ValueError(f"sweep: out={path!r} holds another sweep: {what} "
                                     f"{'differ' if key in ('params', 'metrics') else 'differs'}{shown}. "
                                     "Use another directory, or delete this one to start over")
            return cls(path, stored)
        _atomic_write(os.path.join(path, GRID), lambda f: np.savez(
            f, **{f"col{i}": columns[n] for i, n in enumerate(manifest["params"])},
            **{f"axis{i}": axes[n] for i, n in enumerate(manifest["params"])}))
        text = json.dumps(manifest, indent=1, sort_keys=True).encode()
        _atomic_write(mpath, lambda f: f.write(text))
        return cls(path, manifest)

    # ------------------------------------------------------------- chunks
    def chunk_path(self, c: int) -> str:
        return os.path.join(self.path, f"chunk_{c:06d}.npz")

    def done(self) -> set:
        """Indices of the chunks on disk."""
        return {c for c in range(self.n_chunks) if os.path.exists(self.chunk_path(c))}

    def write(self, c: int, record: dict) -> None:
        """Store chunk ``c``: ``record`` = {"metrics": {name: (batch, ...)}, "drops":
        {"pairs"|"contacts"|"found": (batch,)}}."""
        names = self.manifest["metrics"]
        payload = {f"m{i}": np.asarray(record["metrics"][n]) for i, n in enumerate(names)}
        payload.update({f"drop_{k}": np.asarray(record["drops"][k]) for k in _DROPS})
        payload["chunk"] = np.int64(c)
        _atomic_write(self.chunk_path(c), lambda f: np.savez(f, **payload))

    def read(self, c: int) -> Optional[dict]:
        """Chunk ``c`` as written, or None when it is missing or unreadable (it is
        then computed again)."""
        path = self.chunk_path(c)
        names = self.manifest["metrics"]
        try:
            with np.load(path, allow_pickle=False) as z:
                if int(z["chunk"]) != c:
                    return None
                rec = {"metrics": {n: z[f"m{i}"] for i, n in enumerate(names)},
                       "drops": {k: z[f"drop_{k}"] for k in _DROPS}}
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zlib.error):
            return None
        batch = int(self.manifest["batch"])
        if any(np.shape(v)[:1] != (batch,) for v in rec["metrics"].values()):
            return None
        return rec


def stored_batch(path) -> Optional[int]:
    """The batch per chunk of the sweep in ``path``, or None when there is none yet."""
    if not os.path.isfile(os.path.join(os.fspath(path), MANIFEST)):
        return None
    return int(read_manifest(path)["batch"])


def read_manifest(path) -> dict:
    path = os.fspath(path)
    mpath = os.path.join(path, MANIFEST)
    if not os.path.isfile(mpath):
        raise ValueError(f"{path!r} is not a sweep directory (no {MANIFEST}; it is written by "
                         "jaxode.sweep(..., out=DIR))")
    try:
        with open(mpath, "rb") as f:
            manifest = json.loads(f.read().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{mpath}: not a valid sweep manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else manifest
        raise ValueError(f"{mpath}: sweep format {got!r} is not supported (this jaxode reads "
                         f"format {FORMAT})")
    return manifest


def assemble(n: int, n_chunks: int, metrics, columns: dict, records: dict):
    """Metric columns (name -> (n, ...)) added to ``columns``, and the overflow
    counters (each (n,)), from the chunk records {c: record}, in variant order,
    padding rows dropped."""
    order = [records[c] for c in range(n_chunks)]
    out = dict(columns)
    for name in metrics:
        out[name] = np.concatenate([np.asarray(r["metrics"][name]) for r in order])[:n]
    drops = [np.concatenate([np.asarray(r["drops"][k]) for r in order])[:n] for k in _DROPS]
    return out, drops


def load(path):
    """The :class:`jaxode.SweepResult` of a finished sweep directory, from it alone."""
    from jaxode.tools.sweep import SweepResult
    path = os.fspath(path)
    manifest = read_manifest(path)
    store = Store(path, manifest)
    names = manifest["params"]
    try:
        with np.load(os.path.join(path, GRID), allow_pickle=False) as z:
            columns = {n: z[f"col{i}"] for i, n in enumerate(names)}
            axes = {n: z[f"axis{i}"] for i, n in enumerate(names)}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{path}: {GRID} is missing or unreadable ({e})") from None
    records, missing = {}, []
    for c in range(store.n_chunks):
        rec = store.read(c)
        if rec is None:
            missing.append(c)
        else:
            records[c] = rec
    if missing:
        raise ValueError(f"{path}: the sweep is unfinished: {len(missing)} of {store.n_chunks} "
                         f"chunks missing (first: chunk {missing[0]}); rerun the same "
                         "jaxode.sweep(..., out=DIR) call to compute only those")
    columns, _ = assemble(int(manifest["n_variants"]), store.n_chunks, manifest["metrics"],
                          columns, records)
    stats = dict(n_variants=manifest["n_variants"], n_steps=manifest["n_steps"],
                 batch=manifest["batch"], n_chunks=manifest["n_chunks"], loaded_from=path)
    return SweepResult(columns=columns, params=tuple(names), metrics=tuple(manifest["metrics"]),
                       grid_shape=tuple(manifest["grid_shape"]), axes=axes,
                       zipped=bool(manifest["zip"]), stats=stats,
                       units=dict(manifest["units"]))
