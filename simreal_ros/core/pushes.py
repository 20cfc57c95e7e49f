"""Random pushes on a floating base: a randomization file's ``pushes:`` and the one draw of them.

A push is a horizontal force on the base's centre of mass for ``duration_s``, as a hand or a
kick gives it. Three places push a walking robot at random, and all three draw here so they
cannot drift apart: the locomotion training world
(:class:`~simreal_ros.policy.locomotion_task.LocoWorld`, the policy's training and its
in-process evaluation), the evaluation on the virtual legged robot
(:func:`~simreal_ros.policy.locomotion_eval.episode_pushes`, sent to the emulator's hidden
world) and the sim bridge's ``~/reset`` (a randomization file with ``pushes:``,
:mod:`simreal_ros.nodes.sim_bridge` through :class:`~simreal_ros.sim.push.PushSchedule`).

**The file section** (:func:`parse_pushes`; ``config/randomization/*.yaml``)::

    pushes:
      interval_s: [2.0, 4.0]   # the wait before each push, uniform (s, low > 0)
      force_n: 8.0             # a peak: 50-100 % of it, uniform; or a [low, high] range (N)
      duration_s: 0.15         # how long each push lasts (s, (0, 5])

A bad value is a ConfigError naming the file, the key (``pushes.interval_s``, ...), what was
expected and what it got.

**The draw** (seeded, a numpy Generator): the first wait at the start, then per push its
direction (an angle uniform in [0, 2 pi) in the horizontal plane), its size and the wait
until the next push, in this order: :func:`draw_wait_s` and :func:`draw_force_n` are the
only two draws, :func:`push_sequence` the sequence they make on a grid of ticks (a push
starts at the first tick at or after its time, the next wait counts from that tick). The
order is the training world's since its first version, so a seed gives the pushes it gave
before (the trained ``simreal_quad_walk`` saw exactly those).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any, Iterator

import numpy as np
import numpy.typing as npt

from simreal_ros.core.validate import Section, check_number, check_range
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]
#: the longest push accepted (s): longer is a steady force, not a push
MAX_PUSH_S = 5.0
#: a peak force draws its size uniform in this share of the peak
PEAK_SHARE = (0.5, 1.0)
KEYS = ('interval_s', 'force_n', 'duration_s')


@dataclass(frozen=True)
class PushRanges:
    """What a push sequence is drawn from (module docstring).

    ``force_n`` is the size's range in N; ``peak`` says it came as one number (the size is then
    drawn as ``uniform(0.5, 1.0) * peak``, the training world's draw, not ``uniform(lo, hi)``).
    """

    interval_s: tuple[float, float]
    force_n: tuple[float, float]
    duration_s: float
    peak: bool = False

    @classmethod
    def from_peak(cls, interval_s: tuple[float, float], peak_n: float,
                  duration_s: float) -> 'PushRanges':
        """Return the ranges of sizes 50-100 % of ``peak_n``."""
        return cls((float(interval_s[0]), float(interval_s[1])),
                   (PEAK_SHARE[0] * peak_n, PEAK_SHARE[1] * peak_n), float(duration_s),
                   peak=True)

    def describe(self) -> str:
        """One line for logs and the reset's answer."""
        return (f'every {self.interval_s[0]:g}-{self.interval_s[1]:g} s, '
                f'{self.force_n[0]:g}-{self.force_n[1]:g} N for {self.duration_s:g} s')


@dataclass(frozen=True)
class DrawnPush:
    """One push of a sequence: its start (tick index and s), force (N, world) and duration."""

    start_tick: int
    start_s: float
    force_n: FloatArray
    duration_s: float


def parse_pushes(value: Any, source: str, key: str = 'pushes') -> PushRanges:
    """Return the ranges of a ``pushes:`` mapping; ConfigError naming ``source`` and the key."""
    sec = Section(value, source, key)
    interval = check_range(sec.raw('interval_s'), source, sec.path('interval_s'), minimum=0.0)
    if interval[0] <= 0.0:
        # a zero wait would push at every tick, forever
        raise ConfigError(source, sec.path('interval_s'), 'a [low, high] wait with low > 0 (s)',
                          sec.raw('interval_s'))
    raw_force = sec.raw('force_n')
    if isinstance(raw_force, (list, tuple)):
        lo, hi = check_range(raw_force, source, sec.path('force_n'), minimum=0.0)
        ranges = PushRanges(interval, (lo, hi), 0.0)
    elif isinstance(raw_force, (int, float)) and not isinstance(raw_force, bool):
        peak = check_number(raw_force, source, sec.path('force_n'), minimum=0.0)
        ranges = PushRanges.from_peak(interval, peak, 0.0)
    else:
        raise ConfigError(source, sec.path('force_n'),
                          'a peak force (N, a number >= 0) or a [low, high] range', raw_force)
    d = sec.raw('duration_s')
    dur = check_number(d, source, sec.path('duration_s'), minimum=0.0)
    if not 0.0 < dur <= MAX_PUSH_S:
        raise ConfigError(source, sec.path('duration_s'),
                          f'a duration in (0, {MAX_PUSH_S:g}] s', d)
    sec.reject_unknown()
    return PushRanges(ranges.interval_s, ranges.force_n, dur, ranges.peak)


def draw_wait_s(ranges: PushRanges, rng: np.random.Generator) -> float:
    """Draw the wait before the next push (s)."""
    return float(rng.uniform(*ranges.interval_s))


def draw_force_n(ranges: PushRanges, rng: np.random.Generator) -> FloatArray:
    """Draw one push's force (N, world frame): a horizontal direction, then a size."""
    ang = float(rng.uniform(0.0, 2.0 * math.pi))
    if ranges.peak:
        f = float(rng.uniform(*PEAK_SHARE)) * ranges.force_n[1]
    else:
        f = float(rng.uniform(*ranges.force_n))
    return np.array([f * math.cos(ang), f * math.sin(ang), 0.0])


def first_tick_at(t_s: float, tick_s: float) -> int:
    """Return the first ``k`` with ``k * tick_s >= t_s`` (the product as the caller forms it)."""
    k = max(0, math.ceil(t_s / tick_s))
    while k > 0 and (k - 1) * tick_s >= t_s:
        k -= 1
    while k * tick_s < t_s:
        k += 1
    return k


def push_sequence(ranges: PushRanges, rng: np.random.Generator, tick_s: float
                  ) -> Iterator[DrawnPush]:
    """Yield the pushes drawn from ``rng``, each starting on the grid of ``tick_s`` (endless).

    Lazy: a push's draws happen when it is asked for (the first wait with the first push).
    """
    nxt = draw_wait_s(ranges, rng)
    while True:
        k = first_tick_at(nxt, tick_s)
        t = k * tick_s
        force = draw_force_n(ranges, rng)
        nxt = t + draw_wait_s(ranges, rng)
        yield DrawnPush(k, t, force, ranges.duration_s)
