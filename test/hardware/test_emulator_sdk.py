"""Conformance: the official dynamixel_sdk talks to the virtual servo bus over its pty."""

from __future__ import annotations

import time

import dynamixel_sdk as sdk
import dynamixel_sdk.port_handler as sdk_port
import pytest
from sdk_timeouts import sdk_latency_timer

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import EmulatorError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel import protocol as p
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess

ROBOT = load_robot('simreal_arm')
IDS = [j.servo.servo_id for j in ROBOT.joints]
A = ct.BY_NAME


# 100 ms: the shared test machine is loaded
patient_timeouts = sdk_latency_timer(sdk_port, 100, scope='module')


@pytest.fixture(scope='module')
def bus(tmp_path_factory):
    link = tmp_path_factory.mktemp('bus') / 'ttyDXL'
    with EmulatorProcess(link=link) as emu:
        port = sdk.PortHandler(emu.port)
        assert port.openPort() and port.setBaudRate(1_000_000)
        yield emu, port, sdk.PacketHandler(2.0)
        port.closePort()


def ok(result: int, error: int = 0) -> None:
    assert result == sdk.COMM_SUCCESS, sdk.PacketHandler(2.0).getTxRxResult(result)
    assert error == 0, sdk.PacketHandler(2.0).getRxPacketError(error)


def test_ping_and_broadcast_ping(bus) -> None:
    _emu, port, ph = bus
    for sid in IDS:
        model, result, error = ph.ping(port, sid)
        ok(result, error)
        assert model == ct.MODEL_NUMBER_XM430_W350
    _model, result, _error = ph.ping(port, 99)
    assert result == sdk.COMM_RX_TIMEOUT
    found, result = ph.broadcastPing(port)
    ok(result)
    assert sorted(found) == IDS and all(v == [1020, ct.FIRMWARE_VERSION] for v in found.values())


def test_read_and_write_registers(bus) -> None:
    _emu, port, ph = bus
    ok(*ph.write1ByteTxRx(port, 1, A['led'].address, 1))
    value, result, error = ph.read1ByteTxRx(port, 1, A['led'].address)
    ok(result, error)
    assert value == 1
    rdt, result, error = ph.read1ByteTxRx(port, 2, A['return_delay_time'].address)
    ok(result, error)
    assert rdt == 250  # the factory default
    ok(*ph.write2ByteTxRx(port, 3, A['position_p_gain'].address, 1234))
    value, result, error = ph.read2ByteTxRx(port, 3, A['position_p_gain'].address)
    ok(result, error)
    assert value == 1234
    # errors come back as the protocol's error numbers
    result, error = ph.write4ByteTxRx(port, 1, A['present_position'].address, 7)
    assert result == sdk.COMM_SUCCESS and error == p.ERR_ACCESS
    result, error = ph.write1ByteTxRx(port, 1, A['operating_mode'].address, 2)
    assert result == sdk.COMM_SUCCESS and error == p.ERR_DATA_LIMIT  # no mode 2
    _v, result, error = ph.readTxRx(port, 1, 220, 20)
    assert result == sdk.COMM_SUCCESS and error == p.ERR_ACCESS  # beyond the table (0..224)


def test_sync_write_moves_the_servos_and_sync_read_sees_it(bus) -> None:
    _emu, port, ph = bus
    gsw = sdk.GroupSyncWrite(port, ph, A['goal_position'].address, 4)
    goals = {1: 2048 + 300, 6: 2048 - 400}  # the two joints without gravity load
    gsr = sdk.GroupSyncRead(port, ph, A['present_position'].address, 4)
    for sid in goals:
        ok(*ph.write1ByteTxRx(port, sid, A['torque_enable'].address, 1))
        gsw.addParam(sid, list(goals[sid].to_bytes(4, 'little')))
        gsr.addParam(sid)
    ok(gsw.txPacket())
    deadline = time.monotonic() + 10
    while True:
        ok(gsr.txRxPacket())
        pos = {sid: ct.to_signed(gsr.getData(sid, A['present_position'].address, 4), 4)
               for sid in goals}
        if all(abs(pos[s] - goals[s]) <= 3 for s in goals) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert all(abs(pos[s] - goals[s]) <= 3 for s in goals), pos
    # at rest on its goal: below the Moving Threshold, so the Moving flag reads 0
    deadline = time.monotonic() + 5
    while True:
        moving, result, error = ph.read1ByteTxRx(port, 1, A['moving'].address)
        ok(result, error)
        if moving == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert moving == 0


def test_bulk_read_and_bulk_write(bus) -> None:
    _emu, port, ph = bus
    gbw = sdk.GroupBulkWrite(port, ph)
    gbw.addParam(4, A['led'].address, 1, [1])
    gbw.addParam(5, A['profile_velocity'].address, 4, list((77).to_bytes(4, 'little')))
    ok(gbw.txPacket())
    gbr = sdk.GroupBulkRead(port, ph)
    gbr.addParam(4, A['led'].address, 1)
    gbr.addParam(5, A['profile_velocity'].address, 4)
    gbr.addParam(2, A['model_number'].address, 2)
    ok(gbr.txRxPacket())
    assert gbr.getData(4, A['led'].address, 1) == 1
    assert gbr.getData(5, A['profile_velocity'].address, 4) == 77
    assert gbr.getData(2, A['model_number'].address, 2) == 1020


def test_malformed_packets_on_the_wire(bus) -> None:
    emu, port, ph = bus
    ser = port.ser
    ser.reset_input_buffer()

    def exchange(raw: bytes, wait: float = 0.1) -> list:
        ser.write(raw)
        time.sleep(wait)
        return list(p.PacketParser().feed(ser.read(ser.in_waiting)))

    bad_crc = bytearray(p.build(2, p.INST_READ, p.u16(132) + p.u16(4)))
    bad_crc[-2] ^= 0x55
    (answer,) = exchange(bytes(bad_crc))
    assert (answer.packet_id, answer.error) == (2, p.ERR_CRC)
    assert exchange(b'\xff\xff\xfd\x00\x02\xff\xff\x02\x00') == []  # absurd length: silence
    assert exchange(bytes(range(256))) == []  # noise: silence
    (answer,) = exchange(p.build(3, 0x42))
    assert answer.error == p.ERR_INSTRUCTION
    # the bus still works afterwards
    model, result, error = ph.ping(port, 3)
    ok(result, error)
    assert emu.proc is not None and emu.proc.poll() is None


def test_overload_sets_the_hardware_error_and_reboot_clears_it(bus) -> None:
    _emu, port, ph = bus
    sid = 2  # shoulder: gravity loads it
    ok(*ph.write1ByteTxRx(port, sid, A['torque_enable'].address, 0))
    ok(*ph.write1ByteTxRx(port, sid, A['operating_mode'].address, 5))
    ok(*ph.write2ByteTxRx(port, sid, A['goal_current'].address, 20))  # 54 mA: too weak
    ok(*ph.write1ByteTxRx(port, sid, A['torque_enable'].address, 1))
    ok(*ph.write4ByteTxRx(port, sid, A['goal_position'].address, 2048 - 900))
    deadline = time.monotonic() + 10
    bits = 0
    while time.monotonic() < deadline and not bits:
        bits, result, error = ph.read1ByteTxRx(port, sid, A['hardware_error_status'].address)
        time.sleep(0.05)
    assert bits & ct.HW_OVERLOAD
    assert error & p.ERR_ALERT  # every status packet carries the alert bit now
    torque, _r, _e = ph.read1ByteTxRx(port, sid, A['torque_enable'].address)
    assert torque == 0  # Shutdown (default 52) includes overload
    result, error = ph.write1ByteTxRx(port, sid, A['torque_enable'].address, 1)
    assert error & 0x7F == p.ERR_RESULT_FAIL  # refused until reboot
    result, error = ph.reboot(port, sid)
    assert result == sdk.COMM_SUCCESS
    bits, result, error = ph.read1ByteTxRx(port, sid, A['hardware_error_status'].address)
    ok(result, error)
    assert bits == 0


def test_byte_timing_follows_the_baud_rate(tmp_path) -> None:
    """A 100-byte read at 57600 baud takes at least its wire time (lower bound only)."""
    with EmulatorProcess(link=tmp_path / 'slow', baud=57600) as emu:
        port = sdk.PortHandler(emu.port)
        assert port.openPort() and port.setBaudRate(57600)
        ph = sdk.PacketHandler(2.0)
        ok(*ph.write1ByteTxRx(port, 1, A['return_delay_time'].address, 0))
        t0 = time.perf_counter()
        for _ in range(5):
            _data, result, error = ph.readTxRx(port, 1, 0, 100)
            ok(result, error)
        per_read = (time.perf_counter() - t0) / 5
        wire = (14 + 111) * 10 / 57600
        assert per_read >= wire * 0.95, (per_read, wire)
        # a host at the wrong baud rate hears nothing
        assert port.setBaudRate(1_000_000)
        _model, result, _error = ph.ping(port, 1)
        assert result == sdk.COMM_RX_TIMEOUT
        port.closePort()


def test_unknown_reality_and_bad_arguments_fail_with_a_reason(tmp_path) -> None:
    with pytest.raises(EmulatorError, match='no_such_reality'):
        EmulatorProcess(link=tmp_path / 'x', reality='no_such_reality').start()
    with pytest.raises(EmulatorError, match='baud'):
        EmulatorProcess(link=tmp_path / 'y', baud=12345).start()
    bad = tmp_path / 'bad.yaml'
    bad.write_text('robot: simreal_arm\nimperfections: {backlash: 0.01}\n')
    with pytest.raises(EmulatorError, match='imperfections.backlash'):
        EmulatorProcess(link=tmp_path / 'z', reality=str(bad)).start()


def test_bus_watchdog_expires_stops_the_servo_and_refuses_goals_until_cleared(tmp_path) -> None:
    """Bus Watchdog (98): silent for longer than it, a moving servo stops and reads -1.

    Servo 1 moves slowly toward a far goal; the SDK then talks only to servo 2. Servo 1 must
    expire (255 = -1 as an unsigned byte), stand still short of its goal with torque on, refuse
    goal writes with a Data Range Error, and accept them again once Bus Watchdog is written 0.
    Servo 2, talked to all along, must not expire.
    """
    with EmulatorProcess(link=tmp_path / 'ttyDXL') as emu:
        port = sdk.PortHandler(emu.port)
        assert port.openPort() and port.setBaudRate(1_000_000)
        ph = sdk.PacketHandler(2.0)
        wd, goal, present = (A[k].address for k in ('bus_watchdog', 'goal_position',
                                                    'present_position'))
        ok(*ph.write4ByteTxRx(port, 1, A['profile_velocity'].address, 20))  # 0.48 rad/s
        ok(*ph.write1ByteTxRx(port, 1, A['torque_enable'].address, 1))
        ok(*ph.write1ByteTxRx(port, 2, A['torque_enable'].address, 1))
        start, result, error = ph.read4ByteTxRx(port, 1, present)
        ok(result, error)
        far = start + 1400  # ~2.1 rad: more than 4 s at the profile velocity
        ok(*ph.write4ByteTxRx(port, 1, goal, far))
        ok(*ph.write1ByteTxRx(port, 1, wd, 5))  # 100 ms
        ok(*ph.write1ByteTxRx(port, 2, wd, 5))
        deadline = time.monotonic() + 10.0
        while True:  # only servo 2 is talked to; servo 1 is looked at every 0.3 s
            for _ in range(15):
                ok(*ph.ping(port, 2)[1:])
                time.sleep(0.02)
            value, result, error = ph.read1ByteTxRx(port, 1, wd)
            ok(result, error)
            if value == 255 or time.monotonic() > deadline:
                break
        assert value == 255, 'servo 1 never expired'
        value, result, error = ph.read1ByteTxRx(port, 2, wd)
        ok(result, error)
        assert value == 5  # heard all along
        first, result, error = ph.read4ByteTxRx(port, 1, present)
        ok(result, error)
        for _ in range(15):  # 0.3 s later: still there
            ok(*ph.ping(port, 2)[1:])
            time.sleep(0.02)
        later, result, error = ph.read4ByteTxRx(port, 1, present)
        ok(result, error)
        # still: the link settles onto the hold point by a few ticks (7 seen), where the
        # profile at 0.48 rad/s would have moved it ~90 ticks in the 0.3 s
        assert abs(later - first) <= 15, (first, later)
        assert far - later > 500, 'servo 1 kept going toward its goal'
        torque, result, error = ph.read1ByteTxRx(port, 1, A['torque_enable'].address)
        ok(result, error)
        assert torque == 1
        result, error = ph.write4ByteTxRx(port, 1, goal, far)
        assert result == sdk.COMM_SUCCESS and error == p.ERR_DATA_RANGE
        ok(*ph.write1ByteTxRx(port, 1, wd, 0))  # cleared (and off)
        ok(*ph.write4ByteTxRx(port, 1, goal, far))
        deadline = time.monotonic() + 10.0
        while ph.read4ByteTxRx(port, 1, present)[0] - later <= 50:
            assert time.monotonic() < deadline, 'servo 1 did not move again after the clear'
            time.sleep(0.05)
        port.closePort()
