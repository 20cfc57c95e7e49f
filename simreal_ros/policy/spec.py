"""The policy interface, declared once: observation terms, action processing, rates, topics.

A policy spec (``config/policies/<name>.yaml``) says exactly what the network sees and what its
outputs mean, so the same file drives training, the sim and the real robot::

    observation vector = concat over terms (in file order) of
                         history of clip(scale * (value - offset), -clip, clip), oldest first
    joint target       = clamp_limits(rate_limit(low_pass(default + scale * clip(action))))

Observation terms are looked up in :data:`simreal_ros.policy.terms.TERMS`;
:func:`~simreal_ros.policy.terms.register_term` adds a new one in one place (its size, the
inputs it needs and how it is computed). Everything here is numpy only.
The two formulas run in :mod:`simreal_ros.policy.codec` (ObservationBuilder, ActionProcessor).

Image terms (``term: image``, :class:`ImageTerm`) are not part of the flat vector. A spec with
image terms declares a network of two inputs, ``forward(obs_vector, image_stack)``:

    obs_vector  float32 (N, obs_dim)      the vector terms above, as without images
    image_stack float32 (N, K*C, H, W)    per image term in file order, its last K frames
                                          oldest first, each C channels in the term's order
                                          (rgb, bgr or gray); every image term has the same
                                          H x W; channel index = term offset + k * C + c

Each frame is ``(resize(center_crop(frame)) * scale - mean) / std`` per channel
(:func:`simreal_ros.policy.images.preprocess`, the one implementation training and the node
share). A frame older than the term's ``max_age_s`` (or none yet) is stale: the node holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import Section, check_number, load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.policy.safety import FallSpec, parse_fall
from simreal_ros.policy.terms import IMAGE_TERM, TERMS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MODEL_SUFFIXES = ('.pt', '.onnx')
#: the channel orders an image term may ask for, and their channel counts
IMAGE_CHANNELS: dict[str, int] = {'rgb': 3, 'bgr': 3, 'gray': 1}
#: the sensor_msgs/Image encodings the policy node converts (without cv_bridge)
IMAGE_ENCODINGS = ('rgb8', 'bgr8', 'mono8')
MAX_IMAGE_HISTORY = 16
MAX_IMAGE_SIDE = 1024
MAX_RATE_HZ = 2000.0
ACTION_MODES = ('offset', 'absolute')
@dataclass(frozen=True)
class ObsTerm:
    """One configured observation term."""

    name: str
    size: int
    scale: FloatArray
    offset: FloatArray
    clip: float | None
    history: int
    options: dict[str, float]

    @property
    def total(self) -> int:
        """Values this term contributes to the observation vector."""
        return self.size * self.history


@dataclass(frozen=True)
class ImageTerm:
    """One configured image term: a camera's frames, preprocessed, the last ``history``.

    ``crop`` is a center crop ``(height, width)`` in source pixels applied before the resize
    to ``(height, width)``; ``mean`` and ``std`` have one value per output channel.
    """

    camera: str
    topic: str
    height: int
    width: int
    crop: tuple[int, int] | None
    channels: str
    scale: float
    mean: FloatArray
    std: FloatArray
    history: int
    max_age_s: float

    @property
    def n_channels(self) -> int:
        """Channels of one preprocessed frame (3 for rgb/bgr, 1 for gray)."""
        return IMAGE_CHANNELS[self.channels]

    @property
    def stack_channels(self) -> int:
        """Channels this term contributes to the image stack (``history * n_channels``)."""
        return self.history * self.n_channels

    @property
    def max_age_ns(self) -> int:
        """Frames older than this are stale (integer ns)."""
        return int(round(self.max_age_s * 1e9))


@dataclass(frozen=True)
class ActionSpec:
    """How raw network outputs become joint targets (policy joint order)."""

    mode: str
    scale: FloatArray
    clip: float | None
    low_pass_hz: float
    rate_limit_rad: float
    reject_abs: float
    limit_margin_rad: float


@dataclass(frozen=True)
class SafetySpec:
    """Start-up ramp and staleness rules of the policy node."""

    ramp_s: float
    ramp_max_velocity: float
    stale_after_periods: float


@dataclass(frozen=True)
class TopicsSpec:
    """Which topics feed the policy (relative names, remappable)."""

    joint_states: str
    joint_commands: str
    goal: str
    imu: str
    cmd_vel: str = 'cmd_vel'


@dataclass(frozen=True)
class PolicySpec:
    """A validated ``config/policies/<name>.yaml``."""

    name: str
    source: Path
    robot: str
    model: Path
    control_rate_hz: float
    joints: tuple[str, ...]
    joint_index: IntArray
    default: FloatArray
    lower: FloatArray
    upper: FloatArray
    observation: tuple[ObsTerm, ...]
    action: ActionSpec
    safety: SafetySpec
    topics: TopicsSpec
    metadata: dict[str, Any] = field(default_factory=dict)
    images: tuple[ImageTerm, ...] = ()
    #: fall detection and the damping hand-over (policy/safety.py); None: off
    fall: FallSpec | None = None

    @property
    def n(self) -> int:
        """Number of joints the policy controls (= action size)."""
        return len(self.joints)

    @property
    def obs_dim(self) -> int:
        """Length of the observation vector."""
        return sum(t.total for t in self.observation)

    @property
    def act_dim(self) -> int:
        """Length of the action vector."""
        return self.n

    @property
    def period_ns(self) -> int:
        """Control period in integer nanoseconds."""
        return int(round(1e9 / self.control_rate_hz))

    @property
    def stale_after_ns(self) -> int:
        """Observations older than this are stale (``stale_after_periods`` control periods)."""
        return int(self.safety.stale_after_periods * self.period_ns)

    @property
    def image_shape(self) -> tuple[int, int, int] | None:
        """``(K*C summed over image terms, H, W)`` of one image stack; None without images."""
        if not self.images:
            return None
        first = self.images[0]
        return (sum(t.stack_channels for t in self.images), first.height, first.width)

    @property
    def needs(self) -> set[str]:
        """Input sources the observation terms need."""
        return {s for t in self.observation for s in TERMS[t.name].needs}

    @property
    def declared_rate_hz(self) -> float:
        """The control rate the spec file declares (the network's training rate)."""
        return float(self.metadata.get('declared_rate_hz', self.control_rate_hz))

    def at_rate(self, rate_hz: float) -> PolicySpec:
        """Return this spec for a node running at ``rate_hz`` instead of the declared rate.

        Everything derived from the control period is rebuilt for the new period: the per-step
        rate limit keeps its speed in rad/s (``rate_limit_rad * declared / rate_hz``), the
        low-pass filter keeps its cutoff in Hz (its coefficient follows from
        ``control_rate_hz``), and ``safety.stale_after_periods`` counts periods of the new rate.
        The network itself is unchanged (it was trained at :attr:`declared_rate_hz`).
        """
        rate = float(rate_hz)
        if not (math.isfinite(rate) and 0.0 < rate <= MAX_RATE_HZ):
            raise ValueError(f'control rate {rate_hz!r} Hz: expected a rate in '
                             f'(0, {MAX_RATE_HZ:g}] Hz')
        if rate == self.control_rate_hz:
            return self
        a = self.action
        action = replace(a, rate_limit_rad=a.rate_limit_rad * self.control_rate_hz / rate)
        metadata = {**self.metadata, 'declared_rate_hz': self.declared_rate_hz}
        return replace(self, control_rate_hz=rate, action=action, metadata=metadata)

    def layout(self) -> list[tuple[str, int, int]]:
        """``(term, start, stop)`` slices of the observation vector, in order."""
        out = []
        start = 0
        for t in self.observation:
            out.append((t.name, start, start + t.total))
            start += t.total
        return out


def _vector(sec: Section, key: str, size: int, default: float, *, positive: bool = False
            ) -> FloatArray:
    """Read a number (broadcast) or a list of ``size`` numbers."""
    v = sec.raw(key, default)
    if isinstance(v, list):
        if len(v) != size:
            raise ConfigError(sec.source, sec.path(key),
                              f'a number or a list of {size} numbers', v)
        return np.array([check_number(x, sec.source, f'{sec.path(key)}[{k}]',
                                      positive=positive) for k, x in enumerate(v)])
    return np.full(size, check_number(v, sec.source, sec.path(key), positive=positive))


def _optional_positive(sec: Section, key: str) -> float | None:
    v = sec.raw(key, None)
    if v is None:
        return None
    return check_number(v, sec.source, sec.path(key), positive=True)


def _joints(top: Section, robot: RobotSpec) -> tuple[tuple[str, ...], IntArray]:
    src = top.source
    raw = top.raw('joints', None)
    if raw is None:
        names = list(robot.joint_names)
    else:
        if not isinstance(raw, list) or not raw:
            raise ConfigError(src, 'joints', 'a non-empty list of joint names of '
                              f'{robot.name} {robot.joint_names}', raw)
        names = []
        for k, name in enumerate(raw):
            if name not in robot.joint_names:
                raise ConfigError(src, f'joints[{k}]', f'a joint of {robot.name} '
                                  f'{robot.joint_names}', name)
            if name in names:
                raise ConfigError(src, f'joints[{k}]', 'a joint not listed before', name)
            names.append(name)
    return tuple(names), np.array([robot.index(nm) for nm in names], dtype=np.int64)


def _default_pose(top: Section, robot: RobotSpec, joints: tuple[str, ...], idx: IntArray
                  ) -> FloatArray:
    src = top.source
    raw = top.raw('default_pose', 'home')
    home = robot.home[idx]
    if raw == 'home':
        return np.array(home, dtype=np.float64)
    if not isinstance(raw, dict):
        raise ConfigError(src, 'default_pose', "'home' or a mapping {joint: rad} (joints not "
                          'named keep their home)', raw)
    out = home.copy()
    for name, value in raw.items():
        if name not in joints:
            raise ConfigError(src, f'default_pose.{name}', f'a joint of the policy {joints}',
                              name)
        k = joints.index(name)
        v = check_number(value, src, f'default_pose.{name}')
        lo, hi = robot.lower[idx[k]], robot.upper[idx[k]]
        if not lo <= v <= hi:
            raise ConfigError(src, f'default_pose.{name}', f'a position within [{lo}, {hi}]',
                              value)
        out[k] = v
    return np.asarray(out, dtype=np.float64)


def _int_pair(sec: Section, key: str, what: str, upper: tuple[int, int] | None = None
              ) -> tuple[int, int]:
    """Read ``[height, width]``: two integers >= 1 (and <= ``upper``, when given)."""
    v = sec.raw(key)
    hi = upper or (MAX_IMAGE_SIDE, MAX_IMAGE_SIDE)
    ok = isinstance(v, list) and len(v) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= h
        for x, h in zip(v, hi, strict=True))
    if not ok:
        raise ConfigError(sec.source, sec.path(key), f'{what}: [height, width], integers in '
                          f'[1, {hi[0]}] and [1, {hi[1]}]', v)
    return int(v[0]), int(v[1])


def _image_term(sec: Section, robot: RobotSpec) -> ImageTerm:
    """Parse one ``{term: image, ...}`` entry against the robot's cameras."""
    src = sec.source
    camera = sec.string('camera')
    cams = {c.name: c for c in robot.cameras}
    if camera not in cams:
        raise ConfigError(src, sec.path('camera'), f'a camera of {robot.name} '
                          f"{sorted(cams)} (its robot spec's cameras:)", camera)
    cam = cams[camera]
    if cam.encoding not in IMAGE_ENCODINGS:
        raise ConfigError(src, sec.path('camera'), f'a camera whose encoding the policy node '
                          f'converts (one of {list(IMAGE_ENCODINGS)})',
                          f'{camera!r} publishes {cam.encoding}')
    height, width = _int_pair(sec, 'size', 'the network input size')
    crop = (_int_pair(sec, 'crop', f'a center crop within the {cam.width}x{cam.height} '
                      'camera image', (cam.height, cam.width))
            if sec.raw('crop', None) is not None else None)
    channels = sec.string('channels', 'rgb')
    if channels not in IMAGE_CHANNELS:
        raise ConfigError(src, sec.path('channels'), f'a channel order, one of '
                          f'{list(IMAGE_CHANNELS)}', channels)
    c = IMAGE_CHANNELS[channels]
    scale = sec.number('scale', 1.0 / 255.0, positive=True)
    mean = _vector(sec, 'mean', c, 0.0)
    std = _vector(sec, 'std', c, 1.0, positive=True)
    history = sec.integer('history', 1, minimum=1, maximum=MAX_IMAGE_HISTORY)
    max_age_s = sec.number('max_age_s', 0.2, positive=True)
    topic = sec.string('topic', f'{camera}/image_raw')
    sec.reject_unknown()
    return ImageTerm(camera, topic, height, width, crop, channels, scale, mean, std, history,
                     max_age_s)


def _observation(top: Section, n: int, robot: RobotSpec
                 ) -> tuple[tuple[ObsTerm, ...], tuple[ImageTerm, ...]]:
    src = top.source
    items = top.items('observation')
    if not items:
        raise ConfigError(src, 'observation', 'a non-empty list of terms', items)
    terms = []
    images: list[ImageTerm] = []
    seen: set[str] = set()
    for k, item in enumerate(items):
        sec = Section(item, src, f'observation[{k}]')
        name = sec.string('term')
        if name == IMAGE_TERM:
            img = _image_term(sec, robot)
            if any(t.camera == img.camera for t in images):
                raise ConfigError(src, sec.path('camera'), 'a camera no earlier image term '
                                  'uses (use history for past frames)', img.camera)
            if images and (img.height, img.width) != (images[0].height, images[0].width):
                raise ConfigError(src, sec.path('size'), f'the size of the first image term '
                                  f'[{images[0].height}, {images[0].width}] (all images '
                                  'share one stack)', [img.height, img.width])
            images.append(img)
            continue
        if name not in TERMS:
            raise ConfigError(src, sec.path('term'), f'one of the registered terms '
                              f'{sorted([*TERMS, IMAGE_TERM])}', name)
        if name in seen:
            raise ConfigError(src, sec.path('term'), 'a term not listed before (use history '
                              'for past values)', name)
        seen.add(name)
        tdef = TERMS[name]
        size = tdef.size(n)
        scale = _vector(sec, 'scale', size, 1.0)
        offset = _vector(sec, 'offset', size, 0.0)
        clip = _optional_positive(sec, 'clip')
        history = sec.integer('history', 1, minimum=1, maximum=100)
        options = {key: sec.number(key, default, positive=True)
                   for key, default in tdef.options.items()}
        sec.reject_unknown()
        terms.append(ObsTerm(name, size, scale, offset, clip, history, options))
    return tuple(terms), tuple(images)


def _action(top: Section, n: int) -> ActionSpec:
    sec = top.section('action')
    src = sec.source
    mode = sec.string('mode', 'offset')
    if mode not in ACTION_MODES:
        raise ConfigError(src, sec.path('mode'), f'one of {ACTION_MODES}', mode)
    scale = _vector(sec, 'scale', n, 1.0, positive=True)
    clip = _optional_positive(sec, 'clip')
    low_pass = sec.number('low_pass_hz', 0.0, minimum=0.0)
    rate = sec.number('rate_limit_rad', 0.0, minimum=0.0)
    reject = sec.number('reject_abs', 100.0, positive=True)
    if clip is not None and reject <= clip:
        raise ConfigError(src, sec.path('reject_abs'), f'a number > clip ({clip}): outputs '
                          'beyond it are faults, outputs beyond clip are only clipped', reject)
    margin = sec.number('limit_margin_rad', 0.0, minimum=0.0)
    sec.reject_unknown()
    return ActionSpec(mode, scale, clip, low_pass, rate, reject, margin)


def load_policy_spec(name_or_path: str | Path, robot: RobotSpec | None = None) -> PolicySpec:
    """Load and validate a policy spec by shipped name (``simreal_arm_reach``) or path.

    ``robot`` defaults to the robot the spec names; when given, its name must match.
    """
    path = resolve_named('policies', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    name = top.string('policy', path.stem)
    robot_name = top.string('robot')
    if robot is None:
        from simreal_ros.core.robot import load_robot
        robot = load_robot(robot_name)
    elif robot.name != robot_name:
        raise ConfigError(src, 'robot', f'{robot.name!r} (the robot being driven)', robot_name)
    model_raw = top.string('model')
    model = Path(model_raw).expanduser()
    model = model if model.is_absolute() else path.parent / model
    if model.suffix not in MODEL_SUFFIXES:
        raise ConfigError(src, 'model', 'a TorchScript .pt or an ONNX .onnx file', model_raw)
    rate = top.number('control_rate_hz', positive=True, maximum=MAX_RATE_HZ)
    joints, idx = _joints(top, robot)
    default = _default_pose(top, robot, joints, idx)
    observation, images = _observation(top, len(joints), robot)
    action = _action(top, len(joints))
    fall = parse_fall(top, robot)
    lower = robot.lower[idx] + action.limit_margin_rad
    upper = robot.upper[idx] - action.limit_margin_rad
    if np.any(lower >= upper):
        raise ConfigError(src, 'action.limit_margin_rad', 'a margin smaller than half of '
                          'every joint range', action.limit_margin_rad)
    if np.any(default < lower) or np.any(default > upper):
        raise ConfigError(src, 'default_pose', 'a pose inside the joint limits less '
                          'action.limit_margin_rad', default.tolist())
    ssec = top.section('safety', {})
    safety = SafetySpec(ssec.number('ramp_s', 2.0, minimum=0.0),
                        ssec.number('ramp_max_velocity', 0.5, positive=True),
                        ssec.number('stale_after_periods', 3.0, minimum=1.0))
    ssec.reject_unknown()
    tsec = top.section('topics', {})
    topics = TopicsSpec(tsec.string('joint_states', 'joint_states'),
                        tsec.string('joint_commands', 'joint_commands'),
                        tsec.string('goal', 'goal'), tsec.string('imu', 'imu/data'),
                        tsec.string('cmd_vel', 'cmd_vel'))
    tsec.reject_unknown()
    metadata = {k: top.raw(k) for k in ('description', 'training', 'card') if top.has(k)}
    top.reject_unknown()
    spec = PolicySpec(name, path, robot_name, model, rate, joints, idx, default, lower, upper,
                      observation, action, safety, topics, metadata, images, fall)
    if 'imu' in spec.needs and robot.imu is None:
        raise ConfigError(src, 'observation', f'terms that {robot.name} can feed (it has no '
                          'imu in its robot spec, so no imu/data)', sorted(spec.needs))
    return spec
