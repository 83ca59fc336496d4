"""Derivatives through ``jaxode.step`` / ``jaxode.rollout`` against central finite differences.

Float64 throughout. The smooth scenes (free flight, hinge pendulums, a box
sliding at constant contact) share ONE model whose bodies do not interact, so
one compiled gradient serves every check; the independent truth is the
central difference of the same forward model. The smoothing knobs
(force-dependent slip, soft contacts from kp/kd) are checked against the
analytic recursion / spring equilibrium they imply and against libode (slip).

The derivative functions are compiled once per module. The fixture's program
(100 QuickStep iterations, float64 forward-mode, 96 worlds) runs long enough
that it is compiled with XLA's backend optimisation at level 2 (``_jit``,
fast_compile.RUN_HEAVY: 47 s compile + run against 116 s at the suite's
level 0); no semantics change.
"""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode

G = 9.81
H = 0.01
N = 40  # steps of the smooth scene (0.4 s: the box is still sliding)
LAYER = 1e-3  # contact surface layer: keeps the box's contacts in (no flicker)
ITER = 100  # QuickStep iterations: PGS converged, so a held motor runs exactly at its target
from fast_compile import RUN_HEAVY  # noqa: E402


def _jit(fn):
    return jax.jit(fn, compiler_options=RUN_HEAVY)



# ------------------------------------------------------------------ the smooth scene
# One model, bodies that never touch each other (geoms collide with the plane only):
#   0 free flight (asymmetric box, tumbling: gyroscopic term), no geom;
#   1-3 pendulums on world hinges about y (1 free, 2 motor with fmax large enough to
#       hold its target, 3 motor saturated at fmax), no geoms;
#   4 a box sliding on the plane (4 contacts all along);
#   5 a sphere falling onto the plane (contact onset; not smooth, checked for NaN);
#   6 a box on the plane under the tilted gravity (an incline) with friction
#     above the limit: it sticks unless force-dependent slip is on;
#   7 a sphere resting on a soft contact (kp, kd) or a hard one.
FREE, PEND, SLIDE, BALL, HELD, SOFT = 0, (1, 2, 3), 4, 5, 6, 7
SLIDE_GEOM, HELD_GEOM, SOFT_GEOM = 1, 3, 4
ANCHOR = np.array([[k, -5.0, 2.0] for k in range(3)])
ARM = 0.5  # [m] bob below the anchor
R_SOFT = 0.1
KP, KD = 2000.0, 63.0  # [N/m], [N s/m]: about critically damped for 0.5 kg

# Inputs differentiated with respect to: (name, value at the checked point).
INPUTS = [
    ("vel_x", 1.0), ("vel_y", 0.5), ("vel_z", 3.0),  # free body initial velocity [m/s]
    ("angvel_x", 0.3), ("angvel_y", 4.0), ("angvel_z", 0.4),  # [rad/s]
    ("force_x", 2.0), ("force_z", -1.0), ("torque_y", 0.2),  # state.force / torque [N, N m]
    ("mass", 2.0), ("inertia_xx", 0.075),  # free body mass [kg], body-frame Ixx [kg m^2]
    ("gravity_x", 0.3), ("gravity_z", -G),  # [m/s^2]
    ("theta0", 0.4), ("omega0", -0.5),  # pendulum 1: initial angle [rad] and rate [rad/s]
    ("motor_vel", 1.5), ("motor_fmax", 0.5),  # pendulum 2 target [rad/s], pendulum 3 fmax [N m]
    ("mu", 0.3), ("slide_vel", 2.0),  # sliding box: friction coefficient, initial vx [m/s]
    ("ball_z", 0.3),  # falling sphere's initial height [m]
    ("slip", 0.01),  # the box on the incline: slip [m/(s N)] (< 0: off)
    ("kp", KP), ("kd", KD), ("soft_mass", 0.5),  # soft contact (kp <= 0: hard), sphere mass
]
NAMES = [n for n, _ in INPUTS]
X0 = np.array([v for _, v in INPUTS])
NIN = len(NAMES)
BATCH = 32  # worlds per call of the compiled function


def _smooth_model():
    only_plane = dict(category_bits=2, collide_bits=1)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -G), contact_surface_layer=LAYER, iterations=ITER)
    b.add_plane(surface=jaxode.Surface(mu=10.0, bounce=1.0, bounce_vel=0.01), category_bits=1)
    b.add_body(pos=(0.0, 5.0, 2.0), mass=jaxode.mass.box(size=(0.1, 0.3, 0.6), total=2.0))
    # a rod through the hinge (not a point-like bob): its own inertia about the centre is
    # a third of m ARM^2, so PGS converges in tens of iterations (a point-like bob makes
    # the hinge rows and the motor row nearly dependent: thousands)
    bob = jaxode.mass.box(size=(0.05, 0.05, 2 * ARM), total=1.0)
    for k, (vel, fmax) in enumerate([(0.0, 0.0), (1.5, 1e3), (3.0, 0.5)]):
        i = b.add_body(pos=ANCHOR[k] - (0.0, 0.0, ARM), mass=bob)
        b.add_hinge(i, None, anchor=ANCHOR[k], axis=(0.0, 1.0, 0.0), vel=vel, fmax=fmax)
    cube = jaxode.mass.box(size=(0.2,) * 3, total=1.0)
    # resting exactly one surface layer deep: no ERP push, so the normal impulses sum
    # to m g h and the friction to mu m g h (the analytic check below)
    i = b.add_body(pos=(0.0, 0.0, 0.1 - LAYER), mass=cube)
    b.add_box(size=(0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.3), **only_plane)
    i = b.add_body(pos=(3.0, 0.0, 0.3), mass=jaxode.mass.sphere(radius=0.1, density=1000.0))
    b.add_sphere(radius=0.1, body=i, surface=jaxode.Surface(mu=0.3, bounce=0.5, bounce_vel=0.01),
                 **only_plane)
    i = b.add_body(pos=(0.0, 3.0, 0.1 - 2 * LAYER), mass=cube)
    b.add_box(size=(0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.5), **only_plane)
    i = b.add_body(pos=(3.0, 3.0, R_SOFT - 2 * LAYER), mass=jaxode.mass.sphere(radius=R_SOFT, total=0.5))
    b.add_sphere(radius=R_SOFT, body=i, surface=jaxode.Surface(mu=0.5), **only_plane)
    return b.build()


def _inputs(model, x):
    """(state, params) of the smooth scene for the input vector ``x`` (differentiable)."""
    v = dict(zip(NAMES, x))
    z = 0.0 * v["vel_x"]
    s = jaxode.init(model)
    p = model.params
    # free body: initial velocities, first-step force and torque, mass, Ixx, gravity
    s = s.replace(vel=s.vel.at[FREE].set(jnp.stack([v["vel_x"], v["vel_y"], v["vel_z"]])),
                  angvel=s.angvel.at[FREE].set(
                      jnp.stack([v["angvel_x"], v["angvel_y"], v["angvel_z"]])))
    s = jaxode.add_force(s, FREE, jnp.stack([v["force_x"], z, v["force_z"]]))
    s = jaxode.add_torque(s, FREE, jnp.stack([z, v["torque_y"], z]))
    p = p.replace(body_mass=p.body_mass.at[FREE].set(v["mass"]).at[SOFT].set(v["soft_mass"]),
                  body_inertia=p.body_inertia.at[FREE, 0, 0].set(v["inertia_xx"]),
                  gravity=jnp.stack([v["gravity_x"], z, v["gravity_z"]]))
    # pendulum 1: turned by theta0 about the hinge axis (y) through its anchor, rate omega0
    th, om = v["theta0"], v["omega0"]
    r = jnp.stack([-ARM * jnp.sin(th), z, -ARM * jnp.cos(th)])  # R_y(theta) (0, 0, -ARM)
    w = jnp.stack([z, om, z])
    i = PEND[0]
    s = s.replace(pos=s.pos.at[i].set(jnp.asarray(ANCHOR[0]) + r),
                  quat=s.quat.at[i].set(jnp.stack([jnp.cos(th / 2), z, jnp.sin(th / 2), z])),
                  vel=s.vel.at[i].set(jnp.cross(w, r)), angvel=s.angvel.at[i].set(w))
    p = p.replace(joint_vel=p.joint_vel.at[1, 0].set(v["motor_vel"]),
                  joint_fmax=p.joint_fmax.at[2, 0].set(v["motor_fmax"]))
    # sliding box, falling sphere, slip of the box held on the incline, soft contact
    s = s.replace(vel=s.vel.at[SLIDE, 0].set(v["slide_vel"]), pos=s.pos.at[BALL, 2].set(v["ball_z"]))
    p = p.replace(mu=p.mu.at[SLIDE_GEOM].set(v["mu"]), slip1=p.slip1.at[HELD_GEOM].set(v["slip"]))
    soft = v["kp"] > 0
    erp, cfm = jaxode.erp_cfm_from_kp_kd(jnp.where(soft, v["kp"], 1.0), v["kd"], H)
    p = p.replace(soft_erp=p.soft_erp.at[SOFT_GEOM].set(jnp.where(soft, erp, -1.0)),
                  soft_cfm=p.soft_cfm.at[SOFT_GEOM].set(jnp.where(soft, cfm, -1.0)))
    return s, p


def _outputs(model, s):
    """Final quantities checked (vector, see OUT_NAMES)."""
    parts = [s.pos[FREE], s.quat[FREE], s.vel[FREE], s.angvel[FREE]]
    for j in range(3):
        parts.append(jnp.stack([jaxode.hinge_angle(model, s, j), jaxode.hinge_angle_rate(model, s, j)]))
    parts.append(jnp.stack([s.pos[SLIDE, 0], s.vel[SLIDE, 0], s.pos[BALL, 2], s.pos[HELD, 0],
                            s.pos[SOFT, 2]]))
    return jnp.concatenate(parts)


OUT_NAMES = ([f"free.pos{k}" for k in "xyz"] + [f"free.quat{k}" for k in "wxyz"]
             + [f"free.vel{k}" for k in "xyz"] + [f"free.angvel{k}" for k in "xyz"]
             + [f"pend{j}.{q}" for j in (1, 2, 3) for q in ("angle", "rate")]
             + ["slide.x", "slide.vx", "ball.z", "held.x", "soft.z"])


def _run(fn, xs, ts):
    """``fn`` (vmapped jvp, BATCH worlds) over all rows of xs, ts; returns (y, dy)."""
    n = xs.shape[0]
    m = -(-n // BATCH) * BATCH
    xs = np.concatenate([xs, np.repeat(xs[-1:], m - n, 0)])
    ts = np.concatenate([ts, np.repeat(ts[-1:], m - n, 0)])
    out = [fn(jnp.asarray(xs[i:i + BATCH]), jnp.asarray(ts[i:i + BATCH])) for i in range(0, m, BATCH)]
    return (np.concatenate([np.asarray(o[0]) for o in out])[:n],
            np.concatenate([np.asarray(o[1]) for o in out])[:n])


def _requests(x, inputs):
    """Rows (x, t): one unit tangent per input, then the central-difference points."""
    ks = [NAMES.index(i) for i in inputs]
    eps = np.array([1e-6 * max(1.0, abs(x[k])) for k in ks])
    xs = np.repeat(x[None], 3 * len(ks), axis=0)
    ts = np.zeros_like(xs)
    for j, k in enumerate(ks):
        ts[j, k] = 1.0
        xs[len(ks) + 2 * j, k] += eps[j]
        xs[len(ks) + 2 * j + 1, k] -= eps[j]
    return xs, ts, eps


def _jac_fd(y, dy, inputs, eps):
    """(Jacobian columns, central differences) as (outputs, inputs) arrays."""
    n = len(inputs)
    yp, ym = y[n::2][:n], y[n + 1::2][:n]
    return dy[:n].T, ((yp - ym) / (2 * eps[:, None])).T


@pytest.fixture(scope="module")
def smooth():
    """Forward-mode derivatives through ``jaxode.rollout`` under ``jax.vmap``, one
    compile: each world carries one input point and one tangent; the central
    differences come from the primal outputs of worlds at x +- eps e_k."""
    with jax.enable_x64(True):
        model = _smooth_model()

        def out(x):
            s, p = _inputs(model, x)
            final, _ = jaxode.rollout(model, s, N, H, params=p)
            return _outputs(model, final)

        jvp = _jit(jax.vmap(lambda x, t: jax.jvp(out, (x,), (t,))))
        # all inputs at X0; the hard variants (no slip, hard contact) for two inputs;
        # the falling sphere released at heights around the step where contact
        # begins, from resting exactly on the plane (depth 0, v = 0) upwards
        xs, ts, eps = _requests(X0, NAMES)
        xh = X0.copy()
        xh[NAMES.index("slip")] = -1.0
        xh[NAMES.index("kp")] = 0.0
        hard_in = ["gravity_x", "soft_mass"]
        xsh, tsh, epsh = _requests(xh, hard_in)
        n_onset = 3 * BATCH - len(xs) - len(xsh)
        onset_z = np.concatenate([[0.1], 0.1 + np.geomspace(1e-9, 0.2, n_onset - 1)])
        xo = np.repeat(X0[None], n_onset, axis=0)
        xo[:, NAMES.index("ball_z")] = onset_z
        to = np.zeros_like(xo)
        to[:, NAMES.index("ball_z")] = 1.0
        y, dy = _run(jvp, np.concatenate([xs, xsh, xo]), np.concatenate([ts, tsh, to]))
        a, b = len(xs), len(xs) + len(xsh)
        jac, fd = _jac_fd(y[:a], dy[:a], NAMES, eps)
        jac_h, fd_h = _jac_fd(y[a:b], dy[a:b], hard_in, epsh)
        return dict(model=model, y0=y[0], jac=jac, fd=fd, y_hard=y[a],
                    jac_h=jac_h, fd_h=fd_h, hard_in=hard_in, onset=(onset_z, y[b:], dy[b:]))


def _check(jac, fd, outputs, inputs, floor=1e-8):
    """AD against central differences: |ad - fd| <= 1e-4 |fd| + floor for every pair."""
    rows = [OUT_NAMES.index(o) for o in outputs]
    cols = [NAMES.index(i) for i in inputs]
    ad, d = jac[np.ix_(rows, cols)], fd[np.ix_(rows, cols)]
    assert np.all(np.isfinite(ad))
    ok = np.abs(ad - d) <= 1e-4 * np.abs(d) + floor
    bad = [(outputs[r], inputs[c], ad[r, c], d[r, c]) for r, c in zip(*np.nonzero(~ok))]
    assert not bad, bad


def _d(jac, out, inp):
    return jac[OUT_NAMES.index(out), NAMES.index(inp)]


def test_free_flight_derivatives_match_finite_differences(smooth):
    outs = [o for o in OUT_NAMES if o.startswith("free.")]
    ins = ["vel_x", "vel_y", "vel_z", "angvel_x", "angvel_y", "angvel_z", "force_x", "force_z",
           "torque_y", "mass", "inertia_xx", "gravity_x", "gravity_z"]
    _check(smooth["jac"], smooth["fd"], outs, ins)
    # semi-implicit Euler: x_n = x_0 + n h vx0 + h^2 (n (n+1)/2 gx + n fx/m), the force
    # acting in the first step only
    jac = smooth["jac"]
    assert _d(jac, "free.posx", "vel_x") == pytest.approx(N * H, rel=1e-12)
    assert _d(jac, "free.posx", "gravity_x") == pytest.approx(H * H * N * (N + 1) / 2, rel=1e-12)
    assert _d(jac, "free.posx", "force_x") == pytest.approx(N * H * H / 2.0, rel=1e-12)
    assert _d(jac, "free.posx", "mass") == pytest.approx(-N * H * H * 2.0 / 4.0, rel=1e-12)
    # rotation: the tumbling body's angular velocity depends on its inertia
    assert abs(_d(jac, "free.angvelx", "inertia_xx")) > 1.0


def test_pendulum_derivatives_match_finite_differences(smooth):
    outs = [f"pend{j}.{q}" for j in (1, 2, 3) for q in ("angle", "rate")]
    _check(smooth["jac"], smooth["fd"], outs,
           ["theta0", "omega0", "motor_vel", "motor_fmax", "gravity_x", "gravity_z"])
    jac = smooth["jac"]
    # the held motor runs at its target (ODE's hinge rate is axis . (w1 - w2))
    assert abs(_d(jac, "pend2.rate", "motor_vel")) == pytest.approx(1.0, rel=1e-6)
    # the saturated motor's rate depends on its torque limit, not on its target
    assert abs(_d(jac, "pend3.rate", "motor_fmax")) > 0.1
    assert _d(jac, "pend1.angle", "theta0") != 0.0


def test_sliding_box_derivatives_match_finite_differences(smooth):
    _check(smooth["jac"], smooth["fd"], ["slide.x", "slide.vx"], ["mu", "slide_vel", "gravity_x"])
    # while sliding, x_n = x_0 + h sum_k (v0 + (gx - mu g) h k)
    jac = smooth["jac"]
    assert _d(jac, "slide.x", "mu") == pytest.approx(-G * H * H * N * (N + 1) / 2, rel=1e-3)
    assert _d(jac, "slide.vx", "slide_vel") == pytest.approx(1.0, rel=1e-3)


def test_no_nan_across_contact_onset(smooth):
    z0, y, dy = smooth["onset"]
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(dy))
    k = OUT_NAMES.index("ball.z")
    # the sphere did land (started above the plane in all but the first world)
    assert np.all(y[:, k] < 0.1 + 0.01)
    # resting on the plane from the start (depth 0, inside the surface layer, where every
    # depth in [0, LAYER] is an equilibrium): the sphere stays where it is put
    # (the CFM of 1e-10 lets it creep by cfm * m g per step: ~1e-9 m in 40 steps)
    assert dy[0, k] == pytest.approx(1.0, abs=1e-9)
    assert y[0, k] == pytest.approx(0.1, abs=1e-7)


def _creep(slip, gx, m=1.0, n=N):
    """Displacement after n steps of a box on 4 slipping contacts (ODE's slip = the friction
    rows' CFM, so each contact obeys v = slip * f_i, implicitly in the step):
    m (v_k+1 - v_k) = h (m g_x - 4 v_k+1 / slip), i.e. v_k = v_inf (1 - a^k) with
    v_inf = slip m g_x / 4 and a = 1 / (1 + 4 h / (m slip)); x_n = h sum_k v_k."""
    a = 1.0 / (1.0 + 4.0 * H / (m * slip))
    v_inf = slip * m * gx / 4.0
    return H * v_inf * (n - a * (1.0 - a**n) / (1.0 - a))


def test_force_dependent_slip_gives_analytic_creep(smooth):
    """The box under the tilted gravity sticks (friction bound mu m g >> m g_x) unless
    slip is on; with slip it creeps at the steady speed slip * m g_x / 4, proportional to
    the tangential force, after the implicit step's transient (``_creep``)."""
    jac, y0 = smooth["jac"], smooth["y0"]
    _check(jac, smooth["fd"], ["held.x"], ["slip", "gravity_x"])
    gx, slip = X0[NAMES.index("gravity_x")], X0[NAMES.index("slip")]
    assert y0[OUT_NAMES.index("held.x")] == pytest.approx(_creep(slip, gx), rel=1e-6)
    e = 1e-7
    d_slip = (_creep(slip * (1 + e), gx) - _creep(slip * (1 - e), gx)) / (2 * e * slip)
    assert _d(jac, "held.x", "slip") == pytest.approx(d_slip, rel=1e-5)
    assert _d(jac, "held.x", "gravity_x") == pytest.approx(_creep(slip, 1.0), rel=1e-6)
    # without slip it does not move, and the tilt does not move it
    assert smooth["y_hard"][OUT_NAMES.index("held.x")] == pytest.approx(0.0, abs=1e-8)
    hard = dict(zip(smooth["hard_in"], range(len(smooth["hard_in"]))))
    assert abs(smooth["jac_h"][OUT_NAMES.index("held.x"), hard["gravity_x"]]) < 1e-6


def test_soft_contact_settles_at_spring_equilibrium(smooth):
    """A sphere on a kp/kd contact (ERP = h kp / (h kp + kd), CFM = 1 / (h kp + kd), the
    ODE manual's spring-damper mapping) settles where kp * (depth - layer) = m g; the
    contact is critically damped, so after 0.4 s (25 time constants) it is at rest there."""
    jac, y0 = smooth["jac"], smooth["y0"]
    _check(jac, smooth["fd"], ["soft.z"], ["kp", "kd", "soft_mass"])
    m, kp = X0[NAMES.index("soft_mass")], X0[NAMES.index("kp")]
    depth = R_SOFT - y0[OUT_NAMES.index("soft.z")] - LAYER
    assert depth == pytest.approx(m * G / kp, rel=1e-3)
    assert _d(jac, "soft.z", "kp") == pytest.approx(m * G / kp**2, rel=1e-2)
    assert _d(jac, "soft.z", "soft_mass") == pytest.approx(-G / kp, rel=1e-2)
    # the hard contact: (almost) no sinking, whatever the mass
    hard = dict(zip(smooth["hard_in"], range(len(smooth["hard_in"]))))
    assert R_SOFT - smooth["y_hard"][OUT_NAMES.index("soft.z")] <= LAYER + 1e-6
    assert abs(smooth["jac_h"][OUT_NAMES.index("soft.z"), hard["soft_mass"]]) < 1e-6
