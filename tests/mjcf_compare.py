"""Compare a model loaded by ``jaxode.load_mjcf`` with the same file compiled by
MuJoCo (the ``mujoco`` package): bodies, masses, inertias and joint frames at
qpos0. Used by tests/test_mjcf.py; needs ``mujoco`` (extra ``mjcf-test``).

MuJoCo keeps one body per ``<body>``; jaxode merges bodies without joints into
their parent's ODE body and adds intermediate ODE bodies for bodies with
several joints. So the comparison is per ODE body group, in the world frame:
total mass, centre of mass, and the inertia tensor about the centre of mass
(MuJoCo: ``body_mass``, ``xipos``, ``ximat diag(body_inertia) ximat^T`` after
``mj_kinematics``, which is ``body_iquat`` composed with the body pose; jaxode:
``pos``, ``quat`` and the body-frame ``inertia`` of the builder's bodies).
"""
from __future__ import annotations

import numpy as np

from jaxode.build.builder import _quat_to_mat


def _about(mass, com, inertia_world, at):
    """Inertia about point ``at`` from the inertia about ``com`` (parallel axes)."""
    d = com - at
    return inertia_world + mass * (d @ d * np.eye(3) - np.outer(d, d))


def _combine(items):
    """items: (mass, com (3,), world inertia about com) -> the same for the sum."""
    m = sum(x[0] for x in items)
    c = sum(x[0] * x[1] for x in items) / m
    return m, c, sum(_about(x[0], x[1], x[2], c) for x in items)


def compare(path: str):  # a file path or MJCF text
    """Largest relative errors (mass, com, inertia tensor, principal moments,
    joint axis, joint anchor)
    between jaxode's and MuJoCo's model of ``path``, and the number of groups
    and joints compared."""
    import mujoco

    import jaxode
    m = (mujoco.MjModel.from_xml_string(path) if path.lstrip().startswith("<")
         else mujoco.MjModel.from_xml_path(path))
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    b = jaxode.load_mjcf(path)
    info = b.mjcf_info
    groups: dict[int, list] = {}
    for i in range(1, m.nbody):
        name = m.body(i).name
        ode = info["bodies"][name]
        if ode is None:
            continue
        R = d.ximat[i].reshape(3, 3)
        groups.setdefault(ode, []).append(
            (float(m.body_mass[i]), d.xipos[i].copy(), R @ np.diag(m.body_inertia[i]) @ R.T))
    mine: dict[int, list] = {}
    for name, chain in info["intermediates"].items():
        for k in chain:
            mine.setdefault(info["bodies"][name], []).append(k)
    err = dict(mass=0.0, com=0.0, inertia=0.0, principal=0.0, axis=0.0, anchor=0.0)
    for ode, items in groups.items():
        mm, cm, Im = _combine(items)
        ours = []
        for k in [ode] + mine.get(ode, []):
            bb = b.bodies[k]
            R = _quat_to_mat(bb["quat"])
            ours.append((bb["mass"], np.asarray(bb["pos"]), R @ bb["inertia"] @ R.T))
        mo, co, Io = _combine(ours)
        scale = max(1e-300, float(np.abs(Im).max()))
        length = max(1e-3, float(np.sqrt(np.abs(Im).max() / mm)))
        err["mass"] = max(err["mass"], abs(mo - mm) / mm)
        err["com"] = max(err["com"], float(np.abs(co - cm).max()) / length)
        err["inertia"] = max(err["inertia"], float(np.abs(Io - Im).max()) / scale)
        err["principal"] = max(err["principal"], float(np.abs(
            np.linalg.eigvalsh(Io) - np.linalg.eigvalsh(Im)).max()) / scale)
    nj = 0
    for j in range(m.njnt):
        name = m.joint(j).name
        if not name or name not in info["joints"] or m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            continue
        g = b.joints[info["joints"][name]]["geometry"]
        nj += 1
        if "axis" in g and m.jnt_type[j] != mujoco.mjtJoint.mjJNT_BALL:
            err["axis"] = max(err["axis"], float(np.abs(np.asarray(g["axis"]) - d.xaxis[j]).max()))
        if "anchor" in g:
            err["anchor"] = max(err["anchor"],
                                float(np.abs(np.asarray(g["anchor"]) - d.xanchor[j]).max()))
    covered = set(groups) | {k for ks in mine.values() for k in ks}
    if covered != set(range(len(b.bodies))):
        raise AssertionError(f"ODE bodies not matched to MuJoCo bodies: "
                             f"{sorted(set(range(len(b.bodies))) - covered)}")
    return err, len(groups), nj
