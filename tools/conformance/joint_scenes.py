"""Conformance scenes with joints, one function per joint family.

Each function returns a list of :class:`tools.conformance.scenes.Scene`;
:data:`JOINT_SCENES` is their concatenation, appended to ``scenes.SCENES``.
Tolerances as in scenes.py: a single joint's rows couple (ball/hinge rows share
the angular terms), so with ODE's default 20 iterations its answer depends on
QuickStep's row order, which ODE 0.16 shuffles at iterations 8 and 16; scenes
compared on the whole trajectory to ~1e-9 therefore run enough iterations for
PGS to converge on both sides, and default-iteration scenes are compared on
their metric within a bound covering ODE's own spread over RNG seeds.
"""
from __future__ import annotations

import dataclasses

from tools.conformance.scenes import (TRAJ64, BatchScene, Body, Geom, Joint, Scene, Tolerance, World,  # noqa: F401
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
        _one_joint("joint_hinge_world_first", "box on a y-axis hinge attached world-first "
                   "(dJointAttach(j, 0, body): ODE's dJOINT_REVERSE), stops -0.2 / +0.3 rad and a "
                   "motor (vel 0.5 rad/s, fmax 0.05 N m) acting on ODE's internal angle, default "
                   "20 iterations", Joint("hinge", None, 0, dict(anchor=(0.0, 0.0, 0.0),
                                                              axis=(0.0, 1.0, 0.0)),
                                          dict(lo_stop=-0.2, hi_stop=0.3, vel=0.5, fmax=0.05)),
                   _traj("one joint; jaxode shuffles its rows at iterations 8 and 16 with ODE's "
                         "generator from the same seed (pgs.py), so both solve the same row "
                         "order: float64 rounding only")),
        _one_joint("joint_slider_world_first", "box on a slider along (1, 0, 1) attached "
                   "world-first: ODE reverses the reported position and the limit/motor axis; "
                   "stops -5 / +2 cm, motor (vel 0.3 m/s, fmax 2 N) into the +2 cm stop of the "
                   "reversed position, default 20 iterations",
                   Joint("slider", None, 0, dict(axis=(1.0, 0.0, 1.0)),
                         dict(lo_stop=-0.05, hi_stop=0.02, vel=0.3, fmax=2.0)),
                   _traj(_WHY_DECOUPLED)),
        _one_joint("joint_fixed_two_bodies", "two bodies welded by a fixed joint, thrown and "
                   "spinning under gravity, default 20 iterations",
                   Joint("fixed", 0, 1), _traj(_WHY_DECOUPLED),
                   bodies=(_tilted_link(), _tilted_link(pos=(1.2, 0.1, 0.3), vel=(0.1, 0.2, 0.0)))),
    ]


def seed_scenes() -> list:
    """QuickStep's row shuffles from another seed of ODE's generator: libode with
    dRandSetSeed(7), jaxode with WorldBuilder(reorder_seed=7). (With jaxode's default
    seed 0 this scene ends 1.7e-3 m from ODE's seed-7 trajectory.)"""
    hinge = next(s for s in basic_scenes() if s.name == "joint_hinge_world_first")
    return [dataclasses.replace(
        hinge, name="joint_hinge_world_first_seed7", rand_seed=7,
        description=hinge.description + "; row shuffles from seed 7 on both sides",
        tol=_traj("one joint; both shuffle its rows at iterations 8 and 16 with ODE's "
                  "generator from seed 7 (dRandSetSeed(7) / reorder_seed=7): float64 "
                  "rounding only (seed 0 on the jaxode side: 1.7e-3 m)"))]


def universal_family_scenes() -> list:
    """universal, hinge2, pu: two tilted links thrown and spinning under gravity,
    joined at the midpoint (1.1, 0.05, 0.15) m, with stops and motors in use."""
    conv = 400
    why = ("two free bodies on one joint, PGS run to convergence on both sides "
           f"({conv} iterations): the rows, not their order, decide; float64 rounding only")
    bodies = (_tilted_link(), _tilted_link(pos=(1.2, 0.1, 0.3), angvel=(1.0, -1.5, 0.5)))
    anchor = (1.1, 0.05, 0.15)

    def scene(name, desc, joint):
        return _one_joint(name, desc + f", {conv} iterations", joint, _traj(why),
                          iterations=conv, bodies=bodies)

    return [
        scene("joint_universal_stops_motor", "universal joint, axis 1 = y (stops +-0.1 rad, "
              "bounce 0.3), axis 2 = z (motor 1 rad/s, 0.2 N m)",
              Joint("universal", 0, 1, dict(anchor=anchor, axis1=(0.0, 1.0, 0.0),
                                            axis2=(0.0, 0.0, 1.0)),
                    dict(lo_stop=-0.1, hi_stop=0.1, bounce=0.3, vel2=1.0, fmax2=0.2))),
        scene("joint_hinge2_suspension", "hinge-2 joint, axis 1 = z (soft suspension: ERP "
              "0.3, CFM 1e-3; stops +-0.1 rad), axis 2 = (0, 1, 0.3) (motor 3 rad/s, 0.5 N m)",
              Joint("hinge2", 0, 1, dict(anchor=anchor, axis1=(0.0, 0.0, 1.0),
                                         axis2=(0.0, 1.0, 0.3)),
                    dict(suspension_erp=0.3, suspension_cfm=1e-3, lo_stop=-0.1, hi_stop=0.1,
                         vel2=3.0, fmax2=0.5))),
        scene("joint_pu_stops_motor", "prismatic-universal joint, axis 1 = y (motor 0.5 "
              "rad/s, 1 N m), axis 2 = z, prismatic axis 3 = (1, 0, 0.2) (stops +-1 cm, "
              "bounce 0.5)",
              Joint("pu", 0, 1, dict(anchor=anchor, axis1=(0.0, 1.0, 0.0),
                                     axis2=(0.0, 0.0, 1.0), axis3=(1.0, 0.0, 0.2)),
                    dict(vel=0.5, fmax=1.0, lo_stop3=-0.01, hi_stop3=0.01, bounce3=0.5))),
    ]


def prismatic_family_scenes() -> list:
    """pr, piston, plane2d. PR and piston: the two thrown, spinning links of the
    universal family joined at the midpoint (1.1, 0.05, 0.15) m, with stops and
    motors in use; body 1's centre lies on the PR's prismatic line through the
    anchor (ODE's PR tests its prismatic stop at body 1's centre). Plane-2D: a
    tilted box spinning and moving off the plane, held to z = 0 under gravity
    by the joint with its three motors. Measured max position difference to ODE
    over 300 steps in float64: PR 3e-15 m (20 iterations), 7e-16 (100); piston
    2e-14 / 7e-16; plane-2D 1e-20 m (20 and 100). float32: 3e-6, 3e-7, 2e-6 m."""
    conv = 100
    why = ("two free bodies on one joint, PGS run to convergence on both sides "
           f"({conv} iterations): the rows, not their order, decide; float64 rounding only")
    bodies = (_tilted_link(), _tilted_link(pos=(1.2, 0.1, 0.3), angvel=(1.0, -1.5, 0.5)))
    anchor = (1.1, 0.05, 0.15)

    def scene(name, desc, joint):
        return _one_joint(name, desc + f", {conv} iterations", joint, _traj(why),
                          iterations=conv, bodies=bodies)

    why_plane = ("one body; the plane-2D rows (linear z, angular x and y) and motors (linear "
                 "x and y, angular z) decouple but for the tilted body's inertia coupling the "
                 "three angular rows, which 100 iterations converge: float64 rounding only")
    puck = _tilted_link(pos=(0.5, 0.2, 0.0), vel=(0.3, 0.1, 0.2), angvel=(0.4, -0.2, 1.0))
    return [
        scene("joint_pr_stops_motor", "prismatic-rotoide joint, prismatic axis (-0.1, -0.05, "
              "-0.15) through body 1's centre (stops +-2 mm, bounce 0.5), rotoide axis (0.05, "
              "-0.1, 0) (motor 1 rad/s, 0.2 N m)",
              Joint("pr", 0, 1, dict(anchor=anchor, axis1=(-0.1, -0.05, -0.15),
                                     axis2=(0.05, -0.1, 0.0)),
                    dict(lo_stop=-0.002, hi_stop=0.002, bounce=0.5, vel2=1.0, fmax2=0.2))),
        scene("joint_piston_stops_motor", "piston joint, axis (1, 0, 0.2): prismatic motor "
              "(0.3 m/s, 2 N), rotation stops +-0.1 rad (bounce 0.3)",
              Joint("piston", 0, 1, dict(anchor=anchor, axis=(1.0, 0.0, 0.2)),
                    dict(vel=0.3, fmax=2.0, lo_stop2=-0.1, hi_stop2=0.1, bounce2=0.3))),
        _one_joint("joint_plane2d_motors", "tilted box on a plane-2D joint (z = 0) under "
                   "gravity, moving and spinning off the plane at the start, motors x (0.5 "
                   "m/s, 1 N), y (-0.3 m/s, 1 N), angle (2 rad/s, 0.01 N m), 100 iterations",
                   Joint("plane2d", 0, None, {}, dict(vel=0.5, fmax=1.0, vel2=-0.3, fmax2=1.0,
                                                      vel3=2.0, fmax3=0.01)),
                   _traj(why_plane), iterations=100, bodies=(puck,)),
    ]


def motor_scenes() -> list:
    """amotor, lmotor."""
    euler = dict(mode="euler", axes=((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)))
    stops = dict(lo_stop=-0.3, hi_stop=0.3, lo_stop2=-0.2, hi_stop2=0.2, lo_stop3=-0.5,
                 hi_stop3=0.5, bounce3=0.4)
    # Measured over 300 steps in float64, max position difference to ODE: 3e-16 m
    # (amotor + lmotor, 20 iterations) and 1e-16 m (ball + amotor, 100 iterations;
    # the same scene differs by 5e-8 m at 20 iterations, where ODE's row order counts).
    # float32: 4e-6 m and 7e-6 m.
    why_decoupled = ("one body: the lmotor's rows are linear and the amotor's angular, so "
                     "they decouple, and the amotor's three angular rows (inertia condition "
                     "number ~3) converge within the 20 iterations in any order: float64 "
                     "rounding only")
    why_converged = ("ball rows (lever arm 0.15 m) and amotor rows couple; 100 iterations "
                     "converge PGS on both sides, so the rows decide, not their order: float64 "
                     "rounding only")
    return [
        Scene("joint_amotor_euler_stops_lmotor",
              "tilted spinning box; Euler amotor to the world (axis 0 = x on the box, axis 2 "
              "= world z) with stops +-0.3, +-0.2, +-0.5 rad on the three Euler angles "
              "(bounce 0.4 on the last) and an lmotor along world x (0.5 m/s, 2 N) and the "
              "box's z (-0.3 m/s, 5 N); default 20 iterations",
              World(), bodies=(_tilted_link(pos=(1.0, 0.0, 0.0), angvel=(3.0, 1.0, -2.0)),),
              geoms=(), metric="final_quat", tol=_traj(why_decoupled), steps=300, dt=0.001,
              joints=(Joint("amotor", 0, None, euler, stops),
                      Joint("lmotor", 0, None, dict(axes=((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)),
                                                    rel=(0, 1)),
                            dict(vel=0.5, fmax=2.0, vel2=-0.3, fmax2=5.0)))),
        Scene("joint_ball_amotor_euler_powered",
              "ODE's powered 3-DOF joint: tilted spinning box 0.15 m from a ball joint to the "
              "world, plus an Euler amotor driving Euler angle 0 (1 rad/s, 0.5 N m) and 2 "
              "(0.5 rad/s, 1 N m) with stops +-0.2 rad on angle 1; 100 iterations",
              World(iterations=100),
              bodies=(_tilted_link(pos=(0.15, 0.0, 0.0), angvel=(3.0, 1.0, -2.0)),),
              geoms=(), metric="final_quat", tol=_traj(why_converged), steps=300, dt=0.001,
              joints=(Joint("ball", 0, None, dict(anchor=(0.0, 0.0, 0.0))),
                      Joint("amotor", 0, None, euler,
                            dict(vel=1.0, fmax=0.5, lo_stop2=-0.2, hi_stop2=0.2, vel3=0.5,
                                 fmax3=1.0)))),
    ]


def _shifted(body: Body, dy: float) -> Body:
    return dataclasses.replace(body, pos=(body.pos[0], body.pos[1] + dy, body.pos[2]))


def _zoo_world(k: int, params: list) -> Scene:
    """World ``k`` of the joint zoo: eight mechanisms 3 m apart along y, one per joint
    type not in test_joints_batch (hinge, slider, ball, fixed), with ``params[i]``
    (dParam* values) on mechanism i. The Euler amotor holds a body 0.15 m from a ball
    joint to the world (ODE's powered 3-DOF joint), so its torques move the body."""
    bodies, joints = [], []
    link2 = dict(pos=(1.2, 0.1, 0.3), angvel=(1.0, -1.5, 0.5))
    mech = [  # (type, geometry, two bodies?)
        ("universal", dict(axis1=(0.0, 1.0, 0.0), axis2=(0.0, 0.0, 1.0)), True),
        ("hinge2", dict(axis1=(0.0, 0.0, 1.0), axis2=(0.0, 1.0, 0.3)), True),
        ("pu", dict(axis1=(0.0, 1.0, 0.0), axis2=(0.0, 0.0, 1.0), axis3=(1.0, 0.0, 0.2)), True),
        ("pr", dict(axis1=(-0.1, -0.05, -0.15), axis2=(0.05, -0.1, 0.0)), True),
        ("piston", dict(axis=(1.0, 0.0, 0.2)), True),
        ("plane2d", {}, False),
        ("amotor", dict(mode="euler", axes=((1.0, 0.0, 0.0), (0.0, 0.0, 1.0))), False),
        ("lmotor", dict(axes=((1.0, 0.0, 0.0), (0.0, 0.0, 1.0)), rel=(0, 1)), False),
    ]
    for i, ((kind, geo, two), prm) in enumerate(zip(mech, params)):
        dy = 3.0 * i
        b1 = len(bodies)
        if kind == "plane2d":
            bodies.append(_shifted(_tilted_link(pos=(0.5, 0.2, 0.0), vel=(0.3, 0.1, 0.2),
                                                angvel=(0.4, -0.2, 1.0)), dy))
        elif kind == "amotor":  # ODE's powered 3-DOF joint: a ball joint plus the amotor
            bodies.append(_shifted(_tilted_link(pos=(1.15, 0.0, 0.0), angvel=(3.0, 1.0, -2.0)), dy))
            joints.append(Joint("ball", b1, None, dict(anchor=(1.0, dy, 0.0))))
        elif not two:
            bodies.append(_shifted(_tilted_link(angvel=(3.0, 1.0, -2.0)), dy))
        else:
            bodies += [_shifted(_tilted_link(), dy), _shifted(_tilted_link(**link2), dy)]
        geo = dict(geo)
        if two:
            geo["anchor"] = (1.1, 0.05 + dy, 0.15)
        joints.append(Joint(kind, b1, b1 + 1 if two else None, geo, prm))
    why = ("eight independent mechanisms (no shared body), PGS run to convergence on both "
           "sides (400 iterations): the rows, not their order, decide; float64 rounding only")
    return Scene(f"zoo_world{k}", f"joint zoo, world {k}", World(iterations=400),
                 bodies=tuple(bodies), geoms=(), metric="final_pos", tol=_traj(why),
                 steps=100, dt=0.001, joints=tuple(joints))


#: per world, per mechanism (universal, hinge2, pu, pr, piston, plane2d, amotor, lmotor):
#: the stops, motors, bounce, suspension and CFM that differ between the worlds
_ZOO_PARAMS = [
    [dict(lo_stop=-0.1, hi_stop=0.1, bounce=0.3, vel2=1.0, fmax2=0.2),
     dict(suspension_erp=0.3, suspension_cfm=1e-3, lo_stop=-0.1, hi_stop=0.1, vel2=3.0, fmax2=0.5),
     dict(vel=0.5, fmax=1.0, lo_stop3=-0.01, hi_stop3=0.01, bounce3=0.5),
     dict(lo_stop=-0.002, hi_stop=0.002, bounce=0.5, vel2=1.0, fmax2=0.2),
     dict(vel=0.3, fmax=2.0, lo_stop2=-0.1, hi_stop2=0.1, bounce2=0.3),
     dict(vel=0.5, fmax=1.0, vel2=-0.3, fmax2=1.0, vel3=2.0, fmax3=0.01),
     dict(lo_stop=-0.3, hi_stop=0.3, lo_stop2=-0.2, hi_stop2=0.2, lo_stop3=-0.5, hi_stop3=0.5,
          bounce3=0.4),
     dict(vel=0.5, fmax=2.0, vel2=-0.3, fmax2=5.0)],
    [dict(vel=-2.0, fmax=1.0, lo_stop2=-0.05, hi_stop2=0.05),
     dict(suspension_erp=0.8, suspension_cfm=1e-5, vel=1.0, fmax=0.3),
     dict(vel3=0.2, fmax3=3.0, lo_stop=-0.2, hi_stop=0.2),
     dict(vel=-0.1, fmax=5.0, lo_stop2=-0.1, hi_stop2=0.1),
     dict(lo_stop=-0.01, hi_stop=0.02, bounce=0.2, vel2=-1.0, fmax2=0.1),
     dict(vel=-0.2, fmax=0.5, fmax3=0.1),
     dict(vel=1.0, fmax=0.5, vel3=-0.5, fmax3=1.0, cfm=1e-4),
     dict(vel=-0.4, fmax=0.5, cfm=1e-4, vel2=0.6, fmax2=1.0)],
    [dict(lo_stop=-0.05, hi_stop=0.2, stop_erp=0.6, stop_cfm=1e-4, lo_stop2=-0.3, hi_stop2=0.1),
     dict(lo_stop=-0.3, hi_stop=0.05, vel2=-1.0, fmax2=2.0, cfm2=1e-3),
     dict(lo_stop=-0.1, hi_stop=0.1, lo_stop2=-0.1, hi_stop2=0.1, lo_stop3=-0.02, hi_stop3=0.0),
     dict(lo_stop2=-0.2, hi_stop2=0.2, bounce2=0.6, vel=0.05, fmax=1.0),
     dict(lo_stop=-0.005, hi_stop=0.005, lo_stop2=-0.05, hi_stop2=0.05, stop_erp=0.3),
     dict(vel2=0.4, fmax2=2.0, vel3=-1.0, fmax3=0.05, cfm3=1e-3),
     dict(lo_stop2=-0.1, hi_stop2=0.1, vel=-1.0, fmax=0.2, stop_cfm2=1e-4),
     dict(vel2=0.2, fmax2=0.5, cfm2=1e-3)],
]


def joint_batch_scenes() -> list:
    """The joint zoo: every joint type beyond hinge/slider/ball/fixed (those are in
    tests/test_joints_batch.py) in ONE vmapped jaxode call over three worlds that differ
    in the joints' stops, motors, bounce, suspension and CFM, each world compared with
    its own ODE world."""
    return [BatchScene("batch_joint_zoo",
                       "3 worlds, one vmapped jaxode call: universal, hinge-2, PU, PR, piston, "
                       "plane-2D, Euler amotor and lmotor side by side, each world with its own "
                       "stops/motors/bounce/suspension/CFM on every joint; 400 iterations, "
                       "100 steps of 1 ms", tuple(_zoo_world(k, p) for k, p in enumerate(_ZOO_PARAMS)))]


JOINT_SCENES = (basic_scenes() + universal_family_scenes() + prismatic_family_scenes()
                + motor_scenes() + seed_scenes())
