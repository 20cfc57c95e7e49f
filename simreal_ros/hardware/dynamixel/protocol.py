"""Dynamixel Protocol 2.0 packets: CRC-16, byte stuffing, building and incremental parsing.

Pure Python, no I/O. The wire format (public Dynamixel e-Manual, "Protocol 2.0")::

    FF FF FD 00 | ID | LEN_L LEN_H | INST | PARAM... | CRC_L CRC_H

``LEN`` counts the bytes after itself (instruction, parameters after stuffing, CRC). Inside
the instruction+parameter field every ``FF FF FD`` is sent as ``FF FF FD FD`` (stuffing), so a
header can never appear inside a packet. The CRC is CRC-16 with polynomial 0x8005, initial
value 0, not reflected, over every byte before it (header included, after stuffing). A status
packet has instruction 0x55 followed by one error byte: bit 7 is the hardware alert, the low
7 bits an error number (:data:`ERR_RESULT_FAIL` ...).

:class:`PacketParser` is what the device side (the emulator) uses: it takes bytes in chunks of
any size and yields complete packets or the reason a candidate was rejected, and never raises on
garbage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

HEADER = b'\xff\xff\xfd\x00'
BROADCAST_ID = 0xFE
MAX_ID = 0xFC

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_FACTORY_RESET = 0x06
INST_REBOOT = 0x08
INST_CLEAR = 0x10
INST_BACKUP = 0x20
INST_STATUS = 0x55
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83
INST_FAST_SYNC_READ = 0x8A
INST_BULK_READ = 0x92
INST_BULK_WRITE = 0x93
INST_FAST_BULK_READ = 0x9A

ERR_NONE = 0x00
ERR_RESULT_FAIL = 0x01
ERR_INSTRUCTION = 0x02
ERR_CRC = 0x03
ERR_DATA_RANGE = 0x04
ERR_DATA_LENGTH = 0x05
ERR_DATA_LIMIT = 0x06
ERR_ACCESS = 0x07
ERR_ALERT = 0x80

#: Largest LEN the parser accepts (the SDK's own limit on packets is 1024 bytes in total).
MAX_LENGTH = 1017


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-16 of Protocol 2.0 (poly 0x8005, init 0, MSB first) of ``data``."""
    table = _CRC_TABLE
    for b in data:
        crc = ((crc << 8) ^ table[((crc >> 8) ^ b) & 0xFF]) & 0xFFFF
    return crc


def stuff(body: bytes) -> bytes:
    """Insert the stuffing byte after every ``FF FF FD`` of the instruction+parameter field.

    The pattern is looked for across the boundary with the length field too, as the SDK and
    the e-Manual do: the field is preceded by the LEN bytes, which cannot end in ``FF FF``
    for any legal length below 0xFFxx, so only patterns inside ``body`` matter.
    """
    out = bytearray()
    run = 0  # how much of FF FF FD has been seen
    for b in body:
        out.append(b)
        if run == 2 and b == 0xFD:
            out.append(0xFD)
            run = 0
        elif b == 0xFF:
            run = 2 if run >= 1 else 1
        else:
            run = 0
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    """Remove stuffing bytes (``FF FF FD FD`` -> ``FF FF FD``)."""
    out = bytearray()
    i, n = 0, len(body)
    while i < n:
        b = body[i]
        out.append(b)
        if b == 0xFD and len(out) >= 3 and out[-2] == 0xFF and out[-3] == 0xFF \
                and i + 1 < n and body[i + 1] == 0xFD:
            i += 1  # skip the stuffing byte
        i += 1
    return bytes(out)


def build(packet_id: int, instruction: int, params: bytes = b'') -> bytes:
    """Return a complete packet (header, stuffing, CRC) for ``instruction`` and ``params``."""
    body = stuff(bytes([instruction]) + bytes(params))
    length = len(body) + 2
    head = HEADER + bytes([packet_id & 0xFF, length & 0xFF, length >> 8])
    pkt = head + body
    crc = crc16(pkt)
    return pkt + bytes([crc & 0xFF, crc >> 8])


def status(packet_id: int, error: int, params: bytes = b'') -> bytes:
    """Return a status packet (instruction 0x55) with ``error`` and ``params``."""
    return build(packet_id, INST_STATUS, bytes([error & 0xFF]) + bytes(params))


@dataclass(frozen=True)
class Packet:
    """One parsed packet: ID, instruction and the (unstuffed) parameters."""

    packet_id: int
    instruction: int
    params: bytes
    wire_length: int

    @property
    def error(self) -> int:
        """The error byte of a status packet."""
        return self.params[0] if self.instruction == INST_STATUS and self.params else 0


@dataclass(frozen=True)
class Rejected:
    """A candidate packet that was dropped, and why (``crc``, ``length``)."""

    packet_id: int
    reason: str
    wire_length: int


class PacketParser:
    """Incremental parser: feed bytes in any chunking, iterate complete packets.

    A bad CRC yields :class:`Rejected` with reason ``crc`` (the device answers with a CRC
    error status); an impossible length yields ``length`` and the parser resynchronizes on the
    next header. Bytes before a header are skipped and counted in ``skipped``.
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
            start = buf.find(HEADER[:3])
            while start >= 0 and start + 3 < len(buf) and buf[start + 3] != 0x00:
                start = buf.find(HEADER[:3], start + 1)  # FF FF FD FD is stuffing, not a header
            if start < 0:
                keep = 2 if buf.endswith(b'\xff\xff') else 1 if buf.endswith(b'\xff') else 0
                self.skipped += len(buf) - keep
                del buf[:len(buf) - keep]
                return
            if start:
                self.skipped += start
                del buf[:start]
            if len(buf) < 7:
                return
            length = buf[5] | (buf[6] << 8)
            if length < 3 or length > MAX_LENGTH:
                yield Rejected(buf[4], 'length', 7)
                del buf[:3]
                continue
            total = 7 + length
            if len(buf) < total:
                return
            raw = bytes(buf[:total])
            crc = raw[-2] | (raw[-1] << 8)
            if crc16(raw[:-2]) != crc:
                yield Rejected(raw[4], 'crc', total)
                del buf[:total]
                continue
            body = unstuff(raw[7:-2])
            del buf[:total]
            yield Packet(raw[4], body[0], body[1:], total)


def parse_one(data: bytes) -> Packet:
    """Parse exactly one packet from ``data`` (tests, tools); ValueError if there is none."""
    for item in PacketParser().feed(data):
        if isinstance(item, Packet):
            return item
        raise ValueError(f'packet rejected: {item.reason}')
    raise ValueError('no complete packet in the data')


def u16(v: int) -> bytes:
    """Little-endian 2 bytes."""
    return (v & 0xFFFF).to_bytes(2, 'little')


def u32(v: int) -> bytes:
    """Little-endian 4 bytes (two's complement for negative values)."""
    return (v & 0xFFFFFFFF).to_bytes(4, 'little')
