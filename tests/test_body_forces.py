"""The body force API (dBodyAdd*: force, torque, rel force/torque, force at a world or
body point, body-frame force at a world or body point) against libode 0.16: the same
calls on a rotated body leave the same accumulated force and torque (dBodyGetForce /
dBodyGetTorque) to float64 rounding, and one step with them moves the body the same."""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import jaxode

try:
    from tools.conformance import odelib
    odelib.load()
except Exception:  # pragma: no cover - libode (or the repository's tools/) absent
    odelib = None

POS = (0.3, -0.2, 1.1)
QUAT = tuple(np.array([math.cos(0.6), 0.3 * math.sin(0.6), -0.5 * math.sin(0.6),
                       0.81 * math.sin(0.6)]) / np.linalg.norm(
    [math.cos(0.6), 0.3 * math.sin(0.6), -0.5 * math.sin(0.6), 0.81 * math.sin(0.6)]))
INERTIA = np.array([[0.4, 0.01, -0.02], [0.01, 0.3, 0.03], [-0.02, 0.03, 0.2]])
# (jaxode function, libode function, force-like vector, point or None)
CALLS = [
    ("add_force", "dBodyAddForce", (1.0, -2.0, 0.5), None),
    ("add_torque", "dBodyAddTorque", (0.3, 0.1, -0.7), None),
    ("add_rel_force", "dBodyAddRelForce", (-0.4, 0.9, 1.3), None),
    ("add_rel_torque", "dBodyAddRelTorque", (0.2, -0.6, 0.25), None),
    ("add_force_at_pos", "dBodyAddForceAtPos", (0.7, 0.2, -1.1), (1.0, 0.5, 0.2)),
    ("add_force_at_rel_pos", "dBodyAddForceAtRelPos", (-1.2, 0.3, 0.4), (0.1, -0.3, 0.2)),
    ("add_rel_force_at_pos", "dBodyAddRelForceAtPos", (0.5, 0.5, -0.2), (-0.4, 0.2, 1.4)),
    ("add_rel_force_at_rel_pos", "dBodyAddRelForceAtRelPos", (0.1, -1.5, 0.6), (0.2, 0.1, -0.25)),
]


@pytest.mark.skipif(odelib is None, reason="libode not available")
def test_body_force_api_matches_libode():
    with jax.enable_x64(True):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
        b.add_body(pos=POS, quat=QUAT, vel=(0.1, 0.0, -0.2), angvel=(0.5, -0.3, 0.8),
                   mass=jaxode.mass.from_inertia(2.0, INERTIA))
        model = b.build()
        st0 = jaxode.init(model)
        for fn, ode_fn, f, p in CALLS:
            w = odelib.OdeWorld(gravity=(0.0, 0.0, 0.0))
            w.add_body(POS, quat=QUAT, vel=(0.1, 0.0, -0.2), angvel=(0.5, -0.3, 0.8), mass=2.0,
                       inertia=INERTIA)
            args = tuple(f) + (tuple(p) if p is not None else ())
            w.body_call(ode_fn, 0, *args)
            f_ode = odelib._read(w.body_call("dBodyGetForce", 0), 3)
            t_ode = odelib._read(w.body_call("dBodyGetTorque", 0), 3)
            call = getattr(jaxode, fn)
            st = call(st0, 0, f) if p is None else call(st0, 0, f, p)
            np.testing.assert_allclose(np.asarray(st.force[0]), f_ode, atol=1e-13, err_msg=fn)
            np.testing.assert_allclose(np.asarray(st.torque[0]), t_ode, atol=1e-13, err_msg=fn)
            # and the step with them: QuickStep with no constraint rows, the same motion
            w.step(0.01)
            out = w.state()
            w.close()
            s1 = jaxode.step(model, st, 0.01)
            np.testing.assert_allclose(np.asarray(s1.vel[0]), out["vel"][0], atol=1e-12,
                                       err_msg=fn)
            np.testing.assert_allclose(np.asarray(s1.angvel[0]), out["angvel"][0], atol=1e-12,
                                       err_msg=fn)
    # something was applied in every case (a call that did nothing would match an empty ODE)
    assert all(np.any(np.asarray(c[2]) != 0) for c in CALLS)
