"""Whether a gap metric may be trusted: the data-quality verdict of the streams it pairs.

A paired metric (a joint's RMSE between ``sim_a/joint_states`` and ``sim_b/joint_states``, a
camera's PSNR) is only as good as the two streams it is computed over. Measured on this
project's own README command (a sim2sim recording with both sims' cameras recorded raw, on the
shared 2-core host): 33 % of ``/sim_a/joint_states`` was missing and ``simreal gap`` printed an
elbow RMSE of 0.043 rad (max 0.43) where the same run without cameras gave 0.0099 (max 0.045).
So ``simreal gap`` judges each stream it pairs with the same analysis as ``simreal check``
before it reports, and :func:`judge_streams` returns one :class:`StreamVerdict` per stream:

* ``dropped``: more than ``max_dropped_fraction`` of the messages the stream's own rate implies
  are missing (the ``dropped`` check of :mod:`simreal_ros.gap.quality`, by the same
  :func:`~simreal_ros.gap.quality.dropped_count`; default 1 %, its default too);
* ``stalled``: the stream's header stamps stop for longer than ``stall_limit_ns`` beyond their
  median interval (the ``stamp_gap`` of :mod:`simreal_ros.gap.host_stalls`, default 40 ms):
  the other stream is then compared with a straight line across the hole. Late delivery (the
  other kind of host stall) is not counted: it moves bag times, and metrics pair by header
  stamp;
* ``ok`` otherwise; ``unjudged`` when the stream has fewer than ``min_messages`` stamped
  messages (nothing to measure a rate on), which does not invalidate a metric.

A stream can be both dropped and stalled; its verdict then names both (``problems``).
:func:`validity` folds the verdicts of a metric's streams into ``(valid, reason)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from simreal_ros.gap.episode import Episode
from simreal_ros.gap.host_stalls import STALL_LIMIT_NS, find_stalls
from simreal_ros.gap.quality import Thresholds, dropped_count

#: default limit on the missing fraction of a paired stream: ``simreal check``'s own default
MAX_DROPPED_FRACTION = Thresholds().max_dropped_fraction


@dataclass(frozen=True)
class StreamVerdict:
    """The data-quality verdict of one stream a metric pairs."""

    topic: str
    status: str  # 'ok', 'dropped', 'stalled', 'dropped+stalled' or 'unjudged'
    messages: int
    expected: int
    missing: int
    max_dropped_fraction: float
    stall_ms: float  # longest stamp gap beyond the median interval (0 when under the limit)
    stall_limit_ms: float
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """Whether a metric over this stream can be trusted (``unjudged`` counts as ok)."""
        return not self.problems

    @property
    def dropped_fraction(self) -> float:
        """Missing / expected (0 without an expected count)."""
        return self.missing / self.expected if self.expected else 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {'status': self.status, 'ok': self.ok, 'messages': self.messages,
                'expected': self.expected, 'missing': self.missing,
                'dropped_fraction': self.dropped_fraction,
                'max_dropped_fraction': self.max_dropped_fraction,
                'stall_ms': self.stall_ms, 'stall_limit_ms': self.stall_limit_ms,
                'problems': list(self.problems)}


def judge_streams(ep: Episode, topics: Sequence[str],
                  max_dropped_fraction: float = MAX_DROPPED_FRACTION,
                  stall_limit_ns: int = STALL_LIMIT_NS, min_messages: int = 10
                  ) -> dict[str, StreamVerdict]:
    """Return the verdict of each of ``topics`` (those not in the bag are left out)."""
    out: dict[str, StreamVerdict] = {}
    window = (ep.info.start_ns - 10**18, ep.info.end_ns + 10**18)  # all of it, any stamps
    for topic in topics:
        s = ep.stats.get(topic)
        if s is None:
            continue
        limit_ms = stall_limit_ns / 1e6
        missing, expected = dropped_count(s)
        if s.count < min_messages or expected == 0:
            out[topic] = StreamVerdict(topic, 'unjudged', s.count, 0, 0, max_dropped_fraction,
                                       0.0, limit_ms)
            continue
        problems: list[str] = []
        frac = missing / expected
        if frac > max_dropped_fraction:
            problems.append(f'{100 * frac:.1f} % of {topic} dropped ({missing} of {expected} '
                            f'expected at {1e3 / s.median_period_ms:.0f} Hz; limit '
                            f'{100 * max_dropped_fraction:g} %)')
        stalls = [st for st in find_stalls(ep, window, [topic], stall_limit_ns)
                  if st.kind == 'stamp_gap']
        stall_ms = stalls[0].excess_ns / 1e6 if stalls else 0.0
        if stalls:
            problems.append(f'{stalls[0].text(ep.info.start_ns)} beyond its median interval '
                            f'(stalled; limit {limit_ms:g} ms)')
        status = '+'.join(k for k, bad in (('dropped', frac > max_dropped_fraction),
                                           ('stalled', bool(stalls))) if bad) or 'ok'
        out[topic] = StreamVerdict(topic, status, s.count, expected, missing,
                                   max_dropped_fraction, stall_ms, limit_ms, tuple(problems))
    return out


def validity(verdicts: Mapping[str, StreamVerdict], topics: Sequence[str]
             ) -> tuple[bool, str]:
    """Return ``(valid, reason)`` of a metric computed over ``topics`` (reason '' if valid)."""
    problems = [p for t in topics if t in verdicts for p in verdicts[t].problems]
    return (not problems, '; '.join(problems))


__all__ = ['MAX_DROPPED_FRACTION', 'StreamVerdict', 'judge_streams', 'validity']
