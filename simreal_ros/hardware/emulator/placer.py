"""The emulator's scene, placed from its standard input: ``place <object> <x> <y> <z>``.

``simreal emulate --scene NAME`` puts the scene's floor, light and objects in the virtual
robot's world, so its cameras (``--camera``) see them. Each line ``place <object> <x> <y> <z>``
(m, world frame; :func:`simreal_ros.sim.placement.parse_place_line`) read on standard input
moves a free object of the scene, as a person puts the object down in front of a real robot;
the move is made by the emulator's own loop between two physics steps (never from the reading
thread, which would race ``mj_step``) and answered on standard output with
``placed <object> <x> <y> <z>`` (6 decimals), or ``error: <reason>`` for a line it cannot use.
``simreal eval`` places the visual reach task's ball this way
(:class:`~simreal_ros.hardware.emulator.virtual_bus.EmulatorProcess` ``.place``).

:class:`ScenePlacer` is one of the bus emulator's devices (:class:`~simreal_ros.hardware.
emulator.pty.Device`): ticked by the loop after every batch of steps; it has no port. Its base,
:class:`LineDevice`, serves every device driven by lines on standard input (the leader's
operator on cue too, :mod:`~simreal_ros.hardware.emulator.operator`).
"""

from __future__ import annotations

import math
import queue
import sys
import threading
from typing import Any, Callable, TextIO

from simreal_ros.sim.placement import format_placed, movable_objects, parse_place_line


def read_lines(stream: TextIO, parse: Callable[[str], Any], pending: queue.SimpleQueue[Any],
               echo: Callable[[str], None]) -> None:
    """Queue ``parse(line)`` of every non-blank line of ``stream`` until it ends.

    A line that does not parse is echoed as ``error: ...`` and skipped (the emulator goes on).
    """
    for line in stream:
        if not line.strip():
            continue
        try:
            pending.put(parse(line))
        except ValueError as exc:
            echo(f'error: {exc}')


class LineDevice:
    """A device of the bus emulator driven by lines on standard input; it has no port.

    A thread queues what ``parse`` makes of each line (:func:`read_lines`); the emulator's loop
    applies them in :meth:`tick`, between two physics steps (never from the reading thread,
    which would race ``mj_step``). ``read=False``: another device reads the lines and hands
    this one its items (``pending``).
    """

    def __init__(self, parse: Callable[[str], Any], echo: Callable[[str], None],
                 stream: TextIO | None, read: bool, name: str) -> None:
        self.echo = echo
        self.pending: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=read_lines, name=name, daemon=True,
                                       args=(stream or sys.stdin, parse, self.pending, echo))
        if read:
            self.thread.start()

    def plug(self) -> None:
        """No port to open."""

    def unplug(self) -> None:
        """No port to close (what the lines set stays when the bus is unplugged)."""

    def tick(self, now: float) -> float:
        """Apply what was asked since the last tick; never asks to be woken."""
        while True:
            try:
                item = self.pending.get_nowait()
            except queue.Empty:
                return math.inf
            self.apply(item)

    def apply(self, item: Any) -> None:
        """Carry out one parsed line (in the emulator's loop)."""
        raise NotImplementedError


class ScenePlacer(LineDevice):
    """Reads ``place`` lines on a thread; the emulator's loop applies them in :meth:`tick`."""

    def __init__(self, arm: Any, echo: Callable[[str], None],
                 stream: TextIO | None = None, read: bool = True) -> None:
        self.arm = arm
        self.movable = movable_objects(arm.scene)
        self.placed = 0
        # read=False: another device reads the lines and hands ``place`` ones over
        # (hardware/emulator/hidden_world.py, a floating-base robot's)
        super().__init__(lambda line: parse_place_line(line, self.movable), echo, stream, read,
                         'scene_placer')

    def apply(self, item: tuple[str, tuple[float, float, float]]) -> None:
        """Place one object and answer ``placed ...``."""
        name, xyz = item
        self.arm.sim.place_object(name, xyz)
        self.placed += 1
        self.echo(format_placed(name, xyz))
