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
"""
from __future__ import annotations

import os
import shutil
import warnings

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
