"""Load Gazebo SDFormat 1.4-1.7 worlds and models into a :class:`WorldBuilder`.

``load_sdf(path_or_string, search_path=None)`` reads ``<world>`` (or a bare
``<model>``) and returns a builder with the world's parameters. What is read:

* ``<physics type="ode">``: ``max_step_size`` -> ``builder.dt`` [s];
  ``<gravity>`` (world level in 1.5+, physics level in 1.4); ``<ode><solver>``
  ``iters``, ``sor``, ``friction_model`` (pyramid_model / box_model /
  cone_model); ``<ode><constraints>`` ``cfm``, ``erp``,
  ``contact_max_correcting_vel``, ``contact_surface_layer``. SDF's defaults
  apply to what is absent (gravity (0, 0, -9.8), erp 0.2, cfm 0, iters 50,
  sor 1.3, correcting vel 100 m/s, surface layer 1 mm, step 1 ms).
  ``<solver><type>``: ``quick`` (dWorldQuickStep) -> ``solver="pgs"``,
  ``world`` (dWorldStep, Dantzig's LCP) -> ``solver="direct"``.
  ``real_time_update_rate`` / ``real_time_factor`` are noted with a warning.
* ``<model>`` (``<pose>``, ``<static>``, nested models, ``<include>`` of
  ``model://NAME`` found in ``search_path`` then ``$GAZEBO_MODEL_PATH`` and
  ``$SDF_PATH``: ``NAME/model.config``'s ``<sdf>`` file, else ``NAME/model.sdf``;
  Gazebo's ``model://sun`` (a light: nothing) and ``model://ground_plane`` (a
  static plane, surface mu 100, mu2 50) work without a model path). A world
  or model with no moving link is legal (a building, a table): it builds
  and steps with zero bodies.
* ``<link>``: ``<pose>``, ``<inertial>`` (mass, pose, ixx..izz; SDF default
  1 kg, unit inertia), ``<gravity>``. The body is placed at the inertial frame
  (ODE needs the centre of mass at the body origin); collision geoms are
  offset accordingly. Links of static models are static geoms.
* ``<collision>``: ``<pose>``, ``<geometry>`` box / sphere / cylinder /
  capsule / plane / mesh / heightmap (polyline: warned, skipped), ``<max_contacts>`` (0: the
  collision makes no contacts, as in Gazebo), ``<surface><contact><collide_bitmask>``
  (Gazebo's rule: the mask is the geom's category and collide bits, two
  collisions touch iff their masks share a bit; a collision without one
  collides with every mask, where Gazebo's default 0xffff misses masks with
  only bits above 15)
  and ``<surface>``: friction ``<ode>`` mu, mu2, fdir1, slip1, slip2;
  ``<torsional>`` coefficient, patch_radius, surface_radius, use_patch_radius; ``<bounce>``
  restitution_coefficient, threshold; ``<contact><ode>`` soft_cfm, soft_erp,
  kp, kd, max_vel, min_depth. SDF's surface defaults (mu = mu2 = 1,
  max_vel 0.01 m/s, min_depth 0) apply when the element is absent; soft_erp,
  soft_cfm, kp, kd, slip only when given (unset: the world's erp/cfm). kp or
  kd given: Gazebo's rule (gazebo/physics/ode/ODEPhysics.cc, ``Collide``):
  the contact ERP/CFM come from kp and kd (the one not given takes SDF's
  default, kp 1e12 N/m, kd 1 N s/m); soft_erp/soft_cfm given beside them
  are unused (warned).
* ``<mesh>``: ``<uri>`` (``model://NAME/...`` in the search path,
  ``file://``/absolute, or relative to the SDF file's folder) and ``<scale>``,
  read by :mod:`jaxode.io.mesh_files` (STL, OBJ, COLLADA; extra
  ``jaxode[meshes]``): a triangle mesh on a static link (Gazebo's ODE
  trimesh), the convex hull on a moving one (see that module).
* ``<heightmap>``: a grayscale image (Pillow) over ``<size>`` x y, heights
  value / max * size z, centred at ``<pos>`` (see ``_Loader.heightmap``).
* ``<joint>`` revolute (hinge), prismatic (slider), ball, universal,
  revolute2 (hinge-2, body 1 = parent, body 2 = child), fixed; gearbox and
  screw are out of scope (warned, skipped). ``parent``/``child`` ``world`` (or
  a static link) = the static world. ``<pose>``: joint frame in the child link
  frame. ``<axis><xyz>`` in the joint frame (the model frame in SDF 1.4, with
  ``use_parent_model_frame``, or ``expressed_in="__model__"``).
  ``<limit>`` lower/upper -> stops (|x| >= 1e16: none); effort and velocity
  are recorded in ``builder.sdf_info["joint_limits"]`` only: Gazebo's ODE
  plugin uses them to clamp commanded forces, not as a motor.
  ``<dynamics><friction>`` -> motor with vel 0 and fmax = friction (as
  Gazebo's ODE plugin); ``<dynamics><damping>`` -> ``damping`` (revolute
  and prismatic, other joint types are warned; -|damping| * rate, implicit by
  default, stable for any damping; Gazebo's explicit form, the start-of-step
  rate, with ``builder.joint_damping = "explicit"`` before ``build()``);
  ``<spring_stiffness>`` / ``<spring_reference>`` -> ``stiffness`` /
  ``springref`` (Gazebo's ApplyExplicitStiffnessDamping spring); with the joint's ``<physics><ode><implicit_spring_damper>``
  (or SDF 1.4's ``<cfm_damping>``) true, Gazebo's implicit spring-damper
  instead: the axis's limit row pinned at ``<spring_reference>`` with stop
  erp/cfm from ``<spring_stiffness>`` and ``<damping>`` (``_Loader.implicit_spring``;
  an axis with limits keeps the explicit damping, warned). ``<physics><ode>``: cfm, fudge_factor, bounce,
  ``<limit>`` cfm/erp (stop_cfm/stop_erp), ``<suspension>`` cfm/erp.
* Poses: ``x y z roll pitch yaw`` with ``R = Rz(yaw) Ry(pitch) Rx(roll)``,
  composed through nested models; SDF 1.7 ``relative_to`` may name a link,
  a nested model, a ``<frame>`` or ``__model__`` of the same model.

Other elements are reported by :class:`JaxodeFormatWarning`, once per element
name, with the line; ``light``, ``scene``, ``gui``, ``plugin``, ``sensor``,
``audio``, ``spherical_coordinates`` and the like have no part in the step:
skipped with one warning per element name; ``visual`` silently. SDF 1.5-1.7
name scoping: a joint may share a link's name (a ``relative_to`` then names
the link). Whitespace before ``<?xml`` is accepted. Bad XML or values raise ``ValueError`` naming the file
(``"<string>"`` for text), the line and the element.

The builder gets ``builder.dt`` (the step) and ``builder.sdf_info``: a dict
with ``bodies`` (scoped link name -> body index), ``geoms`` (scoped collision
name -> geom index), ``joints`` (scoped joint name -> joint index),
``joint_limits`` (name -> (effort, velocity)), ``collide_groups`` (model ->
category bit: as in Gazebo, the links of one model collide with each other
only with ``<self_collide>``; up to 32 such models) and ``unsupported`` (tag, line,
why) for everything skipped.
"""
from __future__ import annotations

import math
import os
from typing import Optional, Sequence

import numpy as np

from jaxode.build import mass as mass_lib
from jaxode.build.builder import WorldBuilder
from jaxode.build.surface import Surface
from jaxode.io import mesh_files
from jaxode.io.xml_util import Node, Reporter, inv, mat_to_quat, parse, transform

#: Elements without physics: skipped without a word.
SILENT = {"visual"}
#: Elements without physics that a reader may expect to act: skipped with one
#: JaxodeFormatWarning per element name (Gazebo renders or simulates them
#: outside the ODE step).
NO_PHYSICS = {"light", "scene", "gui", "audio", "sensor", "spherical_coordinates", "projector",
              "battery", "enable_wind", "plugin", "state", "population", "road", "actor", "wind",
              "atmosphere", "magnetic_field"}
#: Gazebo's own models that jaxode knows without a model path, written from
#: their published model.sdf files: ``sun`` is a directional light only;
#: ``ground_plane`` a static plane with the surface mu 100, mu2 50.
BUILTIN_MODELS = {
    "sun": """<sdf version="1.6"><model name="sun"><static>true</static>
      <light type="directional" name="sun"/></model></sdf>""",
    "ground_plane": """<sdf version="1.6"><model name="ground_plane"><static>true</static>
      <link name="link"><collision name="collision">
        <geometry><plane><normal>0 0 1</normal><size>100 100</size></plane></geometry>
        <surface><friction><ode><mu>100</mu><mu2>50</mu2></ode></friction></surface>
      </collision></link></model></sdf>""",
}
#: SDF's defaults for <contact><ode><kp>/<kd> (Gazebo applies them when only one is given).
KP_DEFAULT, KD_DEFAULT = 1e12, 1.0
FRICTION = {"pyramid_model": "pyramid", "box_model": "box", "cone_model": "cone"}
BIG = 1e16  # SDF's "no limit" for joint stops


def _search_dirs(search_path) -> list[str]:
    dirs: list[str] = []
    if search_path is not None:
        dirs += [search_path] if isinstance(search_path, (str, os.PathLike)) else list(search_path)
    for var in ("GAZEBO_MODEL_PATH", "SDF_PATH"):
        dirs += [d for d in os.environ.get(var, "").split(os.pathsep) if d]
    return [os.fspath(d) for d in dirs]


class _Loader:
    def __init__(self, rep: Reporter, search_path):
        self.rep = rep
        self.search = _search_dirs(search_path)
        self.base_dir = os.getcwd()  # the file's folder: relative mesh uris
        self.b: Optional[WorldBuilder] = None
        self.version = (1, 6)
        self.links: dict[str, dict] = {}
        self.masked: set = set()          # geoms with their own collide_bitmask
        self.info = dict(bodies={}, geoms={}, joints={}, joint_limits={}, collide_groups={},
                         unsupported=[])

    # ---------------------------------------------------------------- helpers
    def skip(self, node: Node, known: Sequence[str] = ()) -> None:
        """Warn about children of ``node`` not in ``known``."""
        for c in node.children:
            if c.tag in known or c.tag in SILENT:
                continue
            if c.tag in NO_PHYSICS:
                self.rep.warn(c, f"<{c.tag}> has no part in the physics step, skipped", key=c.tag)
                continue
            self.rep.warn(c, f"element <{c.tag}> in <{node.tag}> is not supported, ignored",
                          key=c.tag)

    def pose(self, node: Node, frames=None, default_T=None) -> np.ndarray:
        """World transform of ``node``'s ``<pose>`` relative to ``default_T``
        (or the frame its ``relative_to`` / 1.4 ``frame`` attribute names)."""
        p = node.find("pose")
        base = default_T
        if p is None:
            return base.copy()
        rel = p.attrib.get("relative_to", p.attrib.get("frame", ""))
        if rel:
            if frames is None:
                raise self.rep.error(p, f"relative_to={rel!r}: no frames to refer to here")
            base = frames(rel, p)
        v = self.rep.floats(p, None)
        if v.size != 6:
            raise self.rep.error(p, f"expected 6 numbers 'x y z roll pitch yaw' (got {p.text!r})")
        return base @ transform(v[:3], v[3:])

    # ----------------------------------------------------------------- world
    def world(self, node: Node, is_world: bool) -> WorldBuilder:
        rep = self.rep
        g = np.array([0.0, 0.0, -9.8])
        kw = dict(erp=0.2, cfm=0.0, iterations=50, sor=1.3, contact_max_correcting_vel=100.0,
                  contact_surface_layer=0.001, friction_model="pyramid")
        dt = 0.001
        phys = node.find("physics") if is_world else None
        if is_world and node.find("gravity") is not None:
            g = rep.floats(node.find("gravity"), 3)
        if phys is not None:
            ptype = phys.attrib.get("type", "ode")
            if ptype != "ode":
                rep.warn(phys, f"physics type {ptype!r}: jaxode steps as ODE", key="physics type")
            if phys.find("gravity") is not None:  # SDF 1.4
                g = rep.floats(phys.find("gravity"), 3)
            dt = rep.child_float(phys, "max_step_size", dt)
            if not (dt > 0 and math.isfinite(dt)):
                raise rep.error(phys.find("max_step_size"), f"must be > 0 s (got {dt})")
            for tag in ("real_time_update_rate", "real_time_factor"):
                if phys.find(tag) is not None:
                    rep.warn(phys.find(tag), "wall-clock pacing has no meaning in jaxode, ignored")
            ode = phys.find("ode")
            if ode is not None:
                sol = ode.find("solver")
                if sol is not None:
                    st = sol.find("type")
                    if st is not None:
                        # Gazebo's ODE plugin: "quick" = dWorldQuickStep, "world" = dWorldStep
                        # (jaxode's exact solver="direct"; iters and sor do not apply there).
                        kind = st.text.strip()
                        if kind not in ("quick", "world"):
                            raise rep.error(st, f"must be 'quick' or 'world' (got {kind!r})")
                        kw["solver"] = "pgs" if kind == "quick" else "direct"
                    if sol.find("iters") is not None:
                        it = rep.float(sol.find("iters"))
                        if it != int(it) or it < 1:
                            raise rep.error(sol.find("iters"), f"must be an integer >= 1 (got {it})")
                        kw["iterations"] = int(it)
                    kw["sor"] = rep.child_float(sol, "sor", kw["sor"])
                    fm = sol.find("friction_model")
                    if fm is not None:
                        if fm.text.strip() not in FRICTION:
                            raise rep.error(fm, f"must be one of {sorted(FRICTION)} (got {fm.text!r})")
                        kw["friction_model"] = FRICTION[fm.text.strip()]
                    self.skip(sol, ("type", "iters", "sor", "friction_model"))
                con = ode.find("constraints")
                if con is not None:
                    for tag in ("cfm", "erp", "contact_max_correcting_vel", "contact_surface_layer"):
                        kw[tag] = rep.child_float(con, tag, kw[tag])
                    self.skip(con, ("cfm", "erp", "contact_max_correcting_vel",
                                    "contact_surface_layer"))
                self.skip(ode, ("solver", "constraints"))
            self.skip(phys, ("max_step_size", "real_time_update_rate", "real_time_factor", "ode",
                             "gravity", "max_contacts"))
        try:
            self.b = WorldBuilder(gravity=g, **kw)
        except ValueError as e:
            raise rep.error(phys if phys is not None else node, str(e)) from None
        self.b.dt = dt
        self.max_contacts = 20
        if phys is not None and phys.find("max_contacts") is not None:
            self.max_contacts = int(rep.float(phys.find("max_contacts")))
        return self.b

    # ----------------------------------------------------------------- models
    def include(self, node: Node, parent_T: np.ndarray, prefix: str, parent_static: bool):
        rep = self.rep
        uri = node.find("uri")
        if uri is None:
            raise rep.error(node, "needs a <uri>")
        u = uri.text.strip()
        if u.startswith("model://"):
            name = u[len("model://"):].lstrip("/").split("/")[0]
            cands = [os.path.join(d, name) for d in self.search]
        elif u.startswith("file://") or os.path.isabs(u):
            cands = [u[len("file://"):] if u.startswith("file://") else u]
        else:
            cands = [os.path.join(d, u) for d in self.search]
        path = None
        for c in cands:
            if os.path.isfile(c):
                path = c
                break
            cfg = os.path.join(c, "model.config")
            if os.path.isfile(cfg):
                croot, _ = parse(cfg)
                sdfs = croot.findall("sdf")
                if sdfs:
                    path = os.path.join(c, sdfs[-1].text.strip())
                    break
            if os.path.isfile(os.path.join(c, "model.sdf")):
                path = os.path.join(c, "model.sdf")
                break
        if path is None and u.startswith("model://") and u[len("model://"):].strip("/") in BUILTIN_MODELS:
            sub_root, sub_name = parse(BUILTIN_MODELS[u[len("model://"):].strip("/")])
            sub_name = f"<builtin {u}>"
        elif path is None:
            raise rep.error(uri, f"cannot find {u!r} (searched {self.search or 'nothing'}; "
                                 "pass search_path= or set GAZEBO_MODEL_PATH / SDF_PATH)")
        else:
            sub_root, sub_name = parse(path)
        sub = _Loader(Reporter(sub_name), None)
        # one warning per element name for the whole load, included files too
        sub.rep.warned, sub.rep.unsupported = self.rep.warned, self.rep.unsupported
        sub.search, sub.b, sub.links, sub.info = self.search, self.b, self.links, self.info
        sub.base_dir = os.path.dirname(os.path.abspath(path)) if path else self.base_dir
        sub.max_contacts = self.max_contacts
        sub.version = _version(sub_root, sub.rep)
        models = sub_root.findall("model")
        if not models and sub_root.findall("light"):
            # gazebo_models' sun: the included file is a bare <light>, no physics
            self.rep.warn(node, f"<include> {u!r} is a <light>: no part in the physics step, "
                                "skipped", key="light")
            self.skip(node, ("uri", "name", "pose", "static"))
            return
        if len(models) != 1:
            raise sub.rep.error(sub_root, f"an included file needs one <model> (got {len(models)})")
        m = models[0]
        name = node.find("name").text.strip() if node.find("name") is not None else m.attrib.get("name", "")
        pose_node = node if node.find("pose") is not None else None
        static = parent_static or rep.child_bool(node, "static", False)
        sub.model(m, parent_T, prefix, static, name_override=name, pose_from=pose_node,
                  pose_rep=rep)
        self.skip(node, ("uri", "name", "pose", "static"))

    def model(self, node: Node, parent_T: np.ndarray, prefix: str, parent_static: bool,
              name_override: Optional[str] = None, pose_from: Optional[Node] = None,
              pose_rep: Optional[Reporter] = None, parent_frames=None) -> None:
        rep = self.rep
        name = name_override or node.attrib.get("name")
        if not name:
            raise rep.error(node, "needs a name attribute")
        scope = prefix + name + "::"
        static = parent_static or rep.child_bool(node, "static", False)
        if pose_from is not None:
            saved, self.rep = self.rep, pose_rep
            T_model = self.pose(pose_from, parent_frames, parent_T)
            self.rep = saved
        else:
            T_model = self.pose(node, parent_frames, parent_T)
        # Frames of this model by name, resolved lazily (SDF 1.7 relative_to).
        named = {}
        # SDF 1.5-1.7 let a joint share a link's name (1.8 forbids it); a
        # relative_to names the link then (later tags override earlier ones)
        for tag in ("joint", "frame", "model", "link"):
            for c in node.findall(tag):
                if "name" in c.attrib:
                    named[c.attrib["name"]] = c
        cache: dict[str, np.ndarray] = {"__model__": T_model}
        busy: set[str] = set()

        def frame(nm: str, at: Node) -> np.ndarray:
            if nm in cache:
                return cache[nm]
            if nm == "world":
                return np.eye(4)
            if nm not in named:
                raise rep.error(at, f"relative_to={nm!r}: no link, model or frame of that name "
                                    f"in model {name!r}")
            if nm in busy:
                raise rep.error(at, f"relative_to={nm!r}: the poses refer to each other in a cycle")
            busy.add(nm)
            c = named[nm]
            if c.tag == "joint":
                # the child link's frame is the default only: a pose relative_to another
                # frame (often the parent link, whose child link is placed relative_to
                # this joint) must not resolve the child first (a false cycle)
                pe = c.find("pose")
                explicit = pe is not None and (pe.attrib.get("relative_to")
                                               or pe.attrib.get("frame"))
                child = c.find("child")
                base = T_model if explicit or child is None else frame(child.text.strip(), c)
                T = self.pose(c, frame, base)
            elif c.tag == "frame" and c.attrib.get("attached_to"):
                T = self.pose(c, frame, frame(c.attrib["attached_to"], c))
            else:
                T = self.pose(c, frame, T_model)
            busy.discard(nm)
            cache[nm] = T
            return T

        for c in node.children:
            if c.tag == "link":
                self.link(c, frame(c.attrib["name"], c) if "name" in c.attrib else None,
                          scope, static, frame)
            elif c.tag == "model":
                self.model(c, T_model, scope, static, parent_frames=frame)
            elif c.tag == "include":
                self.include(c, T_model, scope, static)
        for c in node.findall("joint"):
            self.joint(c, scope, frame, T_model)
        self.self_collide(node, scope, static)
        self.skip(node, ("link", "model", "include", "joint", "pose", "static", "frame",
                         "self_collide", "allow_auto_disable", "enable_wind"))

    def self_collide(self, node: Node, scope: str, static: bool) -> None:
        """SDF: links of one model do not collide with each other unless the
        model (or the link) sets ``<self_collide>``. Each model with two or
        more moving links gets one of the 32 category bits: its geoms take
        that category and collide with every other bit."""
        if static:
            return
        model_sc = self.rep.child_bool(node, "self_collide", False)
        own = [self.links[scope + c.attrib["name"]] for c in node.findall("link")
               if scope + c.attrib.get("name", "") in self.links]
        own = [ln for ln in own if ln["body"] is not None and not (model_sc or ln["self_collide"])]
        if len(own) < 2 or not any(ln["geoms"] for ln in own):
            return
        if any(gi in self.masked for ln in own for gi in ln["geoms"]):
            # a collide_bitmask takes the geoms' bits: the links are kept apart
            # by excluded body pairs instead of a category bit
            for i, a in enumerate(own):
                for c in own[i + 1:]:
                    if a["body"] != c["body"]:
                        self.b.exclude_pair(a["body"], c["body"])
            return
        groups = self.b.__dict__.setdefault("collide_groups", {})  # shared with load_urdf
        self.info["collide_groups"][scope[:-2]] = None
        if len(groups) >= 32:
            self.rep.warn(node, "more than 32 models with several links: the links of this "
                                "model collide with each other", key="collide groups")
            return
        bit = 1 << len(groups)
        groups[scope[:-2]] = bit
        self.info["collide_groups"][scope[:-2]] = bit
        for ln in own:
            for gi in ln["geoms"]:
                g = self.b.geoms[gi]
                g["category"], g["collide"] = bit, 0xFFFFFFFF & ~bit

    # ------------------------------------------------------------------ links
    def link(self, node: Node, T_link, scope: str, static: bool, frames=None) -> None:
        rep, b = self.rep, self.b
        if T_link is None:
            raise rep.error(node, "needs a name attribute")
        full = scope + node.attrib["name"]
        if full in self.links:
            raise rep.error(node, f"duplicate link name {full!r}")
        body = None
        T_body = T_link
        if not static:
            inert = node.find("inertial")
            m, I, T_in = 1.0, np.eye(3), np.eye(4)
            if inert is not None:
                m = rep.child_float(inert, "mass", 1.0)
                T_in = self.pose(inert, None, np.eye(4))
                tn = inert.find("inertia")
                if tn is not None:
                    v = {k: rep.child_float(tn, k, 1.0 if k in ("ixx", "iyy", "izz") else 0.0)
                         for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
                    I = np.array([[v["ixx"], v["ixy"], v["ixz"]], [v["ixy"], v["iyy"], v["iyz"]],
                                  [v["ixz"], v["iyz"], v["izz"]]])
                    self.skip(tn, tuple(v))
                self.skip(inert, ("mass", "pose", "inertia"))
            try:
                ms = mass_lib.from_inertia(m, I)
            except ValueError as e:
                raise rep.error(inert if inert is not None else node, str(e)) from None
            why = mass_lib.implausible(m, I)
            if why is not None:
                rep.warn(inert, f"link {full!r}: implausible inertia ({why}); kept as the file "
                                "says, but the step may go non-finite", key="implausible inertia")
            T_body = T_link @ T_in
            grav = rep.child_bool(node, "gravity", True)
            body = b.add_body(pos=T_body[:3, 3], quat=mat_to_quat(T_body[:3, :3]), mass=ms,
                              gravity=grav)
            self.info["bodies"][full] = body
        self.links[full] = dict(body=body, T_body=T_body, T_link=T_link, geoms=[],
                                self_collide=rep.child_bool(node, "self_collide", False))
        for c in node.findall("collision"):
            self.collision(c, full, body, T_link, T_body, frames)
        if node.find("kinematic") is not None and rep.child_bool(node, "kinematic"):
            rep.warn(node.find("kinematic"), "kinematic links are not supported; simulated as dynamic")
        self.skip(node, ("pose", "inertial", "collision", "gravity", "self_collide",
                         "kinematic", "must_be_base_link"))

    def surface(self, node: Optional[Node]) -> Surface:
        rep = self.rep
        kw: dict = dict(mu=1.0, mu2=1.0, max_vel=0.01, min_depth=0.0)
        if node is None:
            return Surface(**kw)
        fr = node.find("friction")
        if fr is not None:
            ode = fr.find("ode")
            if ode is not None:
                for tag in ("mu", "mu2", "slip1", "slip2"):
                    if ode.find(tag) is not None:
                        kw[tag] = rep.float(ode.find(tag))
                for tag in ("mu", "mu2"):  # Gazebo's FrictionPyramid::SetMu: mu < 0 = no limit
                    if kw[tag] < 0:
                        kw[tag] = math.inf
                if ode.find("fdir1") is not None:
                    f1 = rep.floats(ode.find("fdir1"), 3)
                    if np.linalg.norm(f1) > 0:
                        kw["fdir1"] = tuple(f1)
                self.skip(ode, ("mu", "mu2", "slip1", "slip2", "fdir1"))
            tor = fr.find("torsional")
            if tor is not None:
                # Gazebo's defaults: coefficient 1, use_patch_radius true, radii 0
                kw["torsional"] = rep.child_float(tor, "coefficient", 1.0)
                kw["patch_radius"] = rep.child_float(tor, "patch_radius", 0.0)
                kw["surface_radius"] = rep.child_float(tor, "surface_radius", 0.0)
                kw["use_patch_radius"] = float(rep.child_bool(tor, "use_patch_radius", True))
                self.skip(tor, ("coefficient", "patch_radius", "use_patch_radius", "surface_radius",
                                "ode"))
            self.skip(fr, ("ode", "torsional"))
        bo = node.find("bounce")
        if bo is not None:
            if bo.find("restitution_coefficient") is not None:
                kw["bounce"] = rep.float(bo.find("restitution_coefficient"))
            if bo.find("threshold") is not None:
                kw["bounce_vel"] = rep.float(bo.find("threshold"))
            self.skip(bo, ("restitution_coefficient", "threshold"))
        co = node.find("contact")
        if co is not None:
            ode = co.find("ode")
            if ode is not None:
                for tag in ("soft_cfm", "soft_erp", "kp", "kd", "max_vel", "min_depth"):
                    if ode.find(tag) is not None:
                        kw[tag] = rep.float(ode.find(tag))
                if "kp" in kw or "kd" in kw:
                    # Gazebo's rule (gazebo/physics/ode/ODEPhysics.cc, Collide):
                    # every contact's soft_erp/soft_cfm come from kp and kd,
                    # ERP = h kp / (h kp + kd), CFM = 1 / (h kp + kd), kp in
                    # series, kd summed over the two surfaces; <soft_erp> and
                    # <soft_cfm> are read but not used there. The one of kp/kd
                    # not given takes SDF's default (kp 1e12 N/m, kd 1 N s/m).
                    kw.setdefault("kp", KP_DEFAULT)
                    kw.setdefault("kd", KD_DEFAULT)
                    for tag in ("soft_erp", "soft_cfm"):
                        if kw.pop(tag, None) is not None:
                            rep.warn(ode.find(tag), f"<{tag}> with <kp>/<kd>: Gazebo's ODE derives "
                                                    f"the contact ERP/CFM from kp and kd, {tag} "
                                                    "unused", key="soft with kp")
                self.skip(ode, ("soft_cfm", "soft_erp", "kp", "kd", "max_vel", "min_depth"))
            self.skip(co, ("ode", "collide_without_contact", "collide_bitmask",
                           "collide_without_contact_bitmask"))
            if co.find("collide_without_contact_bitmask") is not None:
                rep.warn(co.find("collide_without_contact_bitmask"),
                         "collide_without_contact_bitmask is not mapped (collide_without_contact "
                         "is not supported)")
            if rep.child_bool(co, "collide_without_contact", False):
                rep.warn(co.find("collide_without_contact"),
                         "collide_without_contact is not supported; contacts are made")
        self.skip(node, ("friction", "bounce", "contact"))
        try:
            s = Surface(**kw)
            s.validate("surface")
        except (ValueError, TypeError) as e:
            raise rep.error(node, str(e)) from None
        return s

    def collide_bitmask(self, surface: Optional[Node]) -> Optional[int]:
        """``<surface><contact><collide_bitmask>`` (SDF: an unsigned int, decimal or
        0x hex; Gazebo's default 0xffff), or None where the collision has none."""
        c = None if surface is None else surface.find("contact")
        c = None if c is None else c.find("collide_bitmask")
        if c is None:
            return None
        t = (c.text or "").strip()
        try:
            v = int(t, 16) if t.lower().startswith("0x") else int(t)
        except ValueError:
            v = None
        if v is None or not 0 <= v <= 0xFFFFFFFF:
            raise self.rep.error(c, "collide_bitmask must be an unsigned 32-bit integer "
                                    f"(decimal or 0x hex; got {c.text!r})")
        return v

    def collision(self, node: Node, link: str, body, T_link, T_body, frames=None) -> None:
        """One <collision> of a link; its pose is in the link frame unless it is
        relative_to another frame of the model (SDF 1.7: the link itself, another
        link, a <frame>, __model__), resolved by ``frames``."""
        rep, b = self.rep, self.b
        T_c = self.pose(node, frames, T_link)
        T_rel = inv(T_body) @ T_c if body is not None else T_c
        pos, quat = T_rel[:3, 3], mat_to_quat(T_rel[:3, :3])
        geo = node.find("geometry")
        if geo is None or not geo.children:
            raise rep.error(node, "needs a <geometry> with one shape")
        s = self.surface(node.find("surface"))
        mc = node.find("max_contacts")
        bits = {}
        if mc is not None:
            n = rep.float(mc)
            if n != int(n) or n < 0:
                raise rep.error(mc, f"must be an integer >= 0 (got {mc.text!r})")
            if n == 0:  # Gazebo: the collision makes no contacts
                bits = dict(category_bits=0, collide_bits=0)
            else:
                s = Surface(**{**s.__dict__, "max_contacts": int(n)})
        mask = self.collide_bitmask(node.find("surface"))
        if mask is not None and not bits:
            # Gazebo (ODECollision): the bitmask is the geom's category and its
            # collide bits, so two collisions touch iff their masks share a bit
            bits = dict(category_bits=mask, collide_bits=mask)
        g = geo.children[0]
        kw = dict(body=body, pos=pos, quat=quat, surface=s, **bits)
        try:
            if g.tag == "box":
                gi = b.add_box(rep.floats(g.find("size") or _need(rep, g, "size"), 3), **kw)
            elif g.tag == "sphere":
                gi = b.add_sphere(rep.child_float(g, "radius", 1.0), **kw)
            elif g.tag in ("cylinder", "capsule"):
                add = b.add_cylinder if g.tag == "cylinder" else b.add_capsule
                gi = add(rep.child_float(g, "radius", 1.0), rep.child_float(g, "length", 1.0), **kw)
            elif g.tag == "plane":
                if body is not None:
                    rep.warn(g, "a plane on a moving link is not supported (ODE planes are "
                                "static), skipped", key="plane on a body")
                    return
                nn = g.find("normal")
                nrm = rep.floats(nn, 3) if nn is not None else np.array([0, 0, 1.0])
                nw = T_c[:3, :3] @ (nrm / np.linalg.norm(nrm))
                # <size> only sizes the visual: Gazebo's ODE plane is infinite too
                gi = b.add_plane(nw, float(nw @ T_c[:3, 3]), surface=s)
            elif g.tag == "mesh":
                gi = mesh_files.add_mesh_geom(b, self.mesh(g), where=rep.where(g), **kw)
            elif g.tag == "heightmap":
                if body is not None:
                    raise rep.error(g, "a heightmap must be static (Gazebo's heightmaps are)")
                gi = self.heightmap(g, T_c, s)
            else:
                rep.warn(g, f"geometry <{g.tag}> is not supported, collision skipped",
                         key=f"geometry {g.tag}")
                return
        except ValueError as e:
            if str(e).startswith(rep.name):
                raise
            raise rep.error(g, str(e)) from None
        self.info["geoms"][link + "::" + node.attrib.get("name", str(len(self.info["geoms"])))] = gi
        self.links[link]["geoms"].append(gi)
        if mask is not None:
            self.masked.add(gi)
        self.skip(node, ("pose", "geometry", "surface", "max_contacts", "laser_retro"))

    def resolve_uri(self, node: Node, u: str) -> str:
        """A file named by an SDF uri: ``model://NAME/rest`` in the search
        path (``NAME/rest`` under each directory), ``file://`` or absolute
        as is, else relative to this file's folder, then the search path."""
        if u.startswith("model://"):
            rest = u[len("model://"):].lstrip("/")  # model:///NAME/... as Gazebo resolves it
            tried = [os.path.join(d, rest) for d in self.search]
        elif u.startswith("file://"):
            tried = [u[len("file://"):]]
        elif os.path.isabs(u):
            tried = [u]
        else:
            tried = [os.path.join(self.base_dir, u)] + [os.path.join(d, u) for d in self.search]
        for t in tried:
            if os.path.isfile(t):
                return t
        raise self.rep.error(node, f"cannot find {u!r} (tried {tried}; pass search_path= or set "
                                   "GAZEBO_MODEL_PATH for model:// uris)")

    def mesh(self, g: Node):
        """<mesh><uri><scale>: the file's triangles times scale (``<submesh>``:
        warned, the whole mesh is used)."""
        uri = g.find("uri")
        if uri is None or not uri.text.strip():
            raise self.rep.error(g, "needs a <uri>")
        path = self.resolve_uri(uri, uri.text.strip())
        sc = self.rep.floats(g.find("scale"), 3) if g.find("scale") is not None else (1.0, 1.0, 1.0)
        if g.find("submesh") is not None:
            self.rep.warn(g.find("submesh"), "<submesh> is not supported: the whole mesh is used")
        self.skip(g, ("uri", "scale", "submesh"))
        try:
            return mesh_files.load_mesh(path, sc)
        except ValueError as e:
            raise self.rep.error(g, str(e)) from None

    def heightmap(self, g: Node, T_c: np.ndarray, s: Surface) -> int:
        """<heightmap><uri> (a grayscale image, read with Pillow) <size> (x y z
        [m]) <pos>: the image spans size x by size y centred at pos (plus the
        collision's pose; a translation only), heights = value / (the
        image's largest value) * size z, as Gazebo's HeightmapShape::Init
        (scale z = |size z| / max colour; all black: 0). One terrain vertex
        per pixel (Gazebo resamples the image bilinearly at half-pixel
        spacing, 2 w - 1 vertices a side, and wants a square 2^n + 1 image;
        jaxode takes any size). Image columns run along +x, rows from the
        top down along -y (the image seen from above, north up): jaxode's
        convention, not checked against Gazebo's."""
        rep = self.rep
        uri = g.find("uri")
        if uri is None or not uri.text.strip():
            raise rep.error(g, "needs a <uri>")
        path = self.resolve_uri(uri, uri.text.strip())
        try:
            from PIL import Image
        except ImportError:
            raise ImportError(f"{path}: <heightmap> images need Pillow: pip install "
                              "jaxode[meshes]") from None
        try:
            img = Image.open(path)
            mode = img.mode
            a = np.asarray(img.convert("I") if mode.startswith("I;16") or mode == "I" else
                           img.convert("L"), dtype=np.float64)
        except OSError as e:
            raise rep.error(uri, f"cannot read the image {path!r} ({e})") from None
        top = float(a.max()) if a.size and a.max() > 0 else 1.0
        size = rep.floats(g.find("size"), 3) if g.find("size") is not None else np.array([1.0, 1.0, 1.0])
        pos = rep.floats(g.find("pos"), 3) if g.find("pos") is not None else np.zeros(3)
        if not np.allclose(T_c[:3, :3], np.eye(3), atol=1e-12):
            raise rep.error(g, "a rotated heightmap is not supported (jaxode's heightfield is "
                               "axis-aligned, heights along world z)")
        for tag in ("texture", "blend", "use_terrain_paging", "sampling"):
            if g.find(tag) is not None and tag not in ("texture", "blend"):
                rep.warn(g.find(tag), f"<{tag}> is not supported, ignored")
        self.skip(g, ("uri", "size", "pos", "texture", "blend", "use_terrain_paging", "sampling"))
        heights = (a[::-1, :].T / top) * size[2]  # (x index, y index), y up = image rows upward
        return self.b.add_heightfield(heights, size[:2], pos=T_c[:3, 3] + pos, surface=s)

    # ----------------------------------------------------------------- joints
    def link_ref(self, node: Node, scope: str):
        rep = self.rep
        if node is None:
            return None
        nm = node.text.strip()
        if nm == "world":
            return "world"
        for cand in (scope + nm, nm):
            if cand in self.links:
                return cand
        raise rep.error(node, f"no link named {nm!r} (in scope {scope[:-2]!r})")

    def joint(self, node: Node, scope: str, frame, T_model) -> None:
        rep, b = self.rep, self.b
        name = scope + node.attrib.get("name", "")
        jtype = node.attrib.get("type", "")
        if jtype in ("gearbox", "screw"):
            rep.warn(node, f"joint type {jtype!r} is out of scope for jaxode, skipped",
                     key=f"joint {jtype}")
            return
        if jtype not in ("revolute", "prismatic", "ball", "universal", "revolute2", "fixed"):
            raise rep.error(node, f"unknown joint type {jtype!r} (supported: revolute, prismatic, "
                                  "ball, universal, revolute2, fixed; gearbox/screw out of scope)")
        pn, cn = node.find("parent"), node.find("child")
        if pn is None or cn is None:
            raise rep.error(node, "needs <parent> and <child>")
        parent, child = self.link_ref(pn, scope), self.link_ref(cn, scope)
        if child == "world":
            raise rep.error(cn, "the child of a joint cannot be the world")
        cl = self.links[child]
        T_j = self.pose(node, frame, cl["T_link"])
        pbody = None if parent == "world" else self.links[parent]["body"]
        cbody = cl["body"]
        if cbody is None and pbody is None:
            return  # both static: nothing moves
        if cbody is None:  # static child: swap so body1 moves
            cbody, pbody = pbody, None
        anchor = T_j[:3, 3]
        axes, params = [], {}
        ph = node.path("physics", "ode")
        # Gazebo's implicit spring-damper (ODEJoint.cc ApplyImplicitStiffnessDamping;
        # <cfm_damping>, SDF 1.4's name, works the same)
        implicit = ph is not None and (rep.child_bool(ph, "implicit_spring_damper", False)
                                       or rep.child_bool(ph, "cfm_damping", False))
        springs = {}  # params suffix -> (kd, kp, reference, limited, dynamics node)
        for k, tag in enumerate(("axis", "axis2")):
            ax = node.find(tag)
            suf = "" if k == 0 else "2"
            if ax is None:
                axes.append(None)
                continue
            xyz = ax.find("xyz")
            v = rep.floats(xyz, 3) if xyz is not None else np.array([0.0, 0.0, 1.0])
            R = T_j[:3, :3]
            exp = xyz.attrib.get("expressed_in", "") if xyz is not None else ""
            if exp:
                R = T_model[:3, :3] if exp == "__model__" else frame(exp, xyz)[:3, :3]
            elif self.version <= (1, 4) or rep.child_bool(ax, "use_parent_model_frame", False):
                R = T_model[:3, :3]
            axes.append(R @ v)
            lim = ax.find("limit")
            limited = False
            if lim is not None:
                lo, hi = rep.child_float(lim, "lower", -BIG), rep.child_float(lim, "upper", BIG)
                if abs(lo) < BIG:
                    params["lo_stop" + suf] = lo
                if abs(hi) < BIG:
                    params["hi_stop" + suf] = hi
                limited = abs(lo) < BIG or abs(hi) < BIG
                self.info["joint_limits"][name + suf] = (rep.child_float(lim, "effort", -1.0),
                                                         rep.child_float(lim, "velocity", -1.0))
                self.skip(lim, ("lower", "upper", "effort", "velocity", "stiffness", "dissipation"))
            dyn = ax.find("dynamics")
            if dyn is not None:
                fr = rep.child_float(dyn, "friction", 0.0)
                if fr > 0:
                    params["vel" + suf], params["fmax" + suf] = 0.0, fr
                damp = rep.child_float(dyn, "damping", 0.0)
                kp = rep.child_float(dyn, "spring_stiffness", 0.0)
                ref = rep.child_float(dyn, "spring_reference", 0.0)
                one_axis = jtype in ("revolute", "prismatic") and not suf
                if implicit and one_axis and (damp != 0 or kp != 0):
                    springs[suf] = (damp, kp, ref, limited, dyn)
                elif damp != 0 and one_axis:
                    params["damping"] = abs(damp)  # Gazebo applies -|damping| * rate
                elif damp != 0:
                    rep.warn(dyn.find("damping"), f"joint damping of a {jtype} joint's {tag} is "
                                                  "not supported (revolute and prismatic only), "
                                                  "ignored", key="joint damping")
                if kp != 0 and suf not in springs:
                    if not one_axis:
                        rep.warn(dyn.find("spring_stiffness"), f"joint springs of a {jtype} "
                                 f"joint's {tag} are not supported (revolute and prismatic "
                                 "only), ignored", key="joint spring")
                    elif kp < 0:
                        raise rep.error(dyn.find("spring_stiffness"),
                                        f"spring_stiffness must be >= 0 (got {kp})")
                    else:
                        params["stiffness"], params["springref"] = kp, ref
                self.skip(dyn, ("friction", "damping", "spring_stiffness", "spring_reference"))
            self.skip(ax, ("xyz", "limit", "dynamics", "use_parent_model_frame"))
        scal = {}
        if ph is not None:
            for tag, key in (("cfm", "cfm"), ("fudge_factor", "fudge_factor"), ("bounce", "bounce"),
                             ("max_force", "fmax"), ("velocity", "vel")):
                if ph.find(tag) is not None:
                    params[key] = rep.float(ph.find(tag))
            for sub, pre in (("limit", "stop_"), ("suspension", "suspension_")):
                sn = ph.find(sub)
                if sn is not None:
                    for tag in ("cfm", "erp"):
                        if sn.find(tag) is not None:
                            (scal if pre == "suspension_" else params)[pre + tag] = rep.float(sn.find(tag))
                    self.skip(sn, ("cfm", "erp"))
            if ph.find("erp") is not None:
                rep.warn(ph.find("erp"), "joint erp is not supported (the world erp applies)",
                         key="joint erp")
            self.skip(ph, ("cfm", "erp", "fudge_factor", "bounce", "max_force", "velocity",
                           "limit", "suspension", "provide_feedback", "cfm_damping",
                           "implicit_spring_damper"))
        for suf, (damp, kp, ref, limited, dyn) in springs.items():
            self.implicit_spring(dyn, params, suf, damp, kp, ref, limited)
        if node.find("physics") is not None:
            self.skip(node.find("physics"), ("ode", "provide_feedback"))
        a1 = axes[0] if axes[0] is not None else np.array([1.0, 0.0, 0.0])
        try:
            if jtype == "revolute":
                ji = b.add_hinge(cbody, pbody, anchor=anchor, axis=a1, **params)
            elif jtype == "prismatic":
                ji = b.add_slider(cbody, pbody, axis=a1, **params)
            elif jtype == "ball":
                ji = b.add_ball(cbody, pbody, anchor=anchor)
            elif jtype == "fixed":
                ji = b.add_fixed(cbody, pbody)
            elif jtype == "universal":
                a2 = axes[1] if axes[1] is not None else np.array([0.0, 1.0, 0.0])
                ji = b.add_universal(cbody, pbody, anchor=anchor, axis1=a1, axis2=a2, **params)
            else:  # revolute2: axis on the parent (body 1), axis2 on the child
                if pbody is None:
                    raise ValueError("revolute2 needs two moving links (ODE's hinge-2 joint)")
                a2 = axes[1] if axes[1] is not None else np.array([0.0, 1.0, 0.0])
                ji = b.add_hinge2(pbody, cbody, anchor=anchor, axis1=a1, axis2=a2, **params,
                                  **scal)
        except ValueError as e:
            raise rep.error(node, str(e)) from None
        self.info["joints"][name] = ji
        self.skip(node, ("parent", "child", "pose", "axis", "axis2", "physics"))


    def implicit_spring(self, dyn: Node, params: dict, suf: str, damp: float, kp: float,
                        ref: float, limited: bool) -> None:
        """Gazebo's implicit spring-damper on one axis (``<physics><ode>
        <implicit_spring_damper>`` or ``<cfm_damping>``; gazebo-classic ODEJoint.cc
        ``ApplyImplicitStiffnessDamping``): instead of the explicit joint force, the
        axis's limit row pinned at the spring reference (lo_stop = hi_stop =
        ``spring_reference``: ODE's bilateral limit row) with stop_erp = h kp /
        (h kp + kd) and stop_cfm = 1 / (h kp + kd) (``KpKdToCFMERP``; h the world's
        step, kd = |damping| [N m s/rad or N s/m], kp = ``spring_stiffness``
        [N m/rad or N/m]): the damper and spring solved implicitly with the other
        rows. Gazebo leaves this mode for the axis's real limits when the angle
        comes within 2 h rate of them, and a negative damping there is adaptive
        (both depend on the state at run time); jaxode keeps the pinned row for
        the whole run, so an axis with limits or with negative damping falls back
        to the explicit damping (warned). A pinned limit row also switches off the
        axis's motor (ODE, as in Gazebo: its ``<friction>`` then does nothing)."""
        rep = self.rep
        if limited or damp < 0:
            why = "has limits" if limited else "has a negative (adaptive) damping"
            rep.warn(dyn, f"implicit_spring_damper on an axis that {why} switches modes at run "
                          "time in Gazebo; jaxode applies the damping explicitly "
                          "(-|damping| * rate) and no spring", key="implicit_spring_damper")
            if damp != 0:
                params["damping" + suf] = abs(damp)
            return
        h = float(self.b.dt)
        denom = h * kp + abs(damp)
        if denom <= 0:
            raise rep.error(dyn, f"implicit spring-damper needs h * spring_stiffness + |damping| "
                                 f"> 0 (got stiffness {kp}, damping {damp}, step {h} s)")
        params["lo_stop" + suf] = params["hi_stop" + suf] = ref
        params["stop_erp" + suf] = h * kp / denom
        params["stop_cfm" + suf] = 1.0 / denom


def _need(rep: Reporter, node: Node, tag: str):
    raise rep.error(node, f"needs <{tag}>")


def _version(root: Node, rep: Reporter) -> tuple:
    if root.tag == "mujoco":
        raise rep.error(root, "the root element must be <sdf>: this is an MJCF file: "
                              "use jaxode.load_mjcf")
    if root.tag != "sdf":
        raise rep.error(root, "the root element must be <sdf>")
    v = root.attrib.get("version", "1.6")
    try:
        ver = tuple(int(x) for x in v.split(".")[:2])
    except ValueError:
        raise rep.error(root, f"version must look like '1.6' (got {v!r})") from None
    if not (1, 4) <= ver <= (1, 7):
        rep.warn(root, f"SDFormat {v} is outside 1.4-1.7; read as 1.7", key="version")
    return ver


def load_sdf(path_or_string, search_path=None) -> WorldBuilder:
    """Read an SDFormat 1.4-1.7 world (or model) file or string into a
    :class:`WorldBuilder` (see the module docstring for what is read).

    path_or_string: a file path, or XML text starting with ``<``.
    search_path: a directory or list of directories holding ``model://``
        models (then ``$GAZEBO_MODEL_PATH`` and ``$SDF_PATH`` are searched).
    Returns the builder, with ``builder.dt`` = ``max_step_size`` [s] and
    ``builder.sdf_info`` (name -> index maps; skipped elements).
    """
    root, name = parse(path_or_string)
    rep = Reporter(name)
    ld = _Loader(rep, search_path)
    if name != "<string>":
        ld.base_dir = os.path.dirname(os.path.abspath(name))
    ld.version = _version(root, rep)
    worlds = root.findall("world")
    if len(worlds) > 1:
        rep.warn(worlds[1], "only the first <world> is loaded", key="second world")
    if worlds:
        w = worlds[0]
        ld.world(w, True)
        for c in w.children:
            if c.tag == "model":
                ld.model(c, np.eye(4), "", False)
            elif c.tag == "include":
                ld.include(c, np.eye(4), "", False)
        ld.skip(w, ("physics", "gravity", "model", "include", "magnetic_field", "atmosphere"))
    else:
        models = root.findall("model")
        if not models and not root.findall("light"):
            raise rep.error(root, "needs a <world> or a <model>")
        # a file of lights only (Gazebo's model://sun): an empty world, the lights warned
        ld.world(root, False)
        for m in models:
            ld.model(m, np.eye(4), "", False)
    ld.skip(root, ("world", "model"))
    ld.info["unsupported"] = rep.unsupported
    ld.b.sdf_info = ld.info
    return ld.b
