"""Placing a scene's free objects: what ``simreal eval`` does to the world between episodes.

An evaluation of a policy that finds its target through the camera must move the target where
the camera sees it, in the sim bridge's scene and in the virtual robot's (the emulator's). Two
thin doors lead here, one per process, both checked by the functions of this module:

* the sim bridge: the ROS parameter ``objects.<name>.position`` (double array [x, y, z] in m,
  world frame), one per free object of its ``scene:=``; setting it places the object before
  the next physics step, and a bad value is refused with :func:`check_position`'s reason;
* ``simreal emulate --scene NAME``: a line ``place <name> <x> <y> <z>`` on its standard input
  (:func:`parse_place_line`), answered ``placed <name> <x> <y> <z>`` once the emulator's loop
  has moved it, or ``error: ...`` (the operator of a real robot who puts the object down).

:meth:`MujocoSim.place_object <simreal_ros.sim.mujoco.physics.MujocoSim.place_object>` is the
move: the free joint's position set, orientation upright, velocity
zeroed. A ``render_only`` object (:class:`~simreal_ros.sim.scene.SceneObject`) then stays
exactly there (no contacts, gravity compensated); a physical free object falls and collides
from there on. Positions must be finite and within :data:`WORKSPACE_M` of the world origin
(a typo of a unit, mm for m, would put the object out of every camera's view).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from simreal_ros.sim.scene import Scene

#: the farthest an object may be placed from the world origin, per axis (m)
WORKSPACE_M = 5.0
#: the parameter that places object NAME on the sim bridge
PARAMETER = 'objects.{name}.position'


def movable_objects(scene: Scene | None) -> tuple[str, ...]:
    """Return the names of the objects of ``scene`` that can be placed (its free ones)."""
    return tuple(o.name for o in scene.objects if o.free) if scene is not None else ()


def parameter_name(name: str) -> str:
    """Return the sim bridge parameter that places object ``name``."""
    return PARAMETER.format(name=name)


def check_position(name: str, value: Any, movable: Sequence[str]) -> tuple[float, float, float]:
    """Return ``value`` as (x, y, z) m; ValueError saying what was expected and got."""
    if name not in movable:
        raise ValueError(f'no free object {name!r} in the scene '
                         f'(free objects: {", ".join(movable) or "none"})')
    try:
        xyz = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f'{name}: expected [x, y, z] in m, got {value!r}') from None
    if len(xyz) != 3:
        raise ValueError(f'{name}: expected [x, y, z] in m (3 numbers), got {len(xyz)}: '
                         f'{xyz}')
    if not all(math.isfinite(v) and abs(v) <= WORKSPACE_M for v in xyz):
        raise ValueError(f'{name}: expected finite coordinates within {WORKSPACE_M} m of the '
                         f'origin, got {xyz}')
    return xyz[0], xyz[1], xyz[2]


def parse_place_line(line: str, movable: Sequence[str]) -> tuple[str, tuple[float, float, float]]:
    """Parse ``place <name> <x> <y> <z>``; ValueError saying what was expected and got."""
    parts = line.split()
    if len(parts) != 5 or parts[0] != 'place':
        raise ValueError(f'expected "place <object> <x> <y> <z>", got {line.strip()!r}')
    try:
        values = [float(p) for p in parts[2:]]
    except ValueError:
        raise ValueError(f'{parts[1]}: expected three numbers (m), got {parts[2:]}') from None
    return parts[1], check_position(parts[1], values, movable)


def format_placed(name: str, xyz: Sequence[float]) -> str:
    """Return the emulator's answer line to a placement."""
    return f'placed {name} ' + ' '.join(f'{v:.6f}' for v in xyz)

