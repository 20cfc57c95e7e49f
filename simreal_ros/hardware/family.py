"""Servo families as a layer: protocol + per-model control tables + units, behind one bus API.

A **family** (:class:`ServoFamily`) is one wire protocol with the servo models that speak it:
its ``bus`` (``'module:Class'``, a class with the :class:`ServoBus` API), its ``models``
(name -> :class:`ServoModel`) and optionally its ``emulator`` (``'module:function'``). The
registry :data:`FAMILIES` maps the robot spec's ``bus.family`` to the module that defines the
family as a module-level ``FAMILY``; it is imported only when a spec names it (the planner and
the driver never load a family they do not use, nor its SDK)::

    FAMILIES = {'dynamixel': 'simreal_ros.hardware.dynamixel.family',
                'feetech': 'simreal_ros.hardware.feetech'}

A **model** (:class:`ServoModel`) is everything the stack needs to know about one servo type:
the model number its Model Number register answers (checked at connect), its control table
(:class:`Item` tuples: address, size, access, default, range), the units of its registers
(position ticks per revolution, velocity unit in rad/s, current unit in A or, for a servo
without current sensing, the load unit as a fraction of its stall torque), its nominal
torque per amp, and the operating modes it has. :func:`resolve_servos` maps every joint of a
robot spec to its model, and :func:`resolve_robot` fills what the spec left to the model
(``model_number`` 0, ``torque_per_amp`` 0, ``operating_mode`` ''). Every bad spec is one
:class:`~simreal_ros.errors.ConfigError` line naming the file, the key, what was expected and
what was got: an unknown family, an unknown model name, a model number that contradicts the
model, a servo without current control asked for current-based position control.

Nothing here imports a family's SDK: the models are data, the bus class is imported by
:func:`bus_class` when a driver opens one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import importlib
import math
from typing import Any, Callable, Protocol

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

#: bus.family -> module defining ``FAMILY`` (a :class:`ServoFamily`); add a family here
FAMILIES: dict[str, str] = {
    'dynamixel': 'simreal_ros.hardware.dynamixel.family',
    'feetech': 'simreal_ros.hardware.feetech',
}

#: ServoHealth.bus_watchdog of a servo whose bus watchdog expired (it stopped by itself)
WATCHDOG_EXPIRED = -1

#: the operating modes a robot spec may ask for (``operating_mode``); '' = the model's default
CURRENT_BASED_POSITION = 'current_based_position'
POSITION = 'position'


@dataclass(frozen=True)
class BusState:
    """One sync read: joint positions (rad), velocities (rad/s), efforts (N*m)."""

    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    ticks: tuple[int, ...]


@dataclass(frozen=True)
class ServoHealth:
    """Hardware error bits, temperature (deg C) and torque enable of every servo, robot order."""

    error_bits: tuple[int, ...]
    temperature_c: tuple[int, ...]
    torque_enable: tuple[int, ...] = ()
    #: Bus Watchdog as read (signed: -1 = expired, the servo stopped; 0 = off)
    bus_watchdog: tuple[int, ...] = ()


@dataclass(frozen=True)
class Item:
    """One control-table item: address, size in bytes, access, default, signedness, range."""

    name: str
    address: int
    size: int
    writable: bool
    default: int = 0
    signed: bool = False
    minimum: int | None = None
    maximum: int | None = None

    @property
    def eeprom(self) -> bool:
        """Whether the item lives in EEPROM (written only with torque off; Dynamixel X: < 64)."""
        return self.address < 64


@dataclass(frozen=True)
class ServoModel:
    """One servo model of a family: identity, control table, register units.

    ``current_unit_a`` is the unit of Present/Goal Current (A); ``None`` for a model without
    current sensing, whose register at the same place is Present Load in units of
    ``load_unit`` of its stall torque. ``current_control`` False: the model measures its
    current (effort from Present Current) but has no current-based mode (Feetech STS3215).
    ``modes`` maps the Operating Mode register values it
    accepts to their names; ``default_mode`` is the mode the driver uses unless the spec says.
    """

    name: str
    family: str
    model_number: int
    items: tuple[Item, ...]
    ticks_per_rev: int
    velocity_unit_rad_s: float
    current_unit_a: float | None
    torque_per_amp: float
    stall_torque_nm: float
    modes: dict[int, str]
    default_mode: str
    load_unit: float = 0.001
    e_manual: str = ''
    current_control: bool = True
    by_name: dict[str, Item] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, 'by_name', {it.name: it for it in self.items})

    @property
    def has_current_control(self) -> bool:
        """Whether the model measures and controls its current (current-based modes)."""
        return self.current_unit_a is not None and self.current_control

    @property
    def table_size(self) -> int:
        """Bytes of the modelled control table (0 .. the last item's end)."""
        return max(it.address + it.size for it in self.items)

    def item(self, name: str) -> Item:
        """Return control-table item ``name``; KeyError naming the model if it has none."""
        try:
            return self.by_name[name]
        except KeyError:
            raise KeyError(f'the {self.name} has no {name} register') from None

    def effort_per_unit(self, torque_per_amp: float) -> float:
        """N*m of one unit of Present Current (or Present Load) at ``torque_per_amp``."""
        if self.current_unit_a is not None:
            return self.current_unit_a * torque_per_amp
        return self.load_unit * self.stall_torque_nm


class ServoBus(Protocol):
    """What the driver and leader nodes use of a bus (DynamixelBus has it; so must others).

    Constructed as ``Bus(robot, port, baud, *, return_delay_us=0, latency_timer_ms=16.0,
    read_timeout_s=0.002, servo_velocity_limit=False)``; every value in and out is SI in robot
    (joint) order. Failures are :class:`~simreal_ros.errors.BusError` (the bus answered
    wrongly) and :class:`~simreal_ros.errors.PortLostError` (the port is gone: reopen).
    """

    robot: RobotSpec
    ids: list[int]
    port_name: str
    baud: int
    comm_errors: dict[str, int]

    @property
    def is_open(self) -> bool:
        """Whether the port is open."""

    def open(self) -> None:
        """Open the port."""

    def close(self) -> None:
        """Close the port (errors ignored)."""

    def check_servos(self, timeout_s: float = 1.0) -> None:
        """Ping every servo; one BusError line naming missing IDs and wrong models."""

    def configure(self, torque: bool = True, reboot_on_error: bool = False) -> None:
        """Clear/check hardware errors, write modes, gains, limits; hold; torque."""

    def clear_hardware_errors(self, reboot: bool) -> list[int]:
        """Check hardware errors, reboot those in error if ``reboot``; return rebooted IDs."""

    def read_register(self, sid: int, name: str) -> int:
        """Read one control-table item of servo ``sid``."""

    def read_address(self, sid: int, address: int, size: int) -> int:
        """Read ``size`` bytes at ``address`` of servo ``sid`` once (unsigned)."""

    def read_homing_offsets(self) -> tuple[int, ...]:
        """Homing Offset of every servo (raw ticks, signed), robot order."""

    def write_homing_offsets(self, ticks: tuple[int, ...] | list[int]) -> None:
        """Write these absolute Homing Offsets (robot order), torque off first (EEPROM)."""

    def arm_watchdog(self, units: int, ids: list[int] | None = None) -> None:
        """Arm (``units`` > 0) or clear (0) the servos' own bus watchdog."""

    def read_state(self) -> BusState:
        """One sync read of positions, velocities, efforts."""

    def write_goal(self, position: FloatArray) -> tuple[int, ...]:
        """One sync write of goal positions (rad); return the ticks sent."""

    def set_torque(self, enable: bool) -> None:
        """Enable or disable torque of every servo (verified)."""

    def hold_present(self) -> BusState:
        """Set every goal to the present position."""

    def read_health(self) -> ServoHealth:
        """Hardware errors, temperatures, torque enable, bus watchdog of every servo."""

    def set_current_mode(self) -> None:
        """Switch to current control with goal current 0 (a leader's gravity compensation)."""

    def write_current(self, current_a: FloatArray) -> tuple[int, ...]:
        """One sync write of goal currents (A)."""

    def gains(self) -> list[dict[str, int]]:
        """Register values written at configure, per servo."""


@dataclass(frozen=True)
class ServoFamily:
    """A servo family: its bus, models, emulator, error names and wire limit.

    The bus class, the emulator's entry point, the function naming the servos' hardware error
    bits and the one giving the bus's byte-time limit are ``'module:attr'`` strings, imported
    when used.
    """

    name: str
    bus: str
    models: dict[str, ServoModel]
    emulator: str = ''
    protocol: int = 0
    #: ``f(bits) -> str``: the servo's hardware error / status bits in words
    error_names: str = ''
    #: ``f(n_servos, baud, return_delay_s=) -> float``: read+write cycles/s the wire allows
    byte_time_limit_hz: str = ''

    def model(self, name: str) -> ServoModel | None:
        """Return the model called ``name``, in any case (LeRobot: ``sts3215``); None if none."""
        model = self.models.get(name)
        if model is None:
            model = next((m for k, m in self.models.items() if k.upper() == name.upper()), None)
        return model

    def by_number(self, model_number: int) -> ServoModel | None:
        """Return the model whose Model Number register reads ``model_number``."""
        for m in self.models.values():
            if m.model_number == model_number:
                return m
        return None


def _attr(ref: str) -> Any:
    module, _, attr = ref.partition(':')
    return getattr(importlib.import_module(module), attr)


def get_family(name: str, source: str = 'bus.family') -> ServoFamily:
    """Return the registered family ``name``; ConfigError naming the known ones otherwise.

    ``source`` is the file the name came from (for the message).
    """
    module = FAMILIES.get(name)
    if module is None:
        raise ConfigError(source, 'bus.family', f'one of {", ".join(sorted(FAMILIES))}', name)
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not module.startswith(exc.name):
            raise
        raise ConfigError(source, 'bus.family', f'a servo family this installation ships (the '
                          f'{name} family, module {module}, is not installed)', name) from None
    family = getattr(mod, 'FAMILY', None)
    if not isinstance(family, ServoFamily):
        raise ConfigError(source, 'bus.family', f'a family module defining FAMILY = '
                          f'ServoFamily(...) ({module} does not)', name)
    return family


def _no_current(model: ServoModel) -> str:
    """Return what a model without current control lacks (for a message)."""
    if model.current_unit_a is None:
        return 'no current sensing'
    return 'no current-control mode'


def resolve_servos(robot: RobotSpec) -> tuple[ServoModel, ...]:
    """Map every joint of ``robot`` to its :class:`ServoModel`, in robot order.

    One ConfigError line for an unknown family or model, a ``model_number`` other than the
    model's (0 = from the model), or ``operating_mode: current_based_position`` on a model
    without current control.
    """
    src = str(robot.source)
    family = get_family(robot.bus_family, src)
    out = []
    for k, j in enumerate(robot.joints):
        s = j.servo
        model = family.model(s.model)
        if model is None:
            raise ConfigError(src, f'joints[{k}].model ({j.name})',
                              f'a {family.name} model: {", ".join(sorted(family.models))} '
                              f'(or servo_defaults.model)', s.model)
        if s.model_number not in (0, model.model_number):
            raise ConfigError(src, f'joints[{k}].model_number ({j.name})',
                              f'{model.model_number}, the model number of the {model.name} '
                              f'(or leave it out)', s.model_number)
        if s.operating_mode == CURRENT_BASED_POSITION and not model.has_current_control:
            raise ConfigError(src, f'joints[{k}].operating_mode ({j.name})',
                              f"'{POSITION}': the {model.name} has {_no_current(model)}, so "
                              f'no current-based position control (use a model with it, e.g. '
                              f'XM430 or XL330)', s.operating_mode)
        out.append(model)
    return tuple(out)


def require_current_control(robot: RobotSpec, why: str) -> None:
    """ConfigError (one line) naming the first joint whose model cannot do current control."""
    for k, (j, model) in enumerate(zip(robot.joints, resolve_servos(robot), strict=True)):
        if not model.has_current_control:
            raise ConfigError(str(robot.source), f'joints[{k}].model ({j.name})',
                              f'a model with current control for {why} (the {model.name} has '
                              f'{_no_current(model)})', model.name)


def resolve_robot(robot: RobotSpec) -> RobotSpec:
    """Return ``robot`` with what it left to the servo models filled in (idempotent).

    ``model_number`` 0 -> the model's; ``torque_per_amp`` 0 -> the model's nominal (stall
    torque / stall current); ``operating_mode`` '' -> the model's default.
    """
    models = resolve_servos(robot)
    joints = []
    for j, model in zip(robot.joints, models, strict=True):
        s = j.servo
        servo = replace(s, model_number=s.model_number or model.model_number,
                        torque_per_amp=s.torque_per_amp or model.torque_per_amp,
                        operating_mode=s.operating_mode or model.default_mode)
        joints.append(replace(j, servo=servo))
    return replace(robot, joints=tuple(joints))


def bus_class(robot: RobotSpec) -> Callable[..., ServoBus]:
    """Return the bus class of the robot's family (imports its SDK)."""
    cls: Callable[..., ServoBus] = _attr(get_family(robot.bus_family, str(robot.source)).bus)
    return cls


def error_names(robot: RobotSpec) -> Callable[[int], str]:
    """Return the function naming the hardware error bits of the robot's servos."""
    fn: Callable[[int], str] = _attr(get_family(robot.bus_family, str(robot.source)).error_names)
    return fn


def byte_time_limit_hz(robot: RobotSpec, baud: int, return_delay_s: float) -> float:
    """Return the read+write cycles/s the wire allows the robot's servos at ``baud``.

    One sync read and one sync write of all its servos, in its family's packets.
    """
    fn = _attr(get_family(robot.bus_family, str(robot.source)).byte_time_limit_hz)
    return float(fn(robot.n, baud, return_delay_s=return_delay_s))


def rpm(value: float) -> float:
    """Return rad/s of a speed given in rev/min (the e-Manuals' velocity units)."""
    return value * 2.0 * math.pi / 60.0


__all__ = ['BusState', 'CURRENT_BASED_POSITION', 'FAMILIES', 'Item', 'POSITION', 'ServoBus',
           'ServoFamily', 'ServoHealth', 'ServoModel', 'WATCHDOG_EXPIRED', 'bus_class',
           'byte_time_limit_hz', 'error_names', 'get_family', 'require_current_control',
           'resolve_robot', 'resolve_servos', 'rpm']
