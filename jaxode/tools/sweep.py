"""Parameter sweeps: many variants of one scene in one compiled, batched call.

``sweep(model, state, n_steps, dt, grid, metrics)`` runs ``jit(vmap(rollout))``
over every combination of the ``grid`` values (or over paired lists with
``zip=True``), evaluates the ``metrics`` on the device inside the same call,
and returns a :class:`SweepResult` with one row per variant.

Grid keys name fields of :class:`jaxode.Params` (the per-world parameters):

========================= ===================================================
key                       what each value sets
========================= ===================================================
``"erp"``                 the whole field: a scalar is broadcast over the
                          field's shape (``"mu": 0.5`` sets every geom's mu,
                          ``"joint_fmax": 2.0`` every joint axis); an array
                          of the field's shape sets it entirely
``("mu", 2)`` or          one entry: geom 2's mu (index into the field's
``"mu[2]"``               leading axes: body, geom or joint, then axis or
                          component: ``("joint_vel", (1, 0))`` =
                          ``"joint_vel[1,0]"``, ``("gravity", 2)`` = g_z)
========================= ===================================================

Vector-valued targets (``gravity``, a geom's ``fdir1``, a body's
``body_inertia``) take arrays of their shape, not scalars. Fields are
independent: sweeping ``body_mass`` leaves ``body_inertia`` as built (sweep
both, zipped, to scale a body). Whole-field keys
are applied before indexed keys, so ``{"mu": [...], ("mu", 0): [...]}`` sweeps
every geom's mu and geom 0's separately. Values are checked against ODE's
ranges (the builder's rules) before anything is compiled.

Columns are named by the key (``"erp"``, ``"mu[2]"``, ``"joint_vel[1,0]"``)
and by the metric names.
"""
from __future__ import annotations

import builtins
import dataclasses
import math
import os
import re
import sys
import time
from typing import Any, Callable, Mapping, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxode import api, compile_notice, params_spec
from jaxode import overflow_report
from jaxode.tools import sweep_store
from jaxode.tools.metrics import unit_of
from jaxode.types import Model, Params, State, Trajectory

__all__ = ["sweep", "SweepResult", "DEFAULT_MEMORY_BUDGET"]

#: Bytes of device memory one chunk of a sweep may use (estimated), 1 GiB.
DEFAULT_MEMORY_BUDGET = 1 << 30

# Rough factor for a step's temporaries (contact rows, solver data) relative to
# the size of one world's State.
_STEP_TEMP_FACTOR = 16

# ------------------------------------------------------------ parameter ranges
# Ranges, units, unset encodings and entities come from the one declaration of
# every per-world parameter, jaxode.params_spec.
# Trailing axes that are components of one vector/matrix value (no scalar broadcast).
_COMPONENT_NDIM = {s.name: len(s.shape) for s in params_spec.SPECS_LIST if s.shape}
# Leading axes indexed by entity (body, geom, joint).
_ENTITY = {s.name: {"joint_axis": "joint", "material_pair": "material"}.get(s.entity, s.entity)
           for s in params_spec.SPECS_LIST if s.entity != "world"}


def _range_text(field: str) -> str:
    return params_spec.SPECS[field].range_text()


def _check_range(label: str, field: str, values: np.ndarray) -> None:
    spec = params_spec.SPECS.get(field)
    v = np.asarray(values, np.float64)
    bad = ~params_spec.allowed(spec, v) if spec is not None else ~np.isfinite(v)
    if np.any(bad):
        first = float(v[bad].flat[0])
        raise ValueError(f"sweep: {label}: values must be in {_range_text(field)} "
                         f"(got {first!r})")


# ----------------------------------------------------------------- grid keys
@dataclasses.dataclass(frozen=True)
class _Key:
    field: str
    index: tuple  # () = whole field
    name: str     # column name


_KEY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[\s*([-0-9,\s]+)\s*\])?\s*$")


def _valid_fields(params: Params) -> list[str]:
    return [f.name for f in dataclasses.fields(Params) if getattr(params, f.name) is not None]


def _parse_key(key, params: Params) -> _Key:
    valid = _valid_fields(params)
    if isinstance(key, str):
        m = _KEY_RE.match(key)
        if not m:
            raise ValueError(f"sweep: grid key {key!r} is not a parameter name or 'name[i]'; "
                             f"valid names: {valid}")
        field = m.group(1)
        index = () if m.group(2) is None else tuple(int(i) for i in m.group(2).split(",") if i.strip())
    elif isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str):
        field, idx = key
        idx = idx if isinstance(idx, tuple) else (idx,)
        if not all(isinstance(i, (int, np.integer)) for i in idx):
            raise ValueError(f"sweep: grid key {key!r}: the index must be an int or a tuple of "
                             "ints")
        index = tuple(int(i) for i in idx)
    else:
        raise ValueError(f"sweep: grid key {key!r} must be a parameter name (str) or a "
                         f"(name, index) tuple; valid names: {valid}")
    if field not in valid:
        raise ValueError(f"sweep: unknown parameter {field!r}; valid names (fields of "
                         f"jaxode.Params): {valid}")
    shape = np.shape(getattr(params, field))
    if shape and shape[0] == 0:
        raise ValueError(f"sweep: {field!r}: the model has no "
                         f"{'joints' if field.startswith('joint_') else 'entries'} to sweep")
    if len(index) > len(shape):
        raise ValueError(f"sweep: {key!r}: {field} has shape {shape}, so at most "
                         f"{len(shape)} indices")
    for i, (k, n) in enumerate(zip(index, shape)):
        if not 0 <= k < n:
            joint = field.startswith("joint_")
            if i == 0:
                what = _ENTITY.get(field, "joint" if joint else "component")
            else:
                what = "axis" if joint else "component"
            raise ValueError(f"sweep: {key!r}: {what} index {k} out of range [0, {n - 1}] "
                             f"for {field} of shape {shape}")
    name = field if not index else f"{field}[{','.join(str(i) for i in index)}]"
    return _Key(field, index, name)


def _values(key: _Key, raw, params: Params) -> np.ndarray:
    """The key's values as an array (k,) + target shape (float64), validated."""
    target = np.shape(getattr(params, key.field))[len(key.index):]
    ncomp = min(_COMPONENT_NDIM.get(key.field, 0), len(target))  # component axes left
    if isinstance(raw, (str, bytes)) or np.isscalar(raw):
        raise ValueError(f"sweep: {key.name}: give a list of values (got {raw!r})")
    try:
        vals = [np.asarray(v, np.float64) for v in raw]
    except (TypeError, ValueError):
        raise ValueError(f"sweep: {key.name}: values must be numbers or arrays "
                         f"(got {raw!r})") from None
    if not vals:
        raise ValueError(f"sweep: {key.name}: the list of values is empty")
    comp = target[len(target) - ncomp:] if ncomp else ()
    for v in vals:
        if ncomp and v.shape != comp and v.shape != target:
            raise ValueError(f"sweep: {key.name}: each value must be an array of shape "
                             f"{comp or target} (got shape {v.shape})")
        try:
            np.broadcast_to(v, target)
        except ValueError:
            raise ValueError(f"sweep: {key.name}: each value must be a scalar or broadcast to "
                             f"shape {target} (got shape {v.shape})") from None
    # Keep the values as given (scalars stay scalars) when they share a shape.
    same = all(v.shape == vals[0].shape for v in vals)
    arr = np.stack(vals if same else [np.broadcast_to(v, target) for v in vals])
    _check_range(key.name, key.field, arr)
    return arr


# -------------------------------------------------------------------- result
@dataclasses.dataclass
class SweepResult:
    """Outcome of :func:`sweep`, one row per variant.

    columns: name -> numpy array with the variant as the first axis: each
      swept parameter (the requested values, float64; vector-valued ones keep
      their component axes) and each metric.
    params / metrics: column names of the swept parameters (in grid order)
      and of the metrics.
    grid_shape: ``(len(v1), len(v2), ...)`` in grid order (row-major: the
      last parameter varies fastest), or ``(n,)`` for a zip sweep.
    axes: parameter name -> its values along its grid axis.
    zipped: True for a ``zip=True`` sweep (all parameters share axis 0).
    stats: n_variants, n_steps, batch (worlds per compiled call), n_chunks,
      wall_s (seconds, compile included when it happened), world_steps_per_s.
    units: column name -> unit ("m", "kg", "m/s^2", "" dimensionless); see
      :meth:`unit` and :meth:`label`.

    As data: :meth:`to_pandas` (a DataFrame indexed by the swept parameters)
    and :meth:`to_xarray` (a Dataset with one dimension per parameter), with
    the ``data`` extra (``pip install 'jaxode[data]'``: pandas, xarray, tqdm).
    """

    columns: dict
    params: tuple
    metrics: tuple
    grid_shape: tuple
    axes: dict
    zipped: bool
    stats: dict
    units: dict = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return int(np.prod(self.grid_shape))

    @classmethod
    def load(cls, path) -> "SweepResult":
        """The result of a finished ``sweep(..., out=path)`` from the directory alone
        (its stats hold the sweep's sizes, not a wall time). ValueError for a
        directory that is not a sweep's, or one still missing chunks (rerun the
        sweep to finish it)."""
        return sweep_store.load(path)

    def __repr__(self) -> str:
        return (f"SweepResult({len(self)} variants, grid {self.grid_shape} over "
                f"{list(self.params)}, metrics {list(self.metrics)})")

    def axis(self, name: str) -> int:
        """The grid axis of parameter ``name`` (0 for every parameter of a zip sweep)."""
        if name not in self.params:
            raise ValueError(f"{name!r} is not a swept parameter; swept: {list(self.params)}")
        return 0 if self.zipped else self.params.index(name)

    def reshape(self, name: str) -> np.ndarray:
        """Column ``name`` as an array over the grid axes: ``grid_shape + trailing``."""
        if name not in self.columns:
            raise ValueError(f"no column {name!r}; columns: {list(self.columns)}")
        col = self.columns[name]
        return col.reshape(tuple(self.grid_shape) + col.shape[1:])

    def unit(self, name: str) -> str:
        """The unit of column ``name`` ("" when dimensionless or unknown): a
        parameter's from :mod:`jaxode.params_spec`, a metric's from
        :func:`jaxode.metrics.unit_of` or ``sweep(units=...)``."""
        if name not in self.columns:
            raise ValueError(f"no column {name!r}; columns: {list(self.columns)}")
        return self.units.get(name) or ""

    def label(self, name: str) -> str:
        """``name [unit]`` (just ``name`` when dimensionless), for axes and tables."""
        u = self.unit(name)
        return f"{name} [{u}]" if u else name

    def _flat_columns(self, names) -> dict:
        """name -> 1-D column; array-valued columns split into ``name[i]`` / ``name[i,j]``."""
        flat = {}
        for name in names:
            col = np.asarray(self.columns[name])
            if col.ndim == 1:
                flat[name] = col
                continue
            comps = col.reshape(col.shape[0], -1)
            for j, idx in enumerate(np.ndindex(*col.shape[1:])):
                flat[f"{name}[{','.join(str(i) for i in idx)}]"] = comps[:, j]
        return flat

    def _index_values(self, name: str) -> list:
        """A parameter's values along its grid axis, hashable: floats, or tuples of
        floats for vector-valued parameters."""
        v = np.asarray(self.axes[name])
        if v.ndim == 1:
            return v.tolist()
        return [tuple(np.ravel(row).tolist()) for row in v]

    def to_pandas(self, index: bool = True):
        """The table as a ``pandas.DataFrame`` (needs the ``data`` extra:
        ``pip install 'jaxode[data]'``).

        ``index=True``: one row per variant, indexed by the swept parameters (a
        ``MultiIndex`` with one level per parameter, in grid order, or a plain
        ``Index`` for one parameter; a vector-valued parameter's level holds
        tuples), one column per metric, so ``df.loc[(0.2, 1e-5)]`` or
        ``df.xs(0.2, level="erp")`` select and ``df["depth"].unstack()`` makes a
        2-D table. ``index=False``: a flat table with the parameters as columns
        too. Array-valued columns are split into one column per component,
        ``name[i]``. Units (see :meth:`unit`) are in ``df.attrs["units"]``.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("SweepResult.to_pandas needs pandas: pip install 'jaxode[data]' "
                              "(or pip install pandas)") from None
        units = {n: self.unit(n) for n in self.columns}
        if not index:
            df = pd.DataFrame(self._flat_columns(list(self.params) + list(self.metrics)))
        else:
            if self.zipped:
                arrays = [self._index_values(n) for n in self.params]
                idx = (pd.MultiIndex.from_arrays(arrays, names=list(self.params))
                       if len(arrays) > 1 else pd.Index(arrays[0], name=self.params[0],
                                                     tupleize_cols=False))
            else:
                levels = [self._index_values(n) for n in self.params]
                idx = (pd.MultiIndex.from_product(levels, names=list(self.params))
                       if len(levels) > 1 else pd.Index(levels[0], name=self.params[0],
                                                        tupleize_cols=False))
            df = pd.DataFrame(self._flat_columns(self.metrics), index=idx)
        df.attrs["units"] = units
        df.attrs["stats"] = dict(self.stats)
        return df

    def to_xarray(self):
        """The sweep as an ``xarray.Dataset`` (needs the ``data`` extra:
        ``pip install 'jaxode[data]'``).

        A full grid has one dimension per swept parameter (named by it, its
        values as the coordinate; a vector-valued parameter's dimension counts
        its values 0, 1, ... and the coordinate ``<name>_value`` holds them);
        a zip sweep has one dimension ``"variant"`` with the parameters as
        coordinates along it. Each metric is a data variable over those
        dimensions (array-valued metrics add ``<metric>_dim0``, ...). Every
        variable's ``attrs["units"]`` holds its unit (see :meth:`unit`), and
        parameters carry ``attrs["description"]`` from :mod:`jaxode.params_spec`;
        ``ds.attrs`` holds the run's ``stats``.
        """
        try:
            import xarray as xr
        except ImportError:
            raise ImportError("SweepResult.to_xarray needs xarray: pip install 'jaxode[data]' "
                              "(or pip install xarray)") from None

        def attrs(name):
            a = {"units": self.unit(name)}
            spec = params_spec.SPECS.get(_field_of(name))
            if name in self.params and spec is not None:
                a["description"] = spec.doc
            return a

        coords = {}
        if self.zipped:
            dims = ("variant",)
            coords["variant"] = np.arange(len(self))
            for n in self.params:
                v = np.asarray(self.columns[n])
                coords[n] = (dims + tuple(f"{n}_dim{i}" for i in range(v.ndim - 1)), v, attrs(n))
        else:
            dims = tuple(self.params)
            for n in self.params:
                v = np.asarray(self.axes[n])
                if v.ndim == 1:
                    coords[n] = ((n,), v, attrs(n))
                else:
                    coords[n] = np.arange(len(v))
                    coords[f"{n}_value"] = ((n,) + tuple(f"{n}_dim{i}" for i in range(v.ndim - 1)),
                                            v, attrs(n))
        data = {}
        for m in self.metrics:
            arr = self.reshape(m)
            extra = tuple(f"{m}_dim{i}" for i in range(arr.ndim - len(self.grid_shape)))
            data[m] = (dims + extra, arr, attrs(m))
        return xr.Dataset(data, coords=coords, attrs={f"sweep_{k}": v for k, v in self.stats.items()})


def _field_of(name: str) -> str:
    """The Params field of a column name (``"mu[2]"`` -> ``"mu"``)."""
    return name.split("[", 1)[0].strip()


# ------------------------------------------------------------------ running
def _tree_nbytes(tree) -> int:
    return int(sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize
                   for x in jax.tree.leaves(tree)))


def _batch_size(n: int, chunk_size, memory_budget, state: State, params: Params,
                n_steps: int) -> int:
    """Worlds per compiled call: ``chunk_size`` if given, else the bucket size
    (1, 2, 3, 4, 6, 8, 12, ...: at most a third of a call is padding) that
    holds all ``n`` variants, capped by the memory budget."""
    if chunk_size is not None:
        if not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ValueError(f"sweep: chunk_size must be an integer >= 1 (got {chunk_size!r})")
        return int(chunk_size)
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    if not isinstance(budget, (int, np.integer)) or budget < 1:
        raise ValueError(f"sweep: memory_budget must be an integer >= 1 byte (got {budget!r})")
    # One world: the trajectory (one entry per step; its fields mirror the
    # State's, plus scalars), the step's temporaries and its parameters.
    per_step = sum(_tree_nbytes(getattr(state, f.name)) if hasattr(state, f.name)
                   else np.dtype(state.pos.dtype).itemsize for f in dataclasses.fields(Trajectory))
    per_world = (n_steps * per_step + _STEP_TEMP_FACTOR * _tree_nbytes(state)
                 + _tree_nbytes(params))
    cap = max(1, int(budget) // per_world)
    return min(_bucket(n), cap)


def _bucket(n: int) -> int:
    """The smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^k) >= n."""
    p = 1 << max(0, (n - 1).bit_length())
    return 3 * p // 4 if p >= 4 and 3 * p // 4 >= n else p


def _run_batch(model: Model, state: State, dt, params: Params, n_steps: int,
               metric_items: tuple):
    """Rollouts of a batch of variants (params with a leading batch axis) and
    their metrics (jitted below)."""
    def one(p):
        final, traj = api._rollout(model, state, p, dt, n_steps=n_steps)
        m = model.replace(params=p)
        metrics = {name: jnp.asarray(fn(m, traj, final)) for name, fn in metric_items}
        # what the overflow warning reads on the host (not the trajectories)
        return metrics, (final.overflow_pairs, final.overflow_contacts, jnp.max(traj.ncontact))
    return jax.vmap(one)(params)


_run_batch_jit = jax.jit(_run_batch, static_argnames=("n_steps", "metric_items"))


class _Progress:
    """Progress report: a user callback, tqdm when installed, else lines on stderr."""

    def __init__(self, mode, total: int, n_chunks: int):
        self.total, self.t0 = total, time.perf_counter()
        self.callback = mode if callable(mode) and not isinstance(mode, bool) else None
        self.on = self.callback is None and (mode is True or (mode is None and n_chunks > 1))
        self.bar, self.first = None, None
        if self.on:
            try:
                from tqdm.auto import tqdm
                self.bar = tqdm(total=total, unit="variant", desc="sweep")
            except ImportError:
                self.bar = None

    def update(self, done: int, added: int) -> None:
        if self.callback is not None:
            self.callback(done, self.total)
        elif self.bar is not None:
            self.bar.update(added)
        elif self.on:
            now = time.perf_counter()
            if self.first is None:  # the first chunk also paid for compilation
                self.first = (now, done)
                left = ""
            else:
                rate = (done - self.first[1]) / max(now - self.first[0], 1e-9)
                left = f", ~{(self.total - done) / rate:.0f} s left"
            print(f"sweep: {done}/{self.total} variants ({100 * done / self.total:.0f}%), "
                  f"{now - self.t0:.1f} s elapsed{left}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _chunks_of_process(n_chunks: int, on_disk: set, n_proc: int, me: int) -> list:
    """The chunks process ``me`` of ``n_proc`` delivers, in order.

    One process: all. Several (``jax.distributed``): a chunk some process finds in
    its ``out`` directory belongs to the lowest such process (so a shared or a
    per-host directory both work), the missing ones are dealt round-robin; every
    process agrees because they exchange which chunks they hold.
    """
    if n_proc == 1:
        return list(range(n_chunks))
    held = np.zeros(n_chunks, bool)
    held[list(on_disk)] = True
    masks = np.asarray(_allgather(held)).reshape(n_proc, n_chunks)
    have = masks.any(axis=0)
    owner = np.where(have, masks.argmax(axis=0), -1)
    missing = np.flatnonzero(~have)
    owner[missing] = np.arange(len(missing)) % n_proc
    return [int(c) for c in np.flatnonzero(owner == me)]


def _allgather(tree):
    """Every process's ``tree`` stacked on a new leading axis (process order)."""
    from jax.experimental import multihost_utils
    try:
        return multihost_utils.process_allgather(tree)
    except Exception as e:  # noqa: BLE001 - the backend's error, explained
        raise RuntimeError(
            f"sweep: {jax.process_count()} processes (jax.distributed) must exchange their "
            f"chunks, and the collective failed ({type(e).__name__}: {e}). On CPU, enable "
            "collectives before jax.distributed.initialize(): jax.config.update("
            "'jax_cpu_collectives_implementation', 'gloo')") from e


def _record_shapes(model, state, dt_arr, params, full, batch, n_steps, metric_items) -> dict:
    """A zero chunk record of the right shapes and dtypes (traced, not run), for a
    process that delivers no chunk of a distributed sweep."""
    chunk = params.replace(**{f: jnp.asarray(v[:1].repeat(batch, 0)) for f, v in full.items()})
    shapes = jax.eval_shape(lambda p: _run_batch_jit(model, state, dt_arr, p, n_steps=n_steps,
                                                     metric_items=metric_items), chunk)
    res, (pairs, contacts, found) = jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), shapes)
    return {"metrics": res, "drops": {"pairs": pairs, "contacts": contacts, "found": found}}


def _gather_records(records: dict, template: dict, n_chunks: int, computed: int):
    """Every process's chunk records, on every process: each sends its own (padded
    to the largest count with copies of ``template``, index -1)."""
    n_mine = np.asarray(_allgather(np.asarray([len(records), computed], np.int64)))
    k = int(n_mine[:, 0].max())
    order = sorted(records)
    idx = np.full(k, -1, np.int64)
    idx[:len(order)] = order
    rows = [records[c] for c in order] + [template] * (k - len(order))
    stacked = jax.tree.map(lambda *xs: np.stack(xs), *rows) if k else None
    got_idx, got = _allgather((idx, stacked))
    got_idx = np.asarray(got_idx)
    out = {}
    for p in range(got_idx.shape[0]):
        for j, c in enumerate(got_idx[p]):
            if c >= 0:
                out[int(c)] = jax.tree.map(lambda a: np.asarray(a)[p, j], got)
    missing = sorted(set(range(n_chunks)) - set(out))
    if missing:
        raise RuntimeError(f"sweep: after the exchange chunks {missing[:5]} are missing "
                           "(processes disagree on the sweep: did every process call it with "
                           "the same arguments?)")
    return out, int(n_mine[:, 1].sum())


def sweep(model: Model, state: State, n_steps: int, dt: float,
          grid: Mapping[Any, Any], metrics: Mapping[str, Callable], zip: bool = False,
          chunk_size: Optional[int] = None, progress: Union[None, bool, Callable] = None,
          memory_budget: Optional[int] = None,
          units: Optional[Mapping[str, str]] = None,
          out: Union[None, str, os.PathLike] = None) -> SweepResult:
    """Roll out one scene for every variant of its parameters; evaluate ``metrics``.

    model, state: the scene and ONE world's initial state (``jaxode.init(model)``).
    n_steps, dt: rollout length and step [s], shared by all variants.
    grid: parameter key -> list of values (see the module docstring for keys:
      ``"erp"``, ``("mu", 2)`` / ``"mu[2]"`` ...). Full grid (every combination,
      the last key varying fastest), or with ``zip=True`` the i-th values of
      all keys together (equal lengths).
    metrics: column name -> ``fn(model, traj, final) -> scalar`` (see
      :mod:`jaxode.metrics`), evaluated inside the compiled call, so only the
      metrics come back from the device, never the trajectories.
    chunk_size: worlds per compiled call (the batch it is compiled for; the
      last or only chunk is padded with copies of the last variant). Default:
      the smallest of 1, 2, 3, 4, 6, 8, 12, 16, ... that holds every variant
      (so a sweep of another size often reuses the compiled function), capped
      by ``memory_budget`` bytes (default :data:`DEFAULT_MEMORY_BUDGET`, 1 GiB)
      estimated per world from its trajectory (n_steps entries), its State (x16
      for a step's temporaries) and its Params. Every chunk runs the same
      compiled function, and so does any later sweep of the same model, state
      shapes, n_steps, metric functions and batch (all Params fields travel
      batched, whichever are swept).
    progress: None: report on stderr (a tqdm bar when tqdm is installed, else
      one line per chunk) when there is more than one chunk; True/False:
      always/never; a callable gets ``(variants_done, total)`` after each
      chunk. The first call of a new shape also prints one line "jaxode:
      compiling the sweep ..." when its compilation lasts over 2 s (see
      :mod:`jaxode.compile_notice`; ``progress=False`` silences it too).
    units: metric name -> unit for the tables and plot labels, where
      :func:`jaxode.metrics.unit_of` does not know it (your own metrics; or
      set ``fn.unit``). Parameters' units come from :mod:`jaxode.params_spec`.
    out: a directory that keeps the sweep (:mod:`jaxode.tools.sweep_store`):
      each chunk is written there, atomically, as it finishes, with the grid,
      the scene's digest and the metric names. Calling ``sweep`` again with the
      same arguments and ``out`` computes only the chunks missing (a killed or
      preempted sweep resumes; a finished one just loads) and returns the same
      table bit for bit; a call that describes another sweep (scene, grid,
      n_steps, dt, metric names, chunk_size) is refused with ValueError naming
      the difference. ``SweepResult.load(out)`` reads a finished one alone.

    Several processes (``jax.distributed.initialize`` before, every process
    calling ``sweep`` with the same arguments): the chunks are dealt over the
    processes, exchanged (a collective; on CPU set
    ``jax_cpu_collectives_implementation`` to ``"gloo"`` before initialising),
    and every process returns the whole table, bit for bit the one-process
    result on the same backend. With ``out`` (shared or one per host) the
    chunks already on any process's disk are not computed again.

    Returns a :class:`SweepResult` (``stats`` holds the batch, the number of
    chunks, how many were computed in this call and how many loaded from
    ``out``, ``process_count``, the wall time and world-steps/s of the chunks
    computed). Raises ValueError for an unknown
    parameter (listing the valid names), a value outside ODE's range (naming
    the key and the range), unequal zip lengths, bad sizes.
    """
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"sweep: n_steps must be an integer >= 1 (got {n_steps!r})")
    api._check_dt(dt)
    params = model.params
    if np.ndim(params.body_mass) != 1 or np.ndim(state.pos) != 2:
        raise ValueError("sweep: pass the model's own params and ONE world's state "
                         "(no batch axis); the sweep makes the batch")
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError("sweep: grid must be a non-empty dict {parameter: [values, ...]}")
    if not isinstance(metrics, Mapping) or not metrics:
        raise ValueError("sweep: metrics must be a non-empty dict {name: fn(model, traj, final)}")
    for name, fn in metrics.items():
        if not isinstance(name, str) or not callable(fn):
            raise ValueError(f"sweep: metrics: {name!r} must map a str name to a callable "
                             "fn(model, traj, final)")
    units = dict(units or {})
    for name, u in units.items():
        if name not in metrics or not isinstance(u, str):
            raise ValueError(f"sweep: units: {name!r}: {u!r} must map a metric name (one of "
                             f"{list(metrics)}) to a unit string")

    keys = [_parse_key(k, params) for k in grid]
    names = [k.name for k in keys]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep: a parameter appears twice in the grid: {names}")
    clash = set(names) & set(metrics)
    if clash:
        raise ValueError(f"sweep: metric names {sorted(clash)} clash with parameter columns")
    values = [_values(k, raw, params) for k, raw in builtins.zip(keys, grid.values())]

    lengths = [len(v) for v in values]
    if zip:
        if len(set(lengths)) != 1:
            raise ValueError("sweep: zip=True needs lists of equal length (got "
                             + ", ".join(f"{n}: {m}" for n, m in builtins.zip(names, lengths))
                             + ")")
        grid_shape = (lengths[0],)
        index = [np.arange(lengths[0])] * len(keys)
    else:
        grid_shape = tuple(lengths)
        index = list(np.indices(grid_shape).reshape(len(keys), -1))
    n = int(np.prod(grid_shape))
    columns = {k.name: v[i] for k, v, i in builtins.zip(keys, values, index)}

    # Per-field arrays (n, *field shape): whole-field keys first, then entries.
    swept = {}
    order = sorted(range(len(keys)), key=lambda j: len(keys[j].index) > 0)
    for j in order:
        k = keys[j]
        base = swept.get(k.field)
        if base is None:
            default = np.asarray(getattr(params, k.field), np.float64)
            base = np.broadcast_to(default, (n,) + default.shape).copy()
        col = columns[k.name]  # (n,) + value shape, right-aligned with the target's
        target = base[(slice(None),) + k.index].shape
        base[(slice(None),) + k.index] = col.reshape(
            (n,) + (1,) * (len(target) - col.ndim) + col.shape[1:])
        swept[k.field] = base
    if "joint_lo_stop" in swept or "joint_hi_stop" in swept:
        lo = swept.get("joint_lo_stop", np.asarray(params.joint_lo_stop, np.float64)[None])
        hi = swept.get("joint_hi_stop", np.asarray(params.joint_hi_stop, np.float64)[None])
        if np.any(hi < lo):
            raise ValueError("sweep: joint_hi_stop must be >= joint_lo_stop for every joint "
                             "axis and variant")
    if "body_inertia" in swept:
        mats = swept["body_inertia"].reshape((-1, 3, 3))
        if (not np.allclose(mats, np.swapaxes(mats, -1, -2), rtol=1e-9, atol=0)
                or np.any(np.linalg.eigvalsh(mats) <= 0)):
            raise ValueError("sweep: body_inertia: every body's inertia must be a symmetric, "
                             "positive definite 3x3 matrix [kg m^2] in every variant")

    # Every field travels batched (swept or not), so the compiled function depends
    # only on the scene, n_steps, the metric functions and the batch size: a
    # later sweep over other parameters reuses it.
    full = {}
    for f in _valid_fields(params):
        default = np.asarray(getattr(params, f))
        v = swept.get(f)
        full[f] = (np.broadcast_to(default, (n,) + default.shape) if v is None
                   else v.astype(default.dtype))
    metric_items = tuple((name, fn) for name, fn in metrics.items())
    batch = _batch_size(n, chunk_size, memory_budget, state, params, n_steps)
    if out is not None and chunk_size is None:
        # a resumed sweep keeps the chunks it was cut into
        batch = sweep_store.stored_batch(out) or batch
    n_chunks = -(-n // batch)
    dt_arr = jnp.asarray(dt, state.pos.dtype)

    if zip:
        axes = {k.name: columns[k.name] for k in keys}
    else:
        axes = {k.name: v for k, v in builtins.zip(keys, values)}
    col_units = {k.name: params_spec.SPECS[k.field].unit if k.field in params_spec.SPECS else ""
                 for k in keys}
    for name, fn in metric_items:
        col_units[name] = units.get(name, unit_of(fn) or "")

    store = None
    if out is not None:
        manifest = dict(format=sweep_store.FORMAT,
                        scene=sweep_store.scene_digest(model, state, n_steps, dt),
                        n_steps=n_steps, dt=float(dt), params=list(names),
                        grid_shape=list(grid_shape), zip=bool(zip),
                        grid=sweep_store.grid_digest(full), metrics=list(metrics),
                        batch=batch, n_chunks=n_chunks, n_variants=n, units=col_units)
        store = sweep_store.Store.open(out, manifest, columns, axes)
    n_proc, me = jax.process_count(), jax.process_index()
    on_disk = store.done() if store is not None else set()
    mine = _chunks_of_process(n_chunks, on_disk, n_proc, me)

    def compute(c):
        # Variants c*batch ... (padded with the last variant up to the batch size).
        rows = np.minimum(np.arange(c * batch, (c + 1) * batch), n - 1)
        chunk = params.replace(**{f: jnp.asarray(v[rows]) for f, v in full.items()})
        with compile_notice.notice(f"the sweep ({batch} worlds x {n_steps} steps, "
                                   f"{model.nbody} bod{'y' if model.nbody == 1 else 'ies'})",
                                   enabled=progress is not False):
            res, (pairs, contacts, found) = _run_batch_jit(
                model, state, dt_arr, chunk, n_steps=n_steps, metric_items=metric_items)
        return {"metrics": jax.tree.map(np.asarray, res),
                "drops": {"pairs": np.asarray(pairs), "contacts": np.asarray(contacts),
                          "found": np.asarray(found)}}

    report = _Progress(progress, sum(min(batch, n - c * batch) for c in mine), len(mine))
    records, computed = {}, 0
    t0 = time.perf_counter()
    try:
        done = 0
        for c in mine:
            rec = store.read(c) if c in on_disk else None
            if rec is None:
                rec = compute(c)
                computed += 1
                if store is not None:
                    store.write(c, rec)
            records[c] = rec
            done += min(batch, n - c * batch)
            report.update(done, min(batch, n - c * batch))
    finally:
        report.close()
    if n_proc > 1:
        template = (records[mine[0]] if mine else
                    _record_shapes(model, state, dt_arr, params, full, batch, n_steps,
                                   metric_items))
        gathered, n_computed = _gather_records(records, template, n_chunks, computed)
        for c, rec in gathered.items():
            if (c not in records and store is not None and c not in on_disk
                    and not os.path.exists(store.chunk_path(c))):  # a per-host directory
                store.write(c, rec)
        records = {**gathered, **records}
        computed = n_computed
    wall = time.perf_counter() - t0
    columns, (pairs, contacts, found) = sweep_store.assemble(n, n_chunks, list(metrics), columns,
                                                             records)
    start = (np.asarray(state.overflow_pairs), np.asarray(state.overflow_contacts))
    overflow_report._warn(model, pairs - start[0], contacts - start[1], found, True, None, "sweep",
                   once=True, stacklevel=2)

    steps_run = min(computed * batch, n) * n_steps
    stats = dict(n_variants=n, n_steps=n_steps, batch=batch, n_chunks=n_chunks, wall_s=wall,
                 world_steps_per_s=steps_run / wall if wall > 0 else float("inf"),
                 chunks_computed=computed, chunks_loaded=n_chunks - computed,
                 process_count=n_proc)
    if out is not None:
        stats["out"] = os.fspath(out)
    return SweepResult(columns=columns, params=tuple(names), metrics=tuple(metrics),
                       grid_shape=grid_shape, axes=axes, zipped=bool(zip), stats=stats,
                       units=col_units)

