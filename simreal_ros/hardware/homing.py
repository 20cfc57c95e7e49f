"""A calibration's Homing Offsets on the servos: check them at connect, write what differs.

:func:`sync_homing_offsets` is what the driver does when it was given a calibration
(``calibration:=CAL.yaml``, :mod:`simreal_ros.core.calibration`), through the family-neutral
bus API (:meth:`~simreal_ros.hardware.family.ServoBus.read_homing_offsets` /
:meth:`~simreal_ros.hardware.family.ServoBus.write_homing_offsets`):

1. read every servo's Homing Offset;
2. all equal to the calibration's: one line ``calibration: N servos match FILE``;
3. otherwise write the calibration's offset to those that differ, with their torque off (the
   register is EEPROM), as an **absolute** value: never computed from what the servo holds or
   reads, so connecting any number of times leaves the same offset (a tool that derives the new
   offset from a position that already includes the old one adds them up until the register
   overflows); one line per written servo;
4. read them back: a servo that did not keep its offset is one :class:`BusError` line naming
   the servos, what was written and what they read.

The offsets' range was checked when the calibration was loaded (``MAX_HOMING_OFFSET`` of the
family), so a value the register cannot hold never reaches the bus.
"""

from __future__ import annotations

from typing import Callable

from simreal_ros.core.calibration import Calibration
from simreal_ros.errors import BusError
from simreal_ros.hardware.family import ServoBus


def sync_homing_offsets(bus: ServoBus, cal: Calibration, source: str,
                        log: Callable[[str], object]) -> list[int]:
    """Make the servos' Homing Offsets those of ``cal``; return the servo IDs written.

    ``source`` names the calibration file in the messages; ``log`` gets one line for a match,
    or one per written servo. BusError (one line) if a servo does not keep what was written.
    """
    by_name = cal.by_name()
    joints = bus.robot.joints
    want = [by_name[j.name].homing_offset for j in joints]
    have = bus.read_homing_offsets()
    if tuple(want) == tuple(have):
        log(f'calibration: {len(joints)} servos match {source}')
        return []
    bus.write_homing_offsets(want)
    got = bus.read_homing_offsets()
    lost = [f'servo ID {j.servo.servo_id} ({j.name}): wrote {w}, reads {g}'
            for j, w, g in zip(joints, want, got, strict=True) if w != g]
    if lost:
        raise BusError(f'calibration {source}: the Homing Offset did not stay written: '
                       f'{"; ".join(lost)} (the EEPROM write was refused or lost: check that '
                       f'the servo is not locked, power-cycle it and start again)')
    written = []
    for j, w, h in zip(joints, want, have, strict=True):
        if w != h:
            log(f'calibration: servo ID {j.servo.servo_id} ({j.name}): Homing Offset {h} -> '
                f'{w} ticks (written from {source})')
            written.append(j.servo.servo_id)
    return written
