"""Latencies measured from a rosbag2 bag: bag receive time minus the message's header stamp.

This is how an empirical delay profile is made from a real robot: record its ``joint_states``
(stamped at measurement by the driver), and the recorder's receive time minus the stamp is the
sensor-to-consumer latency. Read with ``rosbags`` (no ROS needed).
"""

from __future__ import annotations

from pathlib import Path

from simreal_ros.errors import ConfigError


def bag_latencies_s(path: Path, topic: str, source: str = '') -> list[float]:
    """Return ``log_time - header.stamp`` in seconds for every message of ``topic``."""
    try:
        from rosbags.highlevel import AnyReader
    except ImportError:  # pragma: no cover - rosbags is an install requirement
        raise ConfigError(source or str(path), 'bag', 'the rosbags package (pip install '
                          'rosbags)', 'not installed') from None
    if not path.exists():
        raise ConfigError(source or str(path), 'bag.path', 'an existing rosbag2 bag',
                          str(path))
    out: list[float] = []
    try:
        with AnyReader([path]) as reader:
            conns = [c for c in reader.connections if c.topic == topic]
            if not conns:
                topics = sorted({c.topic for c in reader.connections})
                raise ConfigError(source or str(path), 'bag.topic',
                                  f'a topic of the bag ({topics})', topic)
            for conn, log_ns, raw in reader.messages(connections=conns):
                msg = reader.deserialize(raw, conn.msgtype)
                header = getattr(msg, 'header', None)
                if header is None:
                    raise ConfigError(source or str(path), 'bag.topic',
                                      'a topic whose messages have a header', conn.msgtype)
                stamp_ns = header.stamp.sec * 1_000_000_000 + header.stamp.nanosec
                out.append((log_ns - stamp_ns) / 1e9)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - rosbags raises many types for broken bags
        raise ConfigError(source or str(path), 'bag.path', 'a readable rosbag2 bag',
                          f'{type(exc).__name__}: {exc}') from None
    negative = [v for v in out if v < 0]
    if negative:
        raise ConfigError(source or str(path), 'bag.topic',
                          'receive times after the header stamps (same clock)',
                          f'{len(negative)} messages stamped in the future, e.g. '
                          f'{negative[0] * 1e3:.3f} ms')
    return out
