"""Capsule pairs against libode 0.16's dCollide (double) over random poses, and
capsule-box with its segment inside the box against the exact penetration depth
(which ODE's bounding-box fallback, followed by jaxode, can only exceed).

Truths: libode's dCollideCapsulePlane / dCollideCapsuleCapsule /
dCollideCapsuleBox through tools/conformance/odelib (the real library), and the
brute-force minimum over directions of the support-function overlap (the
penetration depth of two convex shapes) in numpy.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from jaxode.sim.collision import capsule as cap
from jaxode.sim.collision.contact import GeomWorld

from fast_compile import OPTIONS as _OPTS  # noqa: E402
import truths  # noqa: E402

odelib = pytest.importorskip("tools.conformance.odelib")

N = 96  # random poses per pair type
_MARGIN = cap._MID_MARGIN


@pytest.fixture(autouse=True, scope="module")
def _libode_x64():
    try:
        odelib.load()
    except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"libode not available: {e}")
    with jax.enable_x64(True):  # compared with ODE's double build
        yield


_JIT = {}


def run(name, p1, r1, s1, p2, r2, s2):
    if name not in _JIT:
        _JIT[name] = jax.jit(jax.vmap(getattr(cap, name)), compiler_options=_OPTS)
    g = [GeomWorld(jnp.asarray(p, jnp.float64), jnp.asarray(r, jnp.float64),
                   jnp.asarray(s, jnp.float64)) for p, r, s in ((p1, r1, s1), (p2, r2, s2))]
    return jax.tree.map(np.asarray, _JIT[name](*g))


def quat(r):
    x = Rotation.from_matrix(r).as_quat()  # (x, y, z, w)
    return (x[3], x[0], x[1], x[2])


def capsule_sizes(rng, n):
    return np.stack([rng.uniform(0.02, 0.2, n), rng.uniform(0.0, 0.5, n), np.zeros(n)], 1)


def poses(seed, kind2):
    rng = np.random.default_rng(seed)
    r1 = Rotation.random(N, random_state=seed).as_matrix()
    r2 = Rotation.random(N, random_state=seed + 1).as_matrix()
    s1 = capsule_sizes(rng, N)
    s2 = rng.uniform(0.05, 0.6, (N, 3)) if kind2 == "box" else capsule_sizes(rng, N)
    if kind2 == "capsule":  # a quarter exactly parallel (ODE's two-contact branch)
        r2[: N // 4] = r1[: N // 4]
    p1 = rng.normal(size=(N, 3)) * 0.05
    p2 = p1 + rng.normal(size=(N, 3)) * 0.2
    return p1, r1, s1, p2, r2, s2


def ode(i, p1, r1, s1, kind2, p2, r2, s2):
    other = (("box", tuple(s2[i]), tuple(p2[i]), quat(r2[i])) if kind2 == "box" else
             (kind2, s2[i][0], s2[i][1], tuple(p2[i]), quat(r2[i])))
    return odelib.collide(("capsule", s1[i][0], s1[i][1], tuple(p1[i]), quat(r1[i])), other, 8)


# ------------------------------------------------ numpy penetration depth
_FIB = truths.sphere_directions(4000)


def overlap_capsule_box(n, p1, r1, s1, p2, r2, s2):
    """Overlap along unit rows n [m]: how far the capsule must move along +n
    to clear the box (support of the box along n plus the capsule's along -n)."""
    box = n @ p2 + np.abs(n @ r2) @ (0.5 * s2)
    capsule = -(n @ p1) + 0.5 * s1[1] * np.abs(n @ r1[:, 2]) + s1[0]
    return box + capsule


def penetration_capsule_box(*g):
    """min over directions of the overlap (an upper bound of the penetration
    depth, equal to it up to the search's reach; the overlap has narrow valleys
    along the crosses of the capsule's axis with the box edges): tests/truths.py."""
    return truths.min_over_directions(lambda n: overlap_capsule_box(n, *g), _FIB)


def segment_in_box(p1, r1, s1, p2, r2, s2):
    u = np.linspace(-0.5, 0.5, 401)[:, None] * s1[1]
    loc = (p1 + u * r1[:, 2] - p2) @ r2
    return bool(np.any(np.all(np.abs(loc) <= 0.5 * s2, axis=1)))


# ------------------------------------------------------------------ tests
def test_capsule_plane_matches_libode():
    """ODE's two end-cap contacts (lower end first, the second only while the
    first touches), positions on the plane, depth r - height: to rounding."""
    rng = np.random.default_rng(11)
    r1 = Rotation.random(N, random_state=11).as_matrix()
    s1 = capsule_sizes(rng, N)
    p1 = np.c_[rng.normal(size=(N, 2)), rng.uniform(-0.2, 0.5, N)]
    nrm = np.tile([0.0, 0.0, 1.0], (N, 1))
    c = run("capsule_plane", p1, r1, s1, np.zeros((N, 3)), np.tile(np.eye(3), (N, 1, 1)),
            np.zeros((N, 3)))
    hits = 0
    for i in range(N):
        cs = odelib.collide(("capsule", s1[i][0], s1[i][1], tuple(p1[i]), quat(r1[i])),
                            ("plane", (0.0, 0.0, 1.0), 0.0), 8)
        v = c.valid[i]
        assert len(cs) == v.sum(), (i, len(cs), v)
        hits += bool(cs)
        for k, x in enumerate(cs):
            assert abs(c.depth[i][k] - x.depth) < 1e-12
            np.testing.assert_allclose(c.pos[i][k], x.pos, atol=1e-12)
            np.testing.assert_allclose(c.normal[i][k], nrm[i], atol=0)
    assert N // 4 <= hits <= N - N // 8  # both branches sampled


def test_capsule_capsule_matches_libode():
    """dCollideCapsuleCapsule: closest segment points (1 contact), or the two
    ends of the overlap for parallel axes. Same count, depths and normals to
    rounding (the touching-segment fallback normal is never drawn)."""
    g = poses(21, "capsule")
    c = run("capsule_capsule", *g)
    hits = parallel_two = 0
    for i in range(N):
        cs = ode(i, g[0], g[1], g[2], "capsule", g[3], g[4], g[5])
        v = c.valid[i]
        assert len(cs) == v.sum(), (i, len(cs), v)
        hits += bool(cs)
        parallel_two += len(cs) == 2
        for k, x in enumerate(cs):
            assert abs(c.depth[i][k] - x.depth) < 1e-9, (i, k, c.depth[i], x.depth)
            np.testing.assert_allclose(c.normal[i][k], x.normal, atol=1e-9)
            np.testing.assert_allclose(c.pos[i][k], x.pos, atol=1e-9)
    assert hits >= N // 3 and parallel_two >= 3, (hits, parallel_two)


def test_capsule_box_matches_libode_outside_and_bounds_the_exact_depth_inside():
    """Segment outside the box: ODE's one contact (closest points); ours keeps
    both ends when both touch, dropping the middle unless it is deeper by
    _MID_MARGIN (r + length/2), so the deepest is ODE's depth or at most that
    much less, with ODE's normal where it is the closest-point contact.

    Segment inside the box: ODE collides the capsule's bounding box against
    the box (dBoxBox), and so does jaxode (the fuzz world 14:2:417 of issue 19
    stays calm with that patch of contacts and not with the exact depth's two
    contacts on the segment, tests/test_capsule_box_odelib.py): the deepest is
    libode's, and the bounding box contains the capsule, so it is never below
    the exact penetration (the brute-force search)."""
    g = poses(31, "box")
    c = run("capsule_box", *g)
    n_out = n_in = 0
    inside = []
    for i in range(N):
        gi = [x[i] for x in g]
        cs = ode(i, g[0], g[1], g[2], "box", g[3], g[4], g[5])
        v = c.valid[i]
        assert bool(cs) == v.any(), (i, len(cs), v)
        if not cs:
            continue
        ours = c.depth[i][v].max()
        n = c.normal[i][v][np.argmax(c.depth[i][v])]
        if segment_in_box(*gi):
            n_in += 1
            search = penetration_capsule_box(*gi)
            inside.append(ours - search)
            assert ours >= search - 1e-9, (i, ours, search)
            assert abs(ours - max(x.depth for x in cs)) < 1e-9, (i, ours)
            np.testing.assert_allclose(c.normal[i][v], np.broadcast_to(n, (v.sum(), 3)), atol=0)
        else:
            n_out += 1
            assert len(cs) == 1
            tol = _MARGIN * (gi[2][0] + 0.5 * gi[2][1])
            assert cs[0].depth - tol - 1e-9 <= ours <= cs[0].depth + 1e-9, (i, ours, cs[0].depth)
            if abs(ours - cs[0].depth) < 1e-9:
                np.testing.assert_allclose(n, cs[0].normal, atol=1e-6)
    assert n_in >= N // 5 and n_out >= N // 5, (n_in, n_out)
    # and the search reaches it in nearly every pose (a check on the search)
    # ODE's box overestimates the capsule's penetration (a measure, not a bound)
    assert np.mean(np.asarray(inside)) > 1e-3, inside
