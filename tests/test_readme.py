"""Every ```python block of README.md runs as written, so the README does not rot.

Each block runs on its own in a fresh Python subprocess (as a reader would paste
it), with the repository on PYTHONPATH and matplotlib's Agg backend; a block
that raises fails the test with its output. The README keeps its snippets small
(few bodies, few steps, small batches) so that this stays cheap; what they
compute is checked against closed forms elsewhere (test_engine, test_sweep,
test_envs). Blocks that need an optional package are skipped without it.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
# a block that names one of these needs the package
NEEDS = {"to_gymnasium": "gymnasium", "to_pandas": "pandas", "to_xarray": "xarray",
         "jaxode.plot": "matplotlib"}


def test_readme_has_python_blocks():
    assert len(BLOCKS) >= 3
    assert all("import" in b for b in BLOCKS), "every block imports what it uses"


@pytest.mark.extended
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_block_runs(block):
    for word, pkg in NEEDS.items():
        if word in block:
            pytest.importorskip(pkg)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["MPLBACKEND"] = "Agg"
    r = subprocess.run([sys.executable, "-c", block], env=env, cwd=str(ROOT),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"README block exited {r.returncode}:\n{block}\n{(r.stdout + r.stderr)[-4000:]}"
