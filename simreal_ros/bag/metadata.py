"""rosbag2 ``metadata.yaml`` (version 9): per-file and per-topic records, atomic writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from rosbags.interfaces import Connection, Qos
from rosbags.rosbag2.metadata import dump_qos_v9
import yaml

from simreal_ros.bag.options import BAG_VERSION


@dataclass
class FileInfo:
    """One storage file of a bag: its name, stamp range and message count."""

    path: str
    start: int = 2**63 - 1
    end: int = 0
    count: int = 0


@dataclass
class TopicRecord:
    """One topic of a bag as metadata.yaml lists it."""

    name: str
    msgtype: str
    msgdef: str
    digest: str
    qos: list[Qos]
    count: int = 0
    conn: Connection | None = None


def metadata_dict(storage: str, compression: str, topics: Sequence[TopicRecord],
                  files: Sequence[FileInfo], custom: Mapping[str, str],
                  ros_distro: str) -> dict[str, Any]:
    """Return the ``rosbag2_bagfile_information`` mapping of a bag.

    ``ros_distro`` is the distribution the bag was recorded on, as rosbag2 notes it; readers
    on any distribution open the bag whatever it says.
    """
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
        'ros_distro': ros_distro,
    }}


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(text, encoding='utf-8')
    tmp.replace(path)


def dump_yaml(data: Any) -> str:
    """Dump ``data`` as block-style YAML in insertion order."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
