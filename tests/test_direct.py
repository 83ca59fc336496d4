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
        r = jax.jit(jax.vmap(direct.box_lcp))(A, b, lo, hi, s0)
    for i, p in enumerate(probs):
        np.testing.assert_allclose(np.asarray(r.x[i]), _enumerate(*p), atol=1e-12)
    assert int(r.passes.max()) < 4 * 5 + 10 and bool(r.solved.all())  # converged, not capped


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
                                  jnp.zeros(5, jnp.int8)).x
        _, dx = jax.jvp(f, (jnp.asarray(b),), (jnp.asarray(db),))
        g = jax.grad(lambda bb: f(bb)[2])(jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(dx), expect, atol=1e-12)
    e2 = np.zeros(5)
    e2[2] = 1.0
    grad = np.zeros(5)
    if free[2]:
        grad[free] = np.linalg.solve(A[np.ix_(free, free)].T, e2[free])
    np.testing.assert_allclose(np.asarray(g), grad, atol=1e-12)


_box_lcp_jit = jax.jit(direct.box_lcp)   # one compile per dtype for the 4-row tests below


def _box_face_rows(h=0.01, sink=0.0):
    """The 4 normal rows of a unit box (1 kg, inertia 10 kg m^2, centre of mass at
    the bottom face's centre) resting on z = 0, falling at 1 mm/s under 1 m/s^2:
    J (4, 6) of rank 3, M^-1 (6, 6), A = J M^-1 J^T (cfm 0: singular), b = c/h -
    J (v/h + M^-1 f), ``sink`` [m/s] an ERP term on corner 0 only (b then leaves
    the range of A)."""
    corners = [(.5, .5, 0), (-.5, .5, 0), (.5, -.5, 0), (-.5, -.5, 0)]
    n = np.array([0.0, 0.0, 1.0])
    J = np.array([np.concatenate([n, np.cross(c, n)]) for c in corners])
    Minv = np.diag([1.0] * 3 + [0.1] * 3)
    v = np.array([0, 0, -1e-3, 0, 0, 0.0])
    f = np.array([0, 0, -1.0, 0, 0, 0])
    b = np.array([sink, 0, 0, 0]) - J @ (v / h + Minv @ f)
    return J, Minv, J @ Minv @ J.T, b


def _velocity_truth(J, Minv, b):
    """M^-1 J^T x of the LCP (x >= 0, w = A x - b >= 0, x w = 0) with A = J M^-1 J^T
    singular: every active set, the free rows by least squares, kept when the
    free equations hold and the conditions are met (numpy, float64). The forces
    of a singular A are not unique, the velocity change is (the QP's gradient)."""
    A = J @ Minv @ J.T
    found = []
    for s in itertools.product((0, 1), repeat=len(b)):
        f = np.array(s, bool)
        x = np.zeros(len(b))
        if f.any():
            x[f] = np.linalg.lstsq(A[np.ix_(f, f)], b[f], rcond=None)[0]
        w = A @ x - b
        if np.abs(w[f]).max(initial=0) < 1e-9 and (x >= -1e-12).all() and (w >= -1e-9).all():
            found.append(Minv @ J.T @ x)
    assert found
    for dv in found[1:]:
        np.testing.assert_allclose(dv, found[0], atol=1e-9)
    return found[0]


@pytest.mark.parametrize("x64", [False, True], ids=["float32", "float64"])
@pytest.mark.parametrize("sink", [0.0, 0.05], ids=["consistent", "one_corner_sinking"])
def test_box_lcp_redundant_rows_cfm0(x64, sink):
    """4 coplanar contact normals on 3 DOF with cfm 0 (A = J M^-1 J^T singular):
    solved, finite, complementary, and the velocity change equals the brute-force
    truth (for the consistent case a 1.1 N normal force: m (g + v / h))."""
    J, Minv, A, b = _box_face_rows(sink=sink)
    truth = _velocity_truth(J, Minv, b)
    if sink == 0.0:
        np.testing.assert_allclose(truth, [0, 0, 1.1, 0, 0, 0], atol=1e-12)
    with jax.enable_x64(x64):
        dt = jnp.float64 if x64 else jnp.float32
        r = _box_lcp_jit(jnp.asarray(A, dt), jnp.asarray(b, dt), jnp.zeros(4, dt),
                                    jnp.full(4, jnp.inf, dt), jnp.zeros(4, jnp.int8))
    x = np.asarray(r.x, np.float64)
    eps = np.finfo(np.float64 if x64 else np.float32).eps
    assert bool(r.solved) and np.isfinite(x).all() and (x >= 0).all()
    w = A @ x - b
    tol = 1e3 * eps * max(1.0, np.abs(b).max())
    assert (w >= -tol).all() and (np.abs(x * w) <= tol * max(1.0, x.max())).all(), (x, w)
    np.testing.assert_allclose(Minv @ J.T @ x, truth, atol=1e3 * eps)


def test_box_lcp_reports_instead_of_nan():
    """A matrix no dWorldStep row set gives (indefinite: the Cholesky factor
    fails): the method stops, reports ``solved`` False, and returns a finite,
    bound-feasible x (its best iterate; here the start, 0), never NaN."""
    A = np.eye(4)
    A[:2, :2] = [[1.0, 2.0], [2.0, 1.0]]
    with jax.enable_x64(True):
        r = _box_lcp_jit(jnp.asarray(A), jnp.ones(4), jnp.zeros(4), jnp.full(4, jnp.inf),
                         jnp.zeros(4, jnp.int8))
    assert not bool(r.solved)
    assert np.isfinite(np.asarray(r.x)).all() and (np.asarray(r.x) >= 0).all()


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


def _cfm0(scene):
    import dataclasses

    return dataclasses.replace(scene, world=dataclasses.replace(scene.world, cfm=0.0))


def _run_direct_state(scene, x64):
    """(trajectory dict, final State) of ``direct`` on a conformance scene."""
    from tools.conformance.harness import _traj_np
    from tools.conformance.scenes import build_jaxode

    with jax.enable_x64(x64):
        model = build_jaxode(scene, solver="direct")
        final, traj = jaxode.rollout(model, jaxode.init(model), scene.steps, scene.dt)
        return _traj_np(traj), final


def test_rest_box_cfm0_matches_dWorldStep():
    """The 0.2 m box dropped onto the plane with cfm = 0 (4 contacts on 3 DOF: a
    singular LCP at every contact step), 20 steps, float64. libode's dWorldStep
    itself reports "LCP internal error, s <= 0" from the landing step on with
    cfm 0 (its Dantzig pivots on a zero pivot) and then rocks (0.036 m/s after 2
    s); its answer is continuous in cfm, so the truth is dWorldStep at cfm 1e-10
    (ODE double's default): the velocities move by cfm x lambda per step (1e-10
    x < 100 N), so positions within 1e-9 m (the dWorldStep tolerance) and
    velocities within 1e-8 m/s. Measured: 1.7e-11 m, 1.7e-9 m/s. Every step's LCP
    solved (``lcp_unsolved`` 0)."""
    _odelib()
    from tools.conformance.direct_scenes import DIRECT_QUICK
    from tools.conformance.harness import run_ode

    ref = DIRECT_QUICK[1]
    assert ref.world.cfm == 1e-10
    ours, final = _run_direct_state(_cfm0(ref), True)
    ode = run_ode(ref, stepper="step")
    assert np.abs(ours["pos"] - ode["pos"]).max() <= 1e-9
    assert np.abs(ours["vel"] - ode["vel"]).max() <= 1e-8
    assert np.abs(ours["angvel"] - ode["angvel"]).max() <= 1e-8
    assert int(final.lcp_unsolved) == 0 and not bool(final.nonfinite)


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


@pytest.mark.extended
@pytest.mark.timeout(1200)
def test_stack_rests_with_cfm0():
    """Two boxes stacked on the plane with cfm = 0 (8 contact normals on 6 DOF,
    all redundant sets), 300 steps: float64 ``direct`` within 1e-9 m / 1e-8 m/s
    of dWorldStep at cfm 1e-10 (see test_rest_box_cfm0_matches_dWorldStep; measured
    3.7e-11 m, 1.9e-9 m/s) and at exact rest (speed over the last 20 steps <
    1e-9 m/s, measured 1.7e-15); float32 finite, every LCP solved, at rest to
    float32 rounding (measured 9.0e-7 m/s; 20 PGS iterations creep at 5e-2)."""
    _odelib()
    from tools.conformance.direct_scenes import box_stack
    from tools.conformance.harness import run_ode

    ref = box_stack(2, steps=300)
    scene = _cfm0(ref)
    ode = run_ode(ref, stepper="step")
    speed = lambda t: float(np.max(np.abs(t["vel"][-20:])))  # noqa: E731
    t64, f64 = _run_direct_state(scene, True)
    assert np.abs(t64["pos"] - ode["pos"]).max() <= 1e-9
    assert np.abs(t64["vel"] - ode["vel"]).max() <= 1e-8
    assert speed(t64) < 1e-9 and int(f64.lcp_unsolved) == 0
    t32, f32 = _run_direct_state(scene, False)
    assert np.isfinite(t32["pos"]).all() and not bool(f32.nonfinite)
    assert int(f32.lcp_unsolved) == 0 and speed(t32) < 1e-5
