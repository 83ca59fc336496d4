"""The joint graph as a tree, and its block LDL^T in linear time (Baraff 1996).

For the equality rows E of the joints (:mod:`jaxode.sim.solver.articulated`)
the bodies' accelerations ``a`` and the rows' ``mu = -lambda`` solve the
symmetric, quasi-definite system

    [ M    J^T ] [ a  ]   [ f ]
    [ J    -C  ] [ mu ] = [ g ]          (C = diag(cfm / h))

(then ``a = M^-1 (f + J^T lambda)`` and ``J a + C lambda = g``). Its sparsity
graph has a node per body (6 unknowns) and per joint (its rows), an edge where
a joint's rows touch a body; the static world is not a node (its
acceleration is zero). When that graph is a forest, eliminating the nodes
children-first makes no fill-in (D. Baraff, "Linear-time dynamics using
Lagrange multipliers", SIGGRAPH 1996): per node one small dense pivot and one
block to its parent, O(bodies + rows) per factorisation and per solve.

Which joints are nodes (:func:`structure`, static, from the model): joints
in their global order join two bodies' trees unless that closes a loop (two
joints between the same bodies, a closed chain), and a tree holds at most one
joint to the world; a joint left out is not in E (its rows are solved by the
sweeps with the other rows). Each tree is rooted at its world joint, else at
its first body, so that a joint node is always eliminated after a body child
whose 6 unknowns its rows act on: its pivot ``-C - J D_child^-1 J^T`` is
definite for any cfm >= 0 (joint rows of full rank on one body, which every
ODE joint's rows are). A row of a node that is not an equality row this step
(a limit, a bounded motor, an inactive row) enters with J = 0 and pivot -1:
its mu is 0 and it couples nothing.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.sim.math import materialize


class Node(NamedTuple):
    """One node of the elimination order (static).

    kind: "body" or "joint"; index: the body's index or the global joint's;
    parent: the parent's position in the order (-1: a root); rows: a joint's
    head row positions (a body: ()); bodies: a joint's (body1, body2) (the
    world = nbody; a body: ())."""

    kind: str
    index: int
    parent: int
    rows: tuple = ()
    bodies: tuple = ()


class Tree(NamedTuple):
    """The forest (static): nodes children-first; tree_rows: every head row of
    a joint node (sorted); joints: per global joint (its head rows, its
    (body1, body2)), nodes or not; sweep_rows: the joint head rows the sweeps
    may have to solve (sorted): every row of a joint outside the forest, and
    the limit/motor rows of the joints in it (their other rows have no bounds:
    ``JointType.nlimot``)."""

    nodes: tuple
    tree_rows: tuple
    joints: tuple = ()
    sweep_rows: tuple = ()


@functools.lru_cache(maxsize=64)
def _structure(nbody: int, joint_bodies: tuple, joint_rows: tuple,
               limot_rows: tuple = None) -> Tree:
    parent_uf = list(range(nbody))
    world_joint = {}

    def find(i):
        while parent_uf[i] != i:
            parent_uf[i] = parent_uf[parent_uf[i]]
            i = parent_uf[i]
        return i

    keep = []
    for j, (b1, b2) in enumerate(joint_bodies):
        if not joint_rows[j]:
            continue
        ends = [b for b in (b1, b2) if b != nbody]
        if len(ends) == 2 and ends[0] == ends[1]:
            continue
        if len(ends) == 2:
            r1, r2 = find(ends[0]), find(ends[1])
            if r1 == r2 or (r1 in world_joint and r2 in world_joint):
                continue                     # a loop, or two world joints in one tree
            parent_uf[r2] = r1
            if r2 in world_joint:
                world_joint[r1] = world_joint.pop(r2)
            keep.append(j)
        elif len(ends) == 1:
            r = find(ends[0])
            if r in world_joint:
                continue
            world_joint[r] = j
            keep.append(j)
    # adjacency of the bipartite body/joint graph
    adj = {("body", b): [] for b in range(nbody)}
    for j in keep:
        adj[("joint", j)] = []
        for b in joint_bodies[j]:
            if b != nbody:
                adj[("joint", j)].append(("body", b))
                adj[("body", b)].append(("joint", j))
    order, parent_of = [], {}
    seen = set()
    roots = []
    for b in range(nbody):
        r = find(b)
        root = ("joint", world_joint[r]) if r in world_joint else ("body", b)
        if root in seen or ("body", b) in seen:
            continue
        roots.append(root)
        # iterative DFS, postorder
        stack = [(root, None, False)]
        while stack:
            node, par, done = stack.pop()
            if done:
                order.append(node)
                parent_of[node] = par
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, par, True))
            for nb in reversed(adj[node]):
                if nb not in seen:
                    stack.append((nb, node, False))
    pos = {n: i for i, n in enumerate(order)}
    nodes = []
    for n in order:
        par = parent_of[n]
        if n[0] == "joint":
            nodes.append(Node("joint", n[1], -1 if par is None else pos[par],
                              tuple(joint_rows[n[1]]), tuple(joint_bodies[n[1]])))
        else:
            nodes.append(Node("body", n[1], -1 if par is None else pos[par]))
    rows = tuple(sorted(r for j in keep for r in joint_rows[j]))
    kept = set(keep)
    if limot_rows is None:  # every row may be bounded
        limot_rows = joint_rows
    sweep = tuple(sorted(r for j in range(len(joint_rows))
                         for r in (limot_rows[j] if j in kept else joint_rows[j])))
    return Tree(tuple(nodes), rows, tuple(zip(joint_rows, joint_bodies)), sweep)


def structure(model, layout: tuple) -> Tree:
    """The forest of ``model``'s joints (module docstring), cached per model structure;
    ``layout`` the RowSet's joint layout (its head rows per joint:
    :func:`jaxode.sim.rowset.joint_head_rows`)."""
    from jaxode.sim.rowset import joint_head_rows
    if len(model.joint_bodies) != model.njoint:
        raise ValueError(f"solver 'articulated' needs Model.joint_bodies, one (body1, body2) per "
                         f"joint ({model.njoint} joints, got {len(model.joint_bodies)}): build "
                         "the model with this version's WorldBuilder")
    from jaxode.sim.joints import REGISTRY
    head = joint_head_rows(model, layout)
    limots = []
    for j, (jtype, _) in enumerate(model.joint_index):
        t = REGISTRY[jtype]
        # a joint's rows: its geometric rows, its limit/motor rows (the last nlimot of
        # nrows), then the passive row where the model has one (unbounded)
        limots.append(tuple(head[j][t.nrows - t.nlimot:t.nrows]))
    return _structure(int(model.nbody), tuple(model.joint_bodies), head, tuple(limots))


# Every array below is world-minor: a trailing world axis W (W = 1 is one world).

def eye(n: int, like: jax.Array) -> jax.Array:
    """The identity (n, n, W) in the dtype and world axis of ``like`` (..., W)."""
    return jnp.broadcast_to(jnp.eye(n, dtype=like.dtype)[:, :, None], (n, n, like.shape[-1]))


def diag(v: jax.Array) -> jax.Array:
    """(n, n, W) with ``v`` (n, W) on the diagonal."""
    return eye(v.shape[0], v) * v[:, None, :]


def diagonal(d: jax.Array) -> jax.Array:
    """The diagonal (n, W) of ``d`` (n, n, W)."""
    n = d.shape[0]
    return d[np.arange(n), np.arange(n)]


def transpose(a: jax.Array) -> jax.Array:
    """Block transpose of ``a`` (n, k, W)."""
    return jnp.swapaxes(a, 0, 1)


def inverse(d: jax.Array) -> jax.Array:
    """Inverse of small symmetric definite (positive or negative) matrices
    ``d`` (n, n, W): Gauss-Jordan without pivoting, unrolled, elementwise over
    the worlds (no LAPACK call per matrix)."""
    n = d.shape[0]
    a, inv = d, eye(n, d)
    for k in range(n):
        p = a[k, k]
        ra, ri = a[k] / p, inv[k] / p
        col = a[:, k].at[k].set(0.0)
        a = (a - col[:, None] * ra[None]).at[k].set(ra)
        inv = (inv - col[:, None] * ri[None]).at[k].set(ri)
    return inv


def mm(a: jax.Array, b: jax.Array) -> jax.Array:
    """Block product ``a @ b`` per world: a (n, k, W), b (k, ..., W) ->
    (n, ..., W), as k elementwise multiply-adds in index order (XLA fuses
    them into one loop; its reduction of the short non-minor axis k cost 30x,
    0.14 against 4.5 ms for (6, 6) x (6, 54) at 1024 worlds; the same bits in
    any batch)."""
    w = b.shape[-1]
    b2 = b.reshape(b.shape[0], -1, w)
    out = a[:, 0, None, :] * b2[0][None]
    for k in range(1, a.shape[1]):
        out = out + a[:, k, None, :] * b2[k][None]
    return out.reshape((a.shape[0],) + b.shape[1:])


class Factor(NamedTuple):
    """The factorisation: per node its pivot's inverse (n_i, n_i, W) and, for a
    non-root, K_i = D_i^-1 H_(i, parent) (n_i, n_parent, W)."""

    dinv: tuple
    k: tuple


def _edge(tree: Tree, i: int, jblk):
    """H_(i, parent) of node i: a joint's rows' Jacobian block at its parent body
    (m, 6, W), or for a body its parent joint's block at it, transposed (6, m, W)."""
    node = tree.nodes[i]
    par = tree.nodes[node.parent]
    if node.kind == "joint":
        return jblk[i][par.index]
    return transpose(jblk[node.parent][node.index])


def children(tree: Tree) -> list:
    """Per node, the positions of its children."""
    out = [[] for _ in tree.nodes]
    for i, node in enumerate(tree.nodes):
        if node.parent >= 0:
            out[node.parent].append(i)
    return out


def factor(tree: Tree, body_m, body_minv, jblk, cdiag, shift_eps: float) -> Factor:
    """Factorise the system (module docstring).

    body_m: {body: M_b (6, 6, W)} for bodies with children (world frame: mass and
    world inertia); body_minv: {body: M_b^-1 (6, 6, W)} (the pivot's inverse of a
    body without children: exactly ODE's inverse mass and inertia); jblk: {node
    position: {body: (m, 6, W)}} a joint node's rows' Jacobian blocks at its
    bodies (zero on rows not solved here); cdiag: {node position: (m, W)} the
    diagonal -C (-1 on those rows); shift_eps: the pivots' shift away from zero
    in units of eps x n x |diagonal| (direct.REG_EPS: the size of the
    factorisation's own rounding).

    Each pivot and each K block is computed once into memory
    (:func:`jaxode.sim.math.materialize`, the same bits): XLA CPU otherwise
    fused a node's whole elimination into every consumer and recomputed it per
    element (the ant's torso solve, a (6, 55, W) fusion, took 15 ms of a 37 ms
    step at 256 worlds; session 42)."""
    kids = children(tree)
    n = len(tree.nodes)
    dinv, ks, upd = [None] * n, [None] * n, [None] * n
    for i, node in enumerate(tree.nodes):
        if node.kind == "body" and not kids[i]:
            dinv[i] = body_minv[node.index]
        else:
            d = body_m[node.index] if node.kind == "body" else diag(cdiag[i])
            for c in kids[i]:
                d = d - upd[c]
            dg = diagonal(d)
            eps = jnp.finfo(d.dtype).eps
            d = d + diag(jnp.sign(dg) * (shift_eps * d.shape[0] * eps) * jnp.abs(dg))
            dinv[i] = inverse(materialize(d))
        if node.parent >= 0:
            g = _edge(tree, i, jblk)
            dinv[i], ks[i] = materialize((dinv[i], mm(dinv[i], g)))
            upd[i] = mm(transpose(g), ks[i])
    return Factor(tuple(dinv), tuple(ks))


def solve(tree: Tree, fac: Factor, rhs: list) -> list:
    """x with H x = rhs, per node: rhs[i] (n_i, ..., W) (a body's 6 rows, a
    joint's m); returns the same layout."""
    z = list(rhs)
    for i, node in enumerate(tree.nodes):
        if node.parent >= 0:
            z[node.parent] = z[node.parent] - mm(transpose(fac.k[i]), z[i])
    x = [None] * len(z)
    for i in reversed(range(len(z))):
        node = tree.nodes[i]
        xi = mm(fac.dinv[i], z[i])
        if node.parent >= 0:
            xi = xi - mm(fac.k[i], x[node.parent])
        x[i] = xi
    return x
