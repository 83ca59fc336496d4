"""Is a GPU step deterministic? Two questions, one call (session 37):

    python bench/studies/gpu_determinism.py --out $OUT [--scenes boxes chain] [--batch 64] [--steps 100]

1. **Run to run:** the same compiled batched rollout called twice on the same
   inputs gives bitwise the same final states (XLA GPU's scatter-adds with
   atomics may add in another order each run).
2. **Alone and in a batch:** world ``k`` of the batch stepped by itself
   (``jaxode.rollout`` of that one world, its own program) ends bitwise where
   the batch left it (tests/test_batch_invariance.py asks this on CPU).

The worlds differ (world i starts with a horizontal velocity of 1e-3 * i m/s on
every body), so a batch is not a copy of one world. Prints and writes one JSON
row per (scene, solver): SHA-256 prefixes, whether each question holds, and the
largest difference in body position [m] where it does not.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAXODE_XLA_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402
from bench import scenes as S  # noqa: E402
from bench.studies.first_call import sha  # noqa: E402

DT = 0.01


def row(scene: str, solver: str, batch: int, steps: int, k: int) -> dict:
    model = S.model_of(scene).replace(solver=solver)
    states = jaxode.batch(jaxode.init(model), batch)
    kick = 1e-3 * jnp.arange(batch, dtype=states.vel.dtype)[:, None]
    states = states.replace(vel=states.vel.at[..., 0].add(kick))
    params = jaxode.batch(model.params, batch)
    t0 = time.perf_counter()
    run = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, steps, DT, params=p)[0]))
    first = jax.block_until_ready(run(states, params))
    compile_s = time.perf_counter() - t0
    second = jax.block_until_ready(run(states, params))
    one = lambda t: jax.tree.map(lambda x: x[k], t)  # noqa: E731
    alone = jax.block_until_ready(jaxode.rollout(model, one(states), steps, DT,
                                                 params=one(params))[0])
    in_batch = one(first)
    dpos = float(np.max(np.abs(np.asarray(alone.pos) - np.asarray(in_batch.pos))))
    drun = float(np.max(np.abs(np.asarray(first.pos) - np.asarray(second.pos))))
    return dict(scene=scene, solver=solver, batch=batch, steps=steps, world=k,
                device=str(jax.devices()[0].device_kind), jax=jax.__version__,
                run_to_run=sha(first) == sha(second), run_to_run_max_dpos_m=drun,
                alone_equals_batch=sha(alone) == sha(in_batch), alone_max_dpos_m=dpos,
                sha_first=sha(first), sha_second=sha(second),
                contacts=float(np.mean(np.asarray(first.ncontact))),
                first_call_s=round(compile_s, 1))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", nargs="+", default=["boxes", "chain"])
    ap.add_argument("--solvers", nargs="+", default=["colored", "pgs"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--world", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if not 0 <= args.world < args.batch:
        ap.error(f"--world must lie in [0, --batch) = [0, {args.batch}) (got {args.world})")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for scene in args.scenes:
        for solver in args.solvers:
            r = row(scene, solver, args.batch, args.steps, args.world)
            rows.append(r)
            print(json.dumps(r), flush=True)
            (args.out / "gpu_determinism.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
