"""The fit: Gauss-Newton over replays (``mujoco.sysid``), the command delay included.

Decision variables are dimensionless scales ``x = value / reference`` (reference = the nominal
value, or a typical value where the nominal is 0; the delay's is ``DELAY_REF_S``), so every
variable is about 1 and one finite-difference step (``FD_STEP``) suits all. The residual is the
position error (rad, divided by ``RESIDUAL_SCALE_RAD``) at every measured stamp of replays from
the measured state at the start of each training segment (``SEGMENT_NS``; multiple shooting: an
early mismatch does not spoil the whole fit, and the segments run in parallel in
the engine's batched rollout).

``mujoco.sysid.optimize`` (``optimizer='mujoco'``: :func:`mujoco.minimize.least_squares`,
Levenberg-Marquardt with box bounds and a batched finite-difference Jacobian) minimises it over
all variables at once. The bridge's delay line is a whole number of physics steps, which has no
derivative; during the fit a fractional delay blends the control sequences of the two
neighbouring whole delays (:meth:`Replayer.controls`), which makes the cost smooth in the delay.
The fit starts from a coarse scan of whole delays (every ``COARSE_DELAY_STEP`` steps up to
``MAX_DELAY_S``, nominal values, first segments); the fitted delay is rounded to whole steps
(what the bridge and the virtual bus apply) and the other parameters are refitted with it.
Fitting delay, damping and armature jointly matters: all three delay the response, and with
the delay fixed at the coarse scan's value (12 ms for a true 8 ms) the damping came out 35-48 %
low and the armature 17-27 % low.

Uncertainty: ``mujoco.sysid.calculate_intervals`` (covariance ``s^2 (J^T J)^-1`` at the optimum)
assumes independent residuals; replay errors are strongly correlated in time, so each
standard deviation is multiplied by ``sqrt((1 + rho) / (1 - rho))`` with ``rho`` the lag-one
autocorrelation of the residuals (the usual effective-sample-size correction for an AR(1)
error).

This is the one module outside ``simreal_ros.sim.mujoco`` that imports ``mujoco``, and only for
the optimizer: ``mujoco.sysid`` and ``mujoco.minimize`` are numerical tools (least squares,
finite-difference Jacobians, confidence intervals) that take a plain residual function. The
model itself is built and stepped through the engine protocol (:class:`Replayer` holds a
:class:`simreal_ros.sim.backend.SimBackend`), so a fit runs on whichever engine replays.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import io
import math
import time
from typing import Any, Callable, Sequence

from mujoco import minimize as mj_minimize
import mujoco.sysid as mjs
import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import DynamicsParams
from simreal_ros.sysid.replay import Replayer, Segment

FloatArray = npt.NDArray[np.float64]

JOINT_FIT = ('damping', 'frictionloss', 'armature', 'kp')
#: the key of the fitted backlash: the overlay's ``imperfections.backlash_rad`` (all joints)
BACKLASH_KEY = 'imperfections.backlash_rad'
#: reference value where the nominal is 0 (SI)
TYPICAL = {'damping': 0.1, 'frictionloss': 0.02, 'armature': 0.01, 'kp': 10.0, 'mass': 0.1,
           'backlash': 0.002}
#: bounds of the scale x = value / reference (backlash: 0 to 20 mrad of play)
BOUNDS = {'damping': (0.02, 30.0), 'frictionloss': (0.02, 30.0), 'armature': (0.05, 20.0),
          'kp': (0.2, 5.0), 'mass': (0.1, 10.0), 'backlash': (0.0, 10.0)}
#: what would identify a parameter the data cannot pin down
EXCITATION_HINT = {
    'damping': 'more joint speed: a larger amplitude:= or a higher f_max_hz:=',
    'frictionloss': 'slow motion with velocity reversals and dwells (pattern:=sysid) and a '
                    'larger amplitude:=',
    'armature': 'more acceleration: a higher f_max_hz:= (up to the servo bandwidth, ~5 Hz)',
    'kp': 'dwells at poses with different gravity load (pattern:=sysid, larger amplitude:=)',
    'mass': 'gravity-loaded poses: larger amplitude:= on the pitch joints, dwells',
    'command_delay': 'fast command changes: a higher f_max_hz:=',
    'backlash': 'velocity reversals at speed: pattern:=sysid with a larger amplitude:=',
}
SEGMENT_NS = 4_000_000_000
#: a training segment with a longer gap in its commands or states is not used: the recording
#: host stalled (measured on a loaded 2-core host: 1-2 s stalls, replay errors of 20-80 mrad
#: even with the true model, against 1-1.5 mrad elsewhere)
MAX_GAP_NS = 250_000_000
RESIDUAL_SCALE_RAD = 1e-3
FD_STEP = 1e-4
MAX_ITERS = 30
XTOL = 1e-4               # stop when a step changes x (scales ~1) by less than this
#: stop when an accepted step lowers the cost by less than this fraction of it. Without it the
#: optimizer, once the cost is flat to the finite differences' precision, looks for a step
#: that passes its sufficient-decrease rule by raising its regulariser 10^0.1-fold per try
#: from 1e-6 up to 1e8: on the demo's 20 s bag (21 parameters) that was 140-150 replays, 48
#: and 51 s of a 138 s fit, for steps that lowered the cost by 1e-8 of it. The last steps
#: before it lowered the cost by 2e-5, 6e-7 and 2e-7 of it and moved no scale by more than
#: 0.002, a tenth of the smallest standard deviation of that fit.
FTOL = 1e-5
MAX_DELAY_S = 0.04
DELAY_REF_S = 0.01        # the delay's decision variable is delay / DELAY_REF_S
COARSE_DELAY_STEP = 2
COARSE_SEGMENTS = 3
REL_STD_LIMIT = 0.25      # a relative standard deviation above this: not identifiable
CORR_LIMIT = 0.95         # |correlation| above this with another parameter: not separable
MIN_MOTION_RAD = 0.02     # a joint whose commands span less than this did not move


class _Converged(Exception):
    """Raised by the iteration callback to end the fit at ``x`` (the ``FTOL`` rule)."""

    def __init__(self, x: FloatArray) -> None:
        super().__init__('converged')
        self.x = x


def _optimize(pd: Any, residual_fn: Callable[..., Any],
              on_iter: Callable[[list[Any]], None]) -> FloatArray:
    """``mujoco.sysid.optimize`` with ``MAX_ITERS``, ``FD_STEP``, ``XTOL`` and ``FTOL``.

    The point returned on the ``FTOL`` rule is the last iteration's start: its step lowered
    the cost by less than ``FTOL`` of it.
    """
    try:
        opt, _ = mjs.optimize(pd, residual_fn, optimizer='mujoco', verbose=False,
                              max_iters=MAX_ITERS, eps=FD_STEP, xtol=XTOL,
                              iter_callback=on_iter, output=io.StringIO())
    except _Converged as stop:
        return stop.x
    return np.asarray(opt.as_vector(), dtype=np.float64)


@dataclass(frozen=True)
class FitParam:
    """One continuous decision variable."""

    kind: str          # damping, frictionloss, armature, kp, mass, backlash
    target: str        # joint or body name ('' for the backlash: one play for all joints)
    reference: float   # value at x = 1 (SI; for mass the nominal mass)
    nominal: float

    @property
    def key(self) -> str:
        """``joints.<name>.<kind>``, ``bodies.<name>.mass`` or :data:`BACKLASH_KEY`."""
        if self.kind == 'backlash':
            return BACKLASH_KEY
        return f'bodies.{self.target}.mass' if self.kind == 'mass' else \
            f'joints.{self.target}.{self.kind}'


@dataclass
class FitResult:
    """Estimates and their quality."""

    params: DynamicsParams
    delay_steps: int
    #: the fitted total play (rad), None when the backlash was not fitted
    backlash_rad: float | None
    values: dict[str, float]
    stddev: dict[str, float]
    nominal: dict[str, float]
    flags: dict[str, str]
    correlation: dict[str, tuple[str, float]]
    cost_start: float
    cost_end: float
    iterations: int
    fit_time_s: float = 0.0


def params_from(base: DynamicsParams, specs: Sequence[FitParam], x: FloatArray,
                delay_s: float | None = None) -> DynamicsParams:
    """Return ``base`` with the decision variables ``x`` written in."""
    joints = dict(base.joints)
    masses = dict(base.body_mass)
    for p, xi in zip(specs, x, strict=True):
        v = float(p.reference * xi)
        if p.kind == 'backlash':
            continue  # not a dynamics parameter: the replay applies it (Fitter.backlash)
        if p.kind == 'mass':
            masses[p.target] = v
        else:
            joints[p.target] = replace(joints[p.target], **{p.kind: v})
    out = replace(base, joints=joints, body_mass=masses)
    return out if delay_s is None else replace(out, command_delay_s=delay_s)


def build_specs(nominal: DynamicsParams, fit: Sequence[str], joints: Sequence[str],
                bodies: Sequence[str]) -> list[FitParam]:
    """Return the decision variables for ``fit`` on ``joints`` and ``bodies``."""
    specs: list[FitParam] = []
    for kind in JOINT_FIT:
        if kind not in fit:
            continue
        for j in joints:
            nom = float(getattr(nominal.joints[j], kind))
            specs.append(FitParam(kind, j, nom if nom > 0 else TYPICAL[kind], nom))
    if 'mass' in fit:
        for b in bodies:
            nom = float(nominal.body_mass[b])
            specs.append(FitParam('mass', b, nom, nom))
    if 'backlash' in fit:
        specs.append(FitParam('backlash', '', TYPICAL['backlash'], 0.0))
    return specs


class Fitter:
    """Runs the fit of ``specs`` (and the delay) on the training segments of a Replayer."""

    def __init__(self, replayer: Replayer, specs: Sequence[FitParam], base: DynamicsParams,
                 segments: Sequence[Segment], fit_delay: bool,
                 progress: Callable[[str], None] | None = None) -> None:
        self.rp = replayer
        self.specs = list(specs)
        self.base = base
        self.segments = list(segments)
        self.fit_delay = fit_delay
        self.say = progress or (lambda _line: None)
        self.meas = replayer.measured(self.segments)
        self.evaluations = 0
        self.fixed_delay_steps = base.command_delay_s * 1e9 / replayer.dt_ns

    @property
    def size(self) -> int:
        """Number of decision variables (the delay is the last one when fitted)."""
        return len(self.specs) + (1 if self.fit_delay else 0)

    def delay_steps(self, x: FloatArray) -> float:
        """Delay (physics steps, fractional) of the decision vector ``x``."""
        if not self.fit_delay:
            return float(self.fixed_delay_steps)
        return float(x[-1]) * DELAY_REF_S * 1e9 / self.rp.dt_ns

    def backlash(self, x: FloatArray) -> float | None:
        """Total play (rad) of ``x``; None when the backlash is not fitted."""
        for p, xi in zip(self.specs, x, strict=False):
            if p.kind == 'backlash':
                return float(p.reference * xi)
        return None

    def params(self, x: FloatArray, whole_steps: bool = False) -> DynamicsParams:
        """Dynamics of ``x`` (with the delay rounded to whole steps if asked)."""
        d = self.delay_steps(x)
        if whole_steps:
            d = float(round(d))
        return params_from(self.base, self.specs, x[:len(self.specs)],
                           d * self.rp.dt_ns / 1e9)

    def residuals(self, xs: FloatArray, segments: Sequence[Segment] | None = None,
                  whole_steps: bool = False) -> FloatArray:
        """Residual columns (M, K) for the K decision-vector columns of ``xs`` (P, K)."""
        segs = self.segments if segments is None else list(segments)
        meas = self.meas if segments is None else self.rp.measured(segs)
        xs = np.asarray(xs, dtype=np.float64).reshape(self.size, -1)
        cols = [xs[:, k] for k in range(xs.shape[1])]
        plist = [self.params(x, whole_steps) for x in cols]
        delays = [round(self.delay_steps(x)) if whole_steps else self.delay_steps(x)
                  for x in cols]
        plays = [self.backlash(x) for x in cols]
        pred = self.rp.predict(plist, delays, segs,
                               None if plays[0] is None else [float(b or 0.0) for b in plays])
        self.evaluations += len(plist)
        res = [np.concatenate([(p - m).ravel() for p, m in zip(per, meas, strict=True)])
               for per in pred]
        return np.stack(res, axis=1) / RESIDUAL_SCALE_RAD

    def _coarse_delay(self, x: FloatArray) -> float:
        """Best whole delay (steps) of a coarse scan at ``x`` on the first segments."""
        max_steps = int(round(MAX_DELAY_S * 1e9 / self.rp.dt_ns))
        cands = list(range(0, max_steps + 1, COARSE_DELAY_STEP))
        segs = self.segments[:COARSE_SEGMENTS]
        xs = np.repeat(x[:, None], len(cands), axis=1)
        xs[-1] = np.array(cands, dtype=np.float64) * self.rp.dt_ns / 1e9 / DELAY_REF_S
        r = self.residuals(xs, segs)
        cost = np.sum(r ** 2, axis=0)
        return float(cands[int(np.argmin(cost))])

    def run(self) -> FitResult:
        """Fit; returns estimates, standard deviations and identifiability flags."""
        t_start = time.perf_counter()
        x = np.ones(self.size)
        if self.fit_delay:
            x[-1] = self.base.command_delay_s / DELAY_REF_S
            self.say(f'delay scan 0..{MAX_DELAY_S * 1e3:g} ms at the nominal values')
            x[-1] = self._coarse_delay(x) * self.rp.dt_ns / 1e9 / DELAY_REF_S
            self.say(f'  start at {x[-1] * DELAY_REF_S * 1e3:g} ms')
        cost0 = float(np.sum(self.residuals(np.ones(self.size)[:, None]
                                            if not self.fit_delay else
                                            np.r_[np.ones(len(self.specs)),
                                                  self.base.command_delay_s / DELAY_REF_S]
                                            [:, None]) ** 2))
        pd = mjs.ParameterDict()
        lo, hi = self.bounds()
        for i in range(self.size):
            pd.add(mjs.Parameter(f'p{i}', float(x[i]), float(lo[i]), float(hi[i])))
        iters = [0]

        def residual_fn(xs: FloatArray, _params: Any) -> tuple[list[FloatArray], None, None]:
            return [self.residuals(xs)], None, None

        def on_iter(trace: list[Any]) -> None:
            iters[0] += 1
            last = trace[-1]
            self.say(f'  iteration {len(trace)}: cost {float(last.objective):.6g} '
                     f'({time.perf_counter() - t_start:.0f} s)')
            if float(last.reduction) < FTOL * float(last.objective):
                raise _Converged(np.asarray(last.candidate, dtype=np.float64).ravel())

        self.say(f'Gauss-Newton (mujoco.sysid) on {self.size} parameters, '
                 f'{len(self.segments)} segments')
        x = _optimize(pd, residual_fn, on_iter)
        if self.fit_delay and self.specs:
            # The blend of two whole delays is not a delay: refit the rest at the whole delay
            # the bridge will apply (else a true 8 ms came out 7.6 ms with damping +5 %).
            whole = float(round(self.delay_steps(x)))
            self.say(f'refit at the whole delay {whole * self.rp.dt_ns / 1e6:g} ms')
            n = len(self.specs)
            pd2 = mjs.ParameterDict()
            for i in range(n):
                pd2.add(mjs.Parameter(f'p{i}', float(x[i]), float(lo[i]), float(hi[i])))
            x_delay = whole * self.rp.dt_ns / 1e9 / DELAY_REF_S

            def residual_fixed(xs: FloatArray, _p: Any) -> tuple[list[FloatArray], None, None]:
                xs = np.asarray(xs).reshape(n, -1)
                full = np.vstack([xs, np.full((1, xs.shape[1]), x_delay)])
                return [self.residuals(full)], None, None

            x = np.r_[_optimize(pd2, residual_fixed, on_iter), x_delay]
        r = self.residuals(x[:, None])[:, 0]
        result = self._quality(x, r)
        r_whole = self.residuals(x[:, None], whole_steps=True)[:, 0]
        result.cost_start, result.cost_end = cost0, float(np.sum(r_whole ** 2))
        result.iterations = iters[0]
        result.fit_time_s = time.perf_counter() - t_start
        return result

    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """Box bounds of the decision vector."""
        lo = [BOUNDS[p.kind][0] for p in self.specs]
        hi = [BOUNDS[p.kind][1] for p in self.specs]
        if self.fit_delay:
            lo.append(0.0)
            hi.append(MAX_DELAY_S / DELAY_REF_S)
        return np.array(lo), np.array(hi)

    def _quality(self, x: FloatArray, r: FloatArray) -> FitResult:
        values: dict[str, float] = {}
        stddev: dict[str, float] = {}
        nominal: dict[str, float] = {}
        flags: dict[str, str] = {}
        corr_out: dict[str, tuple[str, float]] = {}
        keys = [p.key for p in self.specs] + (['command_delay_s'] if self.fit_delay else [])
        refs = [p.reference for p in self.specs] + ([DELAY_REF_S] if self.fit_delay else [])
        noms = [p.nominal for p in self.specs] + (
            [float(self.base.command_delay_s)] if self.fit_delay else [])
        kinds = [p.kind for p in self.specs] + (['command_delay'] if self.fit_delay else [])
        targets = [p.target for p in self.specs] + ([''] if self.fit_delay else [])
        self.say('Jacobian at the optimum (uncertainty)')
        lo, hi = self.bounds()
        jac, _ = mj_minimize.jacobian_fd(lambda xs: self.residuals(xs), x[:, None], r[:, None],
                                         np.float64(FD_STEP), 0, [lo[:, None], hi[:, None]])
        sigma, _ = mjs.calculate_intervals([r], jac)
        rho = _lag1(r, [len(s.states) for s in self.segments], self.rp.robot.n)
        inflate = math.sqrt((1 + rho) / max(1 - rho, 1e-6))
        sd = np.sqrt(np.clip(np.diag(sigma), 0, None)) * inflate
        diag = np.diag(sigma)
        denom = np.sqrt(np.outer(diag, diag))
        with np.errstate(divide='ignore', invalid='ignore'):
            corr = np.where(denom > 0, sigma / denom, 0.0)
        moved = self._moved()
        dt_s = self.rp.dt_ns / 1e9
        for i, key in enumerate(keys):
            values[key] = float(refs[i] * x[i])
            stddev[key] = float(refs[i] * sd[i])
            nominal[key] = float(noms[i])
            if corr.shape[0] > 1:
                c = np.abs(corr[i]).copy()
                c[i] = 0.0
                k = int(np.argmax(c))
                corr_out[key] = (keys[k], float(corr[i, k]))
            scale = max(abs(values[key]), 2 * dt_s) if kinds[i] == 'command_delay' else \
                max(abs(values[key]), 1e-12)
            rel = stddev[key] / scale
            if kinds[i] in JOINT_FIT and not moved.get(targets[i], True):
                flags[key] = f'joint {targets[i]} did not move; excite it'
            elif not math.isfinite(rel) or rel > REL_STD_LIMIT:
                flags[key] = (f'stddev {rel * 100:.0f} %; needs '
                              f'{EXCITATION_HINT[kinds[i]]}')
            elif key in corr_out and abs(corr_out[key][1]) > CORR_LIMIT:
                flags[key] = (f'corr {corr_out[key][1]:+.2f} with '
                              f'{corr_out[key][0]}; needs {EXCITATION_HINT[kinds[i]]}')
        delay_whole = int(round(self.delay_steps(x)))
        return FitResult(self.params(x, whole_steps=True), delay_whole, self.backlash(x),
                         values, stddev, nominal, flags, corr_out, 0.0, 0.0, 0)

    def _moved(self) -> dict[str, bool]:
        d = self.rp.data
        span = np.ptp(d.cmd_pos, axis=0) if d.cmd_pos.size else np.zeros(self.rp.robot.n)
        return {n: bool(span[i] >= MIN_MOTION_RAD) for i, n in enumerate(d.joint_names)}


def _lag1(r: FloatArray, counts: Sequence[int], n_joints: int) -> float:
    """Lag-one autocorrelation in time of the residual (segments of ``counts`` stamps)."""
    num = 0.0
    den = 0.0
    off = 0
    for k in counts:
        seg = r[off:off + k * n_joints].reshape(k, n_joints)
        off += k * n_joints
        if k < 4:
            continue
        num += float(np.sum(seg[:-1] * seg[1:]))
        den += float(np.sum(seg * seg))
    return min(max(num / den, 0.0), 0.999) if den > 0 else 0.0
