"""Falling boxes: 1024 worlds stepped at once, each with its own friction.

Every world drops three boxes (0.2 m cubes, 1 kg) from a little height onto a
plane, each thrown sideways at 2 m/s and tumbling slightly. The worlds differ
only in the friction coefficient mu of all their surfaces, one of four values.
After 3 s of simulated time we report throughput, how many boxes came to rest
and, per mu, how far the boxes slid after landing next to Coulomb's estimate
for that slide, v^2 / (2 mu g) with v each box's own horizontal speed once
it has landed (from the step after which it stays on the plane: the flight,
the bounces and the impact's friction impulse are part of neither number).

Run:  python examples/falling_boxes.py [--worlds 1024] [--steps 300]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode


def build_scene() -> jaxode.Model:
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(normal=(0, 0, 1), offset=0.0, surface=jaxode.Surface(mu=0.5))
    box_mass = jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0)
    for k in range(3):
        angle = 0.1 * (k - 1)
        quat = (np.cos(angle / 2), np.sin(angle / 2), 0.0, 0.0)
        body = b.add_body(pos=(0.0, 1.0 * k, 0.3 + 0.2 * k), quat=quat, vel=(2.0, 0.0, 0.0),
                          angvel=(0.0, 0.5 * (k - 1), 0.0), mass=box_mass)
        b.add_box(size=(0.2, 0.2, 0.2), body=body, surface=jaxode.Surface(mu=0.5))
    return b.build()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dt", type=float, default=0.01)
    args = ap.parse_args()

    model = build_scene()
    mus = np.array([0.1, 0.3, 0.5, 1.0])
    world_mu = mus[np.arange(args.worlds) % len(mus)]
    params = jaxode.batch(model.params, args.worlds)
    params = params.replace(mu=jnp.broadcast_to(jnp.asarray(world_mu, params.mu.dtype)[:, None],
                                                params.mu.shape))
    states = jaxode.batch(jaxode.init(model), args.worlds)

    def one_world(s, p):
        final, traj = jaxode.rollout(model, s, args.steps, args.dt, params=p)
        # Landed: from the first step after which the box stays on the plane (vertical
        # speed under 5 cm/s to the end); from there on it slides (or rests) flat.
        off = jnp.abs(traj.vel[:, :, 2]) >= 0.05                    # (steps, boxes)
        steps = jnp.arange(off.shape[0])[:, None]
        k = jnp.max(jnp.where(off, steps, -1), axis=0) + 1         # -1: never off the plane
        landed = k < off.shape[0]
        k = jnp.minimum(k, off.shape[0] - 1)
        boxes = jnp.arange(traj.pos.shape[1])
        x_land, v_land = traj.pos[k, boxes, 0], jnp.linalg.norm(traj.vel[k, boxes, :2], axis=-1)
        return final, landed, final.pos[:, 0] - x_land, v_land

    run = jax.jit(jax.vmap(one_world))
    t0 = time.perf_counter()
    compiled = run.lower(states, params).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    final, landed, slide, v_land = compiled(states, params)
    jax.block_until_ready(final)
    t_run = time.perf_counter() - t0

    rate = args.worlds * args.steps / t_run
    print(f"jaxode {jaxode.__version__} on {jax.devices()[0].platform.upper()} ({jax.__version__})")
    print(f"{args.worlds} worlds x {args.steps} steps of {args.dt} s, 3 boxes each")
    print(f"compile {t_compile:.1f} s, run {t_run:.2f} s: {rate:,.0f} world-steps/s")

    speed = np.linalg.norm(np.asarray(final.vel), axis=-1)
    spin = np.linalg.norm(np.asarray(final.angvel), axis=-1)
    rest = (speed < 1e-2) & (spin < 1e-2)
    landed, slide, v_land = np.asarray(landed), np.asarray(slide), np.asarray(v_land)
    print(f"boxes at rest: {int(rest.sum())} of {rest.size}; "
          f"non-finite worlds: {int(np.asarray(final.nonfinite).sum())}; "
          f"contact overflow: {int(np.asarray(final.overflow_contacts).sum())}")
    print("   mu   at rest   speed once landed [m/s]   slide after landing [m]   v^2/(2 mu g) [m]")
    for mu in mus:
        sel = (world_mu == mu)[:, None] & landed   # (worlds, boxes) that landed
        if not sel.any():
            continue
        estimate = v_land[sel] ** 2 / (2 * mu * 9.81)
        print(f"  {mu:4.1f}   {rest[world_mu == mu].mean():6.0%}   {v_land[sel].mean():22.3f}   "
              f"{slide[sel].mean():23.3f}   {estimate.mean():16.3f}")


if __name__ == "__main__":
    main()
