"""The servo driver's one-line status: which condition of a diagnostics period is reported.

The driver node (:mod:`simreal_ros.nodes.dynamixel_driver`) takes a :class:`DriverSnapshot`
under its lock every diagnostics period and publishes :func:`driver_status`'s (level,
message) with the values. Conditions, weakest first, each replacing the one before it where it
applies: rejected commands (WARN), the command watchdog (WARN), a servo's hardware error bits
(ERROR), torque read off although commanded on (ERROR, unless a hardware error is reported),
failed state reads of the period (:func:`read_failure_level`: WARN replaces only OK, ERROR
always), ``FAILED_READS_ERROR`` failures in a row (ERROR), the port lost (ERROR), the bus
thread stalled (ERROR), the bus thread failed (ERROR). No ROS, no bus I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from simreal_ros.hardware.dynamixel.driver_control import read_failure_level

#: consecutive failed state reads that make the bus ERROR ("not answering")
FAILED_READS_ERROR = 10


@dataclass(frozen=True)
class DriverSnapshot:
    """What the driver knew at one diagnostics period (joints in robot order)."""

    joints: Sequence[tuple[str, int]]  # (joint name, servo id)
    rejected_window: int  # joint commands rejected in the period
    last_rejection: str
    watchdog_active: bool
    watchdog: str  # the watchdog mode ('hold' or 'torque_off')
    health: tuple[Sequence[int], Sequence[float]] | None  # (error bits, temperature) per joint
    torque_commanded: bool
    torque_read: Sequence[int] | None  # Torque Enable per joint at the last health read
    reads_period: int
    failures_period: int
    consecutive_failures: int
    last_error: str
    connected: bool
    stalled_ns: int  # how long the bus thread has not cycled (0: it cycles)
    fatal: str  # why the bus thread failed ('' while it runs)


def driver_status(s: DriverSnapshot, error_names: Callable[[int], str]) -> tuple[str, str]:
    """Return the period's (level, message): level 'ok', 'warn' or 'error'."""
    level, message = 'ok', 'running'
    if s.rejected_window:
        level, message = 'warn', (f'{s.rejected_window} joint commands rejected: '
                                  f'{s.last_rejection}')
    if s.watchdog_active:
        level, message = 'warn', f'no joint command: watchdog {s.watchdog}'
    if s.health is not None:
        faults = [f'servo {servo_id} ({name}): {error_names(bits)}'
                  for (name, servo_id), bits in zip(s.joints, s.health[0], strict=True) if bits]
        if faults:
            level, message = 'error', 'hardware error: ' + '; '.join(faults)
    if s.torque_commanded and s.torque_read and not all(s.torque_read) and level != 'error':
        off = [name for (name, _id), t in zip(s.joints, s.torque_read, strict=True) if not t]
        level, message = 'error', (f'torque off at {", ".join(off)} although enabled '
                                   f'(servo power lost or reset?): call ~/reset to '
                                   f'configure them again')
    failing = read_failure_level(s.reads_period, s.failures_period)
    if failing is not None and (failing[0] == 'error' or level == 'ok'):
        level, message = failing[0], f'{failing[1]}: {s.last_error}'
    if s.consecutive_failures >= FAILED_READS_ERROR:
        level, message = 'error', f'bus not answering: {s.last_error}'
    if not s.connected:
        level, message = 'error', f'port lost, reconnecting: {s.last_error}'
    if s.stalled_ns:
        level, message = 'error', f'bus thread stalled: no cycle for {s.stalled_ns / 1e9:.1f} s'
    if s.fatal:
        level, message = 'error', f'bus thread failed: {s.fatal}'
    return level, message
