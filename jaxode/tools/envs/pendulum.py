"""Pendulum swing-up: Gymnasium's Pendulum-v1 as a jaxode rod on a hinge.

A uniform rod (1 kg, 1 m) hangs from a hinge about world y at its top end;
gravity 10 m/s^2 along -z. theta [rad] is the angle from upright (0 = balanced
on top), positive toward +x. The action is a torque u in [-2, 2] N m on the
hinge (dJointAddHingeTorque). The rod's angular speed is capped at 8 rad/s by
ODE's max angular speed (Gymnasium clips theta_dot to [-8, 8]).

Observation (cos theta, sin theta, theta_dot [rad/s]). Reward, Gymnasium's,
from the state at the start of the step and the clipped torque::

    r = -(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2)

No termination; truncated after 200 steps. Episodes start with theta uniform
in [-pi, pi] and theta_dot uniform in [-1, 1] rad/s. Control period 0.05 s as
Gymnasium's (default: 5 physics steps of 0.01 s).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.tools.envs.core import EnvState, Env

GRAVITY = 10.0     # m/s^2
MASS = 1.0         # kg
LENGTH = 1.0       # m
MAX_SPEED = 8.0    # rad/s
MAX_TORQUE = 2.0   # N m


class Pendulum(Env):
    """Pendulum swing-up (see the module docstring). Options: dt [s],
    frame_skip, episode_length, iterations, randomize."""

    name = "pendulum"
    observation_size = 3
    action_size = 1
    num_actions = None

    def __init__(self, dt: float = 0.01, frame_skip: int = 5, episode_length: int = 200,
                 iterations: int = 20, randomize=None):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -GRAVITY), iterations=iterations,
                                max_angular_speed=MAX_SPEED)
        m, ln, r = MASS, LENGTH, 0.02
        rod = jaxode.mass.from_inertia(m, np.diag([m * ln * ln / 12, m * ln * ln / 12, m * r * r / 2]))
        self.rod = b.add_body(pos=(0, 0, ln / 2), mass=rod)
        b.add_capsule(r, ln, body=self.rod, category_bits=0, collide_bits=0)
        self.hinge = b.add_hinge(self.rod, None, anchor=(0, 0, 0), axis=(0, 1, 0))
        super().__init__(b.build(), dt=dt, frame_skip=frame_skip, episode_length=episode_length,
                         randomize=randomize)
        self.action_low, self.action_high = np.array([-MAX_TORQUE]), np.array([MAX_TORQUE])
        self.obs_high = np.array([1.0, 1.0, MAX_SPEED])
        self.obs_low = -self.obs_high

    @property
    def camera(self):
        return jaxode.Camera(pos=(0.0, -3.5, 0.0), look_at=(0.0, 0.0, 0.0))

    def physics_from(self, theta, theta_dot) -> jaxode.State:
        """The rod's state at angle ``theta`` from upright and rate ``theta_dot``."""
        dt, h = self.dtype, LENGTH / 2
        s, c = jnp.sin(theta), jnp.cos(theta)
        z = jnp.zeros((), dt)
        ph = jaxode.init(self.model)
        return ph.replace(pos=jnp.stack([h * s, z, h * c])[None].astype(dt),
                          vel=jnp.stack([h * theta_dot * c, z, -h * theta_dot * s])[None].astype(dt),
                          quat=jnp.stack([jnp.cos(theta / 2), z, jnp.sin(theta / 2), z])[None].astype(dt),
                          angvel=jnp.stack([z, theta_dot, z])[None].astype(dt))

    def init_physics(self, key, params):
        k1, k2 = jax.random.split(key)
        th = jax.random.uniform(k1, (), self.dtype, -math.pi, math.pi)
        thd = jax.random.uniform(k2, (), self.dtype, -1.0, 1.0)
        return self.physics_from(th, thd), {}

    def _angle_rate(self, physics):
        m = self.model
        return jaxode.hinge_angle(m, physics, self.hinge), jaxode.hinge_angle_rate(m, physics, self.hinge)

    def control(self, physics, params, action):
        return jaxode.add_hinge_torque(self.model, physics, self.hinge, action[0]), params

    def observe(self, physics, params, info):
        th, thd = self._angle_rate(physics)
        return jnp.stack([jnp.cos(th), jnp.sin(th), jnp.clip(thd, -MAX_SPEED, MAX_SPEED)])

    def reward_done(self, before: EnvState, physics, action):
        c, s, thd = before.obs
        u = action[0]
        theta = jnp.arctan2(s, c)  # Gymnasium's angle_normalize(theta), in (-pi, pi]
        cost = theta ** 2 + 0.1 * thd ** 2 + 0.001 * u ** 2
        return -cost, jnp.zeros((), bool)
