"""rosbag2 bags through ``rosbags``: a crash-safe, splitting writer, a reader and repair.

The writer stores raw CDR bytes (nothing is deserialized on the recording path) in rosbag2
format version 9, MCAP by default or sqlite3 on request, optionally zstd-compressed (MCAP:
compressed chunks; sqlite3: compressed messages), split by size or duration into
``<bag>_0.mcap``, ``<bag>_1.mcap``, ... It never overwrites an existing path.

Crash safety: :meth:`BagWriter.flush` (called at least every ``flush_period_s``) closes the
pending MCAP chunk, or commits the sqlite3 transaction, and hands the bytes to the operating
system, so a SIGKILL loses at most one flush period. While a bag is open its directory holds
``recording.yaml`` (settings, topics, ``custom_data``); a bag killed before :meth:`close`
has no ``metadata.yaml`` and is made readable again by :func:`repair_bag` (``simreal bag
repair``), which rebuilds the MCAP summary or the sqlite3 counts and writes the metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import mmap
import os
from pathlib import Path
import re
import shutil
import sqlite3
import struct
import time
from typing import Any, Callable, Iterator, Mapping, Sequence, cast

from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
    Nodetype,
    Qos,
    QosDurability,
    QosHistory,
    QosLiveliness,
    QosReliability,
    QosTime,
)
from rosbags.rosbag2 import Reader
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.metadata import dump_qos_v9, parse_qos
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.rosbag2.storage_sqlite3 import Sqlite3Writer
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore
import yaml
import zstandard

from simreal_ros.errors import BagError, ConfigError

STORAGES = ('mcap', 'sqlite3')
COMPRESSIONS = ('none', 'zstd')
SIDE_CAR = 'recording.yaml'
#: seconds between fsync calls of an MCAP file being written
FSYNC_PERIOD_S = 1.0
METADATA = 'metadata.yaml'
BAG_VERSION = 9
MCAP_MAGIC = b'\x89MCAP0\r\n'


# ---------------------------------------------------------------------------------------------
# options and QoS


@dataclass(frozen=True)
class BagOptions:
    """How a bag is written; validated on construction (bad values raise ConfigError)."""

    storage: str = 'mcap'
    compression: str = 'none'
    split_size_mb: float = 0.0
    split_duration_s: float = 0.0
    flush_period_s: float = 0.05
    source: str = 'bag options'

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise ConfigError(self.source, 'storage', f'one of {list(STORAGES)}', self.storage)
        if self.compression not in COMPRESSIONS:
            raise ConfigError(self.source, 'compression', f'one of {list(COMPRESSIONS)}',
                              self.compression)
        for key in ('split_size_mb', 'split_duration_s'):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 \
                    or v == float('inf'):
                raise ConfigError(self.source, key, 'a finite number >= 0 (0 = no split)', v)
        if 0 < self.split_size_mb < 1:
            raise ConfigError(self.source, 'split_size_mb',
                              'at least 1 MB (or 0 for no split by size)', self.split_size_mb)
        if 0 < self.split_duration_s < 1:
            raise ConfigError(self.source, 'split_duration_s',
                              'at least 1 s (or 0 for no split by duration)',
                              self.split_duration_s)
        f = self.flush_period_s
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise ConfigError(self.source, 'flush_period_s', 'a period in (0, 1] seconds', f)

    @property
    def suffix(self) -> str:
        """File suffix of the storage files."""
        return '.mcap' if self.storage == 'mcap' else '.db3'


@dataclass(frozen=True)
class QosSpec:
    """The QoS a publisher offers, as recorded in the bag (ROS-free form)."""

    reliability: str = 'reliable'          # reliable | best_effort
    durability: str = 'volatile'           # volatile | transient_local
    history: str = 'keep_last'             # keep_last | keep_all
    depth: int = 10

    def to_rosbags(self) -> Qos:
        """Return the rosbags Qos of this profile."""
        zero = QosTime(0, 0)
        return Qos(QosHistory[self.history.upper()], int(self.depth),
                   QosReliability[self.reliability.upper()],
                   QosDurability[self.durability.upper()], zero, zero,
                   QosLiveliness.AUTOMATIC, zero, False)

    @classmethod
    def from_rosbags(cls, q: Qos) -> 'QosSpec':
        """Return the spec of a rosbags Qos (unknown values map to the defaults)."""
        rel = q.reliability.name.lower()
        dur = q.durability.name.lower()
        hist = q.history.name.lower()
        return cls(rel if rel in ('reliable', 'best_effort') else 'reliable',
                   dur if dur in ('volatile', 'transient_local') else 'volatile',
                   hist if hist in ('keep_last', 'keep_all') else 'keep_last', int(q.depth))


# ---------------------------------------------------------------------------------------------
# message types


class TypeRegistry:
    """Message definitions and type hashes for any ROS 2 type.

    Types known to rosbags' Kilted store are used directly; others are read from the ``.msg``
    (or ``.idl``) files of the installed ROS packages (``AMENT_PREFIX_PATH``).
    """

    def __init__(self) -> None:
        self.store: Typestore = get_typestore(Stores.ROS2_KILTED)

    def _share_dirs(self) -> list[Path]:
        prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
        return [Path(p) / 'share' for p in prefixes]

    def _register_from_share(self, msgtype: str, depth: int = 0) -> None:
        if depth > 32:
            raise BagError(f'message type {msgtype!r}: definitions nest too deeply')
        pkg, _, name = msgtype.partition('/msg/')
        for share in self._share_dirs():
            msg_file = share / pkg / 'msg' / f'{name}.msg'
            idl_file = share / pkg / 'msg' / f'{name}.idl'
            if msg_file.is_file():
                types = get_types_from_msg(msg_file.read_text(encoding='utf-8'), msgtype)
            elif idl_file.is_file():
                types = get_types_from_idl(idl_file.read_text(encoding='utf-8'))
            else:
                continue
            self.store.register(types)
            for _, fields in types.values():
                for _fname, ftype in cast('list[tuple[str, Any]]', fields):
                    for dep in _nested_type_names(ftype):
                        if dep not in self.store.fielddefs:
                            self._register_from_share(dep, depth + 1)
            return
        raise BagError(f'unknown message type {msgtype!r}: it is neither a standard ROS 2 '
                       f'type nor found as <prefix>/share/{pkg}/msg/{name}.msg under '
                       f'AMENT_PREFIX_PATH; source the workspace that defines it')

    def ensure(self, msgtype: str) -> None:
        """Make ``msgtype`` (``pkg/msg/Name``) known; BagError naming it when impossible."""
        if not re.fullmatch(r'[A-Za-z_][\w]*/msg/[A-Za-z_]\w*', msgtype):
            raise BagError(f'message type {msgtype!r} is not of the form pkg/msg/Name')
        if msgtype not in self.store.fielddefs:
            self._register_from_share(msgtype)

    def definition(self, msgtype: str) -> tuple[str, str]:
        """Return (concatenated .msg definition, RIHS01 hash) of ``msgtype``."""
        self.ensure(msgtype)
        msgdef, _ = self.store.generate_msgdef(msgtype, ros_version=2)
        return msgdef, self.store.hash_rihs01(msgtype)

    def deserialize(self, data: bytes | memoryview, msgtype: str) -> Any:
        """Deserialize CDR bytes of ``msgtype`` into a rosbags message object."""
        self.ensure(msgtype)
        return self.store.deserialize_cdr(data, msgtype)

    def serialize(self, msg: Any, msgtype: str) -> bytes:
        """Serialize a rosbags message object to CDR bytes."""
        self.ensure(msgtype)
        return bytes(self.store.serialize_cdr(msg, msgtype))


def _nested_type_names(ftype: Any) -> list[str]:
    """Names of message types referenced by a rosbags field definition."""
    kind, payload = ftype
    if kind == Nodetype.NAME:
        return [str(payload)]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _nested_type_names(payload[0])
    return []


# ---------------------------------------------------------------------------------------------
# storage plugins with an explicit file name and a flush


class _McapFile(McapWriter):
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


class _SqliteFile(Sqlite3Writer):
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


# ---------------------------------------------------------------------------------------------
# metadata


@dataclass
class _FileInfo:
    path: str
    start: int = 2**63 - 1
    end: int = 0
    count: int = 0


@dataclass
class _Topic:
    name: str
    msgtype: str
    msgdef: str
    digest: str
    qos: list[Qos]
    count: int = 0
    conn: Connection | None = None


def _metadata(storage: str, compression: str, topics: Sequence[_Topic],
              files: Sequence[_FileInfo], custom: Mapping[str, str]) -> dict[str, Any]:
    start = min((f.start for f in files if f.count), default=0)
    end = max((f.end for f in files if f.count), default=0)
    count = sum(f.count for f in files)
    message_compressed = compression == 'zstd' and storage == 'sqlite3'
    return {'rosbag2_bagfile_information': {
        'version': BAG_VERSION,
        'storage_identifier': storage,
        'relative_file_paths': [f.path for f in files],
        'duration': {'nanoseconds': max(0, end - start)},
        'starting_time': {'nanoseconds_since_epoch': start},
        'message_count': count,
        'topics_with_message_count': [
            {'topic_metadata': {'name': t.name, 'type': t.msgtype,
                                'serialization_format': 'cdr',
                                'offered_qos_profiles': [dict(q) for q in dump_qos_v9(t.qos)],
                                'type_description_hash': t.digest},
             'message_count': t.count} for t in topics],
        'compression_format': 'zstd' if message_compressed else '',
        'compression_mode': 'message' if message_compressed else '',
        'files': [{'path': f.path,
                   'starting_time': {'nanoseconds_since_epoch': f.start if f.count else 0},
                   'duration': {'nanoseconds': max(0, f.end - f.start) if f.count else 0},
                   'message_count': f.count} for f in files],
        'custom_data': dict(custom) or None,
        'ros_distro': 'kilted',
    }}


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(text, encoding='utf-8')
    tmp.replace(path)


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


# ---------------------------------------------------------------------------------------------
# the writer


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
        self.topics: list[_Topic] = []
        self.files: list[_FileInfo] = []
        self.storage: _McapFile | _SqliteFile | None = None
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
        self.files.append(_FileInfo(name))
        self._write_sidecar()
        try:
            self.storage = (_McapFile(file_path, mode) if self.options.storage == 'mcap'
                            else _SqliteFile(file_path, mode))
        except BaseException:
            self.files.pop()
            self._write_sidecar()
            raise
        for t in self.topics:
            self._register(t)

    def _connection(self, index: int, t: _Topic) -> Connection:
        fmt = (MessageDefinitionFormat.IDL if t.msgdef.startswith('=' * 80 + '\nIDL: ')
               else MessageDefinitionFormat.MSG)
        return Connection(id=index + 1, topic=t.name, msgtype=t.msgtype,
                          msgdef=MessageDefinition(fmt, t.msgdef), digest=t.digest, msgcount=0,
                          ext=ConnectionExtRosbag2('cdr', list(t.qos)), owner=None)

    def _register(self, t: _Topic) -> None:
        assert self.storage is not None
        index = self.topics.index(t)
        conn = self._connection(index, t)
        if not any(x.msgtype == t.msgtype for x in self.topics[:index]):
            self.storage.add_msgtype(conn)
        qos_text = _dump([dict(q) for q in dump_qos_v9(list(t.qos))]).strip() if t.qos else ''
        self.storage.add_connection(conn, qos_text)
        t.conn = conn

    def _write_sidecar(self) -> None:
        _write_atomic(self.path / SIDE_CAR, _dump({
            'simreal_recording': {
                'storage': self.options.storage, 'compression': self.options.compression,
                'files': [f.path for f in self.files],
                'topics': [{'name': t.name, 'type': t.msgtype, 'type_description_hash':
                            t.digest, 'offered_qos_profiles':
                            [dict(q) for q in dump_qos_v9(t.qos)]} for t in self.topics],
                'custom_data': self.custom,
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
        meta = _metadata(self.options.storage, self.options.compression, self.topics,
                         self.files, self.custom)
        self.storage.close(BAG_VERSION, _dump(meta['rosbag2_bagfile_information']).strip())
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
        t = _Topic(name, msgtype, msgdef, digest, [q.to_rosbags() for q in qos])
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
        _write_atomic(self.path / METADATA, _dump(_metadata(
            self.options.storage, self.options.compression, self.topics, self.files,
            self.custom)))
        (self.path / SIDE_CAR).unlink(missing_ok=True)

    def _check_open(self) -> None:
        if self.closed:
            raise BagError(f'the bag {self.path} is closed')

    def __enter__(self) -> 'BagWriter':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# reading


@dataclass(frozen=True)
class BagMessage:
    """One message read back: topic, type, bag timestamp (receive ns), raw CDR bytes."""

    topic: str
    msgtype: str
    timestamp: int
    data: bytes


@dataclass
class BagInfo:
    """Summary of a bag: per-topic counts and types, time range, custom_data."""

    path: Path
    storage: str
    topics: dict[str, tuple[str, int]]
    qos: dict[str, list[QosSpec]]
    start_ns: int
    end_ns: int
    message_count: int
    custom_data: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def check_bag_path(path: str | Path) -> Path:
    """Return the bag directory, or BagError saying what is wrong and how to fix it."""
    p = Path(path).expanduser()
    if not p.exists():
        raise BagError(f'no bag at {p}: the path does not exist')
    if p.is_file():
        if p.suffix in ('.mcap', '.db3') and (p.parent / METADATA).is_file():
            return p.parent
        raise BagError(f'{p} is a file; give the bag directory (the one with metadata.yaml)')
    if not (p / METADATA).is_file():
        if (p / SIDE_CAR).is_file():
            raise BagError(f'{p} was not closed cleanly (the recorder was killed); run '
                           f'`simreal bag repair {p}` to make it readable')
        raise BagError(f'{p} is not a rosbag2 bag: it has no metadata.yaml')
    return p


class BagReader:
    """Read a rosbag2 bag with rosbags (any storage, split files, zstd)."""

    def __init__(self, path: str | Path) -> None:
        self.path = check_bag_path(path)
        self.reader = Reader(self.path)
        try:
            self.reader.open()
        except Exception as exc:  # noqa: BLE001 - rosbags raises several kinds
            raise BagError(f'cannot read the bag {self.path}: {exc}') from None
        self.types = TypeRegistry()
        meta = yaml.safe_load((self.path / METADATA).read_text(encoding='utf-8'))
        info = meta['rosbag2_bagfile_information']
        topics: dict[str, tuple[str, int]] = {}
        qos: dict[str, list[QosSpec]] = {}
        for c in self.reader.connections:
            n = topics.get(c.topic, (c.msgtype, 0))[1]
            topics[c.topic] = (c.msgtype, n + c.msgcount)
            ext = cast('ConnectionExtRosbag2', c.ext)
            qos[c.topic] = [QosSpec.from_rosbags(q) for q in ext.offered_qos_profiles]
        self.info = BagInfo(self.path, str(info['storage_identifier']), topics, qos,
                            self.reader.start_time if self.reader.message_count else 0,
                            self.reader.end_time if self.reader.message_count else 0,
                            self.reader.message_count,
                            {str(k): str(v) for k, v in (info.get('custom_data') or {}).items()},
                            list(info.get('relative_file_paths', [])))

    def messages(self, topics: Sequence[str] | None = None) -> Iterator[BagMessage]:
        """Yield messages in timestamp order, optionally only of ``topics``."""
        conns = [c for c in self.reader.connections if topics is None or c.topic in topics]
        if topics is not None:
            unknown = sorted(set(topics) - {c.topic for c in self.reader.connections})
            if unknown:
                raise BagError(f'the bag {self.path} has no topic {unknown[0]}; it has '
                               f'{sorted(self.info.topics)}')
        for conn, ts, data in self.reader.messages(connections=conns):
            yield BagMessage(conn.topic, conn.msgtype, int(ts), bytes(data))

    def deserialize(self, m: BagMessage) -> Any:
        """Deserialize a message read from this bag."""
        return self.types.deserialize(m.data, m.msgtype)

    def close(self) -> None:
        """Close the files."""
        self.reader.close()

    def __enter__(self) -> 'BagReader':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# repair


@dataclass
class RepairReport:
    """What :func:`repair_bag` found and did."""

    path: Path
    files: dict[str, int]
    truncated_bytes: int
    message_count: int
    was_clean: bool


def _u16(b: bytes, o: int) -> int:
    return int(struct.unpack_from('<H', b, o)[0])


def _u32(b: bytes, o: int) -> int:
    return int(struct.unpack_from('<I', b, o)[0])


def _u64(b: bytes | mmap.mmap, o: int) -> int:
    return int(struct.unpack_from('<Q', b, o)[0])


def _str(b: bytes, o: int) -> tuple[str, int]:
    n = _u32(b, o)
    return b[o + 4:o + 4 + n].decode('utf-8'), o + 4 + n


def _mcap_records(buf: bytes, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """Complete (opcode, body) records of ``buf[start:end]``; stops at a truncated one."""
    o = start
    while o + 9 <= end:
        op = buf[o]
        n = _u64(buf, o + 1)
        if o + 9 + n > end:
            return
        yield op, buf[o + 9:o + 9 + n]
        o += 9 + n


@dataclass
class _Recovered:
    schemas: dict[int, tuple[str, str, str]] = field(default_factory=dict)   # id: name,enc,data
    channels: dict[int, tuple[str, int, str, bytes]] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)        # channel: messages
    first_ns: dict[int, int] = field(default_factory=dict)      # channel: earliest log time
    last_ns: dict[int, int] = field(default_factory=dict)       # channel: latest log time
    valid_end: int = 0


MessageSink = Callable[[int, int, bytes], None]


def _scan_mcap(path: Path, sink: MessageSink | None = None) -> _Recovered:
    """Read every complete record of an MCAP file, memory-mapped (a file of any size).

    Schemas, channels and per-channel counts are collected; each message also goes to
    ``sink(channel, log_time, data)`` when given, in file order.
    """
    if path.stat().st_size < len(MCAP_MAGIC):
        raise BagError(f'{path} is not an MCAP file (too short); it cannot be repaired')
    with path.open('rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _scan_mcap_buffer(path, buf, sink)


def _scan_mcap_buffer(path: Path, buf: mmap.mmap, sink: MessageSink | None) -> _Recovered:
    out = _Recovered()
    if buf[:len(MCAP_MAGIC)] != MCAP_MAGIC:
        raise BagError(f'{path} is not an MCAP file (bad magic); it cannot be repaired')
    o = len(MCAP_MAGIC)
    end = len(buf)

    def inner(op: int, body: bytes) -> None:
        if op == 0x03:
            sid = _u16(body, 0)
            name, p = _str(body, 2)
            enc, p = _str(body, p)
            n = _u32(body, p)
            out.schemas[sid] = (name, enc, body[p + 4:p + 4 + n].decode('utf-8'))
        elif op == 0x04:
            cid = _u16(body, 0)
            sid = _u16(body, 2)
            topic, p = _str(body, 4)
            enc, p = _str(body, p)
            n = _u32(body, p)
            out.channels[cid] = (topic, sid, enc, body[p + 4:p + 4 + n])
        elif op == 0x05:
            cid, ts = _u16(body, 0), _u64(body, 6)
            out.counts[cid] = out.counts.get(cid, 0) + 1
            out.first_ns[cid] = min(out.first_ns.get(cid, ts), ts)
            out.last_ns[cid] = max(out.last_ns.get(cid, ts), ts)
            if sink is not None:
                sink(cid, ts, body[22:])

    while o + 9 <= end:
        op = buf[o]
        n = _u64(buf, o + 1)
        if o + 9 + n > end:
            break
        body = buf[o + 9:o + 9 + n]
        if op == 0x06:
            p = 8 + 8 + 8 + 4
            comp, p = _str(body, p)
            clen = _u64(body, p)
            data = body[p + 8:p + 8 + clen]
            if comp == 'zstd':
                try:
                    data = zstandard.ZstdDecompressor().decompress(data,
                                                                   max_output_size=_u64(body, 16))
                except zstandard.ZstdError:
                    break
            elif comp:
                raise BagError(f'{path}: chunk compression {comp!r} is not supported')
            for iop, ibody in _mcap_records(data, 0, len(data)):
                inner(iop, ibody)
        elif op in (0x03, 0x04, 0x05):
            inner(op, body)
        elif op == 0x02:  # footer: the file is complete
            out.valid_end = o + 9 + n
            break
        o += 9 + n
        out.valid_end = o
    return out


def _mcap_is_complete(path: Path) -> bool:
    size = path.stat().st_size
    if size < 2 * len(MCAP_MAGIC) + 29:
        return False
    with path.open('rb') as f:
        f.seek(size - len(MCAP_MAGIC) - 29)
        tail = f.read()
    return tail[0] == 0x02 and tail.endswith(MCAP_MAGIC)


def _parse_qos_text(text: bytes) -> list[Qos]:
    try:
        data = yaml.safe_load(text.decode('utf-8')) if text else []
    except yaml.YAMLError:
        return []
    return parse_qos(data) if isinstance(data, list) else []


def _channel_qos(meta: bytes) -> list[Qos]:
    """QoS from the content of an MCAP channel's metadata map."""
    o = 0
    while o + 8 <= len(meta):
        key, o = _str(meta, o)
        val_len = _u32(meta, o)
        val = meta[o + 4:o + 4 + val_len]
        o += 4 + val_len
        if key == 'offered_qos_profiles':
            return _parse_qos_text(val)
    return []


def repair_bag(path: str | Path) -> RepairReport:
    """Make a bag whose recorder died readable: rebuild the storage index and metadata.yaml.

    MCAP files without a footer are rewritten from every complete chunk (what was flushed);
    sqlite3 files are opened (sqlite rolls back the transaction that was open) and counted.
    ``custom_data`` and QoS come from ``recording.yaml``. A bag that is already complete is
    left untouched.
    """
    p = Path(path).expanduser()
    if not p.is_dir():
        raise BagError(f'no bag directory at {p}')
    side = p / SIDE_CAR
    if (p / METADATA).is_file() and not side.is_file():
        BagReader(p).close()
        return RepairReport(p, {}, 0, 0, True)
    if not side.is_file():
        raise BagError(f'{p} has neither metadata.yaml nor {SIDE_CAR}; it is not a bag '
                       f'simreal can repair')
    rec = (yaml.safe_load(side.read_text(encoding='utf-8')) or {}).get('simreal_recording', {})
    storage = str(rec.get('storage', 'mcap'))
    compression = str(rec.get('compression', 'none'))
    custom = {str(k): str(v) for k, v in (rec.get('custom_data') or {}).items()}
    side_topics = {t['name']: t for t in rec.get('topics', [])}
    file_names = [str(f) for f in rec.get('files', [])]
    types = TypeRegistry()
    topics: dict[str, _Topic] = {}
    files: list[_FileInfo] = []
    truncated = 0
    per_file: dict[str, int] = {}
    for i, name in enumerate(file_names):
        fpath = p / name
        if not fpath.is_file():
            continue
        if i and i == len(file_names) - 1 and _unstarted(fpath, storage):
            fpath.unlink()  # a split opened it, the kill came before its first message
            continue
        info = _FileInfo(name)
        if storage == 'mcap':
            count, cut = _repair_mcap(fpath, topics, info, types, side_topics, compression)
            truncated += cut
        else:
            count = _count_sqlite(fpath, topics, info, side_topics)
        per_file[name] = count
        files.append(info)
    _write_atomic(p / METADATA, _dump(_metadata(storage, compression, list(topics.values()),
                                                files, custom)))
    side.unlink()
    for leftover in p.glob('.*.init'):
        shutil.rmtree(leftover, ignore_errors=True)
    BagReader(p).close()  # proves it opens
    return RepairReport(p, per_file, truncated, sum(per_file.values()), False)


def _topic_for(topics: dict[str, _Topic], name: str, msgtype: str, msgdef: str,
               side_topics: Mapping[str, Any], qos: list[Qos]) -> _Topic:
    if name not in topics:
        side = side_topics.get(name, {})
        side_qos = parse_qos(side.get('offered_qos_profiles', [])) if side else []
        topics[name] = _Topic(name, msgtype, msgdef, str(side.get('type_description_hash', '')),
                              qos or side_qos)
    return topics[name]


def _repair_mcap(fpath: Path, topics: dict[str, _Topic], info: _FileInfo, types: TypeRegistry,
                 side_topics: Mapping[str, Any], compression: str) -> tuple[int, int]:
    rewrite = not _mcap_is_complete(fpath)
    found = _scan_mcap(fpath)  # pass 1: channels and counts; pass 2 below streams the messages
    size = fpath.stat().st_size
    by_channel: dict[int, _Topic] = {}
    for cid, (topic, sid, _enc, meta) in found.channels.items():
        name, _e, text = found.schemas.get(sid, ('', '', ''))
        if not name:
            continue
        by_channel[cid] = _topic_for(topics, topic, name, text, side_topics, _channel_qos(meta))
    for cid, n in found.counts.items():
        t = by_channel.get(cid)
        if t is None:
            continue
        t.count += n
        info.count += n
        info.start = min(info.start, found.first_ns[cid])
        info.end = max(info.end, found.last_ns[cid])
    if not rewrite:
        return info.count, 0
    tmp = fpath.with_name(fpath.name + '.repair')
    tmp.unlink(missing_ok=True)
    mode = CompressionMode.STORAGE if compression == 'zstd' else CompressionMode.NONE
    out = _McapFile(tmp, mode)
    conns: dict[int, Connection] = {}
    done_types: set[str] = set()
    for cid, t in sorted(by_channel.items()):
        if not t.digest:
            try:
                t.digest = types.definition(t.msgtype)[1]
            except BagError:
                t.digest = ''
        fmt = (MessageDefinitionFormat.IDL if t.msgdef.startswith('=' * 80 + '\nIDL: ')
               else MessageDefinitionFormat.MSG)
        conn = Connection(cid, t.name, t.msgtype, MessageDefinition(fmt, t.msgdef), t.digest, 0,
                          ConnectionExtRosbag2('cdr', list(t.qos)), None)
        if t.msgtype not in done_types:
            out.add_msgtype(conn)
            done_types.add(t.msgtype)
        qos_text = _dump([dict(q) for q in dump_qos_v9(list(t.qos))]).strip() if t.qos else ''
        out.add_connection(conn, qos_text)
        conns[cid] = conn

    def write(cid: int, ts: int, data: bytes) -> None:
        if cid in conns:
            out.write(conns[cid], ts, data)

    _scan_mcap(fpath, write)
    out.close(BAG_VERSION, '')
    tmp.replace(fpath)
    return info.count, size - found.valid_end


class _FirstMessage(Exception):
    pass


def _mcap_has_message(fpath: Path) -> bool:
    """Whether an MCAP file holds a complete message (stops reading at the first)."""
    def stop(_cid: int, _ts: int, _data: bytes) -> None:
        raise _FirstMessage
    try:
        _scan_mcap(fpath, stop)
    except _FirstMessage:
        return True
    return False


def _unstarted(fpath: Path, storage: str) -> bool:
    """Whether a storage file holds no message at all (empty, header only, no schema)."""
    if fpath.stat().st_size == 0:
        return True
    if storage == 'mcap':
        return not _mcap_has_message(fpath)
    try:
        conn = sqlite3.connect(f'file:{fpath}', uri=True)
        try:
            return not conn.execute('SELECT 1 FROM messages LIMIT 1').fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False  # damaged, not empty: _count_sqlite names the damage


def _count_sqlite(fpath: Path, topics: dict[str, _Topic], info: _FileInfo,
                  side_topics: Mapping[str, Any]) -> int:
    try:
        conn = sqlite3.connect(f'file:{fpath}', uri=True)
        try:
            defs = {row[0]: row[1] for row in conn.execute(
                'SELECT topic_type, encoded_message_definition FROM message_definitions')}
            rows = conn.execute('SELECT t.name, t.type, t.offered_qos_profiles, '
                                'COUNT(m.id), MIN(m.timestamp), MAX(m.timestamp) FROM topics t '
                                'LEFT JOIN messages m ON m.topic_id = t.id GROUP BY t.id '
                                'ORDER BY t.id').fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise BagError(f'{fpath}: the sqlite3 file is damaged ({exc})') from None
    for name, msgtype, qos_text, count, lo, hi in rows:
        t = _topic_for(topics, name, msgtype, defs.get(msgtype, ''), side_topics,
                       _parse_qos_text(str(qos_text or '').encode()))
        t.count += int(count)
        info.count += int(count)
        if count:
            info.start = min(info.start, int(lo))
            info.end = max(info.end, int(hi))
    return info.count
