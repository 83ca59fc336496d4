"""Conformance: every scene of tools.conformance.scenes in libode 0.16 (double)
and in jaxode (float64 and float32), compared within the scene's stated
tolerances (see docs/CONFORMANCE.md for the table and the reasons).

Skipped when libode cannot be loaded. All rollouts run once per module
(``results``): scenes of one structure share a compiled jaxode function, and
the batch worlds (plus the sphere-on-plane scenes that fit) run in one
vmapped call per precision.

Float64 is compared on every scene in the default suite. Float32 is compared
there on the worlds of the vmapped calls (the batch worlds and the 14
sphere-on-plane scenes that ride along: one compile per batch); float32 on the
other scenes (one compile each, ~2 min on 2 cores) is the ``extended`` tier
(``pytest -m extended``) and is in docs/CONFORMANCE.md.
"""
from __future__ import annotations

import pytest

odelib = pytest.importorskip("tools.conformance.odelib")
try:
    odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"libode not available: {e}", allow_module_level=True)

from tools.conformance import harness  # noqa: E402

# The module fixture runs every scene in libode and in jaxode (f64 and f32) once:
# several minutes on 2 cores, counted against the first test's timeout.
pytestmark = pytest.mark.timeout(2400)
from tools.conformance.scenes import (BATCH_SCENES as ALL_BATCH_SCENES,  # noqa: E402
                                       KNOWN_DISAGREEMENTS, KNOWN_DISAGREEMENTS_F32,
                                       SCENES as ALL_SCENES)

# Two halves, two files, so that pytest-xdist (--dist loadfile) runs their module
# fixtures on different workers: the joint scenes are in test_conformance_joints.py,
# which sets JOINTS = True before importing this module's tests.
JOINTS = globals().get("JOINTS", False)  # True when run by test_conformance_joints.py


def _is_joint(name: str) -> bool:
    return name.startswith(("joint", "batch_joint"))


SCENES = [s for s in ALL_SCENES if _is_joint(s.name) == JOINTS]
BATCH_SCENES = [b for b in ALL_BATCH_SCENES if _is_joint(b.name) == JOINTS]

_NAMES = [s.name for s in SCENES] + [harness.batch_world_name(b, w)
                                     for b in BATCH_SCENES for w in b.worlds]
_VMAPPED = {n for names, _ in harness.plan(SCENES, BATCH_SCENES)[0] for n in names}
_METRIC_NAMES = [s.name for s in SCENES if s.tol.check == "metric"]


def _params(precision: str, names=_NAMES):
    out = []
    for name in names:
        reason = KNOWN_DISAGREEMENTS.get(name)
        if reason is None and precision == "f32":
            reason = KNOWN_DISAGREEMENTS_F32.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(name, id=name, marks=marks))
    return out


@pytest.fixture(scope="module")
def results():
    """float64 on every scene, float32 on the worlds of the vmapped calls."""
    return {r.name: r for r in harness.run_all(SCENES, BATCH_SCENES, f32_singles=False)}


@pytest.fixture(scope="module")
def results_all_f32():
    return {r.name: r for r in harness.run_all(SCENES, BATCH_SCENES)}


def _msg(r, prec):
    err, tol = (r.err64, r.tol64) if prec == "f64" else (r.err32, r.tol32)
    val = r.f64 if prec == "f64" else r.f32
    why = r.scene.tol.f64_why if prec == "f64" else r.scene.tol.f32_why
    return (f"{r.name} ({r.scene.tol.check}): jaxode {prec} {r.metric_label} = {val}, ODE = {r.ode}; "
            f"error {err:.3e} > tolerance {tol:g} ({why}); max position difference over the run "
            f"{r.traj_err64 if prec == 'f64' else r.traj_err32:.3e}")


@pytest.mark.parametrize("name", _params("f64"))
def test_float64_matches_ode(results, name):
    r = results[name]
    assert r.err64 <= r.tol64, _msg(r, "f64")


@pytest.mark.parametrize("name", _params("f32", [n for n in _NAMES if n in _VMAPPED]))
def test_float32_matches_ode(results, name):
    r = results[name]
    assert r.err32 <= r.tol32, _msg(r, "f32")


@pytest.mark.extended
@pytest.mark.parametrize("name", _params("f32", [n for n in _NAMES if n not in _VMAPPED]))
def test_float32_matches_ode_single_scenes(results_all_f32, name):
    r = results_all_f32[name]
    assert r.err32 <= r.tol32, _msg(r, "f32")


if _METRIC_NAMES:  # (no default scene is compared on a metric today: no empty parametrize)
    @pytest.mark.parametrize("name", _METRIC_NAMES)
    def test_metric_bound_covers_ode_seed_spread(results, name):
        """A multi-contact bound is only meaningful if ODE itself, with other RNG seeds
        for its row shuffle, stays inside it."""
        r = results[name]
        assert r.ode_spread is not None and r.ode_spread <= r.tol64, (
            f"{name}: ODE's own spread over seeds {r.ode_spread:.3e} exceeds the bound "
            f"{r.tol64:g}")


def test_scene_list_is_complete_and_documented():
    names = [s.name for s in ALL_SCENES]
    assert len(ALL_SCENES) >= 20 and len(set(names)) == len(names)
    for s in ALL_SCENES:
        assert s.tol.check in ("trajectory", "metric")
        assert s.tol.f64_why and s.tol.f32_why and s.description
        if s.tol.check == "trajectory":
            assert s.tol.f64 <= 1e-9, f"{s.name}: order-independent scenes must agree to 1e-9"
    every = [s.name for s in ALL_SCENES] + [harness.batch_world_name(b, w)
                                            for b in ALL_BATCH_SCENES for w in b.worlds]
    assert set(KNOWN_DISAGREEMENTS) | set(KNOWN_DISAGREEMENTS_F32) <= set(every)


def test_batch_worlds_run_in_one_vmapped_call():
    calls, singles = harness.plan(SCENES, BATCH_SCENES)
    assert len(calls) == len(BATCH_SCENES)
    for (names, worlds), b in zip(calls, BATCH_SCENES):
        assert names[:len(b.worlds)] == [harness.batch_world_name(b, w) for w in b.worlds]
        assert len(b.worlds) >= 3
        # each batch world has its own parameters (world, surfaces or joint parameters)
        params = {repr((w.world, w.geoms, w.joints)) for w in b.worlds}
        assert len(params) == len(b.worlds), f"{b.name}: two worlds have the same parameters"
    # every plain scene of a batch's structure rides along (one compile, float32 checked):
    # a model field that differs per world but is not a parameter would silently stop that
    for s in singles:
        for names, worlds in calls:
            assert (s.structure(), s.steps, s.dt) != (worlds[0].structure(), worlds[0].steps,
                                                      worlds[0].dt), (
                f"{s.name} has the structure of {names[0]} but does not ride along")
