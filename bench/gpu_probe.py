"""GPU probe: what a loop trip costs, and what XLA's GPU options do to the step.

Run several of these at once, each with its own ``XLA_FLAGS`` (a variant):
every process traces and compiles its programs, waits until all ``--nproc``
processes have compiled (files in ``--sync``), then times them holding a
lock, one process at a time, so no timing overlaps another's compile.

    XLA_FLAGS=... python bench/gpu_probe.py --variant NAME --nproc 4 --sync DIR --out DIR

Micro-benchmarks (1000 trips of a tiny body on a (16384,) float32 array):
``static`` a fori_loop with a Python-int trip count (XLA knows it), ``dynamic``
the same loop with a traced count, ``cond`` the static loop with a
``lax.cond`` inside. Then ``jit(vmap(rollout))`` of bench scenes, 50 steps.
Rows go to ``DIR/probe_<variant>.json``.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAXODE_XLA_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402
from bench.gpu_run import prepare  # noqa: E402

N = 1000


def micro():
    x = jnp.ones((16384,), jnp.float32)
    n = jnp.int32(N)

    def body(i, x):
        return x * 1.0001 + 1e-3

    def body_cond(i, x):
        return jax.lax.cond(x[0] > -1.0, lambda x: x * 1.0001 + 1e-3, lambda x: x, x)

    progs = {
        "static": jax.jit(lambda x: jax.lax.fori_loop(0, N, body, x)),
        "dynamic": jax.jit(lambda x, n: jax.lax.fori_loop(0, n, body, x)),
        "cond": jax.jit(lambda x: jax.lax.fori_loop(0, N, body_cond, x)),
    }
    args = {"static": (x,), "dynamic": (x, n), "cond": (x,)}
    return {k: (f.lower(*args[k]).compile(), args[k]) for k, f in progs.items()}


def scene_prog(name, solver, batch, steps):
    j = prepare(name, solver, batch, steps)
    return j["lowered"], (j["states"], j["params"])


def best_of(compiled, args, n=3):
    jax.block_until_ready(compiled(*args))
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", required=True)
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--sync", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scenes", nargs="+", default=["boxes:colored:1024", "boxes:pgs:1024",
                                                     "chain:colored:1024", "stack:colored:1024"])
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    args.sync.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    out = dict(variant=args.variant, xla_flags=os.environ.get("XLA_FLAGS", ""),
               jax=jax.__version__, device=str(jax.devices()[0]), rows=[])
    path = args.out / f"probe_{args.variant}.json"
    t0 = time.perf_counter()
    try:
        micros = micro()
        lowered = [(spec, *scene_prog(*(spec.split(":")[:2]), int(spec.split(":")[2]),
                                      args.steps)) for spec in args.scenes]
        out["trace_s"] = time.perf_counter() - t0
        compiled = []
        for spec, low, a in lowered:
            t1 = time.perf_counter()
            compiled.append((spec, low.compile(), a, time.perf_counter() - t1))
        out["compile_total_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - a flag XLA rejects
        out["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        micros, compiled = {}, []
    (args.sync / f"ready_{args.variant}").write_text("1")
    deadline = time.time() + 240
    while len(list(args.sync.glob("ready_*"))) < args.nproc and time.time() < deadline:
        time.sleep(0.5)
    with open(args.sync / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for k, (c, a) in micros.items():
            t = best_of(c, a)
            out["rows"].append(dict(kind="micro", name=k, trips=N, us_per_trip=t / N * 1e6))
            print(f"[{args.variant}] micro {k:8s}: {t / N * 1e6:8.2f} us per trip", flush=True)
        for spec, c, a, tc in compiled:
            name, solver, batch = spec.split(":")
            t = best_of(c, a, 2)
            final = c(*a)
            row = dict(kind="scene", scene=name, solver=solver, batch=int(batch),
                       steps=args.steps, compile_s=tc, ms_per_step=t / args.steps * 1e3,
                       world_steps_per_s=int(batch) * args.steps / t,
                       nonfinite=int(np.asarray(final.nonfinite).sum()),
                       contacts=float(np.mean(np.asarray(final.ncontact))))
            out["rows"].append(row)
            print(f"[{args.variant}] {spec:20s}: {row['ms_per_step']:8.3f} ms/step "
                  f"{row['world_steps_per_s']:12,.0f} world-steps/s compile {tc:5.1f} s",
                  flush=True)
            path.write_text(json.dumps(out, indent=1))
        fcntl.flock(lock, fcntl.LOCK_UN)
    out["wall_s"] = time.perf_counter() - t0
    path.write_text(json.dumps(out, indent=1))
    if "error" in out:
        print(f"[{args.variant}] {out['error']}", flush=True)


if __name__ == "__main__":
    main()
