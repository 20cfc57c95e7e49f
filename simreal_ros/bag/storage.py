"""Storage plugins with an explicit file name and a flush: MCAP and sqlite3 (rosbags' writers).

MCAP files carry every CRC the MCAP specification defines (CRC-32 as ``zlib.crc32``): each
chunk's ``uncompressed_crc`` (of its records before compression), the data-section CRC in the
DataEnd record (every byte from the magic up to DataEnd) and the summary CRC in the footer
(from the summary start up to the footer's ``summary_crc`` field). rosbags' writer leaves all
three 0 ("not computed"), so a flipped byte was undetectable; here they are filled in as the
bytes pass to the file, which costs one ``zlib.crc32`` pass over each chunk and one over the
file (about 2.6 GB/s on the development machine: well below the recorder's write path).
"""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import sqlite3
import struct
import time
from typing import Any
import zlib

from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

from simreal_ros.bag.options import FSYNC_PERIOD_S
from simreal_ros.errors import BagError

_OP_CHUNK = 0x06
_OP_DATA_END = 0x0F
_FOOTER_SIZE = 1 + 8 + 8 + 8 + 4  # opcode, length, summary_start, summary_offset_start, crc
_CHUNK_CRC_AT = 8 + 8 + 8  # start time, end time, uncompressed size, then uncompressed_crc


class _CrcFile:
    """The MCAP file under rosbags' writer: a running data-section CRC, CRCs filled in.

    rosbags writes every record as three writes (the 1-byte opcode, the 8-byte length, the
    body); this wrapper follows that to put the chunk CRC of :meth:`McapFile.close_chunk`
    into the chunk body, and keeps everything from DataEnd on (the small summary) in memory
    until :meth:`close`, which fills in the DataEnd and footer CRCs and writes it.
    """

    def __init__(self, path: Path) -> None:
        self.raw = path.open('ab')
        self.crc = zlib.crc32(path.read_bytes())  # the magic and header rosbags wrote
        self.offset = self.raw.tell()
        self.chunk_crc: int | None = None
        self._op: int | None = None  # opcode of the record being written
        self._parts = 0              # the last write was this record's 1st, 2nd or 3rd
        self.tail: bytearray | None = None  # DataEnd onwards, held until close

    def write(self, data: Any) -> int:
        view = memoryview(data).cast('B')
        n = len(view)
        if self.tail is not None:
            self.tail += view
            self.offset += n
            return n
        self._parts = self._parts % 3 + 1  # 1: the opcode, 2: the length, 3: the body
        if self._parts == 1:
            self._op = view[0]
            if self._op == _OP_DATA_END:
                self.tail = bytearray(view)
                self.offset += n
                return n
        if self._op == _OP_CHUNK and self._parts == 3 and self.chunk_crc is not None:
            crc = struct.pack('<I', self.chunk_crc)
            self.chunk_crc = None
            for piece in (view[:_CHUNK_CRC_AT], crc, view[_CHUNK_CRC_AT + 4:]):
                self._put(piece)
            return n
        self._put(view)
        return n

    def _put(self, data: Any) -> None:
        self.raw.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.offset += len(data)

    def tell(self) -> int:
        return self.offset

    def flush(self) -> None:
        self.raw.flush()

    def fileno(self) -> int:
        return self.raw.fileno()

    def close(self) -> None:
        tail = self.tail
        if tail is not None and len(tail) >= 13 + _FOOTER_SIZE + 8:
            struct.pack_into('<I', tail, 9, self.crc)  # DataEnd: opcode, length, crc
            footer = len(tail) - 8 - _FOOTER_SIZE
            summary_start = struct.unpack_from('<Q', tail, footer + 9)[0]
            data_end = self.offset - len(tail)
            if summary_start:
                covered = tail[summary_start - data_end:footer + _FOOTER_SIZE - 4]
                struct.pack_into('<I', tail, footer + _FOOTER_SIZE - 4, zlib.crc32(covered))
            self.raw.write(tail)
            self.tail = None
        self.raw.close()


class McapFile(McapWriter):
    """rosbags' MCAP storage writing one named file, with :meth:`flush`."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:  # noqa: D107
        # McapWriter names its file after the bag directory; split bags need one name per
        # file, so the base class starts its file in a scratch directory, then it is moved.
        if path.exists():
            raise BagError(f'{path} exists already, not overwriting')
        scratch = path.parent / f'.{path.name}.init'
        scratch.mkdir()
        try:
            super().__init__(scratch, compression)
            self.bio.close()
            (scratch / f'{scratch.name}.mcap').rename(path)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self.path = path
        self.bio: Any = _CrcFile(path)
        self._synced = time.monotonic()

    def close_chunk(self) -> None:
        """Write the pending chunk with its ``uncompressed_crc``."""
        self.bio.chunk_crc = zlib.crc32(self.chunk.bio.getbuffer())
        super().close_chunk()

    def flush(self) -> None:
        """Close the pending chunk and hand everything to the operating system.

        At most once a second the file is also synced to the disk (a power cut then loses
        at most the last second).
        """
        if self.chunk.bio.tell():
            self.close_chunk()
        self.bio.flush()
        now = time.monotonic()
        if now - self._synced >= FSYNC_PERIOD_S:
            os.fsync(self.bio.fileno())
            self._synced = now

    def size(self) -> int:
        """Bytes written so far (including the pending chunk)."""
        return int(self.bio.tell() + self.chunk.bio.tell())


class SqliteFile(Sqlite3Writer):
    """rosbags' sqlite3 storage writing one named file, committing at each :meth:`flush`."""

    def __init__(self, path: Path, compression: CompressionMode) -> None:  # noqa: D107
        if path.exists():
            raise BagError(f'{path} exists already, not overwriting')
        self.path = path
        # the recorder opens the bag in its executor thread and writes from its writer thread
        # (one at a time, under its lock)
        self.conn = sqlite3.connect(f'file:{path}', uri=True, check_same_thread=False)
        self.conn.executescript(self.SQLITE_SCHEMA)
        self.cursor = self.conn.cursor()
        del compression

    def flush(self) -> None:
        """Commit the open transaction."""
        self.conn.commit()

    def size(self) -> int:
        """Bytes of the database file so far."""
        return self.path.stat().st_size if self.path.exists() else 0
