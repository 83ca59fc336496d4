"""Batched sweeps in tiles of T worlds (session 14, issue 23): does XLA CPU's
small-while-loop hoisting make a tile's sweeps cheaper per row-world?

    PYTHONPATH=. python bench/studies/tiled_sweeps.py [boxes stack] [--tiles 0 4 8 16 32 64]
        [--batch 1024] [--threshold 1000000] [--stage solve|step] [--outer 32] [--reps 7]
        [--iterations 20 1]

One CPU device (``--xla_force_host_platform_device_count=1``). Each scene is
settled 100 steps (one world), batched to ``--batch`` identical worlds; the
solve stage's inputs (rows, bodies) are made once, then ``jit(vmap(solve))``
(``--stage solve``) or ``jit(vmap(physics_step))`` (``--stage step``) is
compiled per tile size (``Model.batch_tile``; 0 = untiled) and the
variants are timed interleaved in one process (``time.process_time`` per call,
median over ``--reps`` rounds; the machine is shared, wall time means nothing).
Prints CPU ms per call, ns per row-world per sweep (iterations 20 vs 1 with
``--sweep``), compile CPU s, the number of hoisted loops (``xla_cpu_small_call``
in the compiled text) and whether the outputs are bitwise the untiled ones.
``--outer T`` (with ``--stage step``): the whole step in tiles of T worlds
(``lax.map`` over ``vmap(step)``), what ``jaxode.api`` does for a vmapped
``step``/``rollout`` (bench/RESULTS.md, session 14).
"""
from __future__ import annotations

import argparse
import os
import sys


def _flags(threshold):
    flags = os.environ.get("XLA_FLAGS", "")
    flags += " --xla_force_host_platform_device_count=1"
    if threshold:
        flags += (" --xla_backend_extra_options="
                  f"xla_cpu_small_while_loop_byte_threshold={int(threshold)}")
    os.environ["XLA_FLAGS"] = flags.strip()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("scenes", nargs="*", default=["boxes", "stack"])
    ap.add_argument("--tiles", nargs="*", type=int, default=[0, 4, 8, 16, 32, 64])
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--threshold", type=float, default=None,
                    help="xla_cpu_small_while_loop_byte_threshold (default: jaxode's)")
    ap.add_argument("--stage", default="solve", choices=("solve", "step"))
    ap.add_argument("--outer", type=int, nargs="*", default=[],
                    help="with --stage step: also the whole step in tiles of these many worlds "
                    "(lax.map over jit(vmap(step)) of each tile; sweeps untiled inside)")
    ap.add_argument("--iterations", type=int, nargs="*", default=None,
                    help="solve with these iterations (rows made with the scene's 20); "
                    "two values: also ns per active row-world per sweep from their difference")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--x64", action="store_true")
    args = ap.parse_args(argv)
    _flags(args.threshold)

    import statistics
    import time

    import jax
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    import numpy as np

    import jaxode
    from bench import scenes as bench_scenes
    from jaxode.sim import dynamics, pipeline, rowset, solver
    from jaxode.sim import narrowphase
    from tools.conformance.scenes import build_jaxode

    print("XLA_FLAGS:", os.environ["XLA_FLAGS"], "| devices:", jax.devices(), flush=True)
    dt = 0.01
    for name in args.scenes:
        model = build_jaxode(getattr(bench_scenes, name)())
        its = args.iterations or [model.iterations]
        s0 = jaxode.rollout(model, jaxode.init(model), 100, dt)[0]
        states = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x)[None], (args.batch,)
                                                        + np.shape(x)).copy(), s0)
        params = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x)[None], (args.batch,)
                                                        + np.shape(x)).copy(), model.params)

        def prep(s, p):
            found = narrowphase.detect(model, s)
            b = dynamics.bodies(model, p, s, dt)
            rows = rowset.build(model, p, b, found)
            return rows, dynamics.accelerate(b, rows)

        rows, bodies = jax.jit(jax.vmap(prep))(states, params)
        nrows = rows.head.body1.shape[-1] + rows.tail.body1.shape[-1]
        live = int(np.asarray(rows.head.active[0]).sum() + np.asarray(rows.tail.active[0]).sum())
        def fn(it, t):
            m = model.replace(iterations=it, batch_tile=t)
            if args.stage == "solve":
                return lambda rows, bodies, p, t: solver.solve_rows(m, rows, bodies, p, t)[:3]
            return lambda s, p: pipeline.physics_step(m, s, p, dt)
        fargs = (rows, bodies, params, states.time) if args.stage == "solve" else (states, params)

        def outer(it, t):
            step = jax.vmap(fn(it, 0))
            n = args.batch // t

            def f(s, p):
                tiles = jax.tree.map(lambda x: x.reshape((n, t) + x.shape[1:]), (s, p))
                out = jax.lax.map(lambda sp: step(*sp), tiles)
                return jax.tree.map(lambda x: x.reshape((n * t,) + x.shape[2:]), out)
            return f

        compiled, info = {}, {}
        variants = [(t, it) for it in its for t in args.tiles]
        variants += [(-t, it) for it in its for t in args.outer]
        for t, it in variants:
            f = fn(it, t) if t >= 0 else outer(it, -t)
            c0 = time.process_time()
            c = (jax.jit(jax.vmap(f)) if t >= 0 else jax.jit(f)).lower(*fargs).compile()
            tc = time.process_time() - c0
            txt = c.as_text()
            compiled[t, it] = c
            info[t, it] = dict(compile=tc, hoisted=txt.count("xla_cpu_small_call"),
                           whiles=txt.count(" while("))
        for t, it in variants:
            ref = jax.tree.leaves(jax.block_until_ready(compiled[args.tiles[0], it](*fargs)))
            out = jax.tree.leaves(jax.block_until_ready(compiled[t, it](*fargs)))
            info[t, it]["bitwise"] = all(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
                                     for a, b in zip(out, ref))
        times = {v: [] for v in variants}
        for _ in range(args.reps):
            for v in variants:
                c0 = time.process_time()
                jax.block_until_ready(compiled[v](*fargs))
                times[v].append(time.process_time() - c0)
        print(f"{name} ({args.stage}, batch {args.batch}, "
              f"rows {nrows} per world of which {live} active, "
              f"{jnp_dtype(rows)}):")
        med = {v: statistics.median(times[v]) for v in variants}
        for t, it in variants:
            m = med[t, it]
            base = med[args.tiles[0], it]
            i = info[t, it]
            label = t or "none" if t >= 0 else f"outer {-t}"
            print(f"  iterations {it:>3} tile {label:>4}: {m * 1e3:8.2f} ms CPU (min "
                  f"{min(times[t, it]) * 1e3:.2f}; {m / base * 100:5.1f} %), compile "
                  f"{i['compile']:.2f} s, hoisted loops {i['hoisted']}, whiles {i['whiles']}, "
                  f"bitwise {i['bitwise']}", flush=True)
        if len(its) == 2:
            for t in args.tiles:
                d = (med[t, its[0]] - med[t, its[1]]) / (its[0] - its[1])
                print(f"  tile {t or 'none':>4}: one sweep {d * 1e3:.2f} ms = "
                      f"{d / (live * args.batch) * 1e9:.1f} ns per active row-world; "
                      f"rest {(med[t, its[1]] - its[1] * d) * 1e3:.2f} ms")


def jnp_dtype(rows):
    return str(rows.head.j1.dtype)


if __name__ == "__main__":
    sys.exit(main())
