"""Conformance scenes for ``solver="direct"`` against ODE's big-matrix stepper ``dWorldStep``.

dWorldStep solves each island's LCP exactly (Dantzig pivoting, ``lcp.cpp``);
jaxode's ``direct`` solver solves the same two box LCPs exactly
(:mod:`jaxode.sim.solver.direct`). With A positive definite the solution is
unique, so there is no row-order spread as with QuickStep: every scene here
is compared on its whole float64 position trajectory to ``TRAJ64`` (1e-9 m),
multi-contact scenes included. Scenes are taken from ``scenes.SCENES`` by name
where one fits, plus a hinge chain, box friction with every corner in contact
(``slide_box_box_friction`` starts exactly touching, where ODE's box-plane
collider reports 3 of the 4 depth-0 corners and jaxode 4: a collision
difference, not a solver one) and a resting stack of two boxes.

:data:`DIRECT_SCENES` is the full list (``python -m tools.conformance``'s
dWorldStep section, ``pytest -m extended``); :data:`DIRECT_QUICK` a few short
ones for the default test tier.
"""
from __future__ import annotations

import dataclasses

from tools.conformance.scenes import (SCENES, TRAJ64, Body, Geom, Joint, Scene, Tolerance,
                                       World, body_of, mass_lib)

_WHY = ("an exact LCP on both sides (dWorldStep's Dantzig pivoting, jaxode's active-set "
        "solve of the same two box LCPs): the solution is unique, so only float64 rounding "
        "differs")
_WHY32 = "float32 is not compared here (dWorldStep runs in double)"
TOL = Tolerance("trajectory", TRAJ64, _WHY, float("nan"), _WHY32)

_M_BOX = mass_lib.box(size=(0.2, 0.2, 0.2), total=1.0)
_M_LINK = mass_lib.box(size=(0.05, 0.05, 0.3), total=0.5)


def _by_name(name: str, **changes) -> Scene:
    s = {s.name: s for s in SCENES}[name]
    return dataclasses.replace(s, tol=TOL, **changes)


def hinge_chain(links: int = 4, steps: int = 200) -> Scene:
    """``links`` 0.3 m rods hanging from the world by y-axis hinges, started
    horizontal-ish (tilted 0.6 rad from the vertical) so the chain swings."""
    import math

    bodies, joints = [], []
    a = 0.6
    # rod k spans from anchor k to anchor k+1 along (sin a, 0, -cos a)
    d = (math.sin(a), 0.0, -math.cos(a))
    q = (math.cos(a / 2), 0.0, -math.sin(a / 2), 0.0)   # local z -> -d
    for k in range(links):
        top = tuple(0.3 * k * x for x in d)
        centre = tuple(t + 0.15 * x for t, x in zip(top, d))
        bodies.append(body_of(_M_LINK, tuple(c + 1.5 * (i == 2) for i, c in enumerate(centre)),
                              quat=q))
        anchor = tuple(t + 1.5 * (i == 2) for i, t in enumerate(top))
        joints.append(Joint("hinge", k, k - 1 if k else None,
                            dict(anchor=anchor, axis=(0.0, 1.0, 0.0))))
    return Scene(f"hinge_chain_{links}", f"{links} rods (0.5 kg, 0.3 m) in a hinge chain from the "
                 "world, released 0.6 rad from the vertical", World(), bodies=tuple(bodies),
                 geoms=(), metric="final_pos", metric_body=links - 1, tol=TOL, steps=steps,
                 dt=0.01, joints=tuple(joints))


def box_stack(n: int = 2, steps: int = 200, mu: float = 0.5) -> Scene:
    """``n`` 0.2 m boxes stacked on the plane with 1 mm gaps, settling."""
    return Scene(f"box_stack_{n}_rest", f"{n} boxes (1 kg, 0.2 m) stacked on the plane, 1 mm "
                 "gaps, settle and rest", World(),
                 bodies=tuple(body_of(_M_BOX, (0.0, 0.0, 0.1 + 0.201 * k)) for k in range(n)),
                 geoms=(Geom("plane", surface=dict(mu=mu)),) + tuple(
                     Geom("box", body=k, size=(0.2, 0.2, 0.2), surface=dict(mu=mu))
                     for k in range(n)),
                 metric="final_z", metric_body=n - 1, tol=TOL, steps=steps)


def slide_box_friction(friction: str, mu: float, steps: int = 150) -> Scene:
    """A box sliding at 2 m/s, 0.1 mm sunk (every corner a contact from step 0)."""
    return Scene(f"slide_box_{friction}_mu{mu:g}_sunk", f"box sliding at 2 m/s, {friction} "
                 f"friction mu {mu:g}, started 0.1 mm deep (4 contacts)", World(),
                 bodies=(body_of(_M_BOX, (0.0, 0.0, 0.0999), vel=(2.0, 0.0, 0.0)),),
                 geoms=(Geom("plane", surface=dict(mu=mu, friction=friction)),
                        Geom("box", body=0, size=(0.2, 0.2, 0.2),
                             surface=dict(mu=mu, friction=friction))),
                 metric="final_x", tol=TOL, steps=steps)


DIRECT_SCENES: list[Scene] = [
    _by_name("free_fall"),
    _by_name("tumbling_gyroscopic"),
    _by_name("rest_sphere_erp0.2_cfm1e-10"),
    _by_name("bounce_above_bounce_vel"),
    _by_name("rest_box"),
    _by_name("slide_box_mu0.5"),
    _by_name("slide_box_mu0.2"),
    slide_box_friction("box", 1.0),
    _by_name("fdir1_anisotropic"),
    _by_name("capsule_lying"),
    _by_name("box_on_static_box"),
    _by_name("box_stack_3"),
    box_stack(2),
    hinge_chain(4),
    _by_name("joint_ball"),
    _by_name("joint_hinge_stops_motor"),
    _by_name("joint_slider_stops_motor"),
    _by_name("joint_fixed_two_bodies"),
    _by_name("joint_universal_stops_motor"),
    _by_name("joint_hinge2_suspension"),
    _by_name("joint_amotor_euler_stops_lmotor"),
]

#: Short scenes for the default test tier: a hinge chain, a resting box, a
#: pyramid-friction slide, a box-friction slide.
DIRECT_QUICK: list[Scene] = [
    hinge_chain(3, steps=20),
    _by_name("rest_box", steps=20),
    _by_name("slide_box_mu0.5", steps=20),
    slide_box_friction("box", 1.0, steps=20),
]

__all__ = ["DIRECT_QUICK", "DIRECT_SCENES", "TOL", "box_stack", "hinge_chain",
           "slide_box_friction"]
