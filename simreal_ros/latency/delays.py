"""Delay distributions of the latency injector: sampling (seeded) and the CDF of each.

Every distribution is a random variable ``X >= 0`` in seconds, built as
``clip(offset_s + base, min_s, max_s)`` where ``base`` is one of :data:`KINDS`. The CDF includes
the clipping (point masses at the bounds), so a Kolmogorov-Smirnov test of delivered delays
against :meth:`Delay.cdf` is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from simreal_ros.core.validate import Section, check_number
from simreal_ros.errors import ConfigError

NS = 1_000_000_000


def _normal_cdf(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


@dataclass(frozen=True)
class Delay:
    """A seeded delay distribution; see the module docstring for the construction."""

    kind: str
    params: dict[str, float]
    offset_s: float = 0.0
    min_s: float = 0.0
    max_s: float = math.inf
    samples: tuple[float, ...] = ()          # empirical: raw samples (seconds)
    edges: tuple[float, ...] = ()            # empirical: histogram bin edges (seconds)
    weights: tuple[float, ...] = ()          # empirical: histogram bin weights

    @property
    def is_zero(self) -> bool:
        """Whether every sample is exactly 0 (lets the injector skip its scheduler)."""
        return self.kind == 'constant' and self.params['value'] + self.offset_s <= 0.0 \
            or self.max_s <= 0.0

    def sample(self, rng: np.random.Generator, n: int | None = None) -> Any:
        """Draw one delay (float seconds), or an array of ``n``."""
        size = 1 if n is None else n
        base = _SAMPLERS[self.kind](self, rng, size)
        out = np.clip(self.offset_s + base, self.min_s, self.max_s)
        return float(out[0]) if n is None else out

    def cdf(self, x: Any) -> Any:
        """Return ``P(X <= x)`` (vectorised over ``x`` in seconds)."""
        xs = np.atleast_1d(np.asarray(x, dtype=float))
        out = np.array([self._cdf1(v) for v in xs])
        return out if np.ndim(x) else float(out[0])

    def _cdf1(self, x: float) -> float:
        if x < self.min_s:
            return 0.0
        if x >= self.max_s:
            return 1.0
        return float(_CDFS[self.kind](self, x - self.offset_s))


def _s_constant(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return np.full(n, d.params['value'])


def _s_uniform(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return rng.uniform(d.params['low'], d.params['high'], n)


def _s_normal(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return rng.normal(d.params['mean'], d.params['std'], n)


def _s_lognormal(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return d.params['median'] * np.exp(rng.normal(0.0, d.params['sigma'], n))


def _s_pareto(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return d.params['scale'] * (1.0 + rng.pareto(d.params['shape'], n))


def _s_laplace(d: Delay, rng: np.random.Generator, n: int) -> Any:
    return rng.laplace(d.params['loc'], d.params['scale'], n)


def _s_empirical(d: Delay, rng: np.random.Generator, n: int) -> Any:
    if d.samples:
        return rng.choice(np.asarray(d.samples), n)
    w = np.asarray(d.weights)
    idx = rng.choice(len(w), n, p=w / w.sum())
    lo, hi = np.asarray(d.edges[:-1])[idx], np.asarray(d.edges[1:])[idx]
    return rng.uniform(lo, hi)


def _c_constant(d: Delay, x: float) -> float:
    return 1.0 if x >= d.params['value'] else 0.0


def _c_uniform(d: Delay, x: float) -> float:
    lo, hi = d.params['low'], d.params['high']
    if hi <= lo:
        return 1.0 if x >= lo else 0.0
    return min(1.0, max(0.0, (x - lo) / (hi - lo)))


def _c_normal(d: Delay, x: float) -> float:
    return _normal_cdf((x - d.params['mean']) / d.params['std'])


def _c_lognormal(d: Delay, x: float) -> float:
    if x <= 0.0:
        return 0.0
    return _normal_cdf(math.log(x / d.params['median']) / d.params['sigma'])


def _c_pareto(d: Delay, x: float) -> float:
    xm, a = d.params['scale'], d.params['shape']
    return 0.0 if x < xm else 1.0 - (xm / x) ** a


def _c_laplace(d: Delay, x: float) -> float:
    mu, b = d.params['loc'], d.params['scale']
    return 0.5 * math.exp((x - mu) / b) if x < mu else 1.0 - 0.5 * math.exp(-(x - mu) / b)


def _c_empirical(d: Delay, x: float) -> float:
    if d.samples:
        s = np.asarray(d.samples)
        return float(np.count_nonzero(s <= x)) / len(s)
    edges, w = np.asarray(d.edges), np.asarray(d.weights)
    cum = np.concatenate([[0.0], np.cumsum(w) / w.sum()])
    return float(np.interp(x, edges, cum))


_SAMPLERS: dict[str, Callable[[Delay, np.random.Generator, int], Any]] = {
    'constant': _s_constant, 'uniform': _s_uniform, 'normal': _s_normal,
    'lognormal': _s_lognormal, 'pareto': _s_pareto, 'laplace': _s_laplace,
    'empirical': _s_empirical,
}
_CDFS: dict[str, Callable[[Delay, float], float]] = {
    'constant': _c_constant, 'uniform': _c_uniform, 'normal': _c_normal,
    'lognormal': _c_lognormal, 'pareto': _c_pareto, 'laplace': _c_laplace,
    'empirical': _c_empirical,
}

#: Distribution kinds and their parameters (seconds unless noted).
KINDS: dict[str, tuple[str, ...]] = {
    'constant': ('value',),
    'uniform': ('low', 'high'),
    'normal': ('mean', 'std'),
    'lognormal': ('median', 'sigma'),      # sigma: of log(X), dimensionless
    'pareto': ('scale', 'shape'),          # X >= scale; shape (alpha) > 0, heavy tail if < 2
    'laplace': ('loc', 'scale'),
    'empirical': (),                       # samples_s | histogram | file | bag
}
_POSITIVE = {('normal', 'std'), ('lognormal', 'median'), ('lognormal', 'sigma'),
             ('pareto', 'scale'), ('pareto', 'shape'), ('laplace', 'scale')}
_NON_NEGATIVE = {('constant', 'value'), ('uniform', 'low'), ('uniform', 'high'),
                 ('normal', 'mean'), ('laplace', 'loc')}
#: Why a location below 0 is refused (samples below ``min_s`` would be clipped up to it,
#: silently piling probability onto ``min_s`` instead of shifting the distribution).
_NEGATIVE_FIX = ('a delay >= 0 s (a negative value would be clipped to min_s, not shift the '
                 'distribution; to make short delays likelier, lower the scale or use min_s)')
ZERO = Delay('constant', {'value': 0.0})


def parse_delay(sec: Section, base_dir: Path | None = None) -> Delay:
    """Parse a ``delay:`` mapping, e.g. ``{distribution: lognormal, median: 0.004, sigma: 0.5}``.

    A bare number is a constant delay in seconds.
    """
    kind = sec.string('distribution')
    if kind not in KINDS:
        raise ConfigError(sec.source, sec.path('distribution'),
                          f'one of {sorted(KINDS)}', kind)
    params: dict[str, float] = {}
    for name in KINDS[kind]:
        params[name] = sec.number(name, positive=(kind, name) in _POSITIVE)
        if (kind, name) in _NON_NEGATIVE and params[name] < 0.0:
            raise ConfigError(sec.source, sec.path(name), _NEGATIVE_FIX, params[name])
    if kind == 'uniform' and params['low'] > params['high']:
        raise ConfigError(sec.source, sec.path('high'), f'>= low ({params["low"]})',
                          params['high'])
    offset = sec.number('offset_s', 0.0)
    if offset < 0.0:
        raise ConfigError(sec.source, sec.path('offset_s'), _NEGATIVE_FIX, offset)
    lo = sec.number('min_s', 0.0, minimum=0.0)
    hi = sec.number('max_s', math.inf) if sec.has('max_s') else math.inf
    if hi < lo:
        raise ConfigError(sec.source, sec.path('max_s'), f'>= min_s ({lo})', hi)
    samples: tuple[float, ...] = ()
    edges: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()
    if kind == 'empirical':
        samples, edges, weights = _parse_empirical(sec, base_dir)
    sec.reject_unknown()
    return Delay(kind, params, offset, lo, hi, samples, edges, weights)


def _parse_empirical(sec: Section, base_dir: Path | None
                     ) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    given = [k for k in ('samples_s', 'histogram', 'file', 'bag') if sec.has(k)]
    if len(given) != 1:
        raise ConfigError(sec.source, sec.key or 'delay',
                          'exactly one of samples_s, histogram, file, bag', given or 'none')
    key = given[0]
    if key == 'histogram':
        h = sec.section('histogram')
        edges = _numbers(h.items('edges_s'), h.source, h.path('edges_s'))
        counts = _numbers(h.items('counts'), h.source, h.path('counts'))
        h.reject_unknown()
        if len(edges) != len(counts) + 1 or len(counts) == 0:
            raise ConfigError(h.source, h.path('edges_s'),
                              f'len(counts) + 1 = {len(counts) + 1} edges', len(edges))
        if any(b <= a for a, b in zip(edges, edges[1:], strict=False)) or edges[0] < 0:
            raise ConfigError(h.source, h.path('edges_s'), 'increasing edges >= 0', edges)
        if any(c < 0 for c in counts) or sum(counts) <= 0:
            raise ConfigError(h.source, h.path('counts'), 'counts >= 0 with a positive sum',
                              counts)
        return (), tuple(edges), tuple(counts)
    if key == 'samples_s':
        values = _numbers(sec.items('samples_s'), sec.source, sec.path('samples_s'))
    elif key == 'file':
        values = load_samples_file(_resolve(sec.string('file'), base_dir), sec)
    else:
        b = sec.section('bag')
        from simreal_ros.bag.receive_delays import bag_latencies_s
        path = _resolve(b.string('path'), base_dir)
        values = bag_latencies_s(path, b.string('topic'), b.source)
        b.reject_unknown()
    if not values:
        raise ConfigError(sec.source, sec.path(key), 'at least one delay sample', 'none')
    if min(values) < 0:
        raise ConfigError(sec.source, sec.path(key), 'delays >= 0 s', min(values))
    return tuple(values), (), ()


def _resolve(value: str, base_dir: Path | None) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() or base_dir is None else base_dir / p


def _numbers(values: Sequence[Any], source: str, key: str) -> list[float]:
    return [check_number(v, source, f'{key}[{i}]') for i, v in enumerate(values)]


def load_samples_file(path: Path, sec: Section) -> list[float]:
    """Read delay samples in seconds: ``.npy``, or text with one number per line (``#`` ok)."""
    if not path.is_file():
        raise ConfigError(sec.source, sec.path('file'), 'an existing samples file', str(path))
    if path.suffix == '.npy':
        arr = np.load(path, allow_pickle=False)
        values = [float(v) for v in np.ravel(arr)]
    else:
        values = []
        for n, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
            text = line.split('#', 1)[0].strip().rstrip(',')
            if not text:
                continue
            try:
                values.append(float(text.split(',')[0]))
            except ValueError:
                raise ConfigError(str(path), f'line {n}', 'a number of seconds',
                                  text) from None
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ConfigError(str(path), 'samples', 'finite numbers', bad[0])
    return values
