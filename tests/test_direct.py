"""``solver="direct"``: ODE's big-matrix stepper (dWorldStep), an exact LCP per world.

Truths: the real ``dWorldStep`` of libode 0.16 (double) through
tools/conformance (float64 trajectories to 1e-9 m); exhaustive enumeration of
the active sets of small box LCPs in numpy (the unique point meeting the
complementarity conditions); the closed-form derivative of a box LCP with a
fixed active set (``dx_F = A_FF^-1 db_F``).

Default tier: box LCPs (tiny jits) and one compiled box-on-plane structure
(a resting box, a pyramid-friction slide and a box-friction slide, 20 steps).
Extended: every scene of ``tools.conformance.direct_scenes`` and the resting
stack (direct at rest where QuickStep creeps).
"""
from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.sim.solver import direct


# ------------------------------------------------------------- box LCPs

def _enumerate(A, b, lo, hi):
    """The box LCP's solution by trying every active set (numpy, float64)."""
    n = len(b)
    found = []
    for s in itertools.product((-1, 0, 1), repeat=n):
        s = np.array(s)
        if np.any((s < 0) & np.isinf(lo)) or np.any((s > 0) & np.isinf(hi)):
            continue
        x = np.where(s < 0, lo, np.where(s > 0, hi, 0.0))
        f = s == 0
        if f.any():
            x[f] = np.linalg.solve(A[np.ix_(f, f)], b[f] - A[np.ix_(f, ~f)] @ x[~f])
        w = A @ x - b
        tol = 1e-10 * (1 + np.abs(b).max())
        ok = (np.all(x[f] >= lo[f] - tol) and np.all(x[f] <= hi[f] + tol)
              and np.all(w[s < 0] >= -tol) and np.all(w[s > 0] <= tol))
        if ok:
            found.append(x)
    assert found, "no solution found by enumeration"
    for x in found[1:]:
        np.testing.assert_allclose(x, found[0], atol=1e-9)
    return found[0]


def _problems(k, n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(k):
        J = rng.normal(size=(n, n + 1))
        A = J @ J.T + 0.05 * np.eye(n)
        b = rng.normal(size=n) * 3
        lo = -rng.uniform(0.2, 2.0, n)
        hi = rng.uniform(0.2, 2.0, n)
        lo[0], hi[0] = 0.0, np.inf           # a contact normal
        lo[1], hi[1] = -np.inf, np.inf       # a joint row
        out.append((A, b, lo, hi))
    return out


def test_box_lcp_matches_enumeration_batched():
    """vmapped over 16 random 5-row box LCPs (normal, joint and bounded rows):
    each equals the enumerated solution."""
    probs = _problems(16, 5)
    with jax.enable_x64(True):
        A, b, lo, hi = (jnp.asarray(np.stack(p)) for p in zip(*probs))
        s0 = jnp.zeros(b.shape, jnp.int8)
        x, _, passes = jax.jit(jax.vmap(direct.box_lcp))(A, b, lo, hi, s0)
    for i, p in enumerate(probs):
        np.testing.assert_allclose(np.asarray(x[i]), _enumerate(*p), atol=1e-12)
    assert int(passes.max()) < 4 * 5 + 10       # converged, not capped


def test_box_lcp_derivative_is_the_active_set_solve():
    """d x / d b with the active set fixed: A_FF^-1 on the free rows, 0 on the others."""
    A, b, lo, hi = _problems(1, 5, seed=3)[0]
    x = _enumerate(A, b, lo, hi)
    free = (x > lo + 1e-9) & (x < hi - 1e-9)
    assert free.any() and not free.all()
    db = np.random.default_rng(1).normal(size=5)
    expect = np.zeros(5)
    expect[free] = np.linalg.solve(A[np.ix_(free, free)], db[free])
    with jax.enable_x64(True):
        def f(bb):
            return direct.box_lcp(jnp.asarray(A), bb, jnp.asarray(lo), jnp.asarray(hi),
                                  jnp.zeros(5, jnp.int8))[0]
        _, dx = jax.jvp(f, (jnp.asarray(b),), (jnp.asarray(db),))
        g = jax.grad(lambda bb: f(bb)[2])(jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(dx), expect, atol=1e-12)
    e2 = np.zeros(5)
    e2[2] = 1.0
    grad = np.zeros(5)
    if free[2]:
        grad[free] = np.linalg.solve(A[np.ix_(free, free)].T, e2[free])
    np.testing.assert_allclose(np.asarray(g), grad, atol=1e-12)


def test_builder_accepts_direct_and_refuses_cone():
    assert "direct" in jaxode.WorldBuilder.SOLVERS
    with pytest.raises(ValueError, match="direct"):
        jaxode.WorldBuilder(solver="dantzig")
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81), solver="direct", friction_model="cone")
    b.add_plane()
    k = b.add_body(pos=(0, 0, 0.1), mass=jaxode.mass.sphere(radius=0.1, density=500.0))
    b.add_sphere(0.1, body=k)
    m = b.build()
    with pytest.raises(ValueError, match="cone"):
        jax.eval_shape(lambda s: jaxode.step(m, s, 0.01), jaxode.init(m))


# ------------------------------------------------------- against dWorldStep

def _odelib():
    odelib = pytest.importorskip("tools.conformance.odelib")
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")


@pytest.mark.parametrize("index", [1, 2, 3], ids=["rest_box", "slide_pyramid", "slide_box"])
def test_box_on_plane_matches_dWorldStep(index):
    """A box resting on the plane, sliding with pyramid friction, sliding with box
    friction (4 contacts): float64 positions within 1e-9 m of dWorldStep for 20
    steps (one compiled structure for the three)."""
    _odelib()
    from tools.conformance.direct_scenes import DIRECT_QUICK
    from tools.conformance.harness import run_direct

    r = run_direct(DIRECT_QUICK[index])
    assert r.pos_err <= r.tol, (r.name, r.pos_err)
    assert r.vel_err <= 1e-8, (r.name, r.vel_err)


@pytest.mark.extended
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", [pytest.param(s.name, id=s.name) for s in
                                  __import__("tools.conformance.direct_scenes",
                                             fromlist=["DIRECT_SCENES"]).DIRECT_SCENES])
def test_direct_scenes_match_dWorldStep(name):
    """Every direct conformance scene (hinge chain, joints with stops and motors,
    contacts, the 3-box stack): float64 positions within 1e-9 m of dWorldStep
    over the whole run."""
    _odelib()
    from tools.conformance.direct_scenes import DIRECT_SCENES
    from tools.conformance.harness import run_direct

    r = run_direct({s.name: s for s in DIRECT_SCENES}[name])
    assert r.pos_err <= r.tol, (r.name, r.pos_err)


@pytest.mark.extended
@pytest.mark.timeout(1200)
def test_stack_rests_where_quickstep_creeps():
    """Two boxes stacked on the plane, 300 steps: ``direct`` (like dWorldStep)
    brings the stack to rest, QuickStep's 20 PGS iterations (jaxode ``pgs``
    and ODE's dWorldQuickStep alike) leave it creeping."""
    _odelib()
    from tools.conformance.direct_scenes import box_stack
    from tools.conformance.harness import run_jaxode, run_ode

    scene = box_stack(2, steps=300)
    speed = lambda t: float(np.max(np.abs(t["vel"][-20:])))  # noqa: E731
    v_direct = speed(run_jaxode(scene, True, solver="direct"))
    v_step = speed(run_ode(scene, stepper="step"))
    v_pgs = speed(run_jaxode(scene, True, solver="pgs"))
    v_quick = speed(run_ode(scene, stepper="quick"))
    # measured: direct 1.8e-15, dWorldStep 2.3e-15, pgs 5.0e-2, dWorldQuickStep 4.0e-2 m/s
    assert v_direct < 1e-9 and v_step < 1e-9, (v_direct, v_step)
    assert v_pgs > 1e-3 and v_quick > 1e-3, (v_pgs, v_quick)


@pytest.mark.extended
@pytest.mark.timeout(1200)
def test_gradient_through_direct_steps_matches_finite_differences():
    """d(final x)/d(initial vx) of a box sliding with pyramid friction, 10 steps of
    ``direct`` in float64: reverse mode through the active-set solves equals a
    central finite difference (the active set does not change within +-1e-6 m/s)."""
    from tools.conformance.direct_scenes import DIRECT_QUICK
    from tools.conformance.scenes import build_jaxode

    with jax.enable_x64(True):
        model = build_jaxode(DIRECT_QUICK[2], solver="direct")
        s0 = jaxode.init(model)

        def final_x(vx):
            s = s0.replace(vel=s0.vel.at[0, 0].set(vx))
            return jaxode.rollout(model, s, 10, 0.01)[0].pos[0, 0]

        vx = float(s0.vel[0, 0])
        g = float(jax.jit(jax.grad(final_x))(vx))
        f = jax.jit(final_x)
        fd = (float(f(vx + 1e-6)) - float(f(vx - 1e-6))) / 2e-6
    assert abs(g - fd) <= 1e-6 * max(1.0, abs(fd)), (g, fd)
    assert 0.0 < g < 0.11       # 10 steps of 0.01 s: at most 0.1 s of the initial speed
