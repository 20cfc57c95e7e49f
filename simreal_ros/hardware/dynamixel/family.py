"""The Dynamixel family: Protocol 2.0 X-series models, their control tables and units.

``FAMILY`` registers the family for ``bus.family: dynamixel`` (see
:mod:`simreal_ros.hardware.family`). Each model's table is the XM430-W350's
(:mod:`~simreal_ros.hardware.dynamixel.control_table`) with its own defaults and ranges, and
without the items it lacks; addresses are the same across the X series. Values from the
ROBOTIS e-Manual pages (https://emanual.robotis.com/docs/en/dxl/x/<model>/, e.g. ``xl330-m288``):

==========  ======  =======  =============  ==============  =======  ====  ======================
model       number  current  Current Limit  Velocity Limit  voltage  Temp  stall torque
                    unit     max            default (max)   (0.1 V)  (C)
==========  ======  =======  =============  ==============  =======  ====  ======================
XM430-W350  1020    2.69 mA  1193           200 (1023)      95..160  80    4.1 N*m, 2.3 A, 12 V
XM430-W210  1030    2.69 mA  1193           330 (1023)      95..160  80    3.0 N*m, 2.3 A, 12 V
XL430-W250  1060    none     (no item)      265 (1023)      60..140  72    1.5 N*m, 1.4 A, 12 V
XL330-M288  1200    1 mA     1750           445 (2047)      31..70   70    0.52 N*m, 1.47 A, 5 V
==========  ======  =======  =============  ==============  =======  ====  ======================

The XL430-W250 measures no current: it has no Current Limit (38) nor Goal Current (102), its
address 126 is Present Load (0.1 % of the stall torque, signed) and its Operating Modes are
velocity (1), position (3), extended position (4) and PWM (16). The driver runs it in
position mode, its position PID's output is PWM (885 = 100 %), so its gains map to torque
through ``stall torque / 885`` per PWM unit instead of ``torque_per_amp * current unit``, and
the spec's effort limit becomes Goal PWM (which limits the output in every mode). All models
count 4096 ticks per revolution and 0.229 rev/min per velocity unit. Default position PID
gains differ (XM430 P 800, D 0; XL430 P 640, D 4000; XL330 P 400, D 0); the driver writes
its own from the spec's kp/kd anyway.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.family import (
    CURRENT_BASED_POSITION,
    POSITION,
    Item,
    ServoFamily,
    ServoModel,
)

#: the Operating Mode register's value of each mode name the robot spec may use
MODE_REGISTER = {CURRENT_BASED_POSITION: ct.MODE_CURRENT_BASED_POSITION,
                 POSITION: ct.MODE_POSITION}
PWM_FULL_SCALE = 885  # PWM Limit's maximum: 100 % duty
_E_MANUAL = 'https://emanual.robotis.com/docs/en/dxl/x/'


def _table(model_number: int, changes: dict[str, dict[str, int]],
           drop: tuple[str, ...] = (), rename: dict[str, str] | None = None) -> tuple[Item, ...]:
    """Return the XM430-W350 table with ``changes`` (item -> fields), items dropped, renamed."""
    out = []
    for it in ct.ITEMS:
        if it.name in drop:
            continue
        fields: dict[str, Any] = dict(changes.get(it.name, {}))
        if it.name == 'model_number':
            fields['default'] = model_number
        if rename and it.name in rename:
            fields['name'] = rename[it.name]
        out.append(replace(it, **fields) if fields else it)
    return tuple(out)


_CURRENT_MODES = {m: ct.OPERATING_MODES[m] for m in (0, 1, 3, 4, 5, 16)}

XM430_W350 = ServoModel(
    name='XM430-W350', family='dynamixel', model_number=1020,
    items=_table(1020, {}), ticks_per_rev=4096, velocity_unit_rad_s=ct.VELOCITY_UNIT_RAD_S,
    current_unit_a=ct.CURRENT_UNIT_A, torque_per_amp=1.78, stall_torque_nm=4.1,
    modes=_CURRENT_MODES, default_mode=CURRENT_BASED_POSITION,
    e_manual=_E_MANUAL + 'xm430-w350/')

XM430_W210 = ServoModel(
    name='XM430-W210', family='dynamixel', model_number=1030,
    items=_table(1030, {'velocity_limit': {'default': 330}}), ticks_per_rev=4096,
    velocity_unit_rad_s=ct.VELOCITY_UNIT_RAD_S, current_unit_a=ct.CURRENT_UNIT_A,
    torque_per_amp=1.30, stall_torque_nm=3.0, modes=_CURRENT_MODES,
    default_mode=CURRENT_BASED_POSITION, e_manual=_E_MANUAL + 'xm430-w210/')

XL430_W250 = ServoModel(
    name='XL430-W250', family='dynamixel', model_number=1060,
    items=_table(1060, {
        'velocity_limit': {'default': 265},
        'max_voltage_limit': {'default': 140, 'minimum': 60, 'maximum': 140},
        'min_voltage_limit': {'default': 60, 'minimum': 60, 'maximum': 140},
        'temperature_limit': {'default': 72},
        'position_p_gain': {'default': 640},
        'position_d_gain': {'default': 4000},
        'velocity_i_gain': {'default': 1000},
        'present_current': {'minimum': -1000, 'maximum': 1000},
    }, drop=('current_limit', 'goal_current'), rename={'present_current': 'present_load'}),
    ticks_per_rev=4096, velocity_unit_rad_s=ct.VELOCITY_UNIT_RAD_S, current_unit_a=None,
    torque_per_amp=1.07, stall_torque_nm=1.5, load_unit=0.001,
    modes={m: ct.OPERATING_MODES[m] for m in (1, 3, 4, 16)}, default_mode=POSITION,
    e_manual=_E_MANUAL + 'xl430-w250/')

XL330_M288 = ServoModel(
    name='XL330-M288', family='dynamixel', model_number=1200,
    items=_table(1200, {
        'velocity_limit': {'default': 445, 'maximum': 2047},
        'goal_velocity': {'minimum': -2047, 'maximum': 2047},
        'max_voltage_limit': {'default': 70, 'minimum': 31, 'maximum': 70},
        'min_voltage_limit': {'default': 35, 'minimum': 31, 'maximum': 70},
        'temperature_limit': {'default': 70},
        'current_limit': {'default': 1750, 'maximum': 1750},
        'goal_current': {'default': 1750, 'minimum': -1750, 'maximum': 1750},
        'position_p_gain': {'default': 400},
        'velocity_p_gain': {'default': 180},
        'velocity_i_gain': {'default': 1600},
        'present_input_voltage': {'default': 50},
    }),
    ticks_per_rev=4096, velocity_unit_rad_s=ct.VELOCITY_UNIT_RAD_S, current_unit_a=0.001,
    torque_per_amp=0.354, stall_torque_nm=0.52, modes=_CURRENT_MODES,
    default_mode=CURRENT_BASED_POSITION, e_manual=_E_MANUAL + 'xl330-m288/')

MODELS: dict[str, ServoModel] = {m.name: m for m in (XM430_W350, XM430_W210, XL430_W250,
                                                     XL330_M288)}

FAMILY = ServoFamily(
    name='dynamixel', bus='simreal_ros.hardware.dynamixel.bus:DynamixelBus', models=MODELS,
    emulator='simreal_ros.hardware.emulator.emulator:main', protocol=2,
    error_names='simreal_ros.hardware.dynamixel.control_table:describe_hardware_error',
    byte_time_limit_hz='simreal_ros.hardware.dynamixel.wire:byte_time_limit_hz')


def gain_torque_per_amp(model: ServoModel, torque_per_amp: float) -> float:
    """N*m per 1000 units of the position PID's output: the ``torque_per_amp`` of the gains.

    The PID outputs mA on a model with current control (current-based position mode) and PWM
    units (885 = stall torque) on one without, so the control table's gain conversions
    (``kp_to_register`` ...) take this in place of ``torque_per_amp``.
    """
    if model.has_current_control:
        return torque_per_amp
    return model.stall_torque_nm * 1000.0 / PWM_FULL_SCALE


__all__ = ['FAMILY', 'MODELS', 'MODE_REGISTER', 'PWM_FULL_SCALE', 'XL330_M288', 'XL430_W250',
           'XM430_W210', 'XM430_W350', 'gain_torque_per_amp']
