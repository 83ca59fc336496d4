"""The persistent compilation cache that ``import jaxode`` sets up (jaxode/xla.py).

Where the folder goes and when jaxode leaves JAX's cache alone is checked in
this process (no compile). What the cache does is checked across fresh
processes, as a user meets it (a notebook restart, the next run), on a small
scene: the second process loads the compiled rollout instead of compiling it
(JAX's ``/jax/compilation_cache/cache_hits`` event while the rollout compiles) and computes the same bits
as the first, which compiled it; a process with other XLA flags (jaxode's
small-loop threshold changed) or with x64 on does not load it; with
``JAXODE_XLA_CACHE=0`` nothing is written. The truth for the bits is the
first process's own compile.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxode import xla

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def clean_cache_config(monkeypatch):
    """Run configure_cache against a JAX with no cache folder set, then put back
    what was there (this process compiles nothing meanwhile)."""
    before = jax.config.jax_compilation_cache_dir
    saved = dict(xla._applied)
    jax.config.update("jax_compilation_cache_dir", None)
    for name in (xla.CACHE_ENV, "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch
    jax.config.update("jax_compilation_cache_dir", before)
    xla._applied.clear()
    xla._applied.update(saved)


def test_default_folder_is_per_user_and_per_cpu(clean_cache_config, tmp_path):
    clean_cache_config.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = xla.configure_cache()
    assert path == str(tmp_path / "jaxode" / "xla" / xla.cpu_tag())
    assert jax.config.jax_compilation_cache_dir == path
    assert xla.status()["cache_dir"] == path
    tag = xla.cpu_tag()
    assert tag == xla.cpu_tag() and tag.rsplit("-", 1)[1].isalnum() and len(tag.rsplit("-")[-1]) == 8


def test_home_cache_without_xdg(clean_cache_config, tmp_path):
    clean_cache_config.setenv("HOME", str(tmp_path))  # expanduser reads HOME on POSIX
    path = xla.configure_cache()
    assert path == os.path.join(os.path.expanduser("~"), ".cache", "jaxode", "xla", xla.cpu_tag())
    assert path.startswith(str(tmp_path)) and os.path.isdir(path)


@pytest.mark.parametrize("value", ["0", "off", "false"])
def test_opt_out_leaves_the_cache_off(clean_cache_config, value):
    clean_cache_config.setenv(xla.CACHE_ENV, value)
    assert xla.configure_cache() is None
    assert jax.config.jax_compilation_cache_dir is None
    st = xla.status()
    assert st["cache_dir"] is None and value in st["cache_reason"]


def test_a_folder_named_in_the_variable_is_used_as_is(clean_cache_config, tmp_path):
    clean_cache_config.setenv(xla.CACHE_ENV, str(tmp_path / "mine"))
    assert xla.configure_cache() == str(tmp_path / "mine")
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")


def test_a_folder_that_cannot_be_made_leaves_the_cache_off(clean_cache_config, tmp_path):
    (tmp_path / "afile").write_text("not a folder")
    clean_cache_config.setenv("XDG_CACHE_HOME", str(tmp_path / "afile"))
    assert xla.configure_cache() is None
    assert jax.config.jax_compilation_cache_dir is None
    assert "cannot write" in xla.status()["cache_reason"]


def test_a_users_folder_is_kept(clean_cache_config, tmp_path):
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
    assert xla.configure_cache() is None
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "theirs")
    assert "left as it was" in xla.status()["cache_reason"]


def test_jax_cache_switched_off_is_respected(clean_cache_config):
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        assert xla.configure_cache() is None
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        jax.config.update("jax_enable_compilation_cache", True)


SCRIPT = r"""
import hashlib, json
import numpy as np
import jaxode, jax
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None)
b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
b.add_plane(surface=jaxode.Surface(mu=0.6))
i = b.add_body(pos=(0.0, 0.0, 0.12), quat=(0.96, 0.2, 0.19, 0.0), vel=(0.7, 0.1, 0.0),
               angvel=(0.0, 2.0, 1.0), mass=jaxode.mass.box((0.2, 0.1, 0.15), total=1.0))
b.add_box((0.2, 0.1, 0.15), body=i)
model = b.build()
s, p = jaxode.batch(jaxode.init(model), 2), jaxode.batch(model.params, 2)
run = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, 8, 0.01, params=p)[0]))
before = len(hits)
compiled = run.lower(s, p).compile()
rollout_hits = len(hits) - before
out = jax.block_until_ready(compiled(s, p))
h = hashlib.sha256()
for x in jax.tree.leaves(out):
    h.update(np.asarray(x).tobytes())
print(json.dumps({"hits": rollout_hits, "sha": h.hexdigest(), "cache_dir": jaxode.xla.status()["cache_dir"],
                  "moved": float(np.abs(np.asarray(out.pos) - np.asarray(s.pos)).max())}))
"""


def _run(cache, **env_extra):
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + paths)
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env[xla.CACHE_ENV] = str(cache)
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # cache every program, however quick
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _entries(folder):
    return sorted(p.name for p in Path(folder).glob("*-cache"))


@pytest.mark.extended
def test_second_process_loads_the_step_and_computes_the_same_bits(tmp_path):
    cache = tmp_path / "xla"
    cold = _run(cache)
    assert cold["cache_dir"] == str(cache) and cold["hits"] == 0
    assert cold["moved"] > 1e-3  # the box moved: the bits compared are not the start's
    written = _entries(cache)
    assert written, "the cold process wrote no cache entry"
    warm = _run(cache)
    assert warm["hits"] >= 1 and warm["sha"] == cold["sha"]
    assert _entries(cache) == written  # everything it needed was there

    # Other XLA flags (jaxode's small-loop threshold changed): compiled again, not loaded.
    ours = f"{xla.SMALL_LOOP_OPTION}={xla.SMALL_LOOP_BYTES}"
    flags = os.environ.get("XLA_FLAGS", "")
    if ours not in flags:
        pytest.skip(f"jaxode's small-loop option is not in XLA_FLAGS here: {flags!r}")
    other = _run(cache, XLA_FLAGS=flags.replace(ours, f"{xla.SMALL_LOOP_OPTION}=2048"))
    assert other["hits"] == 0 and len(_entries(cache)) > len(written)
    # x64 on: other programs, compiled again.
    n = len(_entries(cache))
    x64 = _run(cache, JAX_ENABLE_X64="1")
    assert x64["hits"] == 0 and len(_entries(cache)) > n


@pytest.mark.extended
def test_opt_out_writes_nothing(tmp_path):
    out = _run("0", XDG_CACHE_HOME=str(tmp_path))
    assert out["cache_dir"] is None and out["hits"] == 0
    assert not any(tmp_path.rglob("*-cache"))
