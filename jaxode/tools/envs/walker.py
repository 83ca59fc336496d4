"""Four-legged walker: the quadruped of ``jaxode.robots`` as an environment.

The robot is ``jaxode.robots.build_walker`` (a box torso and four
legs, each a thigh and a shin capsule on a hip and a knee hinge about the body
y axis, with stops and motors, on a plane with friction). The action
a in [-1, 1]^8 (hips FL FR HL HR, then knees) sets each hinge motor's target
velocity ``vmax * a`` [rad/s], reached within the motor torque limit fmax
[N m] (ODE's hinge motor: joint_vel and joint_fmax).

Observation (27): torso height [m], orientation quaternion (w, x, y, z),
linear velocity [m/s] and angular velocity [rad/s] (world frame), the eight
hinge angles [rad] and rates [rad/s]. Reward: forward (+x) velocity of the
torso over the env step [m/s]. Terminated on a fall: torso below
``min_height`` [m] (default 60 % of its start height) or its z axis tilted so
that its world-z component is below ``min_upright``. Truncated after 1000 steps of 0.02 s (2 physics steps of
0.01 s). Episodes start from the build pose at rest.

Pass ``walker=`` (a built ``jaxode.robots.Walker``) to use another robot build.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.sim import math as jm
from jaxode.tools.envs.core import EnvState, Env
from jaxode.build.robots.quadruped import build_walker


class Walker(Env):
    """Quadruped walker (see the module docstring). Options: mu, fmax [N m]
    (None: build_walker's defaults), vmax [rad/s], min_height [m], min_upright,
    dt [s], frame_skip, episode_length, iterations, randomize, walker (a built
    Walker)."""

    name = "walker"
    observation_size = 27
    num_actions = None

    def __init__(self, mu=None, fmax=None, vmax: float = 8.0, min_height=None,
                 min_upright: float = 0.7, dt: float = 0.01, frame_skip: int = 2,
                 episode_length: int = 1000, iterations: int = 20, randomize=None, walker=None):
        if not (isinstance(vmax, (int, float)) and np.isfinite(vmax) and vmax > 0):
            raise ValueError(f"env 'walker': vmax must be a number of rad/s > 0 (got {vmax!r})")
        if walker is None:
            given = {k: v for k, v in (("mu", mu), ("fmax", fmax)) if v is not None}
            walker = build_walker(iterations=iterations, **given)
        self.walker = walker
        self.joints = tuple(walker.hips) + tuple(walker.knees)
        self.torso = walker.torso
        z0 = float(walker.model.init_pos[self.torso, 2])
        self.min_height = 0.6 * z0 if min_height is None else float(min_height)
        self.vmax, self.min_upright = float(vmax), float(min_upright)
        self.action_size = len(self.joints)
        super().__init__(walker.model, dt=dt, frame_skip=frame_skip, episode_length=episode_length,
                         randomize=randomize)
        self.action_low, self.action_high = -np.ones(self.action_size), np.ones(self.action_size)
        self.obs_high = np.full(self.observation_size, np.inf)
        self.obs_low = -self.obs_high

    @property
    def camera(self):
        return jaxode.Camera(pos=(1.5, -2.5, 1.0), look_at=(0.0, 0.0, 0.0), follow=self.torso)

    def init_physics(self, key, params):
        return jaxode.init(self.model), {}

    def control(self, physics, params, action):
        ids = jnp.asarray(self.joints)
        vel = params.joint_vel.at[ids, 0].set(self.vmax * action)
        return physics, params.replace(joint_vel=vel)

    def observe(self, physics, params, info):
        m, t = self.model, self.torso
        ang = jnp.stack([jaxode.hinge_angle(m, physics, j) for j in self.joints])
        rate = jnp.stack([jaxode.hinge_angle_rate(m, physics, j) for j in self.joints])
        return jnp.concatenate([physics.pos[t, 2:], physics.quat[t], physics.vel[t],
                                physics.angvel[t], ang, rate])

    def reward_done(self, before: EnvState, physics, action):
        t = self.torso
        forward = (physics.pos[t, 0] - before.physics.pos[t, 0]) / self.control_dt
        up = jm.quat_to_mat(physics.quat[t])[2, 2]
        fell = (physics.pos[t, 2] < self.min_height) | (up < self.min_upright)
        return forward, fell
