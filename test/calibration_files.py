"""A calibration of simreal_arm with offsets, a reversed joint and narrowed ranges, for tests.

The emulator's encoders read 2048 at joint angle 0 (the spec's zero_tick); the yaw and roll
joints (base_yaw, forearm_roll, wrist_roll) carry no gravity torque and stay at 0 whatever the
servos do, so their published angle under a calibration is known exactly: with the calibrated
Homing Offset ``h`` the servo reads ``2048 + h`` and the joint reads
``sign * (2048 + h - (range_min + range_max) / 2) * 2 pi / 4096``.
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

# joint: (servo id, homing offset, drive mode, range_min, range_max)
CALIBRATION = {
    'base_yaw': (1, 100, 0, 100, 4000),
    'shoulder_pitch': (2, -50, 0, 100, 3900),
    'elbow_pitch': (3, 0, 0, 100, 3996),
    'forearm_roll': (4, 200, 1, 200, 4000),
    'wrist_pitch': (5, 0, 0, 100, 3996),
    'wrist_roll': (6, -300, 0, 51, 3950),
}
OFFSETS = tuple(v[1] for v in CALIBRATION.values())
#: joints that stay at angle 0 (encoder 2048) without torque: no gravity about their axes
STILL = ('base_yaw', 'forearm_roll', 'wrist_roll')
RAD_PER_TICK = 2 * math.pi / 4096


def expected_angle(joint: str) -> float:
    """The angle the calibrated driver must publish for a STILL joint (see the module)."""
    _sid, h, drive_mode, lo, hi = CALIBRATION[joint]
    sign = -1.0 if drive_mode else 1.0
    return sign * (2048 + h - (lo + hi) / 2.0) * RAD_PER_TICK


def write_calibration(path: Path, robot: str = 'simreal_arm', **edits: tuple) -> Path:
    """Write the calibration YAML (``edits``: joint -> replacement tuple) and return ``path``."""
    joints = {**CALIBRATION, **edits}
    path.write_text(yaml.safe_dump({'robot': robot, 'family': 'dynamixel', 'source': 'test',
                                    'joints': {n: {'servo_id': v[0], 'homing_offset': v[1],
                                                   'drive_mode': v[2], 'range_min': v[3],
                                                   'range_max': v[4]}
                                               for n, v in joints.items()}},
                                   sort_keys=False))
    return path


def write_eeprom(path: Path, offsets: dict[int, int]) -> Path:
    """Write an emulator EEPROM file holding these Homing Offsets (servo id -> ticks)."""
    path.write_text(yaml.safe_dump({'servos': {sid: {'homing_offset': h}
                                               for sid, h in offsets.items()}}))
    return path


def eeprom_offsets(path: Path) -> dict[int, int]:
    """The Homing Offsets an emulator EEPROM file holds (servo id -> ticks)."""
    data = yaml.safe_load(path.read_text())
    return {int(sid): items['homing_offset'] for sid, items in data['servos'].items()}
