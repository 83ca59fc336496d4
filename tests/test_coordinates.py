"""MuJoCo's generalized coordinates of an MJCF model (jaxode.tools.coordinates).

Truth: MuJoCo 4's forward kinematics of the same file. For random qpos and
qvel (every joint kind: a free root, hinges, a slide, a ball, a body with two
joints and so an intermediate ODE body, a welded child, refs), ``set`` places
and moves every ODE body where MuJoCo puts the body's centre of mass (xipos,
xquat; mj_objectVelocity at xipos), and ``qpos`` / ``qvel`` read back the
vectors given."""
from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import jaxode

XML = """<mujoco>
  <compiler angle="radian"/>
  <worldbody>
    <body name="torso" pos="0.1 0.2 0.8" euler="0.1 0.2 0.3">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" pos="0.03 0 0"/>
      <body name="leg" pos="0.2 0 0" euler="0 0.4 0">
        <joint name="hip" type="hinge" axis="0 0 1" pos="0 0 0.01" ref="0.2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body name="shin" pos="0.3 0 0">
          <joint name="knee1" type="hinge" axis="0 1 0"/>
          <joint name="knee2" type="hinge" axis="1 0 0" pos="0.02 0 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
          <body name="foot" pos="0 0 -0.3"><geom size="0.05"/></body>
        </body>
      </body>
      <body name="arm" pos="-0.2 0 0">
        <joint name="shoulder" type="ball" pos="0 0.01 0"/>
        <geom type="capsule" fromto="0 0 0 -0.2 0 0.1" size="0.03"/>
        <body name="slider" pos="-0.2 0 0.1">
          <joint name="push" type="slide" axis="0 0 1" ref="0.05"/>
          <geom type="box" size="0.03 0.03 0.03"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _random_state(m, rng):
    import mujoco
    q = m.qpos0.copy() + rng.normal(0.0, 0.4, m.nq)
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            q[a + 3:a + 7] /= np.linalg.norm(q[a + 3:a + 7])
        elif m.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            q[a:a + 4] /= np.linalg.norm(q[a:a + 4])
    return q, rng.normal(0.0, 1.0, m.nv)


def test_set_and_read_match_mujoco_kinematics():
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_string(XML)
    d = mujoco.MjData(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = jaxode.load_mjcf(XML)
    info = b.mjcf_info
    co = info["coordinates"]
    assert co.names == ("root", "hip", "knee1", "knee2", "shoulder", "push")
    assert (co.nq, co.nv) == (m.nq, m.nv)
    with jax.enable_x64(True):
        model = b.build()
        st0 = jaxode.init(model)
        fns = jax.jit(lambda s, q, v: (lambda t: (t, co.qpos(t), co.qvel(t)))(co.set(s, q, v)))
        # the build pose is MuJoCo's qpos0 (refs included), at rest
        np.testing.assert_allclose(np.asarray(co.qpos(st0)), m.qpos0, atol=1e-12)
        rng = np.random.default_rng(3)
        for _ in range(3):
            q, v = _random_state(m, rng)
            d.qpos[:], d.qvel[:] = q, v
            mujoco.mj_forward(m, d)
            st, q_back, v_back = fns(st0, q, v)
            np.testing.assert_allclose(np.asarray(q_back), q, atol=1e-10)
            np.testing.assert_allclose(np.asarray(v_back), v, atol=1e-10)
            for k in sorted({k for k in info["bodies"].values() if k is not None}):
                # the MJCF bodies of ODE body k (foot is welded into shin's): their
                # mass-weighted centre and its velocity (one rigid body: linear in x)
                names = [n for n, kk in info["bodies"].items() if kk == k]
                ids = [m.body(n).id for n in names]
                w = m.body_mass[ids] / m.body_mass[ids].sum()
                vel = np.zeros((len(ids), 6))
                for r, bid in enumerate(ids):
                    mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, bid, vel[r], 0)
                np.testing.assert_allclose(np.asarray(st.pos[k]), w @ d.xipos[ids], atol=1e-10)
                qa, qm = np.asarray(st.quat[k]), d.xquat[ids[0]]
                assert min(np.abs(qa - qm).max(), np.abs(qa + qm).max()) < 1e-10, names
                np.testing.assert_allclose(np.asarray(st.angvel[k]), vel[0, :3], atol=1e-10)
                np.testing.assert_allclose(np.asarray(st.vel[k]), w @ vel[:, 3:], atol=1e-10)
        with pytest.raises(ValueError, match=r"qpos must have shape \(15,\) \(got \(3,\)\)"):
            co.set(st0, np.zeros(3))
        with pytest.raises(ValueError, match=r"qvel must have shape \(13,\) \(got \(2,\)\)"):
            co.set(st0, m.qpos0, np.zeros(2))
