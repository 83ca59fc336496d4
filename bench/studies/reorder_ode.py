"""What ``reorder="ode"`` (ODE 0.16's shuffle of every row) changes against the
default ``reorder="joints"`` (contact rows in ODE's initial order): convergence
of resting stacks over 500 steps, and the cost of a step.

    PYTHONPATH=. python bench/studies/reorder_ode.py [--x64] [--quick | --convergence]

Convergence (one world, dt 0.01 s, 20 iterations): the 21-box pyramid of
bench/scenes.py ("stack") and a tower of 5 boxes (0.2 m, 1 kg, mu 0.5) placed
exactly touching; after 500 steps: the deepest penetration of the last 100
steps (Trajectory.max_depth), the largest body speed at the end (the SOR
residual left as motion), the largest horizontal drift and the lowest sink
of a body from where it was placed. With "ode" three seeds are run.
Cost: process_time of a jitted rollout (second call) at batch 1 and 64
(per-world seeds 0..63 for "ode"), as world-steps per second of CPU time.
"""
from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from bench.scenes import model_of
from jaxode.build import mass as mass_lib

DT, STEPS = 0.01, 500


def tower(n: int = 5):
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    m = mass_lib.box(size=(0.2, 0.2, 0.2), total=1.0)
    for k in range(n):
        i = b.add_body(pos=(0.0, 0.0, 0.1 + 0.2 * k), mass=m)
        b.add_box((0.2, 0.2, 0.2), body=i, surface=jaxode.Surface(mu=0.5))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    return b.build()


def with_reorder(model, reorder: str):
    return model.replace(reorder=reorder)


def convergence(model, seed=None):
    st = jaxode.init(model)
    if seed is not None:
        st = st.replace(rng=jnp.uint32(seed))
    final, tr = jax.jit(lambda s: jaxode.rollout(model, s, STEPS, DT))(st)
    p0 = np.asarray(model.init_pos)
    pos = np.asarray(final.pos)
    speed = float(np.max(np.linalg.norm(np.asarray(final.vel), axis=-1)))
    return dict(pen=float(np.max(np.asarray(tr.max_depth)[-100:])), speed=speed,
                drift=float(np.max(np.linalg.norm(pos[:, :2] - p0[:, :2], axis=-1))),
                sink=float(np.min(pos[:, 2] - p0[:, 2])))


def cost(model, batch: int, steps: int):
    st = jaxode.init(model)
    states = jax.tree.map(lambda x: jnp.stack([x] * batch), st)
    if model.reorder == "ode":
        states = states.replace(rng=jnp.arange(batch, dtype=jnp.uint32))
    run = jax.jit(jax.vmap(lambda s: jaxode.rollout(model, s, steps, DT)[0].pos))
    t = time.process_time()
    run(states).block_until_ready()
    first = time.process_time() - t
    best = np.inf
    for _ in range(2):
        t = time.process_time()
        run(states).block_until_ready()
        best = min(best, time.process_time() - t)
    return batch * steps / best, first


def main(argv):
    quick = "--quick" in argv
    scenes = {"pyramid21": model_of("stack"), "tower5": tower()}
    print(f"x64={jax.config.jax_enable_x64}")
    for name, base in scenes.items():
        for reorder, seeds in (("joints", [None]), ("ode", [0, 7, 123])):
            m = with_reorder(base, reorder)
            for s in seeds:
                r = convergence(m, s)
                print(f"{name} {reorder:6s} seed {s}: max pen (last 100) {r['pen']:.3e} m, "
                      f"max speed {r['speed']:.3e} m/s, drift {r['drift']:.3e} m, "
                      f"sink {r['sink']:.3e} m", flush=True)
    if "--convergence" in argv:
        return
    for name in (["pyramid21"] if quick else ["pyramid21", "tower5"]):
        for batch, steps in ((1, 200), (64, 20)):
            res = {}
            for reorder in ("joints", "ode"):
                res[reorder] = cost(with_reorder(scenes[name], reorder), batch, steps)
            print(f"{name} batch {batch}: " + ", ".join(
                f"{k} {v[0]:.0f} world-steps/s (first call {v[1]:.1f} s cpu)"
                for k, v in res.items()) + f"; ode/joints {res['ode'][0] / res['joints'][0]:.2f}",
                flush=True)


if __name__ == "__main__":
    if "--x64" in sys.argv:
        jax.config.update("jax_enable_x64", True)
    main(sys.argv[1:])
