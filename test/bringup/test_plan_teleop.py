"""teleop:=leader in the plan: the leader node on leader_port:=, on every backend."""

from __future__ import annotations

import pytest

from simreal_ros.bringup.planner import plan
from simreal_ros.errors import PlanError
from simreal_ros.teleop.control import LeaderConfig


@pytest.mark.parametrize('backend, extra', [('sim', {}), ('real', {'port': '/dev/ttyUSB0'}),
                                            ('twin', {'port': '/dev/ttyUSB0'})])
def test_teleop_adds_the_leader_node_on_every_backend(backend, extra) -> None:
    nodes = plan({'backend': backend, 'teleop': 'leader', 'leader_port': '/dev/ttyUSB1',
                  'teleop_start': 'wait', 'teleop_tolerance': '0.05', **extra})
    leaders = [n for n in nodes if n.kind == 'leader']
    assert len(leaders) == 1
    p = leaders[0].parameters
    assert (p['port'], p['start_mode'], p['start_tolerance_rad'], p['deadman_on_start']) == (
        '/dev/ttyUSB1', 'wait', 0.05, True)
    assert leaders[0].fqn == '/leader'


def test_teleop_errors_name_the_argument() -> None:
    with pytest.raises(PlanError, match='teleop:=leader needs leader_port:='):
        plan({'teleop': 'leader'})
    with pytest.raises(PlanError, match='teleop:=leader and excite:=chirp would both publish '
                                        'joint_commands'):
        plan({'teleop': 'leader', 'leader_port': '/dev/ttyUSB1', 'excite': 'chirp'})
    with pytest.raises(PlanError, match='leader settings: leader: start_tolerance_rad: '
                                        'expected a number > 0, got -0.1'):
        plan({'teleop': 'leader', 'leader_port': '/dev/ttyUSB1', 'teleop_tolerance': '-0.1'})
    with pytest.raises(PlanError, match="teleop_start:='jump' is not valid"):
        plan({'teleop': 'leader', 'leader_port': '/dev/ttyUSB1', 'teleop_start': 'jump'})


def test_teleop_adds_the_episode_recorder_with_the_metadata() -> None:
    nodes = plan({'teleop': 'leader', 'leader_port': '/dev/ttyUSB1', 'task': 'pick the cube',
                  'operator': 'ada', 'episode_cameras': 'camera', 'episodes_dir': '/tmp/eps'})
    ep = next(n for n in nodes if n.kind == 'episodes')
    assert ep.parameters == {
        'robot': 'simreal_arm', 'directory': '/tmp/eps',
        'topics': ['joint_states', 'leader/joint_states', 'joint_commands', 'camera/image_raw'],
        'task': 'pick the cube', 'operator': 'ada', 'calibration': ''}
    nodes = plan({'teleop': 'leader', 'leader_port': '/dev/ttyUSB1', 'episodes': 'false'})
    assert [n.kind for n in nodes if n.kind in ('leader', 'episodes')] == ['leader']


def test_leader_button_and_gripper_arguments() -> None:
    base = {'teleop': 'leader', 'leader_port': '/dev/ttyUSB1'}
    p = next(n for n in plan({**base, 'leader_button': '6',
                              'leader_gripper': 'wrist_roll,trigger_open=0,trigger_closed=0.4,'
                                                'open=-0.3,closed=0.3'})
             if n.kind == 'leader').parameters
    assert (p['button_id'], p['gripper_joint'], p['gripper_trigger_open_rad'],
            p['gripper_trigger_closed_rad'], p['gripper_open_rad'], p['gripper_closed_rad']) == (
        6, 'wrist_roll', 0.0, 0.4, -0.3, 0.3)
    p = next(n for n in plan(base) if n.kind == 'leader').parameters
    assert p['button_id'] == 0 and 'gripper_joint' not in p
    with pytest.raises(PlanError, match=r'leader settings: leader: button_id: expected a servo '
                                        r'ID of the leader simreal_arm \[1, 2, 3, 4, 5, 6\] '
                                        r'\(0 = no button\), got 7'):
        plan({**base, 'leader_button': '7'})
    with pytest.raises(PlanError, match="leader_button:='x' is not valid; expected a servo ID"):
        plan({**base, 'leader_button': 'x'})
    with pytest.raises(PlanError, match="leader_gripper:='wrist_roll,open=0' is not valid; "
                                        'expected JOINT,trigger_open=R,trigger_closed=R,open=R,'
                                        r'closed=R \(missing trigger_open\)'):
        plan({**base, 'leader_gripper': 'wrist_roll,open=0'})
    with pytest.raises(PlanError, match='leader settings: leader: gripper_joint: expected a '
                                        'joint of simreal_arm'):
        plan({**base, 'leader_gripper': 'finger,trigger_open=0,trigger_closed=1,open=0,'
                                        'closed=1'})
    with pytest.raises(PlanError, match='leader_gripper:=: grip: expected key=value'):
        plan({**base, 'leader_gripper': 'wrist_roll,grip'})


def test_leader_compensation_argument() -> None:
    base = {'teleop': 'leader', 'leader_port': '/dev/ttyUSB1'}

    def params(text: str) -> dict:
        return next(n for n in plan({**base, 'leader_compensation': text})
                    if n.kind == 'leader').parameters

    assert 'compensation' not in params('')
    assert params('on')['compensation'] is True
    p = params('gravity_fraction=0.7,max_current_a=0.25')
    assert (p['compensation'], p['gravity_fraction'], p['max_current_a']) == (True, 0.7, 0.25)
    with pytest.raises(PlanError, match='leader settings: leader: gravity_fraction: expected a '
                                        'number <= 1.0, got 2.0'):
        params('gravity_fraction=2')
    with pytest.raises(PlanError, match=r'leader_compensation:=: strong: expected key=value with '
                                        r"a key among \['gravity_fraction'"):
        params('strong')


def test_an_sts_leader_is_planned_torque_off_and_compensation_on_it_is_refused() -> None:
    """LeRobot's SO-101 leader: STS3215 servos, no current mode, read with torque off."""
    base = {'backend': 'real', 'robot': 'so101', 'port': '/dev/ttyUSB0', 'teleop': 'leader',
            'leader_robot': 'so101', 'leader_port': '/dev/ttyUSB1'}
    leader = next(n for n in plan(base) if n.kind == 'leader')
    p = leader.parameters
    assert (p['robot'], p['leader_robot'], p['port']) == ('so101', 'so101', '/dev/ttyUSB1')
    assert LeaderConfig.from_mapping(p).compensation is False  # what the node will run
    for text in ('on', 'gravity_fraction=0.5'):
        with pytest.raises(PlanError) as exc:
            plan({**base, 'leader_compensation': text})
        message = str(exc.value)
        assert message.startswith(f'leader_compensation:={text}: the leader arm so101 has '
                                  f'STS3215 servos (shoulder_pan), which have no '
                                  f'current-control mode')
        assert 'leave out leader_compensation:=' in message and '\n' not in message
    # a Dynamixel leader without current control everywhere (the Koch's XL430s) likewise
    with pytest.raises(PlanError, match=r'leader_compensation:=on: the leader arm koch has '
                                        r'XL430-W250 servos \(shoulder_pan\)'):
        plan({**base, 'leader_robot': 'koch', 'leader_compensation': 'on'})
