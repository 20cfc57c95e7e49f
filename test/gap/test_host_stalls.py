"""Host stalls found in a real bag file: a publisher that stops, messages arriving in a burst."""

from pathlib import Path

from episode_bags import NAMES, T0, joint_state
import numpy as np
import pytest

from simreal_ros.bag import BagWriter, QosSpec
from simreal_ros.gap.episode import load_episode
from simreal_ros.gap.host_stalls import STALL_LIMIT_NS, Stall, find_stalls

PERIOD = 4_000_000  # 250 Hz, the excitation's rate
LAG = 2_000_000  # every message reaches the bag 2 ms after its stamp unless said otherwise


def _bag(path: Path, stop_ns: int = 0, burst_ns: int = 0, at: int = 500) -> Path:
    """4 s of commands and states; commands stop stamping for ``stop_ns`` at sample ``at``,
    states from sample ``at`` on reach the bag late by ``burst_ns``, decaying by a period."""
    q = np.zeros(len(NAMES))
    with BagWriter(path) as w:
        cmd, st = (w.add_topic(t, 'sensor_msgs/msg/JointState', [QosSpec()])
                   for t in ('/joint_commands', '/backend/joint_states'))
        for k in range(1000):
            stamp = T0 + k * PERIOD + (stop_ns if k >= at else 0)
            w.write(cmd, stamp + LAG, joint_state(stamp, q))
            late = max(0, burst_ns - (k - at) * PERIOD) if k >= at else 0
            state_stamp = T0 + k * PERIOD
            w.write(st, state_stamp + LAG + late, joint_state(state_stamp, q, q))
    return path


def test_a_clean_bag_has_no_stall(tmp_path):
    ep = load_episode(str(_bag(tmp_path / 'b')))
    assert find_stalls(ep, (T0, T0 + 10 ** 10)) == []


def test_a_stopped_publisher_and_a_late_burst_are_found_with_their_size_and_place(tmp_path):
    ep = load_episode(str(_bag(tmp_path / 'b', stop_ns=85_000_000, burst_ns=70_000_000)))
    stalls = find_stalls(ep, (T0, T0 + 10 ** 10))
    at = T0 + 499 * PERIOD
    assert stalls == [Stall('/backend/joint_states', 'late_delivery', 70_000_000, at + PERIOD),
                      Stall('/joint_commands', 'stamp_gap', 85_000_000, at)]
    assert stalls[1].text(T0) == '/joint_commands: stamps stop for 85.0 ms at 2.00 s'
    assert stalls[0].text(T0) == ('/backend/joint_states: messages reach the bag late by '
                                  '70.0 ms at 2.00 s')


def test_only_the_window_counts_and_the_limit_is_strict(tmp_path):
    ep = load_episode(str(_bag(tmp_path / 'b', stop_ns=85_000_000)))
    assert find_stalls(ep, (T0 + 3 * 10 ** 9, T0 + 10 ** 10)) == []  # after the stop
    just = load_episode(str(_bag(tmp_path / 'c', stop_ns=STALL_LIMIT_NS)))
    assert find_stalls(just, (T0, T0 + 10 ** 10)) == []
    over = load_episode(str(_bag(tmp_path / 'd', stop_ns=STALL_LIMIT_NS + 1)))
    assert [s.excess_ns for s in find_stalls(over, (T0, T0 + 10 ** 10))] == [STALL_LIMIT_NS + 1]


@pytest.mark.parametrize('topics', [['/joint_commands'], ['/no_such_topic']])
def test_topics_limit_the_search(tmp_path, topics):
    ep = load_episode(str(_bag(tmp_path / 'b', stop_ns=85_000_000, burst_ns=70_000_000)))
    found = find_stalls(ep, (T0, T0 + 10 ** 10), topics=topics)
    assert [s.topic for s in found] == [t for t in topics if t == '/joint_commands']
