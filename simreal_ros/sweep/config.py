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

Kinds (``kind:``, one per sweep file; default ``eval``): ``eval`` cells evaluate a policy (the
axes above, the ``eval:`` section); ``sysid`` cells fit an overlay to a recorded bag, as
``simreal sysid BAG`` does (:mod:`simreal_ros.sweep.fit_cells`); ``replay`` cells score a model
overlay on a recorded bag, as ``simreal sysid validate`` does::

    kind: sysid                 # or: replay
    sysid:                      # (sysid) shared by every cell
      holdout: 0.2              # fraction of each bag's window held out [0.2]
    replay:                     # (replay) shared by every cell
      horizons_s: [0.05, 0.2, 1.0]   # k-step horizons [0.05, 0.2, 1.0]
    grid:
      bag: [bags/run1, bags/run2]    # recorded bags (directories), relative to the sweep file
      robot: [simreal_arm]      # the robot the bags were recorded with [simreal_arm]
      fit: [damping, 'damping,frictionloss,command_delay']   # (sysid) parameters to fit
      overlay: ['', identified.yaml] # (replay) the model to replay; '' nominal

=========== ================================================= ==========================
axis        value                                             default
=========== ================================================= ==========================
bag         a bag directory (sysid, replay)                   (required)
robot       robot name or path                                simreal_arm
fit         (sysid) comma-separated parameter names or a list ``simreal sysid``'s
overlay     (replay) model overlay name or path; '' nominal   ''
=========== ================================================= ==========================

Every error is one :class:`ConfigError` naming the sweep file, the key (``grid.policy[1]``,
``cells[0].engine``), what was expected and what was found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
import hashlib
import itertools
import json
import math
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
from simreal_ros.sysid import DEFAULT_FIT, FIT_NAMES

#: The cell kinds a sweep runs: a policy's evaluation, a sysid fit, a replay of a bag.
KINDS = ('eval', 'sysid', 'replay')
#: The axes of an eval cell and their defaults ('' for policy: required).
AXES: dict[str, Any] = {'policy': '', 'robot': '', 'overlay': '', 'engine': ENGINES[0],
                        'latency': '', 'randomization': '', 'seed': 0}
#: ``simreal sysid``'s default robot.
DEFAULT_ROBOT = 'simreal_arm'
#: The axes of the other kinds ('' for bag: required).
KIND_AXES: dict[str, dict[str, Any]] = {
    'eval': AXES,
    'sysid': {'bag': '', 'robot': DEFAULT_ROBOT, 'fit': DEFAULT_FIT},
    'replay': {'bag': '', 'robot': DEFAULT_ROBOT, 'overlay': ''},
}
#: The axis every cell of a kind must set.
REQUIRED = {'eval': 'policy', 'sysid': 'bag', 'replay': 'bag'}
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


class _Identified:
    """What every kind of cell has: its configuration (every field) and the id from it."""

    @property
    def config(self) -> dict[str, Any]:
        """The configuration that identifies the cell (every field)."""
        values: dict[str, Any] = asdict(self)  # type: ignore[call-overload]  # a dataclass
        return values

    @property
    def cell_id(self) -> str:
        """12 hex digits of the SHA-256 of the configuration (canonical JSON)."""
        return _digest(self.config)[:12]


@dataclass(frozen=True)
class Cell(_Identified):
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
    def goal_seed(self) -> int:
        """Seed of the goals: the sweep seed, the robot, the replicate and the goal settings."""
        return _seed_of({'sweep_seed': self.sweep_seed, 'robot': self.robot, 'seed': self.seed,
                         'episodes': self.episodes, 'goal_margin_rad': self.goal_margin_rad})

    @property
    def cell_seed(self) -> int:
        """Seed of everything else random in the cell: derived from the whole configuration."""
        return _seed_of(self.config)

    @property
    def seeds(self) -> dict[str, int]:
        """The derived seeds a result line and the table carry."""
        return {'goal_seed': self.goal_seed, 'cell_seed': self.cell_seed}

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
class SysidCell(_Identified):
    """One fit: ``simreal sysid BAG --robot ROBOT --fit FIT --holdout HOLDOUT``."""

    kind: str
    bag: str
    robot: str
    fit: str
    holdout: float
    sweep_seed: int

    @property
    def seeds(self) -> dict[str, int]:
        """None: a fit is deterministic (least squares from the nominal model)."""
        return {}

    def label(self) -> str:
        """Return a short human label."""
        return f'{Path(self.bag).name} {Path(self.robot).stem} fit={self.fit}'


@dataclass(frozen=True)
class ReplayCell(_Identified):
    """One replay: ``simreal sysid validate BAG --robot ROBOT --overlay OVERLAY``."""

    kind: str
    bag: str
    robot: str
    overlay: str
    horizons_s: tuple[float, ...]
    sweep_seed: int

    @property
    def seeds(self) -> dict[str, int]:
        """None: a replay is deterministic."""
        return {}

    def label(self) -> str:
        """Return a short human label."""
        return (f'{Path(self.bag).name} {Path(self.robot).stem} '
                f'overlay={Path(self.overlay).stem if self.overlay else "nominal"}')


AnyCell = Cell | SysidCell | ReplayCell


@dataclass(frozen=True)
class Sweep:
    """A checked sweep file: its cells in file order (grid first, then the explicit cells)."""

    source: str
    name: str
    seed: int
    retries: int
    eval: EvalSettings
    cells: tuple[AnyCell, ...]
    kind: str = 'eval'


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
        self.checked_bags: set[tuple[str, str, str]] = set()

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
        if axis == 'bag' and not value:
            raise ConfigError(self.source, key, 'a bag directory', value)
        if not value:
            return value
        if axis == 'bag':  # no shipped bags: always a path, relative to the sweep file
            bag = Path(value).expanduser()
            bag = bag if bag.is_absolute() else (self.base / bag).resolve()
            if not bag.is_dir():
                raise ConfigError(self.source, key, 'a bag directory that exists', value)
            return str(bag)
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

    def fit(self, value: Any, key: str) -> str:
        """Check a sysid cell's parameter list; return it comma-separated."""
        items = value.split(',') if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise ConfigError(self.source, key, 'parameter names, comma-separated or a list',
                              value)
        names = list(dict.fromkeys(v.strip() for v in items if v.strip()))
        bad = [n for n in names if n not in FIT_NAMES]
        if not names or bad:
            raise ConfigError(self.source, key, f'parameters from {list(FIT_NAMES)}',
                              bad[0] if bad else value)
        return ','.join(names)

    def bag_of(self, bag: str, robot: str, keys: dict[str, str]) -> None:
        """Check (once) from its metadata that ``bag`` is a sysid bag of ``robot``."""
        if ('bag', bag, robot) in self.checked_bags:
            return
        from simreal_ros.sysid.data import check_sysid_bag
        spec = load_robot(robot)
        try:
            check_sysid_bag(bag, spec)
        except SimrealError as exc:
            raise ConfigError(self.source, keys['bag'], f'a bag sysid reads ({exc})',
                              bag) from None
        self.checked_bags.add(('bag', bag, robot))

    def other_cell(self, kind: str, values: dict[str, Any], keys: dict[str, str],
                   shared: dict[str, Any], sweep_seed: int) -> SysidCell | ReplayCell:
        """Build a sysid or replay cell from checked axis values."""
        self.bag_of(values['bag'], values['robot'], keys)
        if kind == 'sysid':
            return SysidCell(kind=kind, bag=values['bag'], robot=values['robot'],
                             fit=values['fit'], holdout=shared['holdout'],
                             sweep_seed=sweep_seed)
        ov = values['overlay']
        robot_name = load_robot(values['robot']).name
        if ov and self.overlay_robot.get(ov) not in (None, robot_name):
            raise ConfigError(self.source, keys['overlay'],
                              f'an overlay of robot {robot_name!r}',
                              f'{ov} (robot {self.overlay_robot[ov]!r})')
        return ReplayCell(kind=kind, bag=values['bag'], robot=values['robot'], overlay=ov,
                          horizons_s=shared['horizons_s'], sweep_seed=sweep_seed)

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


#: ``sysid:`` and ``replay:`` defaults (``simreal sysid``'s).
DEFAULT_HOLDOUT = 0.2
DEFAULT_HORIZONS_S = (0.05, 0.2, 1.0)


def _shared_settings(kind: str, sec: Section) -> dict[str, Any]:
    """Read the ``sysid:`` or ``replay:`` section."""
    from simreal_ros.sysid.api import MAX_HOLDOUT
    if kind == 'sysid':
        out: dict[str, Any] = {'holdout': float(sec.number(
            'holdout', DEFAULT_HOLDOUT, minimum=0.0, maximum=MAX_HOLDOUT))}
    else:
        raw = sec.items('horizons_s', list(DEFAULT_HORIZONS_S))
        hs = []
        for i, h in enumerate(raw):
            if isinstance(h, bool) or not isinstance(h, (int, float)) or \
                    not math.isfinite(h) or h <= 0:
                raise ConfigError(sec.source, f'{sec.path("horizons_s")}[{i}]',
                                  'a horizon in seconds > 0', h)
            hs.append(float(h))
        if not hs:
            raise ConfigError(sec.source, sec.path('horizons_s'), 'a non-empty list', raw)
        out = {'horizons_s': tuple(hs)}
    sec.reject_unknown()
    return out


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
    ev = _eval_settings(top.section('eval', {})) if kind == 'eval' else EvalSettings()
    shared = {} if kind == 'eval' else _shared_settings(kind, top.section(kind, {}))
    check = _Checker(src, p.absolute().parent)
    axes_of_kind = KIND_AXES[kind]
    required = REQUIRED[kind]

    def value(axis: str, v: Any, key: str) -> Any:
        return check.fit(v, key) if axis == 'fit' else check.axis(axis, v, key)

    defaults: dict[str, tuple[Any, str]] = {}  # the other kinds' defaults, checked once
    if kind != 'eval':
        defaults = {a: (value(a, v, f'{kind} default {a}'), f'{kind} default {a}')
                    for a, v in axes_of_kind.items() if a != required}

    def make(values: dict[str, Any], keys: dict[str, str]) -> AnyCell:
        if kind == 'eval':
            return check.cell({**AXES, **values}, keys, ev, seed)
        full = {a: d for a, (d, _k) in defaults.items()}
        full.update(values)
        return check.other_cell(kind, full, {**{a: k for a, (_d, k) in defaults.items()},
                                             **keys}, shared, seed)

    cells: list[AnyCell] = []
    if top.has('grid'):
        grid = top.section('grid')
        axes: dict[str, list[Any]] = {}
        for axis in axes_of_kind:
            if not grid.has(axis):
                continue
            values = grid.items(axis)
            if not values:
                raise ConfigError(src, f'grid.{axis}', 'a non-empty list', values)
            axes[axis] = [value(axis, v, f'grid.{axis}[{i}]') for i, v in enumerate(values)]
        grid.reject_unknown()
        if required not in axes:
            raise ConfigError(src, f'grid.{required}',
                              f'a list of {required} values (the grid needs one)', 'missing')
        size = 1
        for values in axes.values():
            size *= len(values)
        if size > MAX_CELLS:
            raise ConfigError(src, 'grid', f'at most {MAX_CELLS} cells', size)
        names = list(axes)
        for combo in itertools.product(*(enumerate(axes[n]) for n in names)):
            cell_values = {n: v for n, (_i, v) in zip(names, combo, strict=True)}
            keys = {n: f'grid.{n}[{i}]' for n, (i, _v) in zip(names, combo, strict=True)}
            cells.append(make(cell_values, keys))
    for i, raw in enumerate(top.items('cells', [])):
        sec = Section(raw, src, f'cells[{i}]')
        cell_values = {}
        keys = {}
        for axis in axes_of_kind:
            if sec.has(axis) or axis == required:
                keys[axis] = sec.path(axis)
                cell_values[axis] = value(axis, sec.raw(axis), keys[axis])
        sec.reject_unknown()
        cells.append(make(cell_values, keys))
    top.reject_unknown()
    if not cells:
        raise ConfigError(src, 'grid', 'a grid or a list of cells (the sweep has no cell)',
                          'none')
    seen: dict[str, int] = {}
    unique: list[AnyCell] = []
    for c in cells:  # a cell listed twice (grid and cells) runs once
        if c.cell_id not in seen:
            seen[c.cell_id] = len(unique)
            unique.append(c)
    if len(unique) > MAX_CELLS:
        raise ConfigError(src, 'cells', f'at most {MAX_CELLS} cells', len(unique))
    return Sweep(src, name, seed, retries, ev, tuple(unique), kind)
