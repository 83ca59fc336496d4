"""Worlds sharded over several devices step as on one device, to rounding.

Runs in a subprocess with ``--xla_force_host_platform_device_count=4`` (four
CPU devices; the flag must be set before JAX starts, so not in this process).
In float64, so that the different per-device batch (2 worlds instead of 8)
changing XLA's vectorisation only moves results at the 1e-15 level (in float32
that reordering shows up as ~5e-6 m after 60 steps of sliding contact).
Truth: the same batch stepped unsharded on one device, and the placement that
``shard_worlds`` promises (each device holds a quarter of the worlds); both
``jax.jit(jax.vmap(...))`` of sharded inputs and ``jaxode.map_worlds``.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap


ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import jaxode
    assert len(jax.devices()) == 4, jax.devices()
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=10.0))
    i = b.add_body(pos=(0, 0, 0.1), vel=(2.0, 0, 0), mass=jaxode.mass.box((0.2,) * 3, total=1.0))
    b.add_box((0.2,) * 3, body=i)
    j = b.add_body(pos=(1, 0, 1), mass=jaxode.mass.sphere(0.1, density=1000.0))
    b.add_sphere(0.1, body=j, surface=jaxode.Surface(bounce=0.5))
    model = b.build()
    n = 8
    params = jaxode.batch(model.params, n)
    params = params.replace(mu=params.mu.at[:, 1].set(np.linspace(0.1, 0.8, n)))
    states = jaxode.batch(jaxode.init(model), n)
    run = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, 60, 0.01, params=p)[0]))
    ref = run(states, params)
    mesh = jaxode.world_mesh()
    s_sh, p_sh = jaxode.shard_worlds(states, mesh), jaxode.shard_worlds(params, mesh)
    shards = s_sh.pos.addressable_shards
    assert len(shards) == 4 and all(sh.data.shape == (2,) + s_sh.pos.shape[1:] for sh in shards)
    out = run(s_sh, p_sh)
    assert len(out.pos.sharding.device_set) == 4, out.pos.sharding
    for a, b_ in zip(jax.tree.leaves(out), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b_), rtol=0, atol=1e-9)
    # map_worlds: each device steps its own worlds (no collectives), same results
    out2 = jaxode.map_worlds(lambda s, p: jaxode.rollout(model, s, 60, 0.01, params=p)[0], mesh)(
        s_sh, p_sh)
    assert len(out2.pos.sharding.device_set) == 4, out2.pos.sharding
    for a, b_ in zip(jax.tree.leaves(out2), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b_), rtol=0, atol=1e-9)
    x = np.asarray(out.pos[:, 0, 0])
    assert np.all(np.diff(x) < 0)          # more friction, shorter slide: the worlds differ
    try:
        jaxode.shard_worlds(jaxode.batch(jaxode.init(model), 6), mesh)
    except ValueError as e:
        assert "multiple of the number of devices" in str(e)
    else:
        raise AssertionError("6 worlds on 4 devices was accepted")
    print("SHARDING OK")
""")


def test_sharded_worlds_match_one_device():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "SHARDING OK" in r.stdout, r.stdout[-2000:] + r.stderr[-4000:]
