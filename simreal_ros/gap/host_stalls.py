"""Host stalls in a recording: timing in a bag that is the computer's, not the robot's.

A replay (``simreal sysid validate``) feeds the sim the commands the driver got, at the time the
recorder got them (bag time), from the measured state. A process that the host stalls for tens
of milliseconds writes that stall into the data: the excitation stops stamping commands, or
commands and states reach the recorder late, in a burst. No model replays it, the nominal one
no more than the identified one. Measured on ``simreal demo --fit-s 20 --holdout-s 8`` runs
with the other core busy: in one held-out bag the excitation's command stamps stop for 75 ms
beyond their 4 ms period and commands and states reach the bag up to 69 and 73 ms later than
their median; the nominal replay's RMSE doubled (26 against 12.4 mrad) and the
identified/nominal ratio was 0.85, where two held-out bags whose largest values were 16 and
6 ms gave 0.14. Fit bags of the same runs reached 22-47 ms.

:func:`find_stalls` reports, per stamped JointState topic, inside a window (header stamps, ns):

* ``stamp_gap``: the longest interval between consecutive header stamps, beyond the median
  interval (the publisher stopped);
* ``late_delivery``: the largest (bag time - header stamp), beyond its median (messages reached
  the recorder in a burst after a stall of the publisher, a relay or the recorder).

A value above ``limit_ns`` (default :data:`STALL_LIMIT_NS`, 40 ms, between the undisturbed
held-out bags and the disturbed one above) is a :class:`Stall`. It flags a risk, not a ruined
bag: with the host far busier (one core busy, four nodes starting and stopping every 3 s), every
recording of a run had stalls of 56-270 ms and its ratio was still 0.21.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simreal_ros.bag.arrays import JOINT_STATE
from simreal_ros.gap.episode import Episode

#: A stamp gap or late delivery beyond the median by more than this is a host stall (ns).
STALL_LIMIT_NS = 40_000_000


@dataclass(frozen=True)
class Stall:
    """One disturbed stream: what, how long (beyond its median) and where (header stamp)."""

    topic: str
    kind: str  # 'stamp_gap' or 'late_delivery'
    excess_ns: int
    at_ns: int

    def text(self, t0_ns: int = 0) -> str:
        """One line, e.g. ``/joint_commands: stamps stop for 85.0 ms at 3.21 s``."""
        what = ('stamps stop for' if self.kind == 'stamp_gap'
                else 'messages reach the bag late by')
        return (f'{self.topic}: {what} {self.excess_ns / 1e6:.1f} ms at '
                f'{(self.at_ns - t0_ns) / 1e9:.2f} s')


def find_stalls(ep: Episode, window_ns: tuple[int, int], topics: Sequence[str] | None = None,
                limit_ns: int = STALL_LIMIT_NS) -> list[Stall]:
    """Return the stalls of ``topics`` (default: every JointState topic) inside ``window_ns``.

    Each topic yields at most one stall of each kind, the largest. Topics with fewer than three
    stamped messages in the window say nothing and are skipped.
    """
    names = list(topics) if topics is not None else sorted(
        t for t, (msgtype, _n) in ep.info.topics.items() if msgtype == JOINT_STATE)
    lo, hi = window_ns
    out: list[Stall] = []
    for topic in names:
        stamps = ep.stamps.get(topic)
        if stamps is None:
            continue
        receive = ep.receive[topic]
        inside = (stamps >= lo) & (stamps <= hi)
        s, r = stamps[inside], receive[inside]
        if s.size < 3:
            continue
        order = np.argsort(s, kind='stable')
        s, r = s[order], r[order]
        gaps = np.diff(s)
        k = int(np.argmax(gaps))
        excess = int(gaps[k] - np.median(gaps))
        if excess > limit_ns:
            out.append(Stall(topic, 'stamp_gap', excess, int(s[k])))
        lag = r - s
        k = int(np.argmax(lag))
        excess = int(lag[k] - np.median(lag))
        if excess > limit_ns:
            out.append(Stall(topic, 'late_delivery', excess, int(s[k])))
    return out
