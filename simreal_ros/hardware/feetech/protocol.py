"""Feetech STS packets: checksum, sign-magnitude values, building and incremental parsing.

Pure Python, no I/O. The wire format of the STS/SMS series (Feetech's "SCS/STS communication
protocol manual"; the same frame as Dynamixel Protocol 1.0)::

    FF FF | ID | LEN | INST (host) or ERROR (servo) | PARAM... | CHECKSUM

``LEN`` = number of parameters + 2; ``CHECKSUM`` = ``~(ID + LEN + INST + sum(PARAM)) & 0xFF``.
Multi-byte registers of the STS series are little-endian (the SDK's ``PacketHandler(0)``,
"protocol_end 0"; the SCS series is big-endian). Signed registers are sign-magnitude, not
two's complement: the magnitude in the low bits and one direction bit (bit 15 for positions
and speeds, bit 11 for the homing offset, bit 10 for the load), see :func:`encode_sm`.

A status packet's ERROR byte carries the servo's status bits (voltage 0x01, angle sensor 0x02,
overheat 0x04, over-current 0x08, overload 0x20), the same bits as the Status register (65).

:class:`PacketParser` is the device side (the emulator's): bytes in chunks of any size in,
complete packets or the reason a candidate was dropped out, never an exception on garbage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

HEADER = b'\xff\xff'
BROADCAST_ID = 0xFE
MAX_ID = 0xFD

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_RESET = 0x06
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

#: the SDK's own limit on a packet (TXPACKET_MAX_LEN / RXPACKET_MAX_LEN)
MAX_PACKET = 250


def checksum(body: bytes | bytearray) -> int:
    """Checksum of ID, LEN, INST/ERROR and parameters: the inverted low byte of their sum."""
    return ~sum(body) & 0xFF


def build(packet_id: int, instruction: int, params: bytes = b'') -> bytes:
    """Return a complete packet for ``instruction`` (or a status ERROR byte) and ``params``."""
    body = bytes([packet_id & 0xFF, len(params) + 2, instruction & 0xFF]) + bytes(params)
    return HEADER + body + bytes([checksum(body)])


def status(packet_id: int, error: int, params: bytes = b'') -> bytes:
    """Return a status packet of servo ``packet_id`` with ERROR byte ``error``."""
    return build(packet_id, error, params)


def encode_sm(value: int, sign_bit: int) -> int:
    """Sign-magnitude register value of ``value``: ``|value|`` with bit ``sign_bit`` if < 0.

    Raises ValueError when ``|value|`` needs bit ``sign_bit`` or more (e.g. a homing offset
    beyond +-2047 with the sign in bit 11).
    """
    mag = abs(int(value))
    if mag >= 1 << sign_bit:
        raise ValueError(f'{value} does not fit sign-magnitude with the sign in bit {sign_bit} '
                         f'(|value| <= {(1 << sign_bit) - 1})')
    return mag | (1 << sign_bit) if value < 0 else mag


def decode_sm(raw: int, sign_bit: int) -> int:
    """Value of a sign-magnitude register ``raw`` with the sign in bit ``sign_bit``."""
    mag = raw & ((1 << sign_bit) - 1)
    return -mag if raw & (1 << sign_bit) else mag


@dataclass(frozen=True)
class Packet:
    """One parsed packet: ID, instruction (or status ERROR byte) and parameters."""

    packet_id: int
    instruction: int
    params: bytes
    wire_length: int


@dataclass(frozen=True)
class Rejected:
    """A candidate packet that was dropped, and why (``checksum``, ``length``)."""

    packet_id: int
    reason: str
    wire_length: int


class PacketParser:
    """Incremental parser: feed bytes in any chunking, iterate complete packets.

    A bad checksum yields :class:`Rejected` ``checksum`` (an STS servo ignores such a packet:
    it does not answer); an impossible length yields ``length`` and the parser resynchronizes
    on the next header. Bytes before a header are skipped and counted in ``skipped``.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.skipped = 0

    @property
    def pending(self) -> int:
        """Bytes buffered that do not form a complete packet yet."""
        return len(self._buf)

    def clear(self) -> None:
        """Drop everything buffered."""
        self._buf.clear()

    def feed(self, data: bytes) -> Iterator[Packet | Rejected]:
        """Add ``data`` and yield every packet (or rejection) completed by it."""
        buf = self._buf
        buf.extend(data)
        while True:
            start = buf.find(HEADER)
            while start >= 0 and start + 2 < len(buf) and buf[start + 2] == 0xFF:
                start += 1  # FF FF FF: the header is the last two
            if start < 0:
                keep = 1 if buf.endswith(b'\xff') else 0
                self.skipped += len(buf) - keep
                del buf[:len(buf) - keep]
                return
            if start:
                self.skipped += start
                del buf[:start]
            if len(buf) < 4:
                return
            length = buf[3]
            if length < 2 or length + 4 > MAX_PACKET:
                yield Rejected(buf[2], 'length', 4)
                del buf[:2]
                continue
            total = 4 + length
            if len(buf) < total:
                return
            raw = bytes(buf[:total])
            del buf[:total]
            if checksum(raw[2:-1]) != raw[-1]:
                yield Rejected(raw[2], 'checksum', total)
                continue
            yield Packet(raw[2], raw[4], raw[5:-1], total)


def parse_one(data: bytes) -> Packet:
    """Parse exactly one packet from ``data`` (tests, tools); ValueError if there is none."""
    for item in PacketParser().feed(data):
        if isinstance(item, Packet):
            return item
        raise ValueError(f'packet rejected: {item.reason}')
    raise ValueError('no complete packet in the data')
