"""Every script in examples/ runs at a tiny size, so none rots.

Each runs in a subprocess (as a user would run it) with a handful of worlds and
steps; a script that raises or exits non-zero fails with its output. The
physics the examples print is checked elsewhere at full size (the notebooks
assert the system identification and the sweeps, test_envs the environments,
test_heightfield the terrain contacts); here the scripts' own sanity lines are
checked where they are cheap to read.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# script -> (tiny arguments, text its output must contain)
RUNS = {
    "falling_boxes.py": (["--worlds", "8", "--steps", "150"], "non-finite worlds: 0"),
    "lidar.py": (["--worlds", "2"], "the floor"),
    "walker_terrain.py": (["--worlds", "4", "--steps", "20"], "non-finite 0"),
    "train_cartpole.py": (["--timesteps", "2048", "--envs", "8", "--steps", "32"], "greedy policy"),
}
# scripts whose code already runs in a test
ELSEWHERE = {"system_identification.py": "notebooks/03 fits with its functions (tests/test_notebooks.py)",
             "walker.py": "walker_terrain.py runs its gait, controller, randomisation and rollout",
             "smoothed_gradients.py": "tests/test_grad_targets.py (extended) runs its reports",
             "smoothed_sysid.py": "tests/test_grad_targets.py (extended) fits with its functions"}


def test_every_example_is_run_somewhere():
    assert sorted([*RUNS, *ELSEWHERE]) == sorted(p.name for p in (ROOT / "examples").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(RUNS))
def test_example_runs(script):
    args, expect = RUNS[script]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["MPLBACKEND"] = "Agg"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], env=env,
                       cwd=str(ROOT), capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{out[-4000:]}"
    assert expect in out, f"{script}: expected {expect!r} in its output:\n{out[-4000:]}"
