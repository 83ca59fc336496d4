"""Default capacities hold a stacked scene, and a pyramid of boxes stands.

A box resting across two others touches them with 8 contacts; the builder's
default contact capacity (8 per dynamic geom + 8 beyond 128 slots) must hold
every contact of a pyramid, or the dropped contacts (counted in
``overflow_contacts``) let it collapse. Truth: static equilibrium, so after
1.5 s every box is where it was placed, to the contacts' ERP/CFM sink and
the sideways creep of 20 PGS iterations (a few mm, stated in the test).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jaxode


def test_box_pyramid_fits_default_capacity_and_stands():
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    m = jaxode.mass.box((0.2,) * 3, total=1.0)
    rows = 4  # 4 + 3 + 2 + 1 boxes; upper boxes straddle two below
    for r in range(rows):
        for c in range(rows - r):
            x = (c - (rows - r - 1) / 2) * 0.21
            i = b.add_body(pos=(x, 0.0, 0.1 + 0.2 * r), mass=m)
            b.add_box((0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.5))
    model = b.build()
    s0 = jaxode.init(model)
    final = jax.jit(lambda s: jaxode.rollout(model, s, 150, 0.01)[0])(s0)
    assert int(final.overflow_contacts) == 0 and int(final.overflow_pairs) == 0
    moved = np.abs(np.asarray(final.pos - s0.pos))
    # measured: 2.1-2.5 mm (float32 rounding: XLA flags, row-write order), the
    # upper boxes creeping sideways under 20 PGS iterations; with 48 slots
    # (contacts dropped) 9.3 mm after these 150 steps and 53 mm after 600
    assert moved.max() < 4e-3, moved.max()


# --------------------------------------------------------------- overflow
# Issue 19: with too few slots, index order dropped whole bodies' support and
# boxes fell through the floor. jaxode.sim.overflow keeps every body's closest
# pairs and every pair's deepest, spread contacts first. Truths: a box resting
# on a plane stays at rest at the height where ODE's soft contact balances its
# weight (below); the counters still count what was dropped. Before (index
# order): with 24 contact slots the last two boxes fell to z = -19.6 m in 200
# steps, with 12 pair slots boxes fell off the floor box, and the pyramid's top
# box fell 0.8 m.

import pytest  # noqa: E402

HALF = 0.1  # half extent of the 0.2 m cubes [m]
DT = 0.01
STEPS = 200


def _rest_height(ncontact: int, mass: float = 1.0, erp: float = 0.2, cfm: float = 1e-5,
                 g: float = 9.81) -> float:
    """Height of a cube's centre resting on ``ncontact`` equally loaded contacts:
    at rest ODE's contact row (J M^-1 J^T + cfm/h) f = erp*depth/h^2 - J M^-1 f_ext
    leaves cfm/h * f = erp*depth/h^2 with f = m g / n per contact, so
    depth = cfm * h * m g / (n * erp) (ODE manual, "Soft constraint and
    constraint force mixing")."""
    return HALF - cfm * DT * mass * g / (ncontact * erp)


def _boxes_on(floor: str, spacing: float, yaw: float, **build):
    """8 cubes (1 kg) at rest on a floor in a 2 x 4 grid, turned by ``yaw``
    about z: floor "plane" (added first), or "box" (a static 4 m box with its
    top at z = 0, added last so its pairs come after the cubes' in index
    order)."""
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    if floor == "plane":
        b.add_plane(surface=jaxode.Surface(mu=0.5))
    m = jaxode.mass.box((2 * HALF,) * 3, total=1.0)
    q = (float(np.cos(yaw / 2)), 0.0, 0.0, float(np.sin(yaw / 2)))
    for k in range(8):
        i, j = divmod(k, 4)
        body = b.add_body(pos=(spacing * j, spacing * i, HALF), quat=q, mass=m)
        b.add_box((2 * HALF,) * 3, body=body, surface=jaxode.Surface(mu=0.5))
    if floor == "box":
        b.add_box((4.0, 4.0, 0.2), pos=(0.3, 0.1, -0.1), surface=jaxode.Surface(mu=0.5))
    return b.build(**build)


def _run(model):
    s0 = jaxode.init(model)

    def go(s):
        s, traj = jaxode.rollout(model, s, STEPS, DT)
        return s, jnp.min(traj.pos[:, :, 2], axis=0)

    return jax.jit(go)(s0)


#: The rest heights of 2, 3 and 4 loaded contacts differ by 0.4-0.8 um; 0.1 um tells
#: them apart and leaves room for float32 rounding (7.5e-9 m near 0.1 m; measured
#: 5 nm on the plane, 21 nm on the floor box, whose top is itself a float32 sum)
REST_TOL = 1e-7


def _check_resting(final, zmin, loaded: int):
    """Every cube at rest on ``loaded`` equally loaded contacts, to REST_TOL, and never
    below its half side less 3 mm on the way. A cube held at 3 of its 4 corners rests on
    the diagonal pair among them: its centre of mass lies on that diagonal, so statics
    leaves the third corner unloaded (loaded = 2, the sink is m g cfm h / (2 erp))."""
    z = np.asarray(final.pos[:, 2], np.float64)
    assert np.all(np.asarray(zmin) > HALF - 3e-3), zmin
    want = _rest_height(loaded)
    assert np.all(np.abs(z - want) < REST_TOL), (z - want, HALF - want)


def test_contact_overflow_keeps_every_box_on_the_plane():
    # 8 boxes x 4 corners = 32 contacts, 24 slots: 3 per box
    model = _boxes_on("plane", 0.5, 0.0, contact_capacity=24)
    final, zmin = _run(model)
    _check_resting(final, zmin, 2)  # 3 slots per cube: 3 corners, the diagonal pair loaded
    assert int(final.overflow_contacts) >= 8 * STEPS  # 8 dropped in each step
    assert int(final.ncontact) == 32


def test_pair_overflow_keeps_every_box_on_its_floor():
    # turned 0.1 rad, 0.21 m apart: neighbours' AABBs overlap (16 pairs) but the
    # cubes do not touch; with the 8 floor pairs, 24 candidates for 12 slots
    model = _boxes_on("box", 0.21, 0.1, pair_capacity=12)
    final, zmin = _run(model)
    _check_resting(final, zmin, 4)
    assert int(final.overflow_pairs) >= 12 * STEPS  # 12 dropped in each step
    assert int(final.overflow_contacts) == 0


def test_short_capacity_pyramid_does_not_fall_through():
    # the pyramid above: 16 corners on the floor + 6 boxes x 8 on the boxes
    # below = 64 contacts, in 32 slots (2 per touching pair)
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_plane(surface=jaxode.Surface(mu=0.5))
    m = jaxode.mass.box((0.2,) * 3, total=1.0)
    for r in range(4):
        for c in range(4 - r):
            i = b.add_body(pos=((c - (4 - r - 1) / 2) * 0.21, 0.0, 0.1 + 0.2 * r), mass=m)
            b.add_box((0.2,) * 3, body=i, surface=jaxode.Surface(mu=0.5))
    model = b.build(contact_capacity=32)
    s0 = jaxode.init(model)
    final, zmin = _run(model)
    # every box stays above the one below it (rows 0.2 m apart) and the bottom
    # row on the floor
    assert np.all(np.asarray(zmin) > np.asarray(s0.pos[:, 2]) - 0.01), zmin - s0.pos[:, 2]
    # counted: the last step found more than its 32 slots (52 measured), and
    # the total covers at least that step's excess
    assert int(final.ncontact) > 32
    assert int(final.overflow_contacts) >= int(final.ncontact) - 32


@pytest.mark.extended
@pytest.mark.parametrize("name", ["stack", "bin_16", "bin_64"])
def test_bench_scenes_with_half_the_contact_capacity_stay_above_the_floor(name):
    """bench/scenes.py's stack and bins with half the contacts they need at
    rest: no body falls through the floor. At the end a cube's or sphere's
    centre is above its half side or radius (0.1 m in the stack, 0.05 m in
    the bins) less 1 cm; on the way (the bins' objects land from up to
    0.25 m, with more contacts than at rest competing for the slots) less
    half of it. Measured: docs/COLLISION.md, "Capacity and overflow"."""
    from bench.scenes import SCENES
    from tools.conformance.scenes import build_jaxode

    scene = SCENES[name]()
    steps = 300
    full = build_jaxode(scene)
    fs, ftraj = jax.jit(lambda s: jaxode.rollout(full, s, steps, DT))(jaxode.init(full))
    assert int(fs.overflow_contacts) == 0
    need = int(fs.ncontact)
    half = build_jaxode(scene, contact_capacity=need // 2)
    hs, traj = jax.jit(lambda s: jaxode.rollout(half, s, steps, DT))(jaxode.init(half))
    floor = 0.1 if name == "stack" else 0.05
    zmin = np.asarray(jnp.min(traj.pos[:, :, 2], axis=0))
    assert int(hs.overflow_contacts) > 0
    zfull = float(jnp.min(ftraj.pos[:, :, 2]))
    print(f"{name}: need {need}, end min z {float(jnp.min(hs.pos[:, 2])):.4f} "
          f"(all slots {float(jnp.min(fs.pos[:, 2])):.4f}), on the way {zmin.min():.4f} "
          f"(all slots {zfull:.4f})")
    assert np.all(np.asarray(hs.pos[:, 2]) > floor - 0.01), (need, hs.pos[:, 2])
    assert np.all(zmin > 0.5 * floor), (need, zmin.min(), zfull)
