"""The launch arguments: names, defaults, choices, typing, and the rules derived from them.

``simreal launch`` and ``launch/bringup.launch.py`` take the same ``name:=value`` arguments,
listed in :data:`ARGUMENTS`; :func:`parse_args` fills the defaults and checks the choices, and
the node builders read typed values through :func:`typed` (a PlanError names the argument).
"""

from __future__ import annotations

from dataclasses import dataclass
import fnmatch
import math
from typing import Any, Callable, Mapping

from simreal_ros.core.excitation import PATTERNS
from simreal_ros.errors import PlanError
from simreal_ros.sim.bridge_config import ENGINES, TIMING_MODES

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
    'latency': Argument('', 'put the latency injector on the command and observation paths: '
                        'preset (none, usb_serial, wifi, congested_wifi, ethercat) or path'),
    'policy': Argument('', 'add the policy node: policy spec name (config/policies) or path'),
    'policy_autostart': Argument('false', 'enable the policy when joint_states arrive '
                                 '(else call ~/enable)', ('true', 'false')),
    'record': Argument('false', 'add the gap recorder (rosbag2 + live gap)', ('true', 'false')),
    'bag': Argument('', 'recorder: output bag directory ("" = ./bags/simreal_<date>_<time>)'),
    'record_topics': Argument('*', 'recorder: comma-separated topic names or patterns'),
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
    'reboot_on_error': Argument('false', 'real: REBOOT servos that report a hardware error '
                                '(at start and on ~/reset) instead of failing',
                                ('true', 'false')),
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
    """Return every argument (defaults filled in); PlanError on unknown names or choices."""
    unknown = sorted(set(args) - set(ARGUMENTS))
    if unknown:
        raise PlanError(f'unknown launch argument {unknown[0]!r}; known: '
                        f'{", ".join(sorted(ARGUMENTS))}')
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


def records(a: Mapping[str, str], topic: str) -> bool:
    """Whether ``record_topics:=`` selects ``topic`` (relative to the graph root)."""
    root = ns(a['namespace'])
    full = f'{root}/{topic}'
    for pattern in (t.strip() for t in a['record_topics'].split(',') if t.strip()):
        absolute = pattern if pattern.startswith('/') else f'{root}/{pattern}'
        if pattern == '*' or fnmatch.fnmatch(full, absolute) or fnmatch.fnmatch(full, pattern):
            return True
    return False


def parse_cli_args(tokens: list[str]) -> dict[str, str]:
    """Parse ``name:=value`` tokens (the ``ros2 launch`` form) into a mapping."""
    out: dict[str, str] = {}
    for tok in tokens:
        name, sep, value = tok.partition(':=')
        if not sep or not name:
            raise PlanError(f'launch arguments have the form name:=value, got {tok!r}')
        out[name] = value
    return out


def uses_sim_time(a: Mapping[str, str]) -> bool:
    """Return whether the plan's nodes run on the sim's ``/clock``.

    Lockstep and free timing always do, realtime with ``sim_time:=true``: the one rule for
    every node's ``use_sim_time``.
    """
    return a.get('timing', 'realtime') != 'realtime' or a.get('sim_time') == 'true'
