"""Scene files as Gazebo, ROS and PyBullet write them (issue 21).

SDF fixtures in tests/data/sdf/rules (written for these tests); URDF rules
on small strings and on pybullet_data (PyPI ``pybullet``, skipped without
it). Independent truths: Hooke's law for a ball resting on Gazebo's
ground plane with kp/kd (it sinks m g / kp: Gazebo derives the contact
ERP/CFM from kp and kd, gazebo/physics/ode/ODEPhysics.cc); a sphere
dropped on pybullet_data's plane.urdf rests at its radius above z = 0
(the top of the plane's static box); repaired and default inertias equal
PyBullet's own (``getDynamicsInfo``); mesh vertices against the fixture's
construction (a unit cube, scaled and posed). Two small scenes compile.
"""
from __future__ import annotations

import functools
import os
import warnings

import jax
import numpy as np
import pytest

import jaxode
from jaxode.sim.collision import contact as ct
from jaxode.sim.pipeline import guarded_step

from fast_compile import OPTIONS as _FAST  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
RULES = os.path.join(DATA, "sdf", "rules")


@functools.partial(jax.jit, static_argnums=(2,), compiler_options=_FAST)
def _roll(model, state, n):
    return jax.lax.fori_loop(0, n, lambda i, s: guarded_step(model, s, model.params, 1e-3), state)


def _no_model_path(monkeypatch):
    for var in ("GAZEBO_MODEL_PATH", "SDF_PATH"):
        monkeypatch.delenv(var, raising=False)


# ------------------------------------------------------------------ SDF
def test_sdf_builtin_models_kp_kd_and_shared_names(monkeypatch):
    _no_model_path(monkeypatch)
    with pytest.warns(jaxode.JaxodeFormatWarning) as rec:
        b = jaxode.load_sdf(os.path.join(RULES, "sun_ground.world"), search_path=[])
    msgs = [str(w.message) for w in rec]
    for tag in ("gui", "scene", "light", "plugin", "sensor"):  # one warning per element name
        assert sum(f": <{tag}>: " in m for m in msgs) == 1, (tag, msgs)
    # the blank lines before <?xml do not shift line numbers: <gui> is on line 10
    assert any(m.endswith("sun_ground.world:10: <gui>: <gui> has no part in the physics step, "
                          "skipped") for m in msgs)
    assert sum("soft_erp" in m or "soft_cfm" in m for m in msgs) == 1
    info = b.sdf_info
    # a joint and a link share the name "ball" (SDF 1.5-1.7): no false cycle
    assert info["bodies"] == {"ball::ball": 0} and list(info["joints"]) == ["ball::ball"]
    plane = b.geoms[info["geoms"]["ground_plane::link::collision"]]
    assert plane["type"] == ct.PLANE and (plane["surface"].mu, plane["surface"].mu2) == (100.0, 50.0)
    ball = b.geoms[info["geoms"]["ball::ball::ball"]]["surface"]
    assert (ball.kp, ball.kd, ball.soft_erp, ball.soft_cfm) == (2e4, 100.0, None, None)
    # Hooke: the 2 kg ball rests m g / kp below its touching height. The
    # ground plane keeps SDF's max_vel 0.01 m/s, which would cap the spring's
    # correcting velocity (the pair takes the min): lift it for this check
    # (stepped without the slider joint, which only holds the ball upright:
    # one small scene to compile)
    text = open(os.path.join(RULES, "sun_ground.world")).read()
    text = text[:text.index('<joint name="ball"')] + text[text.index("</joint>") + 8:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
        m = jaxode.load_sdf(text.lstrip(), search_path=[]).build()
    m = m.replace(params=m.params.replace(max_vel=m.params.max_vel * 0 + 100.0))
    s = _roll(m, jaxode.init(m), 600)
    sink = 0.1 - float(s.pos[0, 2])
    assert sink == pytest.approx(2.0 * 9.8 / 2e4, rel=0.03)
    assert abs(float(s.vel[0, 2])) < 1e-4


def test_sdf_kp_alone_takes_sdf_default_kd():
    s = open(os.path.join(RULES, "sun_ground.world")).read().lstrip()
    s = s.replace("<kd>100</kd>", "").replace("<soft_erp>0.9</soft_erp><soft_cfm>0.5</soft_cfm>", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
        b = jaxode.load_sdf(s, search_path=[])
    sf = b.geoms[b.sdf_info["geoms"]["ball::ball::ball"]]["surface"]
    assert (sf.kp, sf.kd) == (2e4, 1.0)  # SDF's <kd> default


def test_sdf_static_only_world_meshes(monkeypatch):
    _no_model_path(monkeypatch)
    pytest.importorskip("trimesh")
    with warnings.catch_warnings():
        warnings.simplefilter("error", jaxode.JaxodeFormatWarning)  # nothing skipped
        b = jaxode.load_sdf(os.path.join(RULES, "static_only.world"), search_path=[DATA])
    assert b.bodies == []
    g = b.sdf_info["geoms"]
    assert b.geoms[g["building::walls::wall"]]["surface"].max_vel == 0.0  # 0 accepted
    ghost = b.geoms[g["building::walls::ghost"]]
    assert (ghost["category"], ghost["collide"]) == (0, 0)  # max_contacts 0: no contacts
    corners = np.array([[x, y, z] for x in (-.5, .5) for y in (-.5, .5) for z in (-.5, .5)])
    by_geom = {gi: data for gi, data, _ in b.meshes}
    for name, scale, pos in (("table", (1, 2, 1), (1, 3, 0.5)), ("crate", (.5, .5, .5), (2, 3, 0.5))):
        gi = g["building::walls::" + name]
        assert b.geoms[gi]["type"] == ct.TRIMESH  # static mesh: a triangle mesh (Gazebo's ODE)
        world = by_geom[gi].verts + np.asarray(b.geoms[gi]["pos"])
        np.testing.assert_allclose(np.sort(world, axis=0),
                                   np.sort(corners * scale + pos, axis=0), atol=1e-12)
    m = b.build()  # zero bodies: builds and steps
    s = _roll(m, jaxode.init(m), 3)
    assert s.pos.shape == (0, 3)


def test_sdf_heightmap_from_image(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    img = np.zeros((3, 5), dtype=np.uint8)  # 3 rows (y), 5 columns (x)
    img[:, :] = np.arange(5) * 50  # a ramp along +x
    img[0, 0] = 250  # top-left pixel: the -x, +y corner; the image's largest value
    Image.fromarray(img, mode="L").save(tmp_path / "hm.png")
    s = f"""<sdf version="1.6"><world name="w"><model name="t"><static>1</static>
      <link name="l"><collision name="c"><geometry><heightmap><uri>{tmp_path / 'hm.png'}</uri>
      <size>4 2 10</size><pos>1 0 0</pos></heightmap></geometry></collision></link></model>
      </world></sdf>"""
    b = jaxode.load_sdf(s)
    h = b.hfields[0]
    assert h.shape == (5, 3)
    # Gazebo's HeightmapShape: height = value / (largest value) * size z
    np.testing.assert_allclose(h[:, 1], np.arange(5) * 50 / 250 * 10)
    assert h[0, 2] == pytest.approx(10.0) and h[0, 0] == 0.0  # +y is the image's top row
    assert np.allclose(b.geoms[0]["pos"], [1, 0, 0])


def test_xml_whitespace_and_line_numbers():
    bad = "\n\n  \n<?xml version='1.0'?>\n<sdf version='1.6'><world name='w'>\n<model name='m'>" \
          "<link name='l'><inertial>\n<mass>heavy</mass></inertial></link></model></world></sdf>"
    with pytest.raises(ValueError, match=r"<string>:7: <mass>: expected numbers"):
        jaxode.load_sdf(bad)



def test_xml_as_tinyxml_reads_shipped_gazebo_files():
    # osrf's gazebo_models ship files expat refuses and Gazebo (TinyXML) loads: a comment
    # before the declaration (mpl_right_arm), "--" inside a comment (src_doorway), an
    # unquoted attribute (submarine). They load, with one warning naming the first error.
    odd = ("<!-- licence -->\n<?xml version='1.0'?>\n<sdf version='1.5'><model name=m>\n"
           "<!-- outer <!-- inner -- note -->\n<link name='l'><inertial>\n<mass>3</mass>"
           "</inertial><collision name=c><geometry><sphere><radius>0.1</radius></sphere>"
           "</geometry><surface><friction><ode><mu>-1</mu></ode></friction></surface>"
           "</collision></link></model></sdf>")
    with pytest.warns(jaxode.JaxodeFormatWarning, match=r"<string>:2: XML error.*leniently"):
        b = jaxode.load_sdf(odd)
    (body,) = b.bodies
    assert body["mass"] == 3.0
    # Gazebo's FrictionPyramid::SetMu: a negative mu means no limit (GZ_FLT_MAX)
    assert b.geoms[0]["surface"].mu == np.inf
    # what neither parser reads is still an error with its line
    with pytest.raises(ValueError, match=r"<string>:2: XML error"):
        jaxode.load_sdf("<sdf version='1.5'>\n<model name='m'><link></model></sdf>")


def test_sdf_light_only_file_and_model_triple_slash(tmp_path):
    # Gazebo's own model://sun is a file of one <light>: an empty world, the light warned
    sun = "<?xml version='1.0'?><sdf version='1.5'><light type='directional' name='sun'/></sdf>"
    with pytest.warns(jaxode.JaxodeFormatWarning, match="light"):
        m = jaxode.load_sdf(sun).build()
    assert m.nbody == 0
    # model:///NAME (three slashes, as table_marble writes it) resolves like model://NAME
    (tmp_path / "ball").mkdir()
    (tmp_path / "ball" / "model.sdf").write_text(
        "<sdf version='1.5'><model name='ball'><link name='l'><collision name='c'><geometry>"
        "<sphere><radius>0.2</radius></sphere></geometry></collision></link></model></sdf>")
    world = ("<sdf version='1.5'><world name='w'><include><uri>model:///ball</uri></include>"
             "</world></sdf>")
    b = jaxode.load_sdf(world, search_path=[str(tmp_path)])
    assert len(b.bodies) == 1 and b.geoms[0]["size"][0] == 0.2


# ------------------------------------------------------------------ URDF
def _urdf(body: str) -> str:
    return f"\n  <?xml version='1.0'?>\n<robot name='r'>{body}</robot>\n\x00"


BASE = ("<link name='base'><inertial><mass value='0'/><inertia ixx='0' iyy='0' izz='0' ixy='0' "
        "ixz='0' iyz='0'/></inertial><collision><geometry><box size='1,1,0.1'/></geometry>"
        "</collision></link>")
ARM = ("<link name='arm'><inertial><mass value='2'/><inertia ixx='0.1' iyy='0.1' izz='0.1' "
       "ixy='0' ixz='0' iyz='0'/></inertial></link>")


def test_urdf_leniency_and_clear_errors():
    j = ("<joint name='j' type='{t}'><parent link='base'/><child link='arm'/>"
         "<origin xyz='0, 0, {z}' rpy='{rpy}'/><axis xyz='0 0 1'/>"
         "<limit lower='1' upper='-1' effort='1' velocity='1'/></joint>")
    b = jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="prismatic", z=1, rpy="0 0 0")))
    assert b.bodies and len(b.bodies) == 1  # massless root: static, no body
    assert b.geoms[0]["body"] is None and np.allclose(b.geoms[0]["size"], [1, 1, 0.1])
    jt = b.joints[0]
    assert not np.isfinite(jt["axes"][0]["lo_stop"]) and not np.isfinite(jt["axes"][0]["hi_stop"])
    with pytest.raises(ValueError, match=r"<string>:3: <origin>: rpy must be 3 angles"):
        jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="prismatic", z=1, rpy="0 0 0 1")))
    with pytest.raises(ValueError, match=r"<string>:3: <origin>: attribute xyz=.*xacro"):
        jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="prismatic", z="$(arg h)", rpy="0 0 0")))
    with pytest.warns(jaxode.JaxodeFormatWarning, match="spherical joint limits"):
        b = jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="spherical", z=1, rpy="0 0 0")))
    from jaxode.sim.joints import JOINT_TYPE_NAMES
    assert JOINT_TYPE_NAMES[b.joints[0]["type"]] == "ball"
    np.testing.assert_allclose(b.joints[0]["geometry"]["anchor"], [0, 0, 1])
    b = jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="planar", z=0, rpy="0 0 0")))
    assert JOINT_TYPE_NAMES[b.joints[0]["type"]] == "plane2d"
    with pytest.raises(ValueError, match=r"planar joint maps to ODE's plane-2D joint only"):
        jaxode.load_urdf(_urdf(BASE + ARM + j.format(t="planar", z=1, rpy="0 0 0")))


@pytest.mark.extended  # needs pybullet: test-extended's extra, not test's
def test_urdf_default_and_repaired_inertia_match_pybullet(tmp_path):
    p = pytest.importorskip("pybullet")
    text = ("<?xml version='1.0'?><robot name='r'>" + BASE +
            # zero inertia (as pybullet_data's random_urdfs): repaired
            "<link name='a'><contact><inertia_scaling value='3'/></contact><inertial>"
            "<origin xyz='0 0 0.1'/><mass value='0.5'/><inertia ixx='1' iyy='1' izz='0' ixy='0' "
            "ixz='0' iyz='0'/></inertial><collision><origin xyz='0.05 0 0.1'/><geometry>"
            "<box size='0.2 0.4 0.6'/></geometry></collision><collision><origin xyz='0 0 0.1'/>"
            "<geometry><sphere radius='0.25'/></geometry></collision></link>"
            # no <inertial> on a moving link: 1 kg, bounding-box inertia
            "<link name='b'><collision><geometry><cylinder radius='0.1' length='0.5'/></geometry>"
            "</collision></link>"
            "<joint name='ja' type='continuous'><parent link='base'/><child link='a'/></joint>"
            "<joint name='jb' type='continuous'><parent link='a'/><child link='b'/>"
            "<origin xyz='0 0 1'/></joint></robot>")
    path = tmp_path / "r.urdf"
    path.write_text(text)
    with pytest.warns(jaxode.JaxodeFormatWarning) as rec:
        b = jaxode.load_urdf(str(path))
    assert sum("replaced by PyBullet's default inertia" in str(w.message) for w in rec) == 1
    cid = p.connect(p.DIRECT)
    try:
        rid = p.loadURDF(str(path), physicsClientId=cid)
        for link, body in ((0, b.urdf_info["links"]["a"]), (1, b.urdf_info["links"]["b"])):
            mass, _, diag = p.getDynamicsInfo(rid, link, physicsClientId=cid)[:3]
            assert b.bodies[body]["mass"] == pytest.approx(mass)
            # PyBullet builds its hulls in float32: 1e-6
            np.testing.assert_allclose(np.diag(b.bodies[body]["inertia"]), diag, rtol=1e-6)
        # pybullet_data's random objects: izz = 0 in the file, a mesh collision
        pd = pytest.importorskip("pybullet_data")
        pytest.importorskip("trimesh")
        f = os.path.join(pd.getDataPath(), "random_urdfs", "000", "000.urdf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
            ours = jaxode.load_urdf(f).bodies[0]["inertia"]
        rid = p.loadURDF(f, physicsClientId=cid)
        np.testing.assert_allclose(np.diag(ours), p.getDynamicsInfo(rid, -1, physicsClientId=cid)[2],
                                   rtol=1e-5)
    finally:
        p.disconnect(cid)


def test_urdf_package_dirs_and_mesh_scale(tmp_path):
    pytest.importorskip("trimesh")
    link = ("<link name='l'><inertial><mass value='1'/><inertia ixx='1' iyy='1' izz='1' ixy='0' "
            "ixz='0' iyz='0'/></inertial><collision><geometry><mesh filename='{f}' "
            "scale='2 1 1'/></geometry></collision></link>")
    u = _urdf(link.format(f="package://mypkg/meshes/cube.obj"))
    for dirs in ({"mypkg": DATA}, [os.path.dirname(DATA)], DATA):
        # {package: dir} -> dir/rest; a listed dir d -> d/PKG/rest or d/rest
        if isinstance(dirs, list):
            os.makedirs(tmp_path / "mypkg", exist_ok=True)
            if not os.path.exists(tmp_path / "mypkg" / "meshes"):
                os.symlink(os.path.join(DATA, "meshes"), tmp_path / "mypkg" / "meshes")
            dirs = [str(tmp_path)]
        b = jaxode.load_urdf(u, package_dirs=dirs)
        h = b.hulls[0][1]
        np.testing.assert_allclose(np.ptp(h.verts, axis=0), [2, 1, 1])  # the scaled cube's hull
    with pytest.raises(ValueError, match=r"<string>:3: <mesh>: cannot find mesh file "
                                         r"'package://mypkg/meshes/cube.obj' \(tried"):
        jaxode.load_urdf(u)


def _pybullet_data():
    pd = pytest.importorskip("pybullet_data")
    return pd.getDataPath()


@pytest.mark.extended  # needs pybullet_data: test-extended's extra
@pytest.mark.parametrize("rel", ["kuka_iiwa/model.urdf", "franka_panda/panda.urdf",
                                 "xarm/xarm6_robot.urdf"])
def test_urdf_robots_get_their_collision_meshes(rel):
    pytest.importorskip("trimesh")
    root = _pybullet_data()
    from jaxode.io.xml_util import parse
    tree, _ = parse(os.path.join(root, rel))
    nmesh = sum(1 for ln in tree.findall("link") for c in ln.findall("collision")
                if c.path("geometry", "mesh") is not None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
        b = jaxode.load_urdf(os.path.join(root, rel))
    kinds = [g["type"] for g in b.geoms]
    assert nmesh >= 7 and len(b.geoms) == nmesh
    moving = [g for g in b.geoms if g["body"] is not None]
    assert moving and all(g["type"] == ct.CONVEX for g in moving)
    assert all(k in (ct.CONVEX, ct.TRIMESH) for k in kinds)


@pytest.mark.extended  # needs pybullet: test-extended's extra, not test's
def test_plane_urdf_is_static_and_a_dropped_sphere_rests_on_it():
    root = _pybullet_data()
    b = jaxode.WorldBuilder(gravity=(0, 0, -9.81))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxode.JaxodeFormatWarning)
        jaxode.load_urdf(os.path.join(root, "plane.urdf"), builder=b)
    assert b.bodies == [] and [g["body"] for g in b.geoms] == [None]
    r = 0.05
    body = b.add_body(pos=(0.3, -0.2, 0.2), mass=jaxode.mass.sphere(r, total=1.0))
    b.add_sphere(r, body=body)
    m = b.build()
    s = _roll(m, jaxode.init(m), 500)
    # at rest on the box top (z = 0), the sphere's centre r above it (ODE's
    # default contact softness: penetration within the world's erp/cfm, < 1 mm)
    assert float(s.pos[0, 2]) == pytest.approx(r, abs=1e-3)
    assert np.linalg.norm(np.asarray(s.vel[0])) < 1e-3


# ------------------------------------------------------------------ corpus
@pytest.mark.extended
def test_pybullet_data_corpus_load_rate(capsys):
    _pybullet_data()
    pytest.importorskip("trimesh")
    from tools import corpus_load
    corpus_load.main(["--steps", "100", "--step-every", "25", "--json", ""])
    out = capsys.readouterr().out
    import re
    loaded = float(re.search(r"loaded: \d+/\d+ = ([\d.]+) %", out).group(1))
    built = float(re.search(r"built:  \d+/\d+ = ([\d.]+) %", out).group(1))
    st = re.search(r"finite: (\d+)/(\d+)", out)
    assert loaded >= 95.0 and built >= 95.0, out
    assert int(st.group(1)) == int(st.group(2)) > 0, out
