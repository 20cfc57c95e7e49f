"""teleop:=leader in the plan: the leader node on leader_port:=, on every backend."""

from __future__ import annotations

import pytest

from simreal_ros.bringup.planner import plan
from simreal_ros.errors import PlanError


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
