"""Scene files and save/restore (issue 9)."""
import jax
import numpy as np
import pytest

import jaxode
from jaxode.io import load, save

_OPT = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def _stack_builder():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    b.add_plane()
    for i in range(2):
        k = b.add_body(pos=(0.02 * i, 0, 0.5 + 1.01 * i), angvel=(0.1 * i, 0, 0))
        b.add_sphere(0.5, body=k)
    b.add_hinge(0, 1, anchor=(0, 0, 1), axis=(1, 0, 0))
    return b


def test_save_restore_bit_for_bit(tmp_path):
    """A rollout resumed from a saved and loaded batch of states continues bit for bit
    (the ODE FAQ's save/restore question: all state must be saved)."""
    m = _stack_builder().build()
    s = jaxode.batch(jaxode.init(m), 3)
    s = s.replace(vel=s.vel.at[:, 1, 0].set(np.array([0.0, 0.3, -0.3], np.float32)))
    roll = jax.jit(jax.vmap(lambda model, st: jaxode.rollout(model, st, 15, 0.01)[0], in_axes=(None, 0)),
                   compiler_options=_OPT)
    mid = roll(m, s)
    full = roll(m, mid)
    save(tmp_path / "w.npz", m, mid)
    m2, mid2 = load(tmp_path / "w.npz")
    assert jax.tree.structure(m2) == jax.tree.structure(m)
    resumed = roll(m2, mid2)  # the loaded model, same compiled function
    la, lb = jax.tree.leaves(full), jax.tree.leaves(resumed)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y))
    # the worlds really differ and moved (the test could fail)
    assert not np.array_equal(np.asarray(full.pos[0]), np.asarray(full.pos[1]))


def test_load_rejects_foreign_file(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(ValueError, match="not a jaxode save file"):
        load(tmp_path / "x.npz")


# ---------------------------------------------------------------------------- SDF
import os  # noqa: E402
import warnings  # noqa: E402

from jaxode.io.sdf import JaxodeFormatWarning, SceneFileError, load_sdf  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
MODELS = os.path.join(DATA, "models")


def _seed_world(**repl):
    with open(os.path.join(DATA, "seed_max_vel_world.sdf")) as f:
        t = f.read()
    for a, b in repl.items():
        t = t.replace(a, b)
    return t


def _load_quiet(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JaxodeFormatWarning)
        return load_sdf(text, search_path=[MODELS])


@pytest.fixture(scope="module")
def seed_runs():
    """The seed's two-sphere world with sphere_1 placed on sphere_2 (the tutorial's
    videos start the spheres in contact): (a) as written, penetration 0.5, global
    max_vel 0.1; (b) min_depth 0.5 everywhere, penetration 0.7 (corrected at the
    global max_vel 0.1 m/s: 2 s)."""
    on_top = {"<pose>0.0 1.8 0.5 0.0 0.0 0.0</pose>": "<pose>0.0 0.0 1.0 0.0 0.0 0.0</pose>"}
    a = _load_quiet(_seed_world(**on_top))
    deep = {"<pose>0.0 1.8 0.5 0.0 0.0 0.0</pose>": "<pose>0.0 0.0 0.8 0.0 0.0 0.0</pose>",
            "<min_depth>0.001</min_depth>": "<min_depth>0.5</min_depth>",
            "<min_depth>0.01</min_depth>": "<min_depth>0.5</min_depth>",
            "<contact_surface_layer>0.0001<": "<contact_surface_layer>0.5<"}
    b = _load_quiet(_seed_world(**deep))
    out = []
    run = jax.jit(lambda m, s: jaxode.rollout(m, s, 2500, 0.001), compiler_options=_OPT)
    for bld in (a, b):
        assert bld.dt == 0.001
        m = bld.build()
        st, tr = run(m, jaxode.init(m))  # same structure: one compile
        out.append((bld, st, tr))
    return out


def test_seed_world_parameters(seed_runs):
    (a, _, _), (b, _, _) = seed_runs
    assert a.dt == 0.001 and a.contact_max_correcting_vel == 0.1 and a.contact_surface_layer == 1e-4
    assert np.allclose(a.gravity, [0, 0, -9.81])
    assert [g["surface"].max_vel for g in a.geoms if g["body"] is not None] == [10.0, 1.0]


def test_seed_max_vel(seed_runs):
    """Tutorial: contact max_vel = min(10, 1) = 1, then the global cap 0.1: the spheres
    separate at 0.1 m/s after the first step."""
    _, _, tr = seed_runs[0]
    sep = float(tr.vel[0, 0, 2] - tr.vel[0, 1, 2])  # after the first step
    print("separating speed", sep)
    assert abs(sep - 0.1) < 2e-3, sep


def test_seed_min_depth(seed_runs):
    """Tutorial: starting at penetration 0.7 with min_depth 0.5, the spheres are pushed
    apart until the remaining penetration equals min_depth (0.5)."""
    _, st, _ = seed_runs[1]
    depth = 1.0 - float(np.linalg.norm(st.pos[0] - st.pos[1]))
    print("rest depth", depth)
    assert abs(depth - 0.5) < 2e-3, depth


_STACK = """<?xml version="1.0"?>
<sdf version="1.7">
  <world name="stack">
    <gravity>0 0 -9.81</gravity>
    <physics type="ode"><max_step_size>0.005</max_step_size>
      <ode><solver><type>quick</type><iters>30</iters><sor>1.2</sor></solver>
        <constraints><cfm>1e-5</cfm><erp>0.3</erp></constraints></ode></physics>
    <model name="ground"><static>true</static>
      <link name="l"><collision name="c"><geometry><plane><normal>0 0 1</normal></plane></geometry>
      </collision></link></model>
    <model name="stack">
      <pose>0.1 0 0 0 0 0.3</pose>
      <link name="b0"><pose>0 0 0.25 0 0 0</pose>
        <inertial><mass>2.0</mass><inertia><ixx>0.1</ixx><iyy>0.2</iyy><izz>0.15</izz></inertia></inertial>
        <collision name="c"><geometry><box><size>1 0.8 0.5</size></box></geometry>
          <surface><friction><ode><mu>0.6</mu></ode></friction></surface></collision></link>
      <link name="b1"><pose relative_to="b0">0.05 0 0.5 0 0 0.2</pose>
        <inertial><mass>1.0</mass><inertia><ixx>0.05</ixx><iyy>0.06</iyy><izz>0.07</izz></inertia></inertial>
        <collision name="c"><geometry><box><size>0.6 0.6 0.5</size></box></geometry>
          <surface><friction><ode><mu>0.6</mu></ode></friction></surface></collision></link>
    </model>
  </world>
</sdf>
"""


def _rz(a):
    return (np.cos(a / 2), 0.0, 0.0, np.sin(a / 2))


def test_sdf_box_stack_matches_python():
    """The same stack built in Python (poses composed by hand) gives the same trajectory."""
    b1 = load_sdf(_STACK)
    b2 = jaxode.WorldBuilder(gravity=(0, 0, -9.81), cfm=1e-5, erp=0.3, iterations=30, sor=1.2)
    b2.add_plane()
    c, s = np.cos(0.3), np.sin(0.3)
    k = b2.add_body(pos=(0.1, 0, 0.25), quat=_rz(0.3), mass=jaxode.mass.from_inertia(2.0, np.diag([0.1, 0.2, 0.15])))
    b2.add_box((1, 0.8, 0.5), body=k, surface=jaxode.Surface(mu=0.6))
    k = b2.add_body(pos=(0.1 + 0.05 * c, 0.05 * s, 0.75), quat=_rz(0.5),
                    mass=jaxode.mass.from_inertia(1.0, np.diag([0.05, 0.06, 0.07])))
    b2.add_box((0.6, 0.6, 0.5), body=k, surface=jaxode.Surface(mu=0.6))
    assert b1.dt == 0.005
    trs = []
    run = jax.jit(lambda m, st: jaxode.rollout(m, st, 60, 0.005)[1], compiler_options=_OPT)
    for b in (b1, b2):
        m = b.build()
        trs.append(run(m, jaxode.init(m)))
    for f in ("pos", "quat", "vel", "angvel"):
        np.testing.assert_allclose(np.asarray(getattr(trs[0], f)), np.asarray(getattr(trs[1], f)), atol=1e-6)
    assert float(trs[0].pos[-1, 1, 2]) < 0.76  # it fell onto the lower box


def test_sdf_malformed_names_line():
    bad = "<sdf version='1.6'>\n<world name='w'>\n<model name='m'>\n</world>\n</sdf>"
    with pytest.raises(SceneFileError, match=r"<string>:4"):
        load_sdf(bad)
    bad_value = "<sdf version='1.6'>\n<world name='w'>\n<gravity>0 0 x</gravity>\n</world>\n</sdf>"
    with pytest.raises(SceneFileError, match=r"<string>:3: <gravity>"):
        load_sdf(bad_value)


def test_sdf_unsupported_warns_once():
    t = ("<sdf version='1.6'><model name='m'>\n<link name='a'>\n<sensor name='s1'/>\n"
         "<sensor name='s2'/>\n<collision name='c'><geometry><sphere><radius>0.1</radius></sphere>"
         "</geometry></collision></link></model></sdf>")
    with pytest.warns(JaxodeFormatWarning) as rec:
        b = load_sdf(t)
    msgs = [str(r.message) for r in rec if "sensor" in str(r.message)]
    assert len(msgs) == 1 and "<string>:3: <sensor>" in msgs[0]
    assert len(b.bodies) == 1 and len(b.geoms) == 1


# --------------------------------------------------------------------------- URDF
from jaxode.io.urdf import load_urdf  # noqa: E402

_PENDULUM = """<?xml version="1.0"?>
<robot name="pendulum">
  <link name="base">
    <collision><origin xyz="0 0 0.05"/><geometry><box size="0.1 0.1 0.1"/></geometry>
      <material name="m"><contact name="steel"/></material></collision>
  </link>
  <joint name="pivot" type="continuous">
    <parent link="base"/><child link="arm"/>
    <origin xyz="0 0 2" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit effort="5" velocity="3"/>
  </joint>
  <link name="arm">
    <inertial><origin xyz="0 0 -0.5"/><mass value="1.5"/>
      <inertia ixx="0.125" iyy="0.125" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 -1.2"/><geometry><capsule radius="0.05" length="0.2"/></geometry></collision>
  </link>
</robot>
"""


def test_urdf_pendulum_period():
    """Small-angle period of the physical pendulum: T = 2 pi sqrt(I / (m g d)), I about
    the pivot = I_c + m d^2 (rod of length 1: I_c = m L^2 / 12 = 0.125 kg m^2)."""
    b = load_urdf(_PENDULUM, fixed_base=True)
    assert b.geom_materials == {0: "steel"}
    assert b.joint_info["pivot"]["effort"] == 5.0 and b.joint_info["pivot"]["velocity"] == 3.0
    m = b.build()
    s = jaxode.init(m)
    w0 = 0.02  # rad/s about y: amplitude ~ 0.008 rad
    s = s.replace(angvel=s.angvel.at[0].set(jax.numpy.array([0.0, w0, 0.0])),
                  vel=s.vel.at[0].set(jax.numpy.array([-w0 * 0.5, 0.0, 0.0])))
    dt = 0.001
    _, tr = jax.jit(lambda st: jaxode.rollout(m, st, 3600, dt), compiler_options=_OPT)(s)
    wy = np.asarray(tr.angvel[:, 0, 1], np.float64)
    t = np.asarray(tr.time, np.float64)
    i = np.nonzero(np.sign(wy[1:]) != np.sign(wy[:-1]))[0]
    tz = t[i] + (t[i + 1] - t[i]) * wy[i] / (wy[i] - wy[i + 1])  # linear interpolation
    assert len(tz) >= 4
    period = 2 * np.mean(np.diff(tz))
    i_pivot = 0.125 + 1.5 * 0.5 ** 2
    expect = 2 * np.pi * np.sqrt(i_pivot / (1.5 * 9.81 * 0.5))
    print("period", period, expect)
    assert abs(period / expect - 1) < 0.01, (period, expect)


def test_urdf_errors():
    with pytest.raises(SceneFileError, match=r"<string>:3: <joint>: unknown joint type"):
        load_urdf("<robot name='r'>\n<link name='a'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/></inertial></link>\n"
                  "<joint name='j' type='helical'><parent link='a'/><child link='b'/></joint>\n"
                  "<link name='b'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1'/></inertial></link></robot>")
    with pytest.raises(SceneFileError, match=r"<string>:2"):
        load_urdf("<robot name='r'>\n<link name='a'></robot>")


_PENDULUM_SDF = """<sdf version="1.6"><model name="p">
  <pose>0 0 2 0 0 0</pose>
  <link name="arm"><pose>0 0 -0.5 0 0 0</pose>
    <inertial><mass>1.5</mass><inertia><ixx>0.125</ixx><iyy>0.125</iyy><izz>0.001</izz></inertia></inertial>
    <collision name="c"><pose>0 0 -0.7 0 0 0</pose><geometry><capsule><radius>0.05</radius><length>0.2</length></capsule></geometry></collision>
  </link>
  <joint name="pivot" type="revolute"><parent>world</parent><child>arm</child>
    <pose>0 0 0.5 0 0 0</pose>
    <axis><xyz>0 1 0</xyz><use_parent_model_frame>true</use_parent_model_frame>
      <limit><lower>-1e16</lower><upper>1e16</upper><effort>5</effort><velocity>3</velocity></limit></axis>
  </joint>
</model></sdf>"""


def test_sdf_pendulum_equals_urdf_pendulum():
    """The SDF description of the URDF pendulum (joint pose in the child frame, axis in
    the model frame) builds the same body, capsule and hinge: the URDF period test
    (analytic truth) then covers the SDF joint path too."""
    mu = load_urdf(_PENDULUM, fixed_base=True).build()
    ms = load_sdf(_PENDULUM_SDF)
    assert ms.joint_info["pivot"]["effort"] == 5.0
    ms = ms.build()
    np.testing.assert_allclose(np.asarray(ms.params.body_inertia), np.asarray(mu.params.body_inertia))
    np.testing.assert_allclose(np.asarray(ms.geom_pos[-1]), np.asarray(mu.geom_pos[-1]), atol=1e-12)
    for gs, gu in zip(ms.joint_groups, mu.joint_groups):
        for f in ("anchor1", "anchor2", "axis1", "axis2", "body1", "body2"):
            np.testing.assert_allclose(np.asarray(getattr(gs, f)), np.asarray(getattr(gu, f)), atol=1e-6)


def test_sdf_all_joint_types_build():
    links = "".join(
        f"<link name='l{i}'><pose>{i} 0 1 0 0 0</pose><inertial><mass>1</mass></inertial>"
        f"<collision name='c'><geometry><sphere><radius>0.1</radius></sphere></geometry></collision></link>"
        for i in range(7))
    joints = """
      <joint name='r' type='revolute'><parent>world</parent><child>l0</child><axis><xyz>0 1 0</xyz>
        <dynamics><friction>0.3</friction></dynamics></axis></joint>
      <joint name='p' type='prismatic'><parent>l0</parent><child>l1</child><axis><xyz>1 0 0</xyz>
        <limit><lower>-0.1</lower><upper>0.2</upper></limit></axis></joint>
      <joint name='b' type='ball'><parent>l1</parent><child>l2</child></joint>
      <joint name='u' type='universal'><parent>l2</parent><child>l3</child><axis><xyz>1 0 0</xyz></axis>
        <axis2><xyz>0 1 0</xyz></axis2></joint>
      <joint name='h2' type='revolute2'><parent>l3</parent><child>l4</child><axis><xyz>0 0 1</xyz></axis>
        <axis2><xyz>0 1 0</xyz></axis2><physics><ode><suspension><cfm>0.01</cfm><erp>0.3</erp></suspension></ode></physics></joint>
      <joint name='f' type='fixed'><parent>l4</parent><child>l5</child></joint>
      <joint name='g' type='gearbox'><parent>l5</parent><child>l6</child></joint>"""
    with pytest.warns(JaxodeFormatWarning, match="gearbox"):
        b = load_sdf(f"<sdf version='1.6'><model name='m'>{links}{joints}</model></sdf>")
    assert len(b.joints) == 6
    m = b.build()
    assert m.njoint == 6
