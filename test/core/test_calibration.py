"""Joint calibration from and to LeRobot's files: the numbers, the round trip, every bad file."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from simreal_ros.core.calibration import (
    apply_calibration,
    calibration_text,
    from_lerobot,
    from_spec,
    joint_angles,
    load_calibration,
    to_lerobot,
)
from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError

NAMES = ['shoulder_pan', 'shoulder_lift', 'elbow_flex', 'wrist_flex', 'wrist_roll', 'gripper']
# a LeRobot calibration of an SO-101 follower as its calibrate step writes it: the offsets put
# the pose held at mid-range at 2047, the ranges are what the operator swept
LEROBOT = {
    'shoulder_pan': {'id': 1, 'drive_mode': 0, 'homing_offset': 14, 'range_min': 1002,
                     'range_max': 3093},
    'shoulder_lift': {'id': 2, 'drive_mode': 0, 'homing_offset': -1470, 'range_min': 836,
                      'range_max': 3206},
    'elbow_flex': {'id': 3, 'drive_mode': 1, 'homing_offset': 1254, 'range_min': 889,
                   'range_max': 3106},
    'wrist_flex': {'id': 4, 'drive_mode': 0, 'homing_offset': -2047, 'range_min': 857,
                   'range_max': 3163},
    'wrist_roll': {'id': 5, 'drive_mode': 0, 'homing_offset': 2047, 'range_min': 140,
                   'range_max': 3977},
    'gripper': {'id': 6, 'drive_mode': 0, 'homing_offset': 1105, 'range_min': 2031,
                'range_max': 3464},
}


def _spec(tmp_path: Path, family: str = 'feetech', names: list[str] = NAMES) -> RobotSpec:
    """An SO-101-like spec: the shipped arm's model with SO-101 names on a ``family`` bus."""
    src = resolve_named('robots', 'simreal_arm')
    data = yaml.safe_load(src.read_text(encoding='utf-8'))
    data['robot'] = 'so101_test'
    data['urdf'] = str(load_robot('simreal_arm').urdf)
    data['bus'] = {'family': family, 'baud': 1_000_000}
    for j, name in zip(data['joints'], names, strict=True):
        j['name'] = name
        j['home'] = 0.4 if name == 'shoulder_lift' else 0.0
    data['joints'][2]['direction'] = 1
    path = tmp_path / f'{family}_arm.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    return load_robot(path)


def _write(tmp_path: Path, data: Any, name: str = 'cal.json') -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding='utf-8')
    return path


@pytest.fixture
def robot(tmp_path: Path) -> RobotSpec:
    return _spec(tmp_path)


def test_lerobot_calibration_sets_zero_direction_and_range(tmp_path: Path,
                                                           robot: RobotSpec) -> None:
    cal = from_lerobot(_write(tmp_path, LEROBOT), robot)
    out = apply_calibration(robot, cal)
    k = 2 * math.pi / 4096
    pan = out.joints[0]
    # mid of [1002, 3093] = 2047.5: zero at tick 2047, the half tick in offset_rad
    assert pan.servo.zero_tick == 2047
    assert pan.servo.offset_rad == pytest.approx(-0.5 * k)
    assert pan.servo.ticks_to_rad(1002) == pytest.approx(-1045.5 * k)
    assert pan.limits.lower == pytest.approx(-1045.5 * k)
    assert pan.limits.upper == pytest.approx(1045.5 * k)
    elbow = out.joints[2]  # drive_mode 1 reverses the spec's direction
    assert elbow.servo.direction == -1
    assert elbow.servo.zero_tick == 1997  # mid of [889, 3106] = 1997.5
    assert elbow.servo.ticks_to_rad(889) == pytest.approx(1108.5 * k)
    assert elbow.servo.ticks_to_rad(3106) == pytest.approx(-1108.5 * k)
    roll = out.joints[4]  # a swept range wider than the spec's limits keeps the spec's
    assert (roll.limits.lower, roll.limits.upper) == (-1.8, 1.8)
    # LeRobot's own degrees mode reads the same angles (to its 4095 vs 4096 scale)
    ticks = {n: (c['range_min'] + 3 * c['range_max']) // 4 for n, c in LEROBOT.items()}
    lerobot_rad = joint_angles(cal, ticks)
    for js in out.joints:
        assert js.servo.ticks_to_rad(ticks[js.name]) == pytest.approx(
            lerobot_rad[js.name] * 4095 / 4096, abs=1e-12)


def test_round_trip_through_the_calibration_file_is_exact(tmp_path: Path,
                                                         robot: RobotSpec) -> None:
    cal = from_lerobot(_write(tmp_path, LEROBOT), robot)
    path = tmp_path / 'cal.yaml'
    path.write_text(calibration_text(cal, 'test'), encoding='utf-8')
    assert to_lerobot(load_calibration(path, robot)) == LEROBOT


def test_export_from_the_spec_gives_its_limits_as_range(tmp_path: Path,
                                                        robot: RobotSpec) -> None:
    got = to_lerobot(from_spec(robot))
    # base_yaw's limits +-2.7 rad around tick 2048: 2048 -+ 1760.2, rounded inward
    assert got['shoulder_pan'] == {'id': 1, 'drive_mode': 0, 'homing_offset': 0,
                                   'range_min': 288, 'range_max': 3808}


def test_cli_round_trip(tmp_path: Path, robot: RobotSpec, simreal_cli: Any) -> None:
    src = _write(tmp_path, LEROBOT)
    cal = tmp_path / 'so101.yaml'
    r = simreal_cli('calibrate', '--from-lerobot', str(src), '--robot', str(robot.source),
                    '--out', str(cal))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == f'wrote {cal}: 6 joints of so101_test'
    back = tmp_path / 'back.json'
    r = simreal_cli('calibrate', '--to-lerobot', '--robot', str(robot.source),
                    '--calibration', str(cal), '--out', str(back))
    assert r.returncode == 0, r.stderr
    assert json.loads(back.read_text(encoding='utf-8')) == LEROBOT


def _bad(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(LEROBOT)
    for key, value in changes.items():
        motor, field = key.split('__')
        data[motor][field] = value
    return data


BAD = [
    (_bad(wrist_flex__homing_offset=-2048), 'wrist_flex.homing_offset',
     'an offset within +-2047 ticks'),
    (_bad(shoulder_pan__homing_offset=3100), 'shoulder_pan.homing_offset',
     'an offset within +-2047 ticks'),
    (_bad(gripper__id=7), 'gripper.id', 'servo id 6'),
    (_bad(elbow_flex__drive_mode=2), 'elbow_flex.drive_mode', '0 or 1'),
    (_bad(shoulder_lift__range_max=4096), 'shoulder_lift.range_max',
     'a position within [0, 4095] ticks'),
    (_bad(shoulder_lift__range_min=-1), 'shoulder_lift.range_min',
     'a position within [0, 4095] ticks'),
    (_bad(wrist_roll__range_max=140), 'wrist_roll.range_max', 'a position > range_min (140)'),
    (_bad(wrist_roll__range_max=True), 'wrist_roll.range_max', 'an integer'),
    (_bad(wrist_roll__range_max=3000.5), 'wrist_roll.range_max', 'an integer'),
]


@pytest.mark.parametrize('data, key, expected', BAD, ids=[c[1] + str(i) for i, c in
                                                          enumerate(BAD)])
def test_bad_values_are_one_error_naming_the_motor(tmp_path: Path, robot: RobotSpec,
                                                   data: Any, key: str,
                                                   expected: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        from_lerobot(path, robot)
    assert str(info.value).startswith(f'{path}: {key}: expected {expected}')


def test_a_file_of_another_arm_names_both_joint_lists(tmp_path: Path,
                                                      robot: RobotSpec) -> None:
    koch = {f'joint{i}': m for i, m in enumerate(LEROBOT.values())}
    path = _write(tmp_path, koch)
    with pytest.raises(ConfigError) as info:
        from_lerobot(path, robot)
    assert str(info.value) == (
        f'{path}: motors: expected the joints of so101_test (shoulder_pan, shoulder_lift, '
        f'elbow_flex, wrist_flex, wrist_roll, gripper), got '
        f"'joint0, joint1, joint2, joint3, joint4, joint5'")


def test_missing_field_and_broken_files(tmp_path: Path, robot: RobotSpec) -> None:
    data = copy.deepcopy(LEROBOT)
    del data['gripper']['range_min']
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=r'gripper\.range_min: expected this key to be '
                                          r'present, got .missing.$'):
        from_lerobot(path, robot)
    path.write_bytes(b'\x80PK\x03\x04')
    with pytest.raises(ConfigError, match='expected a LeRobot calibration file'):
        from_lerobot(path, robot)
    path.write_text('[1, 2]', encoding='utf-8')
    with pytest.raises(ConfigError, match="expected a JSON object of motors, got 'list'"):
        from_lerobot(path, robot)
    with pytest.raises(ConfigError, match='no such file'):
        from_lerobot(tmp_path / 'none.json', robot)


def test_dynamixel_offsets_may_exceed_the_feetech_register(tmp_path: Path) -> None:
    koch = _spec(tmp_path, family='dynamixel')
    cal = from_lerobot(_write(tmp_path, _bad(shoulder_pan__homing_offset=-3000)), koch)
    assert cal.joints[0].homing_offset == -3000
    with pytest.raises(ConfigError, match='within \\+-1044479 ticks'):
        from_lerobot(_write(tmp_path, _bad(shoulder_pan__homing_offset=1_044_480)), koch)


def test_a_range_that_leaves_home_outside_is_refused(tmp_path: Path,
                                                     robot: RobotSpec) -> None:
    # shoulder_lift's home is 0.4 rad; a sweep of +-50 ticks (+-0.077 rad) cannot hold it
    cal = from_lerobot(_write(tmp_path, _bad(shoulder_lift__range_min=2000,
                                              shoulder_lift__range_max=2100)), robot)
    with pytest.raises(ConfigError) as info:
        apply_calibration(robot, cal)
    assert str(info.value) == ('calibration of so101_test: shoulder_lift.range: expected a '
                               "range holding home (0.4 rad), got '[-0.077, 0.077] rad'")


def test_a_calibration_file_of_another_robot_is_refused(tmp_path: Path,
                                                        robot: RobotSpec) -> None:
    cal = from_lerobot(_write(tmp_path, LEROBOT), robot)
    path = tmp_path / 'cal.yaml'
    path.write_text(calibration_text(cal, 'test').replace('so101_test', 'koch'),
                    encoding='utf-8')
    with pytest.raises(ConfigError, match=r"robot: expected so101_test \(the robot being "
                                          r"calibrated\), got 'koch'"):
        load_calibration(path, robot)


def test_cli_bad_file_is_one_error_line(tmp_path: Path, robot: RobotSpec,
                                        simreal_cli: Any) -> None:
    src = _write(tmp_path, _bad(wrist_flex__homing_offset=2600))
    r = simreal_cli('calibrate', '--from-lerobot', str(src), '--robot', str(robot.source),
                    '--out', str(tmp_path / 'cal.yaml'))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f'simreal calibrate: error: {src}: wrist_flex.homing_offset: expected an offset within '
        f'+-2047 ticks (the largest the feetech Homing Offset register holds; recalibrate with '
        f'the offsets reset to 0 first), got 2600']
    assert not (tmp_path / 'cal.yaml').exists()
