"""GPU: the solver's own-slot path (worlds whose contact body indices differ) against the
shared path, same scenes and batch; the path is forced by replacing the batching rule's
``lax.cond`` with its false branch (the same rows and arithmetic per world: session 20).

    python bench/studies/gpu_own_slots.py --out DIR [--scenes boxes stack] [--batch 1024 16384]
"""
import argparse, json, os, sys, time, types
from pathlib import Path
os.environ.setdefault("JAXODE_XLA_CACHE", "0")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import jax, numpy as np
import jaxode
from bench import scenes as S
from jaxode.sim.solver import batching

ap = argparse.ArgumentParser()
ap.add_argument("--scenes", nargs="+", default=["boxes", "stack"])
ap.add_argument("--solvers", nargs="+", default=["pgs", "colored"])
ap.add_argument("--batch", type=int, nargs="+", default=[1024, 16384])
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--out", type=Path, required=True)
a = ap.parse_args()
a.out.mkdir(parents=True, exist_ok=True)
lax = types.SimpleNamespace(**{k: getattr(jax.lax, k) for k in dir(jax.lax) if not k.startswith("__")})
lax.cond = lambda pred, t, f, op: f(op)
shim = types.SimpleNamespace(**{k: getattr(jax, k) for k in dir(jax) if not k.startswith("__")})
shim.lax = lax
rows = []
for name in a.scenes:
    base = S.model_of(name)
    s0 = jaxode.rollout(base, jaxode.init(base), 100, 0.01)[0]   # settled once per scene
    for W in a.batch:
        for solver in a.solvers:
            for own in (False, True):
                batching.jax = shim if own else jax
                model = base.replace(solver=solver)
                st = jax.device_put(jaxode.batch(s0, W)); pa = jax.device_put(jaxode.batch(model.params, W))
                f = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, a.steps, 0.01, params=p)[0]))
                t0 = time.perf_counter(); c = f.lower(st, pa).compile(); tc = time.perf_counter() - t0
                best = 1e9
                for _ in range(2):
                    t0 = time.perf_counter(); out = jax.block_until_ready(c(st, pa)); best = min(best, time.perf_counter() - t0)
                r = dict(scene=name, batch=W, solver=solver, own_slots=own, compile_s=tc,
                         world_steps_per_s=W * a.steps / best,
                         contacts=float(np.mean(np.asarray(out.ncontact))),
                         nonfinite=int(np.asarray(out.nonfinite).sum()))
                rows.append(r); print(r, flush=True)
                (a.out / "own_slots.json").write_text(json.dumps(rows, indent=1))
batching.jax = jax
