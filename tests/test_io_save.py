"""Save and restore (the ODE FAQ's question): a batch of worlds saved mid-rollout
and loaded again continues bit for bit as the run that was never interrupted.

Truth: the uninterrupted rollout on the same backend (array equality, not a
tolerance), for a batch of worlds with contacts, a hinge with a motor and
per-world parameters. The loaded model equals the saved one leaf for leaf and
in its static structure, so the compiled rollout (a pure function) is reused.
"""
from __future__ import annotations

import io

import jax
import numpy as np
import pytest

import jaxode

N1, N2, NW = 15, 15, 3


def _model():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.6))
    box = b.add_body(pos=(0.0, 0.0, 0.12), vel=(1.0, 0.0, 0.0), angvel=(0.0, 0.0, 2.0),
                     mass=jaxode.mass.box((0.2, 0.2, 0.2), total=1.0))
    b.add_box((0.2, 0.2, 0.2), body=box, surface=jaxode.Surface(mu=0.4, bounce=0.3))
    link = b.add_body(pos=(1.0, 0.0, 0.75), mass=jaxode.mass.capsule(0.03, 0.5, direction=3, total=0.5))
    b.add_capsule(0.03, 0.5, body=link)
    b.add_hinge(link, None, anchor=(1.0, 0.0, 1.0), axis=(0.0, 1.0, 0.0), vel=1.0, fmax=0.5)
    return b.build()


def test_resumed_rollout_continues_bit_for_bit(tmp_path):
    model = _model()
    params = jaxode.batch(model.params, NW)
    params = params.replace(mu=params.mu.at[:, 1].set(np.array([0.2, 0.5, 0.9])))
    states = jaxode.batch(jaxode.init(model), NW)
    run = jax.jit(jax.vmap(lambda s, p, n: jaxode.rollout(model, s, n, 0.01, params=p)[0],
                           in_axes=(0, 0, None)), static_argnums=2)
    mid = run(states, params, N1)
    end = run(mid, params, N2)
    path = tmp_path / "run.npz"
    jaxode.save(path, model.replace(params=params), mid, meta={"steps": N1})
    model2, mid2, meta = jaxode.load(path)
    assert int(meta["steps"]) == N1
    for a, b in zip(jax.tree.leaves(mid2), jax.tree.leaves(mid)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    saved = model.replace(params=params)
    assert jax.tree.structure(model2) == jax.tree.structure(saved)   # static structure
    for a, b in zip(jax.tree.leaves(model2), jax.tree.leaves(saved)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    end2 = run(mid2, model2.params, N2)
    for a, b in zip(jax.tree.leaves(end2), jax.tree.leaves(end)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert float(np.asarray(end.ncontact).sum()) > 0      # contacts were live at the cut


def test_model_only_file_objects_and_bad_files(tmp_path):
    model = _model()
    buf = io.BytesIO()
    jaxode.save(buf, model)
    buf.seek(0)
    m2, states, meta = jaxode.load(buf)
    assert states is None and meta == {}
    for a, b in zip(jax.tree.leaves(m2), jax.tree.leaves(model)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    other = tmp_path / "other.npz"
    np.savez(other, x=np.zeros(3))
    with pytest.raises(ValueError, match="not a jaxode save file"):
        jaxode.load(other)
    with pytest.raises(ValueError, match="meta keys"):
        jaxode.save(tmp_path / "m.npz", model, meta={"": 1})
