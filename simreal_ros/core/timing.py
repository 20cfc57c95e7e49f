"""Precise periodic waiting and period statistics (wall clock, integer nanoseconds)."""

from __future__ import annotations

from collections import deque
import time

import numpy as np


class PreciseRate:
    """Wake at ``period_ns`` intervals: sleep until shortly before the deadline, then spin.

    ``time.sleep`` alone overshoots by 50-100 us plus scheduler noise; the final ``spin_ns``
    are spent polling the monotonic clock, which keeps the period error near the clock
    resolution at the cost of that much CPU per period. Missed deadlines are not made up in a
    burst: the schedule skips ahead and the miss is counted in ``overruns``.
    """

    def __init__(self, period_ns: int, spin_ns: int = 300_000) -> None:
        if period_ns <= 0:
            raise ValueError('period_ns must be > 0')
        self.period_ns = int(period_ns)
        self.spin_ns = max(0, int(spin_ns))
        self.next_ns = time.monotonic_ns() + self.period_ns
        self.overruns = 0

    def reset(self) -> None:
        """Restart the schedule from now."""
        self.next_ns = time.monotonic_ns() + self.period_ns

    def sleep(self) -> int:
        """Wait for the next deadline; return the wake-up time (monotonic ns)."""
        target = self.next_ns
        now = time.monotonic_ns()
        coarse = target - now - self.spin_ns
        if coarse > 0:
            time.sleep(coarse / 1e9)
        while True:
            now = time.monotonic_ns()
            if now >= target:
                break
        self.next_ns = target + self.period_ns
        if now - target > self.period_ns:
            missed = (now - target) // self.period_ns
            self.overruns += int(missed)
            self.next_ns += int(missed) * self.period_ns
        return now


class PeriodStats:
    """Rolling statistics of the intervals between events (period error in ns)."""

    def __init__(self, nominal_ns: int, window: int = 2000) -> None:
        self.nominal_ns = nominal_ns
        self._last: int | None = None
        self._periods: deque[int] = deque(maxlen=window)
        self.count = 0

    def tick(self, now_ns: int) -> None:
        """Record an event at ``now_ns``."""
        if self._last is not None:
            self._periods.append(now_ns - self._last)
        self._last = now_ns
        self.count += 1

    def summary(self) -> dict[str, float]:
        """Return rate and period-error percentiles over the window (ms)."""
        if not self._periods:
            return {'rate_hz': 0.0, 'period_err_p50_ms': 0.0, 'period_err_p99_ms': 0.0,
                    'period_err_max_ms': 0.0}
        p = np.asarray(self._periods, dtype=np.float64)
        err = np.abs(p - self.nominal_ns) / 1e6
        return {'rate_hz': float(1e9 / p.mean()),
                'period_err_p50_ms': float(np.percentile(err, 50)),
                'period_err_p99_ms': float(np.percentile(err, 99)),
                'period_err_max_ms': float(err.max())}
