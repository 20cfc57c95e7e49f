"""DynamixelBus (the driver's ROS-free half) against the virtual servo bus, and its bad input."""

from __future__ import annotations

import math
import os
from pathlib import Path
import tempfile
import time

from bus_trace import measured_positions, unmeasured
import dynamixel_sdk.port_handler as sdk_port
import numpy as np
import pytest
from sdk_timeouts import sdk_latency_timer
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import BusError, ConfigError, PortLostError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.dynamixel.wire import is_stale
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.sdk_bus import open_error_message

ROBOT = load_robot('simreal_arm')
VELOCITY_LIMIT_REG = math.ceil(4.5 / ct.VELOCITY_UNIT_RAD_S)  # 188: 4.5 rad/s in 0.229 rpm


patient_timeouts = sdk_latency_timer(sdk_port, 100)  # the shared test machine is loaded


def spec_with(tmp_path: Path, edit) -> Path:
    """A copy of simreal_arm.yaml changed by ``edit(data)``."""
    data = yaml.safe_load(ROBOT.source.read_text())
    data['urdf'] = str(ROBOT.urdf)
    edit(data)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize('key, value, item', [
    ('gains.kp', 500.0, 'position_p_gain'),
    ('gains.kd', 50.0, 'position_d_gain'),
    ('limits.effort', 10.0, 'goal_current'),
])
def test_spec_values_outside_the_registers_fail_naming_the_key(tmp_path, key, value, item):
    group, name = key.split('.')

    def edit(data: dict) -> None:
        data['joints'][1][group][name] = value

    robot = load_robot(str(spec_with(tmp_path, edit)))
    with pytest.raises(ConfigError) as info:
        DynamixelBus(robot, '/unused', 1_000_000)
    text = str(info.value)
    assert f'joints[1].{key} (shoulder_pitch, servo ID 2)' in text
    assert item in text and 'change it in the robot spec' in text
    assert f'got {value!r}' in text


def test_profile_velocity_only_as_a_guard_and_within_its_register(tmp_path):
    assert [g['profile_velocity'] for g in DynamixelBus(ROBOT, '/x', 1).gains()] == [0] * 6
    guarded = DynamixelBus(ROBOT, '/x', 1, servo_velocity_limit=True).gains()
    assert [g['profile_velocity'] for g in guarded] == [VELOCITY_LIMIT_REG] * 6

    def edit(data: dict) -> None:
        data['joints'][0]['limits']['velocity'] = 1000.0

    fast = load_robot(str(spec_with(tmp_path, edit)))
    DynamixelBus(fast, '/x', 1)  # no profile written: any velocity limit will do
    with pytest.raises(ConfigError, match=r'joints\[0\]\.limits\.velocity \(base_yaw'):
        DynamixelBus(fast, '/x', 1, servo_velocity_limit=True)


def test_permission_denied_says_how_to_fix_it():
    err = PermissionError(13, 'Permission denied')
    assert 'dialout' in open_error_message('/dev/ttyUSB0', err)
    assert 'dialout' not in open_error_message('/dev/ttyUSB0', OSError(5, 'I/O error'))
    with tempfile.TemporaryDirectory() as tmp:  # not under pytest's 0700 tmp: nobody enters
        os.chmod(tmp, 0o755)
        dev = Path(tmp) / 'ttyUSB0'  # a device node the user may not open (here: root's)
        dev.write_bytes(b'')
        dev.chmod(0o600)
        text = open_as_someone_else(DynamixelBus(ROBOT, str(dev), 1_000_000), dev)
    assert 'Permission denied' in text
    assert 'usermod -aG dialout' in text


def open_as_someone_else(bus: DynamixelBus, dev: Path) -> str:
    """Open the port without the right to; return the error message."""
    as_root = os.geteuid() == 0
    if not as_root:
        dev.chmod(0)
    try:
        if as_root:
            os.seteuid(65534)  # nobody: root may open anything
        with pytest.raises(PortLostError) as info:
            bus.open()
    finally:
        if as_root:
            os.seteuid(0)
    return str(info.value)


def read_state_retried(bus: DynamixelBus, timeout_s: float = 5.0):
    """``bus.read_state()``, a sync read that times out retried until ``timeout_s``: beside
    the other worker in CI (one core busy) the emulator missed one (``sync read: timeout``),
    which the driver also retries in its next cycle."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return bus.read_state()
        except BusError:
            if time.monotonic() >= deadline:
                raise


def test_profile_velocity_guards_the_servo_speed(tmp_path):
    """Without the driver's goal ramp the servo's own profile keeps a jump at the limit."""
    with EmulatorProcess(link=tmp_path / 'ttyDXL') as emu:
        peaks = []
        for guard in (False, True):
            bus = DynamixelBus(ROBOT, emu.port, 1_000_000, servo_velocity_limit=guard)
            bus.open()
            try:
                bus.check_servos(5.0)
                bus.configure()
                assert bus.read_register(1, 'profile_velocity') == (
                    VELOCITY_LIMIT_REG if guard else 0)
                q0 = read_state_retried(bus).position
                goal = q0.copy()
                goal[0] = 1.5 if q0[0] < 0 else -1.5  # base_yaw: no gravity load
                bus.write_goal(goal)
                peak = 0.0
                deadline = time.monotonic() + 1.5
                while time.monotonic() < deadline:
                    try:
                        peak = max(peak, abs(bus.read_state().velocity[0]))
                    except BusError:
                        continue
                peaks.append(peak)
                assert abs(read_state_retried(bus).position[0] - goal[0]) < 0.05
            finally:
                bus.set_torque(False)
                bus.close()
        unguarded, guarded = peaks
        # the profile steps the servo's setpoint velocity to the limit (no acceleration
        # limit), so the link overshoots it briefly; unguarded a 3 rad jump reaches ~3x
        assert guarded <= 4.5 * 1.4, peaks
        assert unguarded > guarded * 1.5, peaks  # the guard really is what limits it


def test_hardware_error_fails_configure_until_rebooted(tmp_path):
    """An overloaded servo: configure names it and the fix; reboot_on_error clears it."""
    reality = tmp_path / 'quick_overload.yaml'
    reality.write_text('robot: simreal_arm\nimperfections: {overload_s: 0.2}\n')
    with EmulatorProcess(link=tmp_path / 'ttyDXL', reality=str(reality)) as emu:
        bus = DynamixelBus(ROBOT, emu.port, 1_000_000)
        bus.open()
        try:
            bus.check_servos(5.0)
            bus.configure()
            bus.write_register(2, 'goal_current', 20)  # 54 mA: far too weak for the shoulder
            state = bus.read_state()
            goal = state.position.copy()
            goal[1] = -1.38
            bus.write_goal(goal)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not bus.hardware_errors():
                time.sleep(0.05)
            assert bus.hardware_errors() == {2: ct.HW_OVERLOAD}
            assert bus.read_health().torque_enable[1] == 0  # the servo's Shutdown
            with pytest.raises(BusError) as info:
                bus.configure()
            text = str(info.value)
            assert 'servo ID 2 (shoulder_pitch): overload (0x20)' in text
            assert 'power-cycle' in text and 'reboot_on_error:=true' in text
            bus.configure(reboot_on_error=True)
            assert bus.hardware_errors() == {}
            assert bus.read_health().torque_enable == (1,) * ROBOT.n
            assert bus.read_register(2, 'goal_current') == bus.gains()[1]['goal_current']
        finally:
            bus.set_torque(False)
            bus.close()


@pytest.mark.parametrize('tick, last, since_s, stale', [
    (100, None, 0.0, False),     # the first answer of a servo
    (105, 100, 0.005, False),    # 5 ms later: fresh
    (101, 100, 0.001, False),    # one ms later: fresh
    (100, 100, 0.004, True),     # the same measurement again
    (99, 100, 0.004, True),      # an answer to an earlier request
    (100 - 1999, 100, 0.5, True),  # up to STALE_WINDOW_MS behind: stale
    (100 - 2000, 100, 0.5, False),  # further behind reads as a wrap forward: fresh
    (3, 32765, 0.006, False),    # across the wrap at 32768, forward: fresh
    (32765, 3, 0.006, True),     # across the wrap, backward: stale
    (100, 100, 1.0, False),      # the last accepted state is 1 s old: not compared
    (100, 100, 0.999, True),
])
def test_the_realtime_tick_stale_filter(tick, last, since_s, stale):
    assert is_stale(tick, last, since_s) is stale


def test_late_answers_are_never_read_as_fresh_states(tmp_path):
    """With 20 % of the answers 30 ms late, every state read is the servos' newest one."""
    trace = tmp_path / 'trace.txt'
    with EmulatorProcess(link=tmp_path / 'ttyDXL', faults='late=0.2,late_s=0.03,seed=4',
                         trace=trace) as emu:
        # set-up with a patient timeout (100 ms: late answers are only slow), then the reads
        # with a 6 ms one (2 ms latency timer), which answers 30 ms late miss
        bus = DynamixelBus(ROBOT, emu.port, 1_000_000, latency_timer_ms=100)
        bus.open()
        try:
            bus.check_servos(5.0)
            bus.configure()
            sdk_port.LATENCY_TIMER = 2
            states = []
            while len(states) < 150:
                try:
                    states.append(bus.read_state().ticks)
                except BusError:  # timeouts and stale answers, as expected
                    continue
                if len(states) == 1:  # base_yaw moves: every state after this one differs
                    goal = np.array([ROBOT.joints[k].servo.ticks_to_rad(t)
                                     for k, t in enumerate(states[0])])
                    goal[0] = 1.5 if goal[0] < 0 else -1.5
                    bus.write_goal(goal)
                time.sleep(0.002)
            stale = bus.comm_errors.get('stale', 0)
        finally:
            sdk_port.LATENCY_TIMER = 100
            bus.set_torque(False)
            bus.close()
    assert stale > 0, 'no late answer was caught: the filter was not exercised'
    # every state read is one of the sync reads the emulator answered, in order, never one
    # older than (or the same as) the previous state read
    assert unmeasured(states, measured_positions(trace, ROBOT)) == []


def test_a_late_answer_is_never_read_as_a_register(tmp_path):
    """A servo's late answer to an earlier READ is not taken as the register read next.

    The earlier request reads 4 bytes from address 0 (Model Number 1020 = 0x03FC first): cut
    to one byte by the SDK it read as Hardware Error Status 0xfc, and the driver refused to
    start, with late answers injected on a loaded host. The answer's length tells them apart.
    """
    # every answer 20 ms late: the earlier request's answer arrives after the next request
    # was sent (before it, the port's input would be dropped at that request)
    with EmulatorProcess(link=tmp_path / 'ttyDXL', faults='late=1.0,late_s=0.02,seed=1') as emu:
        bus = DynamixelBus(ROBOT, emu.port, 1_000_000, latency_timer_ms=100)
        bus.open()
        try:
            bus.check_servos(5.0)
            sid = bus.ids[2]
            tx = [0] * 14
            tx[4], tx[5], tx[7] = sid, 7, 0x02  # ID, LENGTH_L, READ
            tx[8:12] = [0, 0, 4, 0]  # address 0, 4 bytes
            port = bus._port()
            bus.ph.txPacket(port, tx)  # its answer is left on the line, unread
            port.is_using = False  # the SDK clears it only when it reads an answer
            value = bus.read_register(sid, bus.error_register)
        finally:
            bus.close()
    assert value == 0  # the SDK alone reads 252 (0xfc)
