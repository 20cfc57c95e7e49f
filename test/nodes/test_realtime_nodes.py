"""Real-time scheduling of real node processes: priorities read back per thread from the
kernel, the fallback without CAP_SYS_NICE (dropped for real with setpriv), bad values, and the
driver's USB latency timer from a fake sysfs tree."""

from __future__ import annotations

import os
from pathlib import Path
import shutil
import subprocess
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from sensor_msgs.msg import JointState
import torch
import yaml

from simreal_ros.bringup.launcher import node_command, write_params_file
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.ros import messages

pytestmark = [pytest.mark.ros, pytest.mark.skipif(os.geteuid() != 0,
                                                  reason='needs CAP_SYS_NICE (root here)')]
# A node under SCHED_FIFO pinned to a CPU (every thread of the process: the sim bridge's
# physics, a policy loop wedged for seconds) takes that CPU from any other test worker: those
# tests are `timing`, run alone.
rt_alone = pytest.mark.timing
SETPRIV = shutil.which('setpriv')
ROBOT = load_robot('simreal_arm')
SPEC = load_policy_spec('simreal_arm_reach')


def _profile(tmp_path: Path) -> str:
    path = tmp_path / 'rt.yaml'
    path.write_text(yaml.safe_dump({'description': 'rt', 'routes': {
        'r': {'input': 'in', 'output': 'out', 'delay': 0.002,
              'type': 'sensor_msgs/msg/JointState'}}}))
    return str(path)


def _status(diags: list, suffix: str) -> dict[str, str]:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(suffix):
                return {kv.key: kv.value for kv in st.values} | {'_level': int.from_bytes(
                    st.level, 'little') if isinstance(st.level, bytes) else int(st.level),
                    '_message': st.message}
    raise LookupError(suffix)


def _kernel(tid: int) -> tuple[int, int, set[int]]:
    return os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority, \
        os.sched_getaffinity(tid)


@rt_alone
def test_injector_threads_get_their_priorities(start_node, ros_client, tmp_path):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    node = start_node('injector', profile=_profile(tmp_path), rt_priority=83,
                      receive_rt_priority=81, cpu_affinity='1', diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: 'rt.delivery.tid' in _status(diags, ': timing'), 30, 'timing')
    v = _status(diags, ': timing')
    delivery = int(v['rt.delivery.tid'])
    assert _kernel(delivery) == (os.SCHED_FIFO, 83, {1})
    assert (v['rt.delivery.policy'], v['rt.delivery.priority']) == ('SCHED_FIFO', '83')
    # every other thread of the process (executor + middleware) is on the receive priority
    others = [int(t) for t in os.listdir(f'/proc/{node.proc.pid}/task') if int(t) != delivery]
    assert others and all(_kernel(t) == (os.SCHED_FIFO, 81, {1}) for t in others)
    assert v['_level'] == 0, v['_message']
    assert 'WARN' not in node.output()


@pytest.mark.skipif(SETPRIV is None, reason='setpriv (util-linux) not installed')
def test_without_the_capability_one_warning_and_the_node_runs(ros_env, ros_client, tmp_path):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    spec = NodeSpec('injector', 'injector', '', {'profile': _profile(tmp_path),
                                                 'rt_priority': 83, 'diagnostics_period_s': 0.2})
    cmd = [SETPRIV, '--inh-caps=-sys_nice', '--bounding-set=-sys_nice',
           *node_command(spec, write_params_file(spec, tmp_path))]
    log = tmp_path / 'injector.log'
    with open(log, 'wb') as out:
        proc = subprocess.Popen(cmd, env=ros_env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            ros_client.wait_for(lambda: 'rt.delivery.tid' in _status(diags, ': timing'), 30,
                                'timing')
            v = _status(diags, ': timing')
            assert (v['rt.delivery.policy'], v['rt.delivery.priority']) == ('SCHED_OTHER', '0')
            assert v['rt.delivery.error'] == 'rt_priority 83: Operation not permitted'
            tids = [int(t) for t in os.listdir(f'/proc/{proc.pid}/task')]
            assert all(_kernel(t)[0] == os.SCHED_OTHER for t in tids)
            assert proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    warns = [line for line in log.read_text().splitlines() if '[WARN]' in line]
    assert len(warns) == 1, warns
    assert 'limits.d' in warns[0] and 'setcap cap_sys_nice' in warns[0]
    assert '--cap-add=SYS_NICE' in warns[0]


@rt_alone
def test_sim_bridge_physics_thread_priority(start_node, ros_client):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    node = start_node('sim_bridge', rt_priority=76, cpu_affinity='0', diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: 'rt.physics.tid' in _status(diags, ': sim bridge'), 60,
                        'bridge diagnostics')
    v = _status(diags, ': sim bridge')
    physics = int(v['rt.physics.tid'])
    assert _kernel(physics) == (os.SCHED_FIFO, 76, {0})
    # the executor and the middleware one below: a GIL holder must not be preempted by load
    others = [int(t) for t in os.listdir(f'/proc/{node.proc.pid}/task') if int(t) != physics]
    assert others and all(_kernel(t) == (os.SCHED_FIFO, 75, {0}) for t in others)
    assert v['rt.physics_others.priority'] == '75'
    assert v['_level'] == 0


@pytest.mark.parametrize('kind, params, key', [
    ('injector', {'rt_priority': 120}, 'rt_priority'),
    ('injector', {'cpu_affinity': '0-7'}, 'cpu_affinity'),
    ('injector', {'spin_us': 5000}, 'spin_us'),
    ('sim_bridge', {'rt_priority': -2}, 'rt_priority'),
    ('sim_bridge', {'cpu_affinity': 'x'}, 'cpu_affinity'),
])
def test_bad_values_exit_1_with_one_error_line(start_node, tmp_path, kind, params, key):
    if kind == 'injector':
        params = {'profile': _profile(tmp_path), **params}
    node = start_node(kind, **params)
    assert node.wait(60) == 1
    out = node.output()
    errors = [line for line in out.splitlines() if line.startswith('error:')]
    assert len(errors) == 1 and f'{key}: expected' in errors[0], out
    assert 'Traceback' not in out


@rt_alone
def test_driver_latency_timer_from_sysfs(ros_env, start_node, ros_client, tmp_path):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    with EmulatorProcess(link=tmp_path / 'ttyDXL', env=ros_env) as emu:
        tty = os.path.basename(os.path.realpath(emu.port))    # a pty: /dev/pts/<n>
        timer = tmp_path / 'sys' / 'bus' / 'usb-serial' / 'devices' / tty / 'latency_timer'
        timer.parent.mkdir(parents=True)
        timer.write_text('16\n')
        drv = start_node('dynamixel_driver', port=emu.port, rate_hz=200.0, rt_priority=79,
                         sysfs_root=str(tmp_path / 'sys'), diagnostics_period_s=0.2)
        ros_client.wait_for(lambda: float(_status(diags, ': dynamixel bus')['cycle_rate_hz'])
                            > 0, 60, 'driver cycles')
        v = _status(diags, ': dynamixel bus')
        assert v['usb_latency_timer_ms'] == '16'
        assert float(v['cycle_rate_limit_hz']) == 62.5
        assert float(v['cycle_rate_asked_hz']) == 200.0
        assert _kernel(int(v['rt.bus.tid']))[:2] == (os.SCHED_FIFO, 79)
        out = drv.output()
        assert f'echo 1 | sudo tee {timer}' in out


def test_driver_on_a_pty_has_no_latency_timer(emulator_port, start_node, ros_client):
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    drv = start_node('dynamixel_driver', port=emulator_port, rate_hz=200.0,
                     diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: float(_status(diags, ': dynamixel bus')['cycle_rate_hz'])
                        > 0, 60, 'driver cycles')
    v = _status(diags, ': dynamixel bus')
    assert v['usb_latency_timer_ms'] == '-1'
    assert v['rt.bus.policy'] == 'SCHED_OTHER'
    assert 'latency timer' not in drv.output()


@pytest.fixture
def emulator_port(ros_env, tmp_path):
    with EmulatorProcess(link=tmp_path / 'ttyDXL', env=ros_env) as emu:
        yield emu.port


class Wedge(torch.nn.Module):
    """A network that, once the goal's first joint is above 1, runs ~seconds of tensor work:
    the wedged control loop of a model that never returns in time (bounded, so it ends)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.shape[0], 6)
        if bool(x[0, 12] > 1.0):
            for _ in range(1_500_000):
                out = out * 1.0
        return out


@rt_alone
def test_a_wedged_fifo_control_loop_is_reported_as_error(start_node, ros_client, tmp_path):
    """The policy loop under SCHED_FIFO pinned to CPU 0 stops cycling for seconds: the node's
    diagnostics report ERROR. A TorchScript call holds the GIL, so no thread of the process
    runs meanwhile (diagnostics arrived every ~4 s instead of 0.2 s in this test): the stall
    is reported at the first report after it, from the gap the loop measured itself."""
    torch.jit.script(Wedge()).save(str(tmp_path / 'wedge.pt'))
    data = yaml.safe_load(SPEC.source.read_text())
    data.update(policy='wedge', model='wedge.pt')
    data['safety'] = {'ramp_s': 0.1, 'stale_after_periods': 50}
    (tmp_path / 'wedge.yaml').write_text(yaml.safe_dump(data))
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    states = ros_client.publisher(JointState, 'joint_states')
    goal = ros_client.publisher(JointState, 'goal')
    feed = ros_client.node.create_timer(0.01, lambda: states.publish(messages.joint_state(
        ROBOT.joint_names, time.time_ns(), ROBOT.home, np.zeros(ROBOT.n))))
    try:
        start_node('policy', policy=str(tmp_path / 'wedge.yaml'), enable_on_start=True,
                   rt_priority=70, cpu_affinity='0', diagnostics_period_s=0.2)
        ros_client.wait_for(lambda: _status(diags, ': policy')['_message'] == 'running', 60,
                            'the policy running')
        v = _status(diags, ': policy')
        assert (v['rt.policy_loop.policy'], v['rt.policy_loop.priority']) == ('SCHED_FIFO',
                                                                             '70')
        n = len(diags)
        target = ROBOT.home.copy()
        target[0] = 1.5                       # the first policy joint (base_yaw): wedge
        goal.publish(messages.joint_state(ROBOT.joint_names, 0, target))
        try:
            ros_client.wait_for(lambda: any(
                st.message.startswith('control loop stalled') for _t, a in diags[n:]
                for st in a.status if st.name.endswith(': policy')), 60, 'the stall reported')
        except AssertionError:
            seen = [(round((t - diags[n][0]) / 1e9, 2), st.message,
                     {kv.key: kv.value for kv in st.values}['loop_heartbeat_age_ms'])
                    for t, a in diags[n:] for st in a.status if st.name.endswith(': policy')]
            raise AssertionError(f'no stall reported; statuses after the goal: {seen}') from None
        st = next(st for _t, a in diags[n:] for st in a.status
                  if st.message.startswith('control loop stalled'))
        assert st.level == DiagnosticStatus.ERROR
    finally:
        ros_client.node.destroy_timer(feed)
