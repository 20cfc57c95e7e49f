"""A bag's stamped streams as arrays: the one reader of joint streams and header stamps.

Everything that turns a bag's ``sensor_msgs/msg/JointState`` topics (or the header stamps of
any stamped topic) into numbers reads them here: ``simreal gap`` and ``simreal check``
(:func:`simreal_ros.gap.episode.load_episode`), sysid (:mod:`simreal_ros.sysid.data`), the
flywheel's comparison window (:func:`simreal_ros.jobs.excitation.window_of`) and the empirical
delay profile of a recording (:mod:`simreal_ros.bag.receive_delays`). So a sample, its time
and its joint order mean the same thing to all of them. Built on
:class:`~simreal_ros.bag.reader.BagReader`; one pass over the bag for any number of topics.

Times are integer nanoseconds on two clocks:

* ``receive_ns``: the bag timestamp, when the recorder received the message;
* ``stamp_ns``: the header stamp, when the message was produced (a state: when it was
  measured).

Stamped streams (:class:`StampArrays`, every topic read): one row per message in bag order,
every message whatever it carries; ``stamp_ns`` is read from the CDR bytes for types whose
first field is a ``std_msgs/msg/Header`` (a message too short to hold one has no row there) and
is ``None`` for topics without one.

Joint streams (:class:`JointArrays`, every JointState topic read), one rule for all callers:

* joints: the names the caller gives (the robot spec's order), else the names of the first
  message with one position per name. Columns are always in that order; a message's values
  are matched by name, so one listing the joints in another order is reordered and one that
  names more joints (a gripper) gives the stream's columns.
* missing names: a message that lacks one of the stream's joints, or has not one position
  per name, is skipped and counted in ``skipped['names']``.
* NaN: a message with a non-finite position is skipped and counted in ``skipped['nan']``. It
  is no measurement (nor command): interpolating across it or adding it to an RMSE makes
  the result NaN.
* velocity and effort: a row of NaN where a message has not one value per name (values are
  kept as sent otherwise).
* out-of-order and duplicate stamps: rows are in bag order, every usable message, out-of-order
  and duplicate stamps included (that is what was recorded; the data-quality checks count
  them). :meth:`JointArrays.in_time_order` sorts by one clock, stably, and keeps the first of
  equal times: the form to interpolate or replay.

Where the former private readers disagreed, this is what was chosen, and why:

* The flywheel's window started at the bag time of the first ``/backend/joint_commands``
  message, whatever it carried; sysid's data at the first *usable* one. A first relayed
  command with a NaN position (or a missing joint) put the window's start before sysid's
  data, the same kind of misalignment as the 4.06 ms one found before. Chosen: usable
  messages only, for both, so sysid's data cover exactly the flywheel's window.
* The gap reader kept NaN positions, sysid dropped them. Chosen: dropped (see NaN above).
* The gap reader skipped a message naming more joints than the stream's; sysid kept it.
  Chosen: kept; every joint of the stream is in it.
* The gap reader dropped every velocity of a stream when one message had none; sysid put NaN
  in that message's row only. Chosen: that row only; the other velocities were measured.
* The flywheel took the states in bag order, so the arm's recovery was the first recovered
  sample to arrive, not the earliest measured; chosen: stamp order, as sysid and the gap
  metrics have it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import struct
from typing import Any, Callable, Literal, Sequence

import numpy as np
import numpy.typing as npt
from rosbags.interfaces import Nodetype

from simreal_ros.bag.reader import BagInfo, BagMessage, BagReader
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.errors import BagError

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Clock = Literal['stamp', 'receive']
Progress = Callable[[int, int], None]

JOINT_STATE = 'sensor_msgs/msg/JointState'
#: the reasons a JointState message is skipped (keys of :attr:`JointArrays.skipped`)
SKIP_REASONS = ('names', 'nan')
#: progress is reported every this many messages (and at the end)
PROGRESS_EVERY = 2000


def has_header(types: TypeRegistry, msgtype: str) -> bool:
    """Return whether the first field of ``msgtype`` is a ``std_msgs/msg/Header``."""
    types.ensure(msgtype)
    try:
        fields = types.store.fielddefs[msgtype][1]
    except KeyError:
        return False
    return bool(fields) and fields[0][0] == 'header' and fields[0][1] == (
        Nodetype.NAME, 'std_msgs/msg/Header')


def header_stamp_ns(data: bytes) -> int | None:
    """Header stamp (ns) of a CDR message whose first field is a Header; None if too short."""
    if len(data) < 12:
        return None
    # 4 bytes of CDR encapsulation (the second says the byte order), then sec (int32) and
    # nanosec (uint32)
    sec, nsec = struct.unpack_from('<iI' if data[1] == 1 else '>iI', data, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


@dataclass(frozen=True)
class StampArrays:
    """The times of every message of one topic, in bag order."""

    topic: str
    msgtype: str
    receive_ns: IntArray
    stamp_ns: IntArray | None  # None: the type has no header

    def __len__(self) -> int:
        return int(self.receive_ns.shape[0])


@dataclass(frozen=True)
class JointArrays:
    """The usable messages of one JointState topic (the module's rules), one row each."""

    topic: str
    names: tuple[str, ...]
    stamp_ns: IntArray            # header stamps
    receive_ns: IntArray          # bag timestamps
    position: FloatArray          # (k, n) rad, finite
    velocity: FloatArray          # (k, n) rad/s, NaN rows where a message had none
    effort: FloatArray            # (k, n) N*m, NaN rows where a message had none
    first_names: tuple[str, ...] = ()  # the names of the topic's first message, as sent
    skipped: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.stamp_ns.shape[0])

    def time_ns(self, clock: Clock) -> IntArray:
        """Return the times on ``clock`` ('stamp' or 'receive')."""
        if clock == 'stamp':
            return self.stamp_ns
        if clock == 'receive':
            return self.receive_ns
        raise ValueError(f'clock {clock!r}: expected stamp or receive')

    def in_time_order(self, clock: Clock) -> JointArrays:
        """Return the rows sorted by ``clock`` (stable), the first of equal times kept."""
        t = self.time_ns(clock)
        order = np.argsort(t, kind='stable')
        keep = np.concatenate([[True], np.diff(t[order]) > 0]) if t.size else np.zeros(0, bool)
        idx = order[keep]
        return replace(self, stamp_ns=self.stamp_ns[idx], receive_ns=self.receive_ns[idx],
                       position=self.position[idx], velocity=self.velocity[idx],
                       effort=self.effort[idx])

    def select(self, names: Sequence[str]) -> JointArrays:
        """Return the columns of ``names`` in that order (BagError naming a missing joint)."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise BagError(f'{self.topic} has no joint {missing[0]} (it has '
                           f'{list(self.names)})')
        idx = [self.names.index(n) for n in names]
        return replace(self, names=tuple(names), position=self.position[:, idx],
                       velocity=self.velocity[:, idx], effort=self.effort[:, idx])


class JointArraysBuilder:
    """Collects JointState messages of one topic by the module's rules."""

    def __init__(self, topic: str, names: Sequence[str] | None = None) -> None:
        self.topic = topic
        self.names: tuple[str, ...] | None = tuple(names) if names is not None else None
        self.first_names: tuple[str, ...] | None = None
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._order: dict[tuple[str, ...], list[int] | None] = {}
        self._stamp: list[int] = []
        self._receive: list[int] = []
        self._pos: list[FloatArray] = []
        self._vel: list[FloatArray] = []
        self._eff: list[FloatArray] = []

    def add(self, msg: Any, stamp_ns: int, receive_ns: int) -> bool:
        """Add one deserialized message; False when it is skipped (and counted)."""
        key = tuple(msg.name)
        if self.first_names is None:
            self.first_names = key
        if self.names is None:
            if len(msg.position) != len(key):
                self.skipped['names'] += 1
                return False
            self.names = key
        if key not in self._order:
            self._order[key] = ([key.index(j) for j in self.names]
                                if set(self.names) <= set(key) else None)
        order = self._order[key]
        if order is None or len(msg.position) != len(key):
            self.skipped['names'] += 1
            return False
        p = np.asarray(msg.position, dtype=np.float64)[order]
        if not np.all(np.isfinite(p)):
            self.skipped['nan'] += 1
            return False
        nan = np.full(len(order), np.nan)
        self._pos.append(p)
        self._vel.append(np.asarray(msg.velocity, dtype=np.float64)[order]
                         if len(msg.velocity) == len(key) else nan)
        self._eff.append(np.asarray(msg.effort, dtype=np.float64)[order]
                         if len(msg.effort) == len(key) else nan)
        self._stamp.append(int(stamp_ns))
        self._receive.append(int(receive_ns))
        return True

    def build(self) -> JointArrays:
        """Return the arrays collected so far."""
        names = self.names or ()
        n = len(names)

        def rows(x: list[FloatArray]) -> FloatArray:
            return np.asarray(x, dtype=np.float64).reshape(len(x), n)

        return JointArrays(self.topic, names, np.asarray(self._stamp, dtype=np.int64),
                           np.asarray(self._receive, dtype=np.int64), rows(self._pos),
                           rows(self._vel), rows(self._eff), self.first_names or (),
                           dict(self.skipped))


@dataclass
class BagArrays:
    """What :func:`read_arrays` read: every topic's times, every JointState topic's arrays.

    ``joints`` has the JointState topics with at least one message, in the order of their
    first messages.
    """

    info: BagInfo
    stamped: dict[str, StampArrays]
    joints: dict[str, JointArrays]


def read_arrays(reader: BagReader, topics: Sequence[str] | None = None,
                names: Sequence[str] | None = None,
                other: Callable[[BagMessage], None] | None = None,
                progress: Progress | None = None, raw: Sequence[str] = ()) -> BagArrays:
    """Read ``topics`` (default all) of an open bag in one pass.

    ``names``: the joints of every JointState topic, in that order (default: each topic's
    first message's). ``other`` gets every message that is not a JointState, in bag order
    (images, events: what the caller reads itself), and so does every message of the ``raw``
    topics whatever their type (a JointState that carries no positions, as ``foot_contacts``
    whose ``effort`` is the feet's forces, is not a joint stream). ``progress(done, total)``
    is called every :data:`PROGRESS_EVERY` messages and at the end.
    """
    info = reader.info
    wanted = list(info.topics) if topics is None else list(topics)
    for t in wanted:
        if t not in info.topics:
            raise BagError(f'the bag {info.path} has no topic {t}; it has '
                           f'{sorted(info.topics)}')
    header = {t: has_header(reader.types, info.topics[t][0]) for t in wanted}
    receive: dict[str, list[int]] = {t: [] for t in wanted}
    stamps: dict[str, list[int]] = {t: [] for t in wanted if header[t]}
    builders: dict[str, JointArraysBuilder] = {}  # in the order of their first messages
    total = sum(info.topics[t][1] for t in wanted)
    done = 0
    for m in reader.messages(wanted):
        done += 1
        if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
            progress(done, total)
        stamp = header_stamp_ns(m.data) if header[m.topic] else None
        receive[m.topic].append(m.timestamp)
        if stamp is not None:
            stamps[m.topic].append(stamp)
        if m.msgtype == JOINT_STATE and m.topic not in raw:
            msg = reader.deserialize(m)
            if m.topic not in builders:
                builders[m.topic] = JointArraysBuilder(m.topic, names)
            builders[m.topic].add(msg, int(msg.header.stamp.sec) * 1_000_000_000
                                  + int(msg.header.stamp.nanosec), m.timestamp)
        elif other is not None:
            other(m)
    if progress is not None and done != total:
        progress(done, max(done, total))
    stamped = {t: StampArrays(t, info.topics[t][0], np.asarray(receive[t], dtype=np.int64),
                              np.asarray(stamps[t], dtype=np.int64) if header[t] else None)
               for t in wanted}
    return BagArrays(info, stamped, {t: b.build() for t, b in builders.items()})


def load_arrays(path: str, topics: Sequence[str] | None = None,
                names: Sequence[str] | None = None) -> BagArrays:
    """Open the bag at ``path`` and :func:`read_arrays` it."""
    with BagReader(path) as reader:
        return read_arrays(reader, topics, names)
