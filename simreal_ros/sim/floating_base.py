"""The engine-independent part of a floating base: where it starts and which links it needs.

Every engine that simulates a floating base (``base.type: floating``, docs/legged.md) builds
it the same way, from these:

* :func:`check_links` refuses a model whose root link is not ``base_frame`` or that lacks a
  foot: one ModelError naming the robot spec, the key and the links there are;
* :func:`home_pose` is where a reset puts ``base_frame``'s origin: ``(0, 0, base.height_m)``,
  level (quaternion ``(1, 0, 0, 0)``, w first), at rest;
* :func:`origin_velocity` moves a rigid body's velocity from its centre of mass to another
  point of it (engines that report the COM's velocity, PyBullet, give ``BaseState`` the
  link origin's);
* :func:`foot_normal_forces` sums contact normal forces per foot from engine-neutral
  ``(link, normal force)`` pairs.
"""

from __future__ import annotations

from typing import Collection, Iterable

import numpy as np

from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import ModelError
from simreal_ros.sim.backend import FloatArray

LEVEL_WXYZ = (1.0, 0.0, 0.0, 0.0)


def home_pose(robot: RobotSpec) -> tuple[FloatArray, FloatArray]:
    """Return ``base_frame``'s start position (m, world) and orientation (wxyz): level."""
    assert robot.base is not None
    return np.array([0.0, 0.0, robot.base.height_m]), np.array(LEVEL_WXYZ)


def check_links(robot: RobotSpec, links: Collection[str], root: str, root_parent: str,
                kind: str) -> None:
    """Refuse a model ``base_frame`` is not the root link of, or that lacks a foot.

    ``links`` are the model's link (body) names, ``root`` the link ``base_frame`` must be,
    ``root_parent`` the name of the parent ``base_frame`` has in the engine's model ('world'
    for a root), ``kind`` how the error names the model ('URDF', 'MJCF').
    """
    assert robot.base is not None
    names = set(links) - {'world'}
    if robot.base_frame not in names:
        raise ModelError(f'{robot.source}: base_frame {robot.base_frame!r} is not a link of '
                         f'{robot.urdf} (links: {sorted(names)})')
    if root_parent != 'world' or root != robot.base_frame:
        raise ModelError(f'{robot.source}: base_frame {robot.base_frame!r} must be the root '
                         f'link of {robot.urdf} for a floating base (its parent is '
                         f'{root_parent!r})')
    for foot in robot.base.feet:
        if foot not in names:
            raise ModelError(f'{robot.source}: base.feet {foot!r} is not a body of the '
                             f'{kind} (with fusestatic a URDF link on a fixed joint is merged '
                             f'into its parent: keep it with <compiler fusestatic="false"/>)')


def origin_velocity(com_velocity: FloatArray, angular_velocity: FloatArray,
                    com: FloatArray, origin: FloatArray) -> FloatArray:
    """Velocity of the body point ``origin`` given its COM's (all world frame)."""
    out: FloatArray = com_velocity + np.cross(angular_velocity, origin - com)
    return out


def foot_normal_forces(feet: Collection[int], contacts: Iterable[tuple[int, float]]
                       ) -> FloatArray:
    """Per foot (``feet``' order): the summed normal force of the ``(link, N)`` contacts."""
    at = {link: k for k, link in enumerate(feet)}
    out = np.zeros(len(at))
    for link, force in contacts:
        k = at.get(link)
        if k is not None:
            out[k] += force
    return out
