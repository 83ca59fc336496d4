"""What capacities a scene needs, measured over a trial rollout.

A model's capacities are static (``WorldBuilder.build(contact_capacity=,
pair_capacity=)``, docs/COLLISION.md "Capacity and overflow"). Too small, and
contacts are dropped (counted in ``State.overflow_*``; the bodies sink where
support is lost); too large, and every step pays for empty slots: a tiled
batch of ``boxes`` ran 1.4x faster with the 32 contact slots it uses at rest
than with the builder's default 72 (bench/RESULTS.md, session 22), less since
``Model.slot_sizes`` builds a batch's contact rows for only the slots in use
(at a coarse size, and for the union over the batch's worlds).
:func:`needed_capacities` runs the scene with every slot available and reports
the most contacts and overlapping pairs any world met in any step.

When a rollout, a sweep or an env's batched step did overflow,
:func:`jaxode.warn_overflow` (:mod:`jaxode.overflow_report`) says so on the
host, once, with the capacities that would have sufficed.
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxode.overflow_report import CapacityWarning, _kind, _overlapping_pairs, warn_overflow
from jaxode.types import Model, Params, State, empty_contacts

__all__ = ["Capacities", "needed_capacities", "every_slot", "CapacityWarning", "warn_overflow"]


@dataclasses.dataclass(frozen=True)
class Capacities:
    """The capacities a trial rollout needed (:func:`needed_capacities`).

    contact_capacity: the most contacts one world found in one step (every
    pair's contacts up to its ``max_contacts``); pair_capacity: the most
    overlapping candidate pairs of one kind (``build``'s ``pair_capacity``
    applies to every kind); pairs: that count per kind, ``"box-plane"`` etc.;
    model_contact_capacity, model_pairs: the capacities of the model measured;
    worlds, steps: what was run. triangles_overflow: mesh triangles beyond a
    mesh's ``max_candidates`` (a capacity of the mesh itself, not of ``build``).
    """

    contact_capacity: int
    pair_capacity: int
    pairs: dict
    model_contact_capacity: int
    model_pairs: dict
    worlds: int
    steps: int
    triangles_overflow: int

    def build_args(self, margin: float = 1.25) -> dict:
        """``WorldBuilder.build`` keywords: the measured needs times ``margin``
        (>= 1; for impacts and piles the trial did not see), rounded up."""
        if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 1):
            raise ValueError(f"margin must be a finite number >= 1 (got {margin!r})")
        return dict(contact_capacity=int(math.ceil(self.contact_capacity * margin)),
                    pair_capacity=max(1, int(math.ceil(self.pair_capacity * margin))))


def every_slot(model: Model) -> Model:
    """``model`` with every candidate pair and every contact slot kept (nothing can
    overflow but mesh triangles)."""
    groups = tuple(g.replace(capacity=int(g.geom1.shape[0])) for g in model.pair_groups)
    slots = sum(int(g.geom1.shape[0]) * g.ncontact for g in groups)
    return model.replace(pair_groups=groups, contact_capacity=slots)


def needed_capacities(model: Model, state: State, n_steps: int, dt,
                      params: Params = None) -> Capacities:
    """Roll ``state`` (one world, or a batch with a leading world axis; ``params``
    alike, default ``model.params``) ``n_steps`` steps of ``dt`` [s] with every
    slot available (:func:`every_slot`) and return the most contacts and
    overlapping pairs met (:class:`Capacities`; ``build_args()`` gives the
    keywords for ``WorldBuilder.build``). The trial's trajectory is the scene's
    own wherever the model's capacities did not overflow. Run it over the
    situations the model will meet (drops, piles, the reset distribution)."""
    from jaxode import api

    if not isinstance(state, State):
        raise TypeError(f"state must be a jaxode.State (got {type(state).__name__})")
    if not isinstance(n_steps, int) or isinstance(n_steps, bool) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1 (got {n_steps!r})")
    batched = state.pos.ndim == 3
    params = model.params if params is None else params
    if not isinstance(params, Params):
        raise TypeError(f"params must be jaxode.Params (got {type(params).__name__})")
    params_batched = jnp.ndim(params.body_mass) == 2
    if params_batched and not batched:
        raise ValueError("params carry a world axis (body_mass shape "
                         f"{tuple(jnp.shape(params.body_mass))}) but state is one world "
                         f"(pos shape {tuple(state.pos.shape)})")
    full = every_slot(model)
    lead = state.pos.shape[:1] if batched else ()
    contacts = empty_contacts(full.contact_capacity, state.pos.dtype)
    contacts = jax.tree.map(lambda x: jnp.broadcast_to(x, lead + x.shape), contacts)
    state = state.replace(contacts=contacts, overflow_pairs=jnp.zeros_like(state.overflow_pairs),
                          overflow_contacts=jnp.zeros_like(state.overflow_contacts))

    def one(s, p):
        final, traj = api.rollout(full, s, n_steps, dt, params=p)
        return final.overflow_contacts, traj.ncontact, traj.pos, traj.quat

    if batched:
        run = jax.vmap(one, in_axes=(0, 0 if params_batched else None))
        tri, ncontact, pos, quat = run(state, params)
    else:
        tri, ncontact, pos, quat = one(state, params)

    pairs = _overlapping_pairs(full, pos, quat)
    return Capacities(
        contact_capacity=int(jnp.max(ncontact)),
        pair_capacity=max(pairs.values(), default=0),
        pairs=pairs,
        model_contact_capacity=int(model.contact_capacity),
        model_pairs={_kind(g): int(g.capacity) for g in model.pair_groups},
        worlds=int(lead[0]) if batched else 1, steps=n_steps,
        triangles_overflow=int(jnp.max(tri)))
