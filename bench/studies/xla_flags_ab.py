"""XLA flag settings against each other, alternately, on a noisy machine (session 26).

    PYTHONPATH=. python bench/studies/xla_flags_ab.py --scene boxes --batch 1024 --steps 100 \\
        --rounds 3 -- "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=100000" \\
        "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1000000"

XLA reads its flags once per process, so each setting runs in its own process
(``XLA_FLAGS`` = the setting; jaxode adds its defaults for the flags the
setting leaves out). The settings alternate, round after round, so that the
VM's drift (often 20-30 % within an hour here) hits them alike. Each process
runs the scene as ``python -m bench`` does (``bench.__main__.run_jaxode``: the
batch sharded over the CPU devices, the best of two timed calls), with a
persistent compilation cache of its own, so only a setting's first round
compiles. Prints one line per (round, setting) and the per-setting medians in
world-steps/s.

A setting ``DIR::FLAGS`` runs in another checkout ``DIR`` of the project (its
``jaxode`` and ``bench`` first on ``PYTHONPATH``), so two versions of the code
alternate the same way (``/tmp/old::`` for the old code with jaxode's default
flags; session 27 compared a reverted rewrite with the code before it so).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def worker(scene: str, batch: int, steps: int) -> None:
    """One setting's run: ``python -m bench``'s own (``bench.__main__.run_jaxode``)."""
    from bench import scenes as S
    from bench.__main__ import run_jaxode

    import jaxode

    r = run_jaxode(S.model_of(scene), batch, steps)
    print(json.dumps(dict(world_steps_s=r["world_steps_per_s"], compile_s=r["compile_s"],
                          jaxode=os.path.dirname(os.path.dirname(jaxode.__file__)))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("settings", nargs="+",
                    help="XLA_FLAGS values to compare, each optionally DIR::FLAGS (another checkout)")
    ap.add_argument("--scene", default="boxes")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.scene, a.batch, a.steps)
        return
    cache = tempfile.mkdtemp(prefix="jaxode_flags_ab_")
    results = {s: [] for s in a.settings}
    for r in range(a.rounds):
        for s in a.settings:
            tree, flags = s.split("::", 1) if "::" in s else (None, s)
            env = dict(os.environ, XLA_FLAGS=flags, JAXODE_XLA_CACHE=cache)
            if tree:
                env["PYTHONPATH"] = os.pathsep.join(
                    [os.path.abspath(tree)] + [x for x in [os.environ.get("PYTHONPATH")] if x])
            out = subprocess.run([sys.executable, __file__, "--worker", "--scene", a.scene,
                                  "--batch", str(a.batch), "--steps", str(a.steps), "--", s],
                                 env=env, capture_output=True, text=True, check=True,
                                 cwd=os.path.abspath(tree) if tree else None)
            rec = json.loads(out.stdout.strip().splitlines()[-1])
            results[s].append(rec["world_steps_s"])
            print(f"round {r} [{s}]: {rec['world_steps_s']:,.0f} world-steps/s "
                  f"(compile or cache load {rec['compile_s']:.1f} s; jaxode of {rec['jaxode']})",
                  flush=True)
    for s, v in results.items():
        print(f"median [{s}]: {statistics.median(v):,.0f} world-steps/s over {len(v)} rounds")


if __name__ == "__main__":
    main()
