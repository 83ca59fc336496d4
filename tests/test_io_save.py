"""Save and restore (issue 9; the ODE FAQ): a batch of states saved mid-rollout and loaded
continues bit for bit as the uninterrupted rollout on the same backend."""
import jax
import numpy as np
import pytest

import jaxode
from jaxode.io import load, save

from fast_compile import OPTIONS as _OPT  # noqa: E402


def _stack_builder():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    for i in range(2):
        k = b.add_body(pos=(0.02 * i, 0, 0.5 + 1.01 * i), angvel=(0.1 * i, 0, 0))
        b.add_sphere(0.5, body=k)
    b.add_hinge(0, 1, anchor=(0, 0, 1), axis=(1, 0, 0))
    return b


def test_save_restore_bit_for_bit(tmp_path):
    """A rollout resumed from a saved and loaded batch of states continues bit for bit
    (the ODE FAQ's save/restore question: all state must be saved)."""
    m = _stack_builder().build()
    s = jaxode.batch(jaxode.init(m), 3)
    s = s.replace(vel=s.vel.at[:, 1, 0].set(np.array([0.0, 0.3, -0.3], np.float32)))
    roll = jax.jit(jax.vmap(lambda model, st: jaxode.rollout(model, st, 15, 0.01)[0], in_axes=(None, 0)),
                   compiler_options=_OPT)
    mid = roll(m, s)
    full = roll(m, mid)
    save(tmp_path / "w.npz", m, mid)
    m2, mid2 = load(tmp_path / "w.npz")
    assert jax.tree.structure(m2) == jax.tree.structure(m)
    resumed = roll(m2, mid2)  # the loaded model, same compiled function
    la, lb = jax.tree.leaves(full), jax.tree.leaves(resumed)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
    # the worlds really differ and moved (the test could fail)
    assert not np.array_equal(np.asarray(full.pos[0]), np.asarray(full.pos[1]))


def test_load_rejects_foreign_file(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a jaxode save file"):
        load(tmp_path / "x.npz")



def test_load_names_the_file_and_what_is_wrong(tmp_path):
    """A save file is versioned and validated on load: another format version, an
    array missing from the archive, an empty file and a directory are each refused
    with the path and the reason (no bare numpy/zipfile/JSON error)."""
    m = _stack_builder().build()
    good = tmp_path / "good.npz"
    save(good, m, jaxode.init(m))
    with np.load(good, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    assert int(d["__jaxode_format__"]) >= 2

    def write(name, **change):
        dd = dict(d)
        for k, v in change.items():
            if v is None:
                dd.pop(k)
            else:
                dd[k] = v
        p = tmp_path / name
        with open(p, "wb") as f:
            np.savez(f, **dd)
        return p

    with pytest.raises(ValueError, match=r"v1.npz: format version 1 is not supported"):
        load(write("v1.npz", __jaxode_format__=np.int64(1)))
    with pytest.raises(ValueError, match=r"miss.npz: .*array 'states/vel' is missing"):
        load(write("miss.npz", **{"states/vel": None}))
    with pytest.raises(ValueError, match=r"dtype.npz: .*states.quat must have shape \(2, 4\)"):
        load(write("dtype.npz", **{"states/quat": np.zeros((2, 3), np.float32)}))
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.npz: not a .npz save file.*empty"):
        load(empty)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.npz")
