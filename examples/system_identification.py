"""System identification: recover friction and restitution from a recorded trajectory.

A "true" world throws a box (0.2 m cube, 1 kg) sideways onto a plane, where it
lands and slides to a stop, and drops a ball (radius 0.1 m) that bounces. Its
contact parameters are mu = 0.37 (box on plane) and bounce = 0.6 (ball on
plane). We record the positions of both bodies, forget the parameters, and
recover them by gradient descent (optax's Adam) on the trajectory-matching
loss, starting from wrong guesses (mu = 0.8, bounce = 0.3). The gradient comes
from ``jax.value_and_grad`` straight through ``jaxode.rollout``: through the
contact detection, the projected Gauss-Seidel solver and the integrator.

Run:  python examples/system_identification.py [--iterations 120]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxode

G = 9.81
DT = 0.01  # [s]
STEPS = 150  # 1.5 s
TRUE = (0.37, 0.6)  # (mu of the box-plane contact, bounce of the ball-plane contact)
GUESS = (0.8, 0.3)
BOX_GEOM, BALL_GEOM = 1, 2


def build_scene() -> jaxode.Model:
    """Plane, box thrown at 3 m/s from 5 cm above the plane, ball dropped from 1 m.

    Contact parameters combine as min(geom 1, geom 2): the plane's mu and bounce
    are high, so the box's mu and the ball's bounce decide (and are what we fit).
    The box and the ball only collide with the plane.
    """
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    b.add_plane(surface=jaxode.Surface(mu=10.0, bounce=1.0), category_bits=1)
    box = b.add_body(pos=(0.0, 0.0, 0.15), vel=(3.0, 0.0, 0.0),
                     mass=jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0))
    b.add_box(size=(0.2, 0.2, 0.2), body=box, surface=jaxode.Surface(mu=GUESS[0]),
              category_bits=2, collide_bits=1)
    ball = b.add_body(pos=(0.0, 1.0, 1.0), mass=jaxode.mass.sphere(radius=0.1, total=0.5))
    b.add_sphere(radius=0.1, body=ball, surface=jaxode.Surface(mu=1.0, bounce=GUESS[1]),
                 category_bits=2, collide_bits=1)
    return b.build()


def with_theta(params: jaxode.Params, theta: jax.Array) -> jaxode.Params:
    """The model's parameters with theta = (box mu, ball bounce) set (differentiable)."""
    return params.replace(mu=params.mu.at[BOX_GEOM].set(theta[0]),
                          bounce=params.bounce.at[BALL_GEOM].set(theta[1]))


def simulate(model: jaxode.Model, state: jaxode.State, theta: jax.Array) -> jax.Array:
    """Positions (STEPS, nbody, 3) [m] of the rollout with parameters theta."""
    _, traj = jaxode.rollout(model, state, STEPS, DT, params=with_theta(model.params, theta))
    return traj.pos


def loss(theta: jax.Array, model: jaxode.Model, state: jaxode.State, target: jax.Array) -> jax.Array:
    """Mean squared position error [cm^2] over the trajectory and the bodies."""
    err = simulate(model, state, theta) - target
    return 1e4 * jnp.mean(jnp.sum(err * err, axis=-1))


def fit(value_and_grad, theta0, iterations: int = 120, learning_rate: float = 0.02,
        log_every: int = 10, log=print):
    """Adam on ``value_and_grad(theta) -> (loss, dloss/dtheta)``; returns (theta, losses).

    theta is kept in its valid range after each update (mu >= 0, 0 <= bounce <= 1).
    """
    opt = optax.adam(learning_rate)
    theta = jnp.asarray(theta0)
    state = opt.init(theta)
    losses = []
    for it in range(iterations):
        value, grad = value_and_grad(theta)
        updates, state = opt.update(grad, state, theta)
        theta = optax.apply_updates(theta, updates)
        theta = jnp.clip(theta, jnp.array([0.0, 0.0]), jnp.array([jnp.inf, 1.0]))
        losses.append(float(value))
        if log is not None and (it % log_every == 0 or it == iterations - 1):
            log(f"  iter {it:4d}  loss {float(value):10.4f} cm^2   mu {float(theta[0]):.4f}"
                f"   bounce {float(theta[1]):.4f}")
    return theta, np.asarray(losses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=120)
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    t0 = time.perf_counter()
    model = build_scene()
    state = jaxode.init(model)
    target = simulate(model, state, jnp.asarray(TRUE))  # the "recorded" trajectory
    vg = jax.jit(jax.value_and_grad(lambda th: loss(th, model, state, target)))
    print(f"true mu {TRUE[0]}, bounce {TRUE[1]}; start from mu {GUESS[0]}, bounce {GUESS[1]}")
    theta, losses = fit(vg, GUESS, args.iterations)
    mu, bounce = (float(v) for v in theta)
    print(f"recovered mu {mu:.4f} ({100 * (mu / TRUE[0] - 1):+.2f} %), "
          f"bounce {bounce:.4f} ({100 * (bounce / TRUE[1] - 1):+.2f} %); "
          f"loss {losses[0]:.3f} -> {losses[-1]:.2e} cm^2; {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
