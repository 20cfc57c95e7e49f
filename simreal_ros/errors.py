"""The one exception module of simreal_ros.

Every error the package raises on purpose derives from :class:`SimrealError`, and every message
says what was wrong and how to fix it.
"""

from __future__ import annotations

from typing import Any


class SimrealError(Exception):
    """Base class of all errors raised by simreal_ros."""


class ConfigError(SimrealError):
    """A configuration file or value is invalid.

    The message names the file, the key (dotted path) and what was expected.
    """

    def __init__(self, source: str, key: str, expected: str, got: Any = None,
                 *, has_got: bool = True) -> None:
        self.source = source
        self.key = key
        self.expected = expected
        self.got = got
        where = f'{source}: {key}' if key else source
        detail = f'expected {expected}'
        if has_got:
            detail += f', got {got!r}'
        super().__init__(f'{where}: {detail}')


class PlanError(SimrealError):
    """A launch plan cannot be built from the given arguments."""


class LaunchError(SimrealError):
    """A planned node could not be started or the launch failed."""


class CommandError(SimrealError):
    """A joint command message was rejected (unknown joint, NaN, wrong length)."""


class ModelError(SimrealError):
    """A robot model could not be built (URDF, actuators, scene, overlay)."""


class PolicyError(SimrealError):
    """A policy model could not be loaded or does not match its spec (file, format, shapes)."""


class BagError(SimrealError):
    """A bag cannot be written, read or repaired (exists already, missing, truncated, ...)."""


class BagCorruptError(BagError):
    """A bag is unreadable until ``simreal bag repair`` (damaged, cut short or not closed).

    A file is damaged (a CRC does not match, a record is broken, the file is cut short) or the
    recording was not closed cleanly.

    The ``simreal`` command exits with :data:`EXIT_CORRUPT_INPUT` for it, so a script can tell
    "repair this bag" from bad arguments (exit 2) and from a failed check (exit 1).
    """


#: exit code of the ``simreal`` command when an input bag is unreadable or corrupt
EXIT_CORRUPT_INPUT = 3


class BadDataError(BagError):
    """A bag is readable, but the data a metric would pair is dropped or stalled.

    ``simreal gap`` refuses its joint metrics over such streams (the message names the stream,
    what was wrong, and ``--allow-bad-data``, which computes them marked invalid). The
    ``simreal`` command exits with :data:`EXIT_BAD_DATA` for it.
    """


#: exit code of the ``simreal`` command when a bag's data is too bad for the metric asked for
EXIT_BAD_DATA = 4


class BusError(SimrealError):
    """The servo bus failed: port missing, servo missing or of the wrong model, no answer."""


class PortLostError(BusError):
    """The serial port vanished or failed (adapter unplugged): reconnect."""


class EmulatorError(SimrealError):
    """The virtual servo bus could not be started or did not do what was awaited in time."""
