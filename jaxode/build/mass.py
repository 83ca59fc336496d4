"""Host-side mass parameters: numpy (float64) equivalents of ODE's ``dMass`` API.

This module is plain numpy and never imports JAX: it is meant for building a
model on the host (before anything is traced or batched).

Conventions (the same as ODE's ``dMass``, ODE manual "Mass functions"):

* SI units: mass [kg], lengths [m], density [kg/m^3], inertia [kg m^2].
* Everything is expressed in the **body frame**.
* ``Mass.com`` is the centre of mass ``c`` in the body frame [m].
* ``Mass.inertia`` is the 3x3 inertia tensor about the **point of reference**
  (POR, the body-frame origin), *not* about the centre of mass -- exactly ODE's
  ``dMass.I`` ("3x3 inertia tensor in body frame, about POR").  Use
  :meth:`Mass.inertia_about_com` for the tensor about the centre of mass.
  For every shape constructor (com at the origin) the two coincide.

ODE's ``dBodySetMass`` requires the centre of mass at the body origin, and so
does :class:`jaxode.types.Params` (``body_inertia`` is about the centre of mass,
which is the body origin).  If a composite mass ends up with ``com != 0``,
``translate(m, -m.com)`` moves it to the origin (then shift the body's geoms by
the same offset), as one does in ODE.

Functions mirror ODE one to one and are functional (they return a new
:class:`Mass`):

=====================  ==========================================
ODE                    here
=====================  ==========================================
dMassSetSphere(Total)  :func:`sphere`
dMassSetBox(Total)     :func:`box`
dMassSetCapsule(Total) :func:`capsule`
dMassSetCylinder(...)  :func:`cylinder`
dMassSetTrimesh        :func:`convex` (the convex hull of points)
dMassSetParameters     :func:`from_inertia`
dMassAdjust            :func:`adjust`
dMassTranslate         :func:`translate`
dMassRotate            :func:`rotate`
dMassAdd               :func:`add`
dMassCheck             :func:`validate` (stricter: raises ValueError)
=====================  ==========================================
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Optional, Sequence

import numpy as np

__all__ = [
    "Mass",
    "sphere",
    "box",
    "capsule",
    "cylinder",
    "convex",
    "from_inertia",
    "translate",
    "rotate",
    "add",
    "adjust",
    "validate",
]

#: Relative tolerance for the symmetry check of an inertia tensor.
SYMMETRY_RTOL = 1e-9
#: Tolerance on ``R^T R = I`` and ``det R = 1`` for rotation matrices.
ROTATION_ATOL = 1e-6


@dataclasses.dataclass(frozen=True, eq=False)
class Mass:
    """Mass parameters of one rigid body (ODE ``dMass``), body frame, SI units.

    Attributes:
      mass: total mass [kg].
      com: (3,) centre of mass in the body frame [m] (ODE ``dMass.c``).
      inertia: (3, 3) inertia tensor [kg m^2] in the body frame, about the
        point of reference, i.e. the body-frame origin (ODE ``dMass.I``) -- not
        about the centre of mass unless ``com`` is zero.  See
        :meth:`inertia_about_com`.

    The arrays are stored as read-only float64 copies.  Construction only
    checks shapes; call :func:`validate` to check physical consistency (the
    constructors in this module do so).  Instances compare by identity; use
    :meth:`allclose` to compare values.
    """

    mass: float
    com: np.ndarray
    inertia: np.ndarray

    def __post_init__(self) -> None:
        try:
            mass = float(self.mass)
        except (TypeError, ValueError) as e:
            raise ValueError(f"mass must be a real number (got {self.mass!r})") from e
        com = np.array(self.com, dtype=np.float64)
        if com.shape != (3,):
            raise ValueError(f"com must have shape (3,) (got shape {com.shape})")
        inertia = np.array(self.inertia, dtype=np.float64)
        if inertia.shape != (3, 3):
            raise ValueError(f"inertia must have shape (3, 3) (got shape {inertia.shape})")
        com.flags.writeable = False
        inertia.flags.writeable = False
        object.__setattr__(self, "mass", mass)
        object.__setattr__(self, "com", com)
        object.__setattr__(self, "inertia", inertia)

    def inertia_about_com(self) -> np.ndarray:
        """(3, 3) inertia tensor about the centre of mass [kg m^2], body axes.

        Parallel-axis theorem, as ODE writes it in ``dMassTranslate`` /
        ``dMassCheck``: ``I_com = I + mass * crossmat(c)^2
        = I - mass * (|c|^2 E - c c^T)``.
        """
        c = self.com
        return self.inertia - self.mass * (np.dot(c, c) * np.eye(3) - np.outer(c, c))

    def allclose(self, other: "Mass", rtol: float = 1e-12, atol: float = 1e-12) -> bool:
        """True if mass, com and inertia agree within ``np.allclose`` tolerances."""
        return bool(
            np.isclose(self.mass, other.mass, rtol=rtol, atol=atol)
            and np.allclose(self.com, other.com, rtol=rtol, atol=atol)
            and np.allclose(self.inertia, other.inertia, rtol=rtol, atol=atol)
        )


# --------------------------------------------------------------------------
# argument checks


def _positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a real number > 0 (got {value!r})") from e
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite and > 0 (got {value!r})")
    if not v > 0.0:
        raise ValueError(f"{name} must be > 0 (got {value!r})")
    return v


def _direction(direction: int) -> int:
    if (
        isinstance(direction, bool)
        or not isinstance(direction, numbers.Integral)
        or int(direction) not in (1, 2, 3)
    ):
        raise ValueError(f"direction must be 1, 2 or 3 (x, y or z axis) (got {direction!r})")
    return int(direction)


def _density_or_total(density: float | None, total: float | None) -> tuple[float, float | None]:
    """Returns (density to build with, total mass to adjust to or None)."""
    if (density is None) == (total is None):
        raise ValueError(
            "exactly one of density / total must be given "
            f"(got density={density!r}, total={total!r})"
        )
    if density is not None:
        return _positive("density", density), None
    return 1.0, _positive("total", total)


def _vec3(name: str, value: Sequence[float]) -> np.ndarray:
    v = np.asarray(value, dtype=np.float64)
    if v.shape != (3,):
        raise ValueError(f"{name} must have shape (3,) (got shape {v.shape})")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite (got {v.tolist()})")
    return v


def _symmetrize_upper(a: np.ndarray) -> np.ndarray:
    """Copy the upper triangle onto the lower one, as ODE does ("perfect symmetry")."""
    return np.triu(a) + np.triu(a, 1).T


def _finish(m: Mass, total: float | None, name: str = "mass") -> Mass:
    if total is not None:
        m = adjust(m, total)
    validate(m, name)
    return m


# --------------------------------------------------------------------------
# constructors (com at the origin, except from_inertia)


def sphere(radius: float, *, density: float | None = None, total: float | None = None) -> Mass:
    """Solid sphere centred on the body origin (ODE ``dMassSetSphere[Total]``).

    Args:
      radius: [m], > 0.
      density: [kg/m^3]; or
      total: total mass [kg] (exactly one of the two).

    ``mass = 4/3 pi r^3 density``; ``I = 2/5 mass r^2 * E``.
    """
    r = _positive("radius", radius)
    rho, total = _density_or_total(density, total)
    mass = (4.0 / 3.0) * math.pi * r**3 * rho
    return _finish(Mass(mass, np.zeros(3), 0.4 * mass * r * r * np.eye(3)), total)


def box(
    size: Sequence[float], *, density: float | None = None, total: float | None = None
) -> Mass:
    """Solid box centred on the body origin, sides along the body axes (``dMassSetBox``).

    Args:
      size: ``(lx, ly, lz)`` full side lengths [m] (not half-extents), each > 0.
      density: [kg/m^3]; or
      total: total mass [kg] (exactly one of the two).

    ``mass = lx ly lz density``; ``Ixx = mass/12 (ly^2 + lz^2)`` and cyclically.
    """
    s = np.asarray(size, dtype=np.float64) if not np.isscalar(size) else None
    if s is None or s.shape != (3,):
        raise ValueError(f"size must be (lx, ly, lz), three full side lengths (got {size!r})")
    lx, ly, lz = (_positive(f"size[{i}]", s[i]) for i in range(3))
    rho, total = _density_or_total(density, total)
    mass = lx * ly * lz * rho
    inertia = np.diag(
        [mass / 12.0 * (ly * ly + lz * lz), mass / 12.0 * (lx * lx + lz * lz),
         mass / 12.0 * (lx * lx + ly * ly)]
    )
    return _finish(Mass(mass, np.zeros(3), inertia), total)


def capsule(
    radius: float,
    length: float,
    *,
    direction: int = 3,
    density: float | None = None,
    total: float | None = None,
) -> Mass:
    """Solid capsule centred on the body origin (ODE ``dMassSetCapsule[Total]``).

    A cylinder of radius ``radius`` and length ``length`` (not counting the
    caps) with a hemispherical cap of the same radius on each end; total
    length ``length + 2 radius``.  Its long axis is the body x, y or z axis for
    ``direction`` 1, 2 or 3.

    ODE's formula (which is the exact integral for a uniform solid)::

      M1 = pi r^2 L rho                    cylinder
      M2 = 4/3 pi r^3 rho                  both caps together
      Ia = M1 (r^2/4 + L^2/12) + M2 (0.4 r^2 + 0.375 r L + 0.25 L^2)   transverse
      Ib = (0.5 M1 + 0.4 M2) r^2                                        axial

    Args:
      radius: [m], > 0.
      length: cylinder length [m], > 0.
      direction: 1, 2 or 3 (x, y, z).
      density: [kg/m^3]; or
      total: total mass [kg] (exactly one of the two).
    """
    r = _positive("radius", radius)
    L = _positive("length", length)
    d = _direction(direction)
    rho, total = _density_or_total(density, total)
    m1 = math.pi * r * r * L * rho
    m2 = (4.0 / 3.0) * math.pi * r**3 * rho
    ia = m1 * (0.25 * r * r + L * L / 12.0) + m2 * (0.4 * r * r + 0.375 * r * L + 0.25 * L * L)
    ib = (0.5 * m1 + 0.4 * m2) * r * r
    diag = [ia, ia, ia]
    diag[d - 1] = ib
    return _finish(Mass(m1 + m2, np.zeros(3), np.diag(diag)), total)


def cylinder(
    radius: float,
    length: float,
    *,
    direction: int = 3,
    density: float | None = None,
    total: float | None = None,
) -> Mass:
    """Solid flat-ended cylinder centred on the body origin (``dMassSetCylinder``).

    Long axis along body x, y or z for ``direction`` 1, 2 or 3.
    ``mass = pi r^2 L rho``; transverse ``I = mass (r^2/4 + L^2/12)``
    ``= mass (3 r^2 + L^2)/12``; axial ``I = mass r^2 / 2``.

    Args:
      radius: [m], > 0.
      length: [m], > 0.
      direction: 1, 2 or 3 (x, y, z).
      density: [kg/m^3]; or
      total: total mass [kg] (exactly one of the two).
    """
    r = _positive("radius", radius)
    L = _positive("length", length)
    d = _direction(direction)
    rho, total = _density_or_total(density, total)
    mass = math.pi * r * r * L * rho
    ia = mass * (0.25 * r * r + L * L / 12.0)
    diag = [ia, ia, ia]
    diag[d - 1] = 0.5 * mass * r * r
    return _finish(Mass(mass, np.zeros(3), np.diag(diag)), total)


def convex(points, *, density: float | None = None, total: float | None = None) -> Mass:
    """Solid convex polyhedron, the convex hull of ``points`` (N, 3) [m] in the
    body frame, as ``WorldBuilder.add_convex`` builds it (ODE's
    ``dMassSetTrimesh`` for a closed mesh).

    Exact integrals over the hull, split into tetrahedra from an interior
    point c to each face triangle (a, b, c'): volume ``det / 6`` and
    ``int x x^T dV = V / 20 (sum_i v_i v_i^T + s s^T)`` with the four vertices
    v_i and their sum s (the second moments of a tetrahedron).

    Unlike the other constructors the centre of mass is where the points put
    it, not the origin; ``inertia`` is about the body origin (ODE's point of
    reference). To attach it, ``translate(m, -m.com)`` and give the geom
    ``pos = -m.com`` (body frame at the centre of mass), as in ODE.

    Args:
      points: (N, 3) [m], at least 4 spanning a volume (see ``add_convex``).
      density: [kg/m^3]; or
      total: total mass [kg] (exactly one of the two).
    """
    from jaxode.build import hull as hull_lib

    h = hull_lib.build_hull(points, "points")
    rho, total = _density_or_total(density, total)
    volume, com, inertia = _tetrahedra(h.centre, h.verts[h.tris], rho)
    return _finish(Mass(rho * volume, com, inertia), total)


def trimesh(vertices, triangles, *, density: float | None = None,
            total: float | None = None) -> Mass:
    """Solid bounded by a closed triangle mesh (ODE's ``dMassSetTrimesh``):
    ``vertices`` (V, 3) [m] in the body frame, ``triangles`` (T, 3) int,
    counter-clockwise seen from outside, as ``WorldBuilder.add_trimesh``.

    Exact by the divergence theorem: the signed tetrahedra from the origin to
    every triangle sum to the solid's volume, first and second moments
    (``int x x^T dV = V / 20 (sum_i v_i v_i^T + s s^T)`` per tetrahedron,
    vertices v_i, s their sum). As ``convex``, the centre of mass is where the
    vertices put it and the inertia is about the body origin.

    Raises ValueError for an open mesh (an edge not shared by exactly two
    triangles in opposite directions) or a negative volume (inward winding).
    """
    from jaxode.build import meshes as mesh_lib

    m = mesh_lib.build_mesh(vertices, triangles, "trimesh")
    if not m.closed:
        raise ValueError("trimesh: the mesh is not closed (every edge must be shared by exactly "
                         "two triangles, in opposite directions); it bounds no volume")
    rho, total = _density_or_total(density, total)
    volume, com, inertia = _tetrahedra(np.zeros(3), m.verts[m.tris], rho)
    size = float(np.max(np.ptp(m.verts, axis=0)))
    if volume <= 1e-12 * size ** 3:
        raise ValueError(f"trimesh: the enclosed volume is {volume:.3g} m^3; the triangles must "
                         f"wind counter-clockwise seen from outside")
    return _finish(Mass(rho * volume, com, inertia), total)


def _tetrahedra(apex: np.ndarray, tris: np.ndarray, rho: float):
    """Volume [m^3], centre of mass and inertia about the origin of the solid
    bounded by the triangles ``tris`` (T, 3, 3), counter-clockwise from
    outside, as signed tetrahedra from ``apex`` to each triangle:
    ``int x x^T dV = V / 20 (sum_i v_i v_i^T + s s^T)`` per tetrahedron
    (vertices v_i, s their sum)."""
    tet = np.concatenate([np.broadcast_to(apex, (len(tris), 1, 3)), tris], axis=1)  # (T, 4, 3)
    e = tet[:, 1:] - tet[:, :1]
    vol = np.einsum("ti,ti->t", e[:, 0], np.cross(e[:, 1], e[:, 2])) / 6.0
    ssum = tet.sum(axis=1)
    second = (vol / 20.0)[:, None, None] * (np.einsum("tki,tkj->tij", tet, tet)
                                            + np.einsum("ti,tj->tij", ssum, ssum))
    volume = float(vol.sum())
    com = (vol[:, None] * ssum / 4.0).sum(axis=0) / volume if volume > 0 else np.zeros(3)
    sigma = rho * second.sum(axis=0)  # int rho x x^T dV about the origin
    return volume, com, _symmetrize_upper(np.trace(sigma) * np.eye(3) - sigma)


def from_inertia(
    mass: float, inertia: Sequence[Sequence[float]], com: Sequence[float] = (0.0, 0.0, 0.0)
) -> Mass:
    """User-given parameters (ODE ``dMassSetParameters``), validated.

    Args:
      mass: total mass [kg], > 0.
      inertia: full (3, 3) symmetric inertia tensor [kg m^2], body frame, about
        the point of reference (body origin) -- as in ODE.  (With the default
        ``com = 0`` that is also the tensor about the centre of mass.)
      com: centre of mass in the body frame [m].
    """
    m = Mass(mass, np.asarray(com, dtype=np.float64), np.asarray(inertia, dtype=np.float64))
    validate(m)
    return m


#: Below these a valid (positive definite) inertia is still not a physical body's:
#: a radius of gyration sqrt(I_min / m) under 10 um, or I_min / I_max under 1e-7
#: (float32's resolution: the world-frame inverse inertia then rounds to garbage).
MIN_GYRATION_RADIUS = 1e-5   # [m]
MIN_MOMENT_RATIO = 1e-7


def implausible(mass: float, inertia, com=(0.0, 0.0, 0.0)) -> Optional[str]:
    """Why a valid inertia tensor about ``com`` (body frame) is implausible for a body
    of ``mass`` [kg], or None: its smallest principal moment about the centre of mass
    gives a radius of gyration below :data:`MIN_GYRATION_RADIUS`, or is below
    :data:`MIN_MOMENT_RATIO` times the largest. Loaders warn with this (such
    files, e.g. a 1e-20 kg m^2 ankle, step to non-finite values at once)."""
    m = Mass(float(mass), np.asarray(com, np.float64), np.asarray(inertia, np.float64))
    about = translate(m, -m.com).inertia if np.any(m.com != 0) else m.inertia
    moments = np.linalg.eigvalsh(0.5 * (about + about.T))
    lo, hi = float(moments[0]), float(moments[-1])
    if not (mass > 0 and hi > 0):
        return None
    if math.sqrt(max(lo, 0.0) / mass) < MIN_GYRATION_RADIUS:
        return (f"principal moments {moments.tolist()} kg m^2 for {mass:g} kg: a radius of "
                f"gyration of {math.sqrt(max(lo, 0.0) / mass):.3g} m (< "
                f"{MIN_GYRATION_RADIUS:g} m)")
    if lo < MIN_MOMENT_RATIO * hi:
        return (f"principal moments {moments.tolist()} kg m^2: the smallest is {lo / hi:.3g} "
                f"of the largest (< {MIN_MOMENT_RATIO:g}, below float32's resolution)")
    return None


# --------------------------------------------------------------------------
# operations


def adjust(m: Mass, total: float) -> Mass:
    """Rescale to total mass ``total`` [kg] (ODE ``dMassAdjust``): ``I *= total / mass``.

    The centre of mass is unchanged.
    """
    total = _positive("total", total)
    if not (math.isfinite(m.mass) and m.mass > 0.0):
        raise ValueError(f"mass.mass must be > 0 and finite to adjust (got {m.mass!r})")
    scale = total / m.mass
    return Mass(total, m.com, m.inertia * scale)


def translate(m: Mass, offset: Sequence[float]) -> Mass:
    """Displace the object by ``offset`` [m] in the body frame (``dMassTranslate``).

    With old centre of mass ``c`` and ``a = c + offset``, the new inertia about
    the point of reference is ``I + mass (crossmat(c)^2 - crossmat(a)^2)``
    (parallel-axis theorem) and the new centre of mass is ``a``.
    """
    off = _vec3("offset", offset)
    c = m.com
    a = c + off
    # crossmat(v)^2 = v v^T - |v|^2 E
    chat2 = np.outer(c, c) - np.dot(c, c) * np.eye(3)
    ahat2 = np.outer(a, a) - np.dot(a, a) * np.eye(3)
    inertia = _symmetrize_upper(m.inertia + m.mass * (chat2 - ahat2))
    return Mass(m.mass, a, inertia)


def _quat_to_R(q: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(q))
    if not (math.isfinite(n) and n > 0.0):
        raise ValueError(f"R as a quaternion (w, x, y, z) must be finite and non-zero (got {q.tolist()})")
    w, x, y, z = q / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def rotate(m: Mass, R: Sequence[float]) -> Mass:
    """Rotate the object by ``R`` about the body origin (ODE ``dMassRotate``).

    Args:
      R: a (3, 3) rotation matrix (body frame, ``v_new = R v``; orthonormal and
        ``det R = +1`` within 1e-6), or a quaternion ``(w, x, y, z)`` of length 4
        (normalised here).

    New inertia about the point of reference ``R I R^T``; new centre of mass
    ``R c``.
    """
    r = np.asarray(R, dtype=np.float64)
    if r.shape == (4,):
        if not np.all(np.isfinite(r)):
            raise ValueError(f"R as a quaternion (w, x, y, z) must be finite (got {r.tolist()})")
        r = _quat_to_R(r)
    elif r.shape == (3, 3):
        if not np.all(np.isfinite(r)):
            raise ValueError("R must be a finite 3x3 rotation matrix (got non-finite entries)")
        err = float(np.max(np.abs(r.T @ r - np.eye(3))))
        det = float(np.linalg.det(r))
        if err > ROTATION_ATOL or abs(det - 1.0) > ROTATION_ATOL:
            raise ValueError(
                "R must be a rotation matrix (R^T R = I, det R = +1, tolerance "
                f"{ROTATION_ATOL}) (got max|R^T R - I| = {err:.3g}, det = {det:.6g})"
            )
    else:
        raise ValueError(
            f"R must be a (3, 3) rotation matrix or a (4,) quaternion (w, x, y, z) (got shape {r.shape})"
        )
    inertia = _symmetrize_upper(r @ (m.inertia @ r.T))
    return Mass(m.mass, r @ m.com, inertia)


def add(m1: Mass, m2: Mass) -> Mass:
    """Combine two masses given in the same body frame (ODE ``dMassAdd``).

    ``mass = m1 + m2``; ``com`` is the mass-weighted mean; the inertias (both
    about the same point of reference) add.
    """
    total = m1.mass + m2.mass
    if not (math.isfinite(total) and total > 0.0):
        raise ValueError(f"mass.mass of the sum must be > 0 and finite (got {total!r})")
    com = (m1.com * m1.mass + m2.com * m2.mass) / total
    return Mass(total, com, m1.inertia + m2.inertia)


def validate(m: Mass, name: str = "mass") -> Mass:
    """Check physical consistency (ODE ``dMassCheck``, stricter); returns ``m``.

    Raises ValueError naming the field and the allowed range if:
      * ``mass`` is not > 0 and finite;
      * ``com`` or ``inertia`` contains NaN/inf;
      * ``inertia`` is not symmetric (``max|I - I^T| <= 1e-9 max|I|``);
      * the inertia about the centre of mass is not positive definite (which,
        with ``mass > 0``, also makes the inertia about the origin positive
        definite -- ODE checks both).
    """
    if not isinstance(m, Mass):
        raise ValueError(f"{name} must be a jaxode.mass.Mass (got {type(m).__name__})")
    if not (math.isfinite(m.mass) and m.mass > 0.0):
        raise ValueError(f"{name}.mass must be > 0 and finite (got {m.mass!r})")
    if not np.all(np.isfinite(m.com)):
        raise ValueError(f"{name}.com must be finite (got {m.com.tolist()})")
    inertia = m.inertia
    if not np.all(np.isfinite(inertia)):
        raise ValueError(f"{name}.inertia must be finite (got {inertia.tolist()})")
    scale = float(np.max(np.abs(inertia)))
    asym = float(np.max(np.abs(inertia - inertia.T)))
    if asym > SYMMETRY_RTOL * scale:
        raise ValueError(
            f"{name}.inertia must be symmetric (max|I - I^T| <= {SYMMETRY_RTOL:g} max|I|) "
            f"(got max|I - I^T| = {asym:.3g}, max|I| = {scale:.3g})"
        )
    for label, tensor in (("", inertia), (" about the centre of mass", m.inertia_about_com())):
        sym = 0.5 * (tensor + tensor.T)
        eig = np.linalg.eigvalsh(sym)
        try:
            np.linalg.cholesky(sym)
            ok = eig[0] > 0.0
        except np.linalg.LinAlgError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}.inertia{label} must be positive definite (all eigenvalues > 0) "
                f"(got eigenvalues {eig.tolist()})"
            )
    return m
