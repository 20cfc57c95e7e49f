"""Integrity of MCAP files: every CRC checked, damage named in one line.

:func:`verify_mcap` checks one file the way the MCAP specification defines it (CRC-32 as
``zlib.crc32``): the start and end magic, the footer, the DataEnd record's data-section CRC
(every byte from the magic up to DataEnd), the footer's summary CRC and, where the
data-section CRC does not match, each chunk's ``uncompressed_crc`` to name the damaged chunk.
A CRC of 0 means "not computed" (bags written before simreal wrote CRCs, or by other
writers): those files get the structural checks only, and every chunk CRC that is set.

Damage raises :class:`~simreal_ros.errors.BagCorruptError` naming the file, the chunk (its
number, byte range and log-time range in ns) or the byte offset, and what to run:
``simreal bag repair BAG`` recovers every intact chunk (:mod:`simreal_ros.bag.repair`).

:func:`walk_chunks` is the one parser of a file's data section, shared with the salvage: it
yields every record it can delimit, with each chunk verified (CRC, decompression, records
that tile it exactly), and re-synchronises on the next valid chunk after damage that breaks
the record structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import mmap
from pathlib import Path
import struct
import zlib

import zstandard

from simreal_ros.bag.options import MCAP_MAGIC
from simreal_ros.errors import BagCorruptError

OP_FOOTER = 0x02
OP_CHUNK = 0x06
OP_MESSAGE_INDEX = 0x07
OP_DATA_END = 0x0F
_FOOTER_SIZE = 1 + 8 + 8 + 8 + 4
_MAX_COMPRESSION_NAME = 16  # '' or 'zstd' or 'lz4'; a longer name is damage
#: largest uncompressed chunk believed: rosbags closes a chunk past 1 MiB, so only one huge
#: message makes it bigger; a damaged size field must not make zstd allocate exabytes
MAX_CHUNK_BYTES = 2**31


@dataclass
class Chunk:
    """One chunk record of the data section, verified or not."""

    number: int             # 1-based, in file order
    offset: int             # byte offset of its opcode
    end: int                # byte offset after it
    start_ns: int
    end_ns: int
    records: bytes | None   # its uncompressed records when intact, else None
    problem: str = ''       # why it is not intact ('' when intact)
    compression: str = ''
    index_counts: dict[int, int] = field(default_factory=dict)  # channel: messages indexed
    index_start_ns: int = 2**63 - 1   # earliest time in its message indexes
    index_end_ns: int = 0

    def time_range(self) -> str:
        """Return the log-time range in ns (from the message indexes when they were read)."""
        lo, hi = self.start_ns, self.end_ns
        if self.index_counts and self.index_start_ns <= self.index_end_ns:
            lo, hi = self.index_start_ns, self.index_end_ns
        return f'log time {lo}-{hi} ns'


def _u64(b: bytes | mmap.mmap | memoryview, o: int) -> int:
    return int(struct.unpack_from('<Q', b, o)[0])


def _u32(b: bytes | mmap.mmap | memoryview, o: int) -> int:
    return int(struct.unpack_from('<I', b, o)[0])


def records_tile(data: bytes) -> bool:
    """Whether ``data`` is a whole number of well-formed records (a chunk's content)."""
    o, end = 0, len(data)
    while o < end:
        if o + 9 > end:
            return False
        o += 9 + _u64(data, o + 1)
    return o == end


def _chunk_at(buf: mmap.mmap | bytes, o: int, n: int, number: int) -> Chunk | None:
    """Return the chunk record at ``o`` (body length ``n``); None when it is not a chunk."""
    body = o + 9
    if n < 40:
        return None
    name_len = _u32(buf, body + 28)
    if name_len > _MAX_COMPRESSION_NAME or 40 + name_len > n:
        return None
    clen = _u64(buf, body + 32 + name_len)
    if 40 + name_len + clen != n:
        return None  # the lengths do not add up: not a chunk header
    start_ns, end_ns, size, crc = struct.unpack_from('<QQQI', buf, body)
    comp = bytes(buf[body + 32:body + 32 + name_len])
    data = bytes(buf[body + 40 + name_len:body + n])
    c = Chunk(number, o, body + n, start_ns, end_ns, None,
              compression=comp.decode('ascii', 'replace'))
    if size > MAX_CHUNK_BYTES:
        c.problem = f'declares {size} bytes (damaged header)'
        return c
    try:
        if comp == b'zstd':
            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
        elif comp:
            c.problem = f'unsupported compression {comp!r}'
            return c
    except (zstandard.ZstdError, MemoryError) as exc:
        c.problem = f'does not decompress ({type(exc).__name__})'
        return c
    if len(data) != size:
        c.problem = f'holds {len(data)} bytes, its header says {size}'
    elif crc and zlib.crc32(data) != crc:
        c.problem = 'fails its CRC'
    elif not records_tile(data):
        c.problem = 'holds broken records'
    else:
        c.records = data
    return c


def _resync(buf: mmap.mmap | bytes, start: int, end: int, number: int) -> int:
    """Offset of the next intact chunk record after ``start``, or ``end``."""
    o = start
    while True:
        o = buf.find(bytes([OP_CHUNK]), o, end)
        if o < 0 or o + 9 > end:
            return end
        n = _u64(buf, o + 1)
        if o + 9 + n <= end:
            c = _chunk_at(buf, o, n, number)
            if c is not None and not c.problem:
                return o
        o += 1


@dataclass
class Walk:
    """What :func:`walk_chunks` found in one data section."""

    chunks: list[Chunk] = field(default_factory=list)
    records: list[tuple[int, bytes]] = field(default_factory=list)  # outside chunks (op, body)
    skipped: list[tuple[int, int]] = field(default_factory=list)    # byte ranges not parsed
    end: int = 0          # offset where the walk stopped (DataEnd, footer or end of data)
    data_end: int = -1    # offset of the DataEnd record, -1 when none was reached


def walk_chunks(buf: mmap.mmap | bytes, end: int) -> Walk:
    """Parse the data section of ``buf[:end]`` (after the magic) record by record."""
    w = Walk()
    o = len(MCAP_MAGIC)
    last: Chunk | None = None
    while o + 9 <= end:
        op = buf[o]
        n = _u64(buf, o + 1)
        if op in (OP_DATA_END, OP_FOOTER) and o + 9 + n <= end:
            w.data_end = o if op == OP_DATA_END else -1
            break
        c = _chunk_at(buf, o, n, len(w.chunks) + 1) if op == OP_CHUNK and \
            o + 9 + n <= end else None
        if c is not None:
            w.chunks.append(c)
            last = c
            o = c.end
            continue
        if op == OP_MESSAGE_INDEX and o + 9 + n <= end and n >= 6 and \
                6 + _u32(buf, o + 11) == n and _u32(buf, o + 11) % 16 == 0:
            if last is not None:
                cid = int(struct.unpack_from('<H', buf, o + 9)[0])
                k = _u32(buf, o + 11) // 16
                last.index_counts[cid] = last.index_counts.get(cid, 0) + k
                for i in range(k):
                    ts = _u64(buf, o + 15 + 16 * i)
                    last.index_start_ns = min(last.index_start_ns, ts)
                    last.index_end_ns = max(last.index_end_ns, ts)
            o += 9 + n
            continue
        if op in (0x01, 0x03, 0x04, 0x05, 0x09, 0x0C) and o + 9 + n <= end:
            w.records.append((op, bytes(buf[o + 9:o + 9 + n])))
            o += 9 + n
            continue
        # not a record that fits: damage (or a cut) breaks the structure here; the next
        # intact chunk is where reading can go on
        nxt = _resync(buf, o + 1, end, len(w.chunks) + 1)
        if op == OP_CHUNK and o + 9 <= end:
            # a chunk whose header is damaged or cut: count it as a lost chunk
            lost = Chunk(len(w.chunks) + 1, o, nxt, 0, 0, None, 'is damaged or cut short')
            if o + 9 + 16 <= end:
                lost.start_ns, lost.end_ns = _u64(buf, o + 9), _u64(buf, o + 17)
            w.chunks.append(lost)
            last = lost
        else:
            w.skipped.append((o, nxt))
            last = None
        o = nxt
    w.end = o
    return w


def _fail(path: Path, bag: Path, what: str) -> BagCorruptError:
    return BagCorruptError(f'{path}: {what}; the bag is corrupt: run `simreal bag repair '
                           f'{bag}` to recover every intact chunk into a readable bag')


def verify_mcap(path: Path, bag: Path) -> None:
    """Raise BagCorruptError (one line) unless the MCAP file ``path`` of ``bag`` is intact."""
    size = path.stat().st_size
    if size < 2 * len(MCAP_MAGIC) + _FOOTER_SIZE:
        raise _fail(path, bag, f'is truncated ({size} bytes, shorter than an empty MCAP file)')
    with path.open('rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        _verify(path, bag, buf, size)


def _verify(path: Path, bag: Path, buf: mmap.mmap, size: int) -> None:
    if buf[:len(MCAP_MAGIC)] != MCAP_MAGIC:
        raise _fail(path, bag, 'does not start with the MCAP magic')
    footer = size - len(MCAP_MAGIC) - _FOOTER_SIZE
    if buf[size - len(MCAP_MAGIC):] != MCAP_MAGIC or buf[footer] != OP_FOOTER or \
            _u64(buf, footer + 1) != _FOOTER_SIZE - 9:
        raise _fail(path, bag, f'has no valid end (truncated or damaged at the end; '
                               f'{size} bytes)')
    summary_start, summary_crc = _u64(buf, footer + 9), _u32(buf, footer + 25)
    if summary_start > footer or (summary_start and summary_start < len(MCAP_MAGIC) + 13):
        raise _fail(path, bag, f'has a damaged footer (summary start {summary_start})')
    data_end = (summary_start or footer) - 13
    if buf[data_end] != OP_DATA_END or _u64(buf, data_end + 1) != 4:
        raise _fail(path, bag, f'has no DataEnd record at byte {data_end} (damaged summary '
                               f'or footer)')
    if summary_start and summary_crc and \
            zlib.crc32(buf[summary_start:footer + _FOOTER_SIZE - 4]) != summary_crc:
        raise _fail(path, bag, f'its summary (bytes {summary_start}-{footer}) fails its CRC')
    data_crc = _u32(buf, data_end + 9)
    if data_crc and zlib.crc32(buf[:data_end]) == data_crc:
        return  # every byte of the data section is as written
    w = walk_chunks(buf, data_end)
    total = len(w.chunks)
    for c in w.chunks:
        if c.problem:
            raise _fail(path, bag, f'chunk {c.number} of {total} (bytes {c.offset}-{c.end}, '
                                   f'{c.time_range()}) {c.problem}')
    if w.skipped:
        a, b = w.skipped[0]
        raise _fail(path, bag, f'bytes {a}-{b} are not MCAP records (damaged)')
    if w.end != data_end:
        raise _fail(path, bag, f'its data section ends at byte {w.end}, DataEnd is at '
                               f'{data_end} (damaged)')
    if data_crc:
        raise _fail(path, bag, f'its data section (bytes 0-{data_end}) fails its CRC outside '
                               f'the chunks (a message index or the header is damaged)')
