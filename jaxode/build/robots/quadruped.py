"""A four-legged walker: box torso, four two-link legs on hip and knee hinges.

The torso is a 0.5 x 0.3 x 0.06 m box (3 kg); each leg is a thigh (0.25 kg) and a
shin (0.15 kg) capsule of radius 2.5 cm with 0.15 m between joints, on a hip and a
knee hinge about the body y axis, with stops and a motor (fmax [N m]). Masses are
ODE's solid-shape masses (jaxode.mass) of those totals. Shins and torso touch the
plane; the legs do not collide with each other. Used by ``examples/walker.py``,
the ``walker`` environment (``jaxode.envs``) and the benchmarks.
"""
from __future__ import annotations

import dataclasses

import jaxode

# geometry [m] and masses [kg]
TORSO_SIZE = (0.5, 0.3, 0.06)
TORSO_MASS = 3.0
LEG_RADIUS = 0.025
LINK_LENGTH = 0.15           # hip to knee and knee to foot (capsule cylinder length)
THIGH_MASS = 0.25
SHIN_MASS = 0.15
HIP_XY = ((0.22, 0.17), (0.22, -0.17), (-0.22, 0.17), (-0.22, -0.17))   # FL FR HL HR
# stops [rad]: a positive hinge angle (body 1 = the lower link turning about +y
# relative to body 2) swings the foot backward (-x) at the hip, and folds the
# shin backward at the knee
HIP_RANGE = (-0.9, 0.9)
KNEE_RANGE = (-0.1, 1.6)
# collision bits: the plane collides with shins and torso only
_PLANE, _BODY = 0x1, 0x2


@dataclasses.dataclass(frozen=True)
class Walker:
    """A built walker: the model and the indices a controller needs.

    hips, knees: joint indices (FL, FR, HL, HR); torso: body index; fmax the
    motor torque limit [N m] every hinge gets by default.
    """

    model: jaxode.Model
    hips: tuple
    knees: tuple
    torso: int
    fmax: float


def build_walker(mu: float = 1.0, fmax: float = 20.0, torso_mass: float = TORSO_MASS,
                 iterations: int = 20) -> Walker:
    """The quadruped standing on the plane at x = y = 0, facing +x.

    mu: friction coefficient of all surfaces (pyramid model); fmax [N m]:
    motor torque limit of every hinge (the motors hold the pose, vel 0, until
    a controller sets joint_vel); torso_mass [kg]; iterations: QuickStep.
    """
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), iterations=iterations)
    surf = jaxode.Surface(mu=mu)
    b.add_plane(normal=(0, 0, 1), offset=0.0, surface=surf, category_bits=_PLANE,
                collide_bits=_BODY)
    r, ln = LEG_RADIUS, LINK_LENGTH
    hip_z = 2 * ln + r + 0.01                       # feet 1 cm above the plane
    torso = b.add_body(pos=(0.0, 0.0, hip_z),
                       mass=jaxode.mass.box(size=TORSO_SIZE, total=torso_mass))
    b.add_box(size=TORSO_SIZE, body=torso, surface=surf, category_bits=_BODY,
              collide_bits=_PLANE)
    thigh_m = jaxode.mass.capsule(r, ln, direction=3, total=THIGH_MASS)
    shin_m = jaxode.mass.capsule(r, ln, direction=3, total=SHIN_MASS)
    hips, knees = [], []
    for hx, hy in HIP_XY:
        thigh = b.add_body(pos=(hx, hy, hip_z - ln / 2), mass=thigh_m)
        b.add_capsule(r, ln, body=thigh, surface=surf, category_bits=0, collide_bits=0)
        shin = b.add_body(pos=(hx, hy, hip_z - 1.5 * ln), mass=shin_m)
        b.add_capsule(r, ln, body=shin, surface=surf, category_bits=_BODY, collide_bits=_PLANE)
        hips.append(b.add_hinge(thigh, torso, anchor=(hx, hy, hip_z), axis=(0, 1, 0),
                                lo_stop=HIP_RANGE[0], hi_stop=HIP_RANGE[1], fmax=fmax))
        knees.append(b.add_hinge(shin, thigh, anchor=(hx, hy, hip_z - ln), axis=(0, 1, 0),
                                 lo_stop=KNEE_RANGE[0], hi_stop=KNEE_RANGE[1], fmax=fmax))
    return Walker(b.build(), tuple(hips), tuple(knees), torso, fmax)
