"""Scene description (floor, light, objects) loaded from ``config/scenes/*.yaml``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.validate import Section, check_number, load_yaml_mapping
from simreal_ros.errors import ConfigError

SHAPES = {'box': 3, 'sphere': 1, 'cylinder': 2, 'capsule': 2}


@dataclass(frozen=True)
class SceneObject:
    """A primitive object: fixed to the world, or free when ``free`` (needs ``mass``).

    ``render_only`` (free objects only): the cameras see it, the physics does not touch it (no
    contacts, gravity compensated), so it stays wherever it is placed
    (:mod:`simreal_ros.sim.placement`): a target that a policy finds through the camera and
    the arm may pass through, as the visual reach task's training renders it.
    """

    name: str
    shape: str
    size: tuple[float, ...]
    pos: tuple[float, float, float]
    rgba: tuple[float, float, float, float] = (0.6, 0.6, 0.6, 1.0)
    mass: float = 0.0
    free: bool = False
    render_only: bool = False


@dataclass(frozen=True)
class Scene:
    """What surrounds the robot."""

    source: str
    floor: bool = True
    light: bool = True
    objects: tuple[SceneObject, ...] = field(default_factory=tuple)


def _vector(sec: Section, key: str, n: int, default: object = None) -> tuple[float, ...]:
    v = sec.raw(key, default)
    if not isinstance(v, list) or len(v) != n:
        raise ConfigError(sec.source, sec.path(key), f'a list of {n} numbers', v)
    return tuple(check_number(x, sec.source, f'{sec.path(key)}[{i}]') for i, x in enumerate(v))


def load_scene(name_or_path: str | Path) -> Scene:
    """Load a scene by shipped name (``tabletop``) or path."""
    path = resolve_named('scenes', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    objects = []
    names: set[str] = set()
    for i, raw in enumerate(top.items('objects', [])):
        o = Section(raw, src, f'objects[{i}]')
        name = o.unique_string('name', names, 'an object name')
        shape = o.string('type')
        if shape not in SHAPES:
            raise ConfigError(src, o.path('type'), f'one of {sorted(SHAPES)}', shape)
        size = _vector(o, 'size', SHAPES[shape])
        if any(s <= 0 for s in size):
            raise ConfigError(src, o.path('size'), 'sizes > 0 (half-extents / radius)', size)
        free = o.boolean('free', False)
        mass = o.number('mass', 0.0, minimum=0.0)
        if free and mass <= 0:
            raise ConfigError(src, o.path('mass'), 'a mass > 0 for a free object', mass)
        render_only = o.boolean('render_only', False)
        if render_only and not free:
            raise ConfigError(src, o.path('render_only'), 'false, or free: true (a render-only '
                              'object is placed by moving its free joint)', render_only)
        pos = _vector(o, 'pos', 3)
        rgba = _vector(o, 'rgba', 4, [0.6, 0.6, 0.6, 1.0])
        objects.append(SceneObject(name, shape, size, (pos[0], pos[1], pos[2]),
                                   (rgba[0], rgba[1], rgba[2], rgba[3]), mass, free,
                                   render_only))
        o.reject_unknown()
    scene = Scene(src, top.boolean('floor', True), top.boolean('light', True), tuple(objects))
    top.reject_unknown(extra_allowed=('description',))
    return scene
