"""Joint-chain scenes for the energy checks: the fuzz repro file's format, built
identically in jaxode and in libode (ODE 0.16 double, ``dWorldQuickStep``).

A *case* is the dict of one entry of ``/work/shared/repro/energy_gain_vs_ode.json``:
``case["scene"]`` = bodies (shape, dims, mass [kg] with the shape's
uniform-density inertia, pos, quat w-first, vel, angvel), joints (type, body1,
body2 (None = world), anchor, axis, axis2, params named as jaxode's builder
names them) and ``n_steps``; ``case["world"]`` = erp, cfm, dt [s], gravity,
mu/bounce/bounce_vel per geom (geom 0 = the plane z = 0, geom k+1 = body k;
"inf" = infinite mu) and joint_vel_scale (multiplies every joint's motor vel).

Also: :func:`random_chain` (the random chains of the fuzz slice and campaign)
and the energy budget (:func:`energy_budget`).
"""
from __future__ import annotations

import json
import math
from typing import Optional

import numpy as np

REPRO = "/work/shared/repro/energy_gain_vs_ode.json"

# axis keyword per joint type (the JSON's "axis"/"axis2" -> the builders' names)
_AXES = {"hinge": ("axis", None), "slider": ("axis", None), "ball": (None, None),
         "universal": ("axis1", "axis2"), "hinge2": ("axis1", "axis2")}
_ANCHOR = {"hinge", "ball", "universal", "hinge2"}


def load_cases(path: str = REPRO) -> list:
    with open(path) as f:
        return json.load(f)["cases"]


def _f(x) -> float:
    return math.inf if x == "inf" else float(x)


def body_mass(b: dict):
    """The body's jaxode ``Mass`` (uniform density, total = b["mass"])."""
    from jaxode import mass as mass_lib

    d, m = b["dims"], float(b["mass"])
    if b["shape"] == "box":
        return mass_lib.box(d["size"], total=m)
    if b["shape"] == "sphere":
        return mass_lib.sphere(d["radius"], total=m)
    if b["shape"] == "capsule":
        return mass_lib.capsule(d["radius"], d["length"], total=m)
    if b["shape"] == "cylinder":
        return mass_lib.cylinder(d["radius"], d["length"], total=m)
    raise ValueError(b["shape"])


def joint_geometry(j: dict) -> dict:
    geo = {}
    if j["type"] in _ANCHOR:
        geo["anchor"] = tuple(j["anchor"])
    a1, a2 = _AXES[j["type"]]
    if a1:
        geo[a1] = tuple(j["axis"])
    if a2:
        geo[a2] = tuple(j["axis2"])
    return geo


def joint_params(j: dict, vel_scale: float) -> dict:
    p = dict(j.get("params") or {})
    for k in list(p):
        if k.startswith("vel"):
            p[k] = float(p[k]) * vel_scale
    return p


def build_jaxode(case: dict, iterations: int = 20):
    """The case as a jaxode Model (precision active at call time). Jointed bodies
    collide, as in the libode harness (its near callback makes no exception)."""
    import jaxode

    s, w = case["scene"], case["world"]
    b = jaxode.WorldBuilder(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"],
                            iterations=iterations)

    def surf(i):
        return jaxode.Surface(mu=_f(w["mu"][i]), bounce=float(w["bounce"][i]),
                              bounce_vel=float(w["bounce_vel"][i]))

    b.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(s["bodies"]):
        i = b.add_body(pos=bd["pos"], quat=bd["quat"], vel=bd["vel"], angvel=bd["angvel"],
                       mass=body_mass(bd))
        d = bd["dims"]
        if bd["shape"] == "box":
            b.add_box(d["size"], body=i, surface=surf(k + 1))
        elif bd["shape"] == "sphere":
            b.add_sphere(d["radius"], body=i, surface=surf(k + 1))
        elif bd["shape"] == "capsule":
            b.add_capsule(d["radius"], d["length"], body=i, surface=surf(k + 1))
        else:
            b.add_cylinder(d["radius"], d["length"], body=i, surface=surf(k + 1))
    for j in s["joints"]:
        getattr(b, f"add_{j['type']}")(j["body1"], j["body2"], collide=True,
                                       **joint_geometry(j),
                                       **joint_params(j, w["joint_vel_scale"]))
    return b.build()


def build_ode(case: dict, iterations: int = 20, rand_seed: int = 0):
    """The case as an ``odelib.OdeWorld`` (libode, double)."""
    from jaxode.conformance import odelib

    s, w = case["scene"], case["world"]
    world = odelib.OdeWorld(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"],
                            iterations=iterations, rand_seed=rand_seed)

    def surf(i):
        return dict(mu=_f(w["mu"][i]), bounce=float(w["bounce"][i]),
                    bounce_vel=float(w["bounce_vel"][i]))

    world.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(s["bodies"]):
        m = body_mass(bd)
        i = world.add_body(bd["pos"], quat=bd["quat"], vel=bd["vel"], angvel=bd["angvel"],
                           mass=float(m.mass), inertia=np.asarray(m.inertia))
        d = bd["dims"]
        if bd["shape"] == "box":
            world.add_box(d["size"], body=i, surface=surf(k + 1))
        elif bd["shape"] == "sphere":
            world.add_sphere(d["radius"], body=i, surface=surf(k + 1))
        elif bd["shape"] == "capsule":
            world.add_capsule(d["radius"], d["length"], body=i, surface=surf(k + 1))
        else:
            world.add_cylinder(d["radius"], d["length"], body=i, surface=surf(k + 1))
    for j in s["joints"]:
        world.add_joint(j["type"], j["body1"], j["body2"], **joint_geometry(j),
                        **joint_params(j, w["joint_vel_scale"]))
    return world


def inertias(case: dict):
    """(mass (N,), body-frame inertia (N, 3, 3)) of the case's bodies."""
    ms = [body_mass(b) for b in case["scene"]["bodies"]]
    return (np.array([m.mass for m in ms]), np.stack([np.asarray(m.inertia) for m in ms]))


def _quat_to_mat(q):
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def kinetic_energy(mass, inertia, quat, vel, angvel) -> np.ndarray:
    """Total kinetic energy [J]; arrays (..., N, k): sums over the bodies."""
    vel, angvel = np.asarray(vel, np.float64), np.asarray(angvel, np.float64)
    r = _quat_to_mat(quat)
    wb = np.einsum("...nji,...nj->...ni", r, angvel)          # body-frame angvel
    rot = 0.5 * np.einsum("...ni,nij,...nj->...n", wb, inertia, wb)
    lin = 0.5 * mass * np.sum(vel * vel, axis=-1)
    return np.sum(lin + rot, axis=-1)


def gravity_work(case: dict, pos0, pos) -> np.ndarray:
    """Work [J] gravity has done on the bodies from ``pos0`` (N, 3) to ``pos``
    (..., N, 3): sum of m g . (x - x0)."""
    mass, _ = inertias(case)
    g = np.asarray(case["world"]["gravity"], np.float64)
    return np.einsum("n,...ni,i->...", mass, np.asarray(pos, np.float64) - np.asarray(pos0), g)


def motor_work_rate(case: dict) -> float:
    """Upper bound of the motors' power [W]: a motor row pushes with at most fmax
    toward its target speed, so it does positive work only while the joint rate
    lies between 0 and vel: power <= fmax |vel| per powered axis."""
    w = case["world"]
    out = 0.0
    for j in case["scene"]["joints"]:
        p = joint_params(j, w["joint_vel_scale"])
        for suf in ("", "2", "3"):
            if p.get("fmax" + suf, 0.0) > 0:
                out += p["fmax" + suf] * abs(p.get("vel" + suf, 0.0))
    return out


def energy_budget(case: dict, ke0: float, pos0, pos) -> np.ndarray:
    """The fuzz campaign's explosion threshold [J] after each step of a
    trajectory ``pos`` (steps, N, 3): 10 x (initial kinetic energy + the work
    gravity has done so far + the motors' work bound so far). A world
    "explodes" when its kinetic energy passes this at any step."""
    steps = np.asarray(pos).shape[0]
    t = case["world"]["dt"] * np.arange(1, steps + 1)
    wg = np.maximum(gravity_work(case, pos0, pos), 0.0)
    return 10.0 * (ke0 + wg + motor_work_rate(case) * t)


def ode_island_joint_order(case: dict) -> list:
    """The order in which ODE 0.16 hands the case's joints to QuickStep
    (dxProcessIslands, util.cpp): bodies and joints are prepended to the world's
    lists and a joint to each body's list when attached, and the island is built
    depth first from world->firstbody (the last body created). Only for bodies
    that form one island through joints; returns joint indices."""
    s = case["scene"]
    nb, joints = len(s["bodies"]), s["joints"]
    lists = {b: [] for b in range(nb)}
    for ji, j in enumerate(joints):
        for b in (j["body1"], j["body2"]):
            if b is not None:
                lists[b].insert(0, ji)
    tagged_b, tagged_j, order = set(), set(), []
    for bb in reversed(range(nb)):
        if bb in tagged_b:
            continue
        tagged_b.add(bb)
        stack, b = [], bb
        while True:
            for ji in lists[b]:
                if ji in tagged_j:
                    continue
                tagged_j.add(ji)
                order.append(ji)
                j = joints[ji]
                other = j["body2"] if j["body1"] == b else j["body1"]
                if other is not None and other not in tagged_b:
                    tagged_b.add(other)
                    stack.append(other)
            if not stack:
                break
            b = stack.pop()
    return order
