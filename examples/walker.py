"""Walker: 1024 four-legged robots trotting forward at once, one jit call.

Every world holds one quadruped on a plane: a box torso (0.5 x 0.3 x 0.06 m,
3 kg) and four legs, each a thigh (0.25 kg) and a shin (0.15 kg) capsule of
radius 2.5 cm with 0.15 m between joints, on a hip and a knee hinge about the
body y axis, with stops. Masses are ODE's solid-shape masses (jaxode.mass) of
those totals. Every hinge has a motor (fmax 20 N m); each step a P-controller
sets its target speed ``vel = k (target - angle)`` (clipped to +-vmax) from
jaxode.hinge_angle toward an open-loop trot: diagonal legs swing their hips on
a sinusoid half a period apart and fold their knees while the foot swings
forward. Shins and torso touch the plane; the legs do not collide with each
other.

The worlds differ (domain randomisation) in the friction coefficient mu of all
surfaces and in the gait frequency (four values each, crossed) and in the
torso mass (uniform +-20%). The rollout, controller included, is one
``jax.jit(jax.vmap(lax.scan(...)))``. After 3 s we report throughput,
non-finite worlds, the mean forward distance of the torso per mu and per
frequency, and the fraction of worlds upright (torso tilted < 45 deg).

dt = 0.01 s is stable for these masses (no non-finite world, hinge anchors
apart by < 1 cm, stops kept). Halving dt keeps the gait walking forward
(1.0 / 1.5 / 2.0 Hz: 0.41 / 0.53 / 0.68 m at 0.005 s against 0.44 / 0.73 /
0.83 m at 0.01 s, 32 worlds); above ~2 Hz the distance depends on dt, so the
frequencies stop at 2 Hz.

Run:  python examples/walker.py [--worlds 1024] [--steps 300] [--dt 0.01]
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.build.robots.quadruped import Walker, build_walker


@dataclasses.dataclass(frozen=True)
class Gait:
    """Open-loop trot. Hip target ``hip_amp sin(phi)`` [rad] with
    ``phi = 2 pi f t + phase`` (the foot moves backward, in stance, while
    cos(phi) > 0); knee target ``knee_bias + knee_amp max(0, -cos(phi - knee_lag))``
    [rad]: the knee folds while the foot swings forward, ``knee_lag`` [rad]
    later than the hip to allow for the motors' lag. Diagonal legs share a
    phase. Motor speed ``k (target - angle)`` with P gain k [1/s], clipped to
    +-vmax [rad/s]."""

    hip_amp: float = 0.2
    knee_bias: float = 0.1
    knee_amp: float = 0.5
    knee_lag: float = 0.5
    phases: tuple = (0.0, math.pi, math.pi, 0.0)     # FL FR HL HR: trot
    k: float = 25.0
    vmax: float = 10.0


def controller(walker: Walker, gait: Gait, state: jaxode.State, params: jaxode.Params,
               freq) -> jaxode.Params:
    """Motor targets for one world at ``state.time``: params with joint_vel set."""
    m = walker.model
    ph = 2 * jnp.pi * freq * state.time + jnp.asarray(gait.phases, state.pos.dtype)
    hip_t = gait.hip_amp * jnp.sin(ph)
    knee_t = gait.knee_bias + gait.knee_amp * jnp.maximum(0.0, -jnp.cos(ph - gait.knee_lag))
    hip = jnp.stack([jaxode.hinge_angle(m, state, j) for j in walker.hips])
    knee = jnp.stack([jaxode.hinge_angle(m, state, j) for j in walker.knees])
    vel = jnp.clip(gait.k * (jnp.concatenate([hip_t, knee_t]) - jnp.concatenate([hip, knee])),
                   -gait.vmax, gait.vmax)
    ids = jnp.asarray(walker.hips + walker.knees)
    return params.replace(joint_vel=params.joint_vel.at[ids, 0].set(vel.astype(
        params.joint_vel.dtype)))


def make_rollout(walker: Walker, gait: Gait, steps: int, dt: float):
    """jit(vmap(scan)) of ``steps`` controlled steps: (states, params, freqs) ->
    (final states, torso trajectory (worlds, steps, 3))."""
    def one_world(state, params, freq):
        def body(s, _):
            s = jaxode.step(walker.model, s, dt, params=controller(walker, gait, s, params, freq))
            return s, s.pos[walker.torso]
        return jax.lax.scan(body, state, None, length=steps)
    return jax.jit(jax.vmap(one_world))


def randomise(walker: Walker, nworld: int, seed: int = 0):
    """Per-world parameters (domain randomisation): mu and gait frequency from
    four values each, crossed; torso mass uniform in +-20% of the nominal
    (inertia scaled with it). Returns (params, mu, freq [Hz], torso mass [kg])."""
    model = walker.model
    mus, freqs = np.array([0.4, 0.7, 1.0, 1.5]), np.array([1.0, 1.25, 1.5, 2.0])
    k = np.arange(nworld)
    mu, freq = mus[k % 4], freqs[(k // 4) % 4]
    scale = np.random.default_rng(seed).uniform(0.8, 1.2, nworld)
    p = jaxode.batch(model.params, nworld)
    dt = p.mu.dtype
    t = walker.torso
    p = p.replace(
        mu=jnp.broadcast_to(jnp.asarray(mu, dt)[:, None], p.mu.shape),
        body_mass=p.body_mass.at[:, t].multiply(jnp.asarray(scale, dt)),
        body_inertia=p.body_inertia.at[:, t].multiply(jnp.asarray(scale, dt)[:, None, None]))
    return p, mu, freq, np.asarray(p.body_mass[:, t])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dt", type=float, default=0.01)
    args = ap.parse_args()

    walker = build_walker()
    model = walker.model
    params, world_mu, world_f, world_m = randomise(walker, args.worlds)
    states = jaxode.batch(jaxode.init(model), args.worlds)
    freq = jnp.asarray(world_f, states.pos.dtype)

    run = make_rollout(walker, Gait(), args.steps, args.dt)
    t0 = time.perf_counter()
    compiled = run.lower(states, params, freq).compile()
    t_compile = time.perf_counter() - t0
    t0 = time.perf_counter()
    final, torso = compiled(states, params, freq)
    jax.block_until_ready(final)
    t_run = time.perf_counter() - t0

    rate = args.worlds * args.steps / t_run
    print(f"jaxode {jaxode.__version__} on {jax.devices()[0].platform.upper()} ({jax.__version__})")
    print(f"{args.worlds} worlds x {args.steps} steps of {args.dt} s: a quadruped of "
          f"{model.nbody} bodies, {model.njoint} motorised hinges with stops, "
          f"{model.contact_capacity} contact slots")
    print(f"compile {t_compile:.1f} s, run {t_run:.2f} s: {rate:,.0f} world-steps/s")

    torso = np.asarray(torso)                       # (worlds, steps, 3) torso centre [m]
    travel = torso[:, -1, 0] - float(jaxode.init(model).pos[walker.torso, 0])
    drift = np.abs(torso[:, -1, 1])
    q = np.asarray(final.quat[:, walker.torso])
    up = 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)   # world z of the torso's z axis
    upright = (up > 0.7) & (torso[:, -1, 2] > 0.15)
    print(f"non-finite worlds: {int(np.asarray(final.nonfinite).sum())}; contact overflow: "
          f"{int(np.asarray(final.overflow_contacts).sum())}; "
          f"upright at the end: {upright.mean():.1%}")
    sim_t = args.steps * args.dt
    print(f"mean forward distance of the torso after {sim_t:.1f} s:")
    print("      mu   forward [m]   speed [m/s]   |y| drift [m]   upright")
    for v in np.unique(world_mu):
        s = world_mu == v
        print(f"    {v:4.2f}   {travel[s].mean():11.3f}   {travel[s].mean() / sim_t:11.3f}   "
              f"{drift[s].mean():13.3f}   {upright[s].mean():7.0%}")
    print("  f [Hz]   forward [m]   speed [m/s]   |y| drift [m]   upright")
    for v in np.unique(world_f):
        s = world_f == v
        print(f"    {v:4.2f}   {travel[s].mean():11.3f}   {travel[s].mean() / sim_t:11.3f}   "
              f"{drift[s].mean():13.3f}   {upright[s].mean():7.0%}")
    light = world_m < np.median(world_m)
    print(f"  torso {world_m[light].mean():.2f} kg (lighter half): {travel[light].mean():.3f} m; "
          f"{world_m[~light].mean():.2f} kg (heavier half): {travel[~light].mean():.3f} m")


if __name__ == "__main__":
    main()
