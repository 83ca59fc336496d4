"""Issue 19's bad-input list, tried case by case: what each does now.

Run: ``python -m tools.probe_inputs`` (from the repository root). Prints one
line per case: ``case | outcome`` where outcome is ``RAISE Type: message``,
``FLAG`` (state.nonfinite set for the bad world, the others bitwise as in a
clean batch), ``OK`` (accepted and runs, the intended behaviour for the
cases ODE accepts) or ``SILENT`` (accepted, nothing raised or flagged).
Each case stands for its class (every field, every shape), which the tests in
tests/test_validation.py cover; this script is the issue's literal list.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import jaxode
from jaxode.io import load, save

H = 0.01


def _scene():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    for i in range(2):
        k = b.add_body(pos=(0.0, 0.0, 0.5 + 1.0 * i))
        b.add_sphere(0.5, body=k)
    b.add_hinge(0, 1, anchor=(0, 0, 1), axis=(1, 0, 0))
    m = b.build()
    return m, jaxode.init(m)


def _outcome(fn):
    try:
        r = fn()
    except (ValueError, TypeError, ImportError) as e:
        return f"RAISE {type(e).__name__}: {str(e)[:160]}"
    except Exception as e:  # noqa: BLE001  (an unclear error is what we look for)
        return f"UNCLEAR {type(e).__name__}: {str(e)[:160]}"
    return r if isinstance(r, str) else "SILENT (accepted)"


def _flag(m, s, state=None, params=None, dt=H):
    """One bad world (index 1) in a batch of 3: FLAG if it is flagged and the
    others are bitwise as in the clean batch."""
    roll = jax.jit(jax.vmap(lambda s_, p_, d_: jaxode.rollout(m, s_, 3, d_, params=p_)[0]))
    cs, cp = jaxode.batch(s, 3), jaxode.batch(m.params, 3)
    cd = jnp.full((3,), H, s.pos.dtype)
    bs = cs if state is None else jax.tree.map(lambda c, b: c.at[1].set(b), cs, state)
    bp = cp if params is None else jax.tree.map(lambda c, b: c.at[1].set(b), cp, params)
    bd = cd.at[1].set(dt)
    ref, out = roll(cs, cp, cd), roll(bs, bp, bd)
    flags = np.asarray(out.nonfinite).tolist()
    same = all(np.array_equal(np.asarray(a[w]), np.asarray(b[w]))
               for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)) for w in (0, 2))
    if flags == [False, True, False] and same:
        return "FLAG (world 1 flagged, worlds 0 and 2 bitwise untouched)"
    return f"SILENT flags={flags} others_bitwise={same}"


def cases():
    m, s = _scene()
    p = m.params
    full = lambda name, v: p.replace(**{name: jnp.full_like(getattr(p, name), v)})
    tmp = tempfile.mkdtemp()
    good = os.path.join(tmp, "good.npz")
    save(good, m, s)
    raw = open(good, "rb").read()

    def rewrite(name, change):
        with np.load(good, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files}
        change(d)
        path = os.path.join(tmp, name)
        with open(path, "wb") as f:
            np.savez(f, **d)
        return path

    def write(name, data):
        path = os.path.join(tmp, name)
        open(path, "wb").write(data)
        return path

    def cartpole(a):
        from jaxode.tools.envs import CartPole
        env = CartPole()
        return env.step(env.reset(jax.random.PRNGKey(0)), a)

    def quat_builder(q):
        b = jaxode.WorldBuilder()
        b.add_body(quat=q)

    def tamper(d):
        st = json.loads(str(d["__structure__"]))
        st["states"]["dc"] = "jaxode.types:NoSuchClass"
        d["__structure__"] = np.array(json.dumps(st))

    def trunc_json(d):
        d["__structure__"] = np.array(str(d["__structure__"])[:-7])

    def wrong_shape(d):
        d["states/pos"] = np.zeros((5, 3), d["states/pos"].dtype)

    def yaml_missing():
        path = write("m.yaml", b"materials: []\n")
        saved = sys.modules.get("yaml")
        sys.modules["yaml"] = None
        try:
            return jaxode.load_materials(path)
        finally:
            if saved is None:
                del sys.modules["yaml"]
            else:
                sys.modules["yaml"] = saved

    def builder_vel(v):
        b = jaxode.WorldBuilder()
        k = b.add_body(vel=(v, 0, 0))
        b.add_sphere(0.1, body=k)
        mm = b.build()
        out = jaxode.step(mm, jaxode.init(mm), H)
        return f"OK (built; step nonfinite={bool(out.nonfinite)})"

    def hinge_nan():
        b = jaxode.WorldBuilder()
        b.add_body()
        b.add_hinge(0, None, axis=(1, 0, 0), lo_stop=float("nan"))

    def other_state():
        b = jaxode.WorldBuilder()
        for _ in range(3):
            b.add_body()
        return jaxode.step(m, jaxode.init(b.build()), H)

    def traced_cfm():
        out = jax.jit(lambda pp: jaxode.step(m, s, H, params=pp))(full("cfm", -1.0))
        return "FLAG" if bool(out.nonfinite) else "SILENT"

    def zero_fdir1():
        jaxode.Surface(fdir1=(0.0, 0.0, 0.0)).validate()
        return "OK (zero fdir1 = unset, Gazebo's/ODE's dPlaneSpace directions)"

    def max_vel_zero(**kw):
        b = jaxode.WorldBuilder(**kw.get("world", {}))
        b.add_plane(surface=jaxode.Surface(**kw.get("surface", {})))
        k = b.add_body(pos=(0, 0, 0.45))
        b.add_box((1, 1, 1), body=k)
        mm = b.build()
        z = float(jaxode.rollout(mm, jaxode.init(mm), 5, H)[0].pos[0, 2])
        return f"OK (accepted; box sunk 0.05 m stays at z={z:.4f}, no correction)"

    def hinge_zero():
        b = jaxode.WorldBuilder()
        k = b.add_body()
        b.add_sphere(0.1, body=k)
        h = b.add_hinge(k, None, anchor=(0, 0, 0), axis=(0, 0, 1), lo_stop=0.0, hi_stop=0.0)
        mm = b.build()
        ss = jaxode.init(mm)
        a = float(jaxode.hinge_angle(mm, ss, h))
        fb = np.asarray(jaxode.step(mm, ss, H).joint_feedback)
        ok = a == 0.0 and np.all(fb == 0.0)
        return f"{'OK' if ok else 'WRONG'} (angle {a!r}, max |feedback| {np.abs(fb).max()!r})"

    return [
        # params to step/rollout
        ("params cfm -1 (concrete)", lambda: jaxode.step(m, s, H, params=full("cfm", -1.0))),
        ("params cfm -1 (traced, jit)", traced_cfm),
        ("params body_mass shape (1,) for 2 bodies",
         lambda: jaxode.step(m, s, H, params=p.replace(body_mass=jnp.ones(1)))),
        ("bounce NaN in one world of a batch", lambda: _flag(m, s, params=full("bounce", jnp.nan))),
        ("joint lo_stop NaN (params)", lambda: jaxode.step(m, s, H, params=full("joint_lo_stop", np.nan))),
        ("joint lo_stop NaN (builder)", hinge_nan),
        ("joint lo_stop NaN in one world of a batch",
         lambda: _flag(m, s, params=full("joint_lo_stop", jnp.nan))),
        ("zero quaternion (builder)", lambda: quat_builder((0, 0, 0, 0))),
        ("zero quaternion in one world of a batch",
         lambda: _flag(m, s, state=s.replace(quat=s.quat.at[0].set(0.0)))),
        ("1e30 quaternion (step: normalised as dBodySetQuaternion)",
         lambda: "OK (normalised, |q| = %.7f)" % float(jnp.linalg.norm(jaxode.step(
             m, s.replace(quat=s.quat.at[0].set(jnp.array([1e30, 0, 0, 0]))), H).quat[0]))),
        ("dt < 0", lambda: jaxode.step(m, s, -0.01)),
        ("dt 1e6", lambda: jaxode.step(m, s, 1e6)),
        ("dt < 0 in one world of a batch", lambda: _flag(m, s, dt=-H)),
        ("CartPole action 5", lambda: cartpole(5)),
        ("CartPole action 0.7", lambda: cartpole(0.7)),
        ("save(states='notastate')", lambda: save(os.path.join(tmp, "x.npz"), m, states="notastate")),
        ("save file with an array of the wrong shape", lambda: load(rewrite("shape.npz", wrong_shape))),
        ("zero fdir1", zero_fdir1),
        ("builder velocity 1e30", lambda: builder_vel(1e30)),
        ("builder velocity 1e39 (beyond float32)", lambda: builder_vel(1e39)),
        ("state velocity 1e30 in one world of a batch",
         lambda: _flag(m, s, state=s.replace(vel=s.vel.at[1, 0].set(1e30)))),
        ("state angvel 1e30 in one world of a batch",
         lambda: _flag(m, s, state=s.replace(angvel=s.angvel.at[1, 0].set(1e30)))),
        # errors that must name what is wrong
        ("wrong-shape params (mu (2,))", lambda: jaxode.step(m, s, H, params=p.replace(mu=jnp.ones(2)))),
        ("Model passed as params", lambda: jaxode.step(m, s, H, params=m)),
        ("state from another model", other_state),
        ("add_force wrong shape", lambda: jaxode.add_force(s, 0, [1.0, 2.0])),
        ("CartPole action shape (2,)", lambda: cartpole(np.array([0, 1]))),
        ("truncated save file", lambda: load(write("trunc.npz", raw[: len(raw) // 2]))),
        ("garbage bytes", lambda: load(write("garbage.npz", b"\x00garbage" * 50))),
        ("corrupted JSON", lambda: load(rewrite("json.npz", trunc_json))),
        ("tampered class name", lambda: load(rewrite("cls.npz", tamper))),
        ("empty SDF string", lambda: jaxode.load_sdf("")),
        ("whitespace SDF string", lambda: jaxode.load_sdf("   \n")),
        (".yaml materials without PyYAML", yaml_missing),
        # peer tests
        ("contact_max_correcting_vel = 0", lambda: max_vel_zero(world=dict(contact_max_correcting_vel=0.0))),
        ("surface max_vel = 0", lambda: max_vel_zero(surface=dict(max_vel=0.0))),
        ("hinge at reference pose, stops [0, 0]", hinge_zero),
    ]


def build_time(n: int) -> float:
    """Seconds for WorldBuilder.build() of n free spheres above a plane."""
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    side = int(np.ceil(np.sqrt(n)))
    for i in range(n):
        k = b.add_body(pos=(1.1 * (i % side), 1.1 * (i // side), 0.5))
        b.add_sphere(0.5, body=k)
    t = time.perf_counter()
    b.build()
    return time.perf_counter() - t


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", type=int, nargs="*", default=[],
                    help="also time build() of this many spheres (e.g. --build 1000 2000)")
    args = ap.parse_args(argv)
    for name, fn in cases():
        print(f"{name:58s} | {_outcome(fn)}", flush=True)
    for n in args.build:
        print(f"build() of {n} spheres: {build_time(n):.2f} s", flush=True)


if __name__ == "__main__":
    main()
