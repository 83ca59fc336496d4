"""Closed-form references shared by several test modules (independent of jaxode)."""
from __future__ import annotations

import numpy as np

G = 9.81


def slide_recursion(v0: float, mu: float, h: float, n: int, g: float = G) -> float:
    """Distance [m] slid in n steps of h [s] by a body thrown at v0 [m/s] under
    Coulomb friction mu, as ODE's semi-implicit Euler step does it:
    v <- max(v - mu g h, 0); x <- x + h v."""
    x, v = 0.0, v0
    for _ in range(n):
        v = max(v - mu * g * h, 0.0)
        x += h * v
    return x


def grid_mesh(n, length, z=0.0):
    """A flat square of side ``length`` [m] centred at the origin, at height z,
    of n x n quads (2 n^2 coplanar triangles), normal +z; vertices x-major."""
    xs = np.linspace(-length / 2, length / 2, n + 1)
    v = np.array([(x, y, z) for x in xs for y in xs])
    t = []
    for i in range(n):
        for j in range(n):
            a, b = i * (n + 1) + j, (i + 1) * (n + 1) + j
            t += [(a, b, b + 1), (a, b + 1, a + 1)]
    return v, np.array(t)


def oriented_hull(points):
    """The closed triangle surface of the convex hull of points (N, 3) [m]:
    the vertices it uses and its triangles over them, counter-clockwise
    seen from outside (scipy's Qhull, outward by its facet equations)."""
    from scipy.spatial import ConvexHull

    h = ConvexHull(points)
    t = np.array(h.simplices)
    for k in range(len(t)):
        a, b, c = points[t[k]]
        if np.cross(b - a, c - a) @ h.equations[k, :3] < 0:
            t[k, [1, 2]] = t[k, [2, 1]]
    used = np.unique(t)
    remap = -np.ones(len(points), int)
    remap[used] = np.arange(len(used))
    return points[used], remap[t]


def box_points(size):
    """The 8 corners (8, 3) [m] of a centred box of ``size`` (3,) [m]."""
    s = np.array([-0.5, 0.5])
    return np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T * np.asarray(size)


def box_mesh(size):
    """The 12-triangle closed surface of a centred box of ``size`` [m]: vertices
    (8, 3) and triangles (12, 3), counter-clockwise seen from outside."""
    return oriented_hull(box_points(size))


def sphere_directions(k: int) -> np.ndarray:
    """``k`` unit vectors spread evenly over the sphere (Fibonacci lattice), (k, 3)."""
    i = np.arange(k) + 0.5
    phi, th = np.arccos(1 - 2 * i / k), np.pi * (1 + 5 ** 0.5) * i
    return np.stack([np.cos(th) * np.sin(phi), np.sin(th) * np.sin(phi), np.cos(phi)], 1)


def min_over_directions(f, dirs: np.ndarray, best: int = 8, seed: int = 0) -> float:
    """Brute-force minimum over unit directions of ``f(dirs (m, 3)) -> (m,)``
    (e.g. the support-function overlap of two convex shapes, whose minimum is
    their penetration depth): ``f`` on the dense set ``dirs``, then random
    refinement from its ``best`` lowest directions with a step halved on every
    miss down to 1e-10. An upper bound of the minimum, equal to it up to the
    search's reach (narrow valleys are why it refines from several starts)."""
    w = f(dirs)
    rng = np.random.default_rng(seed)
    out = np.inf
    for j in np.argsort(w)[:best]:
        d, bv, step = dirs[j], w[j], 0.02
        while step > 1e-10:
            c = d + step * rng.normal(size=(64, 3))
            c /= np.linalg.norm(c, axis=1, keepdims=True)
            o = f(c)
            if o.min() < bv:
                d, bv = c[np.argmin(o)], o.min()
            else:
                step *= 0.5
        out = min(out, bv)
    return out
