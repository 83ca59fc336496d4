"""Gazebo's torsional friction (SDF ``<friction><torsional>``) as Gazebo's ODE computes it.

Gazebo's ODE fork (contact.cpp, dContactMu3 row) bounds the spin about the
contact normal by M = 3 pi/16 * mu3 * a * F_n (uniform pressure over a disc of
radius a), a = patch_radius, or sqrt(R * depth) without use_patch_radius, R =
1/(1/R_1 + 1/R_2) and the depth past min_depth (ODEPhysics::Collide combines
min mu3, max patch_radius, both use_patch_radius). libode 0.16 has no such row,
so the truth is that formula: a sphere spinning on a plane (its spin decouples
from the other rows) loses I dw = h M each step, with F_n and the depth read
from the step's contact; and, resting on one contact, F_n = m g, so the spin
falls linearly at 3 pi/16 mu3 a m g / I. Two worlds in one vmap: patch radius,
and surface radius.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.build import mass as mass_lib
from jaxode.types import batch

G, H, STEPS = 9.81, 0.01, 40
R_SPHERE, W0 = 0.1, 20.0
MU3, PATCH, R_SURF = 0.5, 0.02, 0.1
_M = mass_lib.sphere(radius=R_SPHERE, density=500.0)
I_ZZ = float(np.asarray(_M.inertia)[2, 2])


def _model():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    # the plane is flat (surface radius inf), the sphere's radius of curvature R_SURF
    b.add_plane(surface=jaxode.Surface(mu=1.0, torsional=MU3, patch_radius=PATCH,
                                       surface_radius=math.inf))
    k = b.add_body(pos=(0.0, 0.0, R_SPHERE), angvel=(0.0, 0.0, W0), mass=_M)
    b.add_sphere(R_SPHERE, body=k, surface=jaxode.Surface(
        mu=1.0, torsional=MU3, patch_radius=PATCH, surface_radius=R_SURF))
    return b.build()


def test_torsional_bound_is_gazebos():
    with jax.enable_x64(True):
        model = _model()
        ps = batch(model.params, 2)
        # world 1: a = sqrt(R depth) (use_patch_radius off on the sphere: both must use it)
        ps = ps.replace(use_patch_radius=ps.use_patch_radius.at[1, 1].set(0.0))

        def one(prm):
            def body(s, _):
                s = jaxode.step(model, s, H, params=prm)
                return s, (s.angvel[0, 2], s.contacts.force[0, 0], s.contacts.depth[0],
                           s.contacts.valid[0])
            return jax.lax.scan(body, jaxode.init(model), None, length=STEPS)[1]

        w, fn, depth, valid = (np.asarray(x) for x in jax.jit(jax.vmap(one))(ps))
    assert valid.all()
    w_prev = np.concatenate([np.full((2, 1), W0), w[:, :-1]], axis=1)
    a = np.stack([np.full(STEPS, PATCH), np.sqrt(R_SURF * np.maximum(depth[1], 0.0))])
    torque = 3.0 * math.pi / 16.0 * MU3 * a * fn
    # still slipping: each step removes h * M of angular momentum
    assert (w > 0).all()
    np.testing.assert_allclose(I_ZZ * (w_prev - w), H * torque, rtol=1e-9, atol=1e-12)
    assert (a[1, 1:] > 0).all() and np.ptp(depth[1]) > 0  # the surface-radius bound moves with depth
    # resting on one contact: F_n = m g and the spin falls linearly
    np.testing.assert_allclose(fn[0], _M.mass * G, rtol=1e-6)
    rate = 3.0 * math.pi / 16.0 * MU3 * PATCH * _M.mass * G / I_ZZ
    np.testing.assert_allclose(w[0, -1], W0 - STEPS * H * rate, rtol=1e-6)


def test_torsional_fields():
    """Unset torsional leaves the spin row to ``spinning`` (no rows at all without
    either); the Gazebo fields are validated (no compile here)."""
    import pytest
    b = jaxode.WorldBuilder()
    b.add_plane(surface=jaxode.Surface(mu=1.0))
    k = b.add_body(pos=(0.0, 0.0, R_SPHERE), mass=_M)
    b.add_sphere(R_SPHERE, body=k, surface=jaxode.Surface(mu=1.0))
    m = b.build()
    assert not m.angular_friction and float(jnp.max(m.params.torsional)) < 0
    assert _model().angular_friction
    with pytest.raises(ValueError, match=r"use_patch_radius must be in \[0, 1\]"):
        jaxode.Surface(use_patch_radius=2.0).validate()
    with pytest.raises(ValueError, match=r"torsional must be in \[0, inf\)"):
        jaxode.Surface(torsional=-0.5).validate()
    with pytest.raises(ValueError, match=r"surface_radius must be in \[0, inf\]"):
        jaxode.Surface(surface_radius=-1.0).validate()
