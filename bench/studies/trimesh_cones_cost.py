"""Cost of box vs triangle mesh per pair on CPU (one core, float32, jit).

Two meshes: a flat 128-triangle grid (8 x 8 cells of 0.25 m) and the
12-triangle box mesh (0.8 x 0.6 x 0.5 m); a 0.4 x 0.3 x 0.2 m box at
random touching poses. Each pair runs the narrowphase's path: ``gather``
(the builder's window and candidate count K for the box's bounding radius)
then ``box_trimesh``. Reports the compile time of the vmapped function and
microseconds per pair (1024 pairs per call, best of 20 calls), and of one
unbatched pair.

Usage: taskset -c 0 env PYTHONPATH=<tree> python bench/studies/trimesh_cones_cost.py
(the XLA flags below keep it on one thread; runs on trees before the
normal cones too).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

from jaxode.build import meshes as mesh_lib  # noqa: E402
from jaxode.sim.collision import trimesh as tm  # noqa: E402
from jaxode.sim.collision.contact import GeomWorld, Mesh  # noqa: E402

# the closed-form shapes the tests use (tests/truths.py, next to this tree's bench/)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from truths import box_mesh, grid_mesh  # noqa: E402

SIZE = np.array([0.4, 0.3, 0.2])
N = 1024


def measure(name, v, t, top):
    data = mesh_lib.build_mesh(v, t)
    mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
    radius = 0.5 * float(np.linalg.norm(SIZE))
    window = tuple(int(w) for w in mesh_lib.candidate_window(data, radius))
    k = min(mesh_lib.candidate_count(data, window), mesh_lib.DEFAULT_MAX_CANDIDATES)
    g2 = GeomWorld(jnp.zeros(3), jnp.eye(3), jnp.zeros(3))
    size = jnp.asarray(SIZE, jnp.float32)

    def pair(mesh, p, r):  # the mesh tables an argument, as in the step
        g1 = GeomWorld(p, r, size)
        lo, hi = p - radius, p + radius
        tris, _ = tm.gather(mesh, g2, p, lo, hi, radius, window, k)
        c = tm.box_trimesh(g1, g2, tris)
        return jnp.sum(jnp.where(c.valid, c.depth, 0.0))

    rng = np.random.default_rng(0)
    rots = jnp.asarray(Rotation.random(N, random_state=1).as_matrix(), jnp.float32)
    xy = rng.uniform(-0.8, 0.8, (N, 2)) * (1.0 if name == "flat" else 0.4)
    pos = jnp.asarray(np.c_[xy, np.full(N, top + 0.1)], jnp.float32)
    out = {}
    for label, fn, args in (("batch", jax.vmap(pair, in_axes=(None, 0, 0)), (mesh, pos, rots)),
                            ("single", pair, (mesh, pos[0], rots[0]))):
        t0 = time.perf_counter()
        comp = jax.jit(fn).lower(*args).compile()
        ct = time.perf_counter() - t0
        comp(*args).block_until_ready()
        best = np.inf
        for _ in range(20):
            t0 = time.perf_counter()
            comp(*args).block_until_ready()
            best = min(best, time.perf_counter() - t0)
        per = best / (N if label == "batch" else 1) * 1e6
        out[label] = (ct, per)
    print(f"{name:4s} mesh ({len(t)} triangles, K = {k}): compile {out['batch'][0]:.2f} s (vmapped), "
          f"{out['single'][0]:.2f} s (one pair); {out['batch'][1]:.1f} us/pair batched, "
          f"{out['single'][1]:.1f} us one pair", flush=True)


if __name__ == "__main__":
    measure("flat", *grid_mesh(8, 2.0), 0.0)
    measure("box", *box_mesh(np.array([0.8, 0.6, 0.5])), 0.25)
