"""Tests of the launch planner (the single source of truth of what runs in each mode)."""

from __future__ import annotations

import ast
from pathlib import Path

from plans import plan_without_tf as plan
import pytest

from simreal_ros.bringup.planner import (
    ARGUMENTS,
    BACKENDS,
    NodeSpec,
    parse_cli_args,
)
from simreal_ros.errors import PlanError, SimrealError
from simreal_ros.sim.bridge_config import SimBridgeConfig

REPO = Path(__file__).resolve().parents[2]
LAUNCH_FILE = REPO / 'launch' / 'bringup.launch.py'

BRIDGE_PARAMS = {'robot', 'engine', 'scene', 'overlay', 'randomization', 'seed', 'timing_mode',
                 'publish_rate_hz', 'sim_time', 'publish_clock', 'start_paused',
                 'lockstep_timeout_s', 'cameras'}


def _one(nodes: list[NodeSpec], kind: str) -> NodeSpec:
    found = [n for n in nodes if n.kind == kind]
    assert len(found) == 1, nodes
    return found[0]


# ---------------------------------------------------------------------------------------------
# backend:=sim


def test_sim_default() -> None:
    nodes = plan({})
    assert len(nodes) == 1
    n = nodes[0]
    assert (n.kind, n.name, n.namespace, n.fqn) == ('sim_bridge', 'sim_bridge', '',
                                                    '/sim_bridge')
    assert n.executable == 'simreal_sim_bridge'
    assert n.module == 'simreal_ros.nodes.sim_bridge'
    assert n.remappings == ()
    assert n.required
    assert not n.exit_ends_launch
    assert set(n.parameters) == BRIDGE_PARAMS
    assert n.parameters == {
        'robot': 'simreal_arm', 'engine': 'mujoco', 'scene': '', 'overlay': '',
        'randomization': '', 'seed': 0,
        'timing_mode': 'realtime', 'publish_rate_hz': 200.0, 'sim_time': False,
        'publish_clock': True, 'start_paused': False, 'lockstep_timeout_s': 0.0,
        'cameras': True}
    # the parameters are valid sim bridge settings
    SimBridgeConfig.from_mapping(n.parameters)
    assert plan({'backend': 'sim'}) == nodes


def test_sim_parameters_from_arguments(tmp_path: Path) -> None:
    arm = tmp_path / 'arm.yaml'
    arm.write_text((REPO / 'config/robots/simreal_arm.yaml').read_text())
    (n,) = plan({'backend': 'sim', 'robot': str(arm), 'scene': 'tabletop',
                 'overlay': 'worn_arm', 'overlay_b': 'cable_reality', 'randomization': 'default',
                 'seed': '42', 'timing': 'lockstep', 'rate': '500', 'sim_time': 'true',
                 'paused': 'true', 'lockstep_timeout': '0.5'})
    p = n.parameters
    assert p['robot'] == str(arm)
    assert p['scene'] == 'tabletop'
    assert p['overlay'] == 'worn_arm'
    assert p['randomization'] == 'default'
    assert p['seed'] == 42 and isinstance(p['seed'], int)
    assert p['timing_mode'] == 'lockstep'
    assert p['publish_rate_hz'] == 500.0 and isinstance(p['publish_rate_hz'], float)
    assert p['sim_time'] is True
    assert p['start_paused'] is True
    assert p['lockstep_timeout_s'] == 0.5
    assert p['publish_clock'] is True
    assert 'cable_reality' not in p.values()  # overlay_b is sim2sim's


# ---------------------------------------------------------------------------------------------
# backend:=sim2sim


def test_sim2sim() -> None:
    nodes = plan({'backend': 'sim2sim', 'overlay': 'nominal', 'overlay_b': 'worn_arm'})
    assert len(nodes) == 2
    a, b = nodes
    assert (a.kind, b.kind) == ('sim_bridge', 'sim_bridge')
    assert (a.namespace, b.namespace) == ('/sim_a', '/sim_b')
    assert (a.fqn, b.fqn) == ('/sim_a/sim_bridge', '/sim_b/sim_bridge')
    for n in nodes:
        assert dict(n.remappings) == {
            'joint_commands': '/joint_commands',
            'forward_position_controller/commands': '/forward_position_controller/commands'}
    assert a.parameters['publish_clock'] is True
    assert b.parameters['publish_clock'] is False
    assert a.parameters['overlay'] == 'nominal'
    assert b.parameters['overlay'] == 'worn_arm'
    same = BRIDGE_PARAMS - {'publish_clock', 'overlay'}
    assert {k: a.parameters[k] for k in same} == {k: b.parameters[k] for k in same}


def test_sim2sim_of_a_legged_robot_tells_both_the_same_cmd_vel() -> None:
    for n in plan({'backend': 'sim2sim', 'robot': 'simreal_quad', 'engine_b': 'pybullet',
                   'namespace': 'dog'}):
        if n.kind == 'sim_bridge':
            assert dict(n.remappings)['cmd_vel'] == '/dog/cmd_vel'
            assert dict(n.remappings)['joint_commands'] == '/dog/joint_commands'


def test_engine_reaches_the_bridges_and_sim2sim_sides_take_their_own() -> None:
    (n,) = plan({'engine': 'pybullet'})
    assert n.parameters['engine'] == 'pybullet'
    a, b = plan({'backend': 'sim2sim', 'engine_b': 'pybullet'})
    assert (a.parameters['engine'], b.parameters['engine']) == ('mujoco', 'pybullet')
    a, b = plan({'backend': 'sim2sim', 'engine': 'pybullet', 'engine_a': 'mujoco'})
    assert (a.parameters['engine'], b.parameters['engine']) == ('mujoco', 'pybullet')


@pytest.mark.parametrize('arg', ['engine', 'engine_a', 'engine_b'])
def test_an_unknown_engine_is_refused_before_any_node_starts(arg: str) -> None:
    with pytest.raises(PlanError) as err:
        plan({'backend': 'sim2sim', arg: 'bullet3'})
    assert str(err.value).startswith(f"{arg}:='bullet3' is not valid; choose one of [")
    assert "'pybullet'" in str(err.value)


def test_sim2sim_only_one_clock_in_every_timing() -> None:
    for timing in ('realtime', 'lockstep', 'free'):
        nodes = plan({'backend': 'sim2sim', 'timing': timing})
        assert [n.parameters['publish_clock'] for n in nodes] == [True, False]
        assert all(n.parameters['timing_mode'] == timing for n in nodes)


# ---------------------------------------------------------------------------------------------
# namespace


@pytest.mark.parametrize('ns', ['robot1', '/robot1', '/robot1/', 'robot1/'])
def test_namespace_sim(ns: str) -> None:
    (n,) = plan({'namespace': ns})
    assert n.namespace == '/robot1'
    assert n.fqn == '/robot1/sim_bridge'


def test_namespace_sim2sim_and_excite() -> None:
    nodes = plan({'backend': 'sim2sim', 'namespace': 'robot1', 'excite': 'chirp'})
    a, b, e = nodes
    assert (a.namespace, b.namespace, e.namespace) == ('/robot1/sim_a', '/robot1/sim_b',
                                                       '/robot1')
    for n in (a, b):
        assert dict(n.remappings) == {
            'joint_commands': '/robot1/joint_commands',
            'forward_position_controller/commands':
                '/robot1/forward_position_controller/commands'}
    assert e.kind == 'excite'
    assert e.fqn == '/robot1/excite'
    assert dict(e.remappings) == {'joint_states': '/robot1/sim_a/joint_states'}
    assert all(n.namespace.startswith('/robot1') for n in nodes)


def test_nested_namespace() -> None:
    (n, e) = plan({'namespace': 'lab/robot1', 'excite': 'steps'})
    assert n.namespace == '/lab/robot1'
    assert e.namespace == '/lab/robot1'
    assert e.fqn == '/lab/robot1/excite'


# ---------------------------------------------------------------------------------------------
# excite


def test_excite_realtime() -> None:
    nodes = plan({'excite': 'multisine', 'duration': '5', 'amplitude': '0.2',
                  'excite_rate': '50', 'seed': '3'})
    assert [n.kind for n in nodes] == ['sim_bridge', 'excite']
    e = _one(nodes, 'excite')
    assert e.executable == 'simreal_excite'
    assert e.module == 'simreal_ros.nodes.excite'
    assert e.exit_ends_launch is True
    assert e.namespace == ''
    assert e.fqn == '/excite'
    assert e.remappings == ()
    assert e.parameters == {'robot': 'simreal_arm', 'pattern': 'multisine', 'duration_s': 5.0,
                            'amplitude': 0.2, 'rate_hz': 50.0, 'seed': 3,
                            'use_sim_time': False, 'sync_to_states': False,
                            'wait_for_states': True, 'wait_for_subscribers': 1}
    assert _one(nodes, 'sim_bridge').parameters['seed'] == 3


@pytest.mark.parametrize('timing, sim_time, use_sim_time, sync', [
    ('realtime', 'false', False, False),
    ('realtime', 'true', True, False),
    ('lockstep', 'false', True, True),
    ('lockstep', 'true', True, True),
    ('free', 'false', True, False),
])
def test_excite_timing(timing: str, sim_time: str, use_sim_time: bool, sync: bool) -> None:
    e = _one(plan({'excite': 'chirp', 'timing': timing, 'sim_time': sim_time}), 'excite')
    assert e.parameters['use_sim_time'] is use_sim_time
    assert e.parameters['sync_to_states'] is sync


@pytest.mark.parametrize('pattern', ['chirp', 'multisine', 'steps', 'waypoints'])
def test_every_excite_pattern(pattern: str) -> None:
    assert _one(plan({'excite': pattern}), 'excite').parameters['pattern'] == pattern


def test_excite_in_sim2sim_listens_to_sim_a() -> None:
    nodes = plan({'backend': 'sim2sim', 'excite': 'steps', 'timing': 'lockstep'})
    assert [n.kind for n in nodes] == ['sim_bridge', 'sim_bridge', 'excite']
    e = nodes[-1]
    assert dict(e.remappings) == {'joint_states': '/sim_a/joint_states'}
    assert e.parameters['sync_to_states'] is True


# ---------------------------------------------------------------------------------------------
# real and twin


@pytest.mark.parametrize('backend', ['real', 'twin'])
def test_real_without_port(backend: str) -> None:
    with pytest.raises(PlanError, match=rf'backend:={backend} needs port:=<serial device>'):
        plan({'backend': backend})


def test_real_dynamixel() -> None:
    (n,) = plan({'backend': 'real', 'port': '/dev/ttyUSB0'})
    assert (n.kind, n.fqn, n.executable) == ('dynamixel_driver', '/dynamixel_driver',
                                             'simreal_dynamixel_driver')
    assert n.module == 'simreal_ros.nodes.dynamixel_driver'
    assert n.parameters == {'robot': 'simreal_arm', 'port': '/dev/ttyUSB0', 'baud': 0,
                            'rate_hz': 250.0, 'watchdog': 'hold', 'give_up_after_s': 10.0,
                            'reboot_on_error': False}
    (n,) = plan({'backend': 'real', 'port': '/tmp/bus', 'baud': '4000000',
                 'driver_rate': '400', 'watchdog': 'torque_off', 'namespace': 'arm',
                 'reboot_on_error': 'true', 'give_up_after': '0'})
    assert n.parameters['baud'] == 4000000 and n.parameters['rate_hz'] == 400.0
    assert n.parameters['give_up_after_s'] == 0.0  # 0: never give up
    assert n.parameters['watchdog'] == 'torque_off' and n.parameters['reboot_on_error'] is True
    assert n.fqn == '/arm/dynamixel_driver'


def test_twin_is_the_driver_plus_a_bridge_on_the_same_commands() -> None:
    nodes = plan({'backend': 'twin', 'port': '/tmp/bus', 'overlay': 'worn_arm',
                  'excite': 'chirp'})
    assert [n.kind for n in nodes] == ['dynamixel_driver', 'sim_bridge', 'excite']
    driver, twin, excite = nodes
    assert driver.namespace == '' and twin.namespace == '/twin'
    assert dict(twin.remappings) == {
        'joint_commands': '/joint_commands',
        'forward_position_controller/commands': '/forward_position_controller/commands'}
    assert twin.parameters['publish_clock'] is False
    assert twin.parameters['overlay'] == 'worn_arm'
    assert excite.remappings == ()  # the excitation drives the real robot's topics
    assert 'resync_period_s' not in twin.parameters


def test_twin_resync_follows_the_undelayed_real_state() -> None:
    twin = plan({'backend': 'twin', 'port': '/tmp/bus', 'twin_resync': '2'})[1]
    assert (twin.parameters['resync_period_s'], twin.parameters['resync_topic']) == (
        2.0, '/joint_states')
    twin = [n for n in plan({'backend': 'twin', 'port': '/tmp/bus', 'twin_resync': '0.5',
                             'latency': 'wifi', 'namespace': 'lab'}) if n.kind == 'sim_bridge'][0]
    assert twin.parameters['resync_topic'] == '/lab/backend/joint_states'
    for bad in ('-1', 'often', 'nan'):
        with pytest.raises(PlanError, match='twin_resync'):
            plan({'backend': 'twin', 'port': '/tmp/bus', 'twin_resync': bad})


def test_real_external_adapter() -> None:
    (n,) = plan({'backend': 'real', 'real_driver': 'external'})
    assert (n.kind, n.executable) == ('external_adapter', 'simreal_external_adapter')
    assert n.parameters == {'robot': 'simreal_arm', 'source_states': '/joint_states_raw',
                            'command_mode': 'forward_position'}
    (n,) = plan({'backend': 'real', 'real_driver': 'external',
                 'external_command': 'trajectory'})
    assert n.parameters['command_topic'] == '/joint_trajectory_controller/joint_trajectory'
    nodes = plan({'backend': 'twin', 'real_driver': 'external'})
    assert [n.kind for n in nodes] == ['external_adapter', 'sim_bridge']


@pytest.mark.parametrize('args, message', [
    ({'driver_rate': '0'}, r'^driver settings: dynamixel_driver: rate_hz: expected a number'),
    ({'driver_rate': 'fast'}, r"^driver_rate:='fast' is not valid"),
    ({'baud': 'quick'}, r"^baud:='quick' is not valid; expected an integer baud rate"),
    ({'baud': '-5'}, r'^driver settings: dynamixel_driver: baud: expected 0'),
    ({'watchdog': 'panic'}, r"^watchdog:='panic' is not valid"),
])
def test_real_bad_driver_arguments(args: dict[str, str], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        plan({'backend': 'real', 'port': '/dev/ttyUSB0', **args})


# ---------------------------------------------------------------------------------------------
# bad arguments


def test_unknown_argument() -> None:
    with pytest.raises(PlanError, match=r"^unknown launch argument 'backnd'; did you mean "
                                        r"'backend'\?$"):
        plan({'backnd': 'sim'})
    with pytest.raises(PlanError, match=r"^unknown launch argument 'zzz'; known: amplitude, "
                                        r'backend, .*, watchdog$'):
        plan({'zzz': 'sim'})


@pytest.mark.parametrize('key, value', [('backend', 'foo'), ('backend', ''),
                                        ('timing', 'slow'), ('sim_time', 'yes'),
                                        ('paused', 'True'), ('excite', 'sine')])
def test_bad_choice(key: str, value: str) -> None:
    with pytest.raises(PlanError, match=rf"^{key}:='{value}' is not valid; choose one of \["):
        plan({key: value})


def test_bad_choice_lists_the_choices() -> None:
    with pytest.raises(PlanError) as info:
        plan({'backend': 'foo'})
    for b in BACKENDS:
        assert f"'{b}'" in str(info.value)
    with pytest.raises(PlanError) as info:
        plan({'excite': 'sine'})
    assert "''" not in str(info.value)
    assert "'chirp'" in str(info.value)


@pytest.mark.parametrize('args, key', [
    ({'rate': 'fast'}, 'rate'),
    ({'rate': ''}, 'rate'),
    ({'seed': 'abc'}, 'seed'),
    ({'seed': '1.5'}, 'seed'),
    ({'lockstep_timeout': 'never'}, 'lockstep_timeout'),
    ({'excite': 'chirp', 'duration': 'long'}, 'duration'),
    ({'excite': 'chirp', 'amplitude': 'big'}, 'amplitude'),
    ({'excite': 'chirp', 'excite_rate': 'x'}, 'excite_rate'),
])
def test_non_numeric(args: dict[str, str], key: str) -> None:
    with pytest.raises(PlanError, match=rf"^{key}:='{args[key]}' is not valid; expected "):
        plan(args)


@pytest.mark.parametrize('args, key', [
    ({'rate': 'nan'}, 'rate'),
    ({'rate': 'inf'}, 'rate'),
    ({'lockstep_timeout': 'nan'}, 'lockstep_timeout'),
    ({'excite': 'chirp', 'duration': 'nan'}, 'duration'),
    ({'excite': 'chirp', 'duration': 'inf'}, 'duration'),
    ({'excite': 'chirp', 'amplitude': 'nan'}, 'amplitude'),
    ({'excite': 'chirp', 'excite_rate': '-inf'}, 'excite_rate'),
])
def test_non_finite(args: dict[str, str], key: str) -> None:
    with pytest.raises(PlanError, match=rf"^{key}:='{args[key]}' is not valid; expected a "
                                        r'finite '):
        plan(args)


@pytest.mark.parametrize('args, message', [
    ({'rate': '0'}, r'publish_rate_hz: expected a number > 0, got 0\.0'),
    ({'rate': '-10'}, r'publish_rate_hz: expected a number > 0'),
    ({'rate': '20000'}, r'publish_rate_hz: expected a rate <= 10000 Hz'),
    ({'lockstep_timeout': '-1'}, r'lockstep_timeout_s: expected a number >= 0'),
    ({'seed': '-1'}, r'seed: expected an integer >= 0'),
    ({'backend': 'sim2sim', 'rate': '0'}, r'publish_rate_hz: expected a number > 0'),
])
def test_invalid_bridge_settings(args: dict[str, str], message: str) -> None:
    with pytest.raises(PlanError, match=r'^sim bridge settings: sim_bridge: ' + message):
        plan(args)


@pytest.mark.parametrize('args', [{'duration': '0'}, {'duration': '-1'},
                                  {'excite_rate': '0'}, {'excite_rate': '-100'}])
def test_excite_must_be_positive(args: dict[str, str]) -> None:
    with pytest.raises(PlanError, match=r'duration:= and excite_rate:= must be > 0'):
        plan({'excite': 'chirp', **args})


def test_excite_arguments_ignored_without_excite() -> None:
    assert len(plan({'duration': '0', 'excite_rate': '0'})) == 1


def test_plan_error_is_a_simreal_error() -> None:
    with pytest.raises(SimrealError):
        plan({'backend': 'foo'})


def test_values_are_converted_to_text() -> None:
    (n,) = plan({'rate': 100, 'seed': 2})  # type: ignore[dict-item]
    assert n.parameters['publish_rate_hz'] == 100.0
    assert n.parameters['seed'] == 2


# ---------------------------------------------------------------------------------------------
# parse_cli_args


def test_parse_cli_args_good() -> None:
    assert parse_cli_args([]) == {}
    assert parse_cli_args(['backend:=sim2sim', 'namespace:=robot1', 'scene:=']) == {
        'backend': 'sim2sim', 'namespace': 'robot1', 'scene': ''}
    assert parse_cli_args(['robot:=/a/b:=c.yaml']) == {'robot': '/a/b:=c.yaml'}
    assert parse_cli_args(['seed:=1', 'seed:=2']) == {'seed': '2'}
    assert plan(parse_cli_args(['backend:=sim', 'rate:=100']))[0].parameters[
        'publish_rate_hz'] == 100.0


@pytest.mark.parametrize('token', ['backend=sim', 'backend', ':=sim', '', 'backend:', '=:'])
def test_parse_cli_args_bad(token: str) -> None:
    with pytest.raises(PlanError, match=r'launch arguments have the form name:=value, got '
                                        + repr(token).replace('\\', '\\\\')):
        parse_cli_args(['backend:=sim', token])


# ---------------------------------------------------------------------------------------------
# the launch file uses the planner (parsed, not imported: launch_ros is not installed)


@pytest.fixture(scope='module')
def launch_tree() -> ast.Module:
    return ast.parse(LAUNCH_FILE.read_text(encoding='utf-8'), filename=str(LAUNCH_FILE))


def test_launch_file_imports_the_planner(launch_tree: ast.Module) -> None:
    imported = {alias.name for node in ast.walk(launch_tree)
                if isinstance(node, ast.ImportFrom)
                and node.module == 'simreal_ros.bringup.planner' for alias in node.names}
    assert {'ARGUMENTS', 'plan'} <= imported


def test_launch_file_declares_the_planner_arguments(launch_tree: ast.Module) -> None:
    funcs = {f.name: f for f in launch_tree.body if isinstance(f, ast.FunctionDef)}
    assert 'generate_launch_description' in funcs
    gen = funcs['generate_launch_description']
    # DeclareLaunchArgument is called inside a loop over ARGUMENTS.items()
    declares = [c for c in ast.walk(gen) if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Name) and c.func.id == 'DeclareLaunchArgument']
    assert len(declares) == 1
    loops = [c for c in ast.walk(gen) if isinstance(c, ast.comprehension)]
    assert any(ast.unparse(c.iter) == 'ARGUMENTS.items()' for c in loops)
    # no argument is declared by a literal name
    assert not isinstance(declares[0].args[0], ast.Constant)
    # the nodes come from plan() with every argument of ARGUMENTS
    nodes_fn = funcs['_nodes']
    calls = {ast.unparse(c.func) for c in ast.walk(nodes_fn) if isinstance(c, ast.Call)}
    assert 'plan' in calls
    comps = [c for c in ast.walk(nodes_fn) if isinstance(c, ast.comprehension)]
    assert any(ast.unparse(c.iter) == 'ARGUMENTS' for c in comps)


def test_every_argument_has_a_valid_default() -> None:
    for name, arg in ARGUMENTS.items():
        assert arg.description, name
        if arg.choices:
            assert arg.default in arg.choices, name
    plan({k: a.default for k, a in ARGUMENTS.items()})


# ---------------------------------------------------------------------------------------------
# latency:= (the injector on the command and observation paths)


def test_no_latency_means_direct_topics() -> None:
    for backend in ('sim', 'sim2sim'):
        nodes = plan({'backend': backend})
        assert 'injector' not in {n.kind for n in nodes}
        assert not any('backend/' in to for n in nodes for _f, to in n.remappings)


def test_latency_sim_moves_the_backend_behind_the_injector() -> None:
    bridge, inj = plan({'latency': 'wifi', 'seed': '5'})
    assert dict(bridge.remappings) == {'joint_states': 'backend/joint_states',
                                       'joint_commands': 'backend/joint_commands',
                                       'imu/data': 'backend/imu/data',
                                       'camera/image_raw': 'backend/camera/image_raw',
                                       'camera/camera_info': 'backend/camera/camera_info'}
    assert inj.kind == 'injector' and inj.fqn == '/injector'
    assert inj.parameters == {
        'profile': 'wifi', 'seed': 5, 'use_sim_time': False,
        'bindings': ['command:joint_commands>backend/joint_commands',
                     'observation:backend/joint_states>joint_states',
                     'imu:backend/imu/data>imu/data',
                     'camera:backend/camera/image_raw>camera/image_raw',
                     'camera:backend/camera/camera_info>camera/camera_info']}


def test_latency_cameras_off_or_without_a_camera_route_go_direct(tmp_path: Path) -> None:
    bridge, inj = plan({'latency': 'wifi', 'cameras': 'false'})
    assert not any('camera' in f for f, _to in bridge.remappings)
    assert not any(b.startswith('camera:') for b in inj.parameters['bindings'])
    f = tmp_path / 'lab.yaml'
    f.write_text('routes:\n  command: {delay: 0.002}\n  observation: {delay: 0.001}\n')
    bridge, inj = plan({'latency': str(f)})
    assert not any('camera' in f for f, _to in bridge.remappings)


def test_latency_on_the_real_robot_delays_the_driven_cameras_only() -> None:
    nodes = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'latency': 'usb_serial',
                  'camera_device': '/dev/video0'})
    driver, cam = _one(nodes, 'dynamixel_driver'), _one(nodes, 'camera_driver')
    assert 'camera/image_raw' not in dict(driver.remappings)
    assert dict(cam.remappings) == {'joint_states': 'backend/joint_states',
                                    'joint_commands': 'backend/joint_commands',
                                    'camera/image_raw': 'backend/camera/image_raw',
                                    'camera/camera_info': 'backend/camera/camera_info'}
    assert 'camera:backend/camera/image_raw>camera/image_raw' in (
        _one(nodes, 'injector').parameters['bindings'])
    nodes = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'latency': 'usb_serial'})
    assert not any(b.startswith('camera:') for b in _one(nodes, 'injector').parameters['bindings'])


def test_latency_in_a_namespace_and_with_sim_time() -> None:
    bridge, inj = plan({'latency': 'ethercat', 'namespace': 'arm', 'sim_time': 'true'})
    assert bridge.namespace == inj.namespace == '/arm'
    assert inj.parameters['use_sim_time'] is True


def test_latency_sim2sim_delays_both_commands_and_the_primary_states() -> None:
    a, b, inj = plan({'backend': 'sim2sim', 'latency': 'usb_serial'})
    assert dict(a.remappings)['joint_commands'] == '/backend/joint_commands'
    assert dict(b.remappings)['joint_commands'] == '/backend/joint_commands'
    assert dict(a.remappings)['joint_states'] == 'backend/joint_states'
    assert 'joint_states' not in dict(b.remappings)
    assert dict(a.remappings)['forward_position_controller/commands'] == (
        '/forward_position_controller/commands')
    assert 'observation:sim_a/backend/joint_states>sim_a/joint_states' in (
        inj.parameters['bindings'])


def test_latency_from_a_file_without_imu_route(tmp_path: Path) -> None:
    f = tmp_path / 'lab.yaml'
    f.write_text('routes:\n  command: {delay: 0.002}\n  observation: {delay: 0.001}\n')
    bridge, inj = plan({'latency': str(f)})
    assert 'imu/data' not in dict(bridge.remappings)
    assert len(inj.parameters['bindings']) == 2


@pytest.mark.parametrize('text,message', [
    ('routes:\n  command: {delay: 0.002}\n', 'routes named command and observation'),
    ('routes:\n  command: {delay: {distribution: zipf}}\n  observation: {}\n',
     'routes.command.delay.distribution'),
    ('routes:\n  command: {loss: {model: bernoulli, p: -1}}\n  observation: {}\n',
     'routes.command.loss.p'),
])
def test_bad_latency_profile(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / 'bad.yaml'
    f.write_text(text)
    with pytest.raises(PlanError, match=message):
        plan({'latency': str(f)})


def test_latency_unknown_preset_and_lockstep() -> None:
    with pytest.raises(PlanError, match='usb_serial'):
        plan({'latency': 'satellite'})
    with pytest.raises(PlanError, match='lockstep_timeout'):
        plan({'latency': 'wifi', 'timing': 'lockstep'})
    nodes = plan({'latency': 'wifi', 'timing': 'lockstep', 'lockstep_timeout': '0.05'})
    assert _one(nodes, 'injector').parameters['use_sim_time'] is True


def test_latency_real_and_twin() -> None:
    driver, inj = plan({'backend': 'real', 'port': '/dev/ttyUSB0', 'latency': 'usb_serial'})
    assert driver.kind == 'dynamixel_driver'
    assert dict(driver.remappings) == {'joint_states': 'backend/joint_states',
                                       'joint_commands': 'backend/joint_commands'}
    assert len(inj.parameters['bindings']) == 2          # the hardware has no IMU topic
    driver, twin, inj = plan({'backend': 'twin', 'port': '/dev/ttyUSB0', 'latency': 'wifi'})
    assert twin.namespace == '/twin'
    assert dict(twin.remappings)['joint_commands'] == '/backend/joint_commands'
    assert 'joint_states' not in dict(twin.remappings)
    driver, twin = plan({'backend': 'twin', 'port': '/dev/ttyUSB0'})
    assert driver.remappings == () and dict(twin.remappings)['joint_commands'] == '/joint_commands'


@pytest.mark.parametrize('args,consumers', [
    ({}, 1), ({'backend': 'sim2sim'}, 2), ({'backend': 'twin', 'port': '/dev/x'}, 2),
    ({'latency': 'wifi'}, 1), ({'latency': 'wifi', 'record': 'true'}, 2),
    ({'backend': 'twin', 'port': '/dev/x', 'record': 'true', 'record_topics': 'joint_states'}, 2),
    ({'backend': 'twin', 'port': '/dev/x', 'record': 'true', 'record_topics': 'joint_*'}, 3),
    ({'record': 'true', 'namespace': 'arm', 'record_topics': '/arm/joint_commands'}, 2),
])
def test_excite_waits_for_every_planned_command_consumer(args, consumers) -> None:
    e = _one(plan({**args, 'excite': 'chirp'}), 'excite')
    assert e.parameters['wait_for_subscribers'] == consumers


def test_the_robot_spec_is_loaded_once_per_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    import simreal_ros.core.robot as robot_module
    loads: list[str] = []
    resolve = robot_module.resolve_named

    def counted(kind: str, value: str, *rest: object) -> Path:
        loads.append(value)  # load_robot resolves the spec first, wherever it is called from
        return resolve(kind, value, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(robot_module, 'resolve_named', counted)
    plan({'backend': 'twin', 'port': '/dev/ttyUSB0', 'record': 'true', 'latency': 'wifi',
          'policy': 'simreal_arm_reach', 'camera_device': '0', 'overlay': 'worn_arm'})
    assert loads == ['simreal_arm']


def test_random_pushes_are_refused_for_a_fixed_base_arm_before_any_node_starts() -> None:
    with pytest.raises(PlanError) as err:
        plan({'robot': 'simreal_arm', 'randomization': 'legged_pushes'})
    msg = str(err.value)
    assert msg.startswith('randomization:=legged_pushes: ')
    assert msg.endswith("legged_pushes.yaml: pushes: expected no pushes for simreal_arm, whose "
                        "base is fixed to the world (pushes move a floating base: base.type: "
                        "floating), got 'a pushes: section'")
    assert plan({'robot': 'simreal_quad', 'randomization': 'legged_pushes'})
