"""Default pairing of a bag's joint_states streams for `simreal gap`."""

from pathlib import Path

import pytest

from simreal_ros.bag import BagInfo
from simreal_ros.gap.episode import default_pairing

J = 'sensor_msgs/msg/JointState'


def info(*topics: str) -> BagInfo:
    return BagInfo(Path('bag'), 'mcap', {t: (J, 1) for t in topics}, {}, 0, 0, 0)


@pytest.mark.parametrize('topics,expected', [
    (('/joint_states', '/twin/joint_states'), ('/joint_states', '/twin/joint_states')),
    (('/joint_states', '/twin/joint_states', '/backend/joint_states'),   # latency:= on
     ('/backend/joint_states', '/twin/joint_states')),
    (('/sim_a/joint_states', '/sim_b/joint_states'), ('/sim_a/joint_states',
                                                      '/sim_b/joint_states')),
    (('/sim_a/joint_states', '/sim_a/backend/joint_states', '/sim_b/joint_states'),
     ('/sim_a/backend/joint_states', '/sim_b/joint_states')),
    (('/arm/joint_states', '/arm/twin/joint_states'), ('/arm/joint_states',
                                                       '/arm/twin/joint_states')),
    (('/joint_states',), None),
])
def test_default_pairing(topics, expected):
    assert default_pairing(info(*topics)) == expected


def test_injector_events_are_found_under_a_namespace(tmp_path):
    from episode_bags import make_episode_bag

    from simreal_ros.gap.episode import load_episode
    make_episode_bag(tmp_path / 'bag', seconds=1.0, injector_topic='/lab/injector/events')
    ep = load_episode(str(tmp_path / 'bag'))
    assert ep.injector is not None
    assert ep.injector.routes == ['command', 'observation']
    assert len(ep.injector.rows) == 100 + 200  # 1 s of commands at 100 Hz, states at 200 Hz
