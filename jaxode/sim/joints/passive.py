"""Joint-space passive dynamics of hinge and slider joints: damper, armature, spring.

MuJoCo's joint attributes ``damping``, ``armature``, ``stiffness`` and
``springref`` (and SDF/URDF ``<dynamics>``) act on a joint's own coordinate q
(angle [rad] or position [m]). In maximal coordinates the joint's coordinate
rate is one row's velocity, ``rate = J v`` with J the joint's limit/motor row
(body 1 minus body 2, ODE's sign), so they are ODE rows. With ODE's row
convention (``J v' = c - cfm lambda``, lambda the row's force [N m or N],
v' the end-of-step velocity; solver/core.py) and step h:

* an implicit damper (force ``-d rate'``) is an unbounded row with c = 0 and
  cfm = 1/d (ODE manual 3.8: ERP = h kp/(h kp + kd), CFM = 1/(h kp + kd)
  with kp = 0);
* an armature a (force ``-a (rate' - rate)/h``: the axis's acceleration times
  a rotor inertia, MuJoCo's diagonal term added to the joint-space mass
  matrix) is an unbounded row with cfm = h/a and target c = rate;
* together, one row: ``lambda = (a/h) rate - (a/h + d) rate'``, i.e.
  ``1/cfm = a/h + d`` and ``c = cfm (a/h) rate``;
* the spring ``-k (q - q_ref)`` at the start-of-step q is a joint force added
  before the solve (MuJoCo's Euler treats stiffness explicitly, damping
  implicitly: ``(M + a + h d) qacc = f - d qdot - k (q - q_ref)``, which is
  the row above once the solve has converged).

A single hinge or slider thus follows MuJoCo's Euler recursion
``(I + a + h d)(w' - w) / h = tau - d w - k (q - q_ref)`` exactly (up to the
solve's convergence and ODE's own rotation update). ``d`` is the row's only
when the model is built implicit (``Model.joint_damping_explicit`` False);
otherwise Gazebo's explicit damping torque applies (:func:`explicit_damping`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxode.sim import joints
from jaxode.sim.joints.basic import Coordinate, hinge_coordinate, slider_coordinate
from jaxode.sim.joints.common import BodyPair, axis_rows

#: Joint types with a passive row and Gazebo's explicit damping (one coordinate each).
PASSIVE = (joints.HINGE, joints.SLIDER)


class PassiveRow(NamedTuple):
    """One joint's passive row and the spring's wrenches.

    j1, j2 (6,); c, cfm (): the row (unbounded); active (): bool, armature or
    damper present; w1, w2 (6,) [force | torque]: the spring's joint force on
    body 1 and body 2."""

    j1: jax.Array
    j2: jax.Array
    c: jax.Array
    cfm: jax.Array
    active: jax.Array
    w1: jax.Array
    w2: jax.Array


def coordinate(jtype: int, g, b: BodyPair) -> Coordinate:
    """The coordinate of one hinge or slider joint (``g`` one joint's slice)."""
    return hinge_coordinate(g, b) if jtype == joints.HINGE else slider_coordinate(g, b)


def explicit_damping(jtype: int, g, b: BodyPair, damping):
    """Gazebo's explicit joint damping (ODEJoint::ApplyExplicitStiffnessDamping): the
    joint force ``-damping * rate`` from the start-of-step rate, applied before the
    step as dJointAddHingeTorque / dJointAddSliderForce do (``J^T f``; a joint
    attached world-first reads its rate negated and negates the force: no change).
    Returns (w1, w2) (6,) [force | torque] on body 1 and body 2."""
    co = coordinate(jtype, g, b)
    j1, j2 = axis_rows(co.axis, co.rotational, co.ltd, g.has2)
    f = -damping * co.rate
    return j1 * f, j2 * f


def row(jtype: int, g, b: BodyPair, armature, damping, stiffness, springref, fps) -> PassiveRow:
    """The passive row of one joint (module docstring): armature a [kg m^2 or
    kg], implicit damping d [N m s/rad or N s/m] (0 when explicit), stiffness
    k and springref; fps = 1/h [1/s]."""
    co = coordinate(jtype, g, b)
    j1, j2 = axis_rows(co.axis, co.rotational, co.ltd, g.has2)
    inv_cfm = armature * fps + damping          # a/h + d  [N m s/rad or N s/m]
    active = inv_cfm > 0
    safe = jnp.where(active, inv_cfm, 1.0)
    cfm = jnp.where(active, 1.0 / safe, 0.0)
    c = jnp.where(active, (armature * fps) * co.rate / safe, 0.0)
    f = -stiffness * (co.value - springref)
    # the force f along the row: J^T f on the bodies (the rate's direction)
    return PassiveRow(j1, j2, c, cfm, active, j1 * f, j2 * f)
