"""``simreal export --format lerobot`` on real bags: the v3.0 layout, read back with pyarrow,
pandas and OpenCV (the ``lerobot`` package needs Python >= 3.12 and torch < 2.12, so it cannot
be installed next to this stack's pinned torch 2.13 on Python 3.11; docs/teleop.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import cv2
from episode_bags import NAMES, ROBOT, T0, TS, joint_state, signal
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from simreal_ros.bag import BagWriter, QosSpec
from simreal_ros.teleop.quality import write_meta


def image(stamp_ns: int, k: int) -> bytes:
    h, w = 48, 64
    px = np.zeros((h, w, 3), np.uint8)
    px[:, :, 0] = (k * 7) % 256  # each frame differs: red encodes the frame number
    px[h // 4:h // 2, w // 4:w // 2, 1] = 200
    msg = TS.types['sensor_msgs/msg/Image'](
        TS.types['std_msgs/msg/Header'](
            TS.types['builtin_interfaces/msg/Time'](stamp_ns // 10**9, stamp_ns % 10**9),
            'camera_optical_frame'), h, w, 'rgb8', 0, w * 3, px.reshape(-1))
    return bytes(TS.serialize_cdr(msg, 'sensor_msgs/msg/Image'))


def make_episode(directory, index: int, *, seconds: float, accepted: bool, task: str,
                 camera: bool = True) -> None:
    ep = directory / f'episode_{index:04d}'
    ep.mkdir(parents=True)
    rate = 100.0
    t = np.arange(int(seconds * rate)) / rate
    q = ROBOT.home + signal(t)
    with BagWriter(ep / 'bag') as w:
        hs = w.add_topic('/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        hc = w.add_topic('/joint_commands', 'sensor_msgs/msg/JointState', [QosSpec()])
        hi = w.add_topic('/camera/image_raw', 'sensor_msgs/msg/Image', [QosSpec()]) \
            if camera else None
        for k, tk in enumerate(t):
            stamp = T0 + int(tk * 1e9)
            w.write(hc, stamp, joint_state(stamp, q[k] + 0.01))
            w.write(hs, stamp + 1000, joint_state(stamp + 1000, q[k]))
            if hi is not None and k % 4 == 0:  # 25 Hz camera
                w.write(hi, stamp + 2000, image(stamp + 2000, k // 4))
    write_meta(ep / 'episode.yaml', {'index': index, 'task': task, 'robot': 'simreal_arm',
                                     'bag': 'bag', 'accepted': accepted,
                                     'reasons': [] if accepted else ['idle: test']})


def simreal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, '-m', 'simreal_ros', *args], capture_output=True,
                          text=True, timeout=120)


def test_export_writes_the_v3_layout_of_accepted_episodes_only(tmp_path) -> None:
    eps = tmp_path / 'episodes'
    make_episode(eps, 0, seconds=2.0, accepted=True, task='wave')
    make_episode(eps, 1, seconds=1.0, accepted=False, task='wave')
    make_episode(eps, 2, seconds=1.5, accepted=True, task='point')
    out = tmp_path / 'dataset'
    r = simreal('export', str(eps), '--format', 'lerobot', '--out', str(out), '--fps', '20',
                '--json')
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary['episodes'] == ['episode_0000', 'episode_0002']
    assert summary['skipped'] == [{'episode': 'episode_0001', 'reasons': ['idle: test']}]
    info = json.loads((out / 'meta/info.json').read_text())
    # 2.0 s and 1.5 s of overlap at 20 fps (the last state is 10 us after the last command)
    lengths = [40, 30]
    assert (info['codebase_version'], info['fps'], info['total_episodes'],
            info['total_frames'], info['total_tasks']) == ('v3.0', 20, 2, sum(lengths), 2)
    assert info['data_path'] == 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet'
    names = [f'{n}.pos' for n in NAMES]  # LeRobot's motor feature names
    assert info['features']['observation.state'] == {'dtype': 'float32', 'shape': [6],
                                                     'names': names}
    assert info['features']['action']['names'] == names
    assert info['features']['observation.images.camera']['shape'] == [48, 64, 3]
    data = pq.read_table(out / 'data/chunk-000/file-000.parquet').to_pandas()
    assert list(data.columns) == ['observation.state', 'action', 'timestamp', 'frame_index',
                                  'episode_index', 'index', 'task_index']
    assert data['index'].tolist() == list(range(sum(lengths)))
    assert data['episode_index'].tolist() == [0] * 40 + [1] * 30
    assert data['frame_index'].tolist() == list(range(40)) + list(range(30))
    assert data['task_index'].tolist() == [0] * 40 + [1] * 30
    assert np.allclose(data['timestamp'][:40], np.arange(40) / 20)
    state = np.stack(data['observation.state'].to_numpy())
    action = np.stack(data['action'].to_numpy())
    t = np.arange(40) / 20
    want = ROBOT.home + signal(t)  # frames fall on samples: the held sample is exact
    assert np.allclose(state[:40], want, atol=1e-6)
    assert np.allclose(action[:40] - state[:40], 0.01, atol=1e-6)
    tasks = pd.read_parquet(out / 'meta/tasks.parquet')
    assert tasks.index.name == 'task' and tasks['task_index'].to_dict() == {'wave': 0,
                                                                           'point': 1}
    episodes = pd.read_parquet(out / 'meta/episodes/chunk-000/file-000.parquet')
    assert episodes['length'].tolist() == lengths
    assert episodes['dataset_from_index'].tolist() == [0, 40]
    assert episodes['dataset_to_index'].tolist() == [40, 70]
    assert [list(x) for x in episodes['tasks']] == [['wave'], ['point']]
    assert episodes['videos/observation.images.camera/from_timestamp'].tolist() == [0.0, 2.0]
    stats = json.loads((out / 'meta/stats.json').read_text())
    assert np.allclose(stats['observation.state']['mean'], state.mean(axis=0))
    assert stats['action']['count'] == [70]
    video = out / 'videos/observation.images.camera/chunk-000/file-000.mp4'
    cap = cv2.VideoCapture(str(video))
    frames = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    assert len(frames) == 70
    # frame k of episode 0 (at 1 us + k/20 s) holds the latest camera frame (camera frame j at
    # 2 us + j/25 s): j = ceil(5k/4) - 1, the first frame for k = 0 (none before it)
    red = [int(np.median(f[:, :, 2])) for f in frames[:40]]
    held = [max(0, int(np.ceil(k * 5 / 4)) - 1) for k in range(40)]
    # mp4v is lossy: 4 of 255 at most measured (neighbouring frames differ by 7)
    assert np.abs(np.array(red) - np.array([(j * 7) % 256 for j in held])).max() <= 5


def test_export_errors_are_one_line(tmp_path, simreal_cli) -> None:
    eps = tmp_path / 'episodes'
    make_episode(eps, 0, seconds=1.0, accepted=False, task='wave', camera=False)
    r = simreal_cli('export', str(eps), '--out', str(tmp_path / 'd'))  # the second: a process
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    assert r.returncode == 2 and errors == [
        'simreal export: error: no accepted episode among 1 (give --all to export rejected '
        'ones too)']
    assert not (tmp_path / 'd').exists()
    r = simreal('export', str(tmp_path / 'nothing'), '--out', str(tmp_path / 'd'))
    assert r.returncode == 2 and 'not an episode' in r.stderr and 'Traceback' not in r.stderr


@pytest.mark.parametrize('fps', [10])
def test_export_all_includes_rejected_episodes(tmp_path, fps) -> None:
    eps = tmp_path / 'episodes'
    make_episode(eps, 0, seconds=1.0, accepted=False, task='wave', camera=False)
    r = simreal('export', str(eps), '--out', str(tmp_path / 'd'), '--all', '--fps', str(fps))
    assert r.returncode == 0, r.stderr
    info = json.loads((tmp_path / 'd/meta/info.json').read_text())
    assert (info['total_episodes'], info['total_frames'], info['video_path']) == (1, 10, None)


def test_so101_export_names_its_features_as_lerobot_does_gripper_included(tmp_path) -> None:
    """LeRobot's SO-101 datasets name their features shoulder_pan.pos ... gripper.pos."""
    from simreal_ros.core.robot import load_robot
    so101 = load_robot('so101')
    ep = tmp_path / 'episodes' / 'episode_0000'
    ep.mkdir(parents=True)
    t = np.arange(200) / 100.0
    q = so101.home + 0.2 * np.sin(2 * np.pi * 0.5 * t)[:, None]
    with BagWriter(ep / 'bag') as w:
        hs = w.add_topic('/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        hc = w.add_topic('/joint_commands', 'sensor_msgs/msg/JointState', [QosSpec()])
        for k, tk in enumerate(t):
            stamp = T0 + int(tk * 1e9)
            w.write(hc, stamp, joint_state(stamp, q[k] + 0.01, names=so101.joint_names))
            w.write(hs, stamp + 1000, joint_state(stamp + 1000, q[k], names=so101.joint_names))
    write_meta(ep / 'episode.yaml', {'index': 0, 'task': 'grasp', 'robot': 'so101',
                                     'bag': 'bag', 'accepted': True, 'reasons': []})
    out = tmp_path / 'dataset'
    r = simreal('export', str(tmp_path / 'episodes'), '--format', 'lerobot', '--out', str(out),
                '--fps', '20', '--robot', 'so101')
    assert r.returncode == 0, r.stderr
    info = json.loads((out / 'meta/info.json').read_text())
    want = ['shoulder_pan.pos', 'shoulder_lift.pos', 'elbow_flex.pos', 'wrist_flex.pos',
            'wrist_roll.pos', 'gripper.pos']
    assert info['robot_type'] == 'so101'
    assert info['features']['observation.state']['names'] == want
    assert info['features']['action']['names'] == want
    data = pq.read_table(out / 'data/chunk-000/file-000.parquet').to_pandas()
    state = np.stack(data['observation.state'].to_numpy())
    assert np.allclose(state[:, 5], q[::5, 5][:len(state)], atol=1e-6)  # the gripper's column
