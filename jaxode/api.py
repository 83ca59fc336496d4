"""Public entry points: init, step, rollout, and ODE's force accumulators."""
from __future__ import annotations

import functools
from typing import Optional

import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap
from jax.extend import core as jax_core

from jaxode.sim import math as jm
from jaxode import compile_notice, params_spec
from jaxode.sim import autodisable, batch_rules
from jaxode.sim.pipeline import guarded_step
from jaxode.sim.solver import batching
from jaxode.overflow_report import warn_overflow
from jaxode.types import Model, Params, State, Trajectory, empty_contacts


def init(model: Model) -> State:
    """The initial state of the scene as built: ``model.init_pos``, ``init_quat``,
    ``init_vel`` and ``init_angvel``, with zero accumulators, time and contacts
    (with ``model.auto_disable``: every body enabled, empty velocity buffers)."""
    ini = {k: getattr(model, "init_" + k) for k in ("pos", "quat", "vel", "angvel")}
    missing = [k for k, v in ini.items() if v is None]
    if missing:
        raise ValueError(f"model has no initial state (init_{missing[0]} is None): build it with "
                         "WorldBuilder.build(), or set init_pos, init_quat, init_vel and "
                         "init_angvel with model.replace")
    dtype = model.params.body_mass.dtype
    f = lambda x: jnp.asarray(x, dtype)
    nb = model.nbody
    contacts = empty_contacts(model.contact_capacity, dtype)
    enabled, adis = autodisable.initial(model, dtype) if model.auto_disable else (None, None)
    return State(pos=f(ini["pos"]), quat=f(ini["quat"]), vel=f(ini["vel"]), angvel=f(ini["angvel"]),
                 force=jnp.zeros((nb, 3), dtype), torque=jnp.zeros((nb, 3), dtype),
                 time=jnp.zeros((), dtype), contacts=contacts, ncontact=jnp.zeros((), jnp.int32),
                 overflow_pairs=jnp.zeros((), jnp.int32), overflow_contacts=jnp.zeros((), jnp.int32),
                 nonfinite=jnp.zeros((), bool),
                 joint_feedback=jnp.zeros((model.njoint, 4, 3), dtype),
                 body_enabled=enabled, auto_disable=adis,
                 rng=(jnp.asarray(model.reorder_seed, jnp.uint32)
                      if getattr(model, "reorder", "joints") == "ode" else None),
                 lcp_unsolved=(jnp.zeros((), jnp.int32)
                               if getattr(model, "solver", "pgs") == "direct" else None))


def _check_dt(dt) -> None:
    """dt rule (see :data:`jaxode.params_spec.DT_MIN`/``DT_MAX``): a concrete dt
    outside it raises; a traced one flags the world at run time."""
    params_spec.check_dt(dt)


_STATE_SHAPES = (("pos", 3), ("quat", 4), ("vel", 3), ("angvel", 3), ("force", 3),
                 ("torque", 3))


def check_state(model: Model, state, where: str = "state", batch_ndim: int = 0) -> None:
    """TypeError unless ``state`` is a :class:`State`; ValueError naming the field,
    the shape ``model`` expects (``batch_ndim`` leading batch axes allowed) and the
    one received (a state of another model, a batch passed to ``step``)."""
    if not isinstance(state, State):
        hint = " (Params were passed where the State belongs: check the argument order)" \
            if isinstance(state, Params) else ""
        raise TypeError(f"{where} must be a jaxode.State (from jaxode.init(model)){hint} "
                        f"(got {type(state).__name__})")
    nb, cap = model.nbody, model.contact_capacity
    want = {name: (nb, k) for name, k in _STATE_SHAPES}
    want.update(time=(), ncontact=(), nonfinite=())
    if state.joint_feedback is not None:
        want["joint_feedback"] = (model.njoint, 4, 3)
    if getattr(model, "reorder", "joints") == "ode":
        if state.rng is None:
            raise ValueError(f"{where}.rng is None, but this model has reorder='ode' (ODE's "
                             "generator state, uint32, shape ()): make the state with "
                             "jaxode.init(model)")
        want["rng"] = ()
    lead = None
    for name, shp in want.items():
        got = tuple(jnp.shape(getattr(state, name)))
        b = got[:len(got) - len(shp)] if len(got) >= len(shp) else None
        ok = (b is not None and got[len(b):] == shp and len(b) == batch_ndim
              and (lead is None or b == lead))
        if not ok:
            msg = (f"{where}.{name} must have shape {shp}"
                   + (f" after {batch_ndim} batch axis(es)" if batch_ndim else "")
                   + f" for this model (nbody={nb}, njoint={model.njoint}) (got shape {got})")
            if b is not None and got[len(b):] == shp and len(b) > batch_ndim:
                msg += (f": leading axes {b} look like a batch of worlds; step/rollout take "
                        "ONE world: vmap over the batch (jax.vmap(jaxode.step, in_axes=(None, "
                        "0, None)))")
            else:
                msg += "; is this a state of another model? (jaxode.init(model) makes one)"
            raise ValueError(msg)
        lead = b
    if model.auto_disable:
        size = model.auto_disable_buffer
        a = state.auto_disable
        if state.body_enabled is None or a is None:
            raise ValueError(f"{where}.body_enabled is None but this model has auto-disable "
                             "(Model.auto_disable): make the state with jaxode.init(model)")
        for name, x, shp in (("body_enabled", state.body_enabled, (nb,)),
                             ("auto_disable.lvel", a.lvel, (nb, size, 3)),
                             ("auto_disable.avel", a.avel, (nb, size, 3)),
                             ("auto_disable.counter", a.counter, (nb,)),
                             ("auto_disable.ready", a.ready, (nb,)),
                             ("auto_disable.steps_left", a.steps_left, (nb,)),
                             ("auto_disable.time_left", a.time_left, (nb,)),
                             ("auto_disable.reset", a.reset, (nb,))):
            got = tuple(jnp.shape(x))
            if got[batch_ndim:] != shp or len(got) != batch_ndim + len(shp):
                raise ValueError(f"{where}.{name} must have shape {shp} for this model "
                                 f"(nbody={nb}, auto_disable_buffer={size}) (got shape {got}); "
                                 "is this a state of another model?")
    got = tuple(jnp.shape(state.contacts.depth))
    if got[batch_ndim:] != (cap,):
        raise ValueError(f"{where}.contacts.depth must have shape ({cap},) (the model's "
                         f"contact_capacity) (got shape {got}); is this a state of another "
                         f"model?")


# Params objects already checked on the host (concrete values): checking again
# each step would copy every field to the host. Keyed by id, holding the object.
_CHECKED: dict = {}


def _check_inputs(model: Model, state: State, params, dt):
    if not isinstance(model, Model):
        raise TypeError(f"model must be a jaxode.Model (from WorldBuilder.build()) "
                        f"(got {type(model).__name__})")
    check_state(model, state)
    p = model.params if params is None else params
    known = _CHECKED.get(id(p)) is p
    params_spec.check_params(model, p, values=not known)
    if not known and not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(p)):
        if len(_CHECKED) > 64:
            _CHECKED.clear()
        _CHECKED[id(p)] = p
    _check_dt(dt)
    return p


def _guard_inputs(state: State, params: Params, dt) -> State:
    """Run-time checks of what only the traced values show: params out of range,
    dt outside [DT_MIN, DT_MAX], a zero or non-finite quaternion, a position,
    velocity or angular velocity that is not finite or beyond
    :func:`jaxode.params_spec.state_bound` (its square overflows). A world that
    fails is flagged (``state.nonfinite``) and left untouched (the step then
    keeps it frozen, as the non-finite guard does). A finite, non-zero
    quaternion that is not unit is normalised, as ODE's dBodySetQuaternion does
    (unit ones, within rounding, are left bit for bit)."""
    q = state.quat
    dtype = q.dtype
    m = jnp.max(jnp.abs(q), axis=-1, keepdims=True)
    good_q = jnp.all(jnp.isfinite(q)) & jnp.all(m > 0)
    m_safe = jnp.where(jnp.isfinite(m) & (m > 0), m, 1.0)
    qs = q / m_safe
    qn = qs / jnp.sqrt(jm.sum_terms(qs * qs, -1, keepdims=True))
    tol = 1000 * jnp.finfo(dtype).eps
    unit = jnp.abs(jm.sum_terms(q * q, -1, keepdims=True) - 1) <= tol
    bound = params_spec.state_bound(dtype)
    good_x = jnp.asarray(True)
    for x in (state.pos, state.vel, state.angvel):
        good_x = good_x & jnp.all(jnp.abs(x) <= bound)  # false for NaN and inf
    ok = good_q & good_x & params_spec.values_ok(params) & params_spec.dt_ok(dt)
    quat = jnp.where(ok & ~unit, qn.astype(dtype), q)
    return state.replace(quat=quat, nonfinite=state.nonfinite | ~ok)


def as_batch_member(fn, model: Model, state: State, params: Params, dt, batched=None):
    """``fn(model, state, params, dt)`` for one world, run as a member of a batch.

    Alone (not under ``vmap``) the world runs as a batch of one
    (``jax.vmap`` over a leading axis of size 1); under ``jax.vmap`` the batch
    runs as one ``vmap`` of ``fn`` (on CPU a batch larger than
    ``model.batch_tile`` as such vmaps over tiles of worlds, one tile after
    another: :mod:`jaxode.sim.solver.batching`). Either way a world is stepped by the same
    batched program, so its trajectory is bitwise the same alone, in a vmap of
    one and in any batch (with FMA contraction off, see :mod:`jaxode.xla`):
    XLA compiles an unbatched program differently (other fusions, other
    rounding). Derivatives (forward and reverse) go through the batch of one.
    (``step``/``rollout`` called straight under a jitted vmap skip this and
    trace the batch directly, see :func:`_under_jitted_vmap`.)

    ``batched`` (optional): ``fn``'s own batched form, a ``custom_vmap`` rule
    ``batched(size, in_batched, model, state, params, dt) -> (out,
    out_batched)`` (:func:`_batched_rollout`). When given, it is both the batch
    of one (``size`` 1) and the rule, in place of ``jax.vmap`` over ``fn``'s
    one-world trace: a ``vmap`` outside ``fn``'s ``lax.scan`` would trace the
    step for one world (and, inside it, the solver's and collision's one-world
    functions, which only ``custom_vmap``'s primal needs) and then batch that
    trace, where ``batched`` traces the step once, already batched. The batch
    of one's jaxpr is kept, as the one-world jaxpr is, so a derivative's jvp
    batches it instead of running Python again. Python calls in the trace
    (bench/RESULTS.md session 35): a rollout alone 27 % fewer (``boxes``) and
    18 % (``chain``), its gradient 4-5 % fewer; an eager ``vmap`` (whose rule
    runs ``batched`` in Python after the batch of one) 3-8 % more.
    """
    # The model's arrays travel as arguments too (a custom_vmap function may not
    # close over traced values). The batch of one batches the state and the
    # params, as users' vmaps do, and leaves the model and dt unbatched.
    leaves, tree = jax.tree.flatten((model, state, params, dt))
    nm, ns, npar = (len(jax.tree.leaves(x)) for x in (model, state, params))

    def call(flat):
        return _barrier_call(fn, jax.tree.unflatten(tree, list(flat)))

    # One Python trace of ``fn`` per call of as_batch_member: the one-world
    # jaxpr of ``call`` is traced once (per input types) and kept here, and both
    # the batch of one (custom_vmap's primal, traced when the step is traced)
    # and the batching rule (traced again when the step is traced under vmap)
    # batch that jaxpr, instead of tracing the Python step twice. (A jax.jit of
    # ``call`` would not do: its trace cache keys on the context, and the rule
    # runs under another abstract mesh than the primal.) With ``batched``, the
    # batch of one's jaxpr is kept the same way, for the jvp.
    jaxprs: dict = {}

    def kept(name, f, args):
        """``f(*args)`` through its jaxpr, traced once per (name, input types)."""
        key = (name,) + tuple(jax.typeof(x) for x in args)
        if key not in jaxprs:
            jaxpr, shapes = jax.make_jaxpr(f, return_shape=True)(*args)
            jaxprs[key] = jaxpr, jax.tree.structure(shapes)
        jaxpr, out_tree = jaxprs[key]
        return jax.tree.unflatten(out_tree, jax_core.jaxpr_as_fun(jaxpr)(*args))

    def one_world(*f):
        return kept("world", lambda *g: call(g), f)

    def alone(*flat):
        axes = [None] * nm + [0] * (ns + npar) + [None] * (len(flat) - nm - ns - npar)
        one = [x if ax is None else jnp.expand_dims(x, 0) for x, ax in zip(flat, axes)]
        if batched is not None:
            flags = [ax is not None for ax in axes]
            out = kept("one", lambda *g: batched(1, *_trees(flags, g))[0], one)
        else:
            out = jax.vmap(one_world, in_axes=axes)(*one)
        return jax.tree.map(lambda x: x[0], out)

    def _trees(in_batched, flat):
        # (in_batched as the argument trees, then the arguments) for ``batched``
        return (jax.tree.unflatten(tree, list(in_batched)),
                *jax.tree.unflatten(tree, list(flat)))

    run = custom_vmap(alone)

    @run.def_vmap
    def rule(axis_size, in_batched, *flat):
        if batched is not None:
            return batched(axis_size, *_trees(in_batched, flat))
        axes = [0 if b else None for b in in_batched]
        return _in_tiles(lambda f: jax.vmap(one_world, in_axes=axes)(*f), list(flat),
                         in_batched, axis_size, model.batch_tile)

    @jax.custom_jvp
    def member(*flat):
        return run(*flat)

    @member.defjvp
    def member_jvp(primals, tangents):
        return jax.jvp(alone, primals, tangents)

    return member(*leaves)


def _step_one(model: Model, state: State, params: Params, dt) -> State:
    return guarded_step(model, _guard_inputs(state, params, dt), params, dt)


@jax.jit
def _step(model: Model, state: State, params: Params, dt) -> State:
    return as_batch_member(_step_one, model, state, params, jnp.asarray(dt))


def step(model: Model, state: State, dt, params: Optional[Params] = None) -> State:
    """Advance one world by ``dt`` [s] (dWorldQuickStep with the collision pass before).

    ``params`` replaces ``model.params`` (per-world parameters; vmap over it for
    batches). jitted once per model structure; ``dt`` is traced.

    Inputs are checked (see :mod:`jaxode.params_spec`): a wrong type or shape
    raises TypeError/ValueError at trace time; concrete params or dt out of
    range raise ValueError at call time; traced ones out of range (inside
    jit/vmap), and zero or non-finite quaternions, set ``state.nonfinite`` and
    leave the world's state as it was (frozen until reset), other worlds of a
    batch untouched.
    """
    p = _check_inputs(model, state, params, dt)
    out = _under_jitted_vmap(_step_one, _batched_step, (model, state, p, jnp.asarray(dt)))
    if out is not None:
        return out
    with compile_notice.notice(f"step ({_scene_text(model)})",
                               enabled=_concrete(state)):
        return _step(model, state, p, dt)


def _batched_step(size: int, in_batched, *vals_tree):
    """One step of a batch of ``size`` worlds as a ``custom_vmap`` rule:
    ``vals_tree`` = (model, state, params, dt), each leaf batched on axis 0
    where ``in_batched`` (the same trees, of bools) says; returns (state,
    out_batched). ``jax.vmap`` of the step, tile after tile for a batch that
    ``model.batch_tile`` splits (as :func:`as_batch_member`'s rule lays them
    out). Called under a caller's jitted vmap (:func:`_under_jitted_vmap`),
    it traces the step once, already batched, where :func:`as_batch_member`
    traced a tiled batch for one world, the solver's one-world function
    included, and batched that trace twice (the batch of one, then the rule)."""
    vals, tree = jax.tree.flatten(vals_tree)
    axes = jax.tree.unflatten(tree, [0 if b else None for b in jax.tree.leaves(in_batched)])

    def run(v):
        return jax.vmap(_step_one, in_axes=axes)(*jax.tree.unflatten(tree, v))

    return _in_tiles(run, _held_floats(vals), jax.tree.leaves(in_batched), size,
                     vals_tree[0].batch_tile)


def _in_tiles(run, vals: list, batched: list, size: int, batch_tile):
    """(``run(vals)``, every output batched): ``vals`` the flat arguments of a
    batch of ``size`` worlds (batched on axis 0 where ``batched`` says). A
    batch that ``batch_tile`` (``Model.batch_tile``) splits runs tile after
    tile, ``run`` on each tile's arguments: a tile's solver loops are small
    enough for XLA CPU to compile as single functions and its data stay in
    cache. Tile k holds worlds k, k + n, ... (a batch split in blocks over
    devices keeps its share of every tile); the last worlds padded with copies
    (:func:`batching.map_tiles`)."""
    tile = batching.tile_worlds(batching.check_tile(batch_tile), size)
    if tile is None:
        out = run(vals)
    else:
        idx = [i for i, b in enumerate(batched) if b]

        def one_tile(tb):
            v = list(vals)
            for i, x in zip(idx, tb):
                v[i] = x
            return run(v)
        out = batching.map_tiles(one_tile, [vals[i] for i in idx], tile)
    return out, jax.tree.map(lambda _: True, out)


def _record(s: State) -> Trajectory:
    """One world's trajectory entry after a step."""
    depth = jnp.max(jnp.where(s.contacts.valid, s.contacts.depth, 0.0), initial=0.0)
    return Trajectory(pos=s.pos, quat=s.quat, vel=s.vel, angvel=s.angvel,
                      time=s.time, ncontact=s.ncontact, max_depth=depth)


def _rollout_one(model: Model, state: State, params: Params, dt, n_steps: int,
                 checkpoint_every: Optional[int] = None):
    state = _guard_inputs(state, params, dt)

    def body(s, _):
        s = guarded_step(model, s, params, dt)
        return s, _record(s)
    if checkpoint_every is None or checkpoint_every >= n_steps:
        return jax.lax.scan(body, state, None, length=n_steps)
    # Checkpointed: an outer scan over blocks of k steps, each block a jax.checkpoint
    # of an inner scan. Reverse mode keeps only the state at the start of each block
    # (n_steps / k of them) and recomputes one block's k steps at a time while it
    # runs back; the forward values are the same steps in the same order.
    k = checkpoint_every
    nblock, rest = divmod(n_steps, k)
    block = jax.checkpoint(lambda s, _: jax.lax.scan(body, s, None, length=k))
    state, traj = jax.lax.scan(block, state, None, length=nblock)
    traj = jax.tree.map(lambda x: x.reshape((nblock * k,) + x.shape[2:]), traj)
    if rest:
        state, tail = jax.lax.scan(body, state, None, length=rest)
        traj = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), traj, tail)
    return state, traj


@functools.partial(jax.jit, static_argnames=("n_steps", "checkpoint_every"))
def _rollout(model: Model, state: State, params: Params, dt, n_steps: int,
             checkpoint_every: Optional[int] = None):
    # without checkpoints the batch's own form: the step traced once, already batched
    batched = (functools.partial(_batched_rollout, n_steps=n_steps)
               if checkpoint_every is None or checkpoint_every >= n_steps else None)
    return as_batch_member(functools.partial(_rollout_one, n_steps=n_steps,
                                             checkpoint_every=checkpoint_every),
                           model, state, params, jnp.asarray(dt), batched=batched)


def rollout(model: Model, state: State, n_steps: int, dt, params: Optional[Params] = None,
            checkpoint_every: Optional[int] = None) -> tuple[State, Trajectory]:
    """``n_steps`` steps of ``dt`` [s] under ``lax.scan``; returns (final state, trajectory).

    The trajectory records the state after each step: ``traj.pos`` is
    (n_steps, nbody, 3). ``n_steps`` is static (one compile per value).
    Inputs are checked as in :func:`step` (a world flagged at the start stays
    frozen for the whole rollout).

    ``checkpoint_every`` (int k >= 1, static; None: off) is for reverse-mode
    derivatives of long rollouts: the steps run as blocks of k under
    ``jax.checkpoint`` (a remainder of ``n_steps % k`` steps runs after them),
    so ``jax.grad`` stores the state at each block's start and recomputes a
    block's steps on the way back: memory ~ (n_steps / k) states + k steps'
    residuals instead of n_steps steps' residuals (k ~ sqrt(n_steps) is
    smallest), for about one more forward pass of compute. The forward values
    (final state and trajectory) are bitwise those without it. See
    docs/GRADIENTS.md.
    """
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1 (got {n_steps!r})")
    if checkpoint_every is not None and (isinstance(checkpoint_every, bool)
                                         or not isinstance(checkpoint_every, int)
                                         or checkpoint_every < 1):
        raise ValueError(f"checkpoint_every must be None (off) or an integer >= 1 steps per "
                         f"checkpointed block (got {checkpoint_every!r})")
    p = _check_inputs(model, state, params, dt)
    out = _under_jitted_vmap(
        functools.partial(_rollout_one, n_steps=n_steps, checkpoint_every=checkpoint_every),
        # checkpointed blocks keep the one-world path (their jax.checkpoint is per world)
        None if checkpoint_every is not None else
        functools.partial(_batched_rollout, n_steps=n_steps),
        (model, state, p, jnp.asarray(dt)))
    if out is not None:
        return out
    with compile_notice.notice(f"rollout ({_scene_text(model)}, {n_steps} steps)",
                               enabled=_concrete(state)):
        final, traj = _rollout(model, state, p, dt, n_steps=n_steps,
                               checkpoint_every=checkpoint_every)
    # On the host, once per scene, when contacts or pairs were dropped (concrete
    # results only: inside a caller's jit nothing reaches the host).
    warn_overflow(model, final, traj, before=state, where="rollout", once=True, stacklevel=2)
    return final, traj


def _in_traced_vmap(tree, model: Optional[Model] = None) -> bool:
    """True when ``step``/``rollout`` is called directly under a caller's
    ``jax.vmap`` (batch axis 0) that a ``jit`` (or ``shard_map``) traces, with
    no other transformation between: then :func:`as_batch_member`'s batching
    rule is what would run, and the call traces it directly (:func:`_barrier_call`
    on the vmap's tracers: the same batched program, bitwise the same results)
    instead of also tracing the batch of one that ``custom_vmap`` needs for its
    primal (~0.8 s of the 2.5 s trace of ``boxes`` at 1,024 worlds, bench/RESULTS.md
    session 14). Anything else (an eager vmap, which must stay jitted; nested
    vmaps; jvp/grad inside the vmap; another batch axis) or JAX internals that
    moved: False, the :func:`as_batch_member` path. With ``model`` also False
    for a batch that ``model.batch_tile`` splits into tiles, which a call
    inside the caller's vmap cannot run one after another: ``step`` and
    ``rollout`` then unwrap the vmap's tracers and run the tiles themselves
    (:func:`_under_jitted_vmap`)."""
    found = batch_rules.batch_trace_of(tree, front=True)
    if found is None:
        return False
    size = found[1]
    return model is None or batching.tile_worlds(
        batching.check_tile(model.batch_tile), size) is None


def _under_jitted_vmap(one, batched, args):
    """``one(*args)`` (a world's step or rollout) when ``step``/``rollout`` is
    called straight under a caller's jitted ``jax.vmap`` (:func:`_in_traced_vmap`),
    else None (the caller then takes :func:`as_batch_member`'s path).

    ``batched`` (``custom_vmap``-rule form: :func:`_batched_step`,
    :func:`_batched_rollout`; None: not available) runs the batch over the
    vmap's own arrays (:func:`batch_rules.rule_on_batch`): the vmap's tracers
    are unwrapped (their values, batch axis 0), the batch is stepped at the
    level above the vmap (tile after tile, as :func:`as_batch_member` lays
    them out) and the results are handed back as the caller's tracers. The
    step is traced once, already batched: under the caller's vmap a rollout's
    ``lax.scan`` traced the step for one world and then batched that trace
    equation by equation (``boxes`` at one world: 1.75 s of a 4 s trace), and
    a tiled batch went through :func:`as_batch_member`, which traced the
    batch of one as well. Otherwise (JAX's tracers not as expected, or no
    ``batched``) a batch that is not split into tiles is traced under the
    caller's vmap through :func:`_barrier_call`. The same batched operations
    either way, bitwise the same states (tests/test_batch_invariance.py)."""
    if not _in_traced_vmap(args):
        return None
    if batched is not None:
        out = batch_rules.rule_on_batch(batched, args)
        if out is not None:
            return out
    if _in_traced_vmap(args, args[0]):
        return _barrier_call(one, args)
    return None


def _batched_rollout(size: int, in_batched, *vals_tree, n_steps: int):
    """The rollout of a batch of ``size`` worlds as a ``custom_vmap`` rule:
    ``vals_tree`` = (model, state, params, dt), each leaf batched on axis 0
    where ``in_batched`` (the same trees, of bools) says; returns ((final
    state, trajectory), out_batched). ``lax.scan`` of ``jax.vmap`` of the step,
    the vmap inside the loop body (tile after tile for a batch that
    ``model.batch_tile`` splits): the step is traced once, already batched, and
    the solver's and collision's batching rules run directly
    (:func:`jaxode.sim.batch_rules.rule_on_batch`), with no one-world trace of
    their own. Serves the caller's jitted vmap (:func:`_under_jitted_vmap`) and
    the world alone (:func:`as_batch_member`'s batch of one, ``size`` 1)."""
    vals, tree = jax.tree.flatten(vals_tree)
    axes = [0 if b else None for b in jax.tree.leaves(in_batched)]
    am, a_s, ap, ad = jax.tree.unflatten(tree, axes)

    def run(v):
        # the rollout of a batch (leading axis) whose arrays are ``v`` (axes ``axes``)
        model, state, params, dt = jax.tree.unflatten(tree, v)
        state = jax.vmap(lambda m, s, p, d: _guard_inputs(s, p, d),
                         in_axes=(am, a_s, ap, ad))(model, state, params, dt)
        # the params world-minor (batch axis last) once per rollout: the
        # solver lays its share of them out world-minor, and XLA then
        # cancels the two transposes instead of copying every step
        ap_wm = jax.tree.map(lambda a: -1, ap)    # (None leaves stay None)
        params_wm = jax.tree.map(lambda x, a: x if a is None else jnp.moveaxis(x, 0, -1),
                                 params, ap)
        step = jax.vmap(guarded_step, in_axes=(am, 0, ap_wm, ad))

        def body(s, _):
            s = step(model, s, params_wm, dt)
            return s, jax.vmap(_record)(s)
        final, traj = jax.lax.scan(body, state, None, length=n_steps)
        return final, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), traj)

    return _in_tiles(run, _held_floats(vals), jax.tree.leaves(in_batched), size,
                     vals_tree[0].batch_tile)


def _barrier_call(fn, args):
    """``fn(*args)`` with the float leaves of ``args`` through one optimisation
    barrier: a model, params or state that a caller's jit closes over are
    constants there, and XLA's constant folding evaluates what depends only on
    them with its own arithmetic."""
    flat, tree = jax.tree.flatten(args)
    return fn(*jax.tree.unflatten(tree, _held_floats(flat)))


def _held_floats(flat: list) -> list:
    """``flat`` with its float leaves through one optimisation barrier
    (:func:`_barrier_call`)."""
    floats = [i for i, x in enumerate(flat) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    flat = list(flat)
    for i, x in zip(floats, jm.barrier([flat[i] for i in floats])):
        flat[i] = x
    return flat


def _scene_text(model: Model) -> str:
    nb, ng = model.nbody, model.ngeom
    return f"{nb} bod{'y' if nb == 1 else 'ies'}, {ng} geom{'' if ng == 1 else 's'}"


def _concrete(state: State) -> bool:
    """Not under a trace (inside a user's jit/vmap the compile happens outside the call,
    so only a call on concrete arrays is watched by the compile notice)."""
    return not isinstance(state.pos, jax.core.Tracer)


# --------------------------------------------------------------- force helpers
def _check_body(state: State, body: int) -> None:
    nb = state.pos.shape[-2]
    if isinstance(body, int) and not 0 <= body < nb:
        raise ValueError(f"body must be an existing body index in [0, {nb - 1}] (got {body})")


def _vec3(state: State, name: str, v, unit: str) -> jax.Array:
    """A 3-vector argument of the force helpers: ValueError naming ``name``, the
    expected shape and the shape or value received."""
    try:
        a = jnp.asarray(v, state.pos.dtype)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 3-vector [{unit}] (got {v!r})") from None
    if a.shape != (3,):
        raise ValueError(f"{name} must have shape (3,) [{unit}] (one world; vmap for batches) "
                         f"(got shape {a.shape})")
    if not isinstance(a, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(a))):
        raise ValueError(f"{name} must be finite [{unit}] (got {v!r})")
    return a


def _rot(state: State, body) -> jax.Array:
    return jm.quat_to_mat(state.quat[body])


def add_force(state: State, body: int, force) -> State:
    """dBodyAddForce: world-frame force [N] at the centre of mass."""
    _check_body(state, body)
    return state.replace(force=state.force.at[body].add(_vec3(state, "force", force, "N")))


def add_torque(state: State, body: int, torque) -> State:
    """dBodyAddTorque: world-frame torque [N m]."""
    _check_body(state, body)
    return state.replace(torque=state.torque.at[body].add(_vec3(state, "torque", torque, "N m")))


def add_rel_force(state: State, body: int, force) -> State:
    """dBodyAddRelForce: body-frame force [N] at the centre of mass."""
    _check_body(state, body)
    return add_force(state, body, jm.mm(_rot(state, body), _vec3(state, "force", force, "N")))


def add_rel_torque(state: State, body: int, torque) -> State:
    """dBodyAddRelTorque: body-frame torque [N m]."""
    _check_body(state, body)
    return add_torque(state, body, jm.mm(_rot(state, body), _vec3(state, "torque", torque, "N m")))


def add_force_at_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddForceAtPos: world force [N] at world point ``pos`` [m]."""
    _check_body(state, body)
    f = _vec3(state, "force", force, "N")
    r = _vec3(state, "pos", pos, "m") - state.pos[body]
    return add_torque(add_force(state, body, f), body, jnp.cross(r, f))


def add_force_at_rel_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddForceAtRelPos: world force [N] at body-frame point ``pos`` [m]."""
    _check_body(state, body)
    p = state.pos[body] + jm.mm(_rot(state, body), _vec3(state, "pos", pos, "m"))
    return add_force_at_pos(state, body, force, p)


def add_rel_force_at_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddRelForceAtPos: body-frame force [N] at world point ``pos`` [m]."""
    _check_body(state, body)
    f = jm.mm(_rot(state, body), _vec3(state, "force", force, "N"))
    return add_force_at_pos(state, body, f, pos)


def add_rel_force_at_rel_pos(state: State, body: int, force, pos) -> State:
    """dBodyAddRelForceAtRelPos: body-frame force [N] at body-frame point ``pos`` [m]."""
    _check_body(state, body)
    r = _rot(state, body)
    p = state.pos[body] + jm.mm(r, _vec3(state, "pos", pos, "m"))
    return add_force_at_pos(state, body, jm.mm(r, _vec3(state, "force", force, "N")), p)


# ------------------------------------------------------- enabling and disabling
def _enabled_field(state: State, body, who: str) -> None:
    _check_body(state, body)
    if state.body_enabled is None:
        raise ValueError(f"{who}: this state has no body_enabled (the model was built without "
                         "auto-disable): build with WorldBuilder(auto_disable=True) or "
                         "add_body(..., auto_disable=True); params.body_auto_disable = 0 then "
                         "keeps a body from disabling itself")


def enable(state: State, body: int) -> State:
    """dBodyEnable: the body is stepped again from the next step on, and its idle
    countdowns restart from ``params.body_auto_disable_steps`` / ``_time``
    (as ODE resets ``adis_stepsleft`` / ``adis_timeleft``; the velocity buffer is
    kept). Needs a model with auto-disable (``Model.auto_disable``)."""
    _enabled_field(state, body, "enable")
    a = state.auto_disable
    return state.replace(body_enabled=state.body_enabled.at[body].set(True),
                         auto_disable=a.replace(reset=a.reset.at[body].set(True)))


def disable(state: State, body: int) -> State:
    """dBodyDisable: the body is frozen (not stepped; its velocity and force
    accumulators are kept) until an enabled body reaches it through a joint or
    contact, or :func:`enable`. Needs a model with auto-disable."""
    _enabled_field(state, body, "disable")
    return state.replace(body_enabled=state.body_enabled.at[body].set(False))


def is_enabled(state: State, body: int) -> jax.Array:
    """dBodyIsEnabled: bool scalar (``state.body_enabled[body]``; vmap for batches)."""
    _enabled_field(state, body, "is_enabled")
    return state.body_enabled[body]
