"""Time to first step of a bench scene, in this (fresh) process.

``python -m bench.studies.first_call boxes 1024 [--steps 30]`` builds the scene as
``python -m bench`` does (``jit(vmap(rollout))``; a batch the CPU device count
divides runs sharded through ``jaxode.map_worlds``), then times trace, lowering
and XLA compile (or the persistent cache's load) separately, in CPU seconds
(``time.process_time``) and wall seconds, runs the compiled rollout once and
prints one JSON line with the times and a SHA-256 of the final states' bytes
(two processes computed the same bits iff the hashes agree). The cache is what
``import jaxode`` sets up (``JAXODE_XLA_CACHE``, jaxode/xla.py). Session 14 of
bench/RESULTS.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import time

import jaxode  # noqa: I001  (before jax starts: XLA flags and the compilation cache)
import jax
import numpy as np

from bench import scenes as S

DT = 0.01


def _clock():
    return time.process_time(), time.perf_counter()


def _since(t):
    c, w = _clock()
    return round(c - t[0], 3), round(w - t[1], 3)


def program(model, batch: int, steps: int):
    """(fn, states, params): ``model``'s rollout of ``steps`` steps over ``batch``
    identical worlds as ``python -m bench`` runs it (a batch the CPU device count
    divides sharded through ``jaxode.map_worlds``, otherwise ``jit(vmap(rollout))``),
    with its inputs placed."""
    states = jaxode.batch(jaxode.init(model), batch)
    params = jaxode.batch(model.params, batch)

    def one(s, p):
        return jaxode.rollout(model, s, steps, DT, params=p)[0]

    if len(jax.devices()) > 1 and batch % len(jax.devices()) == 0:
        mesh = jaxode.world_mesh()
        states, params = jaxode.shard_worlds(states, mesh), jaxode.shard_worlds(params, mesh)
        return jaxode.map_worlds(one, mesh), states, params
    return jax.jit(jax.vmap(one)), states, params


def sha(tree) -> str:
    """The first 16 hex digits of the SHA-256 of a pytree's leaves' bytes, in
    leaf order: two runs that give the same digest gave bitwise the same arrays."""
    h = hashlib.sha256()
    for x in jax.tree.leaves(tree):
        h.update(np.asarray(x).tobytes())
    return h.hexdigest()[:16]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scene", choices=sorted(S.SCENES))
    ap.add_argument("batch", type=int)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    model = S.model_of(a.scene).replace(solver="pgs")
    fn, states, params = program(model, a.batch, a.steps)
    ndev = len(jax.devices())
    t = _clock()
    traced = fn.trace(states, params)
    trace = _since(t)
    t = _clock()
    lowered = traced.lower()
    lower = _since(t)
    t = _clock()
    compiled = lowered.compile()
    xla = _since(t)
    final = jax.block_until_ready(compiled(states, params))
    print(json.dumps(dict(scene=a.scene, batch=a.batch, devices=ndev,
                          cache=jaxode.xla.status()["cache_dir"],
                          trace=trace, lower=lower, xla=xla,
                          first_call=[round(trace[i] + lower[i] + xla[i], 3) for i in (0, 1)],
                          load=round(os.getloadavg()[0], 1), sha=sha(final))))


if __name__ == "__main__":
    main()
