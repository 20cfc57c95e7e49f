"""The sim bridge's ``objects.<name>.position`` parameters: placing scene objects over ROS.

One double-array parameter per free object of the bridge's scene (start value: the scene
file's ``pos``); a set is checked by :func:`simreal_ros.sim.placement.check_position` and
refused with its reason, or applied under the bridge's lock, between two physics steps.
"""

from __future__ import annotations

import threading
from typing import Any

from rcl_interfaces.msg import SetParametersResult
from rclpy.parameter import Parameter

from simreal_ros.sim.placement import check_position, movable_objects, parameter_name
from simreal_ros.sim.scene import Scene


class PlacementParameters:
    """Declares the position parameters on ``node`` and places objects of ``sim`` when set."""

    def __init__(self, node: Any, sim: Any, lock: threading.Lock, scene: Scene | None) -> None:
        self.sim, self.lock = sim, lock
        self.movable = movable_objects(scene)
        self.placements = 0
        for obj in scene.objects if scene is not None else ():
            if obj.name in self.movable:
                node.declare_parameter(parameter_name(obj.name), list(obj.pos))
        if self.movable:
            node.add_on_set_parameters_callback(self._on_set_parameters)

    def _on_set_parameters(self, params: list[Parameter[Any]]) -> SetParametersResult:
        """Place the objects whose position parameter is set; refuse a bad one with why."""
        moves = []
        for p in params:
            name = p.name.removeprefix('objects.').removesuffix('.position')
            if p.name != parameter_name(name):
                continue  # not ours: the node's read-only settings answer for themselves
            try:
                moves.append((name, check_position(name, p.value, self.movable)))
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        with self.lock:  # between two physics steps
            for name, xyz in moves:
                self.sim.place_object(name, xyz)
        self.placements += len(moves)
        return SetParametersResult(successful=True)

    def values(self) -> dict[str, object]:
        """Diagnostics values (none for a scene without free objects)."""
        return {'object_placements': self.placements} if self.movable else {}
