"""``simreal launch`` for every shipped arm: the plan of each backend and engine, and one real
launch of the OpenManipulator-X whose gripper command moves its mimic fingers on ``/tf``."""

from __future__ import annotations

import json
from pathlib import Path
import signal
import subprocess
import sys

import pytest
from startup import cli_error_line

from simreal_ros.core.robot import load_robot

REPO = Path(__file__).resolve().parents[2]
ARMS = ('so101', 'koch', 'openmanipulator_x')
ENGINES = ('mujoco', 'pybullet')
#: the nodes of each backend (docs/launch.md), robot in every one
NODES = {
    'sim': ['/sim_bridge', '/state_publisher'],
    'sim2sim': ['/sim_a/sim_bridge', '/sim_b/sim_bridge', '/state_publisher',
                '/sim_b/state_publisher'],
    'twin': ['/dynamixel_driver', '/twin/sim_bridge', '/state_publisher',
             '/twin/state_publisher'],
    'real': ['/dynamixel_driver', '/state_publisher'],
}


def dry_run(simreal_cli, *args: str) -> list[dict]:
    r = simreal_cli('launch', *args, '--dry-run')
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines() if x.startswith('{')]


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('backend', ['sim', 'sim2sim'])
@pytest.mark.parametrize('arm', ARMS)
def test_sim_backends_plan_every_arm_on_every_engine(simreal_cli, arm, backend, engine):
    specs = dry_run(simreal_cli, f'backend:={backend}', f'robot:={arm}', f'engine:={engine}')
    assert [s['node'] for s in specs] == NODES[backend]
    assert {s['parameters']['robot'] for s in specs} == {arm}
    assert {s['parameters']['engine'] for s in specs if 'sim_bridge' in s['node']} == {engine}


@pytest.mark.parametrize('backend', ['real', 'twin'])
@pytest.mark.parametrize('arm', ['koch', 'openmanipulator_x'])
def test_hardware_backends_plan_the_dynamixel_arms(simreal_cli, arm, backend):
    specs = dry_run(simreal_cli, f'backend:={backend}', f'robot:={arm}', 'port:=/dev/ttyUSB0')
    assert [s['node'] for s in specs] == NODES[backend]
    assert {s['parameters']['robot'] for s in specs} == {arm}
    assert specs[0]['parameters']['port'] == '/dev/ttyUSB0'


@pytest.mark.parametrize('backend', ['real', 'twin'])
def test_hardware_backends_plan_the_so101_on_its_feetech_bus(simreal_cli, backend):
    specs = dry_run(simreal_cli, f'backend:={backend}', 'robot:=so101', 'port:=/dev/ttyUSB0')
    assert load_robot('so101').bus_family == 'feetech'
    assert {s['parameters']['robot'] for s in specs} == {'so101'}
    # the driver of the Feetech bus, not the Dynamixel one
    assert [s['node'] for s in specs] == [
        n.replace('/dynamixel_driver', '/feetech_driver') for n in NODES[backend]]
    assert specs[0]['parameters']['port'] == '/dev/ttyUSB0'
    assert r_note(simreal_cli, backend) == 1


def r_note(simreal_cli, backend: str) -> int:
    """How many ``note:`` lines about the missing Bus Watchdog the plan printed."""
    r = simreal_cli('launch', f'backend:={backend}', 'robot:=so101', 'port:=/dev/ttyUSB0',
                    '--dry-run')
    return sum('have no Bus Watchdog' in line and line.startswith('note: ')
               for line in r.stderr.splitlines())


def test_the_so101_leader_is_planned_and_compensation_on_it_is_one_clear_line(simreal_cli):
    """LeRobot's SO-101 leader (STS3215) is read with torque off; the STS has no current mode,
    so leader_compensation:= on it is refused before anything starts."""
    args = ('backend:=real', 'robot:=so101', 'port:=/dev/ttyUSB0', 'teleop:=leader',
            'leader_robot:=so101', 'leader_port:=/dev/ttyUSB1')
    leader = next(s for s in dry_run(simreal_cli, *args) if s['node'] == '/leader')
    assert (leader['parameters']['robot'], leader['parameters']['leader_robot'],
            leader['parameters']['port']) == ('so101', 'so101', '/dev/ttyUSB1')
    assert leader['parameters'].get('compensation', False) is False
    r = simreal_cli('launch', *args, 'leader_compensation:=on', '--dry-run')
    assert cli_error_line(r) == (
        'simreal launch: error: leader_compensation:=on: the leader arm so101 has STS3215 '
        'servos (shoulder_pan), which have no current-control mode for gravity compensation; '
        'leave out leader_compensation:= (the leader is then read with torque off, as LeRobot '
        'reads its SO-101 leader), or use a leader arm whose servos all have current control '
        '(XM430, XL330)')


@pytest.mark.ros
@pytest.mark.e2e
def test_openmanipulator_sim_launch_moves_its_fingers_on_tf(ros_env, ros_client):
    """backend:=sim robot:=openmanipulator_x: the gripper command opens the fingers on /tf."""
    from sensor_msgs.msg import JointState
    from tf2_msgs.msg import TFMessage

    from simreal_ros.ros import qos
    robot = load_robot('openmanipulator_x')
    states = ros_client.collect(JointState, 'joint_states')
    tf = ros_client.collect(TFMessage, '/tf', qos.TF)
    proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'launch', 'backend:=sim',
                             'robot:=openmanipulator_x'], env=ros_env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def finger_y() -> float | None:
            for _, m in reversed(tf[-50:]):
                for t in m.transforms:
                    if t.child_frame_id == 'gripper_left_link':
                        return float(t.transform.translation.y)
            return None

        ros_client.wait_for(lambda: len(states) > 5 and finger_y() is not None, 60,
                            'joint_states and the fingers on /tf')
        assert list(states[-1][1].name) == robot.joint_names
        assert finger_y() == pytest.approx(0.021, abs=1e-3)  # home: gripper at 0 rad
        pub = ros_client.publisher(JointState, 'joint_commands')
        cmd = JointState()
        cmd.name = robot.joint_names
        cmd.position = [float(x) for x in robot.home[:-1]] + [1.0]  # open: 1 rad

        def opened() -> bool:
            pub.publish(cmd)
            return abs(states[-1][1].position[-1] - 1.0) < 0.02

        ros_client.wait_for(opened, 30, 'the gripper at 1 rad in joint_states')
        # the left finger 15 mm out on /tf, from the gripper angle alone (0.015 m/rad)
        ros_client.wait_for(lambda: abs(finger_y() - (0.021 + 0.015)) < 5e-4, 10,
                            'the left finger 15 mm out on /tf')
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
