"""The one bag reader of joint streams (bag/arrays.py): its rules.

Bags are written with known stamps and receive times (the project's writer) and read back.
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

