"""Sim-vs-real gap metrics and stream statistics (pure numpy; times are integer nanoseconds).

Two ``joint_states`` streams (primary: the robot or ``sim_a``; secondary: the twin or ``sim_b``)
are paired by header stamp: the secondary is linearly interpolated onto each primary stamp that
lies inside the secondary's time range, by joint name. On the pairs:

* per-joint RMSE, max |error| and mean error (offset), position and velocity;
* the lag between the streams from the peak of their cross-correlation (both resampled on a
  common fine grid, the peak refined by a parabola). ``lag > 0`` means the secondary follows
  the primary late: ``secondary(t) ~ primary(t - lag)``;
* k-step error: where the secondary was re-synced to the primary (twin mode), the error k
  samples after each re-sync, which is the model's k-step prediction error.

The same metrics fed one message at a time: :mod:`simreal_ros.gap.live`; per-topic stream
statistics for data-quality checks: :mod:`simreal_ros.gap.stream_stats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# ---------------------------------------------------------------------------------------------
# pairing


@dataclass(frozen=True)
class Series:
    """Samples of one joint_states stream: stamps (ns, sorted) and values (n x joints)."""

    names: tuple[str, ...]
    stamps: IntArray
    position: FloatArray
    velocity: FloatArray

    @classmethod
    def from_samples(cls, names: Sequence[str], stamps: Sequence[int],
                     position: Sequence[Sequence[float]],
                     velocity: Sequence[Sequence[float]] | None = None) -> 'Series':
        """Build from lists; samples are sorted by stamp and duplicate stamps dropped."""
        t = np.asarray(stamps, dtype=np.int64)
        q = np.asarray(position, dtype=np.float64).reshape(len(t), len(names))
        if velocity is None or len(velocity) == 0:
            v = np.full_like(q, np.nan)
        else:
            v = np.asarray(velocity, dtype=np.float64).reshape(len(t), len(names))
        order = np.argsort(t, kind='stable')
        t, q, v = t[order], q[order], v[order]
        if len(t) > 1:
            keep = np.concatenate([[True], np.diff(t) > 0])
            t, q, v = t[keep], q[keep], v[keep]
        return cls(tuple(names), t, q, v)

    def select(self, names: Sequence[str]) -> 'Series':
        """Return the columns of ``names`` in that order (KeyError naming a missing joint)."""
        idx = []
        for n in names:
            if n not in self.names:
                raise KeyError(f'joint {n!r} is not in the stream (it has {list(self.names)})')
            idx.append(self.names.index(n))
        return Series(tuple(names), self.stamps, self.position[:, idx], self.velocity[:, idx])

    def __len__(self) -> int:
        return int(self.stamps.shape[0])


def _interp(t_query: IntArray, t: IntArray, x: FloatArray) -> FloatArray:
    """Linear interpolation of every column of ``x`` (at ``t``) onto ``t_query``."""
    tq = (t_query - t[0]).astype(np.float64)
    tt = (t - t[0]).astype(np.float64)
    out = np.empty((len(t_query), x.shape[1]))
    for j in range(x.shape[1]):
        out[:, j] = np.interp(tq, tt, x[:, j])
    return out


@dataclass(frozen=True)
class Paired:
    """Primary samples with the secondary interpolated onto their stamps."""

    names: tuple[str, ...]
    stamps: IntArray
    primary_position: FloatArray
    secondary_position: FloatArray
    primary_velocity: FloatArray
    secondary_velocity: FloatArray

    @property
    def position_error(self) -> FloatArray:
        """Position error, primary minus secondary (rad)."""
        return self.primary_position - self.secondary_position

    @property
    def velocity_error(self) -> FloatArray:
        """Velocity error, primary minus secondary (rad/s)."""
        return self.primary_velocity - self.secondary_velocity

    def __len__(self) -> int:
        return int(self.stamps.shape[0])


def pair(primary: Series, secondary: Series) -> Paired:
    """Pair by header stamp: interpolate ``secondary`` onto the primary stamps it spans.

    Joints are matched by name (the primary's order, restricted to joints both streams have).
    """
    names = tuple(n for n in primary.names if n in secondary.names)
    p = primary.select(names)
    s = secondary.select(names)
    empty = np.zeros((0, len(names)))
    if len(p) == 0 or len(s) < 2:
        return Paired(names, np.zeros(0, np.int64), empty, empty, empty, empty)
    inside = (p.stamps >= s.stamps[0]) & (p.stamps <= s.stamps[-1])
    t = p.stamps[inside]
    return Paired(names, t, p.position[inside], _interp(t, s.stamps, s.position),
                  p.velocity[inside], _interp(t, s.stamps, s.velocity))


# ---------------------------------------------------------------------------------------------
# lag


def estimate_lag_ns(primary: Series, secondary: Series, max_lag_ns: int = 200_000_000,
                    grid_ns: int | None = None) -> float:
    """Lag of ``secondary`` behind ``primary`` (ns) from the cross-correlation peak.

    Both streams' positions are resampled on a common grid (default: a quarter of the finer
    median sample period, at most 1 ms). The primary's central part (the overlap less
    ``max_lag_ns`` at each end) is correlated with the secondary shifted by every lag in
    ``[-max_lag_ns, max_lag_ns]`` (Pearson-normalized per lag, so an offset or gain between
    the streams does not move the peak; summed over joints), and the peak is refined with a
    parabola. Returns NaN when the overlap is too short or the signals are constant.
    """
    names = tuple(n for n in primary.names if n in secondary.names)
    if len(primary) < 4 or len(secondary) < 4 or not names:
        return math.nan
    p = primary.select(names)
    s = secondary.select(names)
    t0 = max(p.stamps[0], s.stamps[0])
    t1 = min(p.stamps[-1], s.stamps[-1])
    if grid_ns is None:
        period = min(float(np.median(np.diff(p.stamps))), float(np.median(np.diff(s.stamps))))
        grid_ns = int(max(1_000, min(period / 4, 1_000_000)))
    span = int(t1 - t0)
    max_lag_ns = int(min(max_lag_ns, span // 4))
    max_k = max_lag_ns // grid_ns
    if max_k < 2:
        return math.nan
    grid = np.arange(t0, t1, grid_ns, dtype=np.int64)
    n = len(grid)
    a = _interp(grid, p.stamps, p.position)
    b = _interp(grid, s.stamps, s.position)
    centre = slice(max_k, n - max_k)
    m = n - 2 * max_k
    size = 1 << int(math.ceil(math.log2(2 * n)))
    lags = np.arange(-max_k, max_k + 1)
    total = np.zeros(len(lags))
    used = 0
    for j in range(len(names)):
        if not (np.all(np.isfinite(a[:, j])) and np.all(np.isfinite(b[:, j]))):
            continue
        aj = np.zeros(n)
        aj[centre] = a[centre, j] - a[centre, j].mean()
        a_energy = float(np.dot(aj, aj))
        if a_energy <= 1e-18:
            continue
        bj = b[:, j]
        cc = np.fft.irfft(np.fft.rfft(bj, size) * np.conj(np.fft.rfft(aj, size)), size)
        raw = np.concatenate([cc[-max_k:], cc[:max_k + 1]])  # sum_t a[t] b[t + k]
        # energy and sum of b over each shifted window [max_k + k, max_k + k + m)
        c1 = np.concatenate([[0.0], np.cumsum(bj)])
        c2 = np.concatenate([[0.0], np.cumsum(bj * bj)])
        lo = max_k + lags
        s1 = c1[lo + m] - c1[lo]
        s2 = c2[lo + m] - c2[lo]
        b_var = np.maximum(s2 - s1 * s1 / m, 1e-300)
        total += raw / np.sqrt(a_energy * b_var)  # a is zero-mean: raw is the covariance
        used += 1
    if not used:
        return math.nan
    i = int(np.argmax(total))
    shift = float(lags[i])
    if 0 < i < len(total) - 1:
        y0, y1, y2 = total[i - 1], total[i], total[i + 1]
        den = y0 - 2 * y1 + y2
        if den < 0:
            shift += 0.5 * (y0 - y2) / den
    return shift * grid_ns


# ---------------------------------------------------------------------------------------------
# metrics


@dataclass(frozen=True)
class JointMetrics:
    """Error statistics of one joint (position in rad, velocity in rad/s)."""

    rmse: float
    max_abs: float
    mean: float
    velocity_rmse: float
    velocity_max_abs: float


def _nanstat(x: FloatArray) -> tuple[float, float, float]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan, math.nan
    return (float(np.sqrt(np.mean(x * x))), float(np.max(np.abs(x))), float(np.mean(x)))


def joint_metrics(paired: Paired) -> dict[str, JointMetrics]:
    """Per-joint RMSE, max |error| and mean error of the paired streams."""
    out: dict[str, JointMetrics] = {}
    pe, ve = paired.position_error, paired.velocity_error
    for j, name in enumerate(paired.names):
        r, m, mean = _nanstat(pe[:, j])
        vr, vm, _ = _nanstat(ve[:, j])
        out[name] = JointMetrics(r, m, mean, vr, vm)
    return out


def detect_resyncs(paired: Paired, threshold: float = 1e-6, factor: float = 10.0) -> IntArray:
    """Stamps where the secondary was snapped onto the primary (twin re-sync).

    A re-sync is a sample whose largest |position error| is below ``threshold`` while the
    sample before had an error ``factor`` times larger (and above ``threshold``).
    """
    if len(paired) < 2:
        return np.zeros(0, np.int64)
    e = np.max(np.abs(paired.position_error), axis=1)
    hit = (e[1:] < threshold) & (e[:-1] > threshold) & (e[:-1] > factor * np.maximum(e[1:],
                                                                                       1e-300))
    return np.asarray(paired.stamps[1:][hit], dtype=np.int64)


def k_step_errors(paired: Paired, resync_ns: Sequence[int] | IntArray,
                  ks: Sequence[int] = (1, 5, 10, 20, 50)) -> dict[int, dict[str, float]]:
    """RMS over re-syncs of each joint's position error ``k`` samples after the re-sync.

    Only re-syncs followed by at least ``k`` samples before the next re-sync count.
    """
    out: dict[int, dict[str, float]] = {}
    if len(paired) == 0:
        return out
    starts = np.searchsorted(paired.stamps, np.asarray(resync_ns, dtype=np.int64))
    ends = np.concatenate([starts[1:], [len(paired)]])
    err = paired.position_error
    for k in ks:
        rows = [s + k for s, e in zip(starts, ends, strict=True) if s + k < e]
        if not rows:
            continue
        sel = err[rows]
        out[int(k)] = {n: float(np.sqrt(np.mean(sel[:, j] ** 2)))
                       for j, n in enumerate(paired.names)}
        out[int(k)]['_count'] = float(len(rows))
    return out


@dataclass
class GapSummary:
    """Everything the offline gap report and the live diagnostics say about two streams."""

    names: tuple[str, ...]
    pairs: int
    joints: dict[str, JointMetrics]
    lag_ms: float
    lag_per_joint_ms: dict[str, float]
    k_step: dict[int, dict[str, float]] = field(default_factory=dict)
    resyncs: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""
        def num(x: float) -> float | None:
            return None if not math.isfinite(x) else float(x)
        return {
            'joints': list(self.names), 'pairs': self.pairs,
            'lag_ms': num(self.lag_ms),
            'per_joint': {n: {'rmse_rad': num(m.rmse), 'max_abs_rad': num(m.max_abs),
                              'mean_rad': num(m.mean), 'velocity_rmse': num(m.velocity_rmse),
                              'velocity_max_abs': num(m.velocity_max_abs),
                              'lag_ms': num(self.lag_per_joint_ms.get(n, math.nan))}
                          for n, m in self.joints.items()},
            'resyncs': self.resyncs,
            'k_step_rmse_rad': {str(k): {n: num(v) for n, v in d.items() if n != '_count'}
                                for k, d in self.k_step.items()},
        }


def summarize(primary: Series, secondary: Series, *, max_lag_ns: int = 200_000_000,
              resync_ns: Sequence[int] | None = None,
              ks: Sequence[int] = (1, 5, 10, 20, 50)) -> GapSummary:
    """Pair the streams and compute every gap metric.

    ``resync_ns=None`` detects re-syncs from the error itself (:func:`detect_resyncs`).
    """
    paired = pair(primary, secondary)
    lag = estimate_lag_ns(primary, secondary, max_lag_ns)
    per_joint = {}
    for n in paired.names:
        per_joint[n] = estimate_lag_ns(primary.select([n]), secondary.select([n]),
                                       max_lag_ns) / 1e6
    resyncs = detect_resyncs(paired) if resync_ns is None else np.asarray(resync_ns, np.int64)
    return GapSummary(paired.names, len(paired), joint_metrics(paired), lag / 1e6, per_joint,
                      k_step_errors(paired, resyncs, ks) if len(resyncs) else {},
                      int(len(resyncs)))
