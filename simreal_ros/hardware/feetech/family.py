"""The Feetech family: STS-series models (protocol_end 0), their memory tables and units.

``FAMILY`` registers the family for ``bus.family: feetech`` (see
:mod:`simreal_ros.hardware.family`); :mod:`simreal_ros.hardware.feetech` re-exports it. The
model is data only: its memory table is
:data:`simreal_ros.hardware.feetech.control_table.ITEMS` (sign-magnitude items, EEPROM below
address 40), and neither the bus nor the SDK is imported here.

=======  ======  ==============  =================  ================  ==================
model    number  position        velocity unit      Present Current   stall torque
=======  ======  ==============  =================  ================  ==================
STS3215  777     4096 steps/rev  1 step/s (1.53     6.5 mA (69, 2)    1.91 N*m at 2.7 A,
                                 mrad/s)                              7.4 V (0.71 N*m/A)
=======  ======  ==============  =================  ================  ==================

The STS3215 measures its current (Present Current, 6.5 mA; the bus's effort is
``current * torque_per_amp``) and its load (Present Load, 0.1 % of the stall torque), but has
no current-control mode: Operating Mode 0 position, 1 constant speed, 2 open-loop PWM, 3 step.
So ``current_control`` is False: ``operating_mode: current_based_position`` and a leader's
gravity compensation are refused at plan time (one ConfigError line), and the driver runs it
in position mode (0).
"""

from __future__ import annotations

from typing import cast

from simreal_ros.hardware.family import POSITION, Item, ServoFamily, ServoModel

# the module itself, not through the package (whose __init__ imports this one)
import simreal_ros.hardware.feetech.control_table as ct

#: the Operating Mode register's value of each mode name the robot spec may use
MODE_REGISTER = {POSITION: ct.MODE_POSITION}

STS3215 = ServoModel(
    name='STS3215', family='feetech', model_number=ct.MODEL_NUMBER_STS3215,
    # the STS table's items have the family Item's fields (name, address, size, writable,
    # default, minimum, maximum) plus sign_bit, and their own EEPROM boundary (40)
    items=cast(tuple[Item, ...], ct.ITEMS), ticks_per_rev=ct.TICKS_PER_REV,
    velocity_unit_rad_s=ct.VELOCITY_UNIT_RAD_S, current_unit_a=ct.CURRENT_UNIT_A,
    torque_per_amp=ct.MODELS['STS3215'].torque_per_amp,
    stall_torque_nm=ct.MODELS['STS3215'].stall_torque_nm,
    modes=dict(ct.OPERATING_MODES), default_mode=POSITION, load_unit=ct.TORQUE_UNIT,
    current_control=False)

MODELS: dict[str, ServoModel] = {m.name: m for m in (STS3215,)}

FAMILY = ServoFamily(
    name='feetech', bus='simreal_ros.hardware.feetech.bus:FeetechBus', models=MODELS,
    emulator='simreal_ros.hardware.emulator.sts_bus:main', protocol=0,
    error_names='simreal_ros.hardware.feetech.control_table:describe_status',
    byte_time_limit_hz='simreal_ros.hardware.feetech.wire:byte_time_limit_hz')

__all__ = ['FAMILY', 'MODELS', 'MODE_REGISTER', 'STS3215']
