"""The XM430-W350 control table subset (Protocol 2.0) and the unit conversions of its registers.

Addresses, sizes, access and defaults follow the public Dynamixel e-Manual for the XM430-W350.
The other X-series models (:mod:`simreal_ros.hardware.dynamixel.family`) are this table with
their own defaults, ranges and units, and without the items they lack (``ITEMS`` and the unit
constants below are the XM430-W350's, the default model).
EEPROM items (address < 64) can only be written with torque disabled (else Access Error).

Gain conversion (documented in docs/hardware.md): the stack drives the servos in current-based
position mode (operating mode 5), where the position PID's output is a current. With
``E`` the position error in ticks and ``W`` the velocity in ticks per millisecond, the current
command in mA is ``P/128 * E + I/65536 * sum(E) + D/16 * W`` (derivative on the measurement) and
the output torque is ``current * torque_per_amp``. Hence the SI gains of the robot spec map to
registers as::

    kp [N*m/rad]   = P/128 * ticks_per_rad * torque_per_amp / 1000
    kd [N*m*s/rad] = D/16  * ticks_per_rad / 1000 * torque_per_amp / 1000

so the emulator, turning registers back into a torque law, reproduces the sim bridge's PD servo
``kp * (q_target - q) - kd * qdot`` up to the integer rounding of the registers.
"""

from __future__ import annotations

import math

from simreal_ros.hardware.family import Item as Item  # re-exported: every family's item type

MODEL_NUMBER_XM430_W350 = 1020
FIRMWARE_VERSION = 48


ITEMS: tuple[Item, ...] = (
    Item('model_number', 0, 2, False, MODEL_NUMBER_XM430_W350),
    Item('model_information', 2, 4, False, 0),
    Item('firmware_version', 6, 1, False, FIRMWARE_VERSION),
    Item('id', 7, 1, True, 1, minimum=0, maximum=252),
    Item('baud_rate', 8, 1, True, 1, minimum=0, maximum=7),
    Item('return_delay_time', 9, 1, True, 250, minimum=0, maximum=254),
    Item('drive_mode', 10, 1, True, 0, minimum=0, maximum=13),
    Item('operating_mode', 11, 1, True, 3),
    Item('secondary_id', 12, 1, True, 255, minimum=0, maximum=255),
    Item('protocol_type', 13, 1, True, 2, minimum=1, maximum=2),
    Item('homing_offset', 20, 4, True, 0, signed=True, minimum=-1044479, maximum=1044479),
    Item('moving_threshold', 24, 4, True, 10, minimum=0, maximum=1023),
    Item('temperature_limit', 31, 1, True, 80, minimum=0, maximum=100),
    Item('max_voltage_limit', 32, 2, True, 160, minimum=95, maximum=160),
    Item('min_voltage_limit', 34, 2, True, 95, minimum=95, maximum=160),
    Item('pwm_limit', 36, 2, True, 885, minimum=0, maximum=885),
    Item('current_limit', 38, 2, True, 1193, minimum=0, maximum=1193),
    Item('velocity_limit', 44, 4, True, 200, minimum=0, maximum=1023),
    Item('max_position_limit', 48, 4, True, 4095, minimum=0, maximum=4095),
    Item('min_position_limit', 52, 4, True, 0, minimum=0, maximum=4095),
    Item('shutdown', 63, 1, True, 52, minimum=0, maximum=255),
    Item('torque_enable', 64, 1, True, 0, minimum=0, maximum=1),
    Item('led', 65, 1, True, 0, minimum=0, maximum=1),
    Item('status_return_level', 68, 1, True, 2, minimum=0, maximum=2),
    Item('registered_instruction', 69, 1, False, 0),
    Item('hardware_error_status', 70, 1, False, 0),
    Item('velocity_i_gain', 76, 2, True, 1920, minimum=0, maximum=16383),
    Item('velocity_p_gain', 78, 2, True, 100, minimum=0, maximum=16383),
    Item('position_d_gain', 80, 2, True, 0, minimum=0, maximum=16383),
    Item('position_i_gain', 82, 2, True, 0, minimum=0, maximum=16383),
    Item('position_p_gain', 84, 2, True, 800, minimum=0, maximum=16383),
    Item('feedforward_2nd_gain', 88, 2, True, 0, minimum=0, maximum=16383),
    Item('feedforward_1st_gain', 90, 2, True, 0, minimum=0, maximum=16383),
    # Bus Watchdog: 20 ms units, 0 = off; the servo itself writes -1 when it expired (see
    # BUS_WATCHDOG_EXPIRED), so it reads as a signed byte; the host may write 0..127 only
    Item('bus_watchdog', 98, 1, True, 0, signed=True, minimum=0, maximum=127),
    Item('goal_pwm', 100, 2, True, 885, signed=True, minimum=-885, maximum=885),
    Item('goal_current', 102, 2, True, 1193, signed=True, minimum=-1193, maximum=1193),
    Item('goal_velocity', 104, 4, True, 0, signed=True, minimum=-200, maximum=200),
    Item('profile_acceleration', 108, 4, True, 0, minimum=0, maximum=32767),
    Item('profile_velocity', 112, 4, True, 0, minimum=0, maximum=32767),
    Item('goal_position', 116, 4, True, 2048, signed=True, minimum=-1048575, maximum=1048575),
    Item('realtime_tick', 120, 2, False, 0),
    Item('moving', 122, 1, False, 0),
    Item('moving_status', 123, 1, False, 0),
    Item('present_pwm', 124, 2, False, 0, signed=True),
    Item('present_current', 126, 2, False, 0, signed=True),
    Item('present_velocity', 128, 4, False, 0, signed=True),
    Item('present_position', 132, 4, False, 2048, signed=True),
    Item('velocity_trajectory', 136, 4, False, 0, signed=True),
    Item('position_trajectory', 140, 4, False, 0, signed=True),
    Item('present_input_voltage', 144, 2, False, 120),
    Item('present_temperature', 146, 1, False, 25),
    # Indirect Data 1: a GELLO-style leader wires its button here (or maps the register of an
    # external port into it); the leader node reads it as its deadman (docs/teleop.md)
    Item('indirect_data_1', 224, 1, True, 0, minimum=0, maximum=255),
)

BY_NAME: dict[str, Item] = {it.name: it for it in ITEMS}
TABLE_SIZE = 225  # bytes 0..224 (147..223 unmodelled: they read as 0, writes are refused)

OPERATING_MODES = {0: 'current', 1: 'velocity', 3: 'position', 4: 'extended position',
                   5: 'current-based position', 16: 'pwm'}
MODE_CURRENT = 0
MODE_POSITION = 3
MODE_EXTENDED_POSITION = 4
MODE_CURRENT_BASED_POSITION = 5

BAUD_RATES = {0: 9600, 1: 57600, 2: 115200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000,
              6: 4_000_000, 7: 4_500_000}

#: Bus Watchdog's unit (s) and the value the servo writes when it expired
BUS_WATCHDOG_UNIT_S = 0.02
BUS_WATCHDOG_EXPIRED = -1
#: the goal items a servo refuses (Data Range Error) while its Bus Watchdog has expired
GOAL_ITEMS = ('goal_pwm', 'goal_current', 'goal_velocity', 'goal_position')

# hardware error status bits
HW_INPUT_VOLTAGE = 0x01
HW_OVERHEATING = 0x04
HW_ENCODER = 0x08
HW_ELECTRICAL_SHOCK = 0x10
HW_OVERLOAD = 0x20
HW_ERROR_NAMES = {HW_INPUT_VOLTAGE: 'input voltage', HW_OVERHEATING: 'overheating',
                  HW_ENCODER: 'motor encoder', HW_ELECTRICAL_SHOCK: 'electrical shock',
                  HW_OVERLOAD: 'overload'}

# units of the registers
CURRENT_UNIT_A = 0.00269           # present/goal current: 2.69 mA
VELOCITY_UNIT_RAD_S = 0.229 * 2.0 * math.pi / 60.0   # 0.229 rev/min
PROFILE_ACC_UNIT_RAD_S2 = 214.577 * 2.0 * math.pi / 3600.0  # 214.577 rev/min^2
VOLTAGE_UNIT_V = 0.1
RETURN_DELAY_UNIT_S = 2e-6
P_GAIN_DIVISOR = 128.0
I_GAIN_DIVISOR = 65536.0
D_GAIN_DIVISOR = 16.0


def describe_hardware_error(bits: int) -> str:
    """Names of the set bits of Hardware Error Status, e.g. ``'overload, overheating'``."""
    names = [name for bit, name in HW_ERROR_NAMES.items() if bits & bit]
    return ', '.join(names) if names else 'none'


def ticks_per_rad(ticks_per_rev: int) -> float:
    """Return encoder ticks per radian."""
    return ticks_per_rev / (2.0 * math.pi)


def kp_to_register(kp: float, ticks_per_rev: int, torque_per_amp: float) -> int:
    """Position P gain register for a stiffness ``kp`` (N*m/rad)."""
    per_reg = ticks_per_rad(ticks_per_rev) * torque_per_amp / 1000.0 / P_GAIN_DIVISOR
    return int(round(kp / per_reg))


def register_to_kp(reg: int, ticks_per_rev: int, torque_per_amp: float) -> float:
    """Stiffness (N*m/rad) of a Position P gain register value."""
    return reg / P_GAIN_DIVISOR * ticks_per_rad(ticks_per_rev) * torque_per_amp / 1000.0


def kd_to_register(kd: float, ticks_per_rev: int, torque_per_amp: float) -> int:
    """Position D gain register for a damping ``kd`` (N*m*s/rad)."""
    per_reg = ticks_per_rad(ticks_per_rev) / 1000.0 * torque_per_amp / 1000.0 / D_GAIN_DIVISOR
    return int(round(kd / per_reg))


def register_to_kd(reg: int, ticks_per_rev: int, torque_per_amp: float) -> float:
    """Damping (N*m*s/rad) of a Position D gain register value."""
    return reg / D_GAIN_DIVISOR * ticks_per_rad(ticks_per_rev) / 1000.0 * torque_per_amp / 1000.0


def ki_from_register(reg: int, ticks_per_rev: int, torque_per_amp: float,
                     dt_s: float) -> float:
    """Integral gain (N*m/(rad*s)) of a Position I gain register, summed every ``dt_s``."""
    return reg / I_GAIN_DIVISOR * ticks_per_rad(ticks_per_rev) * torque_per_amp / 1000.0 / dt_s


def effort_to_current_register(effort: float, torque_per_amp: float) -> int:
    """Goal/limit current register for a torque (N*m)."""
    return int(round(effort / torque_per_amp / CURRENT_UNIT_A))


def to_unsigned(value: int, size: int) -> int:
    """Two's complement of ``value`` in ``size`` bytes."""
    return value & ((1 << (8 * size)) - 1)


def to_signed(value: int, size: int) -> int:
    """Interpret ``size`` bytes ``value`` as two's complement."""
    bits = 8 * size
    return value - (1 << bits) if value & (1 << (bits - 1)) else value
