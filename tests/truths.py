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


def box_mesh(size):
    """The 12-triangle closed surface of a centred box of ``size`` [m]: vertices
    (8, 3) and triangles (12, 3), counter-clockwise seen from outside."""
    from scipy.spatial import ConvexHull

    s = np.array([-0.5, 0.5])
    v = np.array(np.meshgrid(s, s, s, indexing="ij")).reshape(3, -1).T * size
    h = ConvexHull(v)
    t = np.array(h.simplices)
    for k in range(len(t)):
        a, b, c = v[t[k]]
        if np.cross(b - a, c - a) @ h.equations[k, :3] < 0:
            t[k, [1, 2]] = t[k, [2, 1]]
    return v, t
