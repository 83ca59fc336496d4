"""Saving a model and a (batch of) state(s) to disk, and restoring them exactly.

ODE's FAQ asks how to save and restore a simulation so that it continues as if
never interrupted. In jaxode the whole simulation is two pytrees, the
:class:`~jaxode.Model` (structure and per-world ``params``) and the
:class:`~jaxode.State`, so ``save`` writes every array leaf bit for bit and
``load`` rebuilds the same pytrees: a rollout resumed from a loaded state
continues bit for bit as the uninterrupted one on the same backend
(``tests/test_io_save.py``).

File format (``.npz``, numpy's zip of ``.npy`` arrays):

=========================== ==================================================
key                         content
=========================== ==================================================
``__format__``              the string ``"jaxode-npz"``
``__format_version__``      int, :data:`FORMAT_VERSION` (1)
``__jaxode_version__``      the jaxode version that wrote the file
``model/<path>``            every array leaf of the model, ``<path>`` being its
                            ``jax.tree_util.keystr`` (``.params.mu``, ...)
``__model_treedef__``       the model's tree structure with its static
                            fields (shapes, capacities, type tables), a pickled
                            ``PyTreeDef`` as uint8 bytes
``states/<path>``           every array leaf of the states (any batch shape)
``__states_treedef__``      their tree structure, pickled likewise
``meta/<name>``             optional user arrays (``meta=`` of :func:`save`)
=========================== ==================================================

The arrays keep their dtypes (float32 or float64) and shapes, so the backend
and precision of the run that loads them decide nothing that the file fixed.
The tree structures are pickles: load only files you trust (as with
``pickle``), with the jaxode version that wrote them (checked).
"""
from __future__ import annotations

import io
import os
import pickle
from typing import Any, Mapping, Optional, Union

import jax
import numpy as np

FORMAT = "jaxode-npz"
FORMAT_VERSION = 1

PathLike = Union[str, os.PathLike, io.IOBase]


def _leaves(prefix: str, tree: Any) -> tuple[dict, np.ndarray]:
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    arrays = {f"{prefix}/{jax.tree_util.keystr(path)}": np.asarray(leaf) for path, leaf in flat}
    if len(arrays) != len(flat):
        raise ValueError(f"save: two leaves of the {prefix} share a path")
    return arrays, np.frombuffer(pickle.dumps(treedef), dtype=np.uint8)


def save(path: PathLike, model, states=None, meta: Optional[Mapping[str, Any]] = None) -> None:
    """Write ``model`` and optionally ``states`` (a State or a batch of them, any
    pytree of arrays) to ``path`` (``.npz``; a file object works too), exactly.

    meta: optional name -> array (e.g. the step count, a seed) stored as ``meta/<name>``.
    """
    from jaxode import __version__

    arrays = {"__format__": np.array(FORMAT), "__format_version__": np.array(FORMAT_VERSION),
              "__jaxode_version__": np.array(__version__)}
    a, td = _leaves("model", model)
    arrays.update(a)
    arrays["__model_treedef__"] = td
    if states is not None:
        a, td = _leaves("states", states)
        arrays.update(a)
        arrays["__states_treedef__"] = td
    for name, value in (meta or {}).items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"save: meta keys must be non-empty strings (got {name!r})")
        arrays[f"meta/{name}"] = np.asarray(value)
    np.savez(path, **arrays)


def _tree(data, prefix: str, where: str):
    treedef = pickle.loads(data[f"__{prefix}_treedef__"].tobytes())
    keys = [k for k in data.files if k.startswith(prefix + "/")]
    flat_paths = [jax.tree_util.keystr(p) for p in _paths_of(treedef)]
    missing = [p for p in flat_paths if f"{prefix}/{p}" not in keys]
    if missing or len(keys) != len(flat_paths):
        raise ValueError(f"load: {where}: the {prefix} arrays do not match the stored structure "
                         f"(missing {missing[:3]}, {len(keys)} arrays for {len(flat_paths)} leaves)")
    leaves = [data[f"{prefix}/{p}"] for p in flat_paths]
    return jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(x) for x in leaves])


def _paths_of(treedef):
    """Key paths of a treedef's leaves (rebuilt on placeholder leaves)."""
    dummy = jax.tree_util.tree_unflatten(treedef, list(range(treedef.num_leaves)))
    return [p for p, _ in jax.tree_util.tree_flatten_with_path(dummy)[0]]


def load(path: PathLike) -> tuple:
    """Read a file written by :func:`save`: returns ``(model, states, meta)`` with
    ``states`` None if none were saved and ``meta`` a dict of numpy arrays.

    Raises ValueError naming the file if it is not a jaxode file, is of another
    format version, or was written by another jaxode version.
    """
    from jaxode import __version__

    where = (os.fspath(path) if isinstance(path, (str, os.PathLike))
             else str(getattr(path, "name", "<file>")))
    with np.load(path, allow_pickle=False) as data:
        if "__format__" not in data.files or str(data["__format__"]) != FORMAT:
            raise ValueError(f"load: {where} is not a jaxode save file (no __format__ = {FORMAT!r})")
        version = int(data["__format_version__"])
        if version != FORMAT_VERSION:
            raise ValueError(f"load: {where} has format version {version}; this jaxode reads "
                             f"{FORMAT_VERSION}")
        written = str(data["__jaxode_version__"])
        if written != __version__:
            raise ValueError(f"load: {where} was written by jaxode {written}; this is jaxode "
                             f"{__version__} (the stored model structure is version-specific)")
        model = _tree(data, "model", where)
        states = _tree(data, "states", where) if "__states_treedef__" in data.files else None
        meta = {k[len("meta/"):]: data[k] for k in data.files if k.startswith("meta/")}
    return model, states, meta
