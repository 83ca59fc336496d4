"""Hull vs closed convex mesh against the solid it bounds (float64, numpy truth).

For a box, the cylinder's 16-gon prism and a random convex hull against a
closed convex mesh (the 12-triangle box mesh, or the triangulated scipy hull
of random points), at uniform random poses with the shape's centre outside
the solid, this compares the trimesh pair with numpy:

- per contact: its depth against the solid's overlap along its normal,
  max over mesh vertices of n.x - min over hull vertices of n.y (a contact
  never deeper; ``over`` counts those deeper by more than 1e-9 m);
- deepest contact against the exact penetration depth d* (the minimum of
  that overlap over the facets of the scipy Minkowski difference), over the
  touching poses, and over the shallow ones: d* below the gap, along the
  minimising axis a*, from the support feature to the next mesh vertex (the
  condition under which every triangle touching the hull has a* among its
  axes, docs/COLLISION.md);
- and the hull-hull pair (convex-convex against the mesh's hull).

Usage: PYTHONPATH=<tree> python bench/studies/trimesh_cones_truth.py [poses]
(runs on trees before the normal cones too, for the before numbers).
"""
from __future__ import annotations

import sys
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.spatial import ConvexHull  # noqa: E402
from scipy.spatial.transform import Rotation  # noqa: E402

from jaxode.build import hull as hull_lib  # noqa: E402
from jaxode.build import meshes as mesh_lib  # noqa: E402
from jaxode.sim.collision import convex  # noqa: E402
from jaxode.sim.collision import trimesh as tm  # noqa: E402
from jaxode.sim.collision.contact import GeomWorld, Hull, Mesh  # noqa: E402

# the closed-form shapes the tests use (tests/truths.py, next to this tree's bench/)
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from truths import box_points, oriented_hull  # noqa: E402

RNG = np.random.default_rng(7)


def hull_tables(points):
    return Hull(**{k: jnp.asarray(x[0]) for k, x in
                   hull_lib.pad_hulls([hull_lib.build_hull(points)]).items()})


def triangles(data):
    """All the mesh's triangles at the identity pose (with cones when the tree has them)."""
    n = len(data.tris)
    if hasattr(tm, "place_triangles"):
        mesh = Mesh(**{k: jnp.asarray(x[0]) for k, x in mesh_lib.pad_meshes([data]).items()})
        return tm.place_triangles(mesh, jnp.zeros(3), jnp.eye(3), jnp.arange(n), jnp.ones(n, bool))
    c = data.verts[data.tris]
    return tm.Triangles(a=jnp.asarray(c[:, 0]), b=jnp.asarray(c[:, 1]), c=jnp.asarray(c[:, 2]),
                        normal=jnp.asarray(data.normals), edge_kind=jnp.asarray(data.edge_kind),
                        corner_kind=jnp.asarray(data.corner_kind), valid=jnp.ones(n, bool))


def shape_points(name):
    if name == "box":
        return box_points(np.array([0.4, 0.3, 0.2]))
    if name == "cylinder":
        ang = 2 * np.pi * np.arange(16) / 16
        ring = np.stack([0.2 * np.cos(ang), 0.2 * np.sin(ang)], 1)
        return np.concatenate([np.c_[ring, np.full(16, z)] for z in (-0.25, 0.25)])
    p = np.random.default_rng(3).normal(size=(20, 3))
    return 0.25 * p / np.linalg.norm(p, axis=1, keepdims=True) * np.array([1.0, 0.8, 0.6])


def pair_fns(name, mesh_hull, hpts):
    size = {"box": jnp.array([0.4, 0.3, 0.2]), "cylinder": jnp.array([0.2, 0.5, 0.0])}
    if name == "box":
        return (lambda g1, g2, t: tm.box_trimesh(g1, g2, t),
                lambda g1, g2: convex.box_convex(g1, g2, mesh_hull), size["box"])
    if name == "cylinder":
        return (lambda g1, g2, t: tm.cylinder_trimesh(g1, g2, t),
                lambda g1, g2: convex.cylinder_convex(g1, g2, mesh_hull), size["cylinder"])
    h = hull_tables(hpts)
    r = float(np.max(np.linalg.norm(hpts, axis=1)))
    return (lambda g1, g2, t: tm.convex_trimesh(g1, g2, t, h),
            lambda g1, g2: convex.convex_convex(g1, g2, h, mesh_hull), jnp.array([0.0, r, 0.0]))


def minkowski(sv, hv):
    """Exact penetration depth and axis of the solids hull(sv), hull(hv) (origin inside S - H)."""
    d = (sv[:, None] - hv[None]).reshape(-1, 3)
    h = ConvexHull(d)
    off = -h.equations[:, 3]  # n . z <= off inside
    k = np.argmin(off)
    return off[k], h.equations[k, :3]


def run(mesh_name, name, poses):
    if mesh_name == "box":
        mv, mt = oriented_hull(box_points(np.array([0.8, 0.6, 0.5])))
    else:
        p = np.random.default_rng(11).normal(size=(30, 3))
        mv, mt = oriented_hull(0.4 * p / np.linalg.norm(p, axis=1, keepdims=True)
                               * np.array([1.0, 0.8, 0.6]))
    data = mesh_lib.build_mesh(mv, mt)
    tris = triangles(data)
    mesh_hull = hull_tables(mv)
    hpts = shape_points(name)
    fn, cfn, size = pair_fns(name, mesh_hull, hpts)
    g2 = GeomWorld(jnp.zeros(3), jnp.eye(3), jnp.zeros(3))

    @jax.jit
    @jax.vmap
    def both(p, r):
        g1 = GeomWorld(p, r, size)
        c = fn(g1, g2, tris)
        cc = cfn(g1, g2)
        return c.pos, c.normal, c.depth, c.valid, cc.depth, cc.valid

    rots = Rotation.random(poses, random_state=RNG.integers(1 << 31)).as_matrix()
    ext = np.max(np.abs(mv), 0) + np.max(np.linalg.norm(hpts, axis=1))
    pos = RNG.uniform(-1, 1, (poses, 3)) * ext
    # the shape's centre (its hull's interior point) outside the solid (one-sided rule)
    eq = ConvexHull(mv).equations
    centre = pos + rots @ np.asarray(hull_tables(hpts).centre)  # the hull's interior point
    outside = np.max(centre @ eq[:, :3].T + eq[:, 3], 1) > 1e-9
    pos, rots = pos[outside], rots[outside]
    out = [both(jnp.asarray(pos[k:k + 100]), jnp.asarray(rots[k:k + 100]))
           for k in range(0, len(pos), 100)]
    cp, cn, cd, cv, ccd, ccv = (np.concatenate([np.asarray(o[j]) for o in out]) for j in range(6))
    stats = dict(touching=0, shallow=0, over=0, over_max=0.0, deeper=0, deeper_max=0.0,
                 shallower=0, shallower_max=0.0, s_deeper=0, s_deeper_max=0.0, s_shallower=0,
                 s_shallower_max=0.0, cc_diff=0, cc_diff_max=0.0, missed=0, short=0, short_max=0.0)
    for i in range(len(pos)):
        hv = pos[i] + hpts @ rots[i].T
        ov = lambda a: np.max(mv @ a) - np.min(hv @ a)  # noqa: E731
        for k in np.nonzero(cv[i])[0]:
            e = cd[i, k] - ov(cn[i, k])
            if e > 1e-9:
                stats["over"] += 1
                stats["over_max"] = max(stats["over_max"], e)
        dstar, a = minkowski(mv, hv)
        if dstar <= 1e-9:
            continue
        stats["touching"] += 1
        proj = mv @ a
        hstar = proj.max()
        rest = proj[proj < hstar - 1e-9]
        gap = hstar - (rest.max() if len(rest) else -np.inf)
        shallow = dstar < gap
        stats["shallow"] += shallow
        deep = np.max(np.where(cv[i], cd[i], 0.0))
        if cv[i].any():  # the deepest contact against the overlap along its own normal
            k = np.argmax(np.where(cv[i], cd[i], -np.inf))
            e = ov(cn[i, k]) - cd[i, k]
            if e > 1e-9:
                stats["short"] += 1
                stats["short_max"] = max(stats["short_max"], e)
        if not cv[i].any():
            stats["missed"] += 1
        diff = deep - dstar
        for pre, ok in (("", True), ("s_", shallow)):
            if not ok:
                continue
            if diff > 1e-9:
                stats[pre + "deeper"] += 1
                stats[pre + "deeper_max"] = max(stats[pre + "deeper_max"], diff)
            elif diff < -1e-9:
                stats[pre + "shallower"] += 1
                stats[pre + "shallower_max"] = max(stats[pre + "shallower_max"], -diff)
        dc = np.max(np.where(ccv[i], ccd[i], 0.0))
        if abs(dc - dstar) > 1e-9:
            stats["cc_diff"] += 1
            stats["cc_diff_max"] = max(stats["cc_diff_max"], abs(dc - dstar))
    return stats


def main():
    poses = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for mesh_name in ("box", "random"):
        for name in ("box", "cylinder", "convex"):
            s = run(mesh_name, name, poses)
            t, sh = max(s["touching"], 1), max(s["shallow"], 1)
            print(f"{mesh_name:6s} mesh, {name:8s}: touching {s['touching']:4d}, contacts deeper than "
                  f"the overlap along their normal {s['over']} (max {s['over_max']:.2e}), deepest short of "
                  f"it {100 * s['short'] / t:.1f} % (max {s['short_max']:.2e}); deepest vs d*: "
                  f"deeper {100 * s['deeper'] / t:.1f} % (max {s['deeper_max']:.2e}), shallower "
                  f"{100 * s['shallower'] / t:.1f} % (max {s['shallower_max']:.2e}), none {s['missed']}; "
                  f"shallow poses {s['shallow']}: deeper {100 * s['s_deeper'] / sh:.1f} % "
                  f"(max {s['s_deeper_max']:.2e}), shallower {100 * s['s_shallower'] / sh:.1f} % "
                  f"(max {s['s_shallower_max']:.2e}); convex-convex != d* {100 * s['cc_diff'] / t:.1f} % "
                  f"(max {s['cc_diff_max']:.2e})", flush=True)


if __name__ == "__main__":
    main()
