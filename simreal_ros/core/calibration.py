"""Joint calibration of a servo arm, and LeRobot's calibration files in both directions.

A **calibration** says, per joint, how the servo's raw position maps onto the model's joint
angle on one particular arm: the homing offset written into the servo, the range the joint
really moves through on that arm, and the resulting ``zero_tick``/``direction``/``offset_rad``
of the robot spec (``angle = direction * (ticks - zero_tick) * 2*pi / ticks_per_rev +
offset_rad``). It is a YAML file (``simreal calibrate`` writes it)::

    robot: so101
    source: lerobot                 # where the numbers came from
    family: feetech
    joints:
      shoulder_pan: {servo_id: 1, homing_offset: 14, drive_mode: 0,
                     range_min: 1002, range_max: 3074}
      ...

**LeRobot's file** (``~/.cache/huggingface/lerobot/calibration/robots/<robot>/<id>.json``) holds,
per motor name, ``id``, ``drive_mode``, ``homing_offset``, ``range_min`` and ``range_max``: the
offset that LeRobot writes into the servo's Homing Offset register (so that the pose the operator
held in the middle of the range reads half a turn) and the raw range the operator swept, read
with that offset applied. Its degrees mode maps a reading to ``(ticks - mid) * 360 / 4095`` with
``mid`` the middle of the range; the models of this package put the joint zero at the same pose,
so here::

    zero_tick = mid = (range_min + range_max) / 2     (a half tick goes into offset_rad)
    direction = spec direction * (-1 if drive_mode else 1)
    limits    = the spec's, narrowed to [range_min, range_max] converted to rad

The checks are the failures LeRobot's users report: an offset the servo cannot hold (Feetech
STS: 11-bit sign-magnitude, |offset| <= 2047; Dynamixel: |offset| <= 1,044,479), a range outside
one turn or empty, motor names or ids of another arm. Each is one :class:`ConfigError` naming the
file, the motor's key, what was expected and what the file holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
import json
import math
from pathlib import Path
from typing import Any, Mapping

from simreal_ros.core.robot import JointLimits, RobotSpec
from simreal_ros.core.validate import Section, load_yaml_mapping
from simreal_ros.errors import ConfigError

#: the largest homing offset each servo family's register holds (ticks): Feetech STS's Homing
#: Offset (address 31) is 11 bits plus a sign bit; Dynamixel X's Homing Offset (address 20) is
#: limited to +-1,044,479 by the e-Manual
MAX_HOMING_OFFSET = {'feetech': 2047, 'dynamixel': 1_044_479}
#: LeRobot's full-turn scale in its degrees mode (``max_res``): 4095, not 4096
LEROBOT_MAX_RES = 4095
LEROBOT_FIELDS = ('id', 'drive_mode', 'homing_offset', 'range_min', 'range_max')


@dataclass(frozen=True)
class JointCalibration:
    """One joint's calibration, in the servo's raw ticks as LeRobot records them."""

    name: str
    servo_id: int
    homing_offset: int
    drive_mode: int
    range_min: int
    range_max: int

    @property
    def mid_tick(self) -> float:
        """The middle of the swept range: the joint's zero (ticks, may be a half tick)."""
        return (self.range_min + self.range_max) / 2.0


@dataclass(frozen=True)
class Calibration:
    """The calibration of every joint of one robot, in robot order."""

    robot: str
    family: str
    source: str
    joints: tuple[JointCalibration, ...]

    def by_name(self) -> dict[str, JointCalibration]:
        """Return the joints' calibrations keyed by joint name."""
        return {j.name: j for j in self.joints}


def _check_joint(robot: RobotSpec, src: str, key: str, name: str, sid: int, offset: int,
                 drive_mode: int, lo: int, hi: int, id_key: str = 'id') -> JointCalibration:
    """Validate one joint's raw numbers against the robot and its servo family."""
    js = robot.joints[robot.index(name)]
    if sid != js.servo.servo_id:
        raise ConfigError(src, f'{key}.{id_key}', f'servo id {js.servo.servo_id} (the id of joint '
                          f'{name} in {robot.name})', sid)
    limit = MAX_HOMING_OFFSET[robot.bus_family]
    if abs(offset) > limit:
        raise ConfigError(src, f'{key}.homing_offset', f'an offset within +-{limit} ticks (the '
                          f'largest the {robot.bus_family} Homing Offset register holds; '
                          f'recalibrate with the offsets reset to 0 first)', offset)
    if drive_mode not in (0, 1):
        raise ConfigError(src, f'{key}.drive_mode', '0 or 1', drive_mode)
    top = js.servo.ticks_per_rev - 1
    for field_name, v in (('range_min', lo), ('range_max', hi)):
        if not 0 <= v <= top:
            raise ConfigError(src, f'{key}.{field_name}', f'a position within [0, {top}] '
                              f'ticks', v)
    if not lo < hi:
        raise ConfigError(src, f'{key}.range_max', f'a position > range_min ({lo})', hi)
    return JointCalibration(name, sid, offset, drive_mode, lo, hi)


def _check_names(robot: RobotSpec, src: str, names: list[str], what: str) -> None:
    """Fail unless the file names exactly the robot's joints (a file of another arm)."""
    if sorted(names) != sorted(robot.joint_names):
        raise ConfigError(src, what, f'the joints of {robot.name} '
                          f'({", ".join(robot.joint_names)})', ', '.join(names) or 'none')


def _integer(raw: Any, src: str, key: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ConfigError(src, key, 'an integer', raw)
    return raw


def from_lerobot(path: str | Path, robot: RobotSpec) -> Calibration:
    """Read LeRobot's calibration JSON of ``robot`` (see the module docstring)."""
    p = Path(path)
    src = str(p)
    if not p.is_file():
        raise ConfigError(src, '', 'an existing LeRobot calibration file (JSON)', 'no such file')
    try:
        data = json.loads(p.read_bytes().decode('utf-8'))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(src, '', 'a LeRobot calibration file (JSON)',
                          f'not JSON ({str(exc).splitlines()[0]})') from None
    if not isinstance(data, dict):
        raise ConfigError(src, '', 'a JSON object of motors', type(data).__name__)
    _check_names(robot, src, list(data), 'motors')
    out = []
    for js in robot.joints:
        motor = data[js.name]
        if not isinstance(motor, dict):
            raise ConfigError(src, js.name, 'an object with ' + ', '.join(LEROBOT_FIELDS),
                              motor)
        missing = [f for f in LEROBOT_FIELDS if f not in motor]
        if missing:
            raise ConfigError(src, f'{js.name}.{missing[0]}', 'this key to be present',
                              'missing')
        v = {f: _integer(motor[f], src, f'{js.name}.{f}') for f in LEROBOT_FIELDS}
        out.append(_check_joint(robot, src, js.name, js.name, v['id'], v['homing_offset'],
                                v['drive_mode'], v['range_min'], v['range_max']))
    return Calibration(robot.name, robot.bus_family, 'lerobot', tuple(out))


def to_lerobot(cal: Calibration) -> dict[str, dict[str, int]]:
    """Return LeRobot's calibration JSON object of ``cal`` (inverse of :func:`from_lerobot`)."""
    return {j.name: {'id': j.servo_id, 'drive_mode': j.drive_mode,
                     'homing_offset': j.homing_offset, 'range_min': j.range_min,
                     'range_max': j.range_max} for j in cal.joints}


def from_spec(robot: RobotSpec) -> Calibration:
    """Return the calibration a spec implies on servos that hold no homing offset.

    The range is the spec's joint limits converted to ticks (rounded inward), so exporting it
    gives LeRobot the same range this stack enforces.
    """
    out = []
    for js in robot.joints:
        s = js.servo
        a, b = (s.zero_tick + s.direction * (q - s.offset_rad) * s.ticks_per_rev
                / (2.0 * math.pi) for q in (js.limits.lower, js.limits.upper))
        lo, hi = math.ceil(min(a, b)), math.floor(max(a, b))
        top = s.ticks_per_rev - 1
        out.append(JointCalibration(js.name, s.servo_id, 0, 0, max(lo, 0), min(hi, top)))
    return Calibration(robot.name, robot.bus_family, 'spec', tuple(out))


def load_calibration(path: str | Path, robot: RobotSpec) -> Calibration:
    """Read a calibration YAML written by :func:`calibration_text` for ``robot``."""
    p = Path(path)
    top = Section(load_yaml_mapping(p), str(p))
    src = str(p)
    name = top.string('robot')
    if name != robot.name:
        raise ConfigError(src, 'robot', f'{robot.name} (the robot being calibrated)', name)
    family = top.string('family', robot.bus_family)
    if family != robot.bus_family:
        raise ConfigError(src, 'family', f'{robot.bus_family} (bus.family of {robot.name})',
                          family)
    source = top.string('source', 'unknown')
    joints = top.section('joints')
    names = [str(k) for k in joints.data]
    _check_names(robot, src, names, 'joints')
    out = []
    for js in robot.joints:
        j = joints.section(js.name)
        out.append(_check_joint(robot, src, j.key, js.name, j.integer('servo_id'),
                                j.integer('homing_offset', 0), j.integer('drive_mode', 0),
                                j.integer('range_min'), j.integer('range_max'), 'servo_id'))
        j.reject_unknown()
    top.reject_unknown()
    return Calibration(robot.name, family, source, tuple(out))


def calibration_text(cal: Calibration, header: str) -> str:
    """Return the calibration YAML of ``cal``, its ``# header`` saying where it came from."""
    lines = [f'# {header}', f'robot: {cal.robot}', f'family: {cal.family}',
             f'source: {cal.source}', 'joints:']
    for j in cal.joints:
        lines.append(f'  {j.name}: {{servo_id: {j.servo_id}, homing_offset: {j.homing_offset}, '
                     f'drive_mode: {j.drive_mode}, range_min: {j.range_min}, '
                     f'range_max: {j.range_max}}}')
    return '\n'.join(lines) + '\n'


def apply_calibration(robot: RobotSpec, cal: Calibration) -> RobotSpec:
    """Return ``robot`` with each joint's zero, direction and limits from ``cal``.

    The zero is the middle of the swept range (its half tick in ``offset_rad``); the limits are
    the spec's narrowed to the swept range, so a goal outside what this arm can reach is
    clamped the same way the spec's limits are. A range that does not overlap the spec's
    limits, or that leaves ``home`` outside, is a ConfigError naming the joint.
    """
    by_name = cal.by_name()
    joints = []
    for js in robot.joints:
        c = by_name[js.name]
        s = js.servo
        zero = math.floor(c.mid_tick)
        direction = s.direction * (-1 if c.drive_mode else 1)
        rad_per_tick = 2.0 * math.pi / s.ticks_per_rev
        offset = -direction * (c.mid_tick - zero) * rad_per_tick
        servo = replace(s, zero_tick=zero, direction=direction, offset_rad=offset)
        ends = sorted(servo.ticks_to_rad(t) for t in (c.range_min, c.range_max))
        lower, upper = max(js.limits.lower, ends[0]), min(js.limits.upper, ends[1])
        src = f'calibration of {robot.name}'
        if not lower < upper:
            raise ConfigError(src, f'{js.name}.range', f'a range overlapping the spec limits '
                              f'[{js.limits.lower}, {js.limits.upper}] rad',
                              f'[{ends[0]:.3f}, {ends[1]:.3f}] rad')
        if not lower <= js.home <= upper:
            raise ConfigError(src, f'{js.name}.range', f'a range holding home ({js.home} rad)',
                              f'[{lower:.3f}, {upper:.3f}] rad')
        limits = JointLimits(lower, upper, js.limits.velocity, js.limits.effort)
        joints.append(replace(js, servo=servo, limits=limits))
    return replace(robot, joints=tuple(joints))


def joint_angles(cal: Calibration, ticks: Mapping[str, int]) -> dict[str, float]:
    """Return LeRobot's degrees-mode reading of raw ``ticks``, in rad (for cross-checks)."""
    out = {}
    for j in cal.joints:
        sign = -1.0 if j.drive_mode else 1.0
        out[j.name] = sign * (ticks[j.name] - j.mid_tick) * 2.0 * math.pi / LEROBOT_MAX_RES
    return out
