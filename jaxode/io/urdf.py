"""Load a URDF robot into a :class:`WorldBuilder`.

``load_urdf(path_or_string, base_pos=(0, 0, 0), fixed_base=False, builder=None)``
reads (with the stdlib XML helpers of :mod:`jaxode.io.xml_util`, which keep
line numbers for errors and warnings):

* ``<link>``: ``<inertial>`` (``<origin xyz rpy>``, ``<mass value>``,
  ``<inertia ixx .. izz>``): the body sits at the inertial frame (ODE needs the
  centre of mass at the body origin) and its geoms are offset to match.
  The root link without ``<inertial>`` or with mass 0 is static (fixed to
  the world: its geoms are static geometry, no body), as PyBullet treats a
  massless base and ROS a base_link without inertia. A child link without
  ``<inertial>`` (or with mass 0) joined by a ``fixed`` joint is merged into
  its parent (its geoms move with the parent's body, or stay static), and so,
  with ``lump_fixed`` (the default, Gazebo's URDF reader and PyBullet alike),
  is one with mass: one rigid body, masses added, inertia combined about the new
  centre (``urdf_info["link_frames"]``: each link's body and frame in it,
  ``urdf_info["lumped"]``: link -> the parent it joined); a moving child; one
  that moves gets PyBullet's default (UrdfParser: mass 1 kg when <inertial>
  is missing; URDF2Bullet's default inertia: the solid box of the collision
  shapes' bounding box, ``btCompoundShape::calculateLocalInertia``), one
  warning. (PyBullet keeps an explicit mass 0 on a moving child as a
  massless Featherstone link; ODE bodies need mass, so jaxode treats it as
  missing.) An inertia that is not positive definite (zero, singular, or
  breaking the triangle inequality, e.g. pybullet_data's random_urdfs with
  izz = 0) is replaced by PyBullet's default inertia for the link's mass
  (the bounding-box solid, margins left out), one warning. PyBullet's
  ``<contact><inertia_scaling value>`` multiplies the inertia, as
  URDF2Bullet does; its other ``<contact>`` entries are warned.
* ``<collision>``: ``<origin>``, ``<geometry>`` box / sphere / cylinder /
  capsule / mesh (``filename`` with ``package://PKG/...`` found through
  ``package_dirs``, then the URDF's folder as PyBullet does; a relative
  path from the URDF's folder; ``scale``; read by
  :mod:`jaxode.io.mesh_files`: a static link's mesh is a triangle mesh, a
  moving link's the convex hull; COLLADA up_axis applied as PyBullet), and
  RaiSim's material hook
  ``<material><contact name="rubber"/></material>``: the geom's
  ``Surface(material="rubber")`` when the builder has that material
  (``add_material`` / ``use_materials`` before loading); else the name is
  recorded in ``builder.urdf_info["missing_materials"]`` and warned.
* ``<joint>`` revolute (hinge with stops ``lower``/``upper``; lower > upper:
  no stops, as PyBullet), continuous (hinge), prismatic (slider with stops),
  fixed, floating (no joint), spherical (ball; its cone/twist limits are
  warned: ODE's ball joint has none), planar (ODE's plane-2D joint when the
  plane is the world's z = 0 plane on a static parent, else a clear error). ``<origin>``: the child link frame in the parent's;
  ``<axis xyz>`` in the joint (= child link) frame, default (1, 0, 0).
  ``<dynamics friction>`` -> a motor with vel 0 and fmax = friction (as
  Gazebo's ODE plugin); ``damping`` -> ``damping`` (-|damping| * rate,
  implicit: stable for any damping and link inertia; Gazebo's explicit form
  with ``builder.joint_damping = "explicit"``; revolute, continuous and
  prismatic joints).
  ``<limit effort velocity>``: recorded in ``builder.urdf_info["limits"]``; with
  ``motors=True`` every actuated joint gets a velocity motor (vel 0, fmax =
  effort, like PyBullet's default motors): command it by setting
  ``params.joint_vel`` within +-velocity. ODE has no effort clamp otherwise.
* Self-collision: joined links never collide (ODE's collide=False); other
  links of the robot collide with each other only with
  ``self_collision=True`` (PyBullet's default is off, too): otherwise the
  robot's moving geoms share one of the 32 category bits
  (``builder.urdf_info["collide_group"]``) and skip each other.
* ``fixed_base=True`` joins the root link's body to the world with a fixed
  joint (a root without mass is simply static). ``base_pos`` [m] and
  ``base_rpy`` [rad] place the root link frame in the world.

Files as ROS and PyBullet write them: whitespace before ``<?xml``, trailing
NUL bytes, numbers separated by commas. A xacro ``$(...)`` / ``${...}``
substitution is refused (file:line: expand with xacro first); an ``rpy``
of 4 numbers is an error.

A new builder gets gravity (0, 0, -9.81) m/s^2 (URDF has no world);
``builder=`` adds the robot to an existing one. ``builder.urdf_info`` maps
link names -> body index (``None``: static), joint names -> joint index, and
lists the skipped elements. Elements without physics (``visual``, robot-level
``material``) are skipped silently; others (``gazebo``, ``transmission``, ...)
warn once per name with the line.
"""
from __future__ import annotations

import os
from typing import Optional, Sequence

import numpy as np

from jaxode.build import mass as mass_lib
from jaxode.build.builder import WorldBuilder
from jaxode.build.surface import Surface
from jaxode.io import mesh_files
from jaxode.io.xml_util import Node, Reporter, inv, mat_to_quat, parse, transform

NO_PHYSICS = {"visual", "material"}


def _origin(rep: Reporter, node: Node) -> np.ndarray:
    o = node.find("origin")
    if o is None:
        return np.eye(4)
    if "rpy" in o.attrib and len(o.attrib["rpy"].replace(",", " ").split()) != 3:
        raise rep.error(o, f"rpy must be 3 angles 'roll pitch yaw' [rad] (got "
                           f"{o.attrib['rpy']!r}; a quaternion is not URDF)")
    return transform(rep.attr_floats(o, "xyz", 3, (0, 0, 0)), rep.attr_floats(o, "rpy", 3, (0, 0, 0)))


def _no_substitutions(rep: Reporter, node: Node) -> None:
    """Refuse xacro/roslaunch ``$(...)`` substitutions: the file must be
    expanded first (``xacro model.urdf.xacro > model.urdf``)."""
    for k, v in node.attrib.items():
        if "$(" in v or "${" in v:
            raise rep.error(node, f"attribute {k}={v!r} holds a xacro substitution; expand the "
                                  "file with xacro first (xacro in.urdf.xacro > out.urdf)")
    if "$(" in node.text or "${" in node.text:
        raise rep.error(node, f"text {node.text!r} holds a xacro substitution; expand the file "
                              "with xacro first")
    for c in node.children:
        _no_substitutions(rep, c)


def _package_dirs(package_dirs) -> list:
    """``package_dirs``: None, a directory, a list of directories, or a dict
    {package name: its directory} -> list of (package name or None, dir)."""
    if package_dirs is None:
        return []
    if isinstance(package_dirs, dict):
        return [(str(k), os.fspath(v)) for k, v in package_dirs.items()]
    if isinstance(package_dirs, (str, os.PathLike)):
        package_dirs = [package_dirs]
    return [(None, os.fspath(d)) for d in package_dirs]


def _resolve_mesh(uri: str, base: str, pkgs: list) -> tuple[Optional[str], list]:
    """The file a mesh ``filename`` names, and the paths tried. ``package://P/rest``:
    {P: dir} -> dir/rest; each listed dir d -> d/P/rest, d/rest; then, as
    PyBullet, the URDF's folder: base/P/rest, base/rest. An absolute path (or
    ``file:///abs``) as is; a relative one (also ``file://rel``) against the
    URDF's folder, then the listed dirs."""
    tried = []
    if uri.startswith("package://"):
        rest = uri[len("package://"):]
        pkg, _, sub = rest.partition("/")
        for name, d in pkgs:
            if name is not None:
                if name == pkg:
                    tried.append(os.path.join(d, sub))
            else:
                tried += [os.path.join(d, rest), os.path.join(d, sub)]
        tried += [os.path.join(base, rest), os.path.join(base, sub)]
    else:
        # file:///abs/path is absolute; file://meshes/x.stl (gym-ignition's panda) is a
        # path relative to the URDF, as a bare relative path
        path = uri[len("file://"):] if uri.startswith("file://") else uri
        if os.path.isabs(path):
            tried.append(path)
        else:
            tried.append(os.path.join(base, path))
            tried += [os.path.join(d, path) for _, d in pkgs]
    for t in tried:
        if os.path.isfile(t):
            return t, tried
    return None, tried


_MARGIN = 0.001  # Bullet's collision margin as PyBullet's URDF importer sets it [m]


def _box_inertia(m: float, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    l2 = (hi - lo) ** 2
    return m / 12.0 * np.diag([l2[1] + l2[2], l2[0] + l2[2], l2[0] + l2[1]])


def _skip(rep: Reporter, node: Node, known: Sequence[str]) -> None:
    for c in node.children:
        if c.tag not in known and c.tag not in NO_PHYSICS:
            rep.warn(c, f"element <{c.tag}> in <{node.tag}> is not supported, ignored")


def _attr_float(rep: Reporter, node: Node, key: str, default=None):
    if key not in node.attrib:
        if default is None:
            raise rep.error(node, f"needs attribute {key!r}")
        return default
    return rep.float(node, node.attrib[key])


def load_urdf(path_or_string, base_pos=(0.0, 0.0, 0.0), fixed_base: bool = False,
              builder: Optional[WorldBuilder] = None, base_rpy=(0.0, 0.0, 0.0),
              motors: bool = False, self_collision: bool = False, package_dirs=None,
              body_mesh: str = "hull", lump_fixed: bool = True) -> WorldBuilder:
    """Read a URDF file or string (XML starting with ``<``) into ``builder``
    (a new :class:`WorldBuilder` with gravity -9.81 z when None); see the
    module docstring for what is read. ``package_dirs``: where ``package://``
    mesh files are found (a directory, a list, or {package: directory});
    ``body_mesh``: "hull" or "trimesh" for meshes on moving links
    (:func:`jaxode.io.mesh_files.add_mesh_geom`); ``lump_fixed``: links joined by a
    ``fixed`` joint become one rigid body (Gazebo's and PyBullet's treatment; False:
    each its own ODE body held by an ODE fixed joint). Returns the builder."""
    root, name = parse(path_or_string)
    rep = Reporter(name, commas=True)
    if root.tag != "robot":
        raise rep.error(root, "the root element must be <robot>")
    _no_substitutions(rep, root)
    base_dir = os.path.dirname(os.path.abspath(name)) if name != "<string>" else os.getcwd()
    pkgs = _package_dirs(package_dirs)
    mesh_cache: dict = {}
    b = builder if builder is not None else WorldBuilder(gravity=(0.0, 0.0, -9.81))
    if not isinstance(b, WorldBuilder):
        raise ValueError(f"builder must be a WorldBuilder or None (got {type(b).__name__})")
    links = {}
    for ln in root.findall("link"):
        nm = ln.attrib.get("name")
        if not nm:
            raise rep.error(ln, "needs a name attribute")
        if nm in links:
            raise rep.error(ln, f"duplicate link name {nm!r}")
        links[nm] = ln
    if not links:
        raise rep.error(root, "needs at least one <link>")
    joints, child_of = [], {}
    for jn in root.findall("joint"):
        p, c = jn.find("parent"), jn.find("child")
        if p is None or c is None or "link" not in p.attrib or "link" not in c.attrib:
            raise rep.error(jn, "needs <parent link=...> and <child link=...>")
        for e in (p, c):
            if e.attrib["link"] not in links:
                raise rep.error(e, f"no link named {e.attrib['link']!r}")
        if c.attrib["link"] in child_of:
            raise rep.error(c, f"link {c.attrib['link']!r} is the child of two joints")
        child_of[c.attrib["link"]] = jn
        joints.append(jn)
    roots = [n for n in links if n not in child_of]
    if len(roots) != 1:
        raise rep.error(root, f"the links must form one tree (roots: {roots})")
    children: dict[str, list] = {n: [] for n in links}
    for jn in joints:
        children[jn.find("parent").attrib["link"]].append(jn)

    info = dict(links={}, joints={}, limits={}, missing_materials=[], unsupported=rep.unsupported,
                link_frames={}, lumped={})
    # link name -> (body or None, T_body world, T_link world)
    placed: dict[str, tuple] = {}

    def mesh(g: Node) -> mesh_files.MeshFile:
        fn = g.attrib.get("filename")
        if not fn:
            raise rep.error(g, "needs attribute 'filename'")
        path, tried = _resolve_mesh(fn, base_dir, pkgs)
        if path is None:
            raise rep.error(g, f"cannot find mesh file {fn!r} (tried {tried}; pass "
                               "package_dirs= for package:// files)")
        sc = rep.attr_floats(g, "scale", 3, (1.0, 1.0, 1.0))
        key = (path, tuple(sc))
        if key not in mesh_cache:
            try:
                mesh_cache[key] = mesh_files.load_mesh(path, sc, up_axis=True)
            except ValueError as e:
                raise rep.error(g, str(e)) from None
        return mesh_cache[key]

    def shape_aabb(cn: Node, T_frame: np.ndarray):
        """(kind, lo, hi, T) of one collision shape: its axis-aligned box in
        frame T_frame (link frame transforms) as Bullet bounds it (boxes and
        spheres exact; cylinders and meshes, convex hulls in PyBullet, grown by
        its 1 mm collision margin; rotated shapes as btTransformAabb, |R| h)."""
        T = inv(T_frame) @ _origin(rep, cn)
        geo = cn.find("geometry")
        if geo is None or not geo.children:
            return None
        g = geo.children[0]
        R, c = T[:3, :3], T[:3, 3]
        if g.tag == "mesh":
            v = mesh(g).vertices @ R.T + c
            return g.tag, v.min(axis=0) - _MARGIN, v.max(axis=0) + _MARGIN, T
        if g.tag == "sphere":
            h = np.full(3, _attr_float(rep, g, "radius"))
            return g.tag, c - h, c + h, T
        if g.tag == "box":
            h = 0.5 * rep.attr_floats(g, "size", 3, (0, 0, 0))
        elif g.tag in ("cylinder", "capsule"):
            r, ln_ = _attr_float(rep, g, "radius"), _attr_float(rep, g, "length")
            h = np.array([r, r, 0.5 * ln_ + (r if g.tag == "capsule" else 0.0)])
            if g.tag == "cylinder":
                h = h + _MARGIN
        else:
            return None
        h = np.abs(R) @ h
        return g.tag, c - h, c + h, T

    def default_inertia(ln: Node, m: float, T_in: np.ndarray) -> np.ndarray:
        """PyBullet's inertia for a link of mass m (its default, without
        URDF_USE_INERTIA_FROM_FILE; URDF2Bullet, Bullet's collision margin
        1 mm): one collision shape at the inertial frame: that shape's own,
        a sphere 2/5 m r^2, a box m/12 (ly^2 + lz^2, ...), a cylinder or mesh
        (a convex hull in PyBullet, btPolyhedralConvexShape) the box of its
        bounding box grown by 3 mm a side; several shapes, or one off the
        frame (a btCompoundShape): the box of their bounding box (in the
        inertial frame) grown by 1 mm a side; no shape: unit diagonal (the
        default UrdfParser writes for a link without <inertial>)."""
        boxes = [bb for bb in (shape_aabb(cn, T_in) for cn in ln.findall("collision"))
                 if bb is not None]
        if not boxes:
            return np.eye(3)
        if len(boxes) == 1 and np.allclose(boxes[0][3], np.eye(4), atol=1e-12, rtol=0):
            kind, lo, hi, _ = boxes[0]
            if kind == "sphere":
                return 0.4 * m * (0.5 * (hi[0] - lo[0])) ** 2 * np.eye(3)
            if kind in ("cylinder", "mesh"):
                return _box_inertia(m, lo - 2 * _MARGIN, hi + 2 * _MARGIN)
            return _box_inertia(m, lo, hi)
        lo = np.min([bb[1] for bb in boxes], axis=0) - _MARGIN
        hi = np.max([bb[2] for bb in boxes], axis=0) + _MARGIN
        return _box_inertia(m, lo, hi)

    def inertia_scaling(ln: Node) -> float:
        """PyBullet's <contact><inertia_scaling value> (URDF2Bullet multiplies
        the link's local inertia by it)."""
        n = ln.path("contact", "inertia_scaling")
        return 1.0 if n is None else _attr_float(rep, n, "value", 1.0)

    def inertial(ln: Node, nm: str, moving: bool):
        """(Mass, T_inertial in link) or None for a link without mass. A moving
        link without <inertial> or with mass 0 gets PyBullet's default (1 kg,
        the bounding-box inertia); an inertia that is not positive definite
        (zero, singular, or breaking the triangle inequality) is replaced by
        PyBullet's default inertia for the same mass."""
        ine = ln.find("inertial")
        m = 0.0
        if ine is not None:
            mnode = ine.find("mass")
            m = _attr_float(rep, mnode, "value") if mnode is not None else 0.0
            if not (m >= 0.0 and np.isfinite(m)):
                raise rep.error(mnode, f"mass must be >= 0 kg and finite (got {m})")
        if m == 0.0:
            if not moving:
                return None
            what = "no <inertial>" if ine is None else "mass 0"
            rep.warn(ine if ine is not None else ln,
                     f"link {nm!r} has {what} but moves: PyBullet's default mass 1 kg with the "
                     "inertia of its collision shapes' bounding box", key="no inertial")
            T_in = np.eye(4) if ine is None else _origin(rep, ine)
            I = default_inertia(ln, 1.0, T_in) * inertia_scaling(ln)
            return mass_lib.from_inertia(1.0, I), T_in
        inn = ine.find("inertia")
        if inn is None:
            raise rep.error(ine, "needs <inertia ixx ixy ixz iyy iyz izz>")
        v = {k: _attr_float(rep, inn, k, 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]],
                      [v["ixz"], v["iyz"], v["izz"]]]) * inertia_scaling(ln)
        T_in = _origin(rep, ine)
        try:
            ms = mass_lib.from_inertia(m, I)
        except ValueError as e:
            I2 = default_inertia(ln, m, T_in) * inertia_scaling(ln)
            rep.warn(inn, f"link {nm!r}: {e}; replaced by PyBullet's default inertia for "
                          f"{m} kg (the collision shapes' bounding box): diag "
                          f"{np.round(np.diag(I2), 9).tolist()}", key="inertia repaired")
            try:
                ms = mass_lib.from_inertia(m, I2)
            except ValueError as e2:
                raise rep.error(inn, f"{e}; PyBullet's bounding-box default is not valid either "
                                     f"({e2})") from None
        why = mass_lib.implausible(ms.mass, ms.inertia)
        if why is not None:
            rep.warn(inn, f"link {nm!r}: implausible inertia ({why}); kept as the file says, "
                          "but the step may go non-finite", key="implausible inertia")
        _skip(rep, ine, ("origin", "mass", "inertia"))
        return ms, T_in

    def place(nm: str, T_link: np.ndarray, parent: Optional[str], jtype: Optional[str]):
        ln = links[nm]
        if parent is None:  # the root: no mass = fixed to the world (static)
            ine = inertial(ln, nm, False)
        else:
            ine = inertial(ln, nm, jtype != "fixed")
        if ine is None:
            if parent is None:
                body, T_body = None, T_link
            else:  # massless link welded to its parent: its geoms join the parent
                body, T_body = placed[parent][0], placed[parent][1]
        elif parent is not None and jtype == "fixed" and lump_fixed:
            body, T_body = lump(nm, ine, T_link, parent)
        else:
            T_body = T_link @ ine[1]
            body = b.add_body(pos=T_body[:3, 3], quat=mat_to_quat(T_body[:3, :3]), mass=ine[0])
        placed[nm] = (body, T_body, T_link)
        info["link_frames"][nm] = (body, T_link if body is None else inv(T_body) @ T_link)
        info["links"][nm] = body
        for cn in ln.findall("collision"):
            collision(cn, body, T_link, T_body)
        con = ln.find("contact")
        if con is not None:
            other = [c for c in con.children if c.tag != "inertia_scaling"]
            if other:
                rep.warn(other[0], f"PyBullet's <contact> <{other[0].tag}> is not mapped (only "
                                   "inertia_scaling is read); use materials for surfaces",
                         key="pybullet contact")
        _skip(rep, ln, ("inertial", "collision", "contact"))

    def lump(nm: str, ine, T_link: np.ndarray, parent: str):
        """A link welded to ``parent`` by a fixed joint joins the parent's body, as
        Gazebo's URDF reader and PyBullet make one rigid body of them: masses
        added, the inertia combined exactly about the new centre of mass (the body
        keeps its orientation; its origin moves to that centre, and the geoms
        already on it move by the opposite offset). Welded to the static world,
        the link is static. Returns (body, T_body) as ``placed`` holds them."""
        pbody, pT_body = placed[parent][0], placed[parent][1]
        if pbody is None:
            return None, T_link
        bd = b.bodies[pbody]
        mine = mass_lib.Mass(bd["mass"], np.zeros(3), np.asarray(bd["inertia"], np.float64))
        T_child = inv(pT_body) @ (T_link @ ine[1])  # the link's inertial frame in the body's
        child = mass_lib.translate(mass_lib.rotate(ine[0], T_child[:3, :3]), T_child[:3, 3])
        total = mass_lib.add(mine, child)
        com = total.com.copy()
        about = mass_lib.translate(total, -com)
        R = pT_body[:3, :3]
        bd["pos"] = np.asarray(bd["pos"], np.float64) + R @ com
        bd["mass"], bd["inertia"] = float(about.mass), np.asarray(about.inertia, np.float64)
        for g in b.geoms:
            if g["body"] == pbody:
                g["pos"] = np.asarray(g["pos"], np.float64) - com
        T_new = pT_body.copy()
        T_new[:3, 3] = bd["pos"]
        for other, (bb, _, tl) in list(placed.items()):
            if bb == pbody:
                placed[other] = (bb, T_new, tl)
                info["link_frames"][other] = (bb, inv(T_new) @ tl)
        info["lumped"][nm] = parent
        return pbody, T_new

    def collision(cn: Node, body, T_link, T_body):
        T_c = T_link @ _origin(rep, cn)
        T_rel = inv(T_body) @ T_c if body is not None else T_c
        surf = None
        mat = cn.find("material")
        if mat is not None:
            con = mat.find("contact")
            if con is not None and con.attrib.get("name"):
                mname = con.attrib["name"]
                if mname in b.materials.materials:
                    surf = Surface(material=mname)
                else:
                    info["missing_materials"].append(mname)
                    rep.warn(con, f"material {mname!r} is not in the builder (add_material "
                                  "before load_urdf); default surface used",
                             key=f"material {mname}")
        geo = cn.find("geometry")
        if geo is None or not geo.children:
            raise rep.error(cn, "needs a <geometry> with one shape")
        g = geo.children[0]
        kw = dict(body=body, pos=T_rel[:3, 3], quat=mat_to_quat(T_rel[:3, :3]), surface=surf)
        try:
            if g.tag == "box":
                b.add_box(rep.attr_floats(g, "size", 3, None) if "size" in g.attrib
                          else _missing(rep, g, "size"), **kw)
            elif g.tag == "sphere":
                b.add_sphere(_attr_float(rep, g, "radius"), **kw)
            elif g.tag == "cylinder":
                b.add_cylinder(_attr_float(rep, g, "radius"), _attr_float(rep, g, "length"), **kw)
            elif g.tag == "capsule":
                b.add_capsule(_attr_float(rep, g, "radius"), _attr_float(rep, g, "length"), **kw)
            elif g.tag == "mesh":
                mesh_files.add_mesh_geom(b, mesh(g), where=g.attrib["filename"],
                                         body_mesh=body_mesh, **kw)
            else:
                rep.warn(g, f"geometry <{g.tag}> is not supported, collision skipped",
                         key=f"geometry {g.tag}")
        except ValueError as e:
            if str(e).startswith(rep.name):
                raise
            raise rep.error(g, str(e)) from None
        _skip(rep, cn, ("origin", "geometry", "material"))

    def joint(jn: Node, T_parent: np.ndarray):
        jtype = jn.attrib.get("type", "")
        jname = jn.attrib.get("name", "")
        pname, cname = jn.find("parent").attrib["link"], jn.find("child").attrib["link"]
        if jtype not in ("revolute", "continuous", "prismatic", "fixed", "floating", "planar",
                         "spherical"):
            raise rep.error(jn, f"unknown joint type {jtype!r} (revolute, continuous, prismatic, "
                                "fixed, floating, planar, spherical)")
        T_child = T_parent @ _origin(rep, jn)
        place(cname, T_child, pname, jtype)
        pbody, cbody = placed[pname][0], placed[cname][0]
        _skip(rep, jn, ("parent", "child", "origin", "axis", "limit", "dynamics",
                        "safety_controller", "calibration", "mimic"))
        for tag in ("safety_controller", "calibration", "mimic"):
            if jn.find(tag) is not None:
                rep.warn(jn.find(tag), f"<{tag}> is not supported, ignored")
        if jtype == "floating":
            return
        if cbody is None or cbody == pbody:
            return  # merged into its parent, or static
        ax = jn.find("axis")
        axis = rep.attr_floats(ax, "xyz", 3, (1, 0, 0)) if ax is not None else np.array([1.0, 0, 0])
        waxis = T_child[:3, :3] @ axis
        if jtype == "planar":
            # ODE's plane-2D joint: the body moves in the world plane z = 0 and
            # turns about world z only; a URDF planar joint maps to it when it
            # is that plane (normal = world z, on the static world, the link's
            # centre of mass at z = 0).
            zc = placed[cname][1][2, 3]
            nrm = waxis / max(np.linalg.norm(waxis), 1e-300)
            if pbody is not None or abs(abs(nrm[2]) - 1.0) > 1e-9 or abs(zc) > 1e-9:
                raise rep.error(jn, "a planar joint maps to ODE's plane-2D joint only, which keeps "
                                    "a body's centre of mass in the world plane z = 0 turning "
                                    "about world z: the parent must be static, the axis world z "
                                    f"(got {np.round(nrm, 6).tolist()}), the child's centre of "
                                    f"mass at z = 0 (got {zc:.6g} m)")
            info["joints"][jname] = b.add_plane2d(cbody)
            return
        if jtype == "spherical":
            if jn.find("limit") is not None:
                rep.warn(jn.find("limit"), "spherical joint limits are not supported (ODE's ball "
                                           "joint has none), ignored", key="spherical limit")
            try:
                info["joints"][jname] = b.add_ball(cbody, pbody, anchor=T_child[:3, 3])
            except ValueError as e:
                raise rep.error(jn, str(e)) from None
            return
        params = {}
        lim = jn.find("limit")
        if lim is not None:
            eff = _attr_float(rep, lim, "effort", -1.0)
            vel = _attr_float(rep, lim, "velocity", -1.0)
            info["limits"][jname] = (eff, vel)
            lo, hi = _attr_float(rep, lim, "lower", 0.0), _attr_float(rep, lim, "upper", 0.0)
            if jtype in ("revolute", "prismatic") and lo <= hi:
                # lower > upper: no stops, as PyBullet (URDF2Bullet adds the
                # limit constraint only when lower <= upper)
                params["lo_stop"], params["hi_stop"] = lo, hi
            if motors and eff > 0:
                params["vel"], params["fmax"] = 0.0, eff
        elif jtype in ("revolute", "prismatic"):
            raise rep.error(jn, f"a {jtype} joint needs <limit> (URDF)")
        dyn = jn.find("dynamics")
        if dyn is not None:
            fr = _attr_float(rep, dyn, "friction", 0.0)
            if fr > 0 and "fmax" not in params:
                params["vel"], params["fmax"] = 0.0, fr
            damp = _attr_float(rep, dyn, "damping", 0.0)
            if damp != 0 and jtype in ("revolute", "continuous", "prismatic"):
                params["damping"] = abs(damp)  # Gazebo applies -|damping| * rate
            elif damp != 0:
                rep.warn(dyn, f"joint damping of a {jtype} joint is not supported, ignored",
                         key="joint damping")
        try:
            if jtype in ("revolute", "continuous"):
                ji = b.add_hinge(cbody, pbody, anchor=T_child[:3, 3], axis=waxis, **params)
            elif jtype == "prismatic":
                ji = b.add_slider(cbody, pbody, axis=waxis, **params)
            else:
                ji = b.add_fixed(cbody, pbody)
        except ValueError as e:
            raise rep.error(jn, str(e)) from None
        info["joints"][jname] = ji

    ngeom0 = len(b.geoms)
    T0 = transform(np.asarray(base_pos, dtype=np.float64), np.asarray(base_rpy, dtype=np.float64))
    place(roots[0], T0, None, None)
    if fixed_base and placed[roots[0]][0] is not None:
        info["joints"]["__fixed_base__"] = b.add_fixed(placed[roots[0]][0], None)
    stack = list(children[roots[0]])
    while stack:
        jn = stack.pop(0)
        joint(jn, placed[jn.find("parent").attrib["link"]][2])
        stack.extend(children[jn.find("child").attrib["link"]])
    _skip(rep, root, ("link", "joint"))
    moving = [g for g in b.geoms[ngeom0:] if g["body"] is not None]
    if not self_collision and len({g["body"] for g in moving}) >= 2:
        groups = b.__dict__.setdefault("collide_groups", {})  # shared with load_sdf
        if len(groups) >= 32:
            rep.warn(root, "more than 32 robots/models without self-collision: the links of "
                           "this robot collide with each other", key="collide groups")
        else:
            bit = 1 << len(groups)
            groups[root.attrib.get("name", f"robot{len(groups)}")] = bit
            info["collide_group"] = bit
            for g in moving:
                g["category"], g["collide"] = bit, 0xFFFFFFFF & ~bit
    b.urdf_info = info
    return b


def _missing(rep: Reporter, node: Node, key: str):
    raise rep.error(node, f"needs attribute {key!r}")
