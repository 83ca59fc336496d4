"""The GPU measurement in one call: every (scene, solver, batch) lowered first,
compiled on a thread pool (XLA's compile releases the GIL, so 16 host cores
compile 16 programs at once instead of one after another), then timed one at a
time on the accelerator, with results written after each row so that a run cut
off by its time limit still returns what it measured.

    python bench/gpu_run.py --out $OUT [--scenes ...] [--batch ...] [--solvers ...]

Rows are timed in the order given (scenes outer, then batch, then solver), so
the first rows are the ones that matter most. Timing as in ``python -m bench``:
the best of two runs of ``steps`` steps of 0.01 s, inputs already on the device.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAXODE_XLA_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402
from bench import scenes as S  # noqa: E402
from bench.__main__ import quality, tree_nbytes, DT  # noqa: E402
from bench.bench_step import machine_info  # noqa: E402


def prepare(name, solver, batch, steps):
    model = S.model_of(name).replace(solver=solver)
    states = jax.device_put(jaxode.batch(jaxode.init(model), batch))
    params = jax.device_put(jaxode.batch(model.params, batch))
    one = lambda s, p: jaxode.rollout(model, s, steps, DT, params=p)[0]  # noqa: E731
    t0 = time.perf_counter()
    lowered = jax.jit(jax.vmap(one)).lower(states, params)
    return dict(scene=name, solver=solver, batch=batch, steps=steps, states=states,
                params=params, lowered=lowered, trace_s=time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", nargs="+", default=["boxes", "chain", "stack", "bin_16", "walker"])
    ap.add_argument("--solvers", nargs="+", default=["pgs", "colored"])
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 1024, 16384])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 4)
    ap.add_argument("--max-run-s", type=float, default=60.0,
                    help="skip a row whose smaller batch predicts a timed run longer than this")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    info = machine_info()
    print(f"jax {jax.__version__} on {jax.devices()}, {info['cpu_model']} x{info['nproc']}",
          flush=True)
    t_all = time.perf_counter()
    jobs = [prepare(n, s, b, args.steps) for n in args.scenes for b in args.batch
            for s in args.solvers]
    print(f"traced+lowered {len(jobs)} programs in {time.perf_counter() - t_all:.1f} s",
          flush=True)

    def compile_one(j):
        t0 = time.perf_counter()
        j["compiled"] = j["lowered"].compile()
        j["compile_s"] = time.perf_counter() - t0   # wall, with others compiling beside it
        return j

    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(args.threads) as pool:
        futures = [pool.submit(compile_one, j) for j in jobs]   # submitted in timing order
        results, rate = [], {}
        for j, fut in zip(jobs, futures):
            try:
                fut.result()
            except Exception as e:  # noqa: BLE001 - out of memory at a big batch, say
                print(f"{j['scene']} {j['solver']} {j['batch']}: compile failed: "
                      f"{type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            key = (j["scene"], j["solver"])
            # a GPU's step costs about the same from 1 to 1024 worlds (session 15), so
            # only a batch of 1024 or more predicts a larger one (linearly: an upper bound)
            if key in rate and rate[key][0] >= 1024 and \
                    j["batch"] * j["steps"] / rate[key][1] > args.max_run_s:
                print(f"{j['scene']} {j['solver']} {j['batch']}: skipped (predicted "
                      f"{j['batch'] * j['steps'] / rate[key][1]:.0f} s)", flush=True)
                continue
            times, final = [], None
            try:
                for _ in range(2):
                    t1 = time.perf_counter()
                    final = jax.block_until_ready(j["compiled"](j["states"], j["params"]))
                    times.append(time.perf_counter() - t1)
            except Exception as e:  # noqa: BLE001
                print(f"{j['scene']} {j['solver']} {j['batch']}: run failed: "
                      f"{type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            best = min(times)
            rate[key] = (j["batch"], j["batch"] * j["steps"] / best)
            try:
                temp = j["compiled"].memory_analysis().temp_size_in_bytes / j["batch"]
            except Exception:  # noqa: BLE001
                temp = None
            r = dict(scene=j["scene"], solver=j["solver"], batch=j["batch"], steps=j["steps"],
                     trace_s=j["trace_s"], compile_s=j["compile_s"], run_s=best,
                     first_run_s=times[0], world_steps_per_s=rate[key][1],
                     bytes_per_world=(tree_nbytes(j["states"]) + tree_nbytes(j["params"]))
                     / j["batch"], temp_bytes_per_world=temp,
                     contacts_per_world=float(np.mean(np.asarray(final.ncontact))),
                     nonfinite_worlds=int(np.asarray(final.nonfinite).sum()),
                     **quality(j["states"], final))
            results.append(r)
            print(f"{r['scene']:7s} {r['solver']:7s} batch {r['batch']:6d}: "
                  f"{r['world_steps_per_s']:12,.0f} world-steps/s  run {best:.3f} s  "
                  f"trace {r['trace_s']:.1f} s  compile {r['compile_s']:.1f} s  "
                  f"contacts {r['contacts_per_world']:.1f}  depth {r['depth'] * 1e6:.0f} um  "
                  f"drift {r['drift'] * 1e3:.1f} mm  nonfinite {r['nonfinite_worlds']}",
                  flush=True)
            (args.out / "gpu_results.json").write_text(json.dumps(
                dict(machine=info, wall_s=time.perf_counter() - t_all, results=results),
                indent=1))
            j.pop("compiled"), j.pop("lowered")
    print(f"all done in {time.perf_counter() - t_all:.1f} s (compile+run "
          f"{time.perf_counter() - t0:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
