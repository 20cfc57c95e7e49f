"""Bag options (storage, compression, splits, flushing), QoS specs and the bag constants."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simreal_ros.errors import ConfigError

if TYPE_CHECKING:  # rosbags is imported where a Qos is built: the planner validates options
    from rosbags.interfaces import Qos

STORAGES = ('mcap', 'sqlite3')
COMPRESSIONS = ('none', 'zstd')
SIDE_CAR = 'recording.yaml'
#: seconds between fsync calls of an MCAP file being written
FSYNC_PERIOD_S = 1.0
METADATA = 'metadata.yaml'
BAG_VERSION = 9
MCAP_MAGIC = b'\x89MCAP0\r\n'


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
        from rosbags.interfaces import (
            Qos,
            QosDurability,
            QosHistory,
            QosLiveliness,
            QosReliability,
            QosTime,
        )
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
