"""A recorded episode in arrays: one pass over a bag for ``simreal gap`` and ``simreal check``.

Collects every JointState topic as a :class:`~simreal_ros.gap.metrics.Series` (plus efforts),
every Image topic as an :class:`~simreal_ros.gap.image_metrics.ImageStream` (per-frame mean
and digest, not the pixels),
per-topic :class:`~simreal_ros.gap.stream_stats.StreamStats` (header stamps read straight from
the CDR bytes, receive time = bag timestamp), and the latency injector's ground truth from
``<namespace>/injector/events`` (``std_msgs/msg/Int64MultiArray``, format in
docs/recording.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import struct
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt
from rosbags.interfaces import Nodetype

from simreal_ros.bag import BagInfo, BagReader
from simreal_ros.errors import BagError
from simreal_ros.gap.image_metrics import IMAGE, ImageStream, to_array
from simreal_ros.gap.metrics import Series
from simreal_ros.gap.stream_stats import StreamStats, StreamSummary

JOINT_STATE = 'sensor_msgs/msg/JointState'
INJECTOR_TOPIC = '/injector/events'
INJECTOR_TYPE = 'std_msgs/msg/Int64MultiArray'
EVENT_FIELDS = ('route', 'seq', 'receive_ns', 'target_delay_ns', 'deliver_ns', 'fate')
FATES = {0: 'delivered', 1: 'lost', 2: 'duplicate', 3: 'rate_limited', 4: 'repeated'}

Progress = Callable[[int, int], None]


@dataclass
class JointStream:
    """JointState samples of one topic, in arrival order."""

    names: tuple[str, ...] = ()
    stamps: list[int] = field(default_factory=list)
    position: list[list[float]] = field(default_factory=list)
    velocity: list[list[float]] = field(default_factory=list)
    effort: list[list[float]] = field(default_factory=list)
    renamed: int = 0

    def series(self) -> Series:
        """Return the stream as a Series (sorted, duplicates dropped)."""
        n = len(self.names)
        vel = self.velocity if all(len(v) == n for v in self.velocity) else None
        return Series.from_samples(self.names, self.stamps, self.position, vel)

    def efforts(self) -> npt.NDArray[np.float64]:
        """Effort samples (n x joints), NaN where a message had none."""
        n = len(self.names)
        return np.array([e if len(e) == n else [np.nan] * n for e in self.effort],
                        dtype=np.float64).reshape(len(self.effort), n)


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


def _header_first(types: Any, msgtype: str) -> bool:
    try:
        fields = types.store.fielddefs[msgtype][1]
    except KeyError:
        return False
    return bool(fields) and fields[0][0] == 'header' and fields[0][1] == (
        Nodetype.NAME, 'std_msgs/msg/Header')


def _stamp(data: bytes) -> int | None:
    if len(data) < 12:
        return None
    sec, nsec = struct.unpack_from('<iI' if data[1] == 1 else '>iI', data, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


def load_episode(path: str, topics: Sequence[str] | None = None,
                 progress: Progress | None = None) -> Episode:
    """Read a bag once; ``topics`` limits which topics are read (default all)."""
    with BagReader(path) as reader:
        info = reader.info
        wanted = list(info.topics) if topics is None else list(topics)
        for t in wanted:
            if t not in info.topics:
                raise BagError(f'the bag {info.path} has no topic {t}; it has '
                               f'{sorted(info.topics)}')
        header = {}
        for t in wanted:
            reader.types.ensure(info.topics[t][0])
            header[t] = _header_first(reader.types, info.topics[t][0])
        stats = {t: StreamStats() for t in wanted}
        receive: dict[str, list[int]] = {t: [] for t in wanted}
        stamps: dict[str, list[int]] = {t: [] for t in wanted if header[t]}
        joints: dict[str, JointStream] = {}
        images: dict[str, ImageStream] = {}
        injector: InjectorEvents | None = None
        total = sum(info.topics[t][1] for t in wanted)
        done = 0
        for m in reader.messages(wanted):
            done += 1
            if progress is not None and (done % 2000 == 0 or done == total):
                progress(done, total)
            stamp = _stamp(m.data) if header[m.topic] else None
            stats[m.topic].add(stamp, m.timestamp)
            if stamp is not None:
                stamps[m.topic].append(stamp)
            receive[m.topic].append(m.timestamp)
            if m.msgtype == JOINT_STATE:
                msg = reader.deserialize(m)
                js = joints.setdefault(m.topic, JointStream(tuple(msg.name)))
                names = tuple(msg.name)
                if names != js.names:
                    if sorted(names) != sorted(js.names):
                        js.renamed += 1
                        continue
                    order = [names.index(n) for n in js.names]
                    pos = [float(msg.position[i]) for i in order]
                    vel = ([float(msg.velocity[i]) for i in order]
                           if len(msg.velocity) == len(names) else [])
                    eff = ([float(msg.effort[i]) for i in order]
                           if len(msg.effort) == len(names) else [])
                else:
                    pos = msg.position.tolist()
                    vel = msg.velocity.tolist()
                    eff = msg.effort.tolist()
                if len(pos) != len(js.names):
                    js.renamed += 1
                    continue
                js.stamps.append(int(msg.header.stamp.sec) * 1_000_000_000
                                 + int(msg.header.stamp.nanosec))
                js.position.append(pos)
                js.velocity.append(vel)
                js.effort.append(eff)
            elif m.msgtype == IMAGE:
                img = reader.deserialize(m)
                images.setdefault(m.topic, ImageStream()).add(
                    int(img.header.stamp.sec) * 1_000_000_000 + int(img.header.stamp.nanosec),
                    to_array(img))
            elif m.topic.endswith(INJECTOR_TOPIC) and m.msgtype == INJECTOR_TYPE:
                injector = injector or InjectorEvents()
                parse_injector_message(reader.deserialize(m), injector)
        if progress is not None and done != total:
            progress(done, max(done, total))
    commands = next((t for t in wanted if t.rsplit('/', 1)[-1] == 'joint_commands'
                     and info.topics[t][0] == JOINT_STATE), '')
    return Episode(info, joints, {t: s.summary() for t, s in stats.items()},
                   {t: np.asarray(v, dtype=np.int64) for t, v in receive.items()},
                   {t: np.asarray(v, dtype=np.int64) for t, v in stamps.items()}, injector,
                   commands, images)


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
