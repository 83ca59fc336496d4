"""Gazebo's friction and surface integration tests, ported by name.

From gazebo-classic ``test/integration/physics_friction.cc``
(``PhysicsFrictionTest``: DirectionNaN, BoxDirectionRing, MaximumDissipation,
SphereSlip) and ``test/integration/surface.cc`` (``SurfaceTest.CollideBitmask``),
ODE as the engine. Each world is rebuilt here from the test's own numbers (an
SDF string read by :func:`jaxode.load_sdf` where the test is about how a file's
frames or masks are read; Gazebo's physics defaults: dt 1 ms, 50 iterations,
sor 1.3, erp 0.2, cfm 0, contact_max_correcting_vel 100, surface layer 1 mm;
Gazebo's ground plane: mu 100, mu2 50). The truths are the closed forms the
Gazebo tests assert, with their tolerances (``g_friction_tolerance`` = 1e-3,
``g_physics_tol`` = 1e-2). FrictionDemo is in test_gazebo_friction_demo.py;
SphereSlip's lowball models in test_validation.py.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from fast_compile import OPTIONS as _FAST

FRICTION_TOL = 1e-3        # physics_friction.cc g_friction_tolerance
PHYSICS_TOL = 1e-2         # surface.cc g_physics_tol
DT = 0.001

GROUND = """
<model name="ground_plane"><static>true</static><link name="link">
  <collision name="collision"><geometry><plane><normal>0 0 1</normal></plane></geometry>
    <surface><friction><ode><mu>100</mu><mu2>50</mu2></ode></friction>{contact}</surface>
  </collision></link></model>"""


def _world(models: str, gravity, ground_contact: str = "") -> str:
    g = " ".join(repr(float(x)) for x in gravity)
    return (f'<sdf version="1.6"><world name="default"><gravity>{g}</gravity>'
            f'<physics type="ode"><max_step_size>{DT}</max_step_size></physics>'
            f'{GROUND.format(contact=ground_contact)}{models}</world></sdf>')


def _box_inertial(mass, size) -> str:
    x, y, z = size
    i = [mass / 12.0 * (b * b + c * c) for b, c in ((y, z), (x, z), (x, y))]
    return (f"<inertial><mass>{mass}</mass><inertia><ixx>{i[0]}</ixx><iyy>{i[1]}</iyy>"
            f"<izz>{i[2]}</izz><ixy>0</ixy><ixz>0</ixz><iyz>0</iyz></inertia></inertial>")


def _roll(builder, steps: int):
    m = builder.build()
    run = jax.jit(lambda s: jaxode.rollout(m, s, steps, builder.dt)[0], compiler_options=_FAST)
    return m, run(jaxode.init(m))


def _body(builder, model: str) -> int:
    names = builder.sdf_info["bodies"]
    return names[next(k for k in names if k.startswith(model + "::"))]


# ------------------------------------------------------------------ DirectionNaN
def test_direction_nan():
    """PhysicsFrictionTest.DirectionNaN: a 0.5 x 0.5 x 0.2 m box (1 kg) whose
    fdir1 (0, 0, 1) is parallel to the contact normal, gravity (0, 1.5, -1):
    no NaN, and after 1500 steps it slides in y at (g_y + g_z) t (mu = 1: the
    friction force is mu m |g_z|), vx = 0, within 1e-3 m/s."""
    size = (0.5, 0.5, 0.2)
    box = (f'<model name="box_model"><pose>0 0 {size[2] / 2} 0 0 0</pose><link name="link">'
           f'{_box_inertial(1.0, size)}<collision name="c"><geometry><box><size>'
           f'{" ".join(map(str, size))}</size></box></geometry><surface><friction><ode>'
           '<mu>1</mu><mu2>1</mu2><fdir1>0 0 1</fdir1></ode></friction></surface>'
           '</collision></link></model>')
    g = (0.0, 1.5, -1.0)
    b = jaxode.load_sdf(_world(box, g))
    _, s = _roll(b, 1500)
    t = 1500 * DT
    assert np.all(np.isfinite(np.asarray(s.vel))) and np.all(np.isfinite(np.asarray(s.pos)))
    v = np.asarray(s.vel[_body(b, "box_model")])
    assert abs(v[0]) < FRICTION_TOL, v
    assert abs(v[1] - (g[1] + g[2]) * t) < FRICTION_TOL, v


# -------------------------------------------------------------- BoxDirectionRing
RING_ANGLES = [math.pi * k / 6 for k in range(7)]            # a semicircle, 7 boxes
RING_RADII = (2.0, 3.0, 4.0, 5.0)                             # four rings: 28 boxes


def _ring_box(ring: int, k: int, theta: float) -> str:
    """A box at polar angle theta whose fdir1 (mu 100) points along the ring's
    tangent, mu2 0 (free) along the radius, stated four ways: the model turned
    by theta (fdir1 the box's y); the link turned instead; the link also rolled
    90 deg about x (the box's y and z sizes swapped, fdir1 along its z, as
    Gazebo's friction tutorial's second link); the collision turned 90 deg in
    the link (the box's x and y sizes swapped, fdir1 along its x)."""
    r = RING_RADII[ring]
    x, y = r * math.cos(theta), r * math.sin(theta)
    size, fdir, model_yaw, link_rpy, coll_rpy = {
        0: ((0.2, 0.4, 0.2), "0 1 0", theta, (0, 0, 0), (0, 0, 0)),
        1: ((0.2, 0.4, 0.2), "0 1 0", 0.0, (0, 0, theta), (0, 0, 0)),
        2: ((0.2, 0.2, 0.4), "0 0 1", 0.0, (math.pi / 2, 0, theta), (0, 0, 0)),
        3: ((0.4, 0.2, 0.2), "1 0 0", theta / 2, (0, 0, theta / 2), (0, 0, math.pi / 2)),
    }[ring]
    # no box touches another (each its own bit; the ground has every bit)
    mask = 1 << ((ring * len(RING_ANGLES) + k) % 32)
    rpy = " ".join(repr(float(a)) for a in link_rpy)
    crpy = " ".join(repr(float(a)) for a in coll_rpy)
    return (f'<model name="box_{ring}_{k}"><pose>{x} {y} 0.1 0 0 {model_yaw}</pose>'
            f'<link name="link"><pose>0 0 0 {rpy}</pose>{_box_inertial(1.0, size)}'
            f'<collision name="c"><pose>0 0 0 {crpy}</pose><geometry><box><size>'
            f'{" ".join(map(str, size))}</size></box></geometry><surface><friction><ode>'
            f'<mu>100</mu><mu2>0</mu2><fdir1>{fdir}</fdir1></ode></friction>'
            f'<contact><collide_bitmask>{mask}</collide_bitmask></contact></surface>'
            '</collision></link></model>')


@pytest.mark.extended
def test_box_direction_ring():
    """PhysicsFrictionTest.BoxDirectionRing: concentric semicircles of boxes with
    mu = 100 along fdir1 and mu2 = 0, fdir1 in each collision's frame under
    different model, link and collision rotations, all aimed along the ring's
    tangent; gravity (0, 1, -9.81); 28 boxes where Gazebo's world has 44. After
    1500 steps a box at polar angle theta
    slides along its radius at g_y sin(theta) t, within 5e-3 m/s per component
    (the Gazebo test's tolerance). (Gazebo's test also spins two spheres with a
    body-fixed fdir1; that fdir1 turns with its body is compared with libode in
    the conformance scene fdir1_rotated_spinning_sphere.)"""
    boxes = "".join(_ring_box(r, k, th) for r in range(len(RING_RADII))
                    for k, th in enumerate(RING_ANGLES))
    g = (0.0, 1.0, -9.81)
    b = jaxode.load_sdf(_world(boxes, g, "<contact><collide_bitmask>0xffffffff"
                                         "</collide_bitmask></contact>"))
    m, s = _roll(b, 1500)
    t = 1500 * DT
    assert m.nbody == len(RING_RADII) * len(RING_ANGLES)
    vel = np.asarray(s.vel)
    for r in range(len(RING_RADII)):
        for k, th in enumerate(RING_ANGLES):
            v = vel[_body(b, f"box_{r}_{k}")]
            speed = g[1] * math.sin(th) * t
            assert abs(v[0] - speed * math.cos(th)) < 5 * FRICTION_TOL, (r, k, v)
            assert abs(v[1] - speed * math.sin(th)) < 5 * FRICTION_TOL, (r, k, v)


# ------------------------------------------------------------ MaximumDissipation
@pytest.mark.extended
def test_maximum_dissipation():
    """PhysicsFrictionTest.MaximumDissipation (the friction_cone world): 32 boxes
    on a circle of radius 9 m launched radially at 9 m/s, cone friction (mu 1):
    maximum dissipation keeps each box on its ray (polar angle within 1e-2 rad
    after 1500 steps, and beyond radius 13 m, as Gazebo asserts); the distance
    is Coulomb's v0^2 / (2 mu g) = 4.128 m (the boxes stop at 0.92 s), here
    within 2 cm. The boxes never meet: each is a world of one vmapped batch."""
    n, radius, v0, mu, g = 32, 9.0, 9.0, 1.0, 9.81
    size = (0.5, 0.5, 0.1)      # flat: mu g deceleration tips no box
    b = jaxode.WorldBuilder(gravity=(0, 0, -g), friction_model="cone", iterations=50, sor=1.3,
                            erp=0.2, cfm=0.0, contact_max_correcting_vel=100.0,
                            contact_surface_layer=0.001)
    b.add_plane(surface=jaxode.Surface(mu=100.0, mu2=50.0))
    k = b.add_body(pos=(0.0, 0.0, size[2] / 2), mass=jaxode.mass.box(size=size, total=1.0))
    b.add_box(size, body=k, surface=jaxode.Surface(mu=mu, mu2=mu))
    m = b.build()
    angles = np.array([2 * math.pi * k / n for k in range(n)])
    ring = np.stack([np.cos(angles), np.sin(angles), np.zeros(n)], -1)
    s0 = jaxode.init(m)
    dtype = s0.pos.dtype
    states = jax.vmap(lambda p, v: s0.replace(pos=s0.pos.at[0, :2].set(p[:2]),
                                              vel=s0.vel.at[0].set(v)))(
        jnp.asarray(radius * ring, dtype), jnp.asarray(v0 * ring, dtype))
    run = jax.jit(jax.vmap(lambda s: jaxode.rollout(m, s, 1500, DT)[0]), compiler_options=_FAST)
    pos = np.asarray(run(states).pos[:, 0])
    stop = radius + v0 * v0 / (2 * mu * g)
    for k, a in enumerate(angles):
        polar = math.atan2(pos[k, 1], pos[k, 0])
        assert abs((polar - a + math.pi) % (2 * math.pi) - math.pi) < 1e-2, (k, polar, a)
        r = math.hypot(pos[k, 0], pos[k, 1])
        assert r > 13.0, (k, r)
        assert abs(r - stop) < 0.02, (k, r, stop)


# ------------------------------------------------------------------ SphereSlip
@pytest.mark.extended
@pytest.mark.parametrize("balls", [2, 3], ids=["twoball", "triball"])
def test_sphere_slip(balls):
    """PhysicsFrictionTest.SphereSlip, the twoball and triball models: one link
    with 2 or 3 spheres (radius 0.2 m, mu 0.5, slip s, max_vel 0.01, min_depth
    0; the centre of mass 0.3 m below theirs) on Gazebo's ground plane, gravity (0, 2, -9.81), 5000 steps: the contacts
    act as viscous dampers in parallel, so the steady lateral speed is
    g_y m s / contacts (mass-slip products 0.2: 0.4 / contacts m/s) within 1.5 %,
    vx and vz within 1e-3 m/s (the Gazebo test's tolerances). The lowball
    models are test_validation.py's test_gazebo_sphere_slip_lowball_float32."""
    from jaxode.build import mass as mass_lib
    for mass, slip in ((1.0, 0.2), (2.0, 0.1)):
        b = jaxode.WorldBuilder(gravity=(0, 2, -9.81), erp=0.2, cfm=0.0, iterations=50,
                                contact_max_correcting_vel=100.0, contact_surface_layer=0.001)
        b.add_plane(surface=jaxode.Surface(mu=100.0, mu2=50.0, max_vel=0.01, min_depth=0.0))
        # the centre of mass 0.3 m below the spheres' centres and the inertia of one
        # 0.2 m sphere, as the lowball models': the link cannot roll on its
        # spheres (two in a row could)
        k = b.add_body(pos=(0, 0, -0.1),
                       mass=mass_lib.from_inertia(mass, np.eye(3) * 0.4 * mass * 0.04))
        for i in range(balls):
            a = 2 * math.pi * i / balls
            b.add_sphere(0.2, body=k, pos=(0.5 * math.cos(a), 0.5 * math.sin(a), 0.3),
                         surface=jaxode.Surface(mu=0.5, mu2=0.5, slip1=slip, slip2=slip,
                                                max_vel=0.01, min_depth=0.0))
        b.dt = DT
        _, s = _roll(b, 5000)
        v = np.asarray(s.vel[0])
        want = 2.0 * mass * slip / balls
        assert abs(v[1] - want) < 0.015 * want, (balls, mass, v)
        assert abs(v[0]) < FRICTION_TOL and abs(v[2]) < FRICTION_TOL, (balls, mass, v)


# -------------------------------------------------------- SurfaceTest.CollideBitmask
def test_collide_bitmask():
    """SurfaceTest.CollideBitmask (the collide_bitmask world): three unit boxes
    dropped above one another onto a ground plane of mask 0xff, box1 0x01,
    box2 0x02, box3 0x03: box2 falls through box1 (no shared bit) to the
    ground, box3 lands on both. After 0.2 s all three still fall (vz below
    g t (1 - 1e-2)); 2000 steps later all rest (|vz| < 1e-3 m/s), box1 and box2
    at z = 0.5 m and box3 at 1.5 m within 1e-3 m."""
    def box(name, z, mask):
        return (f'<model name="{name}"><pose>0 0 {z} 0 0 0</pose><link name="link">'
                f'{_box_inertial(1.0, (1, 1, 1))}<collision name="c"><geometry><box><size>'
                f'1 1 1</size></box></geometry><surface><contact><collide_bitmask>{mask}'
                '</collide_bitmask></contact></surface></collision></link></model>')
    g = -9.8
    src = _world(box("box1", 1.0, "0x01") + box("box2", 2.0, "0x02") + box("box3", 3.5, "0x03"),
                 (0, 0, g), "<contact><collide_bitmask>0xff</collide_bitmask></contact>")
    b = jaxode.load_sdf(src)
    m = b.build()
    steps = int(math.floor(0.2 / DT + 1e-9))
    run = jax.jit(lambda s: jaxode.rollout(m, s, steps, DT)[0], compiler_options=_FAST)
    s = run(jaxode.init(m))
    ids = [_body(b, n) for n in ("box1", "box2", "box3")]
    fall = g * 0.2
    for i in ids:
        assert float(s.vel[i, 2]) < fall * (1 - PHYSICS_TOL), (i, float(s.vel[i, 2]))
    for _ in range(10):                 # 2000 more steps, as 10 runs of the same 200
        s = run(s)
    for i in ids:
        assert abs(float(s.vel[i, 2])) < 1e-3, (i, float(s.vel[i, 2]))
    assert abs(float(s.pos[ids[0], 2]) - 0.5) < 1e-3
    assert abs(float(s.pos[ids[1], 2]) - 0.5) < 1e-3
    assert abs(float(s.pos[ids[2], 2]) - 1.5) < 1e-3


def test_collide_bitmask_errors_name_the_value():
    bad = _world('<model name="m"><link name="l"><collision name="c"><geometry><sphere>'
                 '<radius>0.1</radius></sphere></geometry><surface><contact><collide_bitmask>'
                 'ff</collide_bitmask></contact></surface></collision></link></model>',
                 (0, 0, -9.8))
    with pytest.raises(ValueError, match=r"collide_bitmask must be an unsigned 32-bit integer.*'ff'"):
        jaxode.load_sdf(bad)
    with pytest.raises(ValueError, match=r"collide_bitmask.*'-1'"):
        jaxode.load_sdf(bad.replace(">ff<", ">-1<"))
