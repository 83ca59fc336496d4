"""Small rigid-body math helpers: quaternions (w, x, y, z) as ODE, rotations.

All functions act on single vectors/quaternions; batch them with ``jax.vmap``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def quat_mul(p: jax.Array, q: jax.Array) -> jax.Array:
    """Hamilton product ``p * q`` (ODE's dQMultiply0)."""
    pw, px, py, pz = p[0], p[1], p[2], p[3]
    qw, qx, qy, qz = q[0], q[1], q[2], q[3]
    return jnp.stack([
        pw * qw - px * qx - py * qy - pz * qz,
        pw * qx + px * qw + py * qz - pz * qy,
        pw * qy + py * qw + pz * qx - px * qz,
        pw * qz + pz * qw + px * qy - py * qx,
    ])


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrix of a unit quaternion (ODE's dQtoR); columns are body axes."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return jnp.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quat_normalize(q: jax.Array) -> jax.Array:
    """Unit quaternion; a zero quaternion maps to the identity (ODE's dNormalize4 asserts)."""
    n2 = sq_norm(q)
    safe = jnp.where(n2 > 0, n2, 1.0)
    ident = jnp.zeros_like(q).at[0].set(1.0)
    return jnp.where(n2 > 0, q / jnp.sqrt(safe), ident)


def rotate(q: jax.Array, v: jax.Array) -> jax.Array:
    """Rotate vector ``v`` (body frame) into the world frame by ``q``."""
    return mm(quat_to_mat(q), v)


def plane_space(n: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Two unit vectors ``p, q`` spanning the plane normal to unit ``n`` (ODE's dPlaneSpace)."""
    nx, ny, nz = n[0], n[1], n[2]
    use_yz = jnp.abs(nz) > jnp.sqrt(0.5)
    a1 = ny * ny + nz * nz
    k1 = 1.0 / jnp.sqrt(jnp.where(use_yz & (a1 > 0), a1, 1.0))
    p1 = jnp.stack([jnp.zeros_like(nx), -nz * k1, ny * k1])
    q1 = jnp.stack([a1 * k1, -nx * p1[2], nx * p1[1]])
    a2 = nx * nx + ny * ny
    k2 = 1.0 / jnp.sqrt(jnp.where(use_yz | (a2 <= 0), 1.0, a2))
    p2 = jnp.stack([-ny * k2, nx * k2, jnp.zeros_like(nx)])
    q2 = jnp.stack([-nz * p2[1], nz * p2[0], a2 * k2])
    return jnp.where(use_yz, p1, p2), jnp.where(use_yz, q1, q2)


def sinc(x: jax.Array) -> jax.Array:
    """sin(x)/x with the series near zero, as ODE's sinc (gradient safe)."""
    small = jnp.abs(x) < 1e-4
    xs = jnp.where(small, 1.0, x)
    return jnp.where(small, 1.0 - x * x / 6.0, jnp.sin(xs) / xs)


@jax.custom_jvp
def barrier(xs):
    """``jax.lax.optimization_barrier(xs)`` (a pytree): XLA may neither fold
    through it nor move work across it. It does not stop fusion: XLA CPU
    expands barriers before it fuses, so a producer behind one is still
    recomputed inside each consumer (:func:`materialize` stops that; session
    29). Differentiable on every JAX: the
    tangents pass through unbarriered (JAX 0.11 and 0.12 bind the primals and
    tangents in one barrier, and reverse mode then fails to transpose it:
    "DynamicJaxprTracer has no attribute accum")."""
    return jax.lax.optimization_barrier(xs)


@barrier.defjvp
def _barrier_jvp(primals, tangents):
    (xs,), (ts,) = primals, tangents
    return barrier(xs), ts


@jax.custom_jvp
def materialize(xs):
    """``xs`` (a pytree), its float arrays computed once into memory that their
    consumers read, instead of being recomputed inside each consumer.

    XLA CPU fuses cheap elementwise producers into every consumer, gathers
    included, so a per-geom quantity that later stages gather (a geom's pose
    and AABB at each broadphase pair) is recomputed per gathered element: in
    bin_16 at 512 worlds the broadphase
    recomputed every geom's pose and AABB four times per pair and axis, ~60 ns
    per pair and world (bench/RESULTS.md, session 29). An optimization barrier
    does not prevent that (XLA expands barriers before fusion); a scatter does:
    its result is a buffer no consumer fuses. The float leaves are flattened
    into one vector, written by one scatter at its own indices (an exact copy,
    the same bits) and split back, so a call costs a few small kernels whatever
    the number of leaves. Integer and boolean leaves pass unchanged. Tangents
    pass through as they are (as :func:`barrier`)."""
    leaves, tree = jax.tree.flatten(xs)
    floats = [i for i, x in enumerate(leaves) if jnp.issubdtype(x.dtype, jnp.floating)]
    if not floats:
        return xs
    out = list(leaves)
    for dtype in dict.fromkeys(leaves[i].dtype for i in floats):
        group = [i for i in floats if leaves[i].dtype == dtype]
        flat = jnp.concatenate([leaves[i].reshape(-1) for i in group])
        n = flat.shape[0]
        flat = jnp.zeros_like(flat).at[jnp.arange(n)].set(
            flat, unique_indices=True, indices_are_sorted=True)
        start = 0
        for i in group:
            size = leaves[i].size
            out[i] = flat[start:start + size].reshape(leaves[i].shape)
            start += size
    return jax.tree.unflatten(tree, out)


@materialize.defjvp
def _materialize_jvp(primals, tangents):
    (xs,), (ts,) = primals, tangents
    return materialize(xs), ts


def mm(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` (``jnp.matmul``'s shapes: vectors, matrices, stacks of them)
    written as a broadcast product and a sum over the contracted axis (the
    terms added in index order).

    XLA's CPU backend lowers a ``dot`` by its size (a loop, a tiled kernel or a
    library call), and a ``vmap`` changes the size, so the same world's product
    summed in another order alone and in a batch (box-plane's corners were
    1 ulp apart at 5 worlds with jax 0.10: the world's trajectory then left its
    trajectory alone); an elementwise product and a sum in one order whatever
    the batch (:func:`sum_terms`). Meant for the step's small per-world
    products."""
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    a2 = a[None, :] if a_vec else a
    b2 = b[:, None] if b_vec else b
    out = sum_terms(a2[..., :, :, None] * b2[..., None, :, :], axis=-2)
    if b_vec:
        out = out[..., 0]
    if a_vec:
        out = out[..., 0] if b_vec else out[..., 0, :]
    return out


#: contractions of up to this many terms are summed as a chain of adds
UNROLL_TERMS = 16


def sum_terms(x: jax.Array, axis=None, keepdims: bool = False) -> jax.Array:
    """``jnp.sum(x, axis, keepdims=keepdims)`` (``axis`` None: every axis) with
    the terms added in index order. A small contraction (at most
    :data:`UNROLL_TERMS` terms, every product in the step: 3 or 6) is written
    as a chain of elementwise adds of slices, which XLA fuses with the product
    and its consumers: XLA's CPU reduction of a short non-minor axis under
    ``vmap`` cost 11x the dot it replaced (the body pass of 1024 chain worlds:
    26 ms against 2.4 ms, 2.2 ms as adds; jax 0.10.2). Elementwise, so the
    same bits in any batch, as :func:`mm` needs: XLA CPU lowers a reduction
    by its size, and the integration's ``jnp.sum`` of 3 or 4 squares rounded
    a world differently alone and in an untiled batch of 64 (bench's bin_16
    left the world alone at step 10; bench/RESULTS.md, session 34). Every
    floating sum of a few terms in the step goes through here. Integer and boolean sums are exact in any
    order and stay ``jnp.sum``."""
    axes = tuple(range(x.ndim)) if axis is None else (
        (axis,) if isinstance(axis, int) else tuple(axis))
    axes = tuple(a % x.ndim for a in axes)
    terms = 1
    for a in axes:
        terms *= x.shape[a]
    if terms > UNROLL_TERMS or terms == 0 or not jnp.issubdtype(x.dtype, jnp.inexact):
        return jnp.sum(x, axis=axes, keepdims=keepdims)
    keep = [d for d in range(x.ndim) if d not in axes]
    y = jnp.transpose(x, list(axes) + keep).reshape((terms,) + tuple(x.shape[d] for d in keep))
    out = y[0]
    for k in range(1, terms):
        out = out + y[k]
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else x.shape[d] for d in range(x.ndim)))
    return out


def sq_norm(v: jax.Array) -> jax.Array:
    """Squared length over the last axis, ``(v0 v0 + v1 v1) + v2 v2`` in
    component order (ODE's dCalcVectorDot3(v, v)), as elementwise adds
    (:func:`sum_terms`): under a vmap XLA CPU ran ``jnp.sum(v * v, -1)`` over
    the 3-wide minor axis as a separate reduction kernel at 25-35 ns per result
    (the box contact reduction in stack; bench/RESULTS.md, session 29)."""
    return sum_terms(v * v, -1)


#: orders of at most this many entries are built from pairwise comparisons
SMALL_ORDER = 16


def _before(keys: tuple, descending: bool = False) -> jax.Array:
    """(..., n, n) bool: entry j (last axis) comes before entry i (axis -2) in
    the stable lexicographic order of ``keys`` (primary first, each (..., n));
    ascending floats compare as JAX's sorts do (NaN after every number, -0
    equal to +0); ``descending`` takes integer keys only; ties keep the index
    order."""
    n = keys[0].shape[-1]
    before = jnp.arange(n)[None, :] < jnp.arange(n)[:, None]     # j < i
    for key in reversed(keys):
        a, b = key[..., :, None], key[..., None, :]          # entry i, entry j
        if jnp.issubdtype(key.dtype, jnp.floating):
            assert not descending, "descending orders take integer keys"
            na, nb = jnp.isnan(a), jnp.isnan(b)
            first = (b < a) | (na & ~nb)
            same = (b == a) | (na & nb)
        else:
            first = (b > a) if descending else (b < a)
            same = b == a
        before = first | (same & before)
    return before


def _order_of(before: jax.Array, k: int) -> jax.Array:
    """The first ``k`` positions of the order that ``before`` describes:
    int32 (..., k), entry indices."""
    n = before.shape[-1]
    rank = sum_terms(before.astype(jnp.int32), -1)                # (..., n)
    at = rank[..., None, :] == jnp.arange(k, dtype=jnp.int32)[:, None]   # (..., k, n)
    return sum_terms(jnp.where(at, jnp.arange(n, dtype=jnp.int32), 0), -1)


def top_k_small(x: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``jax.lax.top_k(x, k)`` for a short last axis (at most
    :data:`SMALL_ORDER` entries): the ``k`` largest values, descending, equal
    values lowest index first, and their indices (int32). Built from the n^2
    comparisons of the entries, all elementwise: XLA CPU runs ``top_k`` as a
    TopK library call per batch of rows and a sort as a comparison sort, each
    several times the cost of these comparisons under a vmap (box-plane and
    the box contact reduction; bench/RESULTS.md, session 29)."""
    n = x.shape[-1]
    if n > SMALL_ORDER or k > n:
        return jax.lax.top_k(x, k)
    key = x
    if jnp.issubdtype(x.dtype, jnp.floating):
        # top_k's order is the floats' total order (-NaN < -inf < -0 < +0 <
        # inf < NaN): the bits as a signed integer, the negative ones mirrored
        bits = jax.lax.bitcast_convert_type(x, jnp.dtype(f"int{jnp.finfo(x.dtype).bits}"))
        key = bits ^ ((bits >> (bits.dtype.itemsize * 8 - 1)) & jnp.iinfo(bits.dtype).max)
    idx = _order_of(_before((key,), descending=True), k)
    return jnp.take_along_axis(x, idx, axis=-1), idx


def lexsort_small(keys) -> jax.Array:
    """``jnp.lexsort(keys)`` for a short last axis (at most
    :data:`SMALL_ORDER` entries): the stable ascending order by the last key,
    then the one before it, ...; built from pairwise comparisons as
    :func:`top_k_small`."""
    keys = tuple(keys)
    n = keys[0].shape[-1]
    if n > SMALL_ORDER:
        return jnp.lexsort(keys)
    return _order_of(_before(keys[::-1]), n)


def einsum(spec: str, *ops: jax.Array) -> jax.Array:
    """``jnp.einsum(spec, *ops)`` (explicit ``->`` form, no ellipsis) as a
    broadcast product and a sum over the contracted indices, which lead the
    product's axes (a sum over non-minor axes: one order of adds whatever the
    batch; see :func:`mm`)."""
    ins, out = spec.replace(" ", "").split("->")
    ins = ins.split(",")
    if len(ins) != len(ops):
        raise ValueError(f"einsum {spec!r} got {len(ops)} operands")
    letters = [c for s in ins for c in s]
    contracted = [c for c in dict.fromkeys(letters) if c not in out]
    order = contracted + list(out)
    prod = None
    for s, x in zip(ins, ops):
        if len(s) != x.ndim:
            raise ValueError(f"einsum {spec!r}: operand {s!r} has shape {x.shape}")
        perm = sorted(range(len(s)), key=lambda k: order.index(s[k]))
        y = jnp.transpose(x, perm)
        have = [s[k] for k in perm]
        shape = [y.shape[have.index(c)] if c in have else 1 for c in order]
        y = y.reshape(shape)
        prod = y if prod is None else prod * y
    return sum_terms(prod, tuple(range(len(contracted)))) if contracted else prod
