"""One QuickStep of one world: the pure function every API entry point wraps.

The step is its list of stages; each is ``f(model, params, records...) ->
record`` (the records are in :mod:`jaxode.sim.records`)::

    kinematics + broadphase + narrowphase -> constraint rows -> solve -> integration
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxode.sim import autodisable, dynamics, integrate, narrowphase, rowset, solver
from jaxode.types import Model, Params, State

# Model.solver values (see jaxode.sim.solver): the row orders and "direct".
SOLVERS = solver.SOLVERS


def physics_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """Advance one world by ``dt`` seconds (no validity bookkeeping)."""
    if model.auto_disable:
        return _step_auto_disable(model, state, params, dt)
    bodies = dynamics.bodies(model, params, state, dt)       # masses, inertia, forces
    found = narrowphase.detect(model, state)                   # contacts
    rows = rowset.build(model, params, bodies, found)          # joint + contact rows
    bodies = dynamics.accelerate(bodies, rows)                 # M^-1 f, QuickStep's rhs
    sol = solver.solve_rows(model, rows, bodies, params, state.time,  # lambdas, fc = M^-1 J^T lambda
                            rng=state.rng)
    new = integrate.advance(model, params, state, bodies, sol.fc)
    return _finish(model, state, new, rows, found, sol)


def _step_auto_disable(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """The step with ODE's auto-disable (:mod:`jaxode.sim.autodisable`): after the
    collision pass, the idle pass and the island walk fix which bodies are
    enabled; rows of disabled islands are inactive and disabled bodies frozen."""
    found = narrowphase.detect(model, state)                   # contacts
    state = autodisable.handle(model, params, state, found.contacts, dt)
    on = state.body_enabled
    bodies = dynamics.bodies(model, params, state, dt)
    rows = rowset.build(model, params, bodies, found, enabled=on)
    bodies = dynamics.accelerate(bodies, rows)
    sol = solver.solve_rows(model, rows, bodies, params, state.time, rng=state.rng)
    new = integrate.advance(model, params, state, bodies, sol.fc, enabled=on)
    return _finish(model, state, new, rows, found, sol, enabled=on)


def _finish(model, state, new, rows, found, sol, enabled=None) -> State:
    if sol.rng is not None:  # reorder="ode": ODE's generator after the step's shuffles
        new = new.replace(rng=sol.rng)
    return new.replace(
        **rowset.record(model, state, rows, found, sol.lam_head, sol.lam_tail, enabled),
        ncontact=found.nfound.astype(jnp.int32),
        overflow_pairs=(state.overflow_pairs + found.overflow_pairs).astype(jnp.int32),
        overflow_contacts=(state.overflow_contacts + found.overflow_contacts).astype(jnp.int32))


def guarded_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """``physics_step`` that leaves a world untouched (and flagged) once it turns non-finite."""
    new = physics_step(model, state, params, dt)
    finite = (jnp.all(jnp.isfinite(new.pos)) & jnp.all(jnp.isfinite(new.quat))
              & jnp.all(jnp.isfinite(new.vel)) & jnp.all(jnp.isfinite(new.angvel)))
    ok = finite & ~state.nonfinite
    out = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, state)
    return out.replace(nonfinite=state.nonfinite | ~finite)
