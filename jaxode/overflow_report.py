"""The host-side overflow warning: what a rollout, a sweep or an env's batched
step dropped for lack of capacity, and the capacities that would have sufficed.

:func:`warn_overflow` reads the counters a call returned (``State.overflow_pairs``,
``overflow_contacts``, the contacts found per step) on the host: there is no host
callback inside the compiled step. :mod:`jaxode.api`, :func:`jaxode.sweep` and the
envs call it after their compiled calls; :mod:`jaxode.tools.capacity` measures what
a scene needs (:func:`jaxode.needed_capacities`) with the same pair counting.
It depends on the simulation core only (no import of the api or the tools).
"""
from __future__ import annotations

import warnings
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim import kinematics, narrowphase
from jaxode.sim.collision import contact as ct
from jaxode.types import Model, State, Trajectory


def _kind(grp) -> str:
    return f"{ct.GEOM_TYPE_NAMES[grp.type1]}-{ct.GEOM_TYPE_NAMES[grp.type2]}"


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
