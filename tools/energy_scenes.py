"""Joint-chain scenes for the energy checks: the fuzz repro file's format, built
identically in jaxode and in libode (ODE 0.16 double, ``dWorldQuickStep``).

A *case* is the dict of one entry of ``tests/data/energy_gain_vs_ode.json`` (an
outside tester's reproducer, shared/repro's copy kept in the repository):
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
import os
import math
import numpy as np

REPRO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                     "data", "energy_gain_vs_ode.json")

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
    from jaxode.build import mass as mass_lib

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


def build_jaxode(case: dict, iterations: int = 20, geoms: bool = True):
    """The case as a jaxode Model (precision active at call time). Jointed bodies
    collide, as in the libode harness (its near callback makes no exception).
    ``geoms=False``: bodies and joints only (no plane, no collision)."""
    import jaxode

    s, w = case["scene"], case["world"]
    b = jaxode.WorldBuilder(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"],
                            iterations=iterations)

    def surf(i):
        return jaxode.Surface(mu=_f(w["mu"][i]), bounce=float(w["bounce"][i]),
                              bounce_vel=float(w["bounce_vel"][i]))

    if geoms:
        b.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(s["bodies"]):
        i = b.add_body(pos=bd["pos"], quat=bd["quat"], vel=bd["vel"], angvel=bd["angvel"],
                       mass=body_mass(bd))
        if not geoms:
            continue
        add_geom(b, bd, i, surf(k + 1))
    for j in s["joints"]:
        getattr(b, f"add_{j['type']}")(j["body1"], j["body2"], collide=True,
                                       **joint_geometry(j),
                                       **joint_params(j, w["joint_vel_scale"]))
    return b.build()


def build_ode(case: dict, iterations: int = 20, rand_seed: int = 0, geoms: bool = True):
    """The case as an ``odelib.OdeWorld`` (libode, double); ``geoms`` as build_jaxode."""
    from tools.conformance import odelib

    s, w = case["scene"], case["world"]
    world = odelib.OdeWorld(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"],
                            iterations=iterations, rand_seed=rand_seed)

    def surf(i):
        return dict(mu=_f(w["mu"][i]), bounce=float(w["bounce"][i]),
                    bounce_vel=float(w["bounce_vel"][i]))

    if geoms:
        world.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(s["bodies"]):
        m = body_mass(bd)
        i = world.add_body(bd["pos"], quat=bd["quat"], vel=bd["vel"], angvel=bd["angvel"],
                           mass=float(m.mass), inertia=np.asarray(m.inertia))
        if not geoms:
            continue
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


def add_geom(b, bd: dict, body: int, surface) -> None:
    """Add body ``bd``'s collision shape (``bd["shape"]``, ``bd["dims"]``) to builder ``b``."""
    d = bd["dims"]
    if bd["shape"] == "box":
        b.add_box(d["size"], body=body, surface=surface)
    elif bd["shape"] == "sphere":
        b.add_sphere(d["radius"], body=body, surface=surface)
    elif bd["shape"] == "capsule":
        b.add_capsule(d["radius"], d["length"], body=body, surface=surface)
    else:
        b.add_cylinder(d["radius"], d["length"], body=body, surface=surface)


def ode_island_joint_order(case: dict) -> list:
    """The order in which ODE 0.16 hands the case's joints to QuickStep (the
    builder's :func:`jaxode.build.builder.ode_joint_order`, which jaxode now
    sweeps the joint rows in); returns joint indices."""
    from jaxode.build.builder import ode_joint_order
    s = case["scene"]
    return list(ode_joint_order(len(s["bodies"]),
                                [(j["body1"], j["body2"]) for j in s["joints"]]))


# ----------------------------------------------------------------- random chains

#: joint types a random chain may use (hinge2 needs a body on both sides: not first)
CHAIN_TYPES = ("hinge", "ball", "slider", "universal", "hinge2")
SHAPES = ("box", "sphere", "capsule", "cylinder")


def _unit(rng, n=3):
    v = rng.normal(size=n)
    return v / np.linalg.norm(v)


def _loguniform(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def random_chain(seed: int, types=("hinge", "ball", "slider", "universal"),
                 shapes=None, n_steps: int = 400) -> dict:
    """A random chain in the repro file's format: body k hangs from joint k
    (joint 0 to the world), links 0.2-1 m long in random directions, bodies of
    the given shapes (random when None) 2-30 cm, 0.01-1 kg; world ERP 0.1-0.95,
    CFM 1e-9-1e-3, dt 0.1-10 ms, gravity up to 20 m/s^2; each joint axis random,
    stops (p 0.5, with bounce), motors (p 0.3). The structure (joint types and
    shapes) is fixed by the arguments, so chains of one call pattern batch."""
    rng = np.random.default_rng(seed)
    n = len(types)
    shapes = shapes or tuple(rng.choice(SHAPES) for _ in range(n))
    anchor = np.array([0.0, 0.0, 5.0])
    bodies, joints = [], []
    for k, (jt, sh) in enumerate(zip(types, shapes)):
        d = _unit(rng)
        d[2] = -abs(d[2]) * rng.uniform(0, 1)
        d /= np.linalg.norm(d)
        L = rng.uniform(0.2, 1.0)
        pos = anchor + 0.5 * L * d
        if sh == "box":
            dims = {"size": [float(x) for x in rng.uniform(0.02, 0.3, 3)]}
        elif sh == "sphere":
            dims = {"radius": float(rng.uniform(0.01, 0.15))}
        else:
            dims = {"radius": float(rng.uniform(0.01, 0.1)),
                    "length": float(rng.uniform(0.02, 0.3))}
        vel = rng.normal(size=3) * 0.5 if rng.uniform() < 0.5 else np.zeros(3)
        w = rng.normal(size=3) * 1.5 if rng.uniform() < 0.5 else np.zeros(3)
        bodies.append(dict(shape=str(sh), dims=dims, mass=_loguniform(rng, 0.01, 1.0),
                           quat=[1.0, 0.0, 0.0, 0.0], pos=[float(x) for x in pos],
                           vel=[float(x) for x in vel], angvel=[float(x) for x in w]))
        a1 = _unit(rng)
        a2 = np.cross(a1, _unit(rng))
        a2 /= np.linalg.norm(a2)
        params = {}
        rot = jt in ("hinge", "universal", "hinge2")
        if jt != "ball" and rng.uniform() < 0.5:
            r = 1.3 if rot else 0.3
            params.update(lo_stop=float(rng.uniform(-r, 0.0)), hi_stop=float(rng.uniform(0.0, r)),
                          bounce=float(rng.uniform(0.0, 1.0)))
        if jt != "ball" and rng.uniform() < 0.3:
            params.update(vel=float(rng.uniform(-2.0, 2.0)), fmax=_loguniform(rng, 1e-3, 0.5))
        joints.append(dict(type=jt, body1=k, body2=None if k == 0 else k - 1,
                           anchor=[float(x) for x in anchor], axis=[float(x) for x in a1],
                           axis2=[float(x) for x in a2], params=params))
        anchor = anchor + L * d
    g = np.array([rng.normal() * 0.5, rng.normal() * 0.5, -rng.uniform(0.0, 20.0)])
    world = dict(erp=float(rng.uniform(0.1, 0.95)), cfm=_loguniform(rng, 1e-9, 1e-3),
                 dt=_loguniform(rng, 1e-4, 1e-2), gravity=[float(x) for x in g],
                 mu=[1.0] * (n + 1), bounce=[0.0] * (n + 1), bounce_vel=[0.1] * (n + 1),
                 joint_vel_scale=1.0)
    return dict(seed=seed, scene=dict(seed=seed, kind="chain", bodies=bodies, joints=joints,
                                      n_steps=n_steps), world=world)


def rollout_batch(cases: list, n_steps: int, iterations: int = 20, geoms: bool = False):
    """Every case in ONE vmapped jaxode rollout (precision active at call time).

    The cases must share their structure (joint types, number of bodies, and with
    ``geoms`` their shapes); everything else (geometry, masses, parameters, dt,
    initial state) is per world: the models themselves are stacked and vmapped.
    Returns numpy (worlds, steps, nbody, k) arrays pos, quat, vel, angvel."""
    import jax
    import jax.numpy as jnp

    import jaxode

    models = [build_jaxode(c, iterations=iterations, geoms=geoms) for c in cases]
    states = [jaxode.init(m) for m in models]
    stack = lambda *x: jnp.stack(x)  # noqa: E731
    model = jax.tree.map(stack, *models)
    state = jax.tree.map(stack, *states)
    dts = jnp.asarray([c["world"]["dt"] for c in cases], state.pos.dtype)
    fn = _batched_rollout(n_steps)
    pos, quat, vel, angvel = fn(model, state, dts)
    return {k: np.asarray(v, np.float64) for k, v in
            zip(("pos", "quat", "vel", "angvel"), (pos, quat, vel, angvel))}


_ROLLOUTS: dict = {}


def _batched_rollout(n_steps: int):
    """jit(vmap(rollout)) over (model, state, dt), cached per step count (jit
    caches per structure and precision underneath)."""
    import jax

    import jaxode

    if n_steps not in _ROLLOUTS:
        def one(model, state, dt):
            tr = jaxode.rollout(model, state, n_steps, dt)[1]
            return tr.pos, tr.quat, tr.vel, tr.angvel

        _ROLLOUTS[n_steps] = jax.jit(jax.vmap(one))
    return _ROLLOUTS[n_steps]


def run_ode(case: dict, n_steps: int, iterations: int = 20, geoms: bool = True,
            rand_seed: int = 0) -> dict:
    """The case stepped in libode: numpy (steps, nbody, k) pos, quat, vel, angvel."""
    w = build_ode(case, iterations=iterations, geoms=geoms, rand_seed=rand_seed)
    try:
        out = []
        for _ in range(n_steps):
            w.step(case["world"]["dt"])
            out.append(w.state())
    finally:
        w.close()
    return {k: np.stack([o[k] for o in out]) for k in ("pos", "quat", "vel", "angvel")}


def initial(case: dict) -> dict:
    b = case["scene"]["bodies"]
    return {k: np.array([x[k] for x in b], np.float64) for k in ("pos", "quat", "vel", "angvel")}


def energy_report(case: dict, traj: dict) -> dict:
    """Kinetic energy per step, the budget per step and whether it was exceeded
    (or the state went non-finite); ``traj`` (steps, nbody, k) arrays."""
    mass, inertia = inertias(case)
    ini = initial(case)
    ke0 = float(kinetic_energy(mass, inertia, ini["quat"], ini["vel"], ini["angvel"]))
    finite = bool(all(np.all(np.isfinite(traj[k])) for k in traj))
    with np.errstate(all="ignore"):
        ke = kinetic_energy(mass, inertia, traj["quat"], traj["vel"], traj["angvel"])
        budget = energy_budget(case, ke0, ini["pos"], traj["pos"])
        over = bool(np.any(~(ke <= budget)))
    return dict(ke0=ke0, ke=ke, budget=budget, finite=finite, exploded=over or not finite)
