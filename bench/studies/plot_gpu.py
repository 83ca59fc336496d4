"""World-steps/s against batch size on one GPU, both solvers, from gpu_run.py's JSON:

    python bench/studies/plot_gpu.py bench/studies/gpu_h200_2026-11-28.json bench/throughput_gpu.png

One panel per scene, log-log, one line per solver; the title names the device and the date.
"""
import json
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    data = json.load(open(src))
    rows, info = data["results"], data["machine"]
    scenes = list(dict.fromkeys(r["scene"] for r in rows))
    fig, axes = plt.subplots(1, len(scenes), figsize=(3.2 * len(scenes), 3.2), sharey=True)
    for ax, scene in zip(axes, scenes):
        for solver, style in (("pgs", "o-"), ("colored", "s--")):
            pts = sorted((r["batch"], r["world_steps_per_s"]) for r in rows
                         if r["scene"] == scene and r["solver"] == solver)
            if pts:
                ax.loglog(*zip(*pts), style, label=solver)
        ax.set_title(scene)
        ax.set_xlabel("worlds")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("world-steps / s")
    axes[0].legend()
    fig.suptitle(f"{info.get('device_kind', info.get('device'))}, jax {info['jax']}, "
                 f"float32, 20 iterations ({info['date'][:10]})")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:3])
