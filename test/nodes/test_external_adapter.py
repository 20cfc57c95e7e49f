"""The external adapter over real DDS: an existing driver's topics mapped onto the contract."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from startup import start_up_error
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def raw_state(stamp_ns: int) -> JointState:
    """What a ros2_control joint_state_broadcaster sends: its own order, extra joints."""
    names = list(reversed(ROBOT.joint_names)) + ['gripper_finger']
    msg = messages.joint_state(names, stamp_ns, [10.0 + i for i in range(len(names))],
                               [0.5] * len(names), [0.1 * i for i in range(len(names))])
    return msg


def test_forward_position_mapping_both_ways(start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    out = ros_client.collect(Float64MultiArray, '/forward_position_controller/commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    order = 'wrist_roll,wrist_pitch,forearm_roll,elbow_pitch,shoulder_pitch,base_yaw'
    start_node('external_adapter', command_joints=order, diagnostics_period_s=0.3)
    raw = ros_client.publisher(JointState, '/joint_states_raw')
    cmd = ros_client.publisher(JointState, 'joint_commands')

    def got_state() -> bool:
        raw.publish(raw_state(123_000_000_456))
        return bool(states)

    ros_client.wait_for(got_state, 20, 'joint_states from the adapter')
    msg = states[-1][1]
    assert list(msg.name) == ROBOT.joint_names
    assert list(msg.position) == [15.0, 14.0, 13.0, 12.0, 11.0, 10.0]  # reordered, extra gone
    assert messages.stamp_to_ns(msg.header.stamp) == 123_000_000_456  # the source's stamp
    target = ROBOT.home + 0.1

    def got_command() -> bool:
        cmd.publish(messages.joint_state(ROBOT.joint_names, 0, target))
        return bool(out)

    ros_client.wait_for(got_command, 10, 'a forward_position_controller command')
    assert np.allclose(out[-1][1].data, target[::-1])  # in the controller's joint order
    cmd.publish(messages.joint_state(['base_yaw'], 0, [float('nan')]))
    bad = JointState()
    bad.name = ['base_yaw']
    bad.position = [100.0]  # clamped to the limit, not passed on as is
    cmd.publish(bad)
    ros_client.wait_for(lambda: out[-1][1].data[-1] == pytest.approx(ROBOT.upper[0]), 5,
                        'the command clamped to the limit')
    assert np.allclose(out[-1][1].data[:-1], target[::-1][:-1])  # the others held
    ros_client.wait_for(lambda: any(
        s.name.endswith('external adapter') and
        {kv.key: kv.value for kv in s.values}.get('commands_rejected') == '1'
        for _t, a in diags for s in a.status), 5, 'the rejection on /diagnostics')


def test_trajectory_mode_and_incomplete_states(start_node, ros_client):
    out = ros_client.collect(JointTrajectory, '/arm_controller/joint_trajectory')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('external_adapter', command_mode='trajectory',
               command_topic='/arm_controller/joint_trajectory', trajectory_time_s=0.05,
               diagnostics_period_s=0.3)
    raw = ros_client.publisher(JointState, '/joint_states_raw')
    cmd = ros_client.publisher(JointState, 'joint_commands')
    target = ROBOT.home - 0.1

    def got() -> bool:
        cmd.publish(messages.joint_state(ROBOT.joint_names, 0, target, [0.2] * ROBOT.n))
        raw.publish(messages.joint_state(['base_yaw'], 1, [0.0]))  # incomplete: dropped
        return bool(out)

    ros_client.wait_for(got, 20, 'a trajectory command')
    traj = out[-1][1]
    assert list(traj.joint_names) == ROBOT.joint_names
    (point,) = traj.points
    assert np.allclose(point.positions, target)
    assert np.allclose(point.velocities, 0.2)
    assert point.time_from_start.nanosec == 50_000_000
    ros_client.wait_for(lambda: any(
        s.name.endswith('external adapter') and s.level == DiagnosticStatus.ERROR
        and 'missing joints' in s.message for _t, a in diags for s in a.status), 5,
        'incomplete source states reported')


def test_bad_command_joints_exit_with_a_reason(start_node):
    err = start_up_error(start_node('external_adapter', command_joints='base_yaw,elbow'))
    assert 'command_joints' in err and 'elbow' in err


def test_partial_commands_wait_for_the_first_complete_state(start_node, ros_client):
    """Before the source's first complete state the other joints' positions are unknown."""
    out = ros_client.collect(Float64MultiArray, '/forward_position_controller/commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('external_adapter', diagnostics_period_s=0.3)
    raw = ros_client.publisher(JointState, '/joint_states_raw')
    cmd = ros_client.publisher(JointState, 'joint_commands')
    partial = messages.joint_state(['base_yaw'], 0, [0.5])

    def rejected() -> bool:
        cmd.publish(partial)
        raw.publish(messages.joint_state(['base_yaw'], 1, [0.0]))  # incomplete: no state yet
        return any(s.name.endswith('external adapter') and
                   int({kv.key: kv.value for kv in s.values}.get('commands_rejected', 0)) > 0
                   for _t, a in diags for s in a.status)

    ros_client.wait_for(rejected, 20, 'the partial command rejected')
    assert out == [], 'a partial command went out with home positions for the other joints'
    last = [s for _t, a in diags for s in a.status if s.name.endswith('external adapter')][-1]
    assert 'before the first complete state' in {kv.key: kv.value
                                                 for kv in last.values}['last_rejection']
    # once the source's state is complete, the same command is completed from it
    state = raw_state(5)  # positions 10 + i in reversed order: wrist_roll=10 .. base_yaw=15

    def sent() -> bool:
        raw.publish(state)
        cmd.publish(partial)
        return bool(out)

    ros_client.wait_for(sent, 10, 'the partial command after a complete state')
    expected = np.clip([15.0, 14.0, 13.0, 12.0, 11.0, 10.0], ROBOT.lower, ROBOT.upper)
    expected[0] = 0.5
    assert np.allclose(out[-1][1].data, expected)
