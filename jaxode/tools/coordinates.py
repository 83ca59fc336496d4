"""MuJoCo's generalized coordinates of a model loaded from MJCF: qpos, qvel and back.

jaxode steps bodies (maximal coordinates); MuJoCo's observations, keyframes and
resets speak joint coordinates. :class:`Coordinates` (``builder.mjcf_info
["coordinates"]``, made by :func:`jaxode.load_mjcf`) maps between the two in
MuJoCo's order (bodies depth first as in the file, joints of a body in order):

* free joint: qpos 7 (position of the MJCF body frame's origin [m], its
  orientation quaternion w x y z), qvel 6 (linear velocity of that origin,
  world frame [m/s]; angular velocity in the body frame [rad/s]);
* ball: qpos 4 (the child's rotation relative to its build pose in the parent,
  in the child's frame: MuJoCo's ``xquat_child = xquat_parent * body_quat *
  qball``), qvel 3 (relative angular velocity, child frame);
* hinge / slide: qpos 1 (``ref`` + angle [rad] or position [m]), qvel 1.

``qpos`` / ``qvel`` read one world's State; ``set`` writes a State's body poses
and velocities from qpos and qvel (forward kinematics through the joints'
build-time frames: the joints hold exactly, nothing to correct). All three are
traced (jit / vmap / grad). Body frames: ODE bodies sit at the MJCF body's
centre of mass with its orientation (jaxode.io.mjcf), intermediate bodies of a
several-joint body at the same centre.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxode.io.xml_util import mat_to_quat
from jaxode.sim import math as jm

KINDS = ("free", "ball", "hinge", "slide")
NQ = {"free": 7, "ball": 4, "hinge": 1, "slide": 1}
NV = {"free": 6, "ball": 3, "hinge": 1, "slide": 1}


class Joint(NamedTuple):
    """One MJCF joint, as the maps need it (host-side numbers, build time).

    kind; child, parent: ODE body indices (parent -1: the world); ref: MuJoCo's
    ref (hinge / slide); axis (3,): the axis in the parent's ODE frame (world
    frame for the world); anchor (3,): the joint's point in the parent's frame;
    rel_pos (3,), rel_quat (4,): the child's ODE pose in the parent's frame at
    the build pose; com (3,) (free joints): the ODE body's position (the centre
    of mass) in the MJCF body frame."""

    kind: str
    child: int
    parent: int
    ref: float
    axis: tuple
    anchor: tuple
    rel_pos: tuple
    rel_quat: tuple
    com: tuple


def _conj(q):
    return q * jnp.array([1.0, -1.0, -1.0, -1.0], q.dtype)


def _rot(q, v):
    return jm.mm(jm.quat_to_mat(q), v)


@dataclasses.dataclass(frozen=True)
class Coordinates:
    """MuJoCo's qpos / qvel layout of a loaded model (module docstring). ``names``:
    the joint names in order; ``nq``, ``nv``: the vector sizes."""

    joints: tuple
    names: tuple

    @property
    def nq(self) -> int:
        return sum(NQ[j.kind] for j in self.joints)

    @property
    def nv(self) -> int:
        return sum(NV[j.kind] for j in self.joints)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _pose(pos, quat, vel, angvel, b):
        """(x, q, v, w) of ODE body ``b`` (b < 0: the world, at rest at the origin)."""
        if b < 0:
            z = jnp.zeros(3, pos.dtype)
            return z, jnp.array([1.0, 0.0, 0.0, 0.0], pos.dtype), z, z
        return pos[b], quat[b], vel[b], angvel[b]

    def _pairs(self, state):
        """Per joint: (joint, its child's (x, q, v, w), its parent's)."""
        arrays = (state.pos, state.quat, state.vel, state.angvel)
        return [(j, self._pose(*arrays, j.child), self._pose(*arrays, j.parent))
                for j in self.joints]

    def qpos(self, state) -> jnp.ndarray:
        """(nq,) MuJoCo's qpos of one world's ``state``."""
        out, dt = [], state.pos.dtype
        for j, (xc, qc, _, _), (xp, qp, _, _) in self._pairs(state):
            if j.kind == "free":
                out += [xc - _rot(qc, jnp.asarray(j.com, dt)), qc]
                continue
            q_rel = jm.quat_mul(_conj(qp), qc)  # child in parent frame
            if j.kind == "ball":
                qb = jm.quat_mul(_conj(jnp.asarray(j.rel_quat, dt)), q_rel)
                out.append(jnp.where(qb[0] < 0, -qb, qb))
            elif j.kind == "hinge":
                qt = jm.quat_mul(q_rel, _conj(jnp.asarray(j.rel_quat, dt)))  # R_theta
                s = jm.mm(qt[1:], jnp.asarray(j.axis, dt))
                out.append((j.ref + 2.0 * jnp.arctan2(s, qt[0]))[None])
            else:
                x_rel = _rot(_conj(qp), xc - xp)
                d = x_rel - jnp.asarray(j.rel_pos, dt)
                out.append((j.ref + jm.mm(d, jnp.asarray(j.axis, dt)))[None])
        return jnp.concatenate(out) if out else jnp.zeros((0,), state.pos.dtype)

    def qvel(self, state) -> jnp.ndarray:
        """(nv,) MuJoCo's qvel of one world's ``state``."""
        out, dt = [], state.pos.dtype
        for j, (xc, qc, vc, wc), (xp, qp, vp, wp) in self._pairs(state):
            if j.kind == "free":
                r = _rot(qc, jnp.asarray(j.com, dt))
                out += [vc - jnp.cross(wc, r), _rot(_conj(qc), wc)]
            elif j.kind == "ball":
                out.append(_rot(_conj(qc), wc - wp))
            elif j.kind == "hinge":
                out.append(jm.mm(_rot(qp, jnp.asarray(j.axis, dt)), wc - wp)[None])
            else:
                u = _rot(qp, jnp.asarray(j.axis, dt))
                out.append(jm.mm(u, vc - vp - jnp.cross(wp, xc - xp))[None])
        return jnp.concatenate(out) if out else jnp.zeros((0,), state.pos.dtype)

    # ------------------------------------------------------------------ writing
    def set(self, state, qpos, qvel=None):
        """``state`` with every body the joints reach placed by ``qpos`` (nq,) and
        moving by ``qvel`` (nv,; None: at rest), parents before children."""
        qpos = jnp.asarray(qpos, state.pos.dtype)
        if qpos.shape != (self.nq,):
            raise ValueError(f"qpos must have shape ({self.nq},) (got {qpos.shape})")
        qvel = jnp.zeros((self.nv,), state.pos.dtype) if qvel is None else \
            jnp.asarray(qvel, state.pos.dtype)
        if qvel.shape != (self.nv,):
            raise ValueError(f"qvel must have shape ({self.nv},) (got {qvel.shape})")
        pos, quat, vel, angvel = self._forward(state.pos, state.quat, state.vel,
                                               state.angvel, qpos, qvel)
        return state.replace(pos=pos, quat=quat, vel=vel, angvel=angvel)

    def _forward(self, pos, quat, vel, angvel, qpos, qvel):
        """Forward kinematics: the bodies' (pos, quat, vel, angvel) (nbody, ...)
        with the joints' children set from qpos and qvel (see :meth:`set`)."""
        dt = pos.dtype
        iq = iv = 0
        for j in self.joints:
            q = qpos[iq:iq + NQ[j.kind]]
            v = qvel[iv:iv + NV[j.kind]]
            iq, iv = iq + NQ[j.kind], iv + NV[j.kind]
            xp, qp, vp, wp = self._pose(pos, quat, vel, angvel, j.parent)
            if j.kind == "free":
                qc = jm.quat_normalize(q[3:])
                r = _rot(qc, jnp.asarray(j.com, dt))
                xc, wc = q[:3] + r, _rot(qc, v[3:])
                vc = v[:3] + jnp.cross(wc, r)
            else:
                rel_q, rel_x = jnp.asarray(j.rel_quat, dt), jnp.asarray(j.rel_pos, dt)
                a, u = jnp.asarray(j.anchor, dt), jnp.asarray(j.axis, dt)
                if j.kind == "slide":
                    q_rel, x_rel = rel_q, rel_x + u * (q[0] - j.ref)
                else:
                    if j.kind == "hinge":
                        th = 0.5 * (q[0] - j.ref)
                        r_joint = jnp.concatenate([jnp.cos(th)[None], jnp.sin(th) * u])
                        q_rel = jm.quat_mul(r_joint, rel_q)  # rotation about u, parent frame
                    else:
                        q_rel = jm.quat_mul(rel_q, jm.quat_normalize(q))  # child frame
                    # the anchor stays put: x_rel + R_rel a_c = a
                    a_c = _rot(_conj(rel_q), a - rel_x)
                    x_rel = a - _rot(q_rel, a_c)
                qc = jm.quat_mul(qp, q_rel)
                xc = xp + _rot(qp, x_rel)
                # velocities: the parent's motion carried to the child, plus the joint's
                vc = vp + jnp.cross(wp, xc - xp)
                wc = wp
                if j.kind == "slide":
                    vc = vc + _rot(qp, u) * v[0]
                else:
                    w_joint = _rot(qp, u) * v[0] if j.kind == "hinge" else _rot(qc, v)
                    anchor_w = xp + _rot(qp, a)
                    wc = wc + w_joint
                    vc = vc + jnp.cross(w_joint, xc - anchor_w)
            pos, quat = pos.at[j.child].set(xc), quat.at[j.child].set(qc)
            vel, angvel = vel.at[j.child].set(vc), angvel.at[j.child].set(wc)
        return pos, quat, vel, angvel

    def mass_matrix(self, pos, quat, mass, inertia, armature=None) -> np.ndarray:
        """(nv, nv) MuJoCo's joint-space inertia matrix M at the pose (pos (nbody, 3),
        quat (nbody, 4): the bodies placed by these joints) of bodies of ``mass``
        (nbody,) [kg] and body-frame ``inertia`` (nbody, 3, 3) [kg m^2] about their
        centres, plus ``armature`` (nv,) on the diagonal: ``sum_b m_b Jv_b^T Jv_b
        + Jw_b^T I_b Jw_b``, the bodies' Jacobians from unit qvel (host side, numpy;
        for the compiler-time quantities MuJoCo derives from M at qpos0)."""
        pos = jnp.asarray(pos, jnp.float32 if not _x64() else jnp.float64)
        quat = jnp.asarray(quat, pos.dtype)
        zero = jnp.zeros_like(pos)
        q0 = self.qpos(_Pose(pos, quat, zero, zero))
        cols = [self._forward(pos, quat, zero, zero, q0, jnp.eye(self.nv, dtype=pos.dtype)[k])
                for k in range(self.nv)]
        jv = np.stack([np.asarray(c[2], np.float64) for c in cols], -1)  # (nbody, 3, nv)
        jw = np.stack([np.asarray(c[3], np.float64) for c in cols], -1)
        R = np.stack([np.asarray(jm.quat_to_mat(q), np.float64) for q in quat])
        Iw = np.einsum("bij,bjk,blk->bil", R, np.asarray(inertia, np.float64), R)
        m = np.asarray(mass, np.float64)
        M = np.einsum("b,bin,bim->nm", m, jv, jv) + np.einsum("bin,bij,bjm->nm", jw, Iw, jw)
        if armature is not None:
            M = M + np.diag(np.asarray(armature, np.float64))
        return M

    def dof_address(self, name: str) -> int:
        """The first qvel index of joint ``name``."""
        if name not in self.names:
            raise ValueError(f"no joint named {name!r} (joints: {list(self.names)})")
        k = self.names.index(name)
        return sum(NV[j.kind] for j in self.joints[:k])


class _Pose(NamedTuple):
    pos: jnp.ndarray
    quat: jnp.ndarray
    vel: jnp.ndarray
    angvel: jnp.ndarray


def _x64() -> bool:
    import jax
    return bool(jax.config.jax_enable_x64)


def joint_record(kind: str, child: int, parent, ref: float, anchor_w, axis_w,
                 child_pos, child_R, parent_pos, parent_R, com=(0.0, 0.0, 0.0)) -> Joint:
    """A :class:`Joint` from build-time world-frame numbers (numpy): the joint's
    anchor and axis, the child's and the parent's ODE body poses (parent None:
    the world)."""
    if kind not in KINDS:
        raise ValueError(f"joint kind must be one of {KINDS} (got {kind!r})")
    if parent is None:
        parent_pos, parent_R = np.zeros(3), np.eye(3)
    Rp = np.asarray(parent_R, np.float64)
    rel_R = Rp.T @ np.asarray(child_R, np.float64)
    rel_pos = Rp.T @ (np.asarray(child_pos, np.float64) - parent_pos)
    ax = Rp.T @ np.asarray(axis_w, np.float64)
    n = np.linalg.norm(ax)
    ax = ax / n if n > 0 else ax
    return Joint(kind, int(child), -1 if parent is None else int(parent), float(ref),
                 tuple(float(x) for x in ax),
                 tuple(float(x) for x in Rp.T @ (np.asarray(anchor_w, np.float64) - parent_pos)),
                 tuple(float(x) for x in rel_pos),
                 tuple(float(x) for x in mat_to_quat(rel_R)),
                 tuple(float(x) for x in com))
