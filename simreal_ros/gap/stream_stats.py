"""Per-topic stream statistics for data-quality checks (integer nanoseconds).

:class:`StreamStats` counts what ``simreal check`` needs of any stamped topic: rate, gaps,
out-of-order and duplicate stamps, and the skew between the header stamp and receive time.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
from typing import Any

import numpy as np


@dataclass
class StreamSummary:
    """Statistics of one stamped topic."""

    count: int
    rate_hz: float
    median_period_ms: float
    gaps: int
    max_gap_ms: float
    out_of_order: int
    duplicates: int
    skew_mean_ms: float
    skew_max_ms: float
    span_s: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in self.__dict__.items()}


class StreamStats:
    """Per-topic statistics, fed (header stamp or None, receive time) pairs.

    Times are the header stamps (receive times for messages without a header). A gap is an
    interval between consecutive distinct times longer than ``gap_factor`` times
    the median interval (and longer than ``min_gap_ns``). Out-of-order: a stamp earlier than
    the previous one; duplicate: equal to it. Skew: receive time minus header stamp. With
    ``window`` set, only the newest samples are kept (live use).
    """

    def __init__(self, gap_factor: float = 3.0, min_gap_ns: int = 2_000_000,
                 window: int | None = None) -> None:
        self.gap_factor = gap_factor
        self.min_gap_ns = min_gap_ns
        self._recv: deque[int] = deque(maxlen=window)
        self._times: deque[int] = deque(maxlen=window)
        self._skew: deque[int] = deque(maxlen=window)
        self.count = 0
        self.out_of_order = 0
        self.duplicates = 0
        self._last_stamp: int | None = None

    def add(self, stamp_ns: int | None, receive_ns: int) -> None:
        """Add one message."""
        self.count += 1
        self._recv.append(int(receive_ns))
        self._times.append(int(receive_ns if stamp_ns is None else stamp_ns))
        if stamp_ns is None:
            return
        if self._last_stamp is not None:
            if stamp_ns < self._last_stamp:
                self.out_of_order += 1
            elif stamp_ns == self._last_stamp:
                self.duplicates += 1
        if self._last_stamp is None or stamp_ns > self._last_stamp:
            self._last_stamp = int(stamp_ns)
        self._skew.append(int(receive_ns) - int(stamp_ns))

    def summary(self) -> StreamSummary:
        """Return the statistics so far."""
        recv = np.asarray(self._times, dtype=np.int64)
        nan = math.nan
        if len(recv) < 2:
            return StreamSummary(self.count, nan, nan, 0, nan, self.out_of_order,
                                 self.duplicates, nan, nan, 0.0)
        recv = np.unique(recv)
        if len(recv) < 2:
            return StreamSummary(self.count, nan, nan, 0, nan, self.out_of_order,
                                 self.duplicates, nan, nan, 0.0)
        d = np.diff(recv)
        med = float(np.median(d))
        limit = max(self.gap_factor * med, float(self.min_gap_ns))
        gaps = d[d > limit]
        span = float(recv[-1] - recv[0])
        skew = np.asarray(self._skew, dtype=np.float64)
        return StreamSummary(
            self.count, (len(recv) - 1) / (span / 1e9) if span > 0 else nan, med / 1e6,
            int(gaps.size), float(d.max()) / 1e6, self.out_of_order, self.duplicates,
            float(skew.mean()) / 1e6 if skew.size else nan,
            float(np.abs(skew).max()) / 1e6 if skew.size else nan, span / 1e9)
