"""The benchmark scenes, defined once as conformance ``Scene`` objects.

jaxode builds them with ``tools.conformance.scenes.build_jaxode``; the ODE
reference program (bench/ode_scene.c) reads the text that :func:`ode_spec`
writes from the same objects, so both engines step the same bodies, geoms,
joints and world parameters. The walker (``jaxode.robots``) is jaxode-only.

Scenes (all with gravity -9.81 z, erp 0.2, cfm 1e-5, QuickStep 20 iterations,
SOR 1.3, pyramid friction, dt 0.01 s):
- boxes: eight 0.2 m cubes (1 kg) dropped from 0.3-0.65 m onto a plane in a
  2 x 4 grid, slightly turned, sliding at 1 m/s: ~32 contacts per world at rest.
- chain: ten capsule links (0.1 m between joints, 0.2 kg) on hinges about y
  hanging from the world, released 0.5 rad from the vertical; no contacts.
- stack: a pyramid of 21 cubes (rows of 6, 5, ..., 1; 0.2 m, 1 kg) on a plane.
- bin_N: N objects (half spheres r 5 cm, half 0.1 m cubes, 0.5 kg) dropped on a
  grid into a walled 1 m x 1 m bin (plane + 4 static boxes): broadphase-bound.
"""
from __future__ import annotations

import math

import numpy as np

from jaxode.build import mass as mass_lib
from tools.conformance.scenes import (Geom, Joint, Scene, Tolerance, World, body_of,
                                       build_jaxode)

WORLD = World(cfm=1e-5)
_NO_TOL = Tolerance("metric", 0.0, "benchmark", 0.0, "benchmark")
_CUBE = mass_lib.box(size=(0.2, 0.2, 0.2), total=1.0)


def _quat(axis, angle):
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return (math.cos(angle / 2),) + tuple(float(x) for x in math.sin(angle / 2) * a)


def _scene(name, desc, bodies, geoms, joints=()):
    return Scene(name, desc, WORLD, bodies=tuple(bodies), geoms=tuple(geoms), metric="final_pos",
                 tol=_NO_TOL, steps=100, dt=0.01, joints=tuple(joints))


def boxes() -> Scene:
    bodies, geoms = [], [Geom("plane", surface=dict(mu=0.5))]
    for k in range(8):
        i, j = divmod(k, 4)
        pos = (0.5 * j, 0.5 * i, 0.3 + 0.05 * k)
        bodies.append(body_of(_CUBE, pos, quat=_quat((1.0, 0.3 * k, 0.1), 0.05 * (k - 3.5)),
                              vel=(1.0, 0.0, 0.0)))
        geoms.append(Geom("box", body=k, size=(0.2, 0.2, 0.2), surface=dict(mu=0.5)))
    return _scene("boxes", "eight 0.2 m boxes dropped on a plane", bodies, geoms)


def chain(nlink: int = 10, length: float = 0.1, tilt: float = 0.5) -> Scene:
    m = mass_lib.capsule(0.02, length, direction=3, total=0.2)
    down = np.array([-math.sin(tilt), 0.0, -math.cos(tilt)])
    bodies, joints = [], []
    for k in range(nlink):
        top = k * length * down
        bodies.append(body_of(m, tuple(top + 0.5 * length * down), quat=_quat((0, 1, 0), tilt)))
        joints.append(Joint("hinge", k, k - 1 if k else None,
                            dict(anchor=tuple(float(x) for x in top), axis=(0.0, 1.0, 0.0))))
    return _scene("chain", f"{nlink} capsule links on hinges, no contacts", bodies, (), joints)


def stack(rows: int = 6) -> Scene:
    bodies, geoms = [], [Geom("plane", surface=dict(mu=0.5))]
    for r in range(rows):
        for c in range(rows - r):
            x = (c - (rows - r - 1) / 2) * 0.21
            geoms.append(Geom("box", body=len(bodies), size=(0.2, 0.2, 0.2), surface=dict(mu=0.5)))
            bodies.append(body_of(_CUBE, (x, 0.0, 0.1 + 0.2 * r)))
    return _scene("stack", f"pyramid of {len(bodies)} boxes", bodies, geoms)


def bin_scene(n: int = 64) -> Scene:
    wall = dict(mu=0.5)
    geoms = [Geom("plane", surface=dict(mu=0.5))]
    for pos, size in (((0.55, 0.0, 0.25), (0.1, 1.2, 0.5)), ((-0.55, 0.0, 0.25), (0.1, 1.2, 0.5)),
                      ((0.0, 0.55, 0.25), (1.0, 0.1, 0.5)), ((0.0, -0.55, 0.25), (1.0, 0.1, 0.5))):
        geoms.append(Geom("box", size=size, pos=pos, surface=wall))
    side = math.ceil(math.sqrt(min(n, 16)))
    per_layer = side * side
    pitch = 0.9 / side
    ball = mass_lib.sphere(0.05, total=0.5)
    cube = mass_lib.box(size=(0.1, 0.1, 0.1), total=0.5)
    bodies = []
    for k in range(n):
        layer, cell = divmod(k, per_layer)
        i, j = divmod(cell, side)
        pos = (-0.45 + pitch * (j + 0.5), -0.45 + pitch * (i + 0.5), 0.1 + 0.15 * layer)
        if k % 2:
            bodies.append(body_of(cube, pos, quat=_quat((1.0, 1.0, 0.0), 0.3)))
            geoms.append(Geom("box", body=k, size=(0.1, 0.1, 0.1), surface=dict(mu=0.5)))
        else:
            bodies.append(body_of(ball, pos))
            geoms.append(Geom("sphere", body=k, radius=0.05, surface=dict(mu=0.5)))
    return _scene(f"bin_{n}", f"{n} spheres and boxes in a walled bin", bodies, geoms)


def walker_model():
    from jaxode.build.robots import build_walker

    return build_walker().model


#: name -> (builder of a Scene or None, builder of the jaxode Model)
SCENES = {
    "boxes": boxes, "chain": chain, "stack": stack,
    "bin_16": lambda: bin_scene(16), "bin_64": lambda: bin_scene(64),
    "bin_256": lambda: bin_scene(256), "walker": None,
}


def model_of(name: str):
    """The jaxode Model of a benchmark scene (float precision active at call time)."""
    if name == "walker":
        return walker_model()
    return build_jaxode(SCENES[name]())


def _f(xs) -> str:
    return " ".join(repr(float(x)) for x in xs)


def ode_spec(scene: Scene) -> str:
    """The scene in bench/ode_scene.c's text format (see its header)."""
    w = scene.world
    out = [f"world {_f(w.gravity)} {w.erp!r} {w.cfm!r} {w.iterations} {w.sor!r}"]
    for b in scene.bodies:
        inertia = np.asarray(b.inertia, float)
        out.append(f"body {_f(b.pos)} {_f(b.quat)} {_f(b.vel)} {_f(b.angvel)} {b.mass!r} "
                   f"{_f([inertia[0, 0], inertia[0, 1], inertia[0, 2], inertia[1, 1], inertia[1, 2], inertia[2, 2]])}")
    for g in scene.geoms:
        mu = float(g.surface.get("mu", 1.0))
        maxc = int(g.surface.get("max_contacts", 10))
        body = -1 if g.body is None else g.body
        pose = f"{_f(g.pos)} {_f(g.quat)} {mu!r} {maxc}"
        if g.type == "plane":
            out.append(f"plane {_f(g.normal)} {g.offset!r} {mu!r} {maxc}")
        elif g.type == "sphere":
            out.append(f"sphere {body} {g.radius!r} {pose}")
        elif g.type == "box":
            out.append(f"box {body} {_f(g.size)} {pose}")
        elif g.type == "capsule":
            out.append(f"capsule {body} {g.radius!r} {g.length!r} {pose}")
        else:
            raise ValueError(f"ode_spec: geom type {g.type!r} is not in ode_scene.c")
    for j in scene.joints:
        if j.type != "hinge":
            raise ValueError(f"ode_spec: joint type {j.type!r} is not in ode_scene.c")
        b2 = -1 if j.body2 is None else j.body2
        out.append(f"hinge {j.body1} {b2} {_f(j.geometry['anchor'])} {_f(j.geometry['axis'])}")
    return "\n".join(out) + "\n"
