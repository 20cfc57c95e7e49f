"""Sim-vs-real evaluation statistics: rank agreement, intervals and real episodes needed.

Does the sim rank policies like reality, and how many real episodes does a claim need? Pure
numpy/scipy, no ROS.

Inputs are per-policy scores ``sim[i]``, ``real[i]`` (success rates, or any metric where both
are the same quantity), or per-policy *episode* values for the bootstrap. Every function checks
its input and raises :class:`StatsInputError` (a :class:`SimrealError`: one ``error:`` line on
the command line) on empty input, mismatched lengths, fewer than 2 policies, NaN or infinity.

Agreement of the ranking (over the policies of a zoo):

* **SRCC** (sim-vs-real correlation coefficient, Kadian et al. 2020, "Sim2Real Predictivity:
  Does Evaluation in Simulation Predict Real-World Performance?", IEEE RA-L 5(4)): Spearman's
  rank correlation of ``sim`` and ``real``, i.e. Pearson's r of their ranks, tied values taking
  the average of their ranks. 1 = same order, -1 = reversed. NaN when either side is constant
  (every policy tied: no order to compare).
* **MMRV** (mean maximum rank violation, Li et al. 2024, "Evaluating Real-World Robot
  Manipulation Policies in Simulation" (SIMPLER), CoRL 2024, Sec. 4)::

      RankViolation(i, j) = |real_i - real_j| * 1[(sim_i < sim_j) != (real_i < real_j)]
      MMRV = 1/N * sum_i max_j RankViolation(i, j)

  with the strict ``<`` of the paper: a pair tied in sim but not in reality counts for the
  policy that is better in reality (sim says "not better"), not for the other one. 0 = no
  violation; in the units of ``real`` (a success rate: at most 1). Lower is better.
* **Pearson r** of ``sim`` and ``real`` (NaN when either side is constant).

:func:`bootstrap` puts a percentile confidence interval on any of them by resampling episodes
*within each policy* (sim and real independently, with replacement, same count), recomputing the
per-policy means and the statistic; seeded (``numpy.random.default_rng(seed)``, draws in policy
order, sim before real), so the same input and seed give the same interval. Resamples where the
statistic is undefined (NaN: a constant side) are left out and counted. The interval is the
spread of the statistic over re-runs of the evaluation with as many episodes; it can lie below
an estimate at its bound (an SRCC of 1 with policies of equal rates: resampling noise breaks
their ties in random order), which says the perfect agreement is not resolved by the episodes.

How many real episodes (planning, normal approximations unless said):

* :func:`wilson_interval`: the Wilson score interval of ``k`` successes in ``n`` (Wilson 1927).
* :func:`episodes_for_success_rate`: the least ``n`` whose Wilson interval around a planned
  rate ``p`` has a half-width <= ``half_width`` at ``confidence``.
* :func:`episodes_for_ranking`: per policy, enough episodes that every adjacent pair of the
  planned order is observed in that order with probability >= ``confidence`` (Bonferroni over
  the ``P - 1`` pairs): ``n = z^2 (v_a + v_b) / gap^2`` with ``z = Phi^-1(1 - (1 - c)/(P - 1))``,
  ``v = p (1 - p) * f`` (``f`` the variance factor of a paired sim, 1 without) and the gap
  at least ``min_gap`` (pairs closer than that are ranked to ``min_gap``'s resolution only).
* :func:`control_variate`: what a sim run on the *same* goals saves. With ``n`` paired real
  episodes ``(s_k, r_k)`` and many (``N``) sim episodes, the difference estimator
  ``s_bar_N + mean_n(r - s)`` (prediction-powered inference with the sim as the predictor: the
  question SureSim, arXiv 2510.04354, asks of large sim and few real evaluations; this is the
  classical answer, not its method) has the variance ``var(r - s) / n`` where the plain mean
  has ``var(r) / n``: it needs ``f = var(r - s) / var(r)`` of the real episodes (capped at 1:
  a sim that does not help is not used). Planned from a pilot of ``m`` 0/1 pairs
  conservatively: ``var(r - s) <= P(discordant)``, planned as ``(D + 2) / (m + 4)`` with ``D``
  the discordant pairs, and ``var(r) = p (1 - p)`` at the plus-four rate; so a pilot where sim
  and reality agree on every episode still plans a variance, never "no real episodes". Other
  data: the sample variances. ``rho`` (the per-episode correlation, 0 where a side is
  constant) is reported alongside.
* :func:`beta_prior`: the zoo-level alternative without pairing: the sim's rate, shifted by the
  mean sim-real offset, is a Beta prior on the real rate whose strength ``n0`` (pseudo-episodes)
  is set by how well the shifted sim predicts the pilot rates:
  ``tau^2 = max(0, sum_i (r_i - pred_i)^2 / (P - 1) - mean_i r_i (1 - r_i) / m_i)`` (excess
  spread over binomial noise), ``n0 = mu (1 - mu) / tau^2 - 1`` (method of moments), capped at
  ``max_strength``. A rate estimate then needs ``max(0, n - n0)`` real episodes.

Planning rates from few episodes use the Agresti-Coull "plus four" rate ``(k + 2) / (m + 4)``
(:func:`planning_rate`), so a pilot of all successes does not plan zero variance.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Callable, Sequence

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from simreal_ros.errors import SimrealError

FloatArray = npt.NDArray[np.float64]
#: Most episodes a planning function returns before it gives up (a zero gap, a zero width).
MAX_EPISODES = 10_000_000


class StatsInputError(SimrealError):
    """Input a statistic cannot be computed from (empty, mismatched, non-finite)."""


@dataclass(frozen=True)
class Interval:
    """A statistic, its bootstrap percentile interval and how many resamples were undefined."""

    estimate: float
    low: float
    high: float
    confidence: float
    resamples: int
    undefined: int

    def as_dict(self) -> dict[str, float | int]:
        """JSON-able form (NaN stays NaN; json writes it as NaN)."""
        return {'estimate': self.estimate, 'low': self.low, 'high': self.high,
                'confidence': self.confidence, 'resamples': self.resamples,
                'undefined': self.undefined}


def _pair(sim: Sequence[float], real: Sequence[float]) -> tuple[FloatArray, FloatArray]:
    s = np.asarray(sim, dtype=np.float64)
    r = np.asarray(real, dtype=np.float64)
    if s.ndim != 1 or r.ndim != 1:
        raise StatsInputError(f'expected two flat lists of per-policy scores, got shapes '
                              f'{s.shape} and {r.shape}')
    if len(s) != len(r):
        raise StatsInputError(f'sim and real must score the same policies: got {len(s)} sim '
                              f'and {len(r)} real scores')
    if len(s) < 2:
        raise StatsInputError(f'a ranking needs at least 2 policies, got {len(s)}')
    for name, x in (('sim', s), ('real', r)):
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            raise StatsInputError(f'{name} score of policy {int(bad[0])} is {x[bad[0]]}: '
                                  f'expected a finite number')
    return s, r


# ---- statistics over rows: (B, P) arrays -> (B,) ------------------------------------------

def _pearson_rows(s: FloatArray, r: FloatArray) -> FloatArray:
    ds = s - s.mean(axis=1, keepdims=True)
    dr = r - r.mean(axis=1, keepdims=True)
    den = np.sqrt((ds * ds).sum(axis=1) * (dr * dr).sum(axis=1))
    num = (ds * dr).sum(axis=1)
    # a constant side (every policy tied) has no order: undefined. The relative threshold
    # keeps rounding noise of equal means (1e-17) from passing as a spread.
    scale = np.maximum(np.abs(s).max(axis=1), 1.0) * np.maximum(np.abs(r).max(axis=1), 1.0)
    ok = den > 1e-12 * scale
    out = np.full(len(s), np.nan)
    out[ok] = np.clip(num[ok] / den[ok], -1.0, 1.0)
    return out


def _ranks_rows(x: FloatArray) -> FloatArray:
    return np.asarray(_st.rankdata(x, method='average', axis=1), dtype=np.float64)


def _srcc_rows(s: FloatArray, r: FloatArray) -> FloatArray:
    return _pearson_rows(_ranks_rows(s), _ranks_rows(r))


def _mmrv_rows(s: FloatArray, r: FloatArray) -> FloatArray:
    sim_lt = s[:, :, None] < s[:, None, :]     # [b, i, j] = sim_i < sim_j
    real_lt = r[:, :, None] < r[:, None, :]
    gap = np.abs(r[:, :, None] - r[:, None, :])
    viol = np.where(sim_lt != real_lt, gap, 0.0)
    return np.asarray(viol.max(axis=2).mean(axis=1), dtype=np.float64)


_ROWS: dict[str, Callable[[FloatArray, FloatArray], FloatArray]] = {
    'srcc': _srcc_rows, 'mmrv': _mmrv_rows, 'pearson': _pearson_rows}
#: The statistics :func:`bootstrap` knows, by name.
STATISTICS = tuple(_ROWS)


def srcc(sim: Sequence[float], real: Sequence[float]) -> float:
    """Spearman rank correlation of per-policy sim and real scores (NaN if a side is constant)."""
    s, r = _pair(sim, real)
    return float(_srcc_rows(s[None], r[None])[0])


def pearson(sim: Sequence[float], real: Sequence[float]) -> float:
    """Pearson's r of per-policy sim and real scores (NaN if a side is constant)."""
    s, r = _pair(sim, real)
    return float(_pearson_rows(s[None], r[None])[0])


def mmrv(sim: Sequence[float], real: Sequence[float]) -> float:
    """Mean maximum rank violation (SIMPLER, Li et al. 2024), in the units of ``real``."""
    s, r = _pair(sim, real)
    return float(_mmrv_rows(s[None], r[None])[0])


def _episodes(values: Sequence[Sequence[float]], side: str) -> list[FloatArray]:
    out = []
    for i, v in enumerate(values):
        a = np.asarray(v, dtype=np.float64)
        if a.ndim != 1 or a.size == 0:
            raise StatsInputError(f'{side} episodes of policy {i}: expected a non-empty list of '
                                  f'numbers, got {a.size} values of shape {a.shape}')
        if not np.all(np.isfinite(a)):
            raise StatsInputError(f'{side} episodes of policy {i}: expected finite numbers, got '
                                  f'{a[~np.isfinite(a)][0]}')
        out.append(a)
    return out


def bootstrap(sim_episodes: Sequence[Sequence[float]], real_episodes: Sequence[Sequence[float]],
              statistic: str, *, resamples: int = 2000, confidence: float = 0.95,
              seed: int = 0) -> Interval:
    """Percentile bootstrap interval of ``statistic`` (``srcc``, ``mmrv`` or ``pearson``).

    ``sim_episodes[i]`` / ``real_episodes[i]``: policy ``i``'s per-episode values (success as
    0/1, or an error); the policy's score is their mean. The estimate is the statistic of the
    full means; the interval the ``(1 - confidence)/2`` and ``(1 + confidence)/2`` quantiles of
    the defined resamples (NaN when fewer than half are defined).
    """
    if statistic not in _ROWS:
        raise StatsInputError(f'statistic {statistic!r}: expected one of {list(_ROWS)}')
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise StatsInputError(f'resamples {resamples!r}: expected an integer >= 1')
    if not 0.0 < confidence < 1.0:
        raise StatsInputError(f'confidence {confidence!r}: expected a number in (0, 1)')
    sims = _episodes(sim_episodes, 'sim')
    reals = _episodes(real_episodes, 'real')
    s0, r0 = _pair([x.mean() for x in sims], [x.mean() for x in reals])
    f = _ROWS[statistic]
    estimate = float(f(s0[None], r0[None])[0])
    rng = np.random.default_rng(seed)
    p = len(sims)
    s_b = np.empty((resamples, p))
    r_b = np.empty((resamples, p))
    for i in range(p):
        for x, dst in ((sims[i], s_b), (reals[i], r_b)):
            idx = rng.integers(0, len(x), size=(resamples, len(x)))
            dst[:, i] = x[idx].mean(axis=1)
    vals = f(s_b, r_b)
    ok = vals[np.isfinite(vals)]
    undefined = int(resamples - ok.size)
    if ok.size * 2 < resamples:
        low = high = float('nan')
    else:
        a = (1.0 - confidence) / 2.0
        low, high = (float(x) for x in np.quantile(ok, [a, 1.0 - a]))
    return Interval(estimate, low, high, confidence, resamples, undefined)


# ---- how many real episodes ---------------------------------------------------------------

def _z(confidence: float, two_sided: bool = True) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
            or not 0.0 < confidence < 1.0:
        raise StatsInputError(f'confidence {confidence!r}: expected a number in (0, 1)')
    tail = (1.0 - confidence) / (2.0 if two_sided else 1.0)
    return float(_st.norm.ppf(1.0 - tail))


def _rate(p: float, name: str = 'rate') -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) \
            or not 0.0 <= p <= 1.0:
        raise StatsInputError(f'{name} {p!r}: expected a number in [0, 1]')
    return float(p)


def planning_rate(successes: int, episodes: int) -> float:
    """Agresti-Coull "plus four" rate ``(k + 2) / (n + 4)``: never exactly 0 or 1."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 0 or \
            isinstance(successes, bool) or not isinstance(successes, int) or \
            not 0 <= successes <= episodes:
        raise StatsInputError(f'{successes!r} successes of {episodes!r} episodes: expected '
                              f'integers 0 <= successes <= episodes')
    return (successes + 2.0) / (episodes + 4.0)


def wilson_interval(successes: int, episodes: int, confidence: float = 0.95
                    ) -> tuple[float, float]:
    """Wilson score interval of a success rate (Wilson 1927); (0, 1) for 0 episodes."""
    planning_rate(successes, episodes)  # the checks
    z = _z(confidence)
    if episodes == 0:
        return 0.0, 1.0
    n, p = float(episodes), successes / episodes
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _wilson_half(p: float, n: int, z: float) -> float:
    den = 1.0 + z * z / n
    return z / den * math.sqrt(p * (1 - p) / n + z * z / (4.0 * n * n))


def episodes_for_success_rate(rate: float, half_width: float, confidence: float = 0.95) -> int:
    """Least ``n`` whose Wilson interval around ``rate`` is at most ``half_width`` each side.

    The half-width falls with ``n`` for a fixed rate, so a doubling then a bisection finds it.
    """
    p = _rate(rate)
    if isinstance(half_width, bool) or not isinstance(half_width, (int, float)) or \
            not 0.0 < half_width < 0.5:
        raise StatsInputError(f'half_width {half_width!r}: expected a number in (0, 0.5)')
    z = _z(confidence)
    hi = 1
    while _wilson_half(p, hi, z) > half_width:
        hi *= 2
        if hi > MAX_EPISODES:
            return MAX_EPISODES
    lo = hi // 2  # half-width(lo) > target (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _wilson_half(p, mid, z) > half_width:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(frozen=True)
class RankingPlan:
    """Episodes per policy for a ranking: the total, and per adjacent pair of the order."""

    episodes_per_policy: int
    order: tuple[int, ...]               # policy indices, best first (planned rates)
    pairs: tuple[tuple[int, int, float, int], ...]   # (better, worse, gap used, episodes)
    z: float


def episodes_for_ranking(rates: Sequence[float], confidence: float = 0.9,
                         min_gap: float = 0.05,
                         variance_factors: Sequence[float] | None = None) -> RankingPlan:
    """Episodes per policy so every adjacent pair of the planned order is observed in order.

    ``variance_factors[i]`` (in [0, 1]) scales policy ``i``'s per-episode variance: the
    ``variance_factor`` of :func:`control_variate` with a paired sim.
    """
    if not rates or len(rates) < 2:
        raise StatsInputError(f'a ranking needs at least 2 policies, got {len(rates or [])}')
    ps = [_rate(p, f'rate of policy {i}') for i, p in enumerate(rates)]
    if isinstance(min_gap, bool) or not isinstance(min_gap, (int, float)) or \
            not 0.0 < min_gap <= 1.0:
        raise StatsInputError(f'min_gap {min_gap!r}: expected a number in (0, 1]')
    f = [1.0] * len(ps) if variance_factors is None else list(variance_factors)
    if len(f) != len(ps) or not all(isinstance(x, (int, float)) and 0.0 <= x <= 1.0
                                    for x in f):
        raise StatsInputError(f'variance_factors: expected {len(ps)} numbers in [0, 1]')
    z = _z(1.0 - (1.0 - confidence) / (len(ps) - 1), two_sided=False)
    order = sorted(range(len(ps)), key=lambda i: (-ps[i], i))
    pairs = []
    for a, b in zip(order, order[1:], strict=False):
        gap = max(ps[a] - ps[b], min_gap)
        var = ps[a] * (1 - ps[a]) * f[a] + ps[b] * (1 - ps[b]) * f[b]
        pairs.append((a, b, gap, min(MAX_EPISODES, math.ceil(z * z * var / (gap * gap)))))
    return RankingPlan(max(1, max(n for *_x, n in pairs)), tuple(order), tuple(pairs), z)


@dataclass(frozen=True)
class ControlVariate:
    """Paired sim/real pilot episodes of one policy: what the sim on the same goals saves."""

    rho: float                  # per-episode sim-real correlation (0 where a side is constant)
    discordant: int             # pairs where sim and real differ (0/1 data; else -1)
    variance_factor: float      # var(r - s) / var(r), at most 1: the real episodes, as a fraction
    real_variance: float        # planning variance of a real episode (plus four for 0/1 data)


def control_variate(sim_paired: Sequence[float], real_paired: Sequence[float]
                    ) -> ControlVariate:
    """Return the difference estimator's variance factor from paired pilot episodes."""
    s, r = _pair(sim_paired, real_paired)
    rho = float(_pearson_rows(s[None], r[None])[0])
    rho = 0.0 if math.isnan(rho) else rho
    m = len(r)
    if bool(np.all((r == 0) | (r == 1)) and np.all((s == 0) | (s == 1))):
        p = planning_rate(int(r.sum()), m)
        var_r = p * (1 - p)
        disc = int(np.sum(r != s))
        var_d = (disc + 2.0) / (m + 4.0)
    else:
        disc = -1
        var_r = float(np.var(r, ddof=1))
        var_d = float(np.var(r - s, ddof=1))
    factor = 1.0 if var_r <= 0 else min(1.0, var_d / var_r)
    return ControlVariate(rho, disc, factor, var_r)


@dataclass(frozen=True)
class BetaPrior:
    """A sim-calibrated Beta prior on the real rates (see the module docstring)."""

    offset: float               # mean (real - sim) over the pilot
    tau2: float                 # spread of real around the shifted sim beyond binomial noise
    strength: float             # n0: the prior is worth this many real episodes per policy
    means: tuple[float, ...]    # the prior mean per policy (sim + offset, clipped to [0, 1])


def beta_prior(sim_rates: Sequence[float], pilot_successes: Sequence[int],
               pilot_episodes: Sequence[int], max_strength: float) -> BetaPrior:
    """Fit the shifted-sim Beta prior to a pilot (``k_i`` of ``m_i`` real episodes)."""
    if len(pilot_successes) != len(sim_rates) or len(pilot_episodes) != len(sim_rates):
        raise StatsInputError(f'expected one pilot count per policy: {len(sim_rates)} sim '
                              f'rates, {len(pilot_successes)} successes, '
                              f'{len(pilot_episodes)} episode counts')
    for k, n in zip(pilot_successes, pilot_episodes, strict=True):
        planning_rate(k, n)
        if n < 1:
            raise StatsInputError(f'pilot of {n} episodes: expected at least 1 per policy')
    real = [k / m for k, m in zip(pilot_successes, pilot_episodes, strict=True)]
    s, r = _pair(sim_rates, real)
    if not np.all((s >= 0) & (s <= 1)):
        raise StatsInputError('sim rates: expected numbers in [0, 1]')
    if not max_strength > 0:
        raise StatsInputError(f'max_strength {max_strength!r}: expected a number > 0')
    offset = float(np.mean(r - s))
    pred = np.clip(s + offset, 0.0, 1.0)
    m = np.asarray(pilot_episodes, dtype=np.float64)
    noise = float(np.mean(r * (1 - r) / m))
    tau2 = max(0.0, float(np.sum((r - pred) ** 2)) / (len(r) - 1) - noise)
    mu = float(np.clip(np.mean(pred), 1e-6, 1 - 1e-6))
    strength = max_strength if tau2 <= 0 else min(max_strength,
                                                  max(0.0, mu * (1 - mu) / tau2 - 1.0))
    return BetaPrior(offset, tau2, strength, tuple(float(x) for x in pred))
