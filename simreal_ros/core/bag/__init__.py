"""rosbag2 bags through ``rosbags``: a crash-safe, splitting writer, a reader and repair.

One job a module: ``options`` (settings, QoS, constants), ``types`` (message definitions),
``storage`` (MCAP / sqlite3 files), ``metadata`` (metadata.yaml), ``writer``, ``reader``,
``repair``. This package re-exports the public API.

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

from simreal_ros.core.bag.options import (
    BAG_VERSION,
    COMPRESSIONS,
    METADATA,
    SIDE_CAR,
    STORAGES,
    BagOptions,
    QosSpec,
)
from simreal_ros.core.bag.reader import BagInfo, BagMessage, BagReader, check_bag_path
from simreal_ros.core.bag.repair import RepairReport, repair_bag
from simreal_ros.core.bag.types import TypeRegistry
from simreal_ros.core.bag.writer import BagWriter

__all__ = ['BAG_VERSION', 'COMPRESSIONS', 'METADATA', 'SIDE_CAR', 'STORAGES', 'BagInfo',
           'BagMessage', 'BagOptions', 'BagReader', 'BagWriter', 'QosSpec', 'RepairReport',
           'TypeRegistry', 'check_bag_path', 'repair_bag']
