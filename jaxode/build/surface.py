"""Contact surface parameters of a geom, and how two surfaces combine.

A :class:`Surface` holds the fields of Gazebo's ``<surface>`` element / ODE's
``dSurfaceParameters`` for ONE geom. When two geoms touch, their surfaces are
combined into the parameters of the contact joint (Gazebo's ODE plugin rules,
``ODEPhysics::Collide``):

Not per-world parameters (the builder decides them): ``friction``, the model
given explicitly by either geom (two different explicit models on a colliding
pair are an error at build time; neither explicit: the world's
``friction_model``, "pyramid"); ``max_contacts``, min(max_contacts_1,
max_contacts_2) points per geom pair. Where ``kp`` is set the contact's ERP and
CFM come from the combined kp and kd at the step h: ERP = h kp / (h kp + kd),
CFM = 1 / (h kp + kd); ``fdir1`` is turned to the world and projected onto the
contact plane (none: ODE's dPlaneSpace directions); ``motion1/2`` are the
friction rows' target velocity, ``motionN`` is added to the normal row's;
Gazebo's torsional bound is 3 pi/16 * torsional * a * normal force
(docs/ODE_FEATURES.md).

``max_vel`` and ``min_depth`` default to infinity so that the world values
(ODE's dWorldSetContactMaxCorrectingVel / dWorldSetContactSurfaceLayer) govern
unless a surface asks for less, as the Gazebo tutorial describes.

Every per-world field's rule (``v_1``, ``v_2``: the two geoms' values, after
each one's own unset rule; the step runs them from
:data:`jaxode.params_spec.COMBINE_RULES`):
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

from jaxode import params_spec
from jaxode.params_spec import check_value
from jaxode.types import FRICTION_MODELS


def _finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite (got {value!r})")


@dataclasses.dataclass(frozen=True)
class Surface:
    """Contact surface of one geom (Gazebo ``<surface>``; ODE dSurfaceParameters).

    mu: Coulomb friction coefficient in fdir1 (pyramid model), or the constant
        force limit in newtons ("box" model); >= 0, ``inf`` allowed.
    mu2: the same in the second friction direction; ``None`` means equal to mu.
    fdir1: first friction direction in the geom frame; ``None`` = ODE's default.
    friction: "pyramid" (ODE dContactApprox1: bound = mu * normal force),
        "box" (constant bound mu in newtons) or "cone" (Gazebo's cone_model:
        the two friction forces jointly within the ellipse of semi-axes
        mu * normal force, mu2 * normal force); ``None`` = the world's model.
    bounce: restitution in [0, 1]; bounce_vel: minimum incoming speed [m/s]
        for a bounce, >= 0.
    soft_erp: in [0, 1] or ``None`` (world erp); soft_cfm: >= 0 or ``None``
        (world cfm).
    max_vel: maximum correcting velocity [m/s] >= 0 (``inf`` = world value;
        0 = no penetration correction, as ODE and Gazebo).
    min_depth: depth [m] >= 0 allowed before correction (``inf`` = world value).
    max_contacts: contact points per geom pair, >= 1 (Gazebo default 10).
    slip1, slip2: force-dependent slip [m/(s N)] >= 0 in the two friction
        directions (ODE dContactSlip1/2, Gazebo ``<slip1>``/``<slip2>``): the
        CFM of the friction rows, so a contact held by friction creeps at
        ``slip * force``. ``None`` (default): unset, the friction rows keep the
        world's CFM (exact ODE without slip); slip2 ``None`` with slip1 set
        means equal to slip1. A small slip is the smoothing knob for
        gradients through sticking friction (see README, Gradients).
    restitution_threshold: RaiSim's name for bounce_vel [m/s] (ODE semantics:
        no bounce below this incoming speed; above it the full restitution).
        Give one of the two.
    kp [N/m] > 0, kd [N s/m] >= 0: contact stiffness and damping (Gazebo
        ``<kp>``/``<kd>``); when kp is given they replace soft_erp/soft_cfm
        with ERP = h kp / (h kp + kd), CFM = 1 / (h kp + kd) at the step h
        (ODE manual); a body of weight W resting on n contacts sinks W/(n kp).
    motion1, motion2 [m/s]: velocity of this geom's surface along the
        contact's friction directions t1, t2 (ODE dContactMotion1/2; a
        conveyor belt: set fdir1 on the belt geom to fix t1); motionN [m/s]:
        surface velocity outward along its normal (dContactMotionN).
    static_mu >= mu: static friction coefficient; static_speed [m/s] > 0: the
        tangential contact speed below which it applies (RaiSim's material
        pair): the coefficient is interpolated linearly from static_mu at rest
        to mu at static_speed, using the speed at the start of the step.
    rolling >= 0 (dimensionless, RaiSim's mu_r): rolling friction, angular
        rows about the friction directions bounded by rolling * r_e * normal
        force, r_e the rolling radius (the body centre's distance from the
        contact plane; the mean of the two bodies when both move).
        spinning >= 0 [m] (RaiSim's mu_spin): the spin row about the normal
        bounded by spinning * normal force. torsional >= 0, patch_radius [m],
        surface_radius [m], use_patch_radius (Gazebo ``<torsional>``, its ODE's
        dContactMu3 row): the spin row bounded by
        3 pi/16 * torsional * a * normal force, a = patch_radius, or
        sqrt(surface_radius * depth) with use_patch_radius False (pairs combine
        min torsional, max patch_radius, 1/(1/R1 + 1/R2), both use_patch_radius).
        ``None`` = off; any surface using them adds three rows per contact.
    material: name of a material of the builder's table (``add_material``,
        ``set_material_pair``, ``use_materials``); between two geoms with
        materials the pair's properties replace these fields (see
        :mod:`jaxode.build.materials`).
    """

    mu: float = 1.0
    mu2: Optional[float] = None
    fdir1: Optional[Sequence[float]] = None
    friction: Optional[str] = None
    bounce: float = 0.0
    bounce_vel: float = 0.1
    soft_erp: Optional[float] = None
    soft_cfm: Optional[float] = None
    max_vel: float = math.inf
    min_depth: float = math.inf
    max_contacts: int = 10
    slip1: Optional[float] = None
    slip2: Optional[float] = None
    restitution_threshold: Optional[float] = None
    kp: Optional[float] = None
    kd: Optional[float] = None
    motion1: float = 0.0
    motion2: float = 0.0
    motionN: float = 0.0
    static_mu: Optional[float] = None
    static_speed: Optional[float] = None
    rolling: Optional[float] = None
    spinning: Optional[float] = None
    torsional: Optional[float] = None
    patch_radius: float = 0.0
    material: Optional[str] = None

    @property
    def bounce_vel_value(self) -> float:
        """bounce_vel, or restitution_threshold where given."""
        return self.bounce_vel if self.restitution_threshold is None else self.restitution_threshold

    @property
    def angular(self) -> bool:
        """Does this surface need the rolling/spinning rows?"""
        return ((self.rolling or 0.0) > 0 or (self.spinning or 0.0) > 0
                or (self.torsional or 0.0) > 0)

    def validate(self, where: str = "surface") -> None:
        """Raise ValueError naming the field, its allowed range and the value
        received (ranges from :mod:`jaxode.params_spec`)."""
        for spec in _GEOM_SPECS:
            v = getattr(self, spec.name)
            label = f"{where}.{spec.name}"
            if v is None:
                if spec.unset is None and spec.surface_default is not None:
                    raise ValueError(f"{label} must be a number in {spec.range_text(False)} "
                                     f"(got None)")
                continue
            if spec.shape:
                try:
                    a = np.asarray(v, np.float64)
                except (TypeError, ValueError):
                    a = None
                if a is None or a.shape != tuple(spec.shape):
                    raise ValueError(f"{label} must be a {spec.shape[0]}-vector of finite "
                                     f"numbers (got {v!r})")
                check_value(spec.name, a, label=label)
            else:
                check_value(spec.name, v, label=label)
        if self.friction is not None and self.friction not in FRICTION_MODELS:
            raise ValueError(
                f"{where}.friction must be one of {sorted(FRICTION_MODELS)} or None "
                f"(got {self.friction!r})")
        if self.restitution_threshold is not None:
            check_value("bounce_vel", self.restitution_threshold,
                        label=f"{where}.restitution_threshold")
            if self.bounce_vel != 0.1 and self.bounce_vel != self.restitution_threshold:
                raise ValueError(f"{where}: give bounce_vel or restitution_threshold (the same "
                                 f"parameter), not both (got {self.bounce_vel!r} and "
                                 f"{self.restitution_threshold!r})")
        if self.kd is not None and self.kp is None:
            raise ValueError(f"{where}.kd needs kp (kd alone does not define a contact "
                             f"stiffness; got kd={self.kd!r})")
        if (self.kp is not None) and (self.soft_erp is not None or self.soft_cfm is not None):
            raise ValueError(f"{where}: give kp/kd or soft_erp/soft_cfm, not both")
        if self.static_mu is not None:
            if self.static_mu < self.mu:
                raise ValueError(f"{where}.static_mu must be >= mu = {self.mu!r} (got {self.static_mu!r})")
            if self.static_speed is None:
                raise ValueError(f"{where}.static_speed must be given with static_mu (m/s > 0)")
        _finite(f"{where}.patch_radius", self.patch_radius)
        if self.torsional is not None and self.spinning is not None:
            raise ValueError(f"{where}: give spinning or torsional (with patch_radius), not both")
        if self.material is not None and (not isinstance(self.material, str) or not self.material):
            raise ValueError(f"{where}.material must be a non-empty string or None "
                             f"(got {self.material!r})")
        if not isinstance(self.max_contacts, int) or self.max_contacts < 1:
            raise ValueError(f"{where}.max_contacts must be an integer >= 1 (got {self.max_contacts!r})")


def extend_surface(cls: type, specs=None) -> type:
    """``cls`` with one more field per geom parameter of ``specs`` (default
    :data:`jaxode.params_spec.SPECS_LIST`) that it does not declare yet, with the
    declaration's ``surface_default`` (None = unset): a surface parameter
    declared in :mod:`jaxode.params_spec` becomes a ``Surface`` keyword without
    editing this file."""
    specs = params_spec.SPECS_LIST if specs is None else specs
    have = {f.name for f in dataclasses.fields(cls)}
    extra = [s for s in specs if s.entity == "geom" and s.name not in have
             and s.surface_attr == s.name]
    if not extra:
        return cls
    new = dataclasses.make_dataclass(
        cls.__name__, [(s.name, Optional[float], dataclasses.field(default=s.surface_default))
                       for s in extra], bases=(cls,), frozen=True)
    new.__module__, new.__qualname__ = cls.__module__, cls.__qualname__
    new.__doc__ = (cls.__doc__ or "") + "".join(
        f"\n    {s.name}: {s.doc} ({s.range_text(False)}; None: {s.unset or 'unset'})."
        for s in extra)
    return new


Surface = extend_surface(Surface)
_GEOM_SPECS = [s for s in params_spec.SPECS_LIST if s.entity == "geom"]


def _rules_table() -> str:
    rows = [(sp.name, params_spec.combine_text(sp)) for sp in params_spec.SPECS_LIST
            if sp.entity == "geom" and sp.combine]
    width = max(len(n) for n, _ in rows)
    rule = "=" * width + " " + "=" * 60
    return "\n".join([rule, f"{'field':<{width}} combined value", rule]
                     + [f"{n:<{width}} {t}" for n, t in rows] + [rule])


__doc__ = (__doc__ or "") + "\n" + _rules_table() + "\n"
