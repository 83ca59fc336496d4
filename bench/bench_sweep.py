"""Throughput of ``jaxode.tools.sweep`` on a 32 x 32 erp/cfm grid of a resting box.

Scene: one box 0.4 x 0.4 x 0.1 m (density 1000 kg/m^3) resting on a plane,
gravity -9.81, QuickStep 20 iterations, dt 0.01 s. Grid: erp in
linspace(0.05, 0.95, 32) x cfm in logspace(-7, -2, 32) = 1024 variants; metrics
resting_penetration, max_penetration, nonfinite. The sweep runs twice: the first
call compiles, the second is timed (world-steps/s = variants x steps / seconds).
For reference, the same 1024 worlds through plain jit(vmap(rollout)) returning
only the final state (no metrics, no trajectory kept).

Run:  python bench/bench_sweep.py [--steps 200] [--n 32]
"""
from __future__ import annotations

import argparse
import os
import time

# "first call" is a compile, not a load from jaxode's persistent compilation cache
# (jaxode/xla.py) that an earlier run filled: off here unless asked for.
os.environ.setdefault("JAXODE_XLA_CACHE", "0")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402
from jaxode.tools import metrics as M  # noqa: E402


def resting_box() -> jaxode.Model:
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane()
    body = b.add_body(pos=(0.0, 0.0, 0.05), mass=jaxode.mass.box((0.4, 0.4, 0.1), density=1000.0))
    b.add_box((0.4, 0.4, 0.1), body=body)
    return b.build()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--n", type=int, default=32, help="grid points per axis")
    args = ap.parse_args()
    model = resting_box()
    state = jaxode.init(model)
    grid = {"erp": np.linspace(0.05, 0.95, args.n).tolist(),
            "cfm": np.logspace(-7, -2, args.n).tolist()}
    metrics = {"rest": M.resting_penetration, "max": M.max_penetration, "nonfinite": M.nonfinite}
    t = time.perf_counter()
    jaxode.sweep(model, state, args.steps, 0.01, grid, metrics, progress=False)
    first = time.perf_counter() - t
    res = jaxode.sweep(model, state, args.steps, 0.01, grid, metrics, progress=False)
    s = res.stats
    print(f"devices {jax.devices()}, load average {os.getloadavg()}")
    print(f"sweep {args.n}x{args.n} = {s['n_variants']} variants x {args.steps} steps: "
          f"first call (compile + run) {first:.1f} s; run {s['wall_s']:.2f} s in {s['n_chunks']} "
          f"chunk(s) of {s['batch']} -> {s['world_steps_per_s']:.3g} world-steps/s")
    print(f"non-finite worlds: {int(res.columns['nonfinite'].sum())}; resting depth "
          f"{res.columns['rest'].min():.3g} .. {res.columns['rest'].max():.3g} m")

    params = model.params
    batched = jaxode.batch(params, s["n_variants"])
    fn = jax.jit(jax.vmap(lambda p: jaxode.rollout(model, state, args.steps, 0.01, params=p)[0]))
    jax.block_until_ready(fn(batched))
    t = time.perf_counter()
    jax.block_until_ready(fn(batched))
    plain = time.perf_counter() - t
    print(f"plain jit(vmap(rollout)) of the same worlds: {plain:.2f} s -> "
          f"{s['n_variants'] * args.steps / plain:.3g} world-steps/s")


if __name__ == "__main__":
    main()
