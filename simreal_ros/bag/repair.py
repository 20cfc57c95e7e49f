"""Repair of a bag: rebuild a killed recording's index, salvage a damaged bag's intact chunks.

A bag whose writer was killed (``recording.yaml``, no ``metadata.yaml``) gets its MCAP
summary or sqlite3 counts rebuilt from every complete chunk. A finished MCAP bag that fails
its integrity check (:mod:`simreal_ros.bag.integrity`: a CRC, a broken record, a file cut
short) is salvaged: each damaged file is rewritten from its intact chunks (each one's CRC
checked) and the original is kept beside it as ``<file>.damaged``; the report says what was
lost (chunks, messages, log-time range).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import mmap
from pathlib import Path
import shutil
import sqlite3
import struct
from typing import Any, Callable, Iterator, Mapping
import zlib

from rosbags.interfaces import (
    Connection,
    ConnectionExtRosbag2,
    MessageDefinition,
    MessageDefinitionFormat,
    Qos,
)
from rosbags.rosbag2.enums import CompressionMode
from rosbags.rosbag2.metadata import dump_qos_v9, parse_qos
import yaml
import zstandard

from simreal_ros.bag.integrity import (
    MAX_CHUNK_BYTES,
    OP_DATA_END,
    OP_FOOTER,
    records_tile,
    verify_mcap,
    walk_chunks,
)
from simreal_ros.bag.metadata import (
    FileInfo,
    TopicRecord,
    dump_yaml,
    metadata_dict,
    write_atomic,
)
from simreal_ros.bag.options import BAG_VERSION, MCAP_MAGIC, METADATA, SIDE_CAR
from simreal_ros.bag.reader import BagReader
from simreal_ros.bag.storage import McapFile
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.errors import BagCorruptError, BagError


@dataclass
class RepairReport:
    """What :func:`repair_bag` found and did."""

    path: Path
    files: dict[str, int]
    truncated_bytes: int
    message_count: int
    was_clean: bool
    lost: list[str] = field(default_factory=list)  # one line per damaged file: what was lost
    lost_messages: int = 0
    salvaged: bool = False  # a finished bag rewritten from its intact chunks


def _u16(b: bytes, o: int) -> int:
    return int(struct.unpack_from('<H', b, o)[0])


def _u32(b: bytes | mmap.mmap, o: int) -> int:
    return int(struct.unpack_from('<I', b, o)[0])


def _u64(b: bytes | mmap.mmap, o: int) -> int:
    return int(struct.unpack_from('<Q', b, o)[0])


def _str(b: bytes, o: int) -> tuple[str, int]:
    n = _u32(b, o)
    return b[o + 4:o + 4 + n].decode('utf-8'), o + 4 + n


def _mcap_records(buf: bytes | mmap.mmap, start: int, end: int) -> Iterator[tuple[int, bytes]]:
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
    bad_chunks: list[str] = field(default_factory=list)  # damaged chunks skipped


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
        try:
            record(op, body)
        except (UnicodeDecodeError, struct.error):
            pass  # a damaged schema or channel outside a CRC-checked chunk: left out

    def record(op: int, body: bytes) -> None:
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
            data = _chunk_records(path, body)
            if data is None:  # damaged: its CRC, its compression or its records
                when = f' (log time {_u64(body, 0)}-{_u64(body, 8)} ns)' if n >= 16 else ''
                out.bad_chunks.append(f'chunk at bytes {o}-{o + 9 + n}{when}')
            else:
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


def _chunk_records(path: Path, body: bytes) -> bytes | None:
    """Return a chunk body's records; None when it is damaged (CRC, compression, records)."""
    try:
        comp, p = _str(body, 8 + 8 + 8 + 4)
        clen = _u64(body, p)
        data = body[p + 8:p + 8 + clen]
        size = _u64(body, 16)
        if size > MAX_CHUNK_BYTES:
            return None
        if comp == 'zstd':
            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
        elif comp:
            raise BagError(f'{path}: chunk compression {comp!r} is not supported')
    except (UnicodeDecodeError, struct.error, zstandard.ZstdError, MemoryError):
        return None
    crc = _u32(body, 24)
    if (crc and zlib.crc32(data) != crc) or not records_tile(data):
        return None
    return data


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
        try:
            BagReader(p).close()
        except BagCorruptError:
            return _salvage(p)
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
    topics: dict[str, TopicRecord] = {}
    files: list[FileInfo] = []
    truncated = 0
    per_file: dict[str, int] = {}
    lost: list[str] = []
    for i, name in enumerate(file_names):
        fpath = p / name
        if not fpath.is_file():
            continue
        if i and i == len(file_names) - 1 and _unstarted(fpath, storage):
            fpath.unlink()  # a split opened it, the kill came before its first message
            continue
        info = FileInfo(name)
        if storage == 'mcap':
            count, cut = _repair_mcap(fpath, topics, info, types, side_topics, compression,
                                      lost)
            truncated += cut
        else:
            count = _count_sqlite(fpath, topics, info, side_topics)
        per_file[name] = count
        files.append(info)
    meta = metadata_dict(storage, compression, list(topics.values()), files, custom,
                         str(rec.get('ros_distro', 'unknown')))  # the recording's, not ours
    write_atomic(p / METADATA, dump_yaml(meta))
    side.unlink()
    for leftover in p.glob('.*.init'):
        shutil.rmtree(leftover, ignore_errors=True)
    BagReader(p).close()  # proves it opens
    return RepairReport(p, per_file, truncated, sum(per_file.values()), False, lost)


def _topic_for(topics: dict[str, TopicRecord], name: str, msgtype: str, msgdef: str,
               side_topics: Mapping[str, Any], qos: list[Qos]) -> TopicRecord:
    if name not in topics:
        side = side_topics.get(name, {})
        side_qos = parse_qos(side.get('offered_qos_profiles', [])) if side else []
        topics[name] = TopicRecord(name, msgtype, msgdef,
                                   str(side.get('type_description_hash', '')), qos or side_qos)
    return topics[name]


def _repair_mcap(fpath: Path, topics: dict[str, TopicRecord], info: FileInfo, types: TypeRegistry,
                 side_topics: Mapping[str, Any], compression: str,
                 lost: list[str]) -> tuple[int, int]:
    rewrite = not _mcap_is_complete(fpath)
    found = _scan_mcap(fpath)  # pass 1: channels and counts; pass 2 below streams the messages
    if found.bad_chunks:
        lost.append(f'{fpath.name}: lost {len(found.bad_chunks)} damaged chunk(s): '
                    + ', '.join(found.bad_chunks))
    size = fpath.stat().st_size
    by_channel: dict[int, TopicRecord] = {}
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
    out = McapFile(tmp, mode)
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
        qos_text = dump_yaml([dict(q) for q in dump_qos_v9(list(t.qos))]).strip() if t.qos else ''
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


def _count_sqlite(fpath: Path, topics: dict[str, TopicRecord], info: FileInfo,
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


@dataclass
class _Loss:
    """What one damaged file lost."""

    name: str
    chunks: list[str]            # 'chunk N (log time a-b ns)'
    skipped_bytes: int
    cut: bool                    # no valid end (truncated)
    cut_after_ns: int            # log time where the intact part of a cut file ends
    expected: int                # messages metadata.yaml lists for the file (-1: unknown)


def _salvage(p: Path) -> RepairReport:
    """Rewrite each damaged MCAP file of a finished bag from its intact chunks."""
    try:
        info = yaml.safe_load((p / METADATA).read_text(encoding='utf-8'))
        info = info['rosbag2_bagfile_information']
        storage = str(info['storage_identifier'])
        names = [str(n) for n in info['relative_file_paths']]
        topics = [{'name': t['topic_metadata']['name'], 'type': t['topic_metadata']['type'],
                   'type_description_hash':
                       t['topic_metadata'].get('type_description_hash', ''),
                   'offered_qos_profiles':
                       t['topic_metadata'].get('offered_qos_profiles') or []}
                  for t in info.get('topics_with_message_count') or []]
        expected = {str(f.get('path')): int(f.get('message_count', -1))
                    for f in info.get('files') or [] if isinstance(f, dict)}
    except Exception as exc:  # noqa: BLE001 - a damaged metadata.yaml, any shape
        raise BagCorruptError(f'{p / METADATA} is damaged ({type(exc).__name__}); simreal '
                              f'cannot salvage a bag without it') from None
    if storage != 'mcap':
        raise BagCorruptError(f'{p}: a damaged {storage} bag cannot be salvaged (only MCAP '
                              f'files carry the chunk CRCs salvage needs)')
    compression = 'none'
    losses: list[_Loss] = []
    for name in names:
        fpath = p / name
        if not fpath.is_file():
            continue
        try:
            verify_mcap(fpath, p)
            continue
        except BagCorruptError:
            pass
        loss, comp = _salvage_file(fpath, expected.get(name, -1))
        losses.append(loss)
        compression = 'zstd' if comp == 'zstd' else compression
    # the bag becomes a killed recording whose files have no summary: the repair below
    # rebuilds each salvaged file's index and metadata.yaml from what is in the files
    write_atomic(p / SIDE_CAR, dump_yaml({'simreal_recording': {
        'storage': storage, 'compression': compression, 'files': names, 'topics': topics,
        'custom_data': info.get('custom_data') or {},
        'ros_distro': str(info.get('ros_distro') or 'unknown')}}))
    (p / METADATA).unlink()
    r = repair_bag(p)
    r.was_clean = False
    r.salvaged = True
    r.lost = []
    for loss in losses:
        got = r.files.get(loss.name, 0)
        lost_n = loss.expected - got if loss.expected >= 0 else -1
        r.lost_messages += max(lost_n, 0)
        what = [f'{len(loss.chunks)} chunk(s): ' + ', '.join(loss.chunks)] if loss.chunks \
            else []
        if loss.skipped_bytes:
            what.append(f'{loss.skipped_bytes} damaged bytes outside the chunks')
        if loss.cut:
            what.append(f'everything after log time {loss.cut_after_ns} ns (the file is cut '
                        f'short)')
        count = (f'{lost_n} of {loss.expected} messages lost' if lost_n >= 0
                 else 'the number of messages lost is unknown')
        r.lost.append(f'{loss.name}: {count}; lost {"; ".join(what) or "nothing readable"}; '
                      f'the damaged original is kept as {loss.name}.damaged')
    return r


def _salvage_file(fpath: Path, expected: int) -> tuple[_Loss, str]:
    """Replace ``fpath`` by its header and intact chunks (no summary); keep it as .damaged."""
    loss = _Loss(fpath.name, [], 0, False, 0, expected)
    comp = ''
    tmp = fpath.with_name(fpath.name + '.salvage')
    with fpath.open('rb') as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        size = len(buf)
        if size < len(MCAP_MAGIC) or buf[:len(MCAP_MAGIC)] != MCAP_MAGIC:
            raise BagCorruptError(f'{fpath} does not start with the MCAP magic; nothing in it '
                                  f'can be salvaged')
        w = walk_chunks(buf, size)
        loss.cut = w.end >= size or buf[w.end] not in (OP_DATA_END, OP_FOOTER)
        loss.skipped_bytes = sum(b - a for a, b in w.skipped)
        with tmp.open('wb') as out:
            out.write(MCAP_MAGIC)
            # header, schemas and channels outside the chunks; rosbags writes schemas and
            # channels into the first chunk only, so those of an intact summary are added
            # too (a damaged first chunk would otherwise leave every message without one)
            for op, body in w.records + _summary_records(buf):
                if op in (0x01, 0x03, 0x04):
                    out.write(bytes([op]) + struct.pack('<Q', len(body)) + body)
            for c in w.chunks:
                if c.problem:
                    loss.chunks.append(f'chunk {c.number} ({c.time_range()}, {c.problem})')
                    continue
                comp = comp or c.compression
                loss.cut_after_ns = max(loss.cut_after_ns, c.end_ns)
                out.write(buf[c.offset:c.end])
    fpath.replace(fpath.with_name(fpath.name + '.damaged'))
    tmp.replace(fpath)
    return loss, comp


def _summary_records(buf: mmap.mmap) -> list[tuple[int, bytes]]:
    """Return the (opcode, body) records of the summary when the footer is intact."""
    size = len(buf)
    footer = size - len(MCAP_MAGIC) - 29
    if footer < len(MCAP_MAGIC) or buf[size - len(MCAP_MAGIC):] != MCAP_MAGIC or \
            buf[footer] != OP_FOOTER:
        return []
    start = _u64(buf, footer + 9)
    crc = _u32(buf, footer + 25)
    if not start or start > footer or (crc and zlib.crc32(buf[start:footer + 25]) != crc):
        return []
    return [(op, bytes(body)) for op, body in _mcap_records(buf, start, footer)]
