"""Legged gap metrics: how two runs of a floating-base robot differ (pure numpy, no ROS).

An episode (:class:`LeggedEpisode`) is what the legged topics carried, as arrays, stamps in
integer nanoseconds on one clock:

* ``odom`` (nav_msgs/Odometry): ``position_m`` (N x 3, the base origin in ``odom``),
  ``orientation_wxyz`` (N x 4), ``linear_velocity_m_s`` and ``angular_velocity_rad_s``
  (N x 3, in the base frame, as the twist of nav_msgs/Odometry is);
* ``foot_contacts``: ``foot_force_n`` (N x feet, each foot's contact normal force), at the
  odom stamps (the bridge stamps both with the same state);
* ``imu/data`` (optional, the same stamps): ``imu_gyro_rad_s`` and ``imu_acc_m_s2`` (N x 3);
* ``cmd_vel``: ``cmd_stamps_ns`` (M), ``cmd_linear_m_s`` and ``cmd_angular_rad_s`` (M x 3),
  each held until the next (zero-order hold, as the bridge keeps the latest).

A bad episode (rows that do not match the stamps, NaN or inf, stamps not increasing, a
non-unit quaternion) is one ValueError naming the episode, the field and what was wrong.

Per episode (:func:`episode_metrics`), over the samples from ``skip_s`` after the first stamp:

* **falls**: a sample is fallen when the base is below ``fall_height_m`` or tilted (the angle
  between its z axis and the world's) beyond ``fall_tilt_rad``; ``falls`` counts the entries
  into fallen, ``first_fall_s`` is the first one's time from the start (None: no fall);
* **velocity tracking** on the samples that are not fallen and have a command:
  ``velocity_tracking_error_m_s`` the mean of ``|v_xy - cmd_xy|`` (base frame, m/s),
  ``yaw_rate_error_rad_s`` the mean ``|w_z - cmd_w_z|``; ``mean_velocity_m_s`` the mean
  ``(v_x, v_y)`` (base frame) the robot made;
* **contacts**: a foot is in contact when its force exceeds ``contact_force_n``;
  ``duty_factor`` per foot is its share of samples in contact (1 standing, ~0.5 trotting);
  ``onsets_s`` each foot's touch-down times (entries into contact after the first sample:
  a foot that starts on the ground has none until it lifts and lands; with ``min_swing_s``
  only those after that long in the air, since the foot last left the ground, timed from
  before ``skip_s`` too) from the start;
* ``mean_height_m``, ``mean_tilt_rad``.

Between two episodes (:func:`legged_gap`; the second's samples are interpolated onto the
first's stamps inside its time range, orientations by normalised linear interpolation, which
is exact to 1e-6 rad between samples 10 ms and 0.1 rad/s apart):

* ``base_height_error_m``: RMS of the height difference; ``orientation_error_rad``: RMS of
  the rotation angle between the two orientations (``2 acos |<q_a, q_b>|``);
* ``velocity_error_m_s``: RMS of ``|v_a - v_b|`` (base frame); with IMUs,
  ``gyro_error_rad_s`` and ``acc_error_m_s2`` (RMS of the vector difference);
* ``contact_onset_offset_s`` per foot: each touch-down of the first paired with the second's
  nearest touch-down of the same foot within ``max_onset_offset_s``: the mean signed offset
  (second minus first: > 0 the second touches down late), the mean absolute one and how many
  touch-downs were paired (None: no touch-downs, as in standing);
* ``duty_factor_difference`` per foot (second minus first) and both episodes' own metrics.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.legged import tilt_rad
from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LeggedGapConfig(FromMapping):
    """Thresholds of the legged metrics (units in the names)."""

    SOURCE = 'legged gap'

    #: fallen below this base height (simreal_quad stands at 0.162 m; its body, 0.06 m
    #: tall, lies on the ground at 0.03 m)
    fall_height_m: float = 0.08
    #: fallen beyond this tilt of the base's z axis from the vertical (1.0 rad = 57 deg)
    fall_tilt_rad: float = 1.0
    #: a foot is in contact above this normal force (a standing foot carries 4-5 N)
    contact_force_n: float = 0.5
    #: the settling time left out of every metric, from the first stamp
    skip_s: float = 0.0
    #: two touch-downs of one foot further apart than this are not the same step
    max_onset_offset_s: float = 0.25
    #: a touch-down counts after at least this long in the air (0: every entry into contact;
    #: a foot that bounces off the ground for 10-40 ms is still in its stance)
    min_swing_s: float = 0.0

    def __post_init__(self) -> None:
        for key in ('fall_height_m', 'fall_tilt_rad', 'contact_force_n', 'max_onset_offset_s'):
            v = getattr(self, key)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(self.SOURCE, key, 'a finite number > 0', v)
        for key in ('skip_s', 'min_swing_s'):
            v = getattr(self, key)
            if not (math.isfinite(v) and v >= 0):
                raise ConfigError(self.SOURCE, key, 'a finite number >= 0', v)


@dataclass(frozen=True)
class LeggedEpisode:
    """One run's legged streams as arrays (see the module docstring)."""

    name: str
    stamps_ns: IntArray
    position_m: FloatArray
    orientation_wxyz: FloatArray
    linear_velocity_m_s: FloatArray
    angular_velocity_rad_s: FloatArray
    foot_force_n: FloatArray
    cmd_stamps_ns: IntArray
    cmd_linear_m_s: FloatArray
    cmd_angular_rad_s: FloatArray
    imu_gyro_rad_s: FloatArray | None = None
    imu_acc_m_s2: FloatArray | None = None

    def __post_init__(self) -> None:
        n = len(self.stamps_ns)
        m = len(self.cmd_stamps_ns)
        if n < 2:
            raise ValueError(f'{self.name}: stamps_ns: expected at least 2 samples, got {n}')
        checks: list[tuple[str, Any, int, int | None]] = [
            ('position_m', self.position_m, n, 3),
            ('orientation_wxyz', self.orientation_wxyz, n, 4),
            ('linear_velocity_m_s', self.linear_velocity_m_s, n, 3),
            ('angular_velocity_rad_s', self.angular_velocity_rad_s, n, 3),
            ('foot_force_n', self.foot_force_n, n, None),
            ('cmd_linear_m_s', self.cmd_linear_m_s, m, 3),
            ('cmd_angular_rad_s', self.cmd_angular_rad_s, m, 3),
            ('imu_gyro_rad_s', self.imu_gyro_rad_s, n, 3),
            ('imu_acc_m_s2', self.imu_acc_m_s2, n, 3)]
        for key, arr, rows, cols in checks:
            if arr is None:
                continue
            a = np.asarray(arr)
            if a.ndim != 2 or a.shape[0] != rows or (cols is not None and a.shape[1] != cols):
                want = f'({rows}, {cols if cols is not None else "feet"})'
                raise ValueError(f'{self.name}: {key}: expected shape {want} (one row per '
                                 f'stamp), got {a.shape}')
            bad = ~np.isfinite(a)
            if bad.any():
                row = int(np.argwhere(bad)[0][0])
                raise ValueError(f'{self.name}: {key}: NaN or inf at row {row} '
                                 f'({int(bad.sum())} values)')
        for key, t in (('stamps_ns', self.stamps_ns), ('cmd_stamps_ns', self.cmd_stamps_ns)):
            if len(t) > 1 and np.any(np.diff(t) <= 0):
                raise ValueError(f'{self.name}: {key}: expected strictly increasing stamps')
        norm = np.linalg.norm(self.orientation_wxyz, axis=1)
        if np.any(np.abs(norm - 1.0) > 1e-3):
            row = int(np.argmax(np.abs(norm - 1.0)))
            raise ValueError(f'{self.name}: orientation_wxyz: expected unit quaternions, got '
                             f'norm {norm[row]:.4g} at row {row}')

    @classmethod
    def from_arrays(cls, name: str, stamps_ns: Sequence[int] | IntArray, position_m: Any,
                    orientation_wxyz: Any, linear_velocity_m_s: Any,
                    angular_velocity_rad_s: Any, foot_force_n: Any,
                    cmd_stamps_ns: Sequence[int] | IntArray, cmd_linear_m_s: Any,
                    cmd_angular_rad_s: Any, imu_gyro_rad_s: Any = None,
                    imu_acc_m_s2: Any = None) -> LeggedEpisode:
        """Build from lists or arrays (checked as the constructor does)."""
        def f(a: Any) -> FloatArray:
            return np.asarray(a, dtype=np.float64)

        def opt(a: Any) -> FloatArray | None:
            return None if a is None else f(a)
        return cls(name, np.asarray(stamps_ns, dtype=np.int64), f(position_m),
                   f(orientation_wxyz), f(linear_velocity_m_s), f(angular_velocity_rad_s),
                   f(foot_force_n), np.asarray(cmd_stamps_ns, dtype=np.int64),
                   f(cmd_linear_m_s).reshape(-1, 3), f(cmd_angular_rad_s).reshape(-1, 3),
                   opt(imu_gyro_rad_s), opt(imu_acc_m_s2))


def _entries(flag: npt.NDArray[np.bool_], first: bool) -> IntArray:
    """Return where ``flag`` turns True (with ``first``, a True first sample is one)."""
    prev = np.concatenate([[not first], flag[:-1]])
    out: IntArray = np.flatnonzero(flag & ~prev)
    return out


def _touchdowns(t: IntArray, contact: npt.NDArray[np.bool_], min_swing_ns: int) -> IntArray:
    """Entries into contact after the first sample, each after >= ``min_swing_ns`` in the air."""
    on = _entries(contact, first=False)
    lift = _entries(~contact, first=True)  # the samples where the foot is first in the air
    out = []
    for i in on:
        before = lift[lift < i]
        if len(before) and t[i] - t[before[-1]] >= min_swing_ns:
            out.append(int(i))
    return np.asarray(out, dtype=np.int64)


def _window(ep: LeggedEpisode, cfg: LeggedGapConfig) -> npt.NDArray[np.bool_]:
    t = ep.stamps_ns
    keep: npt.NDArray[np.bool_] = t >= t[0] + int(round(cfg.skip_s * 1e9))
    return keep


def _held(stamps: IntArray, cmd_stamps: IntArray, values: FloatArray) -> FloatArray:
    idx = np.searchsorted(cmd_stamps, stamps, side='right') - 1
    out = np.full((len(stamps), values.shape[1]), np.nan)
    ok = idx >= 0
    out[ok] = values[idx[ok]]
    return out


def episode_metrics(ep: LeggedEpisode, cfg: LeggedGapConfig | None = None) -> dict[str, Any]:
    """One episode's falls, velocity tracking and contact timing (module docstring)."""
    cfg = cfg or LeggedGapConfig()
    keep = _window(ep, cfg)
    t = ep.stamps_ns[keep]
    t0 = int(ep.stamps_ns[0])
    tilt = tilt_rad(ep.orientation_wxyz[keep])
    height = ep.position_m[keep, 2]
    fallen = (height < cfg.fall_height_m) | (tilt > cfg.fall_tilt_rad)
    falls = _entries(fallen, first=True)  # fallen from the start is a fall
    cmd_lin = _held(t, ep.cmd_stamps_ns, ep.cmd_linear_m_s)
    cmd_ang = _held(t, ep.cmd_stamps_ns, ep.cmd_angular_rad_s)
    use = ~fallen & np.isfinite(cmd_lin[:, 0])
    v = ep.linear_velocity_m_s[keep]
    w = ep.angular_velocity_rad_s[keep]
    v_err = np.linalg.norm(v[use, :2] - cmd_lin[use, :2], axis=1)
    yaw_err = np.abs(w[use, 2] - cmd_ang[use, 2])
    contact_all = ep.foot_force_n > cfg.contact_force_n
    contact = contact_all[keep]
    swing = int(round(cfg.min_swing_s * 1e9))
    first = int(np.argmax(keep))  # touch-downs in the window, flights timed from before it
    return {
        'samples': int(keep.sum()),
        'duration_s': float((t[-1] - t[0]) * 1e-9) if len(t) else 0.0,
        'falls': len(falls),
        'first_fall_s': float((t[falls[0]] - t0) * 1e-9) if len(falls) else None,
        'tracked_samples': int(use.sum()),
        'velocity_tracking_error_m_s': float(v_err.mean()) if len(v_err) else None,
        'yaw_rate_error_rad_s': float(yaw_err.mean()) if len(yaw_err) else None,
        'mean_velocity_m_s': [float(x) for x in v[use, :2].mean(axis=0)] if use.any() else None,
        'mean_height_m': float(height.mean()) if len(height) else None,
        'mean_tilt_rad': float(tilt.mean()) if len(tilt) else None,
        'duty_factor': [float(c) for c in contact.mean(axis=0)] if len(t) else [],
        'onsets_s': [[float((ep.stamps_ns[i] - t0) * 1e-9)
                      for i in _touchdowns(ep.stamps_ns, contact_all[:, k], swing) if i >= first]
                     for k in range(contact.shape[1])],
    }


def _interp(t: IntArray, tb: IntArray, values: FloatArray) -> FloatArray:
    x, xp = (t - tb[0]).astype(np.float64), (tb - tb[0]).astype(np.float64)
    return np.stack([np.interp(x, xp, values[:, j]) for j in range(values.shape[1])], axis=1)


def _onset_offsets(a: list[float], b: list[float], shift_s: float, max_s: float
                   ) -> dict[str, Any]:
    """Pair touch-downs ``a`` with ``b`` (``b``'s times + ``shift_s``: on ``a``'s clock)."""
    if not a or not b:
        return {'mean_s': None, 'mean_abs_s': None, 'paired': 0}
    bb = np.asarray(b) + shift_s
    d = [float(bb[np.argmin(np.abs(bb - x))] - x) for x in a]
    d = [x for x in d if abs(x) <= max_s]
    if not d:
        return {'mean_s': None, 'mean_abs_s': None, 'paired': 0}
    return {'mean_s': float(np.mean(d)), 'mean_abs_s': float(np.mean(np.abs(d))),
            'paired': len(d)}


def _rms(x: FloatArray) -> float:
    return float(np.sqrt(np.mean(x * x)))


def legged_gap(a: LeggedEpisode, b: LeggedEpisode, cfg: LeggedGapConfig | None = None
               ) -> dict[str, Any]:
    """Return the gap of episode ``b`` against ``a`` of the same robot (module docstring)."""
    cfg = cfg or LeggedGapConfig()
    if a.foot_force_n.shape[1] != b.foot_force_n.shape[1]:
        raise ValueError(f'{a.name} has {a.foot_force_n.shape[1]} feet, {b.name} '
                         f'{b.foot_force_n.shape[1]}: not the same robot')
    ma, mb = episode_metrics(a, cfg), episode_metrics(b, cfg)
    keep = _window(a, cfg) & (a.stamps_ns >= b.stamps_ns[0]) & (a.stamps_ns <= b.stamps_ns[-1])
    t = a.stamps_ns[keep]
    out: dict[str, Any] = {'reference': a.name, 'compared': b.name, 'paired_samples': len(t),
                           'episodes': {a.name: ma, b.name: mb}}
    if len(t) == 0:
        raise ValueError(f'{a.name} and {b.name} do not overlap in time (stamps '
                         f'{a.stamps_ns[0]}..{a.stamps_ns[-1]} and {b.stamps_ns[0]}..'
                         f'{b.stamps_ns[-1]} ns)')
    pb = _interp(t, b.stamps_ns, b.position_m)
    qb = _interp(t, b.stamps_ns, b.orientation_wxyz)
    qb /= np.linalg.norm(qb, axis=1, keepdims=True)
    qa = a.orientation_wxyz[keep]
    angle = 2.0 * np.arccos(np.clip(np.abs(np.sum(qa * qb, axis=1)), 0.0, 1.0))
    vb = _interp(t, b.stamps_ns, b.linear_velocity_m_s)
    out['base_height_error_m'] = _rms(a.position_m[keep, 2] - pb[:, 2])
    out['orientation_error_rad'] = _rms(angle)
    out['velocity_error_m_s'] = _rms(np.linalg.norm(a.linear_velocity_m_s[keep] - vb, axis=1))
    for key, out_key in (('imu_gyro_rad_s', 'gyro_error_rad_s'),
                         ('imu_acc_m_s2', 'acc_error_m_s2')):
        va, vb_ = getattr(a, key), getattr(b, key)
        out[out_key] = (None if va is None or vb_ is None else _rms(np.linalg.norm(
            va[keep] - _interp(t, b.stamps_ns, vb_), axis=1)))
    shift_s = float((b.stamps_ns[0] - a.stamps_ns[0]) * 1e-9)
    out['contact_onset_offset_s'] = [
        _onset_offsets(oa, ob, shift_s, cfg.max_onset_offset_s)
        for oa, ob in zip(ma['onsets_s'], mb['onsets_s'], strict=True)]
    out['duty_factor_difference'] = [db - da for da, db in zip(ma['duty_factor'],
                                                                 mb['duty_factor'],
                                                                 strict=True)]
    return out
