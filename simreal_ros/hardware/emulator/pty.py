"""The emulator's ports: pseudo-terminals behind atomically replaced symlinks.

Every port of ``simreal emulate`` (the servo bus, the IMU) is a raw pty whose slave side a
symlink names (what a driver opens like ``/dev/ttyUSB0``); :class:`Device` is what the bus
emulator's loop asks of a second device on a port of its own.
"""

from __future__ import annotations

import os
from pathlib import Path
import tty
from typing import Protocol


def open_pty_link(link: Path) -> tuple[int, int]:
    """Open a raw pty, point the symlink ``link`` at its slave side; return (master, slave).

    The master is non-blocking; the link is replaced atomically, so a driver never sees a
    half-made one. Every port of the emulator (servo bus, IMU) is one of these.
    """
    master, slave = os.openpty()
    tty.setraw(slave)
    os.set_blocking(master, False)
    tmp = link.with_name(f'.{link.name}.{os.getpid()}')
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.ttyname(slave), tmp)
    os.replace(tmp, link)
    return master, slave


def close_pty_link(link: Path, master: int | None, slave: int | None) -> None:
    """Remove ``link`` and close the pty (the host's fd gets EIO/hang-up)."""
    try:
        if link.is_symlink():
            link.unlink()
    except OSError:
        pass
    for fd in (master, slave):
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


class Device(Protocol):
    """A second device of the virtual robot on a port of its own (the IMU).

    The bus emulator's loop plugs it with the bus and ticks it after every batch of steps.
    """

    def plug(self) -> None:
        """Open the port."""

    def unplug(self) -> None:
        """Close the port."""

    def tick(self, now: float) -> float:
        """Sample and send what is due at monotonic ``now``; return when next to be woken."""
