"""Every per-world parameter (a field of :class:`jaxode.Params`) declared once.

``SPECS`` lists the fields in ``Params``' order (a public API: save files and
positional construction depend on it; new fields go at the end). One
:class:`ParamSpec` says, for each field:

* ``entity``: what one value belongs to: ``world`` (one per world), ``body``
  (nbody,), ``geom`` (ngeom,), ``joint_axis`` (njoint, 3: ODE's dParam*,
  dParam*2, dParam*3), ``joint`` (njoint,) or ``material_pair`` (M, M);
  ``shape`` the shape of one entity's value (``()``, ``(3,)``, ``(3, 3)``);
* ``unit``, the allowed range ``lo``/``hi`` with open or closed ends and
  whether ``inf`` is a value (``inf_ok``), NaN is never allowed;
* ``default``: ODE's default (or Gazebo's for surfaces, jaxode's where the
  two lack one), as the builder stores it;
* ``unset``: how "unset" is encoded and what it resolves to (``None``: the
  field has no unset value). Encoded unset values are accepted by ``step``,
  ``sweep`` and friends; the builder and :class:`jaxode.Surface` take
  ``None`` instead;
* ``combine``: how the values of two geoms' surfaces make the contact's
  value (Gazebo's ODE plugin, ``ODEPhysics::Collide``; see
  :mod:`jaxode.build.surface`);
* ``switch``: how the feature is switched on: ``"always"`` (the field is
  always present), ``"joints"`` (present when the model has joints),
  ``"materials"`` (present when the scene names materials),
  ``"none"`` (optional: ``None`` on hand-built Params switches the feature
  off; the builder always fills it), or ``"flag:<Model field>"`` (the rows
  exist only when that static Model flag is set at build time, so changing the
  value at run time from 0 does nothing unless the model was built with it);
* ``surface``: for geom fields, the :class:`jaxode.Surface` attribute the
  builder reads (``None``: the field's own name), ``surface_default`` the
  Surface's default;
* ``doc``: one line.

From this table come: ``Params``' fields and docstring (:func:`params_doc`,
:func:`params_fields`), the builder's and ``Surface.validate``'s range checks
(:func:`check_value`), :func:`jaxode.tools.sweep`'s validation, and
:func:`check_params` (used by ``step``, ``rollout`` and the envs): wrong
shapes and dtypes raise at trace time; concrete out-of-range values raise at
call time; out-of-range values only known inside ``jit``/``vmap`` flag the
world (``State.nonfinite``, see :func:`values_ok`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

_INF = math.inf

#: A step ``dt`` [s] must be finite and in [DT_MIN, DT_MAX]. ODE requires only
#: dt > 0; jaxode also refuses steps so small that 1/dt (used by every ERP
#: correction) is meaningless or so large that no rigid-body integrator
#: resolves them (10 s).
DT_MIN = 1e-9
DT_MAX = 10.0

def state_bound(dtype) -> float:
    """The largest |component| [m, m/s, rad/s] of a body's position, velocity or
    angular velocity whose 3-vector's squared length stays finite in ``dtype``:
    sqrt(finfo.max / 3) (1.07e19 float32, 7.7e153 float64). The builder refuses
    larger initial values; ``step``/``rollout`` flag a world whose state holds
    one (``State.nonfinite``)."""
    return float(np.sqrt(np.finfo(dtype).max / 3.0))


ENTITIES = ("world", "body", "geom", "joint_axis", "joint", "material_pair")

@dataclasses.dataclass(frozen=True)
class ParamSpec:
    """The declaration of one per-world parameter (see the module docstring)."""

    name: str
    entity: str
    doc: str
    unit: str = ""
    lo: float = -_INF
    hi: float = _INF
    lo_open: bool = False
    hi_open: bool = False
    inf_ok: bool = False
    default: Any = 0.0
    unset: Optional[str] = None
    combine: Optional[str] = None
    switch: str = "always"
    shape: tuple = ()
    surface: Optional[str] = None
    surface_default: Any = None
    needs: tuple = ()

    @property
    def unset_negative(self) -> bool:
        """Negative values encode "unset"."""
        return self.unset is not None and self.unset.startswith("negative")

    @property
    def optional(self) -> bool:
        """The field may be ``None`` in a Params (see ``switch``)."""
        return self.switch != "always"

    @property
    def surface_attr(self) -> str:
        return self.surface or self.name

    def range_text(self, unset: bool = True) -> str:
        """``[0, 1]``, ``(0, inf) kg``, ``[0, inf] (inf allowed)`` ..."""
        closed_hi = not self.hi_open and (self.hi != _INF or self.inf_ok)
        closed_lo = not self.lo_open and (self.lo != -_INF or self.inf_ok)
        txt = ("[" if closed_lo else "(") + f"{self.lo:g}, {self.hi:g}" + ("]" if closed_hi else ")")
        if self.unit:
            txt += f" {self.unit}"
        if self.inf_ok:
            txt += " (inf allowed)"
        if unset and self.unset_negative:
            txt += " or negative (unset: the default applies)"
        return txt

    def shape_for(self, model) -> tuple:
        """The field's per-world shape in ``model``."""
        if self.entity == "world":
            lead = ()
        elif self.entity == "body":
            lead = (model.nbody,)
        elif self.entity == "geom":
            lead = (model.ngeom,)
        elif self.entity == "joint_axis":
            lead = (model.njoint, 3)
        elif self.entity == "joint":
            lead = (model.njoint,)
        else:
            m = len(model.material_names)
            lead = (m, m)
        return lead + tuple(self.shape)


# ------------------------------------------------- how two surfaces combine
# Gazebo's ODE plugin (ODEPhysics::Collide) and ODE's own conventions: a geom
# field's ``combine`` names one of these rules. The step runs them
# (jaxode.sim.constraint.mix_surfaces calls :func:`combine`), and every table
# of the rules (Params' doc, jaxode.build.surface's) is written from this one.
# ``neither``: the value when neither geom sets the field (the world's, or a
# fallback the caller gives); "unset" = negative, as the field's ``unset`` says.
COMBINE_RULES = {
    "min": "min(v_1, v_2)",
    "max": "max(v_1, v_2)",
    "min_world": "min(v_1, v_2, the world's value)",
    "min_set": "min of the values set; neither set: {neither}",
    "max_set": "max of the values set; neither set: {neither}",
    "series_set": "v_1 v_2 / (v_1 + v_2) (springs in series) of the values set, one set: it",
    "sum_set": "v_1 + v_2, unset counting 0",
    "sum": "v_1 + v_2",
    "diff": "v_2 - v_1",
    "harmonic": "1 / (1/v_1 + 1/v_2)",
    "first_nonzero": "geom 1's if non-zero, else geom 2's",
}


def combine(name: str, a, b, neither=None, set_a=None):
    """The contact's value of geom field ``name`` from the two geoms' values ``a``
    and ``b`` (arrays of any matching shape, traced or not), by the field's rule
    (:data:`COMBINE_RULES`). ``neither``: the value where neither geom sets it
    (``*_set`` and ``min_world`` rules); ``set_a``: for ``first_nonzero``, where
    geom 1's vector is set (the rule's vectors may already be turned to the world)."""
    import jax.numpy as jnp

    rule = SPECS[name].combine
    if rule == "min":
        return jnp.minimum(a, b)
    if rule == "max":
        return jnp.maximum(a, b)
    if rule == "min_world":
        return jnp.minimum(jnp.minimum(a, b), neither)
    if rule in ("min_set", "max_set"):
        sa, sb = a >= 0, b >= 0
        both = jnp.minimum(a, b) if rule == "min_set" else jnp.maximum(a, b)
        return jnp.where(sa & sb, both, jnp.where(sa | sb, jnp.where(sa, a, b), neither))
    if rule == "series_set":
        sa, sb = a >= 0, b >= 0
        va, vb = jnp.where(sa, a, 1.0), jnp.where(sb, b, 1.0)
        return jnp.where(sa & sb, va * vb / jnp.where(va + vb > 0, va + vb, 1.0),
                         jnp.where(sa, va, jnp.where(sb, vb, neither)))
    if rule == "sum_set":
        return jnp.maximum(a, 0.0) + jnp.maximum(b, 0.0)
    if rule == "sum":
        return a + b
    if rule == "diff":
        return b - a
    if rule == "harmonic":
        inv = 1.0 / a + 1.0 / b                 # 1/0 = inf: the result 0
        return jnp.where(inv > 0, 1.0 / jnp.where(inv > 0, inv, 1.0), jnp.inf)
    if rule == "first_nonzero":  # vectors: components on axis 1 (either layout)
        return jnp.where(jnp.expand_dims(set_a, 1), a, b)
    raise ValueError(f"combine: {name!r} has no combination rule (got {rule!r})")


def combine_text(spec: "ParamSpec") -> str:
    """The field's rule in words (for the tables)."""
    text = COMBINE_RULES[spec.combine]
    if "{neither}" in text:
        neither = (spec.unset or "unset").split(":", 1)[-1].strip()
        text = text.format(neither=neither)
    return text


def _w(name, doc, **kw):
    return ParamSpec(name, "world", doc, **kw)


def _g(name, doc, **kw):
    return ParamSpec(name, "geom", doc, **kw)


def _ja(name, doc, **kw):
    return ParamSpec(name, "joint_axis", doc, switch="joints", **kw)


def _mp(name, doc, **kw):
    return ParamSpec(name, "material_pair", doc, switch="materials",
                     unset="negative: the surfaces' combined value", **kw)


_NONNEG = dict(lo=0.0)
_UNIT = dict(lo=0.0, hi=1.0)

SPECS_LIST = (
    # ------------------------------------------------------------------ world
    _w("gravity", "gravity vector (dWorldSetGravity)", unit="m/s^2", shape=(3,),
       default=(0.0, 0.0, 0.0)),
    _w("erp", "global error reduction parameter (dWorldSetERP)", default=0.2, **_UNIT),
    _w("cfm", "global constraint force mixing (dWorldSetCFM; 1e-10 with jax_enable_x64)",
       default=1e-5, **_NONNEG),
    _w("sor", "QuickStep's SOR relaxation w (dWorldSetQuickStepW)", lo=0.0, hi=2.0,
       lo_open=True, hi_open=True, default=1.3),
    _w("contact_max_correcting_vel", "maximum contact correcting velocity "
       "(dWorldSetContactMaxCorrectingVel; 0 = no penetration correction)", unit="m/s",
       inf_ok=True, default=_INF, **_NONNEG),
    _w("contact_surface_layer", "depth allowed before correction "
       "(dWorldSetContactSurfaceLayer)", unit="m", default=0.0, **_NONNEG),
    _w("linear_damping", "linear velocity damping scale per step (dWorldSetLinearDamping)",
       default=0.0, **_UNIT),
    _w("angular_damping", "angular velocity damping scale per step "
       "(dWorldSetAngularDamping)", default=0.0, **_UNIT),
    _w("linear_damping_threshold", "damping only above this speed", unit="m/s",
       default=0.01, **_NONNEG),
    _w("angular_damping_threshold", "damping only above this angular speed", unit="rad/s",
       default=0.01, **_NONNEG),
    _w("max_angular_speed", "angular speed limit (dWorldSetMaxAngularSpeed)", unit="rad/s",
       lo=0.0, lo_open=True, inf_ok=True, default=_INF),
    # ----------------------------------------------------------------- bodies
    ParamSpec("body_mass", "body", "mass (dMass.mass)", unit="kg", lo=0.0, lo_open=True,
              default=1.0),
    ParamSpec("body_inertia", "body", "inertia about the centre of mass, body frame "
              "(symmetric, positive definite)", unit="kg m^2", shape=(3, 3),
              default="identity"),
    # --------------------------------------------------------- geom surfaces
    _g("mu", "Coulomb friction coefficient along fdir1 (newtons for the box model)",
       inf_ok=True, default=1.0, surface_default=1.0, combine="min", **_NONNEG),
    _g("mu2", "friction coefficient along the second direction", inf_ok=True, default=-1.0,
       unset="negative: equal to the geom's mu", combine="min", **_NONNEG),
    _g("fdir1", "first friction direction in the geom frame", shape=(3,),
       default=(0.0, 0.0, 0.0), unset="zero vector: ODE's dPlaneSpace directions",
       combine="first_nonzero"),
    _g("bounce", "restitution (dContactBounce)", default=0.0, surface_default=0.0,
       combine="min", **_UNIT),
    _g("bounce_vel", "minimum incoming speed for a bounce", unit="m/s", default=0.1,
       surface="bounce_vel_value", surface_default=0.1, combine="min", **_NONNEG),
    _g("soft_erp", "contact ERP (dContactSoftERP)", default=-1.0,
       unset="negative: the world's erp", combine="min_set", **_UNIT),
    _g("soft_cfm", "contact CFM (dContactSoftCFM)", default=-1.0,
       unset="negative: the world's cfm", combine="max_set", **_NONNEG),
    _g("max_vel", "maximum correcting velocity (0: none)", unit="m/s", inf_ok=True,
       default=_INF, surface_default=_INF,
       combine="min_world", **_NONNEG),
    _g("min_depth", "depth allowed before correction", unit="m", inf_ok=True, default=_INF,
       surface_default=_INF,
       combine="min_world", **_NONNEG),
    # ----------------------------------------------------------------- joints
    _ja("joint_lo_stop", "low stop (dParamLoStop)", unit="rad or m", inf_ok=True,
        default=-_INF),
    _ja("joint_hi_stop", "high stop (dParamHiStop), >= joint_lo_stop", unit="rad or m",
        inf_ok=True, default=_INF),
    _ja("joint_vel", "motor target velocity (dParamVel)", unit="rad/s or m/s", default=0.0),
    _ja("joint_fmax", "motor force limit (dParamFMax; 0 = no motor)", unit="N m or N",
        inf_ok=True, default=0.0, **_NONNEG),
    _ja("joint_fudge_factor", "dParamFudgeFactor", default=1.0, **_UNIT),
    _ja("joint_bounce", "stop restitution (dParamBounce)", default=0.0, **_UNIT),
    _ja("joint_cfm", "motor row CFM (dParamCFM)", default=-1.0,
        unset="negative: the world's cfm", **_NONNEG),
    _ja("joint_stop_erp", "limit row ERP (dParamStopERP)", default=-1.0,
        unset="negative: the world's erp", **_UNIT),
    _ja("joint_stop_cfm", "limit row CFM (dParamStopCFM)", default=-1.0,
        unset="negative: the world's cfm", **_NONNEG),
    ParamSpec("joint_suspension_erp", "joint", "hinge-2 suspension ERP "
              "(dParamSuspensionERP)", switch="joints", default=-1.0,
              unset="negative: the world's erp", **_UNIT),
    ParamSpec("joint_suspension_cfm", "joint", "hinge-2 suspension CFM "
              "(dParamSuspensionCFM)", switch="joints", default=-1.0,
              unset="negative: the world's cfm", **_NONNEG),
    # ------------------------------------------------- optional geom surfaces
    _g("slip1", "force-dependent slip along t1 (dContactSlip1): the friction row's CFM",
       unit="m/(s N)", default=-1.0, unset="negative: the world's cfm (no slip)",
       combine="min_set", switch="none", needs=("slip2",), **_NONNEG),
    _g("slip2", "force-dependent slip along t2 (dContactSlip2)", unit="m/(s N)",
       default=-1.0, unset="negative: slip1", combine="min_set",
       switch="none", **_NONNEG),
    _g("kp", "contact stiffness: replaces soft_erp/soft_cfm by ERP = h kp/(h kp + kd), "
       "CFM = 1/(h kp + kd)", unit="N/m", lo=0.0, lo_open=True, default=-1.0,
       unset="negative: soft_erp/soft_cfm apply", combine="series_set", switch="none"),
    _g("kd", "contact damping (with kp)", unit="N s/m", default=-1.0,
       unset="negative: 0", combine="sum_set", switch="none", **_NONNEG),
    _g("motion1", "surface velocity along t1 (dContactMotion1)", unit="m/s", default=0.0,
       surface_default=0.0, combine="diff", switch="none",
       needs=("motion2",)),
    _g("motion2", "surface velocity along t2 (dContactMotion2)", unit="m/s", default=0.0,
       surface_default=0.0, combine="diff", switch="none"),
    _g("motionN", "surface velocity outward along the normal (dContactMotionN)",
       unit="m/s", default=0.0, surface_default=0.0, combine="sum",
       switch="none"),
    _g("static_mu", "static friction coefficient (>= mu), blended in below static_speed",
       inf_ok=True, default=-1.0, unset="negative: mu", combine="min_set",
       switch="none", **_NONNEG),
    _g("static_speed", "tangential speed below which static_mu blends in", unit="m/s",
       lo=0.0, lo_open=True, default=-1.0, unset="negative: no static friction",
       combine="min_set", switch="none"),
    _g("rolling", "rolling friction (bound rolling * r_e * normal force)", default=-1.0,
       unset="negative: off", combine="min_set",
       switch="flag:angular_friction", **_NONNEG),
    _g("spinning", "spinning friction (bound spinning * normal force)", unit="m",
       default=-1.0, unset="negative: off",
       combine="min_set", switch="flag:angular_friction", **_NONNEG),
    # ------------------------------------------------------- material pairs
    _mp("mat_friction", "pair friction coefficient (mu and mu2)", inf_ok=True, default=-1.0,
        **_NONNEG),
    _mp("mat_restitution", "pair restitution", default=-1.0, **_UNIT),
    _mp("mat_restitution_threshold", "pair bounce_vel", unit="m/s", default=-1.0, **_NONNEG),
    _mp("mat_static_friction", "pair static friction coefficient", inf_ok=True, default=-1.0,
        **_NONNEG),
    _mp("mat_static_speed", "pair static friction speed", unit="m/s", lo=0.0, lo_open=True,
        default=-1.0),
    _mp("mat_rolling", "pair rolling friction", default=-1.0, **_NONNEG),
    _mp("mat_spinning", "pair spinning friction", unit="m", default=-1.0, **_NONNEG),
    _mp("mat_soft_erp", "pair contact ERP", default=-1.0, **_UNIT),
    _mp("mat_soft_cfm", "pair contact CFM", default=-1.0, **_NONNEG),
    # ------------------------- Gazebo's torsional friction (SDF <friction><torsional>)
    _g("torsional", "Gazebo's torsional friction coefficient (<torsional><coefficient>, "
       "its ODE's mu3): the spin row about the normal is bounded by 3 pi/16 * torsional * a * "
       "normal force (uniform pressure on a patch of radius a; a = patch_radius, or "
       "sqrt(surface_radius * depth) without use_patch_radius)", default=-1.0,
       unset="negative: the spinning value applies", combine="min_set",
       switch="flag:angular_friction", **_NONNEG),
    _g("patch_radius", "Gazebo's torsional contact patch radius a", unit="m", default=0.0,
       surface_default=0.0, combine="max",
       switch="flag:angular_friction", **_NONNEG),
    _g("surface_radius", "Gazebo's torsional surface radius R (a = sqrt(R depth) without "
       "use_patch_radius)", unit="m", inf_ok=True, default=0.0, surface_default=0.0,
       combine="harmonic", switch="flag:angular_friction", **_NONNEG),
    _g("use_patch_radius", "Gazebo's use_patch_radius: 1 = patch_radius, 0 = "
       "sqrt(surface_radius * depth)", default=1.0, surface_default=1.0,
       combine="min", switch="flag:angular_friction", **_UNIT),
    # ------------------------------------------- Gazebo's joint dynamics (SDF <dynamics>)
    ParamSpec("joint_damping", "joint_axis", "joint damping: the joint force -damping * rate "
              "(hinge and slider joints). Implicit by default (Model.joint_passive: a row of "
              "the solve, the end-of-step rate, as MuJoCo's Euler; stable for any damping); "
              "with WorldBuilder(joint_damping=\"explicit\") Gazebo's form: the start-of-step "
              "rate, added before the step as dJointAddHingeTorque / dJointAddSliderForce "
              "(ODEJoint::ApplyExplicitStiffnessDamping)", unit="N m s/rad or N s/m",
              default=0.0, switch="none", **_NONNEG),
    ParamSpec("joint_friction", "joint_axis", "Gazebo's joint friction: > 0 makes the "
              "axis's motor a zero-velocity motor with fmax = friction (ODEJoint::SetParam"
              "(\"friction\"): dParamVel 0, dParamFMax friction), replacing joint_vel and "
              "joint_fmax; 0: off", unit="N m or N", inf_ok=True, default=0.0, switch="none",
              **_NONNEG),
    # ------------------------------------- ODE's auto-disable (docs/ODE_FEATURES.md 5)
    ParamSpec("body_auto_disable", "body", "dBodySetAutoDisableFlag: 1 = the body disables "
              "itself once idle (0 = never; values in between count as 1)", default=0.0,
              switch="flag:auto_disable", **_UNIT),
    ParamSpec("body_auto_disable_linear_threshold", "body", "dBodySetAutoDisableLinear"
              "Threshold: idle when |average linear velocity| <= this", unit="m/s",
              inf_ok=True, default=0.01, switch="flag:auto_disable", **_NONNEG),
    ParamSpec("body_auto_disable_angular_threshold", "body", "dBodySetAutoDisableAngular"
              "Threshold: idle when |average angular velocity| <= this", unit="rad/s",
              inf_ok=True, default=0.01, switch="flag:auto_disable", **_NONNEG),
    ParamSpec("body_auto_disable_steps", "body", "dBodySetAutoDisableSteps: idle steps "
              "before disabling (an integer)", unit="steps", default=10.0,
              switch="flag:auto_disable", **_NONNEG),
    ParamSpec("body_auto_disable_time", "body", "dBodySetAutoDisableTime: idle time before "
              "disabling (both it and the steps must have run out)", unit="s", default=0.0,
              switch="flag:auto_disable", **_NONNEG),
    # ------------------- joint-space passive dynamics (MuJoCo's joint attributes, SDF/URDF)
    ParamSpec("joint_armature", "joint_axis", "armature: inertia added to the joint's own "
              "coordinate (MuJoCo's armature, a rotor's reflected inertia): a row of the "
              "solve whose force -armature * (rate' - rate) / h resists the axis's "
              "acceleration (hinge and slider joints)", unit="kg m^2 or kg", default=0.0,
              switch="flag:joint_passive", **_NONNEG),
    ParamSpec("joint_stiffness", "joint_axis", "joint spring: the joint force -stiffness * "
              "(q - springref) at the start-of-step coordinate q (the angle or position the "
              "stops read), applied before the solve (MuJoCo's Euler and Gazebo's "
              "ApplyExplicitStiffnessDamping; hinge and slider joints)",
              unit="N m/rad or N/m", default=0.0, switch="flag:joint_passive", **_NONNEG),
    ParamSpec("joint_springref", "joint_axis", "the joint coordinate at which the spring "
              "(joint_stiffness) is relaxed", unit="rad or m", default=0.0,
              switch="flag:joint_passive"),
)

#: name -> ParamSpec, in Params' field order.
SPECS = {s.name: s for s in SPECS_LIST}
for _s in SPECS_LIST:  # every rule is one of the executable ones
    if _s.combine is not None and _s.combine not in COMBINE_RULES:
        raise ValueError(f"params_spec: {_s.name}: combine {_s.combine!r} is not one of "
                         f"{sorted(COMBINE_RULES)}")
assert len(SPECS) == len(SPECS_LIST)


def params_fields() -> list:
    """``(name, type, dataclasses.field)`` triples for ``dataclasses.make_dataclass``:
    the always-present fields have no default, the optional ones default to None
    (``Params``' layout)."""
    import jax
    out, optional_seen = [], False
    for s in SPECS_LIST:
        if s.optional:
            optional_seen = True
            out.append((s.name, jax.Array, dataclasses.field(default=None)))
        else:
            if optional_seen:
                raise AssertionError(f"params_spec: always-present field {s.name} after an "
                                     "optional one (Params' order would break)")
            out.append((s.name, jax.Array))
    return out


def _fmt_default(v) -> str:
    if isinstance(v, tuple):
        return "(" + ", ".join(f"{x:g}" for x in v) + ")"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def params_table() -> str:
    """A reStructuredText-ish table of every field (for docs and ``Params.__doc__``)."""
    lines = []
    for s in SPECS_LIST:
        shp = {"world": "", "body": "nbody", "geom": "ngeom", "joint_axis": "njoint, 3",
               "joint": "njoint", "material_pair": "M, M"}[s.entity]
        parts = ([shp] if shp else []) + [str(d) for d in s.shape]
        full = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        lines.append(f"  {s.name} {full} {s.range_text(unset=False)}: {s.doc}; "
                     f"default {_fmt_default(s.default)}.")
        extra = []
        if s.unset:
            extra.append(f"unset = {s.unset}")
        if s.combine:
            extra.append(f"two surfaces: {combine_text(s)}")
        if s.switch != "always":
            extra.append({"joints": "present when the model has joints",
                          "materials": "present when the scene names materials",
                          "none": "optional (None = feature off)"}.get(
                s.switch, f"acts only when the static Model.{s.switch[5:]} is set"))
        if extra:
            lines.append("      " + "; ".join(extra) + ".")
    return "\n".join(lines)


def params_doc() -> str:
    return ("Per-world physical parameters. Every leaf may carry a leading batch axis\n"
            "    (vmap ``step``/``rollout`` over it).\n\n"
            "    Generated from :mod:`jaxode.params_spec` (name (shape) range: meaning;\n"
            "    ODE's default; unset encoding, two-surface combination rule, switch):\n\n"
            + params_table() + "\n")


# ----------------------------------------------------------------- checking
def allowed(spec: ParamSpec, v, xp=np):
    """Elementwise: the value is in the spec's range (or an unset encoding);
    ``xp`` numpy (host) or jax.numpy (traced)."""
    ok = ~xp.isnan(v)
    if not spec.inf_ok:
        ok = ok & xp.isfinite(v)
    in_lo = (v > spec.lo) if spec.lo_open else (v >= spec.lo)
    in_hi = (v < spec.hi) if spec.hi_open else (v <= spec.hi)
    rng = in_lo & in_hi
    if spec.unset_negative:
        rng = rng | (v < 0)
    return ok & rng


def check_value(name: str, value, label: Optional[str] = None, unset: bool = False,
                prefix: str = "") -> Any:
    """Raise ValueError if ``value`` (number or array) is outside field ``name``'s
    range; the message names ``label`` (default the field), the allowed range
    and the first bad value received. ``unset``: accept the unset encoding.
    Returns the value as float (scalars) or a float64 array."""
    spec = SPECS[name]
    label = label or name
    try:
        v = np.asarray(value, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{prefix}{label} must be a number in {spec.range_text(unset)} "
                         f"(got {value!r})") from None
    s = spec if unset or not spec.unset_negative else dataclasses.replace(spec, unset=None)
    ok = allowed(s, v, np)
    if not np.all(ok):
        bad = v[~ok].flat[0] if v.ndim else v
        where = ""
        if v.ndim:
            idx = tuple(int(i) for i in np.argwhere(~ok)[0])
            where = f" at index {idx if len(idx) > 1 else idx[0]}"
        raise ValueError(f"{prefix}{label} must be in {spec.range_text(unset)} "
                         f"(got {float(bad)!r}{where})")
    return float(v) if v.ndim == 0 else v


def _is_tracer(x) -> bool:
    import jax
    return isinstance(x, jax.core.Tracer)


def _shape_msg(field: str, spec: ParamSpec, want: tuple, got: tuple, model) -> str:
    what = {"world": "one value per world", "body": f"one per body (nbody={model.nbody})",
            "geom": f"one per geom (ngeom={model.ngeom})",
            "joint_axis": f"one per joint and axis (njoint={model.njoint}, 3 axes)",
            "joint": f"one per joint (njoint={model.njoint})",
            "material_pair": f"one per material pair (M={len(model.material_names)})"
            }[spec.entity]
    msg = (f"params.{field} must have shape {want} ({what}"
           + (f", each of shape {spec.shape}" if spec.shape else "") + f") (got shape {got})")
    if len(got) > len(want) and tuple(got[len(got) - len(want):]) == tuple(want):
        lead = tuple(got[:len(got) - len(want)])
        msg += (f": leading axes {lead} look like a batch of worlds; step/rollout take ONE "
                "world's params: vmap over the batch (jax.vmap(jaxode.step, in_axes=(None, 0, "
                "None, 0))), or pass a model from another scene's builder?")
    elif spec.entity != "world":
        msg += "; are these params from another model?"
    return msg


def check_params(model, params, where: str = "params", values: bool = True) -> None:
    """Check ``params`` against ``model`` (one world, no batch axis).

    TypeError: not a Params (a Model or a State passed instead), a field of a
    non-numeric dtype. ValueError: a field of the wrong shape (naming it, the
    expected shape and the one received), a field the model needs missing
    (``None``), and, for concrete (non-traced) values and ``values=True``, a
    value out of range (naming the field, the range and the value). Traced
    values are checked at run time by :func:`values_ok`.
    """
    from jaxode.types import Model, Params, State
    if not isinstance(params, Params):
        hint = ""
        if isinstance(params, Model):
            hint = " (a Model was passed: use model.params)"
        elif isinstance(params, State):
            hint = " (a State was passed where Params belong: check the argument order)"
        raise TypeError(f"{where} must be a jaxode.Params{hint} (got {type(params).__name__})")
    concrete = values
    for spec in SPECS_LIST:
        x = getattr(params, spec.name)
        if x is None:
            need = (spec.switch == "always"
                    or (spec.switch == "joints" and model.njoint > 0)
                    or (spec.switch == "materials" and len(model.material_names) > 0)
                    or (spec.switch.startswith("flag:")
                        and bool(getattr(model, spec.switch[5:], False))))
            if need:
                raise ValueError(f"{where}.{spec.name} is None but this model needs it "
                                 f"(expected shape {spec.shape_for(model)}: {spec.doc})")
            continue
        for other in spec.needs:
            if getattr(params, other) is None:
                raise ValueError(f"{where}.{other} is None but {where}.{spec.name} is given "
                                 f"(expected shape {SPECS[other].shape_for(model)})")
        dtype = getattr(x, "dtype", None)
        if dtype is None:
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise TypeError(f"{where}.{spec.name} must be a float array or number "
                                f"(got {type(x).__name__}: {x!r})")
            dtype = np.dtype(float)
        if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)) \
                or np.issubdtype(dtype, np.bool_):
            raise TypeError(f"{where}.{spec.name} must have a real floating dtype "
                            f"(got {dtype})")
        want = spec.shape_for(model)
        got = tuple(np.shape(x))
        if got != want:
            raise ValueError(_shape_msg(spec.name, spec, want, got, model).replace(
                "params.", f"{where}.", 1))
        if _is_tracer(x):
            concrete = False
    if concrete:
        check_values(params, where)
        check_passive_switch(model, params, where)


def check_passive_switch(model, params, where: str = "params") -> None:
    """Refuse concrete joint armature, springs or implicit damping that the model
    has no rows for (built with ``Model.joint_passive`` off): they would be
    silently ignored by the step."""
    if getattr(model, "joint_passive", False):
        return
    names = ["joint_armature", "joint_stiffness", "joint_springref"]
    if not getattr(model, "joint_damping_explicit", True):
        names.append("joint_damping")
    for name in names:
        x = getattr(params, name, None)
        if x is not None and np.size(x) and np.any(np.asarray(x) != 0):
            raise ValueError(
                f"{where}.{name} has nonzero values but the model was built without the joint "
                f"passive rows (Model.joint_passive is False: no hinge or slider had damping, "
                f"armature or a spring at build time); build it with "
                f"WorldBuilder(joint_passive=True) to set them per world")


def check_values(params, where: str = "params") -> None:
    """Host-side range check of every present field (concrete values), plus the
    cross-field rules (stops ordered, inertia symmetric positive definite)."""
    for spec in SPECS_LIST:
        x = getattr(params, spec.name)
        if x is not None:
            check_value(spec.name, np.asarray(x), label=f"{where}.{spec.name}", unset=True)
    lo, hi = params.joint_lo_stop, params.joint_hi_stop
    if lo is not None and hi is not None and np.shape(lo) == np.shape(hi):
        lo, hi = np.asarray(lo), np.asarray(hi)
        if np.any(hi < lo):
            i = tuple(int(k) for k in np.argwhere(hi < lo)[0])
            raise ValueError(f"{where}.joint_hi_stop must be >= joint_lo_stop (got lo "
                             f"{float(lo[i])!r}, hi {float(hi[i])!r} at index {i})")
    mats = np.asarray(params.body_inertia, np.float64).reshape((-1, 3, 3))
    if mats.size:
        scale = np.max(np.abs(mats), axis=(-2, -1), keepdims=True)
        finite = bool(np.all(np.isfinite(mats)))
        sym = finite and bool(np.all(np.abs(mats - np.swapaxes(mats, -1, -2)) <= 1e-5 * scale))
        if not sym or np.any(np.linalg.eigvalsh(0.5 * (mats + np.swapaxes(mats, -1, -2))) <= 0):
            raise ValueError(f"{where}.body_inertia: every body's inertia must be a symmetric, "
                             f"positive definite 3x3 matrix [kg m^2] (got "
                             f"{mats.tolist()!r})")


def values_ok(params):
    """Scalar bool (traceable): every present field is in range (unset encodings
    allowed), the stops are ordered and the inertias have finite, positive
    diagonals. ``step``/``rollout`` flag a world whose params fail this."""
    import jax.numpy as jnp
    # The fields packed into one vector per dtype and checked against per-entry
    # bounds in one elementwise pass and one reduction (``allowed``'s rule):
    # one reduction per field made ~40 small kernels, each compiled on its own
    # (~0.5 s of a step's first call; XLA splits the reduction of a
    # concatenation of computed checks back into one per part).
    packed: dict = {}
    for spec in SPECS_LIST:
        x = getattr(params, spec.name)
        if x is not None and np.size(x):
            x = jnp.asarray(x)
            packed.setdefault(x.dtype, []).append((spec, jnp.ravel(x)))
    ok = jnp.asarray(True)
    for dtype, parts in packed.items():
        v = jnp.concatenate([x for _, x in parts])
        n = [x.shape[0] for _, x in parts]

        def per_entry(attr, as_dtype=bool):
            return np.repeat(np.asarray([getattr(s, attr) for s, _ in parts], as_dtype), n)

        lo, hi = per_entry("lo", dtype), per_entry("hi", dtype)
        good = ~jnp.isnan(v) & (per_entry("inf_ok") | jnp.isfinite(v))
        in_lo = jnp.where(per_entry("lo_open"), v > lo, v >= lo)
        in_hi = jnp.where(per_entry("hi_open"), v < hi, v <= hi)
        rng = (in_lo & in_hi) | (per_entry("unset_negative") & (v < 0))
        ok = ok & jnp.all(good & rng)
    lo, hi = params.joint_lo_stop, params.joint_hi_stop
    if lo is not None and hi is not None and np.size(lo):
        ok = ok & jnp.all(jnp.asarray(hi) >= jnp.asarray(lo))
    inert = jnp.asarray(params.body_inertia)
    if inert.size:
        d = jnp.diagonal(inert, axis1=-2, axis2=-1)
        ok = ok & jnp.all(jnp.isfinite(inert)) & jnp.all(d > 0)
    return ok


def dt_ok(dt):
    """Scalar bool (traceable): ``DT_MIN <= dt <= DT_MAX`` (false for NaN)."""
    import jax.numpy as jnp
    dt = jnp.asarray(dt)
    return (dt >= DT_MIN) & (dt <= DT_MAX)


def check_dt(dt, where: str = "dt") -> None:
    """Raise ValueError for a concrete ``dt`` outside [DT_MIN, DT_MAX] seconds (NaN,
    inf, <= 0 included); TypeError for a non-number or a non-scalar. Traced
    values pass (``step`` flags the world at run time)."""
    if isinstance(dt, bool) or isinstance(dt, (str, bytes)) or dt is None:
        raise TypeError(f"{where} must be a number of seconds (got {dt!r})")
    shape = np.shape(dt)
    if shape != ():
        raise ValueError(f"{where} must be a scalar number of seconds, shape () per world "
                         f"(got shape {shape}; for one dt per world vmap over it)")
    if _is_tracer(dt):
        return
    try:
        v = float(dt)
    except (TypeError, ValueError):
        raise TypeError(f"{where} must be a number of seconds (got {dt!r})") from None
    if not (DT_MIN <= v <= DT_MAX):
        raise ValueError(f"{where} must be a finite number of seconds in [{DT_MIN:g}, "
                         f"{DT_MAX:g}] (ODE requires dt > 0; got {v!r})")
