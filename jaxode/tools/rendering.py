"""Pictures of worlds: a ray-traced RGB image of the geoms, and GIFs of rollouts.

``render(model, state)`` casts one ray per pixel with :func:`jaxode.raycast`
(so every geom type the ray caster knows is drawn, exactly where the collision
code thinks it is), shades the first hit with a directional light (Lambert plus
ambient), darkens points whose ray towards the light is blocked (hard shadows),
and paints the ground with a checkerboard so motion is visible. It is a pure
JAX function: ``jax.vmap`` renders a batch of worlds at once (batched image
observations), :func:`grid` tiles them into one thumbnail sheet.

Frames: world frame, z up. A :class:`Camera` sits at ``pos`` [m] looking at
``look_at`` [m] (a pinhole with vertical field of view ``fov`` [deg]); with
``follow=body`` both are offsets from that body's position, so the camera
tracks it. Images are ``uint8`` arrays of shape (height, width, 3).

GIF writing uses Pillow (installed with matplotlib, the ``plot`` extra).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxode.types import Model, State

# A palette for geoms (RGB in [0, 1]); static geoms (ground) get the checkerboard.
_PALETTE = np.array([
    (0.90, 0.42, 0.20), (0.20, 0.50, 0.85), (0.30, 0.70, 0.35), (0.85, 0.75, 0.20),
    (0.60, 0.35, 0.75), (0.20, 0.70, 0.70), (0.85, 0.30, 0.45), (0.55, 0.55, 0.55),
])
_SKY_TOP, _SKY_HORIZON = np.array((0.45, 0.62, 0.85)), np.array((0.85, 0.90, 0.95))
_GROUND_A, _GROUND_B = np.array((0.78, 0.78, 0.74)), np.array((0.62, 0.62, 0.58))


@dataclasses.dataclass(frozen=True)
class Camera:
    """A pinhole camera.

    pos: camera position [m] (world frame; an offset from the followed body's
    position when ``follow`` is set); look_at: the point it looks at [m] (same
    convention); up: the world direction that appears up; fov: vertical field of
    view [deg], in (0, 180); follow: body index or None.
    """

    pos: Sequence[float] = (3.0, -3.0, 2.0)
    look_at: Sequence[float] = (0.0, 0.0, 0.3)
    up: Sequence[float] = (0.0, 0.0, 1.0)
    fov: float = 45.0
    follow: Optional[int] = None

    def __post_init__(self):
        if not (0.0 < float(self.fov) < 180.0):
            raise ValueError(f"Camera.fov must be in (0, 180) degrees (got {self.fov!r})")
        d = np.asarray(self.look_at, float) - np.asarray(self.pos, float)
        if d.shape != (3,) or np.linalg.norm(d) == 0.0:
            raise ValueError("Camera.pos and Camera.look_at must be distinct 3-vectors "
                             f"(got pos={self.pos!r}, look_at={self.look_at!r})")
        if np.linalg.norm(np.cross(d, np.asarray(self.up, float))) < 1e-9 * np.linalg.norm(d):
            raise ValueError(f"Camera.up {self.up!r} must not be parallel to the view direction")


def _rays(camera: Camera, origin_shift, width: int, height: int, dtype):
    """Origins (H, W, 3) and unit directions (H, W, 3) of the pixel rays."""
    eye = jnp.asarray(camera.pos, dtype) + origin_shift
    target = jnp.asarray(camera.look_at, dtype) + origin_shift
    fwd = target - eye
    fwd = fwd / jnp.linalg.norm(fwd)
    right = jnp.cross(fwd, jnp.asarray(camera.up, dtype))
    right = right / jnp.linalg.norm(right)
    up = jnp.cross(right, fwd)
    half = math.tan(math.radians(camera.fov) / 2.0)
    ys = (1.0 - 2.0 * (np.arange(height) + 0.5) / height) * half
    xs = (2.0 * (np.arange(width) + 0.5) / width - 1.0) * half * width / height
    d = (fwd[None, None] + jnp.asarray(xs, dtype)[None, :, None] * right[None, None]
         + jnp.asarray(ys, dtype)[:, None, None] * up[None, None])
    d = d / jnp.linalg.norm(d, axis=-1, keepdims=True)
    return jnp.broadcast_to(eye, d.shape), d


def render(model: Model, state: State, camera: Camera = Camera(), width: int = 320,
           height: int = 240, light: Sequence[float] = (0.4, 0.3, 1.0), shadows: bool = True,
           checker: float = 0.5) -> jax.Array:
    """RGB image (height, width, 3) uint8 of the world ``state`` seen by ``camera``.

    light: direction towards the (distant) light, world frame; shadows: cast
    a second ray per pixel towards it; checker: ground checkerboard square [m]
    (static geoms; 0 for plain). Pure and jit/vmap-able (shapes are static).
    """
    from jaxode.sim.rays import raycast

    if width < 1 or height < 1:
        raise ValueError(f"render: width and height must be >= 1 pixel (got {width}x{height})")
    dtype = state.pos.dtype
    shift = (jnp.zeros(3, dtype) if camera.follow is None
             else state.pos[camera.follow])
    org, d = _rays(camera, shift, width, height, dtype)
    dist, point, normal, geom = raycast(model, state, org, d)
    hit = jnp.isfinite(dist)
    ldir = jnp.asarray(light, dtype)
    ldir = ldir / jnp.linalg.norm(ldir)

    # colour: palette by geom index for geoms on bodies, checkerboard for static ones
    gid = jnp.maximum(geom, 0)
    static = (jnp.asarray(model.geom_body) >= model.nbody)[gid]
    base = jnp.asarray(_PALETTE, dtype)[gid % len(_PALETTE)]
    if checker > 0:
        cell = jnp.floor(point[..., 0] / checker) + jnp.floor(point[..., 1] / checker)
        ground = jnp.where((cell % 2 == 0)[..., None], jnp.asarray(_GROUND_A, dtype),
                           jnp.asarray(_GROUND_B, dtype))
    else:
        ground = jnp.broadcast_to(jnp.asarray(_GROUND_A, dtype), base.shape)
    albedo = jnp.where(static[..., None], ground, base)
    # the normal facing the camera (a ray may hit the back of a thin plane)
    n = jnp.where((jnp.sum(normal * d, -1) > 0)[..., None], -normal, normal)
    lambert = jnp.clip(jnp.sum(n * ldir, -1), 0.0, 1.0)
    if shadows:
        p0 = jnp.where(hit[..., None], point + 1e-4 * n, org)
        sdist, *_ = raycast(model, state, p0, jnp.broadcast_to(ldir, p0.shape))
        lambert = jnp.where(jnp.isfinite(sdist), 0.0, lambert)
    shade = 0.35 + 0.65 * lambert
    colour = albedo * shade[..., None]
    # sky: a vertical gradient
    t = jnp.clip(d[..., 2], 0.0, 1.0)[..., None]
    sky = (1 - t) * jnp.asarray(_SKY_HORIZON, dtype) + t * jnp.asarray(_SKY_TOP, dtype)
    img = jnp.where(hit[..., None], colour, sky)
    return (jnp.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(jnp.uint8)


def grid(images, ncols: Optional[int] = None, pad: int = 2) -> np.ndarray:
    """Tile a batch of images (n, h, w, 3) into one sheet (rows of ``ncols``)."""
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(f"grid: images must have shape (n, h, w, 3) (got {images.shape})")
    n, h, w, c = images.shape
    ncols = ncols or int(math.ceil(math.sqrt(n)))
    nrows = int(math.ceil(n / ncols))
    out = np.full((nrows * (h + pad) + pad, ncols * (w + pad) + pad, c), 255, np.uint8)
    for k in range(n):
        r, q = divmod(k, ncols)
        out[pad + r * (h + pad):pad + r * (h + pad) + h,
            pad + q * (w + pad):pad + q * (w + pad) + w] = images[k]
    return out


def render_trajectory(model: Model, state: State, traj, every: int = 1, **kw) -> np.ndarray:
    """Frames (n, h, w, 3) of a rollout: ``traj`` from ``jaxode.rollout`` (one world),
    ``state`` any state of that world (its non-pose fields are unused), one frame per
    ``every`` steps; keywords go to :func:`render`. One compiled, vmapped call."""
    pos, quat = traj.pos[::every], traj.quat[::every]
    fn = jax.jit(jax.vmap(lambda p, q: render(model, state.replace(pos=p, quat=q), **kw)))
    return np.asarray(fn(pos, quat))


def save_gif(frames, path, fps: float = 25.0, loop: int = 0) -> None:
    """Write frames (n, h, w, 3) uint8 as an animated GIF at ``fps`` frames per second."""
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("save_gif needs Pillow: pip install 'jaxode[plot]'") from e
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"save_gif: frames must be uint8 (n, h, w, 3) (got {frames.dtype} "
                         f"{frames.shape})")
    if not fps > 0:
        raise ValueError(f"save_gif: fps must be > 0 (got {fps!r})")
    imgs = [Image.fromarray(f) for f in frames]
    imgs[0].save(path, save_all=True, append_images=imgs[1:], duration=int(round(1000 / fps)),
                 loop=loop)
