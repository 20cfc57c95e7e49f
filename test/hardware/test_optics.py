"""The visual reality's image functions (simreal_ros/hardware/emulator/optics.py), by hand.

Synthetic images with answers computed from the models' formulas, and MuJoCo renders of a
sphere and a plate whose pixel positions and brightness follow from the pinhole and Lambert's
cosine law.
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from transforms3d.euler import euler2mat
import yaml

from simreal_ros.core.camera_info import OpticalReality
from simreal_ros.core.robot import CameraSpec
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.emulator.optics import (
    Optics,
    colour_gain,
    distortion_maps,
    offset_pose,
    rotation_matrix,
    sensor_noise,
)

K = (150.0, 150.0, 79.5, 59.5)


def test_white_balance_scales_channel_means_exactly() -> None:
    rng = np.random.default_rng(3)
    img = rng.uniform(10, 100, (48, 64, 3)).astype(np.float32)
    means = img.reshape(-1, 3).mean(axis=0, dtype=np.float64)
    out = colour_gain(img.copy(), 1.25, (1.1, 1.0, 0.8))
    got = out.reshape(-1, 3).mean(axis=0, dtype=np.float64)
    np.testing.assert_allclose(got / means, [1.375, 1.25, 1.0], rtol=1e-6)
    # through Optics, quantized: 100 -> 100 * 1.25 * wb, rounded
    o = Optics(OpticalReality(gain=1.25, white_balance=(1.1, 1.0, 0.8)), 4, 4, K)
    assert o.apply(np.full((4, 4, 3), 100, np.uint8))[0, 0].tolist() == [138, 125, 100]


def test_no_distortion_is_identity() -> None:
    assert distortion_maps(160, 120, K, (0.0,) * 5) is None
    o = Optics(OpticalReality(), 160, 120, K)
    img = np.random.default_rng(0).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    assert (o.ideal_size, o.pad) == ((160, 120), 0)
    np.testing.assert_array_equal(o.apply(img), img)


def _centroid(img: np.ndarray) -> tuple[float, float]:
    w = img.astype(np.float64)
    ys, xs = np.mgrid[:img.shape[0], :img.shape[1]]
    return float((xs * w).sum() / w.sum()), float((ys * w).sum() / w.sum())


def test_distortion_moves_a_point_where_brown_conrady_puts_it() -> None:
    k1, k2, p1, p2 = -0.2, 0.05, 0.001, -0.002
    o = Optics(OpticalReality(distortion=(k1, k2, p1, p2, 0.0)), 160, 120, K)
    fx, fy, cx, cy = K
    # a blob at ideal pixel (130, 30), in the padded ideal render
    u0, v0 = 130.0, 30.0
    w, h = o.ideal_size
    ys, xs = np.mgrid[:h, :w]
    blob = 200 * np.exp(-((xs - u0 - o.pad) ** 2 + (ys - v0 - o.pad) ** 2) / (2 * 1.5 ** 2))
    out = o.apply(np.repeat(blob[:, :, None], 3, axis=2).astype(np.uint8))
    # the model by hand: normalized ideal point -> distorted point -> pixel
    x, y = (u0 - cx) / fx, (v0 - cy) / fy
    r2 = x * x + y * y
    radial = 1 + k1 * r2 + k2 * r2 * r2
    xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
    yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
    u, v = _centroid(out[:, :, 0])
    assert abs(u - (fx * xd + cx)) < 0.15 and abs(v - (fy * yd + cy)) < 0.15
    assert abs(u - u0) > 1.5  # the lens really moved it (1.64 px)


def test_barrel_lens_has_no_black_corners() -> None:
    o = Optics(OpticalReality(distortion=(-0.3, 0.05, 0.0, 0.0, 0.0)), 160, 120, K)
    # corner (0, 0): distorted (-0.530, -0.397), r_d = 0.662; r (1 - 0.3 r^2 + 0.05 r^4) = r_d
    # gives r = 0.797 (by hand, bisection): ideal u = 79.5 - 0.530 * 1.204 * 150 = -16.2 px,
    # so 17 px of render and one for the bilinear neighbour
    assert o.pad == 18
    out = o.apply(np.full((o.ideal_size[1], o.ideal_size[0], 3), 90, np.uint8))
    assert out.min() == 90 and out.shape == (120, 160, 3)


def test_sensor_noise_has_the_poisson_gaussian_variance() -> None:
    # 100 grey levels, 2550 e- at 255 (10 e- per level): shot variance 100 * 0.1 = 10 levels^2,
    # read noise 2 levels: 4; gain 2 amplifies both (x4); rounding adds 1/12
    o = Optics(OpticalReality(full_well_e=2550.0, noise_std=2.0, gain=2.0, seed=7), 320, 240, K)
    out = o.apply(np.full((240, 320, 3), 50, np.uint8)).astype(np.float64)
    # at 50 levels: shot 5, read 4 -> (5 + 4) * 4 = 36, + 1/12
    assert out.mean() == pytest.approx(100.0, abs=0.05)
    assert out.var() == pytest.approx(36.0 + 1 / 12, rel=0.02)
    again = Optics(OpticalReality(full_well_e=2550.0, noise_std=2.0, gain=2.0, seed=7),
                   320, 240, K).apply(np.full((240, 320, 3), 50, np.uint8))
    np.testing.assert_array_equal(again, out.astype(np.uint8))  # seeded
    sig = np.full((100, 100), 200.0, np.float32)
    shot_only = sensor_noise(sig, 2550.0, 0.0, np.random.default_rng(1))
    assert shot_only.var() == pytest.approx(20.0, rel=0.03)


def test_offset_pose_matches_transforms3d() -> None:
    xyz, rpy = (0.1, -0.2, 0.5), (0.3, -0.4, 1.2)
    t, r = (0.01, 0.02, -0.03), (0.02, -0.01, 0.05)
    new_xyz, new_rpy = offset_pose(xyz, rpy, t, r)
    rot = euler2mat(*rpy, axes='sxyz')
    np.testing.assert_allclose(new_xyz, np.asarray(xyz) + rot @ t, atol=1e-12)
    np.testing.assert_allclose(euler2mat(*new_rpy, axes='sxyz'), rot @ rotation_matrix(r),
                               atol=1e-12)
    np.testing.assert_allclose(rotation_matrix((0, 0, math.pi / 2)) @ [1, 0, 0], [0, 1, 0],
                               atol=1e-12)


SCENE = """
<mujoco>
  <visual><headlight active="0" ambient="0 0 0" diffuse="0 0 0" specular="0 0 0"/></visual>
  <worldbody>
    <light directional="true" pos="0 0 0" dir="0 0 1" diffuse="0.8 0.8 0.8"
           ambient="0 0 0" specular="0 0 0" castshadow="false"/>
    <geom name="ball" type="sphere" size="0.03" pos="0 0 1" rgba="1 0 0 1"/>
    <geom name="plate" type="box" size="3 3 0.01" pos="0 0 3" rgba="0 0.9 0 1"/>
  </worldbody>
</mujoco>
"""


def _render(spec: CameraSpec, lighting: tuple[float, float, tuple[float, ...]] | None = None
            ) -> np.ndarray:
    from simreal_ros.sim.mujoco.renderer import MujocoCameraRenderer
    model = mujoco.MjModel.from_xml_string(SCENE)
    r = MujocoCameraRenderer(model, [spec])
    try:
        if lighting is not None:
            r.set_lighting(lighting[0], lighting[1], rotation_matrix(lighting[2]))
        img = r.render(np.zeros(model.nq))[0]
    finally:
        r.close()
    assert img is not None
    return img


def _camera(xyz: tuple[float, float, float] = (0.0, 0.0, 0.0),
            rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> CameraSpec:
    # optical frame = world frame: looking along +z at the ball (1 m) and the plate (3 m)
    return CameraSpec('cam', 'world', xyz, rpy, 160, 120, 30.0, given_intrinsics=K)


def _ball(img: np.ndarray) -> tuple[float, float]:
    red = (img[:, :, 0] > 60) & (img[:, :, 1] < 40)
    return _centroid(red.astype(np.float64))


def test_pose_offset_moves_a_rendered_ball_the_predicted_pixels() -> None:
    u0, v0 = _ball(_render(_camera()))
    assert (u0, v0) == (pytest.approx(K[2], abs=0.1), pytest.approx(K[3], abs=0.1))
    # 2 cm right at 1 m depth: the ball moves -fx * 0.02 / 1 = -3 px
    xyz, rpy = offset_pose((0, 0, 0), (0, 0, 0), (0.02, 0.0, 0.0), (0, 0, 0))
    u, v = _ball(_render(_camera(xyz, rpy)))
    assert (u - u0, v - v0) == (pytest.approx(-3.0, abs=0.1), pytest.approx(0.0, abs=0.1))
    # 0.05 rad about the optical y axis (pan right): -fx * tan(0.05) = -7.506 px
    xyz, rpy = offset_pose((0, 0, 0), (0, 0, 0), (0, 0, 0), (0.0, 0.05, 0.0))
    u, v = _ball(_render(_camera(xyz, rpy)))
    assert (u - u0, v - v0) == (pytest.approx(-150 * math.tan(0.05), abs=0.15),
                                pytest.approx(0.0, abs=0.1))


def test_lighting_scales_and_turns_the_light() -> None:
    def plate(img: np.ndarray) -> float:
        return float(img[5:20, 5:20, 1].mean())  # a corner: the plate, not the ball

    lit = plate(_render(_camera()))
    assert lit == pytest.approx(0.8 * 0.9 * 255, abs=1.0)  # diffuse * colour, head-on
    assert plate(_render(_camera(), (0.5, 1.0, (0, 0, 0)))) == pytest.approx(lit / 2, abs=1.0)
    # the light turned 60 degrees: Lambert's cos(60) = 1/2 on the plate facing it
    turned = plate(_render(_camera(), (1.0, 1.0, (math.pi / 3, 0.0, 0.0))))
    assert turned == pytest.approx(lit / 2, abs=1.0)


GOOD = {'lighting': {'diffuse_scale': 0.7, 'ambient_scale': 1.3, 'rotation_rad': [0.2, 0, 0]},
        'pose_offset': {'translation_m': [0.004, -0.003, 0.006],
                        'rotation_rad': [0.01, -0.015, 0.005]},
        'full_well_e': 6000}


def test_visual_reality_keys(tmp_path: Path) -> None:
    path = tmp_path / 'r.yaml'
    path.write_text(yaml.safe_dump({'camera': GOOD}))
    o = OpticalReality.from_reality(path)
    assert (o.light_diffuse_scale, o.light_ambient_scale, o.light_rotation_rad) == \
        (0.7, 1.3, (0.2, 0.0, 0.0))
    assert (o.pose_translation_m, o.pose_rotation_rad, o.full_well_e) == \
        ((0.004, -0.003, 0.006), (0.01, -0.015, 0.005), 6000.0)
    assert not o.nominal_lighting and not o.nominal_pose
    shipped = OpticalReality.from_reality('worn_camera')
    assert not shipped.nominal_pose and not shipped.nominal_lighting
    assert shipped.full_well_e > 0


@pytest.mark.parametrize('section, value, key, expected', [
    ('pose_offset', {'translation_m': [0.1, 0.0]}, 'camera.pose_offset.translation_m',
     'a list of 3 numbers [x, y, z] (m, optical frame: x right, y down, z forward)'),
    ('pose_offset', {'rotation_rad': [0.0, 0.9, 0.0]}, 'camera.pose_offset.rotation_rad[1]',
     'a number <= 0.5'),
    ('pose_offset', {'rotate': [0, 0, 0]}, 'camera.pose_offset.rotate',
     'one of the known keys'),
    ('lighting', {'diffuse_scale': -0.1}, 'camera.lighting.diffuse_scale', 'a number >= 0.0'),
    ('lighting', {'rotation_rad': 'up'}, 'camera.lighting.rotation_rad',
     'a list of 3 numbers [rx, ry, rz] (a rotation vector in the world frame, rad)'),
    ('lighting', 0.5, 'camera.lighting', 'a mapping'),
    ('full_well_e', 0.5, 'camera.full_well_e', 'electrons >= 1 (0: no shot noise)'),
])
def test_bad_visual_reality(tmp_path: Path, section: str, value: object, key: str,
                            expected: str) -> None:
    path = tmp_path / 'r.yaml'
    path.write_text(yaml.safe_dump({'camera': {section: value}}))
    with pytest.raises(ConfigError) as info:
        OpticalReality.from_reality(path)
    assert (info.value.source, info.value.key) == (str(path), key)
    assert info.value.expected.startswith(expected)


def test_virtual_camera_renders_the_true_camera() -> None:
    from simreal_ros.core.robot import load_robot
    from simreal_ros.hardware.emulator.reality import VirtualArm
    from simreal_ros.hardware.emulator.virtual_camera import VirtualCamera
    robot = load_robot('simreal_arm')
    cam = robot.cameras[0]
    reality = OpticalReality.from_reality('worn_camera')
    vc = VirtualCamera(VirtualArm(robot), cam, reality)
    try:
        spec = vc._render_spec
        assert (spec.xyz, spec.rpy) == offset_pose(cam.xyz, cam.rpy, reality.pose_translation_m,
                                                   reality.pose_rotation_rad)
        # worn_camera's lens (k1 = -0.06) reaches 8.8 px beyond the pinhole's frame
        assert (spec.width, spec.height, vc.optics.pad) == (660, 500, 10)
        fx, fy, cx, cy = reality.intrinsics or cam.intrinsics()
        assert spec.intrinsics() == (fx, fy, cx + 10, cy + 10)
    finally:
        vc.close()
