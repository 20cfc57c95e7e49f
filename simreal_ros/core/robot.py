"""The robot spec: the one description of a robot that every node reads.

Loaded from ``config/robots/<name>.yaml`` into frozen, validated dataclasses. A bad file fails
with the file, the dotted key and what is expected, e.g.
``simreal_arm.yaml: joints[2].limits.lower: expected a number, got 'abc'``.

``model:`` names the robot's model, a URDF or an MJCF file (``urdf:`` is another spelling of
the same key; giving both is an error): a ``package://`` or ``file://`` URI, an absolute path,
a path relative to the spec file, or one relative to the package's share directory
(simreal_ros/core/model_files.py resolves it and the meshes it names). ``RobotSpec.urdf`` holds
the model file whatever its format, ``RobotSpec.model_format`` says which.

``base:`` says what the robot stands on. Absent (or ``type: fixed``), the model's root link is
welded to the world: the arms. ``type: floating`` makes the root link (``base_frame``) a free
body (a legged robot, docs/legged.md):

* ``height_m``: the height of ``base_frame``'s origin above the ground at the home pose, level;
  the robot starts and is reset there (> 0, <= 5);
* ``imu``: the base's IMU (required): ``link``, ``frame_id``, ``position`` and the noise and
  bias settings below;
* ``feet``: the links that touch the ground, in the order of every per-foot quantity
  (``foot_contacts``); non-empty, unique, links of the model.

A floating base takes its IMU in ``base.imu``; a top-level ``imu:`` next to it is refused. An
IMU (either place) may give ``gyro_noise_std_rad_s`` and ``accel_noise_std_m_s2`` (white noise
per sample, standard deviation per axis), ``gyro_bias_rad_s`` and ``accel_bias_m_s2`` (a
constant offset per axis, ``[x, y, z]`` in the IMU frame) and ``orientation_noise_std_rad``;
all default to 0 (a perfect IMU).

``load_robot(path, problems)`` collects the problems of the joints (limits, home, servo IDs,
...) into ``problems`` and goes on, so that ``simreal robot check`` reports all of them; without
``problems`` the first one raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.model_files import ModelFileError, model_format, model_links, resolve_uri
from simreal_ros.core.paths import resolve_data_file, resolve_named
from simreal_ros.core.validate import Section, check_number, load_yaml_mapping
from simreal_ros.errors import ConfigError

FloatArray = npt.NDArray[np.float64]

#: the servo families a spec's ``bus.family`` may name: Dynamixel Protocol 2.0 (ROBOTIS) and
#: Feetech STS/SMS (the SO-100/SO-101's STS3215)
SERVO_FAMILIES = ('dynamixel', 'feetech')
#: ``operating_mode`` of a joint's servo: '' = the model's default (current-based position
#: where the model has current control, position otherwise); checked against the model by
#: :func:`simreal_ros.hardware.family.resolve_servos`
SERVO_OPERATING_MODES = ('', 'current_based_position', 'position')


@dataclass(frozen=True)
class JointLimits:
    """Position (rad), velocity (rad/s) and effort (N*m) limits of one joint."""

    lower: float
    upper: float
    velocity: float
    effort: float

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise ValueError(f'lower ({self.lower}) must be < upper ({self.upper})')
        if self.velocity <= 0 or self.effort <= 0:
            raise ValueError('velocity and effort limits must be > 0')


@dataclass(frozen=True)
class ServoSpec:
    """How one joint maps onto its servo on the bus.

    ``model`` names a model of the spec's ``bus.family``; ``model_number`` 0, ``torque_per_amp``
    0 and ``operating_mode`` '' mean "the model's" and are filled in by the hardware layer
    (:func:`simreal_ros.hardware.family.resolve_robot`), which owns the model tables.
    """

    servo_id: int
    model: str
    model_number: int
    ticks_per_rev: int
    zero_tick: int
    direction: int
    offset_rad: float
    torque_per_amp: float
    operating_mode: str = ''

    def ticks_to_rad(self, ticks: float) -> float:
        """Convert a present-position reading in ticks to the joint angle in rad."""
        return (self.direction * (ticks - self.zero_tick) * 2.0 * math.pi / self.ticks_per_rev
                + self.offset_rad)

    def rad_to_ticks(self, rad: float) -> int:
        """Convert a joint angle in rad to the nearest goal position in ticks."""
        return int(round(self.zero_tick + self.direction * (rad - self.offset_rad)
                         * self.ticks_per_rev / (2.0 * math.pi)))


@dataclass(frozen=True)
class JointSpec:
    """One actuated joint, in robot order."""

    name: str
    limits: JointLimits
    home: float
    kp: float
    kd: float
    armature: float
    servo: ServoSpec


@dataclass(frozen=True)
class ImuSpec:
    """An IMU rigidly mounted on ``link`` at ``position`` (link frame, axes the link's).

    Noise is white, per sample and axis (standard deviations); biases are constant offsets in
    the IMU frame. All zero: a perfect IMU.
    """

    link: str
    frame_id: str
    position: tuple[float, float, float]
    gyro_noise_std_rad_s: float = 0.0
    accel_noise_std_m_s2: float = 0.0
    orientation_noise_std_rad: float = 0.0
    gyro_bias_rad_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    accel_bias_m_s2: tuple[float, float, float] = (0.0, 0.0, 0.0)


#: ``base.type`` values: ``fixed`` (root link welded to the world, the default) or ``floating``
BASE_TYPES = ('fixed', 'floating')


@dataclass(frozen=True)
class BaseSpec:
    """A floating base: the root link ``base_frame`` is a free body standing on ``feet``.

    ``height_m`` is ``base_frame``'s origin above the ground at the home pose (level, at the
    origin); ``feet`` are links of the model, in the order of every per-foot quantity.
    """

    height_m: float
    feet: tuple[str, ...]


#: image encodings a camera of the spec may publish (sensor_msgs/Image ``encoding``)
CAMERA_ENCODINGS = ('rgb8', 'bgr8', 'mono8')


@dataclass(frozen=True)
class CameraSpec:
    """One camera: topics ``NAME/image_raw``, ``NAME/camera_info``; frame ``NAME_optical_frame``.

    ``xyz``/``rpy`` are the pose of the optical frame (z forward, x right, y down) in ``parent``
    (``world`` or a URDF link). Exactly one of ``fovy_deg`` (vertical field of view, square
    pixels, principal point at the image centre) and ``intrinsics`` (fx, fy, cx, cy in pixels)
    is set. ``device`` is the real camera (V4L2 index or path, MJPEG/RTSP URL; '' = none) and
    ``calibration`` an optional camera_calibration_parsers YAML file for ``camera_info``.
    """

    name: str
    parent: str
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    width: int
    height: int
    fps_hz: float
    fovy_deg: float | None = None
    given_intrinsics: tuple[float, float, float, float] | None = None
    encoding: str = 'rgb8'
    device: str = ''
    calibration: str = ''

    @property
    def frame_id(self) -> str:
        """The optical frame of the images (``NAME_optical_frame``)."""
        return f'{self.name}_optical_frame'

    @property
    def period_ns(self) -> int:
        """Nominal frame period in integer nanoseconds."""
        return int(round(1e9 / self.fps_hz))

    def intrinsics(self) -> tuple[float, float, float, float]:
        """Return (fx, fy, cx, cy) in pixels: the given ones, or from ``fovy_deg``."""
        if self.given_intrinsics is not None:
            return self.given_intrinsics
        assert self.fovy_deg is not None
        f = 0.5 * self.height / math.tan(math.radians(self.fovy_deg) / 2.0)
        return f, f, (self.width - 1) / 2.0, (self.height - 1) / 2.0

    def scaled(self, width: int, height: int) -> CameraSpec:
        """Return the same lens and pose at another resolution (binned pixels, rgb8)."""
        fx, fy, cx, cy = self.intrinsics()
        sx, sy = width / self.width, height / self.height
        return replace(self, width=width, height=height, fovy_deg=None, encoding='rgb8',
                       given_intrinsics=(fx * sx, fy * sy, (cx + 0.5) * sx - 0.5,
                                         (cy + 0.5) * sy - 0.5))


@dataclass(frozen=True)
class RobotSpec:
    """A robot: joints in order plus model, frames and bus settings."""

    name: str
    source: Path
    urdf: Path
    base_frame: str
    tool_frame: str
    timestep_s: float
    joints: tuple[JointSpec, ...]
    imu: ImuSpec | None = None
    bus_protocol: int = 2
    bus_baud: int = 1_000_000
    bus_family: str = 'dynamixel'
    cameras: tuple[CameraSpec, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    model_format: str = 'urdf'
    base: BaseSpec | None = None

    @property
    def floating(self) -> bool:
        """Whether the base is free (``base.type: floating``), not welded to the world."""
        return self.base is not None

    @property
    def model(self) -> Path:
        """The model file (URDF or MJCF, see ``model_format``); the same as ``urdf``."""
        return self.urdf

    @property
    def joint_names(self) -> list[str]:
        """Joint names in robot order."""
        return [j.name for j in self.joints]

    @property
    def n(self) -> int:
        """Number of actuated joints."""
        return len(self.joints)

    def index(self, name: str) -> int:
        """Return the robot-order index of joint ``name``."""
        for i, j in enumerate(self.joints):
            if j.name == name:
                return i
        raise KeyError(name)

    def array(self, attr: str) -> FloatArray:
        """Per-joint values of a JointSpec or JointLimits attribute, as an array."""
        out = []
        for j in self.joints:
            obj: Any = j.limits if hasattr(j.limits, attr) else j
            out.append(float(getattr(obj, attr)))
        return np.asarray(out, dtype=np.float64)

    @property
    def home(self) -> FloatArray:
        """Home pose in robot order (rad)."""
        return self.array('home')

    @property
    def lower(self) -> FloatArray:
        """Lower position limits (rad)."""
        return self.array('lower')

    @property
    def upper(self) -> FloatArray:
        """Upper position limits (rad)."""
        return self.array('upper')

    @property
    def velocity_limit(self) -> FloatArray:
        """Velocity limits (rad/s)."""
        return self.array('velocity')

    @property
    def effort_limit(self) -> FloatArray:
        """Effort limits (N*m)."""
        return self.array('effort')


def _model(top: Section, src: str, base: Path) -> tuple[Path, str]:
    """Resolve ``model:`` (or its spelling ``urdf:``) to the model file and its format."""
    if top.has('model') and top.has('urdf'):
        raise ConfigError(src, 'model', "one of 'model' and 'urdf' (two spellings of the "
                          "robot's model file)", 'both')
    key = 'urdf' if top.has('urdf') else 'model'
    value = top.string(key)
    expected = 'a URDF or MJCF file (package://PKG/..., file://..., or a path)'
    try:
        if value.startswith(('package://', 'file://')):
            model = resolve_uri(value, base)
        else:
            model = resolve_data_file(value, base)
            if not model.is_file():
                raise ModelFileError(f'{model} does not exist')
        return model, model_format(model)
    except ModelFileError as exc:
        raise ConfigError(src, key, expected, f'{value} ({exc})') from None


def load_robot(name_or_path: str | Path,
               problems: list[ConfigError] | None = None) -> RobotSpec:
    """Load and validate a robot spec given by shipped name (``simreal_arm``) or file path.

    With ``problems``, a bad joint is added to it and loading goes on (the joint is left out
    where it cannot be built); without, the first problem raises ConfigError.
    """
    path = resolve_named('robots', str(name_or_path))
    src = str(path)
    top = Section(load_yaml_mapping(path), src)

    def report(exc: ConfigError) -> None:
        if problems is None:
            raise exc
        problems.append(exc)

    name = top.string('robot')
    urdf, fmt = _model(top, src, path.parent)
    physics = top.section('physics', {})
    timestep = physics.number('timestep_s', 0.001, positive=True, maximum=0.05)
    physics.reject_unknown()

    defaults = top.section('servo_defaults', {})
    d_model = defaults.string('model', 'XM430-W350')
    d_model_number = defaults.integer('model_number', 0, minimum=0)  # 0: the model's
    d_ticks = defaults.integer('ticks_per_rev', 4096, minimum=2)
    d_zero = defaults.integer('zero_tick', d_ticks // 2, minimum=0)
    d_kt = defaults.number('torque_per_amp', 0.0, minimum=0.0)  # 0: the model's nominal
    d_mode = _operating_mode(defaults, '')
    defaults.reject_unknown()

    raw_joints = top.items('joints')
    if not raw_joints:
        raise ConfigError(src, 'joints', 'a non-empty list of joints', raw_joints)
    joints: list[JointSpec] = []
    seen_names: set[str] = set()
    seen_ids: set[int] = set()
    for i, rj in enumerate(raw_joints):
        try:
            joint = _joint(Section(rj, src, f'joints[{i}]'), seen_names, seen_ids, report,
                           (d_model, d_model_number, d_ticks, d_zero, d_kt, d_mode))
        except ConfigError as exc:
            report(exc)
            continue
        joints.append(joint)

    imu = None
    if top.has('imu') and top.raw('imu') is not None:
        imu = _imu(top.section('imu'))
    base, base_imu = _base(top, src, urdf, fmt)
    if base_imu is not None:
        if imu is not None:
            raise ConfigError(src, 'imu', 'no top-level imu with a floating base (its IMU is '
                              'base.imu)', 'both imu and base.imu')
        imu = base_imu
    bus = top.section('bus', {})
    family = bus.string('family', 'dynamixel')
    if family not in SERVO_FAMILIES:
        raise ConfigError(src, 'bus.family', f'one of {", ".join(SERVO_FAMILIES)}', family)
    protocol = bus.integer('protocol', 2 if family == 'dynamixel' else 0)
    if family == 'dynamixel' and protocol != 2:
        raise ConfigError(src, 'bus.protocol', '2 (Dynamixel Protocol 2.0)', protocol)
    if family == 'feetech' and protocol != 0:
        raise ConfigError(src, 'bus.protocol', '0 (Feetech STS/SMS, little-endian)', protocol)
    baud = bus.integer('baud', 1_000_000, minimum=9600)
    bus.reject_unknown()
    cameras = _cameras(top, src, path.parent, urdf, fmt)
    spec = RobotSpec(name=name, source=path, urdf=urdf, model_format=fmt,
                     base_frame=top.string('base_frame', 'base_link'),
                     tool_frame=top.string('tool_frame', 'tool0'), timestep_s=timestep,
                     joints=tuple(joints), imu=imu, bus_protocol=protocol, bus_baud=baud,
                     bus_family=family,
                     cameras=cameras, base=base)
    top.reject_unknown()
    return spec


def _joint(js: Section, seen_names: set[str], seen_ids: set[int],
           report: Callable[[ConfigError], None],
           defaults: tuple[str, int, int, int, float, str]) -> JointSpec:
    """Read one entry of ``joints:``; ``report`` gets the problems that leave it usable."""
    d_model, d_model_number, d_ticks, d_zero, d_kt, d_mode = defaults
    src = js.source
    jname = js.unique_string('name', seen_names, 'a joint name')
    lim = js.section('limits')
    lower = lim.number('lower', minimum=-2 * math.pi, maximum=2 * math.pi)
    upper = lim.number('upper', minimum=-2 * math.pi, maximum=2 * math.pi)
    if not lower < upper:
        raise ConfigError(src, lim.path('upper'), f'a number > lower ({lower})', upper)
    limits = JointLimits(lower, upper, lim.number('velocity', positive=True),
                         lim.number('effort', positive=True))
    lim.reject_unknown()
    home = js.number('home', 0.0)
    if not lower <= home <= upper:
        report(ConfigError(src, js.path('home'), f'a position within [{lower}, {upper}]',
                           home))
        home = min(max(home, lower), upper)
    gains = js.section('gains')
    kp = gains.number('kp', positive=True)
    kd = gains.number('kd', minimum=0.0)
    gains.reject_unknown()
    sid = js.integer('servo_id', minimum=0, maximum=252)
    if sid in seen_ids:
        report(ConfigError(src, js.path('servo_id'), 'a servo id not used before', sid))
    seen_ids.add(sid)
    direction = js.integer('direction', 1)
    if direction not in (1, -1):
        raise ConfigError(src, js.path('direction'), '1 or -1', direction)
    ticks = js.integer('ticks_per_rev', d_ticks, minimum=2)
    model = js.string('model', d_model)
    # servo_defaults' model number and torque constant are its model's: a joint of
    # another model gets its own (0 = from the model table)
    same = model == d_model
    servo = ServoSpec(
        servo_id=sid, model=model,
        model_number=js.integer('model_number', d_model_number if same else 0, minimum=0),
        ticks_per_rev=ticks, zero_tick=js.integer('zero_tick', d_zero, minimum=0),
        direction=direction, offset_rad=js.number('offset_rad', 0.0),
        torque_per_amp=js.number('torque_per_amp', d_kt if same else 0.0, minimum=0.0),
        operating_mode=_operating_mode(js, d_mode))
    joint = JointSpec(jname, limits, home, kp, kd, js.number('armature', 0.0, minimum=0.0),
                      servo)
    js.reject_unknown()
    return joint


def _imu(isec: Section) -> ImuSpec:
    """Read an IMU section (top-level ``imu:`` or ``base.imu``)."""
    src = isec.source
    pos = isec.raw('position', [0.0, 0.0, 0.0])
    if not isinstance(pos, list) or len(pos) != 3:
        raise ConfigError(src, isec.path('position'), 'a list of 3 numbers [x, y, z]', pos)
    xyz = [check_number(v, src, f'{isec.path("position")}[{k}]') for k, v in enumerate(pos)]
    biases = {}
    for key in ('gyro_bias_rad_s', 'accel_bias_m_s2'):
        biases[key] = (_triple(isec, key, '[x, y, z] in the IMU frame')
                       if isec.has(key) else (0.0, 0.0, 0.0))
    imu = ImuSpec(isec.string('link'), isec.string('frame_id', 'imu_link'),
                  (xyz[0], xyz[1], xyz[2]),
                  gyro_noise_std_rad_s=isec.number('gyro_noise_std_rad_s', 0.0, minimum=0.0),
                  accel_noise_std_m_s2=isec.number('accel_noise_std_m_s2', 0.0, minimum=0.0),
                  orientation_noise_std_rad=isec.number('orientation_noise_std_rad', 0.0,
                                                        minimum=0.0, maximum=math.pi),
                  gyro_bias_rad_s=biases['gyro_bias_rad_s'],
                  accel_bias_m_s2=biases['accel_bias_m_s2'])
    isec.reject_unknown()
    return imu


def _base(top: Section, src: str, urdf: Path, fmt: str
          ) -> tuple[BaseSpec | None, ImuSpec | None]:
    """Read the optional ``base:`` section: (None, None) for a fixed base."""
    if not top.has('base') or top.raw('base') is None:
        return None, None
    bsec = top.section('base')
    btype = bsec.string('type')
    if btype not in BASE_TYPES:
        raise ConfigError(src, bsec.path('type'), f'one of {", ".join(BASE_TYPES)}', btype)
    if btype == 'fixed':
        bsec.reject_unknown()  # a fixed base has nothing else to say
        return None, None
    height = bsec.number('height_m', positive=True, maximum=5.0)
    if not bsec.has('imu') or not isinstance(bsec.raw('imu'), dict):
        raise ConfigError(src, bsec.path('imu'), 'the base IMU: a mapping with link, and '
                          'optionally frame_id, position, noise and bias', bsec.raw('imu', None))
    imu = _imu(bsec.section('imu'))
    raw_feet = bsec.raw('feet')
    if (not isinstance(raw_feet, list) or not raw_feet
            or not all(isinstance(f, str) and f for f in raw_feet)):
        raise ConfigError(src, bsec.path('feet'), 'a non-empty list of foot link names',
                          raw_feet)
    for k, foot in enumerate(raw_feet):
        if foot in raw_feet[:k]:
            raise ConfigError(src, f'{bsec.path("feet")}[{k}]', 'a foot link not listed '
                              'before', foot)
    links = model_links(urdf, fmt)
    for k, foot in enumerate(raw_feet):
        if links and foot not in links:
            raise ConfigError(src, f'{bsec.path("feet")}[{k}]', f'a link of {urdf.name} '
                              f'({", ".join(sorted(links))})', foot)
    if links and imu.link not in links:
        raise ConfigError(src, bsec.path('imu.link'), f'a link of {urdf.name} '
                          f'({", ".join(sorted(links))})', imu.link)
    bsec.reject_unknown()
    return BaseSpec(height, tuple(raw_feet)), imu


def _operating_mode(sec: Section, default: str) -> str:
    mode = sec.raw('operating_mode', default)
    if mode not in SERVO_OPERATING_MODES:
        raise ConfigError(sec.source, sec.path('operating_mode'),
                          f'one of {", ".join(m for m in SERVO_OPERATING_MODES if m)}', mode)
    return str(mode)


def _triple(sec: Section, key: str, what: str) -> tuple[float, float, float]:
    v = sec.raw(key)
    if not isinstance(v, list) or len(v) != 3:
        raise ConfigError(sec.source, sec.path(key), f'a list of 3 numbers {what}', v)
    x, y, z = (check_number(e, sec.source, f'{sec.path(key)}[{k}]') for k, e in enumerate(v))
    return x, y, z


def _cameras(top: Section, src: str, base: Path, urdf: Path,
             fmt: str) -> tuple[CameraSpec, ...]:
    """Read the optional top-level ``cameras:`` list."""
    if not top.has('cameras') or top.raw('cameras') is None:
        return ()
    links: set[str] | None = None
    out: list[CameraSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(top.items('cameras')):
        cs = Section(raw, src, f'cameras[{i}]')
        name = cs.unique_string('name', seen, 'a camera name')
        if not all(c.isalnum() or c == '_' for c in name) or name[0].isdigit():
            raise ConfigError(src, cs.path('name'), 'a ROS name (letters, digits, _; not '
                              'starting with a digit)', name)
        has_fov, has_k = cs.has('fovy_deg'), cs.has('intrinsics')
        if has_fov == has_k:
            raise ConfigError(src, cs.path('fovy_deg'), 'exactly one of fovy_deg and '
                              'intrinsics', 'both' if has_fov else 'neither')
        width = cs.integer('width', minimum=1, maximum=8192)
        height = cs.integer('height', minimum=1, maximum=8192)
        fovy = cs.number('fovy_deg', minimum=1.0, maximum=179.0) if has_fov else None
        given = None
        if has_k:
            ks = cs.section('intrinsics')
            fx, fy = ks.number('fx', positive=True), ks.number('fy', positive=True)
            cx = ks.number('cx', minimum=0.0, maximum=float(width))
            cy = ks.number('cy', minimum=0.0, maximum=float(height))
            ks.reject_unknown()
            given = (fx, fy, cx, cy)
        encoding = cs.string('encoding', 'rgb8')
        if encoding not in CAMERA_ENCODINGS:
            raise ConfigError(src, cs.path('encoding'), f'one of {list(CAMERA_ENCODINGS)}',
                              encoding)
        device = cs.raw('device', '')
        if isinstance(device, int) and not isinstance(device, bool):
            device = str(device)
        if not isinstance(device, str):
            raise ConfigError(src, cs.path('device'), "a V4L2 index or path, a stream URL, or "
                              "'' (none)", device)
        calibration = cs.raw('calibration', '')
        if not isinstance(calibration, str):
            raise ConfigError(src, cs.path('calibration'), "a calibration YAML path or ''",
                              calibration)
        if calibration:
            cal = resolve_data_file(calibration, base)
            if not cal.is_file():
                raise ConfigError(src, cs.path('calibration'), 'a path to an existing '
                                  'camera_calibration_parsers YAML file', str(cal))
            calibration = str(cal)
        parent = cs.string('parent')
        if parent != 'world':
            links = model_links(urdf, fmt) if links is None else links
            if parent not in links:
                raise ConfigError(src, cs.path('parent'), f"'world' or a link of {urdf.name} "
                                  f'({", ".join(sorted(links))})', parent)
        out.append(CameraSpec(
            name=name, parent=parent, xyz=_triple(cs, 'xyz', '[x, y, z] (m)'),
            rpy=_triple(cs, 'rpy', '[roll, pitch, yaw] (rad)'), width=width, height=height,
            fps_hz=cs.number('fps_hz', positive=True, maximum=1000.0), fovy_deg=fovy,
            given_intrinsics=given, encoding=encoding, device=device,
            calibration=calibration))
        cs.reject_unknown()
    return tuple(out)

