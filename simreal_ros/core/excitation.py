"""Seeded joint-space excitation trajectories for system identification.

Five patterns, all deviations from the robot's home pose:

``chirp``
    A logarithmic frequency sweep from ``f_min_hz`` to ``f_max_hz`` over the duration, with a
    seeded random phase per joint.
``multisine``
    A sum of sines with log-spaced frequencies in ``[f_min_hz, f_max_hz]`` and seeded random
    phases, normalised so that its peak equals the joint's amplitude.
``steps``
    Seeded random piecewise-constant targets that change every ``step_hold_s``; each change is a
    minimum-jerk transition timed so that the velocity bound holds.
``waypoints``
    Seeded random waypoints every ``step_hold_s`` joined with rest-to-rest minimum-jerk segments.
``sysid``
    The identification pattern of ``simreal sysid`` (see docs/sysid.md). Per joint a multisine
    of ``_SYSID_COMPONENTS`` log-spaced frequencies in ``[f_min_hz, f_max_hz]`` (rounded to
    harmonics of ``f_min_hz / 8``); each joint's grid is shifted by a fraction of the log step
    and no two joints share a frequency, so their responses do not alias into each other's
    parameters. Component amplitudes fall as
    ``f ** -0.5``: position content stays large at low frequency (gravity, stiffness and
    friction show in the tracking error there) while velocity and acceleration grow with
    ``f ** 0.5`` and ``f ** 1.5`` (damping and inertia show at the high end). Phases are
    Schroeder's for that power spectrum, improved by iterative clipping: a lower crest factor
    (peak / RMS) fits more excitation energy inside the same joint and velocity limits. With
    ten components whose power falls as ``1 / f`` a few low-frequency sines dominate, which
    bounds what phases can do: measured 2.3-3.0 per joint against 2.7-3.0 for random phases.
    Every ``_SYSID_DWELL_EVERY_S`` the signal's own clock slows smoothly to a stop and the arm
    dwells ``_SYSID_DWELL_S`` at a pose away from home, at rest: the tracking error at rest
    is where Coulomb friction (``frictionloss``) separates from viscous damping
    and where the static gravity load (masses) is seen without dynamics. Slowing the clock never
    raises the speed, so the velocity bound below holds through the dwells.

Whatever the amplitude and frequencies asked for, every sample is guaranteed to lie within
``[lower + position_margin, upper - position_margin]`` and to move no faster than
``velocity_margin * velocity_limit``: amplitudes are reduced per joint where needed. The velocity
returned is the analytic time derivative of the position, the trajectory starts and ends at home
at rest, and everything is precomputed so that :meth:`Excitation.sample` is cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import check_number
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

PATTERNS = ('chirp', 'multisine', 'steps', 'waypoints', 'sysid')

_SOURCE = 'excite'
_MULTISINE_COMPONENTS = 8
_MINJERK_PEAK = 1.875          # peak of d/ds (10 s^3 - 15 s^4 + 6 s^5), reached at s = 0.5
_STEP_MIN_FRACTION = 0.25      # shortest step transition, as a fraction of its segment
_GRID_POINTS_PER_CYCLE = 400   # multisine peak search: grid points per period of f_max
_GRID_MAX_POINTS = 400_000     # multisine peak search: cap on the grid size per joint
_SYSID_COMPONENTS = 10         # sines per joint of the sysid pattern
_SYSID_DWELL_EVERY_S = 8.0     # sysid: a dwell starts this long after the previous one ended
_SYSID_DWELL_S = 1.2           # sysid: time at rest in each dwell
_SYSID_SLOW_S = 0.4            # sysid: the signal clock's smooth stop (and restart) time
_SYSID_HARMONIC_DIVISOR = 8    # sysid: frequencies are harmonics of f_min / this
_CLIP_ITERATIONS = 40          # sysid: iterative-clipping rounds of the phase design
_CLIP_LEVEL = 0.7              # sysid: clip at this fraction of the peak in each round


def _minjerk(s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return the minimum-jerk blend and its derivative d/ds for ``s`` in [0, 1]."""
    s2 = s * s
    blend = s2 * s * (10.0 + s * (-15.0 + 6.0 * s))
    dblend = 30.0 * s2 * (1.0 - s) * (1.0 - s)
    return blend, dblend


def _crest(s: FloatArray) -> float:
    return float(np.max(np.abs(s)) / max(float(np.sqrt(np.mean(s * s))), 1e-300))


def _clip_phases(freqs: FloatArray, weights: FloatArray, phases: FloatArray, f0: float,
                 iterations: int = _CLIP_ITERATIONS) -> FloatArray:
    """Lower the crest factor of a periodic multisine by iterative clipping (phases only)."""
    count = int(math.ceil(16.0 * float(freqs[-1]) / f0))
    t = np.arange(count) / (count * f0)                     # one period of the harmonics
    basis = np.exp(1j * 2.0 * math.pi * np.outer(t, freqs))  # (N, k)
    best, best_crest = phases.copy(), math.inf
    ph = phases.copy()
    for _ in range(iterations):
        s = np.imag(basis @ (weights * np.exp(1j * ph)))
        crest = _crest(s)
        if crest < best_crest:
            best, best_crest = ph.copy(), crest
        limit = _CLIP_LEVEL * float(np.max(np.abs(s)))
        c = np.clip(s, -limit, limit)
        # phase of sin(w t + ph) that best matches c: angle of sum c(t) e^{-i w t}, + pi/2
        ph = np.angle(c @ np.conj(basis)) + 0.5 * math.pi
    out: FloatArray = np.mod(best, 2.0 * math.pi)
    return out


@dataclass(frozen=True)
class ExcitationConfig:
    """What to excite and how; validated on construction.

    Attributes:
        pattern: one of :data:`PATTERNS`.
        duration_s: total length (s), fade-in and fade-out included.
        amplitude: peak deviation from home (rad), reduced per joint where the position
            or velocity bounds require it.
        f_min_hz: lowest frequency of ``chirp`` and ``multisine`` (Hz).
        f_max_hz: highest frequency of ``chirp`` and ``multisine`` (Hz).
        step_hold_s: segment time of ``steps`` and ``waypoints`` (s).
        velocity_margin: fraction of each joint's velocity limit the trajectory may use.
        position_margin: distance kept away from each position limit (rad).
        ramp_s: length of the smooth fade-in from and fade-out to home (s).
        seed: seed of the random phases, targets and waypoints.
        joints: names of the joints to excite; the others hold home. ``None`` excites all.

    """

    pattern: str
    duration_s: float
    amplitude: float = 0.3
    f_min_hz: float = 0.1
    f_max_hz: float = 2.0
    step_hold_s: float = 1.0
    velocity_margin: float = 0.8
    position_margin: float = 0.05
    ramp_s: float = 1.0
    seed: int = 0
    joints: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        """Validate every field, raising :class:`ConfigError` naming the first bad one."""
        if not isinstance(self.pattern, str) or self.pattern not in PATTERNS:
            raise ConfigError(_SOURCE, 'pattern', f'one of {", ".join(PATTERNS)}',
                              self.pattern)
        duration = check_number(self.duration_s, _SOURCE, 'duration_s', positive=True)
        check_number(self.amplitude, _SOURCE, 'amplitude', minimum=0.0)
        f_min = check_number(self.f_min_hz, _SOURCE, 'f_min_hz', positive=True)
        f_max = check_number(self.f_max_hz, _SOURCE, 'f_max_hz')
        if f_max < f_min:
            raise ConfigError(_SOURCE, 'f_max_hz', f'a number >= f_min_hz ({f_min})',
                              self.f_max_hz)
        check_number(self.step_hold_s, _SOURCE, 'step_hold_s', positive=True)
        vm = check_number(self.velocity_margin, _SOURCE, 'velocity_margin', maximum=1.0)
        if vm <= 0.0:
            raise ConfigError(_SOURCE, 'velocity_margin', 'a number in (0, 1]',
                              self.velocity_margin)
        check_number(self.position_margin, _SOURCE, 'position_margin', minimum=0.0)
        ramp = check_number(self.ramp_s, _SOURCE, 'ramp_s', positive=True)
        if 2.0 * ramp > duration:
            raise ConfigError(_SOURCE, 'ramp_s',
                              f'a number <= duration_s / 2 ({duration / 2.0})', self.ramp_s)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ConfigError(_SOURCE, 'seed', 'an integer', self.seed)
        if self.seed < 0:
            raise ConfigError(_SOURCE, 'seed', 'an integer >= 0', self.seed)
        if self.joints is not None:
            joints: Any = self.joints
            if isinstance(joints, str) or not isinstance(joints, (list, tuple)):
                raise ConfigError(_SOURCE, 'joints', 'a tuple of joint names or None', joints)
            if not joints:
                raise ConfigError(_SOURCE, 'joints', 'a non-empty tuple of joint names or None',
                                  joints)
            for name in joints:
                if not isinstance(name, str) or not name:
                    raise ConfigError(_SOURCE, 'joints', 'joint names as non-empty strings',
                                      name)
            if len(set(joints)) != len(joints):
                raise ConfigError(_SOURCE, 'joints', 'joint names without duplicates', joints)
            object.__setattr__(self, 'joints', tuple(joints))


class Excitation:
    """A precomputed excitation trajectory of ``robot`` described by ``config``.

    Positions and velocities are in robot joint order; time ``t`` is seconds since the start.
    """

    def __init__(self, robot: RobotSpec, config: ExcitationConfig) -> None:
        """Check ``config`` against ``robot`` and precompute the trajectory."""
        self.robot = robot
        self.config = config
        names = robot.joint_names
        n = robot.n
        self._home = robot.home
        self._lo = robot.lower + config.position_margin
        self._hi = robot.upper - config.position_margin
        for i, name in enumerate(names):
            if not self._lo[i] <= self._home[i] <= self._hi[i]:
                raise ConfigError(
                    _SOURCE, 'position_margin',
                    f'a margin that keeps the home of joint {name!r} ({self._home[i]}) within '
                    f'[lower + margin, upper - margin] = [{self._lo[i]}, {self._hi[i]}]',
                    config.position_margin)
        self._mask = np.ones(n, dtype=bool)
        if config.joints is not None:
            self._mask[:] = False
            for name in config.joints:
                if name not in names:
                    raise ConfigError(_SOURCE, 'joints',
                                      f'names of joints of {robot.name} ({", ".join(names)})',
                                      name)
                self._mask[robot.index(name)] = True
        self._vmax = config.velocity_margin * robot.velocity_limit
        self._duration = float(config.duration_s)
        self._ramp = float(config.ramp_s)
        # Random draws are made for every joint, so a joint's trajectory does not depend on
        # which other joints are excited.
        rng = np.random.default_rng(config.seed)
        self._amplitude = np.zeros(n)
        if config.pattern in ('chirp', 'multisine', 'sysid'):
            self._init_periodic(rng)
        else:
            self._init_segments(rng)

    # ------------------------------------------------------------------ public API

    @property
    def duration_s(self) -> float:
        """Total length of the trajectory (s)."""
        return self._duration

    @property
    def joint_names(self) -> list[str]:
        """Joint names in the order of the returned arrays."""
        return self.robot.joint_names

    @property
    def amplitudes(self) -> FloatArray:
        """Effective per-joint peak deviation from home (rad), after the bounds; 0 if held."""
        return np.array(self._amplitude, dtype=np.float64)

    @property
    def position_bounds(self) -> tuple[FloatArray, FloatArray]:
        """The guaranteed position band ``(lower + margin, upper - margin)`` (rad)."""
        return self._lo.copy(), self._hi.copy()

    @property
    def velocity_bound(self) -> FloatArray:
        """The guaranteed per-joint speed bound ``velocity_margin * velocity_limit`` (rad/s)."""
        return np.array(self._vmax, dtype=np.float64)

    def sample(self, t: float) -> tuple[FloatArray, FloatArray]:
        """Return ``(position, velocity)`` at ``t`` seconds since the start.

        Before the start and from ``duration_s`` on, the robot is at home with zero velocity.
        """
        t = float(t)
        if math.isnan(t):
            raise ValueError('excitation time t must not be NaN')
        q, v = self._evaluate(np.array([t]))
        return q[0], v[0]

    def trajectory(self, rate_hz: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Sample the whole trajectory at ``rate_hz``.

        Returns ``(times, positions, velocities)``: times (N,) from 0 to ``duration_s``
        inclusive when it falls on the grid, positions and velocities (N, n).
        """
        rate = check_number(rate_hz, _SOURCE, 'rate_hz', positive=True)
        count = int(math.floor(self._duration * rate + 1e-9)) + 1
        times = np.arange(count, dtype=np.float64) / rate
        positions = np.empty((count, self.robot.n))
        velocities = np.empty((count, self.robot.n))
        chunk = 20_000
        for start in range(0, count, chunk):
            q, v = self._evaluate(times[start:start + chunk])
            positions[start:start + chunk] = q
            velocities[start:start + chunk] = v
        return times, positions, velocities

    # ------------------------------------------------------------------ precomputation

    def _init_periodic(self, rng: np.random.Generator) -> None:
        """Precompute a chirp or a multisine; both are faded in and out by an envelope."""
        cfg = self.config
        n = self.robot.n
        f_min = float(cfg.f_min_hz)
        f_max = float(cfg.f_max_hz)
        # The signals are symmetric about home, so the narrower side of the band limits them.
        band = np.minimum(self._home - self._lo, self._hi - self._home)
        # |d/dt (w d)| <= |w'| |d| + |d'| with max |w'| = 1.875 / ramp.
        envelope_rate = _MINJERK_PEAK / self._ramp
        if cfg.pattern == 'chirp':
            self._phase0 = rng.uniform(0.0, 2.0 * math.pi, size=n)
            # sup |d/dt sin(phi(t))| / sup |sin| = 2 pi f_max
            speed_per_amp = np.full(n, 2.0 * math.pi * f_max)
            self._gain = np.ones(n)
        else:
            k = _SYSID_COMPONENTS if cfg.pattern == 'sysid' else _MULTISINE_COMPONENTS
            self._freqs = np.repeat(np.geomspace(f_min, f_max, k)[None, :], n, axis=0)
            self._phases = rng.uniform(0.0, 2.0 * math.pi, size=(n, k))
            self._weights = np.ones((n, k))
            if cfg.pattern == 'sysid':
                self._init_sysid_spectrum(f_min, f_max, rng)
            self._gain = np.zeros(n)
            speed_per_amp = np.zeros(n)
            for i in range(n):
                peak, peak_rate = self._multisine_peaks(self._freqs[i], self._weights[i],
                                                        self._phases[i])
                if peak > 1e-12:
                    self._gain[i] = 1.0 / peak
                    speed_per_amp[i] = peak_rate / peak
        amp = np.minimum(float(cfg.amplitude), band)
        amp = np.minimum(amp, self._vmax / (speed_per_amp + envelope_rate))
        amp = np.where(self._mask & (self._gain > 0.0), np.maximum(amp, 0.0), 0.0)
        self._amplitude = amp

    def _init_sysid_spectrum(self, f_min: float, f_max: float,
                             rng: np.random.Generator) -> None:
        """Per-joint harmonic log grids, ``f ** -0.5`` amplitudes and Schroeder phases.

        Schroeder's phases flatten the envelope of a *periodic* multisine, so the frequencies
        are harmonics of ``f_min / _SYSID_HARMONIC_DIVISOR``: a log grid per joint (shifted by
        ``i / n`` of a log step for joint ``i``) rounded to the nearest harmonic not taken yet.
        """
        n, k = self._freqs.shape
        f0 = f_min / _SYSID_HARMONIC_DIVISOR
        ratio = (f_max / f_min) ** (1.0 / (k - 1)) if f_max > f_min else 1.0
        taken: set[int] = set()
        harmonics = np.zeros((n, k), dtype=np.int64)
        for i in range(n):
            want = f_min * ratio ** (np.arange(k) + i / n) / f0
            for c, w in enumerate(want):
                h = max(1, int(round(w)))
                step = 1
                while h in taken or (c and h <= harmonics[i, c - 1]):
                    h = max(1, int(round(w)) + (step + 1) // 2 * (1 if step % 2 else -1))
                    step += 1
                taken.add(h)
                harmonics[i, c] = h
        self._freqs = harmonics.astype(np.float64) * f0
        self._weights = self._freqs ** -0.5
        power = self._weights ** 2 / np.sum(self._weights ** 2, axis=1, keepdims=True)
        # Schroeder (1970): phi_k = -2 pi sum_{l<k} (h_k - h_l) p_l over the harmonics h
        gap = np.clip(harmonics[:, :, None] - harmonics[:, None, :], 0, None).astype(float)
        phases = -2.0 * math.pi * np.einsum('ikl,il->ik', gap, power)
        # With ten sparse harmonics Schroeder's phases alone leave a crest factor of 2.4-3.6
        # (no better than random phases, 2.7-3.0); iterative clipping (clip the peaks, keep
        # each component's phase of the clipped signal) from there brings it to 2.3-3.0.
        for i in range(n):
            phases[i] = _clip_phases(self._freqs[i], self._weights[i], phases[i], f0)
        # A seeded time shift per joint (phase 2 pi f tau) keeps the crest factor.
        tau = rng.uniform(0.0, 1.0 / f0, size=(n, 1))
        self._phases = np.mod(phases + 2.0 * math.pi * self._freqs * tau, 2.0 * math.pi)

    def _warp(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return the sysid signal clock ``t_eff(t)`` and its rate in [0, 1] (dwells stop it)."""
        slow, dwell, every = _SYSID_SLOW_S, _SYSID_DWELL_S, _SYSID_DWELL_EVERY_S
        cycle = every + 2.0 * slow + dwell        # real time of one moving + dwell cycle
        lost = slow + dwell                       # signal time one cycle lacks (integral of 1-r)
        c = np.floor(t / cycle)
        u = t - c * cycle
        te = c * (cycle - lost) + u
        rate = np.ones_like(t)
        # falling: r = 1 - b(s), s = (u - every) / slow; integral of b(s) ds = s^4 (2.5 - 3s + s^2)
        fall = (u > every) & (u <= every + slow)
        s = (u[fall] - every) / slow
        b, _ = _minjerk(s)
        rate[fall] = 1.0 - b
        te[fall] = c[fall] * (cycle - lost) + every + slow * (s - s ** 4 * (2.5 - 3.0 * s + s * s))
        rest = (u > every + slow) & (u <= every + slow + dwell)
        rate[rest] = 0.0
        te[rest] = c[rest] * (cycle - lost) + every + 0.5 * slow
        rise = u > every + slow + dwell
        s = (u[rise] - every - slow - dwell) / slow
        b, _ = _minjerk(s)
        rate[rise] = b
        te[rise] = c[rise] * (cycle - lost) + every + 0.5 * slow + slow * s ** 4 * (
            2.5 - 3.0 * s + s * s)
        return te, rate

    def _multisine_peaks(self, freqs: FloatArray, weights: FloatArray,
                         phases: FloatArray) -> tuple[float, float]:
        """Return rigorous upper bounds of ``sup |s|`` and ``sup |s'|`` of a multisine.

        ``s(t) = sum_k w_k sin(2 pi f_k t + phase_k)`` on ``[0, duration]``: the maxima on a
        fine grid plus a Lipschitz correction for what may lie between grid points.
        """
        omega = 2.0 * math.pi * freqs
        f_max = float(freqs[-1])
        count = int(min(_GRID_MAX_POINTS,
                        math.ceil(self._duration * f_max * _GRID_POINTS_PER_CYCLE) + 1))
        count = max(count, 2)
        dt = self._duration / (count - 1)
        grid_s = 0.0
        grid_ds = 0.0
        for start in range(0, count, 50_000):
            t = np.arange(start, min(count, start + 50_000), dtype=np.float64) * dt
            arg = np.outer(t, omega) + phases
            grid_s = max(grid_s, float(np.max(np.abs((np.sin(arg) * weights).sum(axis=1)))))
            grid_ds = max(grid_ds, float(np.max(np.abs(
                (np.cos(arg) * (weights * omega)).sum(axis=1)))))
        bound_ds = min(float((weights * omega).sum()),
                       grid_ds + float((weights * omega ** 2).sum()) * dt / 2.0)
        bound_s = min(float(weights.sum()), grid_s + bound_ds * dt / 2.0)
        return bound_s, bound_ds

    def _init_segments(self, rng: np.random.Generator) -> None:
        """Precompute steps or waypoints as knots joined by minimum-jerk transitions."""
        cfg = self.config
        n = self.robot.n
        hold = float(cfg.step_hold_s)
        ramp = self._ramp
        duration = self._duration
        # Knots: 0, ramp, ramp + hold, ... (while <= duration - ramp), duration.
        interior = [ramp]
        while interior[-1] + hold <= duration - ramp + 1e-12:
            interior.append(interior[-1] + hold)
        knots = np.array([0.0] + interior + [duration])
        seg = np.diff(knots)                          # (m,), all > 0
        m = len(seg)
        # Largest move per segment that a full-length min-jerk keeps within the speed bound.
        reach = seg[:, None] * self._vmax[None, :] / _MINJERK_PEAK       # (m, n)
        # remaining[k]: how far from home knot k may be and still get home in time.
        remaining = np.concatenate([np.cumsum(reach[::-1], axis=0)[::-1], np.zeros((1, n))])
        amp = np.where(self._mask, float(cfg.amplitude), 0.0)
        band_lo = np.maximum(self._lo, self._home - amp)
        band_hi = np.minimum(self._hi, self._home + amp)
        draws = rng.uniform(0.0, 1.0, size=(m - 1, n))
        points = np.empty((m + 1, n))
        points[0] = self._home
        points[m] = self._home
        for k in range(1, m):
            # Three pairwise-overlapping intervals (the band, the reach from the previous
            # knot, the way back home): their intersection is not empty.
            lo = np.maximum.reduce([band_lo, points[k - 1] - reach[k - 1],
                                    self._home - remaining[k]])
            hi = np.minimum.reduce([band_hi, points[k - 1] + reach[k - 1],
                                    self._home + remaining[k]])
            hi = np.maximum(hi, lo)
            target = band_lo + draws[k - 1] * (band_hi - band_lo)
            points[k] = np.clip(target, lo, hi)
        points = np.where(self._mask[None, :], points, self._home[None, :])
        delta = np.diff(points, axis=0)                                  # (m, n)
        if cfg.pattern == 'waypoints':
            durations = np.repeat(seg[:, None], n, axis=1)
        else:
            fast = _MINJERK_PEAK * np.abs(delta) / self._vmax[None, :]
            durations = np.clip(fast, _STEP_MIN_FRACTION * seg[:, None], seg[:, None])
            durations[0] = seg[0]       # gentle fade-in from home
            durations[-1] = seg[-1]     # gentle fade-out to home
        self._knots = knots
        self._points = points
        self._delta = delta
        self._seg_T = durations
        self._amplitude = np.max(np.abs(points - self._home[None, :]), axis=0)

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return positions and velocities (len(t), n) at the times ``t``."""
        n = self.robot.n
        count = t.shape[0]
        q = np.repeat(self._home[None, :], count, axis=0)
        v = np.zeros((count, n))
        active = (t >= 0.0) & (t < self._duration)
        if not np.any(active):
            return q, v
        ta = t[active]
        if self.config.pattern in ('chirp', 'multisine', 'sysid'):
            dq, dv = self._eval_periodic(ta)
        else:
            dq, dv = self._eval_segments(ta)
        q[active] += dq
        v[active] = dv
        # Guards against floating-point round-off only; the construction already satisfies both.
        np.clip(q, self._lo, self._hi, out=q)
        np.clip(v, -self._vmax, self._vmax, out=v)
        return q, v

    def _envelope(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return the fade envelope w(t) in [0, 1] and its derivative."""
        ramp = self._ramp
        w = np.ones_like(t)
        dw = np.zeros_like(t)
        rise = t < ramp
        if np.any(rise):
            b, db = _minjerk(np.clip(t[rise] / ramp, 0.0, 1.0))
            w[rise] = b
            dw[rise] = db / ramp
        fall = t > self._duration - ramp
        if np.any(fall):
            b, db = _minjerk(np.clip((self._duration - t[fall]) / ramp, 0.0, 1.0))
            w[fall] = b
            dw[fall] = -db / ramp
        return w, dw

    def _eval_periodic(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return deviation from home and velocity of a chirp or multisine."""
        cfg = self.config
        scale = self._amplitude * self._gain                          # (n,)
        if cfg.pattern == 'chirp':
            phase, rate = self._chirp_phase(t)                        # (N,), (N,)
            arg = phase[:, None] + self._phase0[None, :]
            s = np.sin(arg)
            ds = np.cos(arg) * rate[:, None]
        else:
            omega = 2.0 * math.pi * self._freqs                       # (n, k)
            te, rate = self._warp(t) if cfg.pattern == 'sysid' else (t, np.ones_like(t))
            arg = te[:, None, None] * omega[None, :, :] + self._phases[None, :, :]
            s = (np.sin(arg) * self._weights).sum(axis=2)
            ds = (np.cos(arg) * (self._weights * omega)).sum(axis=2) * rate[:, None]
        w, dw = self._envelope(t)
        d = s * scale
        dd = ds * scale
        return w[:, None] * d, dw[:, None] * d + w[:, None] * dd

    def _chirp_phase(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return the sweep phase phi(t) and its rate 2 pi f(t) of the logarithmic chirp."""
        f0 = float(self.config.f_min_hz)
        f1 = float(self.config.f_max_hz)
        duration = self._duration
        ratio = f1 / f0
        if ratio <= 1.0 + 1e-12:
            return 2.0 * math.pi * f0 * t, np.full_like(t, 2.0 * math.pi * f0)
        log_ratio = math.log(ratio)
        growth = np.exp(log_ratio * t / duration)                     # f(t) / f0
        phase = 2.0 * math.pi * f0 * duration / log_ratio * (growth - 1.0)
        return phase, 2.0 * math.pi * f0 * growth

    def _eval_segments(self, t: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return deviation from home and velocity of steps or waypoints."""
        k = np.searchsorted(self._knots, t, side='right') - 1
        k = np.clip(k, 0, len(self._delta) - 1)
        durations = self._seg_T[k]                                    # (N, n)
        s = np.clip((t - self._knots[k])[:, None] / durations, 0.0, 1.0)
        b, db = _minjerk(s)
        delta = self._delta[k]
        q = self._points[k] + delta * b - self._home[None, :]
        v = delta * db / durations
        return q, v
