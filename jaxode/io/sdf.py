"""SDFormat (1.4 - 1.7) worlds and models -> :class:`jaxode.WorldBuilder`.

Supported: ``<physics>`` (max_step_size -> ``builder.dt``; real_time_update_rate
and real_time_factor are wall-clock pacing and ignored with a warning),
``<gravity>``, ``<ode><solver>`` type/iters/sor/friction_model,
``<ode><constraints>`` cfm/erp/contact_max_correcting_vel/contact_surface_layer;
models (nested, ``<static>``, ``<pose>``, SDF 1.7 ``relative_to`` naming the
parent model or one of its links), links (``<pose>``, ``<inertial>`` mass, pose,
inertia; the body is placed at the centre of mass with the inertial frame's
orientation, as ODE requires), collisions (box, sphere, capsule, plane) with
``<surface>`` (friction ode mu/mu2/fdir1/slip1/slip2, bounce, contact ode
soft_cfm/soft_erp/kp/kd/max_vel/min_depth) and ``<max_contacts>``; joints
revolute, prismatic, ball, universal, revolute2, fixed with ``<axis>`` xyz
(joint frame; ``use_parent_model_frame`` / ``expressed_in="__model__"``: model
frame), ``<limit>`` lower/upper (effort/velocity, the actuator limits, are recorded in
``builder.joint_info[name]`` with the joint index), ``<dynamics><friction>`` (ODE motor with target
velocity 0 and fmax = friction, as Gazebo), ``<physics><ode>`` cfm, fudge_factor, bounce, max_force (fmax), velocity (vel), suspension
cfm/erp (revolute2), limit cfm/erp (stop_cfm/stop_erp); ``<include>`` of ``model://name`` through
``search_path`` plus ``$GAZEBO_MODEL_PATH`` and ``$SDF_PATH``.

Gazebo attaches joints as (child, parent): body 1 is the child link.
Everything else (visuals, lights, sensors, plugins, cylinder geometry, joint
damping, gearbox/screw joints, ...) is reported once per element name with its
line as a :class:`JaxodeFormatWarning`; malformed XML or bad values raise
:class:`SceneFileError` naming file, line and element.
"""
from __future__ import annotations

import math
import os
from typing import Optional, Sequence

import numpy as np

from jaxode import mass as mass_lib
from jaxode.builder import WorldBuilder
from jaxode.io._xml import Doc, JaxodeFormatWarning, Node, Pose, SceneFileError, quat_rot, rpy_quat
from jaxode.surface import Surface, erp_cfm_from_kp_kd

__all__ = ["load_sdf", "JaxodeFormatWarning", "SceneFileError"]

_IGNORED_NOTE = "not simulated by jaxode (ignored)"


def _pose(doc: Doc, parent: Node) -> tuple[Pose, Optional[str]]:
    n = parent.find("pose")
    if n is None:
        return Pose(), None
    v = doc.floats(n, 6)
    return Pose(v[:3], rpy_quat(*v[3:])), n.attrib.get("relative_to") or n.attrib.get("frame") or None


class _Loader:
    def __init__(self, search_path: Sequence[str]):
        self.search = list(search_path)
        for env in ("GAZEBO_MODEL_PATH", "SDF_PATH"):
            self.search += [p for p in os.environ.get(env, "").split(os.pathsep) if p]
        self.b: Optional[WorldBuilder] = None
        self.dt = 0.001
        self.docs: list = []

    # ------------------------------------------------------------- unsupported
    def _rest(self, doc: Doc, node: Node, handled: set) -> None:
        for c in node.children:
            if c.tag not in handled:
                doc.warn(c, f"element <{c.tag}> in <{node.tag}> is {_IGNORED_NOTE}")

    # ------------------------------------------------------------------ world
    def world(self, doc: Doc, w: Node) -> None:
        phys = w.find("physics")
        kw = {}
        g = doc.vec(w, "gravity", 3)
        if phys is not None:
            t = phys.attrib.get("type", "ode")
            if t != "ode":
                doc.warn(phys, f"physics type {t!r}: jaxode simulates ODE semantics")
            self.dt = doc.num(phys, "max_step_size", self.dt)
            if not self.dt > 0:
                raise doc.error(phys.find("max_step_size"), f"max_step_size must be > 0 s (got {self.dt})")
            for tag in ("real_time_update_rate", "real_time_factor"):
                if phys.find(tag) is not None:
                    doc.warn(phys.find(tag), f"<{tag}> paces wall-clock time; jaxode ignores it")
            if g is None:
                g = doc.vec(phys, "gravity", 3)
            ode = phys.find("ode")
            if ode is not None:
                s = ode.find("solver")
                if s is not None:
                    st = s.find("type")
                    if st is not None and st.text not in ("quick", "world"):
                        raise doc.error(st, f"solver type must be 'quick' or 'world' (got {st.text!r})")
                    if st is not None and st.text == "world":
                        doc.warn(st, "solver type 'world' (dWorldStep, direct): jaxode uses "
                                     "QuickStep iterations instead")
                    it = doc.num(s, "iters")
                    if it is not None:
                        kw["iterations"] = int(it)
                    sor = doc.num(s, "sor")
                    if sor is not None:
                        kw["sor"] = sor
                    fm = s.find("friction_model")
                    if fm is not None:
                        if fm.text not in ("pyramid_model", "box_model", "pyramid", "box"):
                            raise doc.error(fm, "friction_model must be pyramid_model or box_model "
                                                f"(cone_model is not available; got {fm.text!r})")
                        kw["friction_model"] = fm.text.replace("_model", "")
                    self._rest(doc, s, {"type", "iters", "sor", "friction_model"})
                c = ode.find("constraints")
                if c is not None:
                    for tag in ("cfm", "erp", "contact_max_correcting_vel", "contact_surface_layer"):
                        v = doc.num(c, tag)
                        if v is not None:
                            kw[tag] = v
                    self._rest(doc, c, {"cfm", "erp", "contact_max_correcting_vel", "contact_surface_layer"})
                self._rest(doc, ode, {"solver", "constraints"})
            self._rest(doc, phys, {"max_step_size", "real_time_update_rate", "real_time_factor",
                                   "ode", "gravity"})
        if g is None:
            g = np.array([0.0, 0.0, -9.8])  # SDF default
        try:
            self.b = WorldBuilder(gravity=g, **kw)
        except ValueError as e:
            raise doc.error(phys if phys is not None else w, str(e)) from None
        self.b.dt = self.dt
        for c in w.children:
            if c.tag == "model":
                self.model(doc, c, Pose(), {})
            elif c.tag == "include":
                self.include(doc, c, Pose())
            elif c.tag not in ("physics", "gravity"):
                doc.warn(c, f"element <{c.tag}> in <world> is {_IGNORED_NOTE}")

    # ---------------------------------------------------------------- include
    def include(self, doc: Doc, inc: Node, parent: Pose) -> None:
        u = inc.find("uri")
        if u is None:
            raise doc.error(inc, "<include> needs a <uri>")
        uri = u.text
        if uri.startswith("model://"):
            name = uri[len("model://"):].strip("/")
            cands = [os.path.join(d, name) for d in self.search]
        else:
            p = uri[len("file://"):] if uri.startswith("file://") else uri
            cands = [p if os.path.isabs(p) else os.path.join(doc.base, p)]
        for d in cands:
            f = d if os.path.isfile(d) else _model_file(d)
            if f is not None:
                break
        else:
            raise doc.error(u, f"cannot resolve {uri!r} (searched {self.search or 'no directories'}; "
                               "pass search_path= or set GAZEBO_MODEL_PATH / SDF_PATH)")
        sub = Doc(f, "SDF")
        sub.warned = doc.warned
        m = sub.root.find("model") if sub.root.tag == "sdf" else sub.root
        if m is None or m.tag != "model":
            for c in sub.root.children:
                sub.warn(c, f"element <{c.tag}> in included file is {_IGNORED_NOTE}")
            return
        pose, _ = _pose(doc, inc)
        over = {}
        if inc.find("pose") is not None:
            over["pose"] = pose
        if inc.find("static") is not None:
            over["static"] = inc.find("static").text.strip() in ("1", "true")
        self._rest(doc, inc, {"uri", "pose", "static", "name"})
        self.model(sub, m, parent, over)

    # ------------------------------------------------------------------ model
    def model(self, doc: Doc, m: Node, parent: Pose, over: dict) -> None:
        pose, rel = _pose(doc, m)
        if rel:
            doc.warn(m.find("pose"), f"model pose relative_to={rel!r}: only the parent frame is supported")
        X = parent * over.get("pose", pose)
        st = m.find("static")
        static = over.get("static", st is not None and st.text.strip() in ("1", "true"))
        links: dict = {}
        link_nodes = m.findall("link")
        # pass 1: link frames (relative_to another link of this model is resolved in order)
        frames: dict = {}
        for ln in link_nodes:
            lp, lrel = _pose(doc, ln)
            base = X
            if lrel and lrel not in ("__model__", m.attrib.get("name")):
                if lrel not in frames:
                    raise doc.error(ln.find("pose"), f"relative_to={lrel!r} names no earlier link of this model")
                base = frames[lrel]
            frames[ln.attrib.get("name", "")] = base * lp
        for ln in link_nodes:
            links[ln.attrib.get("name", "")] = self.link(doc, ln, frames[ln.attrib.get("name", "")], static)
        for c in m.children:
            if c.tag == "model":
                self.model(doc, c, X, {})
            elif c.tag == "include":
                self.include(doc, c, X)
        for jn in m.findall("joint"):
            self.joint(doc, jn, X, frames, links)
        self._rest(doc, m, {"pose", "static", "link", "joint", "model", "include"})

    # ------------------------------------------------------------------- link
    def link(self, doc: Doc, ln: Node, L: Pose, static: bool):
        inert = ln.find("inertial")
        mass, I, Pi = 1.0, np.eye(3), Pose()
        if inert is not None:
            mass = doc.num(inert, "mass", 1.0)
            if not mass > 0:
                raise doc.error(inert.find("mass"), f"mass must be > 0 kg (got {mass})")
            Pi, _ = _pose(doc, inert)
            t = inert.find("inertia")
            if t is not None:
                g = lambda k, d=0.0: doc.num(t, k, d)
                I = np.array([[g("ixx", 1.0), g("ixy"), g("ixz")], [g("ixy"), g("iyy", 1.0), g("iyz")],
                              [g("ixz"), g("iyz"), g("izz", 1.0)]])
                self._rest(doc, t, {"ixx", "ixy", "ixz", "iyy", "iyz", "izz"})
            self._rest(doc, inert, {"mass", "pose", "inertia"})
        B = L * Pi  # body frame = inertial frame
        body = None
        if not static:
            try:
                body = self.b.add_body(pos=B.p, quat=B.q, mass=mass_lib.from_inertia(mass, I),
                                       gravity=(ln.find("gravity") is None or
                                                ln.find("gravity").text.strip() in ("1", "true")))
            except ValueError as e:
                raise doc.error(inert if inert is not None else ln, str(e)) from None
        for c in ln.findall("collision"):
            cp, _ = _pose(doc, c)
            W = L * cp
            G = B.inv() * W if body is not None else W
            self.collision(doc, c, body, G)
        self._rest(doc, ln, {"pose", "inertial", "collision", "gravity"})
        return dict(body=body, frame=B)

    def collision(self, doc: Doc, c: Node, body, G: Pose) -> None:
        geo = c.find("geometry")
        if geo is None:
            raise doc.error(c, "<collision> needs a <geometry>")
        surf = self.surface(doc, c)
        kw = dict(body=body, pos=G.p, quat=G.q, surface=surf)
        for g in geo.children:
            try:
                if g.tag == "box":
                    self.b.add_box(doc.vec(g, "size", 3, np.ones(3)), **kw)
                elif g.tag == "sphere":
                    self.b.add_sphere(doc.num(g, "radius", 1.0), **kw)
                elif g.tag == "capsule":
                    self.b.add_capsule(doc.num(g, "radius", 0.5), doc.num(g, "length", 1.0), **kw)
                elif g.tag == "plane":
                    if body is not None:
                        raise doc.error(g, "a plane must belong to a static model (ODE planes are non-placeable)")
                    n = quat_rot(G.q, doc.vec(g, "normal", 3, np.array([0.0, 0.0, 1.0])))
                    n = n / np.linalg.norm(n)
                    self.b.add_plane(n, float(n @ G.p), surface=surf)
                    if g.find("size") is not None:
                        g.find("size").used = True
                else:
                    doc.warn(g, f"geometry <{g.tag}> is not supported by jaxode (collision "
                                f"{c.attrib.get('name')!r} dropped)")
            except ValueError as e:
                if isinstance(e, SceneFileError):
                    raise
                raise doc.error(g, str(e)) from None
        self._rest(doc, c, {"pose", "geometry", "surface", "max_contacts"})

    def surface(self, doc: Doc, c: Node) -> Surface:
        kw = {}
        mc = doc.num(c, "max_contacts")
        if mc is not None:
            kw["max_contacts"] = int(mc)
        s = c.find("surface")
        if s is None:
            return Surface(**kw)
        fr = s.find("friction")
        if fr is not None:
            ode = fr.find("ode")
            if ode is not None:
                for tag in ("mu", "mu2", "slip1", "slip2"):
                    v = doc.num(ode, tag)
                    if v is not None:
                        kw[tag] = v
                f1 = doc.vec(ode, "fdir1", 3)
                if f1 is not None and np.linalg.norm(f1) > 0:
                    kw["fdir1"] = tuple(f1)
                self._rest(doc, ode, {"mu", "mu2", "slip1", "slip2", "fdir1"})
            self._rest(doc, fr, {"ode"})
        bo = s.find("bounce")
        if bo is not None:
            v = doc.num(bo, "restitution_coefficient")
            if v is not None:
                kw["bounce"] = v
            v = doc.num(bo, "threshold")
            if v is not None:
                kw["bounce_vel"] = v
            self._rest(doc, bo, {"restitution_coefficient", "threshold"})
        co = s.find("contact")
        if co is not None:
            ode = co.find("ode")
            if ode is not None:
                for tag in ("soft_cfm", "soft_erp", "max_vel", "min_depth"):
                    v = doc.num(ode, tag)
                    if v is not None:
                        kw[tag] = v
                kp, kd = doc.num(ode, "kp"), doc.num(ode, "kd")
                if kp is not None or kd is not None:
                    erp, cfm = erp_cfm_from_kp_kd(kp if kp is not None else 1e12,
                                                  kd if kd is not None else 1.0, self.dt)
                    kw["soft_erp"], kw["soft_cfm"] = float(erp), float(cfm)
                self._rest(doc, ode, {"soft_cfm", "soft_erp", "kp", "kd", "max_vel", "min_depth"})
            self._rest(doc, co, {"ode"})
        self._rest(doc, s, {"friction", "bounce", "contact"})
        try:
            surf = Surface(**kw)
            surf.validate("surface")
        except (ValueError, TypeError) as e:
            raise doc.error(s, str(e)) from None
        return surf

    # ------------------------------------------------------------------ joint
    def joint(self, doc: Doc, jn: Node, X: Pose, frames: dict, links: dict) -> None:
        t = jn.attrib.get("type", "")
        name = jn.attrib.get("name", "")

        def link_of(tag):
            n = jn.find(tag)
            if n is None:
                raise doc.error(jn, f"joint {name!r} needs a <{tag}>")
            n.used = True
            if n.text == "world":
                return None, Pose()
            if n.text not in links:
                raise doc.error(n, f"joint {name!r}: no link {n.text!r} in this model")
            return links[n.text]["body"], frames[n.text]

        if t in ("gearbox", "screw"):
            doc.warn(jn, f"joint type {t!r} is out of scope for jaxode (joint {name!r} dropped)")
            return
        if t not in ("revolute", "prismatic", "ball", "universal", "revolute2", "fixed"):
            raise doc.error(jn, f"unknown joint type {t!r}")
        child, CF = link_of("child")
        parent, _ = link_of("parent")
        if child is None:
            child, parent = parent, None
        if child is None:
            doc.warn(jn, f"joint {name!r} between static links/world has no effect")
            return
        jp, _ = _pose(doc, jn)
        J = CF * jp

        def axis(tag):
            a = jn.find(tag)
            if a is None:
                return None, a
            xyz = a.find("xyz")
            v = doc.floats(xyz, 3) if xyz is not None else np.array([0.0, 0.0, 1.0])
            model_frame = (xyz is not None and xyz.attrib.get("expressed_in") == "__model__")
            upm = a.find("use_parent_model_frame")
            if upm is not None:
                upm.used = True
                model_frame = model_frame or upm.text.strip() in ("1", "true")
            return quat_rot(X.q if model_frame else J.q, v), a

        params: dict = {}

        def axis_params(a: Optional[Node], suf: str, stops: bool = True):
            if a is None:
                return
            lim = a.find("limit")
            if lim is not None:
                lo, hi = doc.num(lim, "lower"), doc.num(lim, "upper")
                if stops and lo is not None:
                    params["lo_stop" + suf] = lo
                if stops and hi is not None:
                    params["hi_stop" + suf] = hi
                for tag in ("effort", "velocity"):
                    if lim.find(tag) is not None:
                        lim.find(tag).used = True
                self._rest(doc, lim, {"lower", "upper", "effort", "velocity"})
            dyn = a.find("dynamics")
            if dyn is not None:
                f = doc.num(dyn, "friction")
                if f:
                    params["fmax" + suf], params["vel" + suf] = f, 0.0
                d = doc.num(dyn, "damping")
                if d:
                    doc.warn(dyn.find("damping"), "joint viscous damping is not simulated by jaxode")
                for tag in ("spring_reference", "spring_stiffness"):
                    if doc.num(dyn, tag):
                        doc.warn(dyn.find(tag), f"joint <{tag}> is not simulated by jaxode")
                self._rest(doc, dyn, {"friction", "damping", "spring_reference", "spring_stiffness"})
            self._rest(doc, a, {"xyz", "limit", "dynamics", "use_parent_model_frame"})

        a1, n1 = axis("axis")
        a2, n2 = axis("axis2")
        ode_sufs = {"revolute": ("",), "prismatic": ("",), "universal": ("", "2"),
                    "revolute2": ("", "2")}.get(t, ())
        dflt = np.array([0.0, 0.0, 1.0])
        susp = {}
        ph = jn.find("physics")
        if ph is not None:
            ode = ph.find("ode")
            if ode is not None:
                # Gazebo's ODEJoint: cfm -> dParamCFM, fudge_factor, bounce, max_force ->
                # dParamFMax, velocity -> dParamVel, <limit> cfm/erp -> dParamStopCFM/ERP
                # (every axis of the joint).
                for tag, key in (("cfm", "cfm"), ("fudge_factor", "fudge_factor"), ("bounce", "bounce"),
                                 ("max_force", "fmax"), ("velocity", "vel")):
                    v = doc.num(ode, tag)
                    if v is not None:
                        for suf in ode_sufs:
                            params[key + suf] = v
                lm = ode.find("limit")
                if lm is not None:
                    for tag, key in (("cfm", "stop_cfm"), ("erp", "stop_erp")):
                        v = doc.num(lm, tag)
                        if v is not None:
                            for suf in ode_sufs:
                                params[key + suf] = v
                    self._rest(doc, lm, {"cfm", "erp"})
                sp = ode.find("suspension")
                if sp is not None:
                    susp = dict(suspension_cfm=doc.num(sp, "cfm"), suspension_erp=doc.num(sp, "erp"))
                    self._rest(doc, sp, {"cfm", "erp"})
                self._rest(doc, ode, {"cfm", "suspension", "fudge_factor", "bounce", "max_force",
                                      "velocity", "limit"})
            self._rest(doc, ph, {"ode"})
        try:
            if t == "revolute":
                axis_params(n1, "")
                self.b.add_hinge(child, parent, anchor=J.p, axis=a1 if a1 is not None else quat_rot(J.q, dflt), **params)
            elif t == "prismatic":
                axis_params(n1, "")
                self.b.add_slider(child, parent, axis=a1 if a1 is not None else quat_rot(J.q, dflt), **params)
            elif t == "ball":
                self.b.add_ball(child, parent, anchor=J.p)
            elif t == "fixed":
                self.b.add_fixed(child, parent)
            elif t == "universal":
                axis_params(n1, "")
                axis_params(n2, "2")
                self.b.add_universal(child, parent, anchor=J.p, axis1=a1, axis2=a2, **params)
            elif t == "revolute2":
                axis_params(n1, "")
                axis_params(n2, "2", stops=False)
                self.b.add_hinge2(child, parent, anchor=J.p, axis1=a1, axis2=a2, **susp, **params)
        except (ValueError, TypeError) as e:
            raise doc.error(jn, f"joint {name!r}: {e}") from None
        lim = n1.find("limit") if n1 is not None else None
        if not hasattr(self.b, "joint_info"):
            self.b.joint_info = {}
        self.b.joint_info[name] = dict(index=len(self.b.joints) - 1, type=t,
                                       effort=doc.num(lim, "effort", math.inf),
                                       velocity=doc.num(lim, "velocity", math.inf))
        self._rest(doc, jn, {"parent", "child", "pose", "axis", "axis2", "physics"})


def _model_file(d: str) -> Optional[str]:
    if not os.path.isdir(d):
        return None
    cfg = os.path.join(d, "model.config")
    if os.path.isfile(cfg):
        cdoc = Doc(cfg, "model.config")
        sdfs = [n for n in cdoc.root.findall("sdf")]
        if sdfs:
            f = os.path.join(d, sdfs[-1].text)
            if os.path.isfile(f):
                return f
    f = os.path.join(d, "model.sdf")
    return f if os.path.isfile(f) else None


def load_sdf(path_or_string, search_path: Sequence[str] = ()) -> WorldBuilder:
    """Load an SDFormat world or model (a path or the XML text) into a new
    :class:`WorldBuilder`. The world's ``max_step_size`` is returned as the
    attribute ``builder.dt`` [s] (default 0.001): pass it to ``step``/``rollout``.
    ``search_path``: directories holding ``model://`` models (then
    ``$GAZEBO_MODEL_PATH``, ``$SDF_PATH``). See the module docstring for what
    is supported; the rest warns (:class:`JaxodeFormatWarning`)."""
    if isinstance(search_path, (str, os.PathLike)):
        search_path = [search_path]
    ld = _Loader([os.fspath(p) for p in search_path])
    doc = Doc(path_or_string, "SDF")
    root = doc.root
    if root.tag != "sdf":
        raise doc.error(root, f"root element must be <sdf> (got <{root.tag}>)")
    ver = root.attrib.get("version", "")
    if ver not in ("1.4", "1.5", "1.6", "1.7"):
        doc.warn(root, f"SDF version {ver!r}: jaxode reads 1.4 - 1.7")
    worlds = root.findall("world")
    if len(worlds) > 1:
        raise doc.error(worlds[1], "only one <world> per file is supported")
    if worlds:
        ld.world(doc, worlds[0])
    else:
        ld.b = WorldBuilder(gravity=(0.0, 0.0, -9.8))
        ld.b.dt = ld.dt
    for c in root.children:
        if c.tag == "model":
            ld.model(doc, c, Pose(), {})
        elif c.tag != "world":
            doc.warn(c, f"element <{c.tag}> in <sdf> is {_IGNORED_NOTE}")
    return ld.b
