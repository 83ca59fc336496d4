"""URDF robots -> :class:`jaxode.WorldBuilder`.

Links: ``<inertial>`` (origin xyz/rpy, mass, inertia; the body sits at the
centre of mass with the inertial frame's orientation, as ODE requires),
``<collision>`` geometry box, sphere and ``<capsule radius length>`` (the
common extension; cylinder and mesh warn: not supported by the builder yet).
A link with no ``<inertial>`` attached by a fixed joint is lumped into its
parent body (as Gazebo does); the root link is the floating base at
``base_pos`` unless ``fixed_base`` (then it is welded to the world, or static
when it has no inertial).

Joints: revolute (stops from ``<limit lower upper>``), continuous, prismatic,
fixed, floating (no constraint); ``<axis xyz>`` in the joint frame.
``<dynamics friction>`` becomes ODE's joint friction: a motor with target
velocity 0 and fmax = friction (Gazebo/ODE semantics); ``<limit effort velocity>``
are the actuator limits, recorded in ``builder.joint_info[name]`` (dict with
index, type, effort [N m or N], velocity [rad/s or m/s]) for controllers: pass
``fmax=effort`` when driving a joint's motor. ``<dynamics damping>`` warns (no
joint damping yet). RaiSim's material hook ``<collision><material><contact
name="steel"/></material>`` is recorded in ``builder.geom_materials[geom index]``
(jaxode has no material table yet: the name is kept for the user to map onto
:class:`jaxode.Surface`). Unsupported elements warn once (file:line);
malformed files raise :class:`SceneFileError` with file, line and element.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from jaxode import mass as mass_lib
from jaxode.builder import WorldBuilder
from jaxode.io._xml import Doc, Node, Pose, SceneFileError, quat_rot, rpy_quat

__all__ = ["load_urdf"]


def _origin(doc: Doc, parent: Node) -> Pose:
    o = parent.find("origin")
    if o is None:
        return Pose()
    o.used = True
    vals = []
    for key in ("xyz", "rpy"):
        s = o.attrib.get(key, "0 0 0")
        try:
            v = [float(x) for x in s.split()]
        except ValueError:
            raise doc.error(o, f"{key} must be 3 numbers (got {s!r})") from None
        if len(v) != 3 or not all(math.isfinite(x) for x in v):
            raise doc.error(o, f"{key} must be 3 finite numbers (got {s!r})")
        vals.append(v)
    return Pose(vals[0], rpy_quat(*vals[1]))


def _attr(doc: Doc, n: Node, key: str, default=None):
    if key not in n.attrib:
        if default is None:
            raise doc.error(n, f"missing attribute {key!r}")
        return default
    try:
        v = float(n.attrib[key])
    except ValueError:
        raise doc.error(n, f"{key} must be a number (got {n.attrib[key]!r})") from None
    if math.isnan(v):
        raise doc.error(n, f"{key} must be a number (got {n.attrib[key]!r})")
    return v


def _rest(doc: Doc, node: Node, handled: set) -> None:
    for c in node.children:
        if c.tag not in handled:
            doc.warn(c, f"element <{c.tag}> in <{node.tag}> is not simulated by jaxode (ignored)")


def load_urdf(path_or_string, base_pos: Sequence[float] = (0.0, 0.0, 0.0), fixed_base: bool = False,
              builder: Optional[WorldBuilder] = None) -> WorldBuilder:
    """Add the robot of a URDF file (path or XML text) to ``builder`` (default: a
    new ``WorldBuilder(gravity=(0, 0, -9.81))``) with its root link at world
    position ``base_pos`` [m]; returns the builder. See the module docstring."""
    doc = Doc(path_or_string, "URDF")
    r = doc.root
    if r.tag != "robot":
        raise doc.error(r, f"root element must be <robot> (got <{r.tag}>)")
    b = builder if builder is not None else WorldBuilder(gravity=(0.0, 0.0, -9.81))
    if not hasattr(b, "geom_materials"):
        b.geom_materials = {}
    if not hasattr(b, "joint_info"):
        b.joint_info = {}
    links = {n.attrib.get("name"): n for n in r.findall("link")}
    joints = r.findall("joint")
    children = {}
    child_names = set()
    for j in joints:
        p, c = j.find("parent"), j.find("child")
        if p is None or c is None:
            raise doc.error(j, "a joint needs <parent link=...> and <child link=...>")
        pl, cl = p.attrib.get("link"), c.attrib.get("link")
        for n, name in ((p, pl), (c, cl)):
            if name not in links:
                raise doc.error(n, f"no link named {name!r}")
        if cl in child_names:
            raise doc.error(c, f"link {cl!r} is the child of two joints")
        child_names.add(cl)
        children.setdefault(pl, []).append(j)
    roots = [n for n in links if n not in child_names]
    if len(roots) != 1:
        raise doc.error(r, f"a URDF robot needs exactly one root link (got {roots})")
    _rest(doc, r, {"link", "joint", "material", "gazebo", "transmission"})
    for tag in ("gazebo", "transmission"):
        if r.find(tag) is not None:
            doc.warn(r.find(tag), f"<{tag}> is not read by jaxode (ignored)")

    # body of each link: (body index or None, body frame B, link frame L)
    info: dict = {}

    def add_link(name: str, L: Pose, lump_into=None):
        ln = links[name]
        inert = ln.find("inertial")
        if inert is not None and lump_into is None:
            Pi = _origin(doc, inert)
            mn = inert.find("mass")
            m = _attr(doc, mn, "value") if mn is not None else None
            if m is None or not m > 0:
                raise doc.error(mn if mn is not None else inert, f"link {name!r}: mass must be > 0 kg")
            t = inert.find("inertia")
            if t is None:
                raise doc.error(inert, f"link {name!r}: <inertial> needs <inertia>")
            g = lambda k: _attr(doc, t, k, 0.0)
            I = np.array([[g("ixx"), g("ixy"), g("ixz")], [g("ixy"), g("iyy"), g("iyz")],
                          [g("ixz"), g("iyz"), g("izz")]])
            _rest(doc, inert, {"origin", "mass", "inertia"})
            B = L * Pi
            try:
                body = b.add_body(pos=B.p, quat=B.q, mass=mass_lib.from_inertia(m, I))
            except ValueError as e:
                raise doc.error(inert, f"link {name!r}: {e}") from None
        elif lump_into is not None:
            body, B = lump_into
            if inert is not None:
                raise doc.error(inert, f"link {name!r}: internal: lumping a link with mass")
        else:
            body, B = None, Pose()  # static (massless root of a fixed base)
        info[name] = (body, B, L)
        for c in ln.findall("collision"):
            W = L * _origin(doc, c)
            G = B.inv() * W if body is not None else W
            geo = c.find("geometry")
            if geo is None:
                raise doc.error(c, "<collision> needs <geometry>")
            for gnode in geo.children:
                kw = dict(body=body, pos=G.p, quat=G.q)
                try:
                    if gnode.tag == "box":
                        s = gnode.attrib.get("size", "")
                        try:
                            size = [float(x) for x in s.split()]
                        except ValueError:
                            raise doc.error(gnode, f"size must be 3 numbers (got {s!r})") from None
                        gi = b.add_box(size, **kw)
                    elif gnode.tag == "sphere":
                        gi = b.add_sphere(_attr(doc, gnode, "radius"), **kw)
                    elif gnode.tag == "capsule":
                        gi = b.add_capsule(_attr(doc, gnode, "radius"), _attr(doc, gnode, "length"), **kw)
                    else:
                        doc.warn(gnode, f"geometry <{gnode.tag}> is not supported by jaxode "
                                        f"(a collision of link {name!r} dropped)")
                        continue
                except ValueError as e:
                    if isinstance(e, SceneFileError):
                        raise
                    raise doc.error(gnode, str(e)) from None
                mat = c.find("material")
                if mat is not None:
                    ct = mat.find("contact")
                    if ct is not None and "name" in ct.attrib:
                        b.geom_materials[gi] = ct.attrib["name"]
                    else:
                        doc.warn(mat, "collision <material> without <contact name=...> ignored")
            _rest(doc, c, {"origin", "geometry", "material"})
        _rest(doc, ln, {"inertial", "collision", "visual"})
        if ln.find("visual") is not None:
            doc.warn(ln.find("visual"), "<visual> is not simulated by jaxode (ignored)")
        for j in children.get(name, []):
            add_joint(j, name)

    def add_joint(j: Node, parent: str):
        jname, t = j.attrib.get("name", ""), j.attrib.get("type", "")
        pbody, pB, pL = info[parent]
        cname = j.find("child").attrib["link"]
        J = pL * _origin(doc, j)
        cn = links[cname]
        if t == "fixed" and cn.find("inertial") is None:
            add_link(cname, J, lump_into=(pbody, pB))
            _rest(doc, j, {"parent", "child", "origin"})
            return
        if cn.find("inertial") is None:
            raise doc.error(cn, f"link {cname!r} has no <inertial> but a {t!r} joint moves it")
        if t not in ("revolute", "continuous", "prismatic", "fixed", "floating"):
            if t == "planar":
                doc.warn(j, "joint type 'planar' is not supported (joint dropped: the child floats)")
            else:
                raise doc.error(j, f"unknown joint type {t!r}")
        add_link(cname, J)
        cbody = info[cname][0]
        ax = j.find("axis")
        a = np.array([1.0, 0.0, 0.0])
        if ax is not None:
            try:
                a = np.array([float(x) for x in ax.attrib.get("xyz", "1 0 0").split()])
            except ValueError:
                raise doc.error(ax, f"xyz must be 3 numbers (got {ax.attrib.get('xyz')!r})") from None
        a_w = quat_rot(J.q, a)
        params = {}
        lim = j.find("limit")
        effort = velocity = math.inf
        if lim is not None:
            effort, velocity = _attr(doc, lim, "effort", math.inf), _attr(doc, lim, "velocity", math.inf)
            if t in ("revolute", "prismatic"):
                params["lo_stop"], params["hi_stop"] = _attr(doc, lim, "lower", 0.0), _attr(doc, lim, "upper", 0.0)
        dyn = j.find("dynamics")
        if dyn is not None:
            f = _attr(doc, dyn, "friction", 0.0)
            if f > 0 and t in ("revolute", "continuous", "prismatic"):
                params["fmax"], params["vel"] = f, 0.0
            if _attr(doc, dyn, "damping", 0.0) != 0.0:
                doc.warn(dyn, "joint damping is not simulated by jaxode (ignored)")
        try:
            if t in ("revolute", "continuous"):
                idx = b.add_hinge(cbody, pbody, anchor=J.p, axis=a_w, **params)
            elif t == "prismatic":
                idx = b.add_slider(cbody, pbody, axis=a_w, **params)
            elif t == "fixed":
                idx = b.add_fixed(cbody, pbody)
            else:
                idx = None
        except ValueError as e:
            raise doc.error(j, f"joint {jname!r}: {e}") from None
        b.joint_info[jname] = dict(index=idx, type=t, effort=effort, velocity=velocity)
        _rest(doc, j, {"parent", "child", "origin", "axis", "limit", "dynamics"})

    root = roots[0]
    L0 = Pose(np.asarray(base_pos, np.float64))
    rl = links[root]
    if rl.find("inertial") is None and not fixed_base:
        raise doc.error(rl, f"root link {root!r} has no <inertial> (use fixed_base=True)")
    add_link(root, L0)
    if fixed_base and info[root][0] is not None:
        b.add_fixed(info[root][0], None)
    return b
