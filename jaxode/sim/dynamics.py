"""The step's body quantities before and after the joints' own wrenches (ODE 0.16 QuickStep).

- :func:`bodies`: masses, world-frame inertia and its inverse, and the
  forces QuickStep starts from: the accumulators (dBodyAddForce and friends),
  gravity ``m g`` for bodies in gravity mode, and ODE 0.16's implicit
  gyroscopic torque (:func:`jaxode.sim.integrate.gyroscopic_torque`).
- :func:`accelerate`: adds the wrenches joints apply directly (not through
  rows), then the unconstrained accelerations ``M^-1 (f, tau)`` and
  QuickStep's per-body right-hand side ``-(v/h + M^-1 f)`` (as ODE: ``v * (1/h)``).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import integrate
from jaxode.sim import math as jm
from jaxode.sim.records import Bodies, RowSet
from jaxode.types import Model, Params, State


def _pad(x: jax.Array) -> jax.Array:
    """Append the static world's row (zeros)."""
    return jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)], axis=0)


def bodies(model: Model, params: Params, state: State, dt) -> Bodies:
    """The step's :class:`~jaxode.sim.records.Bodies` (accelerations not yet set)."""
    dtype = state.pos.dtype
    h = jnp.asarray(dt, dtype)
    rot = jax.vmap(jm.quat_to_mat)(state.quat)
    inertia = params.body_inertia.astype(dtype)
    inertia_w = integrate.world_inertia(rot, inertia)
    inv_inertia_w = integrate.world_inertia(rot, integrate.inverse3(inertia))
    mass = params.body_mass.astype(dtype)
    force = state.force + (mass * model.body_gravity)[:, None] * params.gravity[None, :]
    torque = state.torque + jax.vmap(integrate.gyroscopic_torque, in_axes=(0, 0, None))(
        inertia_w, state.angvel, h)
    ident = jnp.zeros((1, 4), dtype).at[0, 0].set(1.0)
    nb = state.pos.shape[0]
    return Bodies(h=h, fps=1.0 / h, pos=_pad(state.pos),
                  quat=jnp.concatenate([state.quat, ident], axis=0),
                  vel=_pad(state.vel), angvel=_pad(state.angvel), inv_mass=_pad(1.0 / mass),
                  inertia=inertia_w, inv_inertia=_pad(inv_inertia_w), force=force, torque=torque,
                  acc=jnp.zeros((nb, 6), dtype), rhs=jnp.zeros((nb + 1, 6), dtype))


def accelerate(b: Bodies, rows: RowSet) -> Bodies:
    """Add the joints' direct wrenches; set ``acc`` and QuickStep's ``rhs``."""
    nb = b.force.shape[0]
    force = b.force + rows.joint_wrench[:, :3]
    torque = b.torque + rows.joint_wrench[:, 3:]
    acc_lin = b.inv_mass[:nb, None] * force
    acc_ang = jm.einsum("nij,nj->ni", b.inv_inertia[:nb], torque)
    vel, angvel = b.vel[:nb], b.angvel[:nb]
    rhs = _pad(-jnp.concatenate([vel * b.fps + acc_lin, angvel * b.fps + acc_ang], axis=-1))
    return b.replace(force=force, torque=torque, acc=jnp.concatenate([acc_lin, acc_ang], -1),
                     rhs=rhs)
