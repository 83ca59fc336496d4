"""jaxode.render against pinhole-camera geometry and the shading formula.

Truths: a sphere of radius r at distance D on the optical axis projects to a
disk of radius f tan(asin(r / D)) pixels (f = (H / 2) / tan(fov / 2)); a
surface facing the light straight on is drawn in its albedo (ambient 0.35 +
diffuse 0.65 x cos 0); a point whose ray to the light is blocked gets the
ambient term only; a camera that follows a body sees the same picture wherever
the body is. Small images keep the compile short.
"""
from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import jaxode
from jaxode.tools import rendering

W, H = 96, 72


def _sphere_world(pos=(0.0, 0.0, 1.0), r=0.5, plane=False):
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
    if plane:
        b.add_plane()
    i = b.add_body(pos=pos, mass=jaxode.mass.sphere(r, density=1000.0))
    b.add_sphere(r, body=i)
    return b.build()


def test_sphere_projects_to_the_pinhole_disk_in_its_albedo():
    r, dist, fov = 0.5, 4.0, 40.0
    model = _sphere_world()
    cam = jaxode.Camera(pos=(0.0, -dist, 1.0), look_at=(0.0, 0.0, 1.0), fov=fov)
    # light from the camera: the sphere's centre pixel faces it straight on
    s = jaxode.init(model)
    draw = jax.jit(lambda st: jaxode.render(model, st, camera=cam, width=W, height=H,
                                            light=(0.0, -1.0, 0.0)))
    img = np.asarray(draw(s))
    sky = np.asarray(draw(s.replace(pos=s.pos.at[0, 1].set(-100.0))))   # behind the camera
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    colour = np.round(255 * rendering._PALETTE[0]).astype(int)
    centre = img[H // 2 - 1:H // 2 + 1, W // 2 - 1:W // 2 + 1].reshape(-1, 3).astype(int)
    assert np.abs(centre - colour).max() <= 2          # cos(angle) ~ 1 within a pixel
    on = np.any(img != sky, axis=-1)
    f = (H / 2) / math.tan(math.radians(fov) / 2)
    radius_px = f * math.tan(math.asin(r / dist))
    assert on.sum() == pytest.approx(math.pi * radius_px**2, rel=0.04)


def test_shadow_below_a_sphere_and_lit_ground_elsewhere():
    model = _sphere_world(pos=(0.0, 0.0, 1.0), r=0.3, plane=True)
    # looking straight down from high above, light from straight above
    cam = jaxode.Camera(pos=(0.0, -0.01, 6.0), look_at=(0.0, 0.0, 0.0), fov=60.0)
    img = np.asarray(jaxode.render(model, jaxode.init(model), camera=cam, width=W, height=H,
                                   light=(0.0, 0.0, 1.0), checker=0.0)).astype(float)
    ground = 255 * rendering._GROUND_A
    np.testing.assert_allclose(img[2, 2], ground, atol=1.0)    # lit: cos 0 = 1
    # (the sphere, nearer the camera, hides its own shadow straight below it)
    assert not np.any(np.all(np.abs(img - 0.35 * ground) <= 1.0, axis=-1))
    # with the light tilted 45 degrees the shadow moves out from under the sphere
    img2 = np.asarray(jaxode.render(model, jaxode.init(model), camera=cam, width=W, height=H,
                                    light=(1.0, 0.0, 1.0), checker=0.0)).astype(float)
    lit = 255 * rendering._GROUND_A * (0.35 + 0.65 * math.cos(math.pi / 4))
    shadow = np.all(np.abs(img2 - 0.35 * ground) <= 1.0, axis=-1)
    lit_px = np.all(np.abs(img2 - lit) <= 1.0, axis=-1)
    assert lit_px.sum() > 0.5 * W * H
    # the shadow of a sphere at height 1 under a 45 degree light is centred 1 m toward -x
    ys, xs = np.nonzero(shadow)
    assert shadow.sum() > 20
    f = (H / 2) / math.tan(math.radians(60.0) / 2)
    x_world = np.mean(xs - (W / 2 - 0.5)) * 6.0 / f
    assert x_world == pytest.approx(-1.0, abs=0.1)


def test_follow_camera_batch_grid_and_gif(tmp_path):
    model = _sphere_world(r=0.2)
    s = jaxode.init(model)
    cam = jaxode.Camera(pos=(0.0, -2.0, 0.5), look_at=(0.0, 0.0, 0.0), follow=0)
    moved = s.replace(pos=s.pos + np.array([3.0, -1.0, 0.5]))
    batch = jaxode.batch(s, 2).replace(pos=np.stack([s.pos, moved.pos]))
    imgs = np.asarray(jax.jit(jax.vmap(
        lambda st: jaxode.render(model, st, camera=cam, width=32, height=24)))(batch))
    np.testing.assert_array_equal(imgs[0], imgs[1])           # the camera moved with it
    one = np.asarray(jaxode.render(model, moved, camera=cam, width=32, height=24))
    np.testing.assert_array_equal(one, imgs[1])               # batched == alone
    sheet = jaxode.render_grid(imgs, ncols=2, pad=1)
    assert sheet.shape == (24 + 2, 2 * 32 + 3, 3)
    np.testing.assert_array_equal(sheet[1:25, 1:33], imgs[0])
    path = tmp_path / "a.gif"
    frames = np.stack([imgs[0], 255 - imgs[0], imgs[0] // 2])   # (Pillow merges equal frames)
    jaxode.save_gif(frames, path, fps=10)
    from PIL import Image
    with Image.open(path) as gif:
        assert gif.n_frames == 3 and gif.size == (32, 24)
        assert gif.info["duration"] == 100


def test_bad_camera_and_frames_are_rejected():
    with pytest.raises(ValueError, match="fov"):
        jaxode.Camera(fov=180.0)
    with pytest.raises(ValueError, match="distinct"):
        jaxode.Camera(pos=(1, 1, 1), look_at=(1, 1, 1))
    with pytest.raises(ValueError, match="parallel"):
        jaxode.Camera(pos=(0, 0, 5), look_at=(0, 0, 0), up=(0, 0, 1))
    with pytest.raises(ValueError, match="uint8"):
        jaxode.save_gif(np.zeros((2, 4, 4, 3)), "/tmp/never.gif")


def test_render_trajectory_follows_the_pinhole_projection():
    """render_trajectory: one frame per ``every`` steps of a rollout. A sphere
    moving at 1 m/s across the view (no gravity): the centroid of its disk is at the
    pinhole projection u = W/2 + f x / D of its centre in every frame (within a
    pixel), so the frames are the rollout's, in order."""
    dist, fov, dt, n, every = 4.0, 40.0, 0.05, 20, 5
    b = jaxode.WorldBuilder(gravity=(0.0, 0.0, 0.0))
    i = b.add_body(pos=(-0.5, 0.0, 1.0), vel=(1.0, 0.0, 0.0),
                   mass=jaxode.mass.sphere(0.3, density=1000.0))
    b.add_sphere(0.3, body=i)
    model = b.build()
    s0 = jaxode.init(model)
    _, traj = jaxode.rollout(model, s0, n, dt)
    cam = jaxode.Camera(pos=(0.0, -dist, 1.0), look_at=(0.0, 0.0, 1.0), fov=fov)
    frames = jaxode.render_trajectory(model, s0, traj, every=every, camera=cam, width=W,
                                      height=H, light=(0.0, -1.0, 0.0))
    assert frames.shape == (n // every, H, W, 3) and frames.dtype == np.uint8
    sky = np.asarray(jaxode.render(model, s0.replace(pos=s0.pos.at[0, 1].set(-100.0)),
                                   camera=cam, width=W, height=H, light=(0.0, -1.0, 0.0)))
    f = (H / 2) / math.tan(math.radians(fov) / 2)
    xs = np.asarray(traj.pos)[::every, 0, 0]
    for k, x in enumerate(xs):
        on = np.any(frames[k] != sky, axis=-1)
        cols = np.nonzero(on)[1]
        u = cols.mean() + 0.5  # pixel centres
        assert abs(u - (W / 2 + f * x / dist)) < 1.0, (k, u, W / 2 + f * x / dist)
    assert xs[-1] - xs[0] > 0.7  # it moved across the frame
