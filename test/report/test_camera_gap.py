"""Camera metrics of the gap report and the image checks of ``simreal check``, on real bags."""

from __future__ import annotations

import json
import math

import cv2
from episode_bags import T0, TS, _time, joint_state
import numpy as np
import pytest

from simreal_ros.bag import BagOptions, BagWriter, QosSpec
from simreal_ros.gap.episode import load_episode
from simreal_ros.gap.quality import check_episode
from simreal_ros.report.gap_report import write_report

H, W, N = 48, 64, 40
PERIOD = 33_333_333


def image(stamp_ns: int, img: np.ndarray) -> bytes:
    msg = TS.types['sensor_msgs/msg/Image'](
        TS.types['std_msgs/msg/Header'](_time(stamp_ns), 'camera_optical_frame'), H, W,
        'rgb8', 0, W * 3, img.reshape(-1))
    return bytes(TS.serialize_cdr(msg, 'sensor_msgs/msg/Image'))


def frames(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(20, 236, size=(H, W, 3), dtype=np.uint8) for _ in range(N)]


def write_bag(path, a_frames, b_frames=None) -> None:
    with BagWriter(path, BagOptions(), {'backend': 'sim2sim'}) as w:
        ja = w.add_topic('/sim_a/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        jb = w.add_topic('/sim_b/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        ia = w.add_topic('/sim_a/camera/image_raw', 'sensor_msgs/msg/Image', [QosSpec()])
        ib = w.add_topic('/sim_b/camera/image_raw', 'sensor_msgs/msg/Image', [QosSpec()])
        msgs = []
        for k in range(N * 10):  # joint states at 300 Hz
            t = T0 + k * PERIOD // 10
            msgs += [(t, ja, joint_state(t, [0.1] * 6)), (t + 1, jb, joint_state(t, [0.1] * 6))]
        for k, img in a_frames:
            msgs.append((T0 + k * PERIOD + 5, ia, image(T0 + k * PERIOD, img)))
        for k, img in b_frames or []:
            msgs.append((T0 + k * PERIOD + 9, ib, image(T0 + k * PERIOD + 2_000_000, img)))
        for recv, h, data in sorted(msgs, key=lambda m: m[0]):
            w.write(h, recv, data)


def test_gap_report_compares_paired_frames_of_each_camera(tmp_path):
    a = frames()
    rng = np.random.default_rng(1)
    b = [(f.astype(np.int64) + rng.choice([-10, 10], size=f.shape)).astype(np.uint8)
         for f in a]
    b[5] = a[5]  # one identical pair
    write_bag(tmp_path / 'bag', list(enumerate(a)), [(k, f) for k, f in enumerate(b) if k != 9])
    m = write_report(str(tmp_path / 'bag'), str(tmp_path / 'out'), '/sim_a/joint_states',
                     '/sim_b/joint_states', progress=False)
    cam = json.loads((tmp_path / 'out' / 'gap.json').read_text())['cameras']['camera']
    assert cam == m['cameras']['camera']
    assert (cam['frames'], cam['pairs'], cam['identical_pairs']) == ([N, N - 1], N - 1, 1)
    assert cam['psnr_db']['mean'] == pytest.approx(20 * math.log10(255 / 10), abs=1e-9)
    assert cam['psnr_db']['min'] == pytest.approx(20 * math.log10(255 / 10), abs=1e-9)
    assert cam['ssim']['max'] == pytest.approx(1.0, abs=1e-12)  # the identical pair
    assert cam['ssim']['min'] < 0.99
    strip = cv2.imread(str(tmp_path / 'out' / 'camera_camera.png'))[:, :, ::-1]
    assert strip.shape == (2 * H, 4 * W, 3)
    assert np.array_equal(strip[:H, :W], a[0]) and np.array_equal(strip[H:, :W], b[0])
    assert 'Cameras (frames paired by stamp)' in (tmp_path / 'out' / 'report.html').read_text()


def test_check_flags_frozen_black_and_dropped_frames(tmp_path):
    a = frames()
    a[10] = a[11] = a[9]  # frozen: 2 repeats
    a[20] = np.zeros((H, W, 3), np.uint8)  # black
    write_bag(tmp_path / 'bad', [(k, f) for k, f in enumerate(a) if k not in (30, 31)])
    v = check_episode(load_episode(str(tmp_path / 'bad')), None)
    cam = {f.check: f for f in v.findings if f.subject == '/sim_a/camera/image_raw'}
    assert not cam['frozen_frames'].passed and cam['frozen_frames'].detail.startswith('2 of 38')
    assert not cam['black_frames'].passed and cam['black_frames'].detail.startswith('1 of 38')
    assert not cam['dropped'].passed and cam['dropped'].detail.startswith('2 of 40')
    write_bag(tmp_path / 'good', list(enumerate(frames())))
    v = check_episode(load_episode(str(tmp_path / 'good')), None)
    assert all(f.passed for f in v.findings if f.subject == '/sim_a/camera/image_raw'), v.text()
