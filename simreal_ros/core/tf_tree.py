"""The robot's transform tree from its URDF, joint positions and camera mounts (no ROS).

What ``robot_state_publisher`` computes, for the state publisher node:

* :func:`parse_urdf` reads every ``<joint>`` (parent link, child link, ``<origin xyz rpy>``,
  ``<axis>``, type) and rejects what it cannot serve (floating and planar joints, a link with
  two parents) with one :class:`~simreal_ros.errors.ConfigError`;
* :meth:`TfTree.static` gives the transforms that never change: ``world`` -> the robot's base
  link (identity, where MuJoCo's URDF import puts the base), every fixed joint, and each
  camera's ``<parent>`` -> ``<name>_optical_frame``; for a floating base ``world`` -> ``odom``
  (identity) instead, and the base's pose ``odom`` -> base link comes from the backend (the
  sim bridge's ground truth, docs/legged.md);
* :meth:`TfTree.moving` gives parent -> child of every revolute, continuous and prismatic joint
  at the given positions: ``origin * rot(axis, q)`` or ``origin * trans(axis * q)``;
* a joint with ``<mimic joint="J" multiplier="m" offset="c"/>`` (a gripper's fingers, which no
  servo measures) moves with ``J``: its position is ``m * q_J + c`` whenever ``q_J`` is given,
  as ``robot_state_publisher`` does. A mimic of an unknown or non-moving joint, or a cycle of
  mimics, is one :class:`~simreal_ros.errors.ConfigError`.

Rotations are unit quaternions ``(w, x, y, z)`` from ``transforms3d``; URDF ``rpy`` is roll
about x, pitch about y, yaw about z, all about the fixed axes (transforms3d's ``'sxyz'``).
Every frame name gets ``frame_prefix`` (``''`` for the primary robot, ``'twin/'`` for the
twin), except ``world``, which both robots share.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping
import xml.etree.ElementTree as ET

import numpy as np
import numpy.typing as npt
from transforms3d import affines, euler, quaternions

from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]
WORLD = 'world'
#: the frame a floating base's odometry is in (REP 105's ``odom``)
ODOM = 'odom'
MOVING_TYPES = ('revolute', 'continuous', 'prismatic')
SUPPORTED_TYPES = MOVING_TYPES + ('fixed',)


@dataclass(frozen=True)
class Transform:
    """The pose of frame ``child`` in frame ``parent``: translation (m), quaternion (w,x,y,z)."""

    parent: str
    child: str
    translation: tuple[float, float, float]
    rotation: tuple[float, float, float, float]

    def matrix(self) -> FloatArray:
        """Return the 4x4 homogeneous matrix (child coordinates -> parent coordinates)."""
        return np.asarray(affines.compose(self.translation, quaternions.quat2mat(self.rotation),
                                          np.ones(3)), dtype=np.float64)


@dataclass(frozen=True)
class UrdfJoint:
    """One URDF joint: what the tree needs of it."""

    name: str
    type: str
    parent: str
    child: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    axis: tuple[float, float, float]
    #: ``(leader joint, multiplier, offset)`` of a ``<mimic>`` joint, else None
    mimic: tuple[str, float, float] | None = None


def _mimic(el: ET.Element | None, src: str, key: str) -> tuple[str, float, float] | None:
    if el is None:
        return None
    leader = el.get('joint', '')
    try:
        mult, offset = float(el.get('multiplier', '1')), float(el.get('offset', '0'))
    except ValueError:
        mult = offset = float('nan')
    if not leader or not np.isfinite(mult) or not np.isfinite(offset):
        raise ConfigError(src, f'{key} mimic', '<mimic joint="NAME" multiplier="number" '
                          'offset="number">', ET.tostring(el, encoding='unicode').strip())
    return leader, mult, offset


def _check_mimics(joints: list[UrdfJoint], src: str) -> None:
    by_name = {j.name: j for j in joints}
    for j in joints:
        seen = [j.name]
        m = j.mimic
        while m is not None:
            leader = by_name.get(m[0])
            if leader is None or leader.type not in MOVING_TYPES:
                raise ConfigError(src, f'joint {seen[-1]!r} mimic', 'the name of a moving joint '
                                  'of the URDF', m[0])
            if leader.name in seen:
                raise ConfigError(src, f'joint {j.name!r} mimic', 'a chain of mimics that ends '
                                  'at a joint of its own', ' -> '.join(seen + [leader.name]))
            seen.append(leader.name)
            m = leader.mimic


def _triple(text: str | None, default: str, source: str, key: str) -> tuple[float, float, float]:
    try:
        values = [float(v) for v in (text if text is not None else default).split()]
    except ValueError:
        values = []
    if len(values) != 3 or not np.all(np.isfinite(values)):
        raise ConfigError(source, key, '3 finite numbers', text)
    return (values[0], values[1], values[2])


def parse_urdf(text: str, source: str | Path = 'robot_description') -> tuple[UrdfJoint, ...]:
    """Return the URDF's joints; ConfigError naming ``source`` on malformed input."""
    src = str(source)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ConfigError(src, 'xml', 'a URDF document', f'unparsable ({exc})') from None
    if root.tag != 'robot':
        raise ConfigError(src, 'root element', '<robot>', f'<{root.tag}>')
    joints = []
    children: dict[str, str] = {}
    for j in root.findall('joint'):
        name = j.get('name', '')
        key = f'joint {name!r}'
        kind = j.get('type', '')
        if kind not in SUPPORTED_TYPES:
            raise ConfigError(src, f'{key} type', f'one of {SUPPORTED_TYPES}', kind)
        parent, child = j.find('parent'), j.find('child')
        if parent is None or child is None or not parent.get('link') or not child.get('link'):
            raise ConfigError(src, key, '<parent link=...> and <child link=...>', 'missing')
        child_link = str(child.get('link'))
        if child_link in children:
            raise ConfigError(src, key, f'a child link with one parent joint; {child_link!r} '
                              f'is already the child of {children[child_link]!r}', child_link)
        children[child_link] = name
        origin = j.find('origin')
        axis = j.find('axis')
        xyz = _triple(origin.get('xyz') if origin is not None else None, '0 0 0', src,
                      f'{key} origin xyz')
        rpy = _triple(origin.get('rpy') if origin is not None else None, '0 0 0', src,
                      f'{key} origin rpy')
        ax = _triple(axis.get('xyz') if axis is not None else None, '1 0 0', src,
                     f'{key} axis')
        if kind in MOVING_TYPES and not np.linalg.norm(ax) > 0:
            raise ConfigError(src, f'{key} axis', 'a non-zero vector', ax)
        mimic = _mimic(j.find('mimic'), src, key) if kind in MOVING_TYPES else None
        joints.append(UrdfJoint(name, kind, str(parent.get('link')), child_link, xyz, rpy, ax,
                                mimic))
    _check_mimics(joints, src)
    return tuple(joints)


def _transform(parent: str, child: str, xyz: Iterable[float], quat: Iterable[float]
               ) -> Transform:
    t = [float(v) for v in xyz]
    q = [float(v) for v in quat]
    return Transform(parent, child, (t[0], t[1], t[2]), (q[0], q[1], q[2], q[3]))


class TfTree:
    """Transforms of one robot: static ones once, moving ones per joint state."""

    def __init__(self, joints: tuple[UrdfJoint, ...], base_frame: str,
                 cameras: Iterable[Any] = (), frame_prefix: str = '',
                 floating: bool = False) -> None:
        """Build the static part; ``cameras`` have ``name``, ``parent``, ``xyz``, ``rpy``.

        ``floating``: the base is free; ``world`` -> ``odom`` is static, not ``world`` -> base.
        """
        self.prefix = frame_prefix
        self.joints = joints
        self.moving_joints = {j.name: j for j in joints if j.type in MOVING_TYPES}
        self.mimics = {j.name: j.mimic for j in joints
                       if j.type in MOVING_TYPES and j.mimic is not None}
        links = {j.parent for j in joints} | {j.child for j in joints} | {base_frame}
        root = self.frame(ODOM) if floating else self.frame(base_frame)
        static = [_transform(WORLD, root, (0, 0, 0), (1, 0, 0, 0))]
        for j in joints:
            if j.type == 'fixed':
                static.append(_transform(self.frame(j.parent), self.frame(j.child), j.xyz,
                                         euler.euler2quat(*j.rpy, 'sxyz')))
        for cam in cameras:
            if cam.parent != WORLD and cam.parent not in links:
                raise ConfigError('cameras', f'{cam.name}.parent',
                                  f"'world' or a link of the URDF {sorted(links)}", cam.parent)
            static.append(_transform(self.frame(cam.parent),
                                     self.frame(f'{cam.name}_optical_frame'), cam.xyz,
                                     euler.euler2quat(*cam.rpy, 'sxyz')))
        self._static = tuple(static)

    def frame(self, name: str) -> str:
        """Return the published name of frame ``name`` (``world`` is never prefixed)."""
        return name if name == WORLD else f'{self.prefix}{name}'

    def static(self) -> tuple[Transform, ...]:
        """Return world -> base (world -> odom), the fixed joints and the camera mounts."""
        return self._static

    def with_mimics(self, positions: Mapping[str, float]) -> dict[str, float]:
        """``positions`` plus each mimic joint whose leader's position is known."""
        out = dict(positions)
        todo = {n: m for n, m in self.mimics.items() if n not in out}
        while todo:  # chains resolve leader first; parse_urdf refused cycles
            ready = {n: m for n, m in todo.items() if m[0] in out}
            if not ready:
                break
            for name, (leader, mult, offset) in ready.items():
                out[name] = mult * float(out[leader]) + offset
                del todo[name]
        return out

    def moving(self, positions: Mapping[str, float]) -> list[Transform]:
        """Parent -> child of each moving joint named in ``positions`` (rad or m).

        Mimic joints follow their leader (:meth:`with_mimics`) unless given themselves.
        """
        out = []
        for name, q in self.with_mimics(positions).items():
            j = self.moving_joints.get(name)
            if j is None:
                continue
            origin = euler.euler2quat(*j.rpy, 'sxyz')
            if j.type == 'prismatic':
                axis = np.asarray(j.axis) / np.linalg.norm(j.axis)
                shift = quaternions.rotate_vector(axis * float(q), origin)
                out.append(_transform(self.frame(j.parent), self.frame(j.child),
                                      np.asarray(j.xyz) + shift, origin))
            else:
                turn = quaternions.axangle2quat(j.axis, float(q))
                out.append(_transform(self.frame(j.parent), self.frame(j.child), j.xyz,
                                      quaternions.qmult(origin, turn)))
        return out


def compose(transforms: Iterable[Transform], root: str = WORLD) -> dict[str, FloatArray]:
    """Poses (4x4) of every frame reachable from ``root`` through ``transforms``.

    What a TF listener does with one snapshot of ``/tf`` + ``/tf_static``; used to check the
    published tree against the physics engine's own body poses.
    """
    by_parent: dict[str, list[Transform]] = {}
    for t in transforms:
        by_parent.setdefault(t.parent, []).append(t)
    poses = {root: np.eye(4)}
    todo = [root]
    while todo:
        parent = todo.pop()
        for t in by_parent.get(parent, []):
            poses[t.child] = poses[parent] @ t.matrix()
            todo.append(t.child)
    return poses
