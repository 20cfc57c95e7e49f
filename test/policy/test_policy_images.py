"""Image observations: the spec's image term, preprocessing, history, the controller, the model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PolicyError
from simreal_ros.policy.control import HOLD, RUNNING, PolicyController
from simreal_ros.policy.images import (
    FrameHistory,
    frame_from_buffer,
    image_stack,
    preprocess,
)
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.terms import TermDef, register_term

ROBOT = load_robot('simreal_arm')
NAMES = ROBOT.joint_names
P = 20_000_000  # 50 Hz


def spec_data(**image) -> dict:
    return {
        'policy': 'seeing', 'robot': 'simreal_arm', 'model': 'net.pt', 'control_rate_hz': 50,
        'observation': [{'term': 'joint_pos_rel'},
                        {'term': 'image', 'camera': 'camera', 'size': [8, 8], **image}],
        'action': {'scale': 0.5, 'clip': 6.0}, 'safety': {'ramp_s': 0.0},
    }


def load(tmp_path: Path, data: dict, robot=None):
    p = tmp_path / 'seeing.yaml'
    p.write_text(yaml.safe_dump(data), encoding='utf-8')
    return load_policy_spec(p, robot)


def error(tmp_path: Path, data: dict, robot=None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, data, robot)
    assert info.value.source == str(tmp_path / 'seeing.yaml')
    return info.value


def test_image_term_parses_outside_the_vector(tmp_path):
    spec = load(tmp_path, spec_data(history=2, channels='gray', crop=[480, 480],
                                    mean=0.5, std=0.25, max_age_s=0.1))
    assert [t.name for t in spec.observation] == ['joint_pos_rel']
    assert spec.obs_dim == ROBOT.n  # images are not in the vector
    (img,) = spec.images
    assert (img.camera, img.topic, img.height, img.width) == ('camera', 'camera/image_raw', 8, 8)
    assert (img.crop, img.channels, img.history, img.max_age_ns) == ((480, 480), 'gray', 2,
                                                                     100_000_000)
    assert img.scale == pytest.approx(1 / 255)
    np.testing.assert_array_equal(img.mean, [0.5])
    assert spec.image_shape == (2, 8, 8)  # K*C = 2 * 1
    assert load(tmp_path, spec_data(history=3)).image_shape == (9, 8, 8)
    assert load_policy_spec('simreal_arm_reach').image_shape is None


@pytest.mark.parametrize(('image', 'key', 'expected', 'got'), [
    ({'camera': 'wrist'}, 'observation[1].camera', "a camera of simreal_arm ['camera']",
     'wrist'),
    ({'size': [0, 8]}, 'observation[1].size', 'the network input size', [0, 8]),
    ({'size': [8]}, 'observation[1].size', 'the network input size', [8]),
    ({'channels': 'rgba'}, 'observation[1].channels', "one of ['rgb', 'bgr', 'gray']", 'rgba'),
    ({'crop': [481, 10]}, 'observation[1].crop', 'within the 640x480 camera image', [481, 10]),
    ({'std': [1.0, 0.0, 1.0]}, 'observation[1].std[1]', '', 0.0),
    ({'mean': [0.1, 0.2]}, 'observation[1].mean', 'a list of 3 numbers', [0.1, 0.2]),
    ({'max_age_s': 0}, 'observation[1].max_age_s', '', 0),
    ({'history': 17}, 'observation[1].history', '', 17),
    ({'colour': 'rgb'}, 'observation[1].colour', '', None),
])
def test_bad_image_terms_name_the_key_what_was_expected_and_got(tmp_path, image, key,
                                                                expected, got):
    err = error(tmp_path, spec_data(**image))
    assert err.key == key and expected in err.expected
    if got is not None:
        assert err.got == got


def test_a_camera_encoding_the_node_cannot_convert_is_refused(tmp_path):
    cam = replace(ROBOT.cameras[0], encoding='yuv422')
    robot = replace(ROBOT, cameras=(cam,))
    err = error(tmp_path, spec_data(), robot)
    assert err.key == 'observation[1].camera'
    assert "converts (one of ['rgb8', 'bgr8', 'mono8'])" in err.expected
    assert err.got == "'camera' publishes yuv422"


def test_two_image_terms_share_one_size_and_no_camera_twice(tmp_path):
    side = replace(ROBOT.cameras[0], name='side', encoding='mono8')
    robot = replace(ROBOT, cameras=(ROBOT.cameras[0], side))
    data = spec_data()
    data['observation'].append({'term': 'image', 'camera': 'side', 'size': [8, 8],
                                'channels': 'gray', 'history': 2})
    spec = load(tmp_path, data, robot)
    assert spec.image_shape == (3 + 2, 8, 8)
    data['observation'][2]['size'] = [8, 9]
    err = error(tmp_path, data, robot)
    assert err.key == 'observation[2].size' and err.got == [8, 9]
    data['observation'][2].update(camera='camera', size=[8, 8])
    assert error(tmp_path, data, robot).key == 'observation[2].camera'


def test_image_is_a_reserved_term_name():
    with pytest.raises(ValueError, match="'image' is already registered"):
        register_term(TermDef('image', lambda n: n, (), lambda i, _o: i.position))


# ---- preprocessing ----------------------------------------------------------------------------
R = np.arange(16, dtype=np.uint8).reshape(4, 4) * 4  # 2x2 block means: 10, 18, 42, 50
RGB = np.stack([R, np.full((4, 4), 100, np.uint8), 200 - R], axis=2)


def term(tmp_path, **image):
    return load(tmp_path, spec_data(**image)).images[0]


def test_resize_is_the_block_mean_in_the_channel_order(tmp_path):
    rgb = term(tmp_path, size=[2, 2], scale=1.0)
    out = preprocess(rgb, RGB, 'rgb8')
    assert out.dtype == np.float32 and out.shape == (3, 2, 2)
    np.testing.assert_array_equal(out[0], [[10, 18], [42, 50]])
    np.testing.assert_array_equal(out[1], np.full((2, 2), 100))
    np.testing.assert_array_equal(out[2], [[190, 182], [158, 150]])
    # the same pixels sent as bgr8: the term's rgb order is restored
    np.testing.assert_array_equal(preprocess(rgb, RGB[:, :, ::-1].copy(), 'bgr8'), out)
    bgr = term(tmp_path, size=[2, 2], scale=1.0, channels='bgr')
    np.testing.assert_array_equal(preprocess(bgr, RGB, 'rgb8'), out[::-1])


def test_center_crop_gray_and_mono(tmp_path):
    gray = term(tmp_path, size=[2, 2], crop=[2, 2], scale=1.0, channels='gray')
    out = preprocess(gray, RGB, 'rgb8')
    r = np.array([[20, 24], [36, 40]], np.float32)  # the central 2x2 of R, no resize
    np.testing.assert_allclose(out[0], 0.299 * r + 0.587 * 100 + 0.114 * (200 - r), rtol=1e-6)
    assert out.shape == (1, 2, 2)
    mono = R[:, :, None]
    rgb = term(tmp_path, size=[4, 4], scale=1.0)
    out = preprocess(rgb, mono, 'mono8')
    for c in range(3):
        np.testing.assert_array_equal(out[c], R)
    # an odd margin: the extra pixel is cut at the bottom / right
    odd = term(tmp_path, size=[1, 1], crop=[1, 1], scale=1.0, channels='gray')
    assert preprocess(odd, mono, 'mono8')[0, 0, 0] == R[1, 1]


def test_normalization_per_channel(tmp_path):
    t = term(tmp_path, size=[4, 4], scale=0.5, mean=[1.0, 2.0, 3.0], std=[2.0, 4.0, 8.0])
    out = preprocess(t, RGB, 'rgb8')
    for c, (m, s) in enumerate(((1.0, 2.0), (2.0, 4.0), (3.0, 8.0))):
        np.testing.assert_allclose(out[c], (RGB[:, :, c] * 0.5 - m) / s, rtol=1e-6)


def test_bad_frames_are_value_errors(tmp_path):
    t = term(tmp_path, size=[2, 2], crop=[4, 4])
    with pytest.raises(ValueError, match='larger than the 3x4 frame'):
        preprocess(t, RGB[:3], 'rgb8')
    with pytest.raises(ValueError, match="'yuv422' is not one the policy converts"):
        preprocess(t, RGB, 'yuv422')
    with pytest.raises(ValueError, match=r'uint8 \(h, w, 1\)'):
        preprocess(t, RGB, 'mono8')


def test_frame_from_buffer_drops_row_padding():
    data = bytes([1, 2, 3, 4, 5, 6, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0])  # 2x2 rgb8, step 8
    f = frame_from_buffer(data, 2, 2, 8, 'rgb8')
    np.testing.assert_array_equal(f, [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 11, 12]]])
    assert frame_from_buffer(bytes(range(6)), 2, 3, 3, 'mono8').shape == (2, 3, 1)
    with pytest.raises(ValueError, match='needs 16 bytes, got 15'):
        frame_from_buffer(data[:15], 2, 2, 8, 'rgb8')
    with pytest.raises(ValueError, match='a step >= 6'):
        frame_from_buffer(data, 2, 2, 5, 'rgb8')
    with pytest.raises(ValueError, match='rgb8, bgr8, mono8'):
        frame_from_buffer(data, 2, 2, 8, '16UC1')


def test_history_stacks_the_last_k_frames_oldest_first(tmp_path):
    t = term(tmp_path, size=[1, 1], history=2, channels='gray')
    h = FrameHistory(t)
    f = [np.full((1, 1, 1), k, np.float32) for k in range(3)]
    h.push(f[0])
    np.testing.assert_array_equal(h.stack()[:, 0, 0], [0, 0])  # the first fills the history
    h.push(f[1])
    h.push(f[2])
    np.testing.assert_array_equal(h.stack()[:, 0, 0], [1, 2])
    assert image_stack([h]).shape == (1, 2, 1, 1)
    h.reset()
    with pytest.raises(ValueError, match='no frame from camera/image_raw yet'):
        h.stack()


# ---- the controller ---------------------------------------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.seen: list = []

    def __call__(self, obs, images):
        self.seen.append((obs.copy(), images.copy()))
        return np.zeros(ROBOT.n)


def frame(value: int) -> np.ndarray:
    return np.full((480, 640, 3), value, np.uint8)


def test_controller_feeds_the_stack_and_holds_on_a_stale_frame(tmp_path, monkeypatch):
    import simreal_ros.policy.control as control
    calls = []
    monkeypatch.setattr(control, 'preprocess',
                        lambda *a: calls.append(a[2]) or preprocess(*a))
    spec = load(tmp_path, spec_data(history=2, max_age_s=0.1, scale=1.0))
    model = Recorder()
    c = PolicyController(spec, ROBOT, model)
    q = ROBOT.home.copy()
    c.set_state(NAMES, q, np.zeros(ROBOT.n), P)
    ok, why = c.enable(P)
    assert not ok and 'no frames on camera/image_raw yet' in why
    c.set_image(0, frame(10), 'rgb8', P)
    assert c.enable(P)[0]
    t = P
    for _k in range(3):  # ramp (0 s), then running
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        r = c.step(t)
    assert r.mode == RUNNING and len(model.seen) == 2
    _obs, images = model.seen[-1]
    assert images.shape == (1, 6, 8, 8) and images.dtype == np.float32
    np.testing.assert_array_equal(images, 10.0)
    assert calls == ['rgb8']  # preprocessed once, in the first running step
    frame_t = t
    c.set_image(0, frame(20), 'rgb8', frame_t)
    t += P
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
    r = c.step(t)
    assert r.preprocess_ns > 0 and len(calls) == 2
    np.testing.assert_array_equal(model.seen[-1][1][0, :3], 10.0)  # oldest first
    np.testing.assert_array_equal(model.seen[-1][1][0, 3:], 20.0)
    # joint_states stay fresh, the camera stops: hold beyond max_age_s
    held = r.command
    while t - frame_t < 100_000_000:
        t += P
        c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
        r = c.step(t)
        assert r.mode == RUNNING  # up to max_age_s (100 ms) included
    t += P
    c.set_state(NAMES, q, np.zeros(ROBOT.n), t)
    r = c.step(t)
    assert r.mode == HOLD and c.mode == HOLD
    assert 'the newest frame on camera/image_raw is 120.0 ms old (max_age_s 0.1)' in r.event
    np.testing.assert_array_equal(r.command, held)
    assert c.image_ages_ns(t) == [t - frame_t]
    n = len(model.seen)
    c.set_image(0, frame(30), 'rgb8', t)
    r = c.step(t)
    assert r.mode == RUNNING and len(model.seen) == n + 1
    np.testing.assert_array_equal(model.seen[-1][1], 30.0)  # history restarted after the gap
    with pytest.raises(ValueError, match="encoding 'rgba8'"):
        c.set_image(0, frame(1), 'rgba8', t)
    assert c.counts['rejected_images'] == 1 and c.counts['images_received'] == 3


# ---- the model --------------------------------------------------------------------------------
class TinyCnn(torch.nn.Module):
    def __init__(self, obs_dim: int, channels: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, 4, 3, stride=2)
        self.head = torch.nn.Linear(4 + obs_dim, 6)

    def forward(self, obs: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        z = torch.relu(self.conv(images)).mean(dim=(2, 3))
        return self.head(torch.cat([z, obs], dim=1))


def test_two_input_models_load_run_and_name_the_declared_shapes(tmp_path):
    torch.manual_seed(0)
    net = TinyCnn(6, 6).eval()
    torch.jit.script(net).save(str(tmp_path / 'cnn.pt'))
    obs, images = np.linspace(-1, 1, 6), np.random.default_rng(0).random((1, 6, 8, 8))
    want = net(torch.tensor(obs, dtype=torch.float32)[None],
               torch.tensor(images, dtype=torch.float32)).detach().numpy()[0]
    m = load_model(tmp_path / 'cnn.pt', 6, 6, image_shape=(6, 8, 8))
    np.testing.assert_allclose(m(obs, images.astype(np.float32)), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(PolicyError, match=r'the spec declares inputs \(obs_vector, image_stack'
                       r'\) of shapes \(1, 6\) and \(1, 3, 8, 8\) but the network fails'):
        load_model(tmp_path / 'cnn.pt', 6, 6, image_shape=(3, 8, 8))
    torch.onnx.export(net, (torch.zeros(1, 6), torch.zeros(1, 6, 8, 8)),
                      str(tmp_path / 'cnn.onnx'), dynamo=False, input_names=['obs', 'images'])
    m = load_model(tmp_path / 'cnn.onnx', 6, 6, image_shape=(6, 8, 8))
    assert m.format == 'onnx'
    np.testing.assert_allclose(m(obs, images.astype(np.float32)), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(PolicyError, match=r'takes \[1, 6, 8, 8\] as its second input'):
        load_model(tmp_path / 'cnn.onnx', 6, 6, image_shape=(3, 8, 8))
