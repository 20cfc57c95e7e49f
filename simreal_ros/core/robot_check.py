"""Check a robot spec against its model file: every problem, one line each, with the fix.

:func:`check_robot` loads the spec collecting its problems (``load_robot(path, problems)``) and
then reads the model (URDF or MJCF) as XML, without a physics engine, and finds:

* joints of the spec missing from the model, or not revolute (URDF ``revolute``/``continuous``,
  MJCF ``hinge``);
* spec limits outside the model's (the spec may narrow the model's range, never widen it),
  limits with lower >= upper, a home pose outside the limits;
* servo IDs used twice (a bus answers one servo per ID);
* ``base_frame``, ``tool_frame``, ``imu.link`` and camera parents that are not links (bodies);
* meshes that are not found (``package://`` through ``SIMREAL_MODEL_PATH`` and the ament index)
  or in a format MuJoCo does not load (it loads STL, OBJ and MSH);
* implausible inertias: mass <= 0, a principal moment <= 0, or moments that break the
  triangle inequality (``ixx + iyy >= izz`` and its turns: no rigid body has them).

Each problem is a :class:`Problem`, printed as ``<file>: <what> — <what to fix>``.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path
from xml.etree import ElementTree

from simreal_ros.core.model_files import (
    MUJOCO_MESH_SUFFIXES,
    ModelFileError,
    model_links,
    model_meshes,
)
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError

#: relative slack of the triangle inequality of principal moments (rounded CAD exports)
INERTIA_SLACK = 1e-6


@dataclass(frozen=True)
class Problem:
    """One problem of a robot: the file it is in, what is wrong, what to do about it."""

    file: str
    what: str
    fix: str

    def __str__(self) -> str:
        """``<file>: <what> — <what to fix>``."""
        return f'{self.file}: {self.what} — {self.fix}'

    @classmethod
    def from_config_error(cls, exc: ConfigError) -> Problem:
        """Return the problem a spec loader's ConfigError describes."""
        what = f'{exc.key} is {exc.got!r}' if exc.key else f'{exc.got!r}'
        return cls(exc.source, what, f'make it {exc.expected}')


@dataclass(frozen=True)
class ModelJoint:
    """A joint of the model: its kind and its position range in rad (None: unlimited)."""

    revolute: bool
    kind: str
    lower: float | None
    upper: float | None


def _float(value: str | None, default: float = 0.0) -> float:
    try:
        return float(value) if value is not None else default
    except ValueError:
        return math.nan


def urdf_joints(root: ElementTree.Element) -> dict[str, ModelJoint]:
    """Return the joints of a URDF tree."""
    out = {}
    for j in root.iter('joint'):
        kind = j.get('type', '')
        limit = j.find('limit')
        lower = upper = None
        if kind == 'revolute' and limit is not None:
            lower, upper = _float(limit.get('lower')), _float(limit.get('upper'))
        out[str(j.get('name'))] = ModelJoint(kind in ('revolute', 'continuous'), kind,
                                             lower, upper)
    return out


def mjcf_joints(root: ElementTree.Element) -> dict[str, ModelJoint]:
    """Return the joints of an MJCF tree (ranges in degrees unless ``angle="radian"``)."""
    compiler = root.find('compiler')
    degrees = compiler is None or compiler.get('angle', 'degree') == 'degree'
    out = {}
    for j in root.iter('joint'):
        kind = j.get('type', 'hinge')
        lower = upper = None
        rng = j.get('range')
        if rng and j.get('limited', 'auto') != 'false':
            parts = [_float(v) for v in rng.split()]
            if len(parts) == 2 and parts[0] < parts[1]:
                lower, upper = ((math.radians(parts[0]), math.radians(parts[1])) if degrees
                                else (parts[0], parts[1]))
        out[str(j.get('name'))] = ModelJoint(kind == 'hinge', kind, lower, upper)
    return out


def _inertia_problems(owner: str, mass: float, moments: tuple[float, float, float]) -> list[str]:
    """Return what is implausible about a body's mass and principal moments (or nothing)."""
    out = []
    if not mass > 0:
        out.append(f'mass {mass} kg of {owner!r} is not > 0')
    if not all(m > 0 for m in moments):
        out.append(f'inertia {list(moments)} of {owner!r} has a moment <= 0')
    else:
        a, b, c = moments
        slack = INERTIA_SLACK * (a + b + c)
        if a + b < c - slack or b + c < a - slack or a + c < b - slack:
            out.append(f'inertia {list(moments)} of {owner!r} breaks the triangle '
                       'inequality (ixx + iyy >= izz and its turns)')
    return out


def urdf_inertias(root: ElementTree.Element) -> list[str]:
    """Implausible ``<inertial>`` of URDF links."""
    out = []
    for link in root.iter('link'):
        inertial = link.find('inertial')
        if inertial is None:
            continue
        mass_el, inertia = inertial.find('mass'), inertial.find('inertia')
        mass = _float(mass_el.get('value') if mass_el is not None else None, math.nan)
        if inertia is None:
            moments = (math.nan, math.nan, math.nan)
        else:
            moments = (_float(inertia.get('ixx')), _float(inertia.get('iyy')),
                       _float(inertia.get('izz')))
        out += _inertia_problems(str(link.get('name')), mass, moments)
    return out


def mjcf_inertias(root: ElementTree.Element) -> list[str]:
    """Implausible ``<inertial>`` (mass, diaginertia) of MJCF bodies."""
    out = []
    for body in root.iter('body'):
        inertial = body.find('inertial')
        if inertial is None or inertial.get('diaginertia') is None:
            continue
        parts = [_float(v) for v in str(inertial.get('diaginertia')).split()]
        moments = (parts + [math.nan] * 3)[:3]
        out += _inertia_problems(str(body.get('name')), _float(inertial.get('mass'), math.nan),
                                 (moments[0], moments[1], moments[2]))
    return out


def _joint_problems(robot: RobotSpec, joints: dict[str, ModelJoint]) -> list[Problem]:
    src, model, kind = str(robot.source), robot.urdf.name, robot.model_format.upper()
    out = []
    for js in robot.joints:
        mj = joints.get(js.name)
        if mj is None:
            out.append(Problem(src, f'joint {js.name!r} is not in {model}',
                               f'name one of the {kind} joints {sorted(joints)}'))
            continue
        if not mj.revolute:
            out.append(Problem(src, f'joint {js.name!r} is {mj.kind} in {model}',
                               f'drive only revolute joints (a servo turns), or fix the '
                               f'{kind}'))
            continue
        if mj.lower is None or mj.upper is None:
            continue
        if js.limits.lower < mj.lower - 1e-9 or js.limits.upper > mj.upper + 1e-9:
            out.append(Problem(
                src, f'limits of {js.name!r} [{js.limits.lower:g}, {js.limits.upper:g}] rad '
                f'exceed the {kind} limits [{mj.lower:.6g}, {mj.upper:.6g}]',
                f"narrow the spec's limits to within the {kind}'s, or widen the {kind}'s"))
    return out


def _frame_problems(robot: RobotSpec, links: set[str]) -> list[Problem]:
    src, model = str(robot.source), robot.urdf.name
    what = 'link' if robot.model_format == 'urdf' else 'body'
    named = [('base_frame', robot.base_frame), ('tool_frame', robot.tool_frame)]
    if robot.imu is not None:
        named.append(('imu.link', robot.imu.link))
    out = []
    for key, name in named:
        if name not in links:
            out.append(Problem(src, f'{key} {name!r} is not a {what} of {model}',
                               f'name one of {sorted(links)}'))
    return out


def _mesh_problems(robot: RobotSpec) -> list[Problem]:
    out = []
    seen: set[tuple[str, str]] = set()
    for ref in model_meshes(robot.urdf, robot.model_format):
        if (ref.owner, ref.uri) in seen:  # a link's visual and collision share a mesh
            continue
        seen.add((ref.owner, ref.uri))
        if ref.path is None:
            out.append(Problem(str(robot.urdf), f'mesh {ref.uri!r} of {ref.owner!r} is not '
                               f'found', ref.why))
        elif ref.path.suffix.lower() not in MUJOCO_MESH_SUFFIXES:
            out.append(Problem(str(robot.urdf), f'mesh {ref.uri!r} of {ref.owner!r} is '
                               f'{ref.path.suffix}, which MuJoCo does not load',
                               'convert it to STL or OBJ (e.g. with Blender or meshlab)'))
    return out


def check_robot(name_or_path: str | Path) -> tuple[RobotSpec | None, list[Problem]]:
    """Check a robot spec and its model; return the spec (None if unreadable) and problems."""
    errors: list[ConfigError] = []
    try:
        robot = load_robot(name_or_path, errors)
    except ConfigError as exc:
        return None, [Problem.from_config_error(e) for e in errors + [exc]]
    problems = [Problem.from_config_error(e) for e in errors]
    try:
        root = ElementTree.parse(robot.urdf).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        problems.append(Problem(str(robot.urdf), f'the model does not parse ({exc})',
                                'fix the XML'))
        return robot, problems
    urdf = robot.model_format == 'urdf'
    problems += _joint_problems(robot, urdf_joints(root) if urdf else mjcf_joints(root))
    problems += _frame_problems(robot, model_links(robot.urdf, robot.model_format))
    try:
        problems += _mesh_problems(robot)
    except ModelFileError as exc:  # pragma: no cover - the file parsed above
        problems.append(Problem(str(robot.urdf), str(exc), 'fix the XML'))
    fix = ('give each link a mass > 0 and the principal moments of a real body (CAD tools '
           'export them; a box of size a, b, c has ixx = m (b² + c²) / 12, ...)')
    problems += [Problem(str(robot.urdf), what, fix)
                 for what in (urdf_inertias(root) if urdf else mjcf_inertias(root))]
    return robot, problems


def summary(robot: RobotSpec) -> str:
    """Return the line printed for a spec without problems."""
    return (f'{robot.source}: robot {robot.name!r} is OK: {robot.n} joints '
            f'({", ".join(robot.joint_names)}), {robot.model_format.upper()} model '
            f'{robot.urdf}, {robot.bus_family} servo IDs '
            f'{[j.servo.servo_id for j in robot.joints]}')
