"""float32 joint error terms far from the origin.

A joint's error term is the gap between its two anchor points, each a body
origin plus a rotated offset. ODE sums ``a2 + pos2 - a1 - pos1``; in float32,
5 m from the origin, that rounds the absolute anchor (ulp 4.8e-7 m) before the
near-cancelling subtraction, and building the body-frame anchors from the exact
(float64) body positions left the float32 State a joint error of the same size
at t = 0. ERP / h turns either into a velocity error (0.9 / 8 ms x 4.8e-7 m =
5e-5 m/s per row per step): the fuzz campaign's float32 ball chain (tools/fuzz.py
world 2:7:853) left float64 by 1.7e-4 rad/s in ONE step with one iteration,
1.4e-6 after the fix. jaxode now subtracts the nearby large terms first
(jaxode.sim.joints.common.anchor_gap) and builds the anchors from the positions
as the State holds them (jaxode.build.builder._state_round).

Truths: exact arithmetic (float64 of the same float32 inputs) for the gap; the
scene's own definition for the rows at t = 0 (the anchors coincide, so every
position-error row is 0 up to the offsets' rounding, as in libode's double).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools import fuzz as fz  # noqa: E402


def test_anchor_gap_float32_keeps_the_offsets_precision():
    """Bodies 4-8 m out with offsets up to 0.5 m: anchor_gap's float32 result is
    within 1e-7 m of the exact gap of the same float32 inputs, where ODE's
    summation order is off by up to ~5e-7 m (the premise: it matters)."""
    import jax.numpy as jnp

    from jaxode.sim.joints.common import anchor_gap

    rng = np.random.default_rng(3)
    n = 2000
    pos1 = rng.uniform(4.0, 8.0, (n, 3)).astype(np.float32)
    pos2 = (pos1 + rng.uniform(-0.5, 0.5, (n, 3))).astype(np.float32)
    a1 = rng.uniform(-0.5, 0.5, (n, 3)).astype(np.float32)
    a2 = rng.uniform(-0.5, 0.5, (n, 3)).astype(np.float32)
    exact = (pos2.astype(np.float64) + a2 - a1 - pos1.astype(np.float64))
    got = np.asarray(anchor_gap(jnp.asarray(pos1), jnp.asarray(a1), jnp.asarray(pos2),
                                jnp.asarray(a2)), np.float64)
    ode_order = (a2 + pos2 - a1 - pos1).astype(np.float64)
    assert np.abs(got - exact).max() < 1e-7
    assert np.abs(ode_order - exact).max() > 2e-7
    # the world as body 2: pos2 = 0, a2 the world point
    w = (pos1 + rng.uniform(-0.5, 0.5, (n, 3))).astype(np.float32)
    exact_w = w.astype(np.float64) - a1 - pos1.astype(np.float64)
    got_w = np.asarray(anchor_gap(jnp.asarray(pos1), jnp.asarray(a1), jnp.zeros_like(jnp.asarray(w)),
                                  jnp.asarray(w)), np.float64)
    assert np.abs(got_w - exact_w).max() < 1e-7


def _case(jtype: str, height: float) -> dict:
    """Two bodies on two joints (world - sphere - box) hanging at ``height`` [m]."""
    a0 = np.array([0.3, -0.2, height])
    d = np.array([0.6, 0.3, -0.74]) / np.linalg.norm([0.6, 0.3, -0.74])
    a1 = a0 + 0.35 * d
    bodies = [dict(shape="sphere", dims={"radius": 0.08}, pos=list(a0 + 0.175 * d),
                   quat=[0.9, 0.1, -0.3, 0.2]),
              dict(shape="box", dims={"size": [0.2, 0.1, 0.25]}, pos=list(a1 + 0.2 * d),
                   quat=[0.7, -0.2, 0.1, 0.4])]
    for b in bodies:
        b["quat"] = list(np.asarray(b["quat"]) / np.linalg.norm(b["quat"]))
    ax1, ax2 = [0.0, 0.6, 0.8], [1.0, 0.0, 0.0]
    first = "ball" if jtype == "hinge2" else jtype   # ODE's hinge-2 needs two bodies
    joints = [dict(type=first, body1=0, body2=None, anchor=list(a0), axis1=ax1, axis2=ax2, axis3=ax1),
              dict(type=jtype, body1=1, body2=0, anchor=list(a1), axis1=ax2, axis2=ax1, axis3=ax2)]
    world = dict(erp=0.9, cfm=1e-9, dt=0.008, gravity=[0.3, -0.2, -9.81],
                 contact_max_correcting_vel=float("inf"), mass=[0.5, 1.9],
                 vel=[[0.0] * 3] * 2, angvel=[[0.0] * 3] * 2, surfaces=[], joints=[{}, {}])
    return dict(template="test", friction="pyramid", n_steps=1,
                base=dict(family="chain", bodies=bodies, joints=joints, geoms=False), world=world)


@pytest.mark.parametrize("jtype", ["ball", "fixed", "hinge2", "pu", "piston"] + [
    pytest.param(t, marks=pytest.mark.extended) for t in ("hinge", "universal", "pr")])
def test_float32_rows_at_rest_7m_out(jtype):
    """The scene is built with coinciding anchors, so at t = 0 every row's error
    term is 0 (libode's double: ~1e-16 m). Built and evaluated in float32 7 m
    from the origin, the position error behind each row stays within 1e-7 m
    (the offsets' rounding), not the 5e-7 m of float32 at 7 m."""
    import jaxode
    from jaxode.sim import dynamics
    from jaxode.sim.joints import stage

    case = _case(jtype, 7.0)
    m = fz.build_jaxode(case)
    s = jaxode.init(m)
    assert np.asarray(s.pos).dtype == np.float32
    b = dynamics.bodies(m, m.params, s, case["world"]["dt"])
    jt = stage.rows(m, m.params, b)
    k = case["world"]["erp"] / case["world"]["dt"]
    for t in jt.tables:
        err = np.abs(np.asarray(t.c, np.float64) * np.asarray(t.active)) / k
        assert err.max() < 1e-7, (jtype, err)


@pytest.mark.extended
@pytest.mark.parametrize("world", ["2:7:853", "3:6:550", "5:7:372", "5:7:991"])
def test_fuzz_float32_worlds_stay_in_budget(world):
    """Four float32 "jaxode only" explosions of the campaign (seed 0, 200 steps;
    KE ratio 1.98e4, 19.2, 83.1, 43.9 before the fix, float64 and libode under
    10): the float32 rollout now stays inside the budget, as libode (double,
    shuffle seed 0) does on the same world."""
    import jaxode

    ti, chunk, i = (int(x) for x in world.split(":"))
    t = fz.TEMPLATES[ti]
    base = fz.base_scene(t, 0, chunk, ti)
    case = fz.world_case(t, base, fz.world_params(t, base, 0, chunk, ti, i), 200)
    m = fz.build_jaxode(case)
    _, tr = jaxode.rollout(m, jaxode.init(m), 200, case["world"]["dt"])
    jx = {k: np.asarray(getattr(tr, k), np.float64) for k in ("pos", "quat", "vel", "angvel", "max_depth")}
    assert fz.check(case, fz.run_ode(case, 0))["ratio"] < fz.FACTOR
    assert fz.check(case, jx)["ratio"] < fz.FACTOR
