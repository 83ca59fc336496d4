"""Reverse-mode memory of a 1000-step walker rollout with and without checkpointing.

d(torso x after N steps)/d(motor target velocities of the 8 hinges), through
``jaxode.rollout(..., checkpoint_every=k)``. Memory is XLA's compiled
``memory_analysis().temp_size_in_bytes`` (the scratch the gradient program
allocates: the scan's stored residuals dominate), float32, CPU.

Run:  python bench/studies/checkpoint_memory.py [--steps 1000] [--every 0 10 32 100]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

import jaxode
from jaxode.robots import build_walker


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--every", type=int, nargs="+", default=[0, 32])
    ap.add_argument("--run", action="store_true", help="also run the gradient (time, agreement)")
    args = ap.parse_args()
    w = build_walker()
    model, s0 = w.model, jaxode.init(w.model)
    joints = jnp.asarray(w.hips + w.knees)
    a0 = 0.5 * jnp.sin(jnp.arange(8.0))

    grads = {}
    for k in args.every:
        def loss(a, k=k):
            p = model.params.replace(joint_vel=model.params.joint_vel.at[joints, 0].set(a))
            s, _ = jaxode.rollout(model, s0, args.steps, 0.01, params=p,
                                  checkpoint_every=k or None)
            return s.pos[w.torso, 0]
        t0 = time.perf_counter()
        comp = jax.jit(jax.grad(loss)).lower(a0).compile()
        mem = comp.memory_analysis()
        print(f"steps {args.steps} checkpoint_every {k or None}: temp {mem.temp_size_in_bytes / 1e6:.2f} MB, "
              f"arguments {mem.argument_size_in_bytes} B, output {mem.output_size_in_bytes} B "
              f"(compile {time.perf_counter() - t0:.0f} s)", flush=True)
        if args.run:
            t0 = time.perf_counter()
            g = comp(a0).block_until_ready()
            grads[k] = g
            print(f"   gradient {g} ({time.perf_counter() - t0:.1f} s)", flush=True)
    if len(grads) > 1:
        ks = list(grads)
        print("bitwise equal gradients:", all(bool(jnp.all(grads[ks[0]] == grads[q])) for q in ks))


if __name__ == "__main__":
    main()
