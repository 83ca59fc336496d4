"""Load every Gazebo model or world under a folder and step a sample: the SDF load rate.

    python -m tools.corpus_sdf ROOT [--steps 100] [--step-every 10] [--json out.json]

For each ``ROOT/*/model.sdf`` (the layout of osrf's gazebo_models) and every
``*.world`` under ROOT: ``jaxode.load_sdf(path, search_path=ROOT)`` (so
``model://`` includes resolve inside the corpus), ``builder.build()``, and
for every ``--step-every``-th file that built, ``--steps`` steps at the
file's own step size; a file counts as stepped when every position and
velocity stays finite. Prints the rate per stage and the failures grouped by
their first message line. The corpus is read where it lies; nothing of it is
copied into this repository.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys
import warnings

import numpy as np

from tools.corpus_load import _short  # one failure message per kind, numbers as #


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-every", type=int, default=10)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    import jax
    import jaxode

    files = sorted(glob.glob(os.path.join(args.root, "*", "model.sdf"))) + sorted(
        glob.glob(os.path.join(args.root, "**", "*.world"), recursive=True))
    res, fails = {}, collections.Counter()
    built = 0
    for i, path in enumerate(files):
        rel = os.path.relpath(path, args.root)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                b = jaxode.load_sdf(path, search_path=args.root)
                model = b.build()
        except Exception as e:  # noqa: BLE001 - the corpus's failures are the result
            res[rel] = {"stage": "load", "error": _short(e)}
            fails[_short(e)] += 1
            continue
        built += 1
        res[rel] = {"stage": "built", "bodies": int(model.nbody)}
        if (built - 1) % args.step_every == 0:
            try:
                dt = float(getattr(b, "dt", None) or 0.001)
                final, _ = jaxode.rollout(model, jaxode.init(model), args.steps, dt)
                ok = bool(np.all(np.isfinite(np.asarray(final.pos)))
                          and np.all(np.isfinite(np.asarray(final.vel)))
                          and not bool(final.nonfinite))
                res[rel]["stage"] = "stepped" if ok else "non-finite"
                if not ok:
                    fails["non-finite state after stepping"] += 1
            except Exception as e:  # noqa: BLE001
                res[rel] = {"stage": "step", "error": _short(e)}
                fails["step: " + _short(e)] += 1
            jax.clear_caches()
    n = len(files)
    stepped = [r for r in res.values() if r["stage"] in ("stepped", "non-finite")]
    print(f"{n} files; loaded and built {built} ({100 * built / max(n, 1):.1f} %); "
          f"stepped {sum(r['stage'] == 'stepped' for r in stepped)} of {len(stepped)} tried, "
          f"finite")
    for msg, k in fails.most_common():
        print(f"  {k:4d}  {msg}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
