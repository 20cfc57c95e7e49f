"""Conversions between core data and ROS messages (the only place that builds them)."""

from __future__ import annotations

from typing import Iterable, Mapping

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from sensor_msgs.msg import JointState

LEVELS = {'ok': DiagnosticStatus.OK, 'warn': DiagnosticStatus.WARN,
          'error': DiagnosticStatus.ERROR, 'stale': DiagnosticStatus.STALE}


def stamp_from_ns(ns: int) -> Time:
    """Return a builtin_interfaces/Time for integer nanoseconds."""
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_to_ns(stamp: Time) -> int:
    """Return integer nanoseconds of a builtin_interfaces/Time."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def joint_state(names: list[str], stamp_ns: int, position: Iterable[float],
                velocity: Iterable[float] = (), effort: Iterable[float] = ()) -> JointState:
    """Build a JointState in the given joint order."""
    msg = JointState()
    msg.header.stamp = stamp_from_ns(stamp_ns)
    msg.name = names
    msg.position = [float(x) for x in position]
    msg.velocity = [float(x) for x in velocity]
    msg.effort = [float(x) for x in effort]
    return msg


def diagnostic_status(name: str, hardware_id: str, level: str, message: str,
                      values: Mapping[str, object]) -> DiagnosticStatus:
    """Build a DiagnosticStatus; floats are written with 6 significant digits."""
    st = DiagnosticStatus()
    st.name = name
    st.hardware_id = hardware_id
    st.level = LEVELS[level]
    st.message = message
    st.values = [KeyValue(key=k, value=f'{v:.6g}' if isinstance(v, float) else str(v))
                 for k, v in values.items()]
    return st
