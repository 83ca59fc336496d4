"""Named materials and a material-pair table (RaiSim / Choreonoid-AGX style).

A geom names its material with ``Surface(material="steel")``. When both geoms
of a contact name a material, the pair's properties replace the surfaces'
combined values for the fields below; a contact with a geom without a
material keeps the surface rules of :mod:`jaxode.build.surface`.

Pair properties (RaiSim's ``MaterialPairProperties``; negative = unset, the
surfaces' combined value applies):

====================== ========================================= ===========
property               meaning                                   replaces
====================== ========================================= ===========
friction               Coulomb coefficient (both directions)     mu, mu2
restitution            coefficient of restitution in [0, 1]      bounce
restitution_threshold  no bounce below this impact speed [m/s]   bounce_vel
static_friction        static coefficient (>= friction)          static_mu
static_speed           its speed threshold [m/s] (> 0)           static_speed
rolling                rolling friction (dimensionless)          rolling
spinning               spinning friction [m]                     spinning
soft_erp, soft_cfm     contact softness                          soft_erp/cfm
====================== ========================================= ===========

Pairs not in the table are resolved at build time by the table's ``rule``:

- ``"default"`` (RaiSim): the default pair (``set_default``; RaiSim's
  defaults friction 0.8, restitution 0, threshold 0).
- ``"agx"`` (Choreonoid's AGX rules, from per-material values):
  friction = sqrt(f1 f2) (roughness), restitution = sqrt((1 - v1)(1 - v2))
  with the restitution viscosity v = 1 - restitution of each material, i.e.
  sqrt(e1 e2); spinning/rolling/static/threshold: min of those set;
  soft_erp min, soft_cfm max (spookDamping = max).
- ``"gazebo"``: the Surface rules: min of every value set, soft_cfm max.

A per-material value missing falls back to the default pair's value. The
resolved tables are ``Params`` fields ``mat_<property>`` of shape (M, M)
(M materials in ``model.material_names`` order, symmetric; the step reads
the upper triangle i <= j), so a batch axis sweeps a pair property in one
call; :func:`set_pair` writes one pair (both orders).
"""
from __future__ import annotations

import math
import os
import xml.parsers.expat
from typing import Optional

import jax.numpy as jnp
import numpy as np

from jaxode import params_spec

# the surface field each pair property replaces (the table above); the "gazebo" and
# "agx" rules combine two materials' values as that field's surface rule does
# (params_spec.COMBINE_RULES: the larger for a max rule, else the smaller)
REPLACES = dict(friction="mu", restitution="bounce", restitution_threshold="bounce_vel",
                static_friction="static_mu", static_speed="static_speed", rolling="rolling",
                spinning="spinning", soft_erp="soft_erp", soft_cfm="soft_cfm")
PAIR_PROPS = tuple(REPLACES)
RULES = ("default", "agx", "gazebo")
_DEFAULT_PAIR = dict(friction=0.8, restitution=0.0, restitution_threshold=0.0)
# Property ranges: those of the Params fields mat_<property> (jaxode.params_spec).


def _check_props(where: str, props: dict) -> dict:
    out = {}
    for key, v in props.items():
        if key not in PAIR_PROPS:
            raise ValueError(f"{where}: unknown material property {key!r} "
                             f"(allowed: {', '.join(PAIR_PROPS)})")
        if v is None:
            continue
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: {key} must be a number (got {v!r})") from None
        out[key] = params_spec.check_value(f"mat_{key}", v, label=key, prefix=f"{where}: ")
    if "static_friction" in out and "friction" in out and out["static_friction"] < out["friction"]:
        raise ValueError(f"{where}: static_friction must be >= friction "
                         f"(got {out['static_friction']!r} < {out['friction']!r})")
    return out


class MaterialTable:
    """Materials, explicit pairs, a default pair and the rule for other pairs."""

    def __init__(self, rule: str = "default"):
        self.materials: dict[str, dict] = {}
        self.pairs: dict[tuple[str, str], dict] = {}
        self.default = dict(_DEFAULT_PAIR)
        self.set_rule(rule)

    def set_rule(self, rule: str) -> None:
        if rule not in RULES:
            raise ValueError(f"material rule must be one of {list(RULES)} (got {rule!r})")
        self.rule = rule

    def add_material(self, name: str, where: str = "add_material", **props) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: material name must be a non-empty string (got {name!r})")
        self.materials.setdefault(name, {}).update(_check_props(f"{where} {name!r}", props))

    def set_pair(self, name1: str, name2: str, where: str = "set_material_pair", **props) -> None:
        for n in (name1, name2):
            if not isinstance(n, str) or not n:
                raise ValueError(f"{where}: material names must be non-empty strings (got {n!r})")
            self.materials.setdefault(n, {})
        key = tuple(sorted((name1, name2)))
        self.pairs.setdefault(key, {}).update(_check_props(f"{where} ({name1!r}, {name2!r})", props))

    def set_default(self, where: str = "set_default_material", **props) -> None:
        self.default.update(_check_props(where, props))

    def merge(self, other: "MaterialTable") -> None:
        """Add ``other``'s materials, pairs and default (its values win) and its rule."""
        for n, p in other.materials.items():
            self.materials.setdefault(n, {}).update(p)
        for k, p in other.pairs.items():
            self.pairs.setdefault(k, {}).update(p)
        self.default.update(other.default)
        self.rule = other.rule

    # ---------------------------------------------------------------- resolve
    def _combine(self, a: dict, b: dict, key: str) -> Optional[float]:
        va, vb = a.get(key, self.default.get(key)), b.get(key, self.default.get(key))
        if va is None or vb is None:
            return va if vb is None else vb
        if self.rule == "agx" and key == "friction":
            return math.sqrt(va * vb)
        if self.rule == "agx" and key == "restitution":
            # sqrt((1 - v1)(1 - v2)) with the restitution viscosity v = 1 - e
            return math.sqrt(va * vb)
        if params_spec.SPECS[REPLACES[key]].combine in ("max", "max_set"):
            return max(va, vb)
        return min(va, vb)

    def pair_props(self, name1: str, name2: str) -> dict:
        """The resolved properties of a pair (None = unset)."""
        key = tuple(sorted((name1, name2)))
        if key in self.pairs:
            base = {k: self.default.get(k) for k in PAIR_PROPS}
            base.update(self.pairs[key])
            return base
        if self.rule == "default":
            return {k: self.default.get(k) for k in PAIR_PROPS}
        a, b = self.materials.get(name1, {}), self.materials.get(name2, {})
        return {k: self._combine(a, b, k) for k in PAIR_PROPS}

    def tables(self, names: list[str]) -> dict[str, np.ndarray]:
        """(M, M) arrays per property for materials ``names`` (-1 = unset)."""
        m = len(names)
        out = {k: np.full((m, m), -1.0) for k in PAIR_PROPS}
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                for k, v in self.pair_props(a, b).items():
                    if v is not None:
                        out[k][i, j] = v
        return out


def set_pair(model, params, name1: str, name2: str, **props):
    """``params`` with material pair (name1, name2) set to ``props`` (both orders).

    Values may be arrays with a leading batch axis when ``params`` is batched
    (e.g. a sweep over the steel-rubber friction). Unknown names raise.
    """
    names = list(getattr(model, "material_names", ()))
    for n in (name1, name2):
        if n not in names:
            raise ValueError(f"set_pair: unknown material {n!r} (the model has {names})")
    i, j = names.index(name1), names.index(name2)
    changes = {}
    for key, v in props.items():
        if key not in PAIR_PROPS:
            raise ValueError(f"set_pair: unknown material property {key!r} "
                             f"(allowed: {', '.join(PAIR_PROPS)})")
        t = getattr(params, "mat_" + key)
        v = jnp.asarray(v, t.dtype)
        t = t.at[..., i, j].set(v).at[..., j, i].set(v)
        changes["mat_" + key] = t
    return params.replace(**changes)


# ------------------------------------------------------------------ loaders
_RAISIM_ATTR = {"friction": "friction", "restitution": "restitution",
                "restitution_threshold": "restitution_threshold",
                "static_friction": "static_friction",
                "static_friction_velocity_threshold": "static_speed",
                "rolling_friction": "rolling", "spinning_friction": "spinning"}

# Choreonoid/AGX keys: mapped ones, and the AGX-only ones accepted and ignored
# (no counterpart in ODE's contact model).
_AGX_MATERIAL_MAP = {"roughness": "friction"}
_AGX_MATERIAL_IGNORED = {"density", "youngsModulus", "spookDamping", "poissonRatio",
                         "surfaceViscosity", "adhesionForce", "adhesivOverlap",
                         "wireYoungsModulusStretch", "wireSpookDampingStretch",
                         "wireYoungsModulusBend", "wireSpookDampingBend"}
_AGX_CONTACT_MAP = {"friction": "friction", "restitution": "restitution"}
_AGX_CONTACT_IGNORED = {"youngsModulus", "spookDamping", "secondaryFriction", "surfaceViscosity",
                        "secondarySurfaceViscosity", "adhesionForce", "adhesivOverlap",
                        "frictionModel", "contactReductionMode", "contactReductionBinResolution",
                        "primaryDirection", "referenceBodyName", "referenceLinkName"}


def _load_raisim_xml(path: str) -> MaterialTable:
    table = MaterialTable("default")
    stack: list[str] = []
    seen_material = [False]
    parser = xml.parsers.expat.ParserCreate()

    def start(tag, attrs):
        line = parser.CurrentLineNumber
        where = f"{path}:{line}: <{tag}>"
        parent = stack[-1] if stack else None
        stack.append(tag)
        if tag == "material" and parent in (None, "raisim"):
            seen_material[0] = True
            if attrs:
                raise ValueError(f"{where}: unexpected attribute(s) {sorted(attrs)}")
            return
        if parent != "material":
            return  # other RaiSim elements are not ours
        if tag not in ("default", "pair_prop"):
            raise ValueError(f"{where}: unknown element in <material> (allowed: <default>, "
                             "<pair_prop>)")
        props, names = {}, []
        for key, v in attrs.items():
            if tag == "pair_prop" and key in ("name1", "name2"):
                names.append(v)
                continue
            if key not in _RAISIM_ATTR:
                raise ValueError(f"{where}: unknown attribute {key!r} (allowed: "
                                 f"{', '.join((['name1', 'name2'] if tag == 'pair_prop' else []) + list(_RAISIM_ATTR))})")
            props[_RAISIM_ATTR[key]] = v
        if "static_friction" in props and "static_speed" not in props:
            raise ValueError(f"{where}: static_friction needs static_friction_velocity_threshold")
        if tag == "default":
            table.set_default(where=where, **props)
        else:
            if len(names) != 2:
                raise ValueError(f"{where}: <pair_prop> needs name1 and name2")
            table.set_pair(names[0], names[1], where=where, **props)

    def end(tag):
        stack.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    with open(path, "rb") as f:
        try:
            parser.ParseFile(f)
        except xml.parsers.expat.ExpatError as e:
            raise ValueError(f"{path}:{e.lineno}: XML error: {e}") from None
    if not seen_material[0]:
        raise ValueError(f"{path}: no <material> element")
    return table


def _load_choreonoid_yaml(path: str) -> MaterialTable:
    try:
        import yaml
    except ImportError:
        raise ImportError(f"{path}: reading .yaml material files needs PyYAML: "
                          f"pip install pyyaml (or pip install jaxode[yaml])") from None

    with open(path, "r", encoding="utf-8") as f:
        text = f.read()
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: YAML error: {e}") from None
    table = MaterialTable("agx")

    def line(node):
        return node.start_mark.line + 1

    def mapping(node, what):
        if not isinstance(node, yaml.MappingNode):
            raise ValueError(f"{path}:{line(node)}: {what} must be a mapping")
        return [(k.value, k, v) for k, v in node.value]

    def scalar(key, knode, vnode):
        if not isinstance(vnode, yaml.ScalarNode):
            raise ValueError(f"{path}:{line(knode)}: {key} must be a number")
        return vnode.value  # checked (and converted) with the property's range

    if root is None:
        raise ValueError(f"{path}: empty file")
    for top, knode, vnode in mapping(root, "the file"):
        if top not in ("materials", "contactMaterials"):
            raise ValueError(f"{path}:{line(knode)}: unknown key {top!r} (allowed: materials, "
                             "contactMaterials)")
        if not isinstance(vnode, yaml.SequenceNode):
            raise ValueError(f"{path}:{line(vnode)}: {top} must be a list")
        for item in vnode.value:
            where = f"{path}:{line(item)}"
            entries = mapping(item, f"an entry of {top}")
            props, names = {}, None
            for key, kn, vn in entries:
                w = f"{path}:{line(kn)}"
                if top == "materials":
                    if key == "name":
                        names = [vn.value]
                    elif key == "viscosity":
                        props["restitution"] = 1.0 - float(scalar(key, kn, vn))
                    elif key in _AGX_MATERIAL_MAP:
                        props[_AGX_MATERIAL_MAP[key]] = scalar(key, kn, vn)
                    elif key not in _AGX_MATERIAL_IGNORED:
                        raise ValueError(f"{w}: unknown material key {key!r}")
                else:
                    if key == "materials":
                        if not isinstance(vn, yaml.SequenceNode) or len(vn.value) != 2:
                            raise ValueError(f"{w}: materials must be a list of two names")
                        names = [x.value for x in vn.value]
                    elif key in _AGX_CONTACT_MAP:
                        props[_AGX_CONTACT_MAP[key]] = scalar(key, kn, vn)
                    elif key not in _AGX_CONTACT_IGNORED:
                        raise ValueError(f"{w}: unknown contactMaterials key {key!r}")
            try:
                if top == "materials":
                    if not names:
                        raise ValueError(f"{where}: material without a name")
                    table.add_material(names[0], where=where, **props)
                else:
                    if not names:
                        raise ValueError(f"{where}: contact material without materials: [a, b]")
                    table.set_pair(names[0], names[1], where=where, **props)
            except (TypeError, ValueError) as e:
                raise ValueError(str(e)) from None
    return table


def load_materials(path: str) -> MaterialTable:
    """Read a material table: RaiSim XML (a ``<material>`` block with
    ``<default>`` and ``<pair_prop>``; rule "default") or Choreonoid's
    ``materials.yaml`` (``materials`` with roughness/viscosity and
    ``contactMaterials``; rule "agx"). Unknown elements, attributes or keys and
    bad values raise ValueError naming the file, the line and the key. AGX keys
    without an ODE counterpart (youngsModulus, spookDamping, adhesion, ...)
    are accepted and ignored. Use with ``WorldBuilder.use_materials``.
    """
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".xml":
        return _load_raisim_xml(path)
    if ext in (".yaml", ".yml"):
        return _load_choreonoid_yaml(path)
    raise ValueError(f"{path}: unknown material file type {ext!r} (.xml: RaiSim, .yaml: Choreonoid)")
