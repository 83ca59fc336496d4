"""ctypes bindings to the real Open Dynamics Engine, for conformance tests.

Pure Python + numpy.  Needs a double-precision ODE shared library (Debian's
``libode8`` / ``libode-dev`` 0.16 is built with ``dDOUBLE``).  If the library
cannot be loaded, :func:`load` raises :class:`OdeUnavailable`; tests should
skip on it. ``JAXODE_ODE_LIB`` names another library file; with
``JAXODE_ODE_PRECISION=single`` (read at import) the structs are bound for a
dSINGLE build (dReal = float) instead, to compare with ODE's own float32
rounding (docs/RELIABILITY.md, session 26). :func:`load` checks the build's
precision against the binding (``dCheckConfiguration``).

Main entry points

* :class:`OdeWorld` -- a world + collision space + contact joint group stepped
  with ``dWorldQuickStep`` (or ``dWorldStep``: ``stepper="step"``).  Bodies and geoms are addressed by the integer
  index returned from ``add_body`` / ``add_*``.
* :func:`collide` -- one standalone narrow-phase ``dCollide`` call between two
  geoms placed in the world, returning ODE's contact list.

Quaternions are ODE's ``(w, x, y, z)``.  All struct layouts and constants below
are taken from ``/usr/include/ode/{common,contact,mass,collision}.h``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
from typing import NamedTuple, Optional

import numpy as np

__all__ = [
    "OdeUnavailable",
    "load",
    "OdeWorld",
    "Contact",
    "collide",
    "combine_surfaces",
    "DEFAULT_SURFACE",
    "dContactMu2",
    "dContactFDir1",
    "dContactBounce",
    "dContactSoftERP",
    "dContactSoftCFM",
    "dContactMotion1",
    "dContactMotion2",
    "dContactMotionN",
    "dContactSlip1",
    "dContactSlip2",
    "dContactRolling",
    "dContactApprox1_1",
    "dContactApprox1_2",
    "dContactApprox1_N",
    "dContactApprox1",
]


class OdeUnavailable(RuntimeError):
    """The ODE shared library could not be found or loaded."""


# ---------------------------------------------------------------------------
# constants (contact.h)
# ---------------------------------------------------------------------------
dContactMu2 = 0x001
dContactAxisDep = 0x001
dContactFDir1 = 0x002
dContactBounce = 0x004
dContactSoftERP = 0x008
dContactSoftCFM = 0x010
dContactMotion1 = 0x020
dContactMotion2 = 0x040
dContactMotionN = 0x080
dContactSlip1 = 0x100
dContactSlip2 = 0x200
dContactRolling = 0x400
dContactApprox0 = 0x0000
dContactApprox1_1 = 0x1000
dContactApprox1_2 = 0x2000
dContactApprox1_N = 0x4000
dContactApprox1 = 0x7000

# collision.h: the low 16 bits of dCollide's `flags` are the contact capacity.
_NUMC_MASK = 0xFFFF

# geom classes (collision.h)
dSphereClass, dBoxClass, dCapsuleClass, dCylinderClass, dPlaneClass = 0, 1, 2, 3, 4

# ---------------------------------------------------------------------------
# structs (dDOUBLE build: dReal = double)
# ---------------------------------------------------------------------------
# ``JAXODE_ODE_PRECISION=single`` (read once, at import) binds a dSINGLE build
# instead (dReal = float; give its path in ``JAXODE_ODE_LIB``): ODE's own
# float32 rounding, to compare jaxode's float32 runs with (docs/RELIABILITY.md).
PRECISION = os.environ.get("JAXODE_ODE_PRECISION", "double").strip().lower()
if PRECISION not in ("double", "single"):
    raise ValueError("JAXODE_ODE_PRECISION must be 'double' (Debian's libode, dDOUBLE) or "
                     f"'single' (a dSINGLE build named by JAXODE_ODE_LIB) (got {PRECISION!r})")
dReal = ctypes.c_float if PRECISION == "single" else ctypes.c_double
dVector3 = dReal * 4  # common.h: dV3E__MAX == 4 (padded)
dVector4 = dReal * 4
dMatrix3 = dReal * 12  # 3 rows of 4
dQuaternion = dReal * 4
_ID = ctypes.c_void_p  # dWorldID, dBodyID, dGeomID, dSpaceID, dJointID, ...


class dSurfaceParameters(ctypes.Structure):
    _fields_ = [
        ("mode", ctypes.c_int),
        ("mu", dReal),
        ("mu2", dReal),
        ("rho", dReal),
        ("rho2", dReal),
        ("rhoN", dReal),
        ("bounce", dReal),
        ("bounce_vel", dReal),
        ("soft_erp", dReal),
        ("soft_cfm", dReal),
        ("motion1", dReal),
        ("motion2", dReal),
        ("motionN", dReal),
        ("slip1", dReal),
        ("slip2", dReal),
    ]


class dContactGeom(ctypes.Structure):
    _fields_ = [
        ("pos", dVector3),
        ("normal", dVector3),
        ("depth", dReal),
        ("g1", _ID),
        ("g2", _ID),
        ("side1", ctypes.c_int),
        ("side2", ctypes.c_int),
    ]


class dContact(ctypes.Structure):
    _fields_ = [
        ("surface", dSurfaceParameters),
        ("geom", dContactGeom),
        ("fdir1", dVector3),
    ]


class dMass(ctypes.Structure):
    _fields_ = [("mass", dReal), ("c", dVector3), ("I", dMatrix3)]


# int mode (+4 pad) + 14 dReals
# the C layouts' sizes on x86-64 (double: dReal 8 bytes; single: 4)
_SIZES = {"double": (120, 96, 248, 136), "single": (60, 64, 144, 68)}[PRECISION]
assert (ctypes.sizeof(dSurfaceParameters), ctypes.sizeof(dContactGeom), ctypes.sizeof(dContact),
        ctypes.sizeof(dMass)) == _SIZES

NearCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)

# ---------------------------------------------------------------------------
# library loading
# ---------------------------------------------------------------------------
_PR = ctypes.POINTER(dReal)
_D = dReal
_I = ctypes.c_int
_UL = ctypes.c_ulong
_VP = ctypes.c_void_p

# name: (restype, argtypes)
_SIGNATURES = {
    "dInitODE2": (_I, [ctypes.c_uint]),
    "dCheckConfiguration": (_I, [ctypes.c_char_p]),
    "dRandSetSeed": (None, [_UL]),
    "dRandGetSeed": (_UL, []),
    # world
    "dWorldCreate": (_ID, []),
    "dWorldDestroy": (None, [_ID]),
    "dWorldSetGravity": (None, [_ID, _D, _D, _D]),
    "dWorldSetERP": (None, [_ID, _D]),
    "dWorldSetCFM": (None, [_ID, _D]),
    "dWorldGetERP": (_D, [_ID]),
    "dWorldGetCFM": (_D, [_ID]),
    "dWorldQuickStep": (_I, [_ID, _D]),
    "dWorldStep": (_I, [_ID, _D]),
    "dWorldSetQuickStepNumIterations": (None, [_ID, _I]),
    "dWorldSetQuickStepW": (None, [_ID, _D]),
    "dWorldSetContactMaxCorrectingVel": (None, [_ID, _D]),
    "dWorldSetContactSurfaceLayer": (None, [_ID, _D]),
    "dWorldSetLinearDamping": (None, [_ID, _D]),
    "dWorldSetAngularDamping": (None, [_ID, _D]),
    "dWorldSetLinearDampingThreshold": (None, [_ID, _D]),
    "dWorldSetAngularDampingThreshold": (None, [_ID, _D]),
    "dWorldSetMaxAngularSpeed": (None, [_ID, _D]),
    "dWorldSetAutoDisableFlag": (None, [_ID, _I]),
    "dWorldSetAutoDisableLinearThreshold": (None, [_ID, _D]),
    "dWorldSetAutoDisableAngularThreshold": (None, [_ID, _D]),
    "dWorldSetAutoDisableAverageSamplesCount": (None, [_ID, ctypes.c_uint]),
    "dWorldSetAutoDisableSteps": (None, [_ID, _I]),
    "dWorldSetAutoDisableTime": (None, [_ID, _D]),
    "dBodySetAutoDisableFlag": (None, [_ID, _I]),
    "dBodySetAutoDisableLinearThreshold": (None, [_ID, _D]),
    "dBodySetAutoDisableAngularThreshold": (None, [_ID, _D]),
    "dBodySetAutoDisableAverageSamplesCount": (None, [_ID, ctypes.c_uint]),
    "dBodySetAutoDisableSteps": (None, [_ID, _I]),
    "dBodySetAutoDisableTime": (None, [_ID, _D]),
    "dBodyEnable": (None, [_ID]),
    "dBodyDisable": (None, [_ID]),
    "dBodyIsEnabled": (_I, [_ID]),
    # bodies
    "dBodyCreate": (_ID, [_ID]),
    "dBodySetPosition": (None, [_ID, _D, _D, _D]),
    "dBodySetQuaternion": (None, [_ID, _PR]),
    "dBodySetLinearVel": (None, [_ID, _D, _D, _D]),
    "dBodySetAngularVel": (None, [_ID, _D, _D, _D]),
    "dBodyGetPosition": (_PR, [_ID]),
    "dBodyGetRotation": (_PR, [_ID]),
    "dBodyGetQuaternion": (_PR, [_ID]),
    "dBodyGetLinearVel": (_PR, [_ID]),
    "dBodyGetAngularVel": (_PR, [_ID]),
    "dBodySetMass": (None, [_ID, ctypes.POINTER(dMass)]),
    "dBodyAddForce": (None, [_ID, _D, _D, _D]),
    "dBodyAddTorque": (None, [_ID, _D, _D, _D]),
    "dBodyAddRelForce": (None, [_ID, _D, _D, _D]),
    "dBodyAddRelTorque": (None, [_ID, _D, _D, _D]),
    "dBodyAddForceAtPos": (None, [_ID, _D, _D, _D, _D, _D, _D]),
    "dBodyAddForceAtRelPos": (None, [_ID, _D, _D, _D, _D, _D, _D]),
    "dBodyAddRelForceAtPos": (None, [_ID, _D, _D, _D, _D, _D, _D]),
    "dBodyAddRelForceAtRelPos": (None, [_ID, _D, _D, _D, _D, _D, _D]),
    "dBodyGetForce": (_PR, [_ID]),
    "dBodyGetTorque": (_PR, [_ID]),
    "dBodySetGravityMode": (None, [_ID, _I]),
    "dBodySetFiniteRotationMode": (None, [_ID, _I]),
    # mass
    "dMassSetZero": (None, [ctypes.POINTER(dMass)]),
    "dMassSetParameters": (
        None,
        [ctypes.POINTER(dMass), _D, _D, _D, _D, _D, _D, _D, _D, _D, _D],
    ),
    "dMassCheck": (_I, [ctypes.POINTER(dMass)]),
    # spaces / geoms
    "dSimpleSpaceCreate": (_ID, [_ID]),
    "dHashSpaceCreate": (_ID, [_ID]),
    "dSpaceDestroy": (None, [_ID]),
    "dSpaceCollide": (None, [_ID, _VP, NearCallback]),
    "dCollide": (_I, [_ID, _ID, _I, _VP, _I]),
    "dCreatePlane": (_ID, [_ID, _D, _D, _D, _D]),
    "dCreateSphere": (_ID, [_ID, _D]),
    "dCreateBox": (_ID, [_ID, _D, _D, _D]),
    "dCreateCapsule": (_ID, [_ID, _D, _D]),
    "dCreateCylinder": (_ID, [_ID, _D, _D]),
    "dCreateRay": (_ID, [_ID, _D]),
    "dCreateConvex": (_ID, [_ID, _PR, ctypes.c_uint, _PR, ctypes.c_uint,
                            ctypes.POINTER(ctypes.c_uint)]),
    "dGeomTriMeshDataCreate": (_ID, []),
    "dGeomTriMeshDataDestroy": (None, [_ID]),
    "dGeomTriMeshDataBuildDouble": (None, [_ID, _VP, _I, _I, _VP, _I, _I]),
    "dCreateTriMesh": (_ID, [_ID, _ID, _VP, _VP, _VP]),
    "dGeomHeightfieldDataCreate": (_ID, []),
    "dGeomHeightfieldDataDestroy": (None, [_ID]),
    "dGeomHeightfieldDataBuildDouble": (None, [_ID, ctypes.POINTER(ctypes.c_double), _I, _D, _D,
                                                _I, _I, _D, _D, _D, _I]),
    "dGeomHeightfieldDataSetBounds": (None, [_ID, _D, _D]),
    "dCreateHeightfield": (_ID, [_ID, _ID, _I]),
    "dGeomRaySet": (None, [_ID, _D, _D, _D, _D, _D, _D]),
    "dGeomDestroy": (None, [_ID]),
    "dGeomSetBody": (None, [_ID, _ID]),
    "dGeomGetBody": (_ID, [_ID]),
    "dGeomSetPosition": (None, [_ID, _D, _D, _D]),
    "dGeomSetQuaternion": (None, [_ID, _PR]),
    "dGeomGetPosition": (_PR, [_ID]),
    "dGeomGetRotation": (_PR, [_ID]),
    "dGeomSetOffsetPosition": (None, [_ID, _D, _D, _D]),
    "dGeomSetOffsetQuaternion": (None, [_ID, _PR]),
    "dGeomSetCategoryBits": (None, [_ID, _UL]),
    "dGeomSetCollideBits": (None, [_ID, _UL]),
    "dGeomGetClass": (_I, [_ID]),
    # joints
    "dJointGroupCreate": (_ID, [_I]),
    "dJointGroupDestroy": (None, [_ID]),
    "dJointGroupEmpty": (None, [_ID]),
    "dJointCreateContact": (_ID, [_ID, _ID, ctypes.POINTER(dContact)]),
    "dJointAttach": (None, [_ID, _ID, _ID]),
    "dJointCreateBall": (_ID, [_ID, _ID]),
    "dJointCreateHinge": (_ID, [_ID, _ID]),
    "dJointCreateSlider": (_ID, [_ID, _ID]),
    "dJointCreateFixed": (_ID, [_ID, _ID]),
    "dJointSetBallAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetHingeAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetHingeAxis": (None, [_ID, _D, _D, _D]),
    "dJointSetHingeParam": (None, [_ID, _I, _D]),
    "dJointGetHingeAngle": (_D, [_ID]),
    "dJointGetHingeAngleRate": (_D, [_ID]),
    "dJointSetSliderAxis": (None, [_ID, _D, _D, _D]),
    "dJointSetSliderParam": (None, [_ID, _I, _D]),
    "dJointGetSliderPosition": (_D, [_ID]),
    "dJointGetSliderPositionRate": (_D, [_ID]),
    "dJointAddHingeTorque": (None, [_ID, _D]),
    "dJointAddSliderForce": (None, [_ID, _D]),
    "dJointSetFixed": (None, [_ID]),
    "dJointCreateUniversal": (_ID, [_ID, _ID]),
    "dJointSetUniversalAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetUniversalAxis1": (None, [_ID, _D, _D, _D]),
    "dJointSetUniversalAxis2": (None, [_ID, _D, _D, _D]),
    "dJointSetUniversalParam": (None, [_ID, _I, _D]),
    "dJointGetUniversalAngle1": (_D, [_ID]),
    "dJointGetUniversalAngle2": (_D, [_ID]),
    "dJointGetUniversalAngle1Rate": (_D, [_ID]),
    "dJointGetUniversalAngle2Rate": (_D, [_ID]),
    "dJointAddUniversalTorques": (None, [_ID, _D, _D]),
    "dJointCreateHinge2": (_ID, [_ID, _ID]),
    "dJointSetHinge2Anchor": (None, [_ID, _D, _D, _D]),
    "dJointSetHinge2Axes": (None, [_ID, _PR, _PR]),
    "dJointSetHinge2Param": (None, [_ID, _I, _D]),
    "dJointGetHinge2Angle1": (_D, [_ID]),
    "dJointGetHinge2Angle2": (_D, [_ID]),
    "dJointGetHinge2Angle1Rate": (_D, [_ID]),
    "dJointGetHinge2Angle2Rate": (_D, [_ID]),
    "dJointAddHinge2Torques": (None, [_ID, _D, _D]),
    "dJointCreatePU": (_ID, [_ID, _ID]),
    "dJointSetPUAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetPUAxis1": (None, [_ID, _D, _D, _D]),
    "dJointSetPUAxis2": (None, [_ID, _D, _D, _D]),
    "dJointSetPUAxis3": (None, [_ID, _D, _D, _D]),
    "dJointSetPUParam": (None, [_ID, _I, _D]),
    "dJointGetPUPosition": (_D, [_ID]),
    "dJointGetPUPositionRate": (_D, [_ID]),
    "dJointGetPUAngle1": (_D, [_ID]),
    "dJointGetPUAngle2": (_D, [_ID]),
    "dJointGetPUAngle1Rate": (_D, [_ID]),
    "dJointGetPUAngle2Rate": (_D, [_ID]),
    "dJointCreateAMotor": (_ID, [_ID, _ID]),
    "dJointSetAMotorMode": (None, [_ID, _I]),
    "dJointSetAMotorNumAxes": (None, [_ID, _I]),
    "dJointSetAMotorAxis": (None, [_ID, _I, _I, _D, _D, _D]),
    "dJointSetAMotorAngle": (None, [_ID, _I, _D]),
    "dJointSetAMotorParam": (None, [_ID, _I, _D]),
    "dJointGetAMotorNumAxes": (_I, [_ID]),
    "dJointGetAMotorAxis": (None, [_ID, _I, _PR]),
    "dJointGetAMotorAngle": (_D, [_ID, _I]),
    "dJointGetAMotorAngleRate": (_D, [_ID, _I]),
    "dJointAddAMotorTorques": (None, [_ID, _D, _D, _D]),
    "dJointCreateLMotor": (_ID, [_ID, _ID]),
    "dJointSetLMotorNumAxes": (None, [_ID, _I]),
    "dJointSetLMotorAxis": (None, [_ID, _I, _I, _D, _D, _D]),
    "dJointSetLMotorParam": (None, [_ID, _I, _D]),
    "dJointGetLMotorAxis": (None, [_ID, _I, _PR]),
    "dJointCreatePR": (_ID, [_ID, _ID]),
    "dJointSetPRAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetPRAxis1": (None, [_ID, _D, _D, _D]),
    "dJointSetPRAxis2": (None, [_ID, _D, _D, _D]),
    "dJointSetPRParam": (None, [_ID, _I, _D]),
    "dJointGetPRPosition": (_D, [_ID]),
    "dJointGetPRPositionRate": (_D, [_ID]),
    "dJointGetPRAngle": (_D, [_ID]),
    "dJointGetPRAngleRate": (_D, [_ID]),
    "dJointAddPRTorque": (None, [_ID, _D]),
    "dJointCreatePiston": (_ID, [_ID, _ID]),
    "dJointSetPistonAnchor": (None, [_ID, _D, _D, _D]),
    "dJointSetPistonAxis": (None, [_ID, _D, _D, _D]),
    "dJointSetPistonParam": (None, [_ID, _I, _D]),
    "dJointGetPistonPosition": (_D, [_ID]),
    "dJointGetPistonPositionRate": (_D, [_ID]),
    "dJointGetPistonAngle": (_D, [_ID]),
    "dJointGetPistonAngleRate": (_D, [_ID]),
    "dJointAddPistonForce": (None, [_ID, _D]),
    "dJointCreatePlane2D": (_ID, [_ID, _ID]),
    "dJointSetPlane2DXParam": (None, [_ID, _I, _D]),
    "dJointSetPlane2DYParam": (None, [_ID, _I, _D]),
    "dJointSetPlane2DAngleParam": (None, [_ID, _I, _D]),
    "dJointSetFeedback": (None, [_ID, _VP]),
}

# dParam* of common.h (D_ALL_PARAM_NAMES); the second/third axis add 0x100/0x200.
JOINT_PARAMS = {"lo_stop": 0, "hi_stop": 1, "vel": 2, "fmax": 5, "fudge_factor": 6,
                "bounce": 7, "cfm": 8, "stop_erp": 9, "stop_cfm": 10,
                "suspension_erp": 11, "suspension_cfm": 12}


def _v(x):
    return tuple(float(c) for c in x)


def _setup_ball(lib, j, anchor=(0.0, 0.0, 0.0)):
    lib.dJointSetBallAnchor(j, *_v(anchor))


def _setup_hinge(lib, j, anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)):
    lib.dJointSetHingeAnchor(j, *_v(anchor))
    lib.dJointSetHingeAxis(j, *_v(axis))


def _setup_slider(lib, j, axis=(0.0, 0.0, 1.0)):
    lib.dJointSetSliderAxis(j, *_v(axis))


def _setup_fixed(lib, j):
    lib.dJointSetFixed(j)


def _setup_universal(lib, j, anchor=(0.0, 0.0, 0.0), axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0)):
    lib.dJointSetUniversalAnchor(j, *_v(anchor))
    lib.dJointSetUniversalAxis1(j, *_v(axis1))
    lib.dJointSetUniversalAxis2(j, *_v(axis2))


def _setup_hinge2(lib, j, anchor=(0.0, 0.0, 0.0), axis1=(1.0, 0.0, 0.0), axis2=(0.0, 1.0, 0.0)):
    lib.dJointSetHinge2Anchor(j, *_v(anchor))
    # both axes in one call: setting them one at a time can pass through parallel axes
    lib.dJointSetHinge2Axes(j, (dReal * 4)(*_v(axis1), 0.0), (dReal * 4)(*_v(axis2), 0.0))


def _setup_pu(lib, j, anchor=(0.0, 0.0, 0.0), axis1=(0.0, 1.0, 0.0), axis2=(0.0, 0.0, 1.0),
              axis3=(1.0, 0.0, 0.0)):
    lib.dJointSetPUAnchor(j, *_v(anchor))
    lib.dJointSetPUAxis1(j, *_v(axis1))
    lib.dJointSetPUAxis2(j, *_v(axis2))
    lib.dJointSetPUAxis3(j, *_v(axis3))


def _setup_amotor(lib, j, num_axes=None, axes=(), rel=None, mode="user"):
    """dJointSetAMotorMode/NumAxes/Axis. mode "user": num_axes (default len(axes))
    axes with rel (default 0, world); "euler": axes = (axis0, axis2), rel 1 and 2."""
    if mode == "euler":
        lib.dJointSetAMotorMode(j, 1)  # dAMotorEuler: three axes, reference vectors
        lib.dJointSetAMotorNumAxes(j, 3)
        lib.dJointSetAMotorAxis(j, 0, 1, *_v(axes[0]))
        lib.dJointSetAMotorAxis(j, 2, 2, *_v(axes[1]))
        return
    num_axes = len(axes) if num_axes is None else num_axes
    rel = (0,) * num_axes if rel is None else rel
    lib.dJointSetAMotorMode(j, 0)  # dAMotorUser
    lib.dJointSetAMotorNumAxes(j, int(num_axes))
    for i in range(num_axes):
        lib.dJointSetAMotorAxis(j, i, int(rel[i]), *_v(axes[i]))


def _setup_lmotor(lib, j, num_axes=None, axes=(), rel=None):
    """dJointSetLMotorNumAxes/Axis: num_axes (default len(axes)) axes with rel (default 0)."""
    num_axes = len(axes) if num_axes is None else num_axes
    rel = (0,) * num_axes if rel is None else rel
    lib.dJointSetLMotorNumAxes(j, int(num_axes))
    for i in range(num_axes):
        lib.dJointSetLMotorAxis(j, i, int(rel[i]), *_v(axes[i]))


def _setup_pr(lib, j, anchor=(0.0, 0.0, 0.0), axis1=(0.0, 1.0, 0.0), axis2=(1.0, 0.0, 0.0)):
    """dJointSetPRAnchor/Axis1 (prismatic)/Axis2 (rotoide)."""
    lib.dJointSetPRAnchor(j, *_v(anchor))
    lib.dJointSetPRAxis1(j, *_v(axis1))
    lib.dJointSetPRAxis2(j, *_v(axis2))


def _setup_piston(lib, j, anchor=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0)):
    lib.dJointSetPistonAnchor(j, *_v(anchor))
    lib.dJointSetPistonAxis(j, *_v(axis))


def _setup_plane2d(lib, j):
    pass


#: kind -> (dJointCreate* symbol, dJointSet*Param symbol or None (or a tuple of
#:          one symbol per axis),
#:          setup(lib, joint, **geometry) calling dJointSet*, geometry keyword names).
#: Geometry keywords are world-frame values named as jaxode's builder names them.
JOINT_SETUP: dict = {
    "ball": ("dJointCreateBall", None, _setup_ball, ("anchor",)),
    "hinge": ("dJointCreateHinge", "dJointSetHingeParam", _setup_hinge, ("anchor", "axis")),
    "slider": ("dJointCreateSlider", "dJointSetSliderParam", _setup_slider, ("axis",)),
    "fixed": ("dJointCreateFixed", None, _setup_fixed, ()),
    "universal": ("dJointCreateUniversal", "dJointSetUniversalParam", _setup_universal,
                  ("anchor", "axis1", "axis2")),
    "hinge2": ("dJointCreateHinge2", "dJointSetHinge2Param", _setup_hinge2,
               ("anchor", "axis1", "axis2")),
    "pu": ("dJointCreatePU", "dJointSetPUParam", _setup_pu, ("anchor", "axis1", "axis2", "axis3")),
    "amotor": ("dJointCreateAMotor", "dJointSetAMotorParam", _setup_amotor,
               ("num_axes", "axes", "rel", "mode")),
    "lmotor": ("dJointCreateLMotor", "dJointSetLMotorParam", _setup_lmotor,
               ("num_axes", "axes", "rel")),
    "pr": ("dJointCreatePR", "dJointSetPRParam", _setup_pr, ("anchor", "axis1", "axis2")),
    "piston": ("dJointCreatePiston", "dJointSetPistonParam", _setup_piston, ("anchor", "axis")),
    # plane-2D: one setter per motor, taking the axis-1 dParam* codes; parameter
    # suffix "" -> X, "2" -> Y, "3" -> Angle (as jaxode's add_plane2d)
    "plane2d": ("dJointCreatePlane2D", ("dJointSetPlane2DXParam", "dJointSetPlane2DYParam",
                                        "dJointSetPlane2DAngleParam"), _setup_plane2d, ()),
}


class dJointFeedback(ctypes.Structure):
    _fields_ = [("f1", dVector3), ("t1", dVector3), ("f2", dVector3), ("t2", dVector3)]

_LIB: Optional[ctypes.CDLL] = None
_LOAD_ERROR: Optional[str] = None


def _candidates():
    env = os.environ.get("JAXODE_ODE_LIB")
    if env:
        yield env
    found = ctypes.util.find_library("ode")
    if found:
        yield found
    yield "libode.so.8"
    yield "/usr/lib/x86_64-linux-gnu/libode.so.8"
    yield "/usr/lib/x86_64-linux-gnu/libode.so"
    yield "libode.so"


def load() -> ctypes.CDLL:
    """Return the ODE CDLL (loaded and initialised once).

    Raises :class:`OdeUnavailable` if no usable library is found.  The path can
    be forced with the ``JAXODE_ODE_LIB`` environment variable.
    """
    global _LIB, _LOAD_ERROR
    if _LIB is not None:
        return _LIB
    if _LOAD_ERROR is not None:
        raise OdeUnavailable(_LOAD_ERROR)
    errors = []
    lib = None
    for cand in _candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(f"{cand}: {e}")
    if lib is None:
        _LOAD_ERROR = "ODE shared library not found (install libode-dev / libode8): " + "; ".join(
            errors
        )
        raise OdeUnavailable(_LOAD_ERROR)
    try:
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
    except AttributeError as e:
        _LOAD_ERROR = f"ODE library {lib._name} lacks a symbol: {e}"
        raise OdeUnavailable(_LOAD_ERROR) from None
    if lib.dInitODE2(0) == 0:
        _LOAD_ERROR = "dInitODE2(0) failed"
        raise OdeUnavailable(_LOAD_ERROR)
    _check_precision(lib)
    _LIB = lib
    return lib


def _check_precision(lib):
    """Make sure the library's dReal is the one bound here (``PRECISION``): a
    build of the other precision would silently read garbage through our structs."""
    global _LOAD_ERROR
    ok = lib.dCheckConfiguration(b"ODE_double_precision" if PRECISION == "double"
                                 else b"ODE_single_precision")
    if not ok:
        _LOAD_ERROR = (f"ODE library {lib._name} is not a {PRECISION}-precision "
                       f"(d{PRECISION.upper()}) build (JAXODE_ODE_PRECISION={PRECISION})")
        raise OdeUnavailable(_LOAD_ERROR)


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------
def _read(ptr, n) -> np.ndarray:
    return np.array(ptr[:n], dtype=np.float64)


def _quat_arr(q) -> "ctypes.Array":
    q = np.asarray(q, dtype=np.float64).reshape(4)
    return dQuaternion(*q.tolist())


def _rot3(ptr) -> np.ndarray:
    """dMatrix3 (3 rows of 4) -> (3,3)."""
    return np.array(ptr[:12], dtype=np.float64).reshape(3, 4)[:, :3]


_IDENTITY_Q = (1.0, 0.0, 0.0, 0.0)


class Contact(NamedTuple):
    pos: np.ndarray  # (3,)
    normal: np.ndarray  # (3,) points "into" geom g1 (ODE convention)
    depth: float
    g1: int  # geom index (OdeWorld) or 0/1 (collide)
    g2: int


DEFAULT_SURFACE = dict(
    mu=1.0,
    mu2=None,  # None -> same as mu
    fdir1=None,  # 3-vector in the geom's frame
    friction="pyramid",  # "pyramid" (dContactApprox1) or "box" (no approx flag)
    bounce=0.0,
    bounce_vel=0.1,
    soft_erp=None,  # None -> unset (world ERP)
    soft_cfm=None,  # None -> unset (world CFM)
    max_contacts=10,
    slip1=None,  # None -> unset (no dContactSlip1: world CFM on the friction row)
    slip2=None,  # None -> slip1
    rho=None,  # None -> no dContactRolling; rolling friction [m] about t1 and t2
    rhoN=None,  # spinning friction [m] about the normal (with rho: dContactRolling)
    motion1=0.0,  # surface velocity of this geom along t1 / t2 / out of its normal [m/s]
    motion2=0.0,
    motionN=0.0,
)


def _norm_surface(s) -> dict:
    out = dict(DEFAULT_SURFACE)
    if s:
        unknown = set(s) - set(DEFAULT_SURFACE)
        if unknown:
            raise ValueError(f"unknown surface keys: {sorted(unknown)}")
        out.update(s)
    if out["mu2"] is None:
        out["mu2"] = out["mu"]
    if out["slip2"] is None:
        out["slip2"] = out["slip1"]
    if out["friction"] not in ("pyramid", "box"):
        raise ValueError(f"friction must be 'pyramid' or 'box', got {out['friction']!r}")
    if out["fdir1"] is not None:
        out["fdir1"] = np.asarray(out["fdir1"], dtype=np.float64).reshape(3)
    out["max_contacts"] = int(out["max_contacts"])
    return out


def _min_opt(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _max_opt(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def combine_surfaces(s1: dict, s2: dict) -> dict:
    """Combine two (normalised) geom surfaces into one contact surface
    (Gazebo's rule).  fdir1 is left as geom1's / geom2's *local* vector with a
    tag saying whose frame it is in: ``fdir1_from`` in {1, 2, None}."""
    s1 = _norm_surface(s1)
    s2 = _norm_surface(s2)
    if s1["fdir1"] is not None:
        fdir, src = s1["fdir1"], 1
    elif s2["fdir1"] is not None:
        fdir, src = s2["fdir1"], 2
    else:
        fdir, src = None, None
    return dict(
        mu=min(s1["mu"], s2["mu"]),
        mu2=min(s1["mu2"], s2["mu2"]),
        bounce=min(s1["bounce"], s2["bounce"]),
        bounce_vel=min(s1["bounce_vel"], s2["bounce_vel"]),
        soft_erp=_min_opt(s1["soft_erp"], s2["soft_erp"]),
        soft_cfm=_max_opt(s1["soft_cfm"], s2["soft_cfm"]),
        slip1=_min_opt(s1["slip1"], s2["slip1"]),
        slip2=_min_opt(s1["slip2"], s2["slip2"]),
        rho=_min_opt(s1["rho"], s2["rho"]),
        rhoN=_min_opt(s1["rhoN"], s2["rhoN"]),
        # dContactMotion1/2 are the target of (v1 - v2) . t: surface 2's minus surface 1's
        motion1=s2["motion1"] - s1["motion1"],
        motion2=s2["motion2"] - s1["motion2"],
        motionN=s1["motionN"] + s2["motionN"],
        max_contacts=min(s1["max_contacts"], s2["max_contacts"]),
        friction="box" if (s1["friction"] == "box" and s2["friction"] == "box") else "pyramid",
        fdir1=fdir,
        fdir1_from=src,
    )


def _fill_surface(sp: dSurfaceParameters, c: dict) -> None:
    mode = dContactMu2
    sp.mu = c["mu"]
    sp.mu2 = c["mu2"]
    if c["friction"] == "pyramid":
        mode |= dContactApprox1
    if c["bounce"] > 0:
        mode |= dContactBounce
        sp.bounce = c["bounce"]
        sp.bounce_vel = c["bounce_vel"]
    if c["soft_erp"] is not None:
        mode |= dContactSoftERP
        sp.soft_erp = c["soft_erp"]
    if c["soft_cfm"] is not None:
        mode |= dContactSoftCFM
        sp.soft_cfm = c["soft_cfm"]
    for k, flag in (("slip1", dContactSlip1), ("slip2", dContactSlip2)):
        if c.get(k) is not None:
            mode |= flag
            setattr(sp, k, c[k])
    if c.get("rho") is not None or c.get("rhoN") is not None:
        # dContactAxisDep (= dContactMu2, already set): rho, rho2, rhoN apart;
        # dContactApprox1 includes Approx1_N: all three scale with the normal force.
        mode |= dContactRolling | dContactApprox1
        sp.rho = sp.rho2 = c["rho"] or 0.0
        sp.rhoN = c["rhoN"] or 0.0
    for k, flag in (("motion1", dContactMotion1), ("motion2", dContactMotion2),
                    ("motionN", dContactMotionN)):
        if c.get(k, 0.0) != 0.0:
            mode |= flag
            setattr(sp, k, c[k])
    sp.mode = mode


# ---------------------------------------------------------------------------
# geom creation shared by OdeWorld and collide()
# ---------------------------------------------------------------------------
#: geom -> (destroy function name or None, data id, arrays ODE points into): the
#: trimesh and heightfield data and the convex tables live as long as their geom
_GEOM_DATA: dict = {}

#: quaternion (w, x, y, z) that turns ODE's heightfield frame (y up) into jaxode's (z up)
HEIGHTFIELD_QUAT = (math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0)


def _free_geom_data(lib, g) -> None:
    """Release what ``_create_geom`` kept for geom ``g`` (after the geom is destroyed)."""
    fn, data, _ = _GEOM_DATA.pop(g, (None, None, None))
    if fn is not None:
        getattr(lib, fn)(data)


def _create_geom(lib, space, kind: str, params: dict):
    if kind == "plane":
        n = np.asarray(params["normal"], dtype=np.float64).reshape(3)
        return lib.dCreatePlane(space, n[0], n[1], n[2], float(params["offset"]))
    if kind == "sphere":
        return lib.dCreateSphere(space, float(params["radius"]))
    if kind == "box":
        s = np.asarray(params["size"], dtype=np.float64).reshape(3)
        return lib.dCreateBox(space, s[0], s[1], s[2])
    if kind == "capsule":
        return lib.dCreateCapsule(space, float(params["radius"]), float(params["length"]))
    if kind == "cylinder":
        return lib.dCreateCylinder(space, float(params["radius"]), float(params["length"]))
    if kind == "convex":  # ODE's own format: planes (F, 4), points (V, 3), polygons flat
        planes = np.ascontiguousarray(params["planes"], dtype=np.float64).reshape(-1, 4)
        pts = np.ascontiguousarray(params["points"], dtype=np.float64).reshape(-1, 3)
        polys = np.ascontiguousarray(params["polygons"], dtype=np.uint32).ravel()
        g = lib.dCreateConvex(space, planes.ctypes.data_as(_PR), len(planes),
                              pts.ctypes.data_as(_PR), len(pts),
                              polys.ctypes.data_as(ctypes.POINTER(ctypes.c_uint)))
        _GEOM_DATA[g] = (None, None, (planes, pts, polys))  # ODE keeps the pointers
        return g
    if kind == "trimesh":  # vertices (V, 3), triangles (T, 3), counter-clockwise outside
        v = np.ascontiguousarray(params["vertices"], dtype=np.float64).reshape(-1, 3)
        t = np.ascontiguousarray(params["triangles"], dtype=np.int32).reshape(-1, 3)
        data = lib.dGeomTriMeshDataCreate()
        lib.dGeomTriMeshDataBuildDouble(data, v.ctypes.data, 3 * 8, len(v), t.ctypes.data,
                                        t.size, 3 * 4)
        g = lib.dCreateTriMesh(space, data, None, None, None)
        _GEOM_DATA[g] = ("dGeomTriMeshDataDestroy", data, (v, t))
        return g
    if kind == "heightfield":
        # jaxode's frame (z up, heights[i, j] at x along i, y along j over size) in
        # ODE's (y up, width along local x, depth along local z): the geom is turned
        # +90 deg about x (local y -> world z, local z -> world -y), so ODE's depth
        # index runs along -y
        h = np.asarray(params["heights"], dtype=np.float64)
        nx, ny = h.shape
        lx, ly = (float(x) for x in params["size"])
        ode = np.ascontiguousarray(h[:, ::-1].T)          # [depth j, width i]
        data = lib.dGeomHeightfieldDataCreate()
        lib.dGeomHeightfieldDataBuildDouble(
            data, ode.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), 0, lx, ly, nx, ny,
            1.0, 0.0, float(params.get("thickness", 1.0)), 0)
        lib.dGeomHeightfieldDataSetBounds(data, float(h.min()), float(h.max()))
        g = lib.dCreateHeightfield(space, data, 1)
        _GEOM_DATA[g] = ("dGeomHeightfieldDataDestroy", data, (ode,))
        return g
    if kind == "ray":  # placed here: dGeomRaySet(origin, direction), length
        g = lib.dCreateRay(space, float(params["length"]))
        o = np.asarray(params["origin"], dtype=np.float64).reshape(3)
        d = np.asarray(params["direction"], dtype=np.float64).reshape(3)
        lib.dGeomRaySet(g, o[0], o[1], o[2], d[0], d[1], d[2])
        return g
    raise ValueError(f"unsupported geom kind {kind!r}")


def _place_world(lib, g, pos, quat):
    p = np.asarray(pos, dtype=np.float64).reshape(3)
    lib.dGeomSetPosition(g, p[0], p[1], p[2])
    lib.dGeomSetQuaternion(g, _quat_arr(quat))


# ---------------------------------------------------------------------------
# the world
# ---------------------------------------------------------------------------
class OdeWorld:
    """An ODE world stepped with QuickStep, plus a collision space whose contacts
    become contact joints each step.

    Bodies: ``add_body`` -> body index.  Geoms: ``add_plane/sphere/box/capsule``
    -> geom index.  Surfaces are dicts (see :data:`DEFAULT_SURFACE`); the two
    geoms' surfaces of a pair are merged by :func:`combine_surfaces`.
    """

    def __init__(
        self,
        gravity=(0.0, 0.0, 0.0),
        erp: float = 0.2,
        cfm: float = 1e-10,
        iterations: int = 20,
        sor: float = 1.3,
        contact_max_correcting_vel: float = math.inf,
        contact_surface_layer: float = 0.0,
        linear_damping: float = 0.0,
        angular_damping: float = 0.0,
        linear_damping_threshold: float = 0.01,
        angular_damping_threshold: float = 0.01,
        max_angular_speed: Optional[float] = None,
        space: str = "hash",
        rand_seed: Optional[int] = 0,
        stepper: str = "quick",
        reverse_contacts: bool = False,
        contact_order=None,
    ):
        """``space``: "hash" (dHashSpace) or "simple" (dSimpleSpace).
        ``stepper``: "quick" (dWorldQuickStep, the default) or "step"
        (dWorldStep, ODE's big-matrix Dantzig LCP stepper).
        ``rand_seed``: passed to dRandSetSeed at construction (QuickStep
        randomly reorders constraints using ODE's global RNG); None leaves the
        global seed alone. ``reverse_contacts``: create each step's contact
        joints in the reverse of the order dCollide found them. ODE's island
        walk (util.cpp dxProcessIslands) lists a body's joints newest first, so
        the contacts of one body are solved last-created first; reversed, they
        are solved in the order found, which is jaxode's contact slot order.
        ``contact_order``: a function of the step's contacts (the list
        :attr:`contacts_last` gives) returning the order (a list of their
        indices) in which to create their contact joints (overrides
        ``reverse_contacts``); tests use it to give ODE's island walk the
        order of jaxode's slots."""
        if stepper not in ("quick", "step"):
            raise ValueError(f"stepper must be 'quick' or 'step' (got {stepper!r})")
        self._stepper = stepper
        lib = load()
        self._lib = lib
        self._world = None
        self._space = None
        self._group = None
        self._world = lib.dWorldCreate()
        if space == "hash":
            self._space = lib.dHashSpaceCreate(None)
        elif space == "simple":
            self._space = lib.dSimpleSpaceCreate(None)
        else:
            raise ValueError("space must be 'hash' or 'simple'")
        self._group = lib.dJointGroupCreate(0)
        if rand_seed is not None:
            lib.dRandSetSeed(int(rand_seed))
        w = self._world
        g = np.asarray(gravity, dtype=np.float64).reshape(3)
        lib.dWorldSetGravity(w, g[0], g[1], g[2])
        lib.dWorldSetERP(w, erp)
        lib.dWorldSetCFM(w, cfm)
        lib.dWorldSetQuickStepNumIterations(w, int(iterations))
        lib.dWorldSetQuickStepW(w, sor)
        lib.dWorldSetContactMaxCorrectingVel(w, contact_max_correcting_vel)
        lib.dWorldSetContactSurfaceLayer(w, contact_surface_layer)
        # damping settings are copied into bodies at dBodyCreate time, so they
        # must be set before any body exists (they are: we're in __init__).
        lib.dWorldSetLinearDampingThreshold(w, linear_damping_threshold)
        lib.dWorldSetAngularDampingThreshold(w, angular_damping_threshold)
        lib.dWorldSetLinearDamping(w, linear_damping)
        lib.dWorldSetAngularDamping(w, angular_damping)
        if max_angular_speed is not None:
            lib.dWorldSetMaxAngularSpeed(w, max_angular_speed)
        lib.dWorldSetAutoDisableFlag(w, 0)

        self._bodies: list = []  # dBodyID ints
        self._body_index: dict = {}
        self._geoms: list = []  # dGeomID ints
        self._geom_index: dict = {}
        self._geom_kind: list = []
        self._geom_surface: list = []

        self._contact_buf = None
        self._reverse_contacts = bool(reverse_contacts)
        self._contact_order = contact_order
        self._pending: list = []  # (dContact copy, b1, b2) with reverse_contacts
        self._contacts_last: list = []
        self._cb_error: Optional[BaseException] = None
        self._callback = NearCallback(self._near)  # keep a reference!

    # -- lifetime ---------------------------------------------------------
    def add_joint(self, kind: str, body1, body2=None, **kw) -> int:
        """Create a joint of ``kind`` (a key of :data:`JOINT_SETUP`) between body
        indices ``body1`` and ``body2`` (None: the static world, in either slot:
        dJointAttach(j, 0, body) is ODE's world-first attachment); geometry
        keywords (world frame: anchor, axis, axis1, ...) go to the kind's setup
        function as dJointSet*; the other keywords are dParam* values (keys of
        JOINT_PARAMS, suffix 2/3 for the other axes). Feedback is enabled."""
        self._check_open()
        lib = self._lib
        if kind not in JOINT_SETUP:
            raise ValueError(f"unknown joint kind {kind!r}; known: {sorted(JOINT_SETUP)}")
        create, setter_name, setup, geometry_keys = JOINT_SETUP[kind]
        geometry = {k: kw.pop(k) for k in list(kw) if k in geometry_keys}
        j = getattr(lib, create)(self._world, None)
        b1 = None if body1 is None else self._bodies[body1]
        b2 = None if body2 is None else self._bodies[body2]
        lib.dJointAttach(j, b1, b2)
        setup(lib, j, **geometry)
        if isinstance(setter_name, tuple):           # a dJointSet*Param per axis (plane-2D)
            per_axis = [getattr(lib, name) for name in setter_name]

            def setter(jj, code, value):
                per_axis[code >> 8](jj, code & 0xFF, value)
        else:
            setter = None if setter_name is None else getattr(lib, setter_name)
        for key, value in kw.items():
            base, group = key, 0
            if key[-1] in "23":
                base, group = key[:-1], 0x100 * (int(key[-1]) - 1)
            if setter is None or base not in JOINT_PARAMS:
                raise ValueError(f"{kind} joint: unknown parameter {key!r}")
            setter(j, JOINT_PARAMS[base] + group, float(value))
        fb = dJointFeedback()
        lib.dJointSetFeedback(j, ctypes.addressof(fb))
        if not hasattr(self, "_joints"):
            self._joints, self._feedback, self._joint_kind = [], [], []
        self._joints.append(j)
        self._feedback.append(fb)
        self._joint_kind.append(kind)
        return len(self._joints) - 1

    def joint_feedback(self, j: int):
        """(f1, t1, f2, t2) of the last step, as numpy (3,) arrays."""
        fb = self._feedback[j]
        return tuple(np.array(list(getattr(fb, k))[:3]) for k in ("f1", "t1", "f2", "t2"))

    def hinge_angle(self, j: int) -> float:
        return float(self._lib.dJointGetHingeAngle(self._joints[j]))

    def hinge_angle_rate(self, j: int) -> float:
        return float(self._lib.dJointGetHingeAngleRate(self._joints[j]))

    def slider_position(self, j: int) -> float:
        return float(self._lib.dJointGetSliderPosition(self._joints[j]))

    def joint_call(self, fn: str, j: int, *args):
        """Call libode's ``fn`` (a prototyped dJoint* function) on joint ``j``:
        e.g. ``joint_call("dJointGetUniversalAngle1", j)``."""
        return getattr(self._lib, fn)(self._joints[j], *args)

    def close(self):
        lib = getattr(self, "_lib", None)
        if lib is None:
            return
        if self._group:
            lib.dJointGroupDestroy(self._group)
            self._group = None
        if self._space:
            lib.dSpaceDestroy(self._space)  # cleanup mode 1: destroys its geoms
            self._space = None
            for g in self._geoms:
                _free_geom_data(lib, g)
        if self._world:
            lib.dWorldDestroy(self._world)  # destroys bodies
            self._world = None
        self._bodies = []
        self._geoms = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check_open(self):
        if not self._world:
            raise RuntimeError("OdeWorld is closed")

    # -- bodies -----------------------------------------------------------
    def add_body(
        self,
        pos,
        quat=_IDENTITY_Q,
        vel=(0.0, 0.0, 0.0),
        angvel=(0.0, 0.0, 0.0),
        mass: float = 1.0,
        inertia=None,
        gravity: bool = True,
        finite_rotation: bool = False,
    ) -> int:
        """Create a body with its centre of mass at the body origin.

        ``inertia``: 3x3 inertia tensor about the com in body frame (default:
        that of a unit cube, ``mass/6 * I``)."""
        self._check_open()
        lib = self._lib
        if inertia is None:
            inertia = np.eye(3) * (mass / 6.0)
        I = np.asarray(inertia, dtype=np.float64).reshape(3, 3)
        m = dMass()
        lib.dMassSetZero(ctypes.byref(m))
        lib.dMassSetParameters(
            ctypes.byref(m), float(mass), 0.0, 0.0, 0.0,
            I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2],
        )
        if not lib.dMassCheck(ctypes.byref(m)):
            raise ValueError(f"invalid mass/inertia: mass={mass}, inertia={I.tolist()}")
        b = lib.dBodyCreate(self._world)
        lib.dBodySetMass(b, ctypes.byref(m))
        p = np.asarray(pos, dtype=np.float64).reshape(3)
        lib.dBodySetPosition(b, p[0], p[1], p[2])
        lib.dBodySetQuaternion(b, _quat_arr(quat))
        v = np.asarray(vel, dtype=np.float64).reshape(3)
        lib.dBodySetLinearVel(b, v[0], v[1], v[2])
        w = np.asarray(angvel, dtype=np.float64).reshape(3)
        lib.dBodySetAngularVel(b, w[0], w[1], w[2])
        lib.dBodySetGravityMode(b, 1 if gravity else 0)
        lib.dBodySetFiniteRotationMode(b, 1 if finite_rotation else 0)
        idx = len(self._bodies)
        self._bodies.append(b)
        self._body_index[b] = idx
        return idx

    @property
    def nbody(self) -> int:
        return len(self._bodies)

    @property
    def ngeom(self) -> int:
        return len(self._geoms)

    # -- geoms ------------------------------------------------------------
    def _add_geom(self, kind, params, body, pos, quat, surface, category_bits, collide_bits):
        self._check_open()
        lib = self._lib
        g = _create_geom(lib, self._space, kind, params)
        if kind == "plane":
            if body is not None:
                lib.dGeomDestroy(g)
                raise ValueError("planes are non-placeable and cannot be attached to a body")
        elif body is not None:
            lib.dGeomSetBody(g, self._bodies[body])
            p = np.asarray(pos, dtype=np.float64).reshape(3)
            q = np.asarray(quat, dtype=np.float64).reshape(4)
            # only create an offset when needed (keeps the no-offset code path)
            if np.any(p != 0.0):
                lib.dGeomSetOffsetPosition(g, p[0], p[1], p[2])
            if np.any(q != np.array(_IDENTITY_Q)):
                lib.dGeomSetOffsetQuaternion(g, _quat_arr(q))
        else:
            _place_world(lib, g, pos, quat)
        if category_bits is not None:
            lib.dGeomSetCategoryBits(g, int(category_bits))
        if collide_bits is not None:
            lib.dGeomSetCollideBits(g, int(collide_bits))
        idx = len(self._geoms)
        self._geoms.append(g)
        self._geom_index[g] = idx
        self._geom_kind.append(kind)
        self._geom_surface.append(_norm_surface(surface))
        return idx

    def add_plane(self, normal, offset, surface=None, category_bits=None, collide_bits=None) -> int:
        """Static plane ``normal . x = offset``."""
        return self._add_geom(
            "plane", dict(normal=normal, offset=offset), None, None, None,
            surface, category_bits, collide_bits,
        )

    def add_sphere(self, radius, body=None, pos=(0.0, 0.0, 0.0), quat=_IDENTITY_Q,
                   surface=None, category_bits=None, collide_bits=None) -> int:
        return self._add_geom("sphere", dict(radius=radius), body, pos, quat,
                              surface, category_bits, collide_bits)

    def add_box(self, size, body=None, pos=(0.0, 0.0, 0.0), quat=_IDENTITY_Q,
                surface=None, category_bits=None, collide_bits=None) -> int:
        """``size``: full side lengths (lx, ly, lz)."""
        return self._add_geom("box", dict(size=size), body, pos, quat,
                              surface, category_bits, collide_bits)

    def add_capsule(self, radius, length, body=None, pos=(0.0, 0.0, 0.0), quat=_IDENTITY_Q,
                    surface=None, category_bits=None, collide_bits=None) -> int:
        """Capsule along the local z axis; ``length`` excludes the caps."""
        return self._add_geom("capsule", dict(radius=radius, length=length), body, pos, quat,
                              surface, category_bits, collide_bits)

    def add_cylinder(self, radius, length, body=None, pos=(0.0, 0.0, 0.0), quat=_IDENTITY_Q,
                     surface=None, category_bits=None, collide_bits=None) -> int:
        """Flat-ended cylinder (dCreateCylinder) of ``length`` along the local z axis."""
        return self._add_geom("cylinder", dict(radius=radius, length=length), body, pos, quat,
                              surface, category_bits, collide_bits)

    def add_convex(self, planes, points, polygons, body=None, pos=(0.0, 0.0, 0.0),
                   quat=_IDENTITY_Q, surface=None, category_bits=None,
                   collide_bits=None) -> int:
        """dCreateConvex from ODE's own tables: planes (F, 4) ``n . x = d``, points
        (V, 3), polygons the flat list ``[k, i_1 .. i_k, k, ...]``."""
        return self._add_geom("convex", dict(planes=planes, points=points, polygons=polygons),
                              body, pos, quat, surface, category_bits, collide_bits)

    def add_trimesh(self, vertices, triangles, body=None, pos=(0.0, 0.0, 0.0),
                    quat=_IDENTITY_Q, surface=None, category_bits=None,
                    collide_bits=None) -> int:
        """dCreateTriMesh of vertices (V, 3) and triangles (T, 3) (counter-clockwise
        seen from outside)."""
        return self._add_geom("trimesh", dict(vertices=vertices, triangles=triangles), body,
                              pos, quat, surface, category_bits, collide_bits)

    def add_heightfield(self, heights, size, pos=(0.0, 0.0, 0.0), surface=None,
                        category_bits=None, collide_bits=None) -> int:
        """Static dCreateHeightfield in jaxode's frame (``WorldBuilder.add_heightfield``:
        heights (nx, ny) over size (lx, ly) centred at pos, z up); ODE's geom is the
        same surface turned by :data:`HEIGHTFIELD_QUAT`."""
        return self._add_geom("heightfield", dict(heights=heights, size=size), None, pos,
                              HEIGHTFIELD_QUAT, surface, category_bits, collide_bits)

    def geom_pos(self, gi) -> np.ndarray:
        return _read(self._lib.dGeomGetPosition(self._geoms[gi]), 3)

    def geom_rot(self, gi) -> np.ndarray:
        if self._geom_kind[gi] == "plane":
            return np.eye(3)
        return _rot3(self._lib.dGeomGetRotation(self._geoms[gi]))

    # -- stepping -----------------------------------------------------------
    def _ensure_buf(self, n):
        if self._contact_buf is None or len(self._contact_buf) < n:
            self._contact_buf = (dContact * max(n, 16))()
        return self._contact_buf

    def _near(self, data, o1, o2):
        try:
            self._near_impl(o1, o2)
        except BaseException as e:  # exceptions can't cross the C boundary
            if self._cb_error is None:
                self._cb_error = e

    def _near_impl(self, o1, o2):
        lib = self._lib
        b1 = lib.dGeomGetBody(o1)
        b2 = lib.dGeomGetBody(o2)
        if not b1 and not b2:
            return  # static-static: nothing to simulate
        i1 = self._geom_index[o1]
        i2 = self._geom_index[o2]
        c = combine_surfaces(self._geom_surface[i1], self._geom_surface[i2])
        maxc = max(1, min(c["max_contacts"], _NUMC_MASK))
        buf = self._ensure_buf(maxc)
        n = lib.dCollide(
            o1, o2, maxc, ctypes.addressof(buf) + dContact.geom.offset, ctypes.sizeof(dContact)
        )
        if n <= 0:
            return
        fdir_world = None
        if c["fdir1"] is not None:
            src = i1 if c["fdir1_from"] == 1 else i2
            fdir_world = self.geom_rot(src) @ c["fdir1"]
        for k in range(n):
            ct = buf[k]
            _fill_surface(ct.surface, c)
            if fdir_world is not None:
                ct.surface.mode |= dContactFDir1
                ct.fdir1[0], ct.fdir1[1], ct.fdir1[2] = (float(x) for x in fdir_world)
                ct.fdir1[3] = 0.0
            if self._reverse_contacts or self._contact_order is not None:
                self._pending.append((dContact.from_buffer_copy(ct), b1, b2))
            else:
                j = lib.dJointCreateContact(self._world, self._group, ctypes.byref(ct))
                lib.dJointAttach(j, b1, b2)
            gm = ct.geom
            self._contacts_last.append(
                Contact(
                    pos=np.array(gm.pos[:3]),
                    normal=np.array(gm.normal[:3]),
                    depth=float(gm.depth),
                    g1=self._geom_index.get(gm.g1, i1),
                    g2=self._geom_index.get(gm.g2, i2),
                )
            )

    def step(self, dt: float, n: int = 1) -> None:
        """Run ``n`` steps of: collide -> contact joints -> dWorldQuickStep (or dWorldStep
        with ``stepper="step"``) -> empty group."""
        self._check_open()
        lib = self._lib
        for _ in range(int(n)):
            self._contacts_last = []
            self._pending = []
            self._cb_error = None
            lib.dSpaceCollide(self._space, None, self._callback)
            if self._cb_error is not None:
                lib.dJointGroupEmpty(self._group)
                err, self._cb_error = self._cb_error, None
                raise err
            if self._contact_order is not None:
                order = [int(i) for i in self._contact_order(list(self._contacts_last))]
                if sorted(order) != list(range(len(self._pending))):
                    raise ValueError(f"contact_order must return a permutation of "
                                     f"range({len(self._pending)}) (got {order})")
                pending = [self._pending[i] for i in order]
            else:
                pending = list(reversed(self._pending))
            for ct, b1, b2 in pending:
                j = lib.dJointCreateContact(self._world, self._group, ctypes.byref(ct))
                lib.dJointAttach(j, b1, b2)
            self._pending = []
            if self._stepper == "step":
                lib.dWorldStep(self._world, float(dt))
            else:
                lib.dWorldQuickStep(self._world, float(dt))
            lib.dJointGroupEmpty(self._group)

    @property
    def ncontacts_last(self) -> int:
        """Number of contacts (contact joints) created in the latest step."""
        return len(self._contacts_last)

    @property
    def contacts_last(self) -> list:
        """Contacts of the latest step: list of :class:`Contact` (pos, normal,
        depth, g1, g2) with geom indices, in the order ODE produced them."""
        return list(self._contacts_last)

    # -- body accessors -----------------------------------------------------
    def pos(self, i) -> np.ndarray:
        return _read(self._lib.dBodyGetPosition(self._bodies[i]), 3)

    def quat(self, i) -> np.ndarray:
        return _read(self._lib.dBodyGetQuaternion(self._bodies[i]), 4)

    def rot(self, i) -> np.ndarray:
        return _rot3(self._lib.dBodyGetRotation(self._bodies[i]))

    def vel(self, i) -> np.ndarray:
        return _read(self._lib.dBodyGetLinearVel(self._bodies[i]), 3)

    def angvel(self, i) -> np.ndarray:
        return _read(self._lib.dBodyGetAngularVel(self._bodies[i]), 3)

    def state(self) -> dict:
        """dict of arrays: pos (n,3), quat (n,4), vel (n,3), angvel (n,3)."""
        n = self.nbody
        if n == 0:
            return dict(pos=np.zeros((0, 3)), quat=np.zeros((0, 4)),
                        vel=np.zeros((0, 3)), angvel=np.zeros((0, 3)))
        return dict(
            pos=np.stack([self.pos(i) for i in range(n)]),
            quat=np.stack([self.quat(i) for i in range(n)]),
            vel=np.stack([self.vel(i) for i in range(n)]),
            angvel=np.stack([self.angvel(i) for i in range(n)]),
        )

    def body_call(self, fn: str, i: int, *args):
        """Call libode's ``fn`` (a prototyped dBody* function) on body ``i``:
        e.g. ``body_call("dBodySetAutoDisableSteps", b, 5)``, ``body_call(
        "dBodyIsEnabled", b)``."""
        return getattr(self._lib, fn)(self._bodies[i], *args)

    def world_call(self, fn: str, *args):
        """Call libode's ``fn`` (a prototyped dWorld* function) on the world:
        e.g. ``world_call("dWorldSetAutoDisableFlag", 1)`` (world settings are
        copied into bodies created after them, as dBodyCreate does)."""
        return getattr(self._lib, fn)(self._world, *args)

    def add_force(self, i, f) -> None:
        f = np.asarray(f, dtype=np.float64).reshape(3)
        self._lib.dBodyAddForce(self._bodies[i], f[0], f[1], f[2])

    def add_torque(self, i, t) -> None:
        t = np.asarray(t, dtype=np.float64).reshape(3)
        self._lib.dBodyAddTorque(self._bodies[i], t[0], t[1], t[2])


# ---------------------------------------------------------------------------
# standalone narrow phase
# ---------------------------------------------------------------------------
def _parse_spec(spec):
    """Geom spec -> (kind, params, pos, quat).

    Accepted forms (pos defaults to origin, quat to identity):
      dict(kind="sphere", radius=r, pos=..., quat=...)
      dict(kind="box", size=(lx,ly,lz), ...)
      dict(kind="capsule", radius=r, length=l, ...)  (also kind="cylinder")
      dict(kind="ray", origin=o, direction=d, length=l)  (dCreateRay + dGeomRaySet)
      dict(kind="plane", normal=(a,b,c), offset=d)
      dict(kind="convex", planes=(F, 4), points=(V, 3), polygons=[k, i.., k, ...])
      dict(kind="trimesh", vertices=(V, 3), triangles=(T, 3))
      dict(kind="heightfield", heights=(nx, ny), size=(lx, ly), pos=...)  (jaxode's
        frame: z up; placed turned by HEIGHTFIELD_QUAT unless quat is given)
      or tuples: ("sphere", r, pos?, quat?), ("box", size, pos?, quat?),
                 ("capsule", r, l, pos?, quat?), ("plane", normal, offset)
    """
    if isinstance(spec, dict):
        d = dict(spec)
        kind = d.pop("kind", None) or d.pop("type", None)
        pos = d.pop("pos", (0.0, 0.0, 0.0))
        quat = d.pop("quat", HEIGHTFIELD_QUAT if kind == "heightfield" else _IDENTITY_Q)
        return kind, d, pos, quat
    kind, *rest = spec
    if kind == "plane":
        return kind, dict(normal=rest[0], offset=rest[1]), None, None
    if kind == "sphere":
        params, rest = dict(radius=rest[0]), rest[1:]
    elif kind == "box":
        params, rest = dict(size=rest[0]), rest[1:]
    elif kind in ("capsule", "cylinder"):
        params, rest = dict(radius=rest[0], length=rest[1]), rest[2:]
    elif kind == "ray":  # ("ray", origin, direction, length)
        return kind, dict(origin=rest[0], direction=rest[1], length=rest[2]), None, None
    else:
        raise ValueError(f"unsupported geom kind {kind!r}")
    pos = rest[0] if len(rest) > 0 else (0.0, 0.0, 0.0)
    quat = rest[1] if len(rest) > 1 else _IDENTITY_Q
    return kind, params, pos, quat


def collide(spec1, spec2, max_contacts: int = 10, flags: int = 0) -> list:
    """One ``dCollide(g1, g2, max_contacts | flags, ...)`` between two geoms
    placed in the world (no space, no bodies).

    Returns ODE's contacts as a list of :class:`Contact` with g1=0, g2=1 (the
    geoms as passed).  The normal points into geom 1 (ODE's convention).
    """
    lib = load()
    maxc = int(max_contacts)
    if not 1 <= maxc <= _NUMC_MASK:
        raise ValueError("max_contacts must be in [1, 65535]")
    geoms = []
    try:
        for spec in (spec1, spec2):
            kind, params, pos, quat = _parse_spec(spec)
            g = _create_geom(lib, None, kind, params)
            geoms.append(g)
            if kind not in ("plane", "ray"):
                _place_world(lib, g, pos, quat)
        buf = (dContactGeom * maxc)()
        n = lib.dCollide(geoms[0], geoms[1], maxc | int(flags), ctypes.addressof(buf),
                         ctypes.sizeof(dContactGeom))
        index = {geoms[0]: 0, geoms[1]: 1}
        out = []
        for k in range(n):
            c = buf[k]
            out.append(
                Contact(
                    pos=np.array(c.pos[:3]),
                    normal=np.array(c.normal[:3]),
                    depth=float(c.depth),
                    g1=index.get(c.g1, -1),
                    g2=index.get(c.g2, -1),
                )
            )
        return out
    finally:
        for g in geoms:
            lib.dGeomDestroy(g)
            _free_geom_data(lib, g)
