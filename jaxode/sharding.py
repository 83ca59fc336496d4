"""Spreading a batch of worlds over devices (and hosts) with ``jax.sharding``.

Worlds are independent, so a batch splits along its leading (world) axis with
no communication at all: every device steps its own slice. :func:`world_mesh`
makes a one-axis mesh named ``"worlds"`` over the devices, :func:`shard_worlds`
places a batched pytree (states, params, actions) on it, and a ``jax.jit`` of a
``vmap``-ed rollout applied to sharded inputs runs SPMD on every device, its
outputs sharded the same way (XLA propagates the sharding through the vmap)::

    mesh = jaxode.world_mesh()                              # all local devices
    states = jaxode.shard_worlds(jaxode.batch(jaxode.init(model), 4096), mesh)
    params = jaxode.shard_worlds(jaxode.batch(model.params, 4096), mesh)
    final = jax.jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, 100, 0.01, params=p)[0]))(
        states, params)

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
