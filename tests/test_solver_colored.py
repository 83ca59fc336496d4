"""The graph-coloured Gauss-Seidel solver (``solver="colored"``).

Truths:
- its colouring is a proper one (no two rows of a phase share a moving body),
  so each sweep must be exactly projected Gauss-Seidel in the colour-sorted
  order: checked against a plain NumPy PGS (QuickStep's update, written out
  here row by row) run in that order, and the sequential solver against the
  same NumPy PGS in QuickStep's order;
- converged, it solves the mixed LCP: every row is at a fixed point of the
  projected update (inside its bounds with zero residual, or at a bound with
  the residual pushing outwards), and fc = M^-1 J^T lambda;
- in scenes: a 10-box pyramid stands (static equilibrium), a hinge pendulum
  keeps its link length, as with the sequential solver at 20 iterations;
- gradients through a rollout agree with finite differences.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import math

import jaxode
from jaxode.sim import solver
from jaxode.sim import solver as solver_colored
from jaxode.sim.constraint import Rows
from truths import slide_recursion

# Compile quickly (same semantics): compile time dominates the scene tests.
from fast_compile import OPTIONS as _FAST  # noqa: E402
G = 9.81

NB = 6            # moving bodies; index NB is the static world
H, BLOCK = 0.01, 2


def _problem(seed: int, n_joint: int = 6, n_contact: int = 9):
    """A random world: joint rows (bilateral), contact normals (>= 0) and
    friction pairs (pyramid rows bounded by mu lambda_n, or box rows)."""
    rng = np.random.default_rng(seed)
    pairs_j = [tuple(rng.choice(NB, 2, replace=False)) for _ in range(n_joint // 2)]
    pairs_c = [(int(rng.integers(NB)), int(rng.choice([NB, rng.integers(NB)])))
               for _ in range(n_contact)]
    pairs_c = [(a, b if b != a else NB) for a, b in pairs_c]
    b1 = [p[0] for p in pairs_j for _ in (0, 1)] + [p[0] for p in pairs_c]
    b2 = [p[1] for p in pairs_j for _ in (0, 1)] + [p[1] for p in pairs_c]
    nh = len(b1)
    head = Rows(body1=np.array(b1, np.int32), body2=np.array(b2, np.int32),
                j1=rng.normal(size=(nh, 6)), j2=rng.normal(size=(nh, 6)),
                c=rng.normal(size=nh) * 0.1, cfm=np.full(nh, 1e-5),
                lo=np.r_[np.full(n_joint, -np.inf), np.zeros(n_contact)],
                hi=np.full(nh, np.inf), findex=np.full(nh, -1, np.int32),
                active=np.r_[np.ones(nh - 2, bool), rng.random(2) < 0.5])
    nt = BLOCK * n_contact
    pyramid = rng.random(n_contact) < 0.7
    tb1 = np.repeat([p[0] for p in pairs_c], BLOCK).astype(np.int32)
    tb2 = np.repeat([p[1] for p in pairs_c], BLOCK).astype(np.int32)
    mu = rng.uniform(0.2, 1.0, nt)
    tail = Rows(body1=tb1, body2=tb2, j1=rng.normal(size=(nt, 6)), j2=rng.normal(size=(nt, 6)),
                c=np.zeros(nt), cfm=np.full(nt, 1e-5),
                lo=np.where(np.repeat(pyramid, BLOCK), -mu, -2.0),
                hi=np.where(np.repeat(pyramid, BLOCK), mu, 2.0),
                findex=np.where(np.repeat(pyramid, BLOCK),
                                np.repeat(n_joint + np.arange(n_contact), BLOCK), -1).astype(np.int32),
                active=np.repeat(head.active[n_joint:], BLOCK))
    a = rng.normal(size=(NB, 3, 3))
    inv_inertia = np.concatenate([np.einsum("nij,nkj->nik", a, a) + np.eye(3), np.zeros((1, 3, 3))])
    inv_mass = np.r_[rng.uniform(0.5, 2.0, NB), 0.0]
    rhs_body = np.concatenate([rng.normal(size=(NB, 6)), np.zeros((1, 6))])
    return head, tail, inv_mass, inv_inertia, rhs_body


def _np_greedy(b1, b2, active):
    """Greedy colouring, written out: smallest colour unused on either moving body."""
    used = [set() for _ in range(NB + 1)]
    colour = np.full(len(b1), 10**6)
    for i in range(len(b1)):
        if not active[i]:
            continue
        taken = (used[b1[i]] if b1[i] != NB else set()) | (used[b2[i]] if b2[i] != NB else set())
        c = next(k for k in range(len(b1) + 1) if k not in taken)
        colour[i] = c
        for b in (b1[i], b2[i]):
            if b != NB:
                used[b].add(c)
    return colour


def _np_pgs(head, tail, inv_mass, inv_inertia, rhs_body, sor, iterations, head_order,
            tail_order):
    """QuickStep's SOR-LCP sweeps (head rows, then each contact's friction rows) in the given order."""
    rows = [head, tail]
    prep = []
    for r in rows:
        imj1 = np.concatenate([inv_mass[r.body1][:, None] * r.j1[:, :3],
                               np.einsum("rij,rj->ri", inv_inertia[r.body1], r.j1[:, 3:])], 1)
        imj2 = np.concatenate([inv_mass[r.body2][:, None] * r.j2[:, :3],
                               np.einsum("rij,rj->ri", inv_inertia[r.body2], r.j2[:, 3:])], 1)
        rhs = (r.c / H + np.sum(r.j1 * rhs_body[r.body1], 1) + np.sum(r.j2 * rhs_body[r.body2], 1))
        ad = np.where(r.active, sor / (np.sum(r.j1 * imj1, 1) + np.sum(r.j2 * imj2, 1)
                                       + r.cfm / H), 0.0)
        prep.append((imj1, imj2, rhs * ad, r.cfm / H * ad, r.j1 * ad[:, None],
                     r.j2 * ad[:, None]))
    fc = np.zeros((NB + 1, 6))
    lam = [np.zeros(len(head.c)), np.zeros(len(tail.c))]

    def update(k, i, lo, hi):
        r, (imj1, imj2, rhs, cfm, j1, j2) = rows[k], prep[k]
        a, b = r.body1[i], r.body2[i]
        delta = rhs[i] - lam[k][i] * cfm[i] - j1[i] @ fc[a] - j2[i] @ fc[b]
        new = np.clip(lam[k][i] + delta, lo, hi)
        d = new - lam[k][i]
        lam[k][i] = new
        fc[a] += d * imj1[i]
        fc[b] += d * imj2[i]

    for _ in range(iterations):
        for i in head_order:
            update(0, i, head.lo[i], head.hi[i])
        for c in tail_order:
            for i in range(BLOCK * c, BLOCK * c + BLOCK):
                if tail.findex[i] >= 0:
                    bound = abs(tail.hi[i] * lam[0][tail.findex[i]])
                    update(1, i, -bound, bound)
                else:
                    update(1, i, tail.lo[i], tail.hi[i])
    return lam[0], lam[1], fc


def _run(fn, problem, sor, iterations):
    head, tail, inv_mass, inv_inertia, rhs_body = problem
    j = lambda r: Rows(*[jnp.asarray(x) for x in r])
    out = jax.jit(lambda: fn(j(head), j(tail), jnp.asarray(inv_mass), jnp.asarray(inv_inertia),
                             jnp.asarray(rhs_body), jnp.asarray(H), jnp.asarray(sor),
                             iterations))()
    return [np.asarray(x) for x in out]


@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_colouring_is_proper_and_phases_are_contiguous(seed, x64):
    rng = np.random.default_rng(seed)
    n = 200
    b1 = rng.integers(0, NB + 1, n)
    b2 = np.where(rng.random(n) < 0.3, NB, rng.integers(0, NB + 1, n))
    b2 = np.where(b2 == b1, NB, b2)
    active = rng.random(n) < 0.8
    phase = np.asarray(solver_colored.colour(jnp.asarray(b1), jnp.asarray(b2),
                                             jnp.asarray(active), NB, colours=8))
    real = phase[active]
    assert np.all(phase[~active] > real.max())
    assert set(real) == set(range(real.max() + 1))            # no gaps
    for p in np.unique(real):
        rows = np.flatnonzero(active & (phase == p))
        bodies = np.concatenate([b1[rows], b2[rows]])
        moving = bodies[bodies != NB]
        assert len(moving) == len(set(moving)), (p, rows)      # one row per moving body
    # beyond 8 colours every row has a phase of its own
    over = real[real >= 8]
    assert len(over) == len(set(over))


@pytest.mark.parametrize("seed", [0, 1])
def test_colouring_with_each_worlds_own_bodies(seed, x64):
    """Worlds whose units sit on different bodies (contacts in different slots)
    share one colouring: a unit takes the smallest colour free on its bodies in
    every world (written out below), so in each world a phase's units share no
    moving body; identical worlds colour as the shared indices do."""
    rng = np.random.default_rng(seed)
    n, w = 120, 5
    b1 = rng.integers(0, NB + 1, (n, w))
    b2 = np.where(rng.random((n, w)) < 0.3, NB, rng.integers(0, NB + 1, (n, w)))
    b2 = np.where(b2 == b1, NB, b2)
    active = rng.random(n) < 0.8
    phase = np.asarray(solver_colored.colour(jnp.asarray(b1), jnp.asarray(b2),
                                             jnp.asarray(active), NB, colours=n))
    used = [[set() for _ in range(NB + 1)] for _ in range(w)]
    want = np.full(n, -1)
    for i in np.flatnonzero(active):
        taken = set().union(*(used[k][b] for k in range(w) for b in (b1[i, k], b2[i, k])
                              if b != NB))
        want[i] = next(c for c in range(n + 1) if c not in taken)
        for k in range(w):
            for b in (b1[i, k], b2[i, k]):
                if b != NB:
                    used[k][b].add(want[i])
    assert np.array_equal(phase[active], want[active])
    for k in range(w):
        for p in np.unique(phase[active]):
            rows = np.flatnonzero(active & (phase == p))
            moving = np.concatenate([b1[rows, k], b2[rows, k]])
            moving = moving[moving != NB]
            assert len(moving) == len(set(moving)), (k, p)
    same = np.asarray(solver_colored.colour(jnp.asarray(np.repeat(b1[:, :1], w, 1)),
                                            jnp.asarray(np.repeat(b2[:, :1], w, 1)),
                                            jnp.asarray(active), NB, colours=n))
    shared = np.asarray(solver_colored.colour(jnp.asarray(b1[:, 0]), jnp.asarray(b2[:, 0]),
                                              jnp.asarray(active), NB, colours=n))
    assert np.array_equal(same, shared)


@pytest.mark.parametrize("seed", [2, 3])
@pytest.mark.parametrize("iterations", [1, 3])
def test_sweeps_are_gauss_seidel_in_colour_order(seed, iterations, x64):
    problem = _problem(seed)
    head, tail = problem[:2]
    nc = len(tail.c) // BLOCK
    sor = 1.3
    ref_seq = _np_pgs(*problem, sor, iterations, range(len(head.c)), range(nc))
    got_seq = _run(solver.solve_pgs, problem, sor, iterations)
    hcol = _np_greedy(head.body1, head.body2, head.active)
    tcol = _np_greedy(tail.body1[::BLOCK], tail.body2[::BLOCK], tail.active[::BLOCK])
    ref_col = _np_pgs(*problem, sor, iterations, np.argsort(hcol, kind="stable"),
                      np.argsort(tcol, kind="stable"))
    got_col = _run(solver_colored.solve_colored, problem, sor, iterations)
    for ref, got in ((ref_seq, got_seq), (ref_col, got_col)):
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)
    # the orders really differ (else this test would not tell them apart)
    assert max(np.abs(a - b).max() for a, b in zip(ref_seq, ref_col)) > 1e-3


def test_converged_solution_solves_the_mixed_lcp(x64):
    problem = _problem(7)
    head, tail, inv_mass, inv_inertia, rhs_body = problem
    lam_h, lam_t, fc = _run(solver_colored.solve_colored, problem, 1.0, 400)
    # fc = M^-1 J^T lambda
    want = np.zeros_like(fc)
    for r, lam in ((head, lam_h), (tail, lam_t)):
        for i in range(len(lam)):
            for b, j in ((r.body1[i], r.j1[i]), (r.body2[i], r.j2[i])):
                want[b, :3] += inv_mass[b] * j[:3] * lam[i]
                want[b, 3:] += inv_inertia[b] @ j[3:] * lam[i]
    np.testing.assert_allclose(fc, want, atol=1e-9)
    # fixed point of the projected update: residual w = rhs - cfm lam - J fc
    kinds = []
    for r, lam in ((head, lam_h), (tail, lam_t)):
        w = (r.c / H + np.sum(r.j1 * rhs_body[r.body1], 1) + np.sum(r.j2 * rhs_body[r.body2], 1)
             - r.cfm / H * lam - np.sum(r.j1 * fc[r.body1], 1) - np.sum(r.j2 * fc[r.body2], 1))
        lo, hi = r.lo.copy(), r.hi.copy()
        fr = r.findex >= 0
        bound = np.abs(r.hi[fr] * lam_h[r.findex[fr]])
        lo[fr], hi[fr] = -bound, bound
        scale = 1e-6 * (1 + np.abs(w))
        act = r.active
        assert np.all(lam[~act] == 0)
        inside = act & (lam > lo + 1e-9) & (lam < hi - 1e-9)
        assert np.all(np.abs(w[inside]) < 1e-6), w[inside]
        at_lo = act & (lam <= lo + 1e-9) & (hi > lo + 1e-9)     # (lo = hi: w is free)
        at_hi = act & (lam >= hi - 1e-9) & (hi > lo + 1e-9)
        assert np.all(w[at_lo] < scale[at_lo]) and np.all(w[at_hi] > -scale[at_hi])
        kinds += [np.sum(at_lo | at_hi), np.sum(inside)]
        assert np.all((lam >= lo - 1e-9) & (lam <= hi + 1e-9))
    assert kinds[0] + kinds[2] > 0 and kinds[1] + kinds[3] > 0   # both kinds of rows occur
    assert np.any(lam_h > 1e-6) and np.any(np.abs(lam_t) > 1e-6)


def test_unknown_solver_is_refused_by_builder_and_step():
    with pytest.raises(ValueError, match="solver must be one of"):
        jaxode.WorldBuilder(solver="jacobi")
    b = jaxode.WorldBuilder()
    b.add_body()
    model = b.build()
    with pytest.raises(ValueError, match="model.solver must be one of"):
        jaxode.step(model.replace(solver="jacobi"), jaxode.init(model), 0.01)


def test_auto_solver_is_pgs_on_cpu_and_colored_on_gpu():
    """``solver="auto"`` (the default) takes the order measured fastest per backend
    (bench/RESULTS.md: pgs on a CPU, colored on a GPU); ODE's full row shuffle
    (reorder="ode") exists for pgs only. On this CPU an auto model steps exactly as
    pgs does (the same program), and differently from colored once rows share bodies."""
    assert solver.resolve("auto", backend="cpu") == "pgs"
    assert solver.resolve("auto", backend="gpu") == "colored"
    assert solver.resolve("auto", reorder="ode", backend="gpu") == "pgs"
    assert solver.resolve("colored", backend="cpu") == "colored"
    assert jaxode.WorldBuilder().solver == "auto"
    b = jaxode.WorldBuilder(gravity=(0, 0, -G))
    b.add_plane()
    m = jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0)
    for k in range(3):
        i = b.add_body(pos=(0.01 * k, 0.0, 0.1 + 0.21 * k), mass=m)
        b.add_box((0.2,) * 3, body=i)
    model = b.build()
    assert model.solver == "auto" and jax.default_backend() == "cpu"
    s0 = jaxode.init(model)
    auto, pgs, col = (jax.jit(lambda s, m=model.replace(solver=n):
                              jaxode.rollout(m, s, 30, 0.01)[0])(s0)
                      for n in ("auto", "pgs", "colored"))
    assert np.array_equal(np.asarray(auto.pos), np.asarray(pgs.pos))
    assert not np.array_equal(np.asarray(auto.pos), np.asarray(col.pos))


# ------------------------------------------------------------------ scenes (float32)
def test_box_pyramid_stands():
    """Static equilibrium: 4 + 3 + 2 + 1 boxes (upper ones across two below)
    stay where they were placed, at 20 iterations: within 4 mm (float32 settling at 20
    iterations moves them 2-3 mm depending on rounding, as test_capacity's pyramid; a
    toppling box moves by centimetres)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), solver="colored")
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    m = jaxode.mass.box((0.2,) * 3, total=1.0)
    for r in range(4):
        for c in range(4 - r):
            i = b.add_body(pos=((c - (3 - r) / 2) * 0.21, 0.0, 0.1 + 0.2 * r), mass=m)
            b.add_box((0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.5))
    model = b.build()
    s0 = jaxode.init(model)
    final = jax.jit(lambda s: jaxode.rollout(model, s, 150, 0.01)[0], compiler_options=_FAST)(s0)
    assert int(final.overflow_contacts) == 0
    assert np.abs(np.asarray(final.pos - s0.pos)).max() < 4e-3


def test_hinge_chain_holds_its_joints():
    """Five capsule links on hinges, released 0.5 rad from the vertical: every
    hinge's two anchor points (top of a link, bottom of the one above, the first
    at the world point) stay together within 2 mm while the chain swings."""
    nlink, length, tilt = 5, 0.1, 0.5
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), solver="colored")
    m = jaxode.mass.capsule(0.02, length, direction=3, total=0.2)
    down = np.array([-math.sin(tilt), 0.0, -math.cos(tilt)])
    q = (math.cos(tilt / 2), 0.0, math.sin(tilt / 2), 0.0)
    for k in range(nlink):
        top = k * length * down
        i = b.add_body(pos=tuple(top + 0.5 * length * down), quat=q, mass=m)
        b.add_hinge(i, i - 1 if k else None, anchor=tuple(top), axis=(0.0, 1.0, 0.0))
    model = b.build()
    _, traj = jax.jit(lambda s: jaxode.rollout(model, s, 100, 0.01), compiler_options=_FAST)(
        jaxode.init(model))
    rot = np.asarray(jax.vmap(jax.vmap(jaxode.sim.math.quat_to_mat))(traj.quat))
    axis = rot[..., :, 2]                       # link axis, pointing up the link
    pos = np.asarray(traj.pos)
    top = pos + 0.5 * length * axis
    bottom = pos - 0.5 * length * axis
    gap = np.concatenate([np.linalg.norm(top[:, :1], axis=-1),
                          np.linalg.norm(top[:, 1:] - bottom[:, :-1], axis=-1)], axis=1)
    assert gap.max() < 2e-3, gap.max()
    assert np.ptp(pos[:, -1, 0]) > 0.1           # it did swing


def test_cone_friction_and_gradient_through_a_slide(x64):
    """Boxes thrown on a plane with cone friction stop where ODE's step puts a
    Coulomb slide (v <- v - mu g h), along their throw; the derivative of the
    distance with respect to mu matches the recursion's (reverse mode through
    the coloured sweeps)."""
    v0, mu, n, h = 1.0, 0.5, 25, 0.01
    angles = np.radians([0.0, 30.0, 135.0])

    def build(mu_):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), friction_model="cone", solver="colored")
        b.add_plane(surface=jaxode.Surface(mu=mu_), category_bits=1, collide_bits=2)
        for k, a in enumerate(angles):
            i = b.add_body(pos=(3.0 * k, 0.0, 0.1), vel=(v0 * math.cos(a), v0 * math.sin(a), 0.0),
                           mass=jaxode.mass.box((0.2,) * 3, total=1.0))
            b.add_box((0.2,) * 3, body=i, category_bits=2, collide_bits=1,
                      surface=jaxode.Surface(mu=mu_))
        return b.build()

    model = build(mu)
    s0 = jaxode.init(model)

    def distance(x):
        p = model.params.replace(mu=jnp.full_like(model.params.mu, x))
        final = jaxode.rollout(model, s0, n, h, params=p)[0]
        d = final.pos - s0.pos
        return jnp.sum(jnp.hypot(d[:, 0], d[:, 1])), d

    (total, d), grad = jax.jit(jax.value_and_grad(distance, has_aux=True),
                               compiler_options=_FAST)(mu)
    d = np.asarray(d)
    ref = slide_recursion(v0, mu, h, n)
    for k, a in enumerate(angles):
        assert math.hypot(d[k, 0], d[k, 1]) == pytest.approx(ref, rel=1e-3)
        assert abs(math.atan2(d[k, 1], d[k, 0]) - a) < math.radians(1.0)   # as test_friction
    e = 1e-4
    dref = (slide_recursion(v0, mu + e, h, n) - slide_recursion(v0, mu - e, h, n)) / (2 * e)
    assert grad == pytest.approx(len(angles) * dref, rel=1e-3)
