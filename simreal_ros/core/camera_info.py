"""Cameras without ROS: camera_info data, calibration files, driver settings, optical reality.

* :class:`CameraInfoData` is what ``NAME/camera_info`` carries (sensor_msgs/CameraInfo fields
  ``d``, ``k``, ``r``, ``p``), built either from a :class:`~simreal_ros.core.robot.CameraSpec`
  (the ideal pinhole the sim renders: no distortion) or from a calibration file.
* :func:`load_calibration` reads the YAML that ``camera_calibration_parsers`` writes (and the
  ROS ``cameracalibrator`` saves as ``ost.yaml``): ``image_width``, ``image_height``,
  ``camera_name``, ``camera_matrix``, ``distortion_model``, ``distortion_coefficients``,
  ``rectification_matrix``, ``projection_matrix``, each matrix as ``{rows, cols, data}``.
* :class:`CameraDriverConfig` is the OpenCV camera driver node's parameters.
* :class:`OpticalReality` is the ``camera:`` section of a reality file: how the virtual robot's
  camera really images the scene (what a calibration would have to find).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path

from simreal_ros.core.paths import resolve_named
from simreal_ros.core.robot import CameraSpec, load_robot
from simreal_ros.core.validate import (
    FromMapping,
    Section,
    check_number,
    load_yaml_mapping,
)
from simreal_ros.errors import ConfigError

DISTORTION_MODELS = ('plumb_bob', 'rational_polynomial', 'equidistant')


@dataclass(frozen=True)
class CameraInfoData:
    """The fields of sensor_msgs/CameraInfo that describe the lens (row-major matrices)."""

    width: int
    height: int
    k: tuple[float, ...]
    d: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
    r: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    p: tuple[float, ...] = ()
    distortion_model: str = 'plumb_bob'

    @classmethod
    def ideal(cls, cam: CameraSpec) -> 'CameraInfoData':
        """Return the distortion-free pinhole of ``cam`` (what the sim renders)."""
        fx, fy, cx, cy = cam.intrinsics()
        return cls(cam.width, cam.height, (fx, 0.0, cx, 0.0, fy, cy, 0.0, 0.0, 1.0),
                   p=(fx, 0.0, cx, 0.0, 0.0, fy, cy, 0.0, 0.0, 0.0, 1.0, 0.0))

    def scaled_to(self, width: int, height: int) -> 'CameraInfoData':
        """Return the same lens for frames of another resolution (binned or scaled)."""
        if (width, height) == (self.width, self.height):
            return self
        sx, sy = width / self.width, height / self.height
        k, p = list(self.k), list(self.p)
        for m, (fx, cx, fy, cy) in ((k, (0, 2, 4, 5)), (p, (0, 2, 5, 6))):
            if m:
                m[fx] *= sx
                m[cx] = (m[cx] + 0.5) * sx - 0.5
                m[fy] *= sy
                m[cy] = (m[cy] + 0.5) * sy - 0.5
        return CameraInfoData(width, height, tuple(k), self.d, self.r, tuple(p),
                              self.distortion_model)


def _matrix(sec: Section, key: str, rows: int, cols: int | tuple[int, ...]) -> tuple[float, ...]:
    m = sec.section(key)
    r = m.integer('rows')
    c = m.integer('cols')
    allowed = cols if isinstance(cols, tuple) else (cols,)
    if r != rows or c not in allowed:
        want = ' or '.join(f'{rows}x{a}' for a in allowed)
        raise ConfigError(sec.source, m.path('rows' if r != rows else 'cols'), f'a {want} matrix',
                          f'{r}x{c}')
    data = m.items('data')
    if len(data) != r * c:
        raise ConfigError(sec.source, m.path('data'), f'{r * c} numbers (rows*cols)', data)
    m.reject_unknown()
    return tuple(check_number(v, sec.source, f'{m.path("data")}[{i}]') for i, v in
                 enumerate(data))


def load_calibration(path: str | Path) -> CameraInfoData:
    """Read a camera_calibration_parsers YAML file (``ost.yaml``); ConfigError on bad content."""
    src = str(path)
    top = Section(load_yaml_mapping(path), src)
    width = top.integer('image_width', minimum=1)
    height = top.integer('image_height', minimum=1)
    top.raw('camera_name', '')
    model = top.string('distortion_model', 'plumb_bob')
    if model not in DISTORTION_MODELS:
        raise ConfigError(src, 'distortion_model', f'one of {list(DISTORTION_MODELS)}', model)
    k = _matrix(top, 'camera_matrix', 3, 3)
    if k[0] <= 0 or k[4] <= 0:
        raise ConfigError(src, 'camera_matrix.data', 'fx (data[0]) and fy (data[4]) > 0',
                          [k[0], k[4]])
    d = (_matrix(top, 'distortion_coefficients', 1, (4, 5, 8, 12, 14))
         if top.has('distortion_coefficients') else (0.0,) * 5)
    r = (_matrix(top, 'rectification_matrix', 3, 3) if top.has('rectification_matrix')
         else CameraInfoData.r)
    p = (_matrix(top, 'projection_matrix', 3, 4) if top.has('projection_matrix')
         else (k[0], 0.0, k[2], 0.0, 0.0, k[4], k[5], 0.0, 0.0, 0.0, 1.0, 0.0))
    top.reject_unknown()
    return CameraInfoData(width, height, k, d, r, p, model)


def camera_info_for(cam: CameraSpec, calibration: str = '') -> CameraInfoData:
    """``calibration`` (or the spec's) if given, else the spec's ideal pinhole."""
    path = calibration or cam.calibration
    return load_calibration(path) if path else CameraInfoData.ideal(cam)


def find_camera(robot: str, name: str, source: str) -> CameraSpec:
    """Camera ``name`` of robot spec ``robot``; ConfigError naming the cameras it has."""
    spec = load_robot(robot)
    for cam in spec.cameras:
        if cam.name == name:
            return cam
    have = ', '.join(c.name for c in spec.cameras) or 'none'
    raise ConfigError(source, 'camera', f'a camera of {spec.source.name} ({have})', name)


@dataclass(frozen=True)
class CameraDriverConfig(FromMapping):
    """Parameters of ``simreal_camera_driver`` (the ROS parameters have the same names).

    * ``robot`` / ``camera``: the robot spec and the name of its camera (topics, frame, the
      requested resolution and rate, ``device``, ``calibration``).
    * ``device``: overrides the spec's: a V4L2 index (``0``) or path (``/dev/video0``), or an
      ``http://``/``rtsp://`` stream URL.
    * ``width`` / ``height`` / ``fps_hz``: 0 takes the spec's; requested from the device and
      read back (the node logs and reports what the device really does).
    * ``exposure``: -1 leaves the device's auto exposure; otherwise set as
      ``CAP_PROP_EXPOSURE`` (V4L2: units of 100 us).
    * ``calibration``: camera_calibration_parsers YAML overriding the spec's ('' = the spec's,
      or the spec's ideal pinhole when it has none).
    * ``capture_latency_s``: the delay from exposure to the end of the read, subtracted from
      the read time to stamp a frame; -1 estimates it from the driver's buffer timestamps
      where the backend gives them (V4L2) and takes 0 where it cannot (streams: measure it
      with ``simreal bench camera`` and set it).
    * ``reconnect_period_s``: after a read fails (unplugged, stream dropped) the device is
      reopened every this many seconds.
    """

    SOURCE = 'camera_driver'

    robot: str = 'simreal_arm'
    camera: str = 'camera'
    device: str = ''
    width: int = 0
    height: int = 0
    fps_hz: float = 0.0
    exposure: float = -1.0
    calibration: str = ''
    capture_latency_s: float = -1.0
    reconnect_period_s: float = 1.0
    diagnostics_period_s: float = 1.0

    def __post_init__(self) -> None:
        src = 'camera_driver'
        for key in ('width', 'height'):
            if getattr(self, key) < 0:
                raise ConfigError(src, key, "pixels >= 0 (0: the spec's)", getattr(self, key))
        for key, low in (('fps_hz', 0.0), ('capture_latency_s', -1.0)):
            v = getattr(self, key)
            if not math.isfinite(v) or v < low or (key == 'capture_latency_s' and -1 < v < 0):
                raise ConfigError(src, key, 'a number >= 0' + (' or -1 (estimate)' if low
                                                              else " (0: the spec's)"), v)
        for key in ('reconnect_period_s', 'diagnostics_period_s'):
            v = getattr(self, key)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(src, key, 'a number of seconds > 0', v)
        if not math.isfinite(self.exposure):
            raise ConfigError(src, 'exposure', 'a number (-1: auto)', self.exposure)
        if not self.robot or not self.camera:
            raise ConfigError(src, 'robot' if not self.robot else 'camera', 'a non-empty name',
                              '')



def device_argument(device: str) -> int | str:
    """Return what ``cv2.VideoCapture`` opens: an index for ``'0'``, else the path or URL."""
    return int(device) if device.isdigit() else device


#: bounds of a camera pose offset: an extrinsics *error*, not another camera placement
POSE_OFFSET_MAX_M = 0.5
POSE_OFFSET_MAX_RAD = 0.5


def _vector3(sec: Section, key: str, default: tuple[float, float, float], expected: str,
             bound: float) -> tuple[float, float, float]:
    """Return a list of 3 numbers each in [-bound, bound]; ConfigError naming the element."""
    v = sec.raw(key, list(default))
    if not isinstance(v, list) or len(v) != 3:
        raise ConfigError(sec.source, sec.path(key), expected, v)
    x, y, z = (check_number(e, sec.source, f'{sec.path(key)}[{i}]', minimum=-bound,
                            maximum=bound) for i, e in enumerate(v))
    return x, y, z


@dataclass(frozen=True)
class OpticalReality:
    """How the virtual robot's camera really images (``camera:`` of a reality file).

    The scene is rendered under ``lighting`` (every light of the scene, the headlight too:
    ``diffuse_scale`` and ``ambient_scale`` multiply their diffuse + specular and ambient
    colours; ``rotation_rad``, a rotation vector in the world frame, turns the direction of
    every light but the headlight) from the camera displaced by ``pose_offset``
    (``translation_m`` and ``rotation_rad``, a rotation vector, both in the camera's optical
    frame: x right, y down, z forward; the true pose is ``nominal * offset``), through the true
    ``intrinsics`` (which differ from the nominal calibration). Then, in this order, on the
    ideal render: lens ``distortion`` (k1, k2, p1, p2, k3 of the Brown-Conrady model, OpenCV's
    plumb_bob), ``blur_sigma_px`` (Gaussian), sensor noise (shot noise of a pixel that
    collects ``full_well_e`` electrons at full scale, 0 = none, and read noise ``noise_std``
    in 8-bit grey levels), exposure ``gain`` and ``white_balance`` (per-channel R, G, B
    factors; both amplify the noise, as analog gain and the ISP's white balance do),
    quantization to 8 bits; the frame is served ``latency_s`` after the state it shows.
    """

    gain: float = 1.0
    white_balance: tuple[float, float, float] = (1.0, 1.0, 1.0)
    noise_std: float = 0.0
    full_well_e: float = 0.0
    blur_sigma_px: float = 0.0
    distortion: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
    intrinsics: tuple[float, float, float, float] | None = None
    latency_s: float = 0.0
    jpeg_quality: int = 85
    seed: int = 0
    light_diffuse_scale: float = 1.0
    light_ambient_scale: float = 1.0
    light_rotation_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pose_translation_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pose_rotation_rad: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def nominal_lighting(self) -> bool:
        """Whether the scene is lit as modelled (no ``lighting:`` change)."""
        return (self.light_diffuse_scale, self.light_ambient_scale, self.light_rotation_rad) \
            == (1.0, 1.0, (0.0, 0.0, 0.0))

    @property
    def nominal_pose(self) -> bool:
        """Whether the camera sits where the robot spec says (no ``pose_offset:``)."""
        return self.pose_translation_m == (0.0, 0.0, 0.0) \
            and self.pose_rotation_rad == (0.0, 0.0, 0.0)

    @classmethod
    def from_reality(cls, path: str | Path) -> 'OpticalReality':
        """Read the ``camera:`` of reality ``path`` (or shipped overlay name); ideal if absent."""
        path = resolve_named('overlays', str(path))
        src = str(path)
        top = load_yaml_mapping(path)
        if top.get('camera') is None:
            return cls()
        sec = Section(top['camera'], src, 'camera')
        wb = sec.raw('white_balance', [1.0, 1.0, 1.0])
        if not isinstance(wb, list) or len(wb) != 3:
            raise ConfigError(src, sec.path('white_balance'), 'a list of 3 gains [r, g, b]',
                              wb)
        r, g, b = (check_number(v, src, f'{sec.path("white_balance")}[{i}]', positive=True)
                   for i, v in enumerate(wb))
        dist = sec.raw('distortion', [0.0] * 5)
        if not isinstance(dist, list) or len(dist) != 5:
            raise ConfigError(src, sec.path('distortion'), 'a list of 5 numbers [k1, k2, p1, '
                              'p2, k3]', dist)
        d = tuple(check_number(v, src, f'{sec.path("distortion")}[{i}]', minimum=-2.0,
                               maximum=2.0) for i, v in enumerate(dist))
        k = None
        if sec.has('intrinsics'):
            ks = sec.section('intrinsics')
            k = (ks.number('fx', positive=True), ks.number('fy', positive=True),
                 ks.number('cx', minimum=0.0), ks.number('cy', minimum=0.0))
            ks.reject_unknown()
        light = sec.section('lighting', {})
        diffuse = light.number('diffuse_scale', 1.0, minimum=0.0, maximum=10.0)
        ambient = light.number('ambient_scale', 1.0, minimum=0.0, maximum=10.0)
        light_rot = _vector3(light, 'rotation_rad', (0.0, 0.0, 0.0), 'a list of 3 numbers '
                             '[rx, ry, rz] (a rotation vector in the world frame, rad)', math.pi)
        light.reject_unknown()
        pose = sec.section('pose_offset', {})
        t = _vector3(pose, 'translation_m', (0.0, 0.0, 0.0), 'a list of 3 numbers [x, y, z] '
                     '(m, optical frame: x right, y down, z forward)', POSE_OFFSET_MAX_M)
        rot = _vector3(pose, 'rotation_rad', (0.0, 0.0, 0.0), 'a list of 3 numbers '
                       '[rx, ry, rz] (a rotation vector in the optical frame, rad)',
                       POSE_OFFSET_MAX_RAD)
        pose.reject_unknown()
        out = cls(gain=sec.number('gain', 1.0, positive=True, maximum=16.0),
                  white_balance=(r, g, b),
                  noise_std=sec.number('noise_std', 0.0, minimum=0.0, maximum=128.0),
                  full_well_e=sec.number('full_well_e', 0.0, minimum=0.0, maximum=1e7),
                  blur_sigma_px=sec.number('blur_sigma_px', 0.0, minimum=0.0, maximum=20.0),
                  distortion=d, intrinsics=k,
                  latency_s=sec.number('latency_s', 0.0, minimum=0.0, maximum=2.0),
                  jpeg_quality=sec.integer('jpeg_quality', 85, minimum=1, maximum=100),
                  seed=sec.integer('seed', 0, minimum=0),
                  light_diffuse_scale=diffuse, light_ambient_scale=ambient,
                  light_rotation_rad=light_rot, pose_translation_m=t, pose_rotation_rad=rot)
        if 0.0 < out.full_well_e < 1.0:
            raise ConfigError(src, sec.path('full_well_e'), 'electrons >= 1 (0: no shot noise)',
                              out.full_well_e)
        sec.reject_unknown()
        return out
