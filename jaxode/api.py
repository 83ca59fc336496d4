"""Public entry points: init, step, rollout, and ODE's force accumulators."""
from __future__ import annotations

import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp

from jaxode import math as jm
from jaxode.pipeline import guarded_step
from jaxode.types import Contacts, Model, Params, State, Trajectory


def init(model: Model) -> State:
    """The initial state of the scene as built: ``model.init_pos``, ``init_quat``,
    ``init_vel`` and ``init_angvel``, with zero accumulators, time and contacts."""
    ini = {k: getattr(model, "init_" + k) for k in ("pos", "quat", "vel", "angvel")}
    missing = [k for k, v in ini.items() if v is None]
    if missing:
        raise ValueError(f"model has no initial state (init_{missing[0]} is None): build it with "
                         "WorldBuilder.build(), or set init_pos, init_quat, init_vel and "
                         "init_angvel with model.replace")
    dtype = model.params.body_mass.dtype
    f = lambda x: jnp.asarray(x, dtype)
    cap, nb = model.contact_capacity, model.nbody
    zi = jnp.zeros((cap,), jnp.int32)
    contacts = Contacts(pos=jnp.zeros((cap, 3), dtype), normal=jnp.zeros((cap, 3), dtype),
                        depth=jnp.zeros((cap,), dtype), geom1=zi, geom2=zi, friction=zi,
                        valid=jnp.zeros((cap,), bool), force=jnp.zeros((cap, 3), dtype))
    return State(pos=f(ini["pos"]), quat=f(ini["quat"]), vel=f(ini["vel"]), angvel=f(ini["angvel"]),
                 force=jnp.zeros((nb, 3), dtype), torque=jnp.zeros((nb, 3), dtype),
                 time=jnp.zeros((), dtype), contacts=contacts, ncontact=jnp.zeros((), jnp.int32),
                 overflow_pairs=jnp.zeros((), jnp.int32), overflow_contacts=jnp.zeros((), jnp.int32),
                 nonfinite=jnp.zeros((), bool),
                 joint_feedback=jnp.zeros((model.njoint, 4, 3), dtype))


def _check_dt(dt) -> None:
    if isinstance(dt, (int, float)) and not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a finite number > 0 seconds (got {dt!r})")
    try:
        v = float(dt)  # concrete arrays
    except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return
    except Exception:  # noqa: BLE001 - any tracer
        return
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"dt must be a finite number > 0 seconds (got {v!r})")


@jax.jit
def _step(model: Model, state: State, params: Params, dt) -> State:
    return guarded_step(model, state, params, dt)


def step(model: Model, state: State, dt, params: Optional[Params] = None) -> State:
    """Advance one world by ``dt`` [s] (dWorldQuickStep with the collision pass before).

    ``params`` replaces ``model.params`` (per-world parameters; vmap over it for
    batches). jitted once per model structure; ``dt`` is traced.
    """
    _check_dt(dt)
    return _step(model, state, model.params if params is None else params, dt)


@functools.partial(jax.jit, static_argnames=("n_steps",))
def _rollout(model: Model, state: State, params: Params, dt, n_steps: int):
    def body(s, _):
        s = guarded_step(model, s, params, dt)
        depth = jnp.max(jnp.where(s.contacts.valid, s.contacts.depth, 0.0), initial=0.0)
        return s, Trajectory(pos=s.pos, quat=s.quat, vel=s.vel, angvel=s.angvel,
                             time=s.time, ncontact=s.ncontact, max_depth=depth)
    return jax.lax.scan(body, state, None, length=n_steps)


def rollout(model: Model, state: State, n_steps: int, dt, params: Optional[Params] = None
            ) -> tuple[State, Trajectory]:
    """``n_steps`` steps of ``dt`` [s] under ``lax.scan``; returns (final state, trajectory).

    The trajectory records the state after each step: ``traj.pos`` is
    (n_steps, nbody, 3). ``n_steps`` is static (one compile per value).
    """
    if not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1 (got {n_steps!r})")
    _check_dt(dt)
    return _rollout(model, state, model.params if params is None else params, dt, n_steps=n_steps)


# --------------------------------------------------------------- force helpers
def _check_body(state: State, body: int) -> None:
    nb = state.pos.shape[-2]
    if isinstance(body, int) and not 0 <= body < nb:
        raise ValueError(f"body must be an existing body index in [0, {nb - 1}] (got {body})")


def _rot(state: State, body) -> jax.Array:
    return jm.quat_to_mat(state.quat[body])


def add_force(state: State, body: int, force) -> State:
    """dBodyAddForce: world-frame force [N] at the centre of mass."""
    _check_body(state, body)
    return state.replace(force=state.force.at[body].add(jnp.asarray(force, state.force.dtype)))


def add_torque(state: State, body: int, torque) -> State:
    """dBodyAddTorque: world-frame torque [N m]."""
    _check_body(state, body)
    return state.replace(torque=state.torque.at[body].add(jnp.asarray(torque, state.torque.dtype)))


def add_rel_force(state: State, body: int, force) -> State:
    """dBodyAddRelForce: body-frame force [N] at the centre of mass."""
    _check_body(state, body)
    return add_force(state, body, _rot(state, body) @ jnp.asarray(force, state.pos.dtype))


def add_rel_torque(state: State, body: int, torque) -> State:
    """dBodyAddRelTorque: body-frame torque [N m]."""
    _check_body(state, body)
    return add_torque(state, body, _rot(state, body) @ jnp.asarray(torque, state.pos.dtype))


def add_force_at_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddForceAtPos: world force [N] at world point ``pos`` [m]."""
    _check_body(state, body)
    f = jnp.asarray(force, state.pos.dtype)
    r = jnp.asarray(pos, state.pos.dtype) - state.pos[body]
    return add_torque(add_force(state, body, f), body, jnp.cross(r, f))


def add_force_at_rel_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddForceAtRelPos: world force [N] at body-frame point ``pos`` [m]."""
    _check_body(state, body)
    p = state.pos[body] + _rot(state, body) @ jnp.asarray(pos, state.pos.dtype)
    return add_force_at_pos(state, body, force, p)


def add_rel_force_at_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddRelForceAtPos: body-frame force [N] at world point ``pos`` [m]."""
    _check_body(state, body)
    f = _rot(state, body) @ jnp.asarray(force, state.pos.dtype)
    return add_force_at_pos(state, body, f, pos)


def add_rel_force_at_rel_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddRelForceAtRelPos: body-frame force [N] at body-frame point ``pos`` [m]."""
    _check_body(state, body)
    r = _rot(state, body)
    p = state.pos[body] + r @ jnp.asarray(pos, state.pos.dtype)
    return add_force_at_pos(state, body, r @ jnp.asarray(force, state.pos.dtype), p)
