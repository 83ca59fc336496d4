"""Stages 2-3: broadphase filtering and contact generation, vectorised per pair kind.

Candidate pairs are fixed at build time (category/collide bits, same body,
static-static excluded) and grouped by ``(type1, type2)``. Each step:

1. every candidate's AABB-overlap test (planes always pass);
2. per group, at most ``capacity`` overlapping pairs are compacted and sent to
   the group's pair function, vmapped; the excess is counted as overflow; a
   group of more than 2 x ``PAIR_CHUNK`` slots runs it ``PAIR_CHUNK`` pairs at a
   time up to the last overlapping pair (of any world in a batch), so the
   unused tail of its capacity costs nothing (:func:`batch_rules.in_chunks`);
3. each pair keeps its first ``min(ncontact, max_contacts)`` slots (the pair
   functions order slots deepest-first);
4. all groups' slots are concatenated (group order: sorted (type1, type2),
   then candidate order, then slot) and the valid ones compacted into the
   model's ``contact_capacity``; the excess is counted as overflow.

Under ``jax.vmap`` (a batch of worlds) a group with no overlapping pair in any
world is skipped, and compaction shares its indices across the batch when the
union of the worlds' entries fits (:mod:`jaxode.sim.batch_rules`): a world's
contacts then keep their order but may sit in non-adjacent slots. No world's
result changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp

from jaxode.sim import math as jm
from jaxode.sim import overflow
from jaxode.sim.batch_rules import compact, in_chunks, unless_none
from jaxode.sim.collision import (box, capsule, convex, cylinder, heightfield, sphere, trimesh,
                              trimesh_ground, trimesh_trimesh)
from jaxode.sim.collision import contact as ct
from jaxode.types import Contacts, Model, empty_contacts

if TYPE_CHECKING:  # records imports constraint, which the step imports after this module
    from jaxode.sim import records

# A pair group with more than 2 x this many slots runs its pair function in chunks
# of this many (batch_rules.in_chunks): the chunks past the live pairs are skipped.
PAIR_CHUNK = 16

# (type1, type2) -> (pair function, contact slots). The pair function's geom 1
# is of type1; the normal points into geom 1 (ODE's convention). Plane and
# heightfield are always geom 2, a convex hull is geom 2 against the other
# primitives (as ODE's dCollideSphereConvex, dCollideCapsuleConvex), a
# triangle mesh is geom 2 against them and geom 1 against plane and
# heightfield; in trimesh-trimesh geom 1 is a mesh on a body (both meshes'
# triangles are gathered, see _mesh_mesh_pairs).
PAIR_FUNCTIONS = {
    (ct.SPHERE, ct.PLANE): (sphere.sphere_plane, sphere.SPHERE_PLANE_NCON),
    (ct.SPHERE, ct.SPHERE): (sphere.sphere_sphere, sphere.SPHERE_SPHERE_NCON),
    (ct.SPHERE, ct.BOX): (sphere.sphere_box, sphere.SPHERE_BOX_NCON),
    (ct.BOX, ct.PLANE): (box.box_plane, box.BOX_PLANE_NCON),
    (ct.BOX, ct.BOX): (box.box_box, box.BOX_BOX_NCON),
    (ct.CAPSULE, ct.PLANE): (capsule.capsule_plane, capsule.CAPSULE_PLANE_NCON),
    (ct.CAPSULE, ct.SPHERE): (capsule.capsule_sphere, capsule.CAPSULE_SPHERE_NCON),
    (ct.CAPSULE, ct.CAPSULE): (capsule.capsule_capsule, capsule.CAPSULE_CAPSULE_NCON),
    (ct.CAPSULE, ct.BOX): (capsule.capsule_box, capsule.CAPSULE_BOX_NCON),
    (ct.CYLINDER, ct.PLANE): (cylinder.cylinder_plane, cylinder.CYLINDER_PLANE_NCON),
    (ct.CYLINDER, ct.SPHERE): (cylinder.cylinder_sphere, cylinder.CYLINDER_SPHERE_NCON),
    (ct.CYLINDER, ct.BOX): (cylinder.cylinder_box, cylinder.CYLINDER_BOX_NCON),
    (ct.CYLINDER, ct.CAPSULE): (cylinder.cylinder_capsule, cylinder.CYLINDER_CAPSULE_NCON),
    (ct.CYLINDER, ct.CYLINDER): (cylinder.cylinder_cylinder, cylinder.CYLINDER_CYLINDER_NCON),
    # heightfield pairs take the grid as extra arguments (see collide)
    (ct.SPHERE, ct.HEIGHTFIELD): (heightfield.sphere_heightfield, heightfield.SPHERE_HFIELD_NCON),
    (ct.BOX, ct.HEIGHTFIELD): (heightfield.box_heightfield, heightfield.BOX_HFIELD_NCON),
    (ct.CAPSULE, ct.HEIGHTFIELD): (heightfield.capsule_heightfield,
                                   heightfield.CAPSULE_HFIELD_NCON),
    (ct.CYLINDER, ct.HEIGHTFIELD): (heightfield.cylinder_heightfield,
                                    heightfield.CYLINDER_HFIELD_NCON),
    # convex pairs take the hull tables of their convex geom(s) (see _extra_args)
    (ct.CONVEX, ct.PLANE): (convex.convex_plane, convex.CONVEX_PLANE_NCON),
    (ct.SPHERE, ct.CONVEX): (convex.sphere_convex, convex.SPHERE_CONVEX_NCON),
    (ct.BOX, ct.CONVEX): (convex.box_convex, convex.BOX_CONVEX_NCON),
    (ct.CAPSULE, ct.CONVEX): (convex.capsule_convex, convex.CAPSULE_CONVEX_NCON),
    (ct.CYLINDER, ct.CONVEX): (convex.cylinder_convex, convex.CYLINDER_CONVEX_NCON),
    (ct.CONVEX, ct.CONVEX): (convex.convex_convex, convex.CONVEX_CONVEX_NCON),
    (ct.CONVEX, ct.HEIGHTFIELD): (convex.convex_heightfield, convex.CONVEX_HFIELD_NCON),
    # mesh pairs take the gathered candidate triangles (see _mesh_pairs)
    (ct.SPHERE, ct.TRIMESH): (trimesh.sphere_trimesh, trimesh.SPHERE_TRIMESH_NCON),
    (ct.BOX, ct.TRIMESH): (trimesh.box_trimesh, trimesh.BOX_TRIMESH_NCON),
    (ct.CAPSULE, ct.TRIMESH): (trimesh.capsule_trimesh, trimesh.CAPSULE_TRIMESH_NCON),
    (ct.CYLINDER, ct.TRIMESH): (trimesh.cylinder_trimesh, trimesh.CYLINDER_TRIMESH_NCON),
    (ct.CONVEX, ct.TRIMESH): (trimesh.convex_trimesh, trimesh.CONVEX_TRIMESH_NCON),
    # a mesh on a body on the ground takes its own tables (verts, tris)
    (ct.TRIMESH, ct.PLANE): (trimesh_ground.trimesh_plane, trimesh_ground.TRIMESH_PLANE_NCON),
    (ct.TRIMESH, ct.HEIGHTFIELD): (trimesh_ground.trimesh_heightfield,
                                   trimesh_ground.TRIMESH_HFIELD_NCON),
    (ct.TRIMESH, ct.TRIMESH): (trimesh_trimesh.trimesh_trimesh,
                               trimesh_trimesh.TRIMESH_TRIMESH_NCON),
}


def _extra_args(model: Model, type1: int, type2: int, a: jax.Array, b: jax.Array,
                dtype) -> list:
    """Per-pair data tables after the two geoms: the hull of geom 1 if it is
    convex or its (verts, tris) if it is a triangle mesh, then geom 2's hull
    if convex, or its grid (heights, dims) if it is a heightfield (a mesh as
    geom 2 is gathered by ``_mesh_pairs`` instead). a, b (npair,) geom
    indices."""
    out = []
    if type1 == ct.TRIMESH:
        k = model.geom_dataid[a]
        out += [model.trimeshes.verts[k].astype(dtype), model.trimeshes.tris[k]]
    for t, g in ((type1, a), (type2, b)):
        if t == ct.CONVEX:
            k = model.geom_dataid[g]
            out.append(jax.tree.map(
                lambda x: x[k].astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x[k],
                model.convex_hulls))
        elif t == ct.HEIGHTFIELD:
            k = model.geom_dataid[g]
            out += [model.hfield_heights[k], model.hfield_dims[k]]
    return out


def _mesh_pairs(model: Model, grp, fn, idx, a, b, pvalid, ga, gb, gpos, lo, hi, extra):
    """A mesh group's contacts: per pair, ``trimesh.gather`` the group's
    ``candidates`` triangles (at most the pair's ``candidate_cap``) around
    geom 1 (a) in mesh b, then the pair function; idx the pairs' rows in the
    group. Returns (contacts, triangles that did not fit, over the valid
    pairs)."""
    mesh = jax.tree.map(lambda x: x[model.geom_dataid[b]], model.trimeshes)
    radius = trimesh.bounding_radius(grp.type1, model.geom_size[a].astype(gpos.dtype))

    def one(g1, g2, mesh, centre, l, h, r, cap, *more):
        tris, ovf = trimesh.gather(mesh, g2, centre, l, h, r, grp.mesh_window, grp.candidates,
                                   cap)
        return fn(g1, g2, tris, *more), ovf

    c, ovf = unless_none(pvalid, jax.vmap(one), ga, gb, mesh, gpos[a], lo[a], hi[a], radius,
                         grp.candidate_cap[idx], *extra)
    return c, jnp.sum(jnp.where(pvalid, ovf, 0), dtype=jnp.int32)


def _mesh_mesh_pairs(model: Model, grp, fn, idx, a, b, pvalid, ga, gb, lo, hi):
    """The mesh-mesh group's contacts: per pair, both meshes' triangles
    overlapping the intersection of the two geoms' AABBs are gathered
    (mesh b's around geom a as any mesh pair; mesh a's own with the box
    grown by ``trimesh_trimesh.QUERY_MARGIN`` of a's radius, within mesh b's
    bounding cube), then the pair function; idx the pairs' rows in the
    group. Returns (contacts, triangles and triangle pairs that did not
    fit, over the valid pairs)."""
    def tables(g):
        return jax.tree.map(lambda x: x[model.geom_dataid[g]],
                            model.trimeshes)

    mesh_a, mesh_b = tables(a), tables(b)
    qlo, qhi = jnp.maximum(lo[a], lo[b]), jnp.minimum(hi[a], hi[b])

    def one(g1, g2, ma, mb, l, h, cap1, cap2):
        r1, r2 = g1.size[1], g2.size[1]
        tris_b, ovf_b = trimesh.gather(mb, g2, g1.pos, l, h, r1, grp.mesh_window,
                                       grp.candidates, cap2)
        m = trimesh_trimesh.QUERY_MARGIN * r1
        tris_a, ovf_a = trimesh.gather(ma, g1, g2.pos, l - m, h + m, r2 + m, grp.mesh_window1,
                                       grp.candidates1, cap1)
        c, ovf_pairs = fn(g1, g2, tris_a, tris_b)
        return c, ovf_a + ovf_b + ovf_pairs

    c, ovf = unless_none(pvalid, jax.vmap(one), ga, gb, mesh_a, mesh_b, qlo, qhi,
                         grp.candidate_cap1[idx], grp.candidate_cap[idx])
    return c, jnp.sum(jnp.where(pvalid, ovf, 0), dtype=jnp.int32)


def collide(model: Model, gpos: jax.Array, grot: jax.Array, lo: jax.Array,
            hi: jax.Array) -> tuple[Contacts, jax.Array, jax.Array, jax.Array]:
    """Contacts of one world.

    Returns (contacts with zero ``force``, number of valid contacts found,
    candidate pairs dropped for capacity, contacts dropped for capacity, mesh
    triangles that did not fit their pair's candidates included).
    """
    dtype = gpos.dtype
    parts, rank_parts = [], []
    overflow_pairs = jnp.zeros((), jnp.int32)
    overflow_tris = jnp.zeros((), jnp.int32)
    for grp in model.pair_groups:
        fn, _ = PAIR_FUNCTIONS[(grp.type1, grp.type2)]
        g1, g2 = grp.geom1, grp.geom2
        overlap = overlapping(grp, lo, hi)
        keep = overlap
        if grp.capacity < overlap.shape[0]:
            # more overlapping pairs than slots: every body's closest pairs first
            keep = overflow.keep_pairs(overlap, grp.capacity, grp.type2, g1, g2, gpos, grot,
                                       lo, hi, model.geom_body[g1], model.geom_body[g2],
                                       model.nbody)
        nover = jnp.sum(overlap, dtype=jnp.int32)
        overflow_pairs = overflow_pairs + jnp.maximum(nover - grp.capacity, 0)
        idx, pvalid, _ = compact(keep, grp.capacity)
        a, b = g1[idx], g2[idx]
        ga = ct.GeomWorld(gpos[a], grot[a], model.geom_size[a])
        gb = ct.GeomWorld(gpos[b], grot[b], model.geom_size[b])
        # (skipped when no pair of this kind overlaps, in any world of a batch)
        if grp.type1 == ct.TRIMESH and grp.type2 == ct.TRIMESH:
            c, ovf_t = _mesh_mesh_pairs(model, grp, fn, idx, a, b, pvalid, ga, gb, lo, hi)
            overflow_tris = overflow_tris + ovf_t
        elif grp.type2 == ct.TRIMESH:
            extra = _extra_args(model, grp.type1, grp.type2, a, b, dtype)
            c, ovf_t = _mesh_pairs(model, grp, fn, idx, a, b, pvalid, ga, gb, gpos, lo, hi,
                                   extra)
            overflow_tris = overflow_tris + ovf_t
        else:
            extra = _extra_args(model, grp.type1, grp.type2, a, b, dtype)
            if idx.shape[0] > 2 * PAIR_CHUNK:
                # a long slot list (compacted live first): chunks past the batch's
                # live pairs are skipped (stack: ~30 live of 108 box-box slots)
                c = in_chunks(pvalid, jax.vmap(fn), ga, gb, *extra, chunk=PAIR_CHUNK)
            else:
                c = unless_none(pvalid, jax.vmap(fn), ga, gb, *extra)
        k = grp.ncontact
        slot = jnp.arange(k)[None, :]
        valid = c.valid[:, :k] & pvalid[:, None] & (slot < grp.max_contacts[idx][:, None])
        npair = idx.shape[0]
        rank_parts.append((c.pos[:, :k], c.depth[:, :k], valid))
        parts.append(dict(
            pos=c.pos[:, :k].reshape(npair * k, 3), normal=c.normal[:, :k].reshape(npair * k, 3),
            depth=c.depth[:, :k].reshape(npair * k),
            geom1=jnp.repeat(a, k), geom2=jnp.repeat(b, k),
            friction=jnp.repeat(grp.friction[idx], k), valid=valid.reshape(npair * k)))
    cap = model.contact_capacity
    if not parts:
        contacts = empty_contacts(cap, dtype)
        zero = jnp.zeros((), jnp.int32)
        return contacts, zero, overflow_pairs, overflow_tris
    cat = {key: jnp.concatenate([p[key] for p in parts], axis=0) for key in parts[0]}
    valid = cat["valid"]
    nfound = jnp.sum(valid, dtype=jnp.int32)
    overflow_contacts = jnp.maximum(nfound - cap, 0).astype(jnp.int32)
    if cap < valid.shape[0]:
        valid = overflow.keep_contacts(valid, cap, rank_parts)
    idx, cvalid, _ = compact(valid, cap)
    sel = {key: v[idx] for key, v in cat.items()}
    m = cvalid
    contacts = Contacts(
        pos=jnp.where(m[:, None], sel["pos"], 0.0).astype(dtype),
        normal=jnp.where(m[:, None], sel["normal"], 0.0).astype(dtype),
        depth=jnp.where(m, sel["depth"], 0.0).astype(dtype),
        geom1=sel["geom1"].astype(jnp.int32), geom2=sel["geom2"].astype(jnp.int32),
        friction=sel["friction"].astype(jnp.int32), valid=m,
        force=jnp.zeros((cap, 3), dtype))
    return contacts, nfound, overflow_pairs, overflow_contacts + overflow_tris


def overlapping(grp, lo: jax.Array, hi: jax.Array) -> jax.Array:
    """(npair,) bool: the pairs of group ``grp`` whose AABBs overlap (the
    broadphase test; ``lo``, ``hi`` (ngeom, 3) [m])."""
    g1, g2 = grp.geom1, grp.geom2
    per_axis = (lo[g1] <= hi[g2]) & (lo[g2] <= hi[g1])
    # the three axes and-ed elementwise, not by ``jnp.all(..., -1)`` (a reduction
    # kernel over the short minor axis under a vmap); the test's ~60-130 ns per
    # pair and world (bench/RESULTS.md, session 29) was the AABBs recomputed in
    # its gathers, which ``detect`` now materializes
    return per_axis[:, 0] & per_axis[:, 1] & per_axis[:, 2]


def detect(model: Model, state) -> "records.Collision":
    """The collision stage: geom poses and AABBs (:mod:`jaxode.sim.kinematics`), then
    :func:`collide`; a :class:`jaxode.sim.records.Collision`."""
    from jaxode.sim import kinematics
    from jaxode.sim.records import Collision

    # each computed once (jm.materialize): the pair tests and the narrowphase
    # gather them per pair, and XLA would recompute them in every gather
    gpos, grot = jm.materialize(kinematics.geom_poses(model, state.pos, state.quat))
    lo, hi = jm.materialize(kinematics.geom_aabbs(model, gpos, grot))
    contacts, nfound, ovf_pairs, ovf_contacts = collide(model, gpos, grot, lo, hi)
    return Collision(contacts=contacts, nfound=nfound, overflow_pairs=ovf_pairs,
                     overflow_contacts=ovf_contacts, grot=grot)
