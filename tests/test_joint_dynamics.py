"""Gazebo's joint damping and friction (SDF ``<axis><dynamics damping friction>``), per
world in a batch, against analytic truths and against libode driven the way
Gazebo's ODE plugin drives it.

Gazebo (gazebo-classic physics/ode/ODEJoint.cc): damping is explicit,
``ApplyExplicitStiffnessDamping`` adds the joint force ``-|c| * rate`` (the
rate at the start of the step) through the joint's force API
(dJointAddSliderForce / dJointAddHingeTorque) before each step; friction is
``SetParam("friction")``: the axis's motor with dParamVel 0 and dParamFMax = friction.

One model, two bodies: body 0 on a vertical slider to the world with damping c
falls under gravity (ODE's semi-implicit Euler with the damping force from the
start-of-step rate: v_{n+1} = v_n + h (-g - c v_n / m), so
v_n = v_inf (1 - (1 - h c / m)^n), terminal velocity v_inf = -m g / c); body 1
on a hinge about world z through its centre, driven by an applied torque tau
against friction F: angular velocity n h (tau - F) / I_zz when tau > F, 0
when tau < F. Two worlds in one vmap with different c, F and tau.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode import joint_api as ja
from jaxode.build import mass as mass_lib
from jaxode.types import batch

try:
    from tools.conformance import odelib
    odelib.load()
except Exception:  # pragma: no cover - libode (or the repository's tools/) absent
    odelib = None

G = 9.81
H = 0.01
STEPS = 60
_M0 = mass_lib.box(size=(0.1, 0.1, 0.1), total=2.0)
_M1 = mass_lib.box(size=(0.4, 0.2, 0.1), total=1.5)
IZZ = float(np.asarray(_M1.inertia)[2, 2])
# per world: slider damping c [N s/m], hinge friction F [N m], applied torque tau [N m]
C = (4.0, 25.0)
F = (0.02, 0.05)
TAU = (0.05, 0.03)


def _model():
    # Gazebo's explicit damping (jaxode's default, the implicit row, is checked in
    # tests/test_joint_passive.py)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), joint_damping="explicit")
    b.add_body(pos=(0.0, 0.0, 1.0), mass=_M0)
    b.add_body(pos=(1.0, 0.0, 1.0), mass=_M1)
    b.add_slider(0, None, axis=(0.0, 0.0, 1.0), damping=C[0])
    b.add_hinge(1, None, anchor=(1.0, 0.0, 1.0), axis=(0.0, 0.0, 1.0), friction=F[0])
    return b.build()


def _truth(k: int, n: int):
    m = _M0.mass
    v_inf = -m * G / C[k]
    vz = v_inf * (1.0 - (1.0 - H * C[k] / m) ** n)
    w = n * H * max(TAU[k] - F[k], 0.0) / IZZ
    return vz, w


def _rollout_two_worlds(model):
    """Both worlds, STEPS steps in one vmapped scan (one compile): the applied hinge
    torque each step, then the step; returns the batched (pos, vel, angvel) per step."""
    ps = batch(model.params, 2)
    ps = ps.replace(joint_damping=ps.joint_damping.at[1, 0, 0].set(C[1]),
                    joint_friction=ps.joint_friction.at[1, 1, 0].set(F[1]))

    def one(prm, tau):
        def body(s, _):
            s = jaxode.step(model, ja.add_hinge_torque(model, s, 1, tau), H, params=prm)
            return s, (s.pos, s.vel, s.angvel)

        return jax.lax.scan(body, jaxode.init(model), None, length=STEPS)[1]

    return jax.jit(jax.vmap(one))(ps, jnp.asarray(TAU))


def _libode_world0():
    """World 0 in libode, driven as Gazebo's ODE plugin drives it: per step
    ApplyExplicitStiffnessDamping (dJointAddSliderForce(-c rate)), the applied
    effort (dJointAddHingeTorque), friction as a zero-velocity motor."""
    w = odelib.OdeWorld(gravity=(0.0, 0.0, -G))
    w.add_body((0.0, 0.0, 1.0), mass=_M0.mass, inertia=np.asarray(_M0.inertia))
    w.add_body((1.0, 0.0, 1.0), mass=_M1.mass, inertia=np.asarray(_M1.inertia))
    w.add_joint("slider", 0, None, axis=(0.0, 0.0, 1.0))
    w.add_joint("hinge", 1, None, anchor=(1.0, 0.0, 1.0), axis=(0.0, 0.0, 1.0),
                vel=0.0, fmax=F[0])
    pos, angvel = [], []
    for _ in range(STEPS):
        rate = w.joint_call("dJointGetSliderPositionRate", 0)
        w.joint_call("dJointAddSliderForce", 0, -C[0] * rate)
        w.joint_call("dJointAddHingeTorque", 1, TAU[0])
        w.step(H)
        st = w.state()
        pos.append(st["pos"])
        angvel.append(st["angvel"])
    w.close()
    return np.stack(pos), np.stack(angvel)


def test_damping_and_friction_per_world():
    with jax.enable_x64(True):
        pos, vel, angvel = (np.asarray(x) for x in _rollout_two_worlds(_model()))
    for k in range(2):
        vz, w = _truth(k, STEPS)
        # slider: the closed form of Gazebo's explicit scheme (the slider keeps x, y
        # and the orientation; nothing else acts along z)
        assert abs(vel[k, -1, 0, 2] - vz) < 1e-9 * abs(vz), (k, vel[k, -1, 0, 2], vz)
        # hinge: the friction row saturates at F (tau > F) or holds (tau < F); the
        # world cfm 1e-10 lets the held axis creep by ~cfm F / h
        assert abs(angvel[k, -1, 1, 2] - w) < 1e-7, (k, angvel[k, -1, 1, 2], w)
    # the per-world parameters took effect
    assert abs(vel[0, -1, 0, 2] - vel[1, -1, 0, 2]) > 0.1
    assert angvel[0, -1, 1, 2] > 0.1 and abs(angvel[1, -1, 1, 2]) < 1e-7
    # world 1 (h c / m = 0.125) is at the terminal velocity m g / c
    assert abs(vel[1, -1, 0, 2] + _M0.mass * G / C[1]) < 1e-3
    # world 0 against libode driven as Gazebo drives it: every step
    if odelib is not None:
        opos, oangvel = _libode_world0()
        assert np.max(np.abs(pos[0] - opos)) < 1e-12
        assert np.max(np.abs(angvel[0] - oangvel)) < 1e-12


def test_builder_checks():
    b = jaxode.WorldBuilder()
    b.add_body()
    b.add_body(pos=(1.0, 0.0, 0.0))
    with pytest.raises(ValueError, match=r"damping applies to hinge and slider"):
        b.add_universal(0, None, damping=1.0)
    with pytest.raises(ValueError, match=r"friction .* cannot be combined with fmax"):
        b.add_hinge(0, None, friction=0.1, fmax=1.0)
    with pytest.raises(ValueError, match=r"damping"):
        b.add_slider(1, None, damping=-1.0)
    with pytest.raises(ValueError, match=r"reorder_seed must be an integer in \[0, 2\*\*32\)"):
        jaxode.WorldBuilder(reorder_seed=-1)
