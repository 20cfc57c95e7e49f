"""Gravity feed-forward on the goal (simreal_ros.hardware.gravity_ff), over the virtual STS bus.

The SO-101 on its virtual Feetech bus (the vendor's ``scservo_sdk`` through ``FeetechBus``,
nominal reality): its P/D position loop sags below a goal by the holding torque over kp, and
with the feed-forward goal it rests at the goal. Measured once: shoulder_lift at home sags
0.046 rad (model: 0.0446), with the feed-forward goal it rests 0.0019 rad off.
"""

from __future__ import annotations

from pathlib import Path
import time

import numpy as np
import pytest
import scservo_sdk.port_handler as sdk_port
from sdk_timeouts import sdk_latency_timer

from simreal_ros.bringup.planner import plan
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import BusError, ConfigError, PlanError
from simreal_ros.hardware.driver_config import DriverConfig
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.feetech.bus import FeetechBus
from simreal_ros.hardware.gravity_ff import GravityFeedForward

SO101 = load_robot('so101')


# the buses of these tests set it (100 ms, a loaded host); restored after each test
patient_timeouts = sdk_latency_timer(sdk_port, None)


def settled(bus: FeetechBus, timeout_s: float = 30.0) -> np.ndarray:
    """The position once two reads 0.2 s apart differ by less than 2 ticks on every joint."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            p = bus.read_state().position
        except BusError:  # a read starved on the loaded host: the next one
            continue
        if last is not None and np.max(np.abs(p - last)) < 2 * 2 * np.pi / 4096:
            return p
        last = p
    raise AssertionError(f'the arm did not settle within {timeout_s} s')


def test_the_feed_forward_goal_holds_the_pose_the_plain_goal_sags_below(tmp_path: Path):
    ff = GravityFeedForward(SO101)
    sag = -ff.offset(SO101.home)  # what the P loop leaves at home: tau_hold / kp
    lift = SO101.joint_names.index('shoulder_lift')
    assert sag[lift] == pytest.approx(0.0446, abs=0.002)  # 0.62 N*m over 14 N*m/rad
    with EmulatorProcess(link=tmp_path / 'ttySTS', robot='so101') as emu:
        bus = FeetechBus(SO101, emu.port, 1_000_000, latency_timer_ms=100.0)
        bus.open()
        try:
            bus.check_servos()
            bus.configure()
            bus.write_goal(SO101.home)
            plain = settled(bus) - SO101.home
            bus.write_goal(ff.goal(SO101.home))
            fed = settled(bus) - SO101.home
        finally:
            bus.close()
    # without: the modelled sag on the loaded joints (the emulator's friction adds a little)
    for k in (lift, SO101.joint_names.index('elbow_flex')):
        assert plain[k] == pytest.approx(sag[k], rel=0.15)
    # with it: the pose, on every joint, within a quarter of the shoulder's sag
    assert np.max(np.abs(fed)) < 0.25 * sag[lift], fed


def test_the_offset_goal_stays_inside_the_joint_limits():
    ff = GravityFeedForward(SO101)
    lift = SO101.joint_names.index('shoulder_lift')
    limits = SO101.joints[lift].limits
    for edge in (limits.lower, limits.upper):  # at both ends the offset points inward
        q = SO101.home.copy()
        q[lift] = edge
        offset = ff.offset(q)[lift]
        assert abs(offset) > 0.03 and limits.lower < edge + offset < limits.upper
        assert ff.goal(q)[lift] == pytest.approx(edge + offset)
    wrist = SO101.joint_names.index('wrist_flex')
    q = SO101.home.copy()
    q[wrist] = SO101.joints[wrist].limits.upper  # here it points out: clamped onto the limit
    assert ff.offset(q)[wrist] > 0.0005
    assert ff.goal(q)[wrist] == SO101.joints[wrist].limits.upper


@pytest.mark.parametrize('value', [-0.1, 1.5, float('nan')])
def test_a_fraction_outside_0_1_is_one_config_line(value):
    with pytest.raises(ConfigError, match=r'gravity_ff: expected a fraction in \[0, 1\]'):
        DriverConfig(port='/dev/ttyUSB0', gravity_ff=value)


def _driver(args: dict[str, str]) -> dict:
    nodes = plan({'backend': 'real', 'robot': 'so101', 'port': '/dev/ttyUSB0', **args})
    return next(n for n in nodes if n.kind == 'dynamixel_driver').parameters


def test_the_plan_turns_it_on_with_a_leader_and_leaves_it_off_otherwise():
    teleop = {'teleop': 'leader', 'leader_port': '/dev/ttyUSB1'}
    assert _driver(teleop)['gravity_ff'] == 1.0
    assert 'gravity_ff' not in _driver({**teleop, 'gravity_ff': 'false'})
    assert 'gravity_ff' not in _driver({})  # a policy learned the sag of its simulated servos
    assert _driver({'gravity_ff': 'true'})['gravity_ff'] == 1.0
    with pytest.raises(PlanError, match=r'^gravity_ff:=true: the servo driver offsets its goals: '
                                        r'use it with backend:=real or twin'):
        plan({'backend': 'sim', 'gravity_ff': 'true'})
