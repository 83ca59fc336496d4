"""Conformance scenes with joints, one function per joint family.

Each function returns a list of :class:`jaxode.conformance.scenes.Scene`;
:data:`JOINT_SCENES` is their concatenation, appended to ``scenes.SCENES``.
Tolerances as in scenes.py: a single joint's rows couple (ball/hinge rows share
the angular terms), so with ODE's default 20 iterations its answer depends on
QuickStep's row order, which ODE 0.16 shuffles at iterations 8 and 16; scenes
compared on the whole trajectory to ~1e-9 therefore run enough iterations for
PGS to converge on both sides, and default-iteration scenes are compared on
their metric within a bound covering ODE's own spread over RNG seeds.
"""
from __future__ import annotations

from jaxode.conformance.scenes import (TRAJ64, Body, Geom, Joint, Scene, Tolerance, World,  # noqa: F401
                                       body_of, mass_lib)


_WHY_CONVERGED = ("one joint, PGS run to convergence on both sides (iterations high enough "
                  "that the row order no longer matters): float64 rounding only")
_WHY_DECOUPLED = ("one joint whose rows decouple (linear and angular blocks of one body), so "
                  "QuickStep's row order cannot matter: float64 rounding only")
_WHY_F32_JOINT = ("float32 (eps 1.2e-7) rounding of O(1) m positions and of the joint error "
                  "terms (ERP/h = 200/s at h = 1 ms turns a 1e-7 m anchor error into 2e-5 m/s), "
                  "accumulated over the run")


def _traj(why64: str, f32: float = 1e-4) -> Tolerance:
    return Tolerance("trajectory", TRAJ64, why64, f32, _WHY_F32_JOINT)


_M_LINK = mass_lib.box(size=(0.2, 0.1, 0.3), total=1.0)
_Q_TILT = (0.8882, 0.0987, 0.1974, 0.2961)  # a generic tilt (normalised when built)


def _tilted_link(pos=(1.0, 0.0, 0.0), vel=(0.1, 0.2, 0.0), angvel=(0.3, 0.1, -0.2)) -> Body:
    import numpy as np

    q = np.asarray(_Q_TILT) / np.linalg.norm(_Q_TILT)
    return body_of(_M_LINK, pos, quat=tuple(float(x) for x in q), vel=vel, angvel=angvel)


def _one_joint(name, desc, joint: Joint, tol: Tolerance, iterations=20, steps=300, dt=0.001,
               bodies=None, metric="final_pos") -> Scene:
    return Scene(name, desc, World(iterations=iterations), bodies=bodies or (_tilted_link(),),
                 geoms=(), metric=metric, tol=tol, steps=steps, dt=dt, joints=(joint,))


def basic_scenes() -> list:
    """ball, hinge, slider, fixed."""
    # The tilted 1 kg link hangs 1 m from the anchor: the ball rows' effective mass
    # (lever arm 1 m) dwarfs the hinge rows' (inertia ~0.01 kg m^2), so SOR-PGS
    # converges slowly: measured max position difference to ODE over 300 steps
    # 1e-5 m (100 iterations), 1e-6 m (400), 3e-10 m (1600) for the free hinge and
    # 3e-3 / 1e-3 / 1.6e-9 m with the stops (4e-9 with stops, bounce and motor, 7e-15
    # at 3200). With enough iterations the rows decide, not their order.
    conv = 1600
    return [
        _one_joint("joint_ball", "tilted spinning box on a ball joint to the world at the origin "
                   f"(a 3-D pendulum), {conv} iterations", Joint("ball", 0, None,
                   dict(anchor=(0.0, 0.0, 0.0))), _traj(_WHY_CONVERGED), iterations=conv),
        _one_joint("joint_hinge_stops_motor", "box on a y-axis hinge to the world with stops "
                   f"+-0.3 rad (bounce 0.5) and a motor (vel 2 rad/s, fmax 5 N m), {2 * conv} iterations",
                   Joint("hinge", 0, None, dict(anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)),
                         dict(lo_stop=-0.3, hi_stop=0.3, bounce=0.5, vel=2.0, fmax=5.0)),
                   _traj(_WHY_CONVERGED), iterations=2 * conv),
        _one_joint("joint_slider_stops_motor", "box on a slider along (1, 0, 1) to the world, "
                   "stops +-5 cm, motor (vel 0.5 m/s, fmax 5 N) pushing into the upper stop, "
                   "default 20 iterations", Joint("slider", 0, None, dict(axis=(1.0, 0.0, 1.0)),
                                                  dict(lo_stop=-0.05, hi_stop=0.05, vel=0.5, fmax=5.0)),
                   _traj(_WHY_DECOUPLED)),
        _one_joint("joint_fixed_two_bodies", "two bodies welded by a fixed joint, thrown and "
                   "spinning under gravity, default 20 iterations",
                   Joint("fixed", 0, 1), _traj(_WHY_DECOUPLED),
                   bodies=(_tilted_link(), _tilted_link(pos=(1.2, 0.1, 0.3), vel=(0.1, 0.2, 0.0)))),
    ]


def universal_family_scenes() -> list:
    """universal, hinge2, pu."""
    return []


def prismatic_family_scenes() -> list:
    """pr, piston, plane2d."""
    return []


def motor_scenes() -> list:
    """amotor, lmotor."""
    return []


JOINT_SCENES = (basic_scenes() + universal_family_scenes() + prismatic_family_scenes()
                + motor_scenes())
