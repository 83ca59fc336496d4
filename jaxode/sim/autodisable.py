"""ODE's automatic disabling and enabling of bodies (ODE 0.16 ``util.cpp``).

Runs after collision detection, before anything else of the step, on the
velocities the previous step left (ODE calls it at the start of
``dWorldQuickStep``, when the near callback has made the contact joints):

1. :func:`idle_pass` is ``dInternalHandleAutoDisabling``: for each enabled
   body with the auto-disable flag, ``average_samples > 0`` and at least one
   joint or contact (a body in free flight is never put to sleep, ODE patch
   1586738), the velocities go into a ring buffer of ``average_samples``
   slots; once the buffer has been filled, the body is idle when the squared
   norms of the averaged linear and angular velocities are at most the squared
   thresholds. Idle counts ``steps_left`` down by one and ``time_left`` by dt;
   not idle restarts them from ``idle_steps``/``idle_time``; both <= 0
   disables the body and zeroes its velocities.
2. :func:`island_walk` is the walk of ``dxProcessIslands``: islands start
   only from enabled bodies, and every disabled body reached through a joint
   or contact from one is enabled again (transitively; its countdowns are not
   reset). Here: a reachability fixed point over the step's edges (joints and
   valid contacts between two bodies; the static world links nothing).

The step then treats a disabled body as ODE does a body in no island: its rows
are inactive (an island of disabled bodies is not stepped), it is not
integrated, its velocity and force accumulators are kept.

All of it is masks over every body (static shapes): under ``vmap`` each world
disables its own bodies; a disabled body changes the results, not the work.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.types import AutoDisableState, Contacts, Model, Params, State


def edges(model: Model, contacts: Contacts):
    """(body1, body2, active) of every joint and contact slot of the step
    (body index ``nbody`` = the static world)."""
    b1 = [g.body1 for g in model.joint_groups]
    b2 = [g.body2 for g in model.joint_groups]
    act = [jnp.ones(g.body1.shape, bool) for g in model.joint_groups]
    b1.append(model.geom_body[contacts.geom1])
    b2.append(model.geom_body[contacts.geom2])
    act.append(contacts.valid)
    ints = lambda xs: jnp.concatenate([x.astype(jnp.int32) for x in xs])
    return ints(b1), ints(b2), jnp.concatenate(act)


def idle_pass(model: Model, params: Params, state: State, has_joint: jax.Array, h):
    """``dInternalHandleAutoDisabling``: (enabled, vel, angvel, AutoDisableState)."""
    a = state.auto_disable
    dtype = state.vel.dtype
    nsamp = model.body_auto_disable_samples
    size = a.lvel.shape[1]
    run = (has_joint & state.body_enabled & (params.body_auto_disable > 0) & (nsamp > 0))
    slot = jnp.arange(size)[None, :] == a.counter[:, None]
    write = (run[:, None] & slot)[..., None]
    lbuf = jnp.where(write, state.vel[:, None, :], a.lvel)
    abuf = jnp.where(write, state.angvel[:, None, :], a.avel)
    nxt = a.counter + 1
    full = nxt >= nsamp
    counter = jnp.where(run, jnp.where(full, 0, nxt), a.counter).astype(jnp.int32)
    ready = jnp.where(run, a.ready | full, a.ready)
    # The average as ODE forms it: slot 0, plus slots 1.. in order, times 1/n.
    lavg, aavg = lbuf[:, 0], abuf[:, 0]
    for i in range(1, size):
        more = (i < nsamp)[:, None]
        lavg = jnp.where(more, lavg + lbuf[:, i], lavg)
        aavg = jnp.where(more, aavg + abuf[:, i], aavg)
    r1 = (1.0 / jnp.maximum(nsamp, 1).astype(dtype))[:, None]
    many = (nsamp > 1)[:, None]
    lavg = jnp.where(many, lavg * r1, lavg)
    aavg = jnp.where(many, aavg * r1, aavg)
    lthr = params.body_auto_disable_linear_threshold.astype(dtype)
    athr = params.body_auto_disable_angular_threshold.astype(dtype)
    idle = ready & ~(jm.sq_norm(lavg) > lthr * lthr) & ~(jm.sq_norm(aavg) > athr * athr)
    steps_p = params.body_auto_disable_steps.astype(dtype)
    time_p = params.body_auto_disable_time.astype(dtype)
    steps0 = jnp.where(a.reset, steps_p, a.steps_left)
    time0 = jnp.where(a.reset, time_p, a.time_left)
    steps = jnp.where(run, jnp.where(idle, steps0 - 1, steps_p), steps0)
    tleft = jnp.where(run, jnp.where(idle, time0 - h, time_p), time0)
    off = run & (steps <= 0) & (tleft <= 0)
    vel = jnp.where(off[:, None], 0.0, state.vel).astype(dtype)
    angvel = jnp.where(off[:, None], 0.0, state.angvel).astype(dtype)
    new = AutoDisableState(lvel=lbuf, avel=abuf, counter=counter, ready=ready,
                           steps_left=steps.astype(dtype), time_left=tleft.astype(dtype),
                           reset=jnp.zeros_like(a.reset))
    return state.body_enabled & ~off, vel, angvel, new


def island_walk(nbody: int, enabled: jax.Array, b1, b2, act) -> jax.Array:
    """Enabled after ODE's island walk: every body connected to an enabled body
    through active edges (the world, index ``nbody``, connects nothing)."""
    reach = jnp.concatenate([enabled, jnp.zeros((1,), bool)]).astype(jnp.int32)
    a = act.astype(jnp.int32)

    def body(carry):
        r, _ = carry
        n = r.at[b2].max(r[b1] * a).at[b1].max(r[b2] * a).at[nbody].set(0)
        return n, jnp.any(n != r)

    reach, _ = jax.lax.while_loop(lambda c: c[1], body, (reach, jnp.asarray(True)))
    return reach[:nbody] > 0


def handle(model: Model, params: Params, state: State, contacts: Contacts, dt) -> State:
    """Both passes: the state with ``body_enabled`` for this step, the velocities
    of bodies that went to sleep zeroed, and the bookkeeping advanced."""
    nb = model.nbody
    h = jnp.asarray(dt, state.pos.dtype)
    b1, b2, act = edges(model, contacts)
    hj = jnp.zeros((nb + 1,), jnp.int32).at[b1].max(act.astype(jnp.int32))
    hj = hj.at[b2].max(act.astype(jnp.int32))
    enabled, vel, angvel, adis = idle_pass(model, params, state, hj[:nb] > 0, h)
    enabled = island_walk(nb, enabled, b1, b2, act)
    return state.replace(vel=vel, angvel=angvel, body_enabled=enabled, auto_disable=adis)


def row_mask(enabled: jax.Array, body1: jax.Array, body2: jax.Array) -> jax.Array:
    """Rows that touch an enabled body (after the walk: rows of stepped islands).
    ``enabled`` (nbody,) or world-minor (nbody, W); body indices (R,)."""
    pad = jnp.concatenate([enabled, jnp.zeros((1,) + enabled.shape[1:], bool)])
    return pad[body1] | pad[body2]


def initial(model: Model, dtype) -> tuple:
    """(body_enabled, AutoDisableState) of a fresh world: every body enabled,
    empty buffers, countdowns to start from the params (dBodyCreate)."""
    nb, size = model.nbody, model.auto_disable_buffer
    z = jnp.zeros((nb,), dtype)
    return jnp.ones((nb,), bool), AutoDisableState(
        lvel=jnp.zeros((nb, size, 3), dtype), avel=jnp.zeros((nb, size, 3), dtype),
        counter=jnp.zeros((nb,), jnp.int32), ready=jnp.zeros((nb,), bool),
        steps_left=z, time_left=z, reset=jnp.ones((nb,), bool))
