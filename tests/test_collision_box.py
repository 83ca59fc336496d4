"""Box-plane and box-box narrowphase against analytic geometry."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxode.sim.collision.box import BOX_BOX_NCON, BOX_PLANE_NCON, box_box, box_plane
from jaxode.sim.collision.contact import GeomWorld


@pytest.fixture(autouse=True)
def _x64():
    """Double precision for this module only (it must not leak into other modules)."""
    with jax.enable_x64(True):
        yield

_bp = jax.jit(jax.vmap(box_plane))
_bb = jax.jit(jax.vmap(box_box))


def rot(axis, ang):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(ang) * K + (1 - np.cos(ang)) * K @ K


def geom(pos, R=None, size=(0, 0, 0)):
    # jnp (not np) so that traced positions pass through for the gradient tests.
    return GeomWorld(jnp.asarray(pos, jnp.float64),
                     jnp.asarray(np.eye(3) if R is None else R, jnp.float64),
                     jnp.asarray(size, jnp.float64))


def stack(gs):
    return jax.tree.map(lambda *x: jnp.stack(x), *gs)


def one(fn, g1, g2):
    c = fn(stack([g1]), stack([g2]))
    return jax.tree.map(lambda x: np.asarray(x[0]), c)


def bp(g1, g2):
    return one(_bp, g1, g2)


def bb(g1, g2):
    return one(_bb, g1, g2)


PLANE = geom((0, 0, 0))


def test_shapes_and_slots():
    c = bp(geom((0, 0, 0), size=(1, 1, 1)), PLANE)
    assert c.pos.shape == (BOX_PLANE_NCON, 3) and c.depth.shape == (BOX_PLANE_NCON,)
    c = bb(geom((0, 0, 0), size=(1, 1, 1)), geom((0, 0, 0.5), size=(1, 1, 1)))
    assert c.pos.shape == (BOX_BOX_NCON, 3) and c.valid.shape == (BOX_BOX_NCON,)


# ------------------------------------------------------------------ box-plane
def test_box_flat_on_plane():
    c = bp(geom((0.3, -0.2, 0.25 - 0.01), size=(1, 2, 0.5)), PLANE)
    assert c.valid.sum() == 4
    np.testing.assert_allclose(c.depth, 0.01, atol=1e-12)
    np.testing.assert_allclose(c.normal, np.tile([0, 0, 1.0], (4, 1)))
    want = {(0.3 + sx * 0.5, -0.2 + sy * 1.0) for sx in (-1, 1) for sy in (-1, 1)}
    got = {tuple(np.round(p[:2], 9)) for p in c.pos}
    assert got == {tuple(np.round(w, 9)) for w in want}
    np.testing.assert_allclose(c.pos[:, 2], -0.01, atol=1e-12)


def test_box_on_edge_and_corner():
    h = np.sqrt(0.5)
    c = bp(geom((0, 0, h - 0.02), rot([1, 0, 0], np.pi / 4), size=(1, 1, 1)), PLANE)
    assert c.valid.sum() == 2
    np.testing.assert_allclose(c.depth[c.valid], 0.02, atol=1e-12)
    np.testing.assert_allclose(sorted(c.pos[c.valid][:, 0]), [-0.5, 0.5], atol=1e-12)
    # corner: rotate so the body diagonal (1,1,1) is vertical
    v = np.array([1.0, 1, 1]) / np.sqrt(3)
    R = rot(np.cross(v, [0, 0, 1]), np.arccos(v[2]))
    c = bp(geom((0.1, 0.2, np.sqrt(3) / 2 - 0.02), R, size=(1, 1, 1)), PLANE)
    assert c.valid.sum() == 1 and c.valid[0]
    np.testing.assert_allclose(c.depth[0], 0.02, atol=1e-12)
    np.testing.assert_allclose(c.pos[0], [0.1, 0.2, -0.02], atol=1e-12)


def test_box_above_plane_and_tilted_plane():
    c = bp(geom((0, 0, 0.51), size=(1, 1, 1)), PLANE)
    assert c.valid.sum() == 0
    assert np.all(c.depth == 0) and np.all(c.pos == 0) and np.all(c.normal == 0)
    # tilted plane through (1,2,3), box aligned with it, 0.05 deep
    Rp = rot([1, 1, 0], 0.4)
    n = Rp[:, 2]
    pp = np.array([1.0, 2, 3])
    box = geom(pp + n * (0.5 - 0.05), Rp, size=(1, 1, 1))
    c = bp(box, geom(pp, Rp))
    assert c.valid.sum() == 4
    np.testing.assert_allclose(c.depth, 0.05, atol=1e-12)
    np.testing.assert_allclose(c.normal[0], n, atol=1e-12)
    np.testing.assert_allclose((c.pos - pp) @ n, -0.05, atol=1e-12)


# -------------------------------------------------------------------- box-box
def _check_convention(g1, g2):
    c = bb(g1, g2)
    assert c.valid.any()
    k = int(np.argmax(np.where(c.valid, c.depth, -1)))
    moved = g1._replace(pos=g1.pos + jnp.asarray(c.normal[k] * c.depth[k]))
    c2 = bb(moved, g2)
    assert np.max(np.where(c2.valid, c2.depth, 0.0)) < 1e-9
    return c


def test_face_face_offset():
    top = geom((0.7, 0.3, 1.0 - 0.05), size=(1, 1, 1))
    base = geom((0, 0, 0), size=(2, 2, 1))
    c = _check_convention(top, base)
    assert c.valid.sum() == 4
    np.testing.assert_allclose(c.depth, 0.05, atol=1e-12)
    np.testing.assert_allclose(c.normal, np.tile([0, 0, 1.0], (4, 1)), atol=1e-12)
    want = {(x, y) for x in (0.2, 1.0) for y in (-0.2, 0.8)}
    assert {tuple(np.round(p[:2], 9)) for p in c.pos} == want
    # positions inside the overlap rectangle, within the overlap slab in z
    assert np.all((c.pos[:, 2] >= 0.45 - 1e-12) & (c.pos[:, 2] <= 0.5 + 1e-12))
    # swapped order: normal flips, same points
    cs = bb(base, top)
    assert cs.valid.sum() == 4
    np.testing.assert_allclose(cs.normal, np.tile([0, 0, -1.0], (4, 1)), atol=1e-12)
    np.testing.assert_allclose(cs.depth, 0.05, atol=1e-12)
    assert {tuple(np.round(p[:2], 9)) for p in cs.pos} == want
    _check_convention(base, top)


def test_rotated_45_octagon():
    top = geom((0, 0, 1.0 - 0.1), rot([0, 0, 1], np.pi / 4), size=(1, 1, 1))
    base = geom((0, 0, 0), size=(1, 1, 1))
    c = _check_convention(top, base)
    assert c.valid.sum() == 4
    np.testing.assert_allclose(c.depth, 0.1, atol=1e-12)
    np.testing.assert_allclose(c.normal[:, 2], 1.0, atol=1e-12)
    xy = c.pos[:, :2]
    assert np.all(np.abs(xy) <= 0.5 + 1e-9)  # inside base footprint
    assert np.all(np.abs(xy[:, 0]) + np.abs(xy[:, 1]) <= np.sqrt(0.5) + 1e-9)  # diamond
    # spread: the 4 points span the octagon (no two close together)
    dists = [np.linalg.norm(a - b) for a, b in itertools.combinations(xy, 2)]
    assert min(dists) > 0.3


def test_edge_edge():
    h = np.sqrt(0.5)
    z1 = 2 * h - 0.1
    g1 = geom((0.1, 0.05, z1), rot([1, 0, 0], np.pi / 4), size=(1, 1, 1))  # bottom edge along x
    g2 = geom((0, 0, 0), rot([0, 1, 0], np.pi / 4), size=(1, 1, 1))  # top edge along y
    c = _check_convention(g1, g2)
    assert c.valid.sum() == 1 and c.valid[0]
    np.testing.assert_allclose(c.depth[0], 0.1, atol=1e-12)
    np.testing.assert_allclose(c.normal[0], [0, 0, 1], atol=1e-12)
    np.testing.assert_allclose(c.pos[0], [0, 0.05, 0.5 * (z1 - h + h)], atol=1e-12)
    # swapped
    cs = bb(g2, g1)
    assert cs.valid.sum() == 1
    np.testing.assert_allclose(cs.normal[0], [0, 0, -1], atol=1e-12)
    np.testing.assert_allclose(cs.depth[0], 0.1, atol=1e-12)
    np.testing.assert_allclose(cs.pos[0], c.pos[0], atol=1e-12)


def test_separated():
    c = bb(geom((0, 0, 1.01), size=(1, 1, 1)), geom((0, 0, 0), size=(1, 1, 1)))
    assert c.valid.sum() == 0 and np.all(c.depth == 0) and np.all(c.normal == 0)
    # separated only along an edge-edge axis
    h = np.sqrt(0.5)
    g1 = geom((0, 0, 2 * h + 0.01), rot([1, 0, 0], np.pi / 4), size=(1, 1, 1))
    g2 = geom((0, 0, 0), rot([0, 1, 0], np.pi / 4), size=(1, 1, 1))
    assert bb(g1, g2).valid.sum() == 0
    # a 1e-7 gap along the edge axis (smaller than ODE's 1e-5 fudge) separates
    assert bb(g1._replace(pos=jnp.asarray([0, 0, 2 * h + 1e-7])), g2).valid.sum() == 0
    assert bb(g1._replace(pos=jnp.asarray([0, 0, 2 * h - 1e-7])), g2).valid.sum() == 1


def test_coincident_boxes_finite():
    g = geom((0.1, 0.2, 0.3), rot([1, 2, 3], 0.7), size=(1, 0.5, 2))
    c = bb(g, g)
    for x in c:
        assert np.all(np.isfinite(x))
    assert c.valid.any()
    np.testing.assert_allclose(np.linalg.norm(c.normal[c.valid], axis=1), 1.0)


def _depth_sum(p1, p2, R1, R2, s1, s2, fn):
    c = fn(GeomWorld(p1, R1, s1), GeomWorld(p2, R2, s2))
    return jnp.sum(jnp.where(c.valid, c.depth, 0.0)) + jnp.sum(c.pos) + jnp.sum(c.normal)


_grad_bb = jax.jit(jax.vmap(jax.grad(lambda *a: _depth_sum(*a, box_box), argnums=(0, 1))))
_grad_bp = jax.jit(jax.vmap(jax.grad(lambda *a: _depth_sum(*a, box_plane), argnums=(0, 1))))


def test_vmap_batch_and_degenerate_grads():
    I = np.eye(3)
    h = np.sqrt(0.5)
    e30 = 0.5 * (np.cos(np.pi / 6) + np.sin(np.pi / 6))
    cases = [
        (geom((0, 0, 0), I, (1, 1, 1)), geom((0, 0, 0), I, (1, 1, 1))),  # coincident
        (geom((0, 0, 0.9), I, (1, 1, 1)), geom((0, 0, 0), I, (1, 1, 1))),  # aligned face
        (geom((0.5, 0.5, 0.95), I, (1, 1, 1)), geom((0, 0, 0), I, (1, 1, 1))),  # corners on edges
        (geom((0.2, 0, 2 * e30 - 0.05), rot([1, 0, 0], np.pi / 6), (1, 1, 1)),  # parallel edges
         geom((0, 0, 0), rot([1, 0, 0], np.pi / 3), (1, 1, 1))),
        (geom((0, 0, 2 * h - 0.1), rot([1, 0, 0], np.pi / 4), (1, 1, 1)),  # edge-edge
         geom((0, 0, 0), rot([0, 1, 0], np.pi / 4), (1, 1, 1))),
        (geom((0, 0, 3), I, (1, 1, 1)), geom((0, 0, 0), I, (1, 1, 1))),  # separated
    ]
    g1 = stack([a for a, _ in cases])
    g2 = stack([b for _, b in cases])
    c = _bb(g1, g2)
    assert c.depth.shape == (len(cases), BOX_BOX_NCON)
    for x in c:
        assert np.all(np.isfinite(np.asarray(x)))
    assert list(np.asarray(c.valid).sum(1)) == [4, 4, 4, 4, 1, 0]
    # batched results equal one-at-a-time results
    for i, (a, b) in enumerate(cases):
        np.testing.assert_allclose(np.asarray(c.depth[i]), bb(a, b).depth, atol=1e-12)
    grads = _grad_bb(g1.pos, g2.pos, g1.rot, g2.rot, g1.size, g2.size)
    for gr in grads:
        assert np.all(np.isfinite(np.asarray(gr)))
    pl = stack([geom((0, 0, 0))] * 2)
    bx = stack([geom((0, 0, 0.5), I, (1, 1, 1)), geom((0, 0, 0.4), rot([1, 1, 0], 0.3), (1, 1, 1))])
    gp = _grad_bp(bx.pos, pl.pos, bx.rot, pl.rot, bx.size, pl.size)
    for gr in gp:
        assert np.all(np.isfinite(np.asarray(gr)))


def test_depth_gradient_values():
    f = jax.jit(jax.grad(lambda z: jnp.sum(box_box(
        geom(jnp.array([0.0, 0.0, 0.0]) + jnp.array([0.0, 0.0, 1.0]) * z, size=(1, 1, 1)),
        geom((0, 0, 0), size=(1, 1, 1))).depth)))
    np.testing.assert_allclose(float(f(0.9)), -4.0, atol=1e-9)
    g = jax.jit(jax.grad(lambda z: jnp.sum(box_plane(
        geom(jnp.array([0.0, 0.0, 1.0]) * z, size=(1, 1, 1)), PLANE).depth)))
    np.testing.assert_allclose(float(g(0.45)), -4.0, atol=1e-9)


def _clip_reference(poly, e1, e2):
    """Sutherland-Hodgman in numpy (float64): the convex polygon ``poly`` (n,3)
    clipped to |x| <= e1, |y| <= e2, interpolating z along the edges."""
    for axis, s, e in ((0, 1, e1), (0, -1, e1), (1, 1, e2), (1, -1, e2)):
        out = []
        for i in range(len(poly)):
            p, q = poly[i], poly[(i + 1) % len(poly)]
            fp, fq = s * p[axis] - e, s * q[axis] - e
            if fp <= 0:
                out.append(p)
            if fp * fq < 0:
                out.append(p + fp / (fp - fq) * (q - p))
        poly = np.array(out).reshape(-1, 3)
    return poly


def test_rect_quad_candidates_are_the_clipped_polygons_vertices():
    """box-box's face case keeps the vertices of the incident face clipped to the
    reference face (ODE's intersectRectQuad2). ``_rect_quad`` lists them as a
    fixed set of candidates (corners inside, the rectangle's corners inside the
    quad, edge crossings); truth: a textbook Sutherland-Hodgman clipper, over
    random parallelograms (tilted out of the plane) and rectangles, some
    aligned with and some inside the others. Every valid candidate is a vertex
    of the clipped polygon and every vertex is a valid candidate."""
    from jaxode.sim.collision.box import _rect_quad
    rng = np.random.default_rng(7)
    fn = jax.jit(jax.vmap(_rect_quad))
    n = 600
    locs, e1s, e2s = [], [], []
    for k in range(n):
        e1, e2 = rng.uniform(0.1, 1.0, 2)
        c = rng.normal(size=3) * [0.6, 0.6, 0.05]
        spin = rot([0, 0, 1], rng.uniform(0, np.pi))        # in the reference plane
        R = rot(rng.normal(size=3), rng.uniform(0, np.pi)) if k % 3 else spin
        if abs(R[2, 2]) < 0.6:   # as box-box's incident face: the most aligned one
            R = spin
        h = rng.uniform(0.05, 1.2, 2)
        if k % 7 == 0:                      # the same rectangle, aligned (a stack)
            R, h, c = np.eye(3), np.array([e1, e2]), np.array([0.0, 0.0, -0.01])
        signs = np.array([[1, 1], [-1, 1], [-1, -1], [1, -1]], float)
        locs.append(c + signs[:, :1] * h[0] * R[:, 0] + signs[:, 1:] * h[1] * R[:, 1])
        e1s.append(e1)
        e2s.append(e2)
    pts, valid = jax.tree.map(np.asarray, fn(jnp.asarray(np.array(locs)), jnp.asarray(e1s),
                                             jnp.asarray(e2s)))
    for k in range(n):
        ref = _clip_reference(locs[k], e1s[k], e2s[k])
        got = pts[k][valid[k]]
        if len(ref) == 0:
            assert len(got) == 0, k
            continue
        d = np.linalg.norm(got[:, None] - ref[None], axis=2)
        assert d.min(axis=1).max() < 1e-9, (k, got, ref)  # each candidate is a vertex
        assert d.min(axis=0).max() < 1e-9, (k, got, ref)  # each vertex is a candidate
