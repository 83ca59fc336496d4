"""Joint damping, armature and springs as jaxode's passive row (jaxode.sim.joints.passive).

Truths: MuJoCo 4 run in the test (its Euler integrator: implicit in damping,
armature in the joint-space mass matrix, explicit spring), the closed form of
that recursion, and the explicit scheme's stability bound.

* A slide joint under gravity and a hinge spinning about its centre of mass
  (ODE's finite rotation: the angle advances by exactly h w) follow MuJoCo's
  recursion to float64 rounding: loaded from one MJCF file by both.
* The implicit damper on a slider with armature, per world in a batch:
  ``v' = ((m + a) v - h m g) / (m + a + h c)``, stable at h c / m = 1e4
  where Gazebo's explicit form (|1 - h c / m| > 1) diverges.
* A chain of 10 g links with URDF-like damping 10 N m s (allegro/baxter's
  ratio): non-finite in a few steps when explicit, at rest when implicit.
"""
from __future__ import annotations

import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode import joint_api as ja

H = 0.01

# one body on a slide joint (x: along gravity's direction z) and one on a hinge about
# its own centre (z), no contacts; ref and springref shifted so that q = ref + ODE's
# coordinate is tested too
MJCF = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="{h}" gravity="0 0 -9.81" integrator="Euler"><flag contact="disable"/></option>
  <worldbody>
    <body name="s" pos="0 0 1">
      <joint name="slide" type="slide" axis="0 0 1" damping="3" armature="0.4"
             stiffness="25" springref="0.2" ref="0.05"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1.5"/>
    </body>
    <body name="h" pos="1 0 1">
      <joint name="hinge" type="hinge" axis="0 0 1" damping="0.8" armature="0.05"
             stiffness="6" springref="0.3" ref="-0.1"/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
    </body>
  </worldbody>
</mujoco>"""
STEPS = 150
W0 = 2.0  # initial hinge rate [rad/s]


def _mujoco(xml: str):
    import mujoco
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qvel[1] = W0
    q, v = [], []
    for _ in range(STEPS):
        mujoco.mj_step(m, d)
        q.append(d.qpos.copy())
        v.append(d.qvel.copy())
    return np.array(q), np.array(v)


def test_slide_and_hinge_follow_mujoco_euler():
    pytest.importorskip("mujoco")
    xml = MJCF.format(h=H)
    q_ref, v_ref = _mujoco(xml)
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # <flag contact>: nothing collides anyway
        b = jaxode.load_mjcf(xml)
        info = b.mjcf_info
        hb = info["bodies"]["h"]
        b.bodies[hb]["finite_rotation"] = True  # the angle advances by h w, as MuJoCo's q
        b.bodies[hb]["angvel"] = np.array([0.0, 0.0, W0])
        model = b.build()
        assert model.joint_passive and not model.joint_damping_explicit
        js, jh = info["joints"]["slide"], info["joints"]["hinge"]

        def body(s, _):
            s = jaxode.step(model, s, H)
            return s, jnp.stack([ja.slider_position(model, s, js), ja.hinge_angle(model, s, jh),
                                 ja.slider_position_rate(model, s, js),
                                 ja.hinge_angle_rate(model, s, jh)])

        _, out = jax.jit(lambda s: jax.lax.scan(body, s, None, length=STEPS))(jaxode.init(model))
    out = np.asarray(out)
    q = out[:, :2] + np.array([info["joint_ref"]["slide"], info["joint_ref"]["hinge"]])
    np.testing.assert_allclose(q, q_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(out[:, 2:], v_ref, rtol=0, atol=1e-9)
    # the terms acted: the slide oscillates (zeta 0.22) about its spring's balance
    # springref - m g / k = -0.389 m, the hinge's spring has turned it back
    assert -0.45 < q_ref[-1, 0] < -0.3 and q_ref[:, 0].min() < -0.5
    assert abs(v_ref[-1, 1]) < 0.2 * W0


def _slider_world(explicit: bool):
    # sor 1: the one row along z is solved exactly in one sweep (QuickStep's
    # default 1.3 converges as 0.3^iterations: 3e-11 after 20)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), iterations=20, sor=1.0,
                            joint_damping="explicit" if explicit else "implicit")
    b.add_body(pos=(0.0, 0.0, 1.0), mass=jaxode.mass.box(size=(0.1, 0.1, 0.1), total=M))
    b.add_slider(0, None, axis=(0.0, 0.0, 1.0), damping=1.0, armature=ARM)
    return b.build()


M, ARM = 0.02, 0.01
DAMPINGS = (0.5, 1e4 * M / H)  # h c / m = 0.25 and 1e4


@pytest.mark.parametrize("x64", [True, False])
def test_implicit_damper_closed_form_per_world(x64):
    """Two worlds of one batch with their own damping: the closed form of the
    implicit recursion (float64 to 1e-12 relative; float32 to 1e-5 relative or
    1e-6 of the step's velocity increment h g)."""
    n = 40
    with jax.enable_x64(x64):
        model = _slider_world(False)
        ps = jaxode.batch(model.params, 2)
        ps = ps.replace(joint_damping=ps.joint_damping.at[:, 0, 0].set(jnp.asarray(DAMPINGS)))
        run = jax.jit(jax.vmap(lambda p: jaxode.rollout(model, jaxode.init(model), n, H,
                                                        params=p)[1].vel[:, 0, 2]))
        vz = np.asarray(run(ps), np.float64)
    for k, c in enumerate(DAMPINGS):
        v, want = 0.0, []
        for _ in range(n):
            v = ((M + ARM) * v - H * M * 9.81) / (M + ARM + H * c)
            want.append(v)
        # float32: the row's right-hand side v/h + g rounds at eps * g (the step's
        # velocity increment h g: 1.2e-9 m/s in 40 steps here)
        tol, atol = (1e-12, 1e-12 * M * 9.81 / c) if x64 else (1e-5, 1e-6 * H * 9.81)
        np.testing.assert_allclose(vz[k], want, rtol=tol, atol=atol)
    assert np.all(np.isfinite(vz))


def _chain(explicit: bool, solver: str = "auto"):
    """Five 10 g links (0.01 x 0.01 x L boxes) hanging from the world on hinges (x
    axis), damping 10 N m s, released 0.5 rad from hanging."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81), solver=solver,
                            joint_damping="explicit" if explicit else "implicit")
    ang = 0.5
    prev, top = None, np.array([0.0, 0.0, 1.0])
    d = np.array([0.0, math.sin(ang), -math.cos(ang)])
    for k in range(5):
        centre = top + 0.5 * LINK * d
        body = b.add_body(pos=tuple(centre),
                          mass=jaxode.mass.box(size=(0.01, 0.01, LINK), total=0.01))
        b.add_hinge(body, prev, anchor=tuple(top), axis=(1.0, 0.0, 0.0), damping=10.0)
        prev, top = body, top + LINK * d
    return b.build()


LINK = 0.05


def _energy(traj):
    """Mechanical energy [J] per step of the planar chain: translation, rotation about
    x (I_xx of the 10 g box) and gravity."""
    m, ixx = 0.01, 0.01 * (0.01 ** 2 + LINK ** 2) / 12
    v, w, z = (np.asarray(x, np.float64) for x in (traj.vel, traj.angvel, traj.pos[..., 2]))
    return (0.5 * m * (v ** 2).sum(-1) + 0.5 * ixx * w[..., 0] ** 2 + m * 9.81 * z).sum(-1)


def test_heavy_damping_on_light_links_is_stable_only_implicit():
    """Explicit damping: h c / I = 0.01 * 10 / 2e-6 >> 2, outside the explicit
    scheme's stability bound |1 - h c / I| <= 1: the world goes non-finite
    (flagged). Implicit: finite, and the passive row only dissipates, so the
    chain's mechanical energy never rises above its start (QuickStep's 20
    iterations leave the stiff damper rows unconverged: the chain swings more
    than it should; docs/ODE_FEATURES.md). Solved exactly (dWorldStep), the
    overdamped chain creeps: joint rates ~ gravity torque / damping; solver "articulated"
    (the joint rows exact, no bounded row to sweep) is that solve, to float32 rounding."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m_exp, m_imp, m_dir = _chain(True), _chain(False), _chain(False, "direct")
        m_art = _chain(False, "articulated")
        fin_e, _ = jax.jit(lambda s: jaxode.rollout(m_exp, s, 60, H))(jaxode.init(m_exp))
        fin_i, traj = jax.jit(lambda s: jaxode.rollout(m_imp, s, 60, H))(jaxode.init(m_imp))
        fin_d, traj_d = jax.jit(lambda s: jaxode.rollout(m_dir, s, 60, H))(jaxode.init(m_dir))
        fin_a, traj_a = jax.jit(lambda s: jaxode.rollout(m_art, s, 60, H))(jaxode.init(m_art))
    assert bool(np.asarray(fin_e.nonfinite)) or not np.all(np.isfinite(np.asarray(fin_e.vel)))
    for fin, tr in ((fin_i, traj), (fin_d, traj_d)):
        assert not bool(np.asarray(fin.nonfinite))
        assert np.all(np.isfinite(np.asarray(tr.vel)))
    # at rest at the start: the energy is the links' potential energy
    e0 = float((0.01 * 9.81 * np.asarray(jaxode.init(m_imp).pos, np.float64)[:, 2]).sum())
    # float32 rounding of the potential energy: |z| 1 m, eps 6e-8, 5 links of 0.098 N
    for tr in (traj, traj_d):
        assert np.all(_energy(tr) <= e0 + 1e-6), (_energy(tr).max() - e0)
    # exact solve: the overdamped creep, ~ 0.01 * 9.81 * 0.025 * 5 / 10 rad/s per joint
    assert np.abs(np.asarray(traj_d.angvel)).max() < 0.05
    # the joints' rows exact (solver "articulated": no bounded row here) is that solve,
    # to float32's rounding of rows h d / I ~ 1e4 stiffer than the links (the creep
    # peaks at 6.5e-3 rad/s; QuickStep's 20 sweeps swing at 3.2)
    assert not bool(np.asarray(fin_a.nonfinite))
    np.testing.assert_allclose(np.asarray(traj_a.angvel), np.asarray(traj_d.angvel), rtol=0,
                               atol=5e-4)


def test_passive_builder_checks_and_flags():
    b = jaxode.WorldBuilder()
    b.add_body()
    b.add_body(pos=(1.0, 0.0, 0.0))
    for key in ("armature", "stiffness", "springref"):
        with pytest.raises(ValueError, match=rf"{key} applies to hinge and slider joints"):
            b.add_universal(0, None, **{key: 1.0})
    with pytest.raises(ValueError, match=r"joint 0 \(hinge\): armature must be in \[0, inf\) kg m\^2 or kg \(got -1.0\)"):
        b.add_hinge(0, None, armature=-1.0)
    with pytest.raises(ValueError, match=r"joint_damping must be 'implicit' or 'explicit'"):
        jaxode.WorldBuilder(joint_damping="semi")
    with pytest.raises(ValueError, match=r"joint_passive must be True, False or None"):
        jaxode.WorldBuilder(joint_passive=1)
    b.add_hinge(0, None)
    assert not b.build().joint_passive  # nothing passive: the step without the rows
    b.add_slider(1, None, stiffness=2.0)
    assert b.build().joint_passive
    e = jaxode.WorldBuilder(joint_damping="explicit")
    e.add_body()
    e.add_hinge(0, None, damping=1.0)
    m = e.build()
    assert m.joint_damping_explicit and not m.joint_passive  # Gazebo's torque, no row


def test_passive_values_without_rows_are_refused():
    """Params that switch on damping or armature in a model built without the passive
    rows would do nothing: step refuses them, naming the field; built with
    joint_passive=True the same values act."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mass=jaxode.mass.box(size=(0.1, 0.1, 0.1), total=1.0))
    b.add_slider(0, None, axis=(0.0, 0.0, 1.0))
    model = b.build()
    p = model.params.replace(joint_armature=model.params.joint_armature.at[0, 0].set(1.0))
    with pytest.raises(ValueError, match=r"params.joint_armature has nonzero values but the "
                                         r"model was built without the joint passive rows"):
        jaxode.step(model, jaxode.init(model), H, params=p)
    b.joint_passive = True
    model = b.build()
    p = model.params.replace(joint_armature=model.params.joint_armature.at[0, 0].set(1.0))
    s = jaxode.step(model, jaxode.init(model), H, params=p)
    # (m + a) v' = -h m g: the armature halves the first step's fall
    assert abs(float(s.vel[0, 2]) - (-H * 9.81 / 2)) < 1e-6


SERVO = """<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.01" gravity="0 0 0" integrator="implicitfast"><flag contact="disable"/></option>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="j" axis="0 0 1" armature="0.01" range="-0.5 1.5"/>
      <geom type="box" size="0.05 0.02 0.01" mass="0.05"/>
    </body>
  </worldbody>
  <actuator><position name="p" joint="j" kp="75" dampratio="1.2" gear="1.5" inheritrange="0.8"/>
  </actuator>
</mujoco>"""


def test_position_servo_dampratio_inheritrange_and_implicit_kv_follow_mujoco():
    """A light hinge (booster_t1's kind of servo: kp 75 on a 50 g link) driven by a
    position actuator with gear, dampratio and inheritrange: the compiled kv
    (MuJoCo's biasprm[2]) and ctrlrange equal MuJoCo's, and with the servo's kv
    as the joint's implicit damping the hinge follows MuJoCo's implicitfast (the
    velocity term implicit, the position term explicit) to 1e-9 over 100 steps,
    to its target ctrl / gear."""
    mujoco = pytest.importorskip("mujoco")
    from jaxode.io.mjcf import apply_actuators
    m = mujoco.MjModel.from_xml_string(SERVO)
    d = mujoco.MjData(m)
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_mjcf(SERVO)
        info = b.mjcf_info
        hb = info["bodies"]["a"]
        b.bodies[hb]["finite_rotation"] = True
        act = info["actuators"]["p"]
        np.testing.assert_allclose(act.ctrlrange, m.actuator_ctrlrange[0], rtol=1e-12)
        model = b.build()
        j = info["joints"]["j"]
        kv = -m.actuator_biasprm[0, 2]
        assert kv > 0 and act.bias[2] == 0.0
        np.testing.assert_allclose(float(model.params.joint_damping[j, 0]), 1.5 ** 2 * kv,
                                   rtol=1e-6)
        u = 1.0  # inside the inherited ctrlrange (-0.3, 1.3)
        d.ctrl[0] = u
        ref = []
        for _ in range(100):
            mujoco.mj_step(m, d)
            ref.append(d.qpos[0])

        def body(s, _):
            s = jaxode.step(model, apply_actuators(model, s, info["actuators"], jnp.array([u])), 0.01)
            return s, ja.hinge_angle(model, s, j)

        _, q = jax.jit(lambda s: jax.lax.scan(body, s, None, length=100))(jaxode.init(model))
    np.testing.assert_allclose(np.asarray(q), ref, atol=1e-9)
    assert abs(ref[-1] - u / 1.5) < 1e-3  # at the target: actuator length gear * q = ctrl


def test_stiffness_set_per_world_uses_the_files_springref():
    """A file whose hinge has springref and ref but stiffness 0, built with the passive
    rows on: setting the stiffness per world gives MuJoCo's trajectory for the file
    with that stiffness (the loader keeps springref - ref whatever the stiffness); a
    springref alone does not switch the rows on."""
    pytest.importorskip("mujoco")
    xml = MJCF.format(h=H)
    q_ref, _ = _mujoco(xml)
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = jaxode.load_mjcf('<mujoco><worldbody><body><joint name="j" springref="0.3" '
                                'ref="0.1"/><geom size="0.1"/></body></worldbody></mujoco>')
        assert not bare.build().joint_passive
        b = jaxode.load_mjcf(xml.replace('stiffness="6"', 'stiffness="0"'))
        info = b.mjcf_info
        hb, jh = info["bodies"]["h"], info["joints"]["hinge"]
        b.bodies[hb]["finite_rotation"] = True
        b.bodies[hb]["angvel"] = np.array([0.0, 0.0, W0])
        model = b.build()
        p = model.params.replace(joint_stiffness=model.params.joint_stiffness.at[jh, 0].set(6.0))

        def body(s, _):
            s = jaxode.step(model, s, H, params=p)
            return s, ja.hinge_angle(model, s, jh)

        _, ang = jax.jit(lambda s: jax.lax.scan(body, s, None, length=STEPS))(jaxode.init(model))
    np.testing.assert_allclose(np.asarray(ang) + info["joint_ref"]["hinge"], q_ref[:, 1],
                               rtol=0, atol=1e-10)


def test_nearly_massless_bodies_on_armatured_slides_step_in_float32():
    """Gymnasium's pusher moves its goal (4e-10 kg, inertias down to 6e-15 kg m^2 on
    the intermediate body of its two slides) through slides with armature 0.04 and
    damping 0.5: the armature carries the inertia. In float32 the first step went
    non-finite (the inertia's determinant, ~1e-43, underflowed; lifted to a normal
    scale, the rows holding a 4e-10 kg body beside a 0.04 kg armature still could not
    be resolved). Now the 3x3 inverse of a 1e-13 kg m^2 inertia is exact to float32
    rounding, load_mjcf lifts the goal to 1e-5 of the model's mass (with a warning),
    and the goal pushed along both slides follows the closed form of an implicit
    damper with the armature as the mass, v' = (v a / h + F) / (a / h + d)."""
    import os

    gym = pytest.importorskip("gymnasium")
    from jaxode.sim import integrate

    tiny = np.diag([1e-13, 2e-13, 3e-13]).astype(np.float32)
    inv = np.asarray(integrate.inverse3(jnp.asarray(tiny)[None]))[0]
    np.testing.assert_allclose(np.diag(inv), 1.0 / np.diag(tiny).astype(np.float64), rtol=1e-6)

    path = os.path.join(os.path.dirname(gym.__file__), "envs", "mujoco", "assets", "pusher_v5.xml")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b = jaxode.load_mjcf(path)
    lifted = [str(w.message) for w in caught if "raised to" in str(w.message)]
    assert any("'goal'" in w for w in lifted) and any("'object'" in w for w in lifted)
    m = b.build()
    assert m.params.body_mass.dtype == jnp.float32
    jx, jy = (b.mjcf_info["joints"][n] for n in ("goal_slidex", "goal_slidey"))
    a, d, h, fx, fy = 0.04, 0.5, float(b.dt), 0.3, -0.2

    def one(s, _):
        s = jaxode.add_slider_force(m, s, jy, fy)
        s = jaxode.add_slider_force(m, s, jx, fx)
        s = jaxode.step(m, s, h)
        return s, (jaxode.slider_position_rate(m, s, jx), jaxode.slider_position_rate(m, s, jy))

    s, (vx, vy) = jax.jit(lambda s: jax.lax.scan(one, s, None, length=100))(jaxode.init(m))
    assert not bool(s.nonfinite)
    for v, f in ((vx, fx), (vy, fy)):
        want, w = [], 0.0
        for _ in range(100):
            w = (w * a / h + f) / (a / h + d)
            want.append(w)
        # the lifted mass (1.4e-4 kg) is 0.35 % of the armature
        np.testing.assert_allclose(np.asarray(v), want, rtol=1e-2, atol=1e-6)
