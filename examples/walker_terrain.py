"""Walker on rough terrain: the trotting quadruped of ``walker.py`` on a heightfield.

The same robot, gait and domain randomisation as ``examples/walker.py`` (mu
and gait frequency crossed, torso mass +-20 %), on an 8 m x 4 m heightfield
of smooth random bumps (a sum of 12 random Gaussian hills, heights within
about +-4 cm, a 81 x 41 grid, 10 cm cells) instead of the plane. Shins and
torso collide with the terrain (capsule-heightfield, box-heightfield). After
3 s we report throughput, upright worlds and the forward distance per mu,
next to what the same worlds do on the flat plane (``--compare``).

Measured (idle 2-core CPU, one XLA device, float32, session 9, after the
copy-free row writes): 1024 worlds x 300 steps on the terrain: compile 18 s,
14,873 world-steps/s (session 7: 12,162), all upright, 0.55-0.67 m forward;
on the plane (``--compare``) compile 13 s, 22,670 world-steps/s (16,646),
0.58-0.74 m.

Run:  python examples/walker_terrain.py [--worlds 1024] [--steps 300] [--bumps 0.04]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.build.robots import quadruped as qd  # the robot: sizes, masses, joint ranges, bits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import walker as wk  # noqa: E402  (the flat-ground example: gait, controller, randomisation)

SIZE = (8.0, 4.0)
CENTRE = (3.0, 0.0)
GRID = (81, 41)


def terrain(amplitude: float, seed: int = 1) -> np.ndarray:
    """Heights [m] on the GRID: Gaussian hills (sigma 0.3-0.8 m), scaled to +-amplitude."""
    rng = np.random.default_rng(seed)
    x = np.linspace(-SIZE[0] / 2, SIZE[0] / 2, GRID[0])[:, None]
    y = np.linspace(-SIZE[1] / 2, SIZE[1] / 2, GRID[1])[None, :]
    h = np.zeros(GRID)
    for _ in range(12):
        cx, cy = rng.uniform(-SIZE[0] / 2, SIZE[0] / 2), rng.uniform(-SIZE[1] / 2, SIZE[1] / 2)
        s = rng.uniform(0.3, 0.8)
        h += rng.choice([-1.0, 1.0]) * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * s * s))
    h -= h[GRID[0] // 2 - int(CENTRE[0] / 0.1), GRID[1] // 2]  # zero under the start (x = 0)
    return amplitude * h / max(np.abs(h).max(), 1e-9)


def build_on_terrain(heights: np.ndarray) -> qd.Walker:
    """quadruped.build_walker with its plane replaced by the heightfield."""
    flat = qd.build_walker()
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    surf = jaxode.Surface(mu=1.0)
    b.add_heightfield(heights, size=SIZE, pos=(CENTRE[0], CENTRE[1], 0.0), surface=surf,
                      category_bits=qd._PLANE, collide_bits=qd._BODY)
    r, ln = qd.LEG_RADIUS, qd.LINK_LENGTH
    lift = max(0.0, float(np.max(heights[GRID[0] // 2 - 35:GRID[0] // 2 - 25,
                                         GRID[1] // 2 - 3:GRID[1] // 2 + 4])))
    hip_z = 2 * ln + r + 0.01 + lift
    torso = b.add_body(pos=(0.0, 0.0, hip_z),
                       mass=jaxode.mass.box(size=qd.TORSO_SIZE, total=qd.TORSO_MASS))
    b.add_box(size=qd.TORSO_SIZE, body=torso, surface=surf, category_bits=qd._BODY,
              collide_bits=qd._PLANE)
    thigh_m = jaxode.mass.capsule(r, ln, direction=3, total=qd.THIGH_MASS)
    shin_m = jaxode.mass.capsule(r, ln, direction=3, total=qd.SHIN_MASS)
    hips, knees = [], []
    for hx, hy in qd.HIP_XY:
        thigh = b.add_body(pos=(hx, hy, hip_z - ln / 2), mass=thigh_m)
        b.add_capsule(r, ln, body=thigh, surface=surf, category_bits=0, collide_bits=0)
        shin = b.add_body(pos=(hx, hy, hip_z - 1.5 * ln), mass=shin_m)
        b.add_capsule(r, ln, body=shin, surface=surf, category_bits=qd._BODY,
                      collide_bits=qd._PLANE)
        hips.append(b.add_hinge(thigh, torso, anchor=(hx, hy, hip_z), axis=(0, 1, 0),
                                lo_stop=qd.HIP_RANGE[0], hi_stop=qd.HIP_RANGE[1], fmax=flat.fmax))
        knees.append(b.add_hinge(shin, thigh, anchor=(hx, hy, hip_z - ln), axis=(0, 1, 0),
                                 lo_stop=qd.KNEE_RANGE[0], hi_stop=qd.KNEE_RANGE[1],
                                 fmax=flat.fmax))
    return qd.Walker(b.build(), tuple(hips), tuple(knees), torso, flat.fmax)


def run(walker: qd.Walker, worlds: int, steps: int, dt: float):
    params, mu, freq, _ = wk.randomise(walker, worlds)
    states = jaxode.batch(jaxode.init(walker.model), worlds)
    f = jnp.asarray(freq, states.pos.dtype)
    roll = wk.make_rollout(walker, wk.Gait(), steps, dt)
    t0 = time.perf_counter()
    compiled = roll.lower(states, params, f).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    final, torso = jax.block_until_ready(compiled(states, params, f))
    t_run = time.perf_counter() - t0
    torso = np.asarray(torso)
    q = np.asarray(final.quat[:, walker.torso])
    up = 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)
    return dict(compile=t_compile, run=t_run, rate=worlds * steps / t_run, mu=mu,
                travel=torso[:, -1, 0] - torso[:, 0, 0], upright=up > 0.7,
                nonfinite=int(np.asarray(final.nonfinite).sum()),
                overflow=int(np.asarray(final.overflow_contacts).sum()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--bumps", type=float, default=0.04, help="terrain amplitude [m]")
    ap.add_argument("--compare", action="store_true", help="also run the flat-plane walker")
    args = ap.parse_args()

    h = terrain(args.bumps)
    results = {"terrain": run(build_on_terrain(h), args.worlds, args.steps, args.dt)}
    if args.compare:
        results["plane"] = run(qd.build_walker(), args.worlds, args.steps, args.dt)
    print(f"jaxode {jaxode.__version__} on {jax.devices()[0].platform.upper()}; terrain "
          f"{GRID[0]} x {GRID[1]} heights over {SIZE[0]} x {SIZE[1]} m, "
          f"{h.min():+.3f} to {h.max():+.3f} m")
    sim_t = args.steps * args.dt
    for name, r in results.items():
        print(f"\n{name}: {args.worlds} worlds x {args.steps} steps: compile {r['compile']:.1f} s, "
              f"run {r['run']:.2f} s: {r['rate']:,.0f} world-steps/s; non-finite "
              f"{r['nonfinite']}, contact overflow {r['overflow']}, upright "
              f"{r['upright'].mean():.0%}")
        print(f"  forward distance after {sim_t:.1f} s per mu:  " + "   ".join(
            f"{v:.2f}: {r['travel'][r['mu'] == v].mean():.3f} m" for v in np.unique(r["mu"])))


if __name__ == "__main__":
    main()
