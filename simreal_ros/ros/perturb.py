"""Value perturbations of the injector on deserialized messages (JointState, Imu, Image).

Only routes with a ``perturb:`` section deserialize; every other route relays raw bytes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from simreal_ros.errors import ConfigError
from simreal_ros.latency.injection import IMU_FIELDS, JOINT_STATE_FIELDS, Perturbation

JOINT_STATE = 'sensor_msgs/msg/JointState'
IMU = 'sensor_msgs/msg/Imu'
IMAGE = 'sensor_msgs/msg/Image'
_CHANNELS = {'mono8': 1, '8UC1': 1, 'rgb8': 3, 'bgr8': 3, '8UC3': 3, 'rgba8': 4, 'bgra8': 4,
             '8UC4': 4, 'mono16': 1, '16UC1': 1}
#: 8-bit encodings whose colour channels are in RGB order (OpenCV's JPEG expects BGR)
_RGB_ORDER = {'rgb8', 'rgba8'}


def check_applicable(p: Perturbation, msg_type: str, source: str, route: str) -> None:
    """Fail when the perturbation names fields the route's message type does not have."""
    allowed = {JOINT_STATE: JOINT_STATE_FIELDS, IMU: IMU_FIELDS}.get(msg_type, ())
    for name in p.fields:
        if name not in allowed:
            raise ConfigError(source, f'routes.{route}.perturb.{name}',
                              f'a field of {msg_type} ({", ".join(allowed) or "none"})',
                              f'{name} (the route carries {msg_type})')
    if p.image is not None and msg_type != IMAGE:
        raise ConfigError(source, f'routes.{route}.perturb.image', f'a route of {IMAGE}',
                          f'a route of {msg_type}')


def _vector3(v: Any, ch: Any, rng: np.random.Generator) -> None:
    x, y, z = ch.apply([v.x, v.y, v.z], rng)
    v.x, v.y, v.z = float(x), float(y), float(z)


def perturb_joint_state(msg: Any, p: Perturbation, rng: np.random.Generator) -> None:
    """Perturb position/velocity/effort in place (fields that are present)."""
    for name, ch in p.fields.items():
        values = getattr(msg, name)
        if len(values):
            setattr(msg, name, [float(v) for v in ch.apply(values, rng)])


def perturb_imu(msg: Any, p: Perturbation, rng: np.random.Generator) -> None:
    """Perturb angular velocity and linear acceleration in place."""
    for name, ch in p.fields.items():
        _vector3(getattr(msg, name), ch, rng)


def perturb_image(msg: Any, p: Perturbation, rng: np.random.Generator) -> None:
    """Exposure gain, blur, noise, JPEG re-compression of an 8/16-bit image, in place.

    JPEG re-compresses 8-bit mono and colour images; with 4 channels (rgba8, bgra8, 8UC4) the
    colour channels are compressed and alpha is kept. Raises ``ValueError`` for what it does
    not handle: unknown encodings, and JPEG on a 16-bit image (JPEG is 8-bit). The node then
    relays the image unchanged, counts ``perturb_errors`` and reports the reason in WARN.
    """
    import cv2
    fx = p.image
    if fx is None:
        return
    ch = _CHANNELS.get(msg.encoding)
    if ch is None:
        raise ValueError(f'image encoding {msg.encoding!r} is not supported '
                         f'(supported: {sorted(_CHANNELS)})')
    dtype = np.uint16 if '16' in msg.encoding else np.uint8
    if fx.jpeg_quality and dtype != np.uint8:
        raise ValueError(f'jpeg_quality needs an 8-bit image, the route carries '
                         f'{msg.encoding!r}: remove perturb.image.jpeg_quality for this route '
                         f'(gain, blur and noise work on 16-bit images)')
    itemsize = np.dtype(dtype).itemsize
    if msg.step < msg.width * ch * itemsize or len(msg.data) < msg.step * msg.height:
        raise ValueError(f'image {msg.width}x{msg.height} step {msg.step} does not match '
                         f'{len(msg.data)} data bytes')
    if dtype == np.uint16 and msg.is_bigendian:
        raise ValueError('big-endian 16-bit images are not supported')
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8)[:msg.step * msg.height]
    img = rows.reshape(msg.height, msg.step)[:, :msg.width * ch * itemsize].copy()
    img = img.view(dtype).reshape(msg.height, msg.width, ch)
    top = float(np.iinfo(dtype).max)
    work = img.astype(np.float32)
    if fx.gain != 1.0:
        work *= fx.gain
    if fx.blur_sigma_px > 0.0:
        work = cv2.GaussianBlur(work, (0, 0), fx.blur_sigma_px).reshape(work.shape)
    if fx.noise_std > 0.0:
        work += rng.normal(0.0, fx.noise_std, work.shape).astype(np.float32)
    out = np.clip(np.rint(work), 0, top).astype(dtype)
    if fx.jpeg_quality:
        out = _jpeg_round_trip(out, fx.jpeg_quality, msg.encoding in _RGB_ORDER)
    msg.data = out.tobytes()
    msg.step = msg.width * ch * itemsize


def _jpeg_round_trip(img: Any, quality: int, rgb_order: bool) -> Any:
    """JPEG-encode and decode an 8-bit (h, w, 1 | 3 | 4) image; alpha is kept as it was."""
    import cv2
    h, w, ch = img.shape
    colour = img[:, :, :3] if ch == 4 else img
    if ch == 1:
        colour = colour[:, :, 0]
    elif rgb_order:
        colour = colour[:, :, ::-1]                        # to OpenCV's BGR
    ok, buf = cv2.imencode('.jpg', np.ascontiguousarray(colour),
                           [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError('JPEG encoding failed')
    decoded = cv2.imdecode(buf, cv2.IMREAD_GRAYSCALE if ch == 1 else cv2.IMREAD_COLOR)
    if decoded is None:
        raise ValueError('JPEG decoding failed')
    if ch == 1:
        return decoded.reshape(h, w, 1)
    if rgb_order:
        decoded = decoded[:, :, ::-1]
    if ch == 4:
        return np.concatenate([decoded, img[:, :, 3:]], axis=2)
    return np.ascontiguousarray(decoded)


PERTURBERS: dict[str, Callable[[Any, Perturbation, np.random.Generator], None]] = {
    JOINT_STATE: perturb_joint_state, IMU: perturb_imu, IMAGE: perturb_image,
}
