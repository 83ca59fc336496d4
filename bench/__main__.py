"""One command for the benchmarks: ``python -m bench [--quick]``.

For every scene of bench/scenes.py and every batch size: jaxode's
jit(vmap(rollout)) throughput (world-steps/s), its compile time, memory per world
(batched State + Params bytes, plus XLA's temporary buffers of the compiled
rollout divided by the batch) and contacts per world at the end; the same scene
in the real ODE (bench/ode_scene.c, compiled here against libode, one thread,
one world after another; the best of ``ODE_RUNS`` runs of at least
``ODE_RUN_S`` seconds right before the scene's jaxode runs and ``ODE_RUNS``
right after them, as jaxode's figure is the best of its timed calls) and
MuJoCo MJX when installed (it is not part of jaxode's dependencies). Ratios are jaxode / ODE at each batch size. Results go
to bench/results.json, a table between the markers in bench/RESULTS.md, and
bench/throughput.png (matplotlib) of throughput against batch size.

These are measurements, not tests: nothing here asserts a speed.

Run:  python -m bench                       # batch 1, 64, 1024, 4096 (16384 with --full)
      python -m bench --quick               # batch 1 and 64, 50 steps, no bin_256
      python -m bench --scenes boxes chain --batch 1024
      python -m bench --cpu-devices 1         # one XLA CPU device (one core for the loops)

On CPU the command makes one XLA device per core (``--cpu-devices``, default
``os.cpu_count()``) and shards every batch that divides evenly over them:
one CPU device runs a batch's sequential solver loop on one core.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cpu_devices_from_argv(argv) -> int:
    """``--cpu-devices N`` (default: one per core), read before JAX starts."""
    for i, a in enumerate(argv):
        if a == "--cpu-devices" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--cpu-devices="):
            return int(a.split("=", 1)[1])
    return os.cpu_count() or 1


# One XLA CPU device runs a batch's sequential solver loop on one core; several
# devices, each stepping its share of the worlds (jaxode.shard_worlds), use all
# of them. The flag must be set before JAX initialises its backends.
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_"
                               f"device_count={_cpu_devices_from_argv(sys.argv)}").strip()

# "compile s" is XLA's compile, not a load from jaxode's persistent compilation cache
# (jaxode/xla.py) that an earlier run filled: the cache stays off here unless asked for.
os.environ.setdefault("JAXODE_XLA_CACHE", "0")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxode  # noqa: E402
from bench import scenes as S  # noqa: E402
from bench import mjx as mjx_lib  # noqa: E402
from bench.bench_step import machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAP_WORLDS_CRASHES = jax.__version__.startswith("0.11.") and jax.default_backend() == "cpu"
ODE_SRC = ROOT / "bench" / "ode_scene.c"
ODE_BIN = Path(tempfile.gettempdir()) / "jaxode_ode_scene"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
DT = 0.01


def tree_nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def run_jaxode(model, batch: int, steps: int, solver: str = "pgs") -> dict:
    states = jaxode.batch(jaxode.init(model), batch)
    params = jaxode.batch(model.params, batch)
    model = model.replace(solver=solver)
    ndev = len(jax.devices())
    devices = ndev if ndev > 1 and batch % ndev == 0 else 1
    if devices > 1:
        mesh = jaxode.world_mesh()
        states, params = jaxode.shard_worlds(states, mesh), jaxode.shard_worlds(params, mesh)
    one = lambda s, p: jaxode.rollout(model, s, steps, DT, params=p)[0]  # noqa: E731
    # several devices: map_worlds (no cross-device all-reduces, which could deadlock on CPU),
    # except on jax 0.11, whose CPU compiler crashed (segfault) compiling it: there the
    # plain jit(vmap) of the sharded batch (bench/RESULTS.md, session 15)
    fn = jaxode.map_worlds(one, mesh) if devices > 1 and not MAP_WORLDS_CRASHES \
        else jax.jit(jax.vmap(one))
    t0 = time.perf_counter()
    compiled = fn.lower(states, params).compile()
    t_compile = time.perf_counter() - t0
    temp = None
    try:
        temp = compiled.memory_analysis().temp_size_in_bytes
    except Exception:  # noqa: BLE001 - not every backend reports it
        pass
    times, final = [], None
    for _ in range(2):
        t0 = time.perf_counter()
        final = jax.block_until_ready(compiled(states, params))
        times.append(time.perf_counter() - t0)
    best = min(times)
    return dict(batch=batch, steps=steps, solver=solver, devices=devices, compile_s=t_compile, run_s=best,
                world_steps_per_s=batch * steps / best,
                bytes_per_world=(tree_nbytes(states) + tree_nbytes(params)) / batch,
                temp_bytes_per_world=None if temp is None else temp / batch,
                contacts_per_world=float(np.mean(np.asarray(final.ncontact))),
                nonfinite_worlds=int(np.asarray(final.nonfinite).sum()),
                phases_per_step=phases(model, final), **quality(states, final))


def phases(model, final) -> int:
    """Sequential solver updates per step (per sweep x iterations) at the final
    state of world 0: a GPU's dependent kernel launches per step."""
    from jaxode.sim import dynamics, narrowphase, rowset, solver
    if model.solver == "direct":
        return None     # an exact LCP: its passes depend on the data, not on the rows
    s = jax.tree.map(lambda x: x[0], final)

    @jax.jit
    def count(s):
        b = dynamics.bodies(model, model.params, s, DT)
        rows = rowset.build(model, model.params, b, narrowphase.detect(model, s))
        return solver.sequential_updates(solver.resolve(model.solver, model.reorder), rows,
                                         model.nbody)

    return int(count(s)) * model.iterations


def quality(start, final) -> dict:
    """How well the step holds the scene, for comparing solvers at equal
    iterations: ``depth`` the deepest contact penetration at the end [m]
    (mean over worlds), ``drift`` the largest displacement of any body from
    its start [m] (max over worlds; a standing stack stays near zero)."""
    c = final.contacts
    depth = np.max(np.where(np.asarray(c.valid), np.asarray(c.depth), 0.0), axis=-1, initial=0.0)
    drift = np.linalg.norm(np.asarray(final.pos) - np.asarray(start.pos), axis=-1)
    return dict(depth=float(np.mean(depth)), drift=float(np.max(drift, initial=0.0)))


def build_ode() -> bool:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    r = subprocess.run([cc, "-O2", str(ODE_SRC), "-lode", "-lm", "-o", str(ODE_BIN)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"ODE reference not built (libode-dev missing?): {r.stderr.strip()[:300]}")
        return False
    return True


# ODE's figure: the best of ODE_RUNS runs, each of at least ODE_RUN_S seconds of
# stepping (more worlds, one after another, when the scene's worlds are quicker),
# as jaxode's is the best of its two timed calls of about that length. One run of
# 64 chain worlds took ~0.15 s: six of them in a row spread from 31,130 to 40,095
# world-steps/s and one bench run drew 50,316 (session 28), which moved the ratios
# by a third.
ODE_RUNS = 3
ODE_RUN_S = 1.0


def run_ode(scene, nworld: int, steps: int, runs: int = ODE_RUNS,
            min_run_s: float = ODE_RUN_S) -> dict:
    """The scene in ODE 0.16 (bench/ode_scene.c): ``nworld`` worlds of ``steps``
    steps, one after another, or more worlds until a run steps at least
    ``min_run_s`` seconds; ``runs`` runs. The best run's world-steps/s, and
    every run's in ``runs``."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(S.ode_spec(scene))
        path = f.name

    def once(n):
        out = subprocess.run([str(ODE_BIN), path, str(n), str(steps), str(DT)],
                             check=True, capture_output=True, text=True).stdout.strip()
        return dict(item.split("=", 1) for item in out.split())
    try:
        kv = once(nworld)
        if float(kv["step_s"]) < min_run_s:
            nworld = int(np.ceil(nworld * min_run_s / max(float(kv["step_s"]), 1e-3)))
        kvs = [once(nworld) for _ in range(runs)]
    finally:
        os.unlink(path)
    speeds = [float(kv["world_steps_per_s"]) for kv in kvs]
    kv = kvs[int(np.argmax(speeds))]
    return dict(nworld=nworld, steps=steps, world_steps_per_s=max(speeds), runs=speeds,
                contacts_per_world=float(kv["contacts_per_step"]), precision=kv["precision"])


def mjx_status(python) -> str:
    if python is None:
        return ("not run: no interpreter with mujoco.mjx given (--mjx-python or "
                "$JAXODE_MJX_PYTHON; see bench/mjx.py)")
    return mjx_lib.mjx_version(python)


def _updates(r) -> str:
    n = r.get("phases_per_step", 0)
    return "—" if n is None else f"{n:,}"


def table(results: list, ode: dict, mjx: dict) -> str:
    lines = ["| scene | solver | batch | devices | world-steps/s | jaxode / ODE | jaxode / MJX | compile s | bytes/world (state+params, XLA temp) | contacts/world | sequential updates/step | depth um | drift mm |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        o = ode.get(r["scene"])
        ratio = f"{r['world_steps_per_s'] / o['world_steps_per_s']:.2f}" if o else "n/a"
        mj = mjx.get((r["scene"], r["batch"]))
        ratio += f" | {r['world_steps_per_s'] / mj['world_steps_per_s']:.2f}" if mj else " | n/a"
        temp = "" if r["temp_bytes_per_world"] is None else f", {r['temp_bytes_per_world']:,.0f}"
        lines.append(f"| {r['scene']} | {r.get('solver', 'pgs')} | {r['batch']} | "
                     f"{r.get('devices', 1)} | {r['world_steps_per_s']:,.0f} | {ratio} | "
                     f"{r['compile_s']:.1f} | {r['bytes_per_world']:,.0f}{temp} | "
                     f"{r['contacts_per_world']:.1f} | {_updates(r)} | "
                     f"{r['depth'] * 1e6:.1f} | "
                     f"{r['drift'] * 1e3:.1f} |")
    lines.append("")
    lines.append("| scene | ODE 0.16 world-steps/s (C, one thread; best run) | its runs "
                 "before the scene's jaxode runs | and after them | ODE contacts/world |")
    lines.append("|---|---:|---|---|---:|")

    def listed(xs):
        return ", ".join(f"{x:,.0f}" for x in sorted(xs)) if xs else "-"
    for name, o in ode.items():
        before = o.get("before", o.get("runs", [o["world_steps_per_s"]]))
        lines.append(f"| {name} | {o['world_steps_per_s']:,.0f} | {listed(before)} | "
                     f"{listed(o.get('after'))} | {o['contacts_per_world']:.1f} |")
    if mjx:
        lines += ["", "| scene | batch | MJX world-steps/s (one CPU device) | MJX compile s | "
                  "MJX contacts/world |", "|---|---:|---:|---:|---:|"]
        for (name, b), m in sorted(mjx.items()):
            lines.append(f"| {name} | {b} | {m['world_steps_per_s']:,.0f} | {m['compile_s']:.1f} | "
                         f"{m['contacts_per_world']:.1f} |")
    return "\n".join(lines)


def write_markdown(path: Path, info: dict, body: str, args) -> None:
    block = (f"{BEGIN}\n## Latest `python -m bench` run\n\n"
             f"{info['date']}; {info['cpu_model']} x{info['nproc']}; device {info['device']} "
             f"({len(jax.devices())} {jax.devices()[0].platform} devices; a batch that divides "
             f"evenly is sharded over them, column 'devices'); "
             f"jax {info['jax']}, jaxode {info['jaxode']}, x64 {info['x64']}; "
             f"load average at the start {info['loadavg']}; {args.steps} steps of {DT} s; "
             f"MJX: {info['mjx']}.\n\n{body}\n{END}")
    text = path.read_text() if path.exists() else "# jaxode benchmarks\n"
    if BEGIN in text and END in text:
        a, rest = text.split(BEGIN, 1)
        text = a + block + rest.split(END, 1)[1]
    else:
        head, sep, tail = text.partition("\n## ")
        text = head.rstrip() + "\n\n" + block + "\n\n" + (sep.lstrip("\n") + tail if sep else "")
    path.write_text(text)


def plot(results: list, ode: dict, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, name in enumerate(dict.fromkeys(r["scene"] for r in results)):
        rs = [r for r in results if r["scene"] == name and r.get("solver", "pgs") == "pgs"]
        line, = ax.loglog([r["batch"] for r in rs], [r["world_steps_per_s"] for r in rs], "o-",
                          label=name)
        other = [r for r in results if r["scene"] == name and r.get("solver", "pgs") != "pgs"]
        if other:
            ax.loglog([r["batch"] for r in other], [r["world_steps_per_s"] for r in other], "s--",
                      color=line.get_color(), label=f"{name} ({other[0]['solver']})")
        if name in ode:
            ax.axhline(ode[name]["world_steps_per_s"], color=line.get_color(), ls=":", lw=1)
    ax.set_xlabel("worlds per call (batch)")
    ax.set_ylabel("world-steps / s")
    ax.set_title("jaxode pgs (solid), other solvers (dashed), ODE 0.16 C one thread (dotted)",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="batch 1 and 64, 50 steps, no bin_256")
    ap.add_argument("--full", action="store_true", help="add batch 16384")
    ap.add_argument("--scenes", nargs="+", choices=sorted(S.SCENES), default=None)
    ap.add_argument("--batch", type=int, nargs="+", default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--no-ode", action="store_true")
    ap.add_argument("--solvers", nargs="+", choices=jaxode.WorldBuilder.SOLVERS,
                    default=[s for s in jaxode.WorldBuilder.SOLVERS if s != "direct"],
                    help="solvers to run (default pgs and colored; direct on request; the "
                         "second and later ones up to batch "
                         "--other-solver-max-batch)")
    ap.add_argument("--other-solver-max-batch", type=int, default=1024)
    ap.add_argument("--mjx-python", default=None,
                    help="a Python with mujoco.mjx installed: also run the scenes in MJX "
                         "(default $JAXODE_MJX_PYTHON; see bench/mjx.py)")
    ap.add_argument("--mjx-batch", type=int, nargs="+", default=None,
                    help="MJX batch sizes (default: the jaxode ones up to 1024)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench")
    ap.add_argument("--cpu-devices", type=int, default=os.cpu_count() or 1,
                    help="CPU devices (XLA_FLAGS, set at start; default one per core): a batch "
                         "that divides evenly is sharded over them (jaxode.shard_worlds)")
    ap.add_argument("--max-run-s", type=float, default=120.0,
                    help="skip a larger batch of a scene when a smaller batch's throughput "
                         "(of at least 64 worlds) predicts its two timed runs would take "
                         "longer than this [s]")
    args = ap.parse_args(argv)
    names = args.scenes or [n for n in S.SCENES if not (args.quick and n == "bin_256")]
    batches = args.batch or ([1, 64] if args.quick else [1, 64, 1024, 4096] + ([16384] if args.full else []))
    args.steps = args.steps or (50 if args.quick else 100)

    info = machine_info()
    info["loadavg"] = tuple(round(x, 2) for x in os.getloadavg())
    mjx_py = mjx_lib.mjx_python(args.mjx_python)
    info["mjx"] = mjx_status(mjx_py)
    print(f"jax {info['jax']} on {info['device']}, {info['cpu_model']} x{info['nproc']}, "
          f"load {info['loadavg']}; MJX: {info['mjx']}")
    ode = {}
    with_ode = not args.no_ode and build_ode()

    def measure_ode(name: str, when: str) -> None:
        """ODE's runs of scene ``name``, merged into ``ode[name]`` (its figure: the
        best of every run). Each scene's ODE runs bracket its jaxode runs, ``when``
        "before" and "after": this VM's speed drifts by 30 % within a bench run
        (session 29: ODE measured for every scene first put stack's ODE figure at
        4,513 world-steps/s, session 28's run at 3,436), so ODE is timed in the
        same minutes as the jaxode figures it divides."""
        if not with_ode or S.SCENES[name] is None:
            return
        n = 16 if name.startswith("bin") or name == "stack" else 64
        r = run_ode(S.SCENES[name](), n, args.steps)
        old = ode.get(name)
        best = old if old and old["world_steps_per_s"] >= r["world_steps_per_s"] else r
        merged = dict(best, runs=(old["runs"] if old else []) + r["runs"])
        if old:
            merged["before"] = old["before"]
        merged[when] = r["runs"]
        ode[name] = r = merged
        print(f"ODE  {name:8s} {r['world_steps_per_s']:12,.0f} world-steps/s  "
              f"(best of {len(r['runs'])} so far, {when} jaxode's runs: "
              f"{min(r[when]):,.0f}-{max(r[when]):,.0f})  "
              f"{r['contacts_per_world']:.1f} contacts", flush=True)
    mjx = {}
    if mjx_py is not None:
        mjx_batches = args.mjx_batch or [b for b in batches if b <= 1024]
        for name in names:
            if name not in mjx_lib.PORTED:
                continue
            try:
                for r in mjx_lib.run_mjx(mjx_py, name, mjx_batches, args.steps):
                    mjx[(name, r["batch"])] = r
                    print(f"MJX  {name:8s} batch {r['batch']:6d}: {r['world_steps_per_s']:12,.0f} "
                          f"world-steps/s, compile {r['compile_s']:5.1f} s", flush=True)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"MJX  {name}: failed: {str(e)[-300:]}")
    results = []
    for name in names:
        measure_ode(name, "before")
        model = S.model_of(name)
        for k, solver in enumerate(args.solvers):
            prev = None
            for b in batches:
                if k and b > args.other_solver_max_batch:
                    continue
                if prev is not None and 2 * b * args.steps / prev > args.max_run_s:
                    print(f"jaxode {name:8s} {solver:7s} batch {b:6d}: skipped (predicted "
                          f"{2 * b * args.steps / prev:.0f} s > --max-run-s {args.max_run_s:g})")
                    continue
                try:
                    r = run_jaxode(model, b, args.steps, solver)
                except Exception as e:  # noqa: BLE001 - e.g. out of memory at a big batch
                    print(f"jaxode {name} {solver} batch {b}: {type(e).__name__}: {str(e)[:200]}")
                    break
                r["scene"] = name
                results.append(r)
                # Extrapolate only from a batch of 64 worlds or more: one world's throughput
                # says little about a batch's (the bench scenes at 1,024 worlds ran 10-21x one
                # world's world-steps/s, so predicting from batch 1 skipped stack's 1,024-world
                # row, a 7 s run, as "134 s"; bench/RESULTS.md, session 36).
                prev = r["world_steps_per_s"] if b >= 64 else None
                o = ode.get(name)
                ratio = f"  x{r['world_steps_per_s'] / o['world_steps_per_s']:.2f} ODE" if o else ""
                print(f"jaxode {name:8s} {solver:7s} batch {b:6d}: "
                      f"{r['world_steps_per_s']:12,.0f} world-steps/s, compile "
                      f"{r['compile_s']:5.1f} s, {r['contacts_per_world']:.1f} contacts, depth "
                      f"{r['depth'] * 1e6:.1f} um, drift {r['drift'] * 1e3:.1f} mm{ratio}",
                      flush=True)
        measure_ode(name, "after")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(dict(
        machine=info, jaxode=results, ode=ode,
        mjx=[dict(scene=k[0], **v) for k, v in sorted(mjx.items())]), indent=1))
    body = table(results, ode, mjx)
    print(body)
    write_markdown(args.out / "RESULTS.md", info, body, args)
    plot(results, ode, args.out / "throughput.png")


if __name__ == "__main__":
    sys.exit(main())
