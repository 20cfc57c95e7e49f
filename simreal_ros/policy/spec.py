"""The policy interface, declared once: observation terms, action processing, rates, topics.

A policy spec (``config/policies/<name>.yaml``) says exactly what the network sees and what its
outputs mean, so the same file drives training, the sim and the real robot::

    observation vector = concat over terms (in file order) of
                         history of clip(scale * (value - offset), -clip, clip), oldest first
    joint target       = clamp_limits(rate_limit(low_pass(default + scale * clip(action))))

Observation terms are looked up in :data:`TERMS`; :func:`register_term` adds a new one in one
place (its size, the inputs it needs and how it is computed). Everything here is numpy only.
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
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import Section, check_number, load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.policy.safety import FallSpec, parse_fall

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MODEL_SUFFIXES = ('.pt', '.onnx')
#: the observation term that feeds camera frames (not in :data:`TERMS`: not in the vector)
IMAGE_TERM = 'image'
#: the channel orders an image term may ask for, and their channel counts
IMAGE_CHANNELS: dict[str, int] = {'rgb': 3, 'bgr': 3, 'gray': 1}
#: the sensor_msgs/Image encodings the policy node converts (without cv_bridge)
IMAGE_ENCODINGS = ('rgb8', 'bgr8', 'mono8')
MAX_IMAGE_HISTORY = 16
MAX_IMAGE_SIDE = 1024
MAX_RATE_HZ = 2000.0
ACTION_MODES = ('offset', 'absolute')
#: The inputs a term may need (``TermDef.needs``) and what feeds each. The node subscribes
#: ``imu/data`` only when a term needs ``imu`` and then also requires it to be fresh; a new
#: source (a new topic) needs code in the node and the controller, see docs/policy.md.
SOURCES: dict[str, str] = {
    'joint_states': 'joint_states (position, velocity): ObsInputs.position/velocity',
    'imu': 'imu/data (orientation, angular velocity): ObsInputs.imu_quat_wxyz/imu_gyro',
    'goal': 'goal (JointState position): ObsInputs.goal',
    'clock': 'the node clock: ObsInputs.time_s (time since the policy took over)',
    'cmd_vel': 'cmd_vel (Twist: linear.x, linear.y, angular.z): ObsInputs.cmd_vel/_age_s',
}
#: ``velocity_command``'s default ``timeout_s``: a command older than this (or none) is zero
CMD_VEL_TIMEOUT_S = 0.5


@dataclass(frozen=True)
class ObsInputs:
    """What observation terms are computed from, in the policy's joint order.

    ``goal`` is the absolute goal joint positions; ``imu_quat_wxyz`` the IMU orientation in the
    world frame; ``time_s`` the controller time since the policy took over (phase clocks);
    ``cmd_vel`` the latest velocity command ``(vx, vy, wz)`` (m/s, m/s, rad/s, base frame)
    and ``cmd_vel_age_s`` how long ago it was received (None for either: none received).
    """

    position: FloatArray
    velocity: FloatArray
    default: FloatArray
    last_action: FloatArray
    goal: FloatArray
    time_s: float = 0.0
    imu_gyro: FloatArray | None = None
    imu_quat_wxyz: FloatArray | None = None
    cmd_vel: FloatArray | None = None
    cmd_vel_age_s: float | None = None


@dataclass(frozen=True)
class TermDef:
    """One observation term: its size, the inputs it needs, how it is computed.

    ``size(n_joints)`` gives the number of values; ``compute(inputs, options)`` returns them;
    ``options`` lists the extra keys the term accepts in the YAML (with their defaults).
    """

    name: str
    size: Callable[[int], int]
    needs: tuple[str, ...]
    compute: Callable[[ObsInputs, dict[str, float]], FloatArray]
    options: dict[str, float] = field(default_factory=dict)
    description: str = ''


def _imu_quat(inputs: ObsInputs) -> FloatArray:
    if inputs.imu_quat_wxyz is None:
        raise ValueError('no imu/data received')
    q = np.asarray(inputs.imu_quat_wxyz, dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if not norm > 0.0:
        raise ValueError('imu orientation quaternion has zero norm')
    return q / norm


def projected_gravity(quat_wxyz: FloatArray) -> FloatArray:
    """Return the unit gravity direction (world -z) expressed in the body frame."""
    w, x, y, z = (float(v) for v in quat_wxyz)
    # R^T @ [0, 0, -1] for R the rotation of the body in the world
    return -np.array([2.0 * (x * z - w * y), 2.0 * (y * z + w * x),
                      1.0 - 2.0 * (x * x + y * y)], dtype=np.float64)


def _phase(inputs: ObsInputs, opts: dict[str, float]) -> FloatArray:
    angle = 2.0 * math.pi * inputs.time_s / opts['period_s']
    return np.array([math.sin(angle), math.cos(angle)], dtype=np.float64)


def _base_ang_vel(inputs: ObsInputs, _opts: dict[str, float]) -> FloatArray:
    if inputs.imu_gyro is None:
        raise ValueError('no imu/data received')
    return np.asarray(inputs.imu_gyro, dtype=np.float64)


def _velocity_command(inputs: ObsInputs, opts: dict[str, float]) -> FloatArray:
    # a robot that lost its teleop link stops: no command, or one older than timeout_s, is
    # the zero command (stand), never the last one held
    c, age = inputs.cmd_vel, inputs.cmd_vel_age_s
    if c is None or age is None or not age <= opts['timeout_s']:
        return np.zeros(3)
    v = np.asarray(c, dtype=np.float64).reshape(-1)
    if v.shape != (3,) or not np.all(np.isfinite(v)):
        raise ValueError(f'cmd_vel must be 3 finite numbers (vx, vy, wz), got {v.tolist()}')
    return v


TERMS: dict[str, TermDef] = {}


def register_term(term: TermDef) -> TermDef:
    """Add an observation term to :data:`TERMS`; raise ValueError on a bad definition.

    The name must be new and an identifier; every entry of ``needs`` must be one of
    :data:`SOURCES` (a typo there would silently mean no subscription, so it fails here);
    ``options`` must map identifiers to finite positive defaults.
    """
    if not isinstance(term.name, str) or not term.name.isidentifier():
        raise ValueError(f'observation term name {term.name!r} must be an identifier')
    if term.name in TERMS or term.name == IMAGE_TERM:
        raise ValueError(f'observation term {term.name!r} is already registered')
    if isinstance(term.needs, str) or not isinstance(term.needs, tuple):
        raise ValueError(f'observation term {term.name!r}: needs must be a tuple of sources '
                         f'from {sorted(SOURCES)}, got {term.needs!r}')
    unknown = [n for n in term.needs if n not in SOURCES]
    if unknown:
        raise ValueError(f'observation term {term.name!r} needs unknown sources {unknown}: '
                         f'known sources are {sorted(SOURCES)} (a new topic needs code in the '
                         'node and the controller, see docs/policy.md)')
    for key, default in term.options.items():
        if not (isinstance(key, str) and key.isidentifier()) or isinstance(default, bool) \
                or not isinstance(default, (int, float)) or not math.isfinite(default) \
                or default <= 0:
            raise ValueError(f'observation term {term.name!r}: option {key!r} needs an '
                             f'identifier name and a finite default > 0, got {default!r}')
    if not callable(term.size) or not callable(term.compute):
        raise ValueError(f'observation term {term.name!r}: size and compute must be callables')
    TERMS[term.name] = term
    return term


register_term(TermDef(
    'joint_pos_rel', lambda n: n, ('joint_states',),
    lambda i, _o: i.position - i.default, description='joint position - default pose (rad)'))
register_term(TermDef(
    'joint_vel', lambda n: n, ('joint_states',), lambda i, _o: i.velocity.copy(),
    description='joint velocity (rad/s)'))
register_term(TermDef(
    'last_action', lambda n: n, (), lambda i, _o: i.last_action.copy(),
    description='the previous raw network output after the action clip'))
register_term(TermDef(
    'goal', lambda n: n, ('goal',), lambda i, _o: i.goal - i.default,
    description='goal joint positions - default pose (rad), from the goal topic'))
register_term(TermDef(
    'goal_error', lambda n: n, ('goal', 'joint_states'), lambda i, _o: i.goal - i.position,
    description='goal - measured joint position (rad)'))
register_term(TermDef(
    'base_ang_vel', lambda _n: 3, ('imu',), _base_ang_vel,
    description='IMU angular velocity in the IMU frame (rad/s)'))
register_term(TermDef(
    'projected_gravity', lambda _n: 3, ('imu',),
    lambda i, _o: projected_gravity(_imu_quat(i)),
    description='unit gravity vector in the IMU frame, from the IMU orientation'))
register_term(TermDef(
    'phase', lambda _n: 2, ('clock',), _phase, {'period_s': 1.0},
    description='[sin, cos] of 2*pi*t/period_s, t = time since the policy took over'))
register_term(TermDef(
    'velocity_command', lambda _n: 3, ('cmd_vel',), _velocity_command,
    {'timeout_s': CMD_VEL_TIMEOUT_S},
    description='cmd_vel (vx, vy m/s, wz rad/s); zeros if none or older than timeout_s'))


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
