"""Gazebo's physics.cc integration tests, ported by name (gazebo-classic
``test/integration/physics.cc``, ``PhysicsTest``, ODE as the engine).

Each world is rebuilt from the test's own numbers; the truths are the test's
closed forms with its tolerance (``PHYSICS_TOL`` = 1e-2). Gazebo's physics
defaults (dt 1 ms, 50 iterations, erp 0.2, cfm 0, contact_max_correcting_vel
100, surface layer 1 mm) are what :func:`jaxode.load_sdf` applies when a world
names none.
"""
from __future__ import annotations

import jax
import numpy as np

import jaxode
from fast_compile import OPTIONS as _FAST

PHYSICS_TOL = 1e-2
DT = 0.001


def test_collision_filtering():
    """PhysicsTest.CollisionFiltering: a model of two overlapping unit-box links
    (y = +-0.1 m) without <self_collide> falls for 5 steps: the links do not
    repel each other (vx = vy = 0 exactly) and fall (vz < 0). Also with both
    links' collisions given a shared collide_bitmask (the links of one model
    still do not collide: Gazebo filters them by model, before the masks)."""
    def model(mask: str) -> str:
        contact = (f"<surface><contact><collide_bitmask>{mask}</collide_bitmask></contact>"
                   "</surface>") if mask else ""
        links = "".join(
            f'<link name="link0{i + 1}"><pose>0 {y} 0 0 0 0</pose><collision name="geom">'
            f'<geometry><box><size>1 1 1</size></box></geometry>{contact}</collision></link>'
            for i, y in enumerate((0.1, -0.1)))
        return (f'<sdf version="1.6"><world name="default"><model name="multiLinkModel">'
                f'<pose>0 0 2 0 0 0</pose>{links}</model></world></sdf>')

    for mask in ("", "0x03"):
        b = jaxode.load_sdf(model(mask))
        m = b.build()
        s = jax.jit(lambda s: jaxode.rollout(m, s, 5, b.dt)[0], compiler_options=_FAST)(
            jaxode.init(m))
        vel = np.asarray(s.vel)
        assert vel.shape[0] == 2
        assert np.all(vel[:, :2] == 0.0), (mask, vel)
        assert np.all(vel[:, 2] < 0.0), (mask, vel)


def test_inelastic_collision():
    """PhysicsTest.InelasticCollision (the collision_test world): a 1 kg unit
    box at x = 0 and a 1 kg sphere of radius 0.5 m at x = 2 (a 1 m gap), no
    gravity, no bounce; a 1000 N push on the box for the first 1 ms step gives
    it 1 m/s (the test sets it after its first step, so it acts in the second), it reaches the sphere at t = 1 s and the two, of equal mass,
    move on together at 0.5 m/s (momentum conserved, no rebound). Checked each
    step against the test's own integration of the ideal motion, except in
    the collision's transition 1 s < t < 1.01 s, within 1e-2 m and m/s; the
    sphere stays at x = 2, still, until t = 1 s (exactly, as the test asserts)."""
    b = jaxode.WorldBuilder(gravity=(0, 0, 0), erp=0.2, cfm=0.0, iterations=50, sor=1.3,
                            contact_max_correcting_vel=100.0, contact_surface_layer=0.001)
    box = b.add_body(pos=(0, 0, 0.5), mass=jaxode.mass.box(size=(1, 1, 1), total=1.0))
    b.add_box((1, 1, 1), body=box)
    ball = b.add_body(pos=(2, 0, 0.5), mass=jaxode.mass.sphere(radius=0.5, total=1.0))
    b.add_sphere(0.5, body=ball)
    m = b.build()
    f, steps = 1000.0, int(1.1 / DT)

    def one(s, i):
        # Gazebo's loop sets the force after its first step: it acts in the second
        s = jax.lax.cond(i == 1, lambda s: jaxode.add_force(s, box, (f, 0.0, 0.0)),
                         lambda s: s, s)
        s = jaxode.step(m, s, DT)
        return s, (s.pos[:, 0], s.vel[:, 0])

    run = jax.jit(lambda s: jax.lax.scan(one, s, np.arange(steps))[1], compiler_options=_FAST)
    xs, vs = (np.asarray(a) for a in run(jaxode.init(m)))
    x = v = 0.0
    mass = 1.0
    for i in range(steps):
        t = i * DT                                  # the test reads the time before its step
        if not 1.0 < t < 1.01:
            assert abs(xs[i, box] - x) < PHYSICS_TOL, (i, xs[i, box], x)
            assert abs(vs[i, box] - v) < PHYSICS_TOL, (i, vs[i, box], v)
            if t <= 1.0:
                assert xs[i, ball] == 2.0 and vs[i, ball] == 0.0, (i, xs[i, ball], vs[i, ball])
            else:
                assert abs(xs[i, ball] - (x + 1.0)) < PHYSICS_TOL, (i, xs[i, ball], x)
                assert abs(vs[i, ball] - v) < PHYSICS_TOL, (i, vs[i, ball], v)
        vold = v
        if i == 0:
            v = vold + DT * f / mass
        elif t >= 1.0:
            v = DT * f / 2.0                        # inelastic, equal masses
        x = x + DT * (v + vold) / 2.0
