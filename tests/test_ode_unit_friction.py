"""ODE's own unit test ``tests/friction.cpp`` (suite JointContact), ported by name.

``test_ZeroMu``: a contact joint between body 1 at (-1, 0, 0) and body 2 at
(1, 0, 0), the contact at the origin with its normal (-1, 0, 0) into body 1,
fdir1 = +y (so fdir2 = n x fdir1 = -z), dContactApprox1 (the pyramid: the
friction rows' bound scales with the normal row, findex). With mu = 0 and
mu2 = 1 ODE makes no row for the first direction (``info1.m`` = 2) and the
second's Jacobian is J1 = [0 0 -1 | 0 1 0], J2 = [0 0 1 | 0 1 0]; with mu = 1,
mu2 = 0 the row left is the first: J1 = [0 1 0 | 0 0 1], J2 = [0 -1 0 | 0 0 1]
(CHECK_CLOSE 1e-6). jaxode keeps a slot's rows fixed in number (static
shapes): a direction of mu 0 has bounds [0, 0] times the normal force, a row
that carries no force, which is what ODE's absent row means; it is checked so.
The contact is made by two spheres touching at the origin.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxode
from jaxode.sim import dynamics, narrowphase, rowset


def _contact_rows(mu, mu2):
    b = jaxode.WorldBuilder(gravity=(0, 0, 0))
    m1 = b.add_body(pos=(-1.0, 0.0, 0.0), mass=jaxode.mass.sphere(radius=1.0, total=1.0))
    m2 = b.add_body(pos=(1.0, 0.0, 0.0), mass=jaxode.mass.sphere(radius=1.0, total=1.0))
    # touching at the origin (a hair of overlap: a contact of depth ~0)
    b.add_sphere(1.0 + 1e-6, body=m1, surface=jaxode.Surface(mu=mu, mu2=mu2, fdir1=(0, 1, 0)))
    b.add_sphere(1.0 + 1e-6, body=m2, surface=jaxode.Surface(mu=mu, mu2=mu2))
    m = b.build()
    s = jaxode.init(m)

    @jax.jit
    def rows(s):
        found = narrowphase.detect(m, s)
        return rowset.build(m, m.params, dynamics.bodies(m, m.params, s, 0.01), found)

    r = rows(s)
    head, tail = r.head, r.tail
    nj = r.njoint_rows
    live = np.flatnonzero(np.asarray(head.active)[nj:])
    assert live.size == 1, "one contact between the spheres"
    slot = int(live[0])
    normal_row = nj + slot
    k = tail.body1.shape[0] // (head.body1.shape[0] - nj)       # friction rows per slot
    t = {f: np.asarray(getattr(tail, f))[slot * k:slot * k + 2] for f in tail._fields}
    n = {f: np.asarray(getattr(head, f))[normal_row] for f in head._fields}
    return n, t, normal_row, (m1, m2)


@pytest.mark.parametrize("mu,mu2,free,kept,j1,j2", [
    (0.0, 1.0, 0, 1, [0, 0, -1, 0, 1, 0], [0, 0, 1, 0, 1, 0]),
    (1.0, 0.0, 1, 0, [0, 1, 0, 0, 0, 1], [0, -1, 0, 0, 0, 1]),
], ids=["zero_mu", "zero_mu2"])
def test_joint_contact_zero_mu(mu, mu2, free, kept, j1, j2):
    n, t, normal_row, (b1, b2) = _contact_rows(mu, mu2)
    # the normal row: into body 1 (ODE's normal (-1, 0, 0), body 1 first)
    assert int(n["body1"]) == b1 and int(n["body2"]) == b2
    np.testing.assert_allclose(n["j1"][:3], [-1, 0, 0], atol=1e-6)
    # the direction of zero friction carries no force: bounds [0, 0] x normal force
    assert t["hi"][free] == 0.0 and t["lo"][free] in (0.0, -0.0), (t["lo"], t["hi"])
    # the kept direction: ODE's Jacobian, its bound scaled by the normal row (Approx1)
    np.testing.assert_allclose(t["j1"][kept], j1, atol=1e-6)
    np.testing.assert_allclose(t["j2"][kept], j2, atol=1e-6)
    assert int(t["findex"][kept]) == normal_row
    assert t["hi"][kept] == 1.0 and t["lo"][kept] == -1.0
