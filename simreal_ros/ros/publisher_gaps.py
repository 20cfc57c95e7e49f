"""Messages a publisher sent that a subscriber never got, from DDS publication sequence numbers.

Every DDS sample carries its publisher's sequence number (``publication_sequence_number`` in
the message info: 1, 2, 3, ... per publisher). A gap between two samples of one publisher is
the count of messages that never reached the subscriber's callback or take: a keep-last
history that overflowed while the subscriber was starved, a best-effort sample lost, a reliable
writer that dropped unacknowledged samples from its own keep-last history. Publishers are told
apart by ``publisher_gid`` where the message info carries it (Kilted); where it does not
(Jazzy's rclpy), gaps are counted only while the subscription matches exactly one publisher,
and the messages taken while it matched several are counted as ``unattributed``. Messages a
publisher sent after the last one the subscriber got leave no gap and are not seen.

Used by the recorder (:mod:`simreal_ros.ros.recorded_topic`) and the latency injector
(:mod:`simreal_ros.nodes.injector`). Pure: the info is the dict rclpy hands over.
"""

from __future__ import annotations

from typing import Any


class PublisherGaps:
    """Count the messages missed between consecutive samples of each publisher."""

    __slots__ = ('missed', 'unattributed', 'last_seq')

    def __init__(self) -> None:
        self.missed = 0  # messages a publisher sent that never reached the subscriber
        self.unattributed = 0  # taken while no gap could be attributed (see the module)
        self.last_seq: dict[bytes | None, int] = {}  # publisher GID -> last sequence number

    def count(self, info: Any, single_writer: bool) -> int:
        """Count the gap before this message; return how many were missed just before it.

        ``single_writer``: whether the subscription matches one publisher, which is what
        attributes a sample to its publisher when the info carries no GID.
        """
        seq = info.get('publication_sequence_number') if info is not None else None
        if not seq:
            self.unattributed += 1
            return 0
        gid = info.get('publisher_gid')
        key = bytes(gid['data']) if gid else None
        if key is None and not single_writer:
            self.last_seq.clear()  # the next gap would span two publishers' numbers
            self.unattributed += 1
            return 0
        last = self.last_seq.get(key)
        gap = 0
        if last is not None and seq > last + 1:
            gap = seq - last - 1
            self.missed += gap
        if last is None or seq > last:
            self.last_seq[key] = seq
        elif key is None:  # a new publisher, numbering from 1 again (Jazzy: no GID)
            self.last_seq[key] = seq
        return gap
