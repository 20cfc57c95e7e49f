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
    ros_client.wait_for(lambda: len(states) > 20, 30, 'joint_states')
    n0, t0 = len(states), time.monotonic()
    time.sleep(2.0)
    rate = (len(states) - n0) / (time.monotonic() - t0)
    assert 120 < rate < 260, f'{rate:.0f} Hz joint_states at rate_hz=200'  # loosely
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
