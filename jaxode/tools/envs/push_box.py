"""Push a box to a target: a velocity-controlled sphere pushes a sliding box.

A 0.2 m cube (1 kg) rests on a plane with Coulomb friction (mu 0.5 for both
surfaces, ODE's pyramid model; gravity 9.81 m/s^2). The pusher, a 5 cm
radius sphere (0.5 kg) without gravity at the box's mid-height, is driven by
a linear motor (dJointCreateLMotor) along world x, y and z: the action
(a_x, a_y) in [-1, 1]^2 sets its target velocity ``speed * a`` [m/s] (z:
0), reached within the motor force limit ``fmax`` [N]. The pusher touches
only the box, with a frictionless contact (its surface mu is 0 and surfaces
combine by min). A target point on the plane is drawn per episode
(``info["target"]``).

Observation (17): pusher xy [m] and velocity xy [m/s]; box xy, velocity xy,
cos and sin of its yaw, yaw rate [rad/s]; target xy; box - target and
box - pusher (xy). Reward per step: -|box - target| [m], plus ``bonus``
and termination when within ``tolerance`` [m]; truncated after 200 steps
of 0.05 s (5 physics steps of 0.01 s).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.sim import math as jm
from jaxode.tools.envs.core import EnvState, Env

BOX_SIZE = 0.2        # m, cube side
BOX_MASS = 1.0        # kg
PUSHER_RADIUS = 0.05  # m
PUSHER_MASS = 0.5     # kg
ARENA = 0.5           # m, half side of the square where targets are drawn
_PLANE, _BOX, _PUSHER = 0x1, 0x2, 0x4


class PushBox(Env):
    """Push-box task (see the module docstring). Options: mu (box and floor),
    speed [m/s], fmax [N], tolerance [m], bonus, dt [s], frame_skip,
    episode_length, iterations, randomize (e.g. ``{"mu": (0.2, 1.0)}``)."""

    name = "push_box"
    observation_size = 17
    action_size = 2
    num_actions = None

    def __init__(self, mu: float = 0.5, speed: float = 0.5, fmax: float = 20.0,
                 tolerance: float = 0.05, bonus: float = 10.0, dt: float = 0.01,
                 frame_skip: int = 5, episode_length: int = 200, iterations: int = 20,
                 randomize=None):
        for nm, v in (("speed", speed), ("fmax", fmax), ("tolerance", tolerance)):
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ValueError(f"env 'push_box': {nm} must be a number > 0 (got {v!r})")
        self.speed, self.tolerance, self.bonus = float(speed), float(tolerance), float(bonus)
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), iterations=iterations)
        surf = jaxode.Surface(mu=mu)
        b.add_plane(surface=surf, category_bits=_PLANE, collide_bits=_BOX)
        h = BOX_SIZE / 2
        self.box = b.add_body(pos=(0, 0, h), mass=jaxode.mass.box((BOX_SIZE,) * 3, total=BOX_MASS))
        b.add_box((BOX_SIZE,) * 3, body=self.box, surface=surf, category_bits=_BOX,
                  collide_bits=_PLANE | _PUSHER)
        self.pusher = b.add_body(pos=(-0.3, 0, h), gravity=False,
                                 mass=jaxode.mass.sphere(PUSHER_RADIUS, total=PUSHER_MASS))
        b.add_sphere(PUSHER_RADIUS, body=self.pusher, surface=jaxode.Surface(mu=0.0),
                     category_bits=_PUSHER, collide_bits=_BOX)
        self.motor = b.add_lmotor(self.pusher, None, axes=[(1, 0, 0), (0, 1, 0), (0, 0, 1)],
                                  fmax=fmax, fmax2=fmax, fmax3=fmax)
        super().__init__(b.build(), dt=dt, frame_skip=frame_skip, episode_length=episode_length,
                         randomize=randomize)
        self.action_low, self.action_high = -np.ones(2), np.ones(2)
        self.obs_high = np.full(self.observation_size, np.inf)
        self.obs_low = -self.obs_high

    @property
    def camera(self):
        return jaxode.Camera(pos=(0.0, -1.6, 1.6), look_at=(0.0, 0.0, 0.0))

    def init_physics(self, key, params):
        kb, kt, ka = jax.random.split(key, 3)
        dt = self.dtype
        box = jax.random.uniform(kb, (2,), dt, -0.8 * ARENA, 0.8 * ARENA)
        target = jax.random.uniform(kt, (2,), dt, -ARENA, ARENA)
        a = jax.random.uniform(ka, (), dt, -jnp.pi, jnp.pi)
        pusher = box + 0.3 * jnp.stack([jnp.cos(a), jnp.sin(a)])
        ph = jaxode.init(self.model)
        pos = ph.pos.at[self.box, :2].set(box).at[self.pusher, :2].set(pusher)
        return ph.replace(pos=pos), {"target": target}

    def control(self, physics, params, action):
        vel = params.joint_vel.at[self.motor, :2].set(self.speed * action)
        return physics, params.replace(joint_vel=vel)

    def observe(self, physics, params, info):
        b, p = self.box, self.pusher
        w, x, y, z = physics.quat[b]
        yaw = jnp.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        box, pusher, target = physics.pos[b, :2], physics.pos[p, :2], info["target"]
        return jnp.concatenate([pusher, physics.vel[p, :2], box, physics.vel[b, :2],
                                jnp.stack([jnp.cos(yaw), jnp.sin(yaw), physics.angvel[b, 2]]),
                                target, box - target, box - pusher])

    def reward_done(self, before: EnvState, physics, action):
        dist = jnp.sqrt(jm.sq_norm(physics.pos[self.box, :2] - before.info["target"]))
        success = dist < self.tolerance
        return -dist + jnp.where(success, self.bonus, 0.0), success
