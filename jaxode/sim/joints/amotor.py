"""Angular motor (ODE's joints/amotor.cpp): up to three rotational limit/motor
rows about axes that turn with body 1, body 2 or the world. It constrains
nothing else; combined with a ball joint it makes a powered 3-DOF joint.

Modes (ODE's dAMotorUser, dAMotorEuler):

* user: ``num`` axes (0 to 3), axis i fixed in frame ``rel[i]`` (0 world, 1
  body 1, 2 body 2; body 2 absent: the world). ODE knows the joint angles only
  from dJointSetAMotorAngle; jaxode does not store user angles, so a user-mode
  amotor takes motors only and its limit test sees ODE's unset angle, 0.
* euler: three axes; axis 0 fixed in body 1, axis 2 fixed in body 2 (or the
  world), perpendicular at build time; axis 1 = normalize(axis 2 x axis 0).
  The Euler angles are computed each step from reference vectors set at build
  time (ODE's setEulerReferenceVectors, computeEulerAngles), and the rows act
  about axis1 x axis2, axis 1 and axis0 x axis1, which leave the other two
  Euler angles unchanged (ODE's getInfo2). Stops apply to the Euler angles.

Rows: 3 limit/motor rows (addLimot, rotational); a row is on when its axis
exists (i < num) and it is powered (fmax > 0) or at a stop (no [-pi, pi]
rule: ODE's testRotationalLimit alone).

Geometry (from build time; ``extra``): axes (3, 3) the stored axes (ODE's
m_axis: body 1 frame, body 2 frame or world, by rel), rel (3,), num (number
of axes), euler (1.0 in Euler mode), ref1 (body 1 frame: axis 2 at build
time), ref2 (body 2 frame, world for the world: axis 0 at build time).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.joints.common import (AMOTOR, BodyPair, JointParams, JointType, Limot, assemble,
                                  axis, limot_row, register)


def _normalize(v):
    return v / jnp.sqrt(jm.sum_terms(v * v) + jnp.finfo(v.dtype).tiny)


def user_axes(g, r1, r2):
    """ODE's doComputeGlobalUserAxes: the three stored axes in the world frame (3, 3);
    r1, r2 the bodies' rotation matrices (identity for the world)."""
    m, rel = g.extra["axes"], g.extra["rel"]
    # body 2 absent: r2 is the identity and the stored axis is the world axis
    return jnp.where((rel == 1)[:, None], jm.mm(m, r1.T),
                     jnp.where((rel == 2)[:, None], jm.mm(m, r2.T), m))


def euler_axes(g, r1, r2):
    """ODE's doComputeGlobalEulerAxes: (ax0, ax1, ax2) in the world frame; ax0
    from body 1, ax2 from body 2 (or the world), ax1 = normalize(ax2 x ax0)."""
    ax0 = jm.mm(r1, g.extra["axes"][0])
    ax2 = jm.mm(r2, g.extra["axes"][2])
    return ax0, _normalize(jnp.cross(ax2, ax0)), ax2


def euler_angles(g, r1, r2):
    """ODE's computeEulerAngles [rad] (3,): angle 0 about ax0 (body 1 relative to
    its reference), angle 1 about ax1 (the tilt between ax0 and ax2; zero when
    they are perpendicular), angle 2 about ax2 (body 2 relative to its reference)."""
    ax0, ax1, ax2 = euler_axes(g, r1, r2)
    ref1, ref2 = jm.mm(r1, g.extra["ref1"]), jm.mm(r2, g.extra["ref2"])
    a0 = -jnp.arctan2(jm.mm(ax2, jnp.cross(ax0, ref1)), jm.mm(ax2, ref1))
    a1 = -jnp.arctan2(jm.mm(ax2, ax0), jm.mm(ax2, jnp.cross(ax0, ax1)))
    a2 = -jnp.arctan2(jm.mm(ref2, ax1), jm.mm(ref2, jnp.cross(ax1, ax2)))
    return jnp.stack([a0, a1, a2])


def row_axes(g, r1, r2):
    """World axes of the three rows (3, 3) (ODE's getInfo2 / dJointGetAMotorAxis):
    user mode the stored axes; Euler mode ax1 x ax2, ax1, ax0 x ax1 (not unit
    in general, as ODE)."""
    ax0, ax1, ax2 = euler_axes(g, r1, r2)
    eul = jnp.stack([jnp.cross(ax1, ax2), ax1, jnp.cross(ax0, ax1)])
    return jnp.where(g.extra["euler"] > 0, eul, user_axes(g, r1, r2))


def torque_axes(g, r1, r2):
    """ODE's computeGlobalAxes as dJointAddAMotorTorques uses it (3, 3): the
    stored axes (user) or ax0, ax1, ax2 (Euler)."""
    eul = jnp.stack(euler_axes(g, r1, r2))
    return jnp.where(g.extra["euler"] > 0, eul, user_axes(g, r1, r2))


def amotor(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointAMotor::getInfo1/getInfo2 for one joint (3 rows)."""
    dtype = b.pos1.dtype
    r1, r2 = jm.quat_to_mat(b.quat1), jm.quat_to_mat(b.quat2)
    axes = row_axes(g, r1, r2)
    # stops test the Euler angles, or ODE's unset user-mode angles (0)
    angles = jnp.where(g.extra["euler"] > 0, euler_angles(g, r1, r2), 0.0)
    dw = b.angvel1 - b.angvel2
    z3 = jnp.zeros(3, dtype)
    lims = []
    for i in range(3):
        lim = Limot(*limot_row(axes[i], True, angles[i], jm.mm(axes[i], dw),
                               axis(jp.axes, i), z3, g.has2, fps, True))
        on = i < g.extra["num"]
        lims.append(lim._replace(active=lim.active & on, extra1=jnp.where(on, lim.extra1, 0.0),
                                 extra2=jnp.where(on, lim.extra2, 0.0)))
    empty = jnp.zeros((0, 6), dtype)
    return assemble(empty, empty, jnp.zeros((0,), dtype), cfm_w, lims)


def _geometry(geo, frame1, frame2):
    """ODE's dJointSetAMotorAxis (axes stored by rel) and setEulerReferenceVectors."""
    _, r1, _ = frame1
    r2 = np.eye(3) if frame2 is None else frame2[1]
    axes, rel, num = geo["axes"], geo["rel"], geo["num_axes"]
    stored, ref1, ref2 = np.zeros((3, 3)), np.zeros(3), np.zeros(3)
    if geo["mode"] == "euler":
        a0, a2 = axes
        stored[0], stored[2] = jm.mm(r1.T, a0), jm.mm(r2.T, a2)
        ref1, ref2 = jm.mm(r1.T, a2), jm.mm(r2.T, a0)
    else:
        for i in range(num):
            frame = {1: r1, 2: r2}.get(int(rel[i]), np.eye(3))
            stored[i] = jm.mm(frame.T, axes[i])
    return dict(axes=stored, rel=np.asarray(rel, np.float64), num=float(num),
                euler=float(geo["mode"] == "euler"), ref1=ref1, ref2=ref2)


register(AMOTOR, JointType("amotor", 3, 3, amotor, _geometry, nlimot=3))
