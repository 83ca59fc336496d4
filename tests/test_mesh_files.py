"""Mesh files (issue 21): STL, OBJ and COLLADA read with trimesh into what
the builder takes. Independent truths: the fixture cube's corners are
(+-0.5)^3 by construction (written by hand in three formats; the COLLADA
copy in centimetres with a node translation of 100 cm), its volume 1 m^3
(divergence theorem over the triangles); a hull reduced to 64 vertices lies
inside the exact hull (the convex-hull property) and a sphere's
icosphere reduction stays within the icosphere's sagitta of the sphere."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("trimesh")

import jaxode  # noqa: E402
from jaxode.io import mesh_files  # noqa: E402

MESHES = os.path.join(os.path.dirname(__file__), "data", "meshes")
CORNERS = np.array([[x, y, z] for x in (-.5, .5) for y in (-.5, .5) for z in (-.5, .5)])


def _volume(v, f):
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return float(np.sum(np.einsum("ij,ij->i", a, np.cross(b, c))) / 6.0)


def _sorted(v):
    return v[np.lexsort(v.T[::-1])]


@pytest.mark.parametrize("name, shift", [("cube.obj", 0.0), ("cube.stl", 0.0), ("cube.dae", 1.0)])
def test_cube_in_three_formats(name, shift):
    m = mesh_files.load_mesh(os.path.join(MESHES, name), scale=(2.0, 1.0, 1.0))
    assert m.vertices.dtype == np.float64 and m.faces.dtype == np.int32
    assert m.faces.shape == (12, 3)
    want = CORNERS * [2.0, 1.0, 1.0] + [0.0, 0.0, shift * 1.0]
    np.testing.assert_allclose(_sorted(m.vertices), _sorted(want), atol=1e-12)
    assert _volume(m.vertices, m.faces) == pytest.approx(2.0, rel=1e-12)  # outward winding


def test_mirror_scale_keeps_outward_winding():
    m = mesh_files.load_mesh(os.path.join(MESHES, "cube.obj"), scale=(-1.0, 1.0, 1.0))
    assert _volume(m.vertices, m.faces) == pytest.approx(1.0, rel=1e-12)


def test_errors_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="nope.stl: mesh file not found"):
        mesh_files.load_mesh(tmp_path / "nope.stl")
    bad = tmp_path / "x.ply"
    bad.write_text("ply")
    with pytest.raises(ValueError, match=r"x.ply: mesh files must be .stl, .obj or .dae"):
        mesh_files.load_mesh(bad)
    with pytest.raises(ValueError, match="scale must be 3 finite non-zero"):
        mesh_files.load_mesh(os.path.join(MESHES, "cube.obj"), scale=(1, 0, 1))
    monkeypatch.setitem(sys.modules, "trimesh", None)
    with pytest.raises(ImportError, match=r"cube.obj: .*pip install jaxode\[meshes\]"):
        mesh_files.load_mesh(os.path.join(MESHES, "cube.obj"))


def test_static_mesh_is_trimesh_body_mesh_is_hull():
    m = mesh_files.load_mesh(os.path.join(MESHES, "cube.obj"))
    b = jaxode.WorldBuilder()
    body = b.add_body(mass=jaxode.mass.box((1, 1, 1), total=1.0))
    gs = mesh_files.add_mesh_geom(b, m)
    gb = mesh_files.add_mesh_geom(b, m, body=body)
    gt = mesh_files.add_mesh_geom(b, m, body=body, body_mesh="trimesh")
    from jaxode.sim.collision import contact as ct
    assert [b.geoms[g]["type"] for g in (gs, gb, gt)] == [ct.TRIMESH, ct.CONVEX, ct.TRIMESH]
    assert len(b.hulls[0][1].verts) == 8 and b.hulls[0][1].volume == pytest.approx(1.0)


def test_hull_reduction_inside_and_close():
    # an icosphere-like dense sphere: 1442 vertices on the unit sphere
    k = np.arange(1442) + 0.5
    z = 1 - 2 * k / 1442
    r = np.sqrt(1 - z * z)
    ph = np.pi * (1 + 5 ** 0.5) * k
    v = np.stack([r * np.cos(ph), r * np.sin(ph), z], 1)
    p = mesh_files.hull_points(v)
    assert 4 <= len(p) <= 64
    # every kept point is a mesh vertex (the reduced hull is inside the exact one)
    assert all(np.min(np.linalg.norm(v - q, axis=1)) == 0.0 for q in p)
    # 64 points spread over a unit sphere: the gap is below the cap height of a
    # spherical cap of area 4 pi / 64 * 3 (generous: 1 - cos(acos(1 - 6/64)))
    assert 0.0 < mesh_files.hull_deviation(v, p) < 6 / 64
