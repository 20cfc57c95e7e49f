"""The OpenManipulator-X as a real robot: ``simreal emulate`` serves its five XM430-W350 (IDs
11-15) on a pseudo-terminal, ``simreal launch backend:=real`` drives them through the real SDK,
and a command moves the arm and opens the gripper, whose mimic fingers follow on ``/tf``."""

from __future__ import annotations

from pathlib import Path
import signal
import subprocess
import sys

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.ros import qos

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('openmanipulator_x')


def test_openmanipulator_on_its_virtual_bus_tracks_a_command(ros_env, ros_client, tmp_path):
    states = ros_client.collect(JointState, 'joint_states')
    tf = ros_client.collect(TFMessage, '/tf', qos.TF)
    with EmulatorProcess(link=tmp_path / 'ttyOMX', robot='openmanipulator_x', env=ros_env) as emu:
        proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'launch', 'backend:=real',
                                 'robot:=openmanipulator_x', f'port:={emu.port}'],
                                env=ros_env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            ros_client.wait_for(lambda: len(states) > 10, 120, 'joint_states from the driver')
            msg = states[-1][1]
            assert list(msg.name) == ROBOT.joint_names
            assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 5
            pub = ros_client.publisher(JointState, 'joint_commands')
            target = ROBOT.home + np.array([0.4, 0.3, -0.3, 0.2, 1.0])  # gripper: open 1 rad
            cmd = JointState()
            cmd.name = ROBOT.joint_names
            cmd.position = [float(x) for x in target]

            def tracking() -> bool:
                pub.publish(cmd)
                q = np.array(states[-1][1].position)
                return bool(np.abs(q - target).max() < 0.05)

            ros_client.wait_for(tracking, 30, 'the arm and gripper at the commanded pose')

            def finger_y() -> float | None:
                for _, m in reversed(tf[-50:]):
                    for t in m.transforms:
                        if t.child_frame_id == 'gripper_left_link':
                            return float(t.transform.translation.y)
                return None

            # the finger follows the gripper servo's measured angle at 0.015 m/rad
            ros_client.wait_for(lambda: finger_y() is not None and abs(
                finger_y() - (0.021 + 0.015 * states[-1][1].position[-1])) < 1e-3, 10,
                'the left finger on /tf where the gripper angle puts it')
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            print(out)
        assert proc.returncode == 0, out
