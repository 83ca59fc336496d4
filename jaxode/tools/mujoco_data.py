"""MuJoCo's per-body quantities of a model loaded from MJCF, from a jaxode State.

MuJoCo's observations (Gymnasium's Ant, Humanoid, Reacher, ...) read ``mjData``
fields that are defined per *MJCF body*, where jaxode steps ODE bodies (one per
jointed MJCF body, its jointless children welded into it, intermediate bodies
for a body with several joints: :mod:`jaxode.io.mjcf`). :class:`Bodies`
(``builder.mjcf_info["mj_bodies"]``, made by :func:`jaxode.load_mjcf`) is the
static map, in MuJoCo's body order (0 is the world), and the functions here
compute, traced (jit / vmap / grad), for one world:

* ``xpos`` / ``xmat``: each MJCF body frame in the world [m];
* ``xipos``: its centre of mass [m];
* ``subtree_com``: the centre of mass of each body's subtree [m] (MuJoCo's
  ``subtree_com``; the com-based quantities use the one of the body's root,
  ``body_rootid``, the ancestor just below the world);
* ``cinert`` (nbody, 10): MuJoCo's com-based inertia ``[Ixx, Iyy, Izz, Ixy, Ixz,
  Iyz, m dx, m dy, m dz, m]`` about ``subtree_com[root]``, world axes
  [kg m^2, kg m, kg] (``mju_inertCom``: d = xipos - subtree_com[root]);
* ``cvel`` (nbody, 6): ``[angular velocity, linear velocity of the body point at
  subtree_com[root]]``, world frame [rad/s, m/s];
* :func:`cfrc_ext` (nbody, 6): the contact forces of the last step on each body,
  ``[torque about subtree_com[root], force]``, world frame [N m, N] (MuJoCo's
  ``cfrc_ext`` after ``mj_rnePostConstraint``; ``xfrc_applied`` is not part of
  a jaxode State, so it is the contacts alone);
* :func:`site_xpos`, :func:`mass_center` (Gymnasium's humanoid), and
  :func:`qfrc_actuator` (the actuators' joint-space forces, MuJoCo's
  ``qfrc_actuator``).

Contact forces come from ``state.contacts.force`` (normal, fdir1, fdir2
coordinates); the friction directions are rebuilt from the stored normal with
the rows' own rule (:func:`jaxode.sim.constraint.friction_frame`; geom fdir1
at the end of the step, which is exact for MJCF models: MJCF has no fdir1).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxode._struct import pytree_dataclass
from jaxode.sim import math as jm


@dataclasses.dataclass(frozen=True, eq=False)
class Bodies:
    """The MJCF bodies of a loaded model (host numbers, build time), MuJoCo's
    order; index 0 is the world.

    names (nbody,); parent (nbody,) MuJoCo's body_parentid (the world: 0);
    root (nbody,) body_rootid; ode_body (nbody,) the ODE body each is part of
    (-1: static, the world or welded to it); rel_pos (nbody, 3), rel_rot
    (nbody, 3, 3): the MJCF body frame in its ODE body's frame (in the world's
    for static bodies); mass (nbody,) [kg]; com (nbody, 3) [m] centre of mass
    in the MJCF body frame; inertia (nbody, 3, 3) [kg m^2] about the centre of
    mass, MJCF body axes; geom_body (ngeom,) the MJCF body of each jaxode geom;
    sites: name -> (MJCF body, position (3,) in its frame [m])."""

    names: tuple
    parent: np.ndarray
    root: np.ndarray
    ode_body: np.ndarray
    rel_pos: np.ndarray
    rel_rot: np.ndarray
    mass: np.ndarray
    com: np.ndarray
    inertia: np.ndarray
    geom_body: np.ndarray
    sites: dict
    principal: np.ndarray = None
    principal_rot: np.ndarray = None

    def __post_init__(self):
        if self.principal is None:
            w, V = np.linalg.eigh(np.asarray(self.inertia, np.float64))
            V = V * np.where(np.linalg.det(V) < 0, -1.0, 1.0)[:, None, None]
            object.__setattr__(self, "principal", np.maximum(w, 0.0))
            object.__setattr__(self, "principal_rot", V)

    @property
    def nbody(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """MuJoCo's body id of ``name``; ValueError naming the bodies otherwise."""
        if name not in self.names:
            raise ValueError(f"no MJCF body named {name!r}; bodies are {list(self.names)}")
        return self.names.index(name)


@pytree_dataclass
class BodyData:
    """One world's per-MJCF-body kinematics (module docstring): xpos (nbody, 3),
    xmat (nbody, 3, 3), xipos (nbody, 3), subtree_com (nbody, 3), cinert
    (nbody, 10), cvel (nbody, 6); row 0 is the world."""

    xpos: jnp.ndarray
    xmat: jnp.ndarray
    xipos: jnp.ndarray
    subtree_com: jnp.ndarray
    cinert: jnp.ndarray
    cvel: jnp.ndarray


def _rotations(q):
    """(n, 3, 3) rotation matrices of quaternions (n, 4)."""
    return jax.vmap(jm.quat_to_mat)(q)


def _ode_frames(table: Bodies, state):
    """Per MJCF body: its ODE body's (position, rotation, velocity, angular
    velocity); static bodies at the origin, at rest."""
    dt = state.pos.dtype
    idx = jnp.asarray(np.maximum(table.ode_body, 0))
    moving = jnp.asarray(table.ode_body >= 0)
    p = jnp.where(moving[:, None], state.pos[idx], 0.0)
    R = jnp.where(moving[:, None, None], _rotations(state.quat[idx]), jnp.eye(3, dtype=dt))
    v = jnp.where(moving[:, None], state.vel[idx], 0.0)
    w = jnp.where(moving[:, None], state.angvel[idx], 0.0)
    return p, R, v, w


def _subtree_sum(table: Bodies, x):
    """(nbody, ...) sums of ``x`` over each body's subtree (children after
    parents in MuJoCo's order, so one reverse pass)."""
    rows = [x[i] for i in range(table.nbody)]
    for i in range(table.nbody - 1, 0, -1):
        rows[int(table.parent[i])] = rows[int(table.parent[i])] + rows[i]
    return jnp.stack(rows)


def body_data(table: Bodies, state) -> BodyData:
    """MuJoCo's xpos, xmat, xipos, subtree_com, cinert and cvel of one world's
    ``state`` (module docstring)."""
    dt = state.pos.dtype
    p, R, v, w = _ode_frames(table, state)
    xmat = jm.einsum("bij,bjk->bik", R, jnp.asarray(table.rel_rot, dt))
    xpos = p + jm.einsum("bij,bj->bi", R, jnp.asarray(table.rel_pos, dt))
    xipos = xpos + jm.einsum("bij,bj->bi", xmat, jnp.asarray(table.com, dt))
    m = jnp.asarray(table.mass, dt)
    msum = _subtree_sum(table, m)
    mx = _subtree_sum(table, m[:, None] * xipos)
    subtree_com = jnp.where(msum[:, None] > 0, mx / jnp.where(msum > 0, msum, 1.0)[:, None],
                            xipos)
    c = subtree_com[jnp.asarray(table.root)]
    d = xipos - c
    I = jm.einsum("bij,bjk,blk->bil", xmat, jnp.asarray(table.inertia, dt), xmat)
    dd = jm.sum_terms(d * d, -1)
    I = I + m[:, None, None] * (dd[:, None, None] * jnp.eye(3, dtype=dt)
                                - d[:, :, None] * d[:, None, :])
    cinert = jnp.concatenate([
        jnp.stack([I[:, 0, 0], I[:, 1, 1], I[:, 2, 2], I[:, 0, 1], I[:, 0, 2], I[:, 1, 2]], -1),
        m[:, None] * d, m[:, None]], axis=-1)
    lin = v + jnp.cross(w, c - p)
    cvel = jnp.concatenate([w, lin], axis=-1)
    return BodyData(xpos=xpos, xmat=xmat, xipos=xipos, subtree_com=subtree_com, cinert=cinert,
                    cvel=cvel)


def contact_forces_world(model, state, params=None):
    """(C, 3) world-frame force [N] of each contact slot of the last step on
    geom 1's body (geom 2's body gets the opposite; invalid slots 0):
    ``state.contacts.force`` turned out of its (normal, fdir1, fdir2)
    coordinates with the rows' friction frame."""
    from jaxode.sim import constraint

    c = state.contacts
    params = model.params if params is None else params
    dt = state.pos.dtype
    # geoms' fdir1 in the world at the state's poses (None set: dPlaneSpace)
    gb = jnp.asarray(model.geom_body)
    R = jnp.concatenate([_rotations(state.quat), jnp.eye(3, dtype=dt)[None]], axis=0)
    grot = jm.einsum("gij,gjk->gik", R[gb], _rotations(jnp.asarray(model.geom_quat, dt)))
    fdir = jm.einsum("gij,gj->gi", grot, jnp.asarray(params.fdir1, dt))
    has = jm.sum_terms(params.fdir1 ** 2, -1) > 0
    n = c.normal
    t1, t2 = constraint.friction_frame(n, fdir[c.geom1], fdir[c.geom2], has[c.geom1])
    f = c.force.astype(dt)
    out = f[:, :1] * n + f[:, 1:2] * t1 + f[:, 2:3] * t2
    return jnp.where(c.valid[:, None], out, 0.0)


def cfrc_ext(model, table: Bodies, state, data: Optional[BodyData] = None, params=None):
    """(nbody, 6) MuJoCo's ``cfrc_ext``: per MJCF body the last step's contact
    forces on it, ``[torque about subtree_com[root], force]``, world frame [N m,
    N] (module docstring; contacts of geoms the loader merged keep the body the
    geom was written in)."""
    data = body_data(table, state) if data is None else data
    c = state.contacts
    f = contact_forces_world(model, state, params)
    gbody = jnp.asarray(table.geom_body)
    b1, b2 = gbody[c.geom1], gbody[c.geom2]
    centre = data.subtree_com[jnp.asarray(table.root)]
    out = jnp.zeros((table.nbody, 6), f.dtype)
    for b, sign in ((b1, 1.0), (b2, -1.0)):
        fb = sign * f
        tb = jnp.cross(c.pos - centre[b], fb)
        out = out.at[b].add(jnp.concatenate([tb, fb], axis=-1))
    return out.at[0].set(0.0)


def fluid_forces(table: Bodies, state, fluid, data: Optional[BodyData] = None):
    """(nbody, 6) MuJoCo's inertia-box fluid model (engine_passive.c, the model
    of ``<option density viscosity wind>`` without ``fluidshape``) per MJCF
    body: ``[torque, force]`` [N m, N], world frame, acting at the body's centre
    of mass (xipos). Each body is the box with its mass and principal inertia
    (sides b_i = sqrt(6 (I_j + I_k - I_i) / m)), moving with velocity v (less
    the wind) and angular velocity w in its principal frame:

    * viscous (Stokes) with the mean side d: f = -3 pi d mu v, g = -pi d^3 mu w;
    * quadratic drag: f_i = -rho/2 b_j b_k |v_i| v_i, g_i = -rho/64 b_i (b_j^4 +
      b_k^4) |w_i| w_i.

    Massless bodies feel none. ``fluid``: :class:`jaxode.io.mjcf.Fluid`."""
    data = body_data(table, state) if data is None else data
    dt = state.pos.dtype
    p, _, v, w = _ode_frames(table, state)
    v_com = v + jnp.cross(w, data.xipos - p)
    rot = jm.einsum("bij,bjk->bik", data.xmat, jnp.asarray(table.principal_rot, dt))
    lw = jm.einsum("bji,bj->bi", rot, w)
    lv = jm.einsum("bji,bj->bi", rot, v_com - jnp.asarray(fluid.wind, dt))
    I = table.principal
    m = np.where(table.mass > 0, table.mass, 1.0)
    box = np.sqrt(np.maximum(1e-15, np.stack([I[:, 1] + I[:, 2] - I[:, 0],
                                              I[:, 0] + I[:, 2] - I[:, 1],
                                              I[:, 0] + I[:, 1] - I[:, 2]], -1)) / m[:, None] * 6.0)
    mu, rho = float(fluid.viscosity), float(fluid.density)
    diam = box.mean(-1)
    g = -np.pi * diam[:, None] ** 3 * mu * lw
    f = -3.0 * np.pi * diam[:, None] * mu * lv
    area = np.stack([box[:, 1] * box[:, 2], box[:, 0] * box[:, 2], box[:, 0] * box[:, 1]], -1)
    f = f - 0.5 * rho * jnp.asarray(area, dt) * jnp.abs(lv) * lv
    b4 = box ** 4
    k = np.stack([box[:, 0] * (b4[:, 1] + b4[:, 2]), box[:, 1] * (b4[:, 0] + b4[:, 2]),
                  box[:, 2] * (b4[:, 0] + b4[:, 1])], -1) / 64.0
    g = g - rho * jnp.asarray(k, dt) * jnp.abs(lw) * lw
    out = jnp.concatenate([jm.einsum("bij,bj->bi", rot, g), jm.einsum("bij,bj->bi", rot, f)], -1)
    return jnp.where(jnp.asarray(table.mass > 0)[:, None], out, 0.0)


def site_xpos(table: Bodies, data: BodyData, name: str):
    """(3,) world position [m] of the MJCF site ``name``."""
    if name not in table.sites:
        raise ValueError(f"no MJCF site named {name!r}; sites are {sorted(table.sites)}")
    b, local = table.sites[name]
    return data.xpos[b] + jm.mm(data.xmat[b], jnp.asarray(local, data.xpos.dtype))


def mass_center(table: Bodies, data: BodyData):
    """(3,) the model's centre of mass [m] (Gymnasium's ``mass_center``: body
    masses times ``xipos``)."""
    m = jnp.asarray(table.mass, data.xipos.dtype)
    return jm.sum_terms(m[:, None] * data.xipos, 0) / float(np.sum(table.mass))


def qfrc_actuator(model, state, actuators, coords, ctrl):
    """(nv,) MuJoCo's ``qfrc_actuator``: each actuator's joint force ``gear *
    force`` [N m or N] (:func:`jaxode.io.mjcf.actuator_forces`) at its joint's
    dof. A servo's kv is the joint's implicit damping in jaxode
    (:class:`jaxode.io.mjcf.Actuator`), so its ``-kv qdot`` term is not here."""
    from jaxode.io.mjcf import actuator_forces

    acts = list(actuators.values()) if isinstance(actuators, dict) else list(actuators)
    f = actuator_forces(model, state, acts, ctrl)
    out = jnp.zeros((coords.nv,), state.pos.dtype)
    for k, act in enumerate(acts):
        out = out.at[coords.dof_address(act.joint_name)].add(f[k])
    return out
