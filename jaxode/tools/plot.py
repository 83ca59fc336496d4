"""Pictures of parameter sweeps (needs matplotlib: ``pip install jaxode[plot]``).

``heatmap(res, "erp", "cfm", "depth")`` colours a metric over two swept
parameters; ``line(res, "mu", "stop")`` draws it against one (one line per
value of ``hue``). Further swept parameters are fixed with
``where={"mu": 0.5}``. Both return the matplotlib ``Axes``.

Axes, colour bars and legends carry units (``erp``, ``gravity[2] [m/s^2]``,
``depth [m]``: parameters' from :mod:`jaxode.params_spec`, metrics' from
:func:`jaxode.metrics.unit_of`). When the sweep varies more parameters than
the plot shows, the title names the slice (``depth at mu = 0.5``); pass
``title=`` to replace it.

``log``: "auto" (default) puts an axis (and the colour scale) on a log scale
when its values are all positive and span at least a factor of 100; or a
string of the axes to log-scale ("x", "y", "c" for the colours: "xy", "xyc",
""), or True/False for all/none.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from jaxode.tools.sweep import SweepResult

__all__ = ["heatmap", "line"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("jaxode.plot needs matplotlib: pip install 'jaxode[plot]' "
                          "(or pip install matplotlib)") from None
    return plt


def _auto_log(v: np.ndarray) -> bool:
    v = v[np.isfinite(v)]
    return v.size > 0 and bool(np.all(v > 0)) and v.max() / v.min() >= 100.0


def _log_flags(log, data: dict) -> dict:
    """axis letter -> bool, from ``log`` ("auto", bool or a string of letters)."""
    if log == "auto":
        return {k: _auto_log(v) for k, v in data.items()}
    if isinstance(log, bool):
        return {k: log for k in data}
    if not isinstance(log, str) or set(log) - set(data):
        raise ValueError(f"log must be 'auto', a bool or a string of {''.join(data)!r} "
                         f"(got {log!r})")
    return {k: k in log for k in data}


def _axis_values(res: SweepResult, name: str) -> np.ndarray:
    v = np.asarray(res.axes[name])
    if v.ndim != 1:
        raise ValueError(f"{name!r} is swept over arrays of shape {v.shape[1:]}; only scalar "
                         "parameters can be a plot axis")
    return v


def _value_text(v, unit: str) -> str:
    v = np.asarray(v)
    txt = f"{float(v):g}" if v.ndim == 0 else "(" + ", ".join(f"{x:g}" for x in v.ravel()) + ")"
    return f"{txt} {unit}" if unit else txt


def _slice_title(res: SweepResult, metric: str, fixed: dict) -> Optional[str]:
    """``metric at a = 1, b = 2 m`` for the parameters fixed by ``where`` (None if none)."""
    if not fixed:
        return None
    return f"{metric} at " + ", ".join(f"{n} = {_value_text(v, res.unit(n))}"
                                        for n, v in fixed.items())


def _select(res: SweepResult, metric: str, keep: list, where: Optional[dict],
            fixed: Optional[dict] = None) -> np.ndarray:
    """The metric over the grid axes of the ``keep`` parameters (in that order),
    the other swept parameters fixed by ``where`` (their grid values go into
    ``fixed``, name -> value, when given)."""
    if metric not in res.metrics:
        raise ValueError(f"{metric!r} is not a metric of this sweep; metrics: {list(res.metrics)}")
    for name in keep:
        res.axis(name)  # raises for a non-swept name
        _axis_values(res, name)
    arr = res.reshape(metric)
    if arr.ndim != len(res.grid_shape):
        raise ValueError(f"metric {metric!r} is not a scalar per variant "
                         f"(shape {arr.shape[len(res.grid_shape):]})")
    where = dict(where or {})
    index = []
    for name in res.params:
        if name in keep:
            index.append(slice(None))
            continue
        vals = np.asarray(res.axes[name])
        if name not in where:
            raise ValueError(f"the sweep also varies {name!r}: fix it with where={{{name!r}: "
                             f"value}} (values: {vals.tolist()})")
        hit = np.flatnonzero(np.all(np.isclose(vals.reshape(len(vals), -1),
                                               np.ravel(where.pop(name))), axis=1))
        if hit.size == 0:
            raise ValueError(f"where: {name!r} has no value close to the one given "
                             f"(values: {vals.tolist()})")
        index.append(int(hit[0]))
        if fixed is not None:
            fixed[name] = vals[int(hit[0])]
    if where:
        raise ValueError(f"where names parameters that are not swept or are plotted: "
                         f"{sorted(where)}")
    sub = arr[tuple(index)]
    order = [n for n in res.params if n in keep]
    return np.transpose(sub, [order.index(n) for n in keep])


def _edges(v: np.ndarray, log: bool) -> np.ndarray:
    """Cell edges around sorted centres ``v`` (midpoints, in log space if ``log``)."""
    t = np.log10(v) if log else v.astype(np.float64)
    if t.size == 1:
        half = 0.5 if log else (0.5 * abs(t[0]) if t[0] != 0 else 0.5)
        e = np.array([t[0] - half, t[0] + half])
    else:
        mid = 0.5 * (t[1:] + t[:-1])
        e = np.concatenate([[t[0] - (mid[0] - t[0])], mid, [t[-1] + (t[-1] - mid[-1])]])
    return 10.0 ** e if log else e


def heatmap(res: SweepResult, x: str, y: str, metric: str, ax=None, log="auto",
            where: Optional[dict] = None, cmap: str = "viridis", colorbar: bool = True,
            title: Optional[str] = None, **kwargs):
    """Colour ``metric`` over the grid of swept parameters ``x`` and ``y``.

    One cell per grid point (edges halfway between the values, in log space
    for log axes); NaN cells are left blank. Axis and colour-bar labels carry
    units; ``title`` (default: the slice fixed by ``where``, if any) titles
    the axes. ``kwargs`` go to ``pcolormesh``. Needs a full-grid sweep (not
    ``zip=True``).
    """
    plt = _pyplot()
    if res.zipped:
        raise ValueError("heatmap needs a full-grid sweep (zip=False); plot a zip sweep with line")
    if x == y:
        raise ValueError(f"heatmap: x and y must be different parameters (got {x!r} twice)")
    fixed = {}
    z = _select(res, metric, [x, y], where, fixed)  # (nx, ny)
    xv, yv = _axis_values(res, x), _axis_values(res, y)
    ix, iy = np.argsort(xv), np.argsort(yv)
    xv, yv, z = xv[ix], yv[iy], z[np.ix_(ix, iy)]
    flags = _log_flags(log, {"x": xv, "y": yv, "c": z})
    if ax is None:
        _, ax = plt.subplots()
    norm = None
    if flags["c"]:
        from matplotlib.colors import LogNorm
        norm = LogNorm()
    mesh = ax.pcolormesh(_edges(xv, flags["x"]), _edges(yv, flags["y"]),
                         np.ma.masked_invalid(z.T), cmap=cmap, norm=norm, **kwargs)
    ax.set_xscale("log" if flags["x"] else "linear")
    ax.set_yscale("log" if flags["y"] else "linear")
    ax.set_xlabel(res.label(x))
    ax.set_ylabel(res.label(y))
    if colorbar:
        ax.figure.colorbar(mesh, ax=ax, label=res.label(metric))
    title = title if title is not None else _slice_title(res, metric, fixed)
    if title:
        ax.set_title(title)
    return ax


def line(res: SweepResult, x: str, metric: str, ax=None, hue: Optional[str] = None,
         log="auto", where: Optional[dict] = None, marker: str = "o",
         title: Optional[str] = None, **kwargs):
    """Plot ``metric`` against swept parameter ``x``; one line per value of the
    swept parameter ``hue`` (labelled ``hue = value unit``). Axis labels carry
    units; ``title`` (default: the slice fixed by ``where``, if any) titles the
    axes. ``kwargs`` go to ``plot``. For a ``zip=True`` sweep: the variants
    sorted by ``x`` (no hue/where).
    """
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots()
    if res.zipped:
        if hue is not None or where:
            raise ValueError("line: hue and where need a full-grid sweep (zip=False)")
        if metric not in res.metrics:
            raise ValueError(f"{metric!r} is not a metric of this sweep; metrics: "
                             f"{list(res.metrics)}")
        xv = _axis_values(res, x)
        order = np.argsort(xv)
        curves = [(None, xv[order], np.asarray(res.columns[metric])[order])]
    fixed = {}
    if not res.zipped:
        keep = [x] if hue is None else [x, hue]
        data = _select(res, metric, keep, where, fixed)
        xv = _axis_values(res, x)
        order = np.argsort(xv)
        if hue is None:
            curves = [(None, xv[order], data[order])]
        else:
            hv = _axis_values(res, hue)
            curves = [(f"{hue} = {_value_text(hv[j], res.unit(hue))}", xv[order], data[order, j])
                      for j in np.argsort(hv)]
    ally = np.concatenate([c[2] for c in curves])
    flags = _log_flags(log, {"x": xv, "y": ally})
    for label, xs, ys in curves:
        ax.plot(xs, ys, marker=marker, label=label, **kwargs)
    ax.set_xscale("log" if flags["x"] else "linear")
    ax.set_yscale("log" if flags["y"] else "linear")
    ax.set_xlabel(res.label(x))
    ax.set_ylabel(res.label(metric))
    if hue is not None:
        ax.legend()
    title = title if title is not None else _slice_title(res, metric, fixed)
    if title:
        ax.set_title(title)
    return ax
