"""Linear motor (ODE's joints/lmotor.cpp): up to three linear motor rows along
axes that turn with body 1, body 2 or the world. It constrains nothing else.

Axis i is fixed in frame ``rel[i]`` (0 world, 1 body 1, 2 body 2); ODE turns
rel 2 into rel 1 when body 2 is the world (dJointSetLMotorAxis). Between two
bodies the row's force acts at the midpoint of their centres (addLimot's
linear torque decoupling), so it creates no torque couple.

Rows: 3 motor rows (addLimot, linear); a row is on when its axis exists (i <
num) and it is powered (fmax > 0). ODE 0.16's lmotor never tests its stops
(getInfo1 counts powered axes only), so it has no limits; the builder
rejects stops.

Geometry (from build time; ``extra``): axes (3, 3) the stored axes (body 1
frame, body 2 frame or world, by rel), rel (3,), num (number of axes).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxode.sim import math as jm
from jaxode.sim.joints.common import (LMOTOR, BodyPair, JointParams, JointType, Limot, assemble,
                                  axis, limot_row, register)


def world_axes(g, q1, q2):
    """ODE's dxJointLMotor::computeGlobalAxes: the stored axes in the world frame (3, 3)."""
    m, rel = g.extra["axes"], g.extra["rel"]
    ax1 = jm.mm(m, jm.quat_to_mat(q1).T)
    ax2 = jm.mm(m, jm.quat_to_mat(q2).T)
    return jnp.where((rel == 1)[:, None], ax1, jnp.where((rel == 2)[:, None], ax2, m))


def lmotor(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointLMotor::getInfo1/getInfo2 for one joint (3 rows)."""
    dtype = b.pos1.dtype
    axes = world_axes(g, b.quat1, b.quat2)
    half = 0.5 * (b.pos2 - b.pos1)
    zero = jnp.zeros((), dtype)
    lims = []
    for i in range(3):
        ltd = jnp.cross(half, axes[i]) * g.has2
        lim = Limot(*limot_row(axes[i], False, zero, zero, axis(jp.axes, i), ltd, g.has2, fps,
                               False))
        lims.append(lim._replace(active=lim.active & (i < g.extra["num"])))
    empty = jnp.zeros((0, 6), dtype)
    return assemble(empty, empty, jnp.zeros((0,), dtype), cfm_w, lims)


def _geometry(geo, frame1, frame2):
    """ODE's dJointSetLMotorAxis: each axis stored in the frame its rel names."""
    _, r1, _ = frame1
    rel = [1 if (r == 2 and frame2 is None) else int(r) for r in geo["rel"]]
    stored = np.zeros((3, 3))
    for i in range(geo["num_axes"]):
        frame = {1: r1, 2: None if frame2 is None else frame2[1]}.get(rel[i])
        stored[i] = geo["axes"][i] if frame is None else jm.mm(frame.T, geo["axes"][i])
    return dict(axes=stored, rel=np.asarray(rel, np.float64),
                num=float(geo["num_axes"]))


register(LMOTOR, JointType("lmotor", 3, 3, lmotor, _geometry, nlimot=3))
