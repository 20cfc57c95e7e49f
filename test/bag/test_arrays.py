"""The one bag reader of joint streams (bag/arrays.py): its rules, and every caller reading alike.

Bags are written with known stamps and receive times (the project's writer), read back with the
reader and with every caller that reads joint streams: the gap episode, sysid's data, the
flywheel's comparison window and the empirical delay profile.
"""

from pathlib import Path
import sys

import numpy as np
import pytest

from simreal_ros.bag import BagWriter, QosSpec
from simreal_ros.bag.arrays import load_arrays
from simreal_ros.errors import BagError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from episode_bags import ROBOT, T0, injector_events, joint_state  # noqa: E402

MS = 1_000_000
NAMES = tuple(ROBOT.joint_names)
N = len(NAMES)


def _q(k: int) -> np.ndarray:
    return 0.1 * k + 0.01 * np.arange(N)


def _defect_bag(path: Path) -> None:
    """One JointState topic with every case of the rules, 10 ms apart in bag time."""
    rev = tuple(reversed(NAMES))
    with BagWriter(path) as w:
        j = w.add_topic('/j', 'sensor_msgs/msg/JointState', [QosSpec()])
        ev = w.add_topic('/injector/events', 'std_msgs/msg/Int64MultiArray', [QosSpec()])
        msgs = [
            (0, joint_state(T0, _q(0), _q(0) + 1, _q(0) + 2)),
            # joints in the other order, stamped ahead of the next message (out of order)
            (1, joint_state(T0 + 20 * MS, _q(1)[::-1].copy(), _q(1)[::-1] + 1,
                            _q(1)[::-1] + 2, names=rev)),
            # one joint more (a gripper): the stream's columns
            (2, joint_state(T0 + 10 * MS, [*_q(2), 9.0], [*(_q(2) + 1), 9.0],
                            [*(_q(2) + 2), 9.0], names=(*NAMES, 'gripper'))),
            (3, joint_state(T0 + 20 * MS, _q(3), _q(3) + 1, _q(3) + 2)),  # duplicate stamp
            (4, joint_state(T0 + 30 * MS, _q(4)[:-1], names=NAMES[:-1])),  # a joint missing
            (5, joint_state(T0 + 40 * MS, [np.nan, *_q(5)[1:]])),  # NaN position
            (6, joint_state(T0 + 50 * MS, _q(6))),  # no velocity, no effort
            (7, joint_state(T0 + 60 * MS, _q(7)[:-1])),  # one position short
        ]
        for k, data in msgs:
            w.write(j, T0 + k * 10 * MS + MS, data)
        w.write(ev, T0 + 100 * MS, injector_events(['command'], [[0, 0, T0, 0, T0, 0]]))


def test_one_rule_for_order_missing_names_nan_and_duplicates(tmp_path):
    _defect_bag(tmp_path / 'bag')
    arrays = load_arrays(str(tmp_path / 'bag'))
    js = arrays.joints['/j']
    assert js.names == NAMES and js.first_names == NAMES
    assert js.skipped == {'names': 2, 'nan': 1}
    kept = [0, 1, 2, 3, 6]  # bag order, out-of-order and duplicate stamps included
    assert js.stamp_ns.tolist() == [T0, T0 + 20 * MS, T0 + 10 * MS, T0 + 20 * MS, T0 + 50 * MS]
    assert js.receive_ns.tolist() == [T0 + k * 10 * MS + MS for k in kept]
    assert np.array_equal(js.position, np.stack([_q(k) for k in kept]))
    assert np.array_equal(js.velocity[:4], np.stack([_q(k) + 1 for k in kept[:4]]))
    assert np.array_equal(js.effort[:4], np.stack([_q(k) + 2 for k in kept[:4]]))
    assert np.isnan(js.velocity[4]).all() and np.isnan(js.effort[4]).all()
    # by stamp: sorted, the first of the two at +20 ms kept
    by_stamp = js.in_time_order('stamp')
    assert by_stamp.stamp_ns.tolist() == [T0, T0 + 10 * MS, T0 + 20 * MS, T0 + 50 * MS]
    assert np.array_equal(by_stamp.position, np.stack([_q(k) for k in (0, 2, 1, 6)]))
    by_receive = js.in_time_order('receive')
    assert by_receive.receive_ns.tolist() == js.receive_ns.tolist()
    # the stamps of every message, whatever it carries; none for a type without a header
    assert arrays.stamped['/j'].stamp_ns.tolist() == [
        T0 + s * MS for s in (0, 20, 10, 20, 30, 40, 50, 60)]
    assert arrays.stamped['/injector/events'].stamp_ns is None
    assert arrays.stamped['/injector/events'].receive_ns.tolist() == [T0 + 100 * MS]


def test_the_names_given_set_the_columns(tmp_path):
    _defect_bag(tmp_path / 'bag')
    rev = tuple(reversed(NAMES))
    js = load_arrays(str(tmp_path / 'bag'), ['/j'], rev).joints['/j']
    assert js.names == rev
    assert np.array_equal(js.position, np.stack([_q(k)[::-1] for k in (0, 1, 2, 3, 6)]))
    assert np.array_equal(js.select(NAMES).position, load_arrays(
        str(tmp_path / 'bag'), ['/j']).joints['/j'].position)
    with pytest.raises(BagError, match='/j has no joint gripper'):
        js.select(('gripper',))


def test_every_caller_reads_one_bag_alike(tmp_path):
    """The flywheel's window, sysid's data, the gap episode and the delay profile of one bag.

    Before the one reader they disagreed on this bag: the flywheel's window began at the
    first relayed command's bag time although that command had a NaN position, and sysid
    (which skipped it) then began 4 ms later than that window; the gap episode kept the NaN
    state, dropped the state naming a gripper too, and had no velocities at all because one
    state had none, where sysid had the opposite on each.
    """
    from simreal_ros.bag.receive_delays import bag_latencies_s
    from simreal_ros.gap.episode import load_episode
    from simreal_ros.jobs.excitation import excitation_window
    from simreal_ros.sysid.data import load_sysid_data

    bag = tmp_path / 'bag'
    period, delay = 4 * MS, 4_060_000
    relayed_from, nan_state, gripper_state, no_velocity = 500, 700, 800, 900
    with BagWriter(bag) as w:
        cmd, st, rel = (w.add_topic(t, 'sensor_msgs/msg/JointState', [QosSpec()])
                        for t in ('/joint_commands', '/backend/joint_states',
                                  '/backend/joint_commands'))
        for k in range(1500):  # 6 s at 250 Hz; the arm follows at once (no sag)
            stamp = T0 + k * period
            q = np.full(N, 0.1 * np.sin(k / 100))
            v = np.full(N, 0.1 * np.cos(k / 100))
            w.write(cmd, stamp, joint_state(stamp, q))
            if k == nan_state:
                state = joint_state(stamp, np.full(N, np.nan), v)
            elif k == gripper_state:
                state = joint_state(stamp, [*q, 0.5], [*v, 0.0], names=(*NAMES, 'gripper'))
            elif k == no_velocity:
                state = joint_state(stamp, q)
            else:
                state = joint_state(stamp, q, v)
            w.write(st, stamp + MS, state)
            if k >= relayed_from:  # the first relayed command carries no position
                w.write(rel, stamp + delay, joint_state(
                    stamp, np.full(N, np.nan) if k == relayed_from else q))
    window = excitation_window(bag, 1.0)
    assert window == (T0 + (relayed_from + 1) * period + delay, T0 + 1499 * period)
    data = load_sysid_data(bag, ROBOT, window)
    assert data.window_ns == window
    inside = [k for k in range(1500) if k != nan_state
              and window[0] <= T0 + k * period <= window[1]]
    assert data.state_ns.tolist() == [T0 + k * period for k in inside]
    series = load_episode(str(bag)).joints['/backend/joint_states'].series()
    in_window = (series.stamps >= window[0]) & (series.stamps <= window[1])
    assert series.stamps[in_window].tolist() == data.state_ns.tolist()
    assert np.array_equal(series.position[in_window], data.state_pos)
    assert np.array_equal(series.velocity[in_window], data.state_vel, equal_nan=True)
    row = inside.index(no_velocity)
    assert np.isnan(data.state_vel[row]).all()
    assert np.isfinite(np.delete(data.state_vel, row, axis=0)).all()
    # the delay profile counts every message, the NaN one too: 1 ms each
    assert bag_latencies_s(bag, '/backend/joint_states') == [0.001] * 1500
