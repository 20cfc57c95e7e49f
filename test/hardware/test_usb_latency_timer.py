"""The USB latency timer (hardware.dynamixel.usb_latency_timer): a fake sysfs tree and a pty."""

from __future__ import annotations

import os
from pathlib import Path
import pty

from simreal_ros.hardware.dynamixel import usb_latency_timer as ul


def _fake_sysfs(root: Path, tty: str, text: str) -> None:
    d = root / 'bus' / 'usb-serial' / 'devices' / tty
    d.mkdir(parents=True)
    (d / 'latency_timer').write_text(text)


def test_reads_the_timer_of_the_port_behind_a_symlink(tmp_path):
    sysfs = tmp_path / 'sys'
    _fake_sysfs(sysfs, 'ttyUSB3', '16\n')
    dev = tmp_path / 'ttyUSB3'
    dev.touch()
    link = tmp_path / 'by-id-usb-FTDI'
    link.symlink_to(dev)
    assert ul.tty_name(str(link)) == 'ttyUSB3'
    assert ul.read_latency_timer_ms(str(link), str(sysfs)) == 16
    assert ul.cycle_limit_hz(16) == 62.5
    w = ul.warning(str(link), 16, 250.0, str(sysfs))
    assert 'latency timer is 16 ms' in w and 'near 62 Hz' in w
    assert f'echo 1 | sudo tee {sysfs}/bus/usb-serial/devices/ttyUSB3/latency_timer' in w


def test_one_ms_and_unknown_do_not_warn(tmp_path):
    _fake_sysfs(tmp_path, 'ttyUSB0', '1')
    assert ul.read_latency_timer_ms('/dev/ttyUSB0', str(tmp_path)) == 1
    assert ul.warning('/dev/ttyUSB0', 1, 500.0) == ''
    assert ul.warning('/dev/ttyUSB0', None, 500.0) == ''
    assert ul.cycle_limit_hz(None) == float('inf')


def test_garbage_in_the_file_reads_as_unknown(tmp_path):
    _fake_sysfs(tmp_path, 'ttyUSB1', 'sixteen')
    assert ul.read_latency_timer_ms('/dev/ttyUSB1', str(tmp_path)) is None


def test_a_pty_has_no_timer():
    master, slave = pty.openpty()
    try:
        name = os.ttyname(slave)
        assert ul.read_latency_timer_ms(name) is None
    finally:
        os.close(master)
        os.close(slave)
