"""Value perturbations of the injector on real message objects (no DDS needed)."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image, Imu, JointState

from simreal_ros.errors import ConfigError
from simreal_ros.latency.injection import Channel, ImageEffects, Perturbation
from simreal_ros.ros.perturb import (
    IMAGE,
    IMU,
    JOINT_STATE,
    check_applicable,
    perturb_image,
    perturb_imu,
    perturb_joint_state,
)

RNG = np.random.default_rng(0)


def test_joint_state_noise_has_the_configured_spread() -> None:
    p = Perturbation({'velocity': Channel(noise_std=0.1)})
    msg = JointState(position=[1.0] * 5000, velocity=[0.0] * 5000)
    perturb_joint_state(msg, p, np.random.default_rng(1))
    assert list(msg.position) == [1.0] * 5000
    assert abs(np.std(msg.velocity) - 0.1) < 0.005 and abs(np.mean(msg.velocity)) < 0.005


def test_joint_state_empty_fields_stay_empty() -> None:
    msg = JointState(position=[0.2], effort=[])
    perturb_joint_state(msg, Perturbation({'effort': Channel(bias=1.0)}), RNG)
    assert list(msg.effort) == []


def test_imu_bias_and_quantization() -> None:
    p = Perturbation({'angular_velocity': Channel(bias=0.01, quantization=0.005),
                      'linear_acceleration': Channel(bias=-9.81)})
    msg = Imu()
    msg.angular_velocity.x, msg.linear_acceleration.z = 0.1012, 9.81
    perturb_imu(msg, p, RNG)
    assert msg.angular_velocity.x == pytest.approx(0.11)
    assert msg.angular_velocity.y == pytest.approx(0.01)
    assert msg.linear_acceleration.z == pytest.approx(0.0)


def _image(encoding: str, channels: int, dtype: type = np.uint8, pad: int = 0) -> Image:
    h, w = 20, 30
    arr = (np.arange(h * w * channels) % 200).astype(dtype).reshape(h, w * channels)
    raw = np.zeros((h, w * channels * np.dtype(dtype).itemsize + pad), np.uint8)
    raw[:, :w * channels * np.dtype(dtype).itemsize] = arr.view(np.uint8)
    return Image(height=h, width=w, encoding=encoding, step=raw.shape[1], data=raw.tobytes())


def test_image_gain_clips_and_drops_row_padding() -> None:
    msg = _image('bgr8', 3, pad=6)
    perturb_image(msg, Perturbation(image=ImageEffects(gain=2.0)), RNG)
    out = np.frombuffer(bytes(msg.data), np.uint8).reshape(20, 90)
    ref = np.minimum((np.arange(20 * 90) % 200).reshape(20, 90) * 2, 255)
    assert msg.step == 90 and np.array_equal(out, ref)


def test_image_blur_noise_and_16_bit() -> None:
    msg = _image('mono16', 1, np.uint16)
    before = np.frombuffer(bytes(msg.data), np.uint16).astype(int)
    perturb_image(msg, Perturbation(image=ImageEffects(blur_sigma_px=2.0)), RNG)
    blurred = np.frombuffer(bytes(msg.data), np.uint16).astype(int)
    assert blurred.shape == before.shape
    assert np.abs(np.diff(blurred.reshape(20, 30), axis=1)).max() < np.abs(
        np.diff(before.reshape(20, 30), axis=1)).max()                # the jumps are smoothed
    perturb_image(msg, Perturbation(image=ImageEffects(noise_std=3.0)), RNG)
    noisy = np.frombuffer(bytes(msg.data), np.uint16).astype(float)
    assert 2.0 < np.std(noisy - blurred) < 4.0


def test_image_jpeg_keeps_shape() -> None:
    msg = _image('rgb8', 3)
    perturb_image(msg, Perturbation(image=ImageEffects(jpeg_quality=30)), RNG)
    assert len(msg.data) == 20 * 90 and msg.encoding == 'rgb8'


@pytest.mark.parametrize('encoding', ['rgba8', 'bgra8', '8UC4'])
def test_image_jpeg_of_four_channels_compresses_colour_and_keeps_alpha(encoding: str) -> None:
    rng = np.random.default_rng(2)
    h, w = 24, 32
    img = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
    img[:, :, 3] = np.arange(w, dtype=np.uint8) * 8                     # an alpha ramp
    msg = Image(height=h, width=w, encoding=encoding, step=w * 4, data=img.tobytes())
    perturb_image(msg, Perturbation(image=ImageEffects(jpeg_quality=20)), RNG)
    out = np.frombuffer(bytes(msg.data), np.uint8).reshape(h, w, 4)
    assert msg.step == w * 4 and msg.encoding == encoding
    assert np.array_equal(out[:, :, 3], img[:, :, 3])
    assert np.abs(out[:, :, :3].astype(int) - img[:, :, :3]).mean() > 5   # lossy: changed


def test_image_jpeg_keeps_the_colour_order() -> None:
    h, w = 16, 16
    for encoding, red in (('rgb8', 0), ('bgr8', 2)):
        img = np.zeros((h, w, 3), np.uint8)
        img[:, :, red] = 200
        msg = Image(height=h, width=w, encoding=encoding, step=w * 3, data=img.tobytes())
        perturb_image(msg, Perturbation(image=ImageEffects(jpeg_quality=90)), RNG)
        out = np.frombuffer(bytes(msg.data), np.uint8).reshape(h, w, 3).astype(int)
        assert np.abs(out - img).max() < 12, encoding


def test_image_jpeg_of_16_bit_raises_for_the_node_to_report() -> None:
    msg = _image('mono16', 1, np.uint16)
    with pytest.raises(ValueError, match='jpeg_quality needs an 8-bit image.*mono16'):
        perturb_image(msg, Perturbation(image=ImageEffects(gain=2.0, jpeg_quality=50)), RNG)


@pytest.mark.parametrize('msg,match', [
    (Image(height=2, width=2, encoding='yuv422', step=4, data=bytes(8)), 'not supported'),
    (Image(height=4, width=4, encoding='rgb8', step=12, data=bytes(10)), 'does not match'),
])
def test_image_problems_raise_for_the_node_to_report(msg: Image, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        perturb_image(msg, Perturbation(image=ImageEffects(gain=2.0)), RNG)


def test_perturbation_must_fit_the_route_type() -> None:
    check_applicable(Perturbation({'position': Channel()}), JOINT_STATE, 'p.yaml', 'r')
    check_applicable(Perturbation(image=ImageEffects()), IMAGE, 'p.yaml', 'r')
    with pytest.raises(ConfigError, match='routes.r.perturb.position'):
        check_applicable(Perturbation({'position': Channel()}), IMU, 'p.yaml', 'r')
    with pytest.raises(ConfigError, match='routes.r.perturb.image'):
        check_applicable(Perturbation(image=ImageEffects()), 'std_msgs/msg/String', 'p.yaml',
                         'r')
