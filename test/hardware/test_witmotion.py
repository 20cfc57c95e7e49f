"""The WitMotion WT901 protocol: hand-built frames as the manual lays them out, and a stream
with garbage, split packets and corrupted checksums."""

from __future__ import annotations

import math

import numpy as np

from simreal_ros.hardware.imu import witmotion as wit

# hand-built from the manual's layout: 0x55, type, four int16 little-endian, sum of the ten
# bytes before. Acceleration: az = 0x0800 = 2048 counts = 2048/32768 * 16 g = 1 g, T = 2500
# (25.00 degC); angular velocity: wz = 16 counts = 16/32768 * 2000 deg/s = 0.9765625 deg/s,
# 5.00 V; angle: all zero; quaternion: q0 = 0x7FFF, the rest 0.
ACC = bytes([0x55, 0x51, 0, 0, 0, 0, 0x00, 0x08, 0xC4, 0x09, 0x7B])
GYRO = bytes([0x55, 0x52, 0, 0, 0, 0, 0x10, 0x00, 0xF4, 0x01, 0xAC])
ANGLE = bytes([0x55, 0x53, 0, 0, 0, 0, 0, 0, 0, 0, 0xA8])
QUAT = bytes([0x55, 0x59, 0xFF, 0x7F, 0, 0, 0, 0, 0, 0, 0x2C])
FRAME = ACC + GYRO + ANGLE + QUAT


def check_sample(s: wit.Sample) -> None:
    assert s.acc_m_s2 == (0.0, 0.0, 9.8)
    assert s.gyro_rad_s == (0.0, 0.0, math.radians(0.9765625))
    assert s.quat_wxyz == (1.0, 0.0, 0.0, 0.0)
    assert s.euler_rad == (0.0, 0.0, 0.0)
    assert s.temperature_c == 25.0


def test_hand_built_frame_decodes_to_one_g_up_and_level():
    parser = wit.Parser()
    samples = list(parser.feed(FRAME))
    assert len(samples) == 1
    check_sample(samples[0])
    assert parser.stats == {'packets': 4, 'bad_checksum': 0, 'unknown_type': 0, 'garbage': 0,
                            'samples': 1, 'incomplete': 0}


def test_the_encoder_writes_the_hand_built_bytes():
    assert wit.packet(wit.ACC, (0, 0, 2048, 2500)) == ACC
    assert wit.packet(wit.QUAT, (32767, 0, 0, 0)) == QUAT


def test_packets_split_across_reads_byte_by_byte():
    parser = wit.Parser()
    samples = [s for b in FRAME for s in parser.feed(bytes([b]))]
    assert len(samples) == 1
    check_sample(samples[0])


def test_garbage_and_bad_checksums_are_counted_and_skipped():
    bad = bytearray(GYRO)
    bad[6] ^= 0x01  # one bit of wz flipped: the sum no longer matches
    garbage = bytes([0x00, 0x55, 0x12, 0xFF])  # a stray header byte with no type after it
    stream = garbage + ACC + bytes(bad) + ANGLE + QUAT + FRAME
    parser = wit.Parser()
    samples = list(parser.feed(stream))
    # the group with the corrupted gyro packet has no angular velocity: no sample from it
    assert len(samples) == 1
    check_sample(samples[0])
    assert parser.stats['bad_checksum'] == 1
    assert parser.stats['unknown_type'] == 1
    assert parser.stats['incomplete'] == 1
    assert parser.stats['samples'] == 1
    assert parser.stats['packets'] == 3 + 4  # ACC, ANGLE, QUAT of the bad group, then FRAME


def test_round_trip_within_one_count():
    acc = (0.7, -1.3, 9.81)
    gyro = (0.5, -2.0, 0.01)
    q = (math.cos(0.2), math.sin(0.2) * 0.6, 0.0, math.sin(0.2) * 0.8)
    (s,) = wit.Parser().feed(wit.encode_sample(acc, gyro, q, temperature_c=31.5))
    assert np.abs(np.subtract(s.acc_m_s2, acc)).max() <= wit.ACC_LSB_M_S2 / 2
    assert np.abs(np.subtract(s.gyro_rad_s, gyro)).max() <= wit.GYRO_LSB_RAD_S / 2
    assert np.abs(np.subtract(s.quat_wxyz, q)).max() < 2 * wit.QUAT_LSB
    roll, pitch, yaw = wit.euler_from_quat(q)
    assert s.euler_rad is not None
    assert abs(s.euler_rad[0] - roll) < 1e-4 and abs(s.euler_rad[2] - yaw) < 1e-4
    assert s.temperature_c == 31.5


def test_values_beyond_full_scale_saturate():
    (s,) = wit.Parser().feed(wit.encode_sample((0.0, 0.0, 400.0), (0.0, -50.0, 0.0),
                                               (1.0, 0.0, 0.0, 0.0)))
    assert s.acc_m_s2[2] == 32767 * wit.ACC_LSB_M_S2
    assert s.gyro_rad_s[1] == -32768 * wit.GYRO_LSB_RAD_S
