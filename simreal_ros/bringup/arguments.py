"""The launch arguments: names, defaults, choices, typing, and the files they name.

``simreal launch`` and ``launch/bringup.launch.py`` take the same ``name:=value`` arguments,
listed in :data:`ARGUMENTS`. :func:`parse_launch_args` turns them, once per plan, into one
frozen :class:`LaunchArgs`: every value typed, and every file an argument names loaded and
validated (the robot spec and its camera calibrations, the leader's robot spec and calibration,
overlays, randomization, scene, latency profile, policy spec and the existence of its weights).
The ``plan_*`` builders read that object; none of them re-reads text or loads a file.

So a bad argument or file is one :class:`~simreal_ros.errors.PlanError` before any process
starts, of the form ``ARG:=VALUE: FILE: KEY: expected ..., got ...`` (FILE the full path):
``simreal launch`` prints it as its one ``error:`` line, with or without ``--dry-run``. A
misspelled argument name gets ``did you mean ...?``.

Parsing imports no heavy module (rosbags, mujoco, torch, cv2): the ``ros2 launch`` process and
every ``simreal launch`` plan in a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import difflib
import fnmatch
import math
from types import MappingProxyType
from typing import Any, Callable, Mapping

from simreal_ros.core.calibration import Calibration, apply_calibration
from simreal_ros.core.calibration import load_calibration as load_joint_calibration
from simreal_ros.core.camera_info import load_calibration as load_camera_calibration
from simreal_ros.core.dynamics import Overlay, Randomization, load_overlay, load_randomization
from simreal_ros.core.excitation import PATTERNS
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.core.validate import load_yaml_mapping
from simreal_ros.errors import ConfigError, PlanError
from simreal_ros.latency.injection import Profile, load_profile
from simreal_ros.policy.spec import PolicySpec, load_policy_spec
from simreal_ros.sim.bridge_config import ENGINES, TIMING_MODES
from simreal_ros.sim.scene import Scene, load_scene
from simreal_ros.teleop.control import load_calibration as load_leader_calibration

BACKENDS = ('sim', 'real', 'twin', 'sim2sim')


EXCITE_PATTERNS = PATTERNS  # excite:= takes every pattern of core.excitation (sysid too)


@dataclass(frozen=True)
class Argument:
    """One launch argument: default (as text), description, allowed values."""

    default: str
    description: str
    choices: tuple[str, ...] = ()


ARGUMENTS: dict[str, Argument] = {
    'backend': Argument('sim', 'what the robot is', BACKENDS),
    'robot': Argument('simreal_arm', 'robot spec: shipped name or path to YAML'),
    'namespace': Argument('', 'namespace of the whole graph ("" = root)'),
    'engine': Argument(ENGINES[0], 'physics engine of the sim bridges', ENGINES),
    'engine_a': Argument('', 'sim2sim: engine of the primary sim_a ("" = engine:=)',
                         ('',) + ENGINES),
    'engine_b': Argument('', 'sim2sim: engine of the secondary sim_b ("" = engine:=)',
                         ('',) + ENGINES),
    'timing': Argument('realtime', 'sim bridge timing mode', TIMING_MODES),
    'rate': Argument('200', 'joint_states rate of the sim bridge (Hz, sim time)'),
    'sim_time': Argument('false', 'publish /clock and stamp in sim time (realtime mode)',
                         ('true', 'false')),
    'scene': Argument('', 'scene: shipped name (tabletop, empty) or path; "" = robot only'),
    'overlay': Argument('', 'model overlay of the (primary) sim: name or path'),
    'overlay_b': Argument('', 'model overlay of the sim2sim secondary (sim_b)'),
    'randomization': Argument('', 'domain randomization ranges applied at each ~/reset'),
    'seed': Argument('0', 'seed of every random process in the plan'),
    'paused': Argument('false', 'start the sim paused', ('true', 'false')),
    'lockstep_timeout': Argument('0', 'lockstep: seconds to wait for a command (0 = forever)'),
    'excite': Argument('', 'add the excitation source with this pattern',
                       ('',) + EXCITE_PATTERNS),
    'duration': Argument('10', 'excitation duration (s); the launch ends after it'),
    'amplitude': Argument('0.3', 'excitation amplitude around home (rad)'),
    'excite_rate': Argument('100', 'excitation command rate (Hz)'),
    'port': Argument('', 'real: serial port of the servo bus (e.g. /dev/ttyUSB0)'),
    'baud': Argument('', 'real: bus baud rate ("" = from the robot spec)'),
    'imu_port': Argument('', 'real: serial port of the IMU of a floating-base robot (WitMotion '
                         'WT901 protocol; e.g. /dev/ttyUSB1, or the link printed by simreal '
                         'emulate --imu-link; docs/legged.md)'),
    'imu_baud': Argument('115200', 'real: IMU baud rate'),
    'imu_rate': Argument('200', 'real: output rate the IMU was set to (Hz; diagnostics warn '
                         'below 80 % of it)'),
    'latency': Argument('', 'put the latency injector on the command and observation paths: '
                        'preset (none, usb_serial, wifi, congested_wifi, ethercat) or path'),
    'policy': Argument('', 'add the policy node: policy spec name (config/policies) or path'),
    'policy_autostart': Argument('false', 'enable the policy when joint_states arrive '
                                 '(else call ~/enable)', ('true', 'false')),
    'record': Argument('false', 'add the gap recorder (rosbag2 + live gap)', ('true', 'false')),
    'bag': Argument('', 'recorder: output bag directory ("" = ./bags/simreal_<date>_<time>)'),
    'record_topics': Argument('*', 'recorder: comma-separated topic names or patterns'),
    'record_images': Argument('auto', 'recorder: camera image_raw and camera_info topics: auto = '
                              'only those record_topics:= names other than by "*"; true = '
                              'all; false = none', ('auto', 'true', 'false')),
    'bag_storage': Argument('mcap', 'recorder: storage of the bag', ('mcap', 'sqlite3')),
    'bag_compression': Argument('none', 'recorder: zstd compresses MCAP chunks / sqlite3 '
                                'messages', ('none', 'zstd')),
    'bag_split_duration': Argument('0', 'recorder: start a new bag file every N s (0 = never)'),
    'bag_split_size': Argument('0', 'recorder: start a new bag file every N MB (0 = never)'),
    'twin_resync': Argument('0', 'twin: snap the twin to the real state every N s (0 = never; '
                            'gives k-step prediction errors in simreal gap)'),
    'real_driver': Argument('dynamixel', 'real/twin: the hardware driver',
                            ('dynamixel', 'external')),
    'driver_rate': Argument('250', 'real: bus cycles (joint_states) per second'),
    'watchdog': Argument('hold', 'real: action when commands stop', ('hold', 'torque_off')),
    'give_up_after': Argument('10', 'real: seconds without a state read (port gone, servos '
                              'silent) after which the driver stops with exit 2 (0 = never)'),
    'calibration': Argument('', 'real/twin: joint calibration of the arm (simreal calibrate, '
                            'docs/calibration.md): the driver uses its zeros and ranges and '
                            'writes its Homing Offsets to servos that differ ("" = the spec)'),
    'reboot_on_error': Argument('false', 'real: REBOOT servos that report a hardware error '
                                '(at start and on ~/reset) instead of failing',
                                ('true', 'false')),
    'gravity_ff': Argument('auto', 'real/twin: the servo driver offsets each goal by the sag '
                           'its P/D position loop would leave under gravity (robot model); '
                           'auto = on with teleop:=leader (a leader pose is a pose to reach; '
                           'a policy trained in sim learned the sag)', ('auto', 'true', 'false')),
    'external_states': Argument('/joint_states_raw',
                                'external: joint_states topic of the existing driver'),
    'external_command': Argument('forward_position', 'external: command interface',
                                 ('forward_position', 'trajectory')),
    'external_command_topic': Argument('', 'external: command topic of the existing driver '
                                       '("" = the default of the interface)'),
    'cameras': Argument('auto', "the robot spec's cameras (NAME/image_raw, NAME/camera_info): "
                        'auto = the sim renders all, the real robot drives those with a device; '
                        'true = all (real: each needs a device); false = none',
                        ('auto', 'true', 'false')),
    'camera_device': Argument('', 'real/twin: camera device (V4L2 index or path, or stream URL), '
                              'or NAME=DEVICE,... per camera ("" = the spec\'s device)'),
    'teleop': Argument('', 'add a teleop source of joint_commands: leader = a leader arm on '
                       'leader_port:= (docs/teleop.md)', ('', 'leader')),
    'leader_port': Argument('', "teleop: serial port of the leader arm's servo bus"),
    'leader_robot': Argument('', 'teleop: robot spec of the leader arm ("" = robot:=)'),
    'leader_rate': Argument('100', 'teleop: leader reads (and commands) per second'),
    'leader_calibration': Argument('', 'teleop: leader calibration file of simreal '
                                   'calibrate-leader ("" = 1:1)'),
    'leader_button': Argument('0', 'teleop: servo ID of the leader whose Indirect Data 1 (224) '
                              'is its deadman button, 1 = pressed (0 = none)'),
    'leader_gripper': Argument('', 'teleop: JOINT,trigger_open=R,trigger_closed=R,open=R,'
                               'closed=R: the leader joint at JOINT is a trigger driving that '
                               'follower joint linearly ("" = none)'),
    'leader_compensation': Argument('', 'teleop: gravity/friction current on the leader: on, '
                                    'or KEY=VALUE,... of gravity_fraction, friction_nm, '
                                    'friction_deadband_rad_s, max_current_a ("" = off)'),
    'teleop_start': Argument('blend', 'teleop: when the follower is away from the leader, '
                             'blend slowly to it or wait until the operator matches it',
                             ('blend', 'wait')),
    'teleop_tolerance': Argument('0.1', 'teleop: largest joint distance (rad) at which '
                                 'tracking starts'),
    'teleop_deadman': Argument('pressed', 'teleop: deadman state at start (released: nothing '
                               'moves until ~/deadman true)', ('pressed', 'released')),
    'episodes': Argument('true', 'teleop: add the episode recorder (~/episode/start, stop, '
                         'discard; checked at stop)', ('true', 'false')),
    'episodes_dir': Argument('', 'teleop: episodes directory ("" = ./episodes/simreal_<date>_'
                             '<time>)'),
    'episode_cameras': Argument('', 'teleop: cameras recorded in episodes, comma-separated '
                                '(e.g. camera)'),
    'task': Argument('', "teleop: task label of the episodes (LeRobot's task)"),
    'operator': Argument('', 'teleop: who demonstrates (episode metadata)'),
    'realtime': Argument('false', 'run the timing-critical threads under SCHED_FIFO at the '
                         'priorities of RT_PRIORITIES (docs/realtime.md)', ('true', 'false')),
}


def parse_args(args: Mapping[str, str]) -> dict[str, str]:
    """Return every argument as text (defaults filled in); PlanError on unknown names or choices.

    An unknown name close to a known one (difflib) gets ``did you mean 'NAME'?``.
    """
    unknown = sorted(set(args) - set(ARGUMENTS))
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(ARGUMENTS), n=1)
        hint = (f'did you mean {close[0]!r}?' if close
                else f'known: {", ".join(sorted(ARGUMENTS))}')
        raise PlanError(f'unknown launch argument {unknown[0]!r}; {hint}')
    out = {k: a.default for k, a in ARGUMENTS.items()}
    out.update({k: str(v) for k, v in args.items()})
    for k, a in ARGUMENTS.items():
        if a.choices and out[k] not in a.choices:
            shown = [c for c in a.choices if c] or a.choices
            raise PlanError(f'{k}:={out[k]!r} is not valid; choose one of {list(shown)}')
    return out


def typed(args: Mapping[str, str], key: str, conv: Callable[[str], Any], what: str) -> Any:
    """Return ``key:=`` converted by ``conv`` (finite); PlanError naming it and ``what``."""
    try:
        v = conv(args[key])
    except ValueError:
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected {what}') from None
    if isinstance(v, float) and not math.isfinite(v):
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected a finite value, {what}')
    return v


def non_negative(args: Mapping[str, str], key: str, what: str) -> float:
    """``key:=`` as a finite number >= 0 (PlanError naming the argument and ``what``)."""
    v = float(typed(args, key, float, what))
    if v < 0:
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected {what}')
    return v


def ns(*parts: str) -> str:
    """Join namespace parts into an absolute namespace (``''`` for the root)."""
    joined = '/'.join(p.strip('/') for p in parts if p.strip('/'))
    return f'/{joined}' if joined else ''


def parse_cli_args(tokens: list[str]) -> dict[str, str]:
    """Parse ``name:=value`` tokens (the ``ros2 launch`` form) into a mapping."""
    out: dict[str, str] = {}
    for tok in tokens:
        name, sep, value = tok.partition(':=')
        if not sep or not name:
            raise PlanError(f'launch arguments have the form name:=value, got {tok!r}')
        out[name] = value
    return out


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(',') if t.strip())


@dataclass(frozen=True)
class LaunchArgs:
    """Every launch argument, typed, with the files they name loaded (see the module doc).

    ``text`` keeps every argument as given (defaults filled in): the nodes get the same file
    references (``robot:=simreal_arm``, not a path), and the recorder embeds them. Numbers
    carry their unit (``rate_hz``, ``duration_s``); ``true``/``false`` arguments are bools;
    an argument left empty is ``''``, an empty tuple or None.
    """

    text: Mapping[str, str]
    backend: str
    root: str  # the graph's namespace, absolute ('' = root)
    robot: RobotSpec
    engine: str
    engine_a: str  # engine_a:= or engine:=
    engine_b: str
    timing: str
    rate_hz: float
    sim_time: bool
    scene: Scene | None
    overlay: Overlay | None
    overlay_b: Overlay | None
    randomization: Randomization | None
    seed: int
    paused: bool
    lockstep_timeout_s: float
    excite: str
    duration_s: float
    amplitude_rad: float
    excite_rate_hz: float
    port: str
    baud: int  # 0 = the robot spec's
    imu_port: str
    imu_baud: int
    imu_rate_hz: float
    latency: Profile | None
    policy: PolicySpec | None
    policy_autostart: bool
    record: bool
    bag: str
    record_topics: tuple[str, ...]
    record_images: str
    bag_storage: str
    bag_compression: str
    bag_split_duration_s: float
    bag_split_size_mb: float
    twin_resync_s: float
    real_driver: str
    driver_rate_hz: float
    watchdog: str
    give_up_after_s: float
    reboot_on_error: bool
    gravity_ff: bool  # gravity_ff:=, auto resolved
    calibration: Calibration | None  # calibration:=, checked against robot:= (None: none)
    external_states: str
    external_command: str
    external_command_topic: str
    cameras: str
    camera_device: str
    teleop: str
    leader_port: str
    leader_robot: RobotSpec | None  # None: the leader is a robot:= arm
    leader_rate_hz: float
    leader_calibration: str  # the file (checked), passed on to the leader and episodes
    leader_button: int
    leader_gripper: str
    leader_compensation: str
    teleop_start: str
    teleop_tolerance_rad: float
    teleop_deadman_pressed: bool
    episodes: bool
    episodes_dir: str
    episode_cameras: tuple[str, ...]
    task: str
    operator: str
    realtime: bool
    loaded: tuple[str, ...] = field(default=())  # the arguments whose files were loaded

    @property
    def use_sim_time(self) -> bool:
        """Whether the plan's nodes run on the sim's ``/clock``.

        Lockstep and free timing always do, realtime with ``sim_time:=true``: the one rule for
        every node's ``use_sim_time``.
        """
        return self.timing != 'realtime' or self.sim_time

    def records(self, topic: str) -> bool:
        """Whether ``record_topics:=`` selects ``topic`` (relative to the graph root)."""
        full = f'{self.root}/{topic}'
        for pattern in self.record_topics:
            absolute = pattern if pattern.startswith('/') else f'{self.root}/{pattern}'
            if pattern == '*' or any(fnmatch.fnmatch(full, p) for p in (absolute, pattern)):
                return True
        return False


def _file(arg: str, value: str, load: Callable[[str], Any]) -> Any:
    """``load(value)``; its ConfigError becomes one PlanError naming the argument too."""
    try:
        return load(value)
    except ConfigError as exc:
        raise PlanError(f'{arg}:={value}: {exc}') from None


def _randomization(value: str, robot: RobotSpec) -> Randomization | None:
    """Return the ranges of ``randomization:=``; ``pushes:`` only for a floating base."""
    if not value:
        return None
    rand: Randomization = _file('randomization', value, load_randomization)
    try:
        rand.check_pushes(robot.name, robot.floating)
    except ConfigError as exc:
        raise PlanError(f'randomization:={value}: {exc}') from None
    return rand


def _overlay(arg: str, value: str, robot: RobotSpec) -> Overlay | None:
    """Return the overlay of ``arg``, checked against the robot (joints; bodies need the model)."""
    if not value:
        return None
    ov: Overlay = _file(arg, value, load_overlay)
    if ov.robot is not None and ov.robot != robot.name:
        raise PlanError(f'{arg}:={value}: ' + str(ConfigError(
            ov.source, 'robot', f'{robot.name!r} (the robot of robot:=)', ov.robot)))
    for jname in ov.joints:
        if jname not in robot.joint_names:
            raise PlanError(f'{arg}:={value}: ' + str(ConfigError(
                ov.source, f'joints.{jname}',
                f'a joint of {robot.name} ({", ".join(robot.joint_names)})', jname)))
    return ov


def _profile(text: Mapping[str, str], timing: str, lockstep_timeout_s: float) -> Profile | None:
    """Return the ``latency:=`` profile (None without one), checked against the plan."""
    value = text['latency']
    if not value:
        return None
    profile: Profile = _file('latency', value, load_profile)
    for route in ('command', 'observation'):
        if route not in {r.name for r in profile.routes}:
            raise PlanError(f'latency:={value}: the profile needs routes named command '
                            f'and observation (it has {[r.name for r in profile.routes]})')
    if timing == 'lockstep' and lockstep_timeout_s <= 0:
        raise PlanError('latency:= with timing:=lockstep needs lockstep_timeout:=<s> > 0: the '
                        'injector holds messages until sim time reaches their delivery time, '
                        'and a lockstep sim advances only on a command or after that timeout '
                        '(or use timing:=realtime sim_time:=true)')
    return profile


def _policy(value: str, robot: RobotSpec) -> PolicySpec | None:
    """Return the ``policy:=`` spec, for ``robot``, with an existing weights file."""
    if not value:
        return None
    spec: PolicySpec = _file('policy', value, lambda v: load_policy_spec(v, robot))
    if not spec.model.is_file():
        raise PlanError(f'policy:={value}: ' + str(ConfigError(
            str(spec.source), 'model', 'an existing TorchScript or ONNX file (train one with '
            'simreal train)', f'{spec.model} (no such file)')))
    return spec


def _calibrations(robot: RobotSpec, robot_arg: str) -> None:
    """Load every camera calibration file the robot spec names."""
    for cam in robot.cameras:
        if cam.calibration:
            try:
                load_camera_calibration(cam.calibration)
            except ConfigError as exc:
                raise PlanError(f'robot:={robot_arg}: {exc}') from None


def _leader_calibration(value: str, robot: RobotSpec) -> None:
    """Load ``leader_calibration:=`` (a file of ``simreal calibrate-leader``) for ``robot``."""
    if not value:
        return
    _file('leader_calibration', value, load_yaml_mapping)  # binary, not YAML: one line
    _file('leader_calibration', value, lambda v: load_leader_calibration(v, robot))


def _joint_calibration(a: Mapping[str, str], robot: RobotSpec) -> Calibration | None:
    """Load ``calibration:=`` for ``robot`` (name, family, joints, servo ids, offsets, ranges)."""
    value = a['calibration']
    if not value:
        return None
    if a['backend'] not in ('real', 'twin') or a['real_driver'] != 'dynamixel':
        raise PlanError(f'calibration:={value}: the servo driver applies a calibration: use it '
                        f'with backend:=real or twin and real_driver:=dynamixel (got '
                        f'backend:={a["backend"]} real_driver:={a["real_driver"]})')
    cal: Calibration = _file('calibration', value,
                             lambda v: load_joint_calibration(v, robot))
    _file('calibration', value, lambda v: apply_calibration(robot, cal))
    return cal


def parse_launch_args(args: Mapping[str, str]) -> LaunchArgs:
    """Return the typed launch arguments, every file they name loaded and validated.

    PlanError (one line: the argument, the file, the key, what was expected and what was got)
    on the first bad argument or file.
    """
    a = parse_args(args)

    def number(key: str, what: str, conv: Callable[[str], Any] = float) -> Any:
        return typed(a, key, conv, what)

    def at_least_zero(key: str, what: str) -> float:
        return non_negative(a, key, what)

    timing = a['timing']
    lockstep = number('lockstep_timeout', 'a number of seconds')
    robot: RobotSpec = _file('robot', a['robot'], load_robot)
    _calibrations(robot, a['robot'])
    leader_robot = (_file('leader_robot', a['leader_robot'], load_robot) if a['leader_robot']
                    else None)
    _leader_calibration(a['leader_calibration'], robot)
    calibration = _joint_calibration(a, robot)
    if a['gravity_ff'] == 'true' and (a['backend'] not in ('real', 'twin')
                                      or a['real_driver'] != 'dynamixel'):
        raise PlanError(f'gravity_ff:=true: the servo driver offsets its goals: use it with '
                        f'backend:=real or twin and real_driver:=dynamixel (got '
                        f'backend:={a["backend"]} real_driver:={a["real_driver"]})')
    loaded = tuple(k for k in ('robot', 'calibration', 'leader_robot', 'leader_calibration',
                               'overlay', 'overlay_b', 'randomization', 'scene', 'latency',
                               'policy')
                   if a[k])
    return LaunchArgs(
        text=MappingProxyType(dict(a)), backend=a['backend'], root=ns(a['namespace']), robot=robot,
        engine=a['engine'], engine_a=a['engine_a'] or a['engine'],
        engine_b=a['engine_b'] or a['engine'], timing=timing,
        rate_hz=number('rate', 'a number (Hz)'), sim_time=a['sim_time'] == 'true',
        scene=_file('scene', a['scene'], load_scene) if a['scene'] else None,
        overlay=_overlay('overlay', a['overlay'], robot),
        overlay_b=_overlay('overlay_b', a['overlay_b'], robot),
        randomization=_randomization(a['randomization'], robot),
        seed=number('seed', 'an integer', int), paused=a['paused'] == 'true',
        lockstep_timeout_s=lockstep, excite=a['excite'],
        duration_s=number('duration', 'a number of seconds'),
        amplitude_rad=number('amplitude', 'a number (rad)'),
        excite_rate_hz=number('excite_rate', 'a number (Hz)'),
        port=a['port'],
        baud=number('baud', 'an integer baud rate', int) if a['baud'] else 0,
        imu_port=a['imu_port'], imu_baud=number('imu_baud', 'an integer baud rate', int),
        imu_rate_hz=number('imu_rate', 'a number (Hz)'),
        latency=_profile(a, timing, lockstep),
        policy=_policy(a['policy'], robot),
        policy_autostart=a['policy_autostart'] == 'true', record=a['record'] == 'true',
        bag=a['bag'], record_topics=_comma_list(a['record_topics']),
        record_images=a['record_images'],
        bag_storage=a['bag_storage'], bag_compression=a['bag_compression'],
        bag_split_duration_s=at_least_zero('bag_split_duration', 'a number >= 0 (0 = never)'),
        bag_split_size_mb=at_least_zero('bag_split_size', 'a number >= 0 (0 = never)'),
        twin_resync_s=at_least_zero('twin_resync', 'a number of seconds >= 0 (0 = never)'),
        real_driver=a['real_driver'],
        driver_rate_hz=number('driver_rate', 'a number (Hz)'), watchdog=a['watchdog'],
        give_up_after_s=at_least_zero('give_up_after', 'a number of seconds >= 0 (0 = never)'),
        reboot_on_error=a['reboot_on_error'] == 'true', calibration=calibration,
        gravity_ff=(a['gravity_ff'] == 'true'
                    or (a['gravity_ff'] == 'auto' and a['teleop'] == 'leader')),
        external_states=a['external_states'], external_command=a['external_command'],
        external_command_topic=a['external_command_topic'], cameras=a['cameras'],
        camera_device=a['camera_device'].strip(), teleop=a['teleop'],
        leader_port=a['leader_port'], leader_robot=leader_robot,
        leader_rate_hz=number('leader_rate', 'a number (Hz)'),
        leader_calibration=a['leader_calibration'],
        leader_button=number('leader_button', 'a servo ID (0 = no button)', int),
        leader_gripper=a['leader_gripper'], leader_compensation=a['leader_compensation'],
        teleop_start=a['teleop_start'],
        teleop_tolerance_rad=number('teleop_tolerance', 'a number (rad)'),
        teleop_deadman_pressed=a['teleop_deadman'] == 'pressed',
        episodes=a['episodes'] == 'true', episodes_dir=a['episodes_dir'],
        episode_cameras=_comma_list(a['episode_cameras']), task=a['task'],
        operator=a['operator'], realtime=a['realtime'] == 'true', loaded=loaded)
