"""The real Feetech STS side: the STS packet format, the STS3215 memory table, the bus driver.

``FAMILY`` registers the family for ``bus.family: feetech``
(:mod:`simreal_ros.hardware.family`): bus :class:`~simreal_ros.hardware.feetech.bus.FeetechBus`
(imported only when a driver opens one, with the ``scservo_sdk``), models
:data:`~simreal_ros.hardware.feetech.family.MODELS`, emulator
:func:`simreal_ros.hardware.emulator.sts_bus.main` (named, never imported here).

Nothing here imports :mod:`simreal_ros.hardware.emulator`: the driver talks to whatever is on
the port, a USB adapter or the virtual STS bus, through the vendor's ``scservo_sdk`` alone.
"""

from simreal_ros.hardware.family import (
    bus_class,
    require_current_control,
    resolve_robot,
    resolve_servos,
)
from simreal_ros.hardware.feetech.family import FAMILY, MODELS, STS3215

__all__ = ['FAMILY', 'MODELS', 'STS3215', 'bus_class', 'require_current_control',
           'resolve_robot', 'resolve_servos']
