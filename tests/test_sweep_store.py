"""Sweeps that survive being killed, load from their directory, and span processes.

The scene (tests/sweep_worker.py) is a 16 kg box resting on a plane; its truth is
ODE's ERP/CFM fixed point: each of the 4 contacts rests at depth cfm (m g / 4) h / erp.
The resumed, loaded and two-process results must equal an uninterrupted one-process
sweep bit for bit (issue 56): the workers run as subprocesses with this process's
environment (XLA flags included), so they compile the same program.
"""
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxode
import sweep_worker as W

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference():
    return W.run()


def _worker(*args, timeout=300):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "sweep_worker.py"),
                             *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait(proc, timeout=300):
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        text, _ = proc.communicate()
        pytest.fail(f"worker timed out:\n{text[-3000:]}")
    return proc.returncode, text


def _columns(path):
    with np.load(path) as z:
        return ({k[4:]: z[k] for k in z.files if k.startswith("col_")},
                {k[5:]: z[k].item() for k in z.files if k.startswith("stat_")})


def _assert_same(columns, ref):
    assert set(columns) == set(ref.columns)
    for name, col in ref.columns.items():
        np.testing.assert_array_equal(columns[name], col, err_msg=name)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_reference_is_the_erp_cfm_fixed_point(reference):
    model, _ = W.scene()
    m = float(model.params.body_mass[0])
    expected = np.outer(1 / np.array(W.ERPS), W.CFMS) * (m * W.G / 4) * W.H
    np.testing.assert_allclose(reference.reshape("depth"), expected, rtol=2e-3)
    assert reference.stats["n_chunks"] == 4 and reference.stats["process_count"] == 1


def test_killed_sweep_resumes_bit_for_bit(reference, tmp_path):
    out = tmp_path / "sweep"
    # SIGKILL once 8 variants (two chunks) are done: no cleanup runs
    rc, text = _wait(_worker("single", out, tmp_path / "never.npz", 8))
    assert rc == -9, text[-3000:]
    chunks = sorted(p.name for p in out.glob("chunk_*.npz"))
    assert chunks == ["chunk_000000.npz", "chunk_000001.npz"]
    (out / ".tmp-half-written").write_bytes(b"PK\x03")  # what a kill mid-write leaves
    with pytest.raises(ValueError, match="unfinished: 2 of 4 chunks missing"):
        jaxode.SweepResult.load(out)
    res = W.run(out)
    assert res.stats["chunks_loaded"] == 2 and res.stats["chunks_computed"] == 2
    _assert_same(res.columns, reference)
    # a finished directory: the same call only loads; SweepResult.load reads it alone
    again = W.run(out)
    assert again.stats["chunks_computed"] == 0
    _assert_same(again.columns, reference)
    loaded = jaxode.SweepResult.load(out)
    _assert_same(loaded.columns, reference)
    assert loaded.grid_shape == reference.grid_shape and loaded.params == reference.params
    assert loaded.units == reference.units
    np.testing.assert_array_equal(loaded.reshape("depth"), reference.reshape("depth"))


def test_mismatched_rerun_is_refused(tmp_path):
    model, state = W.scene()
    out = tmp_path / "s"
    grid = {"erp": [0.2, 0.5], "cfm": [1e-4]}
    jaxode.sweep(model, state, 5, W.H, grid, W.metrics(), out=out, progress=False)
    cases = [(dict(grid={"erp": [0.2, 0.6], "cfm": [1e-4]}), "the grid's values differ"),
             (dict(grid={"erp": [0.2, 0.5], "mu": [1.0]}), "the swept parameters differ"),
             (dict(n_steps=6), "n_steps differs: stored 5, this call 6"),
             (dict(dt=0.02), "dt differs"),
             (dict(metrics={"depth": jaxode.metrics.resting_penetration}),
              r"the metric names differ: stored \['depth', 'nonfinite'\]"),
             (dict(chunk_size=1), "the batch per chunk"),
             (dict(state=state.replace(pos=state.pos + 0.01)), "the scene")]
    for change, match in cases:
        kw = dict(model=model, state=state, n_steps=5, dt=W.H, grid=grid, metrics=W.metrics(),
                  out=out, progress=False)
        kw.update(change)
        with pytest.raises(ValueError, match=match):
            jaxode.sweep(**kw)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a directory"):
        jaxode.sweep(model, state, 5, W.H, grid, W.metrics(), out=tmp_path / "file")
    with pytest.raises(ValueError, match="not a sweep directory"):
        jaxode.SweepResult.load(tmp_path)


def _two_processes(tmp_path, out):
    port = _free_port()
    procs = [_worker("dist", out, tmp_path / f"r{i}.npz", port, i) for i in (0, 1)]
    results = [_wait(p) for p in procs]
    for rc, text in results:
        assert rc == 0, text[-3000:]
    return [_columns(tmp_path / f"r{i}.npz") for i in (0, 1)]


def test_two_processes_split_the_chunks_and_agree(reference, tmp_path):
    got = _two_processes(tmp_path, "-")
    for columns, stats in got:
        _assert_same(columns, reference)
        assert stats["process_count"] == 2 and stats["chunks_computed"] == 4


def test_two_processes_resume_a_shared_directory(reference, tmp_path):
    out = tmp_path / "shared"
    model, state = W.scene()

    class Stop(Exception):
        pass

    def stop(done, total):
        if done >= 4:
            raise Stop

    with pytest.raises(Stop):  # one chunk finished by a one-process run
        W.run(out, progress=stop)
    got = _two_processes(tmp_path, out)
    for columns, stats in got:
        _assert_same(columns, reference)
        assert stats["chunks_computed"] == 3 and stats["chunks_loaded"] == 1
    assert len(list(out.glob("chunk_*.npz"))) == 4
    _assert_same(jaxode.SweepResult.load(out).columns, reference)
