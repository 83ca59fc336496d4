"""``WorldBuilder(reorder="ode")``: QuickStep's shuffle of every row (ODE 0.16
``quickstep.cpp``, ``ConstraintsReorderingHelper`` over the island's m rows)
against the real libode 0.16 (tools/conformance/odelib).

Truths: libode's own ``dRandInt`` / ``dRandGetSeed`` (the traced generator and
the number of draws a step takes, i.e. ODE's m), and libode's trajectories of
contact scenes stepped in lockstep with the same seed (float64, 1e-9 m), where
the default joint-row shuffle differs by ~1e-3 m.

ODE's island walk (``util.cpp`` ``dxProcessIslands``) starts at the newest body
and lists each body's joints newest first. Each scene creates ODE's bodies so
that the walk starts where it meets the rows in jaxode's order, and creates
each step's contact joints in the reverse of jaxode's slot order
(``OdeWorld(contact_order=...)``, contacts matched by position).

Default tier: the generator against libode's and the option errors (no
compile); the scenes (a step's compile is ~8 s) and the batch of seeds are in
the extended tier (``pytest -m extended``).
"""
from __future__ import annotations

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxode
from jaxode.build import mass as mass_lib
from jaxode.sim.solver import reorder as reorder_lib

odelib = pytest.importorskip("tools.conformance.odelib")
try:
    _LIB = odelib.load()
except odelib.OdeUnavailable as e:  # pragma: no cover - depends on the machine
    pytest.skip(f"libode not available: {e}", allow_module_level=True)

DT = 0.01
G = (0.0, 0.0, -9.81)
MU = 0.5
TOL64 = 1e-9


def _ode_rand_int(seed: int, ns) -> list:
    """libode's dRandInt(n) for each n of ``ns``, from dRandSetSeed(seed)."""
    _LIB.dRandInt.restype = ctypes.c_int
    _LIB.dRandInt.argtypes = [ctypes.c_int]
    _LIB.dRandSetSeed(seed)
    return [_LIB.dRandInt(int(n)) for n in ns]


def test_traced_generator_is_libodes():
    ns = np.concatenate([np.arange(1, 40), [200, 255, 256, 257, 4000, 65536, 65537, 10 ** 6]])
    for seed in (0, 7, 0xDEADBEEF):
        want = _ode_rand_int(seed, ns)
        r, got = jnp.uint32(seed), []
        for n in ns:
            r = reorder_lib.jnp_rand(r)
            got.append(int(reorder_lib.jnp_randint_from(r, jnp.uint32(n))))
        assert got == want, seed
        assert int(r) == _LIB.dRandGetSeed()
    # Fisher-Yates over the first m of M entries: the draws dRandInt(2..m)
    m, big = 9, 12
    order, r = reorder_lib.jnp_shuffle(jnp.arange(big, dtype=jnp.int32), jnp.int32(m),
                                       jnp.uint32(3))
    js = _ode_rand_int(3, range(2, m + 1))
    want = list(range(big))
    for i, j in zip(range(1, m), js):
        want[i], want[j] = want[j], want[i]
    assert np.asarray(order).tolist() == want
    assert int(r) == _LIB.dRandGetSeed()


# ------------------------------------------------------------------ scenes

def _bodies(kind: str):
    box = dict(size=(0.2, 0.2, 0.2), m=mass_lib.box(size=(0.2, 0.2, 0.2), total=1.0))
    if kind == "rest":
        return [dict(box, pos=(0, 0, 0.1 - 1e-4), vel=(0, 0, 0))], []
    if kind == "slide":
        return [dict(box, pos=(0, 0, 0.1 - 1e-4), vel=(2.0, 0.3, 0))], []
    if kind == "balls":  # a box on the plane carrying two balls (3 bodies, 6 contacts)
        ball = mass_lib.sphere(radius=0.05, total=0.3)
        return [dict(box, pos=(0, 0, 0.1 - 1e-4), vel=(0.3, 0, 0)),
                dict(radius=0.05, m=ball, pos=(0.05, 0.05, 0.2498), vel=(0.05, 0.03, 0)),
                dict(radius=0.05, m=ball, pos=(-0.05, -0.05, 0.2498), vel=(-0.05, -0.03, 0))], []
    if kind == "hinge":  # a sliding box with a two-link hinge chain standing on it
        link = mass_lib.box(size=(0.04, 0.04, 0.3), total=0.4)
        bodies = [dict(box, pos=(0, 0, 0.1 - 1e-4), vel=(1.0, 0, 0)),
                  dict(m=link, pos=(0, 0, 0.25), vel=(0, 0, 0), angvel=(0, 2.0, 0)),
                  dict(m=link, pos=(0, 0, 0.55), vel=(0, 0, 0), angvel=(0, -1.0, 0))]
        # jaxode's joint order (creation) = ODE's walk from the top link down
        hinges = [dict(b1=1, b2=2, anchor=(0, 0, 0.4), axis=(0, 1, 0)),
                  dict(b1=0, b2=1, anchor=(0, 0, 0.1), axis=(0, 1, 0))]
        return bodies, hinges
    raise ValueError(kind)


def _jaxode_model(kind: str, reorder: str, seed: int = 0):
    bodies, hinges = _bodies(kind)
    b = jaxode.WorldBuilder(gravity=G, cfm=1e-10, reorder=reorder, reorder_seed=seed)
    for bd in bodies:
        i = b.add_body(pos=bd["pos"], vel=bd["vel"], angvel=bd.get("angvel", (0, 0, 0)),
                       mass=bd["m"])
        if "size" in bd:
            b.add_box(bd["size"], body=i, surface=jaxode.Surface(mu=MU))
        elif "radius" in bd:
            b.add_sphere(bd["radius"], body=i, surface=jaxode.Surface(mu=MU))
    for h in hinges:
        b.add_hinge(h["b1"], h["b2"], anchor=h["anchor"], axis=h["axis"])
    b.add_plane(surface=jaxode.Surface(mu=MU))
    return b.build()


class _OdeScene:
    """The scene in libode; ``slots`` (set before each step) are jaxode's contact
    points of the step in slot order; ``body[k]`` is the ODE body of jaxode body k."""

    def __init__(self, kind: str, seed: int):
        bodies, hinges = _bodies(kind)
        self.slots, self.mismatch = [], 0
        self.world = odelib.OdeWorld(gravity=G, cfm=1e-10, rand_seed=seed,
                                     contact_order=self._order)
        n = len(bodies)
        # the walk starts at the newest body: the box (every contact touches it),
        # or the chain's top link (hinges, then the box's contacts)
        create = list(range(n)) if hinges else list(reversed(range(n)))
        self.body = {}
        for k in create:
            bd = bodies[k]
            self.body[k] = self.world.add_body(bd["pos"], vel=bd["vel"],
                                               angvel=bd.get("angvel", (0, 0, 0)),
                                               mass=bd["m"].mass, inertia=np.asarray(bd["m"].inertia))
        for k, bd in enumerate(bodies):
            if "size" in bd:
                self.world.add_box(bd["size"], body=self.body[k], surface=dict(mu=MU))
            elif "radius" in bd:
                self.world.add_sphere(bd["radius"], body=self.body[k], surface=dict(mu=MU))
        for h in hinges:
            self.world.add_joint("hinge", self.body[h["b1"]], self.body[h["b2"]],
                                 anchor=h["anchor"], axis=h["axis"])
        self.world.add_plane((0, 0, 1), 0.0, surface=dict(mu=MU))

    def _order(self, contacts):
        slot = [int(np.argmin([np.max(np.abs(c.pos - p)) for p in self.slots]))
                if self.slots else 0 for c in contacts]
        if sorted(slot) != list(range(len(self.slots))):
            self.mismatch += 1          # the engines found different contacts
            return list(reversed(range(len(contacts))))
        return sorted(range(len(contacts)), key=lambda i: -slot[i])


@jax.jit
def _step(model, state):
    return jaxode.step(model, state, DT)


def _lockstep(kind: str, reorder: str, steps: int, seed: int = 0):
    """Max position difference [m] between jaxode (float64) and libode over
    ``steps`` steps, contact-set mismatches, and whether State.rng followed
    libode's generator (dRandGetSeed) at every step."""
    with jax.enable_x64(True):
        model = _jaxode_model(kind, reorder, seed)
        ode = _OdeScene(kind, seed)
        state = jaxode.init(model)
        err, rng_ok = 0.0, True
        for _ in range(steps):
            state = _step(model, state)
            c = state.contacts
            valid = np.asarray(c.valid)
            ode.slots = [np.asarray(c.pos[s]) for s in np.flatnonzero(valid)]
            ode.world.step(DT)
            if state.rng is not None:
                rng_ok &= int(state.rng) == _LIB.dRandGetSeed()
            for k, o in ode.body.items():
                err = max(err, float(np.max(np.abs(np.asarray(state.pos[k]) - ode.world.pos(o)))))
        return err, ode.mismatch, rng_ok


_SCENES = [pytest.param("slide", 40, marks=pytest.mark.extended),
           pytest.param("rest", 60, marks=pytest.mark.extended),
           pytest.param("balls", 80, marks=pytest.mark.extended),
           pytest.param("hinge", 100, marks=pytest.mark.extended)]


@pytest.mark.parametrize("kind,steps", _SCENES)
def test_ode_reorder_matches_libode(kind, steps):
    err, mismatch, rng_ok = _lockstep(kind, "ode", steps)
    assert mismatch == 0
    assert rng_ok, "State.rng left libode's generator: a step drew another m"
    assert err < TOL64, err


@pytest.mark.extended
@pytest.mark.parametrize("kind,steps", [("slide", 40), ("hinge", 100)])
def test_joint_shuffle_differs_from_libode(kind, steps):
    # the reason for reorder="ode": the default leaves contact rows unshuffled
    err, _, _ = _lockstep(kind, "joints", steps)
    assert err > 1e-5, err


@pytest.mark.extended
def test_per_world_seeds_in_one_vmap():
    """Three worlds with dRandSetSeed 0, 7, 12345 in one vmap: each is libode
    with its seed, and bitwise the world stepped alone."""
    seeds, steps = (0, 7, 12345), 30
    with jax.enable_x64(True):
        model = _jaxode_model("slide", "ode")
        one = jaxode.init(model)
        states = jax.tree.map(lambda x: jnp.stack([x] * len(seeds)), one)
        states = states.replace(rng=jnp.asarray(seeds, jnp.uint32))
        run = jax.jit(jax.vmap(lambda s: jaxode.rollout(model, s, steps, DT)[1].pos))
        batch = np.asarray(run(states))
        for w, seed in enumerate(seeds):
            alone = np.asarray(jax.jit(lambda s: jaxode.rollout(model, s, steps, DT)[1].pos)(
                one.replace(rng=jnp.uint32(seed))))
            assert np.array_equal(alone, batch[w]), seed
            ode = _OdeScene("slide", seed)
            err = 0.0
            st = jaxode.init(model).replace(rng=jnp.uint32(seed))
            for t in range(steps):
                st = _step(model, st)
                ode.slots = [np.asarray(st.contacts.pos[s])
                             for s in np.flatnonzero(np.asarray(st.contacts.valid))]
                ode.world.step(DT)
                err = max(err, float(np.max(np.abs(batch[w, t, 0] - ode.world.pos(ode.body[0])))))
            assert ode.mismatch == 0 and err < TOL64, (seed, err)


def test_reorder_option_errors():
    with pytest.raises(ValueError, match="reorder must be one of"):
        jaxode.WorldBuilder(reorder="random")
    with pytest.raises(ValueError, match="needs solver 'pgs'"):
        jaxode.WorldBuilder(reorder="ode", solver="colored")
    model = _jaxode_model("rest", "ode")
    with pytest.raises(ValueError, match="rng is None"):
        jaxode.step(model, jaxode.init(model).replace(rng=None), DT)
