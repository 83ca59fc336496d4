"""The initial state is part of the Model pytree: it survives replace, tree maps and save/load."""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxode


def _scene():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane()
    ball = b.add_body(pos=(0.0, 0.0, 0.5), vel=(0.3, 0.0, 0.0), angvel=(0.0, 2.0, 0.0),
                      mass=jaxode.mass.sphere(radius=0.1, total=1.0))
    b.add_sphere(0.1, body=ball)
    box = b.add_body(pos=(1.0, 0.0, 0.4), quat=(np.cos(0.2), 0.0, 0.0, np.sin(0.2)),
                     mass=jaxode.mass.box(size=(0.1, 0.2, 0.3), total=2.0))
    b.add_box((0.1, 0.2, 0.3), body=box)
    return b.build()


def _same_state(a, b):
    for k in ("pos", "quat", "vel", "angvel", "force", "torque", "time"):
        np.testing.assert_array_equal(np.asarray(getattr(a, k)), np.asarray(getattr(b, k)), err_msg=k)


def test_init_is_the_built_scene():
    model = _scene()
    s = jaxode.init(model)
    np.testing.assert_allclose(s.pos, [[0, 0, 0.5], [1.0, 0, 0.4]], atol=1e-7)
    np.testing.assert_allclose(s.vel[0], [0.3, 0, 0], atol=1e-7)
    np.testing.assert_allclose(s.angvel[0], [0, 2.0, 0], atol=1e-7)
    np.testing.assert_allclose(s.quat[1], [np.cos(0.2), 0, 0, np.sin(0.2)], atol=1e-7)
    np.testing.assert_array_equal(np.asarray(model.init_pos), np.asarray(s.pos))


def test_replace_and_tree_map_keep_the_initial_state():
    model = _scene()
    s0 = jaxode.init(model)
    _same_state(jaxode.init(model.replace(iterations=50)), s0)
    _same_state(jaxode.init(jax.tree.map(lambda x: x, model)), s0)
    flat, tree = jax.tree.flatten(model)
    _same_state(jaxode.init(jax.tree.unflatten(tree, flat)), s0)


def test_initial_state_is_settable():
    model = _scene()
    moved = model.replace(init_pos=model.init_pos + np.array([0.0, 0.0, 1.0]))
    s = jaxode.init(moved)
    np.testing.assert_allclose(s.pos[:, 2], [1.5, 1.4], atol=1e-6)
    # the step from the moved state is the step of a world built there
    s1 = jaxode.step(moved, s, 0.01)
    assert float(s1.pos[0, 2]) < 1.5


def test_save_load_keeps_the_initial_state(tmp_path):
    model = _scene()
    s0 = jaxode.init(model)
    path = tmp_path / "scene.npz"
    jaxode.save(path, model, s0)
    model2, _ = jaxode.load(path)
    _same_state(jaxode.init(model2), s0)
    a = jaxode.rollout(model, s0, 20, 0.01)[0]
    b = jaxode.rollout(model2, jaxode.init(model2), 20, 0.01)[0]
    _same_state(a, b)


def test_model_without_initial_state_says_so():
    model = _scene().replace(init_pos=None)
    with pytest.raises(ValueError, match="no initial state"):
        jaxode.init(model)


def test_old_format_is_refused(tmp_path):
    # version 1 files hold models without the initial state and geom_dataid
    model = _scene()
    path = tmp_path / "scene.npz"
    jaxode.save(path, model, jaxode.init(model))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["__jaxode_format__"] = np.int64(1)
    old = tmp_path / "old.npz"
    np.savez(old, **arrays)
    with pytest.raises(ValueError, match="format version 1 is not supported"):
        jaxode.load(old)
