"""Bad inputs: every per-world parameter declared once (jaxode.params_spec) and checked
everywhere; clear errors for bad shapes, dtypes, ranges, dt, quaternions, states, forces,
actions and save files; a bad world of a batch is flagged at run time while the others
stay bitwise untouched. Truths: the ODE manual's ranges and semantics (erp in [0, 1],
cfm >= 0, dt > 0, contact max correcting velocity >= 0 with 0 = no correction,
dBodySetQuaternion normalises), not outputs of our code."""
import dataclasses
import json
import math
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode import params_spec
from jaxode.io import load, save

H = 0.01
N = 5

# Params' public field order (save files and positional construction depend on it).
PARAMS_FIELDS = [
    "gravity", "erp", "cfm", "sor", "contact_max_correcting_vel", "contact_surface_layer",
    "linear_damping", "angular_damping", "linear_damping_threshold",
    "angular_damping_threshold", "max_angular_speed", "body_mass", "body_inertia", "mu", "mu2",
    "fdir1", "bounce", "bounce_vel", "soft_erp", "soft_cfm", "max_vel", "min_depth",
    "joint_lo_stop", "joint_hi_stop", "joint_vel", "joint_fmax", "joint_fudge_factor",
    "joint_bounce", "joint_cfm", "joint_stop_erp", "joint_stop_cfm", "joint_suspension_erp",
    "joint_suspension_cfm", "slip1", "slip2", "kp", "kd", "motion1", "motion2", "motionN",
    "static_mu", "static_speed", "rolling", "spinning", "mat_friction", "mat_restitution",
    "mat_restitution_threshold", "mat_static_friction", "mat_static_speed", "mat_rolling",
    "mat_spinning", "mat_soft_erp", "mat_soft_cfm", "torsional", "patch_radius",
    "surface_radius", "use_patch_radius", "joint_damping", "joint_friction",
    "body_auto_disable", "body_auto_disable_linear_threshold",
    "body_auto_disable_angular_threshold", "body_auto_disable_steps", "body_auto_disable_time",
    "joint_armature", "joint_stiffness", "joint_springref"]


def _scene():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    for i in range(2):
        k = b.add_body(pos=(0.0, 0.0, 0.5 + 1.0 * i))
        b.add_sphere(0.5, body=k)
    b.add_hinge(0, 1, anchor=(0, 0, 1), axis=(1, 0, 0))
    return b.build()


@pytest.fixture(scope="module")
def scene():
    m = _scene()
    return m, jaxode.init(m)


@pytest.fixture(scope="module")
def batch_roll():
    """One compiled vmap(rollout) shared by the run-time tests (state, params, dt batched)."""
    return jax.jit(jax.vmap(lambda model, s, p, dt: jaxode.rollout(model, s, N, dt, params=p)[0],
                            in_axes=(None, 0, 0, 0)))


# ---------------------------------------------------------------- declaration
def test_params_fields_come_from_one_declaration():
    names = [f.name for f in dataclasses.fields(jaxode.Params)]
    assert names == PARAMS_FIELDS
    assert list(params_spec.SPECS) == PARAMS_FIELDS
    doc = jaxode.Params.__doc__
    for s in params_spec.SPECS_LIST:
        assert s.name in doc
        assert s.entity in params_spec.ENTITIES
        assert s.switch in ("always", "joints", "materials", "none") or s.switch.startswith("flag:")
    # the ODE manual's ranges
    assert params_spec.SPECS["erp"].range_text() == "[0, 1]"
    assert params_spec.SPECS["cfm"].range_text() == "[0, inf)"
    assert params_spec.SPECS["contact_max_correcting_vel"].range_text().startswith("[0, inf]")


def test_surface_parameter_added_in_the_declaration_becomes_a_surface_field():
    from jaxode.build.surface import extend_surface
    spec = params_spec.ParamSpec("stickiness", "geom", "test parameter", lo=0.0,
                                 default=-1.0, unset="negative: off", combine="min",
                                 switch="none")
    cls = extend_surface(jaxode.Surface, params_spec.SPECS_LIST + (spec,))
    s = cls(stickiness=0.5)
    assert s.stickiness == 0.5 and cls().stickiness is None and s.mu == 1.0


# ---------------------------------------------------------- builder / Surface
@pytest.mark.parametrize("kw, field, value, rng", [
    (dict(erp=1.5), "erp", "1.5", "[0, 1]"),
    (dict(cfm=-1.0), "cfm", "-1.0", "[0, inf)"),
    (dict(sor=2.0), "sor", "2.0", "(0, 2)"),
    (dict(contact_max_correcting_vel=-1.0), "contact_max_correcting_vel", "-1.0", "[0, inf]"),
    (dict(max_angular_speed=0.0), "max_angular_speed", "0.0", "(0, inf]"),
    (dict(linear_damping=float("nan")), "linear_damping", "nan", "[0, 1]"),
])
def test_builder_world_params_raise(kw, field, value, rng):
    with pytest.raises(ValueError) as e:
        jaxode.WorldBuilder(**kw)
    msg = str(e.value)
    assert field in msg and value in msg and rng in msg


@pytest.mark.parametrize("kw, field, value", [
    (dict(mu=-0.1), "mu", "-0.1"), (dict(bounce=1.2), "bounce", "1.2"),
    (dict(soft_erp=float("nan")), "soft_erp", "nan"), (dict(max_vel=-1.0), "max_vel", "-1.0"),
    (dict(fdir1=(float("nan"), 0.0, 0.0)), "fdir1", "nan"), (dict(kp=0.0), "kp", "0.0"),
    (dict(fdir1=(1.0, 0.0)), "fdir1", "(1.0, 0.0)"),
])
def test_surface_values_raise(kw, field, value):
    with pytest.raises(ValueError) as e:
        jaxode.Surface(**kw).validate("s")
    assert f"s.{field}" in str(e.value) and value in str(e.value)


def test_zero_fdir1_is_unset_and_joint_params_checked():
    jaxode.Surface(fdir1=(0.0, 0.0, 0.0)).validate()
    b = jaxode.WorldBuilder()
    b.add_body()
    with pytest.raises(ValueError, match=r"joint 0 \(hinge\): stop_erp.*\[0, 1\].*1\.5"):
        b.add_hinge(0, None, axis=(1, 0, 0), stop_erp=1.5)
    with pytest.raises(ValueError, match=r"lo_stop.*nan"):
        b.add_hinge(0, None, axis=(1, 0, 0), lo_stop=float("nan"))


def test_builder_velocity_must_be_finite():
    b = jaxode.WorldBuilder()
    with pytest.raises(ValueError, match=r"body 0: vel must be finite.*nan"):
        b.add_body(vel=(float("nan"), 0, 0))
    # ODE bounds no velocity, but the step squares it: |v|^2 must stay finite in
    # the working dtype (float32 max 3.4e38: components up to sqrt(max / 3) = 1.07e19)
    big = math.sqrt(np.finfo(jnp.zeros(()).dtype).max / 3)
    b.add_body(vel=(0.9 * big, 0, 0), angvel=(0, 0, -0.9 * big), pos=(0.9 * big, 0, 0))
    for kw in (dict(vel=(0, 1.1 * big, 0)), dict(angvel=(1.1 * big, 0, 0)),
               dict(pos=(0, 0, -1.1 * big))):
        name = next(iter(kw))
        with pytest.raises(ValueError, match=rf"body 1: {name} must have every component "
                                             rf"within {re.escape(f'+-{big:.3g}')}.*squared"):
            b.add_body(**kw)
    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match=r"vel must.*1\.07e\+19.*1e\+30"):
            b.add_body(vel=(1e30, 0, 0))
    with pytest.raises(ValueError, match=r"body 1: quat must be a non-zero quaternion.*"
                                         r"\(0\.0, 0\.0, 0\.0, 0\.0\)"):
        b.add_body(quat=(0, 0, 0, 0))


# ------------------------------------------------- max_vel = 0 (ODE accepts it)
def _sunk_box(world_vel=math.inf, surface_vel=math.inf, gravity=-9.81):
    b = jaxode.WorldBuilder(gravity=(0, 0, gravity), erp=0.2,
                            contact_max_correcting_vel=world_vel)
    b.add_plane(surface=jaxode.Surface(max_vel=surface_vel))
    k = b.add_body(pos=(0, 0, 0.45))  # box of side 1, sunk 0.05 m into the ground
    b.add_box((1.0, 1.0, 1.0), body=k)
    m = b.build()
    return m, jaxode.init(m)


@pytest.mark.parametrize("kw", [dict(world_vel=0.0), dict(surface_vel=0.0)])
def test_zero_max_correcting_velocity_leaves_a_sunk_box_at_its_depth(kw):
    # ODE: c = min(erp * depth / h, max_vel) = 0: no penetration-correcting velocity.
    m, s = _sunk_box(**kw)
    z = np.asarray(jaxode.rollout(m, s, 20, H)[1].pos[:, 0, 2])
    assert np.all(np.abs(z - 0.45) < 1e-3), z
    # without gravity nothing pushes at all: the box stays exactly where it is
    m0, s0 = _sunk_box(gravity=0.0, **kw)
    assert float(jaxode.rollout(m0, s0, 5, H)[0].pos[0, 2]) == np.float32(0.45)
    # the default (no limit) pushes the box out at erp * depth / h
    mi, si = _sunk_box()
    assert float(jaxode.rollout(mi, si, 20, H)[0].pos[0, 2]) > 0.47


# ------------------------------------------------------ trace-time structure
def test_wrong_params_types_raise(scene):
    m, s = scene
    with pytest.raises(TypeError, match=r"params must be a jaxode.Params.*Model"):
        jaxode.step(m, s, H, params=m)
    with pytest.raises(TypeError, match=r"params must be a jaxode.Params.*State"):
        jaxode.rollout(m, s, 2, H, params=s)
    with pytest.raises(TypeError, match=r"state must be a jaxode.State.*Params"):
        jaxode.step(m, m.params, H)
    with pytest.raises(TypeError, match=r"params.erp must have a real floating dtype.*bool"):
        jaxode.step(m, s, H, params=m.params.replace(erp=jnp.asarray(True)))


def test_wrong_params_shapes_raise(scene):
    m, s = scene
    with pytest.raises(ValueError) as e:
        jaxode.rollout(m, s, 2, H, params=m.params.replace(body_mass=jnp.ones(1)))
    assert "params.body_mass" in str(e.value) and "(2,)" in str(e.value) and "(1,)" in str(e.value)
    batched = jaxode.batch(m.params, 3)
    with pytest.raises(ValueError, match=r"params.gravity must have shape \(3,\).*\(3, 3\).*batch"):
        jaxode.step(m, s, H, params=batched)
    with pytest.raises(ValueError, match=r"params.joint_lo_stop is None but this model needs it"):
        jaxode.step(m, s, H, params=m.params.replace(joint_lo_stop=None))
    # the same checks at trace time inside jit
    with pytest.raises(ValueError, match=r"params.mu must have shape \(3,\)"):
        jax.jit(lambda p: jaxode.step(m, s, H, params=p))(m.params.replace(mu=jnp.ones(2)))


@pytest.mark.parametrize("field, value", [
    ("cfm", -1.0), ("erp", 1.5), ("bounce", float("nan")), ("body_mass", 0.0),
    ("joint_lo_stop", float("nan")), ("sor", 0.0),
])
def test_concrete_bad_values_raise_at_call_time(scene, field, value):
    m, s = scene
    x = getattr(m.params, field)
    p = m.params.replace(**{field: jnp.full(x.shape, value, x.dtype)})
    with pytest.raises(ValueError) as e:
        jaxode.rollout(m, s, 2, H, params=p)
    assert f"params.{field}" in str(e.value) and repr(float(value)) in str(e.value)


@pytest.mark.parametrize("dt", [-0.01, 0.0, float("nan"), float("inf"), 1e6, 1e-12])
def test_bad_dt_raises(scene, dt):
    m, s = scene
    with pytest.raises(ValueError) as e:
        jaxode.step(m, s, dt)
    assert "dt" in str(e.value) and repr(float(dt)) in str(e.value)
    with pytest.raises(ValueError, match="dt"):
        jaxode.rollout(m, s, 2, dt)


def test_dt_type_and_shape(scene):
    m, s = scene
    with pytest.raises(TypeError, match="dt must be a number"):
        jaxode.step(m, s, "0.01")
    with pytest.raises(ValueError, match=r"dt must be a scalar.*\(2,\)"):
        jaxode.step(m, s, jnp.array([0.01, 0.01]))


def test_state_of_another_model_raises(scene):
    m, s = scene
    b = jaxode.WorldBuilder()
    for _ in range(3):
        b.add_body()
    other = jaxode.init(b.build())
    with pytest.raises(ValueError, match=r"state.pos must have shape \(2, 3\).*\(3, 3\).*another model"):
        jaxode.step(m, other, H)
    with pytest.raises(ValueError, match=r"state.pos must have shape \(2, 3\).*\(4, 2, 3\).*batch"):
        jaxode.rollout(m, jaxode.batch(s, 4), 2, H)


def test_force_helpers_check_their_vectors(scene):
    _, s = scene
    with pytest.raises(ValueError, match=r"force must have shape \(3,\).*\(2,\)"):
        jaxode.add_force(s, 0, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"torque must have shape \(3,\).*\(3, 3\)"):
        jaxode.add_rel_torque(s, 0, np.eye(3))
    with pytest.raises(ValueError, match=r"force must be finite.*nan"):
        jaxode.add_force_at_pos(s, 0, [float("nan"), 0, 0], [0, 0, 0])
    with pytest.raises(ValueError, match=r"pos must have shape \(3,\)"):
        jaxode.add_force_at_rel_pos(s, 0, [1.0, 0, 0], [0.0])


# ---------------------------------------------------------------- run time
def _bad_world(m, s, case):
    """(state, params, dt) of world 1 for each class of run-time bad input."""
    p, dt = m.params, jnp.asarray(H, s.pos.dtype)
    f = lambda name, v: p.replace(**{name: jnp.full_like(getattr(p, name), v)})
    if case == "quat_zero":
        return s.replace(quat=s.quat.at[0].set(0.0)), p, dt
    if case == "quat_nan":
        return s.replace(quat=s.quat.at[1, 2].set(jnp.nan)), p, dt
    if case == "dt":
        return s, p, -dt
    if case == "dt_nan":
        return s, p, dt * jnp.nan
    if case == "vel_huge":  # its square overflows float32 (and 1e300 float64)
        return s.replace(vel=s.vel.at[1, 0].set(1e300 if s.vel.dtype == jnp.float64 else 1e30)), p, dt
    if case == "pos_inf":
        return s.replace(pos=s.pos.at[0, 2].set(jnp.inf)), p, dt
    name, v = {"cfm": ("cfm", -1.0), "erp": ("erp", 2.0), "bounce": ("bounce", jnp.nan),
               "mass": ("body_mass", 0.0), "stop": ("joint_lo_stop", jnp.nan),
               "inertia": ("body_inertia", -1.0)}[case]
    return s, f(name, v), dt


@pytest.mark.parametrize("case", ["cfm", "erp", "bounce", "mass", "stop", "inertia",
                                  "dt", "dt_nan", "quat_zero", "quat_nan", "vel_huge",
                                  "pos_inf"])
def test_one_bad_world_is_flagged_and_frozen_others_bitwise_untouched(scene, batch_roll, case):
    m, s = scene
    s = s.replace(vel=s.vel.at[0, 0].set(0.3))
    clean = (jaxode.batch(s, 3), jaxode.batch(m.params, 3),
             jnp.full((3,), H, s.pos.dtype))
    bs, bp, bdt = _bad_world(m, s, case)
    mixed = jax.tree.map(lambda c, b: c.at[1].set(b), clean, (bs, bp, bdt))
    ref = batch_roll(m, *clean)
    out = batch_roll(m, *mixed)
    assert np.asarray(out.nonfinite).tolist() == [False, True, False]
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        for w in (0, 2):
            assert np.array_equal(np.asarray(a[w]), np.asarray(b[w]))
    # world 1 is left exactly as it was handed in (frozen)
    for a, b in zip(jax.tree.leaves(bs.replace(nonfinite=jnp.asarray(True))),
                    jax.tree.leaves(jax.tree.map(lambda x: x[1], out))):
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    assert bool(ref.pos[0, 0, 0] != s.pos[0, 0])  # the clean worlds really moved


def test_step_flags_traced_bad_params(scene):
    m, s = scene
    f = jax.jit(lambda p: jaxode.step(m, s, H, params=p))
    out = f(m.params.replace(cfm=jnp.asarray(-1.0, s.pos.dtype)))
    assert bool(out.nonfinite) and np.array_equal(np.asarray(out.pos), np.asarray(s.pos))
    assert not bool(f(m.params).nonfinite)


def test_non_unit_quaternion_is_normalised_as_dBodySetQuaternion(scene):
    m, s = scene
    for scale in (2.0, 1e30):
        q = s.quat.at[0].set(jnp.array([1.0, 1.0, 0.0, 0.0]) * scale)
        out = jaxode.step(m, s.replace(quat=q), H)
        assert not bool(out.nonfinite)
        assert abs(float(jnp.linalg.norm(out.quat[0])) - 1.0) < 1e-5


# ------------------------------------------------------------------- joints
def test_hinge_at_reference_pose_reads_exact_zero_and_pinned_stop_gives_zero_torque():
    b = jaxode.WorldBuilder()
    k = b.add_body()
    b.add_sphere(0.1, body=k)
    h = b.add_hinge(k, None, anchor=(0, 0, 0), axis=(0, 0, 1), lo_stop=0.0, hi_stop=0.0)
    m = b.build()
    s = jaxode.init(m)
    assert float(jaxode.hinge_angle(m, s, h)) == 0.0
    out = jaxode.step(m, s, H)
    assert np.all(np.asarray(out.joint_feedback) == 0.0)  # ODE: exactly no stop force
    assert np.all(np.asarray(out.angvel) == 0.0)
    g = jax.grad(lambda w: jaxode.step(m, s.replace(angvel=s.angvel.at[0, 2].set(w)),
                                       H).angvel[0, 2])(0.0)
    assert np.isfinite(float(g))
    ga = jax.grad(lambda w: jaxode.hinge_angle(
        m, s.replace(quat=s.quat.at[0].set(jnp.stack([jnp.cos(w), 0.0, 0.0, jnp.sin(w)]))), h))
    assert np.isfinite(float(ga(0.0))) and np.isfinite(float(ga(0.1)))


# --------------------------------------------------------------------- envs
def test_cartpole_rejects_bad_actions():
    from jaxode.tools.envs import CartPole
    env = CartPole()
    st = env.reset(jax.random.PRNGKey(0))
    for a, err, txt in ((5, ValueError, "5"), (0.7, ValueError, "0.7"), (-1, ValueError, "-1"),
                        (np.array([0, 1]), ValueError, "(2,)"), ("x", TypeError, "dtype")):
        with pytest.raises(err) as e:
            env.step(st, a)
        assert "action" in str(e.value) and "[0, 1]" in str(e.value) and txt in str(e.value)
    sb = env.reset_batch(jax.random.split(jax.random.PRNGKey(0), 3))
    with pytest.raises(ValueError, match=r"shape \(3,\) or \(3, 1\).*\(2,\)"):
        env.step_batch(sb, np.array([0, 1]))
    with pytest.raises(ValueError, match=r"action must be one integer.*5"):
        env.step_batch(sb, np.array([0, 5, 1]))
    # traced: an action outside the space flags (and ends) that world only
    out = jax.jit(jax.vmap(env.step))(sb, jnp.array([0, 5, 1]))
    assert np.asarray(out.physics.nonfinite).tolist() == [False, True, False]
    assert np.asarray(out.done).tolist() == [False, True, False]


def test_continuous_env_action_errors_name_shape_and_range():
    from jaxode.tools.envs import make
    env = make("pendulum")
    with pytest.raises(ValueError, match=r"env 'pendulum': action must have shape \(1,\) "
                                         r"\(1 number\(s\) in \[-2, 2\] per world\) "
                                         r"\(got shape \(17,\)\)"):
        env.check_action(np.zeros(17))
    with pytest.raises(ValueError, match=r"action must be finite.*nan"):
        env.check_action(np.array([np.nan]))
    with pytest.raises(TypeError, match=r"action must be real numbers.*<U1"):
        env.check_action("x")


# -------------------------------------------------------------- save files
def _rewrite(path, src, change):
    with np.load(src, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    change(d)
    with open(path, "wb") as f:
        np.savez(f, **d)


def test_save_and_load_errors(scene, tmp_path):
    m, s = scene
    with pytest.raises(TypeError, match=r"states must be a jaxode.State.*notastate"):
        save(tmp_path / "a.npz", m, states="notastate")
    with pytest.raises(TypeError, match=r"model must be a jaxode.Model"):
        save(tmp_path / "a.npz", s, s)
    good = tmp_path / "good.npz"
    save(good, m, s)
    load(good)
    raw = good.read_bytes()

    bad = tmp_path / "trunc.npz"
    bad.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match=r"trunc.npz.*not a readable"):
        load(bad)
    bad = tmp_path / "garbage.npz"
    bad.write_bytes(b"\x00garbage" * 50)
    with pytest.raises(ValueError, match=r"garbage.npz: not a .npz save file.*starts with "
                                         r"b'PK'.*\\x00gar"):
        load(bad)
    bad = tmp_path / "empty.npz"
    bad.write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty.npz: .*the file is empty"):
        load(bad)

    def shape(d):
        d["states/pos"] = np.zeros((5, 3), d["states/pos"].dtype)
    bad = tmp_path / "shape.npz"
    _rewrite(bad, good, shape)
    with pytest.raises(ValueError, match=r"shape.npz.*states.pos must have shape \(2, 3\).*\(5, 3\)"):
        load(bad)

    def params_shape(d):
        d["model/params/mu"] = np.zeros((7,), d["model/params/mu"].dtype)
    bad = tmp_path / "pshape.npz"
    _rewrite(bad, good, params_shape)
    with pytest.raises(ValueError, match=r"pshape.npz.*params.mu must have shape \(3,\).*\(7,\)"):
        load(bad)

    def json_bad(d):
        d["__structure__"] = np.array(str(d["__structure__"])[:-7])
    bad = tmp_path / "json.npz"
    _rewrite(bad, good, json_bad)
    with pytest.raises(ValueError, match=r"json.npz.*not valid JSON"):
        load(bad)

    def tamper(d):
        st = json.loads(str(d["__structure__"]))
        st["states"]["dc"] = "jaxode.types:NoSuchClass"
        d["__structure__"] = np.array(json.dumps(st))
    bad = tmp_path / "cls.npz"
    _rewrite(bad, good, tamper)
    with pytest.raises(ValueError, match=r"cls.npz.*unknown class 'jaxode.types:NoSuchClass'"):
        load(bad)

    def foreign(d):
        st = json.loads(str(d["__structure__"]))
        st["states"]["dc"] = "os:system"
        d["__structure__"] = np.array(json.dumps(st))
    bad = tmp_path / "foreign.npz"
    _rewrite(bad, good, foreign)
    with pytest.raises(ValueError, match=r"foreign.npz.*refusing"):
        load(bad)


@pytest.mark.parametrize("src", ["", "   \n", b""])
def test_empty_scene_string_is_named(src):
    for fn in (jaxode.load_sdf, jaxode.load_urdf):
        with pytest.raises(ValueError, match=r"empty input.*file path or a string of XML"):
            fn(src)


def test_yaml_materials_without_pyyaml(tmp_path, monkeypatch):
    p = tmp_path / "m.yaml"
    p.write_text("materials: []\n")
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ImportError, match=r"pip install pyyaml"):
        jaxode.load_materials(p)


# ------------------------------------------------------------------- sweep
def test_sweep_ranges_come_from_the_declaration(scene):
    m, s = scene
    metrics = {"z": lambda model, traj, final: final.pos[0, 2]}
    r = jaxode.sweep(m, s, 2, H, {"contact_max_correcting_vel": [0.0, 1.0]}, metrics,
                     progress=False)
    assert len(r) == 2
    with pytest.raises(ValueError, match=r"contact_max_correcting_vel: values must be in \[0, inf\]"):
        jaxode.sweep(m, s, 2, H, {"contact_max_correcting_vel": [-1.0]}, metrics)


# ------------------------------------------- resting contact within rounding
def test_sphere_resting_exactly_on_a_plane_touches_in_the_working_precision():
    """ODE's dCollideSpherePlane: a contact when depth >= 0. A sphere of radius
    0.2 whose centre is its body's -0.1 plus a geom offset of 0.3 rests exactly
    on the plane z = 0 (true depth 0), but -0.1 + 0.3 rounds to 0.20000002 in
    float32: the computed depth is -1.5e-8. It must count as touching (depth 0),
    while a real gap of 1 micrometre must not (Gazebo's SphereSlip lowball lost
    its contact in 3 % of the steps this way and slid 3 % too fast)."""
    from jaxode.sim.collision.contact import GeomWorld
    from jaxode.sim.collision.sphere import sphere_plane
    dt = jnp.zeros(()).dtype
    plane = GeomWorld(pos=jnp.zeros(3, dt), rot=jnp.eye(3, dtype=dt), size=jnp.zeros(3, dt))

    def ball(offset, gap=0.0):
        c = jnp.asarray([0.0, 0.0, -0.1], dt) + jnp.asarray([0.0, 0.0, offset], dt) + gap
        return GeomWorld(pos=c, rot=jnp.eye(3, dtype=dt), size=jnp.asarray([0.2, 0, 0], dt))

    c = sphere_plane(ball(0.3), plane)
    assert bool(c.valid[0]) and float(c.depth[0]) == 0.0
    assert not bool(sphere_plane(ball(0.3, gap=1e-6), plane).valid[0])
    # a real penetration is returned bit for bit
    d = sphere_plane(ball(0.3, gap=-1e-3), plane)
    assert bool(d.valid[0]) and float(d.depth[0]) == float(
        jnp.asarray(0.2, dt) - (jnp.asarray(-0.1, dt) + jnp.asarray(0.3, dt) + jnp.asarray(-1e-3, dt)))


@pytest.mark.extended
def test_gazebo_sphere_slip_lowball_float32():
    """Gazebo's physics_friction.cc SphereSlip, "lowball" models (test/worlds/
    friction_spheres.world.erb): a sphere of radius 0.2 m with its centre of mass
    0.3 m below its centre, mu 0.5, slip 0.2 or 0.1 (mass 1 or 2), on Gazebo's
    ground plane (max_vel 0.01, min_depth 0), gravity (0, 2, -9.81), 5000 steps
    of 1 ms: lateral speed g_y * mass * slip = 0.4 m/s within 1.5 %."""
    from jaxode.build import mass as mass_lib
    for mass, slip in ((1.0, 0.2), (2.0, 0.1)):
        b = jaxode.WorldBuilder(gravity=(0, 2, -9.81), erp=0.2, cfm=0.0,
                                contact_max_correcting_vel=100.0, contact_surface_layer=0.001,
                                iterations=50)
        b.add_plane(surface=jaxode.Surface(mu=100.0, mu2=50.0, max_vel=0.01, min_depth=0.0))
        k = b.add_body(pos=(0, 0, -0.1),
                       mass=mass_lib.from_inertia(mass, np.eye(3) * 0.4 * mass * 0.04))
        b.add_sphere(0.2, body=k, pos=(0, 0, 0.3), surface=jaxode.Surface(
            mu=0.5, mu2=0.5, slip1=slip, slip2=slip, max_vel=0.01, min_depth=0.0))
        m = b.build()
        fin, traj = jaxode.rollout(m, jaxode.init(m), 5000, 0.001)
        assert abs(float(fin.vel[0, 1]) - 0.4) < 0.015 * 0.4, float(fin.vel[0, 1])
        assert abs(float(fin.vel[0, 0])) < 1e-3 and abs(float(fin.vel[0, 2])) < 1e-3
        assert int(np.sum(np.asarray(traj.ncontact) == 0)) == 0


# -------------------------------------------------- candidate pairs at build
def test_candidate_pairs_match_the_rules_by_brute_force():
    """build()'s vectorised pair enumeration against a direct loop over the
    rules (ODE's near callback: not both static, not the same body, category
    against collide bits, not joined without collide, not excluded)."""
    rng = np.random.default_rng(3)
    b = jaxode.WorldBuilder()
    b.add_plane()
    b.add_box((1, 1, 1), pos=(5, 0, 0))
    bits = [1, 2, 3, 0xFFFFFFFF]
    for i in range(7):
        k = b.add_body(pos=(i, 0, 1))
        for _ in range(int(rng.integers(1, 3))):
            kw = dict(body=k, category_bits=int(rng.choice(bits)),
                      collide_bits=int(rng.choice(bits)))
            [b.add_sphere, lambda r, **a: b.add_box((r, r, r), **a),
             lambda r, **a: b.add_capsule(r, 0.2, **a)][int(rng.integers(0, 3))](0.1, **kw)
        if i == 3:   # static geoms between and after the dynamic ones
            b.add_box((1, 1, 1), pos=(-5, 0, 0), category_bits=2, collide_bits=2)
    b.add_sphere(0.5, pos=(0, 5, 0))
    b.add_ball(0, 1, anchor=(0.5, 0, 1))
    b.add_ball(2, 3, anchor=(2.5, 0, 1), collide=True)
    b.exclude_pair(4, 6)
    m = b.build()
    for g in m.pair_groups:   # rows in (i, j) order of the geoms, i < j
        ij = [tuple(sorted((int(x), int(y)))) for x, y in zip(np.asarray(g.geom1),
                                                               np.asarray(g.geom2))]
        assert ij == sorted(ij) and len(set(ij)) == len(ij)
    got = sorted((int(x), int(y)) for g in m.pair_groups
                 for x, y in zip(np.asarray(g.geom1), np.asarray(g.geom2)))
    want = []
    gs = b.geoms
    for i in range(len(gs)):
        for j in range(i + 1, len(gs)):
            bi, bj = gs[i]["body"], gs[j]["body"]
            if bi is None and bj is None or bi == bj:
                continue
            if not (gs[i]["category"] & gs[j]["collide"] or gs[j]["category"] & gs[i]["collide"]):
                continue
            if {bi, bj} in ({0, 1}, {4, 6}):
                continue
            want.append((i, j))
    # each pair once, in either order (the narrowphase table decides geom 1)
    assert sorted(tuple(sorted(p)) for p in got) == want and len(want) > 10
