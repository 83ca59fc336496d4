"""Mesh files (STL, OBJ, COLLADA .dae) for the scene-file loaders.

``load_mesh(path, scale)`` reads a file with ``trimesh`` (optional extra:
``pip install jaxode[meshes]``, which brings trimesh and pycollada for .dae)
and returns a :class:`MeshFile` (vertices (V, 3) float64 [m, the file's
units times ``scale``], faces (F, 3) int32), cleaned so that jaxode's
tables accept it: a multi-part file (OBJ groups, a COLLADA scene graph) is
flattened into one mesh with its node transforms applied, coincident
vertices are merged and zero-area triangles dropped (the rule of
``jaxode.build.meshes``: area <= 1e-12 size^2). A negative scale (a
mirror) reverses the winding so that normals still point out.

``add_mesh_geom(builder, mesh, body=None, ...)`` turns that into a geom, by
the rule the SDF, URDF and MJCF loaders share:

* static geom (``body`` None): a triangle mesh, ``add_trimesh``, as
  Gazebo's ODE does for ``<mesh>`` collisions (dCreateTriMesh). At most
  ``jaxode.meshes.MAX_MESH_TRIANGLES`` (20000) triangles; a larger static
  mesh is an error naming the file (jaxode does not decimate meshes).
* geom on a moving body: by default (``body_mesh="hull"``) the convex hull
  of the mesh's vertices, ``add_convex``, as PyBullet does for mesh
  collision shapes of moving bodies (its URDF importer builds a
  btConvexHullShape unless the link is static / concave is asked for) and
  as MuJoCo does for every mesh geom. The hull is cheap against every geom
  type and needs no closed mesh; jaxode's hulls have at most
  ``MAX_HULL_VERTICES`` (64) vertices, so a hull with more is reduced by
  the greedy rule of :func:`hull_points` (the reduced hull lies inside the
  exact one; ``hull_deviation`` measures the gap; where jaxode's hull
  builder cannot merge a dense, nearly flat patch into faces, a coarser
  reduction, 2 vertices fewer at a time, is used). ``body_mesh="trimesh"``
  keeps the triangles (Gazebo's ODE way; one sided, the mesh should be
  closed), at most MAX_MESH_TRIANGLES.
"""
from __future__ import annotations

import logging
import os
import warnings
from typing import NamedTuple, Optional, Sequence

import numpy as np

from jaxode.build import hull as hull_lib
from jaxode.io.xml_util import JaxodeFormatWarning

MESH_EXTENSIONS = (".stl", ".obj", ".dae")
_AREA_REL = 1e-12  # as jaxode.build.meshes: zero-area triangles are dropped


class MeshFile(NamedTuple):
    """A triangle mesh read from a file: ``vertices`` (V, 3) float64 [m],
    ``faces`` (F, 3) int32 vertex indices, counter-clockwise from outside."""

    vertices: np.ndarray
    faces: np.ndarray


def _trimesh(path: str):
    try:
        import trimesh
    except ImportError:
        raise ImportError(f"{path}: reading mesh files needs the optional package trimesh: "
                          f"pip install jaxode[meshes]") from None
    return trimesh


def load_mesh(path, scale: Sequence[float] = (1.0, 1.0, 1.0), up_axis: bool = False) -> MeshFile:
    """Read an STL, OBJ or COLLADA (.dae) file into a :class:`MeshFile`
    (see the module docstring), each vertex multiplied by ``scale`` (3
    numbers, or one). COLLADA: ``<unit meter>`` always applies (Gazebo and
    PyBullet both scale by it); ``<up_axis>`` only with ``up_axis=True``
    (PyBullet's URDF importer turns Y_UP/X_UP files to z up; Gazebo does
    not: its "Importing Meshes" tutorial rotates a Y_UP duck with a
    ``<pose>``). Errors name the file."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in MESH_EXTENSIONS:
        raise ValueError(f"{path}: mesh files must be .stl, .obj or .dae (got {ext or 'no extension'!r})")
    if not os.path.isfile(path):
        raise ValueError(f"{path}: mesh file not found")
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    if s.size == 1:
        s = np.repeat(s, 3)
    if s.size != 3 or not np.all(np.isfinite(s)) or np.any(s == 0):
        raise ValueError(f"{path}: scale must be 3 finite non-zero numbers (got {np.asarray(scale).tolist()})")
    tm = _trimesh(path)
    if ext == ".dae":
        try:
            import collada  # noqa: F401
        except ImportError:
            raise ImportError(f"{path}: reading COLLADA (.dae) files needs the optional package "
                              f"pycollada: pip install jaxode[meshes]") from None
    # Only the geometry is used: trimesh's reports of textures it cannot find
    # (a model's materials/ folder) are silenced while it reads.
    log = logging.getLogger("trimesh")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        m = tm.load(path, force="mesh", process=False)
    except Exception as e:  # trimesh raises many kinds on malformed files
        raise ValueError(f"{path}: cannot read the mesh ({type(e).__name__}: {e})") from None
    finally:
        log.setLevel(level)
    v = np.asarray(getattr(m, "vertices", np.zeros((0, 3))), dtype=np.float64)
    f = np.asarray(getattr(m, "faces", np.zeros((0, 3))), dtype=np.int64)
    if v.ndim != 2 or v.shape[0] < 3 or f.ndim != 2 or f.shape[0] < 1:
        raise ValueError(f"{path}: the file holds no triangles")
    bad = ~np.all(np.isfinite(v), axis=1)
    if np.any(bad):  # NaN/inf vertices: their triangles are dropped, with a warning
        f = f[~np.any(bad[f], axis=1)]
        warnings.warn(f"{path}: {int(bad.sum())} non-finite vertices; their triangles are "
                      f"left out ({f.shape[0]} kept)", JaxodeFormatWarning, stacklevel=2)
        v = np.where(bad[:, None], 0.0, v)
        if f.shape[0] < 1:
            raise ValueError(f"{path}: every triangle has a non-finite vertex")
    if ext == ".dae":
        v = _collada_frame(path, v, up_axis)
    v = v * s
    if np.prod(np.sign(s)) < 0:  # a mirror flips the winding
        f = f[:, ::-1]
    v, f = _clean(v, f)
    if f.shape[0] < 1:
        raise ValueError(f"{path}: every triangle of the mesh has zero area")
    return MeshFile(vertices=v, faces=f.astype(np.int32))


def _collada_frame(path: str, v: np.ndarray, up_axis: bool) -> np.ndarray:
    """Apply a COLLADA file's ``<asset><unit meter>`` (trimesh leaves it
    out): vertices times ``meter``; with ``up_axis``, as PyBullet's
    LoadMeshFromCollada, ``<up_axis>`` Y_UP (the COLLADA default) turned to
    z up by +90 deg about x ((x, y, z) -> (x, -z, y)), X_UP by -90 deg
    about y ((x, y, z) -> (-z, y, x))."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ValueError(f"{path}: cannot read the COLLADA file ({e})") from None
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    asset = root.find(f"{ns}asset")
    if asset is None:
        asset = ET.Element("asset")
    unit = asset.find(f"{ns}unit")
    if unit is not None and unit.get("meter"):
        try:
            v = v * float(unit.get("meter"))
        except ValueError:
            raise ValueError(f"{path}: <unit meter> must be a number (got {unit.get('meter')!r})") from None
    if not up_axis:
        return v
    up = asset.find(f"{ns}up_axis")
    axis = (up.text or "").strip().upper() if up is not None else "Y_UP"
    if axis == "Y_UP":
        v = np.stack([v[:, 0], -v[:, 2], v[:, 1]], axis=1)
    elif axis == "X_UP":
        v = np.stack([-v[:, 2], v[:, 1], v[:, 0]], axis=1)
    return v


def _clean(v: np.ndarray, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge coincident vertices (1e-9 of the size), drop zero-area and
    repeated triangles and unused vertices."""
    size = float(np.max(np.ptp(v, axis=0))) if v.size else 0.0
    q = np.round(v / max(size * 1e-9, 1e-300)).astype(np.int64)
    _, first, inverse = np.unique(q, axis=0, return_index=True, return_inverse=True)
    f = inverse.reshape(-1)[f]
    v = v[first]
    a = np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    f = f[a > 2.0 * _AREA_REL * max(size, 1e-300) ** 2]
    if f.shape[0]:
        key = np.sort(f, axis=1)
        _, keep = np.unique(key, axis=0, return_index=True)
        f = f[np.sort(keep)]
    used = np.unique(f)
    remap = np.full(v.shape[0], -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    return v[used], remap[f]


_SEED_DIRS = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]]
                      + [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)


def hull_points(vertices, max_vertices: int = hull_lib.MAX_HULL_VERTICES) -> np.ndarray:
    """At most ``max_vertices`` of ``vertices`` whose convex hull stands for
    theirs: all hull vertices when they are few enough; else, starting from
    the vertices extreme along the 6 axis and 8 diagonal directions, the
    vertex farthest outside the hull so far is added until the hull has
    ``max_vertices`` vertices (greedy, as Quickhull stopped early: the
    reduced hull lies inside the exact one; ``hull_deviation`` gives the
    largest gap)."""
    from scipy.spatial import ConvexHull, QhullError

    p = np.asarray(vertices, dtype=np.float64)
    try:
        hv = p[ConvexHull(p).vertices]
    except QhullError:
        return p  # flat: build_hull reports it
    if len(hv) <= max_vertices:
        return hv
    c = hv.mean(axis=0)
    sel = list(np.unique(np.argmax((hv - c) @ _SEED_DIRS.T, axis=0)))
    for _ in range(4 * max_vertices):
        try:
            h = ConvexHull(hv[sel])
        except QhullError:  # the seeds are flat: add the farthest from their centre
            far = int(np.argmax(np.linalg.norm(hv - hv[sel].mean(axis=0), axis=1)))
            sel.append(far)
            continue
        kept = [sel[i] for i in h.vertices]
        d = np.max(hv @ h.equations[:, :3].T + h.equations[:, 3], axis=1)
        k = int(np.argmax(d))
        if len(kept) >= max_vertices or d[k] <= 1e-9 * float(np.max(np.ptp(hv, axis=0))):
            sel = kept
            break
        sel = kept + [k]
    return hv[sel]


def hull_deviation(vertices, points) -> float:
    """Largest distance [m] of a mesh vertex outside the hull of ``points``
    (0 when the hull holds every vertex)."""
    from scipy.spatial import ConvexHull

    h = ConvexHull(np.asarray(points, dtype=np.float64))
    d = np.asarray(vertices, dtype=np.float64) @ h.equations[:, :3].T + h.equations[:, 3]
    return float(max(0.0, np.max(d)))


def add_mesh_geom(builder, mesh: MeshFile, body: Optional[int] = None, pos=(0.0, 0.0, 0.0),
                  quat=(1.0, 0.0, 0.0, 0.0), surface=None, where: str = "mesh",
                  body_mesh: str = "hull", **kw) -> int:
    """Add ``mesh`` to ``builder`` by the module's rule: a static triangle
    mesh without ``body``, the convex hull (``body_mesh="hull"``) or the
    triangles (``"trimesh"``) on a body. ``pos``/``quat`` as
    ``WorldBuilder.add_trimesh``; ``kw`` (category_bits, collide_bits) passes
    on. Errors start with ``where``. Returns the geom index."""
    if body_mesh not in ("hull", "trimesh"):
        raise ValueError(f"{where}: body_mesh must be 'hull' or 'trimesh' (got {body_mesh!r})")
    args = dict(body=body, pos=pos, quat=quat, surface=surface, **kw)
    try:
        if body is None or body_mesh == "trimesh":
            return builder.add_trimesh(mesh.vertices, mesh.faces, **args)
        n = hull_lib.MAX_HULL_VERTICES
        while True:
            try:
                return builder.add_convex(hull_points(mesh.vertices, n), **args)
            except ValueError as e:
                # build_hull merges nearly coplanar triangles into faces; on
                # a dense, nearly flat patch that can leave a vertex off its
                # face ("internal error"): a coarser reduction avoids it
                if "internal error" not in str(e) or n <= 16:
                    raise
                n -= 2
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


__all__ = ["MeshFile", "load_mesh", "add_mesh_geom", "hull_points", "hull_deviation",
           "MESH_EXTENSIONS"]
