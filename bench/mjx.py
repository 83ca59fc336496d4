"""The benchmark scenes in MuJoCo's MJCF, and MJX runs in a separate interpreter.

MuJoCo MJX is not a jaxode dependency, and its JAX version need not match
ours, so it runs in whatever Python has ``mujoco.mjx`` installed
(``--mjx-python``, or ``$JAXODE_MJX_PYTHON``; e.g. a venv made with
``python -m venv /tmp/mjxenv && /tmp/mjxenv/bin/pip install mujoco-mjx``).
This module writes each scene as MJCF plus its initial ``qpos``/``qvel``
(same bodies, masses, inertias, sizes, friction, gravity and step as the
jaxode and ODE runs) and runs ``bench/mjx_run.py`` there, which times
``jit(vmap(scan(mjx.step)))`` as bench/__main__ times jaxode.

Differences that belong to MuJoCo, not to the port: soft contacts with its
default solver (Newton, its default iterations and tolerances) instead of
QuickStep's PGS with ERP/CFM; the hinge chain in reduced coordinates (ten
joint angles, no constraint rows), where jaxode and ODE have ten free bodies
and 50 joint rows.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from bench import scenes as S

RUNNER = Path(__file__).resolve().parent / "mjx_run.py"
PORTED = ("boxes", "chain", "stack", "bin_16", "bin_64", "bin_256")


def _v(xs) -> str:
    return " ".join(f"{float(x):.9g}" for x in xs)


def _geom_xml(g) -> str:
    mu = float(g.surface.get("mu", 1.0))
    fr = f'friction="{mu:.9g} 0.005 0.0001"'
    pose = f'pos="{_v(g.pos)}" quat="{_v(g.quat)}"'
    if g.type == "plane":
        n = np.asarray(g.normal, float)
        return (f'<geom type="plane" size="0 0 1" pos="{_v(n * g.offset)}" '
                f'zaxis="{_v(n)}" {fr}/>')
    if g.type == "box":
        return f'<geom type="box" size="{_v(np.asarray(g.size) / 2)}" {pose} {fr}/>'
    if g.type == "sphere":
        return f'<geom type="sphere" size="{g.radius:.9g}" {pose} {fr}/>'
    if g.type == "capsule":
        return f'<geom type="capsule" size="{g.radius:.9g} {g.length / 2:.9g}" {pose} {fr}/>'
    raise ValueError(f"no MJCF port for geom type {g.type!r}")


def _free_body_scene(scene) -> tuple[str, list, list]:
    w = scene.world
    world_geoms = [_geom_xml(g) for g in scene.geoms if g.body is None]
    bodies, qpos, qvel = [], [], []
    for i, b in enumerate(scene.bodies):
        inertia = np.asarray(b.inertia, float)
        full = [inertia[0, 0], inertia[1, 1], inertia[2, 2], inertia[0, 1], inertia[0, 2],
                inertia[1, 2]]
        geoms = "".join(_geom_xml(g) for g in scene.geoms if g.body == i)
        bodies.append(f'<body pos="{_v(b.pos)}" quat="{_v(b.quat)}"><freejoint/>'
                      f'<inertial pos="0 0 0" mass="{b.mass:.9g}" fullinertia="{_v(full)}"/>'
                      f'{geoms}</body>')
        qpos += list(b.pos) + list(b.quat)
        # free joint: linear velocity (world), angular velocity (body frame)
        rot = _quat_mat(b.quat)
        qvel += list(b.vel) + list(rot.T @ np.asarray(b.angvel, float))
    xml = (f'<mujoco><option timestep="{scene.dt:.9g}" gravity="{_v(w.gravity)}"/>'
           f'<worldbody>{"".join(world_geoms)}{"".join(bodies)}</worldbody></mujoco>')
    return xml, qpos, qvel


def _quat_mat(q) -> np.ndarray:
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _chain(nlink: int = 10, length: float = 0.1, tilt: float = 0.5) -> tuple[str, list, list]:
    """bench.scenes.chain in reduced coordinates: nested links, hinges about y."""
    link = ('<body pos="0 0 {z}"><joint type="hinge" axis="0 1 0"/>'
            '<geom type="capsule" fromto="0 0 0 0 0 {l}" size="0.02" mass="0.2"/>')
    xml = "".join(link.format(z=0 if k == 0 else -length, l=-length) for k in range(nlink))
    xml += "</body>" * nlink
    w = S.WORLD
    doc = (f'<mujoco><option timestep="0.01" gravity="{_v(w.gravity)}"/>'
           f'<worldbody>{xml}</worldbody></mujoco>')
    return doc, [tilt] + [0.0] * (nlink - 1), [0.0] * nlink


def mjcf_of(name: str) -> tuple[str, list, list]:
    """(MJCF text, initial qpos, initial qvel) of a benchmark scene."""
    if name == "chain":
        return _chain()
    builder = S.SCENES[name]
    if builder is None or name not in PORTED:
        raise ValueError(f"scene {name!r} has no MJCF port")
    return _free_body_scene(builder())


def mjx_python(arg: str | None) -> str | None:
    """The interpreter to run MJX in: the argument, $JAXODE_MJX_PYTHON, or None."""
    return arg or os.environ.get("JAXODE_MJX_PYTHON") or None


def run_mjx(python: str, name: str, batches: list, steps: int, timeout_s: float = 600) -> list:
    """Time MJX on scene ``name`` at each batch size in interpreter ``python``.

    Returns one dict per batch (world_steps_per_s, compile_s, run_s,
    contacts_per_world) or raises RuntimeError with the runner's error text.
    """
    xml, qpos, qvel = mjcf_of(name)
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "scene.json"
        spec.write_text(json.dumps(dict(xml=xml, qpos=qpos, qvel=qvel, batches=batches,
                                        steps=steps)))
        env = dict(os.environ)
        env.pop("XLA_FLAGS", None)  # MJX on one CPU device, as jaxode's batch 1 column
        proc = subprocess.run([python, str(RUNNER), str(spec)], capture_output=True, text=True,
                              timeout=timeout_s, env=env)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return rows


def mjx_version(python: str) -> str:
    proc = subprocess.run([python, "-c", "import mujoco, jax; print(mujoco.__version__, "
                           "jax.__version__)"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"not usable ({proc.stderr.strip().splitlines()[-1] if proc.stderr else 'error'})"
    mj, jx = proc.stdout.split()
    return f"mujoco-mjx {mj} (jax {jx}) in {python}"


__all__ = ["mjcf_of", "run_mjx", "mjx_python", "mjx_version", "PORTED"]
