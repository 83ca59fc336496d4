"""Gazebo's physics.cc integration tests, ported by name (gazebo-classic
``test/integration/physics.cc``, ``PhysicsTest``, ODE as the engine).

Each world is rebuilt from the test's own numbers; the truths are the test's
closed forms with its tolerance (``PHYSICS_TOL`` = 1e-2). Gazebo's physics
defaults (dt 1 ms, 50 iterations, erp 0.2, cfm 0, contact_max_correcting_vel
100, surface layer 1 mm) are what :func:`jaxode.load_sdf` applies when a world
names none.
"""
from __future__ import annotations

import math

import jax
import numpy as np

import jaxode
from jaxode.sim.math import quat_to_mat
from fast_compile import OPTIONS as _FAST

PHYSICS_TOL = 1e-2
DT = 0.001


def test_collision_filtering():
    """PhysicsTest.CollisionFiltering: a model of two overlapping unit-box links
    (y = +-0.1 m) without <self_collide> falls for 5 steps: the links do not
    repel each other (vx = vy = 0 exactly) and fall (vz < 0). Also with both
    links' collisions given a shared collide_bitmask (the links of one model
    still do not collide: Gazebo filters them by model, before the masks)."""
    def model(mask: str) -> str:
        contact = (f"<surface><contact><collide_bitmask>{mask}</collide_bitmask></contact>"
                   "</surface>") if mask else ""
        links = "".join(
            f'<link name="link0{i + 1}"><pose>0 {y} 0 0 0 0</pose><collision name="geom">'
            f'<geometry><box><size>1 1 1</size></box></geometry>{contact}</collision></link>'
            for i, y in enumerate((0.1, -0.1)))
        return (f'<sdf version="1.6"><world name="default"><model name="multiLinkModel">'
                f'<pose>0 0 2 0 0 0</pose>{links}</model></world></sdf>')

    for mask in ("", "0x03"):
        b = jaxode.load_sdf(model(mask))
        m = b.build()
        s = jax.jit(lambda s: jaxode.rollout(m, s, 5, b.dt)[0], compiler_options=_FAST)(
            jaxode.init(m))
        vel = np.asarray(s.vel)
        assert vel.shape[0] == 2
        assert np.all(vel[:, :2] == 0.0), (mask, vel)
        assert np.all(vel[:, 2] < 0.0), (mask, vel)


def test_inelastic_collision():
    """PhysicsTest.InelasticCollision (the collision_test world): a 1 kg unit
    box at x = 0 and a 1 kg sphere of radius 0.5 m at x = 2 (a 1 m gap), no
    gravity, no bounce; a 1000 N push on the box for the first 1 ms step gives
    it 1 m/s (the test sets it after its first step, so it acts in the second), it reaches the sphere at t = 1 s and the two, of equal mass,
    move on together at 0.5 m/s (momentum conserved, no rebound). Checked each
    step against the test's own integration of the ideal motion, except in
    the collision's transition 1 s < t < 1.01 s, within 1e-2 m and m/s; the
    sphere stays at x = 2, still, until t = 1 s (exactly, as the test asserts)."""
    b = jaxode.WorldBuilder(gravity=(0, 0, 0), erp=0.2, cfm=0.0, iterations=50, sor=1.3,
                            contact_max_correcting_vel=100.0, contact_surface_layer=0.001)
    box = b.add_body(pos=(0, 0, 0.5), mass=jaxode.mass.box(size=(1, 1, 1), total=1.0))
    b.add_box((1, 1, 1), body=box)
    ball = b.add_body(pos=(2, 0, 0.5), mass=jaxode.mass.sphere(radius=0.5, total=1.0))
    b.add_sphere(0.5, body=ball)
    m = b.build()
    f, steps = 1000.0, int(1.1 / DT)

    def one(s, i):
        # Gazebo's loop sets the force after its first step: it acts in the second
        s = jax.lax.cond(i == 1, lambda s: jaxode.add_force(s, box, (f, 0.0, 0.0)),
                         lambda s: s, s)
        s = jaxode.step(m, s, DT)
        return s, (s.pos[:, 0], s.vel[:, 0])

    run = jax.jit(lambda s: jax.lax.scan(one, s, np.arange(steps))[1], compiler_options=_FAST)
    xs, vs = (np.asarray(a) for a in run(jaxode.init(m)))
    x = v = 0.0
    mass = 1.0
    for i in range(steps):
        t = i * DT                                  # the test reads the time before its step
        if not 1.0 < t < 1.01:
            assert abs(xs[i, box] - x) < PHYSICS_TOL, (i, xs[i, box], x)
            assert abs(vs[i, box] - v) < PHYSICS_TOL, (i, vs[i, box], v)
            if t <= 1.0:
                assert xs[i, ball] == 2.0 and vs[i, ball] == 0.0, (i, xs[i, ball], vs[i, ball])
            else:
                assert abs(xs[i, ball] - (x + 1.0)) < PHYSICS_TOL, (i, xs[i, ball], x)
                assert abs(vs[i, ball] - v) < PHYSICS_TOL, (i, vs[i, ball], v)
        vold = v
        if i == 0:
            v = vold + DT * f / mass
        elif t >= 1.0:
            v = DT * f / 2.0                        # inelastic, equal masses
        x = x + DT * (v + vold) / 2.0


def _rollout(src: str, steps: int):
    b = jaxode.load_sdf(src)
    m = b.build()
    _, traj = jax.jit(lambda s: jaxode.rollout(m, s, steps, b.dt), compiler_options=_FAST)(
        jaxode.init(m))
    return b, m, {k: np.asarray(getattr(traj, k)) for k in ("pos", "quat", "vel", "angvel", "time")}


def _body(b, model: str) -> int:
    names = b.sdf_info["bodies"]
    return names[next(k for k in names if k.startswith(model + "::"))]


def _free_fall_checks(traj, order, body_of, start_of, g, exact_xy=True):
    """The Gazebo tests' first loop: model k of ``order`` is checked after steps
    4k + 1 (downward velocity g t within 1 %), 4k + 2 (position z0 + g t^2 / 2
    within 1 % and x, y where they started) and 4k + 4 (still falling)."""
    for k, name in enumerate(order):
        i, x0, z0 = body_of[name], start_of[name][:2], start_of[name][2]
        s1, s2, s3 = 4 * k, 4 * k + 1, 4 * k + 3          # trajectory rows after those steps
        t = traj["time"][s1]
        v1 = traj["vel"][s1, i]
        assert abs(v1[2] - g * t) <= -g * t * PHYSICS_TOL, (name, v1, t)
        p1 = traj["pos"][s2, i]
        zf = z0 + g / 2 * t * t
        assert abs(p1[2] - zf) <= zf * PHYSICS_TOL, (name, p1, zf)
        if exact_xy:          # physics.cc asserts EXPECT_EQ: not a bit of drift
            assert v1[0] == 0.0 and v1[1] == 0.0, (name, v1)
            assert p1[0] == x0[0] and p1[1] == x0[1], (name, p1, x0)
        else:                 # SpawnDropCoGOffset: 1e-16 m/s and 1e-4 m
            assert np.all(np.abs(v1[:2]) <= 1e-16), (name, v1)
            assert np.all(np.abs(p1[:2] - x0) <= PHYSICS_TOL ** 2), (name, p1, x0)
        assert traj["vel"][s3, i, 2] < v1[2] and traj["pos"][s3, i, 2] < p1[2], name


def _settle_steps(z0: float, g: float, checked: int) -> int:
    """The tests' second phase: to the predicted ground contact of a body whose
    bottom is 0.5 m below its start, plus 0.5 s of settling."""
    t_hit = math.sqrt(2 * (z0 - 0.5) / (-g))
    return int(math.ceil((t_hit + 0.5 - checked * DT) / DT - 1e-9))


def test_spawn_drop():
    """PhysicsTest.SpawnDrop (empty world, g = -9.8 m/s^2): a unit box, a sphere
    (radius 0.5 m), a cylinder (radius 0.5 m, length 1 m), a link without
    collision, and a box whose link is offset (1000, 1000, 0) m from its model
    frame, all dropped from z0 = 3 m. Free fall first (velocity g t and height
    z0 + g t^2 / 2 within 1 %, x and y exactly where they started); at the
    predicted contact time plus 0.5 s every shape rests with its centre at
    0.5 m (within 1e-2 m and m/s, x and y where they started), the empty link
    still falls freely (velocity and height within 1 %), and the offset box
    rests at (1000, 1000, 0.5) for 20 more steps."""
    z0, g = 3.0, -9.8

    def model(name, x, shape, link_pose="0 0 0 0 0 0", inertial=""):
        coll = (f'<collision name="geom"><geometry>{shape}</geometry></collision>'
                if shape else "")
        return (f'<model name="{name}"><pose>{x} 0 {z0} 0 0 0</pose><link name="body">'
                f'<pose>{link_pose}</pose>{inertial}{coll}</link></model>')

    offset_inertial = ("<inertial><mass>4.0</mass><inertia><ixx>0.1667</ixx><ixy>0</ixy>"
                       "<ixz>0</ixz><iyy>0.1667</iyy><iyz>0</iyz><izz>0.1667</izz></inertia>"
                       "</inertial>")
    models = (model("test_box", 0, "<box><size>1 1 1</size></box>")
              + model("test_sphere", 4, "<sphere><radius>0.5</radius></sphere>")
              + model("test_cylinder", 8, "<cylinder><radius>0.5</radius><length>1</length>"
                                          "</cylinder>")
              + model("test_empty", 12, "")
              + model("link_offset_box", 0, "<box><size>1 1 1</size></box>",
                      "1000 1000 0 0 0 0", offset_inertial))
    src = ('<sdf version="1.6"><world name="default"><include><uri>model://ground_plane</uri>'
           f'</include>{models}</world></sdf>')
    order = sorted(["test_box", "test_sphere", "test_cylinder", "test_empty", "link_offset_box"])
    settle = _settle_steps(z0, g, 4 * len(order))
    b, m, traj = _rollout(src, 4 * len(order) + settle + 20)
    body_of = {n: _body(b, n) for n in order}
    start = {n: (x, 0.0, z0) for n, x in (("test_box", 0.0), ("test_sphere", 4.0),
                                          ("test_cylinder", 8.0), ("test_empty", 12.0),
                                          ("link_offset_box", 1000.0))}
    start["link_offset_box"] = (1000.0, 1000.0, z0)
    _free_fall_checks(traj, order, body_of, start, g)
    r = 4 * len(order) + settle - 1                     # after the settling steps
    t = traj["time"][r]
    for name in order:
        i = body_of[name]
        v, p = traj["vel"][r, i], traj["pos"][r, i]
        assert np.all(np.abs(v[:2]) < PHYSICS_TOL), (name, v)
        assert np.all(np.abs(p[:2] - start[name][:2]) < PHYSICS_TOL), (name, p)
        if name == "test_empty":
            assert abs(v[2] - g * t) <= -g * t * PHYSICS_TOL, (name, v, t)
            zf = z0 + g / 2 * t * t
            assert abs(p[2] - zf) <= abs(zf * PHYSICS_TOL), (name, p, zf)
        else:
            assert abs(v[2]) < PHYSICS_TOL, (name, v)
            assert abs(p[2] - 0.5) < PHYSICS_TOL, (name, p)
    off = traj["pos"][r:r + 20, body_of["link_offset_box"]]
    assert np.all(np.abs(off - [1000.0, 1000.0, 0.5]) < PHYSICS_TOL), off


def test_spawn_drop_cog_offset():
    """PhysicsTest.SpawnDropCoGOffset: spheres (1 kg, radius 0.5 or 1.5 m) whose
    centre of gravity sits at the centre, 0.5 m below, above, or to the side
    (+y, +x, 45 deg, -30 deg), their bottoms 3 m up. Free fall as SpawnDrop;
    0.5 s after the predicted contact each rests on the ground (centre height =
    radius, vertical velocity and spin ~0, within 1e-2); the side-offset ones
    roll towards their offset without slipping (centre velocity = omega x r,
    the contact point still and the top at twice the centre's speed, within
    1e-2; speed above 0.2 offset, and rolled further than the offset), the
    others stay put. The sphere's centre is the model frame Gazebo reads (the
    body's origin here is its centre of gravity)."""
    z0, g, r1, r2 = 3.0, -9.8, 0.5, 1.5
    a45, a30 = math.radians(45), math.radians(-30)
    spheres = [("small_centered_sphere", 0, 0, r1, (0, 0, 0)),
               ("large_centered_sphere", 4, 0, r2, (0, 0, 0)),
               ("lowered_cog_sphere", 8, 0, r2, (0, 0, -r1)),
               ("raised_cog_sphere", -4, 0, r2, (0, 0, r1)),
               ("cog_y_offset_sphere", -8, 0, r2, (0, r1, 0)),
               ("cog_x_offset_sphere", 15, 0, r2, (r1, 0, 0)),
               ("cog_xy_45deg_offset_sphere", 0, 8, r2, (r1 * math.cos(a45), r1 * math.sin(a45), 0)),
               ("cog_xy_-30deg_offset_sphere", 0, -8, r2,
                (r1 * math.cos(a30), r1 * math.sin(a30), 0))]
    models = ""
    for name, x, y, r, c in spheres:
        i = 0.4 * r * r
        models += (f'<model name="{name}"><pose>{x} {y} {z0 + r} 0 0 0</pose><link name="link">'
                   f'<inertial><pose>{c[0]} {c[1]} {c[2]} 0 0 0</pose><mass>1</mass><inertia>'
                   f'<ixx>{i}</ixx><iyy>{i}</iyy><izz>{i}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz>'
                   f'</inertia></inertial><collision name="geom"><geometry><sphere><radius>{r}'
                   '</radius></sphere></geometry></collision></link></model>')
    src = ('<sdf version="1.6"><world name="default"><include><uri>model://ground_plane</uri>'
           f'</include>{models}</world></sdf>')
    settle = _settle_steps(z0, g, 4 * len(spheres))
    b, m, traj = _rollout(src, 4 * len(spheres) + settle)
    body_of = {s[0]: _body(b, s[0]) for s in spheres}

    def centre(row, i, c):
        """The sphere's centre and its velocity from the body (centre of gravity)."""
        q = traj["quat"][row, i]
        w, v = traj["angvel"][row, i], traj["vel"][row, i]
        rot = np.asarray(quat_to_mat(q), float)
        d = -rot @ np.asarray(c, float)                   # centre - centre of gravity
        return traj["pos"][row, i] + d, v + np.cross(w, d), w

    # the free fall of each centre of gravity (its start: the centre plus the offset)
    start = {n: (x + c[0], y + c[1], z0 + r + c[2]) for n, x, y, r, c in spheres}
    _free_fall_checks(traj, [s[0] for s in spheres], body_of, start, g, exact_xy=False)
    row = 4 * len(spheres) + settle - 1
    for name, x0, y0, r, c in spheres:
        i = body_of[name]
        p, v, w = centre(row, i, c)
        assert abs(v[2]) < PHYSICS_TOL and abs(w[2]) < PHYSICS_TOL, (name, v, w)
        if c[0] == 0:
            assert abs(v[0]) < PHYSICS_TOL and abs(w[1]) < PHYSICS_TOL, (name, v, w)
            assert abs(p[0] - x0) < PHYSICS_TOL, (name, p)
        else:
            assert v[0] * c[0] > 0.2 * c[0] ** 2 and w[1] * c[0] > 0.2 * c[0] ** 2, (name, v, w)
            assert (p[0] - x0) * c[0] > c[0] ** 2, (name, p)
        if c[1] == 0:
            assert abs(v[1]) < PHYSICS_TOL and abs(w[0]) < PHYSICS_TOL, (name, v, w)
            assert abs(p[1] - y0) < PHYSICS_TOL, (name, p)
        else:
            assert v[1] * c[1] > 0.2 * c[1] ** 2 and w[0] * c[1] < -0.2 * c[1] ** 2, (name, v, w)
            assert (p[1] - y0) * c[1] > c[1] ** 2, (name, p)
        # rolling without slip: the contact point still, the top at twice the centre
        assert abs(v[0] - w[1] * r) < PHYSICS_TOL and abs(v[1] + w[0] * r) < PHYSICS_TOL, name
        bottom = v + np.cross(w, [0.0, 0.0, -r])
        top = v + np.cross(w, [0.0, 0.0, r])
        assert np.all(np.abs(bottom) < PHYSICS_TOL), (name, bottom)
        assert abs(top[0] - 2 * v[0]) < PHYSICS_TOL and abs(top[1] - 2 * v[1]) < PHYSICS_TOL
        assert abs(top[2]) < PHYSICS_TOL, (name, top)
        assert abs(p[2] - r) < PHYSICS_TOL, (name, p)
