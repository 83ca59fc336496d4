"""The Python step is traced once per first call, alone and under a jitted vmap.

``as_batch_member`` (jaxode/api.py) runs a world as a batch of one through a
``custom_vmap``; before session 14 (bench/RESULTS.md) the step's Python ran
twice under ``jit(vmap(rollout))``, once for the custom_vmap's primal and once
for its batching rule. Truth: the number of times the Python step function
(``guarded_step``) is entered while JAX traces, counted directly; only tracing
happens here (``jit(...).trace``), nothing compiles. That the results stay
bitwise the same is tests/test_batch_invariance.py's check.
"""
import jax
import jax.numpy as jnp
import pytest

import jaxode
from jaxode import api


@pytest.fixture(scope="module")
def scene():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane()
    i = b.add_body(pos=(0.0, 0.0, 0.2), mass=jaxode.mass.box((0.2, 0.2, 0.2), total=1.0))
    b.add_box((0.2, 0.2, 0.2), body=i)
    return b.build()


def _counted(monkeypatch, owner, name: str) -> list:
    """``owner.name`` replaced by a wrapper that appends to the returned list
    each time it is entered."""
    calls = []
    real = getattr(owner, name)

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.fixture
def count(monkeypatch):
    """Entries into the Python step (``guarded_step``)."""
    return _counted(monkeypatch, api, "guarded_step")


def test_rollout_under_jit_vmap_traces_the_step_once(scene, count):
    s, p = jaxode.batch(jaxode.init(scene), 4), jaxode.batch(scene.params, 4)
    jax.jit(jax.vmap(lambda s, p: jaxode.rollout(scene, s, 3, 0.01, params=p)[0])).trace(s, p)
    assert len(count) == 1


def test_step_under_jit_vmap_and_alone_trace_once(scene, count):
    s, p = jaxode.batch(jaxode.init(scene), 4), jaxode.batch(scene.params, 4)
    jax.jit(jax.vmap(lambda s, p: jaxode.step(scene, s, 0.01, params=p))).trace(s, p)
    assert len(count) == 1
    jax.jit(lambda s: jaxode.rollout(scene, s, 3, 0.01)[0]).trace(jaxode.init(scene))
    assert len(count) == 2


def test_only_a_jitted_vmap_takes_the_direct_path():
    seen = []

    def probe(x):
        seen.append(api._in_traced_vmap((x,)))
        return x

    x = jnp.ones((3, 2))
    jax.jit(jax.vmap(probe)).trace(x)         # jitted vmap, batch axis 0: direct
    jax.vmap(probe)(x)                        # eager vmap: stays on the jitted path
    jax.jit(jax.vmap(probe, in_axes=1)).trace(x)             # other batch axis
    jax.jit(jax.vmap(jax.vmap(probe))).trace(jnp.ones((3, 2, 2)))  # nested vmaps
    jax.jit(jax.vmap(lambda x: jax.jvp(probe, (x,), (x,))[0])).trace(x)  # jvp inside
    jax.jit(probe).trace(x)                   # no vmap
    assert seen == [True, False, False, False, False, False]


def test_a_tiled_batch_traces_the_step_once_and_takes_the_tile_path(scene, count):
    """A batch larger than ``batch_tile`` (tests/test_tiled_sweeps.py) goes
    through as_batch_member's rule, which runs the tiles one after another; the
    Python step is still traced once."""
    tiled = scene.replace(batch_tile=2)
    seen = []

    def probe(s):
        seen.append(api._in_traced_vmap((s,), tiled))
        return s

    s = jaxode.batch(jaxode.init(tiled), 5)
    jax.jit(jax.vmap(probe)).trace(s)
    jax.jit(jax.vmap(probe)).trace(jaxode.batch(jaxode.init(tiled), 2))
    assert seen == [False, True]
    jax.jit(jax.vmap(lambda s: jaxode.rollout(tiled, s, 3, 0.01)[0])).trace(s)
    assert len(count) == 1


@pytest.fixture
def problems(monkeypatch):
    """Calls of the solver's row preparation (``batching._problem``): once per
    solve that JAX traces, the one-world function custom_vmap's primal needs
    included."""
    from jaxode.sim.solver import batching
    return _counted(monkeypatch, batching, "_problem")


def test_a_world_alone_traces_one_solve_and_a_jitted_vmap_too(scene, problems, count):
    """A rollout alone is the batch of one (as_batch_member): its step is traced
    under the vmap, inside the scan, so the solver's batching rule runs directly
    and the one-world solve that only custom_vmap's primal would use is never
    traced (it was, before session 35: two preparations per trace)."""
    jax.clear_caches()      # the module's other tests traced these rollouts already
    jax.jit(lambda s: jaxode.rollout(scene, s, 3, 0.01)[0]).trace(jaxode.init(scene))
    assert (len(count), len(problems)) == (1, 1)
    s, p = jaxode.batch(jaxode.init(scene), 4), jaxode.batch(scene.params, 4)
    jax.jit(jax.vmap(lambda s, p: jaxode.rollout(scene, s, 3, 0.01, params=p)[0])).trace(s, p)
    assert (len(count), len(problems)) == (2, 2)


def test_a_tiled_batch_of_steps_traces_the_step_once_and_one_solve(scene, problems, count):
    """``jit(vmap(step))`` of a batch larger than ``batch_tile``: the step is
    traced once, already batched, its tiles stepped directly (``api._batched_step``),
    so the solver's rows are prepared once in the trace (twice before session 35:
    the one-world function of custom_vmap's primal, then the rule)."""
    jax.clear_caches()
    tiled = scene.replace(batch_tile=2)
    s, p = jaxode.batch(jaxode.init(tiled), 5), jaxode.batch(tiled.params, 5)
    jax.jit(jax.vmap(lambda s, p: jaxode.step(tiled, s, 0.01, params=p))).trace(s, p)
    assert (len(count), len(problems)) == (1, 1)


@pytest.mark.parametrize("tile", [2, 0], ids=["tiled", "untiled"])
def test_a_loop_inside_the_vmap_that_reads_its_params_is_traced_in_place(scene, tile):
    """An env's ``fori_loop`` of steps inside ``jit(vmap)``, its body closing over
    the batch's params: the step sees the vmap's tracers beside the loop body's,
    so it must not run the batch at the vmap's level (that leaked the body's
    tracers: JAX's UnexpectedTracerError, train_cartpole.py's evaluation in
    session 35); it takes the general path."""
    m = scene.replace(batch_tile=tile)
    s, p = jaxode.batch(jaxode.init(m), 5), jaxode.batch(m.params, 5)

    def f(s, p):
        return jax.lax.fori_loop(0, 2, lambda _, st: jaxode.step(m, st, 0.01, params=p), s)

    out = jax.jit(jax.vmap(f))(s, p)
    alone = jaxode.init(m)
    for _ in range(2):
        alone = jaxode.step(m, alone, 0.01)
    for name in ("pos", "quat", "vel", "angvel"):
        assert (jnp.asarray(getattr(out, name))[3] == getattr(alone, name)).all(), name
