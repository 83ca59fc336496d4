"""Time WorldBuilder.add_* and build() on large scenes (issue 19: build cost).

A grid of static boxes on a plane and a grid of dynamic bodies (alternately a
sphere and a box) above it; prints the time to add the geoms, the time of
build(), and the candidate pairs the model holds (every pair with a dynamic
geom that the collide rules keep: the narrowphase's static pair tables).

    PYTHONPATH=. python bench/studies/build_scale.py [STATIC [DYNAMIC]]   # default 9900 100
"""
from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import jaxode


def scene(n_static: int, n_dynamic: int) -> jaxode.WorldBuilder:
    b = jaxode.WorldBuilder()
    b.add_plane((0, 0, 1), 0.0)
    side = max(1, int(np.ceil(np.sqrt(n_static))))
    for i in range(n_static):
        b.add_box((0.5, 0.5, 0.5), pos=(i % side, i // side, 0.25))
    side = max(1, int(np.ceil(np.sqrt(n_dynamic))))
    for i in range(n_dynamic):
        k = b.add_body(pos=(i % side * 0.7, i // side * 0.7, 2.0 + 0.3 * (i % 3)))
        if i % 2:
            b.add_sphere(0.2, body=k)
        else:
            b.add_box((0.3, 0.3, 0.3), body=k)
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("static", nargs="?", type=int, default=9900)
    ap.add_argument("dynamic", nargs="?", type=int, default=100)
    a = ap.parse_args()
    jax.numpy.zeros(1).block_until_ready()  # the backend starts outside the timings
    t0 = time.perf_counter()
    b = scene(a.static, a.dynamic)
    t1 = time.perf_counter()
    m = b.build()
    t2 = time.perf_counter()
    pairs = sum(int(g.geom1.shape[0]) for g in m.pair_groups)
    print(f"{a.static} static + {a.dynamic} dynamic geoms (+ plane): add {t1 - t0:.2f} s, "
          f"build() {t2 - t1:.2f} s, candidate pairs {pairs:,}")


if __name__ == "__main__":
    main()
