"""Plane-2D joint (ODE's joints/plane2d.cpp): keeps one body in the world
plane z = 0, turning only about the world z axis.

Rows (ODE's dxJointPlane2D::getInfo2, in this order), on body 1 only:
  0     linear along world z; rhs (ERP/h) (0 - z): pulls the body's centre
        back to z = 0 (the absolute plane, whatever the build-time height);
  1, 2  angular about world x and y, rhs 0: no angular velocity about x or y
        (ODE corrects no tilt; a body built tilted stays tilted);
  3     motor along world x (builder axis 1, suffix "", ODE's
        dJointSetPlane2DXParam): velocity vel [m/s] with force up to fmax [N];
  4     motor along world y (axis 2, suffix "2", dJointSetPlane2DYParam);
  5     motor about world z (axis 3, suffix "3", dJointSetPlane2DAngleParam):
        angular velocity vel [rad/s] with torque up to fmax [N m].
A motor row is on only while its fmax > 0 (masked otherwise). ODE never tests
stops on this joint (its motors' ``limit`` stays 0), so the builder rejects them.
No geometry: the rows are fixed in the world frame.
"""
from __future__ import annotations

import jax.numpy as jnp

from jaxode.sim.joints.common import (PLANE2D, BodyPair, JointParams, JointType, assemble, axis,
                                  limot_row, register)


def plane2d(g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps):
    """ODE's dxJointPlane2D::getInfo1/getInfo2 for one joint."""
    dtype = b.pos1.dtype
    eye = jnp.eye(3, dtype=dtype)
    z3 = jnp.zeros(3, dtype)
    j1 = jnp.stack([jnp.concatenate([eye[2], z3]), jnp.concatenate([z3, eye[0]]),
                    jnp.concatenate([z3, eye[1]])])
    c = jnp.stack([-(fps * erp_w) * b.pos1[2], jnp.zeros((), dtype), jnp.zeros((), dtype)])
    off = jnp.zeros((), bool)
    zero = jnp.zeros((), dtype)
    motors = [limot_row(eye[k], k == 2, zero, zero, axis(jp.axes, k), z3, g.has2, fps, off)
              for k in range(3)]
    return assemble(j1, jnp.zeros_like(j1), c, cfm_w, motors)


register(PLANE2D, JointType("plane2d", 6, 3, plane2d, nlimot=3))
