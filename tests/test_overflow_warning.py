"""Overflow is said on the host, once, with the capacity that would have sufficed.

Issue 19 (item 4): a batch whose worlds drop contacts or candidate pairs for
lack of capacity must not pass silently: ``rollout`` (called on concrete
arrays, or under an eager ``jax.vmap`` as the README does), ``sweep`` and the
envs' batched steps warn once (:class:`jaxode.CapacityWarning`), and
``jaxode.warn_overflow`` checks what a user's own ``jit(vmap(rollout))``
returned. Truths, independent of the code under test:

- a cube resting on a plane face down touches it at its 4 bottom corners
  (ODE's dCollideBoxPlane; the ODE manual's "box-plane: up to 4 contacts"), so
  two such cubes need 8 contact slots, and the message must say
  ``contact_capacity=8``; rebuilt with what the message says, the same run has
  no overflow and no warning;
- two cubes 0.6 m apart on one static floor box overlap it in 2 box-box pairs
  and each other in none (their AABBs are 0.4 m apart), so with a pair
  capacity of 1 the message must say ``pair_capacity=2``.
"""
from __future__ import annotations

import re
import warnings

import jax
import numpy as np
import pytest

import jaxode
from jaxode import overflow_report

HALF = 0.1     # cube half extent [m]
DT = 0.01
STEPS = 3


def _cubes(floor: str = "plane", **build) -> jaxode.Model:
    """Two 0.2 m cubes (1 kg) 0.6 m apart, face down, 1 mm into a plane (added
    first) or into the top of a static 4 m floor box (added last)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    if floor == "plane":
        b.add_plane()
    m = jaxode.mass.box((2 * HALF,) * 3, total=1.0)
    for k in range(2):
        body = b.add_body(pos=(0.6 * k, 0.0, HALF - 1e-3), mass=m)
        b.add_box((2 * HALF,) * 3, body=body)
    if floor == "box":
        b.add_box((4.0, 4.0, 1.0), pos=(0.0, 0.0, -0.5))
    return b.build(**build)


@pytest.fixture(autouse=True)
def _fresh_registry():
    """Each test sees the first warning of a scene (the registry is per process)."""
    overflow_report._WARNED.clear()
    yield
    overflow_report._WARNED.clear()


def _caught(fn, where=None):
    """fn()'s result and the CapacityWarning messages it gave; ``where``: a list
    that gets each warning's (file, line)."""
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        out = fn()
    mine = [w for w in got if issubclass(w.category, jaxode.CapacityWarning)]
    if where is not None:
        where += [(w.filename, w.lineno) for w in mine]
    return out, [str(w.message) for w in mine]


def _suggested(msg: str, name: str) -> int:
    m = re.search(name + r"=(\d+)", msg)
    assert m, msg
    return int(m.group(1))


def test_rollout_warns_once_with_the_contact_capacity_that_suffices():
    model = _cubes(contact_capacity=6)
    s0 = jaxode.init(model)
    where = []
    (final, traj), msgs = _caught(lambda: jaxode.rollout(model, s0, STEPS, DT), where)
    assert int(final.overflow_contacts) > 0
    assert len(msgs) == 1 and "1 of 1 world dropped contacts" in msgs[0], msgs
    assert where[0][0] == __file__          # the warning points at the caller's line
    assert _suggested(msgs[0], "contact_capacity") == 8     # 4 corners x 2 cubes
    assert not re.search(r"pair_capacity=\d", msgs[0])
    # once per scene: the same run again is silent, the explicit check is not
    _, again = _caught(lambda: jaxode.rollout(model, s0, STEPS, DT))
    assert again == []
    _, explicit = _caught(lambda: jaxode.warn_overflow(model, final, traj))
    assert len(explicit) == 1 and _suggested(explicit[0], "contact_capacity") == 8

    # the advice suffices
    fits = _cubes(contact_capacity=8)
    (final8, _), msgs8 = _caught(lambda: jaxode.rollout(fits, jaxode.init(fits), STEPS, DT))
    assert msgs8 == [] and int(final8.overflow_contacts) == 0


def test_eager_vmap_rollout_warns_and_a_jitted_one_is_checked_by_warn_overflow():
    model = _cubes(contact_capacity=6)
    states = jaxode.batch(jaxode.init(model), 2)
    run = lambda s: jaxode.rollout(model, s, STEPS, DT)   # noqa: E731
    (finals, trajs), msgs = _caught(lambda: jax.vmap(run)(states))   # the README's way
    assert len(msgs) == 1 and "2 of 2 worlds dropped contacts" in msgs[0], msgs
    assert _suggested(msgs[0], "contact_capacity") == 8

    overflow_report._WARNED.clear()
    (finals_j, trajs_j), inside = _caught(lambda: jax.jit(jax.vmap(run))(states))
    assert inside == []           # nothing reaches the host from inside a jit
    np.testing.assert_array_equal(np.asarray(finals_j.overflow_contacts),
                                  np.asarray(finals.overflow_contacts))
    msg, explicit = _caught(lambda: jaxode.warn_overflow(model, finals_j, trajs_j, before=states))
    assert explicit == [msg] and _suggested(msg, "contact_capacity") == 8
    # counters that did not grow since `before` are not an overflow of this run
    assert jaxode.warn_overflow(model, finals_j, before=finals_j) is None


def test_pair_overflow_names_the_pair_capacity_that_suffices():
    model = _cubes("box", pair_capacity=1)
    (final, _), msgs = _caught(lambda: jaxode.rollout(model, jaxode.init(model), STEPS, DT))
    assert int(final.overflow_pairs) > 0
    assert len(msgs) == 1 and "candidate pairs" in msgs[0], msgs
    assert _suggested(msgs[0], "pair_capacity") == 2            # one floor pair per cube
    assert "box-box 2, capacity 1" in msgs[0]


def test_sweep_warns_once_for_its_variants():
    model = _cubes(contact_capacity=6)
    res, msgs = _caught(lambda: jaxode.sweep(
        model, jaxode.init(model), STEPS, DT, grid={"erp": [0.2, 0.5, 0.8]},
        metrics={"z": lambda m, traj, final: final.pos[0, 2]}, progress=False))
    assert len(res.columns["z"]) == 3
    assert len(msgs) == 1 and "sweep: 3 of 3 worlds dropped contacts" in msgs[0], msgs
    assert _suggested(msgs[0], "contact_capacity") == 8


class _Cubes(jaxode.envs.Env):
    """The two cubes as an env: no action effect, observation the heights."""

    name = "cubes"
    observation_size = 2
    action_size = 1
    action_low, action_high = np.array([-1.0]), np.array([1.0])
    obs_low, obs_high = np.array([-10.0, -10.0]), np.array([10.0, 10.0])

    def init_physics(self, key, params):
        return jaxode.init(self.model), {}

    def control(self, physics, params, action):
        return physics, params

    def observe(self, physics, params, info):
        return physics.pos[:, 2]

    def reward_done(self, before, physics, action):
        return physics.pos[0, 2], False


def test_env_step_batch_warns_once_without_waiting_for_the_device():
    env = _Cubes(_cubes(contact_capacity=6), dt=DT, episode_length=50)
    states = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 4))
    actions = np.zeros((4, 1), np.float32)
    msgs = []
    for _ in range(4):
        states, got = _caught(lambda: env.step_batch(states, actions))
        jax.block_until_ready(states)     # so the next call finds these counters ready
        msgs += got
    assert len(msgs) == 1 and "env 'cubes': 4 of 4 worlds dropped contacts" in msgs[0], msgs
    assert _suggested(msgs[0], "contact_capacity") == 8


def test_warn_overflow_names_bad_arguments():
    model = _cubes()
    s = jaxode.init(model)
    with pytest.raises(TypeError, match="final must be a jaxode.State"):
        jaxode.warn_overflow(model, "notastate")
    with pytest.raises(TypeError, match="model must be a jaxode.Model"):
        jaxode.warn_overflow(s, s)
    with pytest.raises(TypeError, match="traj must be None or a jaxode.Trajectory"):
        jaxode.warn_overflow(model, s, traj=s)
    assert jaxode.warn_overflow(model, s) is None     # a fresh state dropped nothing
