"""The crash-safe, splitting bag writer.

The writer stores raw CDR bytes (nothing is deserialized on the recording path) in rosbag2
format version 9, MCAP by default or sqlite3 on request, optionally zstd-compressed (MCAP:
compressed chunks; sqlite3: compressed messages), split by size or duration into
``<bag>_0.mcap``, ``<bag>_1.mcap``, ... It never overwrites an existing path. MCAP files carry
every CRC of the MCAP specification (chunks, data section, summary; see
:mod:`simreal_ros.bag.storage`), which every reader checks (:mod:`simreal_ros.bag.integrity`).

Crash safety: :meth:`BagWriter.flush` (called at least every ``flush_period_s``) closes the
pending MCAP chunk, or commits the sqlite3 transaction, and hands the bytes to the operating
system, so a SIGKILL loses at most one flush period. While a bag is open its directory holds
``recording.yaml`` (settings, topics, ``custom_data``); a bag killed before :meth:`close`
has no ``metadata.yaml`` and is made readable again by :func:`repair_bag` (``simreal bag
repair``), which rebuilds the MCAP summary or the sqlite3 counts and writes the metadata.
"""

from __future__ import annotations

from pathlib import Path
import time
from typing import Mapping, Sequence

from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
)
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.metadata import dump_qos_v9
import zstandard

from simreal_ros.bag.metadata import (
    FileInfo,
    TopicRecord,
    dump_yaml,
    metadata_dict,
    write_atomic,
)
from simreal_ros.bag.options import BAG_VERSION, METADATA, SIDE_CAR, BagOptions, QosSpec
from simreal_ros.bag.provenance import ros_distro
from simreal_ros.bag.storage import McapFile, SqliteFile
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.errors import BagError


class BagWriter:
    """A rosbag2 bag being written; use as a context manager or call :meth:`close`.

    ``add_topic`` returns a handle for ``write(handle, timestamp_ns, cdr_bytes)``. Not
    thread-safe: one thread owns the writer (the recorder's writer thread).
    """

    def __init__(self, path: str | Path, options: BagOptions | None = None,
                 custom_data: Mapping[str, str] | None = None,
                 types: TypeRegistry | None = None) -> None:
        self.path = Path(path).expanduser()
        self.options = options or BagOptions()
        self.custom = {str(k): str(v) for k, v in (custom_data or {}).items()}
        self.types = types or TypeRegistry()
        self.ros_distro = ros_distro()
        if self.path.exists() or self.path.is_symlink():
            raise BagError(f'{self.path} exists already; simreal never overwrites a bag: '
                           f'choose a new directory name or remove the old one')
        if not self.path.parent.is_dir():
            raise BagError(f'cannot create the bag {self.path}: its parent directory '
                           f'{self.path.parent} does not exist')
        try:
            self.path.mkdir(mode=0o755)
        except OSError as exc:
            raise BagError(f'cannot create the bag directory {self.path}: {exc}') from None
        self.topics: list[TopicRecord] = []
        self.files: list[FileInfo] = []
        self.storage: McapFile | SqliteFile | None = None
        self._compressor = zstandard.ZstdCompressor(level=3)
        self._last_flush = time.monotonic()
        self.bytes_in = 0
        self.closed = False
        self._open_file()

    # -- files -----------------------------------------------------------------------------

    def _open_file(self) -> None:
        name = f'{self.path.name}_{len(self.files)}{self.options.suffix}'
        mode = CompressionMode.NONE
        if self.options.compression == 'zstd' and self.options.storage == 'mcap':
            mode = CompressionMode.STORAGE
        file_path = self.path / name
        # the side-car names the file before it exists: a kill between the two leaves a file
        # that repair knows about (or a name it skips), never an unlisted file in the bag
        self.files.append(FileInfo(name))
        self._write_sidecar()
        try:
            self.storage = (McapFile(file_path, mode) if self.options.storage == 'mcap'
                            else SqliteFile(file_path, mode))
        except BaseException:
            self.files.pop()
            self._write_sidecar()
            raise
        for t in self.topics:
            self._register(t)

    def _connection(self, index: int, t: TopicRecord) -> Connection:
        fmt = (MessageDefinitionFormat.IDL if t.msgdef.startswith('=' * 80 + '\nIDL: ')
               else MessageDefinitionFormat.MSG)
        return Connection(id=index + 1, topic=t.name, msgtype=t.msgtype,
                          msgdef=MessageDefinition(fmt, t.msgdef), digest=t.digest, msgcount=0,
                          ext=ConnectionExtRosbag2('cdr', list(t.qos)), owner=None)

    def _register(self, t: TopicRecord) -> None:
        assert self.storage is not None
        index = self.topics.index(t)
        conn = self._connection(index, t)
        if not any(x.msgtype == t.msgtype for x in self.topics[:index]):
            self.storage.add_msgtype(conn)
        qos_text = dump_yaml([dict(q) for q in dump_qos_v9(list(t.qos))]).strip() if t.qos else ''
        self.storage.add_connection(conn, qos_text)
        t.conn = conn

    def _write_sidecar(self) -> None:
        write_atomic(self.path / SIDE_CAR, dump_yaml({
            'simreal_recording': {
                'storage': self.options.storage, 'compression': self.options.compression,
                'files': [f.path for f in self.files],
                'topics': [{'name': t.name, 'type': t.msgtype, 'type_description_hash':
                            t.digest, 'offered_qos_profiles':
                            [dict(q) for q in dump_qos_v9(t.qos)]} for t in self.topics],
                'custom_data': self.custom,
                'ros_distro': self.ros_distro,
            }}))

    def _split_due(self, timestamp: int) -> bool:
        f = self.files[-1]
        assert self.storage is not None
        if not f.count:
            return False
        o = self.options
        if o.split_size_mb and self.storage.size() >= o.split_size_mb * 1e6:
            return True
        return bool(o.split_duration_s and timestamp - f.start >= o.split_duration_s * 1e9)

    def _close_file(self) -> None:
        assert self.storage is not None
        meta = metadata_dict(self.options.storage, self.options.compression, self.topics,
                             self.files, self.custom, self.ros_distro)
        self.storage.close(BAG_VERSION, dump_yaml(meta['rosbag2_bagfile_information']).strip())
        self.storage = None

    # -- public API ------------------------------------------------------------------------

    def add_topic(self, name: str, msgtype: str, qos: Sequence[QosSpec] = ()) -> int:
        """Register a topic; returns the handle for :meth:`write`.

        Raises BagError for an unknown message type or a topic added twice.
        """
        self._check_open()
        if any(t.name == name for t in self.topics):
            raise BagError(f'topic {name} is already in the bag {self.path}')
        msgdef, digest = self.types.definition(msgtype)
        t = TopicRecord(name, msgtype, msgdef, digest, [q.to_rosbags() for q in qos])
        self.topics.append(t)
        self._register(t)
        self._write_sidecar()
        return len(self.topics) - 1

    def write(self, handle: int, timestamp_ns: int, data: bytes | memoryview) -> None:
        """Write one serialized message (raw CDR) with the bag timestamp (receive time, ns)."""
        self._check_open()
        t = self.topics[handle]
        if self._split_due(timestamp_ns):
            self._close_file()
            self._open_file()
        assert self.storage is not None
        payload = data
        if self.options.compression == 'zstd' and self.options.storage == 'sqlite3':
            payload = self._compressor.compress(bytes(data))
        assert t.conn is not None
        self.storage.write(t.conn, timestamp_ns, payload)
        t.count += 1
        f = self.files[-1]
        f.count += 1
        f.start = min(f.start, timestamp_ns)
        f.end = max(f.end, timestamp_ns)
        self.bytes_in += len(data)
        now = time.monotonic()
        if now - self._last_flush >= self.options.flush_period_s:
            self.flush()

    def update_custom(self, values: Mapping[str, str]) -> None:
        """Add or change ``custom_data`` entries, now also in the side-car (a kill keeps them)."""
        self._check_open()
        self.custom.update({str(k): str(v) for k, v in values.items()})
        self._write_sidecar()

    def flush(self) -> None:
        """Make everything written so far survive a crash of this process."""
        if self.storage is not None:
            self.storage.flush()
        self._last_flush = time.monotonic()

    def flush_due(self) -> bool:
        """Whether a flush period has passed since the last flush."""
        return time.monotonic() - self._last_flush >= self.options.flush_period_s

    @property
    def message_count(self) -> int:
        """Messages written so far."""
        return sum(t.count for t in self.topics)

    def close(self) -> None:
        """Finish the storage file and write ``metadata.yaml``; idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.storage is not None:
            self._close_file()
        write_atomic(self.path / METADATA, dump_yaml(metadata_dict(
            self.options.storage, self.options.compression, self.topics, self.files,
            self.custom, self.ros_distro)))
        (self.path / SIDE_CAR).unlink(missing_ok=True)

    def _check_open(self) -> None:
        if self.closed:
            raise BagError(f'the bag {self.path} is closed')

    def __enter__(self) -> 'BagWriter':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
