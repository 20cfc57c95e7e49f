"""Storage plugins with an explicit file name and a flush: MCAP and sqlite3 (rosbags' writers)."""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import sqlite3
import time

from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer

from simreal_ros.bag.options import FSYNC_PERIOD_S
from simreal_ros.errors import BagError


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
        self.bio = path.open('ab')
        self._synced = time.monotonic()

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
