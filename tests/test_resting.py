"""Every shape rests stably on a plane and on a heightfield for 1000 steps.

Sphere, box, capsule (lying), cylinder (standing) and a convex hexagonal
prism, each dropped from 5 mm above its rest pose onto a plane (z = 0) and
onto a flat heightfield (z = 0.1 m, a 9 x 9 grid of triangles), 1000 steps
of 0.01 s in float32. Truth: static equilibrium at the height the geometry
gives (half the shape's height above the surface), minus the contact's
ERP/CFM sink. Stated bounds: over the last 500 steps no body moves more than
1 mm and no speed exceeds 1 cm/s (jitter); the final height is within 2 mm
of the geometric one.
"""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import jaxode

STEPS, H, DROP, FLOOR_HF = 1000, 0.01, 0.005, 0.1
HEX = np.array([[0.1 * math.cos(a), 0.1 * math.sin(a), z]
                for a in np.arange(6) * math.pi / 3 for z in (-0.06, 0.06)])
LYING = (math.cos(math.pi / 4), 0.0, math.sin(math.pi / 4), 0.0)  # local z -> world x
# name -> (add the geom to body b, half height above the surface [m], mass, quat)
SHAPES = {
    "sphere": (lambda b, i, **kw: b.add_sphere(0.1, body=i, **kw), 0.1,
               jaxode.mass.sphere(0.1, total=1.0), (1.0, 0.0, 0.0, 0.0)),
    "box": (lambda b, i, **kw: b.add_box((0.2, 0.3, 0.16), body=i, **kw), 0.08,
            jaxode.mass.box((0.2, 0.3, 0.16), total=1.0), (1.0, 0.0, 0.0, 0.0)),
    "capsule": (lambda b, i, **kw: b.add_capsule(0.05, 0.2, body=i, **kw), 0.05,
                jaxode.mass.capsule(0.05, 0.2, direction=3, total=1.0), LYING),
    "cylinder": (lambda b, i, **kw: b.add_cylinder(0.1, 0.2, body=i, **kw), 0.1,
                 jaxode.mass.cylinder(0.1, 0.2, direction=3, total=1.0), (1.0, 0.0, 0.0, 0.0)),
    "convex": (lambda b, i, **kw: b.add_convex(HEX, body=i, **kw), 0.06,
               jaxode.mass.convex(HEX, total=1.0), (1.0, 0.0, 0.0, 0.0)),
}


@pytest.fixture(scope="module")
def rest():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=1.0), category_bits=1, collide_bits=4)
    b.add_heightfield(np.full((9, 9), FLOOR_HF), size=(8.0, 2.0), pos=(0.0, 5.0, 0.0),
                      surface=jaxode.Surface(mu=1.0), category_bits=2, collide_bits=8)
    expect = []
    for k, (name, (add, half, m, quat)) in enumerate(SHAPES.items()):
        for floor, y, cat, z0 in (("plane", 0.0, 4, 0.0), ("heightfield", 5.0, 8, FLOOR_HF)):
            i = b.add_body(pos=(1.5 * k - 3.0, y, z0 + half + DROP), quat=quat, mass=m)
            add(b, i, surface=jaxode.Surface(mu=1.0), category_bits=cat, collide_bits=cat // 4)
            expect.append((name, floor, z0 + half))
    model = b.build()
    final, traj = jax.jit(lambda s: jaxode.rollout(model, s, STEPS, H))(jaxode.init(model))
    last = jax.tree.map(lambda x: np.asarray(x[-500:]), traj)
    return expect, last, int(final.overflow_contacts) + int(final.overflow_pairs)


@pytest.mark.parametrize("floor", ["plane", "heightfield"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_shape_rests_without_jitter(rest, shape, floor):
    expect, last, overflow = rest
    i = next(k for k, (n, f, _) in enumerate(expect) if n == shape and f == floor)
    z_rest = expect[i][2]
    assert np.all(np.isfinite(last.pos[:, i]))
    drift = np.abs(last.pos[:, i] - last.pos[0, i]).max()
    speed = np.linalg.norm(last.vel[:, i], axis=-1).max()
    assert drift < 1e-3, (shape, floor, drift)
    assert speed < 1e-2, (shape, floor, speed)
    assert abs(last.pos[-1, i, 2] - z_rest) < 2e-3, (shape, floor, last.pos[-1, i, 2], z_rest)
    assert overflow == 0
