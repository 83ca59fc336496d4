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
:func:`warn_overflow` says so on the host, once, with the capacities that
would have sufficed (a :class:`CapacityWarning`); it reads the results the
call returned (no host callback inside the compiled step).
"""
from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim import kinematics, narrowphase
from jaxode.sim.collision import contact as ct
from jaxode.types import Model, Params, State, Trajectory, empty_contacts


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


def _kind(grp) -> str:
    return f"{ct.GEOM_TYPE_NAMES[grp.type1]}-{ct.GEOM_TYPE_NAMES[grp.type2]}"


def every_slot(model: Model) -> Model:
    """``model`` with every candidate pair and every contact slot kept (nothing can
    overflow but mesh triangles)."""
    groups = tuple(g.replace(capacity=int(g.geom1.shape[0])) for g in model.pair_groups)
    slots = sum(int(g.geom1.shape[0]) * g.ncontact for g in groups)
    return model.replace(pair_groups=groups, contact_capacity=slots)


def _overlapping_pairs(model: Model, pos, quat) -> dict:
    """The most candidate pairs of each kind (``"box-plane"`` ...) whose AABBs
    overlapped in any of the recorded poses: pos (..., nbody, 3) [m], quat
    (..., nbody, 4) (any leading step / world axes)."""
    if not model.pair_groups:
        return {}

    @jax.jit
    def overlaps(pos, quat):        # one world-step: overlapping pairs per group
        gpos, grot = kinematics.geom_poses(model, pos, quat)
        lo, hi = kinematics.geom_aabbs(model, gpos, grot)
        return [jnp.sum(narrowphase.overlapping(g, lo, hi), dtype=jnp.int32)
                for g in model.pair_groups]

    flat = (jnp.reshape(pos, (-1,) + pos.shape[-2:]), jnp.reshape(quat, (-1,) + quat.shape[-2:]))
    counts = jax.lax.map(lambda pq: overlaps(*pq), flat)
    # (one group per kind of pair: the builder groups candidates by geom types)
    return {_kind(g): int(jnp.max(c)) for g, c in zip(model.pair_groups, counts)}


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


# ------------------------------------------------------- the host-side warning
class CapacityWarning(UserWarning):
    """Contacts or candidate pairs were dropped for lack of capacity
    (``State.overflow_pairs`` / ``overflow_contacts`` grew): the message gives
    the capacities that would have sufficed (:func:`warn_overflow`)."""


_WARNED: set = set()   # (where, scene) already warned about by rollout / sweep / envs


def _host_value(x) -> Optional[np.ndarray]:
    """``x`` as a numpy array, or None when it is traced (inside a user's jit).
    Under an eager ``jax.vmap`` the values are concrete under their batch tracer
    (unwrapped; JAX internals, so anything unexpected is None: no warning)."""
    try:
        from jax._src.interpreters.batching import BatchTracer
    except ImportError:     # JAX moved its tracers: eager vmaps are not watched
        BatchTracer = ()
    while isinstance(x, BatchTracer):
        x = getattr(x, "val", None)
    if x is None or isinstance(x, jax.core.Tracer):
        return None
    return np.asarray(x)


def _counts(x, start) -> Optional[np.ndarray]:
    after = _host_value(x)
    if after is None:
        return None
    return after.astype(np.int64) - (0 if start is None else start.astype(np.int64))


def _message(model: Model, pairs: np.ndarray, contacts: np.ndarray, found, every_step: bool,
             traj, where: str) -> Optional[str]:
    """The warning text, or None when neither counter grew. pairs, contacts: how
    much each world's counters grew; found: contacts found per world (and step),
    host array or None, over every step of the run or (``every_step`` False)
    the last step only; traj: the Trajectory whose poses give the pairs needed,
    or None."""
    pairs, contacts = np.broadcast_arrays(pairs, contacts)
    over = (pairs > 0) | (contacts > 0)
    if not over.any():
        return None
    nworld = over.size
    what = " and ".join(w for w, g in (("candidate pairs", pairs), ("contacts", contacts))
                        if (g > 0).any())
    counts = ", ".join(f"State.{n} +{int(g.max())}" for n, g in
                       (("overflow_pairs", pairs), ("overflow_contacts", contacts)) if (g > 0).any())
    head = (f"jaxode: {where + ': ' if where else ''}{int(over.sum())} of {nworld} world"
            f"{'' if nworld == 1 else 's'} dropped {what} for lack of capacity ({counts} "
            "in the worst world). jaxode keeps every pair's deepest, spread-out contacts and "
            "every body's closest pairs first, but bodies may sink where support was dropped.")
    enough, other = [], []
    if (pairs > 0).any():
        caps = {_kind(g): int(g.capacity) for g in model.pair_groups}
        seen = None
        if traj is not None:
            pos, quat = _host_value(traj.pos), _host_value(traj.quat)
            concrete = not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(model))
            if (concrete and pos is not None and quat is not None
                    and pos.shape[-2:] == (model.nbody, 3) and quat.shape[-2:] == (model.nbody, 4)):
                seen = _overlapping_pairs(model, pos, quat)
        short = {k: v for k, v in (seen or {}).items() if v > caps.get(k, 0)}
        if short:
            enough.append(f"pair_capacity={max(short.values())} (overlapping pairs at most: "
                          + ", ".join(f"{k} {v}, capacity {caps[k]}" for k, v in short.items())
                          + ")")
        else:
            other.append("More candidate pairs overlapped than the pair capacities ("
                         + ", ".join(f"{k} {v}" for k, v in caps.items()) + ")")
    if (contacts > 0).any():
        need = None if found is None or np.size(found) == 0 else int(np.max(found))
        cap = int(model.contact_capacity)
        if need is not None and need > cap:
            enough.append(f"contact_capacity={need}{' or more' if (pairs > 0).any() else ''} "
                          f"(the most contacts one world found in "
                          f"{'a' if every_step else 'the last'} step; the model has {cap})")
        elif need is not None and every_step and (pairs == 0).all():
            other.append(f"No step found more contacts than Model.contact_capacity ({cap}): "
                         "mesh triangles beyond a mesh's max_candidates were dropped "
                         "(WorldBuilder.add_trimesh(max_candidates=))")
        else:
            other.append(f"Contacts beyond Model.contact_capacity ({cap}) or mesh triangles "
                         "beyond a mesh's max_candidates were dropped")
    text = [head]
    if enough:
        text.append("Would have sufficed: " + "; ".join(enough) + ".")
    text += [o + "." for o in other]
    text.append("Rebuild with WorldBuilder.build(contact_capacity=, pair_capacity=); "
                "jaxode.needed_capacities(model, state, n_steps, dt) measures what a scene "
                "needs (docs/COLLISION.md, 'Capacity and overflow').")
    return " ".join(text)


def _scene_key(model: Model, where: str) -> tuple:
    return (where, model.nbody, model.ngeom, int(model.contact_capacity),
            tuple(int(g.capacity) for g in model.pair_groups))


def _warn(model: Model, pairs, contacts, found, every_step: bool, traj, where: str, once: bool,
          stacklevel: int) -> Optional[str]:
    key = _scene_key(model, where)
    if pairs is None or contacts is None or (once and key in _WARNED):
        return None
    msg = _message(model, pairs, contacts, found, every_step, traj, where)
    if msg is None:
        return None
    if once:
        _WARNED.add(key)
        msg += " (Shown once per scene here; the counters keep counting.)"
    warnings.warn(msg, CapacityWarning, stacklevel=stacklevel + 1)
    return msg


def warn_overflow(model: Model, final: State, traj=None, before: Optional[State] = None,
                  where: str = "", once: bool = False, stacklevel: int = 1) -> Optional[str]:
    """Warn (:class:`CapacityWarning`) when ``final``'s overflow counters grew
    from ``before``'s (default: from zero), and return the message (None: nothing
    was dropped, or the values are traced, e.g. inside a ``jax.jit``).

    final: a State, one world or a batch; traj: its rollout's Trajectory
    (optional: then the capacities that would have sufficed are measured over
    every recorded step, pairs included; without it, from ``final.ncontact``,
    the last step's count); before: the state the run started from; where: a
    label for the message. ``once``: only the first warning per ``where`` and
    scene (what :func:`jaxode.rollout`, :func:`jaxode.sweep` and the envs'
    batched steps use); stacklevel: 1 (default) points the warning at the line
    that called this function, 2 at the line that called that one, and so on.

    Call it on what a ``jit(vmap(rollout))`` of your own returned: inside a
    compiled function nothing can reach the host (jaxode adds no host callback
    to the step)."""
    if not isinstance(model, Model):
        raise TypeError(f"warn_overflow: model must be a jaxode.Model (got {type(model).__name__})")
    if not isinstance(final, State):
        raise TypeError(f"warn_overflow: final must be a jaxode.State (got {type(final).__name__})")
    if before is not None and not isinstance(before, State):
        raise TypeError("warn_overflow: before must be None or a jaxode.State "
                        f"(got {type(before).__name__})")
    if traj is not None and not isinstance(traj, Trajectory):
        raise TypeError("warn_overflow: traj must be None or a jaxode.Trajectory "
                        f"(got {type(traj).__name__})")
    starts = [None, None]
    if before is not None:
        starts = [_host_value(before.overflow_pairs), _host_value(before.overflow_contacts)]
        if any(x is None for x in starts):
            return None
    pairs = _counts(final.overflow_pairs, starts[0])
    contacts = _counts(final.overflow_contacts, starts[1])
    found = _host_value(traj.ncontact if traj is not None else final.ncontact)
    return _warn(model, pairs, contacts, found, traj is not None, traj, where, once,
                 stacklevel + 1)
