"""One process of the resumable and distributed sweep tests (tests/test_sweep_store.py).

    python tests/sweep_worker.py single OUT RESULT [KILL_AFTER]
    python tests/sweep_worker.py dist   OUT RESULT PORT PROCESS_ID

``single``: one process; with KILL_AFTER it SIGKILLs itself (no cleanup, as a
preempted job dies) once that many variants are done. ``dist``: one of two
``jax.distributed`` processes on localhost (gloo collectives on CPU). OUT "-" means
no ``out`` directory. The result (columns and stats) is written to RESULT (.npz).
"""
import os
import signal
import sys

import numpy as np

G, H, N = 9.81, 0.01, 60
ERPS, CFMS = (0.2, 0.3, 0.5, 0.8, 0.9), (1e-5, 1e-4, 1e-3)
CHUNK = 4  # 15 variants: 4 chunks, the last padded


def scene():
    import jaxode
    b = jaxode.WorldBuilder(gravity=(0, 0, -G))
    b.add_plane()
    box = b.add_body(pos=(0, 0, 0.05), mass=jaxode.mass.box((0.4, 0.4, 0.1), total=16.0))
    b.add_box((0.4, 0.4, 0.1), body=box)
    model = b.build()
    return model, jaxode.init(model)


def metrics():
    import jaxode
    return {"depth": jaxode.metrics.resting_penetration, "nonfinite": jaxode.metrics.nonfinite}


def run(out=None, progress=False):
    import jaxode
    model, state = scene()
    return jaxode.sweep(model, state, N, H, {"erp": list(ERPS), "cfm": list(CFMS)}, metrics(),
                        chunk_size=CHUNK, out=out, progress=progress)


def save(res, path):
    np.savez(path, **{f"col_{k}": v for k, v in res.columns.items()},
             **{f"stat_{k}": v for k, v in res.stats.items() if isinstance(v, (int, float))})


def main(argv):
    mode, out, result = argv[1], argv[2], argv[3]
    out = None if out == "-" else out
    if mode == "dist":
        import jax
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(f"localhost:{argv[4]}", num_processes=2,
                                   process_id=int(argv[5]), initialization_timeout=120)
        save(run(out), result)
        jax.distributed.shutdown()
        return
    kill_after = int(argv[4]) if len(argv) > 4 else None

    def progress(done, total):
        if kill_after is not None and done >= kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    save(run(out, progress), result)


if __name__ == "__main__":
    main(sys.argv)
