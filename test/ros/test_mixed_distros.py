"""One ROS graph across two distributions: Kilted and Jazzy nodes, each in its own venv.

A sim bridge started with the other distribution's rclpy (the venv ``SIMREAL_OTHER_VENV``,
which the Makefile points at the other of ``.venv`` and ``.venv-jazzy``) takes commands from
and sends joint states to a node of this one; a recorder on the other distribution records
commands published here, and the bag opens and reports here. The same type hashes must appear
on every endpoint of the graph.

Without the other venv the tests skip, naming it; under ``CI=true`` they fail instead
(``make test-distros`` builds both venvs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import pytest
from sensor_msgs.msg import JointState

from simreal_ros.bag import BagReader
from simreal_ros.bag.provenance import ros_distro
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('simreal_arm')
OTHER = Path(os.environ.get('SIMREAL_OTHER_VENV', '') or '/nonexistent')
OTHER_PYTHON = OTHER / 'bin' / 'python'


@pytest.fixture(scope='module')
def other() -> tuple[str, str]:
    """(python, distribution) of the other venv; skip, or under CI fail, when it is missing."""
    if not OTHER_PYTHON.is_file():
        why = (f'no venv of the other ROS distribution at SIMREAL_OTHER_VENV={OTHER} '
               f'(make venv ROS_DISTRO=jazzy, or kilted, builds it)')
        if os.environ.get('CI') == 'true':
            pytest.fail(why)
        pytest.skip(why)
    distro = subprocess.run(
        [str(OTHER_PYTHON), '-c', 'from simreal_ros.bag.provenance import ros_distro; '
         'print(ros_distro())'], env=other_env(dict(os.environ)), capture_output=True,
        text=True, timeout=60, check=True).stdout.strip()
    assert distro != ros_distro(), f'{OTHER} is on {distro} too, as this run'
    return str(OTHER_PYTHON), distro


def other_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for the other venv: its ament prefix and libraries only, this simreal_ros.

    The wheels' bootstrapper re-executes each interpreter once with its venv's libraries on
    ``LD_LIBRARY_PATH`` and marks that done in ``_ROS_WHEELS_BOOTSTRAP_COMPLETE``; a child
    inheriting both would load this venv's libraries (Jazzy's rclpy then fails to import:
    ``libfastrtps.so.2.14: cannot open shared object file``).
    """
    env = dict(env)
    env.pop('_ROS_WHEELS_BOOTSTRAP_COMPLETE', None)
    env['LD_LIBRARY_PATH'] = os.pathsep.join(
        p for p in env.get('LD_LIBRARY_PATH', '').split(os.pathsep)
        if p and not p.startswith(sys.prefix))
    env['AMENT_PREFIX_PATH'] = str(OTHER)  # this venv's first would load its rmw libraries
    env['VIRTUAL_ENV'] = str(OTHER)
    env['PYTHONPATH'] = str(REPO)
    return env


@pytest.fixture
def start_other(other, ros_env, tmp_path):
    """Start a planner NodeSpec with the other venv's interpreter; stopped at teardown."""
    procs: list[NodeProcess] = []

    def start(kind: str, **parameters: object) -> NodeProcess:
        p = NodeProcess(NodeSpec(kind, kind, '', dict(parameters), ()), other_env(ros_env),
                        tmp_path, python=other[0])
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


def rihs01(info) -> str:
    return f'RIHS0{info.topic_type_hash.version}_{info.topic_type_hash.value.hex()}'


def test_bridge_on_the_other_distribution_tracks_commands_from_this_one(start_other,
                                                                         ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    bridge = start_other('sim_bridge', publish_rate_hz=100.0)
    ros_client.wait_for(lambda: len(states) > 10, 30, 'joint_states from the other distro')
    pub = ros_client.publisher(JointState, 'joint_commands')
    target = ROBOT.home + np.array([0.3, -0.2, 0.25, 0.4, -0.3, 0.5])
    msg = messages.joint_state(ROBOT.joint_names, 0, target, np.zeros(ROBOT.n))
    ros_client.wait_for(lambda: pub.get_subscription_count() >= 1, 10, 'the bridge subscribed')
    pub.publish(msg)
    ros_client.wait_for(lambda: np.abs(np.array(states[-1][1].position) - target).max()
                        < 0.05, 15, 'the bridge tracking the command')
    assert list(states[-1][1].name) == ROBOT.joint_names
    # one type hash on both sides of the graph (RIHS01, the same definitions in both)
    node = ros_client.node
    endpoints = (node.get_publishers_info_by_topic('/joint_states')
                 + node.get_subscriptions_info_by_topic('/joint_states')
                 + node.get_subscriptions_info_by_topic('/joint_commands'))
    assert {rihs01(i) for i in endpoints} == {
        TypeRegistry().definition('sensor_msgs/msg/JointState')[1]}
    assert bridge.proc.poll() is None, bridge.output()


def test_a_bag_recorded_on_the_other_distribution_reports_here(start_other, ros_client,
                                                               other, ros_env, tmp_path):
    bag = tmp_path / 'bag'
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    pub = ros_client.publisher(JointState, 'joint_commands')
    rec = start_other('recorder', bag=str(bag), topics=['joint_commands'],
                      diagnostics_period_s=0.2, discovery_period_s=0.2)
    ros_client.wait_for(lambda: pub.get_subscription_count() >= 1, 30,
                        'the recorder subscribed to joint_commands')
    sent = [ROBOT.home + 0.01 * i for i in range(50)]
    for i, q in enumerate(sent):
        pub.publish(messages.joint_state(ROBOT.joint_names, 1_000_000_000 + i, q,
                                         np.zeros(ROBOT.n)))
    ros_client.wait_for(lambda: any(
        kv.key == 'messages_written' and kv.value == '50'
        for _t, arr in diags[-5:] for st in arr.status if st.name.endswith(': recorder')
        for kv in st.values), 20, '50 messages written')
    assert rec.stop() == 0, rec.output()
    info = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bag', 'info', str(bag)],
                          env=ros_env, capture_output=True, text=True, timeout=60)
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    assert report['ros_distro'] == other[1]
    assert report['topics'] == {'/joint_commands': {'type': 'sensor_msgs/msg/JointState',
                                                    'count': 50}}
    with BagReader(bag) as b:
        got = [np.array(b.deserialize(m).position) for m in b.messages()]
    np.testing.assert_array_equal(np.array(got), np.array(sent))

