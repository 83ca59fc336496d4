"""Spreading a batch of worlds over devices (and hosts) with ``jax.sharding``.

Worlds are independent, so a batch splits along its leading (world) axis with
no communication at all: every device steps its own slice. :func:`world_mesh`
makes a one-axis mesh named ``"worlds"`` over the devices, :func:`shard_worlds`
places a batched pytree (states, params, actions) on it, and :func:`map_worlds`
makes the jitted, vmapped function that runs on every device at once, each on
its own worlds, its outputs sharded the same way::

    mesh = jaxode.world_mesh()                              # all local devices
    states = jaxode.shard_worlds(jaxode.batch(jaxode.init(model), 4096), mesh)
    params = jaxode.shard_worlds(jaxode.batch(model.params, 4096), mesh)
    run = jaxode.map_worlds(lambda s, p: jaxode.rollout(model, s, 100, 0.01, params=p)[0], mesh)
    final = run(states, params)

A plain ``jax.jit(jax.vmap(f))`` of sharded inputs also runs SPMD and gives the
same results, but the batch-wide decisions of :mod:`jaxode.sim.batch_rules` (skip a
pair kind no world needs, share contact slots) become all-reduces between the
devices, and on 2 CPU devices of a 2-core machine back-to-back calls of such a
step were seen to deadlock in them (jax 0.9.2 and 0.10.2; not seen with 0.12;
tests/test_no_hang.py). :func:`map_worlds` (``jax.shard_map``) makes those
decisions per device, which changes no world's result, and needs no
communication at all.

The batch size must be a multiple of the number of devices in the mesh.

Several CPU "devices" on one machine: ``XLA_FLAGS=--xla_force_host_platform_device_count=4``
before JAX starts (useful for tests; one CPU device already uses all cores).

Several hosts: call ``jax.distributed.initialize()`` on every process first
(coordinator address, process count and id; automatic on Cloud TPU and SLURM),
then build the mesh over ``jax.devices()`` (all global devices) with
``world_mesh(jax.devices())``. Every process builds the same model and calls
the same jitted function; each host holds and steps only its own worlds. Make
the global arrays with ``jax.make_array_from_process_local_data(sharding,
local_batch)`` from each process's slice, or with :func:`shard_worlds` when
every process holds the whole batch (it keeps only its own shards).
``jaxode.sweep`` needs none of this: under ``jax.distributed`` it deals its
chunks over the processes itself and every process returns the whole result
(docs/SWEEPS.md).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "worlds"


def world_mesh(devices: Optional[Sequence[jax.Device]] = None) -> Mesh:
    """A one-axis mesh named ``"worlds"`` over ``devices`` (default: the local devices)."""
    devs = list(jax.local_devices() if devices is None else devices)
    if not devs:
        raise ValueError("world_mesh: no devices given")
    return Mesh(np.asarray(devs), (AXIS,))


def world_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh's ``"worlds"`` axis, other axes replicated."""
    if AXIS not in mesh.axis_names:
        raise ValueError(f"world_sharding: the mesh needs an axis named {AXIS!r} "
                         f"(got {mesh.axis_names})")
    return NamedSharding(mesh, PartitionSpec(AXIS))


def shard_worlds(tree: Any, mesh: Optional[Mesh] = None) -> Any:
    """Place every leaf of a batched pytree with its leading (world) axis split over
    ``mesh`` (default :func:`world_mesh`). Every leaf must have the same leading size,
    a multiple of the number of devices."""
    mesh = world_mesh() if mesh is None else mesh
    ndev = mesh.devices.size
    leaves = jax.tree.leaves(tree)
    if not leaves:
        raise ValueError("shard_worlds: the tree has no arrays")
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
    if None in sizes or len(sizes) != 1:
        raise ValueError("shard_worlds: every leaf needs the same leading (world) axis "
                         f"(got leading sizes {sorted(s for s in sizes if s is not None)}"
                         f"{' and scalars' if None in sizes else ''}); batch with jaxode.batch")
    (n,) = sizes
    if n % ndev:
        raise ValueError(f"shard_worlds: the number of worlds ({n}) must be a multiple of the "
                         f"number of devices in the mesh ({ndev})")
    sharding = world_sharding(mesh)
    return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)


def map_worlds(fn, mesh: Optional[Mesh] = None):
    """``jax.jit(jax.vmap(fn))`` with each device mapping only its own worlds.

    ``fn`` takes and returns pytrees of one world (close over the model and
    anything else shared); the returned function takes and returns them with a
    leading world axis split over ``mesh``'s ``"worlds"`` axis (default
    :func:`world_mesh`), every argument batched, the batch a multiple of the
    number of devices (place inputs with :func:`shard_worlds`). It is a
    ``jax.shard_map`` of the vmap: no communication between devices (see the
    module docstring for why that matters)."""
    mesh = world_mesh() if mesh is None else mesh
    spec = PartitionSpec(AXIS)
    return jax.jit(jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=spec, out_specs=spec,
                                 check_vma=False))
