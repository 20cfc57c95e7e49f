"""Latencies measured from a rosbag2 bag: bag receive time minus the message's header stamp.

This is how an empirical delay profile is made from a real robot: record its ``joint_states``
(stamped at measurement by the driver), and the recorder's receive time minus the stamp is the
sensor-to-consumer latency. Read with the project's array reader (:mod:`simreal_ros.bag.arrays`,
no ROS needed): every message of the topic counts, whatever it carries, in bag order.
"""

from __future__ import annotations

from pathlib import Path

from simreal_ros.bag.arrays import StampArrays, read_arrays
from simreal_ros.bag.reader import BagReader
from simreal_ros.errors import ConfigError


def bag_latencies_s(path: Path, topic: str, source: str = '') -> list[float]:
    """Return ``log_time - header.stamp`` in seconds for every message of ``topic``."""
    src = source or str(path)
    if not path.exists():
        raise ConfigError(src, 'bag.path', 'an existing rosbag2 bag', str(path))
    try:
        with BagReader(path) as reader:
            topics = sorted(reader.info.topics)
            if topic not in topics:
                raise ConfigError(src, 'bag.topic', f'a topic of the bag ({topics})', topic)
            stamped: StampArrays = read_arrays(reader, [topic]).stamped[topic]
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - rosbags raises many types for broken bags
        raise ConfigError(src, 'bag.path', 'a readable rosbag2 bag',
                          f'{type(exc).__name__}: {exc}') from None
    if stamped.stamp_ns is None or len(stamped.stamp_ns) != len(stamped):
        raise ConfigError(src, 'bag.topic', 'a topic whose messages have a header',
                          stamped.msgtype)
    out: list[float] = ((stamped.receive_ns - stamped.stamp_ns) / 1e9).tolist()
    negative = [v for v in out if v < 0]
    if negative:
        raise ConfigError(src, 'bag.topic',
                          'receive times after the header stamps (same clock)',
                          f'{len(negative)} messages stamped in the future, e.g. '
                          f'{negative[0] * 1e3:.3f} ms')
    return out
