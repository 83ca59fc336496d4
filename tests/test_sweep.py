"""Parameter sweeps, metrics and plots checked against closed-form physics.

One scene serves every sweep (one compile: the sweeps share the model, n_steps,
the metric functions and the batch size CHUNK). Its bodies do not touch each
other (collide bits); each one carries one truth:

0 "rest"     box 0.4 x 0.4 x 0.1 m, 16 kg, resting on the plane: ODE's ERP/CFM fixed
             point gives each of its 4 contacts the depth cfm (m g / 4) h / erp
1 "slide"    box 0.2 x 0.2 x 0.1 m, 2 kg, sliding at 2 m/s: stop distance of Coulomb
             friction under ODE's semi-implicit Euler, h sum_k (v0 - k mu g h)
2 "drop"     box 0.1 m cube, 0.5 kg, dropped from 0.45 m: rebound rise from ODE's
             bounce rule (1-D recurrence below)
3 "pendulum" ball joint to the world: anchor separation (joint error)
4 "spin"     torque-free box spinning about a principal axis, gravity off: energy
             conserved, value 1/2 m v^2 + 1/2 I_yy w^2
5 "fall"     free fall: semi-implicit Euler changes the energy by -m g^2 h^2 / 2 per step

The world uses 40 QuickStep iterations, so the resting box's 4 contacts share the
load equally (at ODE's default 20 the split is off by ~1e-3, which the deepest
contact would show).
"""
import functools
import io
import math
import sys

import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode import compile_notice
from jaxode.tools import metrics as M

H, N, G, V0 = 0.01, 200, 9.81, 2.0
CHUNK = 8
ANCHOR = np.array([10.0, 0.0, 2.0])
PEND0 = np.array([10.0, 0.5, 2.0])
TRACES = []


def build_scene() -> jaxode.Model:
    b = jaxode.WorldBuilder(gravity=(0, 0, -G), iterations=40)
    b.add_plane(surface=jaxode.Surface(mu=1.0, bounce=1.0))  # geom 0
    r = b.add_body(pos=(0, 0, 0.05), mass=jaxode.mass.box((0.4, 0.4, 0.1), density=1000.0))
    b.add_box((0.4, 0.4, 0.1), body=r, category_bits=1, collide_bits=1)  # geom 1
    s = b.add_body(pos=(5, 0, 0.05), vel=(V0, 0, 0),
                   mass=jaxode.mass.box((0.2, 0.2, 0.1), density=500.0))
    b.add_box((0.2, 0.2, 0.1), body=s, category_bits=2, collide_bits=2)  # geom 2
    d = b.add_body(pos=(0, 5, 0.5), mass=jaxode.mass.box((0.1, 0.1, 0.1), density=500.0))
    b.add_box((0.1, 0.1, 0.1), body=d, category_bits=4, collide_bits=4,
              surface=jaxode.Surface(bounce=0.5))  # geom 3
    p = b.add_body(pos=tuple(PEND0))
    b.add_ball(p, None, anchor=tuple(ANCHOR))
    c, sn = math.cos(math.pi / 8), math.sin(math.pi / 8)  # 45 degrees about x
    b.add_body(pos=(15, 0, 2), quat=(c, sn, 0, 0), vel=(0.5, 0, 0),
               angvel=(0, 3 * math.cos(math.pi / 4), 3 * math.sin(math.pi / 4)),  # 3 rad/s about body y
               mass=jaxode.mass.box((0.3, 0.2, 0.1), density=100.0), gravity=False)
    b.add_body(pos=(20, 0, 1.0))
    return b.build()


def _count_traces(model, traj, final):
    TRACES.append(1)  # runs once per trace, i.e. per compilation of the sweep
    return jnp.zeros(())


def _spin_energy0(model, traj, final):
    return M.energy(model, traj, body=4)[0]


def _final_anchor_gap(model, traj, final):
    """Pendulum anchor separation at the end, from the build-time offset (independent
    of the joint tables): |x + q r q* - anchor|, r = anchor - x0 (identity start)."""
    q, x = final.quat[3], final.pos[3]
    w, u = q[0], q[1:]
    r = jnp.asarray(ANCHOR - PEND0, x.dtype)
    t = 2.0 * jnp.cross(u, r)
    return jnp.linalg.norm(x + r + w * t + jnp.cross(u, t) - jnp.asarray(ANCHOR, x.dtype))


METRICS = {
    "rest": M.resting_penetration,
    "max_depth": M.max_penetration,
    "stop": functools.partial(M.stop_distance, body=1),
    "rise": functools.partial(M.bounce_height, body=2, relative=True),
    "spin_drift": functools.partial(M.energy_drift, body=4),
    "spin_energy": _spin_energy0,
    "fall_drift": functools.partial(M.energy_drift, body=5, relative=False),
    "joint": M.joint_error,
    "joint_final": _final_anchor_gap,
    "nonfinite": M.nonfinite,
    "traces": _count_traces,
}
ERPS, CFMS = [0.1, 0.2, 0.5, 0.8], [1e-4, 1e-3, 1e-2]


@pytest.fixture(scope="module")
def scene():
    model = build_scene()
    return model, jaxode.init(model)


def run(scene, grid, **kw):
    model, state = scene
    return jaxode.sweep(model, state, N, H, grid=grid, metrics=METRICS, chunk_size=CHUNK, **kw)


@pytest.fixture(scope="module")
def rest_res(scene):
    calls = []
    notices = io.StringIO()
    # the module's one compile: its "compiling" notice (threshold 0 s here, 2 s by default)
    compile_notice.configure(enabled=True, threshold_s=0.0, stream=notices)
    try:
        res = run(scene, {"erp": ERPS, "cfm": CFMS}, progress=lambda d, t: calls.append((d, t)))
    finally:
        compile_notice.configure()
    return res, calls, notices.getvalue()


def stop_distance_discrete(mu, g, v0=V0, h=H):
    """Euler-Cromer under constant deceleration a = mu g: v_k = v0 - k a h until it
    would reverse; distance h sum v_k."""
    a = mu * g
    k = np.arange(1, int(np.floor(v0 / (a * h))) + 1)
    return h * np.sum(v0 - k * a * h)


def bounce_rise(e, g, m, cfm, erp=0.2, z0=0.45, h=H, n=N, bounce_vel=0.1, ncon=4):
    """Rise of a flat box after its first bounce under ODE's contact rule.

    Collision at the start of the step; each of the ncon contact rows targets
    c = erp depth / h, or e * v_in when the incoming speed exceeds bounce_vel and
    that is larger; a row with CFM satisfies J v+ = c - cfm lambda, lambda = m (v+ - v
    + g h) / (ncon h), and pushes only (v+ >= free-flight velocity). Then x += h v+.
    Returns apex minus the height after the first step with v >= 0 following v < 0.
    """
    k = cfm * m / (ncon * h)
    z, v, zs, vs = z0, 0.0, [], []
    for _ in range(n):
        depth = -z
        if depth > 0:
            c = erp * depth / h
            if -v > bounce_vel and e * -v > c:
                c = e * -v
            v = max(v - g * h, (c + k * (v - g * h)) / (1 + k))
        else:
            v -= g * h
        z += h * v
        zs.append(z)
        vs.append(v)
    first = next(i for i in range(1, n) if vs[i - 1] < 0 <= vs[i])
    return max(zs[first:]) - zs[first]


# --------------------------------------------------------------- physics truths
def test_resting_depth_matches_erp_cfm_fixed_point(scene, rest_res):
    model, _ = scene
    res, calls, notices = rest_res
    assert res.grid_shape == (4, 3) and len(res) == 12
    assert res.params == ("erp", "cfm")
    np.testing.assert_array_equal(res.columns["erp"], np.repeat(ERPS, 3))
    np.testing.assert_array_equal(res.columns["cfm"], np.tile(CFMS, 4))
    m = float(model.params.body_mass[0])
    # Row equation at rest (v = 0, lambda = m g / 4): (cfm/h) lambda = erp depth / h^2.
    expected = np.outer(1 / np.array(ERPS), CFMS) * (m * G / 4) * H
    np.testing.assert_allclose(res.reshape("rest"), expected, rtol=5e-4)
    assert np.all(res.columns["max_depth"] >= res.columns["rest"])
    assert not res.columns["nonfinite"].any()
    # 12 variants in chunks of 8: two calls of one compiled function.
    assert res.stats["batch"] == CHUNK and res.stats["n_chunks"] == 2
    assert calls == [(8, 12), (12, 12)]
    # one notice for the one compile (the second chunk reuses it)
    assert notices.count("\n") == 1
    assert notices.startswith(f"jaxode: compiling the sweep ({CHUNK} worlds x {N} steps, 6 bodies)")


def test_energy_metrics_conservation_and_free_fall(scene, rest_res):
    model, _ = scene
    res, _, _ = rest_res
    p = model.params
    m4, iyy = float(p.body_mass[4]), float(p.body_inertia[4, 1, 1])
    np.testing.assert_allclose(res.columns["spin_energy"], 0.5 * m4 * 0.5 ** 2 + 0.5 * iyy * 3.0 ** 2,
                               rtol=1e-5)
    assert np.max(np.abs(res.columns["spin_drift"])) < 1e-5
    # units: relative drift is dimensionless, relative=False in joules; our own metric none
    assert (res.unit("spin_drift"), res.unit("fall_drift"), res.unit("spin_energy")) == ("", "J", "")
    # Free fall: E_k - E_{k-1} = -m g^2 h^2 / 2 exactly; N - 1 intervals are recorded.
    np.testing.assert_allclose(res.columns["fall_drift"], -(N - 1) * 0.5 * G ** 2 * H ** 2,
                               rtol=2e-3)


def test_zip_sweep_stop_distance_and_bounce(scene):
    model, _ = scene
    mus, gz, bounces = [0.2, 0.5, 1.0], [-9.81, -5.0, -9.81], [0.0, 0.5, 0.9]
    res = run(scene, {"mu": mus, ("gravity", 2): gz, "bounce[3]": bounces}, zip=True)
    assert res.zipped and res.grid_shape == (3,)
    assert res.params == ("mu", "gravity[2]", "bounce[3]")
    np.testing.assert_array_equal(res.columns["mu"], mus)
    np.testing.assert_array_equal(res.columns["gravity[2]"], gz)
    g = -np.array(gz)
    stop = [stop_distance_discrete(mu, gg) for mu, gg in zip(mus, g)]
    np.testing.assert_allclose(res.columns["stop"], stop, rtol=1e-3)
    # The continuum answer v0^2 / (2 mu g), to the integrator's error (< v0 h).
    np.testing.assert_allclose(res.columns["stop"], V0 ** 2 / (2 * np.array(mus) * g), rtol=0,
                               atol=V0 * H)
    # The plane's bounce is 1, so the contact's (the minimum) is the drop box's.
    m2, cfm = float(model.params.body_mass[2]), float(model.params.cfm)
    rise = [bounce_rise(e, gg, m2, cfm) for e, gg in zip(bounces, g)]
    np.testing.assert_allclose(res.columns["rise"], rise, rtol=2e-3)
    np.testing.assert_allclose(res.columns["fall_drift"], -(N - 1) * 0.5 * g ** 2 * H ** 2,
                               rtol=2e-3)


def test_full_grid_axes_order_and_indexed_keys(scene):
    model, _ = scene
    grid = {"mu[2]": [0.25, 0.5], "cfm": [1e-4, 1e-3], ("gravity", 2): [-9.81, -4.905]}
    res = run(scene, grid)
    assert res.grid_shape == (2, 2, 2) and res.params == ("mu[2]", "cfm", "gravity[2]")
    mu, cfm, gz = np.meshgrid(*grid.values(), indexing="ij")
    for name, col in zip(res.params, (mu, cfm, gz)):
        np.testing.assert_array_equal(res.columns[name], col.ravel())
        np.testing.assert_array_equal(res.reshape(name), col)
    # ("mu", 2) is the sliding box's geom (the plane's mu = 1 is larger): the stop
    # distance follows mu[2] and g along their axes; the resting depth cfm and g.
    stop = np.vectorize(stop_distance_discrete)(mu, -gz)
    np.testing.assert_allclose(res.reshape("stop"), stop, rtol=2e-3)
    m = float(model.params.body_mass[0])
    np.testing.assert_allclose(res.reshape("rest"), cfm * (m * -gz / 4) * H / 0.2, rtol=5e-4)
    pd = pytest.importorskip("pandas")
    df = res.to_pandas()  # indexed by the swept parameters
    assert isinstance(df.index, pd.MultiIndex) and len(df) == 8
    assert list(df.index.names) == list(res.params) and list(df.columns) == list(METRICS)
    for (m, c, g), row in df.iterrows():
        assert row["stop"] == pytest.approx(stop_distance_discrete(m, -g), rel=2e-3)
        assert row["rest"] == pytest.approx(c * (float(model.params.body_mass[0]) * -g / 4)
                                            * H / 0.2, rel=5e-4)
    np.testing.assert_array_equal(df["stop"].xs(0.25, level="mu[2]").unstack().to_numpy(),
                                  res.reshape("stop")[0])
    assert df.attrs["units"]["gravity[2]"] == "m/s^2" and df.attrs["units"]["stop"] == "m"
    flat = res.to_pandas(index=False)
    assert list(flat.columns) == list(res.params) + list(METRICS)
    np.testing.assert_array_equal(flat["cfm"], res.columns["cfm"])
    xr = pytest.importorskip("xarray")
    ds = res.to_xarray()
    assert isinstance(ds, xr.Dataset) and ds["stop"].dims == res.params
    np.testing.assert_array_equal(ds["gravity[2]"], grid[("gravity", 2)])
    np.testing.assert_array_equal(ds["stop"].sel({"mu[2]": 0.5, "gravity[2]": -9.81}),
                                  res.reshape("stop")[1, :, 0])
    assert ds["gravity[2]"].attrs["units"] == "m/s^2" and ds["rest"].attrs["units"] == "m"
    assert ds["cfm"].attrs["units"] == "" and "dWorldSetCFM" in ds["cfm"].attrs["description"]


def test_joint_error_metric(rest_res):
    res, _, _ = rest_res
    joint, final = res.reshape("joint"), res.reshape("joint_final")
    # Max over the run bounds the independently computed final separation.
    assert np.all(joint >= final * (1 - 1e-5)) and np.all(final > 0)
    assert np.all(joint < 0.05)
    # Stronger error reduction holds the anchors closer; softer rows (cfm) let them part.
    assert np.all(np.diff(joint, axis=0) < 0)
    assert np.all(np.diff(joint, axis=1) > 0)


def test_chunked_and_unchunked_identical_one_compile(scene, rest_res):
    res, _, _ = rest_res
    n_traces = len(TRACES)
    assert n_traces == 1  # every sweep so far reused one compiled function
    erp, cfm = res.columns["erp"], res.columns["cfm"]
    # rest_res ran rows 0-7 and 8-11 (+ 4 padding rows) as two chunks; the
    # second alone, in one call, gives bit-identical metrics.
    for rows in (np.arange(8, 12),):
        calls = []
        sub = run(scene, {"erp": list(erp[rows]), "cfm": list(cfm[rows])}, zip=True,
                  progress=lambda d, t: calls.append((d, t)))
        assert sub.stats["n_chunks"] == 1 and calls == [(len(rows), len(rows))]
        for name in METRICS:
            np.testing.assert_array_equal(sub.columns[name], res.columns[name][rows],
                                          err_msg=name)
    # Shuffled across chunks: the same up to float rounding (XLA's vectorised
    # mean over steps can round differently in another batch lane).
    pick = [11, 0, 9, 4, 7]
    sub = run(scene, {"erp": list(erp[pick]), "cfm": list(cfm[pick])}, zip=True)
    for name in METRICS:
        np.testing.assert_allclose(sub.columns[name], res.columns[name][pick], rtol=1e-6,
                                   err_msg=name)
    assert len(TRACES) == n_traces  # padded calls reuse the same compiled function


# -------------------------------------------------------------------- plumbing
def test_batch_size_from_memory_budget(scene):
    from jaxode.tools.sweep import _batch_size, _bucket
    model, state = scene
    assert [_bucket(n) for n in (1, 2, 3, 5, 7, 9, 13, 100, 1024, 1025)] == \
        [1, 2, 3, 6, 8, 12, 16, 128, 1024, 1536]
    assert _batch_size(1000, None, 1 << 40, state, model.params, N) == 1024
    one = _batch_size(10 ** 6, None, 1, state, model.params, N)
    assert one == 1
    # The trajectory dominates: doubling n_steps about halves the batch.
    b1 = _batch_size(10 ** 6, None, 1 << 28, state, model.params, 1000)
    b2 = _batch_size(10 ** 6, None, 1 << 28, state, model.params, 2000)
    assert 1.5 < b1 / b2 <= 2.0
    assert _batch_size(3, 5, None, state, model.params, N) == 5


@pytest.mark.parametrize("grid, match", [
    ({"erpp": [0.1]}, r"unknown parameter 'erpp'.*'erp', 'cfm'"),
    ({"erp": [0.5, 1.5]}, r"erp: values must be in \[0, 1\] \(got 1.5\)"),
    ({"cfm": [-1e-5]}, r"cfm: values must be in \[0, inf\) \(got -1e-05\)"),
    ({"mu": [0.3, -0.1]}, r"mu: values must be in \[0, inf\] \(inf allowed\)"),
    ({("mu", 9): [0.3]}, r"geom index 9 out of range \[0, 3\]"),
    ({"body_mass[0]": [0.0]}, r"body_mass\[0\]: values must be in \(0, inf\) kg"),
    ({"bounce": [1.2]}, r"bounce: values must be in \[0, 1\]"),
    ({"gravity": [-9.81]}, r"gravity: each value must be an array of shape \(3,\)"),
    ({"erp": []}, r"empty"),
    ({"erp": 0.2}, r"list of values"),
    ({"rest": [0.1]}, r"unknown parameter 'rest'"),
])
def test_bad_grids_raise(scene, grid, match):
    with pytest.raises(ValueError, match=match):
        run(scene, grid)


def test_bad_arguments_raise(scene):
    model, state = scene
    with pytest.raises(ValueError, match="equal length"):
        run(scene, {"erp": [0.1, 0.2], "cfm": [1e-5]}, zip=True)
    with pytest.raises(ValueError, match="n_steps"):
        jaxode.sweep(model, state, 0, H, {"erp": [0.2]}, METRICS)
    with pytest.raises(ValueError, match="dt"):
        jaxode.sweep(model, state, N, -0.01, {"erp": [0.2]}, METRICS)
    with pytest.raises(ValueError, match="chunk_size"):
        jaxode.sweep(model, state, N, H, {"erp": [0.2]}, METRICS, chunk_size=0)
    with pytest.raises(ValueError, match="metrics"):
        jaxode.sweep(model, state, N, H, {"erp": [0.2]}, {})
    with pytest.raises(ValueError, match="ONE world"):
        jaxode.sweep(model, jaxode.batch(state, 2), N, H, {"erp": [0.2]}, METRICS)
    with pytest.raises(ValueError, match="joint_hi_stop must be >= joint_lo_stop"):
        run(scene, {"joint_lo_stop[0,0]": [0.5], "joint_hi_stop[0,0]": [0.1]})


def test_optional_dependencies_missing(rest_res, monkeypatch):
    res, _, _ = rest_res
    monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.setitem(sys.modules, "xarray", None)
    with pytest.raises(ImportError, match=r"to_pandas needs pandas: pip install 'jaxode\[data\]'"):
        res.to_pandas()
    with pytest.raises(ImportError, match=r"to_xarray needs xarray: pip install 'jaxode\[data\]'"):
        res.to_xarray()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    from jaxode.tools import plot
    with pytest.raises(ImportError, match=r"jaxode\[plot\]"):
        plot.heatmap(res, "erp", "cfm", "rest")


def test_plots(rest_res):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from jaxode.tools import plot
    res, _, _ = rest_res
    ax = plot.heatmap(res, "erp", "cfm", "rest")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("erp", "cfm", "")
    assert ax.figure.axes[-1].get_ylabel() == "rest [m]"  # the colour bar, with the unit
    mesh = ax.collections[0]
    np.testing.assert_allclose(np.asarray(mesh.get_array()).reshape(3, 4), res.reshape("rest").T)
    assert ax.get_yscale() == "log" and ax.get_xscale() == "linear"  # cfm spans 100x
    ax = plot.line(res, "erp", "rest", hue="cfm")
    assert len(ax.lines) == 3
    for j, ln in enumerate(ax.lines):
        np.testing.assert_allclose(ln.get_ydata(), res.reshape("rest")[:, j])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [f"cfm = {c:g}" for c in CFMS]
    ax = plot.line(res, "cfm", "joint", where={"erp": 0.5}, log="")
    np.testing.assert_allclose(ax.lines[0].get_ydata(), res.reshape("joint")[2])
    # a 2-D sweep shown as a line: the title names the slice
    assert (ax.get_ylabel(), ax.get_title()) == ("joint [m]", "joint at erp = 0.5")
    ax = plot.line(res, "cfm", "joint", where={"erp": 0.5}, title="")
    assert ax.get_title() == ""
    with pytest.raises(ValueError, match="also varies 'cfm'"):
        plot.line(res, "erp", "rest")
    with pytest.raises(ValueError, match="not a metric"):
        plot.heatmap(res, "erp", "cfm", "nope")
    plt.close("all")
