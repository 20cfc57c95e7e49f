"""Image metrics on frames whose difference is known exactly."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from simreal_ros.errors import BagError
from simreal_ros.gap.image_metrics import (
    ImageStream,
    colour_histogram,
    histogram_intersection,
    mean_intensity,
    pair_by_stamp,
    psnr,
    ssim,
    to_array,
)

RNG = np.random.default_rng(3)
FRAME = RNG.integers(20, 236, size=(48, 64, 3), dtype=np.uint8)


def test_psnr_of_a_known_error_is_exact():
    # +-10 on every value: MSE = 100 exactly, PSNR = 10 log10(255^2 / 100)
    signs = RNG.choice([-10, 10], size=FRAME.shape)
    noisy = (FRAME.astype(np.int64) + signs).astype(np.uint8)
    assert psnr(FRAME, noisy) == pytest.approx(10 * math.log10(255 ** 2 / 100), abs=1e-12)
    assert psnr(FRAME, FRAME) == math.inf


def test_ssim_is_one_for_identical_and_falls_with_noise_and_structure():
    assert ssim(FRAME, FRAME) == pytest.approx(1.0, abs=1e-12)
    light = np.clip(FRAME + RNG.normal(0, 5, FRAME.shape), 0, 255).astype(np.uint8)
    heavy = np.clip(FRAME + RNG.normal(0, 40, FRAME.shape), 0, 255).astype(np.uint8)
    assert 1.0 > ssim(FRAME, light) > ssim(FRAME, heavy) > 0.0
    # a constant offset keeps the structure: only the luminance term drops, a little
    assert ssim(FRAME, FRAME + 10) > 0.99


def test_ssim_of_uncorrelated_images_is_near_zero():
    other = RNG.integers(0, 256, size=FRAME.shape, dtype=np.uint8)
    noise = RNG.integers(0, 256, size=FRAME.shape, dtype=np.uint8)
    assert abs(ssim(noise, other)) < 0.05


def test_intensity_and_histograms():
    black = np.zeros((16, 16, 3), np.uint8)
    white = np.full((16, 16, 3), 255, np.uint8)
    assert mean_intensity(black) == 0 and mean_intensity(white) == pytest.approx(255)
    h = colour_histogram(FRAME)
    assert h.shape == (3, 32) and np.allclose(h.sum(axis=1), 1)
    assert np.allclose(histogram_intersection(h, h), 1)
    assert np.allclose(histogram_intersection(colour_histogram(black),
                                              colour_histogram(white)), 0)


def image_msg(img: np.ndarray, encoding: str, pad: int = 0) -> SimpleNamespace:
    h, w = img.shape[:2]
    c = img.shape[2] if img.ndim == 3 else 1
    rows = np.zeros((h, w * c + pad), np.uint8)
    rows[:, :w * c] = img.reshape(h, w * c)
    return SimpleNamespace(encoding=encoding, height=h, width=w, step=w * c + pad,
                           data=rows.tobytes())


def test_to_array_handles_order_and_row_padding():
    assert np.array_equal(to_array(image_msg(FRAME, 'rgb8', pad=4)), FRAME)
    assert np.array_equal(to_array(image_msg(FRAME[:, :, ::-1], 'bgr8')), FRAME)
    with pytest.raises(BagError, match="encoding '16UC1' is not supported"):
        to_array(image_msg(FRAME, '16UC1'))
    short = image_msg(FRAME, 'rgb8')
    short.data = short.data[:-1]
    with pytest.raises(BagError, match='too short'):
        to_array(short)


def test_stream_counts_frozen_and_black_frames():
    s = ImageStream()
    dark = np.full((8, 8, 3), 3, np.uint8)
    for k, img in enumerate([FRAME, FRAME, FRAME + 1, dark, dark]):
        s.add(k * 33_000_000, img)
    assert (s.frozen, s.black, len(s.stamps)) == (2, 2, 5)


def test_pairing_by_stamp_uses_each_frame_once_within_the_lag():
    a = [0, 33, 66, 100, 133]
    b = [1, 34, 99, 135, 500]  # 66 has no partner within 5; 500 is too late
    assert pair_by_stamp(a, b, 5) == [(0, 0), (1, 1), (3, 2), (4, 3)]
    assert pair_by_stamp([0, 1], [1], 5) == [(1, 0)]  # the nearer claim wins
