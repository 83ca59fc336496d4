"""Load every URDF that ships in pybullet_data and step it: the load rate.

    python tools/corpus_load.py [--steps 100] [--step-every 1] [--limit N] [--json out.json]

For each ``*.urdf`` under ``pybullet_data.getDataPath()`` (PyPI package
``pybullet``; extra ``jaxode[scene_corpus]``): ``jaxode.load_urdf(path)``
(free base, as PyBullet's ``loadURDF`` default), ``builder.build()``, and
for every ``--step-every``-th file that built, ``--steps`` steps of 1 ms
under gravity (one jit per scene structure); a file counts as stepped when
every body's position and velocity stay finite. Prints the rate per stage
and the failures grouped by their first message line; ``--json`` writes
the per-file results. Runs with whatever ``jaxode`` is first on the path
(the "before" column of docs/SCENE_FILES.md ran main at 55fd8f7).
"""
from __future__ import annotations

import argparse
import collections
import functools
import glob
import json
import os
import re
import sys
import time
import warnings

import numpy as np


def _short(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    msg = re.sub(r"^\S+?:\d+: ", "", msg)  # drop file:line, keep the message
    msg = re.sub(r"\d+(\.\d+)?", "#", msg)
    return f"{type(e).__name__}: {msg}"[:160]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-every", type=int, default=1,
                    help="step every k-th built file (1 = all; stepping compiles per structure)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0 = all)")
    ap.add_argument("--json", default="")
    ap.add_argument("--progress", action="store_true", help="one line per file on stderr")
    args = ap.parse_args(argv)

    import jax
    import pybullet_data

    import jaxode
    from jaxode.sim.pipeline import guarded_step

    root = pybullet_data.getDataPath()
    files = sorted(glob.glob(os.path.join(root, "**", "*.urdf"), recursive=True))
    if args.limit:
        files = files[:args.limit]
    opts = {"xla_backend_optimization_level": 0}

    @functools.partial(jax.jit, compiler_options=opts)
    def roll(model, state, params):
        return jax.lax.fori_loop(0, args.steps, lambda i, s: guarded_step(model, s, params, 1e-3), state)

    results = []
    t0 = time.time()
    nbuilt = 0
    for path in files:
        rel = os.path.relpath(path, root)
        r = dict(file=rel, loaded=False, built=False, stepped=None, error="")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                b = jaxode.load_urdf(path)
            r["loaded"] = True
            model = b.build()
            r["built"] = True
            r["bodies"], r["geoms"] = len(b.bodies), len(b.geoms)
            nbuilt += 1
            if (nbuilt - 1) % args.step_every == 0:
                s = roll(model, jaxode.init(model), model.params)
                ok = bool(np.all(np.isfinite(np.asarray(s.pos))) and np.all(np.isfinite(np.asarray(s.vel))))
                r["stepped"] = ok
                if not ok:
                    r["error"] = "non-finite state after stepping"
        except Exception as e:  # the corpus is measured, not stopped, by a failure
            r["error"] = _short(e)
        results.append(r)
        if args.progress:
            print(json.dumps(r), file=sys.stderr, flush=True)
    n = len(results)
    loaded = sum(r["loaded"] for r in results)
    built = sum(r["built"] for r in results)
    tried = [r for r in results if r["stepped"] is not None]
    stepped = sum(bool(r["stepped"]) for r in tried)
    print(f"jaxode: {jaxode.__file__}")
    print(f"pybullet_data URDFs: {n}  ({time.time() - t0:.0f} s)")
    print(f"loaded: {loaded}/{n} = {100 * loaded / max(n, 1):.1f} %")
    print(f"built:  {built}/{n} = {100 * built / max(n, 1):.1f} %")
    print(f"stepped {args.steps} steps, finite: {stepped}/{len(tried)} of those tried "
          f"(every {args.step_every}-th built file)")
    fails = collections.Counter(r["error"] for r in results if r["error"])
    for msg, k in fails.most_common():
        ex = next(r["file"] for r in results if r["error"] == msg)
        print(f"  {k:5d}  {msg}   (e.g. {ex})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
