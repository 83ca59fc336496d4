"""Scene files (issue 9): SDFormat worlds and URDF robots.

Independent truths: the Gazebo tutorial's two-sphere world (seed
gazebo-ode-physics-parameters.md: max_vel is the min of the two surfaces, then
the world cap; spheres rest at min_depth penetration), a box stack loaded from
SDF against the same stack built in Python, SDF's pose convention
R = Rz(yaw) Ry(pitch) Rx(roll) against numpy, and a URDF pendulum's period
against 2 pi sqrt(I_pivot / (m g d)). Each scene structure compiles once.
"""
from __future__ import annotations

import functools
import math
import os
import warnings

import jax
import numpy as np
import pytest

import jaxode
from jaxode.sim.pipeline import guarded_step

DATA = os.path.join(os.path.dirname(__file__), "data", "sdf")
MODELS = os.path.join(DATA, "models")
SEED_WORLD = os.path.join(DATA, "max_vel_min_depth.world")
from fast_compile import OPTIONS as _FAST  # noqa: E402


@functools.partial(jax.jit, compiler_options=_FAST)
def _roll(model, state, params, dt, n):
    """``n`` steps (traced: one compile per scene structure); the final state."""
    return jax.lax.fori_loop(0, n, lambda i, s: guarded_step(model, s, params, dt), state)


def run(model, n, dt, params=None, state=None):
    state = jaxode.init(model) if state is None else state
    return _roll(model, state, model.params if params is None else params, dt, n)


def load_quiet(src, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
        return jaxode.load_sdf(src, **kw)


def rot(axis, a):
    c, s = math.cos(a), math.sin(a)
    return {"x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])}[axis]


def quat_mat(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


# ------------------------------------------------------------ the seed's world
def seed_text(sphere1_z, min_depth=None):
    with open(SEED_WORLD) as f:
        s = f.read()
    s = s.replace("<pose>0.0 1.8 0.5 0.0 0.0 0.0</pose>", f"<pose>0.0 0.0 {sphere1_z} 0 0 0</pose>")
    if min_depth is not None:
        s = s.replace("<min_depth>0.001</min_depth>", f"<min_depth>{min_depth}</min_depth>")
        s = s.replace("<min_depth>0.01</min_depth>", f"<min_depth>{min_depth}</min_depth>")
        s = s.replace("<contact_surface_layer>0.0001</contact_surface_layer>",
                      f"<contact_surface_layer>{min_depth}</contact_surface_layer>")
    return s


def test_seed_world_loads_as_written():
    with pytest.warns(jaxode.JaxodeFormatWarning) as rec:
        b = jaxode.load_sdf(SEED_WORLD, search_path=MODELS)
    msgs = [str(w.message) for w in rec]
    assert b.solver == "direct"  # <type>world</type>: Gazebo's ODE plugin steps with dWorldStep
    assert b.dt == 0.001
    assert b.contact_max_correcting_vel == 0.1 and b.contact_surface_layer == 0.0001
    np.testing.assert_allclose(b.gravity, [0, 0, -9.81])
    info = b.sdf_info
    assert set(info["bodies"]) == {"sphere_1::link_1", "sphere_2::link_2"}
    g1 = b.geoms[info["geoms"]["sphere_1::link_1::collision_sphere_1"]]
    g2 = b.geoms[info["geoms"]["sphere_2::link_2::collision_sphere_2"]]
    assert (g1["surface"].max_vel, g1["surface"].min_depth) == (10.0, 0.001)
    assert (g2["surface"].max_vel, g2["surface"].min_depth) == (1.0, 0.01)
    ground = b.geoms[info["geoms"]["ground_plane::link::collision"]]  # via model://ground_plane
    assert ground["body"] is None and ground["surface"].mu == 100.0
    np.testing.assert_allclose(b.bodies[info["bodies"]["sphere_1::link_1"]]["pos"], [0, 1.8, 0.5])


def test_seed_max_vel_then_min_depth():
    """Tutorial: spheres starting 0.5 deep separate at min(min(10, 1), 0.1) = 0.1 m/s
    after the first step (1 m/s without the world cap); with min_depth 0.5 on both
    surfaces and the world, spheres started 0.7 deep come to rest 0.5 deep."""
    b = load_quiet(seed_text(1.0), search_path=MODELS)
    m = b.build()
    vel = run(m, 1, b.dt).vel
    sep = float(vel[0, 2] - vel[1, 2])
    assert sep == pytest.approx(0.1, rel=1e-3)
    vel = run(m, 1, b.dt, m.params.replace(contact_max_correcting_vel=np.float32(100.0))).vel
    assert float(vel[0, 2] - vel[1, 2]) == pytest.approx(1.0, rel=1e-3)
    # min_depth: same structure (no recompile); a 10 ms step keeps the run short
    b = load_quiet(seed_text(0.8, min_depth=0.5), search_path=MODELS)
    assert b.contact_surface_layer == 0.5
    m = b.build()
    s = run(m, 1, 0.01)
    depth1 = 1.0 - float(s.pos[0, 2] - s.pos[1, 2])
    assert depth1 == pytest.approx(0.7 - 0.1 * 0.01, abs=1e-4)  # capped at max_vel * dt
    s = run(m, 399, 0.01, state=s)
    depth = 1.0 - float(s.pos[0, 2] - s.pos[1, 2])
    assert depth == pytest.approx(0.5, abs=2e-3)
    assert abs(float(s.vel[0, 2])) < 1e-2


# ------------------------------------------------------------------ box stack
BOXES = [((0.0, 0.0, 0.1), 0.0), ((0.02, 0.01, 0.3), 0.3), ((-0.01, 0.02, 0.5), -0.2)]


def stack_sdf():
    links = "".join(f"""
    <model name="box{k}">
      <pose>{p[0]} {p[1]} {p[2]} 0 0 {yaw}</pose>
      <link name="l">
        <inertial><mass>2.0</mass>
          <inertia><ixx>0.0133</ixx><iyy>0.0133</iyy><izz>0.0133</izz></inertia></inertial>
        <collision name="c"><geometry><box><size>0.2 0.2 0.2</size></box></geometry>
          <surface><friction><ode><mu>0.6</mu><mu2>0.6</mu2></ode></friction>
            <contact><ode><max_vel>0.5</max_vel><min_depth>0.001</min_depth></ode></contact>
          </surface></collision>
      </link>
    </model>""" for k, (p, yaw) in enumerate(BOXES))
    return f"""<?xml version="1.0"?>
<sdf version="1.6"><world name="w">
  <gravity>0 0 -9.81</gravity>
  <physics type="ode"><max_step_size>0.002</max_step_size>
    <ode><solver><type>quick</type><iters>30</iters><sor>1.2</sor></solver>
      <constraints><cfm>1e-5</cfm><erp>0.3</erp><contact_max_correcting_vel>10</contact_max_correcting_vel>
        <contact_surface_layer>0.0005</contact_surface_layer></constraints></ode></physics>
  <model name="ground"><static>true</static><link name="l"><collision name="c">
    <geometry><plane><normal>0 0 1</normal></plane></geometry>
    <surface><friction><ode><mu>0.6</mu><mu2>0.6</mu2></ode></friction>
      <contact><ode><max_vel>0.5</max_vel><min_depth>0.001</min_depth></ode></contact></surface>
  </collision></link></model>{links}
</world></sdf>"""


def stack_python():
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81), erp=0.3, cfm=1e-5, iterations=30, sor=1.2,
                            contact_max_correcting_vel=10.0, contact_surface_layer=0.0005)
    s = jaxode.Surface(mu=0.6, mu2=0.6, max_vel=0.5, min_depth=0.001)
    b.add_plane((0, 0, 1), 0.0, surface=s)
    for p, yaw in BOXES:
        q = (math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2))
        body = b.add_body(pos=p, quat=q, mass=jaxode.mass.from_inertia(2.0, 0.0133 * np.eye(3)))
        b.add_box((0.2, 0.2, 0.2), body=body, surface=s)
    return b


def test_box_stack_sdf_matches_python():
    bs = jaxode.load_sdf(stack_sdf())  # nothing unsupported: no warning
    assert bs.dt == 0.002
    ms, mp = bs.build(), stack_python().build()
    ss, sp = jaxode.init(ms), jaxode.init(mp)
    np.testing.assert_allclose(np.asarray(ss.quat), np.asarray(sp.quat), atol=1e-7)
    for _ in range(3):  # 3 x 50 steps: the trajectories agree all along
        ss, sp = run(ms, 50, bs.dt, state=ss), run(mp, 50, bs.dt, state=sp)
        np.testing.assert_allclose(np.asarray(ss.pos), np.asarray(sp.pos), atol=1e-6)
        np.testing.assert_allclose(np.asarray(ss.quat), np.asarray(sp.quat), atol=1e-6)
    assert float(ss.pos[2, 2]) > 0.45  # the stack stands


# ---------------------------------------------------------------------- poses
POSE_SDF = """<?xml version="1.0"?>
<sdf version="1.7"><model name="m">
  <pose>1 2 3 0 0 1.5707963267948966</pose>
  <link name="a"><pose>0.5 0 0 0.1 0.2 0.3</pose>
    <inertial><pose>0 0 0.1 0 0 0</pose><mass>1.5</mass>
      <inertia><ixx>0.1</ixx><iyy>0.2</iyy><izz>0.3</izz></inertia></inertial>
    <collision name="c"><pose>0.2 0 0 0 0 0</pose>
      <geometry><sphere><radius>0.1</radius></sphere></geometry></collision>
  </link>
  <link name="b"><pose relative_to="a">0 0 1 0 0 0</pose>
    <collision name="c"><geometry><cylinder><radius>0.1</radius><length>0.3</length></cylinder>
      </geometry></collision></link>
  <joint name="j" type="revolute"><parent>a</parent><child>b</child>
    <pose>0 0 -0.5 0 0 0</pose><axis><xyz>1 0 0</xyz>
      <limit><lower>-0.5</lower><upper>0.7</upper></limit></axis></joint>
</model></sdf>"""


def test_pose_rpy_nesting_and_relative_to():
    b = jaxode.load_sdf(POSE_SDF)
    R_m = rot("z", math.pi / 2)
    R_a = rot("z", 0.3) @ rot("y", 0.2) @ rot("x", 0.1)  # fixed-axis XYZ
    p_a = np.array([1, 2, 3]) + R_m @ [0.5, 0, 0]
    body_a = b.bodies[b.sdf_info["bodies"]["m::a"]]
    np.testing.assert_allclose(quat_mat(body_a["quat"]), R_m @ R_a, atol=1e-12)
    # body at the inertial frame, geom offset back to the collision pose
    np.testing.assert_allclose(body_a["pos"], p_a + R_m @ R_a @ [0, 0, 0.1], atol=1e-12)
    assert body_a["mass"] == 1.5
    np.testing.assert_allclose(np.diag(body_a["inertia"]), [0.1, 0.2, 0.3])
    geom = b.geoms[b.sdf_info["geoms"]["m::a::c"]]
    np.testing.assert_allclose(geom["pos"], [0.2, 0, -0.1], atol=1e-12)
    body_b = b.bodies[b.sdf_info["bodies"]["m::b"]]
    np.testing.assert_allclose(body_b["pos"], p_a + R_m @ R_a @ [0, 0, 1], atol=1e-12)
    j = b.joints[b.sdf_info["joints"]["m::j"]]
    np.testing.assert_allclose(j["geometry"]["anchor"], p_a + R_m @ R_a @ [0, 0, 0.5], atol=1e-12)
    np.testing.assert_allclose(j["geometry"]["axis"], R_m @ R_a @ [1, 0, 0], atol=1e-12)
    assert (j["axes"][0]["lo_stop"], j["axes"][0]["hi_stop"]) == (-0.5, 0.7)


# --------------------------------------------------------------------- errors
def test_malformed_xml_names_line():
    bad = '<?xml version="1.0"?>\n<sdf version="1.6">\n<world name="w">\n<model name="m">\n</world>\n</sdf>'
    with pytest.raises(ValueError, match=r"<string>:5: XML error in <model> \(opened at line 4\)"):
        jaxode.load_sdf(bad)
    badval = POSE_SDF.replace("<mass>1.5</mass>", "<mass>heavy</mass>")
    with pytest.raises(ValueError, match=r"<string>:5: <mass>: expected numbers"):
        jaxode.load_sdf(badval)
    neg = POSE_SDF.replace("<mass>1.5</mass>", "<mass>-1</mass>")
    with pytest.raises(ValueError, match=r"<string>:5: <inertial>: .*mass"):
        jaxode.load_sdf(neg)
    with pytest.raises(ValueError, match=r"model://nowhere"):
        jaxode.load_sdf('<sdf version="1.6"><world name="w"><include><uri>model://nowhere</uri>'
                        '</include></world></sdf>', search_path=[])


def test_unsupported_element_warns_once_with_line():
    s = POSE_SDF.replace('<link name="b">', '<link name="b"><wobble>1</wobble><wobble>2</wobble>')
    s = s.replace("<collision name=\"c\"><pose>", "<collision name=\"c\"><wobble/><pose>")
    with pytest.warns(jaxode.JaxodeFormatWarning) as rec:
        b = jaxode.load_sdf(s)
    wob = [str(w.message) for w in rec if "wobble" in str(w.message)]
    assert len(wob) == 1 and wob[0].startswith("<string>:7: <wobble>")
    assert [u[:2] for u in b.sdf_info["unsupported"] if u[0] == "wobble"] == [
        ("wobble", 7), ("wobble", 10), ("wobble", 10)]
    with pytest.warns(jaxode.JaxodeFormatWarning, match="out of scope"):
        jaxode.load_sdf(POSE_SDF.replace('type="revolute"', 'type="gearbox"'))


# ----------------------------------------------------------------------- URDF
PENDULUM = """<?xml version="1.0"?>
<robot name="pendulum">
  <link name="base">
    <inertial><mass value="5"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><geometry><box size="0.2 0.2 0.1"/></geometry>
      <material name="m"><contact name="steel"/></material></collision>
    <visual><geometry><box size="0.2 0.2 0.1"/></geometry></visual>
  </link>
  <link name="rod">
    <inertial><origin xyz="0 0 -0.5" rpy="0 0 0"/><mass value="1.0"/>
      <inertia ixx="{I}" iyy="{I}" izz="{Iz}" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 -0.5"/><geometry><box size="0.05 0.05 1.0"/></geometry>
      <material name="m"><contact name="rubber"/></material></collision>
  </link>
  <joint name="pivot" type="continuous">
    <parent link="base"/><child link="rod"/>
    <origin xyz="0 0 -0.1" rpy="0 {theta0} 0"/><axis xyz="0 1 0"/>
  </joint>
</robot>"""


def test_urdf_pendulum_period():
    m_rod, L, a, d, g = 1.0, 1.0, 0.05, 0.5, 9.81
    I_com = m_rod * (a * a + L * L) / 12.0
    text = PENDULUM.format(I=I_com, Iz=m_rod * 2 * a * a / 12.0, theta0=0.05)
    b = jaxode.WorldBuilder(gravity=(0, 0, -g))
    b.add_material("steel")
    with pytest.warns(jaxode.JaxodeFormatWarning, match="'rubber' is not in the builder"):
        jaxode.load_urdf(text, base_pos=(0, 0, 2.0), fixed_base=True, builder=b)
    info = b.urdf_info
    assert info["missing_materials"] == ["rubber"]
    assert b.geoms[0]["surface"].material == "steel"
    rod = info["links"]["rod"]
    np.testing.assert_allclose(b.bodies[rod]["pos"],
                               [-d * math.sin(0.05), 0, 1.9 - d * math.cos(0.05)], atol=1e-12)
    m = b.build()
    dt, chunk = 0.002, 10
    s, t, th = jaxode.init(m), [0.0], []
    pivot = np.array([0.0, 0.0, 1.9])

    def angle(st):
        r = np.asarray(st.pos[rod], dtype=np.float64) - pivot
        return math.atan2(r[0], -r[2])

    th.append(angle(s))
    for k in range(115):  # 2.3 s: about 1.4 periods
        s = run(m, chunk, dt, state=s)
        t.append((k + 1) * chunk * dt)
        th.append(angle(s))
    t, th = np.array(t), np.array(th)
    idx = np.nonzero(np.sign(th[:-1]) != np.sign(th[1:]))[0]
    cross = t[idx] - th[idx] * (t[idx + 1] - t[idx]) / (th[idx + 1] - th[idx])
    assert len(cross) >= 2
    period = 2 * (cross[1] - cross[0])
    T = 2 * math.pi * math.sqrt((I_com + m_rod * d * d) / (m_rod * g * d))
    assert period == pytest.approx(T, rel=0.01)
    assert abs(th).max() == pytest.approx(0.05, rel=0.02)  # no energy pumped or lost


# ------------------------------------------- structure only (no compile): joints
JOINTS_SDF = """<?xml version="1.0"?>
<sdf version="{ver}"><world name="w"><physics type="ode"><max_step_size>0.004</max_step_size>
  <gravity>0 0 -1</gravity><ode><solver><friction_model>cone_model</friction_model></solver></ode>
  </physics>
  <model name="r"><pose>0 0 1 0 0 1.5707963267948966</pose>
    <link name="a"/><link name="b"><pose>1 0 0 0 0 0</pose></link>
    <link name="c"><pose>2 0 0 0 0 0</pose></link><link name="d"><pose>3 0 0 0 0 0</pose></link>
    <joint name="j0" type="revolute"><parent>world</parent><child>a</child>
      <axis><xyz>1 0 0</xyz><dynamics><friction>0.3</friction></dynamics>
        <limit><lower>-1</lower><upper>1</upper><effort>5</effort><velocity>2</velocity></limit></axis>
      <physics><ode><cfm>0.01</cfm><limit><erp>0.5</erp><cfm>0.001</cfm></limit></ode></physics></joint>
    <joint name="j1" type="prismatic"><parent>a</parent><child>b</child>
      <axis><xyz>0 0 1</xyz><limit><lower>-0.1</lower><upper>0.2</upper></limit></axis></joint>
    <joint name="j2" type="universal"><parent>b</parent><child>c</child>
      <axis><xyz>1 0 0</xyz></axis><axis2><xyz>0 1 0</xyz></axis2></joint>
    <joint name="j3" type="revolute2"><parent>c</parent><child>d</child>
      <axis><xyz>0 0 1</xyz></axis><axis2><xyz>0 1 0</xyz></axis2>
      <physics><ode><suspension><erp>0.4</erp><cfm>0.02</cfm></suspension></ode></physics></joint>
    <joint name="j4" type="ball"><parent>a</parent><child>d</child></joint>
    <joint name="j5" type="fixed"><parent>b</parent><child>d</child></joint>
  </model></world></sdf>"""


def test_sdf_joint_mapping():
    b = load_quiet(JOINTS_SDF.format(ver="1.6"))
    assert (b.dt, b.friction_model) == (0.004, "cone")
    np.testing.assert_allclose(b.gravity, [0, 0, -1])  # SDF 1.4 physics-level gravity
    J = {k: b.joints[v] for k, v in b.sdf_info["joints"].items()}
    from jaxode.sim import joints as jt
    types = {k: jt.JOINT_TYPE_NAMES[j["type"]] for k, j in J.items()}
    assert types == {"r::j0": "hinge", "r::j1": "slider", "r::j2": "universal",
                     "r::j3": "hinge2", "r::j4": "ball", "r::j5": "fixed"}
    ax0 = J["r::j0"]["axes"][0]
    assert (ax0["lo_stop"], ax0["hi_stop"], ax0["vel"], ax0["fmax"]) == (-1, 1, 0.0, 0.3)
    assert (ax0["cfm"], ax0["stop_erp"], ax0["stop_cfm"]) == (0.01, 0.5, 0.001)
    assert J["r::j0"]["body2"] is None  # parent world
    assert b.sdf_info["joint_limits"]["r::j0"] == (5.0, 2.0)
    # the joint frame is the child link frame, rotated with the model (yaw 90 deg)
    np.testing.assert_allclose(J["r::j0"]["geometry"]["axis"], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(J["r::j1"]["geometry"]["axis"], [0, 0, 1], atol=1e-12)
    assert (J["r::j1"]["axes"][0]["lo_stop"], J["r::j1"]["axes"][0]["hi_stop"]) == (-0.1, 0.2)
    j3 = J["r::j3"]
    assert (j3["body1"], j3["body2"]) == (b.sdf_info["bodies"]["r::c"], b.sdf_info["bodies"]["r::d"])
    assert j3["scalars"] == {"suspension_erp": 0.4, "suspension_cfm": 0.02}
    np.testing.assert_allclose(J["r::j2"]["geometry"]["axis2"], [-1, 0, 0], atol=1e-12)
    # SDF 1.4: the axis is in the model frame, i.e. the same numbers give the rotated axis
    b14 = load_quiet(JOINTS_SDF.format(ver="1.4"))
    np.testing.assert_allclose(b14.joints[0]["geometry"]["axis"], [0, 1, 0], atol=1e-12)
    b17 = load_quiet(JOINTS_SDF.format(ver="1.7").replace(
        "<xyz>1 0 0</xyz><dynamics>", '<xyz expressed_in="__model__">1 0 0</xyz><dynamics>'))
    np.testing.assert_allclose(b17.joints[0]["geometry"]["axis"], [0, 1, 0], atol=1e-12)


def test_include_from_env_and_surface_fields(monkeypatch):
    monkeypatch.setenv("GAZEBO_MODEL_PATH", MODELS)
    s = """<sdf version="1.6"><world name="w">
      <include><uri>model://ground_plane</uri><pose>0 0 -1 0 0 0</pose></include>
      <model name="m"><link name="l"><collision name="c"><max_contacts>3</max_contacts>
        <geometry><capsule><radius>0.1</radius><length>0.4</length></capsule></geometry>
        <surface><friction><ode><mu>0.5</mu><mu2>0.4</mu2><fdir1>1 0 0</fdir1><slip1>0.01</slip1>
          <slip2>0.02</slip2></ode><torsional><coefficient>0.8</coefficient>
          <patch_radius>0.05</patch_radius></torsional></friction>
          <bounce><restitution_coefficient>0.3</restitution_coefficient><threshold>0.2</threshold></bounce>
          <contact><ode><kp>1e5</kp><kd>10</kd><max_vel>2</max_vel><min_depth>0.002</min_depth></ode>
          </contact></surface></collision>
        <collision name="mesh"><geometry><mesh><uri>x.dae</uri></mesh></geometry></collision>
      </link></model></world></sdf>"""
    # <mesh> collisions are read since issue 21 (a moving link's mesh: its convex hull)
    pytest.importorskip("trimesh")
    s = s.replace("<uri>x.dae</uri>", "<uri>" + os.path.join(os.path.dirname(__file__), "data",
                                                              "meshes", "cube.dae") + "</uri>")
    b = jaxode.load_sdf(s)
    plane = b.geoms[b.sdf_info["geoms"]["ground_plane::link::collision"]]
    np.testing.assert_allclose(plane["pos"], [0, 0, -1])  # n * offset of the included pose
    sf = b.geoms[b.sdf_info["geoms"]["m::l::c"]]["surface"]
    assert (sf.mu, sf.mu2, tuple(sf.fdir1), sf.slip1, sf.slip2) == (0.5, 0.4, (1, 0, 0), 0.01, 0.02)
    # Gazebo's torsional friction keeps its own fields (bound 3 pi/16 * 0.8 * 0.05 * N)
    assert (sf.torsional, sf.patch_radius, sf.use_patch_radius) == (0.8, 0.05, 1.0)
    assert (sf.bounce, sf.bounce_vel, sf.kp, sf.kd, sf.max_vel, sf.min_depth, sf.max_contacts) == (
        0.3, 0.2, 1e5, 10.0, 2.0, 0.002, 3)
    from jaxode.sim.collision import contact as ct
    assert b.geoms[b.sdf_info["geoms"]["m::l::mesh"]]["type"] == ct.CONVEX


def test_urdf_structure_merge_limits_motors():
    u = """<robot name="r">
      <link name="base"><inertial><mass value="2"/><inertia ixx="1" iyy="1" izz="1"/></inertial></link>
      <link name="plate"><collision><origin xyz="0 0 0.1"/><geometry><sphere radius="0.05"/></geometry>
        </collision></link>
      <link name="arm"><inertial><origin xyz="0.2 0 0" rpy="0 0 0.5"/><mass value="1"/>
        <inertia ixx="0.1" iyy="0.2" izz="0.3"/></inertial>
        <collision><geometry><mesh filename="arm.stl"/></geometry></collision></link>
      <joint name="fix" type="fixed"><parent link="base"/><child link="plate"/>
        <origin xyz="0 0 0.5"/></joint>
      <joint name="slide" type="prismatic"><parent link="plate"/><child link="arm"/>
        <origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/><axis xyz="1 0 0"/>
        <limit lower="-0.3" upper="0.4" effort="7" velocity="1.5"/>
        <dynamics damping="0.1" friction="0.2"/></joint>
    </robot>"""
    # <mesh> collisions are read since issue 21 (a moving link's mesh: its convex hull)
    pytest.importorskip("trimesh")
    u = u.replace('filename="arm.stl"', 'filename="' + os.path.join(
        os.path.dirname(__file__), "data", "meshes", "cube.stl") + '"')
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        b = jaxode.load_urdf(u, base_pos=(0, 0, 1), motors=True)
    msgs = " ".join(str(w.message) for w in rec)
    # the mesh is read (a moving link's mesh: its hull) and so is <dynamics damping> (Gazebo's)
    assert "<mesh>" not in msgs and "damping" not in msgs, msgs
    info = b.urdf_info
    assert info["links"]["plate"] == info["links"]["base"] == 0  # massless fixed link merged
    np.testing.assert_allclose(b.geoms[0]["pos"], [0, 0, 0.6])  # plate geom on the base body
    arm = b.bodies[info["links"]["arm"]]
    np.testing.assert_allclose(arm["pos"], [1, 0.2, 1.5], atol=1e-12)
    np.testing.assert_allclose(quat_mat(arm["quat"]), rot("z", math.pi / 2 + 0.5), atol=1e-12)
    j = b.joints[info["joints"]["slide"]]
    np.testing.assert_allclose(j["geometry"]["axis"], [0, 1, 0], atol=1e-12)
    ax = j["axes"][0]
    assert (ax["lo_stop"], ax["hi_stop"], ax["vel"], ax["fmax"]) == (-0.3, 0.4, 0.0, 7.0)
    assert ax["damping"] == 0.1
    assert info["limits"]["slide"] == (7.0, 1.5)
    with pytest.raises(ValueError, match=r"<string>:\d+: <joint>: unknown joint type 'spiral'"):
        jaxode.load_urdf(u.replace('type="prismatic"', 'type="spiral"'))


def test_links_of_one_model_collide_only_with_self_collide():
    s = """<sdf version="1.6"><model name="m">
      <link name="a"><collision name="c"><geometry><sphere><radius>0.1</radius></sphere></geometry>
        </collision></link>
      <link name="b"><collision name="c"><geometry><sphere><radius>0.1</radius></sphere></geometry>
        </collision></link></model>
      <model name="n"><link name="a"><collision name="c"><geometry><box><size>1 1 1</size></box>
        </geometry></collision></link></model></sdf>"""

    def pairs(b):
        m = b.build()
        return {tuple(sorted((int(i), int(j)))) for grp in m.pair_groups
                for i, j in zip(np.asarray(grp.geom1), np.asarray(grp.geom2))}
    b = jaxode.load_sdf(s)
    assert b.sdf_info["collide_groups"] == {"m": 1}
    assert pairs(b) == {(0, 2), (1, 2)}  # m::a and m::b do not collide with each other
    b = jaxode.load_sdf(s.replace('<model name="m">', '<model name="m"><self_collide>true</self_collide>'))
    assert pairs(b) == {(0, 1), (0, 2), (1, 2)}


def test_urdf_self_collision_switch():
    u = """<robot name="r">
      <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>
        <collision><geometry><sphere radius="0.1"/></geometry></collision></link>
      <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>
        <collision><geometry><sphere radius="0.1"/></geometry></collision></link>
      <link name="c"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>
        <collision><geometry><sphere radius="0.1"/></geometry></collision></link>
      <joint name="j1" type="continuous"><parent link="a"/><child link="b"/></joint>
      <joint name="j2" type="continuous"><parent link="b"/><child link="c"/></joint>
    </robot>"""

    def pairs(b):
        m = b.build()
        return {tuple(sorted((int(i), int(j)))) for grp in m.pair_groups
                for i, j in zip(np.asarray(grp.geom1), np.asarray(grp.geom2))}
    b = jaxode.load_urdf(u)
    assert pairs(b) == set() and b.urdf_info["collide_group"] == 1
    assert pairs(jaxode.load_urdf(u, self_collision=True)) == {(0, 2)}  # a-c; joined pairs never
