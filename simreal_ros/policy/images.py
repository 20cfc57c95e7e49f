"""Camera frames as a policy sees them: decode, crop, resize, channel order, normalize, history.

The one implementation the policy node and training share (the network must see in training
exactly what it sees on the robot); no ROS::

    frame_from_buffer(data, height, width, step, encoding) -> uint8 (h, w, c)
        the pixels of a sensor_msgs/Image (rgb8, bgr8 or mono8; rows of ``step`` bytes, any
        row padding dropped), without cv_bridge
    preprocess(term, frame, encoding) -> float32 (C, H, W)
        1. center crop to ``term.crop`` (height, width) when set (odd margins: the extra pixel
           is cut at the bottom / right);
        2. resize to (H, W) by area averaging (cv2.INTER_AREA on the uint8 pixels, so an
           integer factor is the block mean rounded to an integer); no resize when the size
           already matches;
        3. channel order ``term.channels``: rgb, bgr, or gray = 0.299 R + 0.587 G + 0.114 B
           (float, after the resize); a mono8 camera gives its one channel three times for
           rgb / bgr;
        4. ``(pixel * scale - mean[c]) / std[c]``.
    FrameHistory(term): the last K preprocessed frames, oldest first, as (K*C, H, W); the
        first frame after a reset fills all K
    image_stack(frames) -> float32 (1, sum of K*C, H, W): the network's second input

cv2 is imported at the first resize, not at import.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.policy.spec import IMAGE_ENCODINGS, ImageTerm

U8Array = npt.NDArray[np.uint8]
F32Array = npt.NDArray[np.float32]

#: channels of each accepted encoding
ENCODING_CHANNELS = {'rgb8': 3, 'bgr8': 3, 'mono8': 1}
#: ITU-R BT.601 luma weights (what cv2.COLOR_RGB2GRAY uses), for R, G, B
LUMA_RGB = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def _check_encoding(encoding: str) -> int:
    if encoding not in ENCODING_CHANNELS:
        raise ValueError(f'image encoding {encoding!r} is not one the policy converts '
                         f'({", ".join(IMAGE_ENCODINGS)})')
    return ENCODING_CHANNELS[encoding]


def frame_from_buffer(data: Any, height: int, width: int, step: int, encoding: str
                      ) -> U8Array:
    """Return the (height, width, channels) uint8 pixels of an image message's bytes.

    ``data`` is anything with the buffer protocol (bytes, array.array); the result is a view
    of it where no padding has to be dropped. ValueError on an unknown encoding or a size that
    does not add up.
    """
    c = _check_encoding(encoding)
    if height < 1 or width < 1 or step < width * c:
        raise ValueError(f'image {width}x{height} {encoding} with step {step}: expected '
                         f'a step >= {width * c}')
    buf = np.frombuffer(data, dtype=np.uint8)
    if buf.size < height * step:
        raise ValueError(f'image {width}x{height} {encoding} with step {step} needs '
                         f'{height * step} bytes, got {buf.size}')
    rows = buf[:height * step].reshape(height, step)
    out: U8Array = rows[:, :width * c].reshape(height, width, c)
    return out


def center_crop(frame: U8Array, crop: tuple[int, int] | None) -> U8Array:
    """Return the central ``crop`` (height, width) of ``frame`` (a view)."""
    if crop is None:
        return frame
    h, w = int(frame.shape[0]), int(frame.shape[1])
    ch, cw = crop
    if ch > h or cw > w:
        raise ValueError(f'center crop {ch}x{cw} (height x width) is larger than the '
                         f'{h}x{w} frame')
    top, left = (h - ch) // 2, (w - cw) // 2
    return frame[top:top + ch, left:left + cw]


def resize_area(frame: U8Array, height: int, width: int) -> U8Array:
    """Resize (h, w, c) uint8 to (height, width, c) by area averaging (cv2.INTER_AREA)."""
    if frame.shape[0] == height and frame.shape[1] == width:
        return frame
    import cv2
    c = int(frame.shape[2])
    out = cv2.resize(np.ascontiguousarray(frame), (width, height),
                     interpolation=cv2.INTER_AREA)
    return np.asarray(out, dtype=np.uint8).reshape(height, width, c)


def preprocess(term: ImageTerm, frame: U8Array, encoding: str) -> F32Array:
    """Return one frame as the network sees it: float32 (C, H, W) (see the module doc)."""
    c_in = _check_encoding(encoding)
    if frame.ndim != 3 or frame.shape[2] != c_in or frame.dtype != np.uint8:
        raise ValueError(f'a {encoding} frame must be uint8 (h, w, {c_in}), got '
                         f'{frame.dtype} {frame.shape}')
    small = resize_area(center_crop(frame, term.crop), term.height, term.width)
    x = small.astype(np.float32)
    want = term.channels
    if encoding == 'mono8':
        if want != 'gray':
            x = np.repeat(x, 3, axis=2)
    elif want == 'gray':
        rgb = x if encoding == 'rgb8' else x[:, :, ::-1]
        x = (rgb @ LUMA_RGB)[:, :, None]
    elif encoding[:3] != want:  # rgb8 -> bgr or bgr8 -> rgb
        x = x[:, :, ::-1]
    scale = np.float32(term.scale)
    mean = term.mean.astype(np.float32)
    std = term.std.astype(np.float32)
    y = (x * scale - mean) / std
    out: F32Array = np.ascontiguousarray(y.transpose(2, 0, 1), dtype=np.float32)
    return out


class FrameHistory:
    """The last ``term.history`` preprocessed frames of one image term, oldest first."""

    def __init__(self, term: ImageTerm) -> None:
        self.term = term
        self._frames: deque[F32Array] = deque(maxlen=term.history)

    def __len__(self) -> int:
        return len(self._frames)

    def reset(self) -> None:
        """Forget the frames (the next one fills the whole history)."""
        self._frames.clear()

    def push(self, frame: F32Array) -> None:
        """Add one preprocessed (C, H, W) frame."""
        if not self._frames:
            self._frames.extend([frame] * self.term.history)
        else:
            self._frames.append(frame)

    def stack(self) -> F32Array:
        """Return the history as (K*C, H, W); ValueError when no frame has been pushed."""
        if not self._frames:
            raise ValueError(f'no frame from {self.term.topic} yet')
        out: F32Array = np.concatenate(list(self._frames), axis=0)
        return out


def image_stack(histories: Sequence[FrameHistory]) -> F32Array:
    """Return the network's image input: float32 (1, sum of K*C, H, W), terms in order."""
    out: F32Array = np.concatenate([h.stack() for h in histories], axis=0)[None]
    return out
