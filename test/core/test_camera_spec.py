"""The ``cameras:`` list of the robot spec, calibration files and the optical reality."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from simreal_ros.core.camera_info import (
    CameraDriverConfig,
    CameraInfoData,
    OpticalReality,
    camera_info_for,
    load_calibration,
)
from simreal_ros.core.robot import CameraSpec, load_robot
from simreal_ros.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SPEC_FILE = REPO / 'config' / 'robots' / 'simreal_arm.yaml'
URDF_FILE = REPO / 'urdf' / 'simreal_arm.urdf'


def _spec_with(tmp_path: Path, camera: Any, *, key: str = 'cameras') -> Path:
    data = yaml.safe_load(SPEC_FILE.read_text(encoding='utf-8'))
    data['urdf'] = str(URDF_FILE)
    data[key] = camera
    path = tmp_path / 'cam_arm.yaml'
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
    return path


def _shipped_camera() -> dict[str, Any]:
    data = yaml.safe_load(SPEC_FILE.read_text(encoding='utf-8'))
    return copy.deepcopy(data['cameras'][0])


def test_shipped_camera() -> None:
    spec = load_robot('simreal_arm')
    assert len(spec.cameras) == 1
    cam = spec.cameras[0]
    assert isinstance(cam, CameraSpec)
    assert (cam.name, cam.parent, cam.width, cam.height, cam.fps_hz, cam.encoding) == (
        'camera', 'world', 640, 480, 30.0, 'rgb8')
    assert cam.frame_id == 'camera_optical_frame'
    assert isinstance(cam.xyz, tuple) and len(cam.xyz) == 3
    assert isinstance(cam.rpy, tuple) and all(isinstance(v, float) for v in cam.rpy)
    fx, fy, cx, cy = cam.intrinsics()
    # fovy 45 deg over 480 rows: fy = 240 / tan(22.5 deg)
    assert fy == pytest.approx(579.4112549695428)
    assert (fx, cx, cy) == (fy, 319.5, 239.5)
    assert cam.period_ns == 33_333_333


def test_no_cameras_key_gives_empty_tuple(tmp_path: Path) -> None:
    data = yaml.safe_load(SPEC_FILE.read_text(encoding='utf-8'))
    data['urdf'] = str(URDF_FILE)
    del data['cameras']
    path = tmp_path / 'nocam.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    assert load_robot(path).cameras == ()


def test_given_intrinsics_and_link_parent(tmp_path: Path) -> None:
    cam = _shipped_camera()
    del cam['fovy_deg']
    cam.update(intrinsics={'fx': 500.0, 'fy': 510.0, 'cx': 300.0, 'cy': 200.0},
               parent='wrist_flange_link', device=0, name='wrist')
    c = load_robot(_spec_with(tmp_path, [cam])).cameras[0]
    assert c.intrinsics() == (500.0, 510.0, 300.0, 200.0)
    assert (c.parent, c.device, c.frame_id) == ('wrist_flange_link', '0', 'wrist_optical_frame')


BAD = [
    ('name', 'camera 1', 'cameras[0].name', 'a ROS name'),
    ('parent', 'no_such_link', 'cameras[0].parent', "'world' or a link of simreal_arm.urdf"),
    ('xyz', [0.0, 1.0], 'cameras[0].xyz', 'a list of 3 numbers'),
    ('xyz', [0.0, 'a', 1.0], 'cameras[0].xyz[1]', 'a number'),
    ('rpy', 'up', 'cameras[0].rpy', 'a list of 3 numbers'),
    ('width', 0, 'cameras[0].width', 'an integer in [1, 8192]'),
    ('height', 480.5, 'cameras[0].height', 'an integer'),
    ('fps_hz', 0, 'cameras[0].fps_hz', 'a number > 0'),
    ('fovy_deg', 200, 'cameras[0].fovy_deg', 'a number <= 179.0'),
    ('encoding', 'yuv422', 'cameras[0].encoding', "one of ['rgb8', 'bgr8', 'mono8']"),
    ('device', [0], 'cameras[0].device', 'a V4L2 index or path'),
    ('calibration', 'missing.yaml', 'cameras[0].calibration', 'a path to an existing'),
    ('exposure', 3, 'cameras[0].exposure', 'one of the known keys'),
    ('intrinsics', {'fx': 1, 'fy': 1, 'cx': 1, 'cy': 1}, 'cameras[0].fovy_deg',
     'exactly one of fovy_deg and intrinsics'),
]


@pytest.mark.parametrize(('key', 'value', 'where', 'expected'), BAD,
                         ids=[f'{b[0]}={b[1]!r}' for b in BAD])
def test_malformed_camera_key(tmp_path: Path, key: str, value: Any, where: str,
                              expected: str) -> None:
    cam = _shipped_camera()
    cam[key] = value
    path = _spec_with(tmp_path, [cam])
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    err = info.value
    assert (err.source, err.key) == (str(path), where)
    assert err.expected.startswith(expected)
    assert str(err).startswith(f'{path}: {where}: expected {expected}')


def test_missing_and_duplicate_and_bad_intrinsics(tmp_path: Path) -> None:
    cam = _shipped_camera()
    del cam['width']
    with pytest.raises(ConfigError, match=r'cameras\[0\]\.width: expected this key'):
        load_robot(_spec_with(tmp_path, [cam]))
    cam = _shipped_camera()
    with pytest.raises(ConfigError, match=r'cameras\[1\]\.name: expected a camera name not '
                       r"used before, got 'camera'"):
        load_robot(_spec_with(tmp_path, [cam, cam]))
    cam = _shipped_camera()
    del cam['fovy_deg']
    with pytest.raises(ConfigError, match=r'cameras\[0\]\.fovy_deg: expected exactly one of '
                       r"fovy_deg and intrinsics, got 'neither'"):
        load_robot(_spec_with(tmp_path, [cam]))
    cam['intrinsics'] = {'fx': -1.0, 'fy': 1.0, 'cx': 1.0, 'cy': 1.0}
    with pytest.raises(ConfigError, match=r'cameras\[0\]\.intrinsics\.fx: expected a number > 0'):
        load_robot(_spec_with(tmp_path, [cam]))
    with pytest.raises(ConfigError, match=r"cameras: expected a list, got 'camera'"):
        load_robot(_spec_with(tmp_path, 'camera'))
    with pytest.raises(ConfigError, match=r'cameras\[0\]: expected a mapping'):
        load_robot(_spec_with(tmp_path, ['camera']))


OST = """image_width: 640
image_height: 480
camera_name: camera
camera_matrix:
  rows: 3
  cols: 3
  data: [600.5, 0, 321.2, 0, 601.5, 242.8, 0, 0, 1]
distortion_model: plumb_bob
distortion_coefficients:
  rows: 1
  cols: 5
  data: [-0.12, 0.03, 0.001, -0.0005, 0]
rectification_matrix:
  rows: 3
  cols: 3
  data: [1, 0, 0, 0, 1, 0, 0, 0, 1]
projection_matrix:
  rows: 3
  cols: 4
  data: [590.1, 0, 320.9, 0, 0, 592.2, 242.1, 0, 0, 0, 1, 0]
"""


def test_calibration_file_in_camera_calibration_parsers_format(tmp_path: Path) -> None:
    path = tmp_path / 'ost.yaml'
    path.write_text(OST, encoding='utf-8')
    info = load_calibration(path)
    assert (info.width, info.height, info.distortion_model) == (640, 480, 'plumb_bob')
    assert info.k == (600.5, 0.0, 321.2, 0.0, 601.5, 242.8, 0.0, 0.0, 1.0)
    assert info.d == (-0.12, 0.03, 0.001, -0.0005, 0.0)
    assert info.p[0] == 590.1 and len(info.p) == 12
    cam = load_robot('simreal_arm').cameras[0]
    assert camera_info_for(cam, str(path)) == info
    ideal = camera_info_for(cam)
    assert ideal == CameraInfoData.ideal(cam)
    assert ideal.k[0] == ideal.p[0] == cam.intrinsics()[0]
    half = info.scaled_to(320, 240)
    assert half.k[0] == pytest.approx(300.25) and half.k[2] == pytest.approx(160.35)


@pytest.mark.parametrize(('text', 'key', 'expected'), [
    (OST.replace('cols: 5', 'cols: 3'), 'distortion_coefficients.cols', 'a 1x4 or 1x5'),
    (OST.replace('0.001, -0.0005, 0]', '0.001]'), 'distortion_coefficients.data', '5 numbers'),
    (OST.replace('image_width: 640', 'image_width: wide'), 'image_width', 'an integer'),
    (OST.replace('plumb_bob', 'fisheye'), 'distortion_model', 'one of'),
    (OST.replace('data: [600.5', 'data: [0'), 'camera_matrix.data', 'fx (data[0])'),
    (OST + 'extra: 1\n', 'extra', 'one of the known keys'),
])
def test_bad_calibration_file(tmp_path: Path, text: str, key: str, expected: str) -> None:
    path = tmp_path / 'ost.yaml'
    path.write_text(text, encoding='utf-8')
    with pytest.raises(ConfigError) as info:
        load_calibration(path)
    assert (info.value.source, info.value.key) == (str(path), key)
    assert info.value.expected.startswith(expected)


def test_optical_reality(tmp_path: Path) -> None:
    path = tmp_path / 'reality.yaml'
    path.write_text(yaml.safe_dump({'robot': 'simreal_arm', 'camera': {
        'gain': 1.3, 'white_balance': [1.1, 1.0, 0.9], 'noise_std': 2.0, 'blur_sigma_px': 0.8,
        'distortion': [-0.1, 0.02, 0.0, 0.0, 0.0], 'latency_s': 0.04,
        'intrinsics': {'fx': 590.0, 'fy': 592.0, 'cx': 322.0, 'cy': 236.0}}}))
    o = OpticalReality.from_reality(path)
    assert (o.gain, o.white_balance, o.latency_s) == (1.3, (1.1, 1.0, 0.9), 0.04)
    assert o.intrinsics == (590.0, 592.0, 322.0, 236.0)
    from simreal_ros.core.dynamics import load_overlay
    assert load_overlay(path).robot == 'simreal_arm'  # the sim reads the same file
    path.write_text(yaml.safe_dump({'camera': {'white_balance': [1, 1]}}))
    with pytest.raises(ConfigError, match=r'camera\.white_balance: expected a list of 3'):
        OpticalReality.from_reality(path)
    path.write_text(yaml.safe_dump({'camera': {'gian': 1.0}}))
    with pytest.raises(ConfigError, match=r'camera\.gian: expected one of the known keys'):
        OpticalReality.from_reality(path)


def test_driver_config() -> None:
    assert CameraDriverConfig().capture_latency_s == -1.0
    for key, value, expected in (('reconnect_period_s', 0.0, 'a number of seconds > 0'),
                                 ('capture_latency_s', -0.5, 'a number >= 0 or -1'),
                                 ('width', -1, 'pixels >= 0')):
        with pytest.raises(ConfigError) as info:
            CameraDriverConfig.from_mapping({key: value})
        assert info.value.key == key and info.value.expected.startswith(expected)
    with pytest.raises(ConfigError, match='camera_driver: fps: expected one of'):
        CameraDriverConfig.from_mapping({'fps': 3.0})
