"""Gymnasium's MuJoCo task models in jaxode against MuJoCo itself (docs/RL.md's table).

For each model file of the installed gymnasium package (an extra: ``pip install
gymnasium mujoco``), load it with ``jaxode.load_mjcf`` and with MuJoCo (its
Euler integrator, the file's timestep), run 5 s with zero control and with the
open-loop ``ctrl_i = sin(2 pi t + i)``, and print the torso's centre-of-mass
height z (end, min-max) and forward x at the end, with the wall time of
jaxode's jitted run. MuJoCo's ``d.xipos`` of the body named ``torso`` (the
first body when there is none) is compared with jaxode's body of that name.

    python bench/studies/mujoco_tasks.py [--models ant hopper] [--solver articulated]
        [--iterations 20] [--seconds 5] [--x64]

Nothing here is a test: the open-loop gaits are chaotic contact sequences and
diverge between any two simulators within seconds; the zero-control rests and
the stability of the runs are what to read.
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

MODELS = ("ant", "half_cheetah", "hopper", "walker2d_v5", "humanoid")


def assets() -> str:
    import gymnasium
    return os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets")


def control(t: float, n: int, mode: str) -> np.ndarray:
    return np.sin(2 * np.pi * t + np.arange(n)) if mode == "sin" else np.zeros(n)


def run_mujoco(path: str, seconds: float, mode: str):
    import mujoco
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    d = mujoco.MjData(m)
    names = [m.body(i).name for i in range(m.nbody)]
    body = names.index("torso") if "torso" in names else 1
    n = int(round(seconds / m.opt.timestep))
    zs, x = [], 0.0
    for k in range(n):
        d.ctrl[:] = control(k * m.opt.timestep, m.nu, mode)
        mujoco.mj_step(m, d)
        zs.append(d.xipos[body, 2])
        x = d.xipos[body, 0]
    return np.asarray(zs), float(x)


def run_jaxode(path: str, seconds: float, mode: str, solver: str, iterations: int):
    import jax
    import jax.numpy as jnp

    import jaxode
    from jaxode.io.mjcf import apply_actuators
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_mjcf(path)
    if solver:
        b.solver = solver
    if iterations:
        b.iterations = iterations
    model = b.build()
    acts = b.mjcf_info["actuators"]
    bodies = b.mjcf_info["bodies"]
    body = bodies.get("torso", next(iter(bodies.values())))
    dt = b.dt
    n = int(round(seconds / dt))
    na = len(acts)

    def one(s, t):
        u = jnp.sin(2 * jnp.pi * t + jnp.arange(na)) if mode == "sin" else jnp.zeros(na)
        s = jaxode.step(model, apply_actuators(model, s, acts, u), dt)
        return s, (s.pos[body], jnp.all(jnp.isfinite(s.pos)))

    f = jax.jit(lambda s: jax.lax.scan(one, s, jnp.arange(n) * dt))
    t0 = time.time()
    _, (p, fin) = f(jaxode.init(model))
    p = np.asarray(p)
    return p[:, 2], float(p[-1, 0]), bool(np.all(fin)), time.time() - t0, model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--solver", default=None, help="Model.solver (default: the loader's)")
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--x64", action="store_true")
    a = ap.parse_args()
    if a.x64:
        import jax
        jax.config.update("jax_enable_x64", True)
    print("| model | ctrl | jaxode z end (min-max) | MuJoCo z end (min-max) | jaxode x | MuJoCo x "
          "| finite | jaxode s |")
    print("|---|---|---|---|---:|---:|---|---:|")
    for name in a.models:
        path = os.path.join(assets(), name + ".xml")
        for mode in ("zero", "sin"):
            zj, xj, fin, wall, model = run_jaxode(path, a.seconds, mode, a.solver, a.iterations)
            zm, xm = run_mujoco(path, a.seconds, mode)
            print(f"| {name} | {mode} | {zj[-1]:.3f} ({zj.min():.3f}-{zj.max():.3f}) | "
                  f"{zm[-1]:.3f} ({zm.min():.3f}-{zm.max():.3f}) | {xj:.2f} | {xm:.2f} | {fin} "
                  f"| {wall:.1f} |", flush=True)
    print(f"(jaxode: solver {model.solver}, iterations {model.iterations}; "
          f"{'float64' if a.x64 else 'float32'})")


if __name__ == "__main__":
    main()
