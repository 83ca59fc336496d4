"""Cart-pole: Gymnasium's CartPole-v1 (Barto, Sutton & Anderson 1983) as jaxode bodies.

A cart (1 kg) on a slider along world x, and a pole (0.1 kg uniform rod, 1 m
long, so its centre of mass is ``length`` = 0.5 m above the pivot) on a hinge
about world y at the cart's centre. Gravity 9.8 m/s^2 along -z; no friction;
no collisions (the geoms are for pictures). The action pushes the cart along
the slider (dJointAddSliderForce): discrete {0, 1} -> -force, +force
(10 N), or continuous a in [-1, 1] -> a * force.

Observation (x [m], x_dot [m/s], theta [rad], theta_dot [rad/s]): cart
position, pole angle from upright, positive when the pole leans toward +x
(Gymnasium's convention). Reward 1 per step, including the last; terminated
when |x| > 2.4 m or |theta| > 12 deg; truncated after 500 steps. Episodes
start with all four values uniform in [-0.05, 0.05].

Gymnasium integrates the Barto equations with explicit Euler at tau = 0.02 s;
here ODE's semi-implicit step runs the rigid bodies and joints at ``dt``
(default 0.01 s, two per env step, so the control period is Gymnasium's
0.02 s). Both converge to the same continuous dynamics.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.tools.envs.core import EnvState, Env

GRAVITY = 9.8           # m/s^2
CART_MASS = 1.0         # kg
POLE_MASS = 0.1         # kg
HALF_LENGTH = 0.5       # m, pivot to the pole's centre of mass
POLE_RADIUS = 0.02      # m (axial inertia and pictures only)
X_LIMIT = 2.4           # m
THETA_LIMIT = 12 * 2 * math.pi / 360   # rad


class CartPole(Env):
    """Cart-pole (see the module docstring). Options: continuous (bool),
    force [N], dt [s], frame_skip, episode_length, iterations (QuickStep),
    randomize (e.g. ``{"body_mass": ([0.5, 0.05], [1.5, 0.2])}``: cart, pole)."""

    name = "cartpole"
    observation_size = 4

    def __init__(self, continuous: bool = False, force: float = 10.0, dt: float = 0.01,
                 frame_skip: int = 2, episode_length: int = 500, iterations: int = 20,
                 randomize=None):
        if not (isinstance(force, (int, float)) and math.isfinite(force) and force > 0):
            raise ValueError(f"env 'cartpole': force must be a number of newtons > 0 (got {force!r})")
        self.force = float(force)
        self.continuous = bool(continuous)
        l, m, r = HALF_LENGTH, POLE_MASS, POLE_RADIUS
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -GRAVITY), iterations=iterations)
        self.cart = b.add_body(pos=(0, 0, 0), mass=jaxode.mass.box((0.4, 0.25, 0.15), total=CART_MASS))
        # uniform rod of length 2l about its centre: I = m (2l)^2 / 12 across, m r^2 / 2 along
        rod = jaxode.mass.from_inertia(m, np.diag([m * l * l / 3, m * l * l / 3, m * r * r / 2]))
        self.pole = b.add_body(pos=(0, 0, l), mass=rod)
        b.add_box((0.4, 0.25, 0.15), body=self.cart, category_bits=0, collide_bits=0)
        b.add_capsule(r, 2 * l, body=self.pole, category_bits=0, collide_bits=0)
        self.slider = b.add_slider(self.cart, None, axis=(1, 0, 0))
        self.hinge = b.add_hinge(self.pole, self.cart, anchor=(0, 0, 0), axis=(0, 1, 0))
        super().__init__(b.build(), dt=dt, frame_skip=frame_skip, episode_length=episode_length,
                         randomize=randomize)
        if self.continuous:
            self.num_actions, self.action_size = None, 1
            self.action_low, self.action_high = -np.ones(1), np.ones(1)
        else:
            self.num_actions, self.action_size = 2, 1
            self.action_low, self.action_high = np.zeros(1), np.ones(1)
        self.obs_high = np.array([2 * X_LIMIT, np.inf, 2 * THETA_LIMIT, np.inf])
        self.obs_low = -self.obs_high

    @property
    def camera(self):
        return jaxode.Camera(pos=(0.0, -5.0, 0.8), look_at=(0.0, 0.0, 0.3))

    def physics_from(self, x, x_dot, theta, theta_dot) -> jaxode.State:
        """The bodies' state for cart position/velocity and pole angle/rate
        (rigid: the pole's centre moves with v_cart + omega x r)."""
        dt = self.dtype
        l = HALF_LENGTH
        s, c = jnp.sin(theta), jnp.cos(theta)
        z = jnp.zeros((), dt)
        ph = jaxode.init(self.model)
        pos = jnp.stack([jnp.stack([x, z, z]), jnp.stack([x + l * s, z, l * c])])
        vel = jnp.stack([jnp.stack([x_dot, z, z]),
                         jnp.stack([x_dot + l * theta_dot * c, z, -l * theta_dot * s])])
        quat = jnp.stack([jnp.array([1.0, 0, 0, 0], dt),
                          jnp.stack([jnp.cos(theta / 2), z, jnp.sin(theta / 2), z])])
        angvel = jnp.stack([jnp.zeros(3, dt), jnp.stack([z, theta_dot, z])])
        return ph.replace(pos=pos.astype(dt), vel=vel.astype(dt), quat=quat.astype(dt),
                          angvel=angvel.astype(dt))

    def init_physics(self, key, params):
        x, xd, th, thd = jax.random.uniform(key, (4,), self.dtype, -0.05, 0.05)
        return self.physics_from(x, xd, th, thd), {}

    def control(self, physics, params, action):
        if self.continuous:
            f = self.force * action[0]
        else:
            f = jnp.where(action == 1, self.force, -self.force).astype(self.dtype)
        return jaxode.add_slider_force(self.model, physics, self.slider, f), params

    def observe(self, physics, params, info):
        m = self.model
        return jnp.stack([jaxode.slider_position(m, physics, self.slider),
                          jaxode.slider_position_rate(m, physics, self.slider),
                          jaxode.hinge_angle(m, physics, self.hinge),
                          jaxode.hinge_angle_rate(m, physics, self.hinge)])

    def reward_done(self, before: EnvState, physics, action):
        m = self.model
        x = jaxode.slider_position(m, physics, self.slider)
        th = jaxode.hinge_angle(m, physics, self.hinge)
        terminated = (jnp.abs(x) > X_LIMIT) | (jnp.abs(th) > THETA_LIMIT)
        return jnp.ones((), self.dtype), terminated
