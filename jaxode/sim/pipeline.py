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
AUTO_SOLVER = solver.AUTO   # the default: per backend (solver.resolve)


def physics_step(model: Model, state: State, params: Params, dt: jax.Array) -> State:
    """Advance one world by ``dt`` seconds (no validity bookkeeping).

    With ``model.auto_disable`` (ODE's auto-disable, :mod:`jaxode.sim.autodisable`)
    the idle pass and the island walk run after the collision pass and fix which
    bodies are enabled; rows of disabled islands are inactive and disabled
    bodies frozen (``enabled``); without it ``enabled`` is None and nothing of it
    is traced."""
    found = narrowphase.detect(model, state)                   # contacts
    enabled = None
    if model.auto_disable:
        state = autodisable.handle(model, params, state, found.contacts, dt)
        enabled = state.body_enabled
    bodies = dynamics.bodies(model, params, state, dt)       # masses, inertia, forces
    rows = rowset.build(model, params, bodies, found, enabled=enabled)  # joint + contact rows
    bodies = dynamics.accelerate(bodies, rows)                 # M^-1 f, QuickStep's rhs
    sol = solver.solve_rows(model, rows, bodies, params, state.time,  # lambdas, fc = M^-1 J^T lambda
                            rng=state.rng)
    new = integrate.advance(model, params, state, bodies, sol.fc, enabled=enabled)
    return _finish(model, state, new, rows, found, sol, enabled)


def _finish(model, state, new, rows, found, sol, enabled=None) -> State:
    if sol.rng is not None:  # reorder="ode": ODE's generator after the step's shuffles
        new = new.replace(rng=sol.rng)
    if sol.unsolved is not None and state.lcp_unsolved is not None:  # solver="direct"
        new = new.replace(lcp_unsolved=(state.lcp_unsolved + sol.unsolved).astype(jnp.int32))
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
