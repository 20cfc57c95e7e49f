"""rosbag2 bags through ``rosbags``: a crash-safe, splitting writer, a reader and repair.

One job a module: ``options`` (settings, QoS, constants), ``types`` (message definitions),
``storage`` (MCAP / sqlite3 files), ``metadata`` (metadata.yaml), ``writer``, ``reader``,
``arrays`` (the one reader of joint streams and header stamps into arrays), ``repair``. This
package re-exports the public API.

The writer (raw CDR bytes, rosbag2 version 9, splits, crash safety) is specified in
:mod:`simreal_ros.bag.writer`, repair of a killed recording in
:mod:`simreal_ros.bag.repair`.
"""

from simreal_ros.bag.options import (
    BAG_VERSION,
    COMPRESSIONS,
    METADATA,
    SIDE_CAR,
    STORAGES,
    BagOptions,
    QosSpec,
)
from simreal_ros.bag.reader import BagInfo, BagMessage, BagReader, check_bag_path
from simreal_ros.bag.repair import RepairReport, repair_bag
from simreal_ros.bag.types import TypeRegistry
from simreal_ros.bag.writer import BagWriter

__all__ = ['BAG_VERSION', 'COMPRESSIONS', 'METADATA', 'SIDE_CAR', 'STORAGES', 'BagInfo',
           'BagMessage', 'BagOptions', 'BagReader', 'BagWriter', 'QosSpec', 'RepairReport',
           'TypeRegistry', 'check_bag_path', 'repair_bag']
