"""Lidar ring and height scan: ``jaxode.raycast`` as a sensor, many worlds at once.

A box "robot" (0.4 x 0.3 x 0.2 m) stands on a floor among a static box, an
upright cylinder, a lying capsule and a ball on a body. It carries two sensors:

- a lidar ring: 72 horizontal rays (5 degree steps, in the robot's frame, so
  the ring turns with it) from 0.1 m above its centre, range 4 m, ignoring
  the robot's own geom (``exclude_body``);
- a height scan: an 11 x 11 grid of vertical rays, 0.1 m apart, from 1 m
  above the robot, reading the height of what lies under and around it.

The worlds differ in the robot's pose (x, y and heading on a circle around
the scene); the sensors of all worlds are read in one jitted, vmapped call
(sensing only, no stepping, so it compiles in seconds; in a control loop call
``sensors`` on the state after each ``jaxode.step``). One world's ring is
printed per 30-degree sector (nearest hit and what it is) and its height scan
as a grid; ``--plot out.png`` draws both with matplotlib.

Run:  python examples/lidar.py [--worlds 16] [--plot lidar.png]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.sim.math import quat_to_mat

NAMES = ["floor", "robot", "box", "cylinder", "capsule", "ball"]
RING = 72
GRID = 11


def build_scene() -> tuple[jaxode.Model, int]:
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    surf = jaxode.Surface(mu=0.3)
    b.add_plane(surface=surf)
    robot = b.add_body(pos=(0.0, 0.0, 0.1), mass=jaxode.mass.box(size=(0.4, 0.3, 0.2), total=5.0))
    b.add_box((0.4, 0.3, 0.2), body=robot, surface=surf)
    b.add_box((0.6, 0.6, 0.5), pos=(1.8, 0.9, 0.25), surface=surf)
    b.add_cylinder(0.25, 0.8, pos=(1.2, -1.0, 0.4), surface=surf)
    b.add_capsule(0.15, 1.0, pos=(-0.8, 0.0, 0.15),
                  quat=(np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0), surface=surf)
    ball = b.add_body(pos=(2.5, -0.3, 0.2), mass=jaxode.mass.sphere(0.2, density=500.0))
    b.add_sphere(0.2, body=ball, surface=surf)
    return b.build(), robot


def sensors(model: jaxode.Model, state: jaxode.State, robot: int):
    """(ring distances (RING,), ring geoms, scan heights (GRID, GRID), scan geoms) of one world."""
    c = state.pos[robot]
    rot = quat_to_mat(state.quat[robot])
    ang = jnp.linspace(0.0, 2 * jnp.pi, RING, endpoint=False)
    dirs = jnp.stack([jnp.cos(ang), jnp.sin(ang), jnp.zeros_like(ang)], -1) @ rot.T
    ring_o = c + jnp.array([0.0, 0.0, 0.1])
    ring_d, _, _, ring_g = jaxode.raycast(model, state, ring_o, dirs, max_dist=4.0,
                                          exclude_body=robot)
    off = 0.1 * (jnp.arange(GRID) - GRID // 2)
    gx, gy = jnp.meshgrid(off, off, indexing="ij")
    top = c[2] + 1.0
    scan_o = jnp.stack([c[0] + gx, c[1] + gy, jnp.full_like(gx, top)], -1)
    scan_d, _, _, scan_g = jaxode.raycast(model, state, scan_o, jnp.array([0.0, 0.0, -1.0]))
    return ring_d, ring_g, top - scan_d, scan_g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--plot", default=None, help="save a figure of world 0 to this file")
    args = ap.parse_args()

    model, robot = build_scene()
    s0 = jaxode.init(model)
    # robot poses: on a circle of radius 0.45 m around the origin, heading along the tangent
    phi = jnp.linspace(0.0, 2 * jnp.pi, args.worlds, endpoint=False)

    def place(p):
        yaw = p + jnp.pi / 2
        pos = s0.pos.at[robot].set(jnp.stack([0.45 * jnp.cos(p), 0.45 * jnp.sin(p), 0.1]))
        quat = s0.quat.at[robot].set(jnp.stack([jnp.cos(yaw / 2), 0.0, 0.0, jnp.sin(yaw / 2)]))
        return s0.replace(pos=pos, quat=quat)

    states = jax.vmap(place)(phi)
    run = jax.jit(jax.vmap(lambda s: sensors(model, s, robot)))
    t0 = time.perf_counter()
    ring_d, ring_g, heights, scan_g = jax.block_until_ready(run(states))
    t1 = time.perf_counter()
    jax.block_until_ready(run(states))
    t2 = time.perf_counter()
    rays = args.worlds * (RING + GRID * GRID)
    print(f"{args.worlds} worlds x {RING + GRID * GRID} rays x {model.ngeom} geoms: first call "
          f"{t1 - t0:.1f} s (compile), then {1e3 * (t2 - t1):.2f} ms ({rays} rays per call)")

    w = args.worlds // 2  # the robot at (-0.45, 0), next to the capsule
    ring_d, ring_g, heights = np.asarray(ring_d[w]), np.asarray(ring_g[w]), np.asarray(heights[w])
    pos = np.asarray(states.pos[w, robot])
    heading = np.degrees(float(phi[w])) + 90.0
    print(f"\nworld {w}: robot at ({pos[0]:.2f}, {pos[1]:.2f}, {pos[2]:.3f}) m, "
          f"heading {heading:.0f} deg")
    print("lidar ring, nearest hit per 30-degree sector of the robot's frame (range 4 m):")
    per = RING // 12
    for k in range(12):
        sl = slice(k * per, (k + 1) * per)
        j = k * per + int(np.argmin(ring_d[sl]))
        what = NAMES[ring_g[j]] if ring_g[j] >= 0 else "-"
        dist = f"{ring_d[j]:.2f} m" if np.isfinite(ring_d[j]) else "  miss"
        print(f"  {30 * k:3d}-{30 * k + 30:3d} deg: {dist:>7}  {what}")
    print("height scan around the robot [m] (world axes; rows: x - x_robot from -0.5 to "
          "0.5 m, columns: y):")
    for row in heights:
        print("  " + " ".join(f"{h:5.2f}" for h in row))
    print("(0.20: the robot's own top face; 0.00: the floor; up to 0.30: the capsule)")

    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 4))
        ang = np.linspace(0, 2 * np.pi, RING, endpoint=False) + np.radians(heading)  # world
        d = np.where(np.isfinite(ring_d), ring_d, np.nan)
        a1.plot(pos[0] + d * np.cos(ang), pos[1] + d * np.sin(ang), ".")
        a1.plot(pos[0], pos[1], "k+")
        a1.set_aspect("equal")
        a1.set_title(f"lidar hits (world {w}), xy [m]")
        im = a2.imshow(heights.T, origin="lower", extent=(-0.55, 0.55, -0.55, 0.55))
        fig.colorbar(im, ax=a2, label="height [m]")
        a2.set_title("height scan around the robot")
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"saved {args.plot}")


if __name__ == "__main__":
    main()
