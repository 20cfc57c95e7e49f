"""The live perception gap: one camera of two robots compared while they are recorded.

The recorder offers every frame of the primary's camera topic and of the secondary's same
camera (``/sim_a/camera/image_raw`` and ``/sim_b/camera/image_raw``, or ``/camera/image_raw``
and ``/twin/camera/image_raw``; :func:`simreal_ros.gap.image_metrics.camera_pairs` names
them) as it writes it: :meth:`LiveCameraGap.offer` keeps a reference to the undecoded message
with its header stamp, the last ``keep`` per side, and costs no decoding.

:meth:`LiveCameraGap.evaluate` (the recorder's metrics thread, every ``camera_gap_period_s``)
pairs the newest primary frame not compared yet with the secondary frame nearest in stamp
(within ``max_lag_ns``), decodes both and computes the metrics of ``simreal gap``: PSNR, SSIM,
mean intensity per side and the colour-histogram intersection. One pair per period, not every
frame: SSIM of a 640x480 pair alone takes about 220 ms in numpy here, so a live pair each
second costs a fifth of a core, and ``simreal gap`` compares every pair afterwards.
:meth:`summary` gives the last ``window`` pairs' figures for ``/diagnostics``.
"""

from __future__ import annotations

from collections import deque
import math
import threading
import time
from typing import Any, Callable

import numpy as np

from simreal_ros.gap.image_metrics import (
    UInt8Array,
    colour_histogram,
    histogram_intersection,
    mean_intensity,
    psnr,
    ssim,
)

PRIMARY, SECONDARY = 0, 1


class LiveCameraGap:
    """Paired frames of one camera on two robots, compared one pair at a time."""

    def __init__(self, primary: str, secondary: str, max_lag_ns: int, keep: int = 16,
                 window: int = 30) -> None:
        if keep < 1 or window < 1 or max_lag_ns < 0:
            raise ValueError('keep and window must be >= 1, max_lag_ns >= 0')
        self.topics = (primary, secondary)
        self.max_lag_ns = int(max_lag_ns)
        self.lock = threading.Lock()
        self._frames: tuple[deque[tuple[int, Any]], deque[tuple[int, Any]]] = (
            deque(maxlen=keep), deque(maxlen=keep))
        self.frames = [0, 0]
        self.pairs = 0
        self._last_stamp = -1  # the primary stamp compared last
        #: per pair: (primary stamp, lag ns, PSNR dB, SSIM, mean intensity p, s, histogram)
        self._window: deque[tuple[int, int, float, float, float, float, float]] = deque(
            maxlen=window)
        self.error = ''
        self.evaluate_ms = math.nan

    def offer(self, side: int, stamp_ns: int, frame: Any) -> None:
        """Keep a frame of ``side`` (PRIMARY or SECONDARY) with its header stamp."""
        with self.lock:
            self._frames[side].append((int(stamp_ns), frame))
            self.frames[side] += 1

    def _next_pair(self) -> tuple[int, int, Any, Any] | None:
        """Find the newest uncompared primary frame with a secondary one within the lag."""
        with self.lock:
            prim, sec = list(self._frames[PRIMARY]), list(self._frames[SECONDARY])
        if not sec:
            return None
        for stamp, frame in reversed(prim):
            if stamp <= self._last_stamp:
                return None
            s_stamp, s_frame = min(sec, key=lambda f: abs(f[0] - stamp))
            if abs(s_stamp - stamp) <= self.max_lag_ns:
                return stamp, s_stamp - stamp, frame, s_frame
        return None

    def evaluate(self, decode: Callable[[Any], UInt8Array]) -> bool:
        """Compare the next pair (decoded with ``decode``); return whether there was one.

        Frames that do not decode or differ in shape are reported in :attr:`error`
        (and in the summary), not raised: the recording goes on.
        """
        found = self._next_pair()
        if found is None:
            return False
        stamp, lag, fa, fb = found
        self._last_stamp = stamp
        start = time.perf_counter()
        try:
            a, b = decode(fa), decode(fb)
            if a.shape != b.shape:
                raise ValueError(f'{self.topics[0]} frames are {a.shape}, {self.topics[1]} '
                                 f'frames {b.shape}: the cameras differ')
            hist = float(np.mean(histogram_intersection(colour_histogram(a),
                                                        colour_histogram(b))))
            row = (stamp, lag, psnr(a, b), ssim(a, b), mean_intensity(a), mean_intensity(b),
                   hist)
        except Exception as exc:  # noqa: BLE001 - a bad frame is reported, never fatal
            with self.lock:
                self.error = f'{type(exc).__name__}: {exc}'
            return True
        with self.lock:
            self._window.append(row)
            self.pairs += 1
            self.error = ''
            self.evaluate_ms = (time.perf_counter() - start) * 1e3
        return True

    def summary(self) -> dict[str, object]:
        """Figures of the last ``window`` pairs (PSNR of identical frames is ``inf``)."""
        with self.lock:
            rows = list(self._window)
            out: dict[str, object] = {
                'primary': self.topics[0], 'secondary': self.topics[1],
                'frames_primary': self.frames[PRIMARY],
                'frames_secondary': self.frames[SECONDARY], 'pairs': self.pairs,
                'window_pairs': len(rows), 'evaluate_ms': self.evaluate_ms}
            if self.error:
                out['error'] = self.error
        if not rows:
            return out
        w = np.asarray([r[1:] for r in rows], dtype=np.float64)
        finite = w[:, 1][np.isfinite(w[:, 1])]
        out.update({
            'lag_ms': float(w[-1, 0]) / 1e6,
            'psnr_db': float(w[-1, 1]),
            'psnr_db_mean': float(finite.mean()) if finite.size else math.inf,
            'ssim': float(w[-1, 2]), 'ssim_mean': float(w[:, 2].mean()),
            'ssim_min': float(w[:, 2].min()),
            'mean_intensity_primary': float(w[:, 3].mean()),
            'mean_intensity_secondary': float(w[:, 4].mean()),
            'histogram_intersection': float(w[:, 5].mean())})
        return out
