"""Ctrl-C stops every node kind cleanly: exit 0 and no traceback, whenever it lands.

Each node kind of the registry is started as the launcher starts it
(``python -m simreal_ros.bringup.node_main``, through :class:`NodeProcess`) and sent one SIGINT:

- ``start-up``: at once, while the interpreter is still starting and importing rclpy and
  MuJoCo (before the fix every one of these raised KeyboardInterrupt inside an import:
  traceback, exit 1, or died of the signal, exit -2);
- ``running``: once the node logged its first line (built, spinning);
- ``after work``: once its output reached this test (a message on its output topic; for the
  excitation source, the line that says its run is done, while it waits for the last command's
  acknowledgement: it crashed there with 'publisher's context is invalid', exit 2).

Every wait is for an event with a generous deadline; none is a sleep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import re
import time
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray
import pytest
from sensor_msgs.msg import Imu, JointState

from simreal_ros.bringup.registry import KINDS
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.emulator.virtual_camera import free_port
from simreal_ros.ros import qos

pytestmark = pytest.mark.ros

PHASES = ('start-up', 'running', 'after work')
# a log line of the node itself (rclpy's console format), not of the interpreter
FIRST_LINE = re.compile(r'^\[(INFO|WARN)\] \[\d+\.\d+\] \[', re.M)
DEADLINE_S = 60.0  # a loaded CI host (2 cores, one kept busy) starts a MuJoCo node in ~10 s


@dataclass(frozen=True)
class Case:
    """How one node kind is started and what shows it did its work."""

    params: Callable[[Path, dict[str, str]], dict[str, Any]] = lambda _tmp, _ports: {}
    emulators: tuple[str, ...] = ()  # roles of the virtual buses it needs: follower, leader
    imu_robot: str = ''  # the follower is this robot's, with its IMU on a port of its own ('imu')
    output: tuple[type, str, Any] | None = (DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
    done_line: str = ''  # instead of an output message: a log line that ends its work


CASES: dict[str, Case] = {
    'sim_bridge': Case(output=(JointState, 'joint_states', qos.STATE)),
    'excite': Case(lambda _t, _p: {'pattern': 'chirp', 'duration_s': 2.0, 'rate_hz': 50.0},
                   output=None, done_line='done:'),
    'injector': Case(lambda _t, _p: {'bindings': [
        'command:joint_commands>backend/joint_commands',
        'observation:backend/joint_states>joint_states']}),
    'policy': Case(lambda _t, _p: {'policy': 'simreal_arm_reach'}),
    'recorder': Case(lambda tmp, _p: {'bag': str(tmp / 'bag'), 'topics': ['/diagnostics']}),
    'dynamixel_driver': Case(lambda _t, ports: {'port': ports['follower'], 'rate_hz': 100.0},
                             emulators=('follower',),
                             output=(JointState, 'joint_states', qos.STATE)),
    'external_adapter': Case(),
    'camera_driver': Case(lambda _t, _p: {
        'device': f'http://127.0.0.1:{free_port()}/camera.mjpg', 'reconnect_period_s': 0.3}),
    'state_publisher': Case(),
    'leader': Case(lambda _t, ports: {'port': ports['leader'], 'start_mode': 'wait'},
                   emulators=('leader',),
                   output=(JointState, 'leader/joint_states', qos.STATE)),
    'episodes': Case(lambda tmp, _p: {'directory': str(tmp / 'episodes')}),
    'imu_driver': Case(lambda _t, ports: {'port': ports['imu']}, emulators=('follower',),
                       imu_robot='simreal_quad', output=(Imu, 'imu/data', qos.STATE)),
}


def test_every_node_kind_has_a_case():
    assert sorted(CASES) == sorted(KINDS)


def wait_for(predicate: Callable[[], Any], what: str, p: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if p.proc.poll() is not None:
            raise AssertionError(f'{what}: the node exited first with code {p.proc.returncode}'
                                 f':\n{p.output()}')
        if time.monotonic() > deadline:
            raise TimeoutError(f'{what} not within {DEADLINE_S} s:\n{p.output()}')
        time.sleep(0.02)


@pytest.mark.parametrize('phase', PHASES)
@pytest.mark.parametrize('kind', sorted(CASES))
def test_sigint_is_a_clean_stop(kind, phase, start_node, ros_client, ros_env, tmp_path):
    case = CASES[kind]
    imu = {'robot': case.imu_robot, 'imu_link': tmp_path / 'tty_imu'} if case.imu_robot else {}
    emulators = [EmulatorProcess(link=tmp_path / f'tty_{role}', env=ros_env, role=role, **imu)
                 for role in case.emulators]
    try:
        ports = {role: emu.start().port for role, emu in zip(case.emulators, emulators,
                                                              strict=True)}
        if imu:
            ports['imu'] = str(imu['imu_link'])
        received: list = []
        if phase == 'after work' and case.output is not None:
            received = ros_client.collect(*case.output)
        p = start_node(kind, **case.params(tmp_path, ports))
        if phase == 'running':
            wait_for(lambda: FIRST_LINE.search(p.output()), 'its first log line', p)
        elif phase == 'after work' and case.output is not None:
            wait_for(lambda: received, f'a message on {case.output[1]}', p)
        elif phase == 'after work':
            wait_for(lambda: case.done_line in p.output(), repr(case.done_line), p)
        code = p.stop()  # SIGINT, as Ctrl-C in a terminal or a launch stopping
    finally:
        for emu in emulators:
            emu.stop()
    out = p.log_path.read_text(errors='replace')
    assert code == 0, out
    assert 'Traceback' not in out, out
