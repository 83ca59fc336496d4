"""Host-side convex hull tables (numpy + scipy; never imports JAX).

``build_hull(points)`` turns a point cloud (geom frame, metres) into the
tables the convex pair functions, the ray caster and ``mass.convex`` use:
vertices, polygon faces (coplanar hull triangles merged, collinear boundary
vertices dropped) with unit outward normals and plane offsets, unique edges
with their two adjacent faces, and a fan triangulation of the faces. The
hull itself is Qhull's (``scipy.spatial.ConvexHull``); everything after it is
plain bookkeeping with relative tolerances.

``pad_hulls`` stacks several hulls into fixed-size arrays (the largest of each
table) for the Model: padding rows repeat row 0 (a vertex, face, edge or
triangle that exists), so maxima, minima and supports over a padded table are
those of the real one without masks; the counts mark the real rows where
duplicates would matter (face loops, contact candidates).
"""
from __future__ import annotations

import dataclasses

import numpy as np

#: Largest number of hull vertices a convex geom may have (static table sizes,
#: and the cost of the pair functions, grow with it).
MAX_HULL_VERTICES = 64

_COPLANAR_REL = 1e-7  # a vertex this close (relative to the size) to a plane lies on it
_COLLINEAR_REL = 1e-9  # |cross| of consecutive loop edges (relative to size^2) below: collinear


@dataclasses.dataclass(frozen=True, eq=False)
class HullData:
    """One convex hull, geom frame, SI units (host numpy, unpadded).

    verts (V, 3) [m]; normals (F, 3) unit outward face normals; offsets (F,)
    [m], the solid is ``normals @ x <= offsets``; faces: F vertex loops
    (int arrays), counter-clockwise seen from outside (right-handed about the
    normal); edges (E, 2) vertex indices, each edge once; edge_faces (E, 2)
    the two faces that meet at the edge; tris (T, 3) the faces' fan
    triangles, counter-clockwise from outside; centre (3,) [m] the vertex mean
    (an interior point); volume [m^3].
    """

    verts: np.ndarray
    normals: np.ndarray
    offsets: np.ndarray
    faces: tuple
    edges: np.ndarray
    edge_faces: np.ndarray
    tris: np.ndarray
    centre: np.ndarray
    volume: float

    @property
    def radius(self) -> float:
        """Largest distance of a vertex from the geom origin [m]."""
        return float(np.max(np.linalg.norm(self.verts, axis=1)))


def _qhull(p: np.ndarray, where: str):
    from scipy.spatial import ConvexHull, QhullError

    try:
        return ConvexHull(p)
    except QhullError:
        raise ValueError(f"{where}: the points are coplanar or collinear; a convex geom needs "
                         f"at least 4 points that span a volume") from None


def _groups(tris: np.ndarray, pts: np.ndarray, normals: np.ndarray, tol: float) -> list:
    """Groups of coplanar, edge-adjacent triangles (union-find over shared edges)."""
    parent = list(range(len(tris)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner = {}
    for t, tri in enumerate(tris):
        for k in range(3):
            key = tuple(sorted((tri[k], tri[(k + 1) % 3])))
            owner.setdefault(key, []).append(t)
    for (a, b), ts in owner.items():
        if len(ts) != 2:
            continue
        s, t = ts
        other = [v for v in tris[t] if v != a and v != b][0]
        if (normals[s] @ normals[t] > 0
                and abs(normals[s] @ (pts[other] - pts[a])) <= tol):
            ra, rb = find(s), find(t)
            parent[ra] = rb
    out = {}
    for t in range(len(tris)):
        out.setdefault(find(t), []).append(t)
    return list(out.values())


def _boundary_loop(tris: np.ndarray, group: list, where: str) -> list:
    """The boundary of a group of consistently oriented triangles as one vertex cycle."""
    directed = {(int(tris[t][k]), int(tris[t][(k + 1) % 3])) for t in group for k in range(3)}
    nxt = {a: b for a, b in directed if (b, a) not in directed}
    start = min(nxt)
    loop = [start]
    while nxt[loop[-1]] != start:
        loop.append(nxt[loop[-1]])
        if len(loop) > len(nxt):
            break
    if len(loop) != len(nxt):
        raise ValueError(f"{where}: internal error: a merged hull face is not a simple polygon")
    return loop


def _drop_collinear(loop: list, pts: np.ndarray, tol2: float) -> list:
    keep = []
    n = len(loop)
    for k in range(n):
        a, b, c = pts[loop[k - 1]], pts[loop[k]], pts[loop[(k + 1) % n]]
        if np.sum(np.cross(b - a, c - b) ** 2) > tol2:
            keep.append(loop[k])
    return keep


def build_hull(points, where: str = "points", max_vertices: int = MAX_HULL_VERTICES) -> HullData:
    """Convex hull tables of ``points`` (N, 3) [m]; errors name ``where``.

    Raises ValueError when the points are not an (N, 3) finite array with
    N >= 4, span no volume (coplanar, collinear or coincident), or the hull
    has more than ``max_vertices`` vertices.
    """
    try:
        p = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} must be an (N, 3) array of numbers (got {points!r})") from None
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"{where} must be an (N, 3) array of points (got shape {p.shape})")
    if p.shape[0] < 4:
        raise ValueError(f"{where}: a convex geom needs at least 4 points that span a volume "
                         f"(got {p.shape[0]})")
    if not np.all(np.isfinite(p)):
        raise ValueError(f"{where} must be finite, no NaN or inf")
    size = float(np.max(np.ptp(p, axis=0)))
    if size <= 0.0:
        raise ValueError(f"{where}: the points are coincident; a convex geom needs at least "
                         f"4 points that span a volume")
    h = _qhull(p, where)
    if h.volume <= 1e-12 * size ** 3:
        raise ValueError(f"{where}: the points are coplanar or collinear (hull volume "
                         f"{h.volume:.3g} m^3); a convex geom needs a volume")
    tris = np.array(h.simplices, dtype=np.int64)
    tn = h.equations[:, :3]
    for t in range(len(tris)):  # orient every triangle counter-clockwise from outside
        a, b, c = p[tris[t]]
        if np.cross(b - a, c - a) @ tn[t] < 0:
            tris[t, [1, 2]] = tris[t, [2, 1]]
    loops = []
    for group in _groups(tris, p, tn, _COPLANAR_REL * size):
        loop = _drop_collinear(_boundary_loop(tris, group, where), p, (_COLLINEAR_REL * size ** 2) ** 2)
        loops.append(loop)
    used = sorted({v for loop in loops for v in loop})
    if len(used) > max_vertices:
        raise ValueError(f"{where}: the hull has {len(used)} vertices, more than the limit "
                         f"MAX_HULL_VERTICES = {max_vertices}; simplify the point set")
    index = {v: i for i, v in enumerate(used)}
    verts = p[used]
    faces = tuple(np.array([index[v] for v in loop], dtype=np.int64) for loop in loops)
    normals, offsets = [], []
    for f in faces:
        q = verts[f]
        n = np.sum(np.cross(q, np.roll(q, -1, axis=0)), axis=0)  # Newell's normal
        n = n / np.linalg.norm(n)
        normals.append(n)
        offsets.append(float(np.mean(q @ n)))
    normals, offsets = np.array(normals), np.array(offsets)
    worst = float(np.max(verts @ normals.T - offsets[None]))
    if worst > 1e-6 * size:
        raise ValueError(f"{where}: internal error: hull vertex {worst:.3g} m outside a face")
    edge_map: dict = {}
    for fi, f in enumerate(faces):
        for k in range(len(f)):
            a, b = int(f[k]), int(f[(k + 1) % len(f)])
            edge_map.setdefault((min(a, b), max(a, b)), []).append(fi)
    if any(len(v) != 2 for v in edge_map.values()):
        raise ValueError(f"{where}: internal error: the hull is not a closed polyhedron")
    edges = np.array(sorted(edge_map), dtype=np.int64)
    edge_faces = np.array([edge_map[tuple(e)] for e in edges], dtype=np.int64)
    tris_out = np.array([(f[0], f[k], f[k + 1]) for f in faces for k in range(1, len(f) - 1)],
                        dtype=np.int64)
    centre = verts.mean(axis=0)
    a, b, c = (verts[tris_out[:, k]] - centre for k in range(3))
    volume = float(np.sum(np.einsum("ij,ij->i", a, np.cross(b, c))) / 6.0)
    return HullData(verts=verts, normals=normals, offsets=offsets, faces=faces, edges=edges,
                    edge_faces=edge_faces, tris=tris_out, centre=centre, volume=volume)


def pad_rows(a, n: int) -> np.ndarray:
    """``a`` with rows appended up to ``n``, each a copy of row 0 (a real entry,
    so maxima, minima and supports over the padded table are unchanged)."""
    a = np.asarray(a)
    return np.concatenate([a, np.repeat(a[:1], n - len(a), axis=0)], axis=0)


def pad_hulls(hulls: list) -> dict:
    """Stack hulls into padded numpy tables (leading axis: hull), keys as
    :class:`jaxode.sim.collision.contact.Hull`'s fields; padding repeats row 0."""
    nv = max(len(h.verts) for h in hulls)
    nf = max(len(h.faces) for h in hulls)
    nl = max(len(f) for h in hulls for f in h.faces)
    ne = max(len(h.edges) for h in hulls)
    nt = max(len(h.tris) for h in hulls)

    out = {k: [] for k in ("verts", "normals", "offsets", "faces", "face_size", "edges",
                           "edge_faces", "tris", "centre", "nvert", "nface")}
    for h in hulls:
        loops = np.array([np.concatenate([f, np.full(nl - len(f), f[0])]) for f in h.faces])
        out["verts"].append(pad_rows(h.verts, nv))
        out["normals"].append(pad_rows(h.normals, nf))
        out["offsets"].append(pad_rows(h.offsets, nf))
        out["faces"].append(pad_rows(loops, nf))
        out["face_size"].append(pad_rows(np.array([len(f) for f in h.faces]), nf))
        out["edges"].append(pad_rows(h.edges, ne))
        out["edge_faces"].append(pad_rows(h.edge_faces, ne))
        out["tris"].append(pad_rows(h.tris, nt))
        out["centre"].append(h.centre)
        out["nvert"].append(len(h.verts))
        out["nface"].append(len(h.faces))
    ints = {"faces", "face_size", "edges", "edge_faces", "tris", "nvert", "nface"}
    return {k: np.array(v, dtype=np.int32 if k in ints else np.float64) for k, v in out.items()}


_ODE_PLANE_REL = 1e-6  # a point this close (relative to the size) to a plane lies on it


def from_ode(planes, points, polygons, where: str = "convex") -> HullData:
    """The hull tables of a polyhedron given as ODE's dCreateConvex takes it.

    planes: F planes ``(nx, ny, nz, d)``, the face is ``n . x = d`` with n
    pointing out of the solid (n need not be unit: it is normalised with d);
    points (V, 3) [m]; polygons: ODE's flat index list ``[k, i_1 .. i_k, k,
    ...]``, one polygon per plane, in the planes' order (k >= 3 indices into
    points). All in the geom frame. Checked, with errors naming ``where``
    and the field: shapes and finiteness, the index list (one polygon per
    plane, indices in range, nothing left over), every polygon's vertices on
    its plane, every point on the inner side of every plane (outward normals,
    a convex solid), every polygon edge shared by exactly two polygons (a
    closed surface), and the convex hull of the points having exactly these
    faces; that hull is returned (``WorldBuilder.add_convex(points,
    planes=, polygons=)`` calls this).
    """
    try:
        pl = np.asarray(planes, dtype=np.float64)
        p = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: planes and points must be arrays of numbers") from None
    if pl.ndim != 2 or pl.shape[1] != 4 or len(pl) < 4:
        raise ValueError(f"{where}: planes must be an (F, 4) array (nx, ny, nz, d) with F >= 4 "
                         f"(got shape {pl.shape})")
    if p.ndim != 2 or p.shape[1] != 3 or len(p) < 4:
        raise ValueError(f"{where}: points must be a (V, 3) array with V >= 4 (got shape {p.shape})")
    if not (np.all(np.isfinite(pl)) and np.all(np.isfinite(p))):
        raise ValueError(f"{where}: planes and points must be finite, no NaN or inf")
    norm = np.linalg.norm(pl[:, :3], axis=1)
    if np.any(norm <= 0):
        raise ValueError(f"{where}: planes[{int(np.argmin(norm))}] has a zero normal")
    n, d = pl[:, :3] / norm[:, None], pl[:, 3] / norm
    flat = np.asarray(polygons).reshape(-1)
    if not np.issubdtype(flat.dtype, np.integer):
        raise ValueError(f"{where}: polygons must be ODE's flat integer list [k, i_1 .. i_k, ...]")
    loops, at = [], 0
    for f in range(len(pl)):
        if at >= len(flat):
            raise ValueError(f"{where}: polygons holds {f} polygons, planes {len(pl)}: one "
                             f"polygon per plane")
        k = int(flat[at])
        loop = flat[at + 1:at + 1 + k]
        if k < 3 or len(loop) < k:
            raise ValueError(f"{where}: polygons: polygon {f} has count {k}; each polygon is "
                             f"k >= 3 followed by k point indices")
        if np.any(loop < 0) or np.any(loop >= len(p)):
            raise ValueError(f"{where}: polygons: polygon {f} indexes outside points "
                             f"[0, {len(p)})")
        loops.append(loop.astype(np.int64))
        at += 1 + k
    if at != len(flat):
        raise ValueError(f"{where}: polygons has {len(flat) - at} entries after the {len(pl)} "
                         f"polygons of the {len(pl)} planes")
    size = float(np.max(np.ptp(p, axis=0)))
    tol = _ODE_PLANE_REL * max(size, 1e-300)
    for f, loop in enumerate(loops):
        off = np.abs(p[loop] @ n[f] - d[f]).max()
        if off > tol:
            raise ValueError(f"{where}: polygon {f}'s points lie up to {off:.3g} m off planes[{f}] "
                             f"(n . x = d)")
    out = p @ n.T - d  # (V, F): > 0 outside
    if out.max() > tol:
        v, f = np.unravel_index(np.argmax(out), out.shape)
        raise ValueError(f"{where}: points[{v}] is {out[v, f]:.3g} m outside planes[{f}]: plane "
                         f"normals must point out of a convex solid")
    edges = {}
    for loop in loops:
        for a, b in zip(loop, np.roll(loop, -1)):
            key = (min(a, b), max(a, b))
            edges[key] = edges.get(key, 0) + 1
    bad = [e for e, c in edges.items() if c != 2]
    if bad:
        raise ValueError(f"{where}: polygons do not close a surface: edge {bad[0]} belongs to "
                         f"{edges[bad[0]]} polygons (each edge must belong to exactly two)")
    used = np.unique(np.concatenate(loops))
    hull = build_hull(p[used], f"{where}: points")
    for f in range(len(pl)):
        match = (hull.normals @ n[f] > 1 - 1e-6) & (np.abs(hull.offsets - d[f]) <= tol)
        if not np.any(match):
            raise ValueError(f"{where}: planes[{f}] is no face of the points' convex hull")
    if len(hull.normals) != len(pl):
        raise ValueError(f"{where}: the points' convex hull has {len(hull.normals)} faces, "
                         f"planes gives {len(pl)} (coplanar polygons must be one polygon)")
    return hull
