"""The policy spec's two formulas at run time: measurements in, joint targets out; numpy only.

:class:`ObservationBuilder` turns the inputs of one control step into the network's observation
vector (per term: scale, offset, clip, history); :class:`ActionProcessor` turns one raw network
output into a safe joint target (reject NaN/inf, wrong size or beyond ``action.reject_abs``;
clip, scale, low-pass, rate limit, joint limits); :func:`ramp_duration` and :func:`ramp_point`
give the cosine ramp to the default pose. The formulas themselves are stated in
:mod:`simreal_ros.policy.spec`; training, the sim and the node all run these classes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from simreal_ros.policy.spec import ObsTerm, PolicySpec
from simreal_ros.policy.terms import TERMS, ObsInputs

FloatArray = npt.NDArray[np.float64]


class ObservationBuilder:
    """Build observation vectors with per-term scaling, clipping and history."""

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        self._history: list[deque[FloatArray]] = [deque(maxlen=t.history)
                                                  for t in spec.observation]

    def reset(self) -> None:
        """Forget the history (it is refilled with the next observation)."""
        for h in self._history:
            h.clear()

    def term_value(self, term: ObsTerm, inputs: ObsInputs) -> FloatArray:
        """Return the scaled, offset and clipped current value of one term."""
        raw = np.asarray(TERMS[term.name].compute(inputs, term.options), dtype=np.float64)
        if raw.shape != (term.size,):
            raise ValueError(f'observation term {term.name!r} produced shape {raw.shape}, '
                             f'expected ({term.size},)')
        v = term.scale * (raw - term.offset)
        if term.clip is not None:
            v = np.clip(v, -term.clip, term.clip)
        return v

    def build(self, inputs: ObsInputs) -> FloatArray:
        """Return the observation vector for ``inputs`` and push it into the history."""
        parts: list[FloatArray] = []
        for term, hist in zip(self.spec.observation, self._history, strict=True):
            v = self.term_value(term, inputs)
            if not hist:
                hist.extend([v] * term.history)
            else:
                hist.append(v)
            parts.extend(hist)
        return np.concatenate(parts) if parts else np.zeros(0)


@dataclass(frozen=True)
class ActionResult:
    """Outcome of processing one raw network output."""

    ok: bool
    target: FloatArray
    action: FloatArray
    reason: str = ''
    clipped: bool = False


class ActionProcessor:
    """Turn raw network outputs into safe joint targets (policy order)."""

    def __init__(self, spec: PolicySpec) -> None:
        self.spec = spec
        a = spec.action
        dt = 1.0 / spec.control_rate_hz
        self.alpha = 1.0 - math.exp(-2.0 * math.pi * a.low_pass_hz * dt) if a.low_pass_hz else 1.0
        self.previous = spec.default.copy()

    def reset(self, command: FloatArray) -> None:
        """Start filtering and rate limiting from ``command``."""
        self.previous = np.clip(np.asarray(command, dtype=np.float64), self.spec.lower,
                                self.spec.upper)

    def neutral_action(self) -> FloatArray:
        """Return the action that commands the default pose."""
        if self.spec.action.mode == 'offset':
            return np.zeros(self.spec.n)
        return self.spec.default / self.spec.action.scale

    def process(self, raw: Any) -> ActionResult:
        """Validate and process one network output; on rejection the previous target holds."""
        spec, a = self.spec, self.spec.action
        out = np.asarray(raw, dtype=np.float64).reshape(-1)
        if out.shape != (spec.n,):
            return ActionResult(False, self.previous.copy(), out,
                                f'network output has {out.size} values, expected {spec.n}')
        if not np.all(np.isfinite(out)):
            return ActionResult(False, self.previous.copy(), out,
                                f'network output contains NaN or inf: {out.tolist()}')
        if np.any(np.abs(out) > a.reject_abs):
            k = int(np.argmax(np.abs(out)))
            return ActionResult(False, self.previous.copy(), out,
                                f'network output {out[k]:.4g} for {spec.joints[k]} is beyond '
                                f'action.reject_abs={a.reject_abs:g}')
        action = out if a.clip is None else np.clip(out, -a.clip, a.clip)
        target = a.scale * action + (spec.default if a.mode == 'offset' else 0.0)
        target = self.previous + self.alpha * (target - self.previous)
        if a.rate_limit_rad > 0:
            target = self.previous + np.clip(target - self.previous, -a.rate_limit_rad,
                                             a.rate_limit_rad)
        limited = np.clip(target, spec.lower, spec.upper)
        clipped = bool(np.any(limited != target) or np.any(action != out))
        self.previous = limited
        return ActionResult(True, limited.copy(), action, clipped=clipped)


def ramp_duration(spec: PolicySpec, start: FloatArray, target: FloatArray) -> float:
    """Seconds of the cosine ramp from ``start`` to ``target`` (peak speed within limits)."""
    dist = float(np.max(np.abs(np.asarray(target) - np.asarray(start)), initial=0.0))
    return max(spec.safety.ramp_s, 0.5 * math.pi * dist / spec.safety.ramp_max_velocity)


def ramp_point(start: FloatArray, target: FloatArray, elapsed_s: float, duration_s: float
               ) -> FloatArray:
    """Point of the cosine ramp at ``elapsed_s`` (zero velocity at both ends)."""
    if duration_s <= 0.0 or elapsed_s >= duration_s:
        return np.array(target, dtype=np.float64)
    u = max(0.0, elapsed_s) / duration_s
    s = 0.5 - 0.5 * math.cos(math.pi * u)
    a = np.asarray(start, dtype=np.float64)
    out: FloatArray = a + (np.asarray(target, dtype=np.float64) - a) * s
    return out
