"""``simreal policy``, ``goal``, ``topic list|echo`` against real nodes over real DDS.

Each command once against a real node (the policy node, the state publisher, this test's own
publisher) and once with bad input: exit 2, exactly one ``error:`` line, no traceback.
"""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import String
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.ros import messages, qos

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]
ROBOT = load_robot('simreal_arm')
SPEC = load_policy_spec('simreal_arm_reach')
NAMES = ROBOT.joint_names


def simreal(args: list[str], env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'simreal_ros', *args], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def cli(simreal_cli, domain_id: int, monkeypatch: pytest.MonkeyPatch):
    """``simreal`` in this process on this test's domain (the ROS tools read ROS_DOMAIN_ID).

    For the refusals: 0.01-1 s each instead of a fresh interpreter's 2-6 s; each command
    keeps one refusal through a real process (below and in the real-node tests).
    """
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain_id))
    return simreal_cli


def one_error(r: subprocess.CompletedProcess) -> str:
    """The one ``error:`` line of a refused command (exit 2, no traceback)."""
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and len(errors) == 1, (r.returncode, r.stdout, r.stderr)
    assert 'Traceback' not in r.stderr
    return errors[0]


def policy_values(diags: list) -> dict[str, str]:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(': policy'):
                return {kv.key: kv.value for kv in st.values}
    raise LookupError('no policy diagnostics yet')


def documents(stdout: str) -> list:
    """The YAML messages ``topic echo`` printed, each ended by a ``---`` line."""
    parts = stdout.split('---\n')
    assert parts[-1] == '', stdout
    return [yaml.safe_load(p) for p in parts[:-1]]


class FakeBackend:
    """joint_states at 100 Hz from the test process (stamped with the wall clock)."""

    def __init__(self, client, q: np.ndarray) -> None:
        self.pub = client.publisher(JointState, 'joint_states')
        self.q = q
        self.timer = client.node.create_timer(0.01, self.tick)

    def tick(self) -> None:
        self.pub.publish(messages.joint_state(NAMES, time.time_ns(), self.q,
                                              np.zeros(len(NAMES))))


def tolerant_spec(tmp_path: Path) -> str:
    """simreal_arm_reach holding only after 2 s without joint_states (3 periods, 60 ms, in
    the shipped spec): the test process publishes them, and a stall of its timer thread under
    the suite's load once put the node in ``hold`` just before ``disable``."""
    data = yaml.safe_load(SPEC.source.read_text())
    data['model'] = str(SPEC.model)
    data['safety']['stale_after_periods'] = 100
    path = tmp_path / 'tolerant_reach.yaml'
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_policy_enable_and_disable_a_real_policy_node(start_node, ros_client, ros_env,
                                                      tmp_path):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    policy = start_node('policy', policy=tolerant_spec(tmp_path), diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: policy_values(diags)['mode'] == 'disabled', 60,
                        'the policy node up')
    assert 'disabled, waiting for /policy/enable (simreal policy enable)' in policy.output()
    # no joint_states yet: refused, with the node's reason on the one error: line
    err = one_error(simreal(['policy', 'enable'], ros_env))
    assert err == ('simreal policy: error: /policy refused: no joint_states received yet: '
                   'cannot ramp from an unknown pose (waiting for joint_states on '
                   '/joint_states)')
    FakeBackend(ros_client, ROBOT.home.copy())
    ros_client.wait_for(lambda: 'first joint_states on /joint_states' in policy.output(), 20,
                        'the first joint_states at the policy node')
    r = simreal(['policy', 'enable'], ros_env)
    assert r.returncode == 0, r.stderr + policy.output()
    assert r.stdout.startswith('ramping to the default pose over ')
    ros_client.wait_for(lambda: policy_values(diags)['mode'] == 'running', 30,
                        'the policy running after the ramp')
    ros_client.wait_for(lambda: 'waiting for a goal on /goal' in policy.output(), 10,
                        'the goal hint in the log')
    r = simreal(['policy', 'disable'], ros_env)
    assert (r.returncode, r.stdout) == (0, 'disabled (was running)\n'), r.stderr
    ros_client.wait_for(lambda: policy_values(diags)['mode'] == 'disabled', 10,
                        'the policy disabled')
    assert policy.proc.poll() is None, policy.output()


def test_policy_enable_without_a_policy_node_is_one_error_line(cli):
    err = one_error(cli('policy', 'enable', '--timeout', '1'))
    assert 'service /policy/enable not available within 1.0 s' in err


def test_goal_reaches_a_real_policy_node(start_node, ros_client, ros_env):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    policy = start_node('policy', policy='simreal_arm_reach', diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: policy_values(diags)['goals_received'] == '0', 60,
                        'the policy node up')
    default = [float(x) for x in policy_values(diags)['goal_rad'].split()]
    assert default == pytest.approx(SPEC.default, abs=1e-5)  # no goal yet: the default pose
    goal = ROBOT.home + np.array([0.8, 0.3, -0.5, 0.6, -0.4, 1.0])
    r = simreal(['goal', *[f'{x:.6g}' for x in goal]], ros_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith('goal on /goal: base_yaw ')
    ros_client.wait_for(lambda: policy_values(diags)['goals_received'] == '1', 10,
                        'the goal at the policy node')
    received = [float(x) for x in policy_values(diags)['goal_rad'].split()]
    assert received == pytest.approx(goal, abs=1e-5)
    assert 'goal on /goal: base_yaw ' in policy.output()
    # --names/--positions in another order: the node maps them onto its joints
    second = ROBOT.home + np.array([-0.9, -0.4, 0.4, -0.5, 0.5, -0.8])
    r = simreal(['goal', '--names', *NAMES[::-1],
                 '--positions', *[f'{x:.6g}' for x in second[::-1]]], ros_env)
    assert r.returncode == 0, r.stderr
    ros_client.wait_for(lambda: policy_values(diags)['goals_received'] == '2', 10,
                        'the second goal at the policy node')
    received = [float(x) for x in policy_values(diags)['goal_rad'].split()]
    assert received == pytest.approx(second, abs=1e-5)


@pytest.mark.parametrize('args, needle', [
    (['0.1', '0.2'], 'expected 6 joint positions (rad) in the order'),
    (['--names', 'base_yaw', 'elbow', '--positions', '0', '0'], "unknown joints ['elbow']"),
    (['0', '0', '0', '0', '0', 'nan'], "wrist_roll: 'nan' is not a finite number"),
    (['0', '0', '0', '0', '0', '0', '--timeout', '1'], 'no subscriber of /goal within 1 s'),
], ids=['count', 'unknown-joint', 'nan', 'no-subscriber'])
def test_goal_bad_input_is_one_error_line(cli, args, needle):
    assert needle in one_error(cli('goal', *args))


def test_goal_and_topic_bad_input_in_a_real_process(ros_env):
    """One refusal of each command through ``python -m simreal_ros`` (the rest in-process)."""
    assert 'expected 6 joint positions (rad) in the order' in one_error(
        simreal(['goal', '0.1', '0.2'], ros_env))
    assert '--count must be >= 1, got 0' in one_error(
        simreal(['topic', 'echo', '/joint_states', '--count', '0'], ros_env))


def test_topic_list_shows_a_real_publishers_topics_and_types(start_node, ros_client, ros_env):
    description = ros_client.collect(String, '/robot_description', qos.LATCHED)
    start_node('state_publisher')
    ros_client.wait_for(lambda: description, 30, 'the state publisher up')
    # both forms at once: each spends its fixed 5 s spin time discovering the graph
    runs = [subprocess.Popen([sys.executable, '-m', 'simreal_ros', 'topic', 'list',
                              '--spin-time', '5', *extra], env=ros_env, cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for extra in ([], ['--no-types'])]
    (out, err), (out_no_types, err_no_types) = (p.communicate(timeout=60) for p in runs)
    assert runs[0].returncode == 0, err
    lines = out.splitlines()
    assert '/robot_description [std_msgs/msg/String]' in lines
    assert '/tf_static [tf2_msgs/msg/TFMessage]' in lines
    assert '/joint_states [sensor_msgs/msg/JointState]' in lines  # its subscription
    assert runs[1].returncode == 0, err_no_types
    assert '/robot_description' in out_no_types.splitlines()


def test_topic_echo_prints_real_messages(start_node, ros_client, ros_env):
    description = ros_client.collect(String, '/robot_description', qos.LATCHED)
    start_node('state_publisher')
    ros_client.wait_for(lambda: description, 30, 'the state publisher up')
    # latched: the echo subscribes transient local, so it gets the one message published
    r = simreal(['topic', 'echo', '/robot_description', '--once'], ros_env)
    assert r.returncode == 0, r.stderr
    assert documents(r.stdout) == [{'data': ROBOT.urdf.read_text()}]
    q = ROBOT.home + 0.25
    FakeBackend(ros_client, q)
    r = simreal(['topic', 'echo', 'joint_states', '--count', '2'], ros_env)
    assert r.returncode == 0, r.stderr
    docs = documents(r.stdout)
    assert len(docs) == 2
    for doc in docs:
        assert list(doc) == ['header', 'name', 'position', 'velocity', 'effort']
        assert doc['name'] == list(NAMES) and doc['velocity'] == [0.0] * len(NAMES)
        assert doc['position'] == pytest.approx(q, abs=1e-12)
        assert doc['header']['frame_id'] == '' and doc['header']['stamp']['sec'] > 0


@pytest.mark.parametrize('args, needle', [
    (['list', '--spin-time', '0'], '--spin-time must be > 0 s, got 0'),
    (['echo', '/no_such_topic', '--timeout', '1'], 'no publisher of /no_such_topic appeared '
                                                   'within 1 s'),
    (['echo', '/bad topic'], "'/bad topic' is not a valid topic name"),
    (['echo', '/joint_states', '--count', '0'], '--count must be >= 1, got 0'),
], ids=['spin-time', 'absent', 'bad-name', 'count'])
def test_topic_bad_input_is_one_error_line(cli, args, needle):
    assert needle in one_error(cli('topic', *args))



def test_episode_start_and_discard_on_a_real_episode_recorder(start_node, ros_env, tmp_path):
    directory = tmp_path / 'episodes'
    directory.mkdir()
    start_node('episodes', directory=str(directory), task='wave', operator='ada')
    # nothing open: the recorder's refusal is the one error: line (its service appears first)
    err = one_error(simreal(['episode', 'stop', '--timeout', '60'], ros_env))
    assert err == ('simreal episode: error: /episodes/episode/stop refused: no episode is '
                   'open: call ~/episode/start first')
    r = simreal(['episode', 'start'], ros_env)
    assert (r.returncode, r.stdout) == (0, f'episode 0 started: {directory}/episode_0000\n'), \
        r.stderr
    assert (directory / 'episode_0000' / 'bag').is_dir()
    r = simreal(['episode', 'discard'], ros_env)
    assert (r.returncode, r.stdout) == (0, 'episode episode_0000 discarded\n'), r.stderr
    assert list(directory.iterdir()) == []


def test_episode_without_a_recorder_is_one_error_line(cli):
    err = one_error(cli('episode', 'start', '--timeout', '1'))
    assert 'service /episodes/episode/start not available within 1.0 s' in err
