"""Tests of CommandIntake: the one command intake of the sim bridge, driver and adapter."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.commands import CommandIntake, JointTarget
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import CommandError


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    return load_robot('simreal_arm')


def test_a_valid_partial_command_merges_onto_the_previous_target(robot: RobotSpec) -> None:
    intake = CommandIntake(robot)
    previous = JointTarget.hold(robot.home)
    target = intake.merge(previous, ['elbow_pitch'], [0.3], stamp_ns=7)
    assert target is not None
    expected = robot.home.copy()
    expected[robot.joint_names.index('elbow_pitch')] = 0.3
    np.testing.assert_array_equal(target.position, expected)
    assert target.stamp_ns == 7
    assert intake.values() == {'commands_received': 1, 'commands_rejected': 0,
                               'commands_clamped': 0, 'last_rejection': ''}


def test_a_huge_command_gives_a_bounded_reason(robot: RobotSpec) -> None:
    seen: list[CommandError] = []
    intake = CommandIntake(robot, on_reject=seen.append)
    names = ['elbow_pitch'] * 200_000  # its reason quoted every name: 2.4 MB
    assert intake.merge(JointTarget.hold(robot.home), names, [0.0] * len(names)) is None
    reason = intake.values()['last_rejection']
    assert reason == str(seen[0])
    assert len(reason) == 300
    assert reason.startswith("joint named twice in ['elbow_pitch', 'elbow_pitch'")
    assert reason.endswith(f'... ({len(str(names)) + len("joint named twice in ")} characters)')


def test_bounded_keeps_short_texts_and_says_how_long_a_cut_one_was() -> None:
    from simreal_ros.core.validate import bounded
    assert bounded('x' * 300) == 'x' * 300
    assert bounded('x' * 301, limit=30) == 'x' * 10 + '... (301 characters)'


def test_a_rejection_is_counted_reported_and_returns_none(robot: RobotSpec) -> None:
    seen: list[CommandError] = []
    intake = CommandIntake(robot, on_reject=seen.append)
    previous = JointTarget.hold(robot.home)
    assert intake.merge(previous, ['nope'], [0.0]) is None
    assert intake.merge(previous, [], [float('nan')] * robot.n) is None
    assert len(seen) == 2 and "unknown joint 'nope'" in str(seen[0])
    values = intake.values()
    assert values['commands_received'] == 2 and values['commands_rejected'] == 2
    assert values['last_rejection'] == str(seen[1])
    assert 'NaN' in str(values['last_rejection'])


def test_the_rejection_window_counts_since_the_last_take(robot: RobotSpec) -> None:
    intake = CommandIntake(robot)
    previous = JointTarget.hold(robot.home)
    for _ in range(3):
        intake.merge(previous, ['nope'], [0.0])
    assert intake.take_rejected_window() == 3
    assert intake.take_rejected_window() == 0
    intake.merge(previous, ['nope'], [0.0])
    assert intake.take_rejected_window() == 1
    assert intake.rejected == 4


def test_a_clamp_counts_only_when_the_target_is_accepted(robot: RobotSpec) -> None:
    intake = CommandIntake(robot)
    previous = JointTarget.hold(robot.home)
    far = [float(u) + 1.0 for u in robot.upper]
    target = intake.merge(previous, [], far)
    assert target is not None and target.clamped
    np.testing.assert_array_equal(target.position, robot.upper)
    assert intake.clamped == 0  # e.g. the driver drops commands during its move home
    assert intake.accept(target) is target
    assert intake.clamped == 1
    inside = intake.merge(previous, [], list(robot.home))
    assert inside is not None
    intake.accept(inside)
    assert intake.clamped == 1 and intake.received == 2


def test_previous_may_be_a_function_whose_command_error_is_a_rejection(
        robot: RobotSpec) -> None:
    intake = CommandIntake(robot)
    calls: list[int] = []

    def unknown() -> JointTarget:
        calls.append(1)
        raise CommandError('the positions of the other joints are unknown')

    assert intake.merge(unknown, ['elbow_pitch'], [0.1]) is None
    assert calls == [1]
    assert intake.rejected == 1 and intake.take_rejected_window() == 1
    assert intake.last_rejection == 'the positions of the other joints are unknown'
    target = intake.merge(lambda: JointTarget.hold(robot.home), ['elbow_pitch'], [0.1])
    assert target is not None and intake.received == 2 and intake.rejected == 1
