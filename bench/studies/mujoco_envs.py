"""jaxode's Gymnasium tasks (``jaxode.envs.make("ant")`` ...) under random actions,
against MuJoCo C on the same model files (docs/RL.md's env table).

For each task: ``worlds`` worlds reset by the env (Gymnasium's reset noise),
then ``steps`` env steps of uniform random actions in the action bounds, as one
jitted ``lax.scan`` of ``env.step`` under ``vmap`` (no auto-reset: a
terminated world keeps stepping, so the run also tests stability after a
fall). Printed: compile time, env steps/s and physics steps/s of the run, the
share of worlds that stayed finite, the largest |qvel| seen at the end, and the
share of worlds that Gymnasium's rule calls terminated at the end; then MuJoCo
C (``mujoco.rollout``, ``--threads`` threads, the file's own integrator) on the
same number of worlds and physics steps with random controls.

    python bench/studies/mujoco_envs.py [--tasks ant hopper] [--worlds 256]
        [--steps 200] [--threads 2]

A study, not a test: speeds drift on this VM (compare within one run).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

TASKS = ("ant", "halfcheetah", "hopper", "humanoid", "humanoidstandup", "inverted_pendulum",
         "inverted_double_pendulum", "pusher", "reacher", "swimmer", "walker2d")


def run_jaxode(name: str, worlds: int, steps: int):
    import jax
    import jax.numpy as jnp

    from jaxode.tools.envs import make

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = make(name)
    lo = jnp.asarray(env.action_low, env.dtype)
    hi = jnp.asarray(env.action_high, env.dtype)

    def one(s, key):
        a = jax.random.uniform(key, (worlds, env.action_size), env.dtype, lo, hi)
        s = jax.vmap(env.step)(s, a)
        return s, s.done

    @jax.jit
    def run(key):
        s = jax.vmap(env.reset)(jax.random.split(key, worlds))
        s, done = jax.lax.scan(one, s, jax.random.split(jax.random.fold_in(key, 1), steps))
        return s, done

    key = jax.random.PRNGKey(0)
    t0 = time.time()
    compiled = run.lower(key).compile()
    t_compile = time.time() - t0
    t0 = time.time()
    s, done = compiled(key)
    jax.block_until_ready(s)
    wall = time.time() - t0
    qvel = np.asarray(jax.vmap(env.qvel)(s.physics))
    finite = ~np.asarray(s.physics.nonfinite) & np.all(np.isfinite(qvel), -1)
    ended = np.asarray(jnp.any(done, 0))
    return dict(env=env, compile=t_compile, wall=wall,
                env_steps=worlds * steps / wall, phys_steps=worlds * steps * env.frame_skip / wall,
                finite=float(finite.mean()),
                max_qvel=float(np.abs(qvel[finite]).max()) if finite.any() else float("nan"),
                ended=float(ended.mean()))


def run_mujoco(path: str, worlds: int, physics_steps: int, threads: int, seed: int = 0):
    import mujoco
    from mujoco import rollout

    m = mujoco.MjModel.from_xml_path(path)
    datas = [mujoco.MjData(m) for _ in range(threads)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    s0 = np.zeros(mujoco.mj_stateSize(m, spec))
    mujoco.mj_getState(m, datas[0], s0, spec)
    rng = np.random.default_rng(seed)
    lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
    ctrl = rng.uniform(lo, hi, (worlds, physics_steps, m.nu))
    t0 = time.time()
    state, _ = rollout.rollout(m, datas, np.tile(s0, (worlds, 1)), ctrl)
    wall = time.time() - t0
    return worlds * physics_steps / wall, bool(np.all(np.isfinite(state)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", nargs="+", default=list(TASKS))
    ap.add_argument("--worlds", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200, help="env steps per world")
    ap.add_argument("--threads", type=int, default=2, help="MuJoCo C threads")
    a = ap.parse_args()
    print(f"{a.worlds} worlds x {a.steps} env steps of random actions (float32)")
    print("| task | solver (sweeps) | compile s | env steps/s | physics steps/s | finite | "
          "max abs qvel | ended | MuJoCo C physics steps/s | jaxode / MuJoCo |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.tasks:
        r = run_jaxode(name, a.worlds, a.steps)
        env = r["env"]
        mj, mj_finite = run_mujoco(env.xml_path, a.worlds, a.steps * env.frame_skip, a.threads)
        print(f"| {name} | {env.model.solver} ({env.model.iterations}) | {r['compile']:.1f} | "
              f"{r['env_steps']:,.0f} | {r['phys_steps']:,.0f} | {r['finite']:.3f} | "
              f"{r['max_qvel']:.3g} | {r['ended']:.2f} | {mj:,.0f}{'' if mj_finite else ' (nan)'} "
              f"| {r['phys_steps'] / mj:.3f} |", flush=True)


if __name__ == "__main__":
    main()
