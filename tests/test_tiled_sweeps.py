"""The batched sweeps in tiles of worlds (``Model.batch_tile``, jaxode/sim/solver/batching.py).

A batch's solve may run tile after tile of T worlds (the last tile padded):
each world's rows are the same rows updated in the same order with the same
arithmetic, so the tiled solve must give every world's lambdas and forces
bitwise as the untiled one, as the world solved in a vmap of one (a batch no
larger than the tile is untiled) and as the world solved without vmap; and
worlds with their own body indices and friction kinds per row (the path a
batch takes when its worlds' contacts lie in different slots) each as alone.
Truth: the untiled batch and the world on its own, as in
tests/test_batch_invariance.py.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.sim import solver
from jaxode.sim.constraint import Rows
from jaxode.sim.solver import batching

from fast_compile import OPTIONS as _FAST

NB = 5            # moving bodies; index NB is the static world
H = 0.01
W = 7             # worlds: tiles of 3 leave a remainder of one


def _structure(seed=3, n_joint=4, n_contact=6, block=2, shift=0):
    """Body indices and row kinds shared by the batch (joint rows first); ``shift``
    moves which contacts have box friction."""
    rng = np.random.default_rng(seed)
    pj = [tuple(rng.choice(NB, 2, replace=False)) for _ in range(n_joint // 2)]
    pc = [(int(rng.integers(NB)), NB) for _ in range(n_contact // 2)] + \
        [tuple(int(x) for x in rng.choice(NB, 2, replace=False)) for _ in range(n_contact // 2)]
    b1 = np.array([p[0] for p in pj for _ in (0, 1)] + [p[0] for p in pc], np.int32)
    b2 = np.array([p[1] for p in pj for _ in (0, 1)] + [p[1] for p in pc], np.int32)
    pyramid = (np.arange(n_contact) + shift) % 3 != 2    # every third contact: box friction
    findex = np.where(np.repeat(pyramid, block),
                      np.repeat(n_joint + np.arange(n_contact), block), -1).astype(np.int32)
    tb1, tb2 = np.repeat(b1[n_joint:], block), np.repeat(b2[n_joint:], block)
    return b1, b2, tb1, tb2, findex, n_joint, n_contact, block


def _world(seed, st, dtype):
    """One world's float data on the shared structure (a contact per world inactive)."""
    b1, b2, tb1, tb2, findex, nj, nc, block = st
    rng = np.random.default_rng(100 + seed)
    nh, nt = len(b1), len(tb1)
    act = np.ones(nh, bool)
    act[nj + seed % nc] = False
    f = lambda a: jnp.asarray(a, dtype)  # noqa: E731
    head = Rows(body1=b1, body2=b2, j1=f(rng.normal(size=(nh, 6))), j2=f(rng.normal(size=(nh, 6))),
                c=f(rng.normal(size=nh) * 0.1), cfm=f(np.full(nh, 1e-5)),
                lo=f(np.r_[np.full(nj, -np.inf), np.zeros(nc)]), hi=f(np.full(nh, np.inf)),
                findex=np.full(nh, -1, np.int32), active=jnp.asarray(act))
    mu = rng.uniform(0.2, 1.0, nt)
    tail = Rows(body1=tb1, body2=tb2, j1=f(rng.normal(size=(nt, 6))), j2=f(rng.normal(size=(nt, 6))),
                c=f(np.zeros(nt)), cfm=f(np.full(nt, 1e-5)), lo=f(np.where(findex >= 0, -mu, -1.5)),
                hi=f(np.where(findex >= 0, mu, 1.5)), findex=findex,
                active=jnp.asarray(np.repeat(act[nj:], block)))
    a = rng.normal(size=(NB, 3, 3))
    inv_inertia = f(np.concatenate([np.einsum("nij,nkj->nik", a, a) + np.eye(3),
                                    np.zeros((1, 3, 3))]))
    inv_mass = f(np.r_[rng.uniform(0.5, 2.0, NB), 0.0])
    rhs_body = f(np.concatenate([rng.normal(size=(NB, 6)), np.zeros((1, 6))]))
    return head, tail, inv_mass, inv_inertia, rhs_body


def _solve(name, tile, nj):
    opts = {"reorder": nj} if name == "pgs" else {}

    def f(head, tail, inv_mass, inv_inertia, rhs_body, sor):
        # 20 iterations: pgs shuffles the joint rows before iterations 8 and 16
        return tuple(solver.solve(name, head, tail, inv_mass, inv_inertia, rhs_body, H, sor, 20,
                                  block=2, step=5, tile=tile, **opts))[:3]
    return f


def _stack(trees):
    return jax.tree.map(lambda *a: jnp.stack(a) if isinstance(a[0], jax.Array) else a[0], *trees)


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("name", ["pgs", pytest.param("colored", marks=pytest.mark.extended)])
def test_tiled_solve_is_bitwise_the_untiled_one_and_each_world_alone(name, x64):
    with jax.enable_x64(x64):
        dtype = jnp.float64 if x64 else jnp.float32
        st = _structure()
        worlds = [_world(k, st, dtype) for k in range(W)]
        sor = jnp.asarray(np.linspace(1.0, 1.3, W), dtype)
        batch = _stack(worlds)
        out = {}
        # the body indices (numpy) shared by the batch, the float data per world
        axes = jax.tree.map(lambda a: 0 if isinstance(a, jax.Array) else None, worlds[0])
        for tile in (0, 3):
            f = jax.jit(jax.vmap(_solve(name, tile, st[5]), in_axes=(*axes, 0)),
                        compiler_options=_FAST)
            out[tile] = [np.asarray(o) for o in f(*batch, sor)]
        assert np.abs(out[0][0]).max() > 0.1, "the rows must carry force for the test to mean anything"
        for a, b in zip(out[0], out[3]):
            assert a.dtype == dtype and np.array_equal(a, b), np.abs(a - b).max()
        alone = jax.jit(_solve(name, 3, st[5]), compiler_options=_FAST)
        for k in (0, W - 1):  # the first world and the last (in the padded tile)
            # a vmap of one, and the world solved without vmap
            one = [np.asarray(o)[0] for o in f(*_stack(worlds[k:k + 1]), sor[k:k + 1])]
            mine = [np.asarray(o) for o in alone(*worlds[k], sor[k])]
            for a, c, b in zip(one, mine, out[3]):
                assert np.array_equal(a, b[k]), (k, np.abs(a - b[k]).max())
                assert np.array_equal(c, b[k]), (k, np.abs(c - b[k]).max())


def test_batch_tile_resolution():
    # AUTO picks a tile for batches larger than it; a batch no larger than the tile is untiled
    t = batching.AUTO_TILE
    assert t >= 2
    if jax.default_backend() != "cpu":
        assert batching.tile_worlds(batching.AUTO, 1024) is None
        return
    assert batching.tile_worlds(batching.AUTO, t) is None
    assert batching.tile_worlds(batching.AUTO, t + 1) == t
    assert batching.tile_worlds(0, 1024) is None
    assert batching.tile_worlds(8, 1024) == 8


def test_bad_batch_tile_is_refused_with_its_value():
    model = jaxode.WorldBuilder().build()
    with pytest.raises(ValueError, match=r"batch_tile.*-5"):
        batching.check_tile(-5)
    with pytest.raises(ValueError, match=r"batch_tile.*1"):
        batching.check_tile(1)
    assert model.batch_tile == batching.AUTO


def test_tiled_batch_steps_each_world_as_alone():
    """``jax.vmap(rollout)`` of a batch larger than ``Model.batch_tile`` runs tile
    after tile (jaxode/api.py): 5 differing worlds in tiles of 2 (one padded)
    give each world bitwise its trajectory alone."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.6))
    m = jaxode.mass.box((0.2, 0.2, 0.2), total=1.0)
    for k in range(2):
        q = (np.cos(0.2 + k / 5), np.sin(0.2 + k / 5) * 0.6, np.sin(0.2 + k / 5) * 0.8, 0.0)
        i = b.add_body(pos=(0.3 * k, 0.0, 0.12 + 0.05 * k), quat=q, vel=(0.5, 0.0, 0.0), mass=m)
        b.add_box((0.2, 0.2, 0.2), body=i, surface=jaxode.Surface(mu=0.6))
    model = b.build().replace(batch_tile=2)
    s0 = jaxode.init(model)
    rng = np.random.default_rng(4)
    p = jaxode.batch(model.params, 5)
    p = p.replace(mu=p.mu * jnp.asarray(rng.uniform(0.3, 1.5, (5, 1)), p.mu.dtype))
    traj = jax.jit(jax.vmap(lambda s, q: jaxode.rollout(model, s, 12, 0.01, params=q)[1]))(
        jaxode.batch(s0, 5), p)
    assert int(np.max(np.asarray(traj.ncontact))) > 0, "the boxes must touch the plane"
    for k in (0, 4):   # the first world, and the last (its tile padded)
        alone = jaxode.rollout(model, s0, 12, 0.01, params=jax.tree.map(lambda x: x[k], p))[1]
        for name in ("pos", "quat", "vel", "angvel"):
            a, b_ = np.asarray(getattr(alone, name)), np.asarray(getattr(traj, name))[k]
            assert np.array_equal(a, b_), (k, name, np.abs(a - b_).max())
    assert not np.array_equal(np.asarray(traj.pos)[0], np.asarray(traj.pos)[4])


@pytest.mark.parametrize("tile", [0, 3])
def test_worlds_with_their_own_rows_solve_as_alone(tile):
    """A batch whose worlds have their own body indices and friction kinds per row
    (as contacts compacted into different slots) runs the world-minor sweeps on
    each world's own indices (jaxode/sim/solver/batching.py), untiled and in tiles
    (the last padded): each world's lambdas and forces bitwise as solved alone."""
    worlds = []
    for k in range(W):
        st = _structure(seed=10 + k, shift=k // 3)   # tile j holds worlds j, j + 3, j + 6
        head, tail, *rest = _world(k, st, jnp.float32)
        head = head._replace(body1=jnp.asarray(head.body1), body2=jnp.asarray(head.body2),
                             findex=jnp.asarray(head.findex))
        tail = tail._replace(body1=jnp.asarray(tail.body1), body2=jnp.asarray(tail.body2),
                             findex=jnp.asarray(tail.findex))
        worlds.append((head, tail, *rest))
    b1 = np.stack([np.asarray(w[0].body1) for w in worlds])
    pyr = np.stack([np.asarray(w[1].findex) >= 0 for w in worlds])
    assert not (b1 == b1[:1]).all() and not (pyr == pyr[:1]).all(), "worlds must differ"
    sor = jnp.asarray(np.linspace(1.0, 1.3, W), jnp.float32)
    nj = 4
    f = jax.jit(jax.vmap(_solve("pgs", tile, nj)), compiler_options=_FAST)
    out = [np.asarray(o) for o in f(*_stack(worlds), sor)]
    assert np.abs(out[0]).max() > 0.1, "the rows must carry force for the test to mean anything"
    alone = jax.jit(_solve("pgs", tile, nj), compiler_options=_FAST)
    for k in range(W):
        for a, b in zip(alone(*worlds[k], sor[k]), out):
            a = np.asarray(a)
            assert np.array_equal(a, b[k]), (k, np.abs(a - b[k]).max())
