"""The Dynamixel driver node over real DDS, on the virtual servo bus through the real SDK."""

from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import dynamixel_sdk as sdk
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.virtual_bus import EmulatorProcess
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')
TICK = 2 * np.pi / 4096


def latest(samples: list) -> JointState:
    assert samples, 'no message received'
    return samples[-1][1]


def driver_statuses(diags: list) -> list[DiagnosticStatus]:
    return [st for _t, arr in diags for st in arr.status if st.name.endswith('dynamixel bus')]


def values(st: DiagnosticStatus) -> dict:
    return {kv.key: kv.value for kv in st.values}


def wait_for_states(ros_client, states: list, drv, n: int = 20) -> None:
    """Wait for the driver's first joint_states; on failure show what the driver printed."""
    try:
        ros_client.wait_for(lambda: len(states) > n, 30, 'joint_states')
    except AssertionError as exc:
        raise AssertionError(f'{exc}; driver output:\n{drv.output()}') from None


def command(positions) -> JointState:
    msg = JointState()
    msg.name = ROBOT.joint_names
    msg.position = [float(p) for p in positions]
    return msg


@pytest.fixture
def emulator(ros_env, tmp_path):
    with EmulatorProcess(link=tmp_path / 'ttyDXL', env=ros_env) as emu:
        yield emu


def test_driver_tracks_commands_on_the_contract(emulator, start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    drv = start_node('dynamixel_driver', port=emulator.port, rate_hz=200.0,
                     diagnostics_period_s=0.5)
    wait_for_states(ros_client, states, drv, 20)
    n0, t0 = len(states), time.monotonic()
    time.sleep(2.0)
    rate = (len(states) - n0) / (time.monotonic() - t0)
    # never faster than configured; the lower bound is loose (shared CI cores)
    assert 40 < rate < 215, f'{rate:.0f} Hz joint_states at rate_hz=200'
    msg = latest(states)
    assert list(msg.name) == ROBOT.joint_names
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == ROBOT.n
    stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in states]
    assert np.all(np.diff(stamps) > 0)
    assert abs(stamps[-1] - time.time_ns()) < 1e9
    pub = ros_client.publisher(JointState, 'joint_commands')
    target = ROBOT.home + np.array([0.3, -0.2, 0.25, 0.4, -0.3, 0.5])

    def tracking() -> bool:
        pub.publish(command(target))
        return np.abs(np.array(latest(states).position) - target).max() < 0.05

    ros_client.wait_for(tracking, 10, 'joints tracking the command')
    ros_client.wait_for(lambda: values(driver_statuses(diags)[-1])['commands_received'] != '0',
                        5, 'commands counted on /diagnostics')
    st = driver_statuses(diags)[-1]
    assert st.level == DiagnosticStatus.OK, st.message
    assert values(st)['connected'] == 'True'
    assert drv.proc.poll() is None, drv.output()


def test_crc_errors_and_timeouts_never_publish_a_wrong_position(ros_env, tmp_path,
                                                                   start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with EmulatorProcess(link=tmp_path / 'ttyDXL', env=ros_env,
                         faults='crc=0.02,timeout=0.01,seed=3') as emu:
        drv = start_node('dynamixel_driver', port=emu.port, rate_hz=200.0,
                         latency_timer_ms=2.0, diagnostics_period_s=0.3)
        wait_for_states(ros_client, states, drv, 50)
        time.sleep(1.0)  # the arm settles where torque came on
        n0 = len(states)
        time.sleep(3.0)

        def errors_counted() -> bool:
            v = values(driver_statuses(diags)[-1])
            return int(v.get('comm.corrupt (CRC)', 0)) > 0 and int(v.get('comm.timeout', 0)) > 0

        ros_client.wait_for(errors_counted, 10, 'CRC errors and timeouts on /diagnostics')
        held = np.array([m.position for _t, m in states[n0:]])
        assert len(held) > 100
        # holding still: every published position is the held one, to the encoder tick
        assert np.abs(held - np.median(held, axis=0)).max() <= 2 * TICK + 1e-9
        assert drv.proc.poll() is None, drv.output()


def test_unplug_and_replug_recovers_with_diagnostics_error_then_ok(ros_env, tmp_path,
                                                                   start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with EmulatorProcess(link=tmp_path / 'ttyDXL', env=ros_env,
                         faults='unplug_at=5.0,replug_at=6.0') as emu:
        drv = start_node('dynamixel_driver', port=emu.port, rate_hz=200.0,
                         diagnostics_period_s=0.25)
        wait_for_states(ros_client, states, drv, 20)
        emu.wait_for_line('unplugged', 10)
        t_unplug = time.time_ns()
        ros_client.wait_for(lambda: any(st.level == DiagnosticStatus.ERROR and 'port lost' in
                                        st.message for st in driver_statuses(diags)), 5,
                            'diagnostics ERROR for the lost port')
        emu.wait_for_line('replugged', 5)
        t_replug = time.time_ns()
        n = len(states)
        ros_client.wait_for(lambda: len(states) > n + 10, 10, 'joint_states after replug')
        first_after = messages.stamp_to_ns(states[n][1].header.stamp)
        ros_client.wait_for(lambda: driver_statuses(diags)[-1].level == DiagnosticStatus.OK,
                            5, 'diagnostics OK again')
        stamps = np.array([messages.stamp_to_ns(m.header.stamp) for _t, m in states])
        gap = stamps[(stamps > t_unplug + 200_000_000) & (stamps < t_replug)]
        assert gap.size == 0, 'no state may be published while the port is gone'
        assert first_after >= t_replug - 50_000_000
        levels = [st.level for st in driver_statuses(diags)]
        first_error = levels.index(DiagnosticStatus.ERROR)
        assert DiagnosticStatus.OK in levels[first_error:]
        v = values(driver_statuses(diags)[-1])
        assert int(v['port_lost']) == 1 and int(v['reconnects']) == 1
        assert drv.proc.poll() is None, drv.output()


def test_watchdog_holds_position_when_commands_stop(emulator, start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    drv = start_node('dynamixel_driver', port=emulator.port, rate_hz=200.0,
                     command_timeout_s=0.3, diagnostics_period_s=0.2)
    wait_for_states(ros_client, states, drv, 20)
    pub = ros_client.publisher(JointState, 'joint_commands')
    start = np.array(latest(states).position)
    for k in range(60):  # base_yaw ramps at ~1 rad/s, then the commands stop
        pub.publish(command(np.r_[start[0] + 0.02 * k, ROBOT.home[1:]]))
        time.sleep(0.02)
    far = np.r_[3.0, ROBOT.home[1:]]  # the ramp would have continued toward here
    ros_client.wait_for(lambda: values(driver_statuses(diags)[-1])['watchdog_active'] == 'True',
                        5, 'the watchdog on /diagnostics')
    assert driver_statuses(diags)[-1].level == DiagnosticStatus.WARN
    time.sleep(0.5)
    n = len(states)
    time.sleep(0.5)
    held = np.array([m.position for _t, m in states[n:]])
    assert np.ptp(held[:, 0]) <= 3 * TICK  # standing still
    assert held[-1, 0] < far[0] - 1.0
    pub.publish(command(ROBOT.home))  # commands resume: the watchdog releases
    ros_client.wait_for(lambda: values(driver_statuses(diags)[-1])['watchdog_active'] ==
                        'False', 5, 'the watchdog released')


def read_torque(port_path: str) -> list[int]:
    port = sdk.PortHandler(port_path)
    assert port.openPort() and port.setBaudRate(1_000_000)
    ph = sdk.PacketHandler(2.0)
    out = []
    for j in ROBOT.joints:
        value, result, _error = ph.read1ByteTxRx(port, j.servo.servo_id, 64)
        assert result == sdk.COMM_SUCCESS
        out.append(value)
    port.closePort()
    return out


@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM'])
def test_torque_is_off_after_shutdown(sig, emulator, start_node, ros_client):
    import os
    import signal
    states = ros_client.collect(JointState, 'joint_states')
    drv = start_node('dynamixel_driver', port=emulator.port)
    wait_for_states(ros_client, states, drv, 20)
    os.killpg(drv.proc.pid, getattr(signal, sig))
    assert drv.wait(15) == 0, drv.output()
    assert 'torque disabled' in drv.output()
    assert read_torque(emulator.port) == [0] * ROBOT.n


def test_watchdog_torque_off_and_reset_to_home(emulator, start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    drv = start_node('dynamixel_driver', port=emulator.port, command_timeout_s=0.3,
                     watchdog='torque_off', reset_speed=0.8, diagnostics_period_s=0.2)
    wait_for_states(ros_client, states, drv, 20)
    pub = ros_client.publisher(JointState, 'joint_commands')
    away = ROBOT.home + np.array([0.6, 0.0, 0.0, 0.5, 0.0, -0.6])
    ros_client.wait_for(lambda: pub.publish(command(away)) or
                        np.abs(np.array(latest(states).position) - away).max() < 0.06, 10,
                        'moving away from home')
    ros_client.wait_for(lambda: values(driver_statuses(diags)[-1])['torque_on'] == 'False',
                        5, 'torque off by the watchdog')
    res = ros_client.call(Trigger, '/dynamixel_driver/reset', Trigger.Request())
    assert res.success and 'rad/s' in res.message
    n = len(states)
    pub.publish(command(away))  # ignored: the reset move (torque on again) runs to its end
    ros_client.wait_for(lambda: np.abs(np.array(latest(states).position)
                                       - ROBOT.home).max() < 0.06, 15, 'back at home')
    moving = np.array([m.velocity for _t, m in states[n:]])[:, [0, 3, 5]]  # no gravity load
    assert 0.4 < np.abs(moving).max() < 0.8 * 1.6  # speed-limited (plus servo lag)


def spec_with(tmp_path, edit) -> str:
    """A copy of simreal_arm.yaml changed by ``edit(data)``."""
    import yaml
    data = yaml.safe_load(ROBOT.source.read_text())
    data['urdf'] = str(ROBOT.urdf)
    edit(data)
    path = tmp_path / 'arm.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_start_up_fails_naming_missing_and_wrong_servos(emulator, start_node, tmp_path):
    def edit(data: dict) -> None:
        data['joints'][5]['servo_id'] = 9              # nobody answers at 9
        data['joints'][0]['model_number'] = 1060       # an XM430-W210 is expected at 1

    drv = start_node('dynamixel_driver', port=emulator.port, robot=spec_with(tmp_path, edit))
    assert drv.wait(30) == 1, drv.output()
    out = drv.output()
    assert 'no answer from servo ID 9 (wrist_roll)' in out
    assert 'wrong servo at ID 1 (base_yaw): model number 1020, expected 1060' in out
    assert read_torque(emulator.port)[1:5] == [0, 0, 0, 0]  # nothing was left enabled
    drv = start_node('dynamixel_driver', name='d2', port=str(tmp_path / 'no_such_tty'))
    assert drv.wait(30) == 1
    assert 'no_such_tty does not exist' in drv.output()
    drv = start_node('dynamixel_driver', name='d3', port=emulator.port, watchdog='explode')
    assert drv.wait(30) == 1
    assert "watchdog: expected one of ('hold', 'torque_off'), got 'explode'" in drv.output()
