"""Sharded, batched stepping on two CPU devices finishes (no deadlock).

On this 2-core machine, ``jax.jit(jax.vmap(step))`` of a contact scene over
worlds sharded on two XLA CPU devices, called back to back (300 calls), stops
in an all-reduce rendezvous that one device never joins (XLA aborts after 40 s)
with jax 0.9.2 and 0.10.2; not with 0.12.0.1. The all-reduces are the
batch-wide decisions of ``jaxode.sim.batch_rules``. ``jaxode.map_worlds`` (a
``shard_map`` of the vmap) makes them per device and has no collective at all;
this runs it on that workload (chained steps, and rollouts of a contact scene
and a hinge chain) in a subprocess with a timeout and a faulthandler stack
dump, so a hang fails the test instead of stalling the suite, and checks that
the compiled program has no all-reduce.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TIMEOUT_S = 420

SCRIPT = textwrap.dedent("""
    import faulthandler, sys
    faulthandler.dump_traceback_later(%(dump)d, exit=True)
    import jax, numpy as np
    import jaxode
    assert len(jax.devices()) == 2, jax.devices()

    def boxes():
        b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
        b.add_plane(surface=jaxode.Surface(mu=0.8))
        for k in range(4):
            i = b.add_body(pos=(0.5 * k, 0, 0.2 + 0.25 * k), vel=(1.0, 0, 0),
                           quat=(np.cos(0.1 * k), 0, 0, np.sin(0.1 * k)),
                           mass=jaxode.mass.box((0.2,) * 3, total=1.0))
            b.add_box((0.2,) * 3, body=i)
        j = b.add_body(pos=(0, 1, 0.3), mass=jaxode.mass.sphere(0.1, density=1000.0))
        b.add_sphere(0.1, body=j, surface=jaxode.Surface(bounce=0.5))
        return b.build()

    def chain():
        b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
        prev = None
        for k in range(6):
            i = b.add_body(pos=(0.1 * k + 0.05, 0, 1.0),
                           mass=jaxode.mass.capsule(0.02, 0.06, total=0.2, direction=1))
            b.add_capsule(0.02, 0.06, body=i, quat=(np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0))
            b.add_hinge(i, prev, anchor=(0.1 * k, 0, 1.0), axis=(0, 1, 0))
            prev = i
        return b.build()

    mesh = jaxode.world_mesh()
    for name, model in (("boxes", boxes()), ("chain", chain())):
        n = 32
        states = jaxode.shard_worlds(jaxode.batch(jaxode.init(model), n), mesh)
        params = jaxode.batch(model.params, n)
        params = jaxode.shard_worlds(
            params.replace(mu=params.mu * np.linspace(0.5, 1.5, n)[:, None]), mesh)
        run = jaxode.map_worlds(lambda s, p: jaxode.rollout(model, s, 40, 0.01, params=p)[0], mesh)
        # the compiled program is the one called (calling ``run`` would compile it again)
        compiled = run.lower(states, params).compile()
        hlo = compiled.as_text()
        assert "all-reduce" not in hlo and "all-gather" not in hlo, "map_worlds communicates"
        for _ in range(3):
            out = jax.block_until_ready(compiled(states, params))
        assert len(out.pos.sharding.device_set) == 2, out.pos.sharding
        assert not np.asarray(out.nonfinite).any()
        step = jaxode.map_worlds(lambda s, p: jaxode.step(model, s, 0.01, params=p), mesh)
        s = states
        for _ in range(300):   # back to back: the calls that deadlocked with jit(vmap(step))
            s = step(s, params)
        jax.block_until_ready(s)
        assert not np.asarray(s.nonfinite).any()
        print(name, "ok", flush=True)
    print("NO HANG OK", flush=True)
""")


def test_sharded_batched_rollout_finishes():
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=2"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    script = SCRIPT % {"dump": TIMEOUT_S - 30}
    try:
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"sharded batched rollout did not finish in {TIMEOUT_S} s "
                             f"(hang?)\n{out[-2000:]}\n{err[-6000:]}") from None
    assert r.returncode == 0 and "NO HANG OK" in r.stdout, (
        f"rc {r.returncode} (faulthandler exits 1 with a stack dump when a call hangs)\n"
        + r.stdout[-2000:] + r.stderr[-6000:])


PLAIN = textwrap.dedent("""
    import faulthandler
    faulthandler.dump_traceback_later(%(dump)d, exit=True)
    import jax, numpy as np
    import jaxode
    assert len(jax.devices()) == 2, jax.devices()
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    for k in range(4):
        i = b.add_body(pos=(0.5 * k, 0, 0.2 + 0.25 * k), vel=(1.0, 0, 0),
                       mass=jaxode.mass.box((0.2,) * 3, total=1.0))
        b.add_box((0.2,) * 3, body=i)
    model = b.build()
    mesh = jaxode.world_mesh()
    states = jaxode.shard_worlds(jaxode.batch(jaxode.init(model), 64), mesh)
    params = jaxode.shard_worlds(jaxode.batch(model.params, 64), mesh)
    step = jax.jit(jax.vmap(lambda s, p: jaxode.step(model, s, 0.01, params=p)))
    s = states
    for _ in range(300):
        s = step(s, params)
    jax.block_until_ready(s)
    print("NO HANG OK", flush=True)
""")


def _jaxlib_before_0_11() -> bool:
    from jaxode import xla
    return xla.jaxlib_version() < (0, 11)


_KNOWN_HANG = ("jax 0.9.2 and 0.10.2: jit(vmap(step)) over worlds sharded on 2 CPU "
               "devices stops in a cross-device all-reduce (XLA aborts after 40 s); "
               "use jaxode.map_worlds (README 'Dependencies')")


# Where the hang is known (jaxlib < 0.11) the test only waits out XLA's 40 s abort
# (75 s of the default suite's 15 minutes for an expected failure): it runs in the
# extended tier there (pytest -m extended), as a non-strict xfail, and in the default
# tier on jaxlib 0.11+, where it must pass.
@pytest.mark.xfail(_jaxlib_before_0_11(), strict=False, reason=_KNOWN_HANG)
@(pytest.mark.extended if _jaxlib_before_0_11() else (lambda f: f))
def test_plain_jit_vmap_of_sharded_worlds_finishes():
    """The workload that deadlocks with jax < 0.11: the documented fallback
    ``jax.jit(jax.vmap(step))`` of sharded worlds, 300 calls back to back."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    env["XLA_FLAGS"] = " ".join(flags + ["--xla_force_host_platform_device_count=2"])
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        r = subprocess.run([sys.executable, "-c", PLAIN % {"dump": 200}], env=env,
                           capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        raise AssertionError("jit(vmap(step)) of sharded worlds did not finish in 240 s") from None
    assert r.returncode == 0 and "NO HANG OK" in r.stdout, (
        f"rc {r.returncode}\n" + r.stdout[-1000:] + r.stderr[-3000:])
