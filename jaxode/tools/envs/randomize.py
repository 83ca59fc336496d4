"""Domain randomisation of per-world parameters (fields of :class:`jaxode.Params`).

``randomize={"mu": (0.3, 1.0), "body_mass": ([0.8, 0.05], [1.2, 0.15])}``:
each named field of ``model.params`` is drawn uniformly in ``[lo, hi]`` for
every world at every reset. The draw has the broadcast shape of ``lo`` and
``hi``, then is broadcast onto the field: scalar bounds give ONE value per
world shared by every entry of the field (every geom's mu, so the contact's
min-combined mu is that value), bounds shaped like the field give independent
entries (one mass per body). Units are those of the field (``Params``
docstring).

When ``body_mass`` is drawn and ``body_inertia`` is not, each body's inertia
is scaled by the same factor as its mass (same shape and size, new density),
so the body stays physically consistent.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxode import params_spec
from jaxode.types import Params

# Drawn values must lie in the field's declared range (jaxode.params_spec).


def param_names(params: Params) -> list[str]:
    """The fields of ``params`` that exist in this model (randomisable names)."""
    return [f.name for f in dataclasses.fields(params) if getattr(params, f.name) is not None]


def check_randomize(params: Params, randomize: Optional[dict], where: str = "randomize") -> dict:
    """Validate ``{field: (lo, hi)}`` against ``params``; returns numpy bounds.

    Raises ValueError naming the field: unknown name, not a (lo, hi) pair,
    non-finite bounds, lo > hi, a shape that does not broadcast onto the
    field, or values outside the field's physical range.
    """
    if randomize is None:
        return {}
    if not isinstance(randomize, dict):
        raise ValueError(f"{where}: randomize must be a dict {{params field: (lo, hi)}} "
                         f"(got {type(randomize).__name__})")
    names = param_names(params)
    out = {}
    for name, rng in randomize.items():
        if name not in names:
            raise ValueError(f"{where}: randomize: {name!r} is not a per-world parameter of this "
                             f"model; choose from {names}")
        try:
            lo, hi = rng
            lo = np.asarray(lo, dtype=np.float64)
            hi = np.asarray(hi, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: randomize[{name!r}] must be a pair (lo, hi) of numbers or "
                             f"arrays (got {rng!r})") from None
        field = np.shape(getattr(params, name))
        try:
            shape = np.broadcast_shapes(lo.shape, hi.shape)
            fits = np.broadcast_shapes(shape, field) == field
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{where}: randomize[{name!r}]: bounds of shapes {lo.shape} and "
                             f"{hi.shape} do not broadcast onto the field's shape {field}")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError(f"{where}: randomize[{name!r}]: bounds must be finite (got {rng!r})")
        if np.any(lo > hi):
            raise ValueError(f"{where}: randomize[{name!r}]: lo must be <= hi (got {rng!r})")
        spec = params_spec.SPECS.get(name)
        if spec is not None:
            s = dataclasses.replace(spec, unset=None)  # a drawn value is never "unset"
            if not (np.all(params_spec.allowed(s, lo)) and np.all(params_spec.allowed(s, hi))):
                raise ValueError(f"{where}: randomize[{name!r}]: values must be in "
                                 f"{spec.range_text(False)} (got {rng!r})")
        out[name] = (np.broadcast_to(lo, shape).copy(), np.broadcast_to(hi, shape).copy())
    return out


def randomize_params(key: jax.Array, params: Params, ranges: dict) -> Params:
    """One world's params with the fields in ``ranges`` (from :func:`check_randomize`)
    drawn uniformly; the others are ``params``' own. vmap over ``key`` for a batch."""
    if not ranges:
        return params
    changes = {}
    for i, name in enumerate(sorted(ranges)):
        lo, hi = ranges[name]
        base = getattr(params, name)
        u = jax.random.uniform(jax.random.fold_in(key, i), lo.shape, base.dtype)
        v = jnp.asarray(lo, base.dtype) + u * jnp.asarray(hi - lo, base.dtype)
        changes[name] = jnp.broadcast_to(v, base.shape)
    if "body_mass" in changes and "body_inertia" not in ranges:
        ratio = changes["body_mass"] / params.body_mass
        changes["body_inertia"] = params.body_inertia * ratio[:, None, None]
    return params.replace(**changes)
