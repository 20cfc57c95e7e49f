"""BufferedPort.read_count on a pseudo-terminal: a SYNC READ's answer in one wake-up."""

from __future__ import annotations

import os
import pty
import select
import termios
import threading
import time

import pytest

from simreal_ros.hardware.feetech import port as port_mod
from simreal_ros.hardware.feetech.port import BufferedPort


@pytest.fixture
def line():
    """(device side fd, BufferedPort open on the host side at 1 Mbps)."""
    master, slave = pty.openpty()
    port = BufferedPort(os.ttyname(slave))
    assert port.setBaudRate(1_000_000)
    yield master, port
    port.closePort()
    os.close(slave)
    os.close(master)


def test_the_whole_count_comes_back_from_one_select(line, monkeypatch):
    master, port = line
    calls = []

    def counted(*args):
        calls.append(args)
        return select.select(*args)

    monkeypatch.setattr(port_mod, 'select', type('S', (), {'select': staticmethod(counted)}))
    vmin = termios.tcgetattr(port.ser.fileno())[6][termios.VMIN]
    os.write(master, b'\xff\xff\x01')  # the first status packet's start is there already
    later = threading.Timer(0.05, os.write, (master, b'\x02\x00\xfc' + b'\xff\xff\x02'))
    later.start()
    try:
        got = port.read_count(9, time.monotonic() + 5.0)
    finally:
        later.join()
    assert got == b'\xff\xff\x01\x02\x00\xfc\xff\xff\x02'
    assert len(calls) == 1  # VMIN: not readable until all 9 bytes were there
    assert termios.tcgetattr(port.ser.fileno())[6][termios.VMIN] == vmin  # the port's again


def test_at_the_deadline_what_has_arrived_is_returned(line):
    master, port = line
    os.write(master, b'\xff\xff\x01\x02')
    assert port.read_count(21, time.monotonic() + 0.05) == b'\xff\xff\x01\x02'
    os.write(master, b'\x00')
    assert port.readPort(1) == b'\x00'  # VMIN is back: a 1-byte read is not held up
