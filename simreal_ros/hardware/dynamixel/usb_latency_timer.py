"""The USB-serial adapter's latency timer: read it, judge it, and the bus cycle rate it allows.

An FTDI adapter (Linux ``ftdi_sio``) holds received bytes until its buffer fills or its latency
timer expires, 16 ms by default. A servo bus cycle waits for the status packets of one sync
read, which are far shorter than the buffer, so each cycle waits up to one timer period: at
16 ms the cycle rate is capped near 1000 / 16 = 62.5 Hz whatever the baud rate. The kernel
exposes the timer as ``/sys/bus/usb-serial/devices/<tty>/latency_timer`` (ms); other ports
(a pty, a CDC-ACM ``ttyACM*`` adapter, a non-Linux system) have no such file.
"""

from __future__ import annotations

import os
from pathlib import Path

#: above this the driver warns (ROBOTIS and FTDI both recommend 1 ms for servo buses)
RECOMMENDED_MS = 1


def tty_name(port: str) -> str:
    """Return the kernel name of a serial port (``/dev/serial/by-id/...`` -> ``ttyUSB0``)."""
    return os.path.basename(os.path.realpath(port))


def timer_path(port: str, sysfs_root: str = '/sys') -> Path:
    """Return where the kernel exposes the latency timer of ``port``."""
    return Path(sysfs_root) / 'bus' / 'usb-serial' / 'devices' / tty_name(port) / 'latency_timer'


def read_latency_timer_ms(port: str, sysfs_root: str = '/sys') -> int | None:
    """Return the adapter's latency timer in ms, or None when the port has none (pty, ACM)."""
    try:
        text = timer_path(port, sysfs_root).read_text(encoding='ascii').strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def cycle_limit_hz(latency_timer_ms: int | None) -> float:
    """Most read-write bus cycles per second the timer allows (inf: no timer, or 0 ms)."""
    if not latency_timer_ms:
        return float('inf')
    return 1000.0 / latency_timer_ms


def warning(port: str, latency_timer_ms: int | None, rate_hz: float,
            sysfs_root: str = '/sys') -> str:
    """Return the start-up warning for a timer above 1 ms ('' when fine or unknown)."""
    if latency_timer_ms is None or latency_timer_ms <= RECOMMENDED_MS:
        return ''
    path = timer_path(port, sysfs_root)
    limit = cycle_limit_hz(latency_timer_ms)
    return (f'{port}: the USB adapter latency timer is {latency_timer_ms} ms, which caps a bus '
            f'cycle near {limit:.0f} Hz (rate_hz {rate_hz:g} asked); set it to 1 ms: '
            f'echo 1 | sudo tee {path} (for good: a udev rule ACTION=="add", '
            f'SUBSYSTEM=="usb-serial", DRIVER=="ftdi_sio", ATTR{{latency_timer}}="1")')
