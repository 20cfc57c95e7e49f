"""A recorded episode in arrays: one pass over a bag for ``simreal gap`` and ``simreal check``.

Reads the bag with the project's one array reader (:mod:`simreal_ros.bag.arrays`, whose rules
for joint order, missing names, NaN, out-of-order and duplicate stamps apply here): every
JointState topic as a :class:`JointStream` (its arrays, a
:class:`~simreal_ros.gap.metrics.Series`, its efforts), every Image topic as an
:class:`~simreal_ros.gap.image_metrics.ImageStream` (per-frame mean and digest, not the
pixels), per-topic :class:`~simreal_ros.gap.stream_stats.StreamStats` (header stamps, receive
time = bag timestamp), and the latency injector's ground truth from
``<namespace>/injector/events`` (``std_msgs/msg/Int64MultiArray``, format in
docs/recording.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.bag import BagInfo, BagReader
from simreal_ros.bag.arrays import JOINT_STATE, JointArrays, Progress, read_arrays
from simreal_ros.bag.reader import BagMessage
from simreal_ros.gap.image_metrics import IMAGE, ImageStream, to_array
from simreal_ros.gap.metrics import Series
from simreal_ros.gap.stream_stats import StreamStats, StreamSummary

INJECTOR_TOPIC = '/injector/events'
INJECTOR_TYPE = 'std_msgs/msg/Int64MultiArray'
EVENT_FIELDS = ('route', 'seq', 'receive_ns', 'target_delay_ns', 'deliver_ns', 'fate')
FATES = {0: 'delivered', 1: 'lost', 2: 'duplicate', 3: 'rate_limited', 4: 'repeated'}


@dataclass(frozen=True)
class JointStream:
    """The JointState samples of one topic: the bag reader's arrays, rows in bag order."""

    arrays: JointArrays

    @property
    def names(self) -> tuple[str, ...]:
        """The stream's joints, in column order."""
        return self.arrays.names

    @property
    def stamps(self) -> npt.NDArray[np.int64]:
        """Header stamps (ns), bag order."""
        return self.arrays.stamp_ns

    @property
    def position(self) -> npt.NDArray[np.float64]:
        """Positions (n x joints, rad), bag order."""
        return self.arrays.position

    def series(self) -> Series:
        """Return the stream as a Series: by header stamp, the first of equal stamps kept."""
        a = self.arrays.in_time_order('stamp')
        return Series(a.names, a.stamp_ns, a.position, a.velocity)

    def efforts(self) -> npt.NDArray[np.float64]:
        """Effort samples (n x joints), bag order, NaN rows where a message had none."""
        return self.arrays.effort


@dataclass
class InjectorEvents:
    """Ground truth of the latency injector: one row per event."""

    routes: list[str] = field(default_factory=list)
    rows: list[list[int]] = field(default_factory=list)
    malformed: int = 0

    def array(self) -> npt.NDArray[np.int64]:
        """Events as an (n x 6) int64 array in :data:`EVENT_FIELDS` order."""
        return np.array(self.rows, dtype=np.int64).reshape(len(self.rows), 6)

    def latency_ms(self) -> dict[str, npt.NDArray[np.float64]]:
        """Delivered latency (deliver - receive, ms) per route name."""
        ev = self.array()
        out: dict[str, npt.NDArray[np.float64]] = {}
        for r, name in enumerate(self.routes):
            sel = ev[(ev[:, 0] == r) & (ev[:, 5] == 0) & (ev[:, 4] > 0)]
            out[name] = (sel[:, 4] - sel[:, 2]).astype(np.float64) / 1e6
        return out

    def fate_counts(self) -> dict[str, dict[str, int]]:
        """Count the events of each fate per route name."""
        ev = self.array()
        return {name: {f: int(np.sum((ev[:, 0] == r) & (ev[:, 5] == code)))
                       for code, f in FATES.items()} for r, name in enumerate(self.routes)}


@dataclass
class Episode:
    """What one pass over a bag collected."""

    info: BagInfo
    joints: dict[str, JointStream]
    stats: dict[str, StreamSummary]
    receive: dict[str, npt.NDArray[np.int64]]
    stamps: dict[str, npt.NDArray[np.int64]]
    injector: InjectorEvents | None
    commands_topic: str = ''
    images: dict[str, ImageStream] = field(default_factory=dict)


def parse_injector_message(msg: Any, events: InjectorEvents) -> None:
    """Append the events of one ``/injector/events`` message (see the contract)."""
    dims = list(msg.layout.dim)
    if len(dims) < 2 or dims[1].size != 6 or not dims[0].label.startswith('routes='):
        events.malformed += 1
        return
    index = []
    for r in dims[0].label[len('routes='):].split(','):
        if r not in events.routes:
            events.routes.append(r)
        index.append(events.routes.index(r))
    n = int(dims[0].size)
    data = np.asarray(msg.data, dtype=np.int64)
    if data.size < n * 6:
        events.malformed += 1
        return
    rows = data[:n * 6].reshape(n, 6).tolist()
    for row in rows:
        if not 0 <= row[0] < len(index):
            events.malformed += 1
            return
        row[0] = index[row[0]]
    events.rows.extend(rows)


def load_episode(path: str, topics: Sequence[str] | None = None,
                 progress: Progress | None = None,
                 names: Sequence[str] | None = None) -> Episode:
    """Read a bag once; ``topics`` limits which topics are read (default all).

    ``names``: the joints of every JointState topic, in that order (default: each topic's
    first message's; see :mod:`simreal_ros.bag.arrays`).
    """
    images: dict[str, ImageStream] = {}
    injector: list[InjectorEvents] = []
    with BagReader(path) as reader:
        def other(m: BagMessage) -> None:
            if m.msgtype == IMAGE:
                img = reader.deserialize(m)
                images.setdefault(m.topic, ImageStream()).add(
                    int(img.header.stamp.sec) * 1_000_000_000 + int(img.header.stamp.nanosec),
                    to_array(img))
            elif m.topic.endswith(INJECTOR_TOPIC) and m.msgtype == INJECTOR_TYPE:
                if not injector:
                    injector.append(InjectorEvents())
                parse_injector_message(reader.deserialize(m), injector[0])

        arrays = read_arrays(reader, topics, names, other, progress)
    info = arrays.info
    stats: dict[str, StreamSummary] = {}
    for t, s in arrays.stamped.items():
        st = StreamStats()
        if s.stamp_ns is not None and len(s.stamp_ns) == len(s):
            for stamp, recv in zip(s.stamp_ns.tolist(), s.receive_ns.tolist(), strict=True):
                st.add(stamp, recv)
        else:  # no header (or a message too short to hold one): receive times only
            for recv in s.receive_ns.tolist():
                st.add(None, recv)
        stats[t] = st.summary()
    commands = next((t for t in arrays.stamped if t.rsplit('/', 1)[-1] == 'joint_commands'
                     and info.topics[t][0] == JOINT_STATE), '')
    return Episode(info, {t: JointStream(a) for t, a in arrays.joints.items()}, stats,
                   {t: s.receive_ns for t, s in arrays.stamped.items()},
                   {t: s.stamp_ns for t, s in arrays.stamped.items() if s.stamp_ns is not None},
                   injector[0] if injector else None, commands, images)


def default_pairing(info: BagInfo) -> tuple[str, str] | None:
    """(primary, secondary) joint_states topics of a sim2sim or twin bag, if present."""
    topics = {t for t, (ty, _n) in info.topics.items() if ty == JOINT_STATE}
    def undelayed(t: str) -> str:  # with the latency injector, the backend's own stream
        moved = t[:-len('joint_states')] + 'backend/joint_states'
        return moved if moved in topics else t

    for t in sorted(topics):
        if t.endswith('/sim_a/joint_states'):
            b = t[:-len('sim_a/joint_states')] + 'sim_b/joint_states'
            if b in topics:
                return undelayed(t), b
    for t in sorted(topics):
        if t.endswith('/twin/joint_states'):
            a = t[:-len('twin/joint_states')] + 'joint_states'
            if a in topics:
                return undelayed(a), t
    return None
