"""rosbag2 bags through ``rosbags``: a crash-safe, splitting writer, a reader and repair.

One job a module: ``options`` (settings, QoS, constants), ``types`` (message definitions),
``storage`` (MCAP / sqlite3 files), ``metadata`` (metadata.yaml), ``writer``, ``reader``,
``arrays`` (the one reader of joint streams and header stamps into arrays), ``integrity`` (the
MCAP CRC and structure checks), ``repair``. This package re-exports the public API.

The writer (raw CDR bytes, rosbag2 version 9, splits, crash safety) is specified in
:mod:`simreal_ros.bag.writer`, the integrity check of every MCAP file a reader opens in
:mod:`simreal_ros.bag.integrity`, repair of a killed recording and salvage of a damaged bag in
:mod:`simreal_ros.bag.repair`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

#: public name -> the module of this package that defines it. Imported on first use, so
#: ``simreal_ros.bag.options`` (the recorder's settings, which the launch planner validates)
#: does not pull in rosbags and the writer: ``import rosbags`` alone costs ~35 ms, the writer
#: and reader ~60 ms (python -X importtime), paid by every ``ros2 launch`` otherwise.
_EXPORTS = {
    'BAG_VERSION': 'options', 'COMPRESSIONS': 'options', 'METADATA': 'options',
    'SIDE_CAR': 'options', 'STORAGES': 'options', 'BagOptions': 'options', 'QosSpec': 'options',
    'BagInfo': 'reader', 'BagMessage': 'reader', 'BagReader': 'reader',
    'check_bag_path': 'reader', 'RepairReport': 'repair', 'repair_bag': 'repair',
    'verify_mcap': 'integrity',
    'TypeRegistry': 'types', 'BagWriter': 'writer',
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the public name's module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(import_module(f'{__name__}.{module}'), name)
    globals()[name] = value
    return value
