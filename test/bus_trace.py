"""What the virtual servo bus really measured (its ``--trace``), to check published states."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from simreal_ros.core.robot import RobotSpec
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel.wire import POSITION_OFF, STATE_ADDR, STATE_LEN


def measured_positions(path: Path, robot: RobotSpec) -> list[tuple[int, ...]]:
    """Present Position (ticks, robot order) of every full-state SYNC READ the bus answered."""
    out = []
    ids = [j.servo.servo_id for j in robot.joints]
    for line in path.read_text(encoding='utf-8').splitlines():
        kind, addr, length, _time_ns, *answers = line.split(' ')
        if kind != 'sync_read' or (int(addr), int(length)) != (STATE_ADDR, STATE_LEN):
            continue
        data = {int(sid): bytes.fromhex(hexdata)
                for sid, hexdata in (a.split(':') for a in answers)}
        out.append(tuple(ct.to_signed(int.from_bytes(
            data[sid][POSITION_OFF:POSITION_OFF + 4], 'little'), 4) for sid in ids))
    return out


def to_ticks(robot: RobotSpec, position: Sequence[float]) -> tuple[int, ...]:
    """A published position (rad, robot order) back in encoder ticks (exact: ticks are ints)."""
    return tuple(j.servo.rad_to_ticks(float(q)) for j, q in zip(robot.joints, position,
                                                                 strict=True))


def unmeasured(states: Iterable[tuple[int, ...]],
               measured: list[tuple[int, ...]]) -> list[tuple[int, tuple[int, ...]]]:
    """The states (index, ticks) that are not the servos' measurement after the previous one.

    Each state read must equal one SYNC READ answer the bus sent, in order, and a later one
    than the previous state's: a corrupted value matches none, a stale (late, or repeated)
    answer matches only an earlier one.
    """
    bad = []
    k = 0
    for i, ticks in enumerate(states):
        j = k
        while j < len(measured) and measured[j] != ticks:
            j += 1
        if j == len(measured):
            bad.append((i, ticks))
        else:
            k = j + 1
    return bad
