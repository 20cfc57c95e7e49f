"""The policy node over real DDS: closed loop in sim, enable/ramp, stale hold, NaN, limits."""

from __future__ import annotations

from pathlib import Path
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from sensor_msgs.msg import JointState
from startup import start_up_error
from std_srvs.srv import SetBool
import torch
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.ros import messages

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')
SPEC = load_policy_spec('simreal_arm_reach')
NAMES = ROBOT.joint_names


def policy_status(diags: list) -> DiagnosticStatus:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith(': policy'):
                return st
    raise LookupError('no policy diagnostics yet')


def values(st: DiagnosticStatus) -> dict:
    return {kv.key: kv.value for kv in st.values}


def mode(diags: list) -> str:
    return values(policy_status(diags))['mode']


def positions(samples: list, since: int = 0) -> np.ndarray:
    return np.array([list(m.position) for _t, m in samples[since:]])


def enable(client, on: bool = True, node: str = '/policy'):
    return client.call(SetBool, f'{node}/enable', SetBool.Request(data=on))


def test_closed_loop_in_sim_ramps_then_reaches_goals(start_node, ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    commands = ros_client.collect(JointState, 'joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge')
    policy = start_node('policy', policy='simreal_arm_reach', diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: len(states) > 10, 20, 'joint_states')
    ros_client.wait_for(lambda: mode(diags) == 'disabled', 30, 'the policy node up')
    # move the arm away from the default pose by hand while the policy is disabled
    pub = ros_client.publisher(JointState, 'joint_commands')
    away = ROBOT.home + np.array([0.5, -0.3, 0.3, 0.0, 0.4, 0.0])
    pub.publish(messages.joint_state(NAMES, time.time_ns(), away))
    ros_client.wait_for(lambda: np.abs(positions(states)[-1] - away).max() < 0.04, 10,
                        'the arm at the hand-commanded pose')
    n_hand = len(commands)
    time.sleep(0.5)
    assert len(commands) == n_hand, 'a disabled policy must not publish'
    assert enable(ros_client).success
    ros_client.wait_for(lambda: mode(diags) == 'running', 20, 'ramp done, policy running')
    sent = list(commands)  # one snapshot: the subscription thread keeps appending
    ramp = positions(sent, n_hand)
    t = np.array([messages.stamp_to_ns(m.header.stamp) for _t, m in sent[n_hand:]]) / 1e9
    assert np.abs(ramp[0] - away).max() < 0.05, 'the ramp starts at the measured pose'
    in_ramp = t < t[0] + SPEC.safety.ramp_s - 0.05  # 2 s: longer than 0.5 rad at 0.5 rad/s
    speed = np.abs(np.diff(ramp[in_ramp], axis=0)) / np.diff(t[in_ramp])[:, None]
    assert speed.max() <= SPEC.safety.ramp_max_velocity * 1.1, 'ramp speed'
    assert np.abs(ramp[in_ramp][-1] - SPEC.default).max() < 0.01, 'the ramp ends at default'
    goal_pub = ros_client.publisher(JointState, 'goal')
    for goal in (ROBOT.home + np.array([0.8, 0.3, -0.5, 0.6, -0.4, 1.0]),
                 ROBOT.home + np.array([-0.9, -0.4, 0.4, -0.5, 0.5, -0.8])):
        goal_pub.publish(messages.joint_state(NAMES, 0, goal))
        ros_client.wait_for(lambda g=goal: np.abs(positions(states)[-1] - g).max() < 0.05,
                            15, f'reaching goal {np.round(goal, 2)}')
    cmds = positions(commands, n_hand)
    assert np.all(cmds <= SPEC.upper + 1e-9) and np.all(cmds >= SPEC.lower - 1e-9)
    stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in commands[n_hand:]]
    assert np.all(np.diff(stamps) > 0) and abs(stamps[-1] - time.time_ns()) < 1e9
    v = values(policy_status(diags))
    assert int(v['rejected_outputs']) == 0 and float(v['compute_p50_ms']) > 0
    assert float(v['control_rate_hz']) == 50.0 and v['model_format'] == 'torchscript'
    assert policy.proc.poll() is None, policy.output()


class FakeBackend:
    """joint_states at 100 Hz from the test process (stamped with the wall clock)."""

    def __init__(self, client, q: np.ndarray) -> None:
        self.pub = client.publisher(JointState, 'joint_states')
        self.q = q
        self.on = True
        self.timer = client.node.create_timer(0.01, self.tick)

    def tick(self) -> None:
        if self.on:
            self.pub.publish(messages.joint_state(NAMES, time.time_ns(), self.q,
                                                  np.zeros(len(NAMES))))


class Probe(torch.nn.Module):
    """Goal-triggered faults: goal base_yaw > 1 -> NaN, goal shoulder > 1 -> +40 (saturates)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = x[:, 12:18]
        out = torch.zeros(x.shape[0], 6)
        if bool(g[0, 0] > 1.0):
            out = out + float('nan')
        if bool(g[0, 1] > 1.0):
            out = out + 40.0
        return out


def probe_spec(tmp_path: Path) -> Path:
    torch.jit.script(Probe()).save(str(tmp_path / 'probe.pt'))
    data = yaml.safe_load(SPEC.source.read_text())
    data.update(policy='probe', model='probe.pt')
    data['safety'] = {'ramp_s': 0.2, 'stale_after_periods': 3}
    data['action']['rate_limit_rad'] = 0.5
    p = tmp_path / 'probe.yaml'
    p.write_text(yaml.safe_dump(data))
    return p


def test_stale_hold_limits_and_nan_rejection(start_node, ros_client, tmp_path):
    commands = ros_client.collect(JointState, 'joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    backend = FakeBackend(ros_client, ROBOT.home.copy())
    policy = start_node('policy', policy=str(probe_spec(tmp_path)), enable_on_start=True,
                        diagnostics_period_s=0.2)
    ros_client.wait_for(lambda: mode(diags) == 'running', 30, 'auto-enabled and running')
    goal = ros_client.publisher(JointState, 'goal')

    # a saturating output: clipped and clamped, never beyond the limits
    g = ROBOT.home.copy()
    g[1] = ROBOT.home[1] + 1.2
    goal.publish(messages.joint_state(NAMES, 0, g))
    ros_client.wait_for(lambda: abs(positions(commands)[-1][1] - SPEC.upper[1]) < 1e-9, 10,
                        'the command clamped at the upper limit')
    cmds = positions(commands)
    assert np.all(cmds <= SPEC.upper + 1e-12) and np.all(cmds >= SPEC.lower - 1e-12)
    ros_client.wait_for(lambda: int(values(policy_status(diags))['clipped_actions']) > 0, 5,
                        'clipped actions counted')

    # NaN outputs: rejected, the last command held, an ERROR diagnostic
    held = positions(commands)[-1]
    g[0] = ROBOT.home[0] + 1.5
    goal.publish(messages.joint_state(NAMES, 0, g))
    ros_client.wait_for(lambda: int(values(policy_status(diags))['rejected_outputs']) >= 5, 10,
                        'rejections counted')
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.ERROR and 'rejected' in s.message
                                    for _t, a in diags for s in a.status), 5, 'ERROR status')
    n = len(commands)
    time.sleep(0.3)
    after = positions(commands, n)
    assert len(after) > 5 and np.all(np.isfinite(after))
    np.testing.assert_array_equal(after, np.tile(held, (len(after), 1)))
    assert 'NaN' in values(policy_status(diags))['last_fault']

    # stale observations: the last command is held (re-sent), mode hold, WARN
    g[0] = ROBOT.home[0]
    goal.publish(messages.joint_state(NAMES, 0, g))
    time.sleep(0.3)
    backend.on = False
    ros_client.wait_for(lambda: mode(diags) == 'hold', 5, 'hold on stale joint_states')
    n = len(commands)
    time.sleep(0.3)
    stale_cmds = positions(commands, n)
    assert len(stale_cmds) >= 5
    assert np.all(stale_cmds == stale_cmds[0])
    st = policy_status(diags)
    assert st.level == DiagnosticStatus.WARN and 'ms old' in st.message
    backend.on = True
    ros_client.wait_for(lambda: mode(diags) == 'running', 5, 'running again')
    # disable: publishing stops
    assert enable(ros_client, False).success
    time.sleep(0.2)
    n = len(commands)
    time.sleep(0.4)
    assert len(commands) == n
    assert policy.proc.poll() is None, policy.output()


def test_lockstep_answers_every_stamp_with_it_and_a_re_sent_state_again(start_node,
                                                                        ros_client):
    """sync_to_states: each new state stamp is answered once, stamped with it; a state that
    arrives again (a lockstep bridge re-sends it while no answer reaches it) is answered again
    with the same command, so an answer lost to discovery does not stall the simulation."""
    commands = ros_client.collect(JointState, 'joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('policy', policy='simreal_arm_reach', sync_to_states=True, enable_on_start=True,
               diagnostics_period_s=0.2)
    pub = ros_client.publisher(JointState, 'joint_states')
    ros_client.wait_for_subscribers(pub, timeout=30)
    sent = {'count': 0, 'mono': 0.0}

    def send(stamp: int) -> None:
        pub.publish(messages.joint_state(NAMES, stamp, ROBOT.home, np.zeros(ROBOT.n)))
        sent['count'] += 1
        sent['mono'] = time.monotonic()

    def answers(stamp: int) -> list:
        return [list(m.position) for _t, m in list(commands)
                if messages.stamp_to_ns(m.header.stamp) == stamp]

    def answered_resending(stamp: int) -> bool:
        """Re-send the state every 0.2 s, as the bridge does, until an answer arrives: the
        node's publisher may not have matched this subscription yet."""
        if not answers(stamp) and time.monotonic() - sent['mono'] > 0.2:
            send(stamp)
        return bool(answers(stamp))

    s1 = 1_000_000_000
    ros_client.wait_for(lambda: answered_resending(s1), 30, 'the first state answered')
    n = len(answers(s1))
    send(s1)
    ros_client.wait_for(lambda: len(answers(s1)) > n, 10, 'the re-sent state answered')
    assert answers(s1)[-1] == answers(s1)[0]
    send(s1 + 20_000_000)  # a control period later: a new action
    ros_client.wait_for(lambda: answers(s1 + 20_000_000), 10, 'the next tick answered')
    send(s1 + 25_000_000)  # inside the period: the last command, under this state's stamp
    ros_client.wait_for(lambda: answers(s1 + 25_000_000), 10, 'a tick inside the period')
    assert answers(s1 + 25_000_000) == answers(s1 + 20_000_000)
    repeated = str(sent['count'] - 3)  # all sends of s1 but the first
    ros_client.wait_for(lambda: values(policy_status(diags))['repeated_answers'] == repeated,
                        10, f'{repeated} repeated answers on /diagnostics')


def test_bad_start_up_exits_with_a_one_line_reason(start_node, tmp_path):
    torch.save(torch.nn.Linear(24, 6), tmp_path / 'pickled.pt')
    data = yaml.safe_load(SPEC.source.read_text())
    data['model'] = 'pickled.pt'
    (tmp_path / 'p.yaml').write_text(yaml.safe_dump(data))
    p = start_node('policy', policy=str(tmp_path / 'p.yaml'))
    p2 = start_node('policy', name='policy2')
    data['model'] = 'nope.onnx'
    (tmp_path / 'q.yaml').write_text(yaml.safe_dump(data))
    p3 = start_node('policy', name='policy3', policy=str(tmp_path / 'q.yaml'))
    assert 'pickled torch.save checkpoint' in start_up_error(p, 60)
    assert 'policy spec name' in start_up_error(p2, 60)
    err = start_up_error(p3, 60)
    assert 'nope.onnx' in err and 'not found' in err


class FakeImu:
    """imu/data at 100 Hz from the test process (stamped with the wall clock)."""

    def __init__(self, client) -> None:
        from sensor_msgs.msg import Imu
        self.pub = client.publisher(Imu, 'imu/data')
        self.msg = Imu()
        self.quat = (1.0, 0.0, 0.0, 0.0)
        self.on = True
        self.timer = client.node.create_timer(0.01, self.tick)

    def tick(self) -> None:
        if self.on:
            m = self.msg
            m.header.stamp.sec, m.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
            m.orientation.w, m.orientation.x, m.orientation.y, m.orientation.z = self.quat
            self.pub.publish(m)


def status_after(diags: list, since: int) -> list:
    return [s for _t, a in diags[since:] for s in a.status if s.name.endswith(': policy')]


def test_rate_override_imu_freshness_and_warnings_per_period(start_node, ros_client,
                                                             tmp_path):
    """rate_hz rebuilds the rate limit; a stale or unusable IMU holds; rejections WARN."""
    data = yaml.safe_load(probe_spec(tmp_path).read_text())
    data['observation'].append({'term': 'projected_gravity'})  # the Probe ignores it
    spec_path = tmp_path / 'probe_imu.yaml'
    spec_path.write_text(yaml.safe_dump(data))
    commands = ros_client.collect(JointState, 'joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    FakeBackend(ros_client, ROBOT.home.copy())
    imu = FakeImu(ros_client)
    policy = start_node('policy', policy=str(spec_path), enable_on_start=True, rate_hz=100.0,
                        diagnostics_period_s=0.2)
    # a fresh IMU gives OK; on a loaded machine a report may WARN of an IMU reading that came
    # later than the 30 ms staleness limit, so wait for an OK report (not the first one)
    ros_client.wait_for(lambda: mode(diags) == 'running'
                        and policy_status(diags).level == DiagnosticStatus.OK, 30,
                        'auto-enabled, running and OK')
    v = values(policy_status(diags))
    assert float(v['control_rate_hz']) == 100.0 and float(v['declared_rate_hz']) == 50.0
    assert float(v['rate_limit_rad_per_step']) == pytest.approx(0.25)  # 0.5 rad at 50 Hz
    assert float(v['stale_after_ms']) == pytest.approx(30.0)  # 3 periods of 10 ms

    # a saturating output moves the target at 25 rad/s: 0.25 rad per 10 ms step
    goal = ros_client.publisher(JointState, 'goal')
    g = ROBOT.home.copy()
    g[1] += 1.2
    n = len(commands)
    goal.publish(messages.joint_state(NAMES, 0, g))
    ros_client.wait_for(lambda: abs(positions(commands)[-1][1] - SPEC.upper[1]) < 1e-9, 10,
                        'the command at the upper limit')
    steps = np.abs(np.diff(positions(commands, n)[:, 1]))
    assert 0.24 < steps.max() <= 0.25 + 1e-9, steps

    # an IMU reading that is finite but no rotation: observation faults, held, WARN
    imu.quat = (0.0, 0.0, 0.0, 0.0)
    ros_client.wait_for(lambda: int(values(policy_status(diags))['observation_faults']) > 5,
                        10, 'observation faults counted')
    n = len(commands)
    # waits for the commands (a fixed 0.2 s gave 4, not 5, at a load average of 11)
    ros_client.wait_for(lambda: len(commands) >= n + 5, 5, 'five commands while faulted')
    held = positions(commands, n)
    assert np.all(held == held[0]), 'the last command is held'
    held = held[0]
    k = len(diags)
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.WARN
                                    and 'observation faults' in s.message
                                    for s in status_after(diags, k)), 5, 'WARN for them')
    np.testing.assert_array_equal(positions(commands)[-1], held)
    imu.quat = (1.0, 0.0, 0.0, 0.0)
    k = len(diags)
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.OK
                                    for s in status_after(diags, k)), 5, 'OK again')

    # a rejected goal: WARN in the period it happened, then OK again (not latched)
    k = len(diags)
    goal.publish(messages.joint_state(NAMES, 0, [float('nan')] * len(NAMES)))
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.WARN
                                    and '1 rejected goals' in s.message
                                    for s in status_after(diags, k)), 5, 'WARN for the goal')
    k = len(diags)
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.OK
                                    for s in status_after(diags, k)), 5, 'OK after a period')
    assert values(policy_status(diags))['rejected_goals'] == '1'

    # the IMU stops while joint_states go on: hold, naming the IMU
    imu.on = False
    ros_client.wait_for(lambda: mode(diags) == 'hold', 5, 'hold on a stale IMU')
    st = policy_status(diags)
    assert st.level == DiagnosticStatus.WARN and 'imu/data is' in st.message
    imu.on = True
    ros_client.wait_for(lambda: mode(diags) == 'running', 5, 'running again')
    assert policy.proc.poll() is None, policy.output()
