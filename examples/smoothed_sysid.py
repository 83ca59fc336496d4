"""System identification where plain gradients stall: mu, ERP and mass of a pushed box.

A 0.2 m box (mass 1 kg) rests on a soft floor (world CFM 2e-2, so the contact
is a spring-damper of stiffness ERP / (h CFM): the box sinks millimetres,
more when pushed down) and is pushed for 2 s by a periodic force at its
centre: horizontal Fx = 6 (1 + sin(2 pi t / 1.0 s)) N and downward
Fz = 5 (1 + sin(2 pi t / 0.7 s)) N. With mu = 0.4 it slides near the force's
peaks and sticks in its troughs. The recording is the box's x and z every
step with 1 mm Gaussian noise. Unknowns: mu (box-plane friction), the world
ERP (dWorldSetERP) and the box's mass, fitted from mu = 0.8, ERP = 0.3,
mass = 0.7 kg (+100 %, +50 %, -30 %); the guessed box sticks through most
of each period (d trajectory / d mu is 0 there).

Adam on the exact gradient of the mean squared error in log(mu, erp, mass)
stops at mu +40 %, erp +36 %, mass -28 % (200 iterations): the loss is a
long curved valley (mu mass = const: the friction force limit) and Adam's
running gradient scale, set by the early huge gradients, freezes the late
small ones. The recipe (docs/GRADIENTS.md, :func:`fit`'s defaults):
coordinates (log(mu mass), log erp, log mass) (:func:`to_phi`), the
logarithm of the mean squared position error, and the gradient of the
smoothed loss E[loss(phi + sigma eps)] (jaxode.tools.smooth, first-order:
the average of exact gradients over 16 perturbed worlds stepped as one
batch), sigma annealed from 0.1 to 0.005 (the smoothing bias is
O(sigma^2)), Adam's step cosine-decayed from 0.05 to 0.005.

Run:  python examples/smoothed_sysid.py [--iterations 200] [--samples 16] [--plain] [--mse]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxode
from jaxode.tools import smooth

G = 9.81
DT = 0.01  # [s]
STEPS = 200  # 2 s
CFM = 2e-2  # world CFM: a soft floor (kp = erp / (DT CFM) = 1000 N/m at ERP 0.2)
TRUE = (0.4, 0.2, 1.0)  # (mu, world ERP, box mass [kg])
GUESS = (0.8, 0.3, 0.7)
NOISE = 1e-3  # [m] measurement noise
BOX, BOX_GEOM = 0, 1
SIZE = 0.2  # [m] box side


def build_scene() -> jaxode.Model:
    """Plane (mu 10: the box's mu decides, contacts take the min) and the box
    resting on it (its bottom face at z = 0)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), erp=TRUE[1], cfm=CFM)
    b.add_plane(surface=jaxode.Surface(mu=10.0))
    i = b.add_body(pos=(0.0, 0.0, SIZE / 2), mass=jaxode.mass.box(size=(SIZE,) * 3, total=1.0))
    b.add_box(size=(SIZE,) * 3, body=i, surface=jaxode.Surface(mu=TRUE[0]))
    return b.build()


def push(t):
    """The periodic force [N] (world frame) at time t [s]."""
    return jnp.stack([6.0 * (1 + jnp.sin(2 * jnp.pi * t / 1.0)), 0.0 * t,
                      -5.0 * (1 + jnp.sin(2 * jnp.pi * t / 0.7))])


def with_theta(model: jaxode.Model, theta) -> jaxode.Params:
    """Params for theta = (mu, erp, mass) (differentiable); the inertia scales with
    the mass (a uniform box)."""
    p = model.params
    mu, erp, mass = theta[0], theta[1], theta[2]
    scale = mass / p.body_mass[BOX]
    return p.replace(mu=p.mu.at[BOX_GEOM].set(mu), erp=erp,
                     body_mass=p.body_mass.at[BOX].set(mass),
                     body_inertia=p.body_inertia.at[BOX].multiply(scale))


def simulate(model: jaxode.Model, theta) -> jax.Array:
    """The box's (x, z) [m] after each step, (STEPS, 2), pushed by :func:`push`."""
    params = with_theta(model, theta)

    def body(s, _):
        s = jaxode.add_force(s, BOX, push(s.time))
        s = jaxode.step(model, s, DT, params=params)
        return s, s.pos[BOX, jnp.array([0, 2])]
    _, xz = jax.lax.scan(body, jaxode.init(model), None, length=STEPS)
    return xz


def recording(model: jaxode.Model, seed: int = 0) -> jax.Array:
    clean = simulate(model, jnp.asarray(TRUE, model.params.body_mass.dtype))
    noise = NOISE * jax.random.normal(jax.random.key(seed), clean.shape, clean.dtype)
    return clean + noise


def to_phi(theta):
    """The optimised coordinates: phi = (log(mu mass), log erp, log mass).

    Log space gives one step size for all and keeps them positive; mu mass
    (the friction force limit over g, what the sliding phases determine first)
    in place of mu aligns the loss's long valley (mu mass = const) with an axis,
    which Adam's per-coordinate scaling then handles."""
    mu, erp, mass = theta[0], theta[1], theta[2]
    return jnp.log(jnp.stack([mu * mass, erp, mass]))


def from_phi(phi):
    """(mu, erp, mass) from :func:`to_phi`'s coordinates."""
    return jnp.stack([jnp.exp(phi[0] - phi[2]), jnp.exp(phi[1]), jnp.exp(phi[2])])


def loss_fn(model: jaxode.Model, target: jax.Array, log_loss: bool = False):
    """loss(phi): mean squared position error [mm^2] (about 1 for a perfect fit:
    the noise's variance); log_loss: its logarithm (gradients relative to the
    loss: Adam's running scale, set by the huge early gradients, does not
    freeze the late, small ones)."""
    def loss(phi):
        err = simulate(model, from_phi(phi)) - target
        mse = 1e6 * jnp.mean(err * err)
        return jnp.log(mse) if log_loss else mse
    return loss


def sigma_schedule(it: int, iterations: int, start: float = 0.1, end: float = 0.005) -> float:
    """Noise scale (log space) at iteration it: geometric from start to end over
    the first 75 % of the iterations, then end."""
    frac = min(1.0, it / max(1, int(0.75 * iterations)))
    return float(start * (end / start) ** frac)


def fit(model, target, iterations: int = 200, samples: int = 16, lr: float = 0.05,
        sigma0: float = 0.1, sigma1: float = 0.005, plain: bool = False, log_every: int = 20,
        log=print, seed: int = 1, log_loss: bool = True):
    """Adam in :func:`to_phi`'s coordinates (step size lr, cosine-decayed to lr / 10) on the smoothed
    gradient, sigma annealed from sigma0 to sigma1 (plain=True: on the exact
    gradient). Returns (theta, losses)."""
    loss = loss_fn(model, target, log_loss)
    if plain:
        step_grad = jax.jit(jax.value_and_grad(loss))
    else:
        est = jax.jit(lambda th, key, sig: smooth(loss, sig, samples, method="first")(th, key))
    opt = optax.adam(optax.cosine_decay_schedule(lr, iterations, alpha=0.1))
    dtype = model.params.body_mass.dtype
    th = to_phi(jnp.asarray(GUESS, dtype))
    state = opt.init(th)
    key = jax.random.key(seed)
    losses = []
    t0 = time.perf_counter()
    for it in range(iterations):
        if plain:
            value, g = step_grad(th)
        else:
            key, sub = jax.random.split(key)
            r = est(th, sub, jnp.asarray(sigma_schedule(it, iterations, sigma0, sigma1), dtype))
            value, g = r.value, r.grad
        upd, state = opt.update(g, state, th)
        th = optax.apply_updates(th, upd)
        losses.append(float(value))
        if log is not None and (it % log_every == 0 or it == iterations - 1):
            v = np.asarray(from_phi(th))
            log(f"  iter {it:4d}  loss {float(value):9.3f}  mu {v[0]:.4f}  erp {v[1]:.4f}  "
                f"mass {v[2]:.4f}  ({time.perf_counter() - t0:.0f} s)")
    return np.asarray(from_phi(th)), np.asarray(losses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--plain", action="store_true", help="exact gradients (no smoothing)")
    ap.add_argument("--mse", action="store_true",
                    help="optimise the mean squared error itself, not its logarithm")
    args = ap.parse_args()
    model = build_scene()
    target = recording(model)
    print(f"true mu, erp, mass {TRUE}; start {GUESS}; "
          f"{'plain gradients' if args.plain else f'smoothed, {args.samples} worlds'}")
    theta, losses = fit(model, target, args.iterations, args.samples, plain=args.plain,
                        log_loss=not args.mse)
    err = 100 * (theta / np.asarray(TRUE) - 1)
    print("recovered mu %.4f (%+.1f %%), erp %.4f (%+.1f %%), mass %.4f (%+.1f %%); "
          "loss %.3f -> %.3f" % (theta[0], err[0], theta[1], err[1], theta[2], err[2],
                                      losses[0], losses[-1]))


if __name__ == "__main__":
    main()
