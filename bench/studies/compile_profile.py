"""Where a bench scene's first call goes inside XLA's CPU compiler (session 33).

    PYTHONPATH=. python bench/studies/compile_profile.py boxes 1024 [--steps 30] [--top 25]
        [--pre "PYTHON"] [--kinds]

Builds the scene's batched rollout as ``python -m bench`` does (a batch the CPU
device count divides runs sharded through ``jaxode.map_worlds``, otherwise
``jit(vmap(rollout))``; ``XLA_FLAGS=--xla_force_host_platform_device_count=1``
for one device), times trace and lowering, then compiles under
``jax.profiler.trace`` with the persistent cache off and prints:

- XLA's own events summed by name (ms, count): ``Codegen`` (the kernels' LLVM
  compile, on XLA's codegen threads), ``FusionCompiler`` (one per fusion kernel),
  ``ThunkEmitter`` (the runtime's thunks, on the compiling thread), the HLO
  pass pipelines, ``spmd-partitioner`` and ``shardy-xla`` (a sharded program);
- the longest single codegen tasks (``TaskDispatcher::dispatch``: one LLVM module
  each; a hoisted loop XLA compiles as one function shows here);
- with ``--kinds``, the compiled module's fusion kernels counted by kind (the
  name XLA gives them, e.g. ``bitcast_transpose_fusion``): each is compiled on
  its own, ~20 ms apiece whatever its size (bench/RESULTS.md, session 25), so
  their number prices the compile.

``--pre`` runs a line of Python first (``batching``, ``pgs``, ``constraint``,
``narrowphase`` in scope; ``SLOTS`` and ``TILE`` set ``Model.slot_sizes`` and
``Model.batch_tile``), as in ab_inprocess.py. Times are this VM's: compare within
one session, and run a variant more than once (the codegen threads share the
machine's two cores with whatever else runs).
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import tempfile
import time


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("batch", type=int)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--pre", default="", metavar="PYTHON")
    ap.add_argument("--kinds", action="store_true")
    a = ap.parse_args(argv)
    os.environ["JAXODE_XLA_CACHE"] = "0"

    import jaxode  # noqa: I001  (before jax starts: XLA flags)
    import jax
    from jax._src.profiler import ProfileData

    from bench import scenes as S
    from bench.studies.first_call import program
    from jaxode.sim import constraint, narrowphase  # noqa: F401  (for --pre)
    from jaxode.sim.solver import batching, pgs  # noqa: F401

    model = S.model_of(a.scene).replace(solver="pgs")
    scope = dict(globals(), **locals())
    exec(a.pre or "pass", scope)
    if "SLOTS" in scope:
        model = model.replace(slot_sizes=int(scope["SLOTS"]))
    if "TILE" in scope:
        model = model.replace(batch_tile=int(scope["TILE"]))
    fn, states, params = program(model, a.batch, a.steps)
    ndev = len(jax.devices())
    t0 = time.perf_counter()
    traced = fn.trace(states, params)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    folder = tempfile.mkdtemp()
    with jax.profiler.trace(folder):
        compiled = lowered.compile()
    t3 = time.perf_counter()
    print(f"{a.scene}, {a.batch} worlds, {ndev} device(s), pre {a.pre!r}: trace {t1 - t0:.2f} s, "
          f"lowering {t2 - t1:.2f} s, XLA {t3 - t2:.2f} s (wall, under the profiler)")

    data = ProfileData.from_file(glob.glob(folder + "/**/*.xplane.pb", recursive=True)[0])
    summed = collections.defaultdict(lambda: [0.0, 0])
    tasks = []
    for plane in data.planes:
        for line in plane.lines:
            for ev in line.events:
                if ev.name.startswith("$"):      # Python frames
                    continue
                key = ev.name.split("::")[0].split(" (")[0]
                summed[key][0] += ev.duration_ns / 1e6
                summed[key][1] += 1
                if ev.name.startswith("TaskDispatcher"):
                    tasks.append(ev.duration_ns / 1e6)
    print("XLA's events, summed by name (ms of the threads that ran them, count):")
    for name, (ms, n) in sorted(summed.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"  {ms:9.1f} {n:6d}  {name}")
    tasks.sort(reverse=True)
    print(f"codegen tasks: {len(tasks)}, {sum(tasks) / 1e3:.1f} s in all; the longest (ms): "
          + ", ".join(f"{t:.0f}" for t in tasks[:10]))
    if a.kinds:
        text = compiled.as_text()
        kinds = collections.Counter(
            re.sub(r"\.\d+$", "", m.group(1))
            for m in re.finditer(r"^\s*%(\S+) = .*? fusion\(", text, re.M))
        print(f"fusion kernels: {sum(kinds.values())}; by kind:")
        for k, n in kinds.most_common(a.top):
            print(f"  {n:5d}  {k}")


if __name__ == "__main__":
    main()
