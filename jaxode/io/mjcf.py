"""Load MuJoCo MJCF models into a :class:`WorldBuilder` (docs/MJCF.md has the table).

``load_mjcf(path_or_string, builder=None)`` reads a ``<mujoco>`` file (or XML
text starting with ``<``) with the stdlib helpers of :mod:`jaxode.io.xml_util`
(line numbers kept: errors say ``file:line: <element>: ...``, unsupported
elements warn once per element name with :class:`JaxodeFormatWarning`).

What is read (MuJoCo XML reference, "MJCF modeling" chapter):

* ``<include file>`` (relative to the including file), ``<compiler>`` angle
  (degree, the default, or radian), eulerseq, inertiafromgeom (auto / true /
  false), meshdir / assetdir, autolimits, settotalmass; ``<default>`` classes
  (nested, ``class`` and ``childclass``, the class ``main`` at the top).
* ``<option>`` timestep -> ``builder.dt`` [s] (MuJoCo's default 0.002),
  gravity (default (0, 0, -9.81)), iterations -> QuickStep iterations
  (MuJoCo's default 100; with solver="PGS" the file's count, with Newton or CG
  at least 100: one Newton iteration is a whole solve, not a sweep), cone pyramidal / elliptic -> friction_model "pyramid" /
  "cone", ``<flag contact="disable">`` -> no geom collides,
  ``gravity="disable"`` -> zero gravity. integrator: MuJoCo's default Euler is
  semi-implicit like ODE's step; RK4 / implicit are warned (jaxode steps ODE's
  way). The solver's soft constraints (solref, solimp, impratio) have no ODE
  counterpart: warned, the world erp 0.2 / cfm default apply.
* Bodies: pos and orientation (quat, axisangle, euler with eulerseq, xyaxes,
  zaxis), ``<frame>``, ``<inertial>`` (mass, pos, orientation, diaginertia or
  fullinertia), or the inertia from the geoms (density default 1000 kg/m^3,
  or the geom's mass): MuJoCo's formulas, which are ODE's for sphere, box,
  capsule and cylinder (jaxode.mass); the ellipsoid's exact inertia; a mesh
  from its convex hull (jaxode.mass.convex). The ODE body sits at the centre
  of mass with the MJCF body's orientation and the full inertia tensor.
* A body without joints is welded to its parent: its geoms and mass join the
  parent's ODE body (children of ``<worldbody>`` without joints are static).
  Joints: hinge -> ODE hinge, slide -> slider, ball -> ball (range warned:
  ODE's ball has no stops), free -> no joint (a free body). Several joints in
  one body are chained in MuJoCo's order (the first next to the parent)
  through intermediate ODE bodies: ODE bodies need mass, so each
  intermediate takes ``INTERMEDIATE_FRACTION`` (1 %) of the body's mass and
  inertia at the same centre of mass (total mass and inertia unchanged; the
  dynamics differ by the distribution, O(1 %) in the joints' coupling terms).
  range -> stops when limited (autolimits), shifted by ``ref`` (ODE's angle is
  zero at the build pose, MuJoCo's qpos0 is ref); frictionloss -> an ODE
  joint motor with vel 0 and fmax = frictionloss (dry friction, as Gazebo's
  ``<friction>``); damping, armature, stiffness and springref -> the joint's
  damping, armature, stiffness and springref (jaxode.sim.joints.passive: an
  implicit damper and armature row and an explicit spring, MuJoCo's Euler;
  hinge and slide joints, ball warned).
* Geoms: plane (static: normal = geom z), sphere, capsule and cylinder (size
  or fromto), box, ellipsoid (approximated by the convex hull of 42 points of
  its surface; the mass is the exact ellipsoid's), mesh (convex hull, as
  MuJoCo / MJX collide meshes; file meshes via jaxode.io.mesh_files, inline
  ``vertex`` directly), hfield (static, no rotation; ``elevation`` data
  normalised to [0, 1] as MuJoCo does, a ``file`` is warned and read as flat).
  contype / conaffinity -> category / collide bits (ODE's rule and MuJoCo's
  are the same test). friction (slide, torsion, roll) with condim: 1 ->
  mu = 0; 3 -> mu; 4 -> mu and spinning = torsion [m]; 6 -> rolling warned.
  MuJoCo combines two geoms' friction by max, jaxode by min (Gazebo's rule).
* ``<actuator>`` motor / position / velocity / general (gain fixed, bias none
  or affine) on a hinge or slide joint -> :class:`Actuator` records in
  ``builder.mjcf_info["actuators"]``; :func:`apply_actuators` turns a control
  vector into joint torques/forces each step (MuJoCo's force = gain * ctrl +
  bias, clamped to ctrlrange / forcerange).
* ``<equality>`` weld -> ODE fixed joint, connect -> ball joint at the anchor
  (body1 frame); joint / tendon / distance equalities are warned.

Elements with no physics (visual, asset materials and textures, light,
camera, site, statistic, size, keyframe, custom, extension) are skipped
silently; tendon, sensor, contact pairs/excludes, skins, plugins and the
attributes listed above are warned once per name.

``builder.dt`` is the option timestep; ``builder.mjcf_info`` is a dict:
``bodies`` (MJCF body name -> ODE body index, ``None`` for static),
``frames`` (name -> (4, 4) world transform of the MJCF body frame at build),
``intermediates`` (name -> ODE bodies between it and its parent),
``joints`` (name -> ODE joint index), ``joint_ref`` (name -> MuJoCo ref),
``geoms`` (name -> geom index), ``visual_geoms`` (names of the geoms left
out), ``actuators`` (name -> Actuator), ``coordinates`` (MuJoCo's qpos / qvel
layout: :class:`jaxode.tools.coordinates.Coordinates`), ``mj_bodies``
(MuJoCo's bodies and sites: :class:`jaxode.tools.mujoco_data.Bodies`, for
xpos, cinert, cvel, cfrc_ext) and
``unsupported`` (tag, line, why).
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Optional

import numpy as np

from jaxode.build import mass as mass_lib
from jaxode.build.builder import WorldBuilder, _quat_to_mat
from jaxode.build.surface import Surface
from jaxode.io.xml_util import Node, Reporter, inv, mat_to_quat, parse
from jaxode.tools import coordinates

#: Share of a body's mass and inertia given to each intermediate ODE body
#: when one MJCF body has several joints (ODE bodies need positive mass).
INTERMEDIATE_FRACTION = 0.01
#: A moving ODE body lighter than this share of the model's total mass, or with a
#: principal moment below this share of the model's largest, is raised to it (with a
#: warning): MuJoCo moves such bodies (Gymnasium's pusher object and goal, 7.9e-6 and
#: 4e-10 kg, inertias to 6e-15 kg m^2) through joints whose armature carries the
#: inertia, while jaxode's maximal coordinates hold their other degrees of freedom with
#: rows of stiffness 1 / mass, which float32 cannot resolve beside the armature's (the
#: pusher went non-finite at its first step). 1e-5 keeps the ratios within float32's
#: precision (at 1e-6 the articulated solve of the pusher's goal is 2.7 % off in
#: float32); the pusher's goal and object then move 0.35 % slower under a force than in
#: MuJoCo (1.4e-4 kg beside the 0.04 kg armature).
MASS_FLOOR_FRACTION = 1e-5
#: MuJoCo's defaults (mjModel / mjOption).
DEFAULT_TIMESTEP = 0.002
DEFAULT_GRAVITY = (0.0, 0.0, -9.81)
DEFAULT_ITERATIONS = 100
#: Sweeps of ``solver="articulated"`` for a file whose solver is Newton or CG (the
#: joints' rows are then exact; 20 sweeps leave a standing quadruped's step within
#: 1 mm/s of the exact LCP's, tests/test_articulated.py, docs/MJCF.md).
ARTICULATED_ITERATIONS = 20
DEFAULT_DENSITY = 1000.0
DEFAULT_FRICTION = (1.0, 0.005, 0.0001)

NO_PHYSICS = {"visual", "statistic", "size", "light", "camera", "site", "keyframe", "custom",
              "extension", "texture", "material"}
_ORIENT = ("quat", "axisangle", "euler", "xyaxes", "zaxis")


@dataclasses.dataclass(frozen=True)
class Actuator:
    """One MJCF actuator on a hinge or slide joint (MuJoCo's force model
    ``force = gain * ctrl + b0 + b1 * q + b2 * qdot`` times ``gear``).

    kind: "motor", "position", "velocity" or "general"; joint: ODE joint
    index; joint_type: "hinge" or "slide"; ref: MuJoCo's joint ref (q = ref +
    ODE angle); gear: the transmission's first gear; gain, bias (b0, b1, b2):
    MuJoCo's gainprm[0] and biasprm[:3], except that a damping b2 < 0 (a servo's
    kv, dampratio's included) is moved into the joint's implicit damping
    (gear^2 * -b2: MuJoCo's implicitfast treatment, stable for any kv; outside
    forcerange's clamp) and b2 here is 0; ctrlrange / forcerange: (lo, hi) or
    None (unlimited); a position actuator's inheritrange sets ctrlrange from the
    joint's range; joint_name: the MJCF joint's name."""

    name: str
    kind: str
    joint: int
    joint_type: str
    ref: float
    gear: float
    gain: float
    bias: tuple
    ctrlrange: Optional[tuple]
    forcerange: Optional[tuple]
    joint_name: str = ""


@dataclasses.dataclass(frozen=True)
class Fluid:
    """MuJoCo's ``<option density viscosity wind>`` (``builder.mjcf_info["fluid"]``
    when density or viscosity is > 0): the medium of the inertia-box drag model
    (:func:`jaxode.tools.mujoco_data.fluid_forces`). density [kg/m^3], viscosity
    [Pa s], wind (3,) [m/s] the medium's velocity, world frame."""

    density: float
    viscosity: float
    wind: tuple


class _Rep(Reporter):
    """A Reporter that knows which file each node came from (``<include>``)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.files: dict[int, str] = {}

    def where(self, node: Node) -> str:
        return f"{self.files.get(id(node), self.name)}:{node.line}: <{node.tag}>"


# --------------------------------------------------------------- rotations
def _axis_rot(axis, angle: float) -> np.ndarray:
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def _quat_mat(q) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    return _quat_to_mat(q / np.linalg.norm(q))


def _zaxis_rot(z) -> np.ndarray:
    """MuJoCo's zaxis: the minimal rotation taking (0, 0, 1) to ``z``."""
    z = np.asarray(z, dtype=np.float64) / np.linalg.norm(z)
    c = float(z[2])
    ax = np.cross([0.0, 0.0, 1.0], z)
    s = float(np.linalg.norm(ax))
    if s < 1e-12:
        return np.eye(3) if c > 0 else _axis_rot((1.0, 0.0, 0.0), math.pi)
    return _axis_rot(ax / s, math.atan2(s, c))


class _Loader:
    def __init__(self, rep: _Rep, root: Node, base_dir: str):
        self.rep = rep
        self.root = root
        self.base_dir = base_dir
        self.angle_deg = True
        self.eulerseq = "xyz"
        self.inertiafromgeom = "auto"
        self.meshdir = ""
        self.autolimits = True
        self.settotalmass = None
        self.defaults: dict[str, dict] = {"main": {}}
        self.meshes: dict[str, Node] = {}
        self.mesh_cache: dict[str, tuple] = {}
        self.hull_cache: dict[str, np.ndarray] = {}
        self.hfields: dict[str, Node] = {}
        self.contact_off = False
        self.info = dict(bodies={}, frames={}, intermediates={}, joints={}, joint_ref={},
                         joint_type={}, joint_range={}, geoms={}, visual_geoms=[], actuators={},
                         unsupported=rep.unsupported)
        self.visual_geoms = False
        self.invweight = None  # dof_invweight0 (_inverse_weights), once per load

    # ---------------------------------------------------------------- values
    def attr(self, node: Node, key: str, cls: str, default=None):
        if key in node.attrib:
            return node.attrib[key]
        return self.defaults[cls].get(node.tag, {}).get(key, default)

    def floats(self, node: Node, key: str, cls: str, n=None, default=None):
        v = self.attr(node, key, cls)
        if v is None:
            return None if default is None else np.asarray(default, dtype=np.float64)
        try:
            arr = np.array([float(x) for x in v.split()], dtype=np.float64)
        except ValueError:
            raise self.rep.error(node, f"attribute {key!r}: expected numbers (got {v!r})") from None
        if n is not None and arr.size not in ((n,) if isinstance(n, int) else n):
            raise self.rep.error(node, f"attribute {key!r}: expected {n} numbers "
                                       f"(got {arr.size}: {v!r})")
        if not np.all(np.isfinite(arr)):
            raise self.rep.error(node, f"attribute {key!r}: numbers must be finite (got {v!r})")
        return arr

    def scalar(self, node: Node, key: str, cls: str, default=None):
        v = self.floats(node, key, cls, 1)
        return default if v is None else float(v[0])

    def cls_of(self, node: Node, childclass: str) -> str:
        c = node.attrib.get("class", childclass)
        if c not in self.defaults:
            raise self.rep.error(node, f"class {c!r} is not a <default> class "
                                       f"(known: {sorted(self.defaults)})")
        return c

    def angle(self, v: float) -> float:
        return math.radians(v) if self.angle_deg else v

    def rotation(self, node: Node, cls: str) -> np.ndarray:
        given = [k for k in _ORIENT if self.attr(node, k, cls) is not None]
        if len(given) > 1 and any(k in node.attrib for k in given):
            given = [k for k in given if k in node.attrib]
        if len(given) > 1:
            raise self.rep.error(node, f"give one orientation of {list(_ORIENT)} (got {given})")
        if not given:
            return np.eye(3)
        k = given[0]
        if k == "quat":
            q = self.floats(node, k, cls, 4)
            if np.linalg.norm(q) < 1e-12:
                raise self.rep.error(node, f"quat must be non-zero (got {tuple(q)})")
            return _quat_mat(q)
        if k == "axisangle":
            v = self.floats(node, k, cls, 4)
            if np.linalg.norm(v[:3]) < 1e-12:
                raise self.rep.error(node, f"axisangle axis must be non-zero (got {tuple(v)})")
            return _axis_rot(v[:3], self.angle(v[3]))
        if k == "euler":
            v = self.floats(node, k, cls, 3)
            R = np.eye(3)
            for ch, a in zip(self.eulerseq, v):
                r = _axis_rot(np.eye(3)["xyz".index(ch.lower())], self.angle(a))
                R = R @ r if ch.islower() else r @ R
            return R
        if k == "xyaxes":
            v = self.floats(node, k, cls, 6)
            x = v[:3] / np.linalg.norm(v[:3])
            y = v[3:] - x * (x @ v[3:])
            if np.linalg.norm(y) < 1e-12:
                raise self.rep.error(node, f"xyaxes: the axes must not be parallel (got {tuple(v)})")
            y = y / np.linalg.norm(y)
            return np.stack([x, y, np.cross(x, y)], axis=1)
        v = self.floats(node, "zaxis", cls, 3)
        if np.linalg.norm(v) < 1e-12:
            raise self.rep.error(node, f"zaxis must be non-zero (got {tuple(v)})")
        return _zaxis_rot(v)

    def local(self, node: Node, cls: str) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = self.rotation(node, cls)
        T[:3, 3] = self.floats(node, "pos", cls, 3, (0.0, 0.0, 0.0))
        return T

    # ----------------------------------------------------------- structure
    def expand_includes(self, node: Node, fname: str, depth: int = 0) -> None:
        out = []
        for c in node.children:
            if c.tag == "include":
                if depth > 20:
                    raise self.rep.error(c, "includes nested deeper than 20 (a cycle?)")
                f = c.attrib.get("file")
                if not f:
                    raise self.rep.error(c, "needs a file attribute")
                path = f if os.path.isabs(f) else os.path.join(os.path.dirname(fname)
                                                               if fname != "<string>" else
                                                               self.base_dir, f)
                if not os.path.isfile(path):
                    raise self.rep.error(c, f"cannot find the included file {path!r}")
                sub, sname = parse(path)
                if sub.tag != "mujoco":
                    raise self.rep.error(c, f"the included file's root must be <mujoco> "
                                            f"(got <{sub.tag}>)")
                self.mark(sub, sname)
                self.expand_includes(sub, sname, depth + 1)
                for s in sub.children:
                    s.parent = node
                out.extend(sub.children)
            else:
                self.expand_includes(c, fname, depth)
                out.append(c)
        node.children = out

    def mark(self, node: Node, fname: str) -> None:
        self.rep.files[id(node)] = fname
        for c in node.children:
            self.mark(c, fname)

    def compiler(self, node: Node) -> None:
        rep, a = self.rep, node.attrib
        if "angle" in a:
            if a["angle"] not in ("degree", "radian"):
                raise rep.error(node, f"angle must be 'degree' or 'radian' (got {a['angle']!r})")
            self.angle_deg = a["angle"] == "degree"
        if "eulerseq" in a:
            s = a["eulerseq"]
            if len(s) != 3 or any(ch not in "xyzXYZ" for ch in s):
                raise rep.error(node, f"eulerseq must be 3 letters of xyzXYZ (got {s!r})")
            self.eulerseq = s
        if "inertiafromgeom" in a:
            v = a["inertiafromgeom"]
            if v not in ("auto", "true", "false"):
                raise rep.error(node, f"inertiafromgeom must be auto, true or false (got {v!r})")
            self.inertiafromgeom = v
        if "autolimits" in a:
            self.autolimits = a["autolimits"] == "true"
        for k in ("meshdir", "assetdir"):
            if k in a and (k == "meshdir" or not self.meshdir):
                self.meshdir = a[k]
        if "settotalmass" in a:
            v = rep.float(node, a["settotalmass"])
            self.settotalmass = v if v > 0 else None
        if a.get("coordinate", "local") != "local":
            raise rep.error(node, "coordinate='global' is not supported (MuJoCo 2.x removed it too)")
        for k in ("boundmass", "boundinertia", "balanceinertia", "fitaabb", "alignfree"):
            if k in a:
                rep.warn(node, f"attribute {k!r} is not supported, ignored", key=f"compiler {k}")

    def default(self, node: Node, parent: dict, top: bool) -> None:
        name = node.attrib.get("class", "main")
        if top and name != "main":
            name = "main"
        if not top and "class" not in node.attrib:
            raise self.rep.error(node, "a nested <default> needs a class attribute")
        if name in self.defaults and not top:
            raise self.rep.error(node, f"duplicate default class {name!r}")
        if top:
            # another top-level <default> (a second one, or one from an <include>) adds to
            # class main, as MuJoCo's reader does; classes defined earlier keep what they
            # copied from main then
            parent = self.defaults["main"]
        d = {tag: dict(v) for tag, v in parent.items()}
        for c in node.children:
            if c.tag != "default":
                d.setdefault(c.tag, {}).update({k: v for k, v in c.attrib.items() if k != "class"})
        self.defaults[name] = d
        for c in node.children:
            if c.tag == "default":
                self.default(c, d, False)

    def option(self, node: Node):
        rep = self.rep
        cls = "main"
        o = dict(dt=DEFAULT_TIMESTEP, gravity=np.array(DEFAULT_GRAVITY), iterations=DEFAULT_ITERATIONS,
                 friction_model="pyramid", pgs=False)
        if node is None:
            return o
        o["dt"] = self.scalar(node, "timestep", cls, DEFAULT_TIMESTEP)
        if not o["dt"] > 0:
            raise rep.error(node, f"timestep must be > 0 s (got {o['dt']})")
        o["gravity"] = self.floats(node, "gravity", cls, 3, DEFAULT_GRAVITY)
        it = self.scalar(node, "iterations", cls, DEFAULT_ITERATIONS)
        if it != int(it) or it < 1:
            raise rep.error(node, f"iterations must be an integer >= 1 (got {it})")
        solver = node.attrib.get("solver", "Newton")
        if solver not in ("Newton", "CG", "PGS"):
            raise rep.error(node, f"solver must be Newton, CG or PGS (got {solver!r})")
        # MuJoCo's PGS iterations are sweeps as QuickStep's; a Newton or CG iteration
        # is a whole (line-searched) solve that PGS needs many sweeps to match, so a
        # count such as Brax's 4 keeps QuickStep at MuJoCo's default count (100)
        o["iterations"] = int(it) if solver == "PGS" else max(int(it), DEFAULT_ITERATIONS)
        o["pgs"] = solver == "PGS"
        cone = node.attrib.get("cone", "pyramidal")
        if cone not in ("pyramidal", "elliptic"):
            raise rep.error(node, f"cone must be pyramidal or elliptic (got {cone!r})")
        o["friction_model"] = "cone" if cone == "elliptic" else "pyramid"
        integ = node.attrib.get("integrator", "Euler")
        if integ != "Euler":
            rep.warn(node, f"integrator {integ!r}: jaxode steps ODE's semi-implicit Euler "
                           "(MuJoCo's Euler)", key="option integrator")
        fluid = {k: self.scalar(node, k, cls, 0.0) for k in ("density", "viscosity")}
        fluid["wind"] = tuple(float(x) for x in self.floats(node, "wind", cls, 3, (0.0, 0.0, 0.0)))
        for k in ("density", "viscosity"):
            if not (math.isfinite(fluid[k]) and fluid[k] >= 0):
                raise rep.error(node, f"{k} must be a number >= 0 (got {fluid[k]})")
        if fluid["density"] > 0 or fluid["viscosity"] > 0:
            self.info["fluid"] = Fluid(**fluid)
            rep.warn(node, "fluid density/viscosity: MuJoCo's inertia-box drag is applied by "
                           "jaxode.io.mjcf.apply_fluid (the MJCF envs call it each step), not "
                           "by jaxode.step", key="option fluid")
        for k in ("impratio", "tolerance", "noslip_iterations", "noslip_tolerance", "ls_iterations",
                  "ls_tolerance", "ccd_iterations", "jacobian", "magnetic",
                  "o_margin", "o_solref", "o_solimp", "o_friction", "sdf_iterations",
                  "sdf_initpoints", "apirate", "mpr_iterations", "mpr_tolerance"):
            if k in node.attrib:
                rep.warn(node, f"attribute {k!r} has no ODE counterpart, ignored",
                         key=f"option {k}")
        for c in node.children:
            if c.tag == "flag":
                for k, v in c.attrib.items():
                    if k == "contact" and v == "disable":
                        self.contact_off = True
                    elif k == "gravity" and v == "disable":
                        o["gravity"] = np.zeros(3)
                    elif k in ("energy", "warmstart", "filterparent", "sensor", "midphase",
                               "island", "nativeccd", "autoreset", "refsafe", "eulerdamp"):
                        continue  # no effect on what jaxode steps
                    else:
                        rep.warn(c, f"flag {k}={v!r} is not supported, ignored", key=f"flag {k}")
            else:
                rep.warn(c, f"element <{c.tag}> in <option> is not supported, ignored")
        return o

    def assets(self, node: Node) -> None:
        for c in node.children:
            if c.tag in ("mesh", "hfield"):  # unnamed: the file name without extension
                nm = c.attrib.get("name") or os.path.splitext(os.path.basename(
                    c.attrib.get("file", "")))[0]
                if not nm:
                    raise self.rep.error(c, "needs a name or a file")
                (self.meshes if c.tag == "mesh" else self.hfields)[nm] = c
            elif c.tag in ("texture", "material"):
                continue
            else:
                self.rep.warn(c, f"asset <{c.tag}> is not supported, ignored")

    # ------------------------------------------------------------ the tree
    def collect(self, node: Node, T_parent: np.ndarray, parent: Optional[int], childclass: str,
                bodies: list) -> None:
        """Depth-first list of MJCF bodies: dicts with name, node, T (world),
        parent index, joints, geoms (node, cls, T relative to the body)."""
        sub = node.attrib.get("childclass", childclass)  # bodies have no defaults of their own
        if sub not in self.defaults:
            raise self.rep.error(node, f"childclass {sub!r} is not a <default> class")
        T = T_parent @ self.local(node, "main") if node.tag == "body" else T_parent
        me = len(bodies)
        name = node.attrib.get("name", f"body{me}" if node.tag == "body" else "world")
        rec = dict(name=name, node=node, T=T, parent=parent, joints=[], geoms=[], inertial=None,
                   sites=[])
        bodies.append(rec)
        if node.tag == "body" and node.attrib.get("mocap") == "true":
            self.rep.warn(node, "mocap bodies are moved by the user in MuJoCo; loaded as static",
                          key="mocap")
            rec["mocap"] = True

        def walk(n: Node, T_rel: np.ndarray, ccls: str):
            for c in n.children:
                if c.tag == "body":
                    self.collect(c, T @ T_rel, me, ccls, bodies)
                elif c.tag == "frame":
                    fc = self.cls_of(c, ccls)
                    walk(c, T_rel @ self.local(c, fc), c.attrib.get("childclass", ccls))
                elif c.tag in ("joint", "freejoint"):
                    if node.tag == "worldbody":
                        raise self.rep.error(c, "joints belong in a <body>, not <worldbody>")
                    rec["joints"].append((c, self.cls_of(c, ccls), T_rel))
                elif c.tag == "geom":
                    rec["geoms"].append((c, self.cls_of(c, ccls), T_rel))
                elif c.tag == "inertial":
                    rec["inertial"] = (c, T_rel)
                elif c.tag == "site":
                    rec["sites"].append((c, T_rel @ self.local(c, self.cls_of(c, ccls))))
                elif c.tag in NO_PHYSICS:
                    continue
                elif c.tag in ("composite", "flexcomp", "replicate", "attach", "plugin", "skin"):
                    self.rep.warn(c, f"<{c.tag}> is not supported, ignored")
                else:
                    self.rep.warn(c, f"element <{c.tag}> in <{n.tag}> is not supported, ignored")
        walk(node, np.eye(4), sub)

    # ------------------------------------------------------------- geoms
    def geom_shape(self, g: Node, cls: str):
        """(type, params, T_geom relative to its parent frame)."""
        rep = self.rep
        gtype = self.attr(g, "type", cls, "sphere")
        size = self.floats(g, "size", cls, None, (0.0, 0.0, 0.0))
        fromto = self.floats(g, "fromto", cls, 6)
        T = self.local(g, cls)
        if fromto is not None and gtype in ("capsule", "cylinder", "box", "ellipsoid"):
            a, b = fromto[:3], fromto[3:]
            d = b - a
            half = float(np.linalg.norm(d)) / 2
            if half < 1e-12:
                raise rep.error(g, f"fromto: the two points coincide (got {tuple(fromto)})")
            T = np.eye(4)
            T[:3, :3] = _zaxis_rot(d)
            T[:3, 3] = (a + b) / 2
            if gtype in ("capsule", "cylinder"):
                size = np.array([size[0], half])
            else:
                size = np.array([size[0], size[1] if size.size > 1 else size[0], half])
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3, "plane": 0}
        if gtype in need:
            if size.size < need[gtype]:
                raise rep.error(g, f"a {gtype} needs size with {need[gtype]} numbers "
                                   f"(got {size.size})")
            if need[gtype] and np.any(size[:need[gtype]] <= 0):
                raise rep.error(g, f"{gtype} size must be > 0 m (got {tuple(size)})")
        elif gtype not in ("mesh", "hfield"):
            raise rep.error(g, f"unknown geom type {gtype!r} (plane, sphere, capsule, cylinder, "
                               "box, ellipsoid, mesh, hfield; sdf not supported)")
        return gtype, size, T

    def mesh_points(self, g: Node, cls: str):
        """(vertices, (vertices, faces) of a mesh file or None for inline
        vertices), read once per mesh asset."""
        rep = self.rep
        mname = self.attr(g, "mesh", cls)
        if mname is None or mname not in self.meshes:
            raise rep.error(g, f"mesh {mname!r} is not an <asset><mesh> (known: "
                               f"{sorted(self.meshes)})")
        if mname in self.mesh_cache:
            return self.mesh_cache[mname]
        self.mesh_cache[mname] = out = self._mesh_points(self.meshes[mname])
        return out

    def _mesh_points(self, m: Node):
        rep = self.rep
        scale = self.floats(m, "scale", self.cls_of(m, "main"), 3, (1.0, 1.0, 1.0))
        tri = None
        if "vertex" in m.attrib:
            v = self.floats(m, "vertex", "main").reshape(-1, 3) * scale
        else:
            f = m.attrib.get("file")
            if not f:
                raise rep.error(m, "needs a file or vertex attribute")
            fname = self.rep.files.get(id(m), self.rep.name)
            base = os.path.dirname(fname) if fname != "<string>" else self.base_dir
            path = f if os.path.isabs(f) else os.path.join(base, self.meshdir, f)
            try:
                from jaxode.io.mesh_files import load_mesh
                mf = load_mesh(path, scale)
            except ImportError as e:
                raise rep.error(m, f"mesh files need trimesh (pip install jaxode[meshes]): {e}") \
                    from None
            except (ValueError, OSError) as e:
                raise rep.error(m, f"cannot read mesh {path!r}: {e}") from None
            v = np.asarray(mf.vertices, dtype=np.float64)
            tri = (v, np.asarray(mf.faces))
        if v.shape[0] < 4:
            raise rep.error(m, f"a mesh needs at least 4 vertices (got {v.shape[0]})")
        return v, tri

    def geom_mass(self, g: Node, cls: str, gtype: str, size, pts) -> Optional[mass_lib.Mass]:
        """The geom's mass in its own frame, or None (plane, hfield, mass 0)."""
        if gtype in ("plane", "hfield"):
            return None
        m_attr = self.scalar(g, "mass", cls)
        rho = self.scalar(g, "density", cls, DEFAULT_DENSITY)
        if (m_attr is not None and m_attr <= 0) or (m_attr is None and rho <= 0):
            return None
        kw = dict(total=m_attr) if m_attr is not None else dict(density=rho)
        if self.attr(g, "shellinertia", cls, "false") == "true":
            self.rep.warn(g, "shellinertia is not supported; solid inertia used",
                          key="shellinertia")
        if gtype == "sphere":
            return mass_lib.sphere(size[0], **kw)
        if gtype == "box":
            return mass_lib.box(2 * size[:3], **kw)
        if gtype == "capsule":
            return mass_lib.capsule(size[0], 2 * size[1], **kw)
        if gtype == "cylinder":
            return mass_lib.cylinder(size[0], 2 * size[1], **kw)
        if gtype == "ellipsoid":
            a, b, c = size[:3]
            m = m_attr if m_attr is not None else rho * 4.0 / 3.0 * math.pi * a * b * c
            return mass_lib.from_inertia(m, np.diag([b * b + c * c, a * a + c * c,
                                                     a * a + b * b]) * m / 5.0)
        verts, tri = pts
        mname = self.attr(g, "mesh", cls)
        mnode = self.meshes[mname]
        mode = self.attr(mnode, "inertia", self.cls_of(mnode, "main"), "legacy")
        if mode not in ("legacy", "exact", "convex", "shell"):
            raise self.rep.error(self.meshes[mname], f"inertia must be legacy, exact, convex or "
                                                     f"shell (got {mode!r})")
        if mode == "shell":
            self.rep.warn(self.meshes[mname], "mesh inertia 'shell' is not supported; 'exact' "
                                              "(the solid) used", key="mesh shell")
            mode = "exact"
        if tri is None or mode == "convex":
            return mass_lib.convex(verts, **kw)
        try:
            if mode == "exact":
                return mass_lib.trimesh(tri[0], tri[1], **kw)
            return _legacy_mesh_mass(tri[0], tri[1], **kw)
        except ValueError as e:
            raise self.rep.error(g, f"mesh {mname!r}: {e}") from None

    def surface(self, g: Node, cls: str) -> Surface:
        fr = self.floats(g, "friction", cls, (1, 2, 3), DEFAULT_FRICTION)
        fr = np.concatenate([fr, np.asarray(DEFAULT_FRICTION)[fr.size:]])
        condim = int(self.scalar(g, "condim", cls, 3))
        if condim not in (1, 3, 4, 6):
            raise self.rep.error(g, f"condim must be 1, 3, 4 or 6 (got {condim})")
        kw = dict(mu=0.0 if condim == 1 else float(fr[0]))
        if condim >= 4:
            kw["spinning"] = float(fr[1])
        if condim == 6:
            self.rep.warn(g, "condim 6: rolling friction [m] has no exact jaxode counterpart "
                             "(jaxode's rolling is dimensionless), ignored", key="condim 6")
        for k in ("solref", "solimp", "solmix", "priority", "margin", "gap", "fluidshape"):
            v = self.attr(g, k, cls)
            if v is None or (k in ("margin", "gap", "priority") and float(v) == 0) or (
                    k == "fluidshape" and v == "none"):
                continue
            self.rep.warn(g, f"geom {k} has no ODE counterpart, ignored", key=f"geom {k}")
        try:
            s = Surface(**kw)
            s.validate("surface")
        except (ValueError, TypeError) as e:
            raise self.rep.error(g, str(e)) from None
        return s

    def hfield(self, b: WorldBuilder, g: Node, cls: str, T: np.ndarray, kw: dict):
        rep = self.rep
        hname = self.attr(g, "hfield", cls)
        if hname not in self.hfields:
            raise rep.error(g, f"hfield {hname!r} is not an <asset><hfield> "
                               f"(known: {sorted(self.hfields)})")
        h = self.hfields[hname]
        size = self.floats(h, "size", "main", 4)
        if size is None or np.any(size[:3] <= 0):
            raise rep.error(h, "needs size='radius_x radius_y elevation_z base_z' (> 0)")
        if "file" in h.attrib:
            rep.warn(h, "hfield files are not read; the heights are zero", key="hfield file")
            nrow = ncol = 2
            data = np.zeros((2, 2))
        else:
            nrow = int(self.scalar(h, "nrow", "main", 0))
            ncol = int(self.scalar(h, "ncol", "main", 0))
            if nrow < 2 or ncol < 2:
                raise rep.error(h, f"needs nrow, ncol >= 2 (got {nrow}, {ncol})")
            ev = self.floats(h, "elevation", "main")
            if ev is None:
                data = np.zeros((nrow, ncol))
            else:
                if ev.size != nrow * ncol:
                    raise rep.error(h, f"elevation needs nrow*ncol = {nrow * ncol} numbers "
                                       f"(got {ev.size})")
                lo, hi = ev.min(), ev.max()
                data = ((ev - lo) / (hi - lo) if hi > lo else ev * 0).reshape(nrow, ncol)
        if not np.allclose(T[:3, :3], np.eye(3), atol=1e-9):
            rep.warn(g, "a rotated hfield is not supported, skipped", key="hfield rotated")
            return None
        return b.add_heightfield(data.T * size[2], (2 * size[0], 2 * size[1]), pos=T[:3, 3], **kw)

    def add_geom(self, b: WorldBuilder, g: Node, cls: str, gtype: str, size, pts,
                 T_world: np.ndarray, body: Optional[int], T_body: np.ndarray):
        rep = self.rep
        ct, ca = int(self.scalar(g, "contype", cls, 1)), int(self.scalar(g, "conaffinity", cls, 1))
        if ct == 0 and ca == 0 and not self.visual_geoms:
            self.info["visual_geoms"].append(g.attrib.get("name", f"<line {g.line}>"))
            return None
        if self.contact_off:
            ct = ca = 0
        kw = dict(surface=self.surface(g, cls), category_bits=ct, collide_bits=ca)
        T_rel = inv(T_body) @ T_world if body is not None else T_world
        pose = dict(body=body, pos=T_rel[:3, 3], quat=mat_to_quat(T_rel[:3, :3]))
        try:
            if gtype == "plane":
                if body is not None:
                    rep.warn(g, "a plane on a moving body is not supported (ODE planes are "
                                "static), skipped", key="plane on a body")
                    return None
                n = T_world[:3, 2]
                return b.add_plane(n, float(n @ T_world[:3, 3]), **kw)
            if gtype == "hfield":
                if body is not None:
                    rep.warn(g, "an hfield on a moving body is not supported, skipped",
                             key="hfield on a body")
                    return None
                return self.hfield(b, g, cls, T_world, kw)
            if gtype == "sphere":
                return b.add_sphere(size[0], **pose, **kw)
            if gtype == "box":
                return b.add_box(2 * size[:3], **pose, **kw)
            if gtype == "capsule":
                return b.add_capsule(size[0], 2 * size[1], **pose, **kw)
            if gtype == "cylinder":
                return b.add_cylinder(size[0], 2 * size[1], **pose, **kw)
            if gtype == "mesh":
                from jaxode.io.mesh_files import hull_points  # at most 64 hull vertices
                key = self.attr(g, "mesh", cls)
                if key not in self.hull_cache:
                    self.hull_cache[key] = hull_points(pts[0])
                return b.add_convex(self.hull_cache[key], **pose, **kw)
            return b.add_convex(pts, **pose, **kw)  # ellipsoid
        except ValueError as e:
            raise rep.error(g, str(e)) from None


def _ellipsoid_points(radii) -> np.ndarray:
    """42 points on the ellipsoid (an icosphere's vertices, subdivided once)."""
    t = (1 + 5 ** 0.5) / 2
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t),
         (0, 1, -t), (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    v = np.array(v, dtype=np.float64)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    d = np.linalg.norm(v[:, None] - v[None], axis=2)
    edge = d[d > 1e-9].min()
    i, j = np.nonzero(np.triu(np.abs(d - edge) < 1e-6))
    mid = v[i] + v[j]
    mid /= np.linalg.norm(mid, axis=1, keepdims=True)
    return np.concatenate([v, mid]) * np.asarray(radii, dtype=np.float64)[:3]


def _legacy_mesh_mass(v, f, density=None, total=None) -> mass_lib.Mass:
    """MuJoCo's default mesh inertia ("legacy", mjMESH_INERTIA_LEGACY, as
    mjCMesh::Process computes it): the centre of mass from pyramids with
    their apex at the area-weighted centroid of the faces, then volume and
    inertia from pyramids with their apex at that centre; every pyramid's
    volume taken positive (exact for meshes star-shaped about those points,
    more otherwise)."""
    tris = np.asarray(v, dtype=np.float64)[np.asarray(f)]  # (T, 3, 3)
    cr = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    area = 0.5 * np.linalg.norm(cr, axis=1)
    ok = area > 0
    tris, cr, area = tris[ok], cr[ok], area[ok]
    normal = cr / (2 * area[:, None])
    cen = tris.mean(axis=1)
    facecen = (area[:, None] * cen).sum(axis=0) / area.sum()
    vol = np.abs(np.einsum("ti,ti->t", cen - facecen, normal) * area / 3)
    if not vol.sum() > 0:
        raise ValueError("the mesh encloses no volume")
    com = (vol[:, None] * (0.75 * cen + 0.25 * facecen)).sum(axis=0) / vol.sum()
    u = tris - com
    vol = np.abs(np.einsum("ti,ti->t", u.mean(axis=1), normal) * area / 3)
    volume = float(vol.sum())
    s = u.sum(axis=1)
    P = ((vol / 20.0)[:, None, None] * (np.einsum("tki,tkj->tij", u, u)
                                        + np.einsum("ti,tj->tij", s, s))).sum(axis=0)
    rho = density if total is None else total / volume
    I = rho * (np.trace(P) * np.eye(3) - P)
    m = mass_lib.from_inertia(rho * volume, 0.5 * (I + I.T))
    return mass_lib.translate(m, com)


def _mass_in(m: mass_lib.Mass, T: np.ndarray) -> mass_lib.Mass:
    """A mass given in frame T's coordinates, expressed in the parent frame."""
    return mass_lib.translate(mass_lib.rotate(m, T[:3, :3]), T[:3, 3])


def load_mjcf(path_or_string, builder: Optional[WorldBuilder] = None,
              visual_geoms: bool = False) -> WorldBuilder:
    """Read an MJCF file or string (XML starting with ``<``) into ``builder``
    (a new :class:`WorldBuilder` with the model's ``<option>`` when None);
    see the module docstring and docs/MJCF.md for what is read. Returns the
    builder with ``builder.dt`` [s] and ``builder.mjcf_info``.

    visual_geoms: geoms with contype = conaffinity = 0 never collide (MuJoCo
    models use them for looks); their mass always counts, but they are added
    as geoms (for ``raycast`` / rendering) only when True. Their names are in
    ``mjcf_info["visual_geoms"]``."""
    root, name = parse(path_or_string)
    rep = _Rep(name)
    if root.tag != "mujoco":
        raise rep.error(root, "the root element must be <mujoco> (an MJCF file)")
    base = os.path.dirname(os.path.abspath(name)) if name != "<string>" else os.getcwd()
    ld = _Loader(rep, root, base)
    ld.visual_geoms = bool(visual_geoms)
    ld.expand_includes(root, name)
    for c in root.findall("compiler"):
        ld.compiler(c)
    for d in root.findall("default"):
        ld.default(d, {}, True)
    for a in root.findall("asset"):
        ld.assets(a)
    opts = root.findall("option")
    o = ld.option(opts[-1] if opts else None)
    for extra in opts[:-1]:
        ld.option(extra)
    if builder is None:
        try:
            b = WorldBuilder(gravity=o["gravity"], iterations=o["iterations"],
                             friction_model=o["friction_model"])
        except ValueError as e:
            raise rep.error(opts[-1] if opts else root, str(e)) from None
    elif isinstance(builder, WorldBuilder):
        b = builder
    else:
        raise ValueError(f"builder must be a WorldBuilder or None (got {type(builder).__name__})")
    b.dt = o["dt"]
    known = {"compiler", "default", "asset", "option", "worldbody", "actuator", "equality",
             "tendon", "sensor", "contact"}
    for c in root.children:
        if c.tag in NO_PHYSICS or c.tag in known:
            continue
        rep.warn(c, f"element <{c.tag}> is not supported, ignored")

    # ---- pass 1: the body tree
    bodies: list[dict] = []
    for wb in root.findall("worldbody"):
        if bodies:
            sub: list[dict] = []
            ld.collect(wb, np.eye(4), 0, "main", sub)
            off = len(bodies)
            for r in sub[1:]:
                r["parent"] = 0 if r["parent"] == 0 else r["parent"] + off - 1
            bodies[0]["geoms"].extend(sub[0]["geoms"])
            bodies[0]["sites"].extend(sub[0]["sites"])
            bodies.extend(sub[1:])
        else:
            ld.collect(wb, np.eye(4), None, "main", bodies)
    if not bodies:
        # a file of <default>s and assets only (Menagerie's shared parts, meant to be
        # included): MuJoCo compiles it to an empty world, and so does jaxode
        ld.collect(Node("worldbody", {}, root.line, root), np.eye(4), None, "main", bodies)

    # ---- masses of each MJCF body in its own frame
    # welded to the world (no joint up to it): static, its inertia never used (MuJoCo
    # accepts a zero or singular one there)
    welded = [True] * len(bodies)
    for i, r in enumerate(bodies):
        if i > 0:
            welded[i] = welded[r["parent"]] and not r["joints"]
    for i, r in enumerate(bodies):
        shapes = []
        for g, cls, T_rel in r["geoms"]:
            gtype, size, T_g = ld.geom_shape(g, cls)
            pts = None
            if gtype == "mesh":
                pts, tri = ld.mesh_points(g, cls)
            elif gtype == "ellipsoid":
                pts = _ellipsoid_points(size)
                rep.warn(g, "ellipsoid collides as the convex hull of 42 surface points "
                            "(mass exact)", key="ellipsoid")
            shapes.append((g, cls, gtype, size, (pts, tri) if gtype == "mesh" else pts,
                           T_rel @ T_g))
        r["shapes"] = shapes
        m = None
        ine = r["inertial"]
        use_inertial = ine is not None and ld.inertiafromgeom != "true"
        if use_inertial:
            node, T_rel = ine
            mv = ld.scalar(node, "mass", "main")
            if mv is None:
                raise rep.error(node, "needs a mass attribute")
            di, fi = ld.floats(node, "diaginertia", "main", 3), ld.floats(node, "fullinertia", "main", 6)
            if (di is None) == (fi is None):
                raise rep.error(node, "needs one of diaginertia or fullinertia")
            I = np.diag(di) if di is not None else np.array(
                [[fi[0], fi[3], fi[4]], [fi[3], fi[1], fi[5]], [fi[4], fi[5], fi[2]]])
            if mv > 0:
                try:
                    m = _mass_in(mass_lib.from_inertia(mv, I), T_rel @ ld.local(node, "main"))
                except ValueError as e:
                    if not welded[i]:
                        raise rep.error(node, str(e)) from None
                why = None if welded[i] or m is None else mass_lib.implausible(mv, I)
                if why is not None:
                    rep.warn(node, f"body {r['name']!r}: implausible inertia ({why}); kept as "
                                   "the file says, but the step may go non-finite",
                             key="implausible inertia")
        elif i > 0:
            for g, cls, gtype, size, pts, T_g in shapes:
                try:
                    gm = ld.geom_mass(g, cls, gtype, size, pts)
                except ValueError as e:
                    raise rep.error(g, str(e)) from None
                if gm is not None:
                    gm = _mass_in(gm, T_g)
                    m = gm if m is None else mass_lib.add(m, gm)
        r["mass"] = m
    if ld.settotalmass is not None:
        tot = sum(r["mass"].mass for r in bodies[1:] if r["mass"] is not None)
        if tot > 0:
            for r in bodies[1:]:
                if r["mass"] is not None:
                    r["mass"] = mass_lib.adjust(r["mass"], r["mass"].mass * ld.settotalmass / tot)

    # ---- groups: a body without joints joins its parent's ODE body
    group = [0] * len(bodies)  # index of the MJCF body that owns the ODE body (0: world)
    for i, r in enumerate(bodies):
        if i == 0:
            continue
        if r["joints"] and not r.get("mocap"):
            group[i] = i
        else:
            group[i] = group[r["parent"]]
    info = ld.info
    ode_body: dict[int, Optional[int]] = {0: None}
    T_ode: dict[int, np.ndarray] = {}
    moving_masses = [r["mass"] for i, r in enumerate(bodies)
                     if i > 0 and r["mass"] is not None and not welded[i]]
    m_floor = MASS_FLOOR_FRACTION * sum(m.mass for m in moving_masses)
    i_floor = MASS_FLOOR_FRACTION * max(
        [float(np.max(np.linalg.eigvalsh(m.inertia_about_com()))) for m in moving_masses]
        or [0.0])

    def floored(m: mass_lib.Mass, r) -> mass_lib.Mass:
        """``m`` (about its centre of mass) lifted to the floors (MASS_FLOOR_FRACTION)."""
        lifted = m
        if m.mass < m_floor:
            lifted = mass_lib.adjust(lifted, m_floor)
        low = float(np.min(np.linalg.eigvalsh(lifted.inertia)))
        if low < i_floor:
            lifted = mass_lib.Mass(lifted.mass, lifted.com,
                                   lifted.inertia + (i_floor - low) * np.eye(3))
        if lifted is not m:
            rep.warn(r["node"], f"body {r['name']!r}: mass {m.mass:.3g} kg / smallest principal "
                                f"inertia {float(np.min(np.linalg.eigvalsh(m.inertia))):.3g} "
                                f"kg m^2 raised to {lifted.mass:.3g} kg / "
                                f"{float(np.min(np.linalg.eigvalsh(lifted.inertia))):.3g} "
                                "kg m^2 (jaxode.io.mjcf.MASS_FLOOR_FRACTION of the model's: "
                                "float32 cannot step lighter bodies beside the rest)",
                     key=f"mass floor {r['name']}")
        return lifted
    for i, r in enumerate(bodies):
        if i == 0 or group[i] != i:
            continue
        total = None
        for k in range(len(bodies)):
            if group[k] == i and bodies[k]["mass"] is not None:
                mk = _mass_in(bodies[k]["mass"], inv(r["T"]) @ bodies[k]["T"])
                total = mk if total is None else mass_lib.add(total, mk)
        if total is None:
            raise rep.error(r["node"], f"body {r['name']!r} moves but has no mass (MuJoCo needs "
                                       "mass > 0 for a moving body; add <inertial> or geoms)")
        com = total.com.copy()
        mc = mass_lib.translate(total, -com)
        T = r["T"].copy()
        T[:3, 3] = T[:3, :3] @ com + T[:3, 3]
        T_ode[i] = T
        nj = len(r["joints"])
        chain = []
        for _ in range(nj - 1):
            chain.append(b.add_body(pos=T[:3, 3], quat=mat_to_quat(T[:3, :3]),
                                    mass=floored(mass_lib.adjust(
                                        mc, mc.mass * INTERMEDIATE_FRACTION), r)))
        try:
            ode_body[i] = b.add_body(pos=T[:3, 3], quat=mat_to_quat(T[:3, :3]),
                                     mass=floored(mass_lib.adjust(
                                         mc, mc.mass * (1 - INTERMEDIATE_FRACTION * (nj - 1))),
                                         r))
        except ValueError as e:
            raise rep.error(r["node"], str(e)) from None
        r["chain"] = chain
        info["intermediates"][r["name"]] = chain
    for i, r in enumerate(bodies):
        if i > 0:
            info["bodies"][r["name"]] = ode_body[group[i]]
            info["frames"][r["name"]] = r["T"]

    # ---- geoms
    geom_mj_body = {}
    for i, r in enumerate(bodies):
        gb = ode_body[group[i]]
        for g, cls, gtype, size, pts, T_g in r["shapes"]:
            gi = ld.add_geom(b, g, cls, gtype, size, pts, r["T"] @ T_g, gb,
                             T_ode.get(group[i], np.eye(4)))
            if gi is not None:
                info["geoms"][g.attrib.get("name", f"geom{gi}")] = gi
                geom_mj_body[gi] = i
    info["mj_bodies"] = _body_table(bodies, group, ode_body, T_ode, geom_mj_body, len(b.geoms))

    # ---- joints
    coords = []  # (name, coordinates.Joint) in MuJoCo's qpos order

    def ode_pose(k):
        return (None, None) if k is None else (
            np.asarray(b.bodies[k]["pos"], np.float64), _quat_to_mat(b.bodies[k]["quat"]))

    for i, r in enumerate(bodies):
        if i == 0 or group[i] != i:
            continue
        parent = ode_body[group[r["parent"]]]
        links = [parent] + r["chain"] + [ode_body[i]]
        if r["chain"] and parent is not None:  # MuJoCo's filterparent across the chain
            b.exclude_pair(parent, ode_body[i])
        for k, (jn, cls, T_rel) in enumerate(r["joints"]):
            jtype = "free" if jn.tag == "freejoint" else ld.attr(jn, "type", cls, "hinge")
            jname = jn.attrib.get("name", f"{r['name']}_joint{k}")
            if jtype == "free":
                if len(r["joints"]) > 1:
                    raise rep.error(jn, "a free joint must be the only joint of its body")
                if parent is not None:
                    raise rep.error(jn, "a free joint needs a body whose parent is the world "
                                        "(MuJoCo: free joints only at the top level)")
                pc, Rc = ode_pose(ode_body[i])
                com = r["T"][:3, :3].T @ (pc - r["T"][:3, 3])
                coords.append((jname, coordinates.joint_record(
                    "free", ode_body[i], None, 0.0, pc, (0.0, 0.0, 1.0), pc, Rc, None, None,
                    com=com)))
                continue
            if jtype not in ("hinge", "slide", "ball"):
                raise rep.error(jn, f"unknown joint type {jtype!r} (hinge, slide, ball, free)")
            Tj = r["T"] @ T_rel
            anchor = Tj[:3, :3] @ ld.floats(jn, "pos", cls, 3, (0, 0, 0)) + Tj[:3, 3]
            axis = Tj[:3, :3] @ ld.floats(jn, "axis", cls, 3, (0, 0, 1))
            child, par = links[k + 1], links[k]
            params = {}
            ref = ld.scalar(jn, "ref", cls, 0.0)
            ref = ld.angle(ref) if jtype == "hinge" else ref
            rng = ld.floats(jn, "range", cls, 2)
            lim = ld.attr(jn, "limited", cls, "auto")
            limited = lim == "true" or (lim == "auto" and ld.autolimits and rng is not None)
            if limited and rng is not None and jtype != "ball":
                lo, hi = rng
                if jtype == "hinge":
                    lo, hi = ld.angle(lo), ld.angle(hi)
                if lo > hi:
                    raise rep.error(jn, f"range must have lower <= upper (got {tuple(rng)})")
                params["lo_stop"], params["hi_stop"] = lo - ref, hi - ref
                ld.info["joint_range"][jname] = (lo, hi)
            elif limited and jtype == "ball":
                rep.warn(jn, "ball joint range is not supported (ODE's ball has no stops), "
                             "ignored", key="ball range")
            fl = ld.scalar(jn, "frictionloss", cls, 0.0)
            if fl > 0 and jtype != "ball":
                params["vel"], params["fmax"] = 0.0, fl
            damping = ld.scalar(jn, "damping", cls, 0.0)
            stiffness = ld.scalar(jn, "stiffness", cls, 0.0)
            springref = ld.scalar(jn, "springref", cls, 0.0)
            springref = ld.angle(springref) if jtype == "hinge" else springref
            armature = ld.scalar(jn, "armature", cls, 0.0)
            for key, v in (("damping", damping), ("stiffness", stiffness),
                           ("armature", armature)):
                if v < 0:
                    raise rep.error(jn, f"{key} must be >= 0 (got {v!r})")
            if jtype == "ball":
                if damping != 0 or stiffness != 0 or armature != 0:
                    rep.warn(jn, "ball joint damping/stiffness/armature is not supported "
                                 "(hinge and slide joints only), ignored", key="ball passive")
            else:
                # MuJoCo's joint-space terms as jaxode's passive row (implicit damper +
                # armature) and spring; the spring's reference in the ODE angle, which is
                # MuJoCo's q minus ref
                params.update(damping=damping, armature=armature, stiffness=stiffness,
                              springref=springref - ref)
            for key in ("solreflimit", "solimplimit", "solreffriction", "solimpfriction",
                        "margin"):
                v = ld.attr(jn, key, cls)
                if v is not None and not (key == "margin" and float(v) == 0):
                    rep.warn(jn, f"joint {key} has no ODE counterpart, ignored",
                             key=f"joint {key}")
            try:
                if jtype == "hinge":
                    ji = b.add_hinge(child, par, anchor=anchor, axis=axis, **params)
                elif jtype == "slide":
                    ji = b.add_slider(child, par, axis=axis, **params)
                else:
                    ji = b.add_ball(child, par, anchor=anchor)
            except ValueError as e:
                raise rep.error(jn, str(e)) from None
            info["joints"][jname] = ji
            info["joint_ref"][jname] = ref
            info["joint_type"][jname] = jtype
            pc, Rc = ode_pose(child)
            pp, Rp = ode_pose(par)
            coords.append((jname, coordinates.joint_record(
                jtype, child, par, ref if jtype != "ball" else 0.0, anchor, axis, pc, Rc, pp, Rp)))
    info["coordinates"] = coordinates.Coordinates(tuple(c for _, c in coords),
                                                  tuple(n for n, _ in coords))

    # ---- equality, actuators, the rest
    names = {r["name"]: i for i, r in enumerate(bodies)}
    names["world"] = 0
    for eq in root.findall("equality"):
        for e in eq.children:
            _equality(ld, b, e, bodies, names, group, ode_body)
    for act in root.findall("actuator"):
        for a in act.children:
            _actuator(ld, a, info, b)
    for tag in ("tendon", "sensor"):
        for n in root.findall(tag):
            for c in n.children:
                rep.warn(c, f"<{tag}> <{c.tag}> has no ODE counterpart, ignored", key=f"{tag}")
    for n in root.findall("contact"):
        for c in n.children:
            if c.tag == "exclude":
                n1, n2 = c.attrib.get("body1"), c.attrib.get("body2")
                for nm in (n1, n2):
                    if nm not in names:
                        raise rep.error(c, f"no body named {nm!r}")
                b1, b2 = ode_body[group[names[n1]]], ode_body[group[names[n2]]]
                if b1 is not None and b2 is not None and b1 != b2:
                    b.exclude_pair(b1, b2)
                elif b1 is None and b2 is None or b1 == b2:
                    continue  # static-static or one rigid body: never collide anyway
                else:
                    rep.warn(c, "excluding a static body's contacts is not supported (jaxode "
                                "excludes pairs of moving bodies), ignored", key="exclude static")
            else:
                rep.warn(c, f"<contact><{c.tag}> is not supported (jaxode filters contacts by "
                            "contype/conaffinity bits, joints and excludes), ignored")
    if not b.bodies:
        rep.warn(root, "the model has no moving body; WorldBuilder.build() needs a body",
                 key="no bodies")
    if builder is None and b._passive_on():
        # joints with armature, damping or springs: MuJoCo's joints are its coordinates,
        # so their rows are solved exactly and only contacts, limits and bounded
        # motors are swept (docs/MJCF.md)
        b.solver = "articulated"
        b.iterations = o["iterations"] if o["pgs"] else ARTICULATED_ITERATIONS
    b.mjcf_info = info
    return b


def _body_table(bodies, group, ode_body, T_ode, geom_mj_body, ngeom):
    """:class:`jaxode.tools.mujoco_data.Bodies` of the loaded tree (MuJoCo's body
    order, the world first): each MJCF body's ODE body, frame in it, own mass,
    centre of mass and inertia about it, root, sites; each geom's MJCF body."""
    from jaxode.tools.mujoco_data import Bodies

    n = len(bodies)
    parent, root = np.zeros(n, np.int32), np.zeros(n, np.int32)
    odeb = np.full(n, -1, np.int32)
    rel_pos, rel_rot = np.zeros((n, 3)), np.tile(np.eye(3), (n, 1, 1))
    mass, com, inertia = np.zeros(n), np.zeros((n, 3)), np.zeros((n, 3, 3))
    sites = {}
    for i, r in enumerate(bodies):
        if i > 0:
            parent[i] = r["parent"]
            root[i] = i if r["parent"] == 0 else root[r["parent"]]
        k = ode_body[group[i]] if i > 0 else None
        T = r["T"] if k is None else inv(T_ode[group[i]]) @ r["T"]
        if k is not None:
            odeb[i] = k
        rel_pos[i], rel_rot[i] = T[:3, 3], T[:3, :3]
        m = r.get("mass")
        if m is not None and i > 0:
            mass[i], com[i], inertia[i] = m.mass, m.com, m.inertia_about_com()
        for s_node, T_s in r.get("sites", ()):
            sites[s_node.attrib.get("name", f"site{len(sites)}")] = (i, T_s[:3, 3].copy())
    gbody = np.zeros(ngeom, np.int32)
    for gi, i in geom_mj_body.items():
        gbody[gi] = i
    return Bodies(names=tuple(r["name"] for r in bodies), parent=parent, root=root,
                  ode_body=odeb, rel_pos=rel_pos, rel_rot=rel_rot, mass=mass, com=com,
                  inertia=inertia, geom_body=gbody, sites=sites)


def _equality(ld: _Loader, b: WorldBuilder, e: Node, bodies, names, group, ode_body) -> None:
    rep = ld.rep
    if e.tag not in ("weld", "connect"):
        rep.warn(e, f"equality <{e.tag}> has no ODE joint counterpart, ignored",
                 key=f"equality {e.tag}")
        return
    cls = ld.cls_of(e, "main")
    if ld.attr(e, "active", cls, "true") == "false":
        return
    if "site1" in e.attrib:
        rep.warn(e, "site-based equalities are not supported, ignored", key="equality site")
        return
    n1, n2 = e.attrib.get("body1"), e.attrib.get("body2", "world")
    for n in (n1, n2):
        if n not in names:
            raise rep.error(e, f"no body named {n!r}")
    i1, i2 = names[n1], names[n2]
    b1, b2 = ode_body[group[i1]], ode_body[group[i2]]
    if b1 == b2:
        rep.warn(e, "both bodies are one rigid ODE body (welded by the tree), ignored",
                 key="equality same body")
        return
    if b1 is None:
        b1, b2 = b2, None
    for key in ("solref", "solimp"):
        if key in e.attrib:
            rep.warn(e, f"equality {key} has no ODE counterpart, ignored", key=f"equality {key}")
    try:
        if e.tag == "weld":
            ji = b.add_fixed(b1, b2)
        else:
            T1 = bodies[i1]["T"]
            a = ld.floats(e, "anchor", cls, 3, (0, 0, 0))
            ji = b.add_ball(b1, b2, anchor=T1[:3, :3] @ a + T1[:3, 3])
    except ValueError as err:
        raise rep.error(e, str(err)) from None
    ld.info["joints"][e.attrib.get("name", f"equality{ji}")] = ji


def _inverse_weights(ld: _Loader, b: WorldBuilder) -> np.ndarray:
    """MuJoCo's dof_invweight0 of hinge and slide dofs: the diagonal of M^-1 at qpos0
    (the build pose), M the joint-space inertia with the joints' armature (computed
    once per load, on the first dampratio)."""
    info = ld.info
    if ld.invweight is None:
        co = info["coordinates"]
        arm = np.zeros(co.nv)
        for name, j in zip(co.names, co.joints):
            if j.kind in ("hinge", "slide"):
                arm[co.dof_address(name)] = b.joints[info["joints"][name]]["axes"][0]["armature"]
        bb = b.bodies
        M = co.mass_matrix(np.array([x["pos"] for x in bb]), np.array([x["quat"] for x in bb]),
                           np.array([x["mass"] for x in bb]), np.array([x["inertia"] for x in bb]),
                           arm)
        ld.invweight = np.diag(np.linalg.inv(M))
    return ld.invweight


def _actuator(ld: _Loader, a: Node, info: dict, b: WorldBuilder) -> None:
    rep = ld.rep
    if a.tag not in ("motor", "position", "velocity", "general"):
        rep.warn(a, f"actuator <{a.tag}> is not supported, ignored", key=f"actuator {a.tag}")
        return
    cls = ld.cls_of(a, "main")
    jname = a.attrib.get("joint")
    if jname is None:
        rep.warn(a, "only joint transmissions are supported (tendon / site / body: ignored)",
                 key="actuator transmission")
        return
    if jname not in info["joint_type"]:
        raise rep.error(a, f"no hinge, slide or ball joint named {jname!r} in this model "
                           "(free joints have no ODE joint)")
    if info["joint_type"][jname] not in ("hinge", "slide"):
        rep.warn(a, "actuators on ball joints are not supported, ignored", key="actuator ball")
        return

    def get(key, default=None):
        # MuJoCo keeps one actuator default per class, which <general>, <motor>, <position>
        # ... in a <default> all write: look in the element's own tag first, then the others
        v = ld.attr(a, key, cls)
        for tag in ("general", "motor", "position", "velocity"):
            if v is None and tag != a.tag:
                v = ld.defaults[cls].get(tag, {}).get(key)
        return default if v is None else v

    def nums(key, default):
        v = get(key)
        if v is None:
            return list(default)
        try:
            return [float(x) for x in v.split()]
        except ValueError:
            raise rep.error(a, f"attribute {key!r}: expected numbers (got {v!r})") from None

    gear = nums("gear", (1.0,))[0]
    if a.tag == "motor":
        gain, bias = 1.0, (0.0, 0.0, 0.0)
    elif a.tag == "position":
        kp = nums("kp", (1.0,))[0]
        kv = nums("kv", (0.0,))[0]
        dr = nums("dampratio", (0.0,))[0]
        if dr != 0:
            if kv != 0:
                raise rep.error(a, "kv and dampratio cannot both be set (MuJoCo: one or the other)")
            # MuJoCo's compiler: kv = 2 dampratio sqrt(kp m), m the reflected inertia
            # 1 / (gear^2 dof_invweight0) of the joint at qpos0
            w = _inverse_weights(ld, b)[info["coordinates"].dof_address(jname)]
            kv = 2.0 * dr * math.sqrt(kp / (gear * gear * w))
        gain, bias = kp, (0.0, -kp, -kv)
    elif a.tag == "velocity":
        kv = nums("kv", (1.0,))[0]
        gain, bias = kv, (0.0, 0.0, -kv)
    else:
        gt, bt = get("gaintype", "fixed"), get("biastype", "none")
        if gt != "fixed" or bt not in ("none", "affine"):
            rep.warn(a, f"general actuator with gaintype {gt!r} / biastype {bt!r} is not "
                        "supported, ignored", key="actuator general")
            return
        gp = nums("gainprm", (1.0,)) + [0.0]
        bp = nums("biasprm", (0.0,)) + [0.0, 0.0, 0.0]
        gain, bias = gp[0], tuple(bp[:3]) if bt == "affine" else (0.0, 0.0, 0.0)
    if get("dyntype", "none") != "none":
        rep.warn(a, f"actuator dyntype {get('dyntype')!r} (activation dynamics) is not "
                    "supported; the control acts directly", key="actuator dyntype")

    def rng(key):
        r = nums(key, ())
        lim = get(key.replace("range", "limited"), "auto")
        on = lim == "true" or (lim == "auto" and ld.autolimits and len(r) == 2)
        if on and len(r) != 2:
            raise rep.error(a, f"{key} needs 2 numbers when limited (got {r})")
        return (r[0], r[1]) if on else None

    ctrlrange = rng("ctrlrange")
    ir = nums("inheritrange", (0.0,))[0] if a.tag == "position" else 0.0
    if ir > 0:
        if ctrlrange is not None:
            raise rep.error(a, "ctrlrange and inheritrange cannot both be set")
        if jname not in info["joint_range"]:
            raise rep.error(a, f"inheritrange needs joint {jname!r} to have a range")
        lo, hi = info["joint_range"][jname]
        c, half = 0.5 * (lo + hi), 0.5 * ir * (hi - lo)
        ctrlrange = (c - half, c + half)
    # the velocity term b2 qdot (kv of a position or velocity servo) as the joint's
    # implicit damping (gear^2 * -b2), as MuJoCo's implicitfast integrator treats it: an
    # explicit kv diverges once h kv exceeds twice the joint's inertia
    ji = info["joints"][jname]
    if bias[2] < 0:
        ax = b.joints[ji]["axes"][0]
        ax["damping"] = float(ax["damping"]) + gear * gear * -float(bias[2])
        bias = (bias[0], bias[1], 0.0)
    info["actuators"][a.attrib.get("name", f"actuator{len(info['actuators'])}")] = Actuator(
        name=a.attrib.get("name", ""), kind=a.tag, joint=ji,
        joint_type=info["joint_type"][jname], ref=info["joint_ref"][jname], gear=gear,
        gain=float(gain), bias=tuple(float(x) for x in bias), ctrlrange=ctrlrange,
        forcerange=rng("forcerange"), joint_name=jname)


def _q_qd(model, state, joint_type: str, joint: int, ref: float):
    from jaxode import joint_api as ja
    if joint_type == "hinge":
        return (ref + ja.hinge_angle(model, state, joint),
                ja.hinge_angle_rate(model, state, joint))
    return (ref + ja.slider_position(model, state, joint),
            ja.slider_position_rate(model, state, joint))


def _add_joint_force(model, state, joint_type: str, joint: int, f):
    from jaxode import joint_api as ja
    if joint_type == "hinge":
        return ja.add_hinge_torque(model, state, joint, f)
    return ja.add_slider_force(model, state, joint, f)


def actuator_forces(model, state, actuators, ctrl):
    """(nact,) each actuator's joint torque [N m] / force [N], ``gear * force``,
    for the controls ``ctrl`` (one per actuator, in the order of ``actuators``,
    a list or the dict ``builder.mjcf_info["actuators"]``). MuJoCo's model:
    ``ctrl`` clamped to ctrlrange, actuator force ``gain * ctrl + b0 + b1 * l +
    b2 * ldot`` (the actuator's length l = gear * q, q = ref + ODE angle or
    position, ldot its rate) clamped to forcerange (a servo's kv is the joint's
    implicit damping instead: :class:`Actuator`). Traced (jit / vmap friendly)."""
    import jax.numpy as jnp

    acts = list(actuators.values()) if isinstance(actuators, dict) else list(actuators)
    ctrl = jnp.asarray(ctrl)
    if ctrl.shape[-1:] != (len(acts),):
        raise ValueError(f"ctrl must have {len(acts)} entries, one per actuator "
                         f"(got shape {ctrl.shape})")
    out = []
    for k, act in enumerate(acts):
        u = ctrl[k]
        if act.ctrlrange is not None:
            u = jnp.clip(u, act.ctrlrange[0], act.ctrlrange[1])
        q, qd = _q_qd(model, state, act.joint_type, act.joint, act.ref)
        # MuJoCo's bias acts on the actuator's length and velocity: gear * q, gear * qdot
        f = act.gain * u + act.bias[0] + act.bias[1] * (act.gear * q) + act.bias[2] * (act.gear * qd)
        if act.forcerange is not None:
            f = jnp.clip(f, act.forcerange[0], act.forcerange[1])
        out.append(act.gear * f)
    return jnp.stack(out) if out else jnp.zeros((0,), state.pos.dtype)


def apply_fluid(model, state, table, fluid: Fluid):
    """Add MuJoCo's inertia-box fluid forces (``fluid``: ``mjcf_info["fluid"]``;
    ``table``: ``mjcf_info["mj_bodies"]``) to ``state``'s force and torque
    accumulators, at each MJCF body's centre of mass
    (:func:`jaxode.tools.mujoco_data.fluid_forces`); call before each
    ``jaxode.step``. Traced."""
    from jaxode import api
    from jaxode.tools import mujoco_data as md

    data = md.body_data(table, state)
    ft = md.fluid_forces(table, state, fluid, data)
    for i in range(1, table.nbody):
        k = int(table.ode_body[i])
        if k < 0 or table.mass[i] <= 0:
            continue
        state = api.add_force_at_pos(state, k, ft[i, 3:], data.xipos[i])
        state = api.add_torque(state, k, ft[i, :3])
    return state


def apply_actuators(model, state, actuators, ctrl):
    """Add the actuators' joint torques [N m] / forces [N] for the controls
    ``ctrl`` (:func:`actuator_forces`: one per actuator, in the order of
    ``actuators``, a list or the dict ``builder.mjcf_info["actuators"]``) to
    ``state``; call before each ``jaxode.step``. Traced (jit / vmap friendly)."""
    acts = list(actuators.values()) if isinstance(actuators, dict) else list(actuators)
    f = actuator_forces(model, state, acts, ctrl)
    for k, act in enumerate(acts):
        state = _add_joint_force(model, state, act.joint_type, act.joint, f[k])
    return state
