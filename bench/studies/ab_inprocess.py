"""Variants of a batched rollout compared in one process, their calls interleaved (session 22).

    PYTHONPATH=. python bench/studies/ab_inprocess.py boxes --batch 128 \\
        "pass" "CAP = 32" "ITER = 1" "TILE = 64" "batching.AUTO_TILE = 16"

Why: on this VM the same program's speed moves by 20-30 % from one process to the
next (other tenants; bench/RESULTS.md, session 22), so a variant run in its own
process after another measures the machine as much as the change. Here every
variant is compiled first (``jax.clear_caches()`` between them, so a module flag
read at trace time takes effect), then the compiled rollouts are called in turn,
``--reps`` rounds, and the minimum and median per step are reported (wall and
process CPU time), with whether each variant's final states are bitwise those of
the first.

A variant is a line of Python run before its trace, with ``batching``
(jaxode.sim.solver.batching), ``constraint``, ``narrowphase``, ``pgs`` and
``xla`` in scope. These names change the model or its compile instead of the code: ``CAP``
(``contact_capacity`` at build), ``ITER`` (``Model.iterations``; ``ITER = 1``
leaves the step without its sweeps, which shows how much of it they are),
``TILE`` (``Model.batch_tile``) and ``SLOTS`` (``Model.slot_sizes``); ``OPTIONS``, a dict, is
passed to XLA as the variant's compile options (``compiler_options``: XLA's debug
options by name, enum values by their full name, e.g. ``OPTIONS =
{"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_DOT"}``), for that
compile alone. Each variant is settled 100 steps alone first
(its own model), then batched to ``--batch`` identical worlds: a
``jit(vmap(rollout of 10 steps))`` on one CPU device, as bench/bench_step.py's
programs (a batch larger than the tile runs tile after tile).

``--devices N`` (session 34) runs the bench's own way instead: N CPU devices
(one per core on this VM: ``--devices 2``), the batch sharded over them and
mapped with ``jaxode.map_worlds`` as ``python -m bench`` does for a batch the
device count divides. Measure there what the bench will see: one device's
time leaves the other core to XLA's intra-op threads, the bench's does not.
An untiled rollout (solver tiles inside) ran faster than the default on one
device (minimum wall 9.64 against 11.02 ms at 512 worlds of chain) and slower
on two (13.34 against 11.87 ms at 1,024; bench/RESULTS.md, session 34).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("variants", nargs="+", help="lines of Python, one per variant")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--devices", type=int, default=1,
                    help="CPU devices; above 1 the batch is sharded over them and mapped "
                         "with jaxode.map_worlds, as python -m bench runs it")
    args = ap.parse_args(argv)
    if args.devices < 1 or args.batch % args.devices:
        ap.error(f"--devices must be at least 1 and divide --batch ({args.batch}); "
                 f"got {args.devices}")
    os.environ.setdefault("JAXODE_XLA_CACHE", "0")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + f" --xla_force_host_platform_device_count={args.devices}"
                               ).strip()
    import jax
    import numpy as np

    import jaxode
    from bench import scenes
    from jaxode import xla
    from jaxode.build import builder
    from jaxode.sim import constraint, narrowphase
    from jaxode.sim.solver import batching, pgs

    dt, w = 0.01, args.batch

    def batched(tree):
        return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x)[None], (w,) + np.shape(x))
                            .copy(), tree)

    runs = []
    for text in args.variants:
        jax.clear_caches()
        scope = dict(batching=batching, constraint=constraint, narrowphase=narrowphase,
                     pgs=pgs, xla=xla, jax=jax, np=np)
        exec(text, scope)   # noqa: S102 - the user's own variant line
        build = builder.WorldBuilder.build
        if "CAP" in scope:
            cap = int(scope["CAP"])
            builder.WorldBuilder.build = (lambda self, contact_capacity=None,
                                          pair_capacity=None: build(self, cap, pair_capacity))
        try:
            model = scenes.model_of(args.scene)
        finally:
            builder.WorldBuilder.build = build
        if "ITER" in scope:
            model = model.replace(iterations=int(scope["ITER"]))
        if "TILE" in scope:
            model = model.replace(batch_tile=int(scope["TILE"]))
        if "SLOTS" in scope:
            model = model.replace(slot_sizes=int(scope["SLOTS"]))
        s0 = jaxode.rollout(model, jaxode.init(model), 100, dt)[0]
        states, params = batched(s0), batched(model.params)

        def one(s, p, m=model):
            return jaxode.rollout(m, s, args.steps, dt, params=p)[0]
        if args.devices > 1:
            mesh = jaxode.world_mesh()
            states, params = jaxode.shard_worlds(states, mesh), jaxode.shard_worlds(params, mesh)
            fn = jaxode.map_worlds(one, mesh)
        else:
            fn = jax.jit(jax.vmap(one))
        t0 = time.perf_counter()
        compiled = fn.lower(states, params).compile(
            compiler_options=scope.get("OPTIONS") or None)
        print(f"[{text}] compiled in {time.perf_counter() - t0:.1f} s "
              f"(contact_capacity {model.contact_capacity})", flush=True)
        runs.append((text, compiled, states, params, compiled(states, params)))

    first = jax.tree.leaves(runs[0][4])
    wall = {r[0]: [] for r in runs}
    cpu = {r[0]: [] for r in runs}
    for _ in range(args.reps):
        for text, compiled, states, params, _out in runs:
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(compiled(states, params))
            wall[text].append((time.perf_counter() - t0) / args.steps)
            cpu[text].append((time.process_time() - c0) / args.steps)
    for text, *_rest, out in runs:
        same = all(np.array_equal(np.asarray(a), np.asarray(b))
                   for a, b in zip(first, jax.tree.leaves(out)))
        print(f"{args.scene} x{w} [{text}]: wall min {min(wall[text]) * 1e3:.2f} "
              f"median {statistics.median(wall[text]) * 1e3:.2f} ms/step "
              f"({w / min(wall[text]):,.0f} world-steps/s), CPU min "
              f"{min(cpu[text]) * 1e3:.2f} median {statistics.median(cpu[text]) * 1e3:.2f} "
              f"ms/step; final states bitwise those of the first: {same}")


if __name__ == "__main__":
    sys.exit(main())
