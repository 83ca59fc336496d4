"""Run a conformance scene in libode (double) and in jaxode (float64 and float32).

:func:`run_scene` returns a :class:`SceneResult` with the three trajectories'
metric values, the errors against ODE and the pass/fail verdicts against the
scene's tolerances. jaxode's rollout is jitted per model *structure*, so
scenes with the same bodies/geoms/steps reuse one compiled function per
precision (only the arrays of the model differ). :func:`run_batch` steps the
worlds of a :class:`BatchScene` in one ``jax.vmap``-ed call.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from tools.conformance.scenes import BatchScene, Scene, build_jaxode, build_ode, metric_value

_KEYS = ("pos", "quat", "vel", "angvel")


@dataclasses.dataclass
class SceneResult:
    name: str
    scene: Scene
    metric_label: str
    ode: np.ndarray
    f64: np.ndarray
    f32: np.ndarray
    traj_err64: float  # max |pos_jaxode64 - pos_ode| over steps and bodies
    traj_err32: float
    err64: float  # the error judged against tol.f64
    err32: float  # the error judged against tol.f32
    tol64: float
    tol32: float
    ode_spread: Optional[float] = None  # max-min of ODE's metric over SPREAD_SEEDS (metric scenes)

    @property
    def ok64(self) -> bool:
        return bool(self.err64 <= self.tol64)

    @property
    def ok32(self) -> bool:
        return bool(self.err32 <= self.tol32)

    @property
    def ok(self) -> bool:
        return self.ok64 and self.ok32


def run_ode(scene: Scene, stepper: str = "quick") -> dict:
    """Trajectory of the scene in libode: dict of (steps, nbody, k) arrays
    (``stepper``: "quick" dWorldQuickStep, "step" dWorldStep)."""
    w = build_ode(scene, stepper=stepper)
    try:
        out = []
        for _ in range(scene.steps):
            w.step(scene.dt)
            out.append(w.state())
    finally:
        w.close()
    return {k: np.stack([o[k] for o in out]) for k in _KEYS}


def _traj_np(traj) -> dict:
    return {k: np.asarray(getattr(traj, k), dtype=np.float64) for k in _KEYS}


def run_jaxode(scene: Scene, x64: bool, solver: str = "pgs") -> dict:
    """Trajectory of the scene in jaxode, float64 (``x64``) or float32."""
    with jax.enable_x64(x64):
        model = build_jaxode(scene, solver=solver)
        _, traj = jaxode.rollout(model, jaxode.init(model), scene.steps, scene.dt)
        return _traj_np(traj)


def _errors(scene: Scene, ode: dict, ours: dict):
    m_ode, m_ours = metric_value(scene, ode), metric_value(scene, ours)
    traj = float(np.max(np.abs(ours["pos"] - ode["pos"])))
    metric = float(np.max(np.abs(m_ours - m_ode)))
    judged = max(traj, metric) if scene.tol.check == "trajectory" else metric
    return m_ours, traj, judged


def ode_spread(scene: Scene) -> float:
    """How much ODE's own metric moves with the RNG seed of its row shuffle: max - min
    (largest component) over ``scenes.SPREAD_SEEDS``."""
    from tools.conformance.scenes import SPREAD_SEEDS

    vals = np.array([metric_value(scene, run_ode(dataclasses.replace(scene, rand_seed=s)))
                     for s in SPREAD_SEEDS])
    return float(np.max(np.ptp(vals.reshape(len(SPREAD_SEEDS), -1), axis=0)))


def compare(scene: Scene, ode: dict, f64: dict, f32: Optional[dict], name: Optional[str] = None
            ) -> SceneResult:
    """The errors of jaxode against ODE; ``f32=None`` (float32 not run) gives NaN
    float32 errors, which fail ``ok32``."""
    from tools.conformance.scenes import METRICS

    m64, traj64, err64 = _errors(scene, ode, f64)
    m32, traj32, err32 = _errors(scene, ode, f32) if f32 is not None else (None, np.nan, np.nan)
    return SceneResult(
        name=name or scene.name, scene=scene, metric_label=METRICS[scene.metric][0],
        ode=metric_value(scene, ode), f64=m64, f32=m32, traj_err64=traj64, traj_err32=traj32,
        err64=err64, err32=err32, tol64=scene.tol.f64, tol32=scene.tol.f32,
        ode_spread=ode_spread(scene) if scene.tol.check == "metric" else None)


def run_scene(scene: Scene) -> SceneResult:
    """ODE (double), jaxode float64 and jaxode float32 on one scene, compared."""
    return compare(scene, run_ode(scene), run_jaxode(scene, True), run_jaxode(scene, False))


@dataclasses.dataclass
class DirectResult:
    """jaxode ``solver="direct"`` (float64) against ODE's ``dWorldStep`` on one scene:
    the largest position / velocity / angular velocity difference over every step
    and body, the metric values and the trajectory tolerance."""

    name: str
    scene: Scene
    metric_label: str
    ode: np.ndarray
    f64: np.ndarray
    pos_err: float
    vel_err: float
    angvel_err: float
    tol: float

    @property
    def ok(self) -> bool:
        return bool(self.pos_err <= self.tol)


def run_direct(scene: Scene) -> DirectResult:
    """The scene stepped by dWorldStep in libode and by jaxode's ``direct`` solver
    in float64, compared on the whole trajectory."""
    from tools.conformance.scenes import METRICS

    ode = run_ode(scene, stepper="step")
    ours = run_jaxode(scene, True, solver="direct")
    err = {k: float(np.max(np.abs(ours[k] - ode[k]))) for k in ("pos", "vel", "angvel")}
    return DirectResult(scene.name, scene, METRICS[scene.metric][0], metric_value(scene, ode),
                        metric_value(scene, ours), err["pos"], err["vel"], err["angvel"],
                        scene.tol.f64)


# --------------------------------------------------------------------- batches


def _stack(trees):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _fixed_part(model):
    """The model without what may differ between the worlds of one vmapped call:
    the Params and the initial state (``init_*``: only :func:`jaxode.init` reads
    them, and each world's own ``init`` is passed to the rollout)."""
    return model.replace(params=None, init_pos=None, init_quat=None, init_vel=None,
                         init_angvel=None)


def _same_structure(models) -> None:
    """Worlds of a batch may differ in Params and initial state only."""
    ref = _fixed_part(models[0])
    for m in map(_fixed_part, models[1:]):
        if jax.tree.structure(ref) != jax.tree.structure(m):
            raise ValueError("batch worlds must have the same structure")
        for x, y in zip(jax.tree.leaves(ref), jax.tree.leaves(m)):
            if not np.array_equal(np.asarray(x), np.asarray(y)):
                raise ValueError("batch worlds may differ only in parameters and initial state "
                                 "(geometry / flags must be equal)")


def _batchable(models, worlds) -> bool:
    try:
        _same_structure(models)
    except ValueError:
        return False
    return all(w.steps == worlds[0].steps and w.dt == worlds[0].dt for w in worlds)


def run_jaxode_vmapped(worlds, x64: bool) -> list[dict]:
    """Worlds of one structure (equal geometry, steps, dt; any Params and initial
    state) in ONE vmapped jaxode rollout; one trajectory per world."""
    worlds = list(worlds)
    steps, dt = worlds[0].steps, worlds[0].dt
    if any(w.steps != steps or w.dt != dt for w in worlds):
        raise ValueError("vmapped worlds need the same steps and dt")
    with jax.enable_x64(x64):
        models = [build_jaxode(w) for w in worlds]
        _same_structure(models)
        model = models[0]
        params = _stack([m.params for m in models])
        states = _stack([jaxode.init(m) for m in models])
        _, traj = jax.vmap(lambda s, p: jaxode.rollout(model, s, steps, dt, params=p))(states, params)
        traj = _traj_np(traj)
    return [{k: v[i] for k, v in traj.items()} for i in range(len(worlds))]


def batch_world_name(batch: BatchScene, world: Scene) -> str:
    return f"{batch.name}/{world.name}"


def plan(scenes, batches, x64: bool = True) -> tuple[list, list]:
    """Split the work into vmapped calls and single scenes.

    Each batch becomes one vmapped call; plain scenes of the same structure that
    could ride along (same geometry, steps, dt) join it, which saves their own
    compilation. Returns (calls, singles): calls = [(names, worlds)], singles =
    scenes run one by one (scenes of one structure still share a compiled
    rollout through jit's cache)."""
    singles = list(scenes)
    calls = []
    with jax.enable_x64(x64):
        for b in batches:
            worlds = list(b.worlds)
            names = [batch_world_name(b, w) for w in worlds]
            key = worlds[0].structure()
            ref = build_jaxode(worlds[0])
            for s in list(singles):
                if s.structure() == key and s.dt == worlds[0].dt and _batchable(
                        [ref, build_jaxode(s)], [worlds[0], s]):
                    worlds.append(s)
                    names.append(s.name)
                    singles.remove(s)
            calls.append((names, worlds))
    return calls, singles


def run_jaxode_all(scenes, batches, x64: bool, progress=None, singles: bool = True) -> dict:
    """jaxode trajectories of every scene and batch world, keyed by result name
    (``singles=False``: only the vmapped calls, i.e. the batch worlds and the
    scenes that ride along with them)."""
    calls, singles_ = plan(scenes, batches, x64)
    singles_ = singles_ if singles else []
    out = {}
    for names, worlds in calls:
        for n, t in zip(names, run_jaxode_vmapped(worlds, x64)):
            out[n] = t
        if progress:
            progress(f"jaxode {'f64' if x64 else 'f32'}: vmapped {len(worlds)} worlds")
    for s in sorted(singles_, key=lambda s: repr(s.structure())):
        out[s.name] = run_jaxode(s, x64)
        if progress:
            progress(f"jaxode {'f64' if x64 else 'f32'}: {s.name}")
    return out


def run_all(scenes=None, batches=None, progress: Optional[Callable] = None,
            f32_singles: bool = True) -> list[SceneResult]:
    """Every scene and batch world: ODE, jaxode f64, jaxode f32, compared.

    Returns the plain scenes' results in order, then the batch worlds'. With
    ``f32_singles=False`` float32 runs only in the vmapped calls (one compile per
    batch instead of one per scene structure); the other scenes' float32 errors
    are NaN."""
    from tools.conformance.scenes import BATCH_SCENES, SCENES

    scenes = list(SCENES if scenes is None else scenes)
    batches = list(BATCH_SCENES if batches is None else batches)
    f64 = run_jaxode_all(scenes, batches, True, progress)
    f32 = run_jaxode_all(scenes, batches, False, progress, singles=f32_singles)
    items = [(s.name, s) for s in scenes] + [
        (batch_world_name(b, w), w) for b in batches for w in b.worlds]
    out = []
    for name, s in items:
        out.append(compare(s, run_ode(s), f64[name], f32.get(name), name=name))
        if progress:
            progress(out[-1])
    return out


def versions() -> dict:
    """libode configuration string and package version, jax version."""
    import ctypes
    import subprocess

    from tools.conformance import odelib

    info = {"jax": jax.__version__, "jaxode": jaxode.__version__}
    lib = odelib.load()
    try:
        fn = lib.dGetConfiguration
        fn.restype = ctypes.c_char_p
        fn.argtypes = []
        info["ode_config"] = fn().decode()
    except AttributeError:
        info["ode_config"] = "unknown (no dGetConfiguration)"
    info["ode_library"] = getattr(lib, "_name", "?")
    try:
        v = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libode8"], capture_output=True,
                           text=True, timeout=10)
        info["ode_package"] = f"libode8 {v.stdout.strip()}" if v.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        info["ode_package"] = "unknown"
    return info
