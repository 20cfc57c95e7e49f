"""Image metrics of the perception gap and of ``simreal check`` (numpy only).

* :func:`to_array` turns a ``sensor_msgs/msg/Image`` (as rosbags or rclpy deserialize it) into
  an ``H x W x C`` uint8 array in RGB order (``rgb8``, ``bgr8``, ``rgba8``, ``bgra8``,
  ``mono8``); other encodings raise :class:`~simreal_ros.errors.BagError`.
* :func:`psnr`: ``10 log10(peak^2 / MSE)`` in dB over every pixel and channel; ``inf`` for
  identical frames.
* :func:`ssim`: the structural similarity of Wang et al. (2004) on the luma (BT.601), with
  an 11-tap Gaussian window (sigma 1.5), ``K1 = 0.01``, ``K2 = 0.03``, averaged over the
  valid windows; 1 for identical frames.
* :func:`colour_histogram` (per channel, normalised) and :func:`histogram_intersection`
  (1 = same distribution, 0 = disjoint).
* :class:`ImageStream` keeps what ``simreal check`` needs of a stream without its pixels: per
  frame the stamp, the mean intensity and a digest, so frozen frames (byte-identical to the
  previous one) and black frames (mean below ``black_level``) are counted.
* :func:`pair_by_stamp` pairs two streams' frames by nearest header stamp within a lag.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import hashlib
import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.errors import BagError

IMAGE = 'sensor_msgs/msg/Image'
UInt8Array = npt.NDArray[np.uint8]
FloatArray = npt.NDArray[np.float64]
#: encoding -> (channels, channel order to RGB(A))
ENCODINGS = {'rgb8': (3, (0, 1, 2)), 'bgr8': (3, (2, 1, 0)), 'rgba8': (4, (0, 1, 2)),
             'bgra8': (4, (2, 1, 0)), 'mono8': (1, (0,))}
SSIM_TAPS = 11
SSIM_SIGMA = 1.5


def to_array(msg: Any) -> UInt8Array:
    """Return the image as ``H x W x C`` uint8 (RGB, or one channel for mono8)."""
    enc = str(msg.encoding)
    if enc not in ENCODINGS:
        raise BagError(f'image encoding {enc!r} is not supported; use one of '
                       f'{sorted(ENCODINGS)}')
    channels, order = ENCODINGS[enc]
    h, w, step = int(msg.height), int(msg.width), int(msg.step)
    data = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if step < w * channels or data.size < h * step:
        raise BagError(f'image {w}x{h} {enc}: {data.size} bytes with step {step} is too short')
    rows = data[:h * step].reshape(h, step)[:, :w * channels].reshape(h, w, channels)
    return np.ascontiguousarray(rows[:, :, list(order)])


def _pair(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> tuple[FloatArray, FloatArray]:
    if a.shape != b.shape:
        raise ValueError(f'frames of different shapes {a.shape} and {b.shape}')
    return a.astype(np.float64), b.astype(np.float64)


def psnr(a: npt.NDArray[Any], b: npt.NDArray[Any], peak: float = 255.0) -> float:
    """Peak signal-to-noise ratio in dB (``inf`` if identical)."""
    x, y = _pair(a, b)
    mse = float(np.mean((x - y) ** 2))
    return math.inf if mse == 0 else 10.0 * math.log10(peak * peak / mse)


def luma(img: npt.NDArray[Any]) -> FloatArray:
    """BT.601 luma of an RGB(A) image, or the channel of a mono one, as float."""
    x = np.asarray(img, dtype=np.float64)
    if x.ndim == 2:
        return x
    if x.shape[2] == 1:
        return x[:, :, 0]
    return np.asarray(x[:, :, :3] @ np.array([0.299, 0.587, 0.114]), dtype=np.float64)


def _gaussian_filter_valid(x: FloatArray) -> FloatArray:
    half = SSIM_TAPS // 2
    k = np.exp(-0.5 * (np.arange(-half, half + 1) / SSIM_SIGMA) ** 2)
    k /= k.sum()
    rows = np.lib.stride_tricks.sliding_window_view(x, SSIM_TAPS, axis=0) @ k
    return np.asarray(np.lib.stride_tricks.sliding_window_view(rows, SSIM_TAPS, axis=1) @ k,
                      dtype=np.float64)


def ssim(a: npt.NDArray[Any], b: npt.NDArray[Any], peak: float = 255.0) -> float:
    """Mean structural similarity of the two frames' luma (1 if identical)."""
    x, y = _pair(a, b)
    x, y = luma(x), luma(y)
    if min(x.shape) < SSIM_TAPS:
        raise ValueError(f'frames of {x.shape} are smaller than the {SSIM_TAPS}-pixel window')
    c1, c2 = (0.01 * peak) ** 2, (0.03 * peak) ** 2
    mx, my = _gaussian_filter_valid(x), _gaussian_filter_valid(y)
    sxx = _gaussian_filter_valid(x * x) - mx * mx
    syy = _gaussian_filter_valid(y * y) - my * my
    sxy = _gaussian_filter_valid(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * sxy + c2)) / ((mx * mx + my * my + c1) * (sxx + syy + c2))
    return float(np.mean(s))


def mean_intensity(img: npt.NDArray[Any]) -> float:
    """Mean luma, 0..255."""
    return float(np.mean(luma(img)))


def colour_histogram(img: npt.NDArray[Any], bins: int = 32) -> FloatArray:
    """Per-channel histograms (channels x bins), each summing to 1."""
    x = np.asarray(img)
    x = x[:, :, None] if x.ndim == 2 else x[:, :, :3]
    out = np.stack([np.bincount((x[:, :, c].ravel().astype(np.int64) * bins) // 256,
                                minlength=bins) for c in range(x.shape[2])]).astype(np.float64)
    return np.asarray(out / out.sum(axis=1, keepdims=True), dtype=np.float64)


def histogram_intersection(h1: FloatArray, h2: FloatArray) -> FloatArray:
    """Per-channel intersection of two normalised histograms: 1 same, 0 disjoint."""
    return np.asarray(np.minimum(h1, h2).sum(axis=-1), dtype=np.float64)


@dataclass
class ImageStream:
    """Per-frame summaries of one image topic, in arrival order."""

    black_level: float = 8.0
    stamps: list[int] = field(default_factory=list)
    means: list[float] = field(default_factory=list)
    frozen: int = 0
    black: int = 0
    shape: tuple[int, ...] = ()
    _last_digest: bytes = b''

    def add(self, stamp_ns: int, img: UInt8Array) -> None:
        """Account one frame."""
        digest = hashlib.blake2b(img.tobytes(), digest_size=16).digest()
        if self.stamps and digest == self._last_digest:
            self.frozen += 1
        self._last_digest = digest
        m = mean_intensity(img)
        if m < self.black_level:
            self.black += 1
        self.stamps.append(int(stamp_ns))
        self.means.append(m)
        self.shape = tuple(img.shape)


def pair_by_stamp(a: Sequence[int], b: Sequence[int], max_lag_ns: int
                  ) -> list[tuple[int, int]]:
    """Index pairs (i in ``a``, j in ``b``): for each frame of ``a`` the nearest of ``b``.

    Only pairs within ``max_lag_ns`` count, and each frame of ``b`` is used at most once (the
    nearest claim wins), so a dropped frame is unpaired rather than compared twice.
    """
    sb = np.asarray(b, dtype=np.int64)
    order = np.argsort(sb, kind='stable')
    sorted_b = sb[order]
    best: dict[int, tuple[int, int]] = {}
    for i, t in enumerate(a):
        k = int(np.searchsorted(sorted_b, t))
        cands = [c for c in (k - 1, k) if 0 <= c < len(sorted_b)]
        if not cands:
            continue
        c = min(cands, key=lambda c: abs(int(sorted_b[c]) - int(t)))
        lag = abs(int(sorted_b[c]) - int(t))
        j = int(order[c])
        if lag <= max_lag_ns and (j not in best or lag < best[j][1]):
            best[j] = (i, lag)
    return sorted((i, j) for j, (i, _lag) in best.items())


def camera_pairs(image_topics: Sequence[str], primary: str, secondary: str
                 ) -> list[tuple[str, str]]:
    """Image topics of the primary robot and the secondary's same camera.

    ``primary``/``secondary`` are the paired joint_states topics (``/sim_a/joint_states``,
    ``/sim_b/joint_states``): their namespaces map ``/sim_a/camera/image_raw`` to
    ``/sim_b/camera/image_raw`` (and ``/camera/image_raw`` to ``/twin/camera/image_raw``).
    """
    pa, sa = primary.rpartition('/')[0], secondary.rpartition('/')[0]
    topics = set(image_topics)
    out = []
    for t in sorted(topics):
        if t.startswith(pa + '/') and not t.startswith(sa + '/'):
            partner = sa + t[len(pa):]
            if partner in topics:
                out.append((t, partner))
    return out


@dataclass
class CameraGap:
    """Image metrics of one camera's paired frames (primary vs secondary)."""

    primary: str
    secondary: str
    frames: tuple[int, int]
    psnr_db: list[float] = field(default_factory=list)
    ssim: list[float] = field(default_factory=list)
    mean_intensity: list[tuple[float, float]] = field(default_factory=list)
    histogram_intersection: list[list[float]] = field(default_factory=list)
    strip: list[tuple[UInt8Array, UInt8Array]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary (PSNR of identical pairs counts as ``null`` = infinite)."""
        def stats(v: list[float]) -> dict[str, float | None]:
            a = np.asarray(v, dtype=np.float64)
            finite = a[np.isfinite(a)]
            if not a.size:
                return {'mean': None, 'min': None, 'max': None}
            return {'mean': float(finite.mean()) if finite.size else None,
                    'min': float(a.min()) if np.isfinite(a.min()) else None,
                    'max': float(finite.max()) if finite.size else None}
        mi = np.asarray(self.mean_intensity, dtype=np.float64).reshape(-1, 2)
        hist = np.asarray(self.histogram_intersection, dtype=np.float64)
        return {'primary': self.primary, 'secondary': self.secondary,
                'frames': list(self.frames), 'pairs': len(self.ssim),
                'identical_pairs': int(sum(1 for p in self.psnr_db if math.isinf(p))),
                'psnr_db': stats(self.psnr_db), 'ssim': stats(self.ssim),
                'mean_intensity_primary': float(mi[:, 0].mean()) if mi.size else None,
                'mean_intensity_secondary': float(mi[:, 1].mean()) if mi.size else None,
                'histogram_intersection_per_channel': (hist.mean(axis=0).tolist()
                                                       if hist.size else None)}


def camera_gap(path: str, primary: str, secondary: str, stamps: tuple[Sequence[int],
               Sequence[int]], max_lag_ns: int, strip_frames: int = 4) -> CameraGap:
    """Compare the frames of two image topics of a bag, paired by header stamp.

    ``stamps`` are the two topics' frame stamps in arrival order (from
    :class:`ImageStream`); frames are decoded once, in a second pass, and dropped as soon as
    their pair is compared. ``strip_frames`` evenly spaced pairs are kept for the report.
    """
    from simreal_ros.bag import BagReader
    pairs = pair_by_stamp(stamps[0], stamps[1], max_lag_ns)
    gap = CameraGap(primary, secondary, (len(stamps[0]), len(stamps[1])))
    partner_of_a = dict(pairs)
    partner_of_b = {j: i for i, j in pairs}
    keep = {pairs[k][0] for k in np.linspace(0, len(pairs) - 1, min(strip_frames, len(pairs)),
                                               dtype=int)} if pairs else set()
    pending: dict[tuple[int, int], UInt8Array] = {}  # (side, index) -> frame
    count = [0, 0]
    with BagReader(path) as reader:
        for m in reader.messages([primary, secondary]):
            side = 0 if m.topic == primary else 1
            k = count[side]
            count[side] += 1
            i, j = (k, partner_of_a.get(k)) if side == 0 else (partner_of_b.get(k), k)
            if i is None or j is None:
                continue
            pending[(side, k)] = to_array(reader.deserialize(m))
            if (0, i) in pending and (1, j) in pending:
                a, b = pending.pop((0, i)), pending.pop((1, j))
                if a.shape != b.shape:
                    raise BagError(f'{primary} frames are {a.shape}, {secondary} frames '
                                   f'{b.shape}: the cameras differ')
                gap.psnr_db.append(psnr(a, b))
                gap.ssim.append(ssim(a, b))
                gap.mean_intensity.append((mean_intensity(a), mean_intensity(b)))
                gap.histogram_intersection.append(
                    histogram_intersection(colour_histogram(a), colour_histogram(b)).tolist())
                if i in keep:
                    gap.strip.append((a, b))
    return gap
