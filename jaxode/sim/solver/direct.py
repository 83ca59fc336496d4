"""``direct``: ODE's big-matrix stepper (``dWorldStep``), an exact LCP per world.

ODE 0.16 ``step.cpp`` (dxStepIsland) builds, for all m constraint rows of an
island, the dense matrix and right-hand side

    A = J M^-1 J^T + diag(cfm / h),   b = c / h - J (v / h + M^-1 f_ext)

(the same rows, ``c`` and ``cfm`` as QuickStep: joint getInfo2 and contact
rows; f_ext: accumulators, gravity and the implicit gyroscopic torque), and
``lcp.cpp`` (dSolveLCP, Dantzig principal pivoting) solves ``A x = b + w``
with ``lo <= x <= hi`` and complementarity (x at lo: w >= 0, at hi: w <= 0,
between: w = 0). Friction rows (``findex >= 0``) are handled as Dantzig's
driver does: they are permuted to the end, so every other row (joint rows,
contact normals) is solved first with the friction forces at zero; their
bounds are then fixed once to ``+-|mu * lambda_normal|`` (0 when that normal
force is exactly 0) and the pivoting goes on over all rows, the normal
forces free to change again while the bounds stay. The result is therefore
the solution of two box-constrained LCPs:

1. the non-friction rows, friction rows held at zero;
2. all rows, friction bounds ``+-|mu lambda_n^(1)|`` from problem 1.

With A symmetric positive definite (cfm > 0, or a full-rank J) each has one
solution, so any exact method reaches ODE's answer up to rounding whatever its
pivoting order (ODE's own order: unbounded joint rows first, then the rest;
it changes nothing here). jaxode solves each with a primal-dual active-set
method (Hintermueller, Ito & Kunisch 2002; Judice & Pires 1994's
safeguarded block principal pivoting): guess which rows sit at a bound, solve
the linear system of the free rows, move every row that violates its bound or
its sign condition, and after three passes that do not lower the number of
violations move only the first one (Murty's least-index rule, finite for
P-matrices). Static shapes: one dense (R, R) system per world, R = every row
slot (inactive rows are ``x = 0``), a ``lax.while_loop`` capped at
``4 R + 10`` passes, stopped when the complementarity conditions hold to
``100 eps`` of the problem's scale. Derivatives: the active set is piecewise
constant; a custom JVP differentiates the free rows' linear solve with the set
held (one more solve, only under ``jax.jvp`` / ``jax.grad``).

Singular A (redundant rows with cfm = 0: a box face on a plane gives 4
contact normals on 3 degrees of freedom). A = J M^-1 J^T is then only positive
semi-definite: the forces x are not unique, but each problem is the convex
QP ``min x.A x / 2 - b.x`` on the box, whose minimisers all share
``M^-1/2 J^T x``, so the velocity change ``M^-1 J^T x`` is unique. ODE's
Dantzig (``lcp.cpp``) relies on its pivoting to keep the factorised set C
independent (a dependent row being driven meets another row's bound first)
and on its LDL^T having a non-zero pivot; libode 0.16 does not always manage:
on a box landing on a plane with cfm 0 it reports "LCP internal error, s <=
0" from the landing step on and the box rocks (0.036 m/s after 2 s) where
with cfm 1e-10 it rests (tests/test_direct.py). jaxode instead makes the
free rows' solve valid for a semi-definite system: the Cholesky factor is of
``A_FF + diag(REG_EPS n eps A_ii)`` (a shift at the size of the
factorisation's own rounding, so the factor exists for any semi-definite
A_FF), followed by up to :data:`REFINE` steps of iterative refinement
against the exact ``A_FF`` (iterated Tikhonov; stopped once the residual is
below ``TOL_EPS eps`` of the right-hand side, one step for a well-conditioned
system). For a consistent system that converges to
an exact solution of ``A_FF x_F = r_F`` (the error along an eigenvalue l
shrinks by ``reg / (l + reg)`` per step; the null-space part, how a force
splits among redundant rows, stays at rounding level, which is also why
positive-definite but ill-conditioned systems such as cfm 1e-10 keep their
1e-9 agreement with dWorldStep). An inconsistent free set (a redundant row's
right-hand side out of the range of the others, e.g. one corner deeper than
the face) gives forces far outside their bounds, which the active-set step
moves to their bounds like any other violation. Murty's rule guarantees
termination for P-matrices only; on semi-definite ones the method has
converged in every case measured (the FrictionDemo world, a landing box and a
2-box stack with cfm 0, float32 and float64), and where it does it stops on
a point meeting the LCP conditions, whose velocities are the unique ones. That
is the limit cfm -> 0 of ODE's own answer (ODE with cfm 1e-10 differs from
jaxode with cfm 0 by cfm x lambda in each constraint's velocity: measured
1.7e-9 m/s, 1.7e-11 m on the landing box). What the answer does not fix is
the split of a normal force among redundant contacts (jaxode's is near the
least-squares one; ODE's depends on its pivoting); the friction bounds of
problem 2 use those per-contact normal forces, so a friction-limited torque
could differ where ODE's own split is arbitrary.

Never NaN: a pass whose solve is not finite (A not semi-definite, which no
dWorldStep row set is) stops the method, and so does the pass cap; the
method then returns its best bound-feasible iterate (fewest violations,
clipped to its bounds; 0 if none was finite) with ``solved`` False, and the
step counts it in ``State.lcp_unsolved`` (as contacts dropped for capacity
are counted in ``State.overflow_contacts``).

Integration is QuickStep's ``v += h (M^-1 f_ext + M^-1 J^T lambda)``: the
same sum as dWorldStep's ``v += h M^-1 (f_ext + J^T lambda)`` up to rounding.
The cone friction model (Gazebo's, not ODE's) has no place in dWorldStep:
models using it are refused.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

#: Complementarity tolerance in units of the floating point epsilon (x the
#: problem's scale: largest |x|, |b / A_ii|).
TOL_EPS = 100.0
#: Passes that do not lower the number of violations before the single-row rule.
TRIALS = 3
#: Regularisation of the free rows' factorisation: row i's diagonal gets
#: ``REG_EPS * n * eps * A_ii`` (n rows; the size of Cholesky's own rounding).
REG_EPS = 10.0
#: Refinement steps of the regularised solve against the exact free system.
REFINE = 3


class LCPSolution(NamedTuple):
    """What :func:`box_lcp` gives: x (R,) the forces; s (R,) int8 the active set
    (-1 at lo, 0 free, +1 at hi); passes (int32) the linear solves made;
    solved (bool) the conditions hold to tolerance (False: the pass cap or a
    non-finite solve stopped the method, and x is its best bound-feasible
    iterate)."""

    x: jax.Array
    s: jax.Array
    passes: jax.Array
    solved: jax.Array


def _free_system(A, b, lo, hi, s):
    """The active set's linear system: the rows of ``s`` < 0 at ``lo``, > 0 at
    ``hi``, the free rows (``s == 0``) solving their rows of ``A x = b``.
    Returns (free mask, fixed values, the system matrix, the Cholesky factor of
    the regularised matrix, rhs): see :func:`_solve_free`."""
    n = A.shape[0]
    free = s == 0
    xf = jnp.where(free, 0.0, jnp.where(s < 0, lo, jnp.where(s > 0, hi, 0.0)))
    m = jnp.where(free[:, None] & free[None, :], A, jnp.eye(n, dtype=A.dtype))
    reg = jnp.where(free, REG_EPS * n * jnp.finfo(A.dtype).eps * jnp.diagonal(A), 0.0)
    fac = jax.scipy.linalg.cho_factor(m + jnp.diag(reg), lower=True)
    r = jnp.where(free, b - A @ xf, xf)
    return free, xf, m, fac, r


def _solve_free(m, fac, r, adaptive=True):
    """``m x = r`` through the factor of ``m + diag(reg)``: the regularised
    solve and up to :data:`REFINE` steps of iterative refinement against ``m``
    (iterated Tikhonov: each step divides the error along an eigenvector of
    eigenvalue l by ``1 + l / reg``). For ``m`` singular and ``r`` in its
    range it converges to a solution of ``m x = r``; the null-space part of x
    (how the force splits among redundant rows) stays at rounding level.
    ``adaptive``: stop once the residual is below ``TOL_EPS eps`` of the
    system's scale (a ``while_loop``: a well-conditioned system needs one
    step); False: exactly REFINE steps (unrolled, so that reverse mode can
    transpose it: the custom JVP's tangent solve)."""
    solve = lambda res: jax.scipy.linalg.cho_solve(fac, res)  # noqa: E731
    x = solve(r)
    if not adaptive:
        for _ in range(REFINE):
            x = x + solve(r - m @ x)
        return x
    tol = TOL_EPS * jnp.finfo(r.dtype).eps * jnp.max(jnp.abs(r))

    def cond(c):
        return (c[2] < REFINE) & (jnp.max(jnp.abs(c[1])) > tol)

    def body(c):
        x, res, k = c
        x = x + solve(res)
        return x, r - m @ x, k + 1

    return jax.lax.while_loop(cond, body, (x, r - m @ x, jnp.asarray(0, jnp.int32)))[0]


def _solve_set(A, b, lo, hi, s):
    """x of the active set ``s`` (:func:`_free_system`)."""
    _, _, m, fac, r = _free_system(A, b, lo, hi, s)
    return _solve_free(m, fac, r)


def _violations(A, b, lo, hi, s, x, fixed):
    """Per-row violation of the LCP conditions (bool) and the row's target state."""
    dtype = A.dtype
    w = A @ x - b
    d = jnp.diagonal(A)
    scale = jnp.maximum(jnp.max(jnp.abs(x)), jnp.max(jnp.abs(b / d)))
    tol = TOL_EPS * jnp.finfo(dtype).eps * jnp.maximum(scale, jnp.finfo(dtype).tiny)
    viol = jnp.where(s == 0, jnp.maximum(jnp.maximum(lo - x, x - hi), 0.0),
                     jnp.where(s < 0, jnp.maximum(-w, 0.0) / d, jnp.maximum(w, 0.0) / d))
    viol = jnp.where(fixed, 0.0, viol)
    y = x - jnp.where(s == 0, 0.0, w / d)
    target = jnp.where(y < lo, -1, jnp.where(y > hi, 1, 0)).astype(s.dtype)
    return viol > tol, target


def _active_set(A, b, lo, hi, s0):
    """The safeguarded active-set loop (module docstring): an :class:`LCPSolution`."""
    fixed = lo == hi
    s0 = jnp.where(fixed, -1, s0).astype(jnp.int8)
    n = A.shape[0]
    cap = 4 * n + 10

    def step(carry):
        s, _, _, _, _, it, best, trials, keep, nkeep = carry
        x = _solve_set(A, b, lo, hi, s)
        bad, target = _violations(A, b, lo, hi, s, x, fixed)
        finite = jnp.all(jnp.isfinite(x))
        nbad = jnp.where(finite, jnp.sum(bad, dtype=jnp.int32), n + 1)
        better = nbad < best
        block = better | (trials > 0)
        first = jnp.argmax(bad)
        one = jnp.zeros_like(bad).at[first].set(bad[first])
        move = jnp.where(block, bad, one)
        s_new = jnp.where(move, target, s)
        trials = jnp.where(better, TRIALS, jnp.where(block, trials - 1, trials))
        done = nbad == 0
        # the fallback: the finite iterate with the fewest violations, clipped to its bounds
        take = finite & (nbad < nkeep)
        keep = jnp.where(take, jnp.clip(x, lo, hi), keep)
        nkeep = jnp.where(take, nbad, nkeep)
        # (x belongs to s: the set returned with it)
        return s_new, x, s, done, ~finite, it + 1, jnp.minimum(best, nbad), trials, keep, nkeep

    def cond(carry):
        return (~carry[3]) & (~carry[4]) & (carry[5] < cap)

    false = jnp.asarray(False)
    init = (s0, jnp.zeros_like(b), s0, false, false, jnp.asarray(0, jnp.int32),
            jnp.asarray(n + 1, jnp.int32), jnp.asarray(TRIALS, jnp.int32),
            jnp.zeros_like(b), jnp.asarray(n + 2, jnp.int32))
    _, x, s, done, _, passes, _, _, keep, _ = jax.lax.while_loop(cond, step, init)
    x = jnp.where(done, jnp.clip(x, lo, hi), keep)
    return LCPSolution(x, s, passes, done)


@jax.custom_jvp
def _box_lcp(A, b, lo, hi, s0):
    r = _active_set(A, b, lo, hi, s0)
    return r.x, r.s.astype(A.dtype), r.passes.astype(A.dtype), r.solved.astype(A.dtype)


@_box_lcp.defjvp
def _box_lcp_jvp(primals, tangents):
    """The derivative with the active set fixed: bound rows follow their bound,
    free rows ``A_FF dx_F = db_F - dA_F. x - A_FN dx_N`` (the same regularised,
    refined solve as the primal)."""
    A, b, lo, hi, s0 = primals
    dA, db, dlo, dhi, _ = tangents
    out = _box_lcp(A, b, lo, hi, s0)
    x, s = out[0], out[1]
    si = s.astype(jnp.int8)
    free, _, m, fac, _ = _free_system(A, b, lo, hi, si)
    dxn = jnp.where(free, 0.0, jnp.where(si < 0, dlo, jnp.where(si > 0, dhi, 0.0)))
    r = jnp.where(free, db - dA @ x - A @ dxn, dxn)
    dx = _solve_free(m, fac, r, adaptive=False)
    return out, (dx,) + tuple(jnp.zeros_like(o) for o in out[1:])


def box_lcp(A, b, lo, hi, s0) -> LCPSolution:
    """Solve ``A x = b + w``, ``lo <= x <= hi`` with complementarity (module
    docstring) for one world: A (R, R) symmetric positive semi-definite, b, lo,
    hi (R,) (lo <= 0 <= hi; rows with lo == hi are held there). s0 (R,) the
    initial guess (-1 at lo, 0 free, +1 at hi). Returns an :class:`LCPSolution`.
    Differentiable in A, b, lo, hi with the active set held (a custom JVP: one
    more solve)."""
    x, s, passes, solved = _box_lcp(A, b, lo, hi, jnp.asarray(s0, A.dtype))
    return LCPSolution(x, s.astype(jnp.int8), passes.astype(jnp.int32), solved > 0)


def _imj(j, b, inv_mass, inv_inertia):
    """``M^-1 J^T`` of one side of the rows (R, 6)."""
    lin = inv_mass[b][:, None] * j[:, :3]
    ang = jnp.einsum("rij,rj->ri", inv_inertia[b], j[:, 3:])
    return jnp.concatenate([lin, ang], axis=1)


class DirectSolution(NamedTuple):
    """What :func:`solve` gives for one world: lam_head (Rh,), lam_tail (Rt,)
    [N]; fc (B, 6) = M^-1 J^T lambda [m/s^2, rad/s^2]; passes (int32, both
    problems); solved (bool): both LCPs met their conditions to tolerance
    (False: the best bound-feasible iterate was used, see :class:`LCPSolution`)."""

    lam_head: jax.Array
    lam_tail: jax.Array
    fc: jax.Array
    passes: jax.Array
    solved: jax.Array


def solve(head, tail, inv_mass, inv_inertia, rhs_body, h) -> DirectSolution:
    """dWorldStep's LCP on one world's rows (module docstring).

    head, tail: :class:`jaxode.sim.constraint.Rows` (tail ``findex`` indexes
    head rows, -1 = fixed bounds); inv_mass (B,), inv_inertia (B, 3, 3) world
    frame, rhs_body (B, 6) = -(v/h + M^-1 f_ext), B = nbody + 1 (the last the
    static world); h [s]. Returns a :class:`DirectSolution`."""
    dtype = rhs_body.dtype
    nb = inv_mass.shape[0]
    nh = head.body1.shape[0]
    cat = lambda f: jnp.concatenate([getattr(head, f), getattr(tail, f)], axis=0)  # noqa: E731
    b1, b2, j1, j2 = cat("body1"), cat("body2"), cat("j1"), cat("j2")
    c, cfm, lo, hi, act = cat("c"), cat("cfm"), cat("lo"), cat("hi"), cat("active")
    findex = jnp.concatenate([jnp.full((nh,), -1, jnp.int32), tail.findex.astype(jnp.int32)])
    fric = act & (findex >= 0)
    r = b1.shape[0]
    i1, i2 = _imj(j1, b1, inv_mass, inv_inertia), _imj(j2, b2, inv_mass, inv_inertia)
    bodies = jnp.arange(nb)
    o1 = (b1[:, None] == bodies[None, :]).astype(dtype)[:, :, None]
    o2 = (b2[:, None] == bodies[None, :]).astype(dtype)[:, :, None]
    jd = o1 * j1[:, None, :] + o2 * j2[:, None, :]             # (R, B, 6)
    imd = o1 * i1[:, None, :] + o2 * i2[:, None, :]
    both = act[:, None] & act[None, :]
    A = jnp.where(both, jnp.einsum("rbk,sbk->rs", jd, imd), 0.0)
    fps = 1.0 / h   # times 1/h as ODE (and as the Gauss-Seidel core), never divided by h
    A = A + jnp.diag(jnp.where(act, cfm * fps, 1.0))
    b = c * fps + jnp.sum(j1 * rhs_body[b1], axis=1) + jnp.sum(j2 * rhs_body[b2], axis=1)
    b = jnp.where(act, b, 0.0)
    lo = jnp.where(act, lo, 0.0)
    hi = jnp.where(act, hi, 0.0)
    # 1. every row but the friction rows, those held at zero
    p1 = box_lcp(A, b, jnp.where(fric, 0.0, lo), jnp.where(fric, 0.0, hi),
                 jnp.zeros((r,), jnp.int8))
    x1 = p1.x
    if tail.body1.shape[0] == 0:      # no contact slots: no friction rows, one problem
        fc = jnp.einsum("r,rbk->bk", x1, imd)
        return DirectSolution(x1[:nh], x1[nh:], fc, p1.passes, p1.solved)
    # 2. all rows, friction bounds |mu lambda_n| from problem 1 (0 for lambda_n == 0)
    lam_n = x1[jnp.maximum(findex, 0)]
    unbounded = jnp.isinf(hi)
    bound = jnp.where(unbounded, jnp.inf, jnp.abs(jnp.where(unbounded, 0.0, hi) * lam_n))
    bound = jnp.where(lam_n == 0, 0.0, bound)
    lo2 = jnp.where(fric, -bound, lo)
    hi2 = jnp.where(fric, bound, hi)
    p2 = box_lcp(A, b, lo2, hi2, jnp.where(fric, 0, p1.s).astype(jnp.int8))
    x = jnp.where(act, p2.x, 0.0)
    fc = jnp.einsum("r,rbk->bk", x, imd)
    return DirectSolution(x[:nh], x[nh:], fc, p1.passes + p2.passes, p1.solved & p2.solved)
