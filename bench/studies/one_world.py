"""One world (batch 1) step cost: where the time goes (session 13, issue 23).

    PYTHONPATH=. python bench/studies/one_world.py [boxes chain] [--solver pgs] [--steps 100]

For each scene: the world is first stepped 100 steps (boxes comes to rest), then
``jit(vmap(rollout))`` at batch 1 is timed (process_time, best of 3) with the
model's ``iterations`` at 20 and 1 (the difference / 19 is one sweep), and a
rollout of 1 step (fixed per-call cost). Prints us per step, kernel counts of
the compiled program (fusions inside while bodies) and compile times.
"""
from __future__ import annotations

import argparse
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from bench import scenes as bench_scenes
from tools.conformance.scenes import build_jaxode

DT = 0.01


def build(name):
    scene = getattr(bench_scenes, name)()
    return build_jaxode(scene)


def compiled_rollout(model, steps, batch=1):
    one = lambda s, p: jaxode.rollout(model, s, steps, DT, params=p)[0]  # noqa: E731
    fn = jax.jit(jax.vmap(one))
    return fn


def timed(compiled, args, reps=3, inner=1):
    best = 1e9
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(inner):
            out = jax.block_until_ready(compiled(*args))
        best = min(best, (time.process_time() - t0) / inner)
    return best, out


def kernel_counts(text):
    """Fusions / while loops in an HLO module text."""
    comps = re.split(r"\n(?=\S)", text)
    n_while = text.count(" while(")
    n_fusion = len(re.findall(r"= \S+ fusion\(", text))
    return dict(whiles=n_while, fusions=n_fusion, chars=len(text))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("scenes", nargs="*", default=["boxes", "chain"])
    ap.add_argument("--solver", default="pgs")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--dump", default=None)
    ap.add_argument("--quick", action="store_true", help="only the 20-iteration rollout")
    ap.add_argument("--save", default=None, help="write the final states to this .npz prefix")
    ap.add_argument("--compare", default=None, help="compare the final states bitwise with "
                    "this .npz prefix")
    args = ap.parse_args(argv)
    for name in args.scenes:
        model = build(name).replace(solver=args.solver)
        s0 = jaxode.init(model)
        # settle: 100 steps
        s0 = jaxode.rollout(model, s0, 100, DT)[0]
        states = jaxode.batch(s0, args.batch)
        params = jaxode.batch(model.params, args.batch)
        res = {}
        runs = [("it20", model, args.steps)]
        if not args.quick:
            runs += [("it1", model.replace(iterations=1), args.steps), ("call1", model, 1)]
        for label, m, steps in runs:
            fn = compiled_rollout(m, steps)
            t0 = time.process_time()
            lowered = fn.lower(states, params)
            c = lowered.compile()
            tc = time.process_time() - t0
            t, out = timed(c, (states, params), inner=1 if steps > 1 else 50)
            res[label] = (t, tc, steps)
            if label == "it20":
                txt = c.as_text()
                kc = kernel_counts(txt)
                if args.dump:
                    open(f"{args.dump}_{name}.txt", "w").write(txt)
                final = out
        t20, tc20, n = res["it20"]
        leaves = [np.asarray(x) for x in jax.tree.leaves(final)]
        if args.save:
            np.savez(f"{args.save}_{name}_{args.solver}_{args.batch}.npz", *leaves)
        if args.compare:
            ref = np.load(f"{args.compare}_{name}_{args.solver}_{args.batch}.npz")
            same = all(np.array_equal(a, ref[f"arr_{i}"], equal_nan=True)
                       for i, a in enumerate(leaves))
            print(f"{name}: final state bitwise equal to {args.compare}: {same}")
        if args.quick:
            print(f"{name} {args.solver} batch {args.batch}: {n * args.batch / t20:.0f} "
                  f"world-steps/s, {t20 / n * 1e6:.0f} us/step; compile {tc20:.2f} s; "
                  f"kernels {kc}")
            continue
        t1 = res["it1"][0]
        tcall = res["call1"][0]
        sweep = (t20 - t1) / 19 / n
        print(f"{name} {args.solver} batch {args.batch}: {n * args.batch / t20:.0f} world-steps/s, "
              f"{t20 / n * 1e6:.0f} us/step; one sweep {sweep * 1e6:.1f} us "
              f"(20: {20 * sweep * 1e6:.0f} us), rest {(t1 / n - sweep) * 1e6:.0f} us/step, "
              f"1-step call {tcall * 1e6:.0f} us; compile {tc20:.2f} s; kernels {kc}; "
              f"contacts {np.asarray(final.ncontact).mean():.1f}")


if __name__ == "__main__":
    main()
