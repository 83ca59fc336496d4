"""Tests for jaxode.mass (host-side numpy equivalents of ODE's dMass functions)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from jaxode.build import mass as M

RNG = np.random.default_rng(1234)


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return M._quat_to_R(q)


def assert_mass_close(a: M.Mass, b: M.Mass, rtol: float = 1e-12, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(a.mass, b.mass, rtol=rtol, atol=atol)
    np.testing.assert_allclose(a.com, b.com, rtol=rtol, atol=atol)
    np.testing.assert_allclose(a.inertia, b.inertia, rtol=rtol, atol=atol)


# --------------------------------------------------------------------------
# analytic inertias


def test_sphere_analytic():
    r, rho = 0.3, 700.0
    m = M.sphere(r, density=rho)
    mass = 4.0 / 3.0 * math.pi * r**3 * rho
    assert m.mass == pytest.approx(mass, rel=1e-14)
    np.testing.assert_allclose(m.inertia, 0.4 * mass * r * r * np.eye(3), rtol=1e-14)
    np.testing.assert_array_equal(m.com, np.zeros(3))


def test_box_analytic():
    lx, ly, lz, rho = 0.2, 0.5, 1.3, 1000.0
    m = M.box((lx, ly, lz), density=rho)
    mass = lx * ly * lz * rho
    assert m.mass == pytest.approx(mass, rel=1e-14)
    expected = mass / 12.0 * np.diag([ly**2 + lz**2, lx**2 + lz**2, lx**2 + ly**2])
    np.testing.assert_allclose(m.inertia, expected, rtol=1e-14)


@pytest.mark.parametrize("direction", [1, 2, 3])
def test_cylinder_analytic(direction):
    r, L, rho = 0.1, 0.8, 2700.0
    m = M.cylinder(r, L, direction=direction, density=rho)
    mass = math.pi * r * r * L * rho
    assert m.mass == pytest.approx(mass, rel=1e-14)
    diag = [mass * (3 * r * r + L * L) / 12.0] * 3
    diag[direction - 1] = mass * r * r / 2.0
    np.testing.assert_allclose(m.inertia, np.diag(diag), rtol=1e-14)


def test_capsule_total_mass_and_ode_formula():
    r, L, rho = 0.15, 0.6, 950.0
    m = M.capsule(r, L, density=rho)
    assert m.mass == pytest.approx(rho * (math.pi * r * r * L + 4.0 / 3.0 * math.pi * r**3), rel=1e-14)
    # ODE's dMassSetCapsule, written out independently.
    m1 = math.pi * r * r * L * rho
    m2 = 4.0 / 3.0 * math.pi * r**3 * rho
    ia = m1 * (r * r / 4 + L * L / 12) + m2 * (0.4 * r * r + 0.375 * r * L + 0.25 * L * L)
    ib = (0.5 * m1 + 0.4 * m2) * r * r
    np.testing.assert_allclose(m.inertia, np.diag([ia, ia, ib]), rtol=1e-14)


def _capsule_inertia_by_slices(r: float, L: float, rho: float, n: int = 400_001):
    """Exact integral of a uniform solid capsule (axis z, centred), by thin discs.

    A disc of radius s(z) and thickness dz has mass dm = rho pi s^2 dz, axial
    inertia dm s^2/2 and transverse inertia dm (s^2/4 + z^2) about the centre.
    Integrated with composite Simpson on a fine grid (error ~1e-12 relative
    away from the cap tips; the sqrt singularity of s at the tips enters only
    through s^2, which is smooth).
    """
    h = L / 2.0 + r
    z = np.linspace(-h, h, n)
    s2 = np.where(np.abs(z) <= L / 2.0, r * r, r * r - (np.abs(z) - L / 2.0) ** 2)
    s2 = np.clip(s2, 0.0, None)
    dm = rho * math.pi * s2

    def simpson(f):
        dz = z[1] - z[0]
        return dz / 3.0 * (f[0] + f[-1] + 4.0 * f[1:-1:2].sum() + 2.0 * f[2:-1:2].sum())

    mass = simpson(dm)
    axial = simpson(dm * s2 / 2.0)
    transverse = simpson(dm * (s2 / 4.0 + z * z))
    return mass, transverse, axial


@pytest.mark.parametrize("r,L", [(0.15, 0.6), (0.5, 0.2), (0.05, 2.0)])
def test_capsule_matches_exact_integral(r, L):
    # ODE's cap terms are exact for a uniform solid: each hemisphere has its
    # centroid 3r/8 from its flat face, so about the capsule centre its
    # transverse inertia is (M2/2) (2/5 r^2 - 9/64 r^2 + (L/2 + 3r/8)^2)
    # = (M2/2) (0.4 r^2 + 0.375 r L + 0.25 L^2).  So a tight tolerance applies.
    rho = 1200.0
    m = M.capsule(r, L, density=rho)
    mass, it, ia = _capsule_inertia_by_slices(r, L, rho)
    assert m.mass == pytest.approx(mass, rel=1e-9)
    np.testing.assert_allclose(np.diag(m.inertia), [it, it, ia], rtol=1e-9)


def test_capsule_monte_carlo():
    """Independent 3D check: uniform samples of the solid, full tensor about the COM."""
    r, L, rho = 0.2, 0.5, 1000.0
    m = M.capsule(r, L, density=rho)
    rng = np.random.default_rng(7)
    n = 2_000_000
    h = L / 2 + r
    p = rng.uniform([-r, -r, -h], [r, r, h], size=(n, 3))
    zc = np.clip(p[:, 2], -L / 2, L / 2)  # nearest point on the segment
    inside = (p[:, 0] ** 2 + p[:, 1] ** 2 + (p[:, 2] - zc) ** 2) <= r * r
    q = p[inside]
    box_volume = (2 * r) * (2 * r) * (2 * h)
    mass = rho * box_volume * inside.mean()
    assert m.mass == pytest.approx(mass, rel=5e-3)
    com = q.mean(axis=0)
    np.testing.assert_allclose(com, 0.0, atol=2e-3 * h)
    qc = q - com
    rr = np.einsum("ij,ij->i", qc, qc)
    tensor = mass * (rr.mean() * np.eye(3) - qc.T @ qc / len(qc))
    scale = np.max(np.diag(m.inertia))
    np.testing.assert_allclose(tensor, m.inertia, rtol=5e-3, atol=5e-3 * scale)


@pytest.mark.parametrize("ctor", ["capsule", "cylinder"])
def test_direction_permutes_axes(ctor):
    f = getattr(M, ctor)
    r, L = 0.1, 0.7
    ms = [f(r, L, direction=d, density=500.0) for d in (1, 2, 3)]
    d3 = np.diag(ms[2].inertia)
    ia, ib = d3[0], d3[2]
    assert ia != pytest.approx(ib)
    for d, m in zip((1, 2, 3), ms):
        expected = [ia, ia, ia]
        expected[d - 1] = ib
        np.testing.assert_allclose(np.diag(m.inertia), expected, rtol=1e-14)
        assert m.mass == ms[2].mass
    # direction 1 equals direction 3 rotated so that z goes to x.
    Rzx = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    assert_mass_close(M.rotate(ms[2], Rzx), ms[0], atol=1e-15)


@pytest.mark.parametrize(
    "build",
    [
        lambda **kw: M.sphere(0.3, **kw),
        lambda **kw: M.box((0.1, 0.2, 0.3), **kw),
        lambda **kw: M.capsule(0.1, 0.4, direction=2, **kw),
        lambda **kw: M.cylinder(0.1, 0.4, direction=1, **kw),
    ],
)
def test_total_equals_adjusted_density(build):
    dens = build(density=321.0)
    tot = build(total=2.5)
    assert tot.mass == 2.5
    assert_mass_close(tot, M.adjust(dens, 2.5), rtol=1e-13)
    assert_mass_close(tot, M.adjust(build(density=1.0), 2.5), rtol=1e-13)


# --------------------------------------------------------------------------
# operations


def test_translate_and_back_is_identity():
    m = M.box((0.3, 0.4, 0.5), density=800.0)
    off = np.array([0.3, -1.2, 0.7])
    m2 = M.translate(m, off)
    np.testing.assert_allclose(m2.com, off)
    back = M.translate(m2, -off)
    assert_mass_close(back, m, atol=1e-12 * m.mass)
    # also from an off-centre start
    m3 = M.translate(M.translate(m2, [0.1, 0.2, -0.5]), [-0.1, -0.2, 0.5])
    assert_mass_close(m3, m2, atol=1e-12 * m.mass)


def test_parallel_axis_theorem():
    m = M.capsule(0.1, 0.5, direction=1, density=1000.0)
    d = np.array([0.4, -0.3, 0.2])
    t = M.translate(m, d)
    expected = m.inertia + m.mass * (d @ d * np.eye(3) - np.outer(d, d))
    np.testing.assert_allclose(t.inertia, expected, rtol=1e-13)
    np.testing.assert_allclose(t.inertia_about_com(), m.inertia, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(t.inertia, t.inertia.T)
    M.validate(t)


def test_rotate_preserves_eigenvalues_and_inverse():
    m = M.translate(M.box((0.2, 0.5, 0.9), density=600.0), [0.1, 0.2, 0.3])
    R = random_rotation(RNG)
    r = M.rotate(m, R)
    np.testing.assert_allclose(
        np.linalg.eigvalsh(r.inertia), np.linalg.eigvalsh(m.inertia), rtol=1e-12
    )
    np.testing.assert_allclose(r.com, R @ m.com, rtol=1e-14)
    np.testing.assert_array_equal(r.inertia, r.inertia.T)
    back = M.rotate(r, R.T)
    assert_mass_close(back, m, atol=1e-13)


def test_rotate_accepts_quaternion():
    m = M.translate(M.box((0.2, 0.5, 0.9), density=600.0), [0.1, 0.2, 0.3])
    # 90 degrees about z: x -> y
    q = np.array([math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)])
    Rz = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert_mass_close(M.rotate(m, q), M.rotate(m, Rz), atol=1e-13)
    assert_mass_close(M.rotate(m, 3.0 * q), M.rotate(m, Rz), atol=1e-13)  # normalised
    np.testing.assert_allclose(M.rotate(m, q).com, [-0.2, 0.1, 0.3], atol=1e-15)


def test_add_two_half_boxes_equals_full_box():
    lx, ly, lz, rho = 0.8, 0.3, 0.5, 1000.0
    full = M.box((lx, ly, lz), density=rho)
    half = M.box((lx / 2, ly, lz), density=rho)
    left = M.translate(half, [-lx / 4, 0.0, 0.0])
    right = M.translate(half, [lx / 4, 0.0, 0.0])
    s = M.add(left, right)
    assert_mass_close(s, full, rtol=1e-13, atol=1e-15)
    # along y too
    hy = M.box((lx, ly / 2, lz), density=rho)
    s2 = M.add(M.translate(hy, [0, ly / 4, 0]), M.translate(hy, [0, -ly / 4, 0]))
    assert_mass_close(s2, full, rtol=1e-13, atol=1e-15)


def test_add_com_is_weighted_mean():
    a = M.translate(M.sphere(0.1, total=1.0), [1.0, 0.0, 0.0])
    b = M.translate(M.sphere(0.1, total=3.0), [0.0, 2.0, 0.0])
    s = M.add(a, b)
    assert s.mass == 4.0
    np.testing.assert_allclose(s.com, [0.25, 1.5, 0.0])
    np.testing.assert_allclose(s.inertia, a.inertia + b.inertia)
    M.validate(s)


def test_adjust_scales():
    m = M.translate(M.box((0.1, 0.2, 0.3), density=100.0), [0.5, 0.0, 0.0])
    a = M.adjust(m, 3.0 * m.mass)
    assert a.mass == pytest.approx(3.0 * m.mass)
    np.testing.assert_allclose(a.inertia, 3.0 * m.inertia, rtol=1e-14)
    np.testing.assert_array_equal(a.com, m.com)


def test_from_inertia_and_about_com():
    I = np.array([[2.0, 0.1, 0.0], [0.1, 3.0, -0.2], [0.0, -0.2, 4.0]])
    m = M.from_inertia(5.0, I)
    np.testing.assert_array_equal(m.inertia, I)
    np.testing.assert_array_equal(m.inertia_about_com(), I)
    m2 = M.from_inertia(5.0, I, com=(0.1, 0.0, 0.0))
    np.testing.assert_allclose(m2.inertia_about_com(), I - 5.0 * np.diag([0.0, 0.01, 0.01]))


def test_mass_is_immutable():
    m = M.sphere(1.0, density=1.0)
    with pytest.raises(Exception):
        m.mass = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        m.inertia[0, 0] = 1.0
    with pytest.raises(ValueError):
        m.com[0] = 1.0


# --------------------------------------------------------------------------
# bad inputs: ValueError naming the field


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: M.sphere(-1, density=1.0), "radius"),
        (lambda: M.sphere(0.0, density=1.0), "radius"),
        (lambda: M.sphere(float("nan"), density=1.0), "radius"),
        (lambda: M.sphere(1.0), "density / total"),
        (lambda: M.sphere(1.0, density=1.0, total=1.0), "density / total"),
        (lambda: M.sphere(1.0, density=-2.0), "density"),
        (lambda: M.sphere(1.0, density=float("inf")), "density"),
        (lambda: M.sphere(1.0, total=0.0), "total"),
        (lambda: M.box((1.0, -1.0, 1.0), density=1.0), "size[1]"),
        (lambda: M.box((1.0, 1.0), density=1.0), "size"),
        (lambda: M.box(1.0, density=1.0), "size"),
        (lambda: M.capsule(-0.1, 1.0, density=1.0), "radius"),
        (lambda: M.capsule(0.1, 0.0, density=1.0), "length"),
        (lambda: M.capsule(0.1, 1.0, direction=0, density=1.0), "direction"),
        (lambda: M.capsule(0.1, 1.0, direction=4, density=1.0), "direction"),
        (lambda: M.cylinder(0.1, 1.0, direction=1.5, density=1.0), "direction"),
        (lambda: M.cylinder(0.1, -1.0, density=1.0), "length"),
        (lambda: M.cylinder(0.1, 1.0, total=-3.0), "total"),
        (lambda: M.from_inertia(0.0, np.eye(3)), "mass.mass"),
        (lambda: M.from_inertia(-1.0, np.eye(3)), "mass.mass"),
        (lambda: M.from_inertia(float("nan"), np.eye(3)), "mass.mass"),
        (lambda: M.from_inertia(1.0, [[1, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "mass.inertia"),
        (lambda: M.from_inertia(1.0, np.diag([1.0, 1.0, -1.0])), "mass.inertia"),
        (lambda: M.from_inertia(1.0, np.diag([1.0, 1.0, 0.0])), "mass.inertia"),
        (lambda: M.from_inertia(1.0, np.diag([1.0, np.nan, 1.0])), "mass.inertia"),
        (lambda: M.from_inertia(1.0, np.diag([1.0, np.inf, 1.0])), "mass.inertia"),
        (lambda: M.from_inertia(1.0, np.eye(2)), "inertia"),
        (lambda: M.from_inertia(1.0, np.eye(3), com=(np.nan, 0, 0)), "mass.com"),
        (lambda: M.from_inertia(1.0, np.eye(3), com=(0, 0)), "com"),
        # PD about the origin but not about the centre of mass
        (lambda: M.from_inertia(1.0, 0.01 * np.eye(3), com=(1.0, 0, 0)), "mass.inertia about the centre of mass"),
        (lambda: M.translate(M.sphere(1.0, density=1.0), [0, np.inf, 0]), "offset"),
        (lambda: M.rotate(M.sphere(1.0, density=1.0), 2.0 * np.eye(3)), "R"),
        (lambda: M.rotate(M.sphere(1.0, density=1.0), np.diag([1.0, 1.0, -1.0])), "R"),
        (lambda: M.rotate(M.sphere(1.0, density=1.0), np.zeros(4)), "R"),
        (lambda: M.rotate(M.sphere(1.0, density=1.0), np.zeros(5)), "R"),
        (lambda: M.adjust(M.sphere(1.0, density=1.0), 0.0), "total"),
        (lambda: M.validate(M.Mass(1.0, np.zeros(3), np.eye(3)), name="body3"), None),
    ],
)
def test_bad_inputs_raise_value_error(call, field):
    if field is None:  # a valid call: must not raise
        call()
        return
    with pytest.raises(ValueError) as exc:
        call()
    assert field in str(exc.value)


def test_error_message_format():
    with pytest.raises(ValueError, match=r"^radius must be > 0 \(got -1\)$"):
        M.sphere(-1, density=1.0)
    with pytest.raises(ValueError, match=r"mass\.mass must be > 0 and finite"):
        M.validate(M.Mass(0.0, np.zeros(3), np.eye(3)))
    with pytest.raises(ValueError, match=r"density / total"):
        M.box((1, 1, 1))
    with pytest.raises(ValueError, match=r"^body7\.mass must be > 0"):
        M.validate(M.Mass(-1.0, np.zeros(3), np.eye(3)), name="body7")


def test_symmetry_tolerance_is_relative():
    I = np.diag([1e3, 2e3, 2.5e3])
    ok = I.copy()
    ok[0, 1] = 1e-7  # 1e-10 relative: accepted
    M.from_inertia(1.0, ok)
    bad = I.copy()
    bad[0, 1] = 1e-3  # 1e-6 relative: rejected
    with pytest.raises(ValueError, match="symmetric"):
        M.from_inertia(1.0, bad)
