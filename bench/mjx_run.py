"""Time MuJoCo MJX on one scene (run by bench/mjx.py in an interpreter with MJX).

Usage: python bench/mjx_run.py scene.json   (xml, qpos, qvel, batches, steps)
Prints one JSON line per batch size: world-steps/s of jit(vmap(scan(mjx.step)))
over B copies of the scene, compile time, the better of two timed runs, and
the mean number of contacts per world at the end. Imports nothing of jaxode.
"""
import json
import sys
import time

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx


def main(path):
    spec = json.loads(open(path).read())
    m = mujoco.MjModel.from_xml_string(spec["xml"])
    d = mujoco.MjData(m)
    d.qpos[:] = spec["qpos"]
    d.qvel[:] = spec["qvel"]
    mx, dx = mjx.put_model(m), mjx.put_data(m, d)
    steps = spec["steps"]

    def rollout(data):
        def body(x, _):
            return mjx.step(mx, x), None
        return jax.lax.scan(body, data, None, length=steps)[0]

    for b in spec["batches"]:
        batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (b,) + x.shape), dx)
        fn = jax.jit(jax.vmap(rollout))
        t0 = time.perf_counter()
        compiled = fn.lower(batch).compile()
        t_compile = time.perf_counter() - t0
        times = []
        for _ in range(2):
            t0 = time.perf_counter()
            out = jax.block_until_ready(compiled(batch))
            times.append(time.perf_counter() - t0)
        best = min(times)
        ncon = float(jnp.mean(jnp.sum(out._impl.contact.dist < 0, axis=-1))
                     if hasattr(out, "_impl") else jnp.mean(jnp.sum(out.contact.dist < 0, axis=-1)))
        print(json.dumps(dict(batch=b, steps=steps, compile_s=t_compile, run_s=best,
                              world_steps_per_s=b * steps / best, contacts_per_world=ncon)),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
