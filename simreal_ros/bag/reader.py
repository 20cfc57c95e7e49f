"""Reading a rosbag2 bag (any storage rosbags reads): info, topics, QoS and raw messages.

Every MCAP file of the bag is verified when the bag is opened (:mod:`simreal_ros.bag.integrity`:
its CRCs, one ``zlib.crc32`` pass over the file); a damaged bag, and any error of rosbags while
reading or deserializing (a damaged sqlite3 file, a bag written without CRCs), is one
:class:`~simreal_ros.errors.BagCorruptError` line naming the file and what to run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence, cast

from rosbags.interfaces import ConnectionExtRosbag2
from rosbags.rosbag2 import Reader
import yaml

from simreal_ros.bag.integrity import verify_mcap
from simreal_ros.bag.options import METADATA, SIDE_CAR, QosSpec
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.errors import BagCorruptError, BagError, SimrealError


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
    ros_distro: str = 'unknown'  # of the recording; any distribution reads any bag


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
            raise BagCorruptError(f'{p} was not closed cleanly (the recorder was killed); run '
                           f'`simreal bag repair {p}` to make it readable')
        raise BagError(f'{p} is not a rosbag2 bag: it has no metadata.yaml')
    return p


class BagReader:
    """Read a rosbag2 bag with rosbags (any storage, split files, zstd)."""

    def __init__(self, path: str | Path) -> None:
        self.path = check_bag_path(path)
        try:
            meta = yaml.safe_load((self.path / METADATA).read_text(encoding='utf-8'))
            info = meta['rosbag2_bagfile_information']
            names = [str(n) for n in info.get('relative_file_paths', [])]
        except Exception as exc:  # noqa: BLE001 - YAML, encoding, a wrong shape
            raise BagCorruptError(f'{self.path / METADATA} is damaged ({_reason(exc)}); run '
                                  f'`simreal bag repair {self.path}`') from None
        for name in names:
            if name.endswith('.mcap') and (self.path / name).is_file():
                verify_mcap(self.path / name, self.path)
        self.reader = Reader(self.path)
        try:
            self.reader.open()
        except Exception as exc:  # noqa: BLE001 - rosbags raises several kinds
            raise BagCorruptError(f'cannot read the bag {self.path}: {_reason(exc)}; run '
                                  f'`simreal bag repair {self.path}` to recover what is '
                                  f'intact') from None
        self.types = TypeRegistry()
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
                            list(info.get('relative_file_paths', [])),
                            str(info.get('ros_distro') or 'unknown'))

    def messages(self, topics: Sequence[str] | None = None) -> Iterator[BagMessage]:
        """Yield messages in timestamp order, optionally only of ``topics``."""
        conns = [c for c in self.reader.connections if topics is None or c.topic in topics]
        if topics is not None:
            unknown = sorted(set(topics) - {c.topic for c in self.reader.connections})
            if unknown:
                raise BagError(f'the bag {self.path} has no topic {unknown[0]}; it has '
                               f'{sorted(self.info.topics)}')
        last = self.info.start_ns
        try:
            for conn, ts, data in self.reader.messages(connections=conns):
                last = int(ts)
                yield BagMessage(conn.topic, conn.msgtype, last, bytes(data))
        except SimrealError:
            raise
        except Exception as exc:  # noqa: BLE001 - rosbags' reader fails in many ways on damage
            raise BagCorruptError(f'the bag {self.path} is corrupt after log time {last} ns '
                                  f'({_reason(exc)}); run `simreal bag repair {self.path}` '
                                  f'to recover every intact chunk') from None

    def deserialize(self, m: BagMessage) -> Any:
        """Deserialize a message read from this bag (BagCorruptError when it is damaged)."""
        try:
            return self.types.deserialize(m.data, m.msgtype)
        except SimrealError:
            raise
        except Exception as exc:  # noqa: BLE001 - damaged CDR fails in many ways
            raise BagCorruptError(f'the bag {self.path}: the {m.topic} message at log time '
                                  f'{m.timestamp} ns does not deserialize ({_reason(exc)}); '
                                  f'the bag is corrupt: run `simreal bag repair '
                                  f'{self.path}`') from None

    def close(self) -> None:
        """Close the files."""
        self.reader.close()

    def __enter__(self) -> 'BagReader':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reason(exc: BaseException) -> str:
    """One line: the exception's kind and its first line."""
    first = next((line for line in str(exc).splitlines() if line.strip()), '')
    return f'{type(exc).__name__}: {first}'[:200] if first else type(exc).__name__
