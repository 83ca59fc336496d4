"""A batch of worlds steps each world exactly as it would step alone.

``jaxode.sim.batch_rules`` lets a vmapped batch share contact-slot indices (the
union of the worlds' contacts, when it fits the capacity) and skip a pair kind
with no overlapping pair in any world. Neither may change a world's result.
Truth: the same world stepped alone (unbatched jit), bit for bit (float64).
Cases: the union fits (shared indices, the solver's shared-row path), the union
overflows the capacity (each world its own indices: the solver reads its bodies
per world, untiled and in tiles of 2 worlds, one padded), and a box-box pair
overlapping in one world only (the pair kind runs for all).
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxode

H = 0.01
STEPS = 3
CAPACITY = 6
# world -> sphere heights (r = 0.1: resting at 0.1, touching below 0.1 + fall)
HEIGHTS = {
    "union fits": [[0.1, 0.1, 1.0], [0.1, 0.1, 1.0], [0.1, 0.5, 1.0]],
    "union overflows": [[0.1, 0.1, 1.0], [1.0, 0.1, 0.1], [0.1, 1.0, 0.1]],
}


def _model():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    for i in range(3):
        body = b.add_body(pos=(float(i), 0.0, 1.0), vel=(0.3, 0.0, 0.0),
                          mass=jaxode.mass.sphere(0.1, total=1.0))
        b.add_sphere(0.1, body=body)
    for x in (5.0, 5.25):  # two boxes in free fall, high above the plane
        body = b.add_body(pos=(x, 0.0, 3.0), mass=jaxode.mass.box((0.2,) * 3, total=1.0))
        b.add_box((0.2,) * 3, body=body)
    # 3 sphere-plane slots + 4 box-box slots (+ box-plane, unused); keep 6
    return b.build(contact_capacity=CAPACITY)


def _states(model, heights, box_gap):
    s = jaxode.init(model)
    pos = np.array(s.pos)
    pos[:3, 2] = heights
    pos[4, 0] = 5.0 + box_gap
    return s.replace(pos=jax.numpy.asarray(pos))


@pytest.fixture(scope="module")
def runs():
    with jax.enable_x64(True):
        model = _model()
        one = jax.jit(lambda s: jaxode.rollout(model, s, STEPS, H)[0])
        tiled = model.replace(batch_tile=2)

        def many(m):
            return jax.jit(jax.vmap(lambda s: jaxode.rollout(m, s, STEPS, H)[0]))

        out = {}
        for case, heights in HEIGHTS.items():
            # box pair: apart in worlds 0, 1; pressed together (0.19 m apart) in world 2
            worlds = [_states(model, h, gap) for h, gap in zip(heights, (0.5, 0.5, 0.19))]
            stacked = jax.tree.map(lambda *a: jax.numpy.stack(a), *worlds)
            alone = [jax.tree.map(np.asarray, one(w)) for w in worlds]
            out[case] = (jax.tree.map(np.asarray, many(model)(stacked)), alone)
            if case == "union overflows":
                out[case + ", tiles of 2"] = (jax.tree.map(np.asarray, many(tiled)(stacked)),
                                              alone)
        return out


@pytest.mark.parametrize("case", list(HEIGHTS) + ["union overflows, tiles of 2"])
def test_batched_worlds_step_as_alone(runs, case):
    batched, alone = runs[case]
    for w, ref in enumerate(alone):
        for field in ("pos", "quat", "vel", "angvel"):
            a, b = getattr(batched, field)[w], getattr(ref, field)
            assert np.array_equal(a, b), (case, w, field, np.abs(a - b).max())
        assert int(batched.ncontact[w]) == int(ref.ncontact)
        assert int(batched.overflow_contacts[w]) == int(ref.overflow_contacts) == 0
        # the same contacts, as sets (their slots may differ: shared slots leave gaps)
        got = sorted(_contact_keys(batched.contacts, w))
        want = sorted(_contact_keys(ref.contacts))
        assert got == want, (case, w)


def _contact_keys(c, w=None):
    pick = (lambda a: a[w]) if w is not None else (lambda a: a)
    valid = np.flatnonzero(pick(c.valid))
    return [(int(pick(c.geom1)[i]), int(pick(c.geom2)[i]), round(float(pick(c.depth)[i]), 9))
            for i in valid]


def _union_slots(alone):
    """Contact slots the batch's union needs: per geom pair, the most contacts
    any world has (a pair's contacts fill its first slots, deepest first)."""
    most = {}
    for ref in alone:
        per = {}
        for g1, g2, _ in _contact_keys(ref.contacts):
            per[(g1, g2)] = per.get((g1, g2), 0) + 1
        for k, n in per.items():
            most[k] = max(most.get(k, 0), n)
    return sum(most.values())


def test_cases_exercise_both_paths(runs):
    """Guard on the test itself (at the last step): the first case's contacts fit
    the capacity as a union, the second's do not, and the box pair touches in
    world 2 only (else the cases would not test what they claim)."""
    for case, expect_fit in (("union fits", True), ("union overflows", False)):
        _, alone = runs[case]
        assert (_union_slots(alone) <= CAPACITY) == expect_fit, (case, _union_slots(alone))
        box_pairs = [sum(1 for g1, g2, _ in _contact_keys(r.contacts) if min(g1, g2) >= 4)
                     for r in alone]
        assert box_pairs[0] == box_pairs[1] == 0 and box_pairs[2] > 0, box_pairs


# ----------------------------------------------- batch_rules.rule_on_batch
def _counted_custom_vmap():
    """A custom_vmap whose one-world function counts its Python traces, and a
    wrapper calling it as the solver does (the rule directly when it can)."""
    from jax.custom_batching import custom_vmap
    from jaxode.sim import batch_rules

    traced = []

    def alone(x, y):
        traced.append(x.shape)
        return x * 2.0 + y, x.sum()

    run = custom_vmap(alone)

    @run.def_vmap
    def rule(axis_size, in_batched, x, y):
        xb, yb = in_batched
        y = y if yb else jax.numpy.broadcast_to(y, x.shape)
        return (x * 2.0 + y, x.sum(axis=1)), (True, True)

    def call(x, y):
        out = batch_rules.rule_on_batch(rule, (x, y))
        return run(x, y) if out is None else out

    return call, run, traced


def test_rule_on_batch_skips_the_one_world_trace_and_gives_the_rule_result():
    call, run, traced = _counted_custom_vmap()
    x = np.arange(12.0).reshape(3, 4)    # 4 worlds of 3 numbers, the worlds on axis 1
    y = np.array([0.5, -1.0, 2.0])
    # batch axis 1 for x: the rule gets it at the front, as custom_vmap hands it
    got = jax.jit(jax.vmap(call, in_axes=(1, None)))(x, y)
    assert traced == []          # the one-world function was never traced
    want = jax.jit(jax.vmap(run, in_axes=(1, None)))(x, y)   # JAX's own custom_vmap path
    assert traced                 # ... which does trace it
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(got[0]), x.T * 2.0 + y)
    np.testing.assert_array_equal(np.asarray(got[1]), x.sum(axis=0))


@pytest.mark.parametrize("how", ["eager vmap", "nested vmap", "jvp inside"])
def test_rule_on_batch_leaves_other_transformations_to_custom_vmap(how):
    from jaxode.sim import batch_rules
    seen = []

    def rule(axis_size, in_batched, x):
        seen.append(axis_size)
        return x * 3.0, True

    def probe(x):
        out = batch_rules.rule_on_batch(rule, (x,))
        seen.append("direct" if out is not None else "general")
        return x * 3.0 if out is None else out

    x = np.ones((2, 3, 4))
    if how == "eager vmap":
        jax.vmap(probe)(x[0])
    elif how == "nested vmap":
        jax.jit(jax.vmap(jax.vmap(probe)))(x)
    else:
        jax.jit(jax.vmap(lambda v: jax.jvp(probe, (v,), (v,))[1]))(x[0])
    assert seen and all(s == "general" for s in seen), seen
