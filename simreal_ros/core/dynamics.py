"""Dynamics parameters, model overlays (docs/configuration.md) and domain randomization.

The flow is pure data: nominal parameters (read from the compiled model and the robot spec) ->
``Overlay.apply`` -> ``Randomization.sample`` -> written into MuJoCo by ``simreal_ros.sim``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import fnmatch
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.pushes import PushRanges, parse_pushes
from simreal_ros.core.residual_model import ResidualModel, load_residual, overlay_sha256
from simreal_ros.core.validate import Section, check_number, check_range, load_yaml_mapping
from simreal_ros.errors import ConfigError

JOINT_KEYS = ('damping', 'frictionloss', 'armature', 'kp', 'kd')
BODY_KEYS = ('mass',)


@dataclass(frozen=True)
class JointDynamics:
    """Per-joint passive dynamics and servo PD gains (SI units)."""

    damping: float
    frictionloss: float
    armature: float
    kp: float
    kd: float


@dataclass(frozen=True)
class DynamicsParams:
    """Everything the sim varies between nominal, identified and randomized worlds."""

    joints: dict[str, JointDynamics]
    body_mass: dict[str, float]
    command_delay_s: float = 0.0
    friction_scale: float = 1.0

    def flat(self) -> dict[str, float]:
        """Flatten to ``{'joint.<name>.<key>': value, ...}`` for diagnostics and logs."""
        out: dict[str, float] = {}
        for name, jd in self.joints.items():
            for k in JOINT_KEYS:
                out[f'joint.{name}.{k}'] = float(getattr(jd, k))
        for name, m in self.body_mass.items():
            out[f'body.{name}.mass'] = float(m)
        out['command_delay_s'] = float(self.command_delay_s)
        out['friction_scale'] = float(self.friction_scale)
        return out

    def with_joint(self, name: str, **values: float) -> 'DynamicsParams':
        """Return a copy with some fields of joint ``name`` replaced."""
        joints = dict(self.joints)
        joints[name] = replace(joints[name], **values)
        return replace(self, joints=joints)


def _split_key(key: str, allowed: tuple[str, ...]) -> tuple[str, bool] | None:
    base, scale = (key[:-6], True) if key.endswith('_scale') else (key, False)
    return (base, scale) if base in allowed else None


def _read_values(sec: Section, allowed: tuple[str, ...], ranges: bool
                 ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in sec.data:
        k = str(key)
        if _split_key(k, allowed) is None:
            names = ', '.join(f'{a}, {a}_scale' for a in allowed)
            raise ConfigError(sec.source, sec.path(k), f'one of {names}', 'unknown key')
        v = sec.raw(k)
        if ranges:
            out[k] = check_range(v, sec.source, sec.path(k), minimum=0.0)
        else:
            out[k] = check_number(v, sec.source, sec.path(k), minimum=0.0)
    return out


def _applied(current: float, key: str, value: float) -> float:
    return current * value if key.endswith('_scale') else value


@dataclass(frozen=True)
class Overlay:
    """A model overlay: absolute SI values, or multipliers where the key ends in ``_scale``."""

    source: str
    robot: str | None = None
    joints: dict[str, dict[str, float]] = field(default_factory=dict)
    bodies: dict[str, dict[str, float]] = field(default_factory=dict)
    command_delay_s: float | None = None
    imperfections: dict[str, float] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    residual: ResidualModel | None = field(default=None, compare=False, repr=False)

    @property
    def physics_sha256(self) -> str:
        """The hash of what this overlay sets (a residual names the one it was trained on)."""
        return overlay_sha256(self.robot, self.joints, self.bodies, self.command_delay_s)

    def apply(self, params: DynamicsParams, robot_name: str) -> DynamicsParams:
        """Return ``params`` with this overlay applied; unknown joints or bodies fail."""
        if self.robot is not None and self.robot != robot_name:
            raise ConfigError(self.source, 'robot', f'{robot_name!r} (the robot being loaded)',
                              self.robot)
        joints = dict(params.joints)
        for jname, values in self.joints.items():
            if jname not in joints:
                raise ConfigError(self.source, f'joints.{jname}',
                                  f'a joint of {robot_name} ({", ".join(joints)})', jname)
            jd = joints[jname]
            for key, v in values.items():
                base, _ = _split_key(key, JOINT_KEYS) or (key, False)
                jd = replace(jd, **{base: _applied(getattr(jd, base), key, v)})
            joints[jname] = jd
        masses = dict(params.body_mass)
        for bname, values in self.bodies.items():
            if bname not in masses:
                raise ConfigError(self.source, f'bodies.{bname}',
                                  f'a body with mass in {robot_name} ({", ".join(masses)})',
                                  bname)
            for key, v in values.items():
                masses[bname] = _applied(masses[bname], key, v)
        delay = params.command_delay_s if self.command_delay_s is None else self.command_delay_s
        return replace(params, joints=joints, body_mass=masses, command_delay_s=delay)


def load_overlay(name_or_path: str | Path) -> Overlay:
    """Load an overlay by shipped name (``config/overlays/<name>.yaml``) or path."""
    path = resolve_named('overlays', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    robot = top.string('robot') if top.has('robot') else None
    joints: dict[str, dict[str, float]] = {}
    for jname, jv in top.section('joints', {}).data.items():
        joints[str(jname)] = _read_values(Section(jv, src, f'joints.{jname}'), JOINT_KEYS,
                                          ranges=False)
    bodies: dict[str, dict[str, float]] = {}
    for bname, bv in top.section('bodies', {}).data.items():
        bodies[str(bname)] = _read_values(Section(bv, src, f'bodies.{bname}'), BODY_KEYS,
                                          ranges=False)
    delay = (top.number('command_delay_s', minimum=0.0, maximum=1.0)
             if top.has('command_delay_s') else None)
    imp_sec = top.section('imperfections', {})
    imperfections = {str(k): check_number(v, src, imp_sec.path(str(k)), minimum=0.0)
                     for k, v in imp_sec.data.items()}
    # camera: the virtual camera's optical reality (core.camera_info.OpticalReality reads it)
    metadata = {k: top.raw(k) for k in ('fit', 'source_bag', 'residual', 'description', 'sysid',
                                        'camera')
                if top.has(k)}
    top.reject_unknown()
    ov = Overlay(src, robot, joints, bodies, delay, imperfections, metadata)
    if 'residual' in metadata:
        ov = replace(ov, residual=_load_named_residual(ov, path, metadata['residual']))
    return ov


def _load_named_residual(ov: Overlay, path: Path, value: Any) -> ResidualModel:
    """Load the overlay's ``residual:`` (relative to the overlay's directory) and check it."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(ov.source, 'residual', 'the path of a residual (.pt) file', value)
    p = Path(value).expanduser()
    if not p.is_absolute():
        p = path.parent / p
    if not p.is_file():
        raise ConfigError(ov.source, 'residual', 'an existing residual file (relative to the '
                          "overlay's directory or absolute)", value)
    model = load_residual(p)
    if ov.robot is not None:
        model.check(ov.robot, ov.physics_sha256)
    else:
        model.check(model.robot, ov.physics_sha256)
    return model


@dataclass(frozen=True)
class Randomization:
    """Uniform ranges sampled at reset; selectors are joint/body names or fnmatch patterns.

    ``pushes`` (a floating base only): the random pushes a reset draws
    (:mod:`simreal_ros.core.pushes`); :meth:`sample` does not draw them.
    """

    source: str
    joints: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    bodies: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)
    command_delay_s: tuple[float, float] | None = None
    friction_scale: tuple[float, float] | None = None
    pushes: PushRanges | None = None

    def sample(self, params: DynamicsParams, rng: np.random.Generator) -> DynamicsParams:
        """Draw one randomized world around ``params`` (deterministic for a given rng state)."""
        joints = dict(params.joints)
        for jname in joints:
            for pattern, values in self.joints.items():
                if not fnmatch.fnmatchcase(jname, pattern):
                    continue
                jd = joints[jname]
                for key in sorted(values):
                    lo, hi = values[key]
                    base, _ = _split_key(key, JOINT_KEYS) or (key, False)
                    jd = replace(jd, **{base: _applied(getattr(jd, base), key,
                                                       float(rng.uniform(lo, hi)))})
                joints[jname] = jd
        masses = dict(params.body_mass)
        for bname in masses:
            for pattern, values in self.bodies.items():
                if fnmatch.fnmatchcase(bname, pattern):
                    for key in sorted(values):
                        lo, hi = values[key]
                        masses[bname] = _applied(masses[bname], key, float(rng.uniform(lo, hi)))
        delay = params.command_delay_s
        if self.command_delay_s is not None:
            delay = float(rng.uniform(*self.command_delay_s))
        fscale = params.friction_scale
        if self.friction_scale is not None:
            fscale = params.friction_scale * float(rng.uniform(*self.friction_scale))
        return replace(params, joints=joints, body_mass=masses, command_delay_s=delay,
                       friction_scale=fscale)

    def check_targets(self, joint_names: list[str], body_names: list[str]) -> None:
        """Fail when a selector matches no joint or body of the robot (a typo)."""
        for kind, table, names in (('joints', self.joints, joint_names),
                                   ('bodies', self.bodies, body_names)):
            for pattern in table:
                if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
                    raise ConfigError(self.source, f'{kind}.{pattern}',
                                      f'a name or pattern matching one of {names}', pattern)

    def check_pushes(self, robot_name: str, floating: bool) -> None:
        """Fail when ``pushes:`` is given for a fixed-base robot (nothing to push)."""
        if self.pushes is not None and not floating:
            raise ConfigError(self.source, 'pushes',
                              f'no pushes for {robot_name}, whose base is fixed to the world '
                              f'(pushes move a floating base: base.type: floating)',
                              'a pushes: section')


def load_randomization(name_or_path: str | Path) -> Randomization:
    """Load randomization ranges by shipped name or path."""
    path = resolve_named('randomization', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)

    def table(key: str, allowed: tuple[str, ...]) -> dict[str, dict[str, tuple[float, float]]]:
        sec: Mapping[str, Any] = top.section(key, {}).data
        return {str(k): _read_values(Section(v, src, f'{key}.{k}'), allowed, ranges=True)
                for k, v in sec.items()}

    joints = table('joints', JOINT_KEYS)
    bodies = table('bodies', BODY_KEYS)
    delay = (check_range(top.raw('command_delay_s'), src, 'command_delay_s', minimum=0.0)
             if top.has('command_delay_s') else None)
    fric = (check_range(top.raw('friction_scale'), src, 'friction_scale', minimum=0.0)
            if top.has('friction_scale') else None)
    pushes = parse_pushes(top.raw('pushes'), src) if top.has('pushes') else None
    top.reject_unknown(extra_allowed=('description',))
    return Randomization(src, joints, bodies, delay, fric, pushes)
