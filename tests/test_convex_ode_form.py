"""add_convex in ODE's dCreateConvex form (planes, points, polygons).

Truths: the polyhedra are given by hand in ODE's layout (outward planes
``n . x = d``, the flat polygon list ``[k, i_1 .. i_k, ...]``,
counter-clockwise from outside, as ODE's demo_moving_convex writes its cube);
the hull built from them has exactly those faces, the analytic volume, and
a body with it rests on a plane at the height the geometry gives; malformed
input is refused with errors naming the field.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jaxode
from jaxode.build import hull as hull_lib

S = 0.25  # half size of the cube [m]
CUBE_PLANES = [[1, 0, 0, S], [0, 1, 0, S], [0, 0, 1, S],
               [-1, 0, 0, S], [0, -1, 0, S], [0, 0, -1, S]]
CUBE_POINTS = [[S, S, S], [-S, S, S], [S, -S, S], [-S, -S, S],
               [S, S, -S], [-S, S, -S], [S, -S, -S], [-S, -S, -S]]
CUBE_POLYGONS = [4, 0, 2, 6, 4,     # +x
                 4, 1, 0, 4, 5,     # +y
                 4, 0, 1, 3, 2,     # +z
                 4, 3, 1, 5, 7,     # -x
                 4, 2, 3, 7, 6,     # -y
                 4, 5, 4, 6, 7]     # -z
# a right tetrahedron with legs a: faces x=0, y=0, z=0 and x+y+z=a
A = 0.3
TET_POINTS = [[0, 0, 0], [A, 0, 0], [0, A, 0], [0, 0, A]]
TET_PLANES = [[-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, -1, 0], [1, 1, 1, A]]  # last: not unit
TET_POLYGONS = [3, 0, 3, 2, 3, 0, 1, 3, 3, 0, 2, 1, 3, 1, 2, 3]


def test_cube_and_tetrahedron_give_their_faces_and_volumes():
    cube = hull_lib.from_ode(CUBE_PLANES, CUBE_POINTS, CUBE_POLYGONS)
    assert cube.volume == pytest.approx((2 * S) ** 3, rel=1e-12)
    assert len(cube.faces) == 6 and all(len(f) == 4 for f in cube.faces)
    want = {tuple(np.array(p[:3], float)) for p in CUBE_PLANES}
    assert {tuple(np.round(n, 12) + 0.0) for n in cube.normals} == want
    np.testing.assert_allclose(cube.offsets, S, atol=1e-12)
    tet = hull_lib.from_ode(TET_PLANES, TET_POINTS, TET_POLYGONS)
    assert tet.volume == pytest.approx(A ** 3 / 6, rel=1e-12)
    slanted = tet.normals[np.argmax(tet.normals.sum(1))]
    np.testing.assert_allclose(slanted, np.ones(3) / np.sqrt(3), atol=1e-12)


def test_cube_in_ode_form_rests_at_its_half_size():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    i = b.add_body(pos=(0.0, 0.0, S + 0.01), mass=jaxode.mass.box((2 * S,) * 3, total=1.0))
    b.add_convex(CUBE_POINTS, body=i, planes=CUBE_PLANES, polygons=CUBE_POLYGONS)
    model = b.build()
    final = jax.jit(lambda s: jaxode.rollout(model, s, 100, 0.01)[0])(jaxode.init(model))
    assert float(final.pos[0, 2]) == pytest.approx(S, abs=1e-3)
    assert np.abs(np.asarray(final.vel)).max() < 1e-2


@pytest.mark.parametrize("planes, points, polygons, match", [
    (CUBE_PLANES[:5], CUBE_POINTS, CUBE_POLYGONS, "entries after"),
    (CUBE_PLANES, CUBE_POINTS, CUBE_POLYGONS[:-5], "one polygon per plane"),
    (CUBE_PLANES, CUBE_POINTS, [2, 0, 2] + CUBE_POLYGONS[5:] + [4, 5, 4, 6, 7], "count 2"),
    (CUBE_PLANES, CUBE_POINTS, [4, 0, 2, 6, 9] + CUBE_POLYGONS[5:], "indexes outside"),
    ([[1, 0, 0, S + 0.01]] + CUBE_PLANES[1:], CUBE_POINTS, CUBE_POLYGONS, "off planes\\[0\\]"),
    ([[-p[0], -p[1], -p[2], -p[3]] for p in CUBE_PLANES], CUBE_POINTS, CUBE_POLYGONS,
     "point out of a convex"),
    (CUBE_PLANES, CUBE_POINTS, CUBE_POLYGONS[:10] + [3, 0, 1, 3] + CUBE_POLYGONS[15:],
     "close a surface"),                                     # +z face as a triangle only
    ([[0, 0, 0, 1]] + CUBE_PLANES[1:], CUBE_POINTS, CUBE_POLYGONS, "zero normal"),
    (CUBE_PLANES, np.array(CUBE_POINTS)[:, :2], CUBE_POLYGONS, "points must be a \\(V, 3\\)"),
])
def test_malformed_input_is_refused_naming_the_field(planes, points, polygons, match):
    b = jaxode.WorldBuilder()
    with pytest.raises(ValueError, match=match):
        b.add_convex(points, planes=planes, polygons=polygons)


def test_planes_without_polygons_are_refused():
    with pytest.raises(ValueError, match="planes and polygons come together"):
        jaxode.WorldBuilder().add_convex(CUBE_POINTS, planes=CUBE_PLANES)
