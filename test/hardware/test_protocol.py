"""Protocol 2.0 packets and the emulator's device side, property-tested with hypothesis.

The SDK's own packet code is the independent reference: packets built here must be what the
SDK builds (CRC, stuffing), and the device side must answer any byte string without raising.
"""

from __future__ import annotations

import dynamixel_sdk as sdk
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel import protocol as p
from simreal_ros.hardware.emulator.emulator import BusEmulator, Faults
from simreal_ros.hardware.emulator.reality import VirtualArm

ROBOT = load_robot('simreal_arm')
SDK = sdk.PacketHandler(2.0)


def sdk_packet(packet_id: int, instruction: int, params: bytes) -> bytes:
    """The packet the official SDK would send (its txPacket, minus the port)."""
    length = len(params) + 3
    pkt = [0xFF, 0xFF, 0xFD, 0x00, packet_id, length & 0xFF, length >> 8, instruction]
    pkt += list(params) + [0, 0]
    pkt = SDK.addStuffing(pkt)
    total = (pkt[5] | pkt[6] << 8) + 7
    crc = SDK.updateCRC(0, pkt, total - 2)
    pkt[total - 2], pkt[total - 1] = crc & 0xFF, crc >> 8
    return bytes(pkt[:total])


@pytest.fixture(scope='module')
def emulator() -> BusEmulator:
    return BusEmulator(VirtualArm(ROBOT), '/nonexistent/link')


def test_crc_matches_the_e_manual_example() -> None:
    # e-Manual example: PING to ID 1 is FF FF FD 00 01 03 00 01 19 4E
    assert p.build(1, p.INST_PING) == bytes.fromhex('fffffd0001030001194e')


@given(st.integers(0, 253), st.integers(0, 255), st.binary(max_size=80))
def test_build_equals_the_sdk_and_parses_back(pid: int, inst: int, params: bytes) -> None:
    pkt = p.build(pid, inst, params)
    assert pkt == sdk_packet(pid, inst, params)
    parsed = p.parse_one(pkt)
    assert (parsed.packet_id, parsed.instruction, parsed.params) == (pid, inst, params)


@given(st.binary(max_size=60))
def test_stuffing_round_trip_and_no_header_inside(body: bytes) -> None:
    s = p.stuff(body)
    assert p.unstuff(s) == body
    assert all(s[i:i + 4] != b'\xff\xff\xfd\x00' for i in range(len(s) - 3))


@given(st.lists(st.tuples(st.integers(0, 252), st.binary(max_size=20)), max_size=5),
       st.data())
def test_parser_any_chunking(packets: list, data: st.DataObject) -> None:
    stream = b''.join(p.status(pid, 0, prm) for pid, prm in packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    parser = p.PacketParser()
    got = []
    last = 0
    for c in cuts + [len(stream)]:
        got += list(parser.feed(stream[last:c]))
        last = c
    assert [(g.packet_id, g.params[1:]) for g in got] == packets
    assert parser.pending == 0


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_parser_never_raises_on_garbage(data: bytes) -> None:
    parser = p.PacketParser()
    for item in parser.feed(data):
        assert isinstance(item, (p.Packet, p.Rejected))


@given(st.integers(0, 4000), st.binary(min_size=1, max_size=5))
def test_bad_crc_is_rejected_as_crc(pos: int, flip: bytes) -> None:
    pkt = bytearray(p.build(1, p.INST_READ, p.u16(132) + p.u16(4)))
    k = 7 + pos % (len(pkt) - 7)
    pkt[k] ^= flip[0] or 1
    items = list(p.PacketParser().feed(bytes(pkt)))
    assert items == [p.Rejected(1, 'crc', len(pkt))]


def status_ok(pkt: bytes) -> p.Packet:
    parsed = p.parse_one(pkt)
    assert parsed.instruction == p.INST_STATUS
    return parsed


@given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=40))
@settings(max_examples=400, deadline=None)
def test_device_side_answers_anything_without_raising(emulator: BusEmulator, pid: int,
                                                      inst: int, params: bytes) -> None:
    if inst == p.INST_REBOOT or (inst in (p.INST_WRITE, p.INST_SYNC_WRITE, p.INST_BULK_WRITE,
                                          p.INST_REG_WRITE, p.INST_ACTION)
                                 and len(params) > 2 and params[0] in (7, 8)):
        inst = p.INST_READ  # keep IDs and baud rates of the shared emulator as they are
    for item in p.PacketParser().feed(p.build(pid, inst, params)):
        for sid, pkt in emulator.handle(item, 0.0):
            parsed = status_ok(pkt)
            assert parsed.packet_id == sid
            assert (parsed.error & 0x7F) in range(8)


def one(emulator: BusEmulator, pid: int, inst: int, params: bytes = b'') -> list[p.Packet]:
    out = []
    for item in p.PacketParser().feed(p.build(pid, inst, params)):
        out += [status_ok(pkt) for _sid, pkt in emulator.handle(item, 0.0)]
    return out


def test_protocol_errors_of_the_e_manual(emulator: BusEmulator) -> None:
    (st_,) = one(emulator, 1, 0x77)  # unknown instruction
    assert st_.error == p.ERR_INSTRUCTION
    assert one(emulator, p.BROADCAST_ID, 0x77) == []  # broadcast: silence
    assert one(emulator, 42, p.INST_PING) == []  # nobody at ID 42
    (st_,) = one(emulator, 1, p.INST_READ, p.u16(500) + p.u16(4))  # out of the table
    assert st_.error == p.ERR_ACCESS
    (st_,) = one(emulator, 1, p.INST_READ, p.u16(132))  # short parameters
    assert st_.error == p.ERR_DATA_LENGTH
    (st_,) = one(emulator, 1, p.INST_WRITE, p.u16(132) + p.u32(5))  # read-only
    assert st_.error == p.ERR_ACCESS
    (st_,) = one(emulator, 1, p.INST_WRITE, p.u16(84) + b'\x10')  # half of a 2-byte item
    assert st_.error == p.ERR_DATA_LENGTH
    (st_,) = one(emulator, 1, p.INST_WRITE, p.u16(64) + b'\x07')  # torque enable 7
    assert st_.error == p.ERR_DATA_LIMIT
    (st_,) = one(emulator, 1, p.INST_WRITE, p.u16(64) + b'\x01')
    assert st_.error == 0
    (st_,) = one(emulator, 1, p.INST_WRITE, p.u16(11) + b'\x05')  # EEPROM with torque on
    assert st_.error == p.ERR_ACCESS
    (st_,) = one(emulator, 1, p.INST_FACTORY_RESET, b'\xff')  # refused
    assert st_.error == p.ERR_INSTRUCTION
    (st_,) = one(emulator, 1, p.INST_REBOOT)
    assert st_.error == 0
    (st_,) = one(emulator, 1, p.INST_READ, p.u16(64) + p.u16(1))
    assert st_.params[1:] == b'\x00'  # reboot turned torque off
    bad = bytearray(p.build(1, p.INST_PING))
    bad[-1] ^= 0xFF
    answers = [a for item in p.PacketParser().feed(bytes(bad)) for a in
               emulator.handle(item, 0.0)]
    assert [status_ok(pkt).error for _sid, pkt in answers] == [p.ERR_CRC]


def test_gain_conversion_round_trips() -> None:
    for j in ROBOT.joints:
        s = j.servo
        kp = ct.register_to_kp(ct.kp_to_register(j.kp, s.ticks_per_rev, s.torque_per_amp),
                               s.ticks_per_rev, s.torque_per_amp)
        kd = ct.register_to_kd(ct.kd_to_register(j.kd, s.ticks_per_rev, s.torque_per_amp),
                               s.ticks_per_rev, s.torque_per_amp)
        assert kp == pytest.approx(j.kp, rel=1e-3) and kd == pytest.approx(j.kd, rel=1e-3)
        assert 0 < ct.kp_to_register(j.kp, s.ticks_per_rev, s.torque_per_amp) <= 16383


@pytest.mark.parametrize('text, key', [('crc=2', 'crc'), ('timeout=-0.1', 'timeout'),
                                       ('crc=abc', 'crc'), ('bogus=1', 'bogus=1'),
                                       ('replug_at=3', 'replug_at'),
                                       ('unplug_at=5,replug_at=4', 'replug_at'),
                                       ('late=1.5', 'late'), ('late_s=0', 'late_s')])
def test_bad_fault_specs(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        Faults.parse(text)
    assert Faults.parse('crc=0.01,timeout=0.005,unplug_at=5.0,replug_at=6.0') == Faults(
        0.01, 0.005, 5.0, 6.0, 0)
    assert Faults.parse('late=0.02,late_s=0.05,seed=2') == Faults(seed=2, late=0.02,
                                                                  late_s=0.05)


def test_late_answers_leave_the_bus_free_for_the_next_request() -> None:
    """late=1: a request's answers go out late_s later; the next request's answers on time."""
    emu = BusEmulator(VirtualArm(ROBOT), '/nonexistent/link',
                      faults=Faults(late=1.0, late_s=0.03))
    first = [(1, p.status(1, 0, b'\x01')), (2, p.status(2, 0, b'\x02'))]
    emu._schedule(14, first, now=10.0)
    assert emu.stats['late'] == 1 and emu.bus_free == pytest.approx(10.0 + 14 * 1e-5)
    times = sorted(t for t, _s, _pkt in emu._out)
    assert times[0] > 10.03 and len(times) == 2
    emu.faults = Faults()  # the next request is answered on time, before the late ones
    emu._schedule(14, [(3, p.status(3, 0, b'\x03'))], now=10.001)
    order = [pkt[4] for _t, _s, pkt in sorted(emu._out)]  # the ID byte of each packet
    assert order == [3, 1, 2]
