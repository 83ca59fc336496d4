"""Where a batched step's time goes, kernel by kernel, on XLA CPU (session 17).

    PYTHONPATH=. python bench/studies/profile_step.py boxes [--batch 1024] [--reps 5] [--top 40] [--rollout K]
        [--kernels] [--regions DEPTH] [--pre "PYTHON"]

One CPU device. The scene is settled 100 steps (one world), batched to
``--batch`` identical worlds, and ``jit(vmap(physics_step))`` is compiled and
run ``--reps`` times under ``jax.profiler.trace``. The trace (XLA's XSpace) is
read back with ``jax._src.profiler.ProfileData`` (no TensorBoard needed) and
every kernel XLA ran (a thunk: a fusion, a copy, a hoisted loop ``call.N``,
a ``while``) is attributed to the innermost jaxode source line of its HLO
instruction (the compiled module's ``StackFrames`` table). Prints, per step:
the loops (``while``/``call``: their time includes the kernels inside them),
then the leaf kernels summed by module and by source line. CPU time summed
over XLA's intra-op threads (two on this VM), so the total exceeds wall time.
A kernel costs about 1 us to dispatch whatever it does (the scalar copies of
a loop's counter show it), so count matters as much as size.

``--kernels`` (session 29) adds the costliest kernels with their output shape
and ns per output element: a few ns is an elementwise kernel doing its own
work; tens of ns means XLA recomputed producers inside it (e.g. per gathered
element: the broadphase recomputed every geom's AABB per pair) or ran a
library call (a short-axis reduction, TopK, sort). ``--pre`` runs a line of
Python first (a variant, e.g. a monkeypatch). ``PROFILE_HLO=file`` writes the
compiled module's text (read a kernel's fused computation there),
``PROFILE_JSON=file`` every kernel's ms and runs per step. ``--regions DEPTH``
(session 30) sums the leaf kernels by the loops and conditionals that hold them
(the solver's preparation, its sweeps, a narrowphase chunk loop).
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile


def _section(txt: str, title: str) -> list:
    m = re.search(r"^" + title + r"\n(.*?)(?:\n\n|\n[A-Z]\w+\n|\Z)", txt, re.S | re.M)
    return m.group(1).splitlines() if m else []


def source_lines(hlo: str) -> dict:
    """HLO instruction name -> innermost (file, function, line) of its stack frame."""
    def ints(line, key):
        return int(re.search(key + r"=(\d+)", line).group(1))

    files = {int(x.split()[0]): x.split('"')[1].split("/")[-1] for x in _section(hlo, "FileNames")}
    funcs = {int(x.split()[0]): x.split('"')[1] for x in _section(hlo, "FunctionNames")}
    locs = {int(x.split()[0]): (files.get(ints(x, "file_name_id"), "?"),
                                funcs.get(ints(x, "function_name_id"), "?"), ints(x, " line"))
            for x in _section(hlo, "FileLocations")}
    frames = {int(x.split()[0]): ints(x, "file_location_id") for x in _section(hlo, "StackFrames")}
    out = {}
    for m in re.finditer(r"^\s*(?:ROOT )?%?([\w.\-]+) = [^\n]*?stack_frame_id=(\d+)", hlo, re.M):
        out[m.group(1)] = locs.get(frames.get(int(m.group(2)), -1), ("?", "?", 0))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--rollout", type=int, default=0, metavar="K",
                    help="profile jit(vmap(jaxode.rollout)) of K steps (the bench's program: "
                         "the whole step in tiles) instead of one physics_step; per step")
    ap.add_argument("--kernels", action="store_true",
                    help="also list the costliest kernels with their output shape and ns per "
                         "output element (recomputation and slow library calls stand out), and "
                         "the kernels by output size (the tiny ones cost their dispatch)")
    ap.add_argument("--regions", type=int, default=0, metavar="DEPTH",
                    help="also sum the leaf kernels by the loops and conditionals that hold "
                         "them (the HLO's while / conditional / call nesting, DEPTH levels), "
                         "each named by its source line: e.g. the solver's preparation, its "
                         "sweeps and the narrowphase's chunk loop")
    ap.add_argument("--pre", default="", metavar="PYTHON",
                    help="a line of Python run before the trace, with jax, jaxode, api, "
                         "batching (jaxode.sim.solver.batching) and model in scope; it may "
                         "rebind model (e.g. model = model.replace(batch_tile=128))")
    args = ap.parse_args(argv)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=1").strip()
    import jax
    import numpy as np
    from jax._src.profiler import ProfileData

    import jaxode
    from bench import scenes
    from jaxode.sim import pipeline

    dt = 0.01
    model = scenes.model_of(args.scene)
    s0 = jaxode.rollout(model, jaxode.init(model), 100, dt)[0]

    def batch(tree):
        return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x)[None], (args.batch,)
                                                      + np.shape(x)).copy(), tree)

    states, params = batch(s0), batch(model.params)
    if args.pre:
        from jaxode import api
        from jaxode.sim.solver import batching
        scope = dict(jax=jax, jaxode=jaxode, api=api, batching=batching, model=model)
        exec(args.pre, scope)
        model = scope["model"]
    if args.rollout:
        fn = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, args.rollout, dt,
                                                          params=p)[0]))
    else:
        fn = jax.jit(jax.vmap(lambda s, p: pipeline.physics_step(model, s, p, dt)))
    per_call = max(1, args.rollout)
    compiled = fn.lower(states, params).compile()
    where = source_lines(compiled.as_text())
    if os.environ.get("PROFILE_HLO"):   # the compiled module's text, for reading kernels
        with open(os.environ["PROFILE_HLO"], "w") as f:
            f.write(compiled.as_text())
    for _ in range(3):
        jax.block_until_ready(compiled(states, params))
    folder = tempfile.mkdtemp()
    with jax.profiler.trace(folder):
        for _ in range(args.reps):
            jax.block_until_ready(compiled(states, params))
    data = ProfileData.from_file(glob.glob(folder + "/**/*.xplane.pb", recursive=True)[0])
    ms = collections.Counter()
    count = collections.Counter()
    for plane in data.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_XLAEigen"):   # XLA's intra-op threads
                continue
            for ev in line.events:
                if ev.name.startswith("end: "):   # a kernel's completion marker
                    continue
                ms[ev.name] += ev.duration_ns / 1e6 / args.reps / per_call
                count[ev.name] += 1
    loops = {k: v for k, v in ms.items() if k.startswith(("while", "call", "cond"))}
    if os.environ.get("PROFILE_JSON"):   # every kernel's ms per step and runs per step
        import json
        with open(os.environ["PROFILE_JSON"], "w") as f:
            json.dump({k: [v, count[k] / args.reps / per_call] for k, v in ms.items()}, f)
    leaves = {k: v for k, v in ms.items() if k not in loops and not k.startswith("Thunk")}
    print(f"{args.scene}, {args.batch} worlds, one CPU device, ms of CPU per step "
          f"(summed over XLA's threads); leaf kernels {sum(leaves.values()):.1f} ms, "
          f"{sum(count[k] for k in leaves) / args.reps / per_call:.0f} kernel runs per step")
    print("loops (time includes their kernels):")
    for k, v in sorted(loops.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {v:8.2f}  {k} (x{count[k] / args.reps / per_call:.0f})")
    by_file, by_line = collections.Counter(), collections.Counter()
    for k, v in leaves.items():
        f, func, ln = where.get(k, ("(no source: copies, broadcasts)", "", 0))
        by_file[f] += v
        by_line[f"{f}:{ln} {func}" if ln else f] += v
    if os.environ.get("PROFILE_COUNTS"):
        print("leaf kernels run at least once per tile and sweep:")
        for k in sorted(leaves, key=lambda k: -count[k])[:30]:
            print(f"  x{count[k] / args.reps / per_call:6.0f} {leaves[k]:7.2f} ms  {k}")
    if args.kernels:
        _kernel_tables(compiled.as_text(), leaves, count, where, args.reps * per_call, args.top)
    if args.regions:
        _region_table(compiled.as_text(), leaves, ms, count, where, args.reps * per_call,
                      args.regions)
    print("leaf kernels by module:")
    for k, v in by_file.most_common(15):
        print(f"  {v:8.2f}  {k}")
    print("leaf kernels by source line:")
    for k, v in by_line.most_common(args.top):
        print(f"  {v:8.2f}  {k}")


def _elements(shape_text: str) -> int:
    """Elements of an HLO result type (a tuple's parts summed)."""
    total = 0
    for dims in re.findall(r"[a-z]\d*\[([\d,]*)\]", shape_text):
        n = 1
        for d in dims.split(","):
            n *= int(d) if d else 1
        total += n
    return max(total, 1)


def _kernel_tables(hlo: str, leaves: dict, count, where: dict, calls: int, top: int) -> None:
    """``--kernels``: the costliest leaf kernels with ns per output element per run,
    and the leaf kernels by output size (session 29: a kernel far above a few ns per
    element recomputes its producers, e.g. per gathered element, or is a library
    call; the tiny ones are dispatch)."""
    result = {m.group(1): m.group(2) for m in re.finditer(
        r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+(?: \([^)]*\))?)", hlo, re.M)}
    rows, sizes = [], collections.defaultdict(lambda: [0.0, 0.0])
    for k, v in leaves.items():
        runs = count[k] / calls
        if not runs:
            continue
        shape = result.get(k, "")
        n = _elements(shape)
        f, func, ln = where.get(k, ("?", "", 0))
        rows.append((v, 1e6 * v / runs / n, runs, k, shape[:34], f"{f}:{ln} {func}"))
        b = next(b for b in (64, 1024, 16384, float("inf")) if n <= b)
        sizes[b][0] += v
        sizes[b][1] += runs
    print("costliest kernels (ms per step, ns per output element and run, runs per step):")
    for v, ns, runs, k, shape, src in sorted(rows, reverse=True)[:top]:
        print(f"  {v:6.2f} {ns:7.1f} ns x{runs:5.0f}  {k[:30]:30s} {shape:34s} {src}")
    print("kernels by output elements (ms per step, runs per step, us per run):")
    for b in sorted(sizes):
        v, runs = sizes[b]
        print(f"  <= {b:>8}: {v:7.2f} ms {runs:7.0f} runs {1000 * v / max(runs, 1):6.2f} us")


def _region_chains(hlo: str) -> dict:
    """HLO instruction -> the loops and conditionals (``while``, ``conditional``,
    ``call`` instructions) that hold it, outermost first."""
    comp_of, holder, cur = {}, {}, None
    for line in hlo.splitlines():
        m = re.match(r"^(?:ENTRY )?%([\w.\-]+) .*\{$", line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*)$", line)
        if cur is None or not m:
            continue
        name, rest = m.groups()
        comp_of[name] = cur
        if re.search(r"[\]})] (?:while|conditional|call)\(", rest):
            for c in re.findall(r"(?:body|condition|to_apply|true_computation|"
                                r"false_computation)"
                                r"=%([\w.\-]+)", rest):
                holder[c] = name
            for group in re.findall(r"branch_computations=\{([^}]*)\}", rest):
                for c in re.findall(r"%([\w.\-]+)", group):
                    holder[c] = name
    chains = {}
    for name, comp in comp_of.items():
        chain = []
        while comp in holder and len(chain) < 64:
            chain.append(holder[comp])
            comp = comp_of.get(holder[comp])
        chains[name] = tuple(reversed(chain))
    return chains


def _region_table(hlo: str, leaves: dict, ms: dict, count, where: dict, calls: int,
                  depth: int) -> None:
    """``--regions``: the leaf kernels' ms per step summed by the loops and
    conditionals that hold them, as a tree ``depth`` levels deep (session 30: in
    bin_16 the solver's preparation, a ``conditional`` over the slot counts, cost
    as much as its 20 sweeps, a ``call`` XLA made of the hoisted row loops,
    whose own time ``ms`` gives since its kernels are not traced one by one)."""
    chains = _region_chains(hlo)
    total = collections.Counter()
    kernels = collections.Counter()
    for k, v in leaves.items():
        chain = chains.get(k, ())
        for d in range(min(depth, len(chain)) + 1):
            total[chain[:d]] += v
            kernels[chain[:d]] += count[k] / calls
    for name in ms:   # a loop XLA runs as one call has no traced kernels of its own
        chain = chains.get(name, ()) + (name,)
        if name.startswith(("while", "call", "cond")) and len(chain) <= depth:
            total[chain] += 0.0
    print(f"leaf kernels by the loops and conditionals that hold them (ms per step, kernel "
          f"runs per step; a loop XLA runs as one call adds its own time):")
    for chain in sorted(total):
        name = chain[-1] if chain else "(the step)"
        f, func, ln = where.get(name, ("", "", 0)) if chain else ("", "", 0)
        own = f"; itself {ms[name]:.2f} ms x{count[name] / calls:.0f}" if chain and ms.get(
            name) else ""
        src = f"  {f}:{ln} {func}" if f else ""
        print(f"  {total[chain]:8.2f} {kernels[chain]:7.0f}  {'  ' * len(chain)}{name}{own}{src}")


if __name__ == "__main__":
    sys.exit(main())
