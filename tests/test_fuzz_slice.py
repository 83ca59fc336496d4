"""A fixed slice of the reliability fuzz campaign (tools/fuzz.py, docs/RELIABILITY.md).

Truths: the energy budget (a world's kinetic energy stays below 10 x (initial
kinetic energy + the work gravity has done + the motors' work bound), the
conservation law with the campaign's margin), finiteness, and the real ODE
0.16 (libode, double) for any world that fails: a failure counts only where
libode, on the same scene and parameters, does not fail too.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import jax
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools import fuzz as fz  # noqa: E402

#: default tier: (template index, worlds): a ball/hinge chain anchored low,
#: colliding with the ground and itself (box friction), 64 worlds x 60 steps
#: in one compiled rollout (~14 s CPU on this machine, most of it compile).
#: The extended tier adds the small hinge/PU/slider chain and every template.
SLICE = ((16, 64),)
SLICE_STEPS = 60


def _libode_or_none():
    try:
        from tools.conformance import odelib
        odelib.load()
        return odelib
    except Exception:  # pragma: no cover - depends on the machine
        return None


def _assert_no_jaxode_only(row):
    assert row["nonfinite"] == 0, row["failures"]
    if _libode_or_none() is None:  # pragma: no cover
        assert row["exploded"] == 0, row["failures"]
    else:
        assert row["exploded_jaxode_only"] == 0, row["failures"]


@pytest.mark.parametrize("ti,worlds", SLICE, ids=[fz.TEMPLATES[t].name for t, _ in SLICE])
def test_fuzz_slice(ti, worlds):
    """64 random worlds of one structure in one vmapped float32 rollout: none is
    non-finite, none gains energy beyond the budget and none sinks deeper than
    5 cm where libode does not."""
    row = fz.run_chunk(ti, chunk=0, worlds=worlds, steps=SLICE_STEPS, seed=0,
                       ode=_libode_or_none() is not None)
    assert row["rollouts"] == worlds
    _assert_no_jaxode_only(row)
    assert row["deep_jaxode_only"] == 0, row["failures"]


def test_world_arrays_match_the_builder():
    """The campaign's per-world Params (the chunk model's defaults with the world's
    values written in) are exactly what the builder stores for the world's own
    case, and the model is otherwise the same: what is stepped in jaxode is what
    is replayed in libode. Every joint type and every per-world field the campaign
    sets are covered (template 7: slider, ball, universal, hinge-2, PU and hinge;
    10: a ball/hinge-2/PR chain on the ground with cone friction)."""
    for ti in (7, 10):
        t = fz.TEMPLATES[ti]
        base = fz.base_scene(t, 0, 3, ti)
        cases = [fz.world_case(t, base, fz.world_params(t, base, 0, 3, ti, i), 10) for i in range(5)]
        m0 = fz.build_jaxode(cases[0], defaults=True)
        params, vel, angvel, dt = fz.world_arrays(m0, cases)
        set_fields = set()
        for i, c in enumerate(cases):
            m = fz.build_jaxode(c)
            assert jax.tree.structure(m) == jax.tree.structure(m0)
            strip = dict(params=None, init_vel=None, init_angvel=None)
            for x, y in zip(jax.tree.leaves(dataclasses.replace(m, **strip)),
                            jax.tree.leaves(dataclasses.replace(m0, **strip))):
                np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
            np.testing.assert_allclose(np.asarray(m.init_vel), np.asarray(vel[i]), rtol=1e-6)
            np.testing.assert_allclose(np.asarray(m.init_angvel), np.asarray(angvel[i]), rtol=1e-6)
            assert float(dt[i]) == pytest.approx(c["world"]["dt"], rel=1e-6)
            for f in dataclasses.fields(m.params):
                x, y = getattr(m.params, f.name), getattr(params, f.name)
                if x is None:
                    assert y is None, f.name
                    continue
                np.testing.assert_allclose(np.asarray(x), np.asarray(y[i]), rtol=1e-6, err_msg=f.name)
                if not np.array_equal(np.asarray(x), np.asarray(getattr(m0.params, f.name))):
                    set_fields.add(f.name)
        expected = {"gravity", "erp", "cfm", "body_mass", "body_inertia"}
        if t.family != "pile":
            expected |= {"joint_lo_stop", "joint_hi_stop", "joint_vel", "joint_fmax"}
        if base["geoms"]:
            expected |= {"mu", "bounce"}
        assert expected <= set_fields, (t.name, expected - set_fields)


@pytest.mark.extended
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
def test_fuzz_slice_small_chain(x64):
    """The small hinge/PU/slider chain (no contact), 64 worlds x 200 steps."""
    with jax.enable_x64(x64):
        row = fz.run_chunk(15, chunk=0, worlds=64, steps=200, seed=0,
                           ode=_libode_or_none() is not None)
    _assert_no_jaxode_only(row)


@pytest.mark.extended
@pytest.mark.parametrize("x64", [False, True], ids=["f32", "f64"])
@pytest.mark.parametrize("ti", range(len(fz.TEMPLATES)), ids=[t.name for t in fz.TEMPLATES])
def test_fuzz_extended(ti, x64):
    """Every template, 128 worlds x 200 steps, float32 and float64 (campaign seed 1:
    worlds the campaign in docs/RELIABILITY.md, seed 0, does not run)."""
    with jax.enable_x64(x64):
        row = fz.run_chunk(ti, chunk=0, worlds=128, steps=200, seed=1,
                           ode=_libode_or_none() is not None)
    _assert_no_jaxode_only(row)


def test_mixed_chains_start_clear():
    """The mixed chains (on the ground) start with every body above the plane
    z = 0 (each shape's exact lowest point at its initial pose, identity
    orientation: box half-height, sphere radius, capsule half-length + radius,
    cylinder half-length along z) and no two bodies' bounding spheres touching:
    no penetration energy at t = 0 for the budget to miss. Chain templates keep
    their geometry: the joint anchors still join consecutive links."""
    for ti, t in enumerate(fz.TEMPLATES):
        if t.family != "mixed":
            continue
        for chunk in range(30):
            base = fz.base_scene(t, 0, chunk, ti)
            lows, cs, rs = [], [], []
            for b in base["bodies"]:
                d, z = b["dims"], b["pos"][2]
                assert b["quat"] == [1.0, 0.0, 0.0, 0.0]
                if b["shape"] == "box":
                    low, r = z - d["size"][2] / 2, 0.5 * np.linalg.norm(d["size"])
                elif b["shape"] == "sphere":
                    low, r = z - d["radius"], d["radius"]
                elif b["shape"] == "capsule":
                    low, r = z - d["length"] / 2 - d["radius"], d["length"] / 2 + d["radius"]
                else:
                    low, r = z - d["length"] / 2, np.hypot(d["length"] / 2, d["radius"])
                lows.append(low)
                cs.append(np.asarray(b["pos"]))
                rs.append(r)
            assert min(lows) > 0.0, (t.name, chunk, lows)
            for i in range(len(cs)):
                for j in range(i):
                    assert np.linalg.norm(cs[i] - cs[j]) > rs[i] + rs[j], (t.name, chunk, i, j)
            # body k sits halfway between its joint's anchor and the next joint's
            js = base["joints"]
            for k in range(len(js) - 1):
                mid = 0.5 * (np.asarray(js[k]["anchor"]) + np.asarray(js[k + 1]["anchor"]))
                np.testing.assert_allclose(cs[k], mid, atol=1e-12)
