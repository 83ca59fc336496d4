"""``articulated``: QuickStep with the joints' equality rows solved exactly.

QuickStep's projected Gauss-Seidel updates one row at a time against the
row's own diagonal ``A_ii = J_i M^-1 J_i^T + cfm_i / h``. On an articulated
body that converges at a rate set by the mass ratios across the joints: a
40 g leg under a 1 kg m^2 armature row (MuJoCo's ant) or a 10 g finger with
a 10 N m s damper (URDF hands) needs thousands of sweeps, and at the
iteration counts RL users run the joints stretch and the robot sags.
MuJoCo has no joint rows at all: its joints are its coordinates, so its
contacts see the articulated inertia exactly.

This solver gives the same rows that effect (the rows and their meaning are
QuickStep's, ``A lambda = b + w`` with ``A = J M^-1 J^T + diag(cfm / h)``,
``b = c / h + J rhs_body``; :mod:`jaxode.sim.solver.direct` states them):

1. E, the *equality rows*: every active joint row with no bound
   (``lo = -inf``, ``hi = +inf``: the joints' own constraint rows, the
   passive damper/armature rows of :mod:`jaxode.sim.joints.passive`, unbounded
   motors). Their system is factorised once per step on the joint tree
   (:mod:`jaxode.sim.solver.tree`, one per world).
2. Eliminating E exactly leaves the bounded rows C (limits, bounded motors,
   friction loss, contacts) the Schur-complement problem
   ``S lambda_C = b_C - A_CE A_EE^-1 b_E + w``,
   ``S = A_CC - A_CE A_EE^-1 A_EC``: in body space, a unit force on row c
   changes the accelerations by ``P J_c^T`` with the *articulated* inverse
   mass ``P = M^-1 - M^-1 J_E^T A_EE^-1 J_E M^-1`` (B*6 x B*6) instead of
   ``M^-1 J_c^T``, and the row's diagonal is ``S_cc = J_c P J_c^T + cfm_c / h``.
3. C is solved by QuickStep's sweeps (the same row update, bounds, friction
   index, cone projection and SOR factor, in ODE's order: joint rows, then
   per contact its normal row and its friction rows) on S, carrying
   ``fc = M^-1 J_E^T A_EE^-1 b_E + P J_C^T lambda_C``, the accelerations with
   the equality rows exactly satisfied at every update.
4. lambda_E and ``fc = M^-1 J^T lambda`` follow from lambda_C linearly: the
   one tree solve that gave P also gave the equality forces of a unit force on
   each body coordinate.

With no bounded row active the step is exact after any number of sweeps (a
damped, armatured hinge chain follows MuJoCo's implicit Euler to rounding);
with contacts it converges to the same LCP solution as ``direct`` (ODE's
``dWorldStep``), at the rate of Gauss-Seidel on S, whose diagonal carries the
articulated inertia: a foot's contact sees the leg, its armature and the
torso behind it.

The factorisation is Baraff's linear-time one on the joint graph
(:mod:`jaxode.sim.solver.tree`): joints that would close a loop, and all but
one joint to the world per tree, are left to the sweeps (their rows are
bounded rows with infinite bounds: exact once the sweeps converge). Cost per
world and step: the factorisation (a few 6 x 6 blocks per body and joint),
``P`` (one tree solve with 6 nbody + 1 right-hand sides), the responses (R 6B 12)
and the sweeps (R 6B per sweep), with B the bodies and R all rows; memory
(6B)^2 for P.

Layout: the solve runs world-minor (every array with a trailing world axis,
as :mod:`jaxode.sim.solver.core`): one world alone as two copies (it then
rounds as in a batch), a ``jax.vmap`` of worlds through one batching rule
with the batch as that axis, and derivatives through JAX's own rules on the
one-world form.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jaxode.sim.math import sum_terms
from jaxode.sim.solver import batching, direct, tree as tree_lib
from jaxode.sim.solver.core import _dot6_adds as _dot6
from jaxode.sim.solver.core import cone_project, friction_bounds, read, take_bodies, write

# the world axis is at least this wide: a world alone rounds as in a batch
MIN_WORLDS = batching.MIN_WORLDS


class ArticulatedSolution(NamedTuple):
    """What :func:`solve` gives for one world: lam_head (Rh,), lam_tail (Rt,)
    [N, N m] in the rows' order; fc (B, 6) = M^-1 J^T lambda [m/s^2, rad/s^2]."""

    lam_head: jax.Array
    lam_tail: jax.Array
    fc: jax.Array


def equality_rows(active, lo, hi, tree_rows: tuple) -> jax.Array:
    """Joint rows solved exactly (bool like ``active`` (nj, W)): active, no bound,
    and of a joint in the tree (``tree_rows``, static head positions)."""
    in_tree = np.zeros((active.shape[0],), bool)
    in_tree[list(tree_rows)] = True
    return (active & jnp.asarray(in_tree)[:, None] & jnp.isinf(lo) & (lo < 0)
            & jnp.isinf(hi) & (hi > 0))


def _block(m, minv3):
    """6 x 6 blocks diag(m I3, minv3): m (W,), minv3 (3, 3, W) -> (6, 6, W)."""
    w = m.shape[-1]
    out = jnp.zeros((6, 6, w), minv3.dtype)
    return out.at[:3, :3].set(tree_lib.eye(3, minv3) * m).at[3:, 3:].set(minv3)


def _solve_wm(tree, nj: int, block: int, cone: bool, iterations: int, d: dict,
              static: bool = False) -> dict:
    """The solve on world-minor data ``d`` (see :func:`solve` for the fields; every
    array with a trailing world axis W); returns lam_head, lam_tail, fc, world-minor.
    ``static``: the sweeps visit every row and slot (a static trip count, which
    reverse-mode differentiation needs), not only the live ones."""
    head, tail = d["head"], d["tail"]
    inv_mass, inv_inertia, inertia, rhs_body = (d["inv_mass"], d["inv_inertia"], d["inertia"],
                                                d["rhs_body"])
    dtype = rhs_body.dtype
    nb, w = inv_mass.shape
    nbody = nb - 1
    nh, nt = head["c"].shape[0], tail["c"].shape[0]
    nc = nh - nj
    fps = 1.0 / d["h"]
    sor = d["sor"]
    # joint rows: static bodies; contact slots: each world's own (nc, W)
    jr_b1 = np.full((nj,), nbody, np.int32)
    jr_b2 = np.full((nj,), nbody, np.int32)
    for rows_j, (jb1, jb2) in tree.joints:
        jr_b1[list(rows_j)] = jb1
        jr_b2[list(rows_j)] = jb2
    cb1, cb2 = d["cbody1"], d["cbody2"]                                   # (nc, W)

    def jpart(x):
        return x[:nj]

    jj1, jj2 = jpart(head["j1"]), jpart(head["j2"])                       # (nj, 6, W)
    # contact units: (nc, U, ...), U = 1 + block (normal row, then its friction rows)
    def unit(f):
        return jnp.concatenate([head[f][nj:, None], tail[f].reshape((nc, block) + tail[f].shape[1:])],
                               axis=1)

    cj1, cj2 = unit("j1"), unit("j2")                                     # (nc, U, 6, W)
    ccfm, cc, clo, chi, cact = (unit(f) for f in ("cfm", "c", "lo", "hi", "active"))
    jcfm = jpart(head["cfm"]) * fps
    ccfm = ccfm * fps

    rb1, rb2 = take_bodies(rhs_body, cb1), take_bodies(rhs_body, cb2)    # (nc, 6, W)
    jrhs = (jpart(head["c"]) * fps + _dot6(jj1, rhs_body[jr_b1]) + _dot6(jj2, rhs_body[jr_b2]))
    crhs = cc * fps + _dot6(cj1, rb1[:, None]) + _dot6(cj2, rb2[:, None])  # (nc, U, W)

    # 1. the equality rows' system on the joint tree, factorised
    eq = equality_rows(jpart(head["active"]), jpart(head["lo"]), jpart(head["hi"]), tree.tree_rows)
    jblk, cdiag = {}, {}
    for i, node in enumerate(tree.nodes):
        if node.kind != "joint":
            continue
        idx = np.asarray(node.rows)
        e = eq[idx]
        blocks = {}
        for side, bi in enumerate(node.bodies):
            if bi != nbody:
                blocks[bi] = jnp.where(e[:, None], (jj1 if side == 0 else jj2)[idx], 0.0)
        jblk[i] = blocks
        cdiag[i] = jnp.where(e, -jcfm[idx], -1.0)
    kids = tree_lib.children(tree)
    has_child = {n.index for i, n in enumerate(tree.nodes) if n.kind == "body" and kids[i]}
    body_m = {bi: _block(1.0 / inv_mass[bi], inertia[bi]) for bi in has_child}
    body_minv = {n.index: _block(inv_mass[n.index], inv_inertia[n.index])
                 for n in tree.nodes if n.kind == "body"}
    fac = tree_lib.factor(tree, body_m, body_minv, jblk, cdiag, direct.REG_EPS)

    def tree_solve(f_body, g):
        """(a (nbody, 6, ..., W), mu (nj, ..., W)) of H [a; mu] = [f; g] (tree.py)."""
        x = tree_lib.solve(tree, fac, [f_body[n.index] if n.kind == "body"
                                       else g[np.asarray(n.rows)] for n in tree.nodes])
        by_body = {n.index: x[i] for i, n in enumerate(tree.nodes) if n.kind == "body"}
        a = jnp.stack([by_body[bi] for bi in range(nbody)])
        mu = jnp.zeros_like(g)
        for i, n in enumerate(tree.nodes):
            if n.kind == "joint":
                mu = mu.at[np.asarray(n.rows)].set(x[i])
        return a, mu

    def pad(a):
        return jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)], axis=0)

    # One solve, K + 1 right-hand sides (K = 6 nbody): a unit force on each body
    # coordinate with g = 0 (its accelerations: P, the articulated M^-1; its mu:
    # minus the equality forces it induces), and f = 0 with g = b_E (the
    # accelerations fc0 and equality forces with no bounded row acting). The
    # solution for any f is then their linear combination (step 4).
    b_e = jnp.where(eq, jrhs, 0.0)
    k = 6 * nbody
    ident = jnp.broadcast_to(jnp.eye(k, k + 1, dtype=dtype).reshape(nbody, 6, k + 1, 1),
                             (nbody, 6, k + 1, w))
    g = jnp.concatenate([jnp.zeros((nj, k, w), dtype), b_e[:, None]], axis=1)
    a_all, mu_all = tree_solve(ident, g)                                 # (nbody, 6, K+1, W)
    pa, a0 = a_all[:, :, :k], a_all[:, :, k]
    fc = pad(a0)                                                          # (B, 6, W)
    p_rows = pad(jnp.concatenate([pa, jnp.zeros((nbody, 6, 6, w), dtype)], axis=2))
    p_rows = p_rows.reshape(nb, 6, nb, 6, w)                               # P[b, :, b', :]

    # 2. each row's articulated response P J_r^T (B, 6) and reduced diagonal
    def resp_of(j1, j2, p1, p2):          # j (..., 6, W), p (..., 6, B, 6, W)
        return (sum_terms(j1[..., :, None, None, :] * p1, -4)
                + sum_terms(j2[..., :, None, None, :] * p2, -4))

    # the joint rows the sweeps may solve (static): limit/motor rows and the rows of
    # joints outside the forest; every other joint row is unbounded, an equality row
    sw = np.asarray(tree.sweep_rows, np.int64)
    ns = sw.shape[0]
    sj1, sj2, sb1, sb2 = jj1[sw], jj2[sw], jr_b1[sw], jr_b2[sw]
    srhs, scfm = jrhs[sw], jcfm[sw]
    jresp = resp_of(sj1, sj2, p_rows[sb1], p_rows[sb2])                    # (ns, B, 6, W)
    jdiag = (_dot6(sj1, jresp[np.arange(ns), sb1]) + _dot6(sj2, jresp[np.arange(ns), sb2])
             + scfm)

    # rows and contact slots that no world of the batch has live are no-ops: the
    # responses are built and the sweeps visit the live ones only, in their order
    def live_order(live):
        return (jnp.argsort(~live, stable=True).astype(jnp.int32),
                jnp.sum(live, dtype=jnp.int32))

    corder, ccount = live_order(jnp.any(cact, axis=(1, 2)))
    if static:
        ccount = nc

    def slot_response(i, acc):
        """Slot corder[i]'s units' responses (U, B, 6, W) and diagonals J P J^T (U, W)."""
        cresp, cdg = acc
        kk = corder[i]
        b1k, b2k = cb1[kk][None], cb2[kk][None]                            # (1, W)
        r = resp_of(cj1[kk], cj2[kk], take_bodies(p_rows, b1k), take_bodies(p_rows, b2k))
        at1 = take_bodies(jnp.swapaxes(r, 0, 1), b1k)[0]                    # (U, 6, W)
        at2 = take_bodies(jnp.swapaxes(r, 0, 1), b2k)[0]
        return (cresp.at[kk].set(r),
                cdg.at[kk].set(_dot6(cj1[kk], at1) + _dot6(cj2[kk], at2)))

    # a contact capacity is sized for the worst step (a fallen humanoid: 144 slots),
    # while a few slots are live: their responses only (the dense (B, 6) response of a
    # slot costs as much as one sweep over it)
    cresp, cdg = (jnp.zeros((nc, 1 + block, nb, 6, w), dtype),
                  jnp.zeros((nc, 1 + block, w), dtype))
    if nc:
        cresp, cdg = jax.lax.fori_loop(0, ccount, slot_response, (cresp, cdg))
    cdiag_ = cdg + ccfm
    jbounded = (jpart(head["active"]) & ~eq)[sw]                           # (ns, W)
    jad = jnp.where(jbounded, sor / jnp.where(jbounded, jdiag, 1.0), 0.0)
    cad = jnp.where(cact, sor / jnp.where(cact, cdiag_, 1.0), 0.0)
    jlo, jhi = jpart(head["lo"])[sw], jpart(head["hi"])[sw]
    pyramid = d["pyramid"]                                                 # (nc, block, W|1)
    cone_rows = d["cone_rows"]                                             # (nc, block, W|1)

    # 3. QuickStep's sweeps on the reduced system (joint rows, then per contact
    # its normal row and friction rows)
    jrb1, jrb2 = jnp.asarray(sb1), jnp.asarray(sb2)

    jorder, jcount = live_order(jnp.any(jbounded, axis=-1))
    if static:
        jcount = ns

    def joint_row(i, carry):
        fc, lj, lcn = carry
        r = jorder[i]
        rate = _dot6(sj1[r], fc[jrb1[r]]) + _dot6(sj2[r], fc[jrb2[r]])
        new = jnp.clip(lj[r] + jad[r] * (srhs[r] - scfm[r] * lj[r] - rate), jlo[r], jhi[r])
        new = jnp.where(jbounded[r], new, lj[r])
        fc = fc + (new - lj[r]) * jresp[r]
        return fc, lj.at[r].set(new), lcn

    def contact(i, carry):
        fc, lj, lc = carry
        kk = corder[i]
        b1k, b2k = cb1[kk], cb2[kk]
        lam = lc[kk]                                                       # (U, W)
        news = []
        for u in range(1 + block):
            if u == 0:
                lo_u, hi_u = clo[kk, 0], chi[kk, 0]
            else:
                t = u - 1
                # a friction row's index is its own slot's normal row (rowset.build)
                lo_u, hi_u = friction_bounds(t, clo[kk, u], chi[kk, u], news[0],
                                             pyramid[kk, t], cone_rows[kk, t], cone)
            rate = _dot6(cj1[kk, u], read(fc, b1k, True)) + _dot6(cj2[kk, u], read(fc, b2k, True))
            old = lam[u]
            new = jnp.clip(old + cad[kk, u] * (crhs[kk, u] - ccfm[kk, u] * old - rate), lo_u, hi_u)
            new = jnp.where(cact[kk, u], new, old)
            fc = fc + (new - old) * cresp[kk, u]
            news.append(new)
        if cone and block >= 2:
            l0, l1 = news[1], news[2]
            n0, n1 = cone_project(l0, l1, chi[kk, 1], chi[kk, 2], news[0], cone_rows[kk, 0])
            fc = fc + (n0 - l0) * cresp[kk, 1] + (n1 - l1) * cresp[kk, 2]
            news[1], news[2] = n0, n1
        return fc, lj, lc.at[kk].set(jnp.stack(news))

    def sweep(_, carry):
        if ns:
            carry = jax.lax.fori_loop(0, jcount, joint_row, carry)
        if nc:
            carry = jax.lax.fori_loop(0, ccount, contact, carry)
        return carry

    lj = jnp.zeros((ns, w), dtype)
    lc = jnp.zeros((nc, 1 + block, w), dtype)
    fc, lj, lc = jax.lax.fori_loop(0, int(iterations), sweep, (fc, lj, lc))

    # 4. the accelerations and lambda_E of f = J_C^T lambda_C, g = b_E
    lj = jnp.where(jbounded, lj, 0.0)
    lc = jnp.where(cact, lc, 0.0)
    f = (jnp.zeros((nb, 6, w), dtype).at[sb1].add(sj1 * lj[:, None])
         .at[sb2].add(sj2 * lj[:, None]))
    fcon1 = sum_terms(cj1 * lc[:, :, None], 1)                            # (nc, 6, W)
    fcon2 = sum_terms(cj2 * lc[:, :, None], 1)
    f = write(f, cb1, cb2, None, fcon1, fcon2, per_world=True)
    f = f[:nbody].reshape(k, w)
    a, mu = a0, mu_all[:, k]
    for i in range(k):                        # + P f, and the equality forces of f, in order
        a = a + pa[:, :, i] * f[i]
        mu = mu + mu_all[:, i] * f[i]
    lj = jnp.zeros((nj, w), dtype).at[sw].set(lj)
    lj = jnp.where(jpart(head["active"]), lj + jnp.where(eq, -mu, 0.0), 0.0)
    lam_head = jnp.concatenate([lj, lc[:, 0]], axis=0)
    lam_tail = lc[:, 1:].reshape(nt, w)
    return dict(lam_head=lam_head, lam_tail=lam_tail, fc=pad(a))


_world_minor = batching._to_world_minor


@functools.lru_cache(maxsize=None)
def _solver(tree, nj: int, block: int, cone: bool, iterations: int, tile: int):
    """One world's solve ``f(data) -> dict`` with its batching rule and JVP."""
    def world(data, static: bool):
        wm = jax.tree.map(lambda x: _world_minor(x, False, MIN_WORLDS), data)
        out = _solve_wm(tree, nj, block, cone, iterations, wm, static)
        return {k: v[..., 0] for k, v in out.items()}

    run = custom_vmap(lambda data: world(data, False))

    @run.def_vmap
    def rule(axis_size, in_batched, data):
        leaves, treedef = jax.tree.flatten(data)
        flags = jax.tree.leaves(in_batched[0])

        def on(worlds, tile_leaves):
            """The solve of ``worlds`` worlds whose batched leaves are ``tile_leaves``."""
            it = iter(tile_leaves)
            wm = [jnp.moveaxis(next(it), 0, -1) if b else _world_minor(x, False, worlds)
                  for x, b in zip(leaves, flags)]
            if worlds < MIN_WORLDS:
                wm = [jnp.concatenate([x] * MIN_WORLDS, axis=-1) for x in wm]
            out = _solve_wm(tree, nj, block, cone, iterations, jax.tree.unflatten(treedef, wm))
            return {k: jnp.moveaxis(v[..., :worlds], -1, 0) for k, v in out.items()}

        batched = [x for x, b in zip(leaves, flags) if b]
        t = batching.tile_worlds(tile, axis_size)
        if t and batched:
            # tiles of t worlds, one after another: a tile's rows, responses and
            # bodies stay in cache through the sweeps
            out = batching.map_tiles(lambda xs: on(t, xs), batched, t)
        else:
            out = on(axis_size, batched)
        return out, {k: True for k in out}

    @jax.custom_jvp
    def solve(data):
        return run(data)

    @solve.defjvp
    def solve_jvp(primals, tangents):
        return jax.jvp(lambda d: world(d, True), primals, tangents)

    return solve


def solve(tree, head, tail, njoint_rows: int, inv_mass, inv_inertia, inertia, rhs_body, h,
          sor, iterations: int, block: int = 2, cone: bool = False,
          cone_rows=None, tile: int = -1) -> ArticulatedSolution:
    """The articulated solve of one world's rows (module docstring).

    tree: the joints' :class:`jaxode.sim.solver.tree.Tree` (static); head,
    tail: :class:`jaxode.sim.constraint.Rows` (the rowset's: joint rows, then
    one normal row per contact slot; ``block`` friction rows per slot, whose
    ``findex`` is -1 or its slot's normal row); njoint_rows (static) joint rows
    at the head's start; inv_mass (B,), inv_inertia (B, 3, 3) world frame,
    inertia (B - 1, 3, 3) world frame [kg m^2], rhs_body (B, 6) = -(v/h + M^-1
    f_ext), B = nbody + 1 (last: the static world); h [s]; sor the SOR factor;
    iterations (static) sweeps over the bounded rows; ``cone`` (static) with
    ``cone_rows`` (Rt,) bool: Gazebo's cone friction on those contacts' first
    two friction rows; ``tile`` (``Model.batch_tile``) worlds per tile of a
    batch (:func:`jaxode.sim.solver.batching.tile_worlds`). Call it on one world
    (``jax.vmap`` for a batch)."""
    nh, nt = head.body1.shape[0], tail.body1.shape[0]
    nj = int(njoint_rows)
    nc = nh - nj
    if nt != nc * block:
        raise ValueError(f"tail rows ({nt}) must be block ({block}) per contact slot ({nc})")
    dtype = rhs_body.dtype
    if cone_rows is None or not cone:
        cone_rows = jnp.zeros((nt,), bool)
    fields = batching.ROW_FIELDS
    data = dict(
        head={f: getattr(head, f) for f in fields}, tail={f: getattr(tail, f) for f in fields},
        inv_mass=inv_mass, inv_inertia=inv_inertia, inertia=inertia, rhs_body=rhs_body,
        h=jnp.asarray(h, dtype), sor=jnp.asarray(sor, dtype),
        cbody1=head.body1[nj:], cbody2=head.body2[nj:],
        pyramid=(tail.findex >= 0).reshape(nc, block), cone_rows=cone_rows.reshape(nc, block))
    out = _solver(tree, nj, int(block), bool(cone), int(iterations), int(tile))(data)
    return ArticulatedSolution(out["lam_head"], out["lam_tail"], out["fc"])
