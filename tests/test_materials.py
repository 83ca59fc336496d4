"""Materials and the material-pair table (issue 5): build-time resolution against the
seeds' rules (RaiSim pair table and default, Choreonoid/AGX combination formulas),
the file loaders and their errors, and one batched physics run that sweeps a pair's
friction in one call."""
from __future__ import annotations

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from truths import slide_recursion

# Compile quickly (same semantics): compile time dominates these tests.
from fast_compile import OPTIONS as _FAST  # noqa: E402


def _jit(fn):
    return jax.jit(fn, compiler_options=_FAST)

DATA = os.path.join(os.path.dirname(__file__), "data")
G, H = 9.81, 0.01


def _pair(model, prop, a, b):
    names = list(model.material_names)
    t = np.asarray(getattr(model.params, "mat_" + prop))
    i, j = sorted((names.index(a), names.index(b)))
    return float(t[i, j])


def _scene(b, names):
    b.add_plane(surface=jaxode.Surface(material=names[0]))
    body = b.add_body(pos=(0.0, 0.0, 0.1))
    for k, n in enumerate(names[1:]):
        b.add_sphere(0.1, body=body, pos=(0.0, 0.3 * k, 0.0), surface=jaxode.Surface(material=n))
    return b.build()


def test_raisim_xml_pairs_default_and_symmetry():
    table = jaxode.load_materials(os.path.join(DATA, "raisim_materials.xml"))
    b = jaxode.WorldBuilder()
    b.use_materials(table)
    b.add_material("copper")  # no pair: RaiSim's default pair applies
    model = _scene(b, ["steel", "rubber", "ball", "ground", "copper"])
    assert _pair(model, "restitution", "steel", "steel") == pytest.approx(0.95)
    assert _pair(model, "rolling", "steel", "steel") == pytest.approx(0.02)
    assert _pair(model, "restitution", "rubber", "steel") == pytest.approx(0.15)
    assert _pair(model, "static_friction", "ball", "ground") == pytest.approx(1.1)
    assert _pair(model, "static_speed", "ground", "ball") == pytest.approx(1e-3)
    assert _pair(model, "spinning", "ground", "ball") == pytest.approx(0.02)
    assert _pair(model, "friction", "copper", "steel") == pytest.approx(0.8)  # default
    assert _pair(model, "restitution", "copper", "rubber") == pytest.approx(0.0)
    assert _pair(model, "rolling", "copper", "steel") < 0  # unset
    assert model.angular_friction  # a pair uses rolling friction
    t = np.asarray(model.params.mat_friction)
    np.testing.assert_array_equal(t, t.T)


def test_choreonoid_yaml_contact_material_and_agx_rules():
    """Pairs in contactMaterials take its values; others follow the Choreonoid
    page: friction = sqrt(r1 r2), restitution = sqrt((1 - v1)(1 - v2))."""
    table = jaxode.load_materials(os.path.join(DATA, "choreonoid_materials.yaml"))
    assert table.rule == "agx"
    b = jaxode.WorldBuilder()
    b.use_materials(table)
    model = _scene(b, ["Ground", "agxMat5", "Ground"])
    assert _pair(model, "friction", "Ground", "agxMat5") == pytest.approx(0.416667)
    assert _pair(model, "restitution", "agxMat5", "Ground") == pytest.approx(0.1)
    assert _pair(model, "friction", "agxMat5", "agxMat5") == pytest.approx(math.sqrt(0.8 * 0.8))
    assert _pair(model, "restitution", "agxMat5", "agxMat5") == pytest.approx(
        math.sqrt((1 - 0.36) * (1 - 0.36)))
    assert _pair(model, "friction", "Ground", "Ground") == pytest.approx(0.5)
    assert _pair(model, "restitution", "Ground", "Ground") == pytest.approx(1.0)
    assert not model.angular_friction


def test_combination_rules_from_builder():
    b = jaxode.WorldBuilder()
    b.add_material("a", friction=0.9, restitution=0.5, soft_erp=0.3, soft_cfm=1e-4)
    b.add_material("b", friction=0.4, restitution=0.2, soft_erp=0.6, soft_cfm=1e-3)
    b.set_default_material(rule="gazebo")
    m = _scene(b, ["a", "b"])
    assert _pair(m, "friction", "a", "b") == pytest.approx(0.4)  # min
    assert _pair(m, "restitution", "a", "b") == pytest.approx(0.2)  # min, as Gazebo's bounce
    # Gazebo's ODEPhysics::Collide: erp = min(erp_1, erp_2), cfm = max(cfm_1, cfm_2)
    assert _pair(m, "soft_erp", "a", "b") == pytest.approx(0.3)
    assert _pair(m, "soft_cfm", "a", "b") == pytest.approx(1e-3)
    b.set_default_material(rule="agx")
    m = _scene(b, ["a", "b"])
    assert _pair(m, "friction", "a", "b") == pytest.approx(0.6)
    assert _pair(m, "restitution", "a", "b") == pytest.approx(math.sqrt(0.5 * 0.2))
    b.set_material_pair("b", "a", friction=0.3)  # explicit pair wins
    m = _scene(b, ["a", "b"])
    assert _pair(m, "friction", "a", "b") == pytest.approx(0.3)


@pytest.mark.parametrize("text,ext,needle", [
    ('<material>\n  <pair_prop name1="a" name2="b" friktion="0.3"/>\n</material>', ".xml",
     ":2: <pair_prop>: unknown attribute 'friktion'"),
    ('<material>\n  <default friction="-1"/>\n</material>', ".xml", ":2: <default>: friction must be"),
    ('<material>\n  <other/>\n</material>', ".xml", ":2: <other>: unknown element"),
    ('<material>\n <pair_prop name1="a" name2="b" restitution="1.5"/>\n</material>', ".xml",
     "restitution must be in [0, 1]"),
    ("materials:\n  - name: A\n    roughnes: 0.5\n", ".yaml", ":3: unknown material key 'roughnes'"),
    ("materials:\n  - name: A\n    roughness: abc\n", ".yaml", "friction must be a number"),
    ("contactMaterials:\n  - materials: [A, B]\n    frction: 0.2\n", ".yaml",
     ":3: unknown contactMaterials key 'frction'"),
    ("material:\n  - name: A\n", ".yaml", ":1: unknown key 'material'"),
])
def test_loader_errors_name_file_line_and_key(tmp_path, text, ext, needle):
    p = tmp_path / ("bad" + ext)
    p.write_text(text)
    with pytest.raises(ValueError) as e:
        jaxode.load_materials(p)
    assert str(p) in str(e.value) and needle in str(e.value), str(e.value)


def test_builder_errors():
    b = jaxode.WorldBuilder()
    with pytest.raises(ValueError, match="unknown material property 'frict'"):
        b.add_material("x", frict=0.3)
    with pytest.raises(ValueError, match="static_friction must be >= friction"):
        b.set_material_pair("x", "y", friction=0.5, static_friction=0.3)
    with pytest.raises(ValueError, match="rule must be one of"):
        b.set_default_material(rule="bullet")
    b.add_plane(surface=jaxode.Surface(material="nope"))
    b.add_body()
    with pytest.raises(ValueError, match="'nope' is not a material"):
        b.build()


# ------------------------------------------------------------------- physics
MUS = [0.2, 0.5, 0.8]


def test_sweep_of_a_pair_friction_is_one_batched_call():
    """Steel boxes slide on a rubber floor; the steel-rubber friction is swept
    over a batch of worlds (jaxode.set_material_pair with a batched value). Each
    stops where the discrete slide recursion puts it; a box without a material
    on the same floor keeps its surface's mu (0.3) in every world."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G))
    b.set_material_pair("steel", "rubber", friction=0.9, restitution=0.0)
    b.add_plane(surface=jaxode.Surface(mu=1.0, material="rubber"), category_bits=1, collide_bits=2)
    mass = jaxode.mass.box(size=(0.2, 0.2, 0.2), total=1.0)
    a = b.add_body(pos=(0.0, 0.0, 0.1), vel=(2.0, 0.0, 0.0), mass=mass)
    b.add_box((0.2, 0.2, 0.2), body=a, surface=jaxode.Surface(material="steel"),
              category_bits=2, collide_bits=1)
    c = b.add_body(pos=(0.0, 1.0, 0.1), vel=(2.0, 0.0, 0.0), mass=mass)
    b.add_box((0.2, 0.2, 0.2), body=c, surface=jaxode.Surface(mu=0.3),
              category_bits=2, collide_bits=1)
    model = b.build()
    params = jaxode.batch(model.params, len(MUS))
    params = jaxode.set_material_pair(model, params, "steel", "rubber",
                                      friction=jnp.asarray(MUS))
    n = 120
    states = jaxode.batch(jaxode.init(model), len(MUS))
    finals, _ = _jit(jax.vmap(lambda s, p: jaxode.rollout(model, s, n, H, params=p)))(
        states, params)
    x = np.asarray(finals.pos[:, :, 0])
    for k, mu in enumerate(MUS):
        ref = slide_recursion(2.0, mu, H, n)
        assert abs(x[k, 0] - ref) / ref < 0.01, (mu, x[k, 0], ref)
        ref_c = slide_recursion(2.0, 0.3, H, n)
        assert abs(x[k, 1] - ref_c) / ref_c < 0.01, (x[k, 1], ref_c)
