"""The leader role of the virtual bus and ``simreal calibrate-leader`` over it (real SDK)."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, EmulatorError
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.emulator.operator import Operator, OperatorConfig, StsLeaderArm
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.feetech import control_table as sts_ct
from simreal_ros.hardware.feetech.bus import FeetechBus
from simreal_ros.teleop.control import load_calibration

ROBOT = load_robot('simreal_arm')
TICK = 2 * np.pi / 4096


def simreal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'simreal_ros', *args], capture_output=True,
                          text=True, timeout=120)


def test_operators_start_still_at_the_offset_pose_and_stay_in_the_limits() -> None:
    for name in ('chirp', 'waypoints'):
        op = Operator(ROBOT, OperatorConfig.parse(f'{name},offset_rad=0.1,start_s=1,'
                                                  f'amplitude=0.4'))
        assert np.allclose(op.position(0.5), np.clip(ROBOT.home + 0.1, ROBOT.lower,
                                                     ROBOT.upper))
        q = np.array([op.position(t) for t in np.arange(0, 30, 0.01)])
        assert np.all(q >= ROBOT.lower) and np.all(q <= ROBOT.upper)
        assert np.ptp(q, axis=0).min() > 0.3  # every joint is moved
    with pytest.raises(ConfigError, match='--operator: name: expected one of'):
        OperatorConfig.parse('wave')
    with pytest.raises(ConfigError, match='--operator: period_s: expected a number > 0'):
        OperatorConfig.parse('chirp,period_s=0')


def test_an_operator_on_cue_holds_still_until_started_and_counts_start_s_from_then() -> None:
    op = Operator(ROBOT, OperatorConfig.parse('chirp,amplitude=0.3,start_s=0.5,cue=1'))
    still = op.position(0.0)
    assert np.array_equal(op.position(100.0), still)  # no cue: held however long
    op.cue(100.0)
    assert np.array_equal(op.position(100.4), still)  # start_s counts from the cue
    late = Operator(ROBOT, OperatorConfig.parse('chirp,amplitude=0.3'))
    assert np.allclose(op.position(103.0), late.position(2.5))
    with pytest.raises(ValueError, match='the operator started already'):
        op.cue(101.0)
    with pytest.raises(ValueError, match='not on cue'):
        late.cue(1.0)
    with pytest.raises(ConfigError, match='--operator: cue: expected 0 or 1'):
        OperatorConfig.parse('chirp,cue=2')


@pytest.mark.parametrize('robot', ['simreal_arm', 'so101'])
def test_a_leader_on_cue_starts_moving_on_the_start_line(tmp_path, robot: str) -> None:
    """Through the process: still before ``start``, moving after; a second one refused."""
    spec = load_robot(robot)
    with EmulatorProcess(link=tmp_path / 'ttyLeader', robot=robot, role='leader',
                         operator='chirp,amplitude=0.3,ramp_s=0.1,cue=1') as emu:
        bus = (DynamixelBus(spec, emu.port, spec.bus_baud) if robot == 'simreal_arm' else
               FeetechBus(spec, emu.port, spec.bus_baud, latency_timer_ms=100.0))
        bus.open()
        try:
            bus.check_servos(2.0)
            q0 = bus.read_state().position
            time.sleep(1.0)  # a leader not on cue (start_s 0) would have moved by now
            assert np.abs(bus.read_state().position - q0).max() <= TICK
            sent = time.time_ns()
            started = emu.start_operator()
            # the physics state at the cue, not the emulator's start (over 1 s before it)
            assert sent - 500_000_000 < started < time.time_ns()
            deadline = time.monotonic() + 10
            while np.abs(bus.read_state().position - q0).max() < 0.05:
                assert time.monotonic() < deadline, 'the leader did not move after start'
                time.sleep(0.05)
            with pytest.raises(EmulatorError, match='error: the operator started already'):
                emu.start_operator()
        finally:
            bus.close()


def test_the_leader_bus_reads_the_operator_pose_through_the_sdk(tmp_path) -> None:
    with EmulatorProcess(link=tmp_path / 'ttyLeader', role='leader',
                         operator='waypoints,offset_rad=0.2,start_s=1000') as emu:
        bus = DynamixelBus(ROBOT, emu.port, ROBOT.bus_baud)
        bus.open()
        try:
            bus.check_servos(2.0)
            bus.set_torque(True)  # accepted and ignored: the operator's hand holds the arm
            q = bus.read_state().position
        finally:
            bus.close()
    want = np.clip(ROBOT.home + 0.2, ROBOT.lower, ROBOT.upper)
    assert np.abs(q - want).max() <= TICK


def test_calibrate_leader_writes_offsets_that_map_the_pose_home(tmp_path) -> None:
    out = tmp_path / 'cal' / 'leader.yaml'
    with EmulatorProcess(link=tmp_path / 'ttyLeader', role='leader',
                         operator='waypoints,offset_rad=0.2,start_s=1000') as emu:
        r = simreal('calibrate-leader', '--port', emu.port, '--out', str(out), '--samples', '30',
                    '--sign', 'elbow_pitch=-1')
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f'wrote {out}: 30 readings')
    mapping = load_calibration(out, ROBOT)
    leader = np.clip(ROBOT.home + 0.2, ROBOT.lower, ROBOT.upper)
    assert np.abs(mapping.map(leader) - ROBOT.home).max() <= TICK
    assert [j.sign for j in mapping.joints] == [1, 1, -1, 1, 1, 1]
    # elbow_pitch reversed: offset = leader - home / -1
    assert mapping.joints[2].offset_rad == pytest.approx(leader[2] + ROBOT.home[2], abs=TICK)


def test_calibrate_leader_refuses_a_moving_leader_with_one_error_line(tmp_path) -> None:
    with EmulatorProcess(link=tmp_path / 'ttyLeader', role='leader',
                         operator='chirp,amplitude=0.3,ramp_s=0') as emu:
        r = simreal('calibrate-leader', '--port', emu.port, '--out', str(tmp_path / 'c.yaml'),
                    '--samples', '100')
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and len(errors) == 1, r.stderr
    assert 'the leader moved during calibration' in errors[0]
    assert 'Traceback' not in r.stderr
    assert not (tmp_path / 'c.yaml').exists()


def test_emulate_operator_without_the_leader_role_is_one_error_line(tmp_path,
                                                                    simreal_cli) -> None:
    r = simreal_cli('emulate', '--link', str(tmp_path / 'tty'), '--operator', 'chirp')
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and errors == [
        'simreal emulate: error: --operator moves a leader arm: use it with --role leader']
    assert 'Traceback' not in r.stderr


def test_the_operator_presses_and_releases_the_button_read_through_the_sdk(tmp_path) -> None:
    op = Operator(ROBOT, OperatorConfig.parse('chirp,button_id=6,button_press_s=0.5,'
                                              'button_release_s=0.25'))
    assert [op.button_pressed(t) for t in (0.0, 0.49, 0.5, 0.74, 0.75)] == \
        [True, True, False, False, True]
    assert Operator(ROBOT, OperatorConfig.parse('chirp')).button_pressed(1e6) is True
    with pytest.raises(ConfigError, match='--operator: button_id: expected a servo ID 1..252'):
        OperatorConfig.parse('chirp,button_id=1.5')
    with EmulatorProcess(link=tmp_path / 'ttyLeader', role='leader',
                         operator='chirp,button_id=6,button_press_s=0.5,'
                                  'button_release_s=0.5') as emu:
        bus = DynamixelBus(ROBOT, emu.port, ROBOT.bus_baud)
        bus.open()
        try:
            bus.check_servos(2.0)
            seen = set()
            deadline = time.monotonic() + 30
            while seen != {0, 1} and time.monotonic() < deadline:
                seen.add(bus.read_address(6, 224, 1))
            others = {bus.read_address(sid, 224, 1) for sid in (1, 2, 3, 4, 5)}
        finally:
            bus.close()
    assert seen == {0, 1}  # pressed and released, as the script says
    assert others == {0}  # only the button's servo has it wired


def test_emulate_operator_button_on_a_missing_servo_is_one_error_line(tmp_path) -> None:
    r = simreal('emulate', '--link', str(tmp_path / 'ttyLeader'), '--role', 'leader',
                '--operator', 'chirp,button_id=9')
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and errors == [
        'simreal emulate: error: --operator: button_id: expected a servo ID of simreal_arm '
        '[1, 2, 3, 4, 5, 6], got 9']
    assert 'Traceback' not in r.stderr


def test_the_sts_leader_bus_reads_the_operator_pose_through_the_sdk(tmp_path) -> None:
    """LeRobot's SO-101 leader on the virtual STS bus: the vendor's scservo_sdk reads the
    scripted operator's pose, every joint (the gripper too) within a tick, no load."""
    so101 = load_robot('so101')
    with EmulatorProcess(link=tmp_path / 'ttyLeader', robot='so101', role='leader',
                         operator='waypoints,offset_rad=0.2,start_s=1000') as emu:
        bus = FeetechBus(so101, emu.port, so101.bus_baud, latency_timer_ms=100.0)
        bus.open()
        try:
            bus.check_servos(2.0)
            bus.set_torque(False)  # what the leader node does; the hand moves the arm
            state = bus.read_state()
        finally:
            bus.close()
    want = np.clip(so101.home + 0.2, so101.lower, so101.upper)
    assert np.abs(state.position - want).max() <= TICK
    assert np.all(state.effort == 0.0)


def test_an_sts_leader_sags_in_a_soft_hand_and_has_no_button() -> None:
    """Nothing but the hand holds an STS leader up (no current mode): a 10 N*m/rad hand lets
    it sag by its holding torque / 10 whatever the servos are told."""
    so101 = load_robot('so101')
    arm = StsLeaderArm(so101, Operator(so101, OperatorConfig.parse(
        'waypoints,start_s=1000,hand_stiffness_nm_rad=10')))
    arm.write(1, [(sts_ct.BY_NAME['torque_enable'], 1)])  # accepted; the hand still wins
    arm.step(5)
    gravity = arm.sim.probe(so101.home).gravity
    assert abs(gravity[1]) > 0.5  # shoulder_lift holds the arm: a visible sag
    sag = arm.true_position() - so101.home
    assert np.abs(sag + gravity / 10).max() < 0.05 * np.abs(gravity).max() / 10
    with pytest.raises(ConfigError, match=r'--operator: button_id: expected 0: the so101 '
                                          r'leader has STS servos'):
        StsLeaderArm(so101, Operator(so101, OperatorConfig.parse('chirp,button_id=6')))
