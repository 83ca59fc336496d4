"""Throughput of batched jaxode rollouts (world-steps/s) against batch size.

For each batch size B: jit(vmap(rollout)) of ``--steps`` steps of 0.01 s over B
identical worlds; reports the compile time (lower + compile wall time), the best
of 2 run times (block_until_ready), world-steps/s = B * steps / run time, and the
bytes of the batched State + Params pytrees per world. With ``--ode`` (boxes
scene only) the same scene is stepped by libode (bench/ode_boxes.c, one world
after the other) and the ratio jaxode / ODE is reported.

Scenes: ``boxes`` = examples/falling_boxes.py build_scene() (3 boxes on a plane);
``sphere`` = one sphere (r = 0.1 m, density 1000 kg/m^3) dropped on a plane;
``walker`` = jaxode.robots.build_walker(): a quadruped of 9 bodies on 8
hinges with stops and motors, feet and torso on a plane (12 contact slots),
standing with its motors holding (vel 0, fmax 20 N m; the example's gait
controller adds a few ops per step, no rows); ``chain`` = ten capsule links
(0.1 m, 0.2 kg) on hinges hanging from the world, released 0.5 rad from the
vertical, no contacts.

Run:  python bench/bench_step.py [--scene boxes|sphere|walker|chain] [--batch 1 64 256 1024]
                                 [--steps 100] [--ode] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# The compile time reported is XLA's, not a load from jaxode's persistent
# compilation cache (jaxode/xla.py): off here unless asked for.
os.environ.setdefault("JAXODE_XLA_CACHE", "0")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DT = 0.01
ODE_SRC = ROOT / "bench" / "ode_boxes.c"
ODE_BIN = Path("/tmp/ode_boxes")


def boxes_scene() -> jaxode.Model:
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from falling_boxes import build_scene
    finally:
        sys.path.pop(0)
    return build_scene()


def walker_scene() -> jaxode.Model:
    from jaxode.build.robots import build_walker

    return build_walker().model


def chain_scene(nlink: int = 10, length: float = 0.1, tilt: float = 0.5) -> jaxode.Model:
    """``nlink`` capsules (radius 2 cm, ``length`` [m] between joints, 0.2 kg) in a
    straight line from a hinge at the origin, ``tilt`` [rad] from the vertical;
    hinge axes along y; geoms collide with nothing."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    m = jaxode.mass.capsule(0.02, length, direction=3, total=0.2)
    down = np.array([-np.sin(tilt), 0.0, -np.cos(tilt)])
    quat = (np.cos(tilt / 2), 0.0, np.sin(tilt / 2), 0.0)
    prev = None
    for k in range(nlink):
        top = k * length * down
        body = b.add_body(pos=tuple(top + 0.5 * length * down), quat=quat, mass=m)
        b.add_capsule(0.02, length, body=body, category_bits=0, collide_bits=0)
        b.add_hinge(body, prev, anchor=tuple(top), axis=(0.0, 1.0, 0.0))
        prev = body
    return b.build()


def sphere_scene() -> jaxode.Model:
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(normal=(0, 0, 1), offset=0.0, surface=jaxode.Surface(mu=0.5))
    body = b.add_body(pos=(0.0, 0.0, 0.5), mass=jaxode.mass.sphere(0.1, density=1000.0))
    b.add_sphere(0.1, body=body, surface=jaxode.Surface(mu=0.5))
    return b.build()


SCENES = {"boxes": boxes_scene, "sphere": sphere_scene, "walker": walker_scene,
          "chain": chain_scene}


def tree_nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict:
    try:
        nproc = int(subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip())
    except (OSError, ValueError):
        nproc = os.cpu_count()
    try:
        import jaxlib
        jaxlib_version = jaxlib.__version__
    except Exception:  # noqa: BLE001
        jaxlib_version = None
    dev = jax.devices()[0]
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "processor": platform.processor(),
        "cpu_model": cpu_model(),
        "nproc": nproc,
        "machine": platform.machine(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib_version,
        "jaxode": jaxode.__version__,
        "x64": bool(jax.config.jax_enable_x64),
        "device": str(dev),
        "platform": dev.platform,
        "device_kind": getattr(dev, "device_kind", None),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def bench_jaxode(model: jaxode.Model, nworld: int, steps: int, repeats: int = 2) -> dict:
    states = jaxode.batch(jaxode.init(model), nworld)
    params = jaxode.batch(model.params, nworld)
    jax.block_until_ready((states, params))
    run = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, steps, DT, params=p)[0]))
    t0 = time.perf_counter()
    compiled = run.lower(states, params).compile()
    t_compile = time.perf_counter() - t0
    times = []
    final = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        final = compiled(states, params)
        jax.block_until_ready(final)
        times.append(time.perf_counter() - t0)
    t_run = min(times)
    return {
        "batch": nworld,
        "steps": steps,
        "compile_s": t_compile,
        "run_s": times,
        "best_run_s": t_run,
        "world_steps_per_s": nworld * steps / t_run,
        "bytes_per_world": (tree_nbytes(states) + tree_nbytes(params)) / nworld,
        "state_bytes_per_world": tree_nbytes(states) / nworld,
        "params_bytes_per_world": tree_nbytes(params) / nworld,
        "nonfinite_worlds": int(np.asarray(final.nonfinite).sum()),
        "overflow_contacts": int(np.asarray(final.overflow_contacts).sum()),
        "final_pos_world0": np.asarray(final.pos[0]).round(5).tolist(),
    }


def build_ode() -> None:
    cmd = ["cc", "-O2", str(ODE_SRC), "-lode", "-lm", "-o", str(ODE_BIN)]
    subprocess.run(cmd, check=True)


def bench_ode(nworld: int, steps: int) -> dict:
    out = subprocess.run([str(ODE_BIN), str(nworld), str(steps)], check=True,
                         capture_output=True, text=True).stdout.strip()
    kv = dict(item.split("=", 1) for item in out.split())
    return {"batch": nworld, "steps": steps, "step_s": float(kv["step_s"]),
            "world_steps_per_s": float(kv["world_steps_per_s"]),
            "contacts_per_step": float(kv["contacts_per_step"]),
            "precision": kv["precision"], "final_pos_last_world": kv["final_pos"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scene", choices=sorted(SCENES), default="boxes")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 64, 256, 1024])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--ode", action="store_true", help="also run libode (boxes scene only)")
    ap.add_argument("--out", type=str, default=None, help="write results as JSON here")
    args = ap.parse_args()
    if args.ode and args.scene != "boxes":
        ap.error("--ode is only implemented for --scene boxes")

    info = machine_info()
    print(f"jaxode {info['jaxode']}  jax {info['jax']}  device {info['device']}  "
          f"cpu {info['cpu_model']} x{info['nproc']}  x64={info['x64']}"
          + (f"  XLA_FLAGS={info['xla_flags']}" if info["xla_flags"] else ""))
    model = SCENES[args.scene]()
    print(f"scene {args.scene}: {model.nbody} bodies, {model.ngeom} geoms, {model.njoint} joints, "
          f"contact capacity {model.contact_capacity}; {args.steps} steps of {DT} s")

    if args.ode:
        build_ode()

    rows = []
    hdr = f"{'batch':>6} {'compile s':>10} {'run s':>8} {'world-steps/s':>14} {'bytes/world':>12}"
    if args.ode:
        hdr += f" {'ODE ws/s':>10} {'jaxode/ODE':>10}"
    print(hdr)
    for n in args.batch:
        r = bench_jaxode(model, n, args.steps)
        line = (f"{n:>6} {r['compile_s']:>10.1f} {r['best_run_s']:>8.3f} "
                f"{r['world_steps_per_s']:>14,.0f} {r['bytes_per_world']:>12,.0f}")
        if args.ode:
            o = bench_ode(n, args.steps)
            r["ode"] = o
            r["ratio_jaxode_over_ode"] = r["world_steps_per_s"] / o["world_steps_per_s"]
            line += f" {o['world_steps_per_s']:>10,.0f} {r['ratio_jaxode_over_ode']:>10.3f}"
        print(line, flush=True)
        rows.append(r)

    if args.out:
        result = {"machine": info, "scene": args.scene, "steps": args.steps, "dt": DT,
                  "command": " ".join([Path(sys.executable).name] + sys.argv), "results": rows}
        Path(args.out).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
