"""What the recorder keeps per topic, and the QoS it subscribes with.

The recorder (:mod:`simreal_ros.nodes.recorder`) subscribes each topic with the QoS all its
publishers offer (reliable only if all are, transient-local only if all are; depth 0 = keep
all, bounded by ``KEEP_ALL_DEPTH``) and stores the offered profiles in the bag. Per topic it
counts the messages a publisher sent and the recorder never got, from the gaps between the
DDS publication sequence numbers of one publisher (:mod:`simreal_ros.ros.publisher_gaps`).
Header stamps are read straight from the CDR bytes (:func:`stamp_of`) without deserializing.
"""

from __future__ import annotations

import importlib
import struct
from typing import Any

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from simreal_ros.bag import QosSpec
from simreal_ros.errors import SimrealError
from simreal_ros.gap.live_camera import LiveCameraGap
from simreal_ros.gap.stream_stats import StreamStats
from simreal_ros.ros.publisher_gaps import PublisherGaps

#: With keep-all, the depth bounds the samples DDS holds for the recorder before it refuses
#: more (the publisher then re-sends them after its next heartbeat, seconds later).
KEEP_ALL_DEPTH = 20_000


def offered_qos(infos: list[Any]) -> list[QosSpec]:
    """Return the QoS each publisher (TopicEndpointInfo) offers."""
    offered: list[QosSpec] = []
    for info in infos:
        q = info.qos_profile
        rel = q.reliability == ReliabilityPolicy.RELIABLE
        dur = q.durability == DurabilityPolicy.TRANSIENT_LOCAL
        offered.append(QosSpec('reliable' if rel else 'best_effort',
                               'transient_local' if dur else 'volatile',
                               'keep_all' if q.history == HistoryPolicy.KEEP_ALL else 'keep_last',
                               int(q.depth)))
    return offered


def offered_profile(reliable: bool, transient: bool, depth: int = 0) -> QoSProfile:
    """Return the recorder's subscription profile (depth 0 = keep all)."""
    return QoSProfile(depth=depth or KEEP_ALL_DEPTH,
                      history=HistoryPolicy.KEEP_ALL if depth == 0 else HistoryPolicy.KEEP_LAST,
                      reliability=(ReliabilityPolicy.RELIABLE if reliable
                                   else ReliabilityPolicy.BEST_EFFORT),
                      durability=(DurabilityPolicy.TRANSIENT_LOCAL if transient
                                  else DurabilityPolicy.VOLATILE))


def import_message(msgtype: str) -> type:
    """``sensor_msgs/msg/JointState`` -> the Python class (SimrealError when not installed)."""
    pkg, _, name = msgtype.partition('/msg/')
    if not pkg or not name:
        raise SimrealError(f'message type {msgtype!r} is not of the form pkg/msg/Name')
    try:
        return getattr(importlib.import_module(f'{pkg}.msg'), name)  # type: ignore[no-any-return]
    except (ImportError, AttributeError):
        raise SimrealError(f'message type {msgtype!r} is not installed for Python (no '
                           f'{pkg}.msg.{name}); source the workspace that builds {pkg}') from None


def has_header(cls: type) -> bool:
    """Whether the message class's first field is a ``std_msgs/Header``."""
    fields: dict[str, str] = getattr(cls, 'get_fields_and_field_types', lambda: {})()
    first = next(iter(fields.items()), ('', ''))
    return first == ('header', 'std_msgs/Header')


def stamp_of(data: bytes) -> int | None:
    """Header stamp (ns) from the CDR bytes of a message whose first field is a Header."""
    if len(data) < 12:
        return None
    fmt = '<iI' if data[1] == 1 else '>iI'
    sec, nsec = struct.unpack_from(fmt, data, 4)
    return int(sec) * 1_000_000_000 + int(nsec)


class RecordedTopic:
    """One recorded topic: bag handle, subscription, QoS, stream statistics, missed counts."""

    __slots__ = ('name', 'msgtype', 'cls', 'handle', 'has_header', 'stats', 'sub', 'received',
                 'live_role', 'reliable', 'transient', 'publishers', 'last_stamp', 'held_back',
                 'camera', 'gaps')

    def __init__(self, name: str, msgtype: str, cls: type, handle: int) -> None:
        self.name = name
        self.msgtype = msgtype
        self.cls = cls
        self.handle = handle
        self.has_header = has_header(cls)
        self.stats = StreamStats(window=20_000)
        self.sub: Any = None
        self.received = 0
        self.live_role = ''
        self.reliable = True
        self.transient = False
        self.publishers = 0
        self.last_stamp = 0  # the bag timestamp of the message taken last (ns)
        self.held_back = 0  # messages received before one taken ahead of them (DDS repair)
        self.camera: tuple[LiveCameraGap, int] | None = None  # (live camera gap, side)
        self.gaps = PublisherGaps()  # messages a publisher sent that never reached us

    def count_missed(self, info: Any, single_writer: bool) -> None:
        """Count the gap between this message's publisher sequence number and the last one.

        ``single_writer``: whether the subscription matches one publisher, which is what
        attributes a sample to its publisher when the info carries no GID.
        """
        self.gaps.count(info, single_writer)

    @property
    def missed(self) -> int:
        """Messages a publisher sent that never reached the recorder."""
        return self.gaps.missed

    @property
    def unattributed(self) -> int:
        """Messages taken while no gap could be attributed (see PublisherGaps)."""
        return self.gaps.unattributed
