"""The WitMotion WT901 serial output protocol (the "WIT standard protocol"), both directions.

Source: WitMotion, *WT901 Datasheet* and *WIT Standard Communication Protocol* (the manual of
the WT901/JY901 family, section "Data output"): the device sends 11-byte packets

    0x55, TYPE, D0 .. D7, SUM          SUM = (0x55 + TYPE + D0 + .. + D7) & 0xFF

where D0..D7 are four int16 little-endian values (low byte first). The packet types used here
and their scales (``value / 32768 * full scale``):

========  ==================  =====================================================  ========
TYPE      content             the four int16                                          scale
========  ==================  =====================================================  ========
``0x51``  acceleration        ax, ay, az, temperature (0.01 degC)                     16 g
``0x52``  angular velocity    wx, wy, wz, supply voltage (0.01 V)                     2000 deg/s
``0x53``  angle               roll, pitch, yaw, firmware version                     180 deg
``0x59``  quaternion          q0 (w), q1 (x), q2 (y), q3 (z)                          1
========  ==================  =====================================================  ========

``g`` is 9.8 m/s^2 as the manual states it. The device sends the enabled packets of one sample
in type order (0x51, 0x52, 0x53, .., 0x59) at its output rate (0.1 to 200 Hz, default 10 Hz;
200 Hz needs 115200 baud or more: 4 packets x 11 bytes x 10 bits = 4400 bits a sample).
Acceleration is the specific force (1 g up at rest, +z when lying flat), angular velocity and
the attitude are of the sensor's own axes; the quaternion rotates sensor axes into the level
reference frame (w first).

:func:`encode_sample` builds the packets of one sample (the virtual IMU), :class:`Parser`
reads a byte stream back into :class:`Sample` objects: it resynchronises on 0x55 after garbage,
keeps a packet split across reads, skips (and counts) packets with a bad checksum or an unknown
type, and yields a sample when its quaternion packet completes one that also has acceleration
and angular velocity (any other order of a complete group works the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
import struct
from typing import Iterator

HEADER = 0x55
ACC, GYRO, ANGLE, QUAT = 0x51, 0x52, 0x53, 0x59
PACKET_LEN = 11
KNOWN_TYPES = frozenset((0x50, ACC, GYRO, ANGLE, 0x54, 0x55, 0x56, 0x57, 0x58, QUAT, 0x5A))
G_M_S2 = 9.8                     # the manual's g
ACC_FULL_SCALE_M_S2 = 16.0 * G_M_S2
GYRO_FULL_SCALE_RAD_S = math.radians(2000.0)
ANGLE_FULL_SCALE_RAD = math.pi   # 180 deg
#: what one count of each quantity is (the resolution of a reading)
ACC_LSB_M_S2 = ACC_FULL_SCALE_M_S2 / 32768.0
GYRO_LSB_RAD_S = GYRO_FULL_SCALE_RAD_S / 32768.0
QUAT_LSB = 1.0 / 32768.0
#: the rates the device offers (Hz), and its default baud rate / the one 200 Hz needs
RATES_HZ = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 125.0, 200.0)
BAUDS = (4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)


@dataclass(frozen=True)
class Sample:
    """One decoded sample: SI units, sensor axes (quaternion w first)."""

    acc_m_s2: tuple[float, float, float]
    gyro_rad_s: tuple[float, float, float]
    quat_wxyz: tuple[float, float, float, float]
    euler_rad: tuple[float, float, float] | None  # roll, pitch, yaw (None: no 0x53 packet)
    temperature_c: float


def _int16(value: float) -> int:
    return max(-32768, min(32767, int(round(value))))


def packet(kind: int, values: tuple[float, float, float, float]) -> bytes:
    """One 11-byte packet of ``kind`` with four raw int16 values (clamped to int16)."""
    body = struct.pack('<BB4h', HEADER, kind, *(_int16(v) for v in values))
    return body + bytes((sum(body) & 0xFF,))


def euler_from_quat(q: tuple[float, float, float, float]) -> tuple[float, float, float]:
    """Roll, pitch, yaw (rad; z-y-x intrinsic) of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return roll, pitch, yaw


def encode_sample(acc_m_s2: tuple[float, ...], gyro_rad_s: tuple[float, ...],
                  quat_wxyz: tuple[float, ...], temperature_c: float = 25.0,
                  voltage_v: float = 5.0, version: int = 0) -> bytes:
    """Return the 44 bytes of one sample: 0x51, 0x52, 0x53, 0x59 packets, in that order.

    Values beyond full scale saturate at the int16 limits, as the device's do.
    """
    a = tuple(v / ACC_FULL_SCALE_M_S2 * 32768.0 for v in acc_m_s2)
    w = tuple(v / GYRO_FULL_SCALE_RAD_S * 32768.0 for v in gyro_rad_s)
    q = tuple(float(v) for v in quat_wxyz)
    if q[0] < 0:  # one of the two equal quaternions: w >= 0
        q = tuple(-v for v in q)
    e = tuple(v / ANGLE_FULL_SCALE_RAD * 32768.0
              for v in euler_from_quat((q[0], q[1], q[2], q[3])))
    return (packet(ACC, (a[0], a[1], a[2], temperature_c * 100.0))
            + packet(GYRO, (w[0], w[1], w[2], voltage_v * 100.0))
            + packet(ANGLE, (e[0], e[1], e[2], version))
            + packet(QUAT, tuple(v * 32768.0 for v in q)))  # type: ignore[arg-type]


class Parser:
    """Bytes in, :class:`Sample` objects out (see the module docstring).

    ``stats``: ``packets`` (good packets), ``bad_checksum``, ``unknown_type``, ``garbage``
    (bytes skipped while looking for a header), ``samples``, ``incomplete`` (quaternion packets
    that arrived without acceleration and angular velocity since the last sample).
    """

    def __init__(self) -> None:
        self.buf = bytearray()
        self.stats = {'packets': 0, 'bad_checksum': 0, 'unknown_type': 0, 'garbage': 0,
                      'samples': 0, 'incomplete': 0}
        self._acc: tuple[float, float, float] | None = None
        self._temp = 0.0
        self._gyro: tuple[float, float, float] | None = None
        self._euler: tuple[float, float, float] | None = None

    def clear(self) -> None:
        """Forget partial data (a reopened port)."""
        self.buf.clear()
        self._acc = self._gyro = self._euler = None

    def feed(self, data: bytes) -> Iterator[Sample]:
        """Consume ``data``; yield every sample it completes."""
        buf = self.buf
        buf.extend(data)
        k = 0
        n = len(buf)
        while True:
            start = buf.find(HEADER, k)
            if start < 0:
                self.stats['garbage'] += n - k
                k = n
                break
            self.stats['garbage'] += start - k
            k = start
            if n - k < PACKET_LEN:
                break
            if buf[k + 1] not in KNOWN_TYPES:  # not a header after all: look further on
                self.stats['unknown_type'] += 1
                k += 1
                continue
            if sum(buf[k:k + 10]) & 0xFF != buf[k + 10]:
                self.stats['bad_checksum'] += 1
                k += 1  # the real header may lie inside: resynchronise byte by byte
                continue
            kind = buf[k + 1]
            v = struct.unpack_from('<4h', buf, k + 2)
            k += PACKET_LEN
            self.stats['packets'] += 1
            sample = self._packet(kind, v)
            if sample is not None:
                yield sample
        del buf[:k]

    def _packet(self, kind: int, v: tuple[int, ...]) -> Sample | None:
        if kind == ACC:
            s = ACC_FULL_SCALE_M_S2 / 32768.0
            self._acc = (v[0] * s, v[1] * s, v[2] * s)
            self._temp = v[3] / 100.0
        elif kind == GYRO:
            s = GYRO_FULL_SCALE_RAD_S / 32768.0
            self._gyro = (v[0] * s, v[1] * s, v[2] * s)
        elif kind == ANGLE:
            s = ANGLE_FULL_SCALE_RAD / 32768.0
            self._euler = (v[0] * s, v[1] * s, v[2] * s)
        elif kind == QUAT:
            if self._acc is None or self._gyro is None:
                self.stats['incomplete'] += 1
                return None
            q = tuple(x / 32768.0 for x in v)
            norm = math.sqrt(sum(x * x for x in q)) or 1.0
            out = Sample(self._acc, self._gyro,
                         (q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm),
                         self._euler, self._temp)
            self._acc = self._gyro = self._euler = None
            self.stats['samples'] += 1
            return out
        return None
