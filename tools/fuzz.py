"""Reliability fuzz campaign: random scenes, batched in jaxode, failures replayed in ODE.

A *template* fixes a scene's structure (family, joint types, body shapes,
friction model): one compiled rollout per template and precision. Each
*chunk* of a template draws a new random geometry (link lengths and
directions, body sizes, joint axes; ``rng([seed, template, chunk])``) and
``--worlds`` random worlds on it (``rng([seed, template, chunk, world])``):
world ERP/CFM/dt/gravity/max correcting velocity, body masses (inertia of
the shape at uniform density), initial velocities, per-geom friction,
bounce and soft ERP/CFM, per-joint stops (with bounce, stop ERP/CFM), motors,
fudge factor and motor CFM -- every value inside the range that
:mod:`jaxode.params_spec` documents. The worlds differ only in
:class:`jaxode.Params`, the initial velocities and dt, so one chunk is ONE
``jit(vmap(rollout))`` call over (state, params, dt) on the chunk's model.

Families: ``chain`` (a hanging joint chain, bodies and joints only, no
collision), ``mixed`` (a chain anchored low, colliding with the ground and
itself; it starts with every bounding sphere CLEARANCE from the plane and from
the others, :func:`_clear_link`) and ``pile`` (free boxes, spheres, capsules and cylinders dropped in
a column onto the plane z = 0). Joint types: hinge, slider, ball, universal,
hinge-2, fixed, PR, PU and piston. Friction models: pyramid, box (both ODE's)
and cone (Gazebo's cone_model; libode has no cone: its replay uses pyramid,
and a failing cone world counts against ODE only when jaxode with pyramid
friction fails too, :func:`pyramid_verdicts`; otherwise it is counted as
``exploded_cone_only`` / ``deep_cone_only``, with no reference).

Counted per world-rollout (``--steps`` steps):

* ``exploded``: the kinetic energy passes 10 x (initial kinetic energy + the
  positive work gravity has done so far + the motors' work bound fmax |vel|
  t + 1e-4 J) at some step -- "energy from nowhere" (with E = KE + PE this is
  E(t) - E(0) > 9 KE0 + 10 W_motor + ...; contacts and stops only take energy
  out in an exact solver, ERP corrections put back little);
* ``nonfinite``: State.nonfinite set or a non-finite trajectory value;
* ``deep``: a contact deeper than ``DEEP`` = 5 cm at some step (max
  penetration is also summarised);
* ``overflow``: the pair or contact overflow counters are non-zero.

Every exploded, non-finite or deep world is replayed in libode (ODE 0.16
double, dWorldQuickStep, same scene and parameters; tools.conformance.odelib)
with ODE's row-shuffle generator seeded 0: "ODE also" when ODE fails the
same check, otherwise it is replayed with seeds 1..15 ("ODE other seed" when
one fails there) and counted "jaxode only" when ODE is calm for all 16 (a
deep world counts for ODE too when ODE's deepest contact reaches 5 cm or half
of jaxode's).

    PYTHONPATH=. nice -n 10 python tools/fuzz.py --worlds 256 --chunks 0:4 \\
        --out fuzz_f32.json [--x64] [--templates 0,3,7]
    PYTHONPATH=. python tools/fuzz.py --replay T:C:W [--seed S] [--x64]   # one world
    PYTHONPATH=. python tools/fuzz.py --table fuzz_f32.json fuzz_f64.json
    PYTHONPATH=. python tools/fuzz.py --symmetric fuzz_f32.json --per-unit 100  # ODE-only, sampled

The results file is rewritten after each chunk; a rerun with the same file
skips the (template, chunk, precision) units already in it (resumable; split
a campaign by ``--chunks`` ranges or ``--templates`` over processes).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools import energy_scenes as es  # noqa: E402

#: contact depth [m] counted as deep penetration
DEEP = 0.05
#: the energy check's factor and absolute floor [J]
FACTOR = 10.0
FLOOR = 1e-4
#: extra ODE row-shuffle seeds tried before a world counts as "jaxode only": on
#: the ill-conditioned chains ODE's own outcome depends on the seed (one slider
#: chain explodes for 5 of seeds 0-15 and stays calm for seeds 0-3)
ODE_SEEDS = tuple(range(1, 16))

ROT, LIN = "rot", "lin"
#: per joint type: the axes (param suffix, kind) the campaign puts stops and motors on
AXES = {"hinge": (("", ROT),), "slider": (("", LIN),), "ball": (), "fixed": (),
        "universal": (("", ROT), ("2", ROT)), "hinge2": (("", ROT),),
        "pu": (("", ROT), ("3", LIN)), "pr": (("", LIN), ("2", ROT)), "piston": (("", LIN),)}
#: hinge-2's second axis takes a motor but no stops
MOTOR_ONLY = {"hinge2": ("2",)}


@dataclasses.dataclass(frozen=True)
class Template:
    name: str
    family: str          # chain | mixed | pile
    joints: tuple        # joint types (chain/mixed), () for piles
    shapes: tuple        # body shapes
    friction: str = "pyramid"


TEMPLATES = (
    Template("hinge x5", "chain", ("hinge",) * 5, ("box", "capsule", "sphere", "cylinder", "box")),
    Template("slider x4", "chain", ("slider",) * 4, ("box", "sphere", "capsule", "cylinder")),
    Template("ball x5", "chain", ("ball",) * 5, ("capsule", "box", "sphere", "cylinder", "box")),
    Template("universal x4", "chain", ("universal",) * 4, ("box", "capsule", "cylinder", "sphere")),
    Template("hinge+hinge2 x3", "chain", ("hinge", "hinge2", "hinge2", "hinge2"),
             ("box", "cylinder", "sphere", "capsule")),
    Template("fixed mix", "chain", ("hinge", "fixed", "ball", "fixed", "hinge"),
             ("box", "sphere", "capsule", "box", "cylinder")),
    Template("pr/pu/piston", "chain", ("hinge", "pr", "pu", "piston"),
             ("box", "capsule", "sphere", "cylinder")),
    Template("all types", "chain", ("slider", "ball", "universal", "hinge2", "pu", "hinge"),
             ("box", "capsule", "sphere", "cylinder", "box", "sphere")),
    Template("mixed hinge pyramid", "mixed", ("hinge", "hinge", "ball"), ("box", "capsule", "sphere")),
    Template("mixed universal box", "mixed", ("universal", "slider", "hinge"),
             ("capsule", "box", "cylinder"), friction="box"),
    Template("mixed hinge2 cone", "mixed", ("ball", "hinge2", "pr"), ("box", "sphere", "capsule"),
             friction="cone"),
    Template("pile boxes", "pile", (), ("box",) * 4),
    Template("pile spheres box-fr", "pile", (), ("sphere",) * 4, friction="box"),
    Template("pile capsules+cylinders cone", "pile", (), ("capsule", "cylinder", "capsule", "cylinder"),
             friction="cone"),
    Template("pile mixed", "pile", (), ("box", "sphere", "capsule", "cylinder", "box")),
    # small structures for the default test tier (tests/test_fuzz_slice.py): quick to compile
    Template("small chain", "chain", ("hinge", "pu", "slider"), ("box", "capsule", "sphere")),
    Template("small mixed", "mixed", ("ball", "hinge"), ("capsule", "box"), friction="box"),
)


# ------------------------------------------------------------------ generation

def _unit(rng, n=3):
    v = rng.normal(size=n)
    return v / np.linalg.norm(v)


def _logu(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _dims(rng, shape):
    if shape == "box":
        return {"size": [float(x) for x in rng.uniform(0.03, 0.3, 3)]}
    if shape == "sphere":
        return {"radius": float(rng.uniform(0.02, 0.15))}
    return {"radius": float(rng.uniform(0.02, 0.1)), "length": float(rng.uniform(0.03, 0.3))}


def _extent(dims) -> float:
    """Half the largest extent of a shape [m] (a bounding radius)."""
    if "size" in dims:
        return 0.5 * float(np.linalg.norm(dims["size"]))
    return float(dims["radius"] + 0.5 * dims.get("length", 0.0))


#: mixed chains: the gap [m] every body's bounding sphere starts at, from the
#: plane and from the other bodies' bounding spheres
CLEARANCE = 0.01


def _clear_link(rng, anchor, r, centres, radii, tries: int = 64):
    """A mixed chain's next link (direction d, length L) from ``anchor``: L in
    U(0.15, 0.5) m but at least 2 r + CLEARANCE (the body's bounding sphere of
    radius ``r`` then leaves the joint anchors clear), d pointing down-ish as in
    the chains; redrawn (up to ``tries`` times, then the link is lengthened) until
    the body's bounding sphere at anchor + L d / 2 is CLEARANCE away from every
    earlier body's (``centres``, ``radii``). Deterministic in ``rng``."""
    for k in range(tries):
        d = _unit(rng)
        d[2] = -abs(d[2]) * rng.uniform(0, 1)
        d /= np.linalg.norm(d)
        L = max(float(rng.uniform(0.15, 0.5)), 2.0 * r + CLEARANCE) * (1.0 + 0.1 * (k // 16))
        c = anchor + 0.5 * L * d
        if all(np.linalg.norm(c - c2) >= r + r2 + CLEARANCE for c2, r2 in zip(centres, radii)):
            return d, L
    raise RuntimeError(f"no clear link after {tries} draws (anchor {anchor}, r {r})")


def base_scene(t: Template, seed: int, chunk: int, ti: int) -> dict:
    """The chunk's geometry: bodies (shape, dims, pos, quat), joints (type, bodies,
    anchor, axes) and whether the scene has a ground plane and geoms."""
    rng = np.random.default_rng([seed, ti, chunk])
    bodies, joints = [], []
    if t.family == "pile":
        z = 0.0
        for sh in t.shapes:
            d = _dims(rng, sh)
            r = _extent(d)
            z += r + rng.uniform(0.005, 0.05)
            q = _unit(rng, 4)
            bodies.append(dict(shape=sh, dims=d, pos=[float(x) for x in rng.normal(size=2) * 0.03]
                               + [float(z)], quat=[float(x) for x in q]))
            z += r
        return dict(family=t.family, bodies=bodies, joints=joints, geoms=True)
    h = 5.0 if t.family == "chain" else float(rng.uniform(0.3, 0.8))
    anchor = np.array([0.0, 0.0, h])
    centres, radii = [], []
    for k, (jt, sh) in enumerate(zip(t.joints, t.shapes)):
        if t.family == "mixed":
            dims = _dims(rng, sh)
            d, L = _clear_link(rng, anchor, _extent(dims), centres, radii)
        else:   # the chains' draws in their original order (chunks reproduce)
            d = _unit(rng)
            d[2] = -abs(d[2]) * rng.uniform(0, 1)
            d /= np.linalg.norm(d)
            L = rng.uniform(0.2, 1.0)
            dims = _dims(rng, sh)
        centres.append(anchor + 0.5 * L * d)
        radii.append(_extent(dims))
        bodies.append(dict(shape=sh, dims=dims, pos=[float(x) for x in centres[-1]],
                           quat=[1.0, 0.0, 0.0, 0.0]))
        a1 = _unit(rng)
        a2 = np.cross(a1, _unit(rng))
        a2 /= np.linalg.norm(a2)
        a3 = _unit(rng)
        joints.append(dict(type=jt, body1=k, body2=None if k == 0 else k - 1,
                           anchor=[float(x) for x in anchor], axis1=[float(x) for x in a1],
                           axis2=[float(x) for x in a2], axis3=[float(x) for x in a3]))
        anchor = anchor + L * d
    if t.family == "mixed":
        # lift the whole chain (bodies and anchors) so that every bounding sphere
        # starts CLEARANCE above the plane: no initial penetration energy
        low = min(c[2] - r for c, r in zip(centres, radii))
        lift = max(0.0, CLEARANCE - low)
        for b in bodies:
            b["pos"][2] += lift
        for j in joints:
            j["anchor"][2] += lift
    return dict(family=t.family, bodies=bodies, joints=joints, geoms=t.family == "mixed")


def world_params(t: Template, base: dict, seed: int, chunk: int, ti: int, i: int) -> dict:
    """World i's parameters (all inside params_spec's ranges)."""
    rng = np.random.default_rng([seed, ti, chunk, i])
    nb, nj = len(base["bodies"]), len(base["joints"])
    g = [float(rng.normal() * 0.5), float(rng.normal() * 0.5), -float(rng.uniform(0.0, 20.0))]
    w = dict(erp=float(rng.uniform(0.1, 0.9)), cfm=_logu(rng, 1e-9, 1e-3),
             dt=_logu(rng, 1e-3, 1e-2), gravity=g,
             contact_max_correcting_vel=(math.inf if rng.uniform() < 0.5 else _logu(rng, 0.1, 100.0)))
    w["mass"] = [_logu(rng, 0.01, 3.0) for _ in range(nb)]
    w["vel"] = [[float(x) for x in (rng.normal(size=3) * 0.5 if rng.uniform() < 0.5 else np.zeros(3))]
                for _ in range(nb)]
    w["angvel"] = [[float(x) for x in (rng.normal(size=3) * 1.5 if rng.uniform() < 0.5 else np.zeros(3))]
                   for _ in range(nb)]
    surfaces = []
    for _ in range(nb + 1 if base["geoms"] else 0):
        s = {}
        if t.friction == "box":
            s["mu"] = float(rng.uniform(0.0, 5.0))        # newtons per contact
        else:
            s["mu"] = math.inf if rng.uniform() < 0.05 else float(rng.uniform(0.0, 1.5))
        if rng.uniform() < 0.5:
            s["bounce"] = float(rng.uniform(0.0, 1.0))
            s["bounce_vel"] = float(rng.uniform(0.0, 1.0))
        if rng.uniform() < 0.3:
            s["soft_erp"] = float(rng.uniform(0.05, 0.9))
        if rng.uniform() < 0.3:
            s["soft_cfm"] = _logu(rng, 1e-9, 1e-2)
        surfaces.append(s)
    w["surfaces"] = surfaces
    jps = []
    for j in base["joints"]:
        p = {}
        for suf, kind in AXES[j["type"]]:
            if rng.uniform() < 0.5:
                r = 1.3 if kind == ROT else 0.3
                p["lo_stop" + suf] = float(rng.uniform(-r, 0.0))
                p["hi_stop" + suf] = float(rng.uniform(0.0, r))
                p["bounce" + suf] = float(rng.uniform(0.0, 1.0))
                if rng.uniform() < 0.3:
                    p["stop_erp" + suf] = float(rng.uniform(0.05, 0.95))
                    p["stop_cfm" + suf] = _logu(rng, 1e-9, 1e-3)
        for suf, kind in AXES[j["type"]] + tuple((s, ROT) for s in MOTOR_ONLY.get(j["type"], ())):
            if rng.uniform() < 0.3:
                p["vel" + suf] = float(rng.uniform(-2.0, 2.0))
                p["fmax" + suf] = _logu(rng, 1e-3, 1.0)
                if rng.uniform() < 0.3:
                    p["fudge_factor" + suf] = float(rng.uniform(0.0, 1.0))
                if rng.uniform() < 0.3:
                    p["cfm" + suf] = _logu(rng, 1e-9, 1e-3)
        jps.append(p)
    w["joints"] = jps
    assert len(jps) == nj
    return w


def world_case(t: Template, base: dict, w: dict, n_steps: int) -> dict:
    """One world as a self-contained case (what the replay builds in libode)."""
    return dict(template=t.name, friction=t.friction, base=base, world=w, n_steps=n_steps)


# ------------------------------------------------------------------ building

_GEOM_KW = {"hinge": ("anchor", "axis"), "slider": ("axis",), "ball": ("anchor",), "fixed": (),
            "universal": ("anchor", "axis1", "axis2"), "hinge2": ("anchor", "axis1", "axis2"),
            "pu": ("anchor", "axis1", "axis2", "axis3"), "pr": ("anchor", "axis1", "axis2"),
            "piston": ("anchor", "axis")}


def _joint_geometry(j):
    out = {}
    for k in _GEOM_KW[j["type"]]:
        out[k] = tuple(j["axis1"] if k == "axis" else j[k])
    return out


def _mass(b, m):
    return es.body_mass(dict(shape=b["shape"], dims=b["dims"], mass=m))


def _surface_kw(s: dict) -> dict:
    return {k: s[k] for k in ("mu", "bounce", "bounce_vel", "soft_erp", "soft_cfm") if k in s}


def build_jaxode(case: dict, defaults: bool = False, reorder_seed: int = 0,
                 reorder: str = "joints"):
    """The case as a jaxode Model (precision active at call time). ``defaults``:
    the chunk's model with every per-world value at its default (the worlds'
    values then come in through :func:`world_arrays`). ``reorder="ode"``: ODE
    0.16's own shuffle of every row from ``reorder_seed`` (libode's
    ``rand_seed``), the row order the libode replay sweeps."""
    import jaxode

    base, w = case["base"], case["world"]
    b = jaxode.WorldBuilder(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"],
                            iterations=20, friction_model=case["friction"],
                            contact_max_correcting_vel=w["contact_max_correcting_vel"],
                            reorder_seed=reorder_seed, reorder=reorder)
    surf = (lambda i: jaxode.Surface()) if defaults else (
        lambda i: jaxode.Surface(**_surface_kw(w["surfaces"][i])))
    if base["geoms"]:
        b.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(base["bodies"]):
        i = b.add_body(pos=bd["pos"], quat=bd["quat"], vel=w["vel"][k], angvel=w["angvel"][k],
                       mass=_mass(bd, w["mass"][k]))
        if base["geoms"]:
            es.add_geom(b, bd, i, surf(k + 1))
    for j, p in zip(base["joints"], w["joints"]):
        getattr(b, f"add_{j['type']}")(j["body1"], j["body2"], collide=True, **_joint_geometry(j),
                                       **({} if defaults else p))
    return b.build()


def build_ode(case: dict, rand_seed: int = 0):
    """The case as an ``odelib.OdeWorld`` (libode, double; cone friction -> pyramid)."""
    from tools.conformance import odelib

    base, w = case["base"], case["world"]
    world = odelib.OdeWorld(gravity=tuple(w["gravity"]), erp=w["erp"], cfm=w["cfm"], iterations=20,
                            contact_max_correcting_vel=w["contact_max_correcting_vel"],
                            rand_seed=rand_seed)
    fr = "box" if case["friction"] == "box" else "pyramid"

    def surf(i):
        s = dict(_surface_kw(w["surfaces"][i]), friction=fr)
        return s

    if base["geoms"]:
        world.add_plane((0.0, 0.0, 1.0), 0.0, surface=surf(0))
    for k, bd in enumerate(base["bodies"]):
        m = _mass(bd, w["mass"][k])
        i = world.add_body(bd["pos"], quat=bd["quat"], vel=w["vel"][k], angvel=w["angvel"][k],
                           mass=float(m.mass), inertia=np.asarray(m.inertia))
        if base["geoms"]:
            d = bd["dims"]
            if bd["shape"] == "box":
                world.add_box(d["size"], body=i, surface=surf(k + 1))
            elif bd["shape"] == "sphere":
                world.add_sphere(d["radius"], body=i, surface=surf(k + 1))
            elif bd["shape"] == "capsule":
                world.add_capsule(d["radius"], d["length"], body=i, surface=surf(k + 1))
            else:
                world.add_cylinder(d["radius"], d["length"], body=i, surface=surf(k + 1))
    for j, p in zip(base["joints"], w["joints"]):
        world.add_joint(j["type"], j["body1"], j["body2"], **_joint_geometry(j), **p)
    return world


#: surface key -> Params field (geom entity)
_SURF_FIELD = {"mu": "mu", "bounce": "bounce", "bounce_vel": "bounce_vel", "soft_erp": "soft_erp",
               "soft_cfm": "soft_cfm"}
#: joint param base name -> Params field (joint_axis entity)
_JOINT_FIELD = {k: "joint_" + k for k in ("lo_stop", "hi_stop", "vel", "fmax", "fudge_factor", "bounce",
                                          "cfm", "stop_erp", "stop_cfm")}


def world_arrays(model, cases: list) -> tuple:
    """(Params, vel, angvel, dt) for the worlds of one chunk, stacked on a leading
    axis: the chunk model's default params with each world's values written in
    (the same values the builder stores for the world's own case; checked by
    tests/test_fuzz_slice.py)."""
    import jax.numpy as jnp

    p0 = model.params
    n = len(cases)
    fields = {}
    for f in dataclasses.fields(p0):
        v = getattr(p0, f.name)
        fields[f.name] = None if v is None else np.repeat(np.asarray(v)[None], n, axis=0).copy()
    vel = np.zeros((n, model.nbody, 3))
    angvel = np.zeros((n, model.nbody, 3))
    dt = np.zeros(n)
    for i, c in enumerate(cases):
        base, w = c["base"], c["world"]
        fields["gravity"][i] = w["gravity"]
        fields["erp"][i] = w["erp"]
        fields["cfm"][i] = w["cfm"]
        fields["contact_max_correcting_vel"][i] = w["contact_max_correcting_vel"]
        for k, bd in enumerate(base["bodies"]):
            m = _mass(bd, w["mass"][k])
            fields["body_mass"][i, k] = m.mass
            fields["body_inertia"][i, k] = np.asarray(m.inertia)
        for gi, s in enumerate(w["surfaces"]):
            for key, val in s.items():
                fields[_SURF_FIELD[key]][i, gi] = val
        for ji, p in enumerate(w["joints"]):
            for key, val in p.items():
                base_key, ax = (key[:-1], int(key[-1]) - 1) if key[-1] in "23" else (key, 0)
                fields[_JOINT_FIELD[base_key]][i, ji, ax] = val
        vel[i], angvel[i], dt[i] = w["vel"], w["angvel"], w["dt"]
    dtype = np.asarray(model.params.erp).dtype
    params = type(p0)(**{k: None if v is None else jnp.asarray(v, dtype) for k, v in fields.items()})
    return params, jnp.asarray(vel, dtype), jnp.asarray(angvel, dtype), jnp.asarray(dt, dtype)


_FNS: dict = {}


def _batched(n_steps: int):
    import jax

    import jaxode

    if n_steps not in _FNS:
        def one(model, state, params, dt):
            final, tr = jaxode.rollout(model, state, n_steps, dt, params)
            return (tr.pos, tr.quat, tr.vel, tr.angvel, tr.max_depth, final.overflow_pairs,
                    final.overflow_contacts, final.nonfinite)

        _FNS[n_steps] = jax.jit(jax.vmap(one, in_axes=(None, 0, 0, 0)))
    return _FNS[n_steps]


def run_jaxode(cases: list, n_steps: int, reorder: str = "joints") -> dict:
    """The chunk's worlds (one base geometry) in ONE vmapped rollout (precision
    active at call time). Returns numpy arrays with a leading world axis.
    ``reorder="ode"``: every world sweeps its rows in ODE's order for
    generator seed 0 (the libode replay's first seed)."""
    import jax

    import jaxode

    model = build_jaxode(cases[0], defaults=True, reorder=reorder)
    params, vel, angvel, dt = world_arrays(model, cases)
    s0 = jaxode.init(model)
    n = len(cases)
    state = jax.tree.map(lambda x: jax.numpy.repeat(jax.numpy.asarray(x)[None], n, axis=0), s0)
    state = dataclasses.replace(state, vel=vel, angvel=angvel)
    out = _batched(n_steps)(model, state, params, dt)
    keys = ("pos", "quat", "vel", "angvel", "max_depth", "overflow_pairs", "overflow_contacts",
            "nonfinite")
    return {k: np.asarray(v) for k, v in zip(keys, out)}


#: batch size of the cone templates' pyramid re-runs (fixed: one compile per template)
PYR_BATCH = 32


def pyramid_verdicts(cases: list, n_steps: int, reorder: str = "joints",
                     cone_only: bool = False) -> list:
    """:func:`check` of each case stepped in jaxode with ODE's pyramid friction
    instead of its cone (Gazebo's cone_model, which libode lacks): the jaxode
    counterpart of the libode replay. Batched by PYR_BATCH (padded with the
    first case). ``reorder="ode"``: in ODE's own row order (seed 0), see
    :func:`run_chunk`'s ``exploded_jaxode_only_ode_order``; ``cone_only``: only
    cone cases change friction (box stays box)."""
    out = []
    pc = [dict(c, friction="pyramid") if not cone_only or c["friction"] == "cone" else c
          for c in cases]
    for k in range(0, len(pc), PYR_BATCH):
        part = pc[k:k + PYR_BATCH]
        tr = run_jaxode(part + [part[0]] * (PYR_BATCH - len(part)), n_steps, reorder=reorder)
        for i, c in enumerate(part):
            v = check(c, {key: tr[key][i] for key in ("pos", "quat", "vel", "angvel", "max_depth")})
            v["finite"] &= not bool(tr["nonfinite"][i])
            v["exploded"] |= not v["finite"]
            out.append(v)
    return out


def run_ode(case: dict, rand_seed: int = 0) -> dict:
    w = build_ode(case, rand_seed=rand_seed)
    try:
        out, depth = [], []
        for _ in range(case["n_steps"]):
            w.step(case["world"]["dt"])
            out.append(w.state())
            cs = w.contacts_last if case["base"]["geoms"] else []
            depth.append(max([c.depth for c in cs], default=0.0))
    finally:
        w.close()
    tr = {k: np.stack([o[k] for o in out]) for k in ("pos", "quat", "vel", "angvel")}
    tr["max_depth"] = np.asarray(depth)
    return tr


# ------------------------------------------------------------------ checks

def _es_case(case: dict) -> dict:
    """The case in energy_scenes' format (for its energy helpers)."""
    base, w = case["base"], case["world"]
    bodies = [dict(shape=b["shape"], dims=b["dims"], mass=m, pos=b["pos"], quat=b["quat"], vel=v,
                   angvel=a) for b, m, v, a in zip(base["bodies"], w["mass"], w["vel"], w["angvel"])]
    joints = [dict(type=j["type"], params=p) for j, p in zip(base["joints"], w["joints"])]
    return dict(scene=dict(bodies=bodies, joints=joints),
                world=dict(gravity=w["gravity"], dt=w["dt"], joint_vel_scale=1.0))


def check(case: dict, traj: dict) -> dict:
    """The world's verdicts from its trajectory (steps, nbody, k arrays)."""
    ec = _es_case(case)
    mass, inertia = es.inertias(ec)
    ini = es.initial(ec)
    ke0 = float(es.kinetic_energy(mass, inertia, ini["quat"], ini["vel"], ini["angvel"]))
    finite = bool(all(np.all(np.isfinite(traj[k])) for k in ("pos", "quat", "vel", "angvel")))
    with np.errstate(all="ignore"):
        ke = es.kinetic_energy(mass, inertia, traj["quat"], traj["vel"], traj["angvel"])
        steps = ke.shape[0]
        t = case["world"]["dt"] * np.arange(1, steps + 1)
        wg = np.maximum(es.gravity_work(ec, ini["pos"], traj["pos"]), 0.0)
        allowed = ke0 + wg + es.motor_work_rate(ec) * t + FLOOR
        ratio = float(np.nanmax(np.where(np.isfinite(ke), ke / allowed, np.inf)))
    depth = float(np.max(traj["max_depth"])) if np.all(np.isfinite(traj["max_depth"])) else math.inf
    return dict(ke0=ke0, ratio=ratio, exploded=not finite or ratio > FACTOR, finite=finite,
                depth=depth, deep=depth > DEEP, max_ke=float(np.nanmax(ke)) if finite else math.inf)


def replay(case: dict, jaxode_depth: float = 0.0) -> dict:
    """libode's verdict on a world that failed in jaxode: which checks fail in ODE
    (seed 0), and for those that don't, whether another shuffle seed makes them
    fail. A deep contact counts for ODE too when ODE's deepest contact (over the
    seeds tried) reaches DEEP or half of jaxode's ``jaxode_depth``."""
    o = check(case, run_ode(case, 0))
    deep_bar = min(DEEP, 0.5 * jaxode_depth) if jaxode_depth > 0 else DEEP
    out = dict(ode_ratio=o["ratio"], ode_depth=o["depth"], ode_exploded=o["exploded"],
               ode_deep=o["depth"] >= deep_bar, other_seed_exploded=False, other_seed_deep=False)
    for s in ODE_SEEDS:
        if (out["ode_exploded"] or out["other_seed_exploded"]) and (out["ode_deep"] or out["other_seed_deep"]):
            break
        r = check(case, run_ode(case, s))
        out["other_seed_exploded"] |= r["exploded"]
        out["other_seed_deep"] |= r["depth"] >= deep_bar
        out["ode_depth_max"] = max(out.get("ode_depth_max", o["depth"]), r["depth"])
    return out


# ------------------------------------------------------------------ campaign

COUNTS = ("rollouts", "world_steps", "exploded", "exploded_ode_also", "exploded_ode_other_seed",
          "exploded_jaxode_only", "nonfinite", "nonfinite_jaxode_only", "deep", "deep_ode_also",
          "deep_jaxode_only", "overflow")


def run_chunk(ti: int, chunk: int, worlds: int, steps: int, seed: int, ode: bool = True,
              verbose: bool = False, ode_all: bool = False) -> dict:
    """One (template, chunk) unit at the active precision: counts and failures.
    ``ode_all``: also step EVERY world in libode (seed 0) and count the worlds
    that explode in ODE but not in jaxode (``ode_only``): the symmetric check."""
    t = TEMPLATES[ti]
    base = base_scene(t, seed, chunk, ti)
    cases = [world_case(t, base, world_params(t, base, seed, chunk, ti, i), steps) for i in range(worlds)]
    t0 = time.time()
    out = run_jaxode(cases, steps)
    wall = time.time() - t0
    row = {c: 0 for c in COUNTS}
    row.update(template=t.name, ti=ti, chunk=chunk, seed=seed, steps=steps, wall_s=wall, failures=[],
               ode_seeds=1 + len(ODE_SEEDS),
               max_depth=0.0, ratio_p99=0.0)
    ratios = []
    verdicts = []
    for i, c in enumerate(cases):
        tr = {k: out[k][i] for k in ("pos", "quat", "vel", "angvel", "max_depth")}
        v = check(c, tr)
        v["finite"] &= not bool(out["nonfinite"][i])
        v["exploded"] |= not v["finite"]
        verdicts.append(v)
    pyr = {}
    if t.friction == "cone" and ode:
        # libode has no cone: the failing worlds again in jaxode with ODE's pyramid
        # (the model the libode replay steps); the like-for-like verdict uses these
        bad = [i for i, v in enumerate(verdicts) if v["exploded"] or v["deep"]]
        pyr = pyramid_verdicts([cases[i] for i in bad], steps)
        pyr = dict(zip(bad, pyr))
        row.update(cone_failed_pyramid_calm=0, exploded_cone_only=0, deep_cone_only=0)
    for i, c in enumerate(cases):
        v = verdicts[i]
        row["rollouts"] += 1
        row["world_steps"] += steps
        ratios.append(v["ratio"])
        row["max_depth"] = max(row["max_depth"], v["depth"])
        ovf = int(out["overflow_pairs"][i]) + int(out["overflow_contacts"][i])
        row["overflow"] += ovf > 0
        row["nonfinite"] += not v["finite"]
        row["exploded"] += v["exploded"]
        row["deep"] += v["deep"]
        if ode_all:
            o = check(c, run_ode(c, 0))
            row["ode_seed0_exploded"] = row.get("ode_seed0_exploded", 0) + o["exploded"]
            row["ode_only"] = row.get("ode_only", 0) + (o["exploded"] and not v["exploded"])
        if not (v["exploded"] or v["deep"]):
            continue
        fail = dict(world=i, replay=f"{ti}:{chunk}:{i}", ratio=v["ratio"], depth=v["depth"],
                    finite=v["finite"])
        if i in pyr:   # cone world: the verdicts that count against ODE are pyramid's
            vp = pyr[i]
            fail.update(pyramid_ratio=vp["ratio"], pyramid_depth=vp["depth"])
            row["exploded_cone_only"] += v["exploded"] and not vp["exploded"]
            row["deep_cone_only"] += v["deep"] and not vp["deep"]
            if not (vp["exploded"] or vp["deep"]):
                row["cone_failed_pyramid_calm"] += 1
                fail["cone_only"] = True
                row["failures"].append(fail)
                continue
            v = dict(v, exploded=v["exploded"] and vp["exploded"], deep=v["deep"] and vp["deep"],
                     depth=min(v["depth"], vp["depth"]))
        if ode:
            r = replay(c, v["depth"] if v["deep"] else 0.0)
            fail.update(r)
            if v["exploded"]:
                if r["ode_exploded"]:
                    row["exploded_ode_also"] += 1
                elif r["other_seed_exploded"]:
                    row["exploded_ode_other_seed"] += 1
                else:
                    row["exploded_jaxode_only"] += 1
                    row["nonfinite_jaxode_only"] += not v["finite"]
                    fail["jaxode_only"] = "exploded"
            if v["deep"]:
                if r["ode_deep"] or r["other_seed_deep"]:
                    row["deep_ode_also"] += 1
                else:
                    row["deep_jaxode_only"] += 1
                    fail["jaxode_only"] = fail.get("jaxode_only", "") + "+deep"
        row["failures"].append(fail)
        if verbose:
            print(f"    {t.name} {fail}", flush=True)
    # jaxode-only explosions again in jaxode, sweeping ODE's own row order (seed 0,
    # the order of the libode replay that stayed calm): an explosion that persists is
    # jaxode's, one that goes away depends on the (unconverged) solver's row order
    jo = [f for f in row["failures"] if f.get("jaxode_only", "").startswith("exploded")]
    row["exploded_jaxode_only_ode_order"] = 0
    if jo:
        vo = pyramid_verdicts([cases[f["world"]] for f in jo], steps, reorder="ode",
                              cone_only=True)
        for f, v in zip(jo, vo):
            f["ode_order_ratio"] = v["ratio"]
            row["exploded_jaxode_only_ode_order"] += v["exploded"]
    row["ratio_p99"] = float(np.nanpercentile(np.asarray(ratios), 99))
    row["ratio_max"] = float(np.nanmax(np.asarray(ratios)))
    return row


def _load(path):
    if path and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return None


def _save(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def campaign(args) -> dict:
    import jax

    prec = "float64" if args.x64 else "float32"
    tis = range(len(TEMPLATES)) if args.templates == "all" else [int(x) for x in args.templates.split(",")]
    c0, c1 = (int(x) for x in args.chunks.split(":"))
    data = _load(args.out) or dict(about=__doc__.split("\n")[0], units=[])
    done = {(u["ti"], u["chunk"], u["precision"], u["seed"]) for u in data["units"]}
    t_start = time.time()
    with jax.enable_x64(args.x64):
        for ti in tis:
            for chunk in range(c0, c1):
                if (ti, chunk, prec, args.seed) in done:
                    continue
                t0 = time.time()
                row = run_chunk(ti, chunk, args.worlds, args.steps, args.seed, not args.no_ode,
                                args.verbose, args.ode_all)
                row.update(precision=prec, total_s=time.time() - t0, worlds=args.worlds)
                data["units"].append(row)
                if args.out:
                    _save(args.out, data)
                print(f"{prec} {row['template']:<30} chunk {chunk}: {row['rollouts']} rollouts, "
                      f"exploded {row['exploded']} (jaxode only {row['exploded_jaxode_only']}), "
                      f"nonfinite {row['nonfinite']}, deep {row['deep']} (jaxode only "
                      f"{row['deep_jaxode_only']}), overflow {row['overflow']}, "
                      + (f"cone-only (jaxode pyramid calm) exploded {row['exploded_cone_only']} deep "
                         f"{row['deep_cone_only']}, " if "exploded_cone_only" in row else "")
                      + f"max depth "
                      f"{row['max_depth']:.3g} m, KE ratio p99 {row['ratio_p99']:.3g}; "
                      f"{row['total_s']:.0f} s (rollout {row['wall_s']:.0f} s)"
                      + (f"; ODE (every world, seed 0): exploded {row['ode_seed0_exploded']}, of "
                         f"which jaxode calm {row['ode_only']}" if args.ode_all else ""), flush=True)
                for f in row["failures"]:
                    if f.get("jaxode_only"):
                        print(f"  jaxode only: {f['jaxode_only']}: python tools/fuzz.py --replay "
                              f"{f['replay']} --seed {args.seed} --steps {args.steps}"
                              f"{' --x64' if args.x64 else ''}  ({f})", flush=True)
    print(f"({time.time() - t_start:.0f} s)")
    return data


def reclassify(path: str) -> None:
    """Replay the "jaxode only" worlds of a results file (written with fewer ODE
    seeds) with every seed of ODE_SEEDS; moves those ODE fails for to "ODE other
    seed". Rewrites the file."""
    data = _load(path)
    for u in data["units"]:
        if u.get("ode_seeds", 4) >= 1 + len(ODE_SEEDS):
            continue
        t = TEMPLATES[u["ti"]]
        base = base_scene(t, u["seed"], u["chunk"], u["ti"])
        for f in u["failures"]:
            if f.get("jaxode_only") not in ("exploded", "exploded+deep"):
                continue
            case = world_case(t, base, world_params(t, base, u["seed"], u["chunk"], u["ti"], f["world"]),
                              u["steps"])
            hit = next((s for s in ODE_SEEDS if check(case, run_ode(case, s))["exploded"]), None)
            if hit is not None:
                f["other_seed_exploded"] = True
                f["ode_seed_exploded"] = hit
                f["jaxode_only"] = f["jaxode_only"].replace("exploded", "")
                u["exploded_jaxode_only"] -= 1
                u["exploded_ode_other_seed"] += 1
                u["nonfinite_jaxode_only"] -= not f["finite"]
        u["ode_seeds"] = 1 + len(ODE_SEEDS)
        _save(path, data)
        print(f"{u['precision']} {u['template']} chunk {u['chunk']}: jaxode only now "
              f"{u['exploded_jaxode_only']}", flush=True)


def symmetric(path: str, per_unit: int, out: str | None = None, sample_seed: int = 0) -> dict:
    """The symmetric count of a results file, sampled: ``per_unit`` worlds of
    each unit that jaxode found calm (not among its failures: neither exploded
    nor deep) are stepped in libode (seed 0, the library ``JAXODE_ODE_LIB`` /
    ``JAXODE_ODE_PRECISION`` name, :mod:`tools.conformance.odelib`), counting
    those that explode there: "ODE only". Per template: the sample, ODE's
    explosions in it, the rate scaled to the template's calm worlds, against
    the file's jaxode-only count (ODE calm with all 16 seeds, a stricter bar).
    Cone templates are skipped (libode has no cone). Writes the summary and
    the exploding worlds as JSON to ``out`` when given; returns it."""
    import random

    from tools.conformance import odelib

    data = _load(path)
    rng = random.Random(sample_seed)
    rows: dict = {}
    hits = []
    for u in data["units"]:
        t = TEMPLATES[u["ti"]]
        if t.friction == "cone":
            continue
        base = base_scene(t, u["seed"], u["chunk"], u["ti"])
        bad = {f["world"] for f in u["failures"]}
        calm = [i for i in range(u["rollouts"]) if i not in bad]
        r = rows.setdefault((u["precision"], t.name),
                            dict(template=t.name, precision=u["precision"], rollouts=0,
                                 calm=0, sampled=0, ode_exploded=0, jaxode_only=0))
        r["rollouts"] += u["rollouts"]
        r["calm"] += len(calm)
        r["jaxode_only"] += u["exploded_jaxode_only"]
        for i in rng.sample(calm, min(per_unit, len(calm))):
            case = world_case(t, base, world_params(t, base, u["seed"], u["chunk"], u["ti"], i),
                              u["steps"])
            v = check(case, run_ode(case, 0))
            r["sampled"] += 1
            if v["exploded"]:
                r["ode_exploded"] += 1
                hits.append(dict(replay=f"{u['ti']}:{u['chunk']}:{i}", template=t.name,
                                 ode_ratio=v["ratio"]))
    for r in rows.values():
        r["ode_only_estimate"] = round(r["ode_exploded"] / max(r["sampled"], 1) * r["calm"])
    summary = dict(results=path, per_unit=per_unit, sample_seed=sample_seed,
                   library=str(odelib.load()._name), precision=odelib.PRECISION,
                   templates=list(rows.values()), ode_only_worlds=hits)
    if out:
        _save(out, summary)
    return summary


def symmetric_table(summary: dict) -> str:
    """The markdown table of :func:`symmetric`'s summary."""
    lines = ["| precision | template | rollouts | jaxode calm | sampled | ODE explodes (seed 0) | "
             "ODE only, scaled to the calm worlds | jaxode only (ODE calm, 16 seeds) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    keys = ("rollouts", "calm", "sampled", "ode_exploded", "ode_only_estimate", "jaxode_only")
    for prec in ("float32", "float64"):
        rows = [r for r in summary["templates"] if r["precision"] == prec]
        if not rows:
            continue
        tot = dict({k: sum(r[k] for r in rows) for k in keys}, template="**all**", precision=prec)
        for r in rows + [tot]:
            lines.append(f"| {prec} | {r['template']} | {r['rollouts']:,} | {r['calm']:,} | "
                         f"{r['sampled']:,} | {r['ode_exploded']:,} | {r['ode_only_estimate']:,} "
                         f"| {r['jaxode_only']:,} |")
    return "\n".join(lines)


def table(paths) -> str:
    """The markdown summary table of one or more results files."""
    units = []
    for p in paths:
        units += _load(p)["units"]
    lines = []
    cols = ("rollouts", "world_steps", "exploded", "exploded_ode_also", "exploded_ode_other_seed",
            "exploded_jaxode_only", "exploded_jaxode_only_ode_order", "exploded_cone_only",
            "nonfinite", "deep", "deep_ode_also", "deep_jaxode_only", "deep_cone_only", "overflow")
    if any("ode_only" in u for u in units):   # --ode-all: every world stepped in libode too
        cols += ("ode_seed0_exploded", "ode_only")
    head = ("| precision | template | " + " | ".join(cols) + " | max depth [m] | max KE ratio | s |")
    lines += [head, "|" + "---|" * (len(cols) + 5)]
    for prec in ("float32", "float64"):
        us = [u for u in units if u["precision"] == prec]
        if not us:
            continue
        names = list(dict.fromkeys(u["template"] for u in us))
        for name in names + ["**all**"]:
            g = us if name == "**all**" else [u for u in us if u["template"] == name]
            s = {c: sum(u.get(c, 0) for u in g) for c in cols}
            md = max(u["max_depth"] for u in g)
            rm = max(u.get("ratio_max", 0.0) for u in g)
            tt = sum(u["total_s"] for u in g)
            lines.append(f"| {prec} | {name} | " + " | ".join(f"{s[c]:,}" for c in cols)
                         + f" | {md:.3g} | {rm:.3g} | {tt:.0f} |")
    return "\n".join(lines)


def replay_one(args) -> int:
    """One world: jaxode alone (unbatched) and libode, side by side."""
    import jax

    import jaxode

    ti, chunk, i = (int(x) for x in args.replay.split(":"))
    t = TEMPLATES[ti]
    base = base_scene(t, args.seed, chunk, ti)
    case = world_case(t, base, world_params(t, base, args.seed, chunk, ti, i), args.steps)
    print(json.dumps(case, indent=1) if args.verbose else f"{t.name}, world {args.replay}, seed {args.seed}")
    jseeds = [int(x) for x in args.jaxode_seeds.split(",")]
    runs = [(case, js) for js in jseeds]
    if case["friction"] == "cone":   # and with the pyramid libode steps (pyramid_verdicts)
        runs += [(dict(case, friction="pyramid"), js) for js in jseeds]
    for case_j, js in runs:
        with jax.enable_x64(args.x64):
            m = build_jaxode(case_j, reorder_seed=js, reorder="ode" if args.ode_order else "joints")
            _, tr = jaxode.rollout(m, jaxode.init(m), args.steps, case["world"]["dt"])
            jx = {k: np.asarray(getattr(tr, k), np.float64)
                  for k in ("pos", "quat", "vel", "angvel", "max_depth")}
        v = check(case, jx)
        print(f"jaxode ({'float64' if args.x64 else 'float32'}, {case_j['friction']}, reorder_seed {js}): max KE ratio "
              f"{v['ratio']:.4g}, max KE {v['max_ke']:.4g} J, KE0 {v['ke0']:.4g} J, max depth "
              f"{v['depth']:.4g} m, finite {v['finite']}", flush=True)
    for s in range(args.ode_seeds):
        o = check(case, run_ode(case, s))
        print(f"ODE (seed {s}): max KE ratio {o['ratio']:.4g}, max KE {o['max_ke']:.4g} J, "
              f"max depth {o['depth']:.4g} m", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=256, help="worlds per chunk (one vmapped call)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="campaign seed")
    ap.add_argument("--chunks", type=str, default="0:1", help="chunk range a:b per template")
    ap.add_argument("--templates", type=str, default="all", help="comma-separated indices")
    ap.add_argument("--x64", action="store_true", help="float64 (default float32)")
    ap.add_argument("--out", type=str, default=None, help="results JSON (resumable)")
    ap.add_argument("--no-ode", action="store_true", help="skip the libode replays")
    ap.add_argument("--ode-all", action="store_true",
                    help="step every world in libode too (symmetric count: ODE-only explosions)")
    ap.add_argument("--replay", type=str, default=None, help="T:C:W: replay one world")
    ap.add_argument("--jaxode-seeds", type=str, default="0",
                    help="with --replay: jaxode reorder seeds to run (comma-separated)")
    ap.add_argument("--ode-order", action="store_true",
                    help="with --replay: jaxode sweeps ODE's own row order (reorder='ode'; "
                         "--jaxode-seeds are then libode's rand seeds)")
    ap.add_argument("--ode-seeds", type=int, default=4, help="with --replay: ODE seeds 0..n-1")
    ap.add_argument("--table", nargs="*", default=None, help="print the summary of results files")
    ap.add_argument("--list", action="store_true", help="list the templates")
    ap.add_argument("--reclassify", type=str, default=None,
                    help="replay a results file's 'jaxode only' worlds with all ODE_SEEDS")
    ap.add_argument("--symmetric", type=str, default=None, metavar="RESULTS",
                    help="sample the worlds jaxode found calm in a results file and step them "
                         "in libode (seed 0): how often ODE explodes where jaxode did not "
                         "(--per-unit worlds per unit; the summary to --out)")
    ap.add_argument("--per-unit", type=int, default=40, help="with --symmetric")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.symmetric:
        print(symmetric_table(symmetric(args.symmetric, args.per_unit, args.out, args.seed)))
        return 0
    if args.list:
        for i, t in enumerate(TEMPLATES):
            print(i, t)
        return 0
    if args.reclassify:
        reclassify(args.reclassify)
        return 0
    if args.table is not None:
        print(table(args.table))
        return 0
    if args.replay:
        return replay_one(args)
    campaign(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
