"""Bag writer, reader and repair: real files, read by rosbags and by the independent mcap."""

from __future__ import annotations

import json
import os
from pathlib import Path
import signal
import subprocess
import sys
import time

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
import numpy as np
import pytest
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from simreal_ros.bag import BagOptions, BagReader, BagWriter, QosSpec, repair_bag
from simreal_ros.bag.provenance import ros_distro
from simreal_ros.errors import BagError, ConfigError

TS = get_typestore(Stores.ROS2_KILTED)
JS = 'sensor_msgs/msg/JointState'


def joint_state_cdr(seq: int, stamp_ns: int) -> bytes:
    """CDR bytes of a JointState with position[0] = seq (serialized by rosbags, not by us)."""
    t = TS.types['builtin_interfaces/msg/Time'](stamp_ns // 10**9, stamp_ns % 10**9)
    msg = TS.types[JS](TS.types['std_msgs/msg/Header'](t, 'base'), ['a', 'b'],
                       np.array([float(seq), 0.5]), np.array([0.0, 0.0]), np.array([], float))
    return bytes(TS.serialize_cdr(msg, JS))


def read_ros2_messages(path: str, topics: list[str] | None = None):
    """Decode every message of one MCAP file with the independent mcap + mcap-ros2 readers."""
    with open(path, 'rb') as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _schema, _channel, _message, ros_msg in reader.iter_decoded_messages(topics=topics):
            yield ros_msg


def write_bag(path: Path, n: int = 500, **options: object) -> Path:
    with BagWriter(path, BagOptions(**options), {'robot_spec': 'robot: x\n', 'k': 'v'}) as w:
        h = w.add_topic('/joint_states', JS, [QosSpec()])
        h2 = w.add_topic('/latched', 'std_msgs/msg/String',
                         [QosSpec('reliable', 'transient_local', 'keep_last', 1)])
        w.add_topic('/be', 'sensor_msgs/msg/Imu', [QosSpec('best_effort')])
        for i in range(n):
            w.write(h, 10**9 + i * 10**6, joint_state_cdr(i, 10**9 + i * 10**6))
        w.write(h2, 10**9, bytes(TS.serialize_cdr(TS.types['std_msgs/msg/String']('hi'),
                                                  'std_msgs/msg/String')))
    return path


@pytest.mark.parametrize('storage,compression', [('mcap', 'none'), ('mcap', 'zstd'),
                                                 ('sqlite3', 'none'), ('sqlite3', 'zstd')])
def test_bag_round_trip_with_rosbags(tmp_path, storage, compression):
    bag = write_bag(tmp_path / 'bag', storage=storage, compression=compression)
    with AnyReader([bag]) as r:  # rosbags' own high-level reader
        counts: dict[str, int] = {}
        seqs = []
        for conn, _ts, raw in r.messages():
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
            if conn.topic == '/joint_states':
                seqs.append(int(r.deserialize(raw, conn.msgtype).position[0]))
        assert counts == {'/joint_states': 500, '/latched': 1}
        assert seqs == list(range(500))
        qos = {c.topic: c.ext.offered_qos_profiles[0] for c in r.connections}
        assert qos['/latched'].durability.name == 'TRANSIENT_LOCAL'
        assert qos['/be'].reliability.name == 'BEST_EFFORT'
        assert qos['/joint_states'].reliability.name == 'RELIABLE'
    with BagReader(bag) as b:
        assert b.info.custom_data == {'robot_spec': 'robot: x\n', 'k': 'v'}
        assert b.info.storage == storage
        assert b.info.topics['/joint_states'] == (JS, 500)


@pytest.mark.parametrize('compression', ['none', 'zstd'])
def test_mcap_files_open_with_the_independent_mcap_reader(tmp_path, compression):
    bag = write_bag(tmp_path / 'bag', compression=compression)
    files = sorted(bag.glob('*.mcap'))
    assert len(files) == 1
    seqs = [int(m.position[0]) for m in read_ros2_messages(str(files[0]),
                                                                   topics=['/joint_states'])]
    assert seqs == list(range(500))
    with files[0].open('rb') as f:
        summary = make_reader(f).get_summary()
    assert summary is not None and summary.statistics is not None
    assert summary.statistics.message_count == 501
    topics = {c.topic: c for c in summary.channels.values()}
    assert 'transient_local' in topics['/latched'].metadata['offered_qos_profiles']


def test_split_by_duration_and_size(tmp_path):
    bag = write_bag(tmp_path / 'by_time', n=3500, split_duration_s=1.0)
    files = sorted(bag.glob('*.mcap'))
    assert [f.name for f in files] == [f'by_time_{i}.mcap' for i in range(4)]
    meta = (bag / 'metadata.yaml').read_text()
    assert 'by_time_3.mcap' in meta
    n = sum(1 for f in files for _ in read_ros2_messages(str(f), topics=['/joint_states']))
    assert n == 3500
    bag2 = tmp_path / 'by_size'
    with BagWriter(bag2, BagOptions(split_size_mb=1.0)) as w:
        h = w.add_topic('/img', 'sensor_msgs/msg/Image')
        for i in range(30):
            w.write(h, 10**9 + i, os.urandom(300_000))
    assert len(list(bag2.glob('*.mcap'))) >= 5
    with BagReader(bag2) as b:
        assert sum(1 for _ in b.messages()) == 30


def test_never_overwrites_a_bag(tmp_path):
    bag = write_bag(tmp_path / 'bag')
    before = sorted((p.name, p.stat().st_size) for p in bag.iterdir())
    with pytest.raises(BagError, match='exists already.*never overwrites'):
        BagWriter(bag)
    (tmp_path / 'file').write_text('x')
    with pytest.raises(BagError, match='exists already'):
        BagWriter(tmp_path / 'file')
    assert sorted((p.name, p.stat().st_size) for p in bag.iterdir()) == before
    with pytest.raises(BagError, match='parent directory'):
        BagWriter(tmp_path / 'missing' / 'bag')


@pytest.mark.parametrize('kwargs,key', [
    ({'storage': 'rosbag1'}, 'storage'), ({'compression': 'lz4'}, 'compression'),
    ({'split_size_mb': -1.0}, 'split_size_mb'), ({'split_size_mb': 0.5}, 'split_size_mb'),
    ({'split_duration_s': float('nan')}, 'split_duration_s'),
    ({'split_duration_s': 0.2}, 'split_duration_s'), ({'flush_period_s': 0.0}, 'flush_period_s'),
    ({'flush_period_s': 2.0}, 'flush_period_s'), ({'split_size_mb': 'big'}, 'split_size_mb'),
])
def test_bad_bag_options_are_named(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        BagOptions(**kwargs)


def test_unknown_message_type_and_duplicate_topic(tmp_path):
    with BagWriter(tmp_path / 'bag') as w:
        with pytest.raises(BagError, match="unknown message type 'nope_msgs/msg/Thing'"):
            w.add_topic('/x', 'nope_msgs/msg/Thing')
        with pytest.raises(BagError, match='pkg/msg/Name'):
            w.add_topic('/x', 'JointState')
        w.add_topic('/y', JS)
        with pytest.raises(BagError, match='already in the bag'):
            w.add_topic('/y', JS)


def test_missing_and_bad_bags_give_clear_errors(tmp_path):
    with pytest.raises(BagError, match='does not exist'):
        BagReader(tmp_path / 'nope')
    (tmp_path / 'empty').mkdir()
    with pytest.raises(BagError, match='no metadata.yaml'):
        BagReader(tmp_path / 'empty')
    bag = write_bag(tmp_path / 'bag')
    with BagReader(bag) as b, pytest.raises(BagError, match='no topic /nope'):
        list(b.messages(['/nope']))
    with pytest.raises(BagError, match='neither metadata.yaml'):
        repair_bag(tmp_path / 'empty')
    assert repair_bag(bag).was_clean


WRITER = """
import sys, time
from simreal_ros.bag import BagOptions, BagWriter, QosSpec
w = BagWriter(sys.argv[1], BagOptions(storage=sys.argv[2], compression=sys.argv[3],
              split_duration_s=float(sys.argv[4])), {'robot_spec': 'robot: x'})
h = w.add_topic('/x', 'std_msgs/msg/Int64', [QosSpec()])
i = 0
t0 = time.monotonic()
while True:
    w.write(h, 10**9 + i * 10**6, b'\\x00\\x01\\x00\\x00' + i.to_bytes(8, 'little'))
    i += 1
    if i % 100 == 0:
        w.flush()  # everything up to i is now safe; the kill comes between flushes
        print(i, flush=True)
        time.sleep(0.005)
"""


@pytest.mark.parametrize('storage,compression,split', [('mcap', 'none', 0.0),
                                                       ('mcap', 'zstd', 1.0),
                                                       ('sqlite3', 'none', 0.0)])
def test_sigkilled_writer_bag_is_repaired(tmp_path, storage, compression, split):
    bag = tmp_path / 'bag'
    proc = subprocess.Popen([sys.executable, '-c', WRITER, str(bag), storage, compression,
                             str(split)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    written = 0
    while written < 2500:
        written = int(proc.stdout.readline())
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    written = max(written, *[int(x) for x in proc.stdout.read().split() or ['0']])
    with pytest.raises(BagError, match='simreal bag repair'):
        BagReader(bag)
    report = repair_bag(bag)
    assert not report.was_clean
    with BagReader(bag) as b:
        values = [int.from_bytes(m.data[4:12], 'little') for m in b.messages()]
        assert b.info.custom_data == {'robot_spec': 'robot: x'}
        assert b.info.qos['/x'] == [QosSpec()]
        assert b.info.ros_distro == ros_distro()  # the recording's, kept by the side-car
    assert ros_distro() in ('jazzy', 'kilted')  # the PyPI wheels this venv runs
    assert values == list(range(len(values)))  # nothing out of order, nothing invented
    assert len(values) >= written, (len(values), written)  # every flushed message survives
    if storage == 'mcap':
        n = sum(1 for f in sorted(bag.glob('*.mcap')) for _ in read_ros2_messages(str(f)))
        assert n == len(values)
    assert repair_bag(bag).was_clean
    suffix = '.mcap' if storage == 'mcap' else '.db3'
    assert sorted(report.files) == sorted(f.name for f in bag.glob(f'*{suffix}'))
    assert sum(report.files.values()) == report.message_count == len(values)
    assert json.loads(json.dumps(report.files)) == report.files



KILLED_AT_SPLIT = """
import os, sys
from simreal_ros.bag import BagOptions, BagWriter, QosSpec
from simreal_ros.bag.metadata import FileInfo
w = BagWriter(sys.argv[1], BagOptions(storage=sys.argv[2], split_duration_s=1.0))
h = w.add_topic('/x', 'std_msgs/msg/Int64', [QosSpec()])
for i in range(300):  # 10 ms apart: three files of 100
    w.write(h, 10**9 + i * 10**7, b'\\x00\\x01\\x00\\x00' + i.to_bytes(8, 'little'))
w.flush()
w._close_file()
if sys.argv[3] == 'file_created':
    w._open_file()
else:  # the side-car names the next file, which does not exist yet
    w.files.append(FileInfo('bag_3' + w.options.suffix))
    w._write_sidecar()
os._exit(0)  # as SIGKILL: no cleanup, no buffers flushed
"""


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
@pytest.mark.parametrize('killed', ['file_created', 'file_named'])
def test_kill_as_a_split_opens_the_next_file_loses_nothing(tmp_path, storage, killed):
    bag = tmp_path / 'bag'
    subprocess.run([sys.executable, '-c', KILLED_AT_SPLIT, str(bag), storage, killed],
                   check=True)
    with pytest.raises(BagError, match='simreal bag repair'):
        BagReader(bag)
    report = repair_bag(bag)
    assert report.message_count == 300 and len(report.files) == 3
    with AnyReader([bag]) as r:
        values = [int.from_bytes(raw[4:12], 'little') for _c, _t, raw in r.messages()]
    assert values == list(range(300))
    if storage == 'mcap':
        files = sorted(bag.glob('*.mcap'))
        assert len(files) == 3
        assert sum(1 for f in files for _ in read_ros2_messages(str(f))) == 300
