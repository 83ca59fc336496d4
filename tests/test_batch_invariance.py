"""A world's trajectory is bitwise the same alone, in a vmap of one and in any batch.

Users reproduce an RL episode or a sweep variant by re-running it alone, so the
batch a world was stepped in must not change a single bit of it. The scene
mixes what makes a step batch-dependent: contacts (their pair and contact
compaction shares slots across a batch, the solver's live-row count and the
pair kinds skipped depend on the other worlds) and joints, with rotated boxes
tumbling onto a plane (chaotic: a last-bit difference grows to millimetres
within these steps, so "equal to 1e-6" would not be the same test).
Truth: the world stepped alone by ``jaxode.rollout``; nothing else.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

STEPS = 60
DT = 0.01


def _model(solver="pgs", boxes=3):
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), solver=solver)
    b.add_plane(surface=jaxode.Surface(mu=0.6))
    m = jaxode.mass.box((0.2, 0.2, 0.2), total=1.0)
    for k in range(boxes):
        a = 0.3 + 0.2 * k
        q = (np.cos(a / 2), np.sin(a / 2) * 0.6, np.sin(a / 2) * 0.8, 0.0)
        i = b.add_body(pos=(0.25 * k, 0.05 * k, 0.25 + 0.22 * k), quat=q, vel=(0.5, 0.0, 0.0),
                       mass=m)
        b.add_box((0.2, 0.2, 0.2), body=i, surface=jaxode.Surface(mu=0.6))
    # a three-link hinge chain hanging from the world, away from the boxes
    link = jaxode.mass.capsule(0.02, 0.1, direction=3, total=0.2)
    prev = None
    for k in range(3):
        i = b.add_body(pos=(2.0 + 0.05 * (k + 0.5), 0.0, 1.0 - 0.1 * (k + 0.5)), mass=link)
        b.add_hinge(i, prev, anchor=(2.0 + 0.05 * k, 0.0, 1.0 - 0.1 * k), axis=(0.0, 1.0, 0.0))
        prev = i
    return b.build()


def _batch_params(model, w, seed):
    rng = np.random.default_rng(seed)
    p = jaxode.batch(model.params, w)
    dt = p.mu.dtype
    return p.replace(mu=p.mu * jnp.asarray(rng.uniform(0.3, 1.5, (w, 1)), dt),
                     erp=jnp.asarray(rng.uniform(0.15, 0.3, (w,)), dt))


def _world(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def _run_batch(model, states, params, final=False):
    # on one device (jaxode.batch shards a batch over the CPU devices with jaxlib
    # 0.11+): the split batch has its own test below
    one = jax.devices()[0]
    f = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, STEPS, DT, params=p)))
    out = f(jax.device_put(states, one), jax.device_put(params, one))
    return out if final else out[1]


def _assert_same(alone, other, label):
    """Every pos, quat, vel and angvel of the trajectory ``other`` equal, bit for
    bit, to the world alone's (``alone``); ``label`` names ``other`` in the message."""
    for name in ("pos", "quat", "vel", "angvel"):
        a, b = np.asarray(getattr(alone, name)), np.asarray(getattr(other, name))
        bad = np.argwhere(a != b)
        assert bad.size == 0, (f"{name}: alone and {label} differ from step {bad[0][0]} "
                               f"(max {np.abs(a - b).max():.3g})")


def _check(model):
    s0 = jaxode.init(model)
    params5 = _batch_params(model, 5, seed=1)
    # the world under test: index 2 of a batch of 5; then index 0 of another batch
    mine = _world(params5, 2)
    alone = jaxode.rollout(model, s0, STEPS, DT, params=mine)[1]
    in5 = _world(_run_batch(model, jaxode.batch(s0, 5), params5), 2)
    params8 = _batch_params(model, 8, seed=7)
    params8 = jax.tree.map(lambda a, m: a.at[0].set(m), params8, mine)
    in8 = _world(_run_batch(model, jaxode.batch(s0, 8), params8), 0)
    in1 = _world(_run_batch(model, jaxode.batch(s0, 1), jax.tree.map(lambda x: x[None], mine)), 0)
    moved = np.abs(np.asarray(alone.pos[-1] - s0.pos)).max()
    assert moved > 0.05, "the scene must move for the test to mean anything"
    assert int(np.max(np.asarray(alone.ncontact))) > 0, "the boxes must touch the plane"
    for label, other in (("vmap of one", in1), ("batch of 5", in5), ("batch of 8", in8)):
        _assert_same(alone, other, label)


def test_world_is_bitwise_the_same_alone_and_in_any_batch():
    _check(_model())


@pytest.mark.extended  # float32 (the default) is the default run's; 29 s
def test_world_is_bitwise_the_same_alone_and_in_any_batch_x64():
    with jax.enable_x64(True):
        _check(_model())


def test_world_is_bitwise_the_same_alone_and_in_a_batch_of_smaller_slot_counts():
    """A batch of at least ``SLOT_SIZES_MIN_WORLDS`` worlds builds its contact rows
    for only as many slots as are live in some world (``Model.slot_sizes``, a
    choice made per step from the whole batch); the world alone builds them for
    the whole capacity. Truth: the world alone."""
    from jaxode.sim.solver.batching import SLOT_SIZES_MIN_WORLDS, slot_counts

    model = _model(boxes=6)
    sizes = slot_counts(model.contact_capacity, model.slot_sizes)
    assert len(sizes) > 1, f"capacity {model.contact_capacity} has one slot count: {sizes}"
    s0 = jaxode.init(model)
    w = SLOT_SIZES_MIN_WORLDS
    # two kinds of world (the union of their contact slots must fit a smaller count)
    params = jax.tree.map(lambda a: a[np.arange(w) % 2], _batch_params(model, 2, seed=3))
    alone = jaxode.rollout(model, s0, STEPS, DT, params=_world(params, 3))[1]
    end, batch = _run_batch(model, jaxode.batch(s0, w), params, final=True)
    # the last step's slots in use in some world: a smaller count held them
    valid = np.asarray(end.contacts.valid).any(axis=0)
    used = valid.shape[0] - np.argmax(valid[::-1]) if valid.any() else 0
    assert 0 < used <= sizes[-2], (used, sizes)
    _assert_same(alone, _world(batch, 3), f"in the batch of {w}")


def test_world_is_bitwise_the_same_alone_and_in_a_batch_in_tiles():
    """A batch larger than ``Model.batch_tile`` runs tile after tile (10 worlds in
    tiles of 4: three tiles, the last padded with copies), through ``jit(vmap)``
    (the caller's vmap unwrapped, the step traced once batched) and through an
    eager ``vmap`` (``as_batch_member``'s rule), and with only some of the params
    batched. Truth: each world alone."""
    model = _model().replace(batch_tile=4)
    s0 = jaxode.init(model)
    params = _batch_params(model, 10, seed=5)
    one = jax.devices()[0]
    states, params = jax.device_put(jaxode.batch(s0, 10), one), jax.device_put(params, one)
    roll = lambda s, p: jaxode.rollout(model, s, STEPS, DT, params=p)[1]  # noqa: E731
    runs = {"jit(vmap)": jax.jit(jax.vmap(roll))(states, params),
            "eager vmap": jax.vmap(roll)(states, params)}
    for w in (1, 9):    # the first tile's second world; the last world (last tile, padded)
        alone = jaxode.rollout(model, s0, STEPS, DT, params=_world(params, w))[1]
        for label, traj in runs.items():
            _assert_same(alone, _world(traj, w), f"world {w} in tiles ({label})")
    # only mu batched, the other params shared (not batched in the rollout's vmap):
    # the batched params are laid out world-minor once per rollout, the shared ones
    # are left as they are (a sweep over one parameter builds its batches so)
    with_mu = lambda s, mu: jaxode.rollout(  # noqa: E731
        model, s, STEPS, DT, params=model.params.replace(mu=mu))[1]
    mixed = jax.jit(jax.vmap(with_mu))(states, params.mu)
    for w in (1, 9):
        alone = with_mu(s0, params.mu[w])
        _assert_same(alone, _world(mixed, w), f"world {w} in tiles with only mu batched")


def test_steps_of_a_batch_in_tiles_are_bitwise_those_of_each_world_alone():
    """``jit(vmap(step))`` of a batch larger than ``Model.batch_tile`` (10 worlds in
    tiles of 4): the caller's vmap unwrapped and the tiles stepped directly
    (``api._batched_step``). Truth: each world stepped alone, step by step."""
    model = _model().replace(batch_tile=4)
    s0 = jaxode.init(model)
    params = _batch_params(model, 10, seed=5)
    one = jax.devices()[0]
    params = jax.device_put(params, one)
    step = jax.jit(jax.vmap(lambda s, p: jaxode.step(model, s, DT, params=p)))
    states, batch_traj = jax.device_put(jaxode.batch(s0, 10), one), []
    for _ in range(STEPS // 3):
        states = step(states, params)
        batch_traj.append(states)
    for w in (1, 9):    # the first tile's second world; the last world (last tile, padded)
        s, alone = s0, []
        for _ in range(STEPS // 3):
            s = jaxode.step(model, s, DT, params=_world(params, w))
            alone.append(s)
        stack = lambda xs: jax.tree.map(lambda *a: np.stack(a), *xs)  # noqa: E731
        _assert_same(stack(alone), jax.tree.map(lambda x: x[:, w], stack(batch_traj)),
                     f"world {w} stepped in tiles")


@pytest.mark.skipif(len(jax.devices()) < 2, reason="needs 2 or more XLA devices")
def test_world_in_a_batch_split_over_devices_is_bitwise_the_same_alone():
    """A batch split over the CPU devices (jaxode.shard_worlds; jaxode.batch does it
    with jaxlib 0.11+): through ``jit`` of the sharded batch and through
    ``jaxode.map_worlds``, a world on the first device and one on the last step as
    alone. (Until the step multiplied by 1/h everywhere, as ODE does, XLA turned the
    rows' ``c / h`` into ``c * (1/h)`` in one program and not in the other: 1 ulp
    from the fourth step of a hinge chain.)"""
    model = _model()
    s0 = jaxode.init(model)
    params5 = _batch_params(model, 5, seed=1)
    mine, other = _world(params5, 2), _world(params5, 4)
    alone = {w: jaxode.rollout(model, s0, STEPS, DT, params=p)[1]
             for w, p in ((0, mine), (7, other))}
    params8 = _batch_params(model, 8, seed=7)
    params8 = jax.tree.map(lambda a, m, o: a.at[0].set(m).at[7].set(o), params8, mine, other)
    mesh = jaxode.world_mesh()
    states, params = jaxode.shard_worlds(jaxode.batch(s0, 8), mesh), jaxode.shard_worlds(params8, mesh)
    one = lambda s, p: jaxode.rollout(model, s, STEPS, DT, params=p)[1]  # noqa: E731
    runs = {"jit of the sharded batch": jax.jit(jax.vmap(one))(states, params),
            "map_worlds": jaxode.map_worlds(one, mesh)(states, params)}
    for label, got in runs.items():
        for w, ref in alone.items():
            _assert_same(ref, _world(got, w), f"{label}, world {w}")


def test_fma_contraction_is_off_where_jaxode_set_the_flags():
    """The mechanism: without FMA, ``a * b + c`` rounds the product first, as
    numpy does (XLA contracts it into one FMA in a fused kernel otherwise)."""
    st = jaxode.xla.status()
    if not st["fma_off"]:
        pytest.skip(f"FMA flags not in effect here: {st['reason']}")
    rng = np.random.default_rng(1)
    a, b, c = (rng.normal(size=4096).astype(np.float32) for _ in range(3))
    got = np.asarray(jax.jit(lambda a, b, c: a * b + c)(a, b, c))
    np.testing.assert_array_equal(got, (a * b).astype(np.float32) + c)


def _bin_model():
    # sixteen spheres and tumbling boxes dropped in a layer onto a plane (bench's bin_16
    # without its walls): every body spins, so the integration's norms all run
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), solver="pgs")
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    ball = jaxode.mass.sphere(0.05, total=0.5)
    cube = jaxode.mass.box((0.1, 0.1, 0.1), total=0.5)
    for k in range(16):
        i, j = divmod(k, 4)
        pos = (-0.34 + 0.225 * j, -0.34 + 0.225 * i, 0.1 + 0.02 * k)
        spin = (0.3 * (j - 1.5), 0.2 * (i - 1.5), 0.5 + 0.1 * k)
        if k % 2:
            a = 0.3
            q = (np.cos(a / 2), np.sin(a / 2) / np.sqrt(2), np.sin(a / 2) / np.sqrt(2), 0.0)
            body = b.add_body(pos=pos, quat=q, angvel=spin, mass=cube)
            b.add_box((0.1, 0.1, 0.1), body=body, surface=jaxode.Surface(mu=0.5))
        else:
            body = b.add_body(pos=pos, angvel=spin, mass=ball)
            b.add_sphere(0.05, body=body, surface=jaxode.Surface(mu=0.5))
    return b.build()


def test_world_is_bitwise_the_same_alone_and_in_a_wide_untiled_batch():
    """An untiled batch (``Model.batch_tile = 0``) of 64 worlds of 16 bodies: each
    operation of the step is one kernel over 1,024 bodies, and XLA's CPU compiler
    lowers a reduction by its size. A world's ``jnp.sum`` of 3 or 4 squares in the
    integration rounded differently there than alone (bench's bin_16 diverged at
    step 10); every floating sum of a few terms is now a chain of adds in index
    order (``jaxode.sim.math.sum_terms``). Truth: the world alone."""
    model = _bin_model().replace(batch_tile=0)
    s0 = jaxode.init(model)
    w = 64
    params = _batch_params(model, w, seed=5)
    alone = jaxode.rollout(model, s0, STEPS, DT, params=_world(params, 37))[1]
    batch = _run_batch(model, jaxode.batch(s0, w), params)
    assert np.abs(np.asarray(alone.angvel)).max() > 0.4, "the bodies must spin"
    assert int(np.max(np.asarray(alone.ncontact))) > 0, "the bodies must touch the plane"
    _assert_same(alone, _world(batch, 37), f"in an untiled batch of {w}")


def test_joint_queries_and_applied_forces_are_bitwise_the_same_alone_and_in_a_wide_batch():
    """The queries and force helpers a policy reads or writes every step (hinge and
    slider rates, a slider's position, a force given in the body frame) on 4,096
    worlds at once and on each world alone: XLA CPU lowered ``jnp.dot`` of two
    3-vectors under a vmap of 4,096 to other bits than alone (84 of 256 sampled
    worlds, jaxlib 0.10.2), so they compute with ``jm.mm`` (adds in index order).
    Truth: each world alone."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    link = jaxode.mass.box((0.1, 0.1, 0.3), total=1.0)
    i = b.add_body(pos=(0.0, 0.0, 1.0), mass=link)
    b.add_hinge(i, None, anchor=(0.0, 0.0, 1.15), axis=(0.3, 0.9, 0.1))
    k = b.add_body(pos=(0.0, 0.0, 0.6), mass=link)
    b.add_slider(k, i, axis=(0.2, 0.1, 0.95))
    model = b.build()
    w = 4096
    rng = np.random.default_rng(11)
    s = jaxode.batch(jaxode.init(model), w)
    q = rng.normal(size=(w, 2, 4))
    s = s.replace(quat=jnp.asarray(q / np.linalg.norm(q, axis=-1, keepdims=True), s.quat.dtype),
                  pos=jnp.asarray(rng.normal(size=(w, 2, 3)), s.pos.dtype),
                  vel=jnp.asarray(rng.normal(size=(w, 2, 3)), s.vel.dtype),
                  angvel=jnp.asarray(rng.normal(size=(w, 2, 3)), s.angvel.dtype))
    force = jnp.asarray(rng.normal(size=(w, 3)), s.pos.dtype)

    def probe(st, f):
        pushed = jaxode.add_rel_force(st, 1, f)
        return (jaxode.hinge_angle_rate(model, st, 0), jaxode.slider_position(model, st, 1),
                jaxode.slider_position_rate(model, st, 1), pushed.force)

    one = jax.devices()[0]
    batched = jax.jit(jax.vmap(probe))(*jax.device_put((s, force), one))
    alone = jax.jit(probe)
    for n in range(0, w, 16):
        mine = alone(_world(s, n), force[n])
        for name, a, bb in zip(("hinge rate", "slider position", "slider rate", "force"),
                               mine, batched):
            assert np.array_equal(np.asarray(a), np.asarray(bb)[n]), (
                f"{name}: world {n} alone {np.asarray(a)} and in the batch {np.asarray(bb)[n]}")


def test_world_is_bitwise_the_same_whichever_xla_cpu_code_generator():
    """``import jaxode`` picks XLA CPU's older code generator where jaxlib has it
    (jaxode/xla.py: it compiles the step in 70-85 % of the time); the same program
    through XLA's fusion emitters must give the same bits, so a world replayed
    under either (a user's own ``XLA_FLAGS``, another jaxlib) stays the world.
    Both at the suite's optimisation level 0 (12 s here against 26 s at users'
    level 2; the bench scenes' SHA-256 at level 2 agreed too, bench/RESULTS.md
    session 36)."""
    if not jaxode.xla.has_legacy_emitter():
        pytest.skip("this jaxlib has only the fusion emitters (jaxlib 0.11 and newer)")
    if jax.default_backend() != "cpu":
        pytest.skip("an XLA CPU option")
    model = _model()
    s0 = jaxode.init(model)
    lowered = jax.jit(lambda s: jaxode.rollout(model, s, STEPS, DT)).lower(s0)
    flag = jaxode.xla.LEGACY_EMITTER_FLAG.lstrip("-")
    level = {"xla_backend_optimization_level": 0}
    older = lowered.compile(compiler_options={**level, flag: False})(s0)
    fusion = lowered.compile(compiler_options={**level, flag: True})(s0)
    for a, b in zip(jax.tree.leaves(older), jax.tree.leaves(fusion)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

