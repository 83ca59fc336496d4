"""Loader defects found on real robot files (issue 58), each reproduced by a small
file of the same structure. Truths: MuJoCo 4 compiling the same MJCF in the test;
the URDF's own numbers.

* Menagerie's pal_tiago/tiago_position.xml: a second top-level ``<default>`` (here
  the structure: one sets geom friction, the other joint damping) adds to class
  main, as MuJoCo reads it; it used to replace it.
* Menagerie's ufactory_lite6/lite6.xml: a body welded to the world with a zero
  ``diaginertia``; MuJoCo accepts it (the body never moves), jaxode refused it.
* gym-ignition-models' panda: mesh ``filename="file://meshes/..."``, a path
  relative to the URDF's folder.
* gz-sim's conveyor.sdf: a collision pose ``relative_to`` its own link (refused:
  "no frames to refer to here"); joint_trajectory_controller.sdf: a child link
  placed relative_to its joint whose pose is relative_to the parent (a false
  "cycle"). Truth: the SDF 1.7 frame rules, composed by hand.
* gazebo_models' sun: ``model://sun`` on the model path is a bare ``<light>``.
"""
from __future__ import annotations

import os
import shutil
import warnings

import jax
import numpy as np
import pytest

import jaxode

MESHES = os.path.join(os.path.dirname(__file__), "data", "meshes")

TWO_DEFAULTS = """<mujoco>
  <default><geom friction="0.3 0.005 0.0001"/></default>
  <default><joint damping="2"/></default>
  <worldbody>
    <body name="a" pos="0 0 1"><joint name="j" axis="0 1 0"/><geom size="0.1"/></body>
  </worldbody>
</mujoco>"""

WELDED_ZERO_INERTIA = """<mujoco>
  <worldbody>
    <body name="base" pos="0 0 0.1">
      <inertial pos="0 0 0" mass="0.5" diaginertia="0 0 0"/>
      <geom type="box" size="0.1 0.1 0.05" contype="0" conaffinity="0"/>
      <body name="link" pos="0 0 0.2"><joint name="j" axis="0 0 1"/><geom size="0.05"/></body>
    </body>
  </worldbody>
</mujoco>"""


def _load(xml):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jaxode.load_mjcf(xml)


def test_second_top_level_default_adds_to_main():
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(TWO_DEFAULTS)
    b = _load(TWO_DEFAULTS)
    model = b.build()
    j = b.mjcf_info["joints"]["j"]
    assert float(model.params.joint_damping[j, 0]) == pytest.approx(float(m.dof_damping[0]))
    assert float(m.dof_damping[0]) == 2.0 and float(m.geom_friction[0, 0]) == pytest.approx(0.3)
    assert float(model.params.mu[0]) == pytest.approx(float(m.geom_friction[0, 0]))


def test_zero_inertia_on_a_body_welded_to_the_world():
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(WELDED_ZERO_INERTIA)  # MuJoCo compiles it
    b = _load(WELDED_ZERO_INERTIA)
    info = b.mjcf_info
    assert info["bodies"]["base"] is None  # static
    link = info["bodies"]["link"]
    np.testing.assert_allclose(b.bodies[link]["mass"], m.body_mass[m.body("link").id], rtol=1e-12)
    # the same inertia on a body that moves is still refused, naming the element
    with pytest.raises(ValueError, match=r"<inertial>"):
        _load(WELDED_ZERO_INERTIA.replace('<inertial pos', '<joint type="slide"/><inertial pos'))


def test_urdf_file_uri_relative_to_the_urdf(tmp_path):
    pytest.importorskip("trimesh")
    (tmp_path / "meshes").mkdir()
    shutil.copy(os.path.join(MESHES, "cube.stl"), tmp_path / "meshes" / "cube.stl")
    urdf = """<robot name="r"><link name="base">
      <inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>
      </inertial>
      <collision><geometry><mesh filename="file://meshes/cube.stl" scale="0.5 0.5 0.5"/></geometry>
      </collision></link></robot>"""
    path = tmp_path / "r.urdf"
    path.write_text(urdf)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_urdf(str(path))
    assert len(b.bodies) == 1 and len(b.geoms) == 1
    # the unit cube (corners +-0.5) scaled by 0.5: a hull whose farthest corner is
    # sqrt(3) * 0.25 m from its centre
    assert b.hulls and b.hulls[0][1].radius == pytest.approx(np.sqrt(3) * 0.25, rel=1e-9)


def _sdf(model: str) -> str:
    return f'<sdf version="1.7"><world name="w">{model}</world></sdf>'


_INERTIAL = ("<inertial><mass>1</mass><inertia><ixx>1</ixx><iyy>1</iyy><izz>1</izz>"
             "<ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>")


def test_sdf_collision_pose_relative_to_a_link():
    """gz-sim's conveyor.sdf: a collision whose pose is relative_to its own link (the
    default, said out loud) or to another link of the model (SDF 1.7 frame semantics)."""
    model = f"""<model name="m"><pose>0 0 1 0 0 0</pose>
      <link name="base"><pose>2 0 0 0 0 0</pose>{_INERTIAL}</link>
      <link name="belt"><pose>0 0 0.5 0 0 1.5707963267948966</pose>{_INERTIAL}
        <collision name="own"><pose relative_to="belt">0.1 0 0 0 0 0</pose>
          <geometry><box><size>1 1 0.1</size></box></geometry></collision>
        <collision name="other"><pose relative_to="base">0 0 0.3 0 0 0</pose>
          <geometry><sphere><radius>0.1</radius></sphere></geometry></collision></link>
    </model>"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_sdf(_sdf(model))
    belt = b.bodies[1]
    np.testing.assert_allclose(belt["pos"], [0.0, 0.0, 1.5], atol=1e-12)
    # own: 0.1 m along the belt's x, which the 90 degree yaw turns into world y
    R = _quat_mat(belt["quat"])
    np.testing.assert_allclose(belt["pos"] + R @ b.geoms[0]["pos"], [0.0, 0.1, 1.5], atol=1e-12)
    # other: 0.3 m above the base link, at world (2, 0, 1.3), though it moves with the belt
    np.testing.assert_allclose(belt["pos"] + R @ b.geoms[1]["pos"], [2.0, 0.0, 1.3], atol=1e-12)


def test_sdf_child_link_relative_to_its_joint_is_no_cycle():
    """gz-sim's joint_trajectory_controller.sdf: the joint's pose is relative_to the
    parent link and the child link's pose relative_to the joint. The joint's default
    frame (the child link) is not used, so there is no cycle; a real cycle (the joint's
    pose left to its default while the child refers to the joint) is still refused."""
    model = f"""<model name="m">
      <link name="l0"><pose>0 0 1 0 0 0</pose>{_INERTIAL}</link>
      <joint name="j1" type="revolute"><pose relative_to="l0">0 0 0.2 0 0 0</pose>
        <parent>l0</parent><child>l1</child><axis><xyz>0 1 0</xyz></axis></joint>
      <link name="l1"><pose relative_to="j1">0 0 0.3 0 0 0</pose>{_INERTIAL}</link>
    </model>"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_sdf(_sdf(model))
    np.testing.assert_allclose(b.bodies[1]["pos"], [0.0, 0.0, 1.5], atol=1e-12)
    np.testing.assert_allclose(b.joints[0]["geometry"]["anchor"], [0.0, 0.0, 1.2], atol=1e-12)
    cyclic = model.replace('<pose relative_to="l0">0 0 0.2 0 0 0</pose>', "")
    with pytest.raises(ValueError, match="cycle"):
        jaxode.load_sdf(_sdf(cyclic))


def _quat_mat(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def test_sdf_include_of_a_bare_light(tmp_path):
    """gazebo_models' sun: model://sun found on the model path is a file whose root
    holds a <light>, no <model>. It is skipped with a warning (lights have no physics),
    as the built-in sun is, and the world around it loads."""
    d = tmp_path / "sun"
    d.mkdir()
    (d / "model.config").write_text("<model><name>Sun</name><sdf version='1.6'>model.sdf</sdf></model>")
    (d / "model.sdf").write_text('<sdf version="1.6"><light type="directional" name="sun">'
                                 "<direction>-0.5 0.1 -0.9</direction></light></sdf>")
    world = _sdf(f"""<include><uri>model://sun</uri></include>
      <model name="ball"><pose>0 0 1 0 0 0</pose><link name="l">{_INERTIAL}
        <collision name="c"><geometry><sphere><radius>0.1</radius></sphere></geometry>
        </collision></link></model>""")
    with pytest.warns(jaxode.JaxodeFormatWarning, match=r"model://sun.*light"):
        b = jaxode.load_sdf(world, search_path=[str(tmp_path)])
    assert len(b.bodies) == 1 and len(b.geoms) == 1


@pytest.mark.parametrize("fmt", ["urdf", "sdf", "mjcf"])
def test_implausible_inertia_is_warned(fmt):
    """icub_reduced's ankle: an inertia of ~1e-20 kg m^2 on a 0.5 kg link is positive
    definite, so it passed, and the world went non-finite at step 1 with no word. Each
    loader now warns, naming the link; a thin rod's real inertia (ratio 6e-6, gyration
    radius 0.6 mm) is not warned."""
    def text(ixx, iyy, izz):
        if fmt == "urdf":
            return (f'<robot name="r"><link name="ankle"><inertial><mass value="0.5"/>'
                    f'<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" iyz="0"/>'
                    f'</inertial></link></robot>')
        if fmt == "sdf":
            return _sdf(f'<model name="m"><link name="ankle"><inertial><mass>0.5</mass>'
                        f'<inertia><ixx>{ixx}</ixx><iyy>{iyy}</iyy><izz>{izz}</izz><ixy>0</ixy>'
                        f'<ixz>0</ixz><iyz>0</iyz></inertia></inertial></link></model>')
        return (f'<mujoco><worldbody><body name="ankle"><freejoint/><inertial pos="0 0 0" '
                f'mass="0.5" diaginertia="{ixx} {iyy} {izz}"/></body></worldbody></mujoco>')

    load = {"urdf": jaxode.load_urdf, "sdf": jaxode.load_sdf, "mjcf": jaxode.load_mjcf}[fmt]
    with pytest.warns(jaxode.JaxodeFormatWarning, match=r"ankle'.*implausible inertia.*"
                                                        r"radius of gyration"):
        load(text(1e-20, 1e-20, 1e-20))
    rod = 0.5 * (0.001 ** 2) / 2, 0.5 * 0.3 ** 2 / 12, 0.5 * 0.3 ** 2 / 12  # 0.3 m x 1 mm rod
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        load(text(*rod))
    assert not any("implausible" in str(x.message) for x in w)


def _link(name, mass, xyz, ixx, iyy, izz, geom=""):
    return (f'<link name="{name}"><inertial><origin xyz="{xyz}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" iyy="{iyy}" izz="{izz}" ixy="0" ixz="0" iyz="0"/></inertial>'
            f"{geom}</link>")


# go1's structure: a 1e-6 kg root welded to the 5 kg trunk, a leg on a hinge below it
GO1_LIKE = ("<robot name='r'>" + _link("base", 1e-6, "0 0 0", 1e-9, 1e-9, 1e-9) +
            _link("trunk", 5.0, "0.01 0 0.02", 0.02, 0.06, 0.07,
                  "<collision><geometry><box size='0.4 0.2 0.1'/></geometry></collision>") +
            _link("imu", 0.3, "0 0 0", 1e-4, 1e-4, 1e-4,
                  "<collision><origin xyz='0 0 0.05'/><geometry><sphere radius='0.02'/>"
                  "</geometry></collision>") +
            _link("thigh", 1.0, "0.05 0 -0.1", 0.005, 0.005, 0.001,
                  "<collision><origin xyz='0 0 -0.1'/><geometry><box size='0.04 0.04 0.2'/>"
                  "</geometry></collision>") +
            "<joint name='floating_base' type='fixed'><parent link='base'/><child link='trunk'/>"
            "</joint><joint name='imu_joint' type='fixed'><parent link='trunk'/>"
            "<child link='imu'/><origin xyz='0.1 0 0.03' rpy='0 0 1.5707963267948966'/></joint>"
            "<joint name='hip' type='revolute'><parent link='trunk'/><child link='thigh'/>"
            "<origin xyz='0.15 0.1 0'/><axis xyz='0 1 0'/>"
            "<limit lower='-1' upper='1' effort='30' velocity='10'/></joint></robot>")


def _world_geoms(b):
    out = []
    for g in b.geoms:
        if g["body"] is None:
            out.append(np.asarray(g["pos"]))
        else:
            bd = b.bodies[g["body"]]
            out.append(bd["pos"] + _quat_mat(bd["quat"]) @ g["pos"])
    return np.array(out)


def test_urdf_fixed_joints_lumped_into_one_body():
    """Links joined by fixed joints become one rigid body (Gazebo's URDF reader and
    PyBullet): the masses add, the centre and the inertia are the parallel-axis sum
    (computed here from the file's numbers), every collision keeps its world pose,
    each link's frame is queryable; lump_fixed=False keeps the four bodies."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lumped = jaxode.load_urdf(GO1_LIKE, base_pos=(0, 0, 0.5))
        apart = jaxode.load_urdf(GO1_LIKE, base_pos=(0, 0, 0.5), lump_fixed=False)
    assert len(lumped.bodies) == 2 and len(apart.bodies) == 4
    assert len(lumped.joints) == 1 and len(apart.joints) == 3
    info = lumped.urdf_info
    assert info["links"]["base"] == info["links"]["trunk"] == info["links"]["imu"] == 0
    # the closed form: point masses at the world centres plus each link's own inertia
    parts = [(1e-6, [0, 0, 0.5], np.diag([1e-9] * 3)),
             (5.0, [0.01, 0, 0.52], np.diag([0.02, 0.06, 0.07])),
             (0.3, [0.1, 0, 0.53], np.diag([1e-4] * 3))]   # imu: isotropic, rotation moot
    m = sum(p[0] for p in parts)
    c = sum(p[0] * np.array(p[1]) for p in parts) / m
    I = sum(p[2] + p[0] * (np.dot(np.array(p[1]) - c, np.array(p[1]) - c) * np.eye(3)
                           - np.outer(np.array(p[1]) - c, np.array(p[1]) - c)) for p in parts)
    bd = lumped.bodies[0]
    R = _quat_mat(bd["quat"])
    assert bd["mass"] == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose(bd["pos"], c, atol=1e-12)
    np.testing.assert_allclose(R @ bd["inertia"] @ R.T, I, atol=1e-12)
    np.testing.assert_allclose(_world_geoms(lumped), _world_geoms(apart), atol=1e-12)
    body, T = info["link_frames"]["imu"]
    np.testing.assert_allclose(bd["pos"] + R @ T[:3, 3], [0.1, 0, 0.53], atol=1e-12)


def test_urdf_tiny_welded_root_holds_a_fixed_base():
    """go1 with fixed_base=True fell 16 m: its 1e-6 kg root, welded to the world, could
    not carry the 5 kg trunk through a fixed joint. Lumped, root and trunk are one body
    fixed to the world: after 1 s the trunk has not moved (while the leg, its centre off
    the hinge's vertical, swings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_urdf(GO1_LIKE, base_pos=(0, 0, 0.5), fixed_base=True)
    model = b.build()
    st = jaxode.init(model)
    fin, _ = jax.jit(lambda s: jaxode.rollout(model, s, 100, 0.01))(st)
    drift = np.abs(np.asarray(fin.pos[0]) - np.asarray(st.pos[0])).max()
    assert drift < 1e-4, drift
    assert np.abs(np.asarray(fin.pos[1]) - np.asarray(st.pos[1])).max() > 1e-3  # the leg moved


def test_mjcf_of_defaults_and_assets_only_is_an_empty_world():
    """Menagerie's shared files (defaults and assets, included by the scenes) compile in
    MuJoCo to a world with no bodies; jaxode refused them ("needs a <worldbody>")."""
    mujoco = pytest.importorskip("mujoco")
    xml = ('<mujoco><default><geom size="0.1"/><joint damping="1"/></default><asset>'
           '<texture name="t" builtin="checker" width="8" height="8"/></asset></mujoco>')
    m = mujoco.MjModel.from_xml_string(xml)
    b = _load(xml)
    assert m.nbody - 1 == len(b.bodies) == 0 and m.ngeom == len(b.geoms) == 0
    model = b.build()
    assert model.nbody == 0
