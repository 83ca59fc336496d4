"""The named records one step's stages pass to each other (one world, traced).

``jaxode.sim.pipeline.physics_step`` is the list of stages; each reads the model,
the world's params and the records of earlier stages, and returns a record::

    Bodies    = dynamics.bodies(model, params, state, dt)     masses, world inertia, forces
    Collision = narrowphase.detect(model, state)              contacts and their counters
    RowSet    = rowset.build(model, params, bodies, collision) joint + contact rows
    Bodies    = dynamics.accelerate(bodies, rows)             accelerations, QuickStep's rhs
    Solution  = solver.solve_rows(model, rows, bodies, params) lambdas, fc = M^-1 J^T lambda
    State     = integrate.advance(...) then forces.record(...) the next state

Body arrays are padded with the static world at index ``nbody`` (zero
inverse mass, zero velocity), so a row never branches on "attached to the
world". Units SI; vectors in the world frame.
"""
from __future__ import annotations

import jax

from jaxode._struct import pytree_dataclass, static_field
from jaxode.sim.constraint import ContactSource, Rows, SurfaceParams
from jaxode.types import Contacts


@pytree_dataclass
class Bodies:
    """Per-body quantities of the step, padded to B = nbody + 1 (the static world last).

    h [s] the step and fps = 1/h [1/s] (ODE's ``stepsizeRecip``, the
    ``worldFPS`` its getInfo2 gets: every rate in the step multiplies by it, as
    ODE does, never divides by h); pos (B, 3), quat (B, 4), vel (B, 3), angvel (B, 3) at the
    start of the step; inv_mass (B,) [1/kg]; inertia (nbody, 3, 3) and
    inv_inertia (B, 3, 3) world frame [kg m^2, 1/(kg m^2)]; force, torque
    (nbody, 3) [N, N m]: accumulators + gravity, + ODE 0.16's implicit
    gyroscopic torque, + the joints' own wrenches once :func:`jaxode.sim.dynamics.accelerate`
    ran; acc (nbody, 6) [m/s^2 | rad/s^2] the unconstrained accelerations
    ``M^-1 (force, torque)`` and rhs (B, 6) = ``-(v fps + acc)`` (QuickStep's
    per-body right-hand side), both zero before ``accelerate``.
    """

    h: jax.Array
    fps: jax.Array
    pos: jax.Array
    quat: jax.Array
    vel: jax.Array
    angvel: jax.Array
    inv_mass: jax.Array
    inertia: jax.Array
    inv_inertia: jax.Array
    force: jax.Array
    torque: jax.Array
    acc: jax.Array
    rhs: jax.Array


@pytree_dataclass
class Collision:
    """What collision detection found this step.

    contacts: :class:`jaxode.types.Contacts` compacted into ``contact_capacity``
    slots (``force`` zero until the solve); nfound: valid contacts found before
    the capacity cut; overflow_pairs, overflow_contacts: what did not fit this
    step (candidate pairs; contacts and mesh triangles); grot (ngeom, 3, 3) the
    geoms' world rotations (for fdir1).
    """

    contacts: Contacts
    nfound: jax.Array
    overflow_pairs: jax.Array
    overflow_contacts: jax.Array
    grot: jax.Array


@pytree_dataclass
class RowSet:
    """All constraint rows of the step, in the order QuickStep solves them.

    head: rows without a friction index: the joints' rows (joint order, then
    each joint's rows), then one normal row per contact slot; tail: ``block``
    rows per contact slot (t1, t2 friction, then rolling t1, t2 and spinning
    when ``block`` is 5), whose ``findex`` points at their contact's normal
    row in ``head`` (already shifted past the joint rows; -1: fixed bounds);
    cone_rows (tail rows,) bool: the first two rows of cone-model contacts;
    joint_wrench (nbody, 6) [N | N m]: forces the joints apply directly (not
    through rows); contacts, surface: what the contact rows are made of
    (:class:`jaxode.sim.constraint.ContactSource`, the params they read): the
    solver builds them again from these in its own layout (world-minor), and
    the head's and tail's contact rows are only read by the other consumers
    (ODE's row order, ``direct``, counters); enabled (nbody,) bool or None
    (auto-disable: rows touching no enabled body are inactive); njoint_rows
    (static): joint rows at the head's start; joint_layout (static): per joint
    group, (rows per joint, joints).
    """

    head: Rows
    tail: Rows
    cone_rows: jax.Array
    joint_wrench: jax.Array
    contacts: ContactSource
    surface: SurfaceParams
    enabled: jax.Array
    block: int = static_field()
    njoint_rows: int = static_field()
    joint_layout: tuple = static_field()
