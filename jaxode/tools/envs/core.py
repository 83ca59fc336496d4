"""Functional environments in Brax's style: ``EnvState``, ``Env``, ``AutoReset``.

One world is a pure function pair::

    state = env.reset(key)            # EnvState
    state = env.step(state, action)   # EnvState

``jax.vmap`` of both steps a batch: ``env.reset_batch(keys)`` and
``env.step_batch(states, actions)`` are exactly that, jitted once per env (so
a Gymnasium adapter and your own loop share one compiled step).
An env step is ``frame_skip`` physics steps of ``dt`` seconds with the action
held. ``EnvState.params`` holds the world's own :class:`jaxode.Params`, drawn
at reset when the env was made with ``randomize=`` (domain randomisation,
:func:`jaxode.envs.randomize_params`).

Episode bookkeeping: ``done = terminated | truncated``; ``info["steps"]``
counts env steps in the episode, ``info["truncation"]`` is True when the
episode ended at the step limit and not by termination (a learner bootstraps
there). A world whose physics turned non-finite terminates. Without
:class:`AutoReset` a finished world keeps stepping; wrap the env to restart
finished worlds inside the jitted step.
"""
from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode import compile_notice
from jaxode._struct import pytree_dataclass
from jaxode.overflow_report import warn_overflow
from jaxode.tools.envs.randomize import check_randomize, randomize_params
from jaxode.types import Model, Params, State


@pytree_dataclass
class EnvState:
    """The state of one environment world.

    physics: the jaxode :class:`State`; params: the world's :class:`Params`
    (randomised at reset); obs (obs_size,); reward () [env units per step];
    done () bool: the episode ended at this step; key: PRNG key the next reset
    of this world uses; info: dict of per-world arrays with at least
    ``steps`` (int32) and ``truncation`` (bool), plus env-specific entries.
    """

    physics: State
    params: Params
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    key: jax.Array
    info: dict


def _raw_key(key: jax.Array) -> jax.Array:
    """uint32 key data of a PRNG key (typed keys from jax.random.key accepted)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jax.random.key_data(key)
    return key


class Env:
    """Base environment: a jaxode model, a control period and the hooks below.

    Subclasses set ``observation_size``, ``action_size``, ``num_actions`` (an
    int for a discrete action set ``{0, .., n-1}``, else None), ``action_low``
    / ``action_high`` (continuous bounds), ``obs_low`` / ``obs_high`` and
    implement:

    - ``init_physics(key, params) -> (State, info)``: the start of an episode
      (``info``: env-specific per-episode entries, e.g. a target).
    - ``control(physics, params, action) -> (State, Params)``: applied before
      every physics step (add joint torques to the accumulators, or set motor
      targets in ``params.joint_vel``).
    - ``observe(physics, params, info) -> obs``.
    - ``reward_done(before: EnvState, physics, action) -> (reward, terminated)``:
      ``before`` is the state at the start of the env step.

    dt [s]: physics step; frame_skip: physics steps per env step (the control
    period is ``control_dt = dt * frame_skip``, what Brax and MuJoCo Playground
    call ``dt``: ``to_brax(env).dt``; docs/RL.md); episode_length: env steps before
    truncation; randomize: ``{params field: (lo, hi)}`` uniform per world at
    every reset (see :func:`jaxode.envs.randomize_params`).
    """

    name = "env"
    observation_size: int
    action_size: int
    num_actions: Optional[int] = None
    action_low: np.ndarray
    action_high: np.ndarray
    obs_low: np.ndarray
    obs_high: np.ndarray

    def __init__(self, model: Model, *, dt: float, frame_skip: int = 1, episode_length: int = 1000,
                 randomize: Optional[dict] = None):
        where = f"env {self.name!r}"
        try:
            dt = float(dt)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: dt must be a number of seconds > 0 (got {dt!r})") from None
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"{where}: dt must be a finite number of seconds > 0 (got {dt!r})")
        for nm, v in (("frame_skip", frame_skip), ("episode_length", episode_length)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{where}: {nm} must be an integer >= 1 (got {v!r})")
        self.model = model
        self.dt = dt
        self.frame_skip = int(frame_skip)
        self.episode_length = int(episode_length)
        jaxode.params_spec.check_params(model, model.params, where=f"{where}: model.params")
        self.randomize = check_randomize(model.params, randomize, where)

    # ------------------------------------------------------------------ hooks
    def init_physics(self, key: jax.Array, params: Params) -> tuple[State, dict]:
        raise NotImplementedError

    def control(self, physics: State, params: Params, action: jax.Array) -> tuple[State, Params]:
        raise NotImplementedError

    def observe(self, physics: State, params: Params, info: dict) -> jax.Array:
        raise NotImplementedError

    def reward_done(self, before: EnvState, physics: State, action: jax.Array):
        raise NotImplementedError

    # -------------------------------------------------------------------- API
    @property
    def control_dt(self) -> float:
        """Seconds per env step (dt * frame_skip)."""
        return self.dt * self.frame_skip

    @property
    def camera(self):
        """The :class:`jaxode.Camera` that adapters' ``render`` uses (envs set their own)."""
        return jaxode.Camera()

    @property
    def dtype(self):
        return self.model.params.body_mass.dtype

    def reset(self, key: jax.Array) -> EnvState:
        """A new episode of one world from ``key`` (params drawn, then the state)."""
        key = _raw_key(key)
        k_params, k_state, k_next = jax.random.split(key, 3)
        params = randomize_params(k_params, self.model.params, self.randomize)
        physics, extra = self.init_physics(k_state, params)
        info = {"steps": jnp.zeros((), jnp.int32), "truncation": jnp.zeros((), bool), **extra}
        obs = self.observe(physics, params, info)
        return EnvState(physics=physics, params=params, obs=obs,
                        reward=jnp.zeros((), obs.dtype), done=jnp.zeros((), bool),
                        key=k_next, info=info)

    def step(self, state: EnvState, action) -> EnvState:
        """``frame_skip`` physics steps with ``action`` held; reward and done."""
        action = self._action(action)
        physics = state.physics
        if self.num_actions is not None:
            # a traced action outside the space flags the world (frozen, done)
            bad = (action < 0) | (action >= self.num_actions)
            physics = physics.replace(nonfinite=physics.nonfinite | bad)

        physics = self.advance(physics, state.params, action)
        reward, terminated = self.reward_done(state, physics, action)
        terminated = jnp.asarray(terminated, bool) | physics.nonfinite
        steps = state.info["steps"] + 1
        truncated = (steps >= self.episode_length) & ~terminated
        info = {**state.info, "steps": steps, "truncation": truncated}
        obs = self.observe(physics, state.params, info)
        return state.replace(physics=physics, obs=obs, reward=jnp.asarray(reward, obs.dtype),
                             done=terminated | truncated, info=info)

    def advance(self, physics: State, params: Params, action: jax.Array) -> State:
        """``frame_skip`` physics steps of ``dt`` with ``action`` (already
        checked and clipped, :meth:`step`) held: ``control`` before each."""
        def substep(_, ph):
            ph, p = self.control(ph, params, action)
            return jaxode.step(self.model, ph, self.dt, params=p)

        return jax.lax.fori_loop(0, self.frame_skip, substep, physics)

    def reset_batch(self, keys: jax.Array) -> EnvState:
        """``vmap(reset)``: one new episode per key, ``keys`` (n, 2) (e.g.
        ``jax.random.split(key, n)``). jitted once per env (and shared)."""
        return self._jit("reset_batch", lambda: jax.vmap(self.reset))(keys)

    def step_batch(self, states: EnvState, actions) -> EnvState:
        """``vmap(step)``: one env step of every world. jitted once per env (and shared)."""
        self.check_action(actions, batch=np.shape(states.done))
        out = self._jit("step_batch", lambda: jax.vmap(self.step))(states, actions)
        self._watch_overflow(out.physics)
        return out

    def _watch_overflow(self, physics: State) -> None:
        """Warn on the host, once per env, when a world has dropped contacts or
        pairs (:func:`jaxode.warn_overflow`). Without waiting for the device:
        the counters of an earlier step are read once they are ready (they are
        running totals within an episode), so the warning may come a step or
        two after the overflow, and a step's host loop is never stalled."""
        if self.__dict__.get("_overflow_warned") or isinstance(physics.pos, jax.core.Tracer):
            return
        pending = self.__dict__.get("_overflow_pending")
        if pending is not None and all(getattr(x, "is_ready", lambda: True)() for x in (
                pending.overflow_pairs, pending.overflow_contacts, pending.ncontact)):
            self._overflow_pending = None
            if warn_overflow(self.model, pending, where=f"env {self.name!r}", once=True,
                             stacklevel=3) is not None:
                self._overflow_warned = True
                return
        if self.__dict__.get("_overflow_pending") is None:
            self._overflow_pending = physics

    def _jit(self, name: str, make):
        cache = self.__dict__.setdefault("_jit_cache", {})
        if name not in cache:
            fn = jax.jit(make())
            what = f"env {self.name!r} {name}"

            def call(*args, _fn=fn, _what=what):
                # a one-line notice when the first call of new shapes compiles for long
                with compile_notice.notice(_what, enabled=not any(
                        isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args))):
                    return _fn(*args)
            cache[name] = call
        return cache[name]

    def check_action(self, action, batch: tuple = ()) -> None:
        """Check an action (``batch``: its leading batch axes): a discrete space
        takes one integer in [0, num_actions) per world (shape ``batch`` or
        ``batch + (1,)``), a continuous one ``action_size`` finite numbers
        (shape ``batch + (action_size,)``; ``batch`` alone for size 1; values
        outside [action_low, action_high] are clipped). TypeError for a wrong
        dtype (a float for a discrete space, a string), ValueError for a wrong
        shape or a concrete value outside the space; traced discrete values
        outside it flag the world (``physics.nonfinite``: frozen, done)."""
        where = f"env {self.name!r}: action"
        tracer = isinstance(action, jax.core.Tracer)
        if tracer:
            arr, shape, dtype = None, tuple(action.shape), np.dtype(action.dtype)
        else:
            try:
                arr = np.asarray(action)
            except (TypeError, ValueError):
                raise TypeError(f"{where} must be numeric (got {action!r})") from None
            shape, dtype = arr.shape, arr.dtype
        batch = tuple(batch)
        if self.num_actions is not None:
            n = self.num_actions
            space = f"one integer in [0, {n - 1}] per world (a discrete space of {n} actions)"
            if shape not in (batch, batch + (1,)):
                raise ValueError(f"{where} must be {space}, shape {batch} or {batch + (1,)} "
                                 f"(got shape {shape})")
            if dtype.kind not in "iu" and not (dtype.kind == "f" and not tracer):
                raise TypeError(f"{where} must be {space}: an integer dtype (got {dtype})")
            if arr is not None:
                v = arr.astype(np.float64)
                bad = ~np.isfinite(v) | (v != np.round(v)) | (v < 0) | (v > n - 1)
                if np.any(bad):
                    raise ValueError(f"{where} must be {space} (got {arr[bad].flat[0].item()!r})")
        else:
            k = self.action_size
            shapes = (batch + (k,),) + ((batch,) if k == 1 else ())
            if shape not in shapes:
                lo = [float(x) for x in np.ravel(self.action_low)]
                hi = [float(x) for x in np.ravel(self.action_high)]
                rng = (f"[{lo[0]:g}, {hi[0]:g}]" if len(set(lo)) == 1 and len(set(hi)) == 1
                       else f"[{lo}, {hi}]")
                raise ValueError(f"{where} must have shape {shapes[0]} ({k} number(s) in "
                                 f"{rng} per world) (got shape {shape})")
            if dtype.kind not in "iuf":
                raise TypeError(f"{where} must be real numbers (got dtype {dtype})")
            if arr is not None and not np.all(np.isfinite(arr.astype(np.float64))):
                raise ValueError(f"{where} must be finite (got {action!r})")

    def _action(self, action):
        self.check_action(action)
        if self.num_actions is not None:
            return jnp.asarray(action, jnp.int32).reshape(())
        a = jnp.asarray(action, self.dtype).reshape(self.action_size)
        return jnp.clip(a, jnp.asarray(self.action_low, self.dtype),
                        jnp.asarray(self.action_high, self.dtype))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(obs {self.observation_size}, "
                + (f"{self.num_actions} discrete actions" if self.num_actions is not None
                   else f"{self.action_size} continuous actions")
                + f", control dt {self.control_dt:g} s = {self.frame_skip} x {self.dt:g} s, "
                f"{self.episode_length} steps)")


class AutoReset:
    """Restart finished worlds inside ``step``: Brax's AutoResetWrapper.

    When a step ends an episode (``done``), the returned state keeps that
    step's ``reward``, ``done`` and ``info["truncation"]`` but its physics,
    params, obs and the rest of ``info`` are those of a new episode. With
    ``resample=True`` (default) the new episode is drawn with the key carried
    in the state (new initial state, new randomised params each episode); with
    ``resample=False`` every episode of a world restarts from that world's
    first state and params (the key is kept, so ``reset`` reproduces it).
    """

    def __init__(self, env: Env, resample: bool = True):
        if not isinstance(env, Env):
            raise ValueError(f"AutoReset: env must be a jaxode.envs.Env (got {type(env).__name__})")
        self.env = env
        self.resample = bool(resample)

    def __getattr__(self, name: str) -> Any:
        # spaces, sizes, model, dt, ...: those of the wrapped env
        if name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    reset_batch = Env.reset_batch
    step_batch = Env.step_batch
    _jit = Env._jit

    def reset(self, key: jax.Array) -> EnvState:
        s = self.env.reset(key)
        return s if self.resample else s.replace(key=_raw_key(key))

    def step(self, state: EnvState, action) -> EnvState:
        s = self.env.step(state, action)
        fresh = self.env.reset(s.key)
        if not self.resample:
            fresh = fresh.replace(key=s.key)
        pick = lambda a, b: jnp.where(s.done, a, b)
        new = jax.tree.map(pick, fresh, s)
        info = {**new.info, "truncation": s.info["truncation"]}
        return new.replace(reward=s.reward, done=s.done, info=info)

    def __repr__(self) -> str:
        return f"AutoReset({self.env!r}, resample={self.resample})"
