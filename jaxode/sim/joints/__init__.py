"""Joint constraint rows, one module per joint family (ODE's ``joints/*.cpp``).

Each joint type registers a :class:`JointType` in :data:`REGISTRY`: its row
count, number of parameterised axes, row function (ODE's getInfo2 for one
joint) and build-time geometry function. :func:`joint_rows` dispatches.
"""
from __future__ import annotations

from jaxode.sim.joints.common import (AMOTOR, BALL, FIXED, HINGE, HINGE2, JOINT_TYPE_NAMES, LMOTOR,  # noqa: F401
                                  PISTON, PLANE2D, PR, PU, REGISTRY, SLIDER, UNIVERSAL, AxisParams,
                                  BodyPair, JointGroup, JointParams, JointRows, JointType, assemble,
                                  axis, hinge_angle_from_quat, limot_row, register, relative_quat,
                                  REVERSIBLE, reverse_sign)
from jaxode.sim.joints import basic  # noqa: F401,E402  (registers ball, hinge, slider, fixed)
from jaxode.sim.joints import universal  # noqa: F401,E402
from jaxode.sim.joints import hinge2  # noqa: F401,E402
from jaxode.sim.joints import pu  # noqa: F401,E402
from jaxode.sim.joints import amotor  # noqa: F401,E402
from jaxode.sim.joints import lmotor  # noqa: F401,E402
from jaxode.sim.joints import pr  # noqa: F401,E402
from jaxode.sim.joints import piston  # noqa: F401,E402
from jaxode.sim.joints import plane2d  # noqa: F401,E402


def joint_rows(jtype: int, g, b: BodyPair, jp: JointParams, erp_w, cfm_w, fps) -> JointRows:
    """Rows of one joint of type ``jtype`` (unbatched; vmapped over a JointGroup).

    ``g``: the joint's slice of its JointGroup; ``jp``: its JointParams (world
    values resolved); erp_w, cfm_w: the world's ERP/CFM (ODE passes the world
    ERP to getInfo2; joint rows start with the world CFM); fps: 1/h [1/s], ODE's worldFPS.
    """
    impl = REGISTRY.get(jtype)
    if impl is None:
        raise NotImplementedError(f"joint type {JOINT_TYPE_NAMES.get(jtype, jtype)} has no rows")
    r = impl.rows(g, b, jp, erp_w, cfm_w, fps)
    return r._replace(j2=r.j2 * g.has2)


def nrows(jtype: int) -> int:
    return REGISTRY[jtype].nrows


def naxis(jtype: int) -> int:
    return REGISTRY[jtype].naxis
