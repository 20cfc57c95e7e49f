"""A sweep file: what to evaluate, read and checked in full before any cell runs.

Format (YAML; every key is optional except at least one cell)::

    name: smoke                 # the sweep's name [default: the file's stem]
    seed: 0                     # sweep seed; every cell's seeds derive from it (see below)
    retries: 2                  # runs of a cell whose worker died, after the first [default 2]
    eval:                       # settings shared by every cell (one value each)
      episodes: 4               # chained goal episodes per cell [default 4]
      tolerance_rad: 0.05       # success: every policy joint within this of the goal ...
      dwell_s: 0.2              # ... for this long
      goal_timeout_s: 4.0       # before this (simulated seconds per goal)
      goal_margin_rad: 0.25     # goals stay this far inside the joint limits
      state_rate_hz: 200.0      # joint_states rate of the simulated bridge
      noise_pos_rad: 0.0        # observation noise (only with randomization or latency)
      noise_vel_rad_s: 0.0
    grid:                       # cartesian product of the lists (axes below)
      policy: [simreal_arm_reach, so101_reach]
      engine: [mujoco, pybullet]
      seed: [0, 1]
    cells:                      # and/or explicit cells: one mapping of axes each
      - {policy: koch_reach, overlay: koch_worn, latency: wifi}

Axes (a cell has one value of each; missing ones take the default):

========== ========================================================= ================
axis       value                                                     default
========== ========================================================= ================
policy     policy spec name (config/policies/) or path               (required)
robot      the robot (must be the policy spec's robot)               the policy's
overlay    model overlay ("reality") name or path; '' nominal        ''
engine     physics engine: mujoco, pybullet                          mujoco
latency    latency preset (config/latency/) name or path; '' none    ''
randomiz.. ``randomization``: ranges name or path; '' none           ''
seed       replicate number, an integer >= 0                         0
========== ========================================================= ================

Paths are relative to the sweep file. A cell is identified by its configuration (``cell_id``,
a hash of it), never by its position: the same cell in another sweep file, another order or
after an edit that adds cells keeps its id, its seeds and its finished result.

Seeds: ``goal_seed`` (the goals of the cell's episodes) derives from the sweep seed, the
robot and the ``seed`` axis only, so every policy, engine, overlay and latency of one robot
and replicate is scored on the same goals, as ``simreal eval --seed`` does across backends;
``cell_seed`` (randomization draws, latency routes, noise) derives from the sweep seed and the
whole configuration.

Every error is one :class:`ConfigError` naming the sweep file, the key (``grid.policy[1]``,
``cells[0].engine``), what was expected and what was found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Any, Callable

from simreal_ros.core.dynamics import load_overlay, load_randomization
from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import load_robot
from simreal_ros.core.validate import Section, load_yaml_mapping
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.sim.bridge_config import ENGINES

#: The cell kinds a sweep runs (one so far: the in-process evaluation of a policy).
KINDS = ('eval',)
#: The axes of a cell and their defaults ('' for policy: required).
AXES: dict[str, Any] = {'policy': '', 'robot': '', 'overlay': '', 'engine': ENGINES[0],
                        'latency': '', 'randomization': '', 'seed': 0}
#: Most cells a sweep may have: a typo in a grid (a long list pasted twice) fails early.
MAX_CELLS = 100_000


@dataclass(frozen=True)
class EvalSettings:
    """The ``eval:`` section: settings every cell of the sweep shares."""

    episodes: int = 4
    tolerance_rad: float = 0.05
    dwell_s: float = 0.2
    goal_timeout_s: float = 4.0
    goal_margin_rad: float = 0.25
    state_rate_hz: float = 200.0
    noise_pos_rad: float = 0.0
    noise_vel_rad_s: float = 0.0


@dataclass(frozen=True)
class Cell:
    """One evaluation: the axes' values, the shared settings and the derived seeds."""

    kind: str
    policy: str
    robot: str
    overlay: str
    engine: str
    latency: str
    randomization: str
    seed: int
    episodes: int
    tolerance_rad: float
    dwell_s: float
    goal_timeout_s: float
    goal_margin_rad: float
    state_rate_hz: float
    noise_pos_rad: float
    noise_vel_rad_s: float
    sweep_seed: int

    @property
    def config(self) -> dict[str, Any]:
        """The configuration that identifies the cell (every field)."""
        return asdict(self)

    @property
    def cell_id(self) -> str:
        """12 hex digits of the SHA-256 of the configuration (canonical JSON)."""
        return _digest(self.config)[:12]

    @property
    def goal_seed(self) -> int:
        """Seed of the goals: the sweep seed, the robot, the replicate and the goal settings."""
        return _seed_of({'sweep_seed': self.sweep_seed, 'robot': self.robot, 'seed': self.seed,
                         'episodes': self.episodes, 'goal_margin_rad': self.goal_margin_rad})

    @property
    def cell_seed(self) -> int:
        """Seed of everything else random in the cell: derived from the whole configuration."""
        return _seed_of(self.config)

    def label(self) -> str:
        """Return a short human label (the axes that are set)."""
        parts = [Path(self.policy).stem, self.engine]
        for axis in ('overlay', 'latency', 'randomization'):
            v = getattr(self, axis)
            if v:
                parts.append(f'{axis}={Path(v).stem}')
        parts.append(f'seed={self.seed}')
        return ' '.join(parts)


@dataclass(frozen=True)
class Sweep:
    """A checked sweep file: its cells in file order (grid first, then the explicit cells)."""

    source: str
    name: str
    seed: int
    retries: int
    eval: EvalSettings
    cells: tuple[Cell, ...]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(',', ':'))
                          .encode('utf-8')).hexdigest()


def _seed_of(value: Any) -> int:
    """Return a seed in [0, 2**31): the first 4 bytes of the configuration's SHA-256."""
    return int(_digest(value)[:8], 16) & 0x7FFFFFFF


def _resolve(value: str, base: Path) -> str:
    """Make a path relative to the sweep file absolute; a shipped name stays a name."""
    p = Path(value).expanduser()
    if p.is_absolute() or (os.sep not in value and not p.suffix):
        return value
    cand = base / p
    return str(cand.resolve()) if cand.exists() else str(p.absolute())


class _Checker:
    """Loads every file a cell names once and turns its failure into the sweep file's error."""

    def __init__(self, source: str, base: Path) -> None:
        self.source, self.base = source, base
        self.policy_robot: dict[str, str] = {}
        self.overlay_robot: dict[str, str | None] = {}
        self.loaded: set[tuple[str, str]] = set()

    def _load(self, kind: str, value: str, key: str, what: str,
              load: Callable[[str], Any]) -> Any:
        try:
            return load(value)
        except ConfigError as exc:
            if exc.source.startswith('config/'):  # not found: the shipped names are the news
                expected = f'a {what} name or path ({exc.expected})'
            else:                                  # found but broken: say why
                expected = f'a {what} that loads ({exc})'
            raise ConfigError(self.source, key, expected, value) from None
        except SimrealError as exc:
            raise ConfigError(self.source, key, f'a {what} that loads ({exc})', value) from None

    def axis(self, axis: str, value: Any, key: str) -> Any:
        """Check one axis value (type, then the file it names); return it resolved."""
        if axis == 'seed':
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(self.source, key, 'an integer >= 0', value)
            return value
        if not isinstance(value, str):
            raise ConfigError(self.source, key, 'a string', value)
        if axis == 'engine':
            if value not in ENGINES:
                raise ConfigError(self.source, key, f'one of {list(ENGINES)}', value)
            return value
        if axis == 'policy' and not value:
            raise ConfigError(self.source, key, 'a policy spec name or path', value)
        if not value:
            return value
        value = _resolve(value, self.base)
        if (axis, value) in self.loaded:
            return value
        if axis == 'policy':
            spec = self._load('policies', value, key, 'policy spec', load_policy_spec)
            if not Path(spec.model).is_file():
                raise ConfigError(self.source, key, f'a policy whose model file exists '
                                  f'({spec.model})', value)
            self.policy_robot[value] = spec.robot
        elif axis == 'robot':
            self._load('robots', value, key, 'robot', load_robot)
        elif axis == 'overlay':
            ov = self._load('overlays', value, key, 'model overlay', load_overlay)
            self.overlay_robot[value] = ov.robot
        elif axis == 'latency':
            self._load('latency', value, key, 'latency preset',
                       lambda v: resolve_named('latency', v))
            from simreal_ros.policy.train_delays import LatencyPreset
            self._load('latency', value, key, 'latency preset',
                       lambda v: LatencyPreset(v).profile)
        elif axis == 'randomization':
            self._load('randomization', value, key, 'randomization', load_randomization)
        self.loaded.add((axis, value))
        return value

    def cell(self, values: dict[str, Any], keys: dict[str, str], ev: EvalSettings,
             sweep_seed: int) -> Cell:
        """Build a cell from checked axis values; check that its parts fit one robot."""
        robot = self.policy_robot[values['policy']]
        if values['robot'] and Path(values['robot']).stem != robot:
            raise ConfigError(self.source, keys['robot'],
                              f"the robot of policy {values['policy']!r} ({robot!r})",
                              values['robot'])
        ov = values['overlay']
        if ov and self.overlay_robot.get(ov) not in (None, robot):
            raise ConfigError(self.source, keys['overlay'],
                              f"an overlay of robot {robot!r} (policy {values['policy']!r})",
                              f'{ov} (robot {self.overlay_robot[ov]!r})')
        return Cell(kind='eval', **{**values, 'robot': robot}, **asdict(ev),
                    sweep_seed=sweep_seed)


def _eval_settings(sec: Section) -> EvalSettings:
    d = EvalSettings()
    ev = EvalSettings(
        episodes=sec.integer('episodes', d.episodes, minimum=1, maximum=10_000),
        tolerance_rad=sec.number('tolerance_rad', d.tolerance_rad, positive=True),
        dwell_s=sec.number('dwell_s', d.dwell_s, minimum=0.0),
        goal_timeout_s=sec.number('goal_timeout_s', d.goal_timeout_s, positive=True),
        goal_margin_rad=sec.number('goal_margin_rad', d.goal_margin_rad, minimum=0.0),
        state_rate_hz=sec.number('state_rate_hz', d.state_rate_hz, positive=True,
                                 maximum=10_000.0),
        noise_pos_rad=sec.number('noise_pos_rad', d.noise_pos_rad, minimum=0.0),
        noise_vel_rad_s=sec.number('noise_vel_rad_s', d.noise_vel_rad_s, minimum=0.0))
    sec.reject_unknown()
    # integers written as 4.0 stay floats in the configuration (the cell id hashes them)
    values: dict[str, Any] = {f.name: (float(getattr(ev, f.name)) if f.type == 'float'
                                       else getattr(ev, f.name)) for f in fields(ev)}
    return EvalSettings(**values)


def load_sweep(path: str | Path) -> Sweep:
    """Read, check and expand a sweep file (a path, or a name in ``config/sweeps/``).

    Raises ConfigError naming the file and the key on any problem.

    Every file any cell names is loaded here, so a sweep that starts has no bad cell.
    """
    p = resolve_named('sweeps', str(path))
    src = str(p)
    top = Section(load_yaml_mapping(p), src)
    name = top.string('name', p.stem)
    seed = top.integer('seed', 0, minimum=0, maximum=2**31 - 1)
    retries = top.integer('retries', 2, minimum=0, maximum=10)
    kind = top.string('kind', 'eval')
    if kind not in KINDS:
        raise ConfigError(src, 'kind', f'one of {list(KINDS)}', kind)
    ev = _eval_settings(top.section('eval', {}))
    check = _Checker(src, p.absolute().parent)
    cells: list[Cell] = []
    if top.has('grid'):
        grid = top.section('grid')
        axes: dict[str, list[Any]] = {}
        for axis in AXES:
            if not grid.has(axis):
                continue
            values = grid.items(axis)
            if not values:
                raise ConfigError(src, f'grid.{axis}', 'a non-empty list', values)
            axes[axis] = [check.axis(axis, v, f'grid.{axis}[{i}]') for i, v in enumerate(values)]
        grid.reject_unknown()
        if 'policy' not in axes:
            raise ConfigError(src, 'grid.policy', 'a list of policies (the grid needs one)',
                              'missing')
        size = 1
        for values in axes.values():
            size *= len(values)
        if size > MAX_CELLS:
            raise ConfigError(src, 'grid', f'at most {MAX_CELLS} cells', size)
        names = list(axes)
        for combo in itertools.product(*(enumerate(axes[n]) for n in names)):
            cell_values: dict[str, Any] = {
                **AXES, **{n: v for n, (_i, v) in zip(names, combo, strict=True)}}
            keys = {n: f'grid.{n}[{i}]' for n, (i, _v) in zip(names, combo, strict=True)}
            cells.append(check.cell(cell_values, keys, ev, seed))
    for i, raw in enumerate(top.items('cells', [])):
        sec = Section(raw, src, f'cells[{i}]')
        cell_values = dict(AXES)
        keys = {}
        for axis in AXES:
            if sec.has(axis) or axis == 'policy':
                keys[axis] = sec.path(axis)
                cell_values[axis] = check.axis(axis, sec.raw(axis), keys[axis])
        sec.reject_unknown()
        cells.append(check.cell(cell_values, keys, ev, seed))
    top.reject_unknown()
    if not cells:
        raise ConfigError(src, 'grid', 'a grid or a list of cells (the sweep has no cell)',
                          'none')
    seen: dict[str, int] = {}
    unique: list[Cell] = []
    for c in cells:  # a cell listed twice (grid and cells) runs once
        if c.cell_id not in seen:
            seen[c.cell_id] = len(unique)
            unique.append(c)
    if len(unique) > MAX_CELLS:
        raise ConfigError(src, 'cells', f'at most {MAX_CELLS} cells', len(unique))
    return Sweep(src, name, seed, retries, ev, tuple(unique))
