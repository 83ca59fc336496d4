"""Load a URDF robot into a :class:`WorldBuilder`.

``load_urdf(path_or_string, base_pos=(0, 0, 0), fixed_base=False, builder=None)``
reads (with the stdlib XML helpers of :mod:`jaxode.io.xml_util`, which keep
line numbers for errors and warnings):

* ``<link>``: ``<inertial>`` (``<origin xyz rpy>``, ``<mass value>``,
  ``<inertia ixx .. izz>``): the body sits at the inertial frame (ODE needs the
  centre of mass at the body origin) and its geoms are offset to match. A
  link without ``<inertial>`` (or with mass 0) joined to its parent by a
  ``fixed`` joint is merged into the parent (its geoms move with the parent's
  body, or stay static); the root without one is static when ``fixed_base``;
  otherwise it gets ODE's default mass (1 kg, unit inertia) and a warning.
* ``<collision>``: ``<origin>``, ``<geometry>`` box / sphere / cylinder
  (mesh: warned, skipped), and RaiSim's material hook
  ``<material><contact name="rubber"/></material>``: the geom's
  ``Surface(material="rubber")`` when the builder has that material
  (``add_material`` / ``use_materials`` before loading); else the name is
  recorded in ``builder.urdf_info["missing_materials"]`` and warned.
* ``<joint>`` revolute (hinge with stops ``lower``/``upper``), continuous
  (hinge), prismatic (slider with stops), fixed, floating (no joint); planar
  is warned and skipped. ``<origin>``: the child link frame in the parent's;
  ``<axis xyz>`` in the joint (= child link) frame, default (1, 0, 0).
  ``<dynamics friction>`` -> a motor with vel 0 and fmax = friction (as
  Gazebo's ODE plugin); ``damping`` -> ``damping`` (Gazebo's
  explicit -|damping| * rate; revolute, continuous and prismatic joints).
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

A new builder gets gravity (0, 0, -9.81) m/s^2 (URDF has no world);
``builder=`` adds the robot to an existing one. ``builder.urdf_info`` maps
link names -> body index (``None``: static), joint names -> joint index, and
lists the skipped elements. Elements without physics (``visual``, robot-level
``material``) are skipped silently; others (``gazebo``, ``transmission``, ...)
warn once per name with the line.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from jaxode.build import mass as mass_lib
from jaxode.build.builder import WorldBuilder
from jaxode.build.surface import Surface
from jaxode.io.xml_util import Node, Reporter, inv, mat_to_quat, parse, transform

NO_PHYSICS = {"visual", "material"}


def _origin(rep: Reporter, node: Node) -> np.ndarray:
    o = node.find("origin")
    if o is None:
        return np.eye(4)
    return transform(rep.attr_floats(o, "xyz", 3, (0, 0, 0)), rep.attr_floats(o, "rpy", 3, (0, 0, 0)))


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
              motors: bool = False, self_collision: bool = False) -> WorldBuilder:
    """Read a URDF file or string (XML starting with ``<``) into ``builder``
    (a new :class:`WorldBuilder` with gravity -9.81 z when None); see the
    module docstring for what is read. Returns the builder."""
    root, name = parse(path_or_string)
    rep = Reporter(name)
    if root.tag != "robot":
        raise rep.error(root, "the root element must be <robot>")
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

    info = dict(links={}, joints={}, limits={}, missing_materials=[], unsupported=rep.unsupported)
    # link name -> (body or None, T_body world, T_link world)
    placed: dict[str, tuple] = {}

    def inertial(ln: Node):
        ine = ln.find("inertial")
        if ine is None:
            return None
        mnode = ine.find("mass")
        m = _attr_float(rep, mnode, "value") if mnode is not None else 0.0
        if m == 0.0:
            return None
        inn = ine.find("inertia")
        if inn is None:
            raise rep.error(ine, "needs <inertia ixx ixy ixz iyy iyz izz>")
        v = {k: _attr_float(rep, inn, k, 0.0) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]],
                      [v["ixz"], v["iyz"], v["izz"]]])
        try:
            ms = mass_lib.from_inertia(m, I)
        except ValueError as e:
            raise rep.error(ine, str(e)) from None
        _skip(rep, ine, ("origin", "mass", "inertia"))
        return ms, _origin(rep, ine)

    def place(nm: str, T_link: np.ndarray, parent: Optional[str], jtype: Optional[str]):
        ln = links[nm]
        ine = inertial(ln)
        if ine is None and (jtype == "fixed" or (parent is None and fixed_base)):
            if parent is None:
                body, T_body = None, T_link
            else:
                body, T_body = placed[parent][0], placed[parent][1]
        else:
            if ine is None:
                rep.warn(ln, f"link {nm!r} has no <inertial> (or mass 0) but moves: ODE's "
                             "default mass 1 kg, unit inertia", key="no inertial")
                ine = (mass_lib.from_inertia(1.0, np.eye(3)), np.eye(4))
            T_body = T_link @ ine[1]
            body = b.add_body(pos=T_body[:3, 3], quat=mat_to_quat(T_body[:3, :3]), mass=ine[0])
        placed[nm] = (body, T_body, T_link)
        info["links"][nm] = body
        for cn in ln.findall("collision"):
            collision(cn, body, T_link, T_body)
        _skip(rep, ln, ("inertial", "collision"))

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
        if jtype not in ("revolute", "continuous", "prismatic", "fixed", "floating", "planar"):
            raise rep.error(jn, f"unknown joint type {jtype!r} (revolute, continuous, prismatic, "
                                "fixed, floating, planar)")
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
        if jtype == "planar":
            rep.warn(jn, "planar joints are not supported, skipped", key="planar joint")
            return
        if cbody is None or cbody == pbody:
            return  # merged into its parent, or static
        ax = jn.find("axis")
        axis = rep.attr_floats(ax, "xyz", 3, (1, 0, 0)) if ax is not None else np.array([1.0, 0, 0])
        waxis = T_child[:3, :3] @ axis
        params = {}
        lim = jn.find("limit")
        if lim is not None:
            eff = _attr_float(rep, lim, "effort", -1.0)
            vel = _attr_float(rep, lim, "velocity", -1.0)
            info["limits"][jname] = (eff, vel)
            if jtype in ("revolute", "prismatic"):
                params["lo_stop"] = _attr_float(rep, lim, "lower", 0.0)
                params["hi_stop"] = _attr_float(rep, lim, "upper", 0.0)
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
