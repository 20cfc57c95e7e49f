"""Tests of CommandValidator.merge: partial commands, rejection and clamping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simreal_ros.core.commands import CommandValidator, JointTarget
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import CommandError, SimrealError

NAMES = ['base_yaw', 'shoulder_pitch', 'elbow_pitch', 'forearm_roll', 'wrist_pitch',
         'wrist_roll']


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    return load_robot('simreal_arm')


@pytest.fixture
def validator(robot: RobotSpec) -> CommandValidator:
    return CommandValidator(robot)


@pytest.fixture
def home(robot: RobotSpec) -> JointTarget:
    return JointTarget.hold(robot.home, stamp_ns=5)


def test_hold(robot: RobotSpec) -> None:
    t = JointTarget.hold(robot.home, 9)
    np.testing.assert_array_equal(t.position, robot.home)
    np.testing.assert_array_equal(t.velocity, np.zeros(6))
    np.testing.assert_array_equal(t.effort, np.zeros(6))
    assert t.stamp_ns == 9
    assert not t.clamped
    assert t.velocity is not t.effort
    assert not np.shares_memory(t.position, robot.home)


def test_full_command(validator: CommandValidator, home: JointTarget) -> None:
    pos = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]
    vel = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06]
    eff = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    out = validator.merge(home, NAMES, pos, vel, eff, stamp_ns=123)
    np.testing.assert_array_equal(out.position, pos)
    np.testing.assert_array_equal(out.velocity, vel)
    np.testing.assert_array_equal(out.effort, eff)
    assert out.stamp_ns == 123
    assert out.clamped is False
    assert out.position.dtype == np.float64


def test_full_command_in_other_order(validator: CommandValidator, home: JointTarget) -> None:
    names = list(reversed(NAMES))
    pos = [0.6, 0.5, 0.4, 0.3, 0.2, 0.1]
    out = validator.merge(home, names, pos, [1.0, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(out.position, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    np.testing.assert_allclose(out.velocity, [0, 0, 0, 0, 0, 1.0])


def test_partial_command_keeps_other_joints(validator: CommandValidator,
                                            home: JointTarget) -> None:
    prev = validator.merge(home, [], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    out = validator.merge(prev, ['elbow_pitch', 'base_yaw'], [-1.0, 1.0], [0.5, -0.5],
                          [1.0, 2.0], stamp_ns=7)
    np.testing.assert_allclose(out.position, [1.0, 0.2, -1.0, 0.4, 0.5, 0.6])
    # feed-forward of the joints not named in this command is zero, not the previous one
    np.testing.assert_allclose(out.velocity, [-0.5, 0, 0.5, 0, 0, 0])
    np.testing.assert_allclose(out.effort, [2.0, 0, 1.0, 0, 0, 0])
    assert out.stamp_ns == 7
    assert not out.clamped


def test_partial_command_without_feed_forward(validator: CommandValidator,
                                              home: JointTarget) -> None:
    out = validator.merge(home, ['wrist_roll'], [0.25])
    expected = home.position.copy()
    expected[5] = 0.25
    np.testing.assert_allclose(out.position, expected)
    np.testing.assert_array_equal(out.velocity, np.zeros(6))
    np.testing.assert_array_equal(out.effort, np.zeros(6))


def test_empty_names_full_positional(validator: CommandValidator, home: JointTarget) -> None:
    pos = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    out = validator.merge(home, [], pos, velocity=np.ones(6), effort=())
    np.testing.assert_array_equal(out.position, pos)
    np.testing.assert_array_equal(out.velocity, np.ones(6))
    np.testing.assert_array_equal(out.effort, np.zeros(6))
    assert validator.merge(home, (), tuple(pos)).position.tolist() == pos.tolist()


@pytest.mark.parametrize('n', [0, 1, 5, 7])
def test_empty_names_wrong_length(validator: CommandValidator, home: JointTarget,
                                  n: int) -> None:
    with pytest.raises(CommandError, match=rf'all 6 positions in robot order .*; got {n}$'):
        validator.merge(home, [], [0.0] * n)


def test_unknown_joint(validator: CommandValidator, home: JointTarget) -> None:
    with pytest.raises(CommandError, match=r"unknown joint 'elbow'; simreal_arm has "
                                           r"\['base_yaw', "):
        validator.merge(home, ['base_yaw', 'elbow'], [0.0, 0.0])


def test_duplicate_joint(validator: CommandValidator, home: JointTarget) -> None:
    with pytest.raises(CommandError, match=r'joint named twice in \[.*elbow_pitch.*\]'):
        validator.merge(home, ['elbow_pitch', 'base_yaw', 'elbow_pitch'], [0.1, 0.2, 0.3])


@pytest.mark.parametrize('names, position, velocity, effort, message', [
    (['base_yaw', 'elbow_pitch'], [0.1], (), (), '2 names but 1 positions'),
    (['base_yaw'], [0.1, 0.2], (), (), '1 names but 2 positions'),
    (['base_yaw'], [], (), (), '1 names but 0 positions'),
    (['base_yaw', 'elbow_pitch'], [0.1, 0.2], [0.0], (),
     'velocity has 1 entries; expected 0 or 2'),
    (['base_yaw', 'elbow_pitch'], [0.1, 0.2], (), [0.0, 0.0, 0.0],
     'effort has 3 entries; expected 0 or 2'),
    ([], [0.0] * 6, [0.0] * 5, (), 'velocity has 5 entries; expected 0 or 6'),
    ([], [0.0] * 6, (), [0.0] * 7, 'effort has 7 entries; expected 0 or 6'),
])
def test_length_mismatch(validator: CommandValidator, home: JointTarget, names: list[str],
                         position: list[float], velocity: list[float], effort: list[float],
                         message: str) -> None:
    with pytest.raises(CommandError, match=message):
        validator.merge(home, names, position, velocity, effort)


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize('field', ['position', 'velocity', 'effort'])
def test_non_finite_rejected(validator: CommandValidator, home: JointTarget, bad: float,
                             field: str) -> None:
    values = {'position': [0.1, 0.2], 'velocity': [0.0, 0.0], 'effort': [0.0, 0.0]}
    values[field][1] = bad
    with pytest.raises(CommandError, match=rf'{field} contains NaN or inf'):
        validator.merge(home, ['base_yaw', 'wrist_roll'], values['position'],
                        values['velocity'], values['effort'])


def test_non_finite_in_positional_command(validator: CommandValidator,
                                          home: JointTarget) -> None:
    with pytest.raises(CommandError, match='position contains NaN or inf'):
        validator.merge(home, [], [0.0, 0.0, math.nan, 0.0, 0.0, 0.0])


def test_command_error_is_a_simreal_error(validator: CommandValidator,
                                          home: JointTarget) -> None:
    with pytest.raises(SimrealError):
        validator.merge(home, ['nope'], [0.0])


def test_position_clamped(validator: CommandValidator, home: JointTarget,
                          robot: RobotSpec) -> None:
    out = validator.merge(home, ['elbow_pitch', 'base_yaw'], [5.0, -10.0])
    assert out.clamped is True
    assert out.position[2] == robot.upper[2] == 2.1
    assert out.position[0] == robot.lower[0] == -2.7
    np.testing.assert_array_equal(out.position[[1, 3, 4, 5]], home.position[[1, 3, 4, 5]])


def test_position_exactly_at_limit_not_clamped(validator: CommandValidator,
                                               home: JointTarget, robot: RobotSpec) -> None:
    out = validator.merge(home, [], robot.upper)
    assert not out.clamped
    out = validator.merge(home, [], robot.lower, -robot.velocity_limit, robot.effort_limit)
    assert not out.clamped


def test_velocity_clamped(validator: CommandValidator, home: JointTarget) -> None:
    out = validator.merge(home, ['shoulder_pitch', 'wrist_pitch'], [0.0, 0.0], [100.0, -9.0])
    assert out.clamped is True
    assert out.velocity[1] == 4.5
    assert out.velocity[4] == -4.5
    np.testing.assert_array_equal(out.position[[1, 4]], [0.0, 0.0])


def test_effort_clamped(validator: CommandValidator, home: JointTarget) -> None:
    out = validator.merge(home, ['forearm_roll'], [0.0], effort=[-40.0])
    assert out.clamped is True
    assert out.effort[3] == -4.0
    out = validator.merge(home, ['forearm_roll'], [0.0], effort=[4.0])
    assert not out.clamped


def test_previous_target_unchanged(validator: CommandValidator, home: JointTarget) -> None:
    before = (home.position.copy(), home.velocity.copy(), home.effort.copy())
    out = validator.merge(home, ['base_yaw', 'elbow_pitch'], [9.0, 0.5], [1.0, 9.0],
                          [9.0, 1.0])
    np.testing.assert_array_equal(home.position, before[0])
    np.testing.assert_array_equal(home.velocity, before[1])
    np.testing.assert_array_equal(home.effort, before[2])
    for new, old in ((out.position, home.position), (out.velocity, home.velocity),
                     (out.effort, home.effort)):
        assert not np.shares_memory(new, old)
    out.position[:] = 0.0
    np.testing.assert_array_equal(home.position, before[0])


def test_input_arrays_not_aliased(validator: CommandValidator, home: JointTarget) -> None:
    pos = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    vel = np.zeros(6)
    out = validator.merge(home, [], pos, vel, vel)
    assert not np.shares_memory(out.position, pos)
    assert not np.shares_memory(out.velocity, vel)
    pos[:] = 9.0
    np.testing.assert_allclose(out.position, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])


def test_rejected_command_leaves_previous_intact(validator: CommandValidator,
                                                 home: JointTarget) -> None:
    before = home.position.copy()
    with pytest.raises(CommandError):
        validator.merge(home, ['base_yaw', 'wrist_roll'], [1.0, math.nan])
    np.testing.assert_array_equal(home.position, before)
