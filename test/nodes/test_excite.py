"""The excitation node over real DDS."""

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from startup import start_up_error

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def test_excite_publishes_limited_commands_then_exits_zero(start_node, ros_client):
    cmds = ros_client.collect(JointState, 'joint_commands')
    # waits for the test's subscription: without it, discovery that took longer than the 2.5 s
    # run on a loaded machine (seen on Jazzy and Kilted) left the test with no command at all
    p = start_node('excite', pattern='waypoints', duration_s=2.5, rate_hz=100.0, seed=4,
                   amplitude=5.0, wait_for_subscribers=1)
    assert p.wait(timeout=30) == 0, p.output()
    # the node waits for the acknowledgement of its last (home) command before it exits
    ros_client.wait_for(lambda: len(cmds) > 150 and np.allclose(
        cmds[-1][1].position, ROBOT.home, rtol=0, atol=1e-9), 5, 'commands ending at home')
    pos = np.array([m.position for _t, m in cmds])
    vel = np.array([m.velocity for _t, m in cmds])
    assert list(cmds[0][1].name) == ROBOT.joint_names
    assert np.all(pos >= ROBOT.lower) and np.all(pos <= ROBOT.upper)
    assert np.all(np.abs(vel) <= ROBOT.velocity_limit)
    np.testing.assert_allclose(pos[-1], ROBOT.home, atol=1e-9)  # ends at home
    stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in cmds]
    assert np.all(np.diff(stamps) > 0)
    assert 'back at home' in p.output()


def test_ctrl_c_during_the_excitation_is_a_clean_stop(start_node, ros_client):
    cmds = ros_client.collect(JointState, 'joint_commands')
    p = start_node('excite', pattern='chirp', duration_s=60.0, rate_hz=100.0,
                   wait_for_subscribers=1)
    ros_client.wait_for(lambda: len(cmds) >= 20, 30, 'the excitation under way')
    code = p.stop()  # SIGINT, as Ctrl-C in a terminal
    out = p.log_path.read_text()
    assert code == 0, out
    assert 'Traceback' not in out


def test_excite_rejects_an_unknown_pattern(start_node):
    err = start_up_error(start_node('excite', pattern='zigzag'))
    assert 'pattern' in err and 'chirp' in err
