"""The robot spec's floating base (``base:``), IMU noise and cmd_vel (no ROS, no engine)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
import re
from typing import Any

import numpy as np
import pytest
import yaml

from simreal_ros.core.legged import ImuNoise, velocity_command
from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError

SPEC_FILE = resolve_named('robots', 'simreal_quad')
G = 9.81
ROBOT = load_robot('simreal_quad')
FEET = ['fl_foot', 'fr_foot', 'rl_foot', 'rr_foot']


def _shipped() -> dict[str, Any]:
    data = yaml.safe_load(SPEC_FILE.read_text(encoding='utf-8'))
    data['model'] = str(load_robot('simreal_quad').model)
    return data


def _fails(tmp_path: Path, data: dict[str, Any], key: str, expected: str, got: Any) -> None:
    path = tmp_path / 'quad.yaml'
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
    with pytest.raises(ConfigError, match=re.escape(f'{path}: {key}: expected {expected}')
                       ) as info:
        load_robot(path)
    assert (info.value.source, info.value.key, info.value.got) == (str(path), key, got)


def test_the_quadruped_spec() -> None:
    robot = load_robot('simreal_quad')
    assert robot.floating and robot.base is not None
    assert robot.base.feet == tuple(FEET)
    assert robot.base.height_m == 0.165
    assert robot.n == 12
    assert robot.joint_names[:3] == ['fl_hip_abd', 'fl_hip_flex', 'fl_knee']
    assert [j.servo.servo_id for j in robot.joints] == list(range(1, 13))
    assert robot.bus_family == 'feetech' and robot.joints[0].servo.model == 'STS3215'
    assert robot.imu is not None and robot.imu.link == 'base_link'
    assert robot.imu.frame_id == 'imu_link'


def test_the_arms_have_a_fixed_base() -> None:
    assert not load_robot('simreal_arm').floating


def test_imu_noise_and_bias_keys(tmp_path: Path) -> None:
    data = _shipped()
    data['base']['imu'].update(gyro_noise_std_rad_s=0.01, accel_noise_std_m_s2=0.05,
                               orientation_noise_std_rad=0.002,
                               gyro_bias_rad_s=[0.001, -0.002, 0.003],
                               accel_bias_m_s2=[0.1, 0.0, -0.1])
    path = tmp_path / 'quad.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    imu = load_robot(path).imu
    assert imu is not None
    assert (imu.gyro_noise_std_rad_s, imu.accel_noise_std_m_s2,
            imu.orientation_noise_std_rad) == (0.01, 0.05, 0.002)
    assert imu.gyro_bias_rad_s == (0.001, -0.002, 0.003)
    assert imu.accel_bias_m_s2 == (0.1, 0.0, -0.1)


def test_a_fixed_base_type_is_the_default(tmp_path: Path) -> None:
    data = _shipped()
    data['base'] = {'type': 'fixed'}
    path = tmp_path / 'quad.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    assert not load_robot(path).floating


@pytest.mark.parametrize('change, key, expected, got', [
    (lambda b: b.update(type='wheeled'), 'base.type', 'one of fixed, floating', 'wheeled'),
    (lambda b: b.pop('height_m'), 'base.height_m', 'this key to be present', 'missing'),
    (lambda b: b.update(height_m=-0.1), 'base.height_m', 'a number > 0', -0.1),
    (lambda b: b.update(feet=[]), 'base.feet', 'a non-empty list of foot link names', []),
    (lambda b: b.update(feet='fl_foot'), 'base.feet', 'a non-empty list of foot link names',
     'fl_foot'),
    (lambda b: b.update(feet=['fl_foot', 'fl_foot']), 'base.feet[1]',
     'a foot link not listed before', 'fl_foot'),
    (lambda b: b.update(feet=['fl_foot', 'fl_paw']), 'base.feet[1]',
     'a link of simreal_quad.urdf', 'fl_paw'),
    (lambda b: b.pop('imu'), 'base.imu', 'the base IMU: a mapping with link', None),
    (lambda b: b['imu'].update(link='tail'), 'base.imu.link', 'a link of simreal_quad.urdf',
     'tail'),
    (lambda b: b['imu'].update(gyro_noise_std_rad_s=-1.0), 'base.imu.gyro_noise_std_rad_s',
     'a number >= 0', -1.0),
    (lambda b: b['imu'].update(accel_bias_m_s2=[0.1, 0.2]), 'base.imu.accel_bias_m_s2',
     'a list of 3 numbers', [0.1, 0.2]),
])
def test_bad_base_sections_name_file_key_expected_and_got(tmp_path: Path, change: Any, key: str,
                                                          expected: str, got: Any) -> None:
    data = _shipped()
    change(data['base'])
    _fails(tmp_path, data, key, expected, got)


def test_an_unknown_base_key_is_refused(tmp_path: Path) -> None:
    data = _shipped()
    data['base']['height'] = 0.2  # a typo of height_m
    path = tmp_path / 'quad.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    assert (info.value.source, info.value.key) == (str(path), 'base.height')


def test_a_top_level_imu_next_to_a_floating_base_is_refused(tmp_path: Path) -> None:
    data = _shipped()
    data['imu'] = {'link': 'base_link'}
    _fails(tmp_path, data, 'imu', 'no top-level imu with a floating base (its IMU is base.imu)',
           'both imu and base.imu')


def test_imu_noise_and_bias() -> None:
    assert ROBOT.imu is not None
    perfect = ImuNoise(ROBOT.imu)
    q, g, a = np.array([1.0, 0, 0, 0]), np.array([0.1, 0.2, 0.3]), np.array([0, 0, G])
    assert perfect.apply(q, g, a) == (q, g, a)
    assert perfect.covariances() == ([0.0] * 9,) * 3
    spec = replace(ROBOT.imu, gyro_noise_std_rad_s=0.02, accel_noise_std_m_s2=0.1,
                   gyro_bias_rad_s=(0.01, -0.02, 0.03), accel_bias_m_s2=(0.2, 0.0, -0.1))
    noisy = ImuNoise(spec, seed=3)
    readings = [noisy.apply(q, g, a) for _ in range(5000)]
    gs_arr = np.array([r[1] for r in readings])
    acc_arr = np.array([r[2] for r in readings])
    # 5000 samples: the mean's standard error is 1.4 % of sigma, the std's 1 %
    np.testing.assert_allclose(gs_arr.mean(axis=0), g + spec.gyro_bias_rad_s, atol=0.0015)
    np.testing.assert_allclose(acc_arr.mean(axis=0), a + spec.accel_bias_m_s2, atol=0.007)
    np.testing.assert_allclose(gs_arr.std(axis=0), 0.02, rtol=0.05)
    np.testing.assert_allclose(acc_arr.std(axis=0), 0.1, rtol=0.05)
    assert noisy.covariances()[1][0] == pytest.approx(0.02 ** 2)
    again = ImuNoise(spec, seed=3)
    np.testing.assert_array_equal(again.apply(q, g, a)[1], gs_arr[0])  # seeded: repeatable


def test_velocity_commands_must_be_finite() -> None:
    cmd = velocity_command((0.2, 0.0, 0.0), (0.0, 0.0, 0.5), 7)
    assert (cmd.linear_m_s, cmd.angular_rad_s, cmd.stamp_ns) == ((0.2, 0.0, 0.0),
                                                                  (0.0, 0.0, 0.5), 7)
    with pytest.raises(ValueError, match=r'cmd_vel contains NaN or inf: linear \(nan, 0.0, '
                       r'0.0\), angular \(0.0, 0.0, 0.5\)'):
        velocity_command((float('nan'), 0.0, 0.0), (0.0, 0.0, 0.5), 7)
