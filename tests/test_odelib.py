"""Sanity tests of the ctypes ODE wrapper (tools.conformance.odelib) against
closed-form / discrete reference behaviour.  Skipped when libode is absent."""

import math

import numpy as np
import pytest

from tools.conformance import odelib

try:
    odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"ODE unavailable: {e}", allow_module_level=True)

G = 9.81
H = 0.01


def test_struct_sizes():
    import ctypes

    assert ctypes.sizeof(odelib.dContactGeom) == 96
    assert ctypes.sizeof(odelib.dContact) == 248
    assert odelib.dContact.geom.offset == 120
    assert ctypes.sizeof(odelib.dMass) == 136
    assert odelib.dContactApprox1 == (
        odelib.dContactApprox1_1 | odelib.dContactApprox1_2 | odelib.dContactApprox1_N
    )


def test_free_fall_is_semi_implicit_euler():
    g = np.array([0.3, -0.2, -G])
    with odelib.OdeWorld(gravity=g) as w:
        b = w.add_body((1.0, 2.0, 10.0), vel=(1.0, -2.0, 3.0), angvel=(0.1, 0.2, 0.3),
                       inertia=np.diag([0.1, 0.2, 0.3]))
        x = np.array([1.0, 2.0, 10.0])
        v = np.array([1.0, -2.0, 3.0])
        for _ in range(100):
            w.step(H)
            v = v + g * H
            x = x + v * H
            np.testing.assert_allclose(w.vel(b), v, rtol=0, atol=1e-12)
            np.testing.assert_allclose(w.pos(b), x, rtol=0, atol=1e-12)
        q = w.quat(b)
        assert abs(np.linalg.norm(q) - 1.0) < 1e-12
        st = w.state()
        assert st["pos"].shape == (1, 3) and st["quat"].shape == (1, 4)
        assert w.ncontacts_last == 0


def test_gravity_mode_off_and_force():
    with odelib.OdeWorld(gravity=(0, 0, -G)) as w:
        b = w.add_body((0, 0, 0), mass=2.0, gravity=False)
        w.add_force(b, (4.0, 0.0, 0.0))
        w.step(H)
        np.testing.assert_allclose(w.vel(b), [4.0 / 2.0 * H, 0, 0], atol=1e-15)
        w.step(H)  # forces are cleared after each step
        np.testing.assert_allclose(w.vel(b), [4.0 / 2.0 * H, 0, 0], atol=1e-15)


def test_sphere_comes_to_rest_on_plane():
    r = 0.5
    with odelib.OdeWorld(gravity=(0, 0, -G)) as w:
        w.add_plane((0, 0, 1), 0.0)
        b = w.add_body((0, 0, 0.8), inertia=np.eye(3) * 0.4 * r * r)
        w.add_sphere(r, body=b)
        w.step(H, 200)
        z = w.pos(b)[2]
        assert abs(z - r) < 1e-6
        assert np.linalg.norm(w.vel(b)) < 1e-6
        assert w.ncontacts_last == 1
        (c,) = w.contacts_last
        assert 0.0 <= c.depth < 1e-6
        assert {c.g1, c.g2} == {0, 1}


def test_box_sliding_with_pyramid_friction_stops_like_discrete_coulomb():
    mu, v0 = 0.5, 2.0
    surf = dict(mu=mu, friction="pyramid")
    with odelib.OdeWorld(gravity=(0, 0, -G)) as w:
        w.add_plane((0, 0, 1), 0.0, surface=surf)
        b = w.add_body((0, 0, 0.5), vel=(v0, 0, 0))
        w.add_box((1.0, 1.0, 1.0), body=b, surface=surf)
        w.step(H, 100)
        x_ode = w.pos(b)[0]
        assert w.ncontacts_last == 4
        assert abs(w.vel(b)[0]) < 1e-3
    v, x = v0, 0.0
    for _ in range(100):
        v = max(v - mu * G * H, 0.0)
        x += H * v
    assert v == 0.0
    assert abs(x_ode - x) < 0.01 * x


def test_collide_sphere_plane():
    r, z = 0.5, 0.4
    cs = odelib.collide(("sphere", r, (0.3, -0.2, z)), ("plane", (0, 0, 1), 0.0))
    assert len(cs) == 1
    c = cs[0]
    assert c.depth == pytest.approx(r - z, abs=1e-12)
    np.testing.assert_allclose(c.normal, [0, 0, 1], atol=1e-15)
    # ODE puts the point at the sphere's deepest point
    np.testing.assert_allclose(c.pos, [0.3, -0.2, z - r], atol=1e-12)
    assert (c.g1, c.g2) == (0, 1)
    # swapped order: same depth/point, normal flipped (points into geom 1)
    (c2,) = odelib.collide(dict(kind="plane", normal=(0, 0, 1), offset=0.0),
                           dict(kind="sphere", radius=r, pos=(0.3, -0.2, z)))
    assert c2.depth == pytest.approx(c.depth, abs=1e-15)
    np.testing.assert_allclose(c2.normal, [0, 0, -1], atol=1e-15)
    np.testing.assert_allclose(c2.pos, c.pos, atol=1e-15)
    # separated: no contact
    assert odelib.collide(("sphere", r, (0, 0, 0.6)), ("plane", (0, 0, 1), 0.0)) == []


def test_collide_box_flat_on_plane_gives_four_contacts():
    cs = odelib.collide(("box", (1.0, 2.0, 1.0), (0, 0, 0.45)), ("plane", (0, 0, 1), 0.0))
    assert len(cs) == 4
    for c in cs:
        assert c.depth == pytest.approx(0.05, abs=1e-12)
        np.testing.assert_allclose(c.normal, [0, 0, 1], atol=1e-15)
    corners = sorted((round(c.pos[0], 12), round(c.pos[1], 12)) for c in cs)
    assert corners == [(-0.5, -1.0), (-0.5, 1.0), (0.5, -1.0), (0.5, 1.0)]
    # max_contacts truncates
    assert len(odelib.collide(("box", (1, 2, 1), (0, 0, 0.45)), ("plane", (0, 0, 1), 0.0), 2)) == 2


def test_bounce_combination_uses_min():
    with odelib.OdeWorld(gravity=(0, 0, -G)) as w:
        w.add_plane((0, 0, 1), 0.0, surface=dict(bounce=0.5, bounce_vel=0.0))
        b = w.add_body((0, 0, 1.0), inertia=np.eye(3) * 0.1)
        w.add_sphere(0.5, body=b, surface=dict(bounce=0.9, bounce_vel=0.0))
        vz = []
        for _ in range(60):
            w.step(H)
            vz.append(w.vel(b)[2])
    v_impact = math.sqrt(2 * G * 0.5)
    assert max(vz) == pytest.approx(0.5 * v_impact, rel=0.05)


def test_collide_bits_filter_contacts():
    with odelib.OdeWorld(gravity=(0, 0, -G), space="simple") as w:
        w.add_plane((0, 0, 1), 0.0, category_bits=1, collide_bits=1)
        b = w.add_body((0, 0, 0.5))
        w.add_sphere(0.5, body=b, category_bits=2, collide_bits=2)
        w.step(H, 3)
        assert w.ncontacts_last == 0
        assert w.pos(b)[2] < 0.5
