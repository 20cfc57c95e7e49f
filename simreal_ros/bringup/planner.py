"""The launch planner: (backend, robot, options) -> the list of nodes to start.

This is the single source of truth for what runs in each mode. ``simreal launch`` starts the
plan as processes; ``launch/bringup.launch.py`` turns the same plan into ``launch_ros`` actions.
Both accept the same ``name:=value`` arguments, listed in :data:`ARGUMENTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
import math
from typing import Any, Callable, Mapping

from simreal_ros.core.bridge_config import TIMING_MODES, SimBridgeConfig
from simreal_ros.core.excitation import PATTERNS
from simreal_ros.core.injection import Profile, load_profile
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PlanError

BACKENDS = ('sim', 'real', 'twin', 'sim2sim')
EXCITE_PATTERNS = PATTERNS  # excite:= takes every pattern of core.excitation (sysid too)
PACKAGE = 'simreal_ros'


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
}

#: Nodes this version ships: kind -> (console script, module).
NODES: dict[str, tuple[str, str]] = {
    'sim_bridge': ('simreal_sim_bridge', 'simreal_ros.nodes.sim_bridge'),
    'excite': ('simreal_excite', 'simreal_ros.nodes.excite'),
    'injector': ('simreal_injector', 'simreal_ros.nodes.injector'),
    'policy': ('simreal_policy', 'simreal_ros.nodes.policy'),
    'recorder': ('simreal_recorder', 'simreal_ros.nodes.recorder'),
    'dynamixel_driver': ('simreal_dynamixel_driver', 'simreal_ros.nodes.dynamixel_driver'),
    'external_adapter': ('simreal_external_adapter', 'simreal_ros.nodes.external_adapter'),
}

#: Nodes that modes need but that this version does not ship yet.
NOT_YET_SHIPPED: dict[str, str] = {}


@dataclass(frozen=True)
class NodeSpec:
    """Everything needed to start one node, with ``ros2 launch`` or ``simreal launch``."""

    kind: str
    name: str
    namespace: str = ''
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    required: bool = True
    exit_ends_launch: bool = False

    @property
    def executable(self) -> str:
        """Console script name (``ros2 run simreal_ros <executable>``)."""
        return NODES[self.kind][0]

    @property
    def module(self) -> str:
        """Python module with ``main()``."""
        return NODES[self.kind][1]

    @property
    def fqn(self) -> str:
        """Fully qualified node name."""
        return f'{self.namespace.rstrip("/")}/{self.name}' if self.namespace else f'/{self.name}'


def _ns(*parts: str) -> str:
    joined = '/'.join(p.strip('/') for p in parts if p.strip('/'))
    return f'/{joined}' if joined else ''


def _parse(args: Mapping[str, str]) -> dict[str, str]:
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


def _typed(args: Mapping[str, str], key: str, conv: Callable[[str], Any], what: str) -> Any:
    try:
        v = conv(args[key])
    except ValueError:
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected {what}') from None
    if isinstance(v, float) and not math.isfinite(v):
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected a finite value, {what}')
    return v


def _non_negative(args: Mapping[str, str], key: str, what: str) -> float:
    """``key:=`` as a finite number >= 0 (PlanError naming the argument and ``what``)."""
    v = float(_typed(args, key, float, what))
    if v < 0:
        raise PlanError(f'{key}:={args[key]!r} is not valid; expected {what}')
    return v


def _require(kind: str, why: str) -> None:
    if kind not in NODES:
        what = NOT_YET_SHIPPED.get(kind, kind)
        raise PlanError(f'{why} needs {what} (node {kind!r}), which this version of '
                        f'simreal_ros does not ship; it ships the nodes {", ".join(NODES)}')


def _bridge(a: Mapping[str, str], name: str, namespace: str, overlay: str,
            commands_from: str | None, publish_clock: bool,
            remaps: tuple[tuple[str, str], ...] = ()) -> NodeSpec:
    params = {
        'robot': a['robot'], 'scene': a['scene'], 'overlay': overlay,
        'randomization': a['randomization'], 'seed': _typed(a, 'seed', int, 'an integer'),
        'timing_mode': a['timing'],
        'publish_rate_hz': _typed(a, 'rate', float, 'a number (Hz)'),
        'sim_time': a['sim_time'] == 'true', 'publish_clock': publish_clock,
        'start_paused': a['paused'] == 'true',
        'lockstep_timeout_s': _typed(a, 'lockstep_timeout', float, 'a number of seconds'),
    }
    try:
        SimBridgeConfig.from_mapping(params)
    except ConfigError as exc:
        raise PlanError(f'sim bridge settings: {exc}') from None
    if commands_from is not None:
        remaps = tuple(r for r in remaps if r[0] != 'joint_commands') + (
            ('joint_commands', f'{commands_from}/joint_commands'),
            ('forward_position_controller/commands',  # not delayed: no injector route
             f'{_ns(a["namespace"])}/forward_position_controller/commands'))
    return NodeSpec('sim_bridge', name, namespace, params, remaps)


def _latency_profile(a: Mapping[str, str]) -> Profile | None:
    if not a['latency']:
        return None
    try:
        profile = load_profile(a['latency'])
    except ConfigError as exc:
        raise PlanError(f'latency:={a["latency"]}: {exc}') from None
    for route in ('command', 'observation'):
        if route not in {r.name for r in profile.routes}:
            raise PlanError(f'latency:={a["latency"]}: the profile needs routes named command '
                            f'and observation (it has {[r.name for r in profile.routes]})')
    if a['timing'] == 'lockstep' and _typed(a, 'lockstep_timeout', float, 'seconds') <= 0:
        raise PlanError('latency:= with timing:=lockstep needs lockstep_timeout:=<s> > 0: the '
                        'injector holds messages until sim time reaches their delivery time, '
                        'and a lockstep sim advances only on a command or after that timeout '
                        '(or use timing:=realtime sim_time:=true)')
    return profile


def _backend_remaps(profile: Profile | None, with_imu: bool) -> tuple[tuple[str, str], ...]:
    """With latency on, the backend's own topics move under ``backend/``."""
    if profile is None:
        return ()
    out = [('joint_states', 'backend/joint_states'),
           ('joint_commands', 'backend/joint_commands')]
    if with_imu:
        out.append(('imu/data', 'backend/imu/data'))
    return tuple(out)


def _injector(a: Mapping[str, str], root: str, state_ns: str, with_imu: bool) -> NodeSpec:
    """Return the injector between the command producers and the backend, and back."""
    obs = f'{state_ns.strip("/")}/' if state_ns.strip('/') else ''
    bindings = ['command:joint_commands>backend/joint_commands',
                f'observation:{obs}backend/joint_states>{obs}joint_states']
    if with_imu:
        bindings.append(f'imu:{obs}backend/imu/data>{obs}imu/data')
    params = {'profile': a['latency'], 'bindings': bindings,
              'seed': _typed(a, 'seed', int, 'an integer'),
              'use_sim_time': a['timing'] != 'realtime' or a['sim_time'] == 'true'}
    return NodeSpec('injector', 'injector', root, params)


def _command_consumers(a: Mapping[str, str], backend: str) -> int:
    """How many nodes of the plan subscribe the root ``joint_commands``."""
    direct = {'sim': 1, 'sim2sim': 2, 'real': 1, 'twin': 2}[backend]
    n = 1 if a['latency'] else direct
    return n + (1 if a['record'] == 'true' and _records(a, 'joint_commands') else 0)


def _records(a: Mapping[str, str], topic: str) -> bool:
    import fnmatch
    root = _ns(a['namespace'])
    full = f'{root}/{topic}'
    for pattern in (t.strip() for t in a['record_topics'].split(',') if t.strip()):
        absolute = pattern if pattern.startswith('/') else f'{root}/{pattern}'
        if pattern == '*' or fnmatch.fnmatch(full, absolute) or fnmatch.fnmatch(full, pattern):
            return True
    return False


def _robot_has_imu(robot: str) -> bool:
    try:
        return load_robot(robot).imu is not None
    except ConfigError as exc:
        raise PlanError(f'robot:={robot}: {exc}') from None
def _policy(a: Mapping[str, str], backend: str, root: str) -> NodeSpec:
    """Return the policy node (at the root; in sim2sim it observes the primary sim_a)."""
    if a['excite']:
        raise PlanError(f'policy:={a["policy"]} and excite:={a["excite"]} both publish '
                        f'joint_commands; use one of them')
    from simreal_ros.core.policy_spec import load_policy_spec
    try:
        spec = load_policy_spec(a['policy'])
    except ConfigError as exc:
        raise PlanError(f'policy:={a["policy"]}: {exc}') from None
    if not spec.model.is_file():
        raise PlanError(f'policy:={a["policy"]}: model file {spec.model} not found (train one '
                        f'with simreal train, or fix model: in {spec.source})')
    from simreal_ros.core.robot import load_robot
    try:
        robot = load_robot(a['robot']).name
    except ConfigError as exc:
        raise PlanError(f'robot:={a["robot"]}: {exc}') from None
    if spec.robot != robot:
        raise PlanError(f'policy:={a["policy"]} is for robot {spec.robot!r}, but robot:='
                        f'{a["robot"]} is {robot!r}')
    params = {
        'policy': str(spec.source), 'robot': a['robot'],
        'use_sim_time': a['timing'] != 'realtime' or a['sim_time'] == 'true',
        'sync_to_states': a['timing'] == 'lockstep',
        'enable_on_start': a['policy_autostart'] == 'true',
    }
    remaps: tuple[tuple[str, str], ...] = ()
    if backend == 'sim2sim':
        primary = _ns(root, 'sim_a')
        remaps = ((spec.topics.joint_states, f'{primary}/joint_states'),
                  (spec.topics.imu, f'{primary}/imu/data'))
    return NodeSpec('policy', 'policy', root, params, remaps)
def _real_driver(a: Mapping[str, str], backend: str, root: str) -> NodeSpec:
    """Return the hardware node of backend:=real/twin (Dynamixel driver or external adapter)."""
    if a['real_driver'] == 'external':
        _require('external_adapter', f'backend:={backend} real_driver:=external')
        from simreal_ros.core.driver_config import ExternalAdapterConfig
        params: dict[str, Any] = {'robot': a['robot'], 'source_states': a['external_states'],
                                  'command_mode': a['external_command']}
        if a['external_command_topic']:
            params['command_topic'] = a['external_command_topic']
        elif a['external_command'] == 'trajectory':
            params['command_topic'] = '/joint_trajectory_controller/joint_trajectory'
        try:
            ExternalAdapterConfig.from_mapping(params)
        except ConfigError as exc:
            raise PlanError(f'external adapter settings: {exc}') from None
        return NodeSpec('external_adapter', 'external_adapter', root, params)
    if not a['port']:
        raise PlanError(f'backend:={backend} needs port:=<serial device> (e.g. '
                        f'port:=/dev/ttyUSB0, or the link printed by simreal emulate)')
    _require('dynamixel_driver', f'backend:={backend}')
    from simreal_ros.core.driver_config import DriverConfig
    params = {'robot': a['robot'], 'port': a['port'],
              'baud': _typed(a, 'baud', int, 'an integer baud rate') if a['baud'] else 0,
              'rate_hz': _typed(a, 'driver_rate', float, 'a number (Hz)'),
              'watchdog': a['watchdog'], 'reboot_on_error': a['reboot_on_error'] == 'true'}
    try:
        DriverConfig.from_mapping(params)
    except ConfigError as exc:
        raise PlanError(f'driver settings: {exc}') from None
    return NodeSpec('dynamixel_driver', 'dynamixel_driver', root, params)


def plan(args: Mapping[str, str]) -> list[NodeSpec]:
    """Return the nodes for the given ``name:=value`` arguments (see :data:`ARGUMENTS`)."""
    a = _parse(args)
    backend = a['backend']
    root = _ns(a['namespace'])
    nodes: list[NodeSpec] = []
    profile = _latency_profile(a)
    with_imu = profile is not None and 'imu' in {r.name for r in profile.routes} and (
        _robot_has_imu(a['robot']))
    moved = _backend_remaps(profile, with_imu)
    if backend == 'sim':
        _require('sim_bridge', 'backend:=sim')
        nodes.append(_bridge(a, 'sim_bridge', root, a['overlay'], None, True, moved))
        if profile is not None:
            nodes.append(_injector(a, root, '', with_imu))
    elif backend == 'sim2sim':
        _require('sim_bridge', 'backend:=sim2sim')
        commands = _ns(root, 'backend') if profile is not None else root or ''
        nodes.append(_bridge(a, 'sim_bridge', _ns(root, 'sim_a'), a['overlay'], commands,
                             True, moved))
        nodes.append(_bridge(a, 'sim_bridge', _ns(root, 'sim_b'), a['overlay_b'], commands,
                             False))
        if profile is not None:
            nodes.append(_injector(a, root, 'sim_a', with_imu))
    elif backend in ('real', 'twin'):
        if profile is not None:  # the hardware has no IMU topic of its own to move
            with_imu = False
            moved = _backend_remaps(profile, False)
        nodes.append(replace(_real_driver(a, backend, root), remappings=moved))
        if backend == 'twin':
            _require('sim_bridge', 'backend:=twin')
            # the twin gets the commands the hardware gets (after the injector, if any)
            commands = _ns(root, 'backend') if profile is not None else root or ''
            twin = _bridge(a, 'sim_bridge', _ns(root, 'twin'), a['overlay'], commands, False)
            resync = _non_negative(a, 'twin_resync', 'a number of seconds >= 0 (0 = never)')
            if resync > 0:  # to the undelayed real state
                source = _ns(root, 'backend/joint_states' if profile is not None
                             else 'joint_states')
                twin = replace(twin, parameters={**twin.parameters, 'resync_period_s': resync,
                                                 'resync_topic': source})
            nodes.append(twin)
        if profile is not None:
            nodes.append(_injector(a, root, '', with_imu))
    if a['policy']:
        nodes.append(_policy(a, backend, root))
    if a['excite']:
        _require('excite', f'excite:={a["excite"]}')
        params = {
            'robot': a['robot'], 'pattern': a['excite'],
            'duration_s': _typed(a, 'duration', float, 'a number of seconds'),
            'amplitude': _typed(a, 'amplitude', float, 'a number (rad)'),
            'rate_hz': _typed(a, 'excite_rate', float, 'a number (Hz)'),
            'seed': _typed(a, 'seed', int, 'an integer'),
            'use_sim_time': a['timing'] != 'realtime' or a['sim_time'] == 'true',
            'sync_to_states': a['timing'] == 'lockstep',
            'wait_for_states': True,
            'wait_for_subscribers': _command_consumers(a, backend),
        }
        if params['duration_s'] <= 0 or params['rate_hz'] <= 0:
            raise PlanError('duration:= and excite_rate:= must be > 0')
        remaps = ((('joint_states', f'{_ns(root, "sim_a")}/joint_states'),)
                  if backend == 'sim2sim' else ())
        nodes.append(NodeSpec('excite', 'excite', root, params, remaps, exit_ends_launch=True))
    if a['record'] == 'true':
        from simreal_ros.bringup.record_plan import recorder_spec
        _require('recorder', 'record:=true')
        nodes.append(recorder_spec(a, root))
    return nodes


def parse_cli_args(tokens: list[str]) -> dict[str, str]:
    """Parse ``name:=value`` tokens (the ``ros2 launch`` form) into a mapping."""
    out: dict[str, str] = {}
    for tok in tokens:
        name, sep, value = tok.partition(':=')
        if not sep or not name:
            raise PlanError(f'launch arguments have the form name:=value, got {tok!r}')
        out[name] = value
    return out
