"""STS packets, sign-magnitude values and the byte-time limit, without I/O."""

from __future__ import annotations

import pytest

from simreal_ros.hardware.feetech import protocol as p
from simreal_ros.hardware.feetech.control_table import BY_NAME, STATE_LEN, find_model
from simreal_ros.hardware.feetech.wire import byte_time_limit_hz


def test_a_ping_is_the_bytes_the_vendor_documents():
    # FF FF ID LEN INST CHK with CHK = ~(1 + 2 + 1) & 0xFF = 0xFB
    assert p.build(1, p.INST_PING) == bytes([0xFF, 0xFF, 0x01, 0x02, 0x01, 0xFB])


@pytest.mark.parametrize('value, bit, raw', [
    (-651, 15, 0x828B), (651, 15, 651), (0, 15, 0), (-2047, 11, 0x0FFF), (2047, 11, 0x07FF),
    (-1, 10, 0x0401)])
def test_sign_magnitude_round_trips(value, bit, raw):
    assert p.encode_sm(value, bit) == raw
    assert p.decode_sm(raw, bit) == value


@pytest.mark.parametrize('value', [2048, -2048])
def test_a_homing_offset_beyond_2047_does_not_fit(value):
    with pytest.raises(ValueError, match='bit 11'):
        p.encode_sm(value, BY_NAME['homing_offset'].sign_bit)


def test_the_parser_takes_any_chunking_and_drops_a_bad_checksum():
    good = p.build(3, p.INST_WRITE, bytes([42, 0x8B, 0x82]))
    bad = bytearray(p.build(4, p.INST_READ, bytes([56, 2])))
    bad[-1] ^= 0x55
    stream = b'\x00\xff' + bytes(bad) + good
    parser = p.PacketParser()
    items = [item for k in range(len(stream)) for item in parser.feed(stream[k:k + 1])]
    assert items == [p.Rejected(4, 'checksum', 8),
                     p.Packet(3, p.INST_WRITE, bytes([42, 0x8B, 0x82]), 9)]


def test_models_are_found_in_any_case_with_the_number_the_servo_reports():
    assert find_model('sts3215') is find_model('STS3215')
    assert find_model('STS3215').model_number == 777
    assert find_model('XM430-W350') is None


def test_byte_time_limit_counts_the_packets_of_one_cycle():
    # 6 servos: sync read 14 B, 6 statuses of 6 + 15 B, sync write 8 + 6 * 3 B = 166 B
    assert STATE_LEN == 15
    assert byte_time_limit_hz(6, 1_000_000) == pytest.approx(1e6 / 1660)
