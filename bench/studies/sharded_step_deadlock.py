"""Minimal reproducer of the CPU all-reduce deadlock (README "Dependencies").

jit(vmap(step)) of a contact scene over worlds sharded on 2 CPU
devices, called back to back. jax 0.9.2 and 0.10.2 on a 2-core CPU: an all-reduce rendezvous
never completes (XLA aborts after 40 s); jax 0.12.0.1 finishes. REPRO_MAP=1 steps through
jaxode.map_worlds instead (no collective: finishes). REPRO_SYNC=1 turns off async dispatch
(still hangs). Usage: PYTHONPATH=. python bench/studies/sharded_step_deadlock.py"""
import faulthandler, os, sys, time
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
faulthandler.dump_traceback_later(240, exit=True)
import jax, numpy as np
if os.environ.get("REPRO_SYNC"):
    jax.config.update("jax_cpu_enable_async_dispatch", False)
import jaxode
print("jax", jax.__version__, os.environ["XLA_FLAGS"], "sync" if os.environ.get("REPRO_SYNC") else "", "map_worlds" if os.environ.get("REPRO_MAP") else "jit(vmap)", flush=True)
b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
b.add_plane()
for k in range(4):
    i = b.add_body(pos=(0.5 * k, 0, 0.2 + 0.25 * k), vel=(1.0, 0, 0),
                   mass=jaxode.mass.box((0.2,) * 3, total=1.0))
    b.add_box((0.2,) * 3, body=i)
model = b.build()
mesh = jaxode.world_mesh()
n = int(os.environ.get("REPRO_N", "64"))
states = jaxode.shard_worlds(jaxode.batch(jaxode.init(model), n), mesh)
params = jaxode.shard_worlds(jaxode.batch(model.params, n), mesh)
one = lambda s, p: jaxode.step(model, s, 0.01, params=p)  # noqa: E731
step = jaxode.map_worlds(one, mesh) if os.environ.get("REPRO_MAP") else jax.jit(jax.vmap(one))
s = jax.block_until_ready(step(states, params))
print("compiled; all-reduces in HLO:", step.lower(states, params).compile().as_text().count("all-reduce("), flush=True)
t0 = time.perf_counter()
for k in range(int(os.environ.get("REPRO_STEPS", "300"))):
    s = step(s, params)
jax.block_until_ready(s)
print(f"REPRO OK {time.perf_counter() - t0:.1f} s", flush=True)
