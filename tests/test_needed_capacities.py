"""``jaxode.needed_capacities``: the capacities a trial rollout needs, and that they suffice.

Truth: ODE's contact counts for resting boxes (dBoxPlane and dBoxBox each give
the 4 corners of a resting face: a box on the floor 4, a box resting on an
equal box 4) and the broadphase's geometry (a plane's AABB is unbounded, so
every box pairs with it; boxes 2 m apart do not overlap). Scene: box A on the
floor, box B resting on A, box C on the floor 2 m away: 12 contacts, 3
box-plane pairs, 1 box-box pair. Then the model rebuilt with exactly those
capacities runs the same trajectory without overflow, and one slot fewer
overflows at the start, when every contact is present (so the measured need
is the least that fits).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.sim import narrowphase

DT, STEPS = 0.01, 60


def _builder():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    m = jaxode.mass.box((0.2,) * 3, total=1.0)
    for pos in ((0.0, 0.0, 0.1), (0.0, 0.0, 0.3), (2.0, 0.0, 0.1)):
        i = b.add_body(pos=pos, mass=m)
        b.add_box((0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.5))
    return b


def _final(model):
    return jax.jit(lambda s: jaxode.rollout(model, s, STEPS, DT)[0])(jaxode.init(model))


@pytest.fixture(scope="module")
def measured():
    model = _builder().build()
    return model, jaxode.needed_capacities(model, jaxode.init(model), STEPS, DT)


def test_needs_match_the_scene(measured):
    model, caps = measured
    assert caps.contact_capacity == 12          # 4 + 4 + 4 resting-face corners
    assert caps.pairs == {"box-plane": 3, "box-box": 1}
    assert caps.pair_capacity == 3
    assert caps.model_contact_capacity == model.contact_capacity
    assert caps.model_pairs == {"box-plane": 3, "box-box": 3}
    assert (caps.worlds, caps.steps, caps.triangles_overflow) == (1, STEPS, 0)
    assert caps.build_args() == {"contact_capacity": 15, "pair_capacity": 4}
    with pytest.raises(ValueError, match="margin"):
        caps.build_args(margin=0.5)


def test_measured_capacities_suffice_and_are_the_least(measured):
    model, caps = measured
    ref = _final(model)
    tight = _final(_builder().build(**caps.build_args(margin=1.0)))
    assert int(tight.overflow_contacts) == 0 and int(tight.overflow_pairs) == 0
    np.testing.assert_allclose(np.asarray(tight.pos), np.asarray(ref.pos), atol=1e-6)
    # one slot fewer: the collision pass at the start (every contact present) overflows
    for short, counter in ((dict(contact_capacity=caps.contact_capacity - 1,
                                 pair_capacity=caps.pair_capacity), "overflow_contacts"),
                           (dict(contact_capacity=caps.contact_capacity,
                                 pair_capacity=caps.pair_capacity - 1), "overflow_pairs")):
        m = _builder().build(**short)
        found = jax.jit(lambda s, m=m: narrowphase.detect(m, s))(jaxode.init(m))
        assert int(getattr(found, counter)) > 0, (short, counter)


def test_a_batch_reports_its_most_demanding_world():
    model = _builder().build()
    s0 = jaxode.init(model)
    # world 1: C resting on B (a stack of three): two box-box pairs (A-B, B-C;
    # A's top and C's bottom 0.2 m apart), still 12 contacts (4 per resting face)
    s1 = s0.replace(pos=s0.pos.at[2].set(np.array([0.0, 0.0, 0.5], np.float32)))
    states = jax.tree.map(lambda a, b: jnp.stack([a, b]), s0, s1)
    caps = jaxode.needed_capacities(model, states, 5, DT)
    assert caps.worlds == 2
    assert caps.pairs == {"box-plane": 3, "box-box": 2}
    assert caps.contact_capacity == 12


def test_bad_arguments_are_named():
    model = _builder().build()
    with pytest.raises(TypeError, match="state must be a jaxode.State"):
        jaxode.needed_capacities(model, model.params, 5, DT)
    with pytest.raises(ValueError, match="n_steps must be an integer >= 1"):
        jaxode.needed_capacities(model, jaxode.init(model), 0, DT)
