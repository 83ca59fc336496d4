"""Host-side triangle mesh tables (numpy only; never imports JAX).

``build_mesh(vertices, triangles)`` validates a triangle mesh (geom frame,
metres; the tables are fixed, the geom's pose may move with a body) and
derives what the pair functions, the ray caster and ``mass.trimesh`` need:

- unit face normals from the winding (counter-clockwise seen from the side
  the normal points to: the outside of a solid, the top of terrain);
- a kind per triangle edge and corner, for the internal-edge rule: an edge
  shared with a coplanar neighbour (dihedral angle under ``FLAT_ANGLE``) is
  FLAT, one whose neighbour folds up towards the normal side is CONCAVE,
  one whose neighbour folds away (or a boundary edge, or an edge of more
  than two triangles) is CONVEX. A corner takes the largest kind of the mesh
  edges at its vertex (a vertex inside a flat fan is FLAT). Contacts on
  FLAT features use the face normal; on CONCAVE features they are dropped
  (the neighbour's face owns them); only CONVEX features keep their own
  normal (see ``jaxode.sim.collision.trimesh``);
- normal cones, for hulls against the solid the mesh bounds: per triangle
  edge the neighbour's normal, per vertex its distinct face normals in
  order around it with the cone's side planes and the convex edges between
  them (``MeshData``; a vertex on the boundary, at a concave edge, at a
  saddle or with more than ``MAX_CONE_NORMALS`` normals has none);
- a static uniform grid over the mesh's bounding box: each cell lists the
  triangles whose bounding boxes overlap it (padded with -1), each triangle
  knows its first cell per axis (to count it once in a block of cells);
- ``candidate_window`` / ``candidate_count``: the block of cells a geom of
  bounding radius r can touch, and the largest number of distinct triangles
  any such block holds (the builder's default number of candidates K).

``pad_meshes`` stacks several meshes into fixed-size arrays for the Model
(vertex and triangle rows padded by repeating row 0, so minima and maxima
need no mask; cells padded with -1).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from jaxode.build.hull import pad_rows

#: Largest number of triangles one mesh geom may have (static tables).
MAX_MESH_TRIANGLES = 20000
#: Default cap on the candidate triangles per (geom, mesh) pair and step.
DEFAULT_MAX_CANDIDATES = 64
#: Largest number of grid cells per axis.
MAX_GRID_CELLS = 64
#: Dihedral angle [rad] under which two triangles count as coplanar.
FLAT_ANGLE = 1e-3
CONCAVE, FLAT, CONVEX = 0, 1, 2
#: Most distinct face normals a vertex's normal cone may have; a vertex with
#: more gets no cone (its triangles then use only their own normal and edges
#: there, as a vertex whose surface is not convex).
MAX_CONE_NORMALS = 16
_CONE_TOL = 1e-9  # a cone's normals may lie this far (cosine) outside its side planes
_AREA_REL = 1e-12  # a triangle whose area is below this times size^2 is degenerate


@dataclasses.dataclass(frozen=True, eq=False)
class MeshData:
    """One triangle mesh, geom frame, SI units (host numpy, unpadded).

    verts (V, 3) [m]; tris (T, 3) int; normals (T, 3) unit; edge_kind (T, 3)
    int, edge k runs from corner k to corner k+1 (mod 3); corner_kind (T, 3)
    int; closed: every edge is shared by exactly two triangles with opposite
    directions. Grid: origin (3,) [m] its low corner, cell (3,) [m] the cell
    sides, dims (3,) int cells per axis, cells (nx*ny*nz, M) int triangle
    ids (-1: none), cell index ``(i * ny + j) * nz + k``; tri_lo, tri_hi
    (T, 3) [m] triangle bounding boxes; tri_cell (T, 3) int each triangle's
    first cell per axis.

    Normal cones (``_cones``): edge_normal (T, 3, 3) the normal of the
    triangle across edge k (zero: a boundary or non-manifold edge). Per
    vertex, R = the largest count (at least 1): cone_count (V,) int the
    number of distinct face normals around the vertex (faces joined by flat
    edges count once), 0 where the vertex has no convex normal cone (on the
    boundary, at a concave edge, a saddle, or more than MAX_CONE_NORMALS);
    cone_normals (V, R, 3) those normals counter-clockwise about the outside;
    cone_planes (V, R, 3) the unit side planes of the cone, n_r x n_(r+1)
    oriented inwards (a direction d is in the cone when d . plane >= 0 for
    all r < count; meaningful for count >= 3); cone_other (V, R) int the far
    vertex of the convex mesh edge between n_r and n_(r+1) (its Gauss arc);
    vert_open (V,) bool the vertex is on the boundary (or a non-manifold edge).
    Padding repeats entry 0 (other: the vertex itself).
    """

    verts: np.ndarray
    tris: np.ndarray
    normals: np.ndarray
    edge_kind: np.ndarray
    corner_kind: np.ndarray
    closed: bool
    origin: np.ndarray
    cell: np.ndarray
    dims: np.ndarray
    cells: np.ndarray
    tri_lo: np.ndarray
    tri_hi: np.ndarray
    tri_cell: np.ndarray
    edge_normal: np.ndarray
    cone_normals: np.ndarray
    cone_planes: np.ndarray
    cone_other: np.ndarray
    cone_count: np.ndarray
    vert_open: np.ndarray

    @property
    def radius(self) -> float:
        """Largest distance of a vertex from the geom origin [m]."""
        return float(np.max(np.linalg.norm(self.verts, axis=1)))


def _validate(vertices, triangles, where: str, max_triangles: int):
    try:
        v = np.asarray(vertices, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: vertices must be a (V, 3) array of numbers") from None
    if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] < 3:
        raise ValueError(f"{where}: vertices must be a (V, 3) array with V >= 3 (got shape {v.shape})")
    if not np.all(np.isfinite(v)):
        bad = int(np.argwhere(~np.all(np.isfinite(v), axis=1))[0, 0])
        raise ValueError(f"{where}: vertices must be finite (vertex {bad} is {v[bad].tolist()})")
    t = np.asarray(triangles)
    if t.ndim != 2 or t.shape[1] != 3 or t.shape[0] < 1:
        raise ValueError(f"{where}: triangles must be a (T, 3) array of vertex indices with "
                         f"T >= 1 (got shape {t.shape})")
    if not (np.issubdtype(t.dtype, np.integer)
            or (np.issubdtype(t.dtype, np.floating) and np.all(t == np.round(t)))):
        raise ValueError(f"{where}: triangles must hold integer vertex indices (got dtype {t.dtype})")
    t = t.astype(np.int64)
    if t.shape[0] > max_triangles:
        raise ValueError(f"{where}: triangles: {t.shape[0]} triangles, more than the limit "
                         f"MAX_MESH_TRIANGLES = {max_triangles}; simplify the mesh or split it "
                         f"into several geoms")
    out = (t < 0) | (t >= v.shape[0])
    if np.any(out):
        k = int(np.argwhere(np.any(out, axis=1))[0, 0])
        raise ValueError(f"{where}: triangles: triangle {k} = {t[k].tolist()} has a vertex index "
                         f"outside [0, {v.shape[0] - 1}]")
    size = float(np.max(np.ptp(v, axis=0)))
    area2 = np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1)
    degen = area2 <= 2.0 * _AREA_REL * max(size, 1e-300) ** 2
    if np.any(degen):
        k = int(np.argmax(degen))
        raise ValueError(f"{where}: triangles: triangle {k} = {t[k].tolist()} is degenerate "
                         f"(zero area: repeated or collinear vertices)")
    return v, t, area2


def _edge_kinds(v, t, normals):
    """Edge kinds (T, 3), corner kinds (T, 3) and whether the mesh is closed."""
    owners: dict = {}
    for i, tri in enumerate(t):
        for k in range(3):
            a, b = int(tri[k]), int(tri[(k + 1) % 3])
            owners.setdefault((min(a, b), max(a, b)), []).append((i, k, a < b))
    edge_kind = np.full(t.shape, CONVEX, dtype=np.int32)
    cos_flat = np.cos(FLAT_ANGLE)
    closed = True
    vert_kind = np.full(len(v), CONCAVE, dtype=np.int32)
    for (a, b), own in owners.items():
        if len(own) != 2 or own[0][2] == own[1][2]:
            closed = False
        if len(own) == 2:
            (i, ki, _), (j, kj, _) = own
            for (p, kp), q in (((i, ki), j), ((j, kj), i)):
                other = [x for x in t[q] if x != a and x != b][0]
                if normals[p] @ normals[q] >= cos_flat:
                    edge_kind[p, kp] = FLAT
                elif normals[p] @ (v[other] - v[a]) > 0:
                    edge_kind[p, kp] = CONCAVE
        for i, k, _ in own:
            vert_kind[a] = max(vert_kind[a], edge_kind[i, k])
            vert_kind[b] = max(vert_kind[b], edge_kind[i, k])
    return edge_kind, vert_kind[t], closed


def _cones(v, t, normals, edge_kind):
    """Normal-cone tables (see ``MeshData``): edge_normal, cone_normals,
    cone_planes, cone_other, cone_count, vert_open."""
    nv = len(v)
    owners: dict = {}
    for i, tri in enumerate(t):
        for k in range(3):
            a, b = int(tri[k]), int(tri[(k + 1) % 3])
            owners.setdefault((min(a, b), max(a, b)), []).append((i, k, a < b))
    edge_normal = np.zeros((len(t), 3, 3))
    vert_open = np.zeros(nv, bool)
    for (a, b), own in owners.items():
        if len(own) == 2 and own[0][2] != own[1][2]:
            (i, ki, _), (j, kj, _) = own
            edge_normal[i, ki], edge_normal[j, kj] = normals[j], normals[i]
        else:
            vert_open[[a, b]] = True
    # the fan of each vertex, counter-clockwise about the outside: triangle
    # (p, a, b) is followed by the one whose first far vertex is b
    fans: dict = {}
    for i, tri in enumerate(t):
        for j in range(3):
            fans.setdefault(int(tri[j]), {})[int(tri[(j + 1) % 3])] = (i, j)
    cones = []
    for p in range(nv):
        fan = fans.get(p)
        cones.append(None)
        if fan is None or vert_open[p]:
            continue
        i, j = next(iter(fan.values()))
        seq = []
        for _ in range(len(fan)):
            seq.append((i, j))
            b = int(t[i][(j + 2) % 3])
            if b not in fan:
                break
            i, j = fan[b]
        if len(seq) != len(fan) or seq[0] != (i, j):
            vert_open[p] = True  # not one closed fan (non-manifold vertex)
            continue
        # the edge after face s (p to its far vertex b) and its kind
        kinds = [edge_kind[i, (j + 2) % 3] for i, j in seq]
        if CONCAVE in kinds:
            continue
        conv = [s for s, k in enumerate(kinds) if k == CONVEX]
        if not conv:
            cones[p] = ([normals[seq[0][0]]], [p])
            continue
        ns, other = [], []
        for r, s in enumerate(conv):
            first = seq[(s + 1) % len(seq)][0]  # the run after the convex edge s
            nxt = conv[(r + 1) % len(conv)]
            ns.append(normals[first])
            i, j = seq[nxt]
            other.append(int(t[i][(j + 2) % 3]))
        cones[p] = (ns, other)
    count = np.zeros(nv, np.int64)
    rmax = max([len(c[0]) for c in cones if c is not None and len(c[0]) <= MAX_CONE_NORMALS]
               + [1])
    cn = np.zeros((nv, rmax, 3))
    cg = np.zeros((nv, rmax, 3))
    co = np.repeat(np.arange(nv)[:, None], rmax, axis=1)
    for p, c in enumerate(cones):
        if c is None or len(c[0]) > MAX_CONE_NORMALS:
            continue
        ns, other = np.array(c[0]), c[1]
        m = len(ns)
        planes = np.cross(ns, np.roll(ns, -1, axis=0))
        if m >= 3:
            ln = np.linalg.norm(planes, axis=1)
            if np.any(ln < 1e-12):
                continue
            planes /= ln[:, None]
            if planes[0] @ ns[2] < 0:
                planes = -planes
            # a convex cone: every normal on the inner side of every side plane,
            # and all of them within one open hemisphere (their mean)
            mean = ns.sum(0)
            if (np.min(planes @ ns.T) < -_CONE_TOL or np.linalg.norm(mean) < 1e-9
                    or np.min(ns @ mean) <= 0):
                continue
        elif m == 2:
            if ns[0] @ ns[1] <= -1 + 1e-9:
                continue
            ln = np.linalg.norm(planes, axis=1)
            planes /= ln[:, None]
        count[p] = m
        cn[p, :m], cg[p, :m], co[p, :m] = ns, planes, other
        cn[p, m:], cg[p, m:], co[p, m:] = ns[0], planes[0], other[0]
    return edge_normal, cn, cg, co, count, vert_open


def _grid(v, t):
    """Uniform grid: cells about twice the mean triangle size, at most
    MAX_GRID_CELLS per axis; returns origin, cell, dims, cells, tri_lo,
    tri_hi, tri_cell."""
    p = v[t]  # (T, 3, 3)
    tri_lo, tri_hi = p.min(axis=1), p.max(axis=1)
    lo, hi = v.min(axis=0), v.max(axis=0)
    ext = hi - lo
    area = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
    h = 2.0 * np.sqrt(area.mean())
    dims = np.clip(np.ceil(ext / h).astype(np.int64), 1, MAX_GRID_CELLS)
    cell = np.where(ext > 0, ext / dims, 1.0)
    first = np.clip(np.floor((tri_lo - lo) / cell).astype(np.int64), 0, dims - 1)
    last = np.clip(np.floor((tri_hi - lo) / cell).astype(np.int64), 0, dims - 1)
    lists: dict = {}
    for i in range(len(t)):
        for a in range(first[i, 0], last[i, 0] + 1):
            for b in range(first[i, 1], last[i, 1] + 1):
                for c in range(first[i, 2], last[i, 2] + 1):
                    lists.setdefault((a * dims[1] + b) * dims[2] + c, []).append(i)
    m = max(len(x) for x in lists.values())
    cells = np.full((int(np.prod(dims)), m), -1, dtype=np.int64)
    for key, ids in lists.items():
        cells[key, :len(ids)] = ids
    return lo, cell, dims, cells, tri_lo, tri_hi, first


def build_mesh(vertices, triangles, where: str = "trimesh",
               max_triangles: int = MAX_MESH_TRIANGLES) -> MeshData:
    """Validated mesh tables of ``vertices`` (V, 3) [m] and ``triangles``
    (T, 3) int; errors name ``where`` and the field. Raises ValueError for
    non-finite vertices, indices out of range, degenerate (zero-area)
    triangles and more than ``max_triangles`` triangles."""
    v, t, area2 = _validate(vertices, triangles, where, max_triangles)
    normals = np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]) / area2[:, None]
    edge_kind, corner_kind, closed = _edge_kinds(v, t, normals)
    edge_normal, cone_normals, cone_planes, cone_other, cone_count, vert_open = _cones(
        v, t, normals, edge_kind)
    origin, cell, dims, cells, tri_lo, tri_hi, tri_cell = _grid(v, t)
    return MeshData(verts=v, tris=t, normals=normals, edge_kind=edge_kind,
                    corner_kind=corner_kind, closed=closed, origin=origin, cell=cell, dims=dims,
                    cells=cells, tri_lo=tri_lo, tri_hi=tri_hi, tri_cell=tri_cell,
                    edge_normal=edge_normal, cone_normals=cone_normals, cone_planes=cone_planes,
                    cone_other=cone_other, cone_count=cone_count, vert_open=vert_open)


def candidate_window(mesh: MeshData, radius: float) -> np.ndarray:
    """Cells per axis (3,) int that a query box of half size ``radius`` [m]
    can overlap: floor(2 r / cell) + 2, at most the grid's dims."""
    return np.minimum(np.floor(2.0 * radius / mesh.cell).astype(np.int64) + 2, mesh.dims)


def candidate_count(mesh: MeshData, window) -> int:
    """The largest number of distinct triangles in any block of ``window``
    (3,) cells of the grid (the exact worst case of the candidate gather, by
    a 3-D difference array over the block's first cell)."""
    w = np.asarray(window, dtype=np.int64)
    d = mesh.dims
    last = np.clip(np.floor((mesh.tri_hi - mesh.origin) / mesh.cell).astype(np.int64), 0, d - 1)
    s0 = np.maximum(mesh.tri_cell - w + 1, 0)  # block starts that reach the triangle
    s1 = last + 1
    diff = np.zeros(tuple(d + 1), dtype=np.int64)
    for corner in range(8):
        bits = [(corner >> k) & 1 for k in range(3)]
        idx = tuple(np.where(bits[k], s1[:, k], s0[:, k]) for k in range(3))
        np.add.at(diff, idx, (-1) ** sum(bits))
    count = np.cumsum(np.cumsum(np.cumsum(diff, 0), 1), 2)[:d[0], :d[1], :d[2]]
    return int(count.max())


def pad_meshes(meshes: list) -> dict:
    """Stack meshes into padded numpy tables (leading axis: mesh), keys as
    :class:`jaxode.sim.collision.contact.Mesh`'s fields."""
    nv = max(len(m.verts) for m in meshes)
    nt = max(len(m.tris) for m in meshes)
    nc = max(len(m.cells) for m in meshes)
    nm = max(m.cells.shape[1] for m in meshes)
    nr = max(m.cone_normals.shape[1] for m in meshes)

    def pad_r(a):  # the cone axis padded by repeating entry 0
        return np.concatenate([a, np.repeat(a[:, :1], nr - a.shape[1], axis=1)], axis=1)

    out: dict = {k: [] for k in ("verts", "tris", "normals", "edge_kind", "corner_kind",
                                 "tri_lo", "tri_hi", "tri_cell", "origin", "cell", "dims",
                                 "cells", "ntri", "edge_normal", "cone_normals",
                                 "cone_planes", "cone_other", "cone_count", "vert_open")}
    for m in meshes:
        cells = np.full((nc, nm), -1, dtype=np.int64)
        cells[:m.cells.shape[0], :m.cells.shape[1]] = m.cells
        out["verts"].append(pad_rows(m.verts, nv))
        for k in ("tris", "normals", "edge_kind", "corner_kind", "tri_lo", "tri_hi", "tri_cell",
                  "edge_normal"):
            out[k].append(pad_rows(getattr(m, k), nt))
        for k in ("cone_normals", "cone_planes", "cone_other"):
            out[k].append(pad_rows(pad_r(getattr(m, k)), nv))
        for k in ("cone_count", "vert_open"):
            out[k].append(pad_rows(getattr(m, k), nv))
        out["origin"].append(m.origin)
        out["cell"].append(m.cell)
        out["dims"].append(m.dims)
        out["cells"].append(cells)
        out["ntri"].append(len(m.tris))
    ints = {"tris", "edge_kind", "corner_kind", "tri_cell", "dims", "cells", "ntri", "cone_other",
            "cone_count", "vert_open"}
    return {k: np.array(v, dtype=np.int32 if k in ints else np.float64) for k, v in out.items()}
