"""Homing Offset on the virtual bus and the driver's calibration check, through the real SDK.

The emulator adds Homing Offset to Present Position and keeps its EEPROM in a file across a
restart (a power cycle); :func:`sync_homing_offsets` writes a calibration's offsets as absolute
values, leaves matching servos alone, and fails in one line on a servo that drops the write.
"""

from __future__ import annotations

from pathlib import Path

from calibration_files import OFFSETS, eeprom_offsets, write_calibration, write_eeprom
import dynamixel_sdk.port_handler as sdk_port
import pytest
from sdk_timeouts import sdk_latency_timer

from simreal_ros.core.calibration import load_calibration
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import BusError
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.homing import sync_homing_offsets

ROBOT = load_robot('simreal_arm')
IDS = [j.servo.servo_id for j in ROBOT.joints]


# 500 ms: with 100 ms the emulator's reply came too late once in a CI run with one core busy
# (``There is no status packet!``); no test here waits a timeout out
patient_timeouts = sdk_latency_timer(sdk_port, 500)


def open_bus(port: str) -> DynamixelBus:
    bus = DynamixelBus(ROBOT, port, 1_000_000, latency_timer_ms=100)
    bus.open()
    bus.check_servos(10)
    return bus


def test_present_position_includes_the_homing_offset_and_the_eeprom_survives_a_restart(
        tmp_path: Path) -> None:
    eeprom = write_eeprom(tmp_path / 'eeprom.yaml', {1: 1000, 4: -700})
    with EmulatorProcess(link=tmp_path / 'ttyDXL', eeprom=eeprom) as emu:
        bus = open_bus(emu.port)
        assert bus.read_homing_offsets() == (1000, 0, 0, -700, 0, 0)
        # base_yaw and forearm_roll hang at encoder 2048 (no gravity about their axes)
        assert bus.read_register(1, 'present_position') == 3048
        assert bus.read_register(4, 'present_position') == 1348
        bus.write_homing_offsets([5, 0, 0, 8, 0, -10])
        assert bus.read_register(1, 'present_position') == 2053
        bus.close()
    assert eeprom_offsets(eeprom) == {1: 5, 2: 0, 3: 0, 4: 8, 5: 0, 6: -10}
    with EmulatorProcess(link=tmp_path / 'ttyDXL', eeprom=eeprom) as emu:  # power cycle
        bus = open_bus(emu.port)
        assert bus.read_homing_offsets() == (5, 0, 0, 8, 0, -10)
        assert bus.read_register(4, 'present_position') == 2056
        bus.close()


def test_repeated_calibrations_write_absolute_offsets_once(tmp_path: Path) -> None:
    cal_path = write_calibration(tmp_path / 'cal.yaml')
    cal = load_calibration(cal_path, ROBOT)
    eeprom = write_eeprom(tmp_path / 'eeprom.yaml', {sid: 1500 for sid in IDS})
    with EmulatorProcess(link=tmp_path / 'ttyDXL', eeprom=eeprom) as emu:
        written, lines, positions = [], [], []
        for _ in range(3):  # three connects in a row: the first writes, the others find a match
            bus = open_bus(emu.port)
            log: list[str] = []
            written.append(sync_homing_offsets(bus, cal, str(cal_path), log.append))
            lines.append(log)
            assert bus.read_homing_offsets() == OFFSETS
            positions.append(bus.read_register(1, 'present_position'))
            bus.close()
    assert written == [IDS, [], []]
    assert len(lines[0]) == 6
    assert lines[0][0] == (f'calibration: servo ID 1 (base_yaw): Homing Offset 1500 -> 100 '
                           f'ticks (written from {cal_path})')
    assert lines[1] == lines[2] == [f'calibration: 6 servos match {cal_path}']
    assert positions == [2148, 2148, 2148]  # encoder 2048 + 100, never 2048 + 1500 + 100


def test_a_servo_that_drops_the_eeprom_write_fails_in_one_line(tmp_path: Path) -> None:
    cal_path = write_calibration(tmp_path / 'cal.yaml', elbow_pitch=(3, 40, 0, 100, 3996))
    cal = load_calibration(cal_path, ROBOT)
    with EmulatorProcess(link=tmp_path / 'ttyDXL', faults='eeprom_drop=3') as emu:
        bus = open_bus(emu.port)
        with pytest.raises(BusError) as err:
            sync_homing_offsets(bus, cal, str(cal_path), lambda _line: None)
        bus.close()
    assert str(err.value) == (
        f'calibration {cal_path}: the Homing Offset did not stay written: servo ID 3 '
        f'(elbow_pitch): wrote 40, reads 0 (the EEPROM write was refused or lost: check that '
        f'the servo is not locked, power-cycle it and start again)')
    assert '\n' not in str(err.value)
