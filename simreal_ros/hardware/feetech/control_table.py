"""The STS3215 memory table (Feetech STS series, protocol_end 0) and its register units.

Addresses, sizes, defaults and encodings follow Feetech's STS3215 memory table ("STS3215
memory table" / "SMS_STS series memory table" spreadsheet shipped with the FT SCServo Debug
tool and the ``SCServo_Linux``/``FTServo`` SDK headers ``SMS_STS.h``); docs/feetech.md lists
every item with its source and what this stack does with it. Items below address 40 live in
EEPROM: a write changes the working value at once, but is kept over a power cycle only while
Lock (55) is 0, so :class:`~simreal_ros.hardware.feetech.bus.FeetechBus` writes them as
unlock -> write -> lock. Signed items are sign-magnitude (``sign_bit``), not two's
complement.

Units: position in encoder steps (4096 a turn), speed in steps/s, acceleration in 100
steps/s^2, torque and load in 0.1 % of the servo's stall torque, current in 6.5 mA, voltage
in 0.1 V, times of the protections in 10 ms. Feetech documents no unit for the position loop's
P/D/I coefficients; the law this stack assumes for them (and the emulator implements) is in
docs/feetech.md: ``current [6.5 mA] = P/8 * E + D * W`` with ``E`` the error in steps and
``W`` the speed in steps/ms.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

#: the model number an STS3215 reports at address 3 (0x0309)
MODEL_NUMBER_STS3215 = 777

#: first address of the RAM area; everything below is EEPROM
EEPROM_END = 40


@dataclass(frozen=True)
class ServoModel:
    """One servo model of the family: what the bus and the emulator need to know about it."""

    name: str
    model_number: int
    ticks_per_rev: int
    stall_torque_nm: float
    torque_per_amp: float


#: the models this family knows, by the name a robot spec's ``model:`` uses
MODELS: dict[str, ServoModel] = {
    # 7.4 V version: 19.5 kg*cm (1.91 N*m) stall at 2.7 A (Feetech datasheet)
    'STS3215': ServoModel('STS3215', MODEL_NUMBER_STS3215, 4096, 1.91, 0.71),
}
BY_NUMBER: dict[int, ServoModel] = {m.model_number: m for m in MODELS.values()}


def find_model(name: str) -> ServoModel | None:
    """Return the model a spec's ``model:`` names, in any case (LeRobot: ``sts3215``)."""
    return MODELS.get(name.upper())


@dataclass(frozen=True)
class Item:
    """One memory-table item: address, size, access, default, range, sign-magnitude bit."""

    name: str
    address: int
    size: int
    writable: bool
    default: int = 0
    minimum: int | None = None
    maximum: int | None = None
    sign_bit: int | None = None

    @property
    def eeprom(self) -> bool:
        """Whether the item lives in EEPROM (kept over a power cycle only if written unlocked)."""
        return self.address < EEPROM_END


ITEMS: tuple[Item, ...] = (
    Item('firmware_major_version', 0, 1, False, 3),
    Item('firmware_minor_version', 1, 1, False, 9),
    Item('model_number', 3, 2, False, MODEL_NUMBER_STS3215),
    Item('id', 5, 1, True, 1, 0, 253),
    Item('baud_rate', 6, 1, True, 0, 0, 7),
    Item('return_delay_time', 7, 1, True, 0, 0, 254),        # 2 us units
    Item('status_return_level', 8, 1, True, 1, 0, 1),        # 0: only PING/READ answered
    Item('min_position_limit', 9, 2, True, 0, 0, 4095),
    Item('max_position_limit', 11, 2, True, 4095, 0, 4095),
    Item('max_temperature_limit', 13, 1, True, 70, 0, 100),
    Item('max_voltage_limit', 14, 1, True, 80, 0, 254),      # 0.1 V
    Item('min_voltage_limit', 15, 1, True, 40, 0, 254),
    Item('max_torque_limit', 16, 2, True, 1000, 0, 1000),    # 0.1 %, loaded into 48 at power-on
    Item('phase', 18, 1, True, 12, 0, 254),
    Item('unloading_condition', 19, 1, True, 44, 0, 254),    # protection switches (status bits)
    Item('led_alarm_condition', 20, 1, True, 47, 0, 254),
    Item('p_coefficient', 21, 1, True, 32, 0, 254),
    Item('d_coefficient', 22, 1, True, 32, 0, 254),
    Item('i_coefficient', 23, 1, True, 0, 0, 254),
    Item('minimum_startup_force', 24, 2, True, 16, 0, 1000),
    Item('cw_dead_zone', 26, 1, True, 1, 0, 32),
    Item('ccw_dead_zone', 27, 1, True, 1, 0, 32),
    Item('protection_current', 28, 2, True, 500, 0, 2047),  # 6.5 mA
    Item('angular_resolution', 30, 1, True, 1, 1, 3),
    Item('homing_offset', 31, 2, True, 0, -2047, 2047, sign_bit=11),
    Item('operating_mode', 33, 1, True, 0, 0, 3),
    Item('protective_torque', 34, 1, True, 20, 0, 100),      # % after overload protection
    Item('protection_time', 35, 1, True, 200, 0, 254),       # 10 ms
    Item('overload_torque', 36, 1, True, 80, 0, 100),        # % that starts protection_time
    Item('velocity_p_coefficient', 37, 1, True, 10, 0, 100),
    Item('over_current_protection_time', 38, 1, True, 200, 0, 254),  # 10 ms
    Item('velocity_i_coefficient', 39, 1, True, 200, 0, 254),
    Item('torque_enable', 40, 1, True, 0, 0, 128),           # 0, 1, or 128: current pos = 2048
    Item('acceleration', 41, 1, True, 0, 0, 254),            # 100 steps/s^2, 0 = none
    Item('goal_position', 42, 2, True, 0, -32767, 32767, sign_bit=15),
    Item('goal_time', 44, 2, True, 0, 0, 32767),
    Item('goal_velocity', 46, 2, True, 0, -32767, 32767, sign_bit=15),  # steps/s, 0 = max
    Item('torque_limit', 48, 2, True, 1000, 0, 1000),        # 0.1 %
    Item('lock', 55, 1, True, 1, 0, 1),
    Item('present_position', 56, 2, False, 0, sign_bit=15),
    Item('present_velocity', 58, 2, False, 0, sign_bit=15),
    Item('present_load', 60, 2, False, 0, sign_bit=10),     # 0.1 %
    Item('present_voltage', 62, 1, False, 74),
    Item('present_temperature', 63, 1, False, 25),
    Item('async_write_flag', 64, 1, False, 0),
    Item('status', 65, 1, False, 0),
    Item('moving', 66, 1, False, 0),
    Item('present_current', 69, 2, False, 0, sign_bit=15),  # 6.5 mA
)

BY_NAME: dict[str, Item] = {it.name: it for it in ITEMS}
TABLE_SIZE = 71  # bytes 0..70 (unlisted ones read as 0, writes to them are ignored)

#: baud-rate codes (register 6)
BAUD_RATES = {0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800,
              6: 57_600, 7: 38_400}
OPERATING_MODES = {0: 'position', 1: 'constant speed', 2: 'pwm (open loop)', 3: 'step'}
MODE_POSITION = 0
TORQUE_CALIBRATE = 128  # Torque Enable 128: the present position becomes 2048 (homing offset)

# Status (65) bits = the ERROR byte of every status packet; a bit set in Unloading Condition
# (19) makes the servo act on it (docs/feetech.md)
ST_VOLTAGE = 0x01
ST_ANGLE_SENSOR = 0x02
ST_OVERHEAT = 0x04
ST_OVERCURRENT = 0x08
ST_OVERLOAD = 0x20
STATUS_NAMES = {ST_VOLTAGE: 'input voltage', ST_ANGLE_SENSOR: 'angle sensor',
                ST_OVERHEAT: 'overheating', ST_OVERCURRENT: 'over-current',
                ST_OVERLOAD: 'overload'}

TICKS_PER_REV = 4096
VELOCITY_UNIT_RAD_S = 2.0 * math.pi / TICKS_PER_REV     # 1 step/s
ACCELERATION_UNIT_RAD_S2 = 100.0 * VELOCITY_UNIT_RAD_S  # 100 steps/s^2
CURRENT_UNIT_A = 0.0065
TORQUE_UNIT = 0.001   # of the stall torque (torque limits, load)
VOLTAGE_UNIT_V = 0.1
PROTECTION_TIME_UNIT_S = 0.01
RETURN_DELAY_UNIT_S = 2e-6
P_DIVISOR = 8.0
D_DIVISOR = 1.0

#: the sync-read state block of the bus: Present Position (56) .. Present Current (69, 2)
STATE_ADDR = BY_NAME['present_position'].address
STATE_LEN = BY_NAME['present_current'].address + 2 - STATE_ADDR  # 15 bytes


def describe_status(bits: int) -> str:
    """Names of the set bits of Status, e.g. ``'overload, overheating'``."""
    names = [name for bit, name in STATUS_NAMES.items() if bits & bit]
    return ', '.join(names) if names else 'none'


def ticks_per_rad(ticks_per_rev: int = TICKS_PER_REV) -> float:
    """Return encoder steps per radian."""
    return ticks_per_rev / (2.0 * math.pi)


def register_to_kp(reg: int, ticks_per_rev: int, torque_per_amp: float) -> float:
    """Stiffness (N*m/rad) of a P coefficient (the law of the module docstring)."""
    return reg / P_DIVISOR * ticks_per_rad(ticks_per_rev) * CURRENT_UNIT_A * torque_per_amp


def kp_to_register(kp: float, ticks_per_rev: int, torque_per_amp: float) -> int:
    """P coefficient for a stiffness ``kp`` (N*m/rad)."""
    return int(round(kp / register_to_kp(1, ticks_per_rev, torque_per_amp)))


def register_to_kd(reg: int, ticks_per_rev: int, torque_per_amp: float) -> float:
    """Damping (N*m*s/rad) of a D coefficient."""
    return (reg / D_DIVISOR * ticks_per_rad(ticks_per_rev) / 1000.0 * CURRENT_UNIT_A
            * torque_per_amp)


def kd_to_register(kd: float, ticks_per_rev: int, torque_per_amp: float) -> int:
    """D coefficient for a damping ``kd`` (N*m*s/rad)."""
    return int(round(kd / register_to_kd(1, ticks_per_rev, torque_per_amp)))


def ki_from_register(reg: int, ticks_per_rev: int, torque_per_amp: float, dt_s: float) -> float:
    """Integral gain (N*m/(rad*s)) of an I coefficient, summed every ``dt_s`` (/ 256 per step)."""
    return reg / 256.0 * ticks_per_rad(ticks_per_rev) * CURRENT_UNIT_A * torque_per_amp / dt_s


def effort_to_torque_register(effort: float, stall_torque_nm: float) -> int:
    """Torque Limit / Max Torque Limit (0.1 % of stall) for a torque (N*m), rounded up."""
    return int(math.ceil(effort / stall_torque_nm / TORQUE_UNIT - 1e-9))


def effort_to_current_register(effort: float, torque_per_amp: float) -> int:
    """Protection Current (6.5 mA) for a torque (N*m), rounded up."""
    return int(math.ceil(effort / torque_per_amp / CURRENT_UNIT_A - 1e-9))


__all__ = ['BAUD_RATES', 'BY_NAME', 'BY_NUMBER', 'ITEMS', 'Item', 'MODELS', 'ServoModel',
           'STATE_ADDR', 'STATE_LEN', 'describe_status', 'find_model']
