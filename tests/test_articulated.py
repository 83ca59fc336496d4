"""solver="articulated": QuickStep with the joints' equality rows solved exactly.

Truths: MuJoCo 4 run in the test (its Euler integrator: joints as coordinates,
armature in the mass matrix, damping implicit), ODE's big-matrix dWorldStep
(``solver="direct"``, an exact LCP per step, itself checked against libode in
tests/test_direct.py), and the closed form of the joint graph's forest.

* A damped, armatured 3-link chain (20 g links under 0.01 kg m^2 rotors, the
  mass ratio of MuJoCo's ant) follows MuJoCo's qpos to 1e-4 rad over 1 s with
  one sweep (no bounded row: exact), where QuickStep's 20 sweeps are 0.2 rad off.
* With contacts and joint limits, the sweeps converge to dWorldStep's answer.
* A batch with per-world armature gives each world its result alone, bitwise;
  gradients through the exact rows match finite differences.
"""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.sim.solver import tree as tree_lib

H = 0.005
STEPS = 200
Q0 = (0.6, -0.3, 0.2)


def _chain_xml(n=3, damping=0.02, armature=0.01, contact=False):
    flag = "" if contact else '<flag contact="disable"/>'
    s = (f'<mujoco><compiler angle="radian"/><option timestep="{H}" gravity="0 0 -9.81" '
         f'integrator="Euler">{flag}</option><worldbody>')
    for k in range(n):
        pos = "0 0 1" if k == 0 else "0 0 -0.1"
        s += (f'<body name="l{k}" pos="{pos}"><joint name="j{k}" type="hinge" axis="1 0 0" '
              f'damping="{damping}" armature="{armature}"/>'
              '<geom type="capsule" fromto="0 0 0 0 0 -0.1" size="0.01" mass="0.02"/>')
    return s + "</body>" * n + "</worldbody></mujoco>"


def _load(xml, solver, iterations):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # <flag contact>: nothing collides anyway
        b = jaxode.load_mjcf(xml)
    b.solver, b.iterations = solver, iterations
    return b, b.build()


def _mujoco_qpos(xml, q0, n):
    import mujoco
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qpos[:] = q0
    out = []
    for _ in range(n):
        mujoco.mj_step(m, d)
        out.append(d.qpos.copy())
    return np.array(out)


def _qpos_run(b, model, q0, n):
    co = b.mjcf_info["coordinates"]

    def body(s, _):
        s = jaxode.step(model, s, H)
        return s, co.qpos(s)

    s0 = co.set(jaxode.init(model), jnp.asarray(q0))
    return np.asarray(jax.jit(lambda s: jax.lax.scan(body, s, None, length=n))(s0)[1])


def test_armatured_chain_follows_mujoco_in_one_sweep():
    pytest.importorskip("mujoco")
    xml = _chain_xml()
    ref = _mujoco_qpos(xml, Q0, STEPS)
    assert ref[:, 0].min() < 0.05 < 0.55 < ref[:, 0].max()    # it swings (0.6 -> 0.01 rad)
    with jax.enable_x64(True):
        art = _qpos_run(*_load(xml, "articulated", 1), Q0, STEPS)
        pgs = _qpos_run(*_load(xml, "pgs", 20), Q0, STEPS)
    np.testing.assert_allclose(art, ref, rtol=0, atol=1e-4)
    # the scene needs the exact rows: QuickStep's sweeps are far off at RL iteration counts
    assert np.abs(pgs - ref).max() > 1e-2


# A small quadruped: a box torso, four legs of two capsules, hip and knee hinges
# with limits, armature and damping (the structure of MuJoCo's ant, written here).
QUAD = """<mujoco><compiler angle="degree"/>
  <option timestep="0.01" gravity="0 0 -9.81"/>
  <default><joint damping="0.5" armature="0.2" limited="true"/>
    <geom friction="{mu} 0.005 0.0001" density="5"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="torso" pos="0 0 0.45">
      <freejoint/>
      <geom type="box" size="0.15 0.15 0.05"/>
      {legs}
    </body>
  </worldbody></mujoco>"""
LEG = """<body pos="{x} {y} 0">
        <joint type="hinge" axis="0 0 1" range="-30 30"/>
        <geom type="capsule" fromto="0 0 0 {x} {y} 0" size="0.04"/>
        <body pos="{x} {y} 0">
          <joint type="hinge" axis="{ax} {ay} 0" range="30 70"/>
          <geom type="capsule" fromto="0 0 0 {x} {y} -0.25" size="0.04"/>
        </body>
      </body>"""


def _quad_xml(mu):
    legs = "".join(LEG.format(x=0.1 * sx, y=0.1 * sy, ax=-sy, ay=sx)
                   for sx, sy in ((1, 1), (-1, 1), (-1, -1), (1, -1)))
    return QUAD.format(legs=legs, mu=mu)


def test_contacts_and_limits_converge_to_dworldstep():
    """Frictionless feet: the step's LCP is then a convex QP whose velocities are
    unique, so any exact method gives dWorldStep's (with friction and four feet
    on a robot whose joints sit at their limits, the LCP has many solutions:
    dWorldStep's Dantzig loads all four feet, QuickStep's sweeps one)."""
    xml = _quad_xml(0.0)
    with jax.enable_x64(True):
        _, m = _load(xml, "articulated", 3000)
        _, m_dir = _load(xml, "direct", 1)
        step = jax.jit(lambda s: jaxode.step(m, s, 0.01))
        s = jaxode.init(m)
        for _ in range(25):
            s = step(s)
        assert int(s.ncontact) >= 3                      # standing on its feet
        out = [step(s), jax.jit(lambda s: jaxode.step(m_dir, s, 0.01))(s)]
    art, ref = (np.concatenate([np.asarray(x.vel), np.asarray(x.angvel)]) for x in out)
    assert np.abs(ref).max() > 0.05
    np.testing.assert_allclose(art, ref, rtol=0, atol=1e-8)


def test_batch_per_world_armature_is_each_world_alone():
    xml = _chain_xml()
    b, model = _load(xml, "articulated", 4)
    co = b.mjcf_info["coordinates"]
    s0 = co.set(jaxode.init(model), jnp.asarray(Q0, jnp.float32))
    arm = np.array([0.001, 0.01, 0.1], np.float32)
    base = model.params
    ps = [base.replace(joint_armature=base.joint_armature.at[:].set(a)) for a in arm]

    def run(s, p):
        return jaxode.rollout(model, s, 30, H, params=p)[0].angvel

    one = jax.jit(run)
    alone = np.stack([np.asarray(one(s0, p)) for p in ps])
    pb = jax.tree.map(lambda *x: jnp.stack(x), *ps)
    batch = np.asarray(jax.jit(jax.vmap(run, in_axes=(None, 0)))(s0, pb))
    assert np.array_equal(alone, batch)
    # the armature acted: the heavier the rotors, the slower the chain falls
    assert np.all(np.diff(np.abs(alone[:, 0, 0])) < 0)


def test_gradient_through_exact_rows_matches_finite_differences():
    xml = _chain_xml(n=2)
    with jax.enable_x64(True):
        b, model = _load(xml, "articulated", 1)
        co = b.mjcf_info["coordinates"]

        def loss(arm):
            p = model.params.replace(joint_armature=model.params.joint_armature * 0 + arm)
            s = co.set(jaxode.init(model), jnp.asarray(Q0[:2]))
            s = jaxode.rollout(model, s, 2, H, params=p)[0]
            return co.qpos(s)[0]

        g = jax.jit(jax.grad(loss))(0.01)
        f = jax.jit(loss)
        eps = 1e-6
        fd = (f(0.01 + eps) - f(0.01 - eps)) / (2 * eps)
    assert np.isfinite(float(g)) and abs(float(g)) > 1e-3
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-5)


def test_forest_leaves_loops_and_extra_world_joints_to_the_sweeps():
    # bodies 0-3, world = 4: 0-1, 1-2, 2-0 (closes a loop), 0-world, 3-world,
    # 3-2 (joins two trees that each hold a world joint), 1-1 (no second body)
    jb = ((0, 1), (1, 2), (2, 0), (0, 4), (3, 4), (3, 2))
    rows = tuple((2 * j, 2 * j + 1) for j in range(len(jb)))
    t = tree_lib._structure(4, jb, rows)
    kept = {n.index for n in t.nodes if n.kind == "joint"}
    assert kept == {0, 1, 3, 4}
    assert t.tree_rows == (0, 1, 2, 3, 6, 7, 8, 9)
    pos = {(n.kind, n.index): i for i, n in enumerate(t.nodes)}
    for i, n in enumerate(t.nodes):                    # children before parents
        assert n.parent == -1 or n.parent > i
    # each tree is rooted at its world joint
    assert t.nodes[pos["joint", 3]].parent == -1 and t.nodes[pos["joint", 4]].parent == -1
    assert {n.index for n in t.nodes if n.kind == "body"} == {0, 1, 2, 3}


def test_closed_loop_converges_to_dworldstep():
    """A four-bar linkage: the loop-closing hinge is a row of the sweeps."""
    def build(solver, it):
        b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), solver=solver, iterations=it)
        m = jaxode.mass.box(size=(0.02, 0.02, 0.3), total=0.05)
        a = b.add_body(pos=(0.0, 0.0, 0.85), mass=m)          # left bar, hinged at (0, 0, 1)
        c = b.add_body(pos=(0.0, 0.15, 0.7), mass=jaxode.mass.box(size=(0.02, 0.3, 0.02),
                                                                   total=0.05))
        d = b.add_body(pos=(0.0, 0.3, 0.85), mass=m)          # right bar, hinged at (0, 0.3, 1)
        ax = (1.0, 0.0, 0.0)
        b.add_hinge(a, None, anchor=(0.0, 0.0, 1.0), axis=ax, armature=0.05)
        b.add_hinge(a, c, anchor=(0.0, 0.0, 0.7), axis=ax)
        b.add_hinge(c, d, anchor=(0.0, 0.3, 0.7), axis=ax)
        b.add_hinge(d, None, anchor=(0.0, 0.3, 1.0), axis=ax)
        model = b.build()
        s = jaxode.init(model)
        return model, s.replace(angvel=s.angvel.at[0, 0].set(2.0).at[2, 0].set(2.0),
                                vel=s.vel.at[0, 1].set(-0.3).at[2, 1].set(-0.3)
                                .at[1, 1].set(-0.6))
    with jax.enable_x64(True):
        out = {}
        for solver, it in (("direct", 1), ("articulated", 400)):
            model, s = build(solver, it)
            s1 = jax.jit(lambda s: jaxode.rollout(model, s, 5, 0.01)[0])(s)
            out[solver] = np.asarray(s1.angvel)
    np.testing.assert_allclose(out["articulated"], out["direct"], rtol=0, atol=1e-7)


def test_articulated_refuses_ode_reorder():
    with pytest.raises(ValueError, match="reorder='ode'.*solver 'pgs'"):
        jaxode.WorldBuilder(solver="articulated", reorder="ode")
    # a model changed after build meets the solve stage's own check
    _, model = _load(_chain_xml(n=1), "articulated", 1)
    model = model.replace(reorder="ode")
    with pytest.raises(ValueError, match="reorder='ode'.*got solver 'articulated'"):
        jaxode.step(model, jaxode.init(model), H)


def test_only_limit_and_motor_rows_are_ever_bounded():
    """The articulated solve builds responses only for each joint type's
    limit/motor rows (``JointType.nlimot``, the last rows of ``nrows``): every
    other joint row (geometric rows, the passive row) must have lo = -inf and
    hi = +inf in any state. Checked on every joint type with stops, motors,
    bounce, suspension and CFM set (the conformance joint zoo, plus hinges and
    sliders with stops, motors and passive rows), at states along a run in which
    the stops engage."""
    from jaxode.sim import dynamics, narrowphase, rowset
    from jaxode.sim.joints import REGISTRY
    from tools.conformance.scenes import build_jaxode
    from tools.conformance.joint_scenes import _ZOO_PARAMS, _zoo_world

    models = [build_jaxode(_zoo_world(0, _ZOO_PARAMS[0]))]   # every other joint type
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    m = jaxode.mass.box((0.1, 0.1, 0.1), total=0.5)
    b1 = b.add_body(pos=(0.0, 0.0, 1.0), mass=m, angvel=(4.0, 1.0, 0.0))
    b2 = b.add_body(pos=(0.0, 0.0, 0.8), mass=m, vel=(0.0, 0.0, -2.0))
    b.add_hinge(b1, None, anchor=(0.0, 0.0, 1.0), axis=(1.0, 0.0, 0.0), lo_stop=-0.1,
                hi_stop=0.1, vel=1.0, fmax=0.5, damping=0.3, armature=0.01)
    b.add_slider(b2, b1, axis=(0.0, 0.0, 1.0), lo_stop=-0.05, hi_stop=0.05, damping=0.2,
                 stiffness=3.0)
    b.add_ball(b2, None, anchor=(0.0, 0.3, 0.8))
    models.append(b.build())
    for model in models:
        layout = {}

        def bounds(state, model=model):
            rows = rowset.build(model, model.params,
                                dynamics.bodies(model, model.params, state, 0.01),
                                narrowphase.detect(model, state))
            layout["joints"] = rows.joint_layout      # static: known once traced
            return rows.head.lo, rows.head.hi

        bounds = jax.jit(bounds)
        # states along a run: the stops engage (the zoo's stops are a few degrees / mm)
        traj = jaxode.rollout(model, jaxode.init(model), 60, 0.01)[1]
        for k in (0, 20, 59):
            state = jaxode.init(model).replace(pos=traj.pos[k], quat=traj.quat[k],
                                               vel=traj.vel[k], angvel=traj.angvel[k])
            lo, hi = (np.asarray(x) for x in bounds(state))
            head = rowset.joint_head_rows(model, layout["joints"])
            for j, (jtype, _) in enumerate(model.joint_index):
                t = REGISTRY[jtype]
                free = list(head[j][:t.nrows - t.nlimot]) + list(head[j][t.nrows:])
                assert np.all(np.isneginf(lo[free])) and np.all(np.isposinf(hi[free])), (
                    t.name, free, lo[free], hi[free])
