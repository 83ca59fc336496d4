"""Gymnasium v5's eleven MuJoCo tasks on jaxode, from the task files Gymnasium ships.

``jaxode.envs.make("ant")`` (or ``gym.make("jaxode/Ant-v0")``) loads
``gymnasium/envs/mujoco/assets/ant.xml`` from the installed gymnasium package
(``pip install jaxode[gym]``; the XMLs are not copied into jaxode) with
:func:`jaxode.load_mjcf` and wraps it as a :class:`jaxode.envs.Env` whose
observation (sizes and order), action bounds (the actuators' ctrlrange), reward
terms, termination, reset noise (``reset_noise_scale``), ``frame_skip`` and
timestep are Gymnasium v5's, with v5's option names and defaults
(``make("hopper", ctrl_cost_weight=1e-2)``). Names: ``ant``, ``halfcheetah``,
``hopper``, ``humanoid``, ``humanoidstandup``, ``inverted_pendulum``,
``inverted_double_pendulum``, ``pusher``, ``reacher``, ``swimmer``,
``walker2d``; :func:`from_mjcf` makes an env of any MJCF file with your own
observation and reward functions.

The observation reads MuJoCo's quantities from the jaxode state through
:mod:`jaxode.tools.coordinates` (qpos, qvel) and :mod:`jaxode.tools.mujoco_data`
(xpos, cinert, cvel, cfrc_ext, site_xpos, qfrc_actuator); given the same qpos,
qvel and ctrl they equal MuJoCo's (tests/test_mujoco_tasks.py checks every
task's observation and reward against Gymnasium's own env). The dynamics are
jaxode's (ODE's rows, MuJoCo's joint terms as implicit rows:
``solver="articulated"``; hard contacts): docs/RL.md lists what differs from
MuJoCo's.

Differences in the bookkeeping, all small: a free joint's reset noise is added
to its quaternion as Gymnasium does and the quaternion then normalised (MuJoCo
keeps the unnormalised numbers in qpos); ``qfrc_actuator`` and ``cfrc_ext``
are those of the last physics step, at the state after it (MuJoCo's are
computed before the last integration); ``qfrc_constraint`` (inverted double
pendulum) is the cart's slider constraint force from ``joint_feedback`` with
the slider's implicit damping force taken out.
"""
from __future__ import annotations

import math
import os
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.tools import mujoco_data as md
from jaxode.tools.envs.core import Env, EnvState


def asset_path(xml_file: str) -> str:
    """The path of ``xml_file``: as given when it exists, else the file of that
    name among the installed gymnasium package's MuJoCo assets."""
    if os.path.isfile(xml_file):
        return xml_file
    try:
        import gymnasium
    except ImportError:
        raise ValueError(f"xml_file {xml_file!r} is not a file, and the task files come from "
                         "the gymnasium package: pip install 'jaxode[gym]'") from None
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets",
                        xml_file)
    if not os.path.isfile(path):
        raise ValueError(f"xml_file {xml_file!r}: no such file, nor in gymnasium's MuJoCo "
                         f"assets ({os.path.dirname(path)})")
    return path


class MujocoEnv(Env):
    """An env of an MJCF model (Gymnasium's ``MujocoEnv``): the model's
    actuators take the action (ctrl, one per actuator, clipped to ctrlrange),
    ``frame_skip`` physics steps of the file's timestep per env step.

    Subclasses implement ``observe`` and ``reward_done`` with the helpers
    :meth:`qpos`, :meth:`qvel`, :meth:`bodies` (:class:`mujoco_data.BodyData`),
    :meth:`cfrc_ext`, :meth:`qfrc_actuator`, :meth:`body_xpos`,
    :meth:`site_xpos`; ``reset_qpos_qvel(key)`` draws the start (default:
    Gymnasium's uniform noise of ``reset_noise_scale`` on both). The last
    action is ``info["ctrl"]``.

    Options: xml_file (a path, or a name in gymnasium's assets), frame_skip,
    episode_length, reset_noise_scale, randomize, solver / iterations (None:
    :func:`jaxode.load_mjcf`'s choice for the file), and the task's weights
    (``DEFAULTS``)."""

    name = "mujoco"
    xml_file = ""
    frame_skip_default = 1
    episode_length_default = 1000
    reset_noise_default = 0.0
    #: the task's own options and Gymnasium v5's defaults
    DEFAULTS: dict = {}

    def __init__(self, xml_file: Optional[str] = None, frame_skip: Optional[int] = None,
                 episode_length: Optional[int] = None, reset_noise_scale: Optional[float] = None,
                 randomize=None, solver: Optional[str] = None, iterations: Optional[int] = None,
                 **options):
        where = f"env {self.name!r}"
        unknown = sorted(set(options) - set(self.DEFAULTS))
        if unknown:
            raise ValueError(f"{where}: unknown option(s) {unknown}; options are "
                             f"{sorted(self.option_names())}")
        self.options = {**self.DEFAULTS, **options}
        for k, v in self.options.items():
            self.options[k] = _check_option(where, k, v, self.DEFAULTS[k])
        noise = self.reset_noise_default if reset_noise_scale is None else reset_noise_scale
        if not (isinstance(noise, (int, float)) and math.isfinite(noise) and noise >= 0):
            raise ValueError(f"{where}: reset_noise_scale must be a number >= 0 (got {noise!r})")
        self.reset_noise_scale = float(noise)
        self.xml_path = asset_path(xml_file or self.xml_file)
        b = jaxode.load_mjcf(self.xml_path)
        if solver is not None:
            b.solver = solver
        if iterations is not None:
            b.iterations = iterations
        self.builder_dt = float(b.dt)
        self.info_mjcf = b.mjcf_info
        model = b.build()
        self.coords = b.mjcf_info["coordinates"]
        self.table = b.mjcf_info["mj_bodies"]
        self.actuators = list(b.mjcf_info["actuators"].values())
        self.action_size = len(self.actuators)
        init = jaxode.init(model)
        self.init_qpos = np.asarray(self.coords.qpos(init), np.float64)
        self.init_qvel = np.zeros(self.coords.nv)
        super().__init__(model, dt=self.builder_dt,
                         frame_skip=self.frame_skip_default if frame_skip is None else frame_skip,
                         episode_length=(self.episode_length_default if episode_length is None
                                         else episode_length), randomize=randomize)
        lo = [a.ctrlrange[0] if a.ctrlrange is not None else -np.inf for a in self.actuators]
        hi = [a.ctrlrange[1] if a.ctrlrange is not None else np.inf for a in self.actuators]
        self.action_low, self.action_high = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        obs = jax.eval_shape(lambda: self.observe(init, model.params, self._info0()))
        self.observation_size = int(obs.shape[0])
        self.obs_high = np.full(self.observation_size, np.inf)
        self.obs_low = -self.obs_high
        self._init_state = init

    @classmethod
    def option_names(cls) -> list:
        """The options ``make`` takes for this env."""
        return ["xml_file", "frame_skip", "episode_length", "reset_noise_scale", "randomize",
                "solver", "iterations", *cls.DEFAULTS]

    @property
    def timestep(self) -> float:
        """The file's ``<option timestep>`` [s] (MuJoCo's ``model.opt.timestep``)."""
        return self.dt

    def _info0(self) -> dict:
        return {"ctrl": jnp.zeros((self.action_size,), self.dtype)}

    # ------------------------------------------------------------- reading
    def qpos(self, physics):
        return self.coords.qpos(physics)

    def qvel(self, physics):
        return self.coords.qvel(physics)

    def bodies(self, physics) -> md.BodyData:
        return md.body_data(self.table, physics)

    def body_xpos(self, physics, name: str, data: Optional[md.BodyData] = None):
        """(3,) MJCF body ``name``'s frame origin [m] (Gymnasium's ``get_body_com``)."""
        data = self.bodies(physics) if data is None else data
        return data.xpos[self.table.index(name)]

    def site_xpos(self, physics, name: str, data: Optional[md.BodyData] = None):
        data = self.bodies(physics) if data is None else data
        return md.site_xpos(self.table, data, name)

    def cfrc_ext(self, physics, params=None, data: Optional[md.BodyData] = None):
        return md.cfrc_ext(self.model, self.table, physics, data, params)

    def qfrc_actuator(self, physics, ctrl):
        return md.qfrc_actuator(self.model, physics, self.actuators, self.coords, ctrl)

    # ------------------------------------------------------------- hooks
    def reset_qpos_qvel(self, key):
        """(qpos, qvel) of a new episode: Gymnasium's uniform noise of
        ``reset_noise_scale`` on both."""
        k1, k2 = jax.random.split(key)
        s, dt = self.reset_noise_scale, self.dtype
        qpos = self.init_qpos + jax.random.uniform(k1, (self.coords.nq,), dt, -s, s)
        qvel = self.init_qvel + jax.random.uniform(k2, (self.coords.nv,), dt, -s, s)
        return qpos, qvel

    def init_physics(self, key, params):
        qpos, qvel = self.reset_qpos_qvel(key)
        physics = self.coords.set(self._init_state, jnp.asarray(qpos, self.dtype),
                                  jnp.asarray(qvel, self.dtype))
        return physics, self._info0()

    def control(self, physics, params, action):
        """The actuators' forces for ``action`` and, for a file with a fluid
        (``<option density viscosity>``), MuJoCo's fluid drag."""
        physics = jaxode.io.mjcf.apply_actuators(self.model, physics, self.actuators, action)
        fluid = self.info_mjcf.get("fluid")
        if fluid is not None:
            physics = jaxode.io.mjcf.apply_fluid(self.model, physics, self.table, fluid)
        return physics, params

    def step(self, state: EnvState, action) -> EnvState:
        a = self._action(action)
        return super().step(state.replace(info={**state.info, "ctrl": a}), a)

    def forward_velocity(self, before: EnvState, physics, x_of: Callable):
        """(d x_of / dt) over the env step (``x_of(physics)`` a position)."""
        return (x_of(physics) - x_of(before.physics)) / self.control_dt

    @property
    def camera(self):
        root = int(self.table.ode_body[1]) if self.table.nbody > 1 else -1
        if root >= 0:
            return jaxode.Camera(pos=(2.0, -3.0, 1.5), look_at=(0.0, 0.0, 0.3), follow=root)
        return jaxode.Camera()


def _check_option(where: str, key: str, value, default):
    if isinstance(default, bool):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{where}: {key} must be True or False (got {value!r})")
        return bool(value)
    if isinstance(default, tuple):
        try:
            lo, hi = (float(x) for x in value)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: {key} must be a (low, high) pair of numbers "
                             f"(got {value!r})") from None
        if not lo <= hi:
            raise ValueError(f"{where}: {key} must have low <= high (got {value!r})")
        return (lo, hi)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {key} must be a number (got {value!r})") from None
    if not math.isfinite(v):
        raise ValueError(f"{where}: {key} must be finite (got {value!r})")
    return v


def _between(x, rng, strict: bool):
    lo, hi = rng
    return ((lo < x) & (x < hi)) if strict else ((lo <= x) & (x <= hi))


def _square_sum(x):
    return jnp.sum(jnp.square(x))


def _dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


# ------------------------------------------------------------------ locomotion
class _Locomotion(MujocoEnv):
    """qpos (without the first ``skip`` coordinates when
    ``exclude_current_positions_from_observation``) then qvel; forward reward
    along x of ``qpos[0]``; ``ctrl_cost_weight * |a|^2``."""

    skip = 1
    clip_qvel = None

    def observe(self, physics, params, info):
        q, v = self.qpos(physics), self.qvel(physics)
        if self.options.get("exclude_current_positions_from_observation", True):
            q = q[self.skip:]
        if self.clip_qvel is not None:
            v = jnp.clip(v, -self.clip_qvel, self.clip_qvel)
        return jnp.concatenate([q, v])

    def forward(self, before, physics):
        return self.forward_velocity(before, physics, lambda ph: self.qpos(ph)[0])

    def ctrl_cost(self, action):
        return self.options["ctrl_cost_weight"] * _square_sum(action)


class HalfCheetah(_Locomotion):
    """Gymnasium HalfCheetah-v5: obs 17 (qpos[1:], qvel); reward forward x
    velocity - 0.1 |a|^2; never terminates."""

    name = "halfcheetah"
    xml_file = "half_cheetah.xml"
    frame_skip_default = 5
    reset_noise_default = 0.1
    DEFAULTS = dict(forward_reward_weight=1.0, ctrl_cost_weight=0.1,
                    exclude_current_positions_from_observation=True)

    def reset_qpos_qvel(self, key):
        return _uniform_normal(self, key)

    def reward_done(self, before, physics, action):
        r = self.options["forward_reward_weight"] * self.forward(before, physics)
        return r - self.ctrl_cost(action), jnp.zeros((), bool)


class Hopper(_Locomotion):
    """Gymnasium Hopper-v5: obs 11 (qpos[1:], qvel clipped to +-10); reward
    forward + 1 (healthy) - 1e-3 |a|^2; unhealthy (terminates): z = qpos[1] <= 0.7,
    |qpos[2]| >= 0.2 rad, or any of qpos[2:], qvel outside (-100, 100)."""

    name = "hopper"
    xml_file = "hopper.xml"
    frame_skip_default = 4
    reset_noise_default = 5e-3
    clip_qvel = 10.0
    DEFAULTS = dict(forward_reward_weight=1.0, ctrl_cost_weight=1e-3, healthy_reward=1.0,
                    terminate_when_unhealthy=True, healthy_state_range=(-100.0, 100.0),
                    healthy_z_range=(0.7, float("inf")), healthy_angle_range=(-0.2, 0.2),
                    exclude_current_positions_from_observation=True)

    def healthy(self, physics):
        q, v = self.qpos(physics), self.qvel(physics)
        o = self.options
        state = jnp.concatenate([q, v])[2:]
        return (jnp.all(_between(state, o["healthy_state_range"], True))
                & _between(q[1], o["healthy_z_range"], True)
                & _between(q[2], o["healthy_angle_range"], True))

    def reward_done(self, before, physics, action):
        o, ok = self.options, self.healthy(physics)
        r = (o["forward_reward_weight"] * self.forward(before, physics)
             + o["healthy_reward"] * ok - self.ctrl_cost(action))
        return r, ~ok & o["terminate_when_unhealthy"]


class Walker2d(Hopper):
    """Gymnasium Walker2d-v5 (walker2d_v5.xml): obs 17 (qpos[1:], qvel clipped to
    +-10); reward forward + 1 (healthy) - 1e-3 |a|^2; unhealthy (terminates):
    z = qpos[1] outside (0.8, 2) m or qpos[2] outside (-1, 1) rad."""

    name = "walker2d"
    xml_file = "walker2d_v5.xml"
    DEFAULTS = dict(forward_reward_weight=1.0, ctrl_cost_weight=1e-3, healthy_reward=1.0,
                    terminate_when_unhealthy=True, healthy_z_range=(0.8, 2.0),
                    healthy_angle_range=(-1.0, 1.0),
                    exclude_current_positions_from_observation=True)

    def healthy(self, physics):
        q, o = self.qpos(physics), self.options
        return _between(q[1], o["healthy_z_range"], True) & _between(
            q[2], o["healthy_angle_range"], True)


class Swimmer(_Locomotion):
    """Gymnasium Swimmer-v5: obs 8 (qpos[2:], qvel); reward forward x velocity -
    1e-4 |a|^2; never terminates. MuJoCo's fluid forces (the file's density and
    viscosity) are applied (:func:`jaxode.io.mjcf.fluid_forces`)."""

    name = "swimmer"
    xml_file = "swimmer.xml"
    frame_skip_default = 4
    reset_noise_default = 0.1
    skip = 2
    DEFAULTS = dict(forward_reward_weight=1.0, ctrl_cost_weight=1e-4,
                    exclude_current_positions_from_observation=True)

    def reward_done(self, before, physics, action):
        r = self.options["forward_reward_weight"] * self.forward(before, physics)
        return r - self.ctrl_cost(action), jnp.zeros((), bool)


class Ant(_Locomotion):
    """Gymnasium Ant-v5: obs 105 (qpos[2:], qvel, cfrc_ext of bodies 1.. clipped
    to contact_force_range); reward forward x velocity of the torso frame + 1
    (healthy) - 0.5 |a|^2 - 5e-4 |clip(cfrc_ext)|^2; unhealthy (terminates):
    torso z = qpos[2] outside [0.2, 1] m."""

    name = "ant"
    xml_file = "ant.xml"
    frame_skip_default = 5
    reset_noise_default = 0.1
    skip = 2
    DEFAULTS = dict(forward_reward_weight=1.0, ctrl_cost_weight=0.5, contact_cost_weight=5e-4,
                    healthy_reward=1.0, terminate_when_unhealthy=True,
                    healthy_z_range=(0.2, 1.0), contact_force_range=(-1.0, 1.0),
                    exclude_current_positions_from_observation=True,
                    include_cfrc_ext_in_observation=True)

    def reset_qpos_qvel(self, key):
        return _uniform_normal(self, key)

    def contact_forces(self, physics, params):
        lo, hi = self.options["contact_force_range"]
        return jnp.clip(self.cfrc_ext(physics, params), lo, hi)

    def observe(self, physics, params, info):
        obs = super().observe(physics, params, info)
        if self.options["include_cfrc_ext_in_observation"]:
            obs = jnp.concatenate([obs, self.contact_forces(physics, params)[1:].ravel()])
        return obs

    def reward_done(self, before, physics, action):
        o = self.options
        z = self.qpos(physics)[2]
        ok = _between(z, o["healthy_z_range"], False)
        vx = self.forward_velocity(before, physics, lambda ph: self.body_xpos(ph, "torso")[0])
        cost = self.ctrl_cost(action) + o["contact_cost_weight"] * _square_sum(
            self.contact_forces(physics, before.params))
        r = o["forward_reward_weight"] * vx + o["healthy_reward"] * ok - cost
        return r, ~ok & o["terminate_when_unhealthy"]


#: the humanoids' observation options (Gymnasium v5's names and defaults)
_HUMANOID_OBSERVATION = dict(exclude_current_positions_from_observation=True,
                             include_cinert_in_observation=True,
                             include_cvel_in_observation=True,
                             include_qfrc_actuator_in_observation=True,
                             include_cfrc_ext_in_observation=True)


class Humanoid(_Locomotion):
    """Gymnasium Humanoid-v5: obs 348 (qpos[2:], qvel, cinert, cvel, qfrc_actuator[6:],
    cfrc_ext of bodies 1..); reward 1.25 x velocity of the centre of mass + 5
    (healthy) - 0.1 |ctrl|^2 - min(5e-7 |cfrc_ext|^2, 10); unhealthy (terminates):
    z = qpos[2] outside (1, 2) m."""

    name = "humanoid"
    xml_file = "humanoid.xml"
    frame_skip_default = 5
    reset_noise_default = 1e-2
    skip = 2
    DEFAULTS = dict(forward_reward_weight=1.25, ctrl_cost_weight=0.1, contact_cost_weight=5e-7,
                    contact_cost_range=(-float("inf"), 10.0), healthy_reward=5.0,
                    terminate_when_unhealthy=True, healthy_z_range=(1.0, 2.0),
                    **_HUMANOID_OBSERVATION)

    def observe(self, physics, params, info):
        o = self.options
        parts = [super().observe(physics, params, info)]
        data = self.bodies(physics)
        if o["include_cinert_in_observation"]:
            parts.append(data.cinert[1:].ravel())
        if o["include_cvel_in_observation"]:
            parts.append(data.cvel[1:].ravel())
        if o["include_qfrc_actuator_in_observation"]:
            parts.append(self.qfrc_actuator(physics, info["ctrl"])[6:])
        if o["include_cfrc_ext_in_observation"]:
            parts.append(self.cfrc_ext(physics, params, data)[1:].ravel())
        return jnp.concatenate(parts)

    def contact_cost(self, physics, params):
        lo, hi = self.options["contact_cost_range"]
        c = self.options["contact_cost_weight"] * _square_sum(self.cfrc_ext(physics, params))
        return jnp.clip(c, lo, hi)

    def reward_done(self, before, physics, action):
        o = self.options
        ok = _between(self.qpos(physics)[2], o["healthy_z_range"], True)
        com = lambda ph: md.mass_center(self.table, self.bodies(ph))[0]
        vx = self.forward_velocity(before, physics, com)
        r = (o["forward_reward_weight"] * vx + o["healthy_reward"] * ok
             - self.ctrl_cost(action) - self.contact_cost(physics, before.params))
        return r, ~ok & o["terminate_when_unhealthy"]


class HumanoidStandup(Humanoid):
    """Gymnasium HumanoidStandup-v5: Humanoid's observation (348); reward
    uph_cost_weight * qpos[2] / timestep - 0.1 |ctrl|^2 - min(0.5e-6 |cfrc_ext|^2, 10) + 1; never
    terminates."""

    name = "humanoidstandup"
    xml_file = "humanoidstandup.xml"
    DEFAULTS = dict(uph_cost_weight=1.0, ctrl_cost_weight=0.1, impact_cost_weight=0.5e-6,
                    impact_cost_range=(-float("inf"), 10.0),
                    **_HUMANOID_OBSERVATION)

    def reward_done(self, before, physics, action):
        o = self.options
        # v5 documents uph_cost_weight but its code leaves it out; here it weighs the
        # term as documented (the default 1 is v5's reward)
        uph = o["uph_cost_weight"] * self.qpos(physics)[2] / self.timestep
        lo, hi = o["impact_cost_range"]
        impact = jnp.clip(o["impact_cost_weight"] * _square_sum(
            self.cfrc_ext(physics, before.params)), lo, hi)
        return uph - self.ctrl_cost(action) - impact + 1.0, jnp.zeros((), bool)


# ------------------------------------------------------------------ control tasks
class InvertedPendulum(MujocoEnv):
    """Gymnasium InvertedPendulum-v5: obs 4 (qpos, qvel); reward 1 per step
    while |qpos[1]| <= 0.2 rad; terminates beyond."""

    name = "inverted_pendulum"
    xml_file = "inverted_pendulum.xml"
    frame_skip_default = 2
    reset_noise_default = 0.01
    DEFAULTS = {}

    def observe(self, physics, params, info):
        return jnp.concatenate([self.qpos(physics), self.qvel(physics)])

    def reward_done(self, before, physics, action):
        fell = jnp.abs(self.qpos(physics)[1]) > 0.2
        return jnp.where(fell, 0.0, 1.0), fell


class InvertedDoublePendulum(MujocoEnv):
    """Gymnasium InvertedDoublePendulum-v5: obs 9 (cart x, sin and cos of the two
    hinge angles, qvel clipped to +-10, the cart's constraint force clipped to
    +-10); reward 10 (alive) - 0.01 x^2 - (y - 2)^2 - 1e-3 v1^2 - 5e-3 v2^2 with
    (x, y) the tip site's x and z; terminates when the tip's z <= 1 m."""

    name = "inverted_double_pendulum"
    xml_file = "inverted_double_pendulum.xml"
    frame_skip_default = 5
    reset_noise_default = 0.1
    DEFAULTS = dict(healthy_reward=10.0)

    def reset_qpos_qvel(self, key):
        return _uniform_normal(self, key)

    def qfrc_constraint_cart(self, physics, params):
        """The slider constraint force on the cart along its axis [N] (MuJoCo's
        ``qfrc_constraint[0]``): joint feedback on the cart along the axis, less
        the slider's implicit damping force (-damping * qdot)."""
        name = self.coords.names[0]
        j = self.info_mjcf["joints"][name]
        fb = physics.joint_feedback
        if fb is None:
            return jnp.zeros((), self.dtype)
        axis = jnp.asarray(self.coords.joints[0].axis, self.dtype)  # the cart's parent: world
        damping = params.joint_damping[j, 0]
        # a state no step has produced (a reset) has no constraint force yet
        stepped = jnp.any(fb[j] != 0)
        return jnp.where(stepped, _dot3(fb[j, 0], axis) + damping * self.qvel(physics)[0], 0.0)

    def observe(self, physics, params, info):
        q, v = self.qpos(physics), self.qvel(physics)
        return jnp.concatenate([q[:1], jnp.sin(q[1:]), jnp.cos(q[1:]), jnp.clip(v, -10, 10),
                                jnp.clip(self.qfrc_constraint_cart(physics, params), -10, 10)[None]])

    def reward_done(self, before, physics, action):
        tip = self.site_xpos(physics, "tip")
        x, y = tip[0], tip[2]
        v = self.qvel(physics)
        fell = y <= 1.0
        r = (self.options["healthy_reward"] * ~fell - (0.01 * x * x + (y - 2.0) ** 2)
             - (1e-3 * v[1] ** 2 + 5e-3 * v[2] ** 2))
        return r, fell


class Reacher(MujocoEnv):
    """Gymnasium Reacher-v5: obs 10 (cos, sin of the two arm angles, the target's
    (x, y), the arm's joint rates, fingertip - target (x, y)); reward -|fingertip
    - target| - |a|^2; never terminates; 50 steps. Reset: arm angles and rates
    uniform (+-0.1 rad, +-0.005 rad/s), the target uniform in the disc of 0.2 m."""

    name = "reacher"
    xml_file = "reacher.xml"
    frame_skip_default = 2
    episode_length_default = 50
    DEFAULTS = dict(reward_dist_weight=1.0, reward_control_weight=1.0)

    def reset_qpos_qvel(self, key):
        k1, k2, k3 = jax.random.split(key, 3)
        dt = self.dtype
        qpos = self.init_qpos + jax.random.uniform(k1, (self.coords.nq,), dt, -0.1, 0.1)
        # Gymnasium draws the goal in [-0.2, 0.2]^2 until it lies in the disc of 0.2:
        # the same distribution, uniform in the disc
        r = 0.2 * jnp.sqrt(jax.random.uniform(k2, (), dt))
        phi = jax.random.uniform(k3, (), dt, 0.0, 2 * math.pi)
        qpos = qpos.at[-2:].set(jnp.stack([r * jnp.cos(phi), r * jnp.sin(phi)]))
        qvel = self.init_qvel + jax.random.uniform(jax.random.fold_in(key, 1),
                                                   (self.coords.nv,), dt, -0.005, 0.005)
        return qpos, qvel.at[-2:].set(0.0)

    def observe(self, physics, params, info):
        q, v = self.qpos(physics), self.qvel(physics)
        data = self.bodies(physics)
        d = self.body_xpos(physics, "fingertip", data) - self.body_xpos(physics, "target", data)
        return jnp.concatenate([jnp.cos(q[:2]), jnp.sin(q[:2]), q[2:], v[:2], d[:2]])

    def reward_done(self, before, physics, action):
        data = self.bodies(physics)
        d = self.body_xpos(physics, "fingertip", data) - self.body_xpos(physics, "target", data)
        o = self.options
        r = (-jnp.sqrt(_square_sum(d)) * o["reward_dist_weight"]
             - _square_sum(action) * o["reward_control_weight"])
        return r, jnp.zeros((), bool)


class Pusher(MujocoEnv):
    """Gymnasium Pusher-v5 (pusher_v5.xml): obs 23 (the arm's 7 qpos and qvel,
    the tips_arm, object and goal body positions); reward -0.5 |object -
    tips_arm| - |object - goal| - 0.1 |a|^2; never terminates; 100 steps. Reset:
    the object uniform in [-0.3, 0] x [-0.2, 0.2] at least 0.17 m from the goal
    (0, 0), arm rates uniform +-0.005."""

    name = "pusher"
    xml_file = "pusher_v5.xml"
    frame_skip_default = 5
    episode_length_default = 100
    DEFAULTS = dict(reward_near_weight=0.5, reward_dist_weight=1.0, reward_control_weight=0.1)

    def reset_qpos_qvel(self, key):
        k1, k2 = jax.random.split(key)
        dt = self.dtype
        # Gymnasium's rejection loop, with a fixed number of draws (the first that
        # is far enough; 32 draws all fail with probability < 1e-40)
        cand = jax.random.uniform(k1, (32, 2), dt, jnp.array([-0.3, -0.2], dt),
                                  jnp.array([0.0, 0.2], dt))
        ok = jnp.sqrt(cand[:, 0] ** 2 + cand[:, 1] ** 2) > 0.17
        obj = cand[jnp.argmax(ok)]
        qpos = jnp.asarray(self.init_qpos, dt).at[-4:-2].set(obj).at[-2:].set(0.0)
        qvel = self.init_qvel + jax.random.uniform(k2, (self.coords.nv,), dt, -0.005, 0.005)
        return qpos, qvel.at[-4:].set(0.0)

    def observe(self, physics, params, info):
        q, v = self.qpos(physics), self.qvel(physics)
        data = self.bodies(physics)
        return jnp.concatenate([q[:7], v[:7]] + [self.body_xpos(physics, n, data)
                                                   for n in ("tips_arm", "object", "goal")])

    def reward_done(self, before, physics, action):
        data = self.bodies(physics)
        tip, obj, goal = (self.body_xpos(physics, n, data) for n in ("tips_arm", "object", "goal"))
        o = self.options
        r = (-jnp.sqrt(_square_sum(obj - tip)) * o["reward_near_weight"]
             - jnp.sqrt(_square_sum(obj - goal)) * o["reward_dist_weight"]
             - _square_sum(action) * o["reward_control_weight"])
        return r, jnp.zeros((), bool)


def _uniform_normal(env: MujocoEnv, key):
    """Gymnasium's reset of ant, half_cheetah and the double pendulum: qpos +
    uniform(+-s), qvel + s * standard normal."""
    k1, k2 = jax.random.split(key)
    s, dt = env.reset_noise_scale, env.dtype
    qpos = env.init_qpos + jax.random.uniform(k1, (env.coords.nq,), dt, -s, s)
    qvel = env.init_qvel + s * jax.random.normal(k2, (env.coords.nv,), dt)
    return qpos, qvel


class FromMjcf(MujocoEnv):
    """An env of your own MJCF file (:func:`from_mjcf`)."""

    name = "from_mjcf"
    DEFAULTS = {}

    def __init__(self, xml_file: str, observe: Callable, reward: Callable, **kwargs):
        self._observe_fn, self._reward_fn = observe, reward
        super().__init__(xml_file=xml_file, **kwargs)

    def observe(self, physics, params, info):
        return jnp.asarray(self._observe_fn(self, physics, params, info))

    def reward_done(self, before, physics, action):
        out = self._reward_fn(self, before, physics, action)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError("from_mjcf: reward(env, before, physics, action) must return "
                             f"(reward, terminated) (got {type(out).__name__})")
        return out


def from_mjcf(xml_file: str, observe: Optional[Callable] = None,
              reward: Optional[Callable] = None, *, frame_skip: int = 1,
              episode_length: int = 1000, reset_noise_scale: float = 0.0, randomize=None,
              solver: Optional[str] = None, iterations: Optional[int] = None) -> MujocoEnv:
    """An env of the MJCF file ``xml_file``: the action is the actuators' ctrl
    (clipped to ctrlrange), ``frame_skip`` steps of the file's timestep per env
    step, episodes start at the file's qpos0 plus uniform noise of
    ``reset_noise_scale`` (qpos and qvel).

    observe(env, physics, params, info) -> (obs,) (default: qpos then qvel);
    reward(env, before, physics, action) -> (reward, terminated) (default: 0,
    never). ``env`` gives the MuJoCo quantities (:class:`MujocoEnv`:
    ``env.qpos(physics)``, ``env.bodies(physics).xipos``, ``env.cfrc_ext``, ...);
    ``before`` is the EnvState at the start of the env step."""
    if observe is None:
        def observe(env, physics, params, info):
            return jnp.concatenate([env.qpos(physics), env.qvel(physics)])
    if reward is None:
        def reward(env, before, physics, action):
            return jnp.zeros((), env.dtype), jnp.zeros((), bool)
    for nm, f in (("observe", observe), ("reward", reward)):
        if not callable(f):
            raise ValueError(f"from_mjcf: {nm} must be a function (got {type(f).__name__})")
    return FromMjcf(xml_file, observe, reward, frame_skip=frame_skip,
                    episode_length=episode_length, reset_noise_scale=reset_noise_scale,
                    randomize=randomize, solver=solver, iterations=iterations)


#: (name, class, Gymnasium id, Brax name) of the eleven tasks
TASKS = (
    ("ant", Ant, "jaxode/Ant-v0", "jaxode_ant"),
    ("halfcheetah", HalfCheetah, "jaxode/HalfCheetah-v0", "jaxode_halfcheetah"),
    ("hopper", Hopper, "jaxode/Hopper-v0", "jaxode_hopper"),
    ("humanoid", Humanoid, "jaxode/Humanoid-v0", "jaxode_humanoid"),
    ("humanoidstandup", HumanoidStandup, "jaxode/HumanoidStandup-v0", "jaxode_humanoidstandup"),
    ("inverted_pendulum", InvertedPendulum, "jaxode/InvertedPendulum-v0",
     "jaxode_inverted_pendulum"),
    ("inverted_double_pendulum", InvertedDoublePendulum, "jaxode/InvertedDoublePendulum-v0",
     "jaxode_inverted_double_pendulum"),
    ("pusher", Pusher, "jaxode/Pusher-v0", "jaxode_pusher"),
    ("reacher", Reacher, "jaxode/Reacher-v0", "jaxode_reacher"),
    ("swimmer", Swimmer, "jaxode/Swimmer-v0", "jaxode_swimmer"),
    ("walker2d", Walker2d, "jaxode/Walker2d-v0", "jaxode_walker2d"),
)
