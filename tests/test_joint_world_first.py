"""Joints attached world-first, ``add_hinge(None, body)`` = ODE's ``dJointAttach(j, 0, body)``,
against the real libode 0.16 (tools/conformance/odelib): every step's position and
the joint readings (dJointGetHingeAngle/AngleRate, dJointGetSliderPosition/
PositionRate), and dJointAddHingeTorque / dJointAddSliderForce, with ODE's
dJOINT_REVERSE sign conventions. Both attachment orders run through one compiled
step per joint type (the reversal is a traced joint field). Skipped without libode.
The slider cases are in the extended tier (``pytest -m extended``).
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxode
from jaxode import joint_api as ja
from jaxode.build import mass as mass_lib

odelib = pytest.importorskip("tools.conformance.odelib")
try:
    odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"libode not available: {e}", allow_module_level=True)

DT = 0.001
STEPS = 120
_M = mass_lib.box(size=(0.1, 0.1, 0.4), total=1.0)
_POS, _VEL, _ANGVEL = (0.3, 0.0, 0.0), (0.0, 0.2, 0.5), (0.5, 1.0, -0.3)
_CASES = {
    "hinge": dict(anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), lo_stop=-0.2, hi_stop=0.3,
                  vel=0.5, fmax=0.05),
    "slider": dict(axis=(1.0, 0.0, 1.0), lo_stop=-0.05, hi_stop=0.02, vel=0.3, fmax=2.0),
}
@jax.jit
def _step_read_hinge(model, state):
    state = jaxode.step(model, state, DT)
    return state, (ja.hinge_angle(model, state, 0), ja.hinge_angle_rate(model, state, 0))


@jax.jit
def _step_read_slider(model, state):
    state = jaxode.step(model, state, DT)
    return state, (ja.slider_position(model, state, 0), ja.slider_position_rate(model, state, 0))


def _worlds(kind: str, world_first: bool):
    ode = odelib.OdeWorld(gravity=(0.0, 0.0, -9.81))
    ode.add_body(_POS, vel=_VEL, angvel=_ANGVEL, mass=_M.mass, inertia=np.asarray(_M.inertia))
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(pos=_POS, vel=_VEL, angvel=_ANGVEL, mass=_M)
    bodies = (None, 0) if world_first else (0, None)
    ode.add_joint(kind, *bodies, **_CASES[kind])
    getattr(b, "add_" + kind)(*bodies, **_CASES[kind])
    return ode, b.build()


def _ode_readings(kind, ode):
    if kind == "hinge":
        return ode.hinge_angle(0), ode.hinge_angle_rate(0)
    return ode.slider_position(0), ode.joint_call("dJointGetSliderPositionRate", 0)


# the hinge in the default tier (one compile shared by both tests), the slider in
# the extended tier (its trajectory is also in tests/test_conformance.py)
_KINDS = ["hinge", pytest.param("slider", marks=pytest.mark.extended)]


@pytest.mark.parametrize("kind", _KINDS)
def test_world_first_matches_libode(kind):
    with jax.enable_x64(True):
        finals = {}
        for world_first in (True, False):
            ode, model = _worlds(kind, world_first)
            state = jaxode.init(model)
            pos_err = read_err = 0.0
            step = _step_read_hinge if kind == "hinge" else _step_read_slider
            for _ in range(STEPS):
                ode.step(DT)
                state, r_ours = step(model, state)
                pos_err = max(pos_err, float(np.max(np.abs(np.asarray(state.pos[0]) - ode.pos(0)))))
                r_ode = _ode_readings(kind, ode)
                read_err = max(read_err, float(np.max(np.abs(np.subtract(r_ode, r_ours)))))
            finals[world_first] = r_ode
            ode.close()
            # one joint, jaxode shuffles its rows as ODE (same generator and seed)
            assert pos_err < 1e-12, (kind, world_first, pos_err)
            assert read_err < 1e-11, (kind, world_first, read_err)
    if kind == "hinge":
        # same motion either way (ODE's hinge limits and motor use the internal angle);
        # the readings change sign
        np.testing.assert_allclose(finals[True], -np.asarray(finals[False]), rtol=0, atol=1e-12)
    else:
        # the slider's stops and motor act on the reversed position: different motion
        assert abs(finals[True][0] - finals[False][0]) > 0.01


@pytest.mark.parametrize("kind", _KINDS)
def test_world_first_add_torque_force_sign(kind):
    """dJointAddHingeTorque / dJointAddSliderForce on a world-first joint push the
    body the other way, as ODE (one step, no gravity, no joint stops)."""
    with jax.enable_x64(True):
        ode = odelib.OdeWorld(gravity=(0.0, 0.0, 0.0))
        ode.add_body(_POS, mass=_M.mass, inertia=np.asarray(_M.inertia))
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
        b.add_body(pos=_POS, mass=_M)
        geo = {k: v for k, v in _CASES[kind].items() if k in ("anchor", "axis")}
        ode.add_joint(kind, None, 0, **geo)
        getattr(b, "add_" + kind)(None, 0, **geo)
        model = b.build()
        state = jaxode.init(model)
        if kind == "hinge":
            ode.joint_call("dJointAddHingeTorque", 0, 0.7)
            state = ja.add_hinge_torque(model, state, 0, 0.7)
        else:
            ode.joint_call("dJointAddSliderForce", 0, 0.7)
            state = ja.add_slider_force(model, state, 0, 0.7)
        ode.step(DT)
        state, _ = (_step_read_hinge if kind == "hinge" else _step_read_slider)(model, state)
        got = np.concatenate([np.asarray(state.vel[0]), np.asarray(state.angvel[0])])
        want = np.concatenate([ode.vel(0), ode.angvel(0)])
        ode.close()
        assert np.max(np.abs(want)) > 1e-4            # the push moved the body
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_world_first_needs_a_reversible_type():
    b = jaxode.WorldBuilder()
    b.add_body(pos=(0.0, 0.0, 0.0))
    with pytest.raises(ValueError, match=r"body1 is None .*world-first attachment is supported"):
        b.add_universal(None, 0)
    with pytest.raises(ValueError, match=r"body1 must be an existing body index"):
        b.add_hinge(None, None)
