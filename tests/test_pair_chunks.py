"""A long pair list runs its pair function in chunks, up to the batch's last live pair.

``jaxode.sim.batch_rules.in_chunks`` evaluates a function mapped over a
compacted (live-first) list a chunk at a time and stops after the chunk holding
the last live entry of any world in the batch; ``narrowphase.collide`` uses it
for pair groups longer than 2 x ``PAIR_CHUNK`` slots (a 21-box stack: ~30 live
box-box pairs of 108 slots). Truth: the same function evaluated on every entry
at once (``jax.vmap``), and the collision of the same scene with chunking off;
a world's contacts in a batch are its contacts alone, bit for bit.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.sim import batch_rules, narrowphase


def _fn(x, y):
    """A per-entry function (x scalar, y (2,)) with a pytree result of two shapes."""
    return {"a": jnp.sin(x) * y[0] + jnp.cos(y[1]), "b": y * x ** 2}


def _inputs(n=37, worlds=(5, 12, 0)):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(len(worlds), n))
    y = rng.normal(size=(len(worlds), n, 2))
    mask = np.arange(n)[None, :] < np.asarray(worlds)[:, None]   # live first, per world
    return jnp.asarray(mask), jnp.asarray(x), jnp.asarray(y)


def test_chunks_give_the_function_on_live_entries_and_zeros_past_the_last_live_chunk():
    mask, x, y = _inputs()
    plain = jax.vmap(jax.vmap(_fn))(x, y)
    chunk = 8
    for w in range(mask.shape[0]):   # alone: up to this world's last live chunk
        got = jax.jit(lambda m, a, b: batch_rules.in_chunks(m, jax.vmap(_fn), a, b, chunk=chunk))(
            mask[w], x[w], y[w])
        nlive = int(mask[w].sum())
        done = -(-nlive // chunk) * chunk
        for k in ("a", "b"):
            g, p = np.asarray(got[k]), np.asarray(plain[k][w])
            np.testing.assert_array_equal(g[:done], p[:done])
            assert not g[done:].any(), f"world {w}: entries past chunk {done // chunk} not skipped"
    # a batch: up to the chunk of the batch's last live entry (world 1: 12 -> 2 chunks)
    got = jax.jit(jax.vmap(lambda m, a, b: batch_rules.in_chunks(m, jax.vmap(_fn), a, b,
                                                                 chunk=chunk)))(mask, x, y)
    for k in ("a", "b"):
        g, p = np.asarray(got[k]), np.asarray(plain[k])
        np.testing.assert_array_equal(g[:, :16], p[:, :16])
        assert not g[:, 16:].any()


def test_chunks_differentiate_as_the_function_on_every_entry():
    mask, x, y = _inputs()
    m, a, b = mask[1], x[1], y[1]

    def loss(run, a):
        out = run(a)
        return jnp.sum(jnp.where(m, out["a"], 0.0)) + jnp.sum(jnp.where(m[:, None], out["b"], 0.0))

    g_chunks = jax.grad(lambda a: loss(
        lambda a: batch_rules.in_chunks(m, jax.vmap(_fn), a, b, chunk=8), a))(a)
    g_plain = jax.grad(lambda a: loss(lambda a: jax.vmap(_fn)(a, b), a))(a)
    np.testing.assert_allclose(np.asarray(g_chunks), np.asarray(g_plain), rtol=1e-6, atol=1e-12)
    assert np.abs(np.asarray(g_plain)[:12]).max() > 0


def _pile():
    """Ten boxes in two loose columns: 45 box-box slots, ~a dozen overlapping."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane()
    rng = np.random.default_rng(0)
    for k in range(10):
        a = rng.uniform(0, np.pi)
        q = (np.cos(a / 2), 0.0, 0.0, np.sin(a / 2))
        i = b.add_body(pos=(0.3 * (k % 2) + rng.uniform(-0.02, 0.02), rng.uniform(-0.02, 0.02),
                            0.1 + 0.19 * (k // 2)), quat=q,
                       mass=jaxode.mass.box((0.2, 0.2, 0.2), total=1.0))
        b.add_box((0.2, 0.2, 0.2), body=i)
    return b.build()


def test_pile_contacts_with_chunks_are_those_without_and_a_world_in_a_batch_as_alone(monkeypatch):
    model = _pile()
    (grp,) = [g for g in model.pair_groups if g.type1 == g.type2]
    assert grp.capacity > 2 * narrowphase.PAIR_CHUNK, "the box-box list must be chunked"
    s0 = jaxode.init(model)
    states = [s0.replace(pos=s0.pos.at[:, 2].add(dz)) for dz in (0.0, -0.004, 0.5)]

    def contacts(s):
        c = jax.jit(lambda s: narrowphase.detect(model, s).contacts)(s)
        return jax.tree.map(np.asarray, c)

    chunked = [contacts(s) for s in states]
    live = [int(c.valid.sum()) for c in chunked]
    assert live[0] > 0 and live[2] < live[0], live   # touching pairs; world 2 lifted apart
    batch = jax.tree.map(lambda *a: jnp.stack(a), *states)
    batched = jax.tree.map(np.asarray, jax.jit(jax.vmap(
        lambda s: narrowphase.detect(model, s).contacts))(batch))
    monkeypatch.setattr(narrowphase, "PAIR_CHUNK", 10_000)   # one call over every slot
    plain = [contacts(s) for s in states]
    for w, (c, p) in enumerate(zip(chunked, plain)):
        for f in ("pos", "normal", "depth", "valid", "geom1", "geom2"):
            np.testing.assert_array_equal(getattr(c, f), getattr(p, f), err_msg=f"world {w} {f}")
            # in a batch a world's contacts keep their order in the batch's shared slots
            mine = getattr(batched, f)[w][batched.valid[w]]
            np.testing.assert_array_equal(mine, getattr(c, f)[c.valid],
                                          err_msg=f"world {w} {f} in the batch")
