"""Load every URDF that ships in pybullet_data and step it: the load rate.

    python tools/corpus_load.py [--steps 100] [--step-every 1] [--group 48] [--limit N] [--json out.json]

For each ``*.urdf`` under ``pybullet_data.getDataPath()`` (PyPI package
``pybullet``; extra ``jaxode[scene_corpus]``): ``jaxode.load_urdf(path)``
(free base, as PyBullet's ``loadURDF`` default), ``builder.build()``, and
for every ``--step-every``-th file that built, ``--steps`` steps of 1 ms
under gravity; a file counts as stepped when its bodies' positions and
velocities stay finite. To compile less, consecutive files are stepped
together in one world (``--group`` bodies at most, each file 500 m from the
next; a group that fails is redone file by file). Prints the rate per stage
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


def _finite(state, bodies) -> bool:
    pos, vel = np.asarray(state.pos)[bodies], np.asarray(state.vel)[bodies]
    return bool(np.all(np.isfinite(pos)) and np.all(np.isfinite(vel)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-every", type=int, default=1,
                    help="step every k-th built file (1 = all)")
    ap.add_argument("--group", type=int, default=48,
                    help="step up to this many bodies' worth of files in one world (far apart, "
                         "one compile); 0 = each file alone")
    ap.add_argument("--limit", type=int, default=0, help="only the first N files (0 = all)")
    ap.add_argument("--only", default="", help="only files whose path contains this")
    ap.add_argument("--exclude", default="", help="leave out files whose path contains this")
    ap.add_argument("--json", default="")
    ap.add_argument("--progress", action="store_true", help="one line per file on stderr")
    args = ap.parse_args(argv)

    import jax
    import pybullet_data

    import jaxode
    from jaxode.sim.pipeline import guarded_step

    root = pybullet_data.getDataPath()
    files = sorted(glob.glob(os.path.join(root, "**", "*.urdf"), recursive=True))
    if args.only:
        files = [f for f in files if args.only in os.path.relpath(f, root)]
    if args.exclude:
        files = [f for f in files if args.exclude not in os.path.relpath(f, root)]
    if args.limit:
        files = files[:args.limit]
    opts = {"xla_backend_optimization_level": 0}

    @functools.partial(jax.jit, compiler_options=opts)
    def roll(model, state, params):
        return jax.lax.fori_loop(0, args.steps, lambda i, s: guarded_step(model, s, params, 1e-3), state)

    def load(path, builder=None, base_pos=(0.0, 0.0, 0.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jaxode.load_urdf(path, builder=builder, base_pos=base_pos)

    results = []
    t0 = time.time()
    for path in files:  # load and build each file alone
        r = dict(file=os.path.relpath(path, root), loaded=False, built=False, stepped=None, error="")
        try:
            b = load(path)
            r["loaded"] = True
            b.build()
            r["built"] = True
            r["bodies"], r["geoms"] = len(b.bodies), len(b.geoms)
        except Exception as e:  # the corpus is measured, not stopped, by a failure
            r["error"] = _short(e)
        r["path"] = path
        results.append(r)
    built = [r for r in results if r["built"]][::args.step_every]

    def step_alone(r):
        try:
            m = load(r["path"]).build()
            s = roll(m, jaxode.init(m), m.params)
            r["stepped"] = _finite(s, slice(None))
        except Exception as e:
            r["stepped"], r["error"] = False, "stepping: " + _short(e)
        if not r["stepped"] and not r["error"]:
            r["error"] = "non-finite state after stepping"

    # Group consecutive files (similar structures) into one world: each at its
    # own spot 500 m apart on a grid (static geoms never collide with each
    # other; the largest, plane.urdf, is 200 m wide), stepped together; a
    # file's verdict is its own bodies'. A group that fails is redone alone.
    groups, cur, nb = [], [], 0
    for r in built:
        if cur and (not args.group or nb + max(r["bodies"], 1) > args.group):
            groups.append(cur)
            cur, nb = [], 0
        cur.append(r)
        nb += max(r["bodies"], 1)
    if cur:
        groups.append(cur)
    for grp in groups:
        if len(grp) == 1 or not args.group:
            for r in grp:
                step_alone(r)
        else:
            try:
                b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
                side = int(np.ceil(np.sqrt(len(grp))))
                spans = []
                for k, r in enumerate(grp):
                    n0 = len(b.bodies)
                    load(r["path"], builder=b, base_pos=(500.0 * (k % side), 500.0 * (k // side), 0.0))
                    spans.append(slice(n0, len(b.bodies)))
                m = b.build()
                s = roll(m, jaxode.init(m), m.params)
                for r, sl in zip(grp, spans):
                    r["stepped"] = _finite(s, sl)
                    if not r["stepped"]:
                        r["error"] = "non-finite state after stepping"
            except Exception:
                for r in grp:
                    step_alone(r)
        if args.progress:
            for r in grp:
                print(json.dumps({k: v for k, v in r.items() if k != "path"}), file=sys.stderr,
                      flush=True)
    for r in results:
        r.pop("path", None)
    n = len(results)
    loaded = sum(r["loaded"] for r in results)
    nbuilt = sum(r["built"] for r in results)
    tried = [r for r in results if r["stepped"] is not None]
    stepped = sum(bool(r["stepped"]) for r in tried)
    print(f"jaxode: {jaxode.__file__}")
    print(f"pybullet_data URDFs: {n}  ({time.time() - t0:.0f} s, {len(groups)} stepped worlds)")
    print(f"loaded: {loaded}/{n} = {100 * loaded / max(n, 1):.1f} %")
    print(f"built:  {nbuilt}/{n} = {100 * nbuilt / max(n, 1):.1f} %")
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
