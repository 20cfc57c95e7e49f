"""Every transition of the Dynamixel driver's state machine, without ROS or a bus."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.driver_config import DriverConfig
from simreal_ros.hardware.dynamixel.driver_control import (
    Cycle,
    DriverControl,
    clamp_step,
    read_failure_level,
)

DT = 0.004
S = 1_000_000_000  # ns per s


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    return load_robot('simreal_arm')


def make(robot: RobotSpec, watchdog: str = 'hold', rate_limit: bool = True,
         position: np.ndarray | None = None) -> DriverControl:
    return DriverControl(robot, robot.home if position is None else position, dt_s=DT,
                         command_timeout_s=0.5, watchdog=watchdog,
                         goal_rate_limit=rate_limit, reset_speed=0.5, reconnect_min_s=0.05,
                         reconnect_max_s=0.4)


def run(ctl: DriverControl, position: np.ndarray, now_ns: int) -> Cycle:
    """One cycle whose transactions all succeed."""
    cycle = ctl.step(position, now_ns)
    if cycle.torque is not None:
        ctl.torque_switched(cycle.torque, position)
    if cycle.goal is not None:
        cycle.events += ctl.goal_written(cycle.goal)
    return cycle


def command(robot: RobotSpec, ctl: DriverControl, offset: float, now_ns: int) -> JointTarget:
    target = JointTarget.hold(robot.home + offset)
    assert ctl.take_command(target, now_ns)
    return target


def test_without_commands_the_goal_holds_where_it_started(robot: RobotSpec) -> None:
    start = robot.home + 0.1
    ctl = make(robot, position=start)
    for k in range(3):
        cycle = run(ctl, start - 0.01, k * 4_000_000)
        assert cycle.torque is None and cycle.events == []
        np.testing.assert_array_equal(cycle.goal, start)
    assert not ctl.watchdog_active and ctl.watchdog_trips == 0


def test_a_command_is_tracked_at_most_the_velocity_limit_per_cycle(robot: RobotSpec) -> None:
    ctl = make(robot)
    command(robot, ctl, 0.5, 0)
    cycle = run(ctl, robot.home, 1_000_000)
    np.testing.assert_allclose(cycle.goal, robot.home + robot.velocity_limit * DT)
    unlimited = make(robot, rate_limit=False)
    command(robot, unlimited, 0.5, 0)
    np.testing.assert_allclose(run(unlimited, robot.home, 1_000_000).goal, robot.home + 0.5)


def test_merge_base_is_the_last_command_else_the_goal(robot: RobotSpec) -> None:
    ctl = make(robot, position=robot.home + 0.2)
    np.testing.assert_array_equal(ctl.merge_base().position, robot.home + 0.2)
    target = command(robot, ctl, 0.3, 0)
    assert ctl.merge_base() is target


def test_the_hold_watchdog_freezes_the_goal_then_commands_resume(robot: RobotSpec) -> None:
    ctl = make(robot)
    command(robot, ctl, 0.002, 0)
    goal = run(ctl, robot.home, S // 10).goal
    cycle = run(ctl, robot.home - 0.05, S // 10 + S // 2 + 1)  # 0.5 s after the command
    assert cycle.events == [('warning', 'no joint command for 0.5 s: hold')]
    np.testing.assert_array_equal(cycle.goal, goal)  # not the sagging measured position
    assert ctl.watchdog_active and ctl.watchdog_trips == 1 and cycle.torque is None
    again = run(ctl, robot.home - 0.06, S)
    assert again.events == [] and ctl.watchdog_trips == 1
    np.testing.assert_array_equal(again.goal, goal)
    command(robot, ctl, 0.0, S + 1)
    resumed = run(ctl, robot.home, S + 2)
    assert resumed.events == [('info', 'joint commands resumed')]
    assert not ctl.watchdog_active and ctl.hold_target is None
    np.testing.assert_allclose(resumed.goal, robot.home)


def test_the_torque_off_watchdog_then_a_new_command_enables_at_the_arm(
        robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    command(robot, ctl, 0.0, 0)
    run(ctl, robot.home, 1)
    cycle = run(ctl, robot.home, S)
    assert cycle.torque is False and cycle.goal is None
    assert cycle.events == [('warning', 'no joint command for 0.5 s: torque_off')]
    assert not ctl.torque_on and ctl.watchdog_active
    idle = run(ctl, robot.home - 0.3, 2 * S)  # torque off: nothing written, no switch
    assert idle.torque is None and idle.goal is None
    sagged = robot.home - 0.3
    command(robot, ctl, 0.4, 2 * S + 1)
    back = run(ctl, sagged, 2 * S + 2)
    assert back.torque is True
    assert back.events == [('info', 'command: torque enabled again')]
    # from the measured (sagged) position toward the command, rate limited
    np.testing.assert_allclose(back.goal, sagged + robot.velocity_limit * DT)
    assert ctl.torque_on and not ctl.watchdog_active


def test_a_failed_torque_enable_leaves_torque_off_until_the_next_command(
        robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    command(robot, ctl, 0.0, 0)
    run(ctl, robot.home, S)
    command(robot, ctl, 0.0, 2 * S)
    assert ctl.step(robot.home, 2 * S + 1).torque is True  # ... and the bus failed
    assert not ctl.torque_on
    assert ctl.step(robot.home, 2 * S + 2).torque is None  # that command is used up
    command(robot, ctl, 0.0, 2 * S + 3)
    assert run(ctl, robot.home, 2 * S + 4).torque is True and ctl.torque_on


def test_a_failed_goal_write_keeps_the_last_goal(robot: RobotSpec) -> None:
    ctl = make(robot)
    command(robot, ctl, 0.5, 0)
    first = ctl.step(robot.home, 1).goal  # the write failed: goal_written not called
    np.testing.assert_array_equal(ctl.goal, robot.home)
    second = ctl.step(robot.home, 2).goal
    np.testing.assert_array_equal(first, second)


def test_reset_moves_home_at_reset_speed_and_drops_commands(robot: RobotSpec) -> None:
    start = robot.home + 0.01
    ctl = make(robot, position=start)
    command(robot, ctl, 0.3, 0)
    ctl.start_reset()
    assert ctl.command is None and ctl.reset_active
    assert not ctl.take_command(JointTarget.hold(robot.home + 0.3), 1)
    first = run(ctl, start, 2)
    np.testing.assert_allclose(first.goal, start - 0.5 * DT)
    events = []
    for k in range(10):
        events += run(ctl, start, 3 + k).events
        if not ctl.reset_active:
            break
    assert events == [('info', 'reset: at home')]
    np.testing.assert_allclose(ctl.goal, robot.home)
    assert ctl.take_command(JointTarget.hold(robot.home), 20)


def test_reset_with_torque_off_enables_torque_first(robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    command(robot, ctl, 0.0, 0)
    run(ctl, robot.home, S)
    assert not ctl.torque_on
    ctl.start_reset()
    cycle = run(ctl, robot.home + 0.2, S + 1)
    assert cycle.torque is True and cycle.events == [('info', 'reset: torque enabled again')]
    np.testing.assert_allclose(cycle.goal, robot.home + 0.2 - 0.5 * DT)


def test_reconfigured_servos_come_back_with_torque_on_where_they_are(
        robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    command(robot, ctl, 0.0, 0)
    run(ctl, robot.home, S)
    ctl.reconfigured(robot.home + 0.1)
    assert ctl.torque_on and not ctl.watchdog_active and ctl.hold_target is None
    np.testing.assert_array_equal(ctl.goal, robot.home + 0.1)


def test_reconnect_back_off_doubles_up_to_the_maximum(robot: RobotSpec) -> None:
    ctl = make(robot)
    ctl.port_lost(0)
    assert not ctl.connected
    assert ctl.wait_ns(0) == 50_000_000 and ctl.wait_ns(50_000_000) == 0
    waits = []
    now = 50_000_000
    for _ in range(5):
        ctl.reconnect_failed(now)
        waits.append(ctl.wait_ns(now))
    assert waits == [100_000_000, 200_000_000, 400_000_000, 400_000_000, 400_000_000]
    ctl.reconnected(robot.home, torque_off=False, seq=ctl.command_seq)
    assert ctl.connected and ctl.torque_on
    ctl.port_lost(10 * S)  # a new outage starts at the minimum again
    assert ctl.wait_ns(10 * S) == 50_000_000


def test_reconnect_keeps_torque_off_when_the_watchdog_had_or_would_switch_it_off(
        robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    assert not ctl.keep_torque_off(0)  # no command yet: nothing is stale
    command(robot, ctl, 0.0, 0)
    assert not ctl.keep_torque_off(S // 4)
    assert ctl.keep_torque_off(S)  # stale commands: the watchdog would switch it off now
    held = make(robot, watchdog='hold')
    command(robot, held, 0.0, 0)
    assert not held.keep_torque_off(S)  # hold never switches torque off
    held.torque_on = False  # switched off before the outage
    assert held.keep_torque_off(S)


def test_commands_from_before_the_outage_do_not_enable_torque(robot: RobotSpec) -> None:
    ctl = make(robot, watchdog='torque_off')
    command(robot, ctl, 0.0, 0)
    ctl.port_lost(S)
    command(robot, ctl, 0.1, S + 1)  # arrives during the outage
    seq = ctl.command_seq
    ctl.reconnected(robot.home - 0.2, torque_off=True, seq=seq)
    assert not ctl.torque_on and ctl.watchdog_active and ctl.watchdog_trips == 1
    assert ctl.step(robot.home - 0.2, S + 2).torque is None  # not fresh
    command(robot, ctl, 0.1, S + 3)
    assert run(ctl, robot.home - 0.2, S + 4).torque is True


def test_reconnect_moves_a_frozen_hold_target_to_where_the_arm_is(robot: RobotSpec) -> None:
    ctl = make(robot)
    command(robot, ctl, 0.0, 0)
    run(ctl, robot.home, S)  # watchdog: hold
    assert ctl.hold_target is not None
    ctl.port_lost(S)
    ctl.reconnected(robot.home - 0.1, torque_off=False, seq=ctl.command_seq)
    np.testing.assert_array_equal(ctl.hold_target, robot.home - 0.1)
    np.testing.assert_array_equal(run(ctl, robot.home - 0.1, 2 * S).goal, robot.home - 0.1)


def test_an_unknown_watchdog_action_is_refused(robot: RobotSpec) -> None:
    with pytest.raises(ValueError, match="watchdog must be 'hold' or 'torque_off', got 'x'"):
        make(robot, watchdog='x')


def test_clamp_step() -> None:
    out = clamp_step(np.zeros(3), np.array([1.0, -1.0, 0.05]), np.full(3, 0.1))
    np.testing.assert_allclose(out, [0.1, -0.1, 0.05])


def test_the_bus_is_dead_after_give_up_after_s_without_a_read(robot: RobotSpec) -> None:
    ctl = DriverControl(robot, robot.home, dt_s=DT, command_timeout_s=0.5, watchdog='hold',
                        goal_rate_limit=True, reset_speed=0.5, reconnect_min_s=0.05,
                        reconnect_max_s=0.4, give_up_after_s=2.0, now_ns=10 * S)
    assert not ctl.dead(12 * S)
    assert ctl.dead(12 * S + 1)
    ctl.state_read(12 * S)
    assert not ctl.dead(14 * S) and ctl.dead(14 * S + 1)
    never = make(robot)  # give_up_after_s = 0: keep trying forever
    assert not never.dead(10**6 * S)


def test_read_failures_warn_above_ten_percent_and_error_when_none_got_through() -> None:
    assert read_failure_level(0, 0) is None  # no reads in the period: nothing to judge
    assert read_failure_level(250, 0) is None
    assert read_failure_level(250, 25) is None  # 10 %: still OK
    level, message = read_failure_level(250, 80)  # 32 %, as with 5 % faults injected
    assert level == 'warn'
    assert message == '80 of 250 state reads failed (32 % > 10 %)'
    assert read_failure_level(250, 250) == (
        'error', 'bus not answering: all 250 state reads of the period failed')


def test_servos_stopped_by_their_bus_watchdog_resume_from_where_they_stopped(robot) -> None:
    ctl = make(robot)
    command(robot, ctl, 0.4, 0)
    run(ctl, robot.home, 1_000_000)  # one rate-limited step toward home + 0.4
    stopped = robot.home + 0.001
    ctl.servos_stopped(stopped)
    cycle = run(ctl, stopped, 2_000_000)
    # the next goal is one rate-limited step from where they stopped, not from the goal
    # written while they refused goals
    np.testing.assert_allclose(cycle.goal, clamp_step(stopped, robot.home + 0.4, ctl.max_step))


def test_driver_defaults_give_up_and_arm_the_servos_bus_watchdog() -> None:
    cfg = DriverConfig(port='/dev/ttyUSB0')
    assert cfg.give_up_after_s == 10.0
    assert cfg.bus_watchdog_ms == 200.0 and cfg.bus_watchdog_units == 10
    assert DriverConfig(port='p', bus_watchdog_ms=30.0).bus_watchdog_units == 2  # rounded up
    assert DriverConfig(port='p', bus_watchdog_ms=0.0).bus_watchdog_units == 0
    for bad in (10.0, 2560.0, -20.0, float('nan')):  # < 4 cycles at 250 Hz (16 ms), > 2540
        with pytest.raises(ConfigError, match='bus_watchdog_ms'):
            DriverConfig(port='p', bus_watchdog_ms=bad)
