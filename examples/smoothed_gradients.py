"""Exact gradients versus smoothed gradients on two contact-rich rollouts.

1. A ball bouncing on a plane for 1.5 s: d z(T) / d bounce. The impacts happen
   at step boundaries, so z(T) as a function of the restitution is a
   staircase of smooth pieces: ``jax.grad`` gives the exact slope of the
   current piece, a finite difference at 1e-2 the trend over many pieces, and
   they can disagree in sign. The smoothed gradient (sigma = 1e-2) follows the
   trend.
2. The quadruped walker (``jaxode.robots.build_walker``) for 100 steps of
   0.01 s with constant motor targets a (8 actions in [-1, 1], target velocity
   8 a rad/s): d (torso x) / d a. The exact gradient matches finite
   differences only at tiny steps; the zeroth-order smoothed gradient (512
   perturbed walkers, sigma = 0.1) is compared with a central difference
   (h = 1e-2) of the smoothed objective, estimated with common random numbers
   over 1024 perturbed walkers per side. (The first-order one, the average of
   exact gradients, misses the feet's contact onsets: cosine 0.49 with 64
   walkers, docs/GRADIENTS.md.)

Run:  python examples/smoothed_gradients.py [--part bounce|walker|both]
"""
from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.robots import build_walker
from jaxode.tools import smooth

DT = 0.01

# ------------------------------------------------------------------ bouncing ball
BOUNCE_STEPS = 150
BOUNCE_AT = 0.6
# restitutions where the exact gradient and the 1e-2 finite difference disagree in
# sign (a ball nearly at rest after several bounces; one still bouncing)
BOUNCE_POINTS = (0.54, 0.70)
BALL_GEOM = 1


def bounce_scene() -> jaxode.Model:
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=1.0, bounce=1.0, bounce_vel=0.01))
    i = b.add_body(pos=(0.0, 0.0, 1.0), mass=jaxode.mass.sphere(radius=0.1, total=0.5))
    b.add_sphere(radius=0.1, body=i, surface=jaxode.Surface(mu=1.0, bounce=BOUNCE_AT,
                                                            bounce_vel=0.01))
    return b.build()


def bounce_height(model: jaxode.Model):
    """e -> the ball's height [m] after BOUNCE_STEPS steps with restitution e."""
    def z(e):
        p = model.params.replace(bounce=model.params.bounce.at[BALL_GEOM].set(e))
        final, _ = jaxode.rollout(model, jaxode.init(model), BOUNCE_STEPS, DT, params=p)
        return final.pos[0, 2]
    return z


def bounce_report(points=BOUNCE_POINTS, sigma: float = 1e-2, samples: int = 512, log=print):
    """Exact gradient, central finite difference at 1e-2 and the smoothed
    gradients (both estimators, the same perturbations) at each restitution in
    ``points``. Returns a list of dicts."""
    model = bounce_scene()
    z = bounce_height(model)
    zv = jax.jit(jax.vmap(z))
    grad = jax.jit(jax.grad(z))
    est = jax.jit(smooth(z, sigma, samples, method="blend"))
    h = 1e-2
    out = []
    for e0 in points:
        e = jnp.float32(e0)
        exact = float(grad(e))
        zp, zm = (float(v) for v in zv(jnp.stack([e + h, e - h])))
        r = est(e, jax.random.key(0))
        row = dict(bounce=e0, exact=exact, fd=(zp - zm) / (2 * h), first=float(r.first_grad),
                   zeroth=float(r.zeroth_grad), value_se=float(r.value_stderr))
        r0 = jax.jit(smooth(z, sigma, samples, method="zeroth"))(e, jax.random.key(0))
        row["zeroth_se"] = float(r0.grad_stderr)
        out.append(row)
        if log:
            log(f"bounce {e0}: d z({BOUNCE_STEPS * DT:.1f} s)/d bounce: exact {exact:+.4f}, "
                f"FD(h=1e-2) {row['fd']:+.4f}; smoothed (sigma {sigma}, {samples} worlds): "
                f"zeroth-order {row['zeroth']:+.4f} +- {row['zeroth_se']:.4f}, first-order "
                f"{row['first']:+.4f}")
    return out


# ------------------------------------------------------------------ walker
WALKER_STEPS = 100
VMAX = 8.0  # [rad/s] per unit action (as jaxode.envs' walker)
A0 = 0.3 * jnp.asarray([1.0, -1.0, -1.0, 1.0, 0.5, -0.5, 0.5, -0.5])


def walker_loss(walker=None):
    """a (8,) -> torso x [m] after WALKER_STEPS steps with motor targets VMAX a."""
    w = build_walker() if walker is None else walker
    joints = jnp.asarray(w.hips + w.knees)
    s0 = jaxode.init(w.model)

    def f(a):
        p = w.model.params
        p = p.replace(joint_vel=p.joint_vel.at[joints, 0].set(VMAX * a))
        final, _ = jaxode.rollout(w.model, s0, WALKER_STEPS, DT, params=p)
        return final.pos[w.torso, 0]
    return f


def walker_report(sigma: float = 0.1, samples: int = 512, cd_samples: int = 1024, h: float = 1e-2,
                  method: str = "zeroth", exact: bool = True, log=print):
    """Cosine between the smoothed gradient (``method``, ``samples`` perturbed
    walkers) and a central difference (h) of the smoothed objective, estimated
    with common random numbers over ``cd_samples`` perturbed walkers per side;
    with exact=True also the exact gradient and plain finite differences."""
    f = walker_loss()
    d = A0.shape[0]
    t0 = time.perf_counter()
    out = {}
    if exact:
        fv = jax.jit(jax.vmap(f))
        out["exact"] = np.asarray(jax.jit(jax.grad(f))(A0))
        for hh in (1e-2, 1e-4):
            pts = jnp.concatenate([A0 + hh * jnp.eye(d), A0 - hh * jnp.eye(d)])
            v = np.asarray(fv(pts), np.float64)
            out[f"fd_{hh:g}"] = (v[:d] - v[d:]) / (2 * hh)
    chunk = 512
    # the smoothed objective at A0 +- h e_i, the same perturbations everywhere
    eps = jax.random.normal(jax.random.key(7), (cd_samples // 2, d))
    eps = jnp.concatenate([eps, -eps])
    pts = jnp.concatenate([A0 + h * jnp.eye(d), A0 - h * jnp.eye(d)])
    allpts = (pts[:, None, :] + sigma * eps[None]).reshape(-1, d)
    fmap = jax.jit(lambda p: jax.lax.map(f, p, batch_size=chunk))
    vals = np.asarray(fmap(allpts), np.float64).reshape(2 * d, -1)
    cd_each = (vals[:d] - vals[d:]) / (2 * h)      # (d, cd_samples): per-sample differences
    cd = cd_each.mean(axis=1)
    cd_se = cd_each.std(axis=1, ddof=1) / np.sqrt(cd_samples)
    est = jax.jit(smooth(f, sigma, samples, method=method, chunk=chunk))(A0, jax.random.key(3))
    g = np.asarray(est.grad)
    cos = lambda a, b: float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    out.update(smoothed_cd=cd, smoothed_cd_se=cd_se, smoothed=g,
               smoothed_se=np.asarray(est.grad_stderr), cos_smoothed_vs_cd=cos(g, cd),
               seconds=time.perf_counter() - t0)
    if exact:
        out["cos_exact_vs_cd"] = cos(out["exact"], cd)
    if log:
        np.set_printoptions(precision=3, suppress=True, linewidth=150)
        if exact:
            log(f"walker ({WALKER_STEPS} steps), d torso x / d a:\n  exact          {out['exact']}\n"
                f"  FD h=1e-2      {out['fd_0.01']}\n  FD h=1e-4      {out['fd_0.0001']}")
        log(f"  smoothed (sigma {sigma}, {samples} worlds, {method}) {g}\n"
            f"     +- {out['smoothed_se']}\n"
            f"  CD (h={h}) of the smoothed objective ({cd_samples} worlds/side) {cd}\n"
            f"     +- {cd_se}\n"
            f"  cosine(smoothed, CD of smoothed) {out['cos_smoothed_vs_cd']:.3f}"
            + (f"; cosine(exact, CD of smoothed) {out['cos_exact_vs_cd']:.3f}" if exact else "")
            + f"  ({out['seconds']:.0f} s)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("bounce", "walker", "both"), default="both")
    ap.add_argument("--no-exact", action="store_true", help="walker: skip the exact gradient and FDs")
    args = ap.parse_args()
    if args.part in ("bounce", "both"):
        bounce_report()
    if args.part in ("walker", "both"):
        walker_report(exact=not args.no_exact)


if __name__ == "__main__":
    main()
