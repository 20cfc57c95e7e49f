"""The live camera gap: frames paired by stamp, one pair per evaluation, known differences."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simreal_ros.gap.live_camera import PRIMARY, SECONDARY, LiveCameraGap

MS = 1_000_000


def frame(value: int, shape: tuple[int, ...] = (24, 32, 3)) -> np.ndarray:
    rng = np.random.default_rng(value)
    return rng.integers(20, 200, shape, dtype=np.uint8)


def decode(f: np.ndarray) -> np.ndarray:
    return f  # the recorder decodes CDR bytes; here the frames are arrays already


def test_a_known_offset_gives_its_psnr_and_histograms():
    gap = LiveCameraGap('/sim_a/camera/image_raw', '/sim_b/camera/image_raw', 20 * MS)
    a = frame(1)
    gap.offer(PRIMARY, 100 * MS, a)
    gap.offer(SECONDARY, 103 * MS, (a + 10).astype(np.uint8))  # every value 10 brighter
    assert gap.evaluate(decode) is True
    s = gap.summary()
    # MSE 100 -> 10 log10(255^2 / 100)
    assert s['psnr_db'] == pytest.approx(10 * math.log10(255**2 / 100))
    assert s['mean_intensity_secondary'] == pytest.approx(s['mean_intensity_primary'] + 10)
    assert s['lag_ms'] == pytest.approx(3.0)
    assert (s['pairs'], s['frames_primary'], s['frames_secondary']) == (1, 1, 1)
    assert s['ssim'] < 1.0


def test_identical_frames_are_infinite_psnr_and_ssim_one():
    gap = LiveCameraGap('p', 's', 20 * MS)
    a = frame(2)
    gap.offer(PRIMARY, 0, a)
    gap.offer(SECONDARY, 0, a.copy())
    gap.evaluate(decode)
    s = gap.summary()
    assert math.isinf(s['psnr_db']) and math.isinf(s['psnr_db_mean'])
    assert s['ssim'] == pytest.approx(1.0)
    assert s['histogram_intersection'] == pytest.approx(1.0)


def test_pairs_the_newest_primary_with_the_nearest_secondary_once():
    gap = LiveCameraGap('p', 's', 20 * MS)
    frames = {k: frame(k) for k in range(6)}
    for k in range(3):
        gap.offer(PRIMARY, k * 33 * MS, frames[k])
    gap.offer(SECONDARY, 33 * MS + 2 * MS, frames[1])  # pairs primary 1 exactly (same pixels)
    gap.offer(SECONDARY, 66 * MS - 30 * MS, frames[5])  # 30 ms off primary 2: beyond the lag
    # primary 2 (newest) has no partner within 20 ms; primary 1 does (lag 2 ms)
    assert gap.evaluate(decode) is True
    assert gap.summary()['lag_ms'] == pytest.approx(2.0)
    assert math.isinf(gap.summary()['psnr_db'])
    # nothing newer than the compared primary frame: no second comparison of the same pair
    assert gap.evaluate(decode) is False
    assert gap.summary()['pairs'] == 1


def test_no_secondary_no_pair():
    gap = LiveCameraGap('p', 's', 20 * MS)
    gap.offer(PRIMARY, 0, frame(1))
    assert gap.evaluate(decode) is False
    assert 'ssim_mean' not in gap.summary()


def test_cameras_of_different_size_are_reported_not_raised():
    gap = LiveCameraGap('p', 's', 20 * MS)
    gap.offer(PRIMARY, 0, frame(1))
    gap.offer(SECONDARY, 0, frame(1, (12, 16, 3)))
    assert gap.evaluate(decode) is True
    s = gap.summary()
    assert s['error'] == ('ValueError: p frames are (24, 32, 3), s frames (12, 16, 3): the '
                          'cameras differ')
    assert s['pairs'] == 0
    # a good pair afterwards clears the error
    a = frame(3)
    gap.offer(PRIMARY, 33 * MS, a)
    gap.offer(SECONDARY, 33 * MS, a.copy())
    assert gap.evaluate(decode) is True
    assert 'error' not in gap.summary() and gap.summary()['pairs'] == 1


def test_window_keeps_the_last_pairs():
    gap = LiveCameraGap('p', 's', 5 * MS, window=2)
    base = frame(4)
    for k, offset in enumerate((0, 10, 20)):
        gap.offer(PRIMARY, k * 33 * MS, base)
        gap.offer(SECONDARY, k * 33 * MS, (base + offset).astype(np.uint8))
        gap.evaluate(decode)
    s = gap.summary()
    assert (s['pairs'], s['window_pairs']) == (3, 2)
    # the mean over the last two pairs (offsets 10 and 20): MSE 100 and 400
    expected = (10 * math.log10(255**2 / 100) + 10 * math.log10(255**2 / 400)) / 2
    assert s['psnr_db_mean'] == pytest.approx(expected)


@pytest.mark.parametrize('kwargs', [{'keep': 0}, {'window': 0}, {'max_lag_ns': -1}])
def test_bad_arguments(kwargs):
    args = {'max_lag_ns': 0, **kwargs}
    with pytest.raises(ValueError):
        LiveCameraGap('p', 's', **args)
