"""The SO-101 as a real robot: ``simreal emulate`` serves its six STS3215 (IDs 1-6) on the
virtual Feetech bus, ``simreal launch backend:=real`` (and ``twin``) drives them through the
vendor's ``scservo_sdk``, and a command moves the arm and opens the gripper."""

from __future__ import annotations

from pathlib import Path
import signal
import subprocess
import sys

import numpy as np
import pytest
from sensor_msgs.msg import JointState

from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('so101')
#: home + a move of every joint; the gripper opens to 0.8 rad
TARGET = ROBOT.home + np.array([0.3, -0.2, -0.3, 0.2, 0.3, 0.8])


@pytest.mark.parametrize('backend', ['real', 'twin'])
def test_so101_on_its_virtual_sts_bus_tracks_a_command(ros_env, ros_client, tmp_path, backend):
    states = ros_client.collect(JointState, 'joint_states')
    twin = ros_client.collect(JointState, 'twin/joint_states')
    with EmulatorProcess(link=tmp_path / 'ttySO101', robot='so101', env=ros_env) as emu:
        proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'launch',
                                 f'backend:={backend}', 'robot:=so101', f'port:={emu.port}'],
                                env=ros_env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            ros_client.wait_for(lambda: len(states) > 10, 120, 'joint_states from the driver')
            msg = states[-1][1]
            assert list(msg.name) == ROBOT.joint_names
            assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 6
            pub = ros_client.publisher(JointState, 'joint_commands')
            cmd = JointState()
            cmd.name = ROBOT.joint_names
            cmd.position = [float(x) for x in TARGET]

            def at_target(received: list) -> bool:
                pub.publish(cmd)
                if not received:
                    return False
                q = np.array(received[-1][1].position)
                return bool(np.abs(q - TARGET).max() < 0.05)

            ros_client.wait_for(lambda: at_target(states), 30,
                                'the arm and gripper at the commanded pose')
            if backend == 'twin':  # the twin got the same command
                ros_client.wait_for(lambda: at_target(twin), 30,
                                    'the twin at the commanded pose on twin/joint_states')
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            print(out)
        assert proc.returncode == 0, out
        assert '/feetech_driver' in out
        assert 'have no Bus Watchdog' in out  # the plan's note
