"""Stage 5: QuickStep's SOR-LCP (projected Gauss-Seidel) on the step's constraint rows.

- :mod:`jaxode.sim.solver.core`: row preparation, the row update and the friction
  block (pyramid/box bounds, cone projection, rolling/spinning rows): written once.
- :mod:`jaxode.sim.solver.pgs`: ``pgs``, QuickStep's row order (the conformance reference).
- :mod:`jaxode.sim.solver.colored`: ``colored``, graph-colour phases (rows of one
  colour share no moving body and are updated at once; each sweep is exactly
  Gauss-Seidel in the colour-sorted order).
- :mod:`jaxode.sim.solver.batching`: which path runs alone, under ``vmap`` and under
  differentiation.
- :mod:`jaxode.sim.solver.direct`: ``direct``, ODE's ``dWorldStep`` instead of
  QuickStep: one dense LCP per world solved exactly (no sweeps, no ``iterations``).
- :mod:`jaxode.sim.solver.articulated`: ``articulated``, QuickStep's sweeps on the
  bounded rows with the joints' equality rows eliminated exactly (a linear-time
  factorisation on the joint tree, :mod:`jaxode.sim.solver.tree`): articulated
  robots at RL iteration counts.

:func:`solve` is the stage: rows in, lambdas and ``fc = M^-1 J^T lambda`` out.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim import constraint
from jaxode.sim.solver import articulated, batching, colored, direct, pgs, reorder as reorder_lib
from jaxode.sim.solver import tree as tree_lib
from jaxode.sim.solver.colored import COLOURS, colour
from jaxode.sim.solver.core import cone_project, friction_bounds

# Model.solver -> the sweep function (an order or partition of the rows).
SWEEPS = {"pgs": pgs.sweeps, "colored": colored.sweeps}
# Model.solver values: the sweeps, ODE's big-matrix stepper (dWorldStep), and the
# sweeps on the bounded rows with the joints solved exactly.
SOLVERS = (*SWEEPS, "direct", "articulated")
# Model.solver's default: the sweep order measured fastest on the default backend
# (resolved at trace time by :func:`resolve`).
AUTO = "auto"
# auto's choice per backend (bench/RESULTS.md): on a CPU pgs ran 1.4-3.4x colored
# at every batch size (session 14: a tile's row loop is one compiled function);
# on a GPU (one H200, session 15) colored ran 1.3-3.5x pgs at every batch size
# (colour phases are wide; the step's cost there is its count of loop trips).
AUTO_BY_BACKEND = {"cpu": "pgs", "gpu": "colored", "cuda": "colored", "rocm": "colored"}


def resolve(name: str, reorder: str = "joints", backend: str = None) -> str:
    """The solver a model with ``solver=name`` runs: ``name`` itself, or for
    ``"auto"`` the one measured fastest on ``backend`` (default: JAX's default
    backend when the step is traced; :data:`AUTO_BY_BACKEND`, ``pgs`` for any
    other): ``pgs`` on a CPU, ``colored`` on a GPU. ``reorder="ode"`` (ODE's
    shuffle of every row) exists for pgs only, so auto then takes pgs."""
    if name != AUTO:
        return name
    if reorder == "ode":
        return "pgs"
    return AUTO_BY_BACKEND.get(backend or jax.default_backend(), "pgs")


class Solution(NamedTuple):
    """What the solve gives: lam_head (Rh,) and lam_tail (Rt,) [N] (the rows'
    lambdas, in the rows' order), fc (B, 6) = M^-1 J^T lambda per body
    [m/s^2, rad/s^2] (B = nbody + 1, the last the static world); rng: ODE's
    generator after the step (``reorder="ode"``, else None); unsolved: int32 1
    when ``direct``'s LCP stopped short of its tolerance (else 0; None for the
    sweeps, which have no convergence test)."""

    lam_head: jax.Array
    lam_tail: jax.Array
    fc: jax.Array
    rng: jax.Array = None
    unsolved: jax.Array = None


def solve(name: str, head, tail, inv_mass: jax.Array, inv_inertia: jax.Array,
          rhs_body: jax.Array, h: jax.Array, sor: jax.Array, iterations: int,
          block: int = 2, cone: bool = False, cone_rows: jax.Array = None, step=0,
          orders: jax.Array = None, tile: int = batching.AUTO, contacts=None, surface=None,
          enabled: jax.Array = None, slot_sizes: int = 0, **options) -> Solution:
    """Run solver ``name`` (``"pgs"`` or ``"colored"``) on one world's rows.

    head, tail: :class:`jaxode.sim.constraint.Rows` tables (tail rows' ``findex``
    index head rows, -1 = fixed bounds; ``block`` rows per contact, static).
    inv_mass (B,), inv_inertia (B, 3, 3) world frame, rhs_body (B, 6) =
    -(v/h + M^-1 f_ext), B = nbody + 1 (last = static world, zeros); h [s];
    sor w. ``cone`` (static) enables the joint projection of the first two
    rows of contacts whose ``cone_rows`` (per tail row, bool) is set.
    ``step`` (int) the step number (picks pgs' row shuffles); ``options``: the
    solver's static options (``reorder`` for pgs, ``colours`` for colored).
    ``orders`` (pgs only): int32 (phases, Rh + Rt) row orders of ``reorder="ode"``
    (:func:`ode_row_orders`); pgs then sweeps every row in them.
    ``contacts`` (a :class:`jaxode.sim.constraint.ContactSource`, with ``surface``
    its :class:`~jaxode.sim.constraint.SurfaceParams` and ``enabled`` auto-disable's
    body mask or None): the contact rows are built by the solve from these, in
    its own layout, after ``head``'s rows (then the joint rows only); ``tail``
    and ``cone_rows`` are then not used; ``slot_sizes`` (``Model.slot_sizes``)
    the smaller slot counts a batch builds them for.
    """
    if name not in SWEEPS:
        raise ValueError(f"model.solver must be one of {tuple(SWEEPS)} (got {name!r})"
                         + ("; 'direct' has no sweeps: solve_rows runs it" if name == "direct"
                            else ""))
    dtype = rhs_body.dtype
    nb = inv_mass.shape[0]
    if contacts is None:
        nh, nt = head.body1.shape[0], tail.body1.shape[0]
    else:
        ncon = contacts.geom1.shape[0]
        nh, nt = head.body1.shape[0] + ncon, ncon * block
    fc0 = jnp.zeros((nb, 6), dtype)
    if nh + nt == 0:
        z = jnp.zeros((0,), dtype)
        return Solution(z, z, fc0)
    if contacts is None:
        if nt % block:
            raise ValueError(f"tail rows ({nt}) must be a multiple of block ({block})")
        if cone_rows is None:
            cone_rows = jnp.zeros((nt,), bool)
        fidx, pyramid = jnp.maximum(tail.findex, 0), tail.findex >= 0
    else:
        fidx = pyramid = cone_rows = None
    ins = batching.inputs(head, tail, fidx, pyramid, cone_rows, inv_mass, inv_inertia, rhs_body,
                          jnp.asarray(h, dtype), jnp.asarray(sor, dtype),
                          jnp.asarray(step, jnp.int32), orders, contacts, surface, enabled)
    run = batching.solver(SWEEPS[name], iterations, block, bool(cone), tile=batching.check_tile(tile),
                          slot_sizes=batching.check_slot_sizes(slot_sizes),
                          **options)
    return Solution(*run(ins.idx, ins.data))


def ode_row_orders(rows, rng, iterations: int):
    """``reorder="ode"``: the row orders of one world's step as ODE 0.16's
    QuickStep sweeps its island's rows (:func:`jaxode.sim.solver.reorder.ode_orders`),
    over the rows ``solve`` takes: the head rows (joint rows, then the contacts'
    normal rows) then the tail rows (``block`` per contact). ODE's row numbering
    is joint by joint: the joint rows, then per contact its normal row and its
    friction rows. A row exists (ODE's m counts it) when it is active; a
    friction row also needs a non-zero bound (ODE's getInfo1 adds a friction row
    only for mu > 0). Returns (orders int32 (phases, Rh + Rt), new rng)."""
    nh, nt, k = rows.head.body1.shape[0], rows.tail.body1.shape[0], rows.block
    nj = rows.njoint_rows
    nc = nt // k
    c = np.arange(nc)
    ode_index = np.concatenate([np.arange(nj), nj + c * (1 + k),
                                (nj + c[:, None] * (1 + k) + 1 + np.arange(k)).reshape(-1)])
    exists = jnp.concatenate([rows.head.active, rows.tail.active & (rows.tail.hi != 0)])
    has_findex = jnp.concatenate([jnp.zeros((nh,), bool), rows.tail.findex >= 0])
    return reorder_lib.ode_orders(exists, has_findex, ode_index, rng, iterations)


def solve_rows(model, rows, bodies, params, time=0.0, rng=None) -> Solution:
    """The solve stage: ``model.solver`` (``"auto"``: :func:`resolve`) on a
    :class:`jaxode.sim.records.RowSet` with the
    bodies' inverse masses, world inverse inertia and QuickStep's right-hand side
    (:class:`jaxode.sim.records.Bodies`), ``params.sor`` and ``model.iterations``.
    With ``model.reorder == "ode"`` every row is shuffled as ODE 0.16 does, from
    ODE's generator state ``rng`` (``State.rng``); the Solution carries the new
    state."""
    dtype = bodies.rhs.dtype
    name = resolve(model.solver, model.reorder)
    if model.reorder == "ode" and (name != "pgs" or model.friction_cone):
        raise ValueError("reorder='ode' (ODE 0.16's shuffle of every row) needs solver "
                         "'pgs' and no cone friction (Gazebo's cone model is not ODE's "
                         f"QuickStep) (got solver {name!r}, friction_cone "
                         f"{bool(model.friction_cone)})")
    if name == "direct":
        return solve_direct(model, rows, bodies)
    if name == "articulated":
        return solve_articulated(model, rows, bodies, params)
    if model.reorder == "ode":
        if rng is None:
            raise ValueError("reorder='ode' needs ODE's generator state: State.rng is None "
                             "(make the state with jaxode.init(model))")
        orders, rng_new = ode_row_orders(rows, rng, model.iterations)
        sol = solve(name, rows.head, rows.tail, bodies.inv_mass, bodies.inv_inertia,
                    bodies.rhs, bodies.h, jnp.asarray(params.sor, dtype), model.iterations,
                    block=rows.block, cone=False, cone_rows=rows.cone_rows, orders=orders,
                    tile=model.batch_tile)
        return sol._replace(rng=rng_new)
    # QuickStep's shuffles of the joint rows at iterations 8, 16, ... (pgs.py)
    # box-model friction rows among the normal rows, as ODE orders them (pgs.py)
    options = ({"reorder": rows.njoint_rows, "box_head": bool(model.friction_box),
                "seed": int(model.reorder_seed)} if name == "pgs" else {})
    # the joint rows as built; the contact rows from their source, built by the
    # solve in its own layout (world-minor under vmap: no batch-major row tables
    # to transpose)
    joints = constraint.Rows(*(None if a is None else a[:rows.njoint_rows] for a in rows.head))
    return solve(name, joints, None, bodies.inv_mass, bodies.inv_inertia,
                 bodies.rhs, bodies.h, jnp.asarray(params.sor, dtype), model.iterations,
                 block=rows.block, cone=model.friction_cone,
                 step=jnp.round(time / bodies.h).astype(jnp.int32), tile=model.batch_tile,
                 contacts=rows.contacts, surface=rows.surface, enabled=rows.enabled,
                 slot_sizes=model.slot_sizes, **options)


def _no_rows(bodies) -> Solution:
    """The solve of a world without rows: no lambdas, fc = 0."""
    dtype = bodies.rhs.dtype
    z = jnp.zeros((0,), dtype)
    return Solution(z, z, jnp.zeros((bodies.inv_mass.shape[0], 6), dtype))


def solve_direct(model, rows, bodies) -> Solution:
    """The solve stage of ``solver="direct"``: dWorldStep's exact LCP
    (:mod:`jaxode.sim.solver.direct`) on the step's rows."""
    if model.friction_cone:
        raise ValueError("solver 'direct' (ODE's dWorldStep) has pyramid and box friction only; "
                         "a surface of this model uses friction='cone' (Gazebo's cone model): "
                         "use solver 'pgs' or 'colored'")
    if rows.head.body1.shape[0] + rows.tail.body1.shape[0] == 0:
        return _no_rows(bodies)._replace(unsolved=jnp.zeros((), jnp.int32))
    d = direct.solve(rows.head, rows.tail, bodies.inv_mass, bodies.inv_inertia, bodies.rhs,
                     bodies.h)
    return Solution(d.lam_head, d.lam_tail, d.fc, unsolved=(~d.solved).astype(jnp.int32))


def solve_articulated(model, rows, bodies, params) -> Solution:
    """The solve stage of ``solver="articulated"`` (:mod:`jaxode.sim.solver.articulated`):
    the joints' equality rows exactly, the bounded rows by ``model.iterations``
    QuickStep sweeps with ``params.sor``."""
    dtype = bodies.rhs.dtype
    if rows.head.body1.shape[0] + rows.tail.body1.shape[0] == 0:
        return _no_rows(bodies)
    tree = tree_lib.structure(model, rows.joint_layout)
    a = articulated.solve(tree, rows.head, rows.tail, rows.njoint_rows, bodies.inv_mass,
                          bodies.inv_inertia, bodies.inertia, bodies.rhs, bodies.h,
                          jnp.asarray(params.sor, dtype), model.iterations, block=rows.block,
                          cone=bool(model.friction_cone), cone_rows=rows.cone_rows,
                          tile=batching.check_tile(model.batch_tile))
    return Solution(a.lam_head, a.lam_tail, a.fc)


def sequential_updates(name: str, rows, nbody: int) -> jax.Array:
    """Sequential updates one sweep of solver ``name`` makes on ``rows`` (a
    :class:`jaxode.sim.records.RowSet` of one world): ``pgs`` one per active head row
    and tail contact, ``colored`` one per colour phase. Times ``iterations``, the
    step's dependent loop length (a GPU's kernel-launch count per step).
    ``direct`` has no sweeps (its active-set passes depend on the data): refused."""
    if name not in SWEEPS:
        raise ValueError(f"sequential_updates counts the sweeps of {tuple(SWEEPS)} (got {name!r})")
    nc = rows.tail.body1.shape[0] // rows.block
    tact = jnp.any(rows.tail.active.reshape(nc, rows.block), axis=1) if nc else None
    if name == "pgs":
        n = jnp.sum(rows.head.active, dtype=jnp.int32)
        return n + (jnp.sum(tact, dtype=jnp.int32) if nc else 0)
    ph = colour(rows.head.body1, rows.head.body2, rows.head.active, nbody)
    n = jnp.max(jnp.where(rows.head.active, ph + 1, 0), initial=0)
    if nc:
        b1 = rows.tail.body1.reshape(nc, rows.block)[:, 0]
        b2 = rows.tail.body2.reshape(nc, rows.block)[:, 0]
        pt = colour(b1, b2, tact, nbody)
        n = n + jnp.max(jnp.where(tact, pt + 1, 0), initial=0)
    return n.astype(jnp.int32)


def solve_pgs(head, tail, inv_mass, inv_inertia, rhs_body, h, sor, iterations: int,
              block: int = 2, cone: bool = False, cone_rows=None, reorder: int = 0):
    """``solve("pgs", ...)`` as a tuple (lam_head, lam_tail, fc); ``reorder`` leading
    head rows are shuffled at iterations 8, 16, ... as QuickStep does."""
    return tuple(solve("pgs", head, tail, inv_mass, inv_inertia, rhs_body, h, sor, iterations,
                       block, cone, cone_rows, reorder=int(reorder)))[:3]


def solve_colored(head, tail, inv_mass, inv_inertia, rhs_body, h, sor, iterations: int,
                  block: int = 2, cone: bool = False, cone_rows=None, colours: int = COLOURS):
    """``solve("colored", ...)`` as a tuple (lam_head, lam_tail, fc)."""
    return tuple(solve("colored", head, tail, inv_mass, inv_inertia, rhs_body, h, sor,
                       iterations, block, cone, cone_rows, colours=colours))[:3]


__all__ = ["AUTO", "COLOURS", "SOLVERS", "SWEEPS", "Solution", "colour", "cone_project",
           "friction_bounds", "resolve", "sequential_updates", "solve", "solve_colored",
           "solve_articulated", "solve_direct", "solve_pgs",
           "solve_rows"]
