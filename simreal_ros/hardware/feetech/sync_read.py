"""The receive of a SYNC READ on the Feetech bus, every answer's length checked.

:func:`sync_txrx` sends a ``GroupSyncRead``'s request and receives its answers, as the SDK's
``txRxPacket`` does, but refuses an answer whose LENGTH is not the read's (:data:`STALE`): the
SDK alone takes a late, longer answer for the expected one. It receives either packet by
packet through the SDK (the default) or, with ``one_read``, all the answers' bytes in one read
of a :class:`~simreal_ros.hardware.feetech.port.BufferedPort`, parsed here
(:func:`sync_receive`). :class:`~simreal_ros.hardware.feetech.bus.FeetechBus` calls it.
"""

from __future__ import annotations

import time
from typing import Any

import scservo_sdk as sdk

from simreal_ros.hardware.feetech.port import BufferedPort
from simreal_ros.hardware.feetech.protocol import PacketParser, Rejected
from simreal_ros.hardware.sdk_bus import STALE

#: byte offsets in an STS packet (the SDK's PKT_* constants)
PKT_ID, PKT_LENGTH, PKT_INSTRUCTION, PKT_ERROR, PKT_PARAMETER0 = 2, 3, 4, 4, 5


def sync_txrx(ph: Any, gsr: Any, one_read: bool = False) -> int:
    """Run the SDK's ``GroupSyncRead.txRxPacket``, checking each answer's LENGTH (or STALE).

    The SDK keeps the first ``data_length`` bytes of the first status packet that carries
    the servo's ID, whatever its length: after the 26-byte health read timed out, its late
    answer passed as the next cycle's 15-byte state, Torque Enable (1) read as the position
    (tick 1: -3.14 rad published on every joint). Seen in a teleop run on a loaded host
    (16 states in 20 s, each right after a health read) and reproduced with
    ``--faults late=0.05``.
    """
    result = gsr.txPacket()
    if result != sdk.COMM_SUCCESS:
        return int(result)
    port, size = gsr.port, gsr.data_length
    if one_read and isinstance(port, BufferedPort):
        return sync_receive(port, gsr, size)
    for sid in gsr.data_dict:
        while True:  # as the SDK's readRx: skip the status packets of other IDs
            packet, result = ph.rxPacket(port)
            if result != sdk.COMM_SUCCESS:
                return int(result)
            if packet[PKT_ID] == sid:
                break
        if packet[PKT_LENGTH] != size + 2:  # parameters + ERROR + CHECKSUM
            return STALE
        gsr.data_dict[sid] = packet[PKT_PARAMETER0:PKT_PARAMETER0 + size]
    return int(sdk.COMM_SUCCESS)

def sync_receive(port: BufferedPort, gsr: Any, size: int) -> int:
    """Receive the answers to a SYNC READ just sent: one read of all their bytes, parsed.

    The answer's length is known: ``6 + size`` bytes per listed servo. They are read with
    :meth:`BufferedPort.read_count` (one wake-up when all have arrived, or at the SDK's
    packet timeout) and parsed by :class:`~simreal_ros.hardware.feetech.protocol.
    PacketParser` (header, ID, LEN, checksum), with the SDK's receive's outcomes: status
    packets of other IDs are skipped while a servo's answer is awaited, a bad checksum is
    ``COMM_RX_CORRUPT``, nothing by the timeout ``COMM_RX_TIMEOUT`` (a packet begun but
    not finished ``COMM_RX_CORRUPT``), and a LENGTH other than ``size`` + 2 is
    :data:`STALE`. Measured against the SDK's per-packet receive (2.00 against 4.45
    ``select`` calls a cycle in ``port.py``, a fifth less CPU, no higher rate):
    docs/feetech.md, "Where the time goes".
    """
    deadline = time.monotonic() + port.packet_timeout / 1000.0
    port.is_using = False  # the SDK's rxPacket clears it; this receive replaces that
    parser = PacketParser()
    waiting = list(gsr.data_dict)
    want = len(waiting) * (6 + size)
    while waiting:
        data = port.read_count(max(1, want), deadline)
        if not data:
            return int(sdk.COMM_RX_CORRUPT if parser.pending else sdk.COMM_RX_TIMEOUT)
        for item in parser.feed(data):
            if isinstance(item, Rejected):
                return int(sdk.COMM_RX_CORRUPT)
            if item.packet_id != waiting[0]:
                continue  # as the SDK: another servo's packet while this one's is awaited
            if len(item.params) != size:
                return STALE
            gsr.data_dict[waiting.pop(0)] = list(item.params)
            if not waiting:
                break
        want = len(waiting) * (6 + size) - parser.pending
    return int(sdk.COMM_SUCCESS)
