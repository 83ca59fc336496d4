"""Closed-form references shared by several test modules (independent of jaxode)."""
from __future__ import annotations

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
