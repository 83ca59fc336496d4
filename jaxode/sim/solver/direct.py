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
``4 R + 10`` passes (each one Cholesky solve of the free rows' system),
stopped when the complementarity conditions hold to ``100 eps`` of the
problem's scale. Derivatives: the active set is piecewise constant; a custom
JVP differentiates the free rows' linear solve with the set held (one more
solve, only under ``jax.jvp`` / ``jax.grad``).

Integration is QuickStep's ``v += h (M^-1 f_ext + M^-1 J^T lambda)``: the
same sum as dWorldStep's ``v += h M^-1 (f_ext + J^T lambda)`` up to rounding.
The cone friction model (Gazebo's, not ODE's) has no place in dWorldStep:
models using it are refused.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

#: Complementarity tolerance in units of the floating point epsilon (x the
#: problem's scale: largest |x|, |b / A_ii|).
TOL_EPS = 100.0
#: Passes that do not lower the number of violations before the single-row rule.
TRIALS = 3


def _free_system(A, b, lo, hi, s):
    """The active set's linear system: the rows of ``s`` < 0 at ``lo``, > 0 at
    ``hi``, the free rows (``s == 0``) solving their rows of ``A x = b``.
    Returns (free mask, fixed values, the system matrix's Cholesky factor, rhs)."""
    free = s == 0
    xf = jnp.where(free, 0.0, jnp.where(s < 0, lo, jnp.where(s > 0, hi, 0.0)))
    m = jnp.where(free[:, None] & free[None, :], A, jnp.eye(A.shape[0], dtype=A.dtype))
    r = jnp.where(free, b - A @ xf, xf)
    return free, xf, jax.scipy.linalg.cho_factor(m, lower=True), r


def _solve_set(A, b, lo, hi, s):
    """x of the active set ``s`` (:func:`_free_system`)."""
    _, _, fac, r = _free_system(A, b, lo, hi, s)
    return jax.scipy.linalg.cho_solve(fac, r)


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
    """The safeguarded active-set loop (module docstring): (x, s, passes)."""
    fixed = lo == hi
    s0 = jnp.where(fixed, -1, s0).astype(jnp.int8)
    n = A.shape[0]
    cap = 4 * n + 10

    def step(carry):
        s, _, _, _, it, best, trials = carry
        x = _solve_set(A, b, lo, hi, s)
        bad, target = _violations(A, b, lo, hi, s, x, fixed)
        nbad = jnp.sum(bad, dtype=jnp.int32)
        better = nbad < best
        block = better | (trials > 0)
        first = jnp.argmax(bad)
        one = jnp.zeros_like(bad).at[first].set(bad[first])
        move = jnp.where(block, bad, one)
        s_new = jnp.where(move, target, s)
        trials = jnp.where(better, TRIALS, jnp.where(block, trials - 1, trials))
        done = nbad == 0
        # (x belongs to s: the set returned with it)
        return s_new, x, s, done, it + 1, jnp.minimum(best, nbad), trials

    def cond(carry):
        return (~carry[3]) & (carry[4] < cap)

    init = (s0, jnp.zeros_like(b), s0, jnp.asarray(False), jnp.asarray(0, jnp.int32),
            jnp.asarray(n + 1, jnp.int32), jnp.asarray(TRIALS, jnp.int32))
    _, x, s, _, passes, _, _ = jax.lax.while_loop(cond, step, init)
    return jnp.clip(x, lo, hi), s, passes


@jax.custom_jvp
def _box_lcp(A, b, lo, hi, s0):
    x, s, passes = _active_set(A, b, lo, hi, s0)
    return x, s.astype(A.dtype), passes.astype(A.dtype)


@_box_lcp.defjvp
def _box_lcp_jvp(primals, tangents):
    """The derivative with the active set fixed: bound rows follow their bound,
    free rows ``A_FF dx_F = db_F - dA_F. x - A_FN dx_N``."""
    A, b, lo, hi, s0 = primals
    dA, db, dlo, dhi, _ = tangents
    x, s, passes = _box_lcp(A, b, lo, hi, s0)
    si = s.astype(jnp.int8)
    free, _, fac, _ = _free_system(A, b, lo, hi, si)
    dxn = jnp.where(free, 0.0, jnp.where(si < 0, dlo, jnp.where(si > 0, dhi, 0.0)))
    r = jnp.where(free, db - dA @ x - A @ dxn, dxn)
    dx = jax.scipy.linalg.cho_solve(fac, r)
    return (x, s, passes), (dx, jnp.zeros_like(s), jnp.zeros_like(passes))


def box_lcp(A, b, lo, hi, s0):
    """Solve ``A x = b + w``, ``lo <= x <= hi`` with complementarity (module
    docstring) for one world: A (R, R) symmetric positive definite, b, lo, hi
    (R,) (lo <= 0 <= hi; rows with lo == hi are held there). s0 (R,) the
    initial guess (-1 at lo, 0 free, +1 at hi). Returns (x (R,), s (R,) int8
    the final active set, passes (int32): linear solves made). Differentiable
    in A, b, lo, hi with the active set held (a custom JVP: one more solve)."""
    x, s, passes = _box_lcp(A, b, lo, hi, jnp.asarray(s0, A.dtype))
    return x, s.astype(jnp.int8), passes.astype(jnp.int32)


def _imj(j, b, inv_mass, inv_inertia):
    """``M^-1 J^T`` of one side of the rows (R, 6)."""
    lin = inv_mass[b][:, None] * j[:, :3]
    ang = jnp.einsum("rij,rj->ri", inv_inertia[b], j[:, 3:])
    return jnp.concatenate([lin, ang], axis=1)


def solve(head, tail, inv_mass, inv_inertia, rhs_body, h):
    """dWorldStep's LCP on one world's rows (module docstring).

    head, tail: :class:`jaxode.sim.constraint.Rows` (tail ``findex`` indexes
    head rows, -1 = fixed bounds); inv_mass (B,), inv_inertia (B, 3, 3) world
    frame, rhs_body (B, 6) = -(v/h + M^-1 f_ext), B = nbody + 1 (the last the
    static world); h [s]. Returns (lam_head (Rh,), lam_tail (Rt,) [N],
    fc (B, 6) = M^-1 J^T lambda [m/s^2, rad/s^2], passes (int32, both problems))."""
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
    A = A + jnp.diag(jnp.where(act, cfm / h, 1.0))
    b = c / h + jnp.sum(j1 * rhs_body[b1], axis=1) + jnp.sum(j2 * rhs_body[b2], axis=1)
    b = jnp.where(act, b, 0.0)
    lo = jnp.where(act, lo, 0.0)
    hi = jnp.where(act, hi, 0.0)
    # 1. every row but the friction rows, those held at zero
    x1, s1, n1 = box_lcp(A, b, jnp.where(fric, 0.0, lo), jnp.where(fric, 0.0, hi),
                         jnp.zeros((r,), jnp.int8))
    if tail.body1.shape[0] == 0:      # no contact slots: no friction rows, one problem
        fc = jnp.einsum("r,rbk->bk", x1, imd)
        return x1[:nh], x1[nh:], fc, n1
    # 2. all rows, friction bounds |mu lambda_n| from problem 1 (0 for lambda_n == 0)
    lam_n = x1[jnp.maximum(findex, 0)]
    unbounded = jnp.isinf(hi)
    bound = jnp.where(unbounded, jnp.inf, jnp.abs(jnp.where(unbounded, 0.0, hi) * lam_n))
    bound = jnp.where(lam_n == 0, 0.0, bound)
    lo2 = jnp.where(fric, -bound, lo)
    hi2 = jnp.where(fric, bound, hi)
    x, _, n2 = box_lcp(A, b, lo2, hi2, jnp.where(fric, 0, s1).astype(jnp.int8))
    x = jnp.where(act, x, 0.0)
    fc = jnp.einsum("r,rbk->bk", x, imd)
    return x[:nh], x[nh:], fc, n1 + n2
