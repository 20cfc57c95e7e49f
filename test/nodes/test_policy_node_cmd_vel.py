"""The policy node feeds cmd_vel to the velocity_command term, and zero once it times out."""

from __future__ import annotations

from pathlib import Path
import time

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Twist
import numpy as np
import pytest
from sensor_msgs.msg import JointState
import torch
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')
SPEC = load_policy_spec('simreal_arm_reach')
NAMES = ROBOT.joint_names


class CommandEcho(torch.nn.Module):
    """Action of the first joint = the velocity_command's vx (observation index 24)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], 6)
        out[:, 0] = x[:, 24]
        return out


def echo_spec(tmp_path: Path) -> Path:
    torch.jit.script(CommandEcho()).save(str(tmp_path / 'echo.pt'))
    data = yaml.safe_load(SPEC.source.read_text())
    data.update(policy='echo', model='echo.pt')
    data['safety'] = {'ramp_s': 0.2, 'stale_after_periods': 3}
    data['action']['rate_limit_rad'] = 0.5
    data['observation'].append({'term': 'velocity_command', 'timeout_s': 0.5})
    p = tmp_path / 'echo.yaml'
    p.write_text(yaml.safe_dump(data))
    return p


def test_cmd_vel_reaches_the_network_and_times_out_to_zero(start_node, ros_client, tmp_path):
    commands = ros_client.collect(JointState, 'joint_commands')
    ros_client.collect(DiagnosticArray, '/diagnostics')
    states = ros_client.publisher(JointState, 'joint_states')
    ros_client.node.create_timer(0.01, lambda: states.publish(messages.joint_state(
        NAMES, time.time_ns(), ROBOT.home, np.zeros(len(NAMES)))))
    start_node('policy', policy=str(echo_spec(tmp_path)), enable_on_start=True)
    home0 = float(ROBOT.home[0])

    def first_joint() -> float:
        return float(commands[-1][1].position[0]) if commands else float('nan')
    ros_client.wait_for(lambda: abs(first_joint() - home0) < 1e-9, 30,
                        'running at the default pose without a cmd_vel')
    cmd = ros_client.publisher(Twist, 'cmd_vel')
    msg = Twist()
    msg.linear.x = 0.4
    sending = [True]
    ros_client.node.create_timer(0.05, lambda: sending[0] and cmd.publish(msg))
    ros_client.wait_for(lambda: abs(first_joint() - (home0 + 0.2)) < 1e-6, 10,
                        'the first joint at default + 0.5 x vx')
    sending[0] = False
    # no more cmd_vel: after timeout_s the term is zero and the joint returns to default
    ros_client.wait_for(lambda: abs(first_joint() - home0) < 1e-9, 5,
                        'the zero command once cmd_vel is older than 0.5 s')
