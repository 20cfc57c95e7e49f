"""Tests of the robot spec loader (config/robots/*.yaml): good path and every kind of bad file."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
import re
import shutil
from typing import Any

import numpy as np
import pytest
import yaml

from simreal_ros.core.robot import JointLimits, RobotSpec, ServoSpec, load_robot
from simreal_ros.errors import ConfigError, SimrealError

REPO = Path(__file__).resolve().parents[2]
SPEC_FILE = REPO / 'config' / 'robots' / 'simreal_arm.yaml'
URDF_FILE = REPO / 'urdf' / 'simreal_arm.urdf'

JOINT_NAMES = ['base_yaw', 'shoulder_pitch', 'elbow_pitch', 'forearm_roll', 'wrist_pitch',
               'wrist_roll']
TWO_PI = 2 * math.pi


# ---------------------------------------------------------------------------------------------
# helpers


def _shipped() -> dict[str, Any]:
    """The shipped spec as plain data, with ``urdf`` made absolute so it resolves anywhere."""
    data = yaml.safe_load(SPEC_FILE.read_text(encoding='utf-8'))
    data['urdf'] = str(URDF_FILE)
    return data


def _write(tmp_path: Path, data: Any, name: str = 'bad_arm.yaml') -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
    return path


def _set(data: Any, keys: tuple[Any, ...], value: Any) -> None:
    for k in keys[:-1]:
        data = data[k]
    data[keys[-1]] = value


def _delete(data: Any, keys: tuple[Any, ...]) -> None:
    for k in keys[:-1]:
        data = data[k]
    del data[keys[-1]]


def _fails(path: Path, key: str, expected: str) -> ConfigError:
    """Load ``path``; it must fail with a message naming the file, the key and the expectation."""
    where = f'{path}: {key}' if key else str(path)
    with pytest.raises(ConfigError, match=re.escape(f'{where}: expected {expected}')) as info:
        load_robot(path)
    assert info.value.source == str(path)
    assert info.value.key == key
    assert info.value.expected.startswith(expected)
    return info.value


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    return load_robot('simreal_arm')


# ---------------------------------------------------------------------------------------------
# good path


def test_shipped_spec_basics(robot: RobotSpec) -> None:
    assert robot.name == 'simreal_arm'
    assert robot.source.resolve() == SPEC_FILE.resolve()
    assert robot.urdf.is_file()
    assert robot.urdf.resolve() == URDF_FILE.resolve()
    assert robot.base_frame == 'base_link'
    assert robot.tool_frame == 'tool0'
    assert robot.timestep_s == pytest.approx(0.001)
    assert robot.bus_protocol == 2
    assert robot.bus_baud == 1_000_000
    assert robot.imu is not None
    assert robot.imu.link == 'wrist_flange_link'
    assert robot.imu.frame_id == 'imu_link'
    assert robot.imu.position == (0.0, 0.0, 0.015)


def test_joint_order(robot: RobotSpec) -> None:
    assert robot.joint_names == JOINT_NAMES
    assert robot.n == 6
    assert [robot.index(n) for n in JOINT_NAMES] == list(range(6))
    with pytest.raises(KeyError):
        robot.index('gripper')


def test_home_within_limits(robot: RobotSpec) -> None:
    assert np.all(robot.lower <= robot.home)
    assert np.all(robot.home <= robot.upper)
    assert np.all(robot.lower < robot.upper)


def test_arrays(robot: RobotSpec) -> None:
    for arr in (robot.home, robot.lower, robot.upper, robot.velocity_limit, robot.effort_limit):
        assert isinstance(arr, np.ndarray)
        assert arr.dtype == np.float64
        assert arr.shape == (6,)
    np.testing.assert_allclose(robot.home, [0.0, 0.4, 1.2, 0.0, 0.3, 0.0])
    np.testing.assert_allclose(robot.lower, [-2.7, -1.7, -2.1, -2.7, -1.8, -2.7])
    np.testing.assert_allclose(robot.upper, [2.7, 1.7, 2.1, 2.7, 1.8, 2.7])
    np.testing.assert_allclose(robot.velocity_limit, [4.5] * 6)
    np.testing.assert_allclose(robot.effort_limit, [4.0] * 6)
    np.testing.assert_allclose(robot.array('kp'), [20.0, 25.0, 25.0, 12.0, 12.0, 8.0])
    np.testing.assert_allclose(robot.array('kd'), [0.6, 0.7, 0.7, 0.35, 0.35, 0.25])
    np.testing.assert_allclose(robot.array('armature'),
                               [0.012, 0.012, 0.012, 0.010, 0.010, 0.008])


def test_servos_and_defaults(robot: RobotSpec) -> None:
    assert [j.servo.servo_id for j in robot.joints] == [1, 2, 3, 4, 5, 6]
    assert [j.servo.direction for j in robot.joints] == [1, 1, -1, 1, 1, 1]
    for j in robot.joints:
        assert j.servo.model == 'XM430-W350'
        assert j.servo.model_number == 1020
        assert j.servo.ticks_per_rev == 4096
        assert j.servo.zero_tick == 2048
        assert j.servo.torque_per_amp == pytest.approx(1.78)
        assert j.servo.offset_rad == 0.0


def test_spec_is_frozen(robot: RobotSpec) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        robot.name = 'other'  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        robot.joints[0].limits.lower = -10.0  # type: ignore[misc]


def test_load_by_path_equals_load_by_name(robot: RobotSpec) -> None:
    for arg in (SPEC_FILE, str(SPEC_FILE)):
        by_path = load_robot(arg)
        assert by_path.joints == robot.joints
        assert by_path.urdf.resolve() == robot.urdf.resolve()


def test_load_copy_with_absolute_urdf(tmp_path: Path, robot: RobotSpec) -> None:
    path = _write(tmp_path, _shipped(), 'my_arm.yaml')
    spec = load_robot(path)
    assert spec.source == path
    assert spec.urdf == URDF_FILE
    assert spec.joints == robot.joints


def test_load_copy_with_urdf_next_to_the_file(tmp_path: Path) -> None:
    shutil.copy(URDF_FILE, tmp_path / 'arm.urdf')
    data = _shipped()
    data['urdf'] = 'arm.urdf'
    spec = load_robot(_write(tmp_path, data, 'my_arm.yaml'))
    assert spec.urdf == tmp_path / 'arm.urdf'


def test_minimal_spec_uses_defaults(tmp_path: Path) -> None:
    data = {'robot': 'mini', 'urdf': str(URDF_FILE), 'joints': [
        {'name': 'j1', 'servo_id': 7, 'limits': {'lower': -1.0, 'upper': 1.0,
                                                 'velocity': 2.0, 'effort': 1.0},
         'gains': {'kp': 3.0, 'kd': 0.0}}]}
    spec = load_robot(_write(tmp_path, data, 'mini.yaml'))
    assert spec.name == 'mini'
    assert spec.joint_names == ['j1']
    assert spec.base_frame == 'base_link'
    assert spec.tool_frame == 'tool0'
    assert spec.timestep_s == pytest.approx(0.001)
    assert spec.imu is None
    assert spec.bus_protocol == 2
    assert spec.bus_baud == 1_000_000
    j = spec.joints[0]
    assert j.home == 0.0
    assert j.armature == 0.0
    assert j.kd == 0.0
    assert j.servo.direction == 1
    assert j.servo.offset_rad == 0.0
    assert j.servo.ticks_per_rev == 4096
    assert j.servo.zero_tick == 2048
    assert j.servo.model == 'XM430-W350'


def test_servo_defaults_apply_and_joint_overrides_win(tmp_path: Path) -> None:
    data = _shipped()
    data['servo_defaults'] = {'ticks_per_rev': 1024, 'model': 'AX-12A', 'model_number': 12,
                              'torque_per_amp': 1.0}
    data['joints'][1]['ticks_per_rev'] = 4096
    data['joints'][1]['zero_tick'] = 100
    spec = load_robot(_write(tmp_path, data))
    s0, s1 = spec.joints[0].servo, spec.joints[1].servo
    assert (s0.ticks_per_rev, s0.zero_tick, s0.model, s0.model_number) == (1024, 512, 'AX-12A',
                                                                             12)
    assert (s1.ticks_per_rev, s1.zero_tick) == (4096, 100)


@pytest.mark.parametrize('value', [None, 'absent'])
def test_imu_is_optional(tmp_path: Path, value: str | None) -> None:
    data = _shipped()
    if value is None:
        data['imu'] = None
    else:
        del data['imu']
    assert load_robot(_write(tmp_path, data)).imu is None


# ---------------------------------------------------------------------------------------------
# ServoSpec ticks <-> rad


def _servo(direction: int, offset: float, zero: int = 2048, ticks: int = 4096) -> ServoSpec:
    return ServoSpec(servo_id=1, model='XM430-W350', model_number=1020, ticks_per_rev=ticks,
                     zero_tick=zero, direction=direction, offset_rad=offset,
                     torque_per_amp=1.78)


def test_servo_known_values() -> None:
    s = _servo(1, 0.0)
    assert s.ticks_to_rad(2048) == 0.0
    assert s.ticks_to_rad(2048 + 1024) == pytest.approx(math.pi / 2)
    assert s.rad_to_ticks(math.pi) == 4096
    assert s.rad_to_ticks(-math.pi) == 0
    r = _servo(-1, 0.25)
    assert r.rad_to_ticks(0.25) == 2048
    assert r.ticks_to_rad(2048) == pytest.approx(0.25)
    assert r.ticks_to_rad(2048 + 1024) == pytest.approx(0.25 - math.pi / 2)
    assert r.rad_to_ticks(0.25 + math.pi / 2) == 2048 - 1024


@pytest.mark.parametrize('direction', [1, -1])
@pytest.mark.parametrize('offset', [0.0, 0.25, -1.3])
@pytest.mark.parametrize('zero', [2048, 0, 1000])
def test_servo_round_trip(direction: int, offset: float, zero: int) -> None:
    s = _servo(direction, offset, zero)
    half_tick = math.pi / s.ticks_per_rev
    for rad in np.linspace(-2.9, 2.9, 97):
        back = s.ticks_to_rad(s.rad_to_ticks(float(rad)))
        assert abs(back - rad) <= half_tick + 1e-12
    for ticks in range(0, 4096, 37):
        assert s.rad_to_ticks(s.ticks_to_rad(ticks)) == ticks
    # direction -1 mirrors the tick motion around the zero tick
    assert (s.rad_to_ticks(offset + 0.5) - zero) * direction > 0


def test_shipped_elbow_servo_is_reversed(robot: RobotSpec) -> None:
    elbow = robot.joints[robot.index('elbow_pitch')].servo
    shoulder = robot.joints[robot.index('shoulder_pitch')].servo
    assert elbow.rad_to_ticks(0.5) == 2048 - shoulder.rad_to_ticks(0.5) + 2048
    assert elbow.ticks_to_rad(3000) == pytest.approx(-shoulder.ticks_to_rad(3000))


def test_joint_limits_dataclass_checks() -> None:
    with pytest.raises(ValueError, match='lower'):
        JointLimits(1.0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match='velocity and effort'):
        JointLimits(-1.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match='velocity and effort'):
        JointLimits(-1.0, 1.0, 1.0, -1.0)


# ---------------------------------------------------------------------------------------------
# bad files: the file itself


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / 'missing.yaml'
    with pytest.raises(ConfigError, match=re.escape(f'{path}: expected an existing file')):
        load_robot(path)


def test_unknown_shipped_name() -> None:
    with pytest.raises(ConfigError, match=r'config/robots: no_such_arm: expected a file path '
                                          r"or one of the shipped names \[.*'simreal_arm'"):
        load_robot('no_such_arm')


def test_config_error_is_a_simreal_error(tmp_path: Path) -> None:
    with pytest.raises(SimrealError):
        load_robot(tmp_path / 'missing.yaml')


@pytest.mark.parametrize('text', ['robot: [simreal_arm\n', 'robot: {a: 1\n',
                                  'a: b\n  c: d\n e: f\n'])
def test_not_yaml(tmp_path: Path, text: str) -> None:
    path = tmp_path / 'broken.yaml'
    path.write_text(text, encoding='utf-8')
    err = _fails(path, '', 'valid YAML')
    assert '\n' not in str(err)


@pytest.mark.parametrize('text, got', [('- robot: simreal_arm\n', 'list'), ('', 'NoneType'),
                                       ('just a string\n', 'str'), ('42\n', 'int')])
def test_top_level_not_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    path = tmp_path / 'top.yaml'
    path.write_text(text, encoding='utf-8')
    err = _fails(path, '', 'a mapping at the top level')
    assert err.got == got


@pytest.mark.parametrize('keys', [('robot',), ('urdf',), ('joints',),
                                  ('joints', 0, 'name'), ('joints', 0, 'servo_id'),
                                  ('joints', 0, 'limits'), ('joints', 2, 'limits', 'lower'),
                                  ('joints', 2, 'limits', 'upper'),
                                  ('joints', 2, 'limits', 'velocity'),
                                  ('joints', 2, 'limits', 'effort'), ('joints', 1, 'gains'),
                                  ('joints', 1, 'gains', 'kp'), ('joints', 1, 'gains', 'kd'),
                                  ('imu', 'link')])
def test_missing_required_key(tmp_path: Path, keys: tuple[Any, ...]) -> None:
    data = _shipped()
    _delete(data, keys)
    key = keys[0] + ''.join(f'[{k}]' if isinstance(k, int) else f'.{k}' for k in keys[1:])
    # without either spelling of the model file, the message names the key of the docs
    _fails(_write(tmp_path, data), 'model' if key == 'urdf' else key, 'this key to be present')


def test_missing_urdf_file(tmp_path: Path) -> None:
    data = _shipped()
    data['urdf'] = str(tmp_path / 'nope.urdf')
    err = _fails(_write(tmp_path, data), 'urdf', 'a URDF or MJCF file (package://PKG/..., '
                 'file://..., or a path)')
    assert err.got == f'{tmp_path / "nope.urdf"} ({tmp_path / "nope.urdf"} does not exist)'


# ---------------------------------------------------------------------------------------------
# bad files: one value wrong (keys, value, dotted key in the message, expectation)

WRONG_VALUES = [
    # strings where numbers belong
    (('joints', 2, 'limits', 'lower'), 'abc', 'joints[2].limits.lower', 'a number'),
    (('joints', 0, 'limits', 'upper'), '2.7', 'joints[0].limits.upper', 'a number'),
    (('joints', 3, 'limits', 'velocity'), 'fast', 'joints[3].limits.velocity', 'a number'),
    (('joints', 4, 'limits', 'effort'), [4.0], 'joints[4].limits.effort', 'a number'),
    (('joints', 1, 'home'), 'up', 'joints[1].home', 'a number'),
    (('joints', 1, 'gains', 'kp'), 'stiff', 'joints[1].gains.kp', 'a number'),
    (('joints', 1, 'gains', 'kd'), None, 'joints[1].gains.kd', 'a number'),
    (('joints', 5, 'armature'), '0.01', 'joints[5].armature', 'a number'),
    (('joints', 0, 'offset_rad'), 'zero', 'joints[0].offset_rad', 'a number'),
    (('joints', 0, 'torque_per_amp'), 'x', 'joints[0].torque_per_amp', 'a number'),
    (('physics', 'timestep_s'), '1ms', 'physics.timestep_s', 'a number'),
    (('servo_defaults', 'torque_per_amp'), 'x', 'servo_defaults.torque_per_amp', 'a number'),
    # bools where numbers / integers belong
    (('joints', 0, 'limits', 'lower'), True, 'joints[0].limits.lower', 'a number'),
    (('joints', 0, 'gains', 'kd'), False, 'joints[0].gains.kd', 'a number'),
    (('joints', 3, 'servo_id'), True, 'joints[3].servo_id', 'an integer'),
    (('joints', 0, 'direction'), True, 'joints[0].direction', 'an integer'),
    (('joints', 0, 'ticks_per_rev'), True, 'joints[0].ticks_per_rev', 'an integer'),
    (('joints', 0, 'zero_tick'), False, 'joints[0].zero_tick', 'an integer'),
    (('servo_defaults', 'ticks_per_rev'), True, 'servo_defaults.ticks_per_rev', 'an integer'),
    (('servo_defaults', 'model_number'), True, 'servo_defaults.model_number', 'an integer'),
    (('bus', 'baud'), True, 'bus.baud', 'an integer'),
    (('bus', 'protocol'), True, 'bus.protocol', 'an integer'),
    # floats / strings where integers belong
    (('joints', 3, 'servo_id'), 4.0, 'joints[3].servo_id', 'an integer'),
    (('joints', 3, 'servo_id'), '4', 'joints[3].servo_id', 'an integer'),
    (('joints', 3, 'servo_id'), 253, 'joints[3].servo_id', 'an integer in [0, 252]'),
    (('joints', 3, 'servo_id'), -1, 'joints[3].servo_id', 'an integer in [0, 252]'),
    (('bus', 'baud'), 1200, 'bus.baud', 'an integer in [9600, None]'),
    (('bus', 'baud'), 57600.0, 'bus.baud', 'an integer'),
    # strings
    (('robot',), 7, 'robot', 'a non-empty string'),
    (('robot',), '', 'robot', 'a non-empty string'),
    (('urdf',), 3, 'urdf', 'a non-empty string'),
    (('base_frame',), '', 'base_frame', 'a non-empty string'),
    (('tool_frame',), ['tool0'], 'tool_frame', 'a non-empty string'),
    (('joints', 0, 'name'), 5, 'joints[0].name', 'a non-empty string'),
    (('joints', 0, 'name'), '', 'joints[0].name', 'a non-empty string'),
    (('joints', 0, 'model'), 430, 'joints[0].model', 'a non-empty string'),
    (('imu', 'link'), None, 'imu.link', 'a non-empty string'),
    (('imu', 'frame_id'), '', 'imu.frame_id', 'a non-empty string'),
    # structure
    (('joints',), {'base_yaw': {}}, 'joints', 'a list'),
    (('joints',), [], 'joints', 'a non-empty list of joints'),
    (('joints', 0), 'base_yaw', 'joints[0]', 'a mapping'),
    (('joints', 0, 'limits'), [-1.0, 1.0], 'joints[0].limits', 'a mapping'),
    (('joints', 0, 'gains'), 20.0, 'joints[0].gains', 'a mapping'),
    (('physics',), 0.001, 'physics', 'a mapping'),
    (('bus',), 'usb', 'bus', 'a mapping'),
    (('imu',), 5, 'imu', 'a mapping'),
    # limits
    (('joints', 2, 'limits', 'lower'), 2.1, 'joints[2].limits.upper', 'a number > lower (2.1)'),
    (('joints', 2, 'limits', 'lower'), 2.5, 'joints[2].limits.upper', 'a number > lower (2.5)'),
    (('joints', 2, 'limits', 'lower'), -7.0, 'joints[2].limits.lower', 'a number >= -6.28'),
    (('joints', 2, 'limits', 'upper'), 7.0, 'joints[2].limits.upper', 'a number <= 6.28'),
    (('joints', 0, 'limits', 'velocity'), 0.0, 'joints[0].limits.velocity', 'a number > 0'),
    (('joints', 0, 'limits', 'velocity'), -4.5, 'joints[0].limits.velocity', 'a number > 0'),
    (('joints', 1, 'limits', 'effort'), 0, 'joints[1].limits.effort', 'a number > 0'),
    (('joints', 1, 'limits', 'effort'), -1.0, 'joints[1].limits.effort', 'a number > 0'),
    # home outside the limits
    (('joints', 2, 'home'), 2.2, 'joints[2].home', 'a position within [-2.1, 2.1]'),
    (('joints', 0, 'home'), -3.0, 'joints[0].home', 'a position within [-2.7, 2.7]'),
    # gains and armature
    (('joints', 0, 'gains', 'kp'), 0.0, 'joints[0].gains.kp', 'a number > 0'),
    (('joints', 0, 'gains', 'kp'), -20.0, 'joints[0].gains.kp', 'a number > 0'),
    (('joints', 0, 'gains', 'kd'), -0.1, 'joints[0].gains.kd', 'a number >= 0.0'),
    (('joints', 0, 'armature'), -0.01, 'joints[0].armature', 'a number >= 0.0'),
    (('joints', 0, 'torque_per_amp'), -1.0, 'joints[0].torque_per_amp', 'a number >= 0.0'),
    (('joints', 0, 'operating_mode'), 'torque', 'joints[0].operating_mode',
     'one of current_based_position, position'),
    (('physics', 'timestep_s'), 0.0, 'physics.timestep_s', 'a number > 0'),
    (('physics', 'timestep_s'), 0.1, 'physics.timestep_s', 'a number <= 0.05'),
    # servo direction and bus protocol
    (('joints', 2, 'direction'), 2, 'joints[2].direction', '1 or -1'),
    (('joints', 2, 'direction'), 0, 'joints[2].direction', '1 or -1'),
    (('joints', 2, 'direction'), -2, 'joints[2].direction', '1 or -1'),
    (('bus', 'protocol'), 1, 'bus.protocol', '2 (Dynamixel Protocol 2.0)'),
    (('bus', 'family'), 'herkulex', 'bus.family', 'one of dynamixel, feetech'),
    (('bus', 'family'), 3, 'bus.family', 'a non-empty string'),
    # imu position
    (('imu', 'position'), [0.0, 0.0], 'imu.position', 'a list of 3 numbers [x, y, z]'),
    (('imu', 'position'), [0.0, 0.0, 0.0, 1.0], 'imu.position', 'a list of 3 numbers'),
    (('imu', 'position'), ['a', 0.0, 0.0], 'imu.position[0]', 'a number'),
    (('imu', 'position'), [True, 0.0, 0.0], 'imu.position[0]', 'a number'),
    (('imu', 'position'), 0.015, 'imu.position', 'a list of 3 numbers'),
    (('imu', 'position'), {'z': 0.015}, 'imu.position', 'a list of 3 numbers'),
    # NaN and inf (dumped as YAML .nan / .inf / -.inf)
    (('joints', 0, 'limits', 'lower'), -math.inf, 'joints[0].limits.lower', 'a finite number'),
    (('joints', 0, 'limits', 'upper'), math.nan, 'joints[0].limits.upper', 'a finite number'),
    (('joints', 0, 'limits', 'velocity'), math.inf, 'joints[0].limits.velocity',
     'a finite number'),
    (('joints', 0, 'limits', 'effort'), math.nan, 'joints[0].limits.effort', 'a finite number'),
    (('joints', 1, 'home'), math.nan, 'joints[1].home', 'a finite number'),
    (('joints', 1, 'gains', 'kp'), math.inf, 'joints[1].gains.kp', 'a finite number'),
    (('joints', 1, 'gains', 'kd'), math.nan, 'joints[1].gains.kd', 'a finite number'),
    (('joints', 1, 'armature'), math.inf, 'joints[1].armature', 'a finite number'),
    (('joints', 1, 'offset_rad'), math.nan, 'joints[1].offset_rad', 'a finite number'),
    (('physics', 'timestep_s'), math.nan, 'physics.timestep_s', 'a finite number'),
    (('servo_defaults', 'torque_per_amp'), math.inf, 'servo_defaults.torque_per_amp',
     'a finite number'),
]


@pytest.mark.parametrize('keys, value, key, expected', WRONG_VALUES,
                         ids=[f'{c[2]}={c[1]!r}' for c in WRONG_VALUES])
def test_wrong_value(tmp_path: Path, keys: tuple[Any, ...], value: Any, key: str,
                     expected: str) -> None:
    data = _shipped()
    _set(data, keys, value)
    path = _write(tmp_path, data)
    if isinstance(value, float) and not math.isfinite(value):
        assert re.search(r'-?\.(nan|inf)\b', path.read_text(encoding='utf-8'))
    _fails(path, key, expected)


@pytest.mark.parametrize('bad', [math.nan, math.inf])
def test_imu_position_nan_inf(tmp_path: Path, bad: float) -> None:
    data = _shipped()
    data['imu']['position'] = [0.0, bad, 0.015]
    with pytest.raises(ConfigError, match=r'imu\.position'):
        load_robot(_write(tmp_path, data))


def test_nan_written_as_yaml_literal(tmp_path: Path) -> None:
    text = SPEC_FILE.read_text(encoding='utf-8').replace(
        'urdf: urdf/simreal_arm.urdf', f'urdf: {URDF_FILE}')
    text = text.replace('{kp: 25.0, kd: 0.7}', '{kp: .nan, kd: 0.7}', 1)
    path = tmp_path / 'nan_arm.yaml'
    path.write_text(text, encoding='utf-8')
    _fails(path, 'joints[1].gains.kp', 'a finite number')
    path.write_text(text.replace('.nan', '.inf'), encoding='utf-8')
    _fails(path, 'joints[1].gains.kp', 'a finite number')


def test_duplicate_joint_name(tmp_path: Path) -> None:
    data = _shipped()
    data['joints'][3]['name'] = 'base_yaw'
    err = _fails(_write(tmp_path, data), 'joints[3].name', 'a joint name not used before')
    assert err.got == 'base_yaw'


def test_duplicate_servo_id(tmp_path: Path) -> None:
    data = _shipped()
    data['joints'][4]['servo_id'] = 1
    err = _fails(_write(tmp_path, data), 'joints[4].servo_id', 'a servo id not used before')
    assert err.got == 1


def test_duplicated_joint_entry(tmp_path: Path) -> None:
    data = _shipped()
    data['joints'].append(copy.deepcopy(data['joints'][0]))
    _fails(_write(tmp_path, data), 'joints[6].name', 'a joint name not used before')


# ---------------------------------------------------------------------------------------------
# unknown keys (typos)

UNKNOWN_KEYS = [
    (('joints', 1, 'dampng'), 'joints[1].dampng'),
    (('joints', 1, 'gains', 'kpp'), 'joints[1].gains.kpp'),
    (('joints', 1, 'gains', 'ki'), 'joints[1].gains.ki'),
    (('joints', 0, 'limits', 'lowr'), 'joints[0].limits.lowr'),
    (('tool_fame',), 'tool_fame'),
    (('physics', 'timestep'), 'physics.timestep'),
    (('bus', 'baudrate'), 'bus.baudrate'),
    (('servo_defaults', 'model_nr'), 'servo_defaults.model_nr'),
    (('imu', 'frame'), 'imu.frame'),
]


@pytest.mark.parametrize('keys, key', UNKNOWN_KEYS, ids=[c[1] for c in UNKNOWN_KEYS])
def test_unknown_key(tmp_path: Path, keys: tuple[Any, ...], key: str) -> None:
    data = _shipped()
    _set(data, keys, 0.1)
    err = _fails(_write(tmp_path, data), key, 'one of the known keys')
    assert err.got == 'unknown key'


def test_unknown_key_message_lists_the_known_ones(tmp_path: Path) -> None:
    data = _shipped()
    data['joints'][0]['gains']['kpp'] = 20.0
    err = _fails(_write(tmp_path, data), 'joints[0].gains.kpp', 'one of the known keys')
    assert 'kd, kp' in err.expected


def test_gain_renamed_by_typo(tmp_path: Path) -> None:
    data = _shipped()
    data['joints'][0]['gains'] = {'kpp': 20.0, 'kd': 0.6}
    _fails(_write(tmp_path, data), 'joints[0].gains.kp', 'this key to be present')
