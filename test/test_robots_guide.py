"""docs/robots.md, followed step by step for a new 2-DoF arm, as its reader would.

The spec is the guide's own YAML block and every command run here is a command line of the
guide (asserted), run as a ``simreal`` process in the guide's working directory
``my_robot/`` with ``SIMREAL_MODEL_PATH=$PWD``. The vendor's description package (URDF with
``package://`` STL meshes) is written by test/robot_files.py.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from robot_files import write_description_package

from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[1]
GUIDE = (REPO / 'docs' / 'robots.md').read_text(encoding='utf-8')
JOINTS = ['shoulder', 'elbow']
OFFSET = np.array([0.4, -0.5])
TTY = '/tmp/ttyMYARM'  # the guide's port; each test run uses its own


def guide_spec() -> str:
    """The spec of the guide's step 2: its indented block that starts with ``# my_arm.yaml``."""
    lines = GUIDE.split('    # my_arm.yaml\n', 1)[1].splitlines()
    block = []
    for line in lines:
        if line and not line.startswith('    '):
            break
        block.append(line[4:])
    return '\n'.join(block).strip() + '\n'


def guide_command(line: str) -> list[str]:
    """The arguments after ``simreal`` of a command line that the guide shows (asserted)."""
    assert f'    {line}\n' in GUIDE, f'docs/robots.md does not show {line!r}'
    words = line.split()
    assert words[0] == 'simreal'
    return words[1:]


@pytest.fixture
def my_robot(tmp_path: Path, ros_env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """Steps 1-2: ``my_robot/`` with the description package and the guide's spec."""
    work = tmp_path / 'my_robot'
    write_description_package(work)
    (work / 'my_arm.yaml').write_text(guide_spec(), encoding='utf-8')
    env = dict(ros_env, SIMREAL_MODEL_PATH=str(work), PYTHONPATH=str(REPO))
    return work, env


def simreal(args: list[str], work: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'simreal_ros', *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)


def check_step(work: Path, env: dict[str, str]) -> None:
    """Step 4: ``simreal robot check`` passes with the summary line."""
    r = simreal(guide_command('simreal robot check my_arm.yaml'), work, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == (f"{work / 'my_arm.yaml'}: robot 'my_arm' is OK: 2 joints (shoulder, "
                        f'elbow), URDF model {work}/my_arm_description/urdf/my_arm.urdf, '
                        'dynamixel servo IDs [1, 2]\n')


def run_launch(args: list[str], work: Path, env: dict[str, str], ros_client) -> None:
    """Launch, see ``joint_states`` of the two joints, command a pose, see it reached, stop."""
    from sensor_msgs.msg import JointState

    from simreal_ros.ros import messages
    states = ros_client.collect(JointState, '/joint_states')
    pub = ros_client.publisher(JointState, '/joint_commands')
    proc = subprocess.Popen([sys.executable, '-m', 'simreal_ros', *args], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        def started() -> bool:
            assert proc.poll() is None, f'the launch ended early: {proc.communicate()[0]}'
            return bool(states) and list(states[-1][1].name) == JOINTS

        ros_client.wait_for(started, 60, 'joint_states of shoulder and elbow')
        home = np.array([0.3, 0.6])
        target = home + OFFSET

        def reached() -> bool:
            assert proc.poll() is None, f'the launch ended early: {proc.communicate()[0]}'
            pub.publish(messages.joint_state(JOINTS, 0, target))
            time.sleep(0.02)  # a command stream, as a policy's (the wait is the deadline)
            # kp 6-8 N m/rad holds the 0.6 kg arm within a few hundredths against gravity
            return bool(np.abs(np.array(states[-1][1].position) - target).max() < 0.1)

        ros_client.wait_for(reached, 60, f'joint_states at {target.tolist()}')
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out


@pytest.mark.e2e
def test_steps_1_to_6_a_new_arm_checked_and_run_in_both_engines(my_robot, ros_client):
    work, env = my_robot
    check_step(work, env)
    run_launch(guide_command('simreal launch backend:=sim robot:=my_arm.yaml'), work, env,
               ros_client)
    run_launch(guide_command('simreal launch backend:=sim robot:=my_arm.yaml engine:=pybullet'),
               work, env, ros_client)


@pytest.mark.e2e
def test_step_7_the_new_arm_on_the_virtual_servo_bus(my_robot, ros_client, tmp_path,
                                                     monkeypatch):
    work, env = my_robot
    emulate = guide_command(f'simreal emulate --robot my_arm.yaml --link {TTY}')
    link = tmp_path / 'ttyMYARM'
    launch = guide_command(f'simreal launch backend:=real robot:=my_arm.yaml port:={TTY}')
    assert emulate[1:3] == ['--robot', 'my_arm.yaml']  # what EmulatorProcess runs
    monkeypatch.chdir(work)  # the emulator reads the guide's relative robot:= path
    with EmulatorProcess(link=link, robot='my_arm.yaml', env=env) as emu:
        run_launch([w.replace(TTY, str(emu.port)) for w in launch], work, env, ros_client)
