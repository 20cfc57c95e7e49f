"""The sim bridge node over real DDS: a subprocess bridge and an in-process client.

The contract tests (topics, IMU, diagnostics, tracking; reset/pause/step; lockstep with a scene
and randomization) run on every engine of ``ENGINES``; the rest on the default engine, since
what they test (command validation, parameters, re-sync) is the node's, not the engine's.
"""

import threading
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
import numpy as np
import pytest
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState
from startup import start_up_error
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool, Trigger

from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages
from simreal_ros.sim.engines import ENGINES

pytestmark = pytest.mark.ros
ROBOT = load_robot('simreal_arm')


def latest(samples: list) -> object:
    assert samples, 'no message received'
    return samples[-1][1]


def bridge_status(diags: list) -> DiagnosticStatus:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith('sim bridge'):
                return st
    raise LookupError('no sim bridge diagnostics received')


def values(st: DiagnosticStatus) -> dict:
    return {kv.key: kv.value for kv in st.values}


def command(names: list, positions: list) -> JointState:
    msg = JointState()
    msg.name = names
    msg.position = [float(p) for p in positions]
    return msg


@pytest.mark.timing  # counts the states of 2 s of wall time: a rate
@pytest.mark.parametrize('engine', ENGINES)
def test_realtime_publishes_the_contract_and_tracks_commands(start_node, ros_client, engine):
    states = ros_client.collect(JointState, 'joint_states')
    imu = ros_client.collect(Imu, 'imu/data')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    bridge = start_node('sim_bridge', publish_rate_hz=200.0, diagnostics_period_s=0.5,
                        engine=engine)
    ros_client.wait_for(lambda: len(states) > 20, 20, 'joint_states')
    n0 = len(states)
    time.sleep(2.0)
    n = len(states) - n0
    assert 300 < n < 500, f'{n} joint_states in 2 s at 200 Hz'  # rate, loosely
    msg = latest(states)
    assert list(msg.name) == ROBOT.joint_names
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == ROBOT.n
    stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in states]
    assert np.all(np.diff(stamps) > 0), 'stamps must increase'
    assert abs(stamps[-1] - time.time_ns()) < 1e9  # wall-clock stamps in realtime mode
    assert imu and latest(imu).header.frame_id == 'imu_link'
    acc = latest(imu).linear_acceleration
    assert np.linalg.norm([acc.x, acc.y, acc.z]) == pytest.approx(9.81, abs=0.1)  # at rest

    pub = ros_client.publisher(JointState, 'joint_commands')
    target = ROBOT.home + np.array([0.3, -0.2, 0.25, 0.4, -0.3, 0.5])
    pub.publish(command(ROBOT.joint_names, target))
    ros_client.wait_for(lambda: np.abs(np.array(latest(states).position) - target).max()
                        < 0.05, 10, 'tracking the command')
    ros_client.wait_for(lambda: int(values(bridge_status(diags))['commands_received']) >= 1,
                        5, 'the command counted on /diagnostics')
    v = values(bridge_status(diags))
    assert v['timing_mode'] == 'realtime' and float(v['real_time_factor']) > 0.5
    assert v['engine'] == engine
    if engine == 'pybullet':  # the robot spec's armature is approximated (geared rotors)
        assert v['engine_approximations'].startswith('armature: a rotor link per joint')
        assert 'pybullet approximates armature' in bridge.output()
    else:
        assert v['engine_approximations'] == 'none'
    assert bridge.proc.poll() is None, bridge.output()


def test_nan_and_unknown_joint_commands_are_rejected_and_the_target_held(start_node,
                                                                         ros_client):
    states = ros_client.collect(JointState, 'joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge', diagnostics_period_s=0.3)
    ros_client.wait_for(lambda: len(states) > 5, 20, 'joint_states')
    pub = ros_client.publisher(JointState, 'joint_commands')
    fwd = ros_client.publisher(Float64MultiArray, 'forward_position_controller/commands')
    target = ROBOT.home + 0.2
    fwd.publish(Float64MultiArray(data=[float(x) for x in target]))
    ros_client.wait_for(lambda: np.abs(np.array(latest(states).position) - target).max()
                        < 0.05, 10, 'tracking the ros2_control-style command')
    nan_cmd = [float('nan')] + list(target[1:] + 0.5)
    names = ROBOT.joint_names
    bad = [(pub, command(names, nan_cmd),
            f'position contains NaN or inf: {np.asarray(nan_cmd).tolist()}'),
           (pub, command(['base_yaw', 'not_a_joint'], [1.0, 1.0]),
            f"unknown joint 'not_a_joint'; simreal_arm has {names}"),
           (pub, command(names[:2], [0.1]), '2 names but 1 positions'),
           (fwd, Float64MultiArray(data=[0.0, 0.0]),
            f'command without joint names must carry all 6 positions in robot order {names}; '
            'got 2')]
    # one at a time: the two subscriptions are served in no fixed order, and each rejection
    # must be the one reported
    for k, (publisher, msg, reason) in enumerate(bad, start=1):
        publisher.publish(msg)
        ros_client.wait_for(lambda k=k, reason=reason: (
            int(values(bridge_status(diags)).get('commands_rejected', 0)) == k
            and values(bridge_status(diags))['last_rejection'] == reason), 10,
            f'rejection {k} on /diagnostics: {reason}')
    time.sleep(0.5)
    assert np.abs(np.array(latest(states).position) - target).max() < 0.05  # held
    ros_client.wait_for(lambda: any(s.level == DiagnosticStatus.WARN and 'rejected' in s.message
                                    for _t, a in diags for s in a.status), 5, 'a WARN status')


@pytest.mark.parametrize('engine', ENGINES)
def test_reset_pause_and_single_step(start_node, ros_client, engine):
    states = ros_client.collect(JointState, 'joint_states')
    start_node('sim_bridge', name='bridge', publish_rate_hz=100.0, engine=engine)
    ros_client.wait_for(lambda: len(states) > 5, 20, 'joint_states')
    pub = ros_client.publisher(JointState, 'joint_commands')
    pub.publish(command(['base_yaw'], [1.0]))
    ros_client.wait_for(lambda: latest(states).position[0] > 0.9, 10, 'base_yaw to move')
    res = ros_client.call(Trigger, '/bridge/reset', Trigger.Request())
    assert res.success
    ros_client.wait_for(lambda: abs(latest(states).position[0]) < 1e-3, 5, 'home after reset')
    time.sleep(0.3)
    assert abs(latest(states).position[0]) < 0.02  # the old target was dropped

    res = ros_client.call(SetBool, '/bridge/set_paused', SetBool.Request(data=True))
    assert res.success
    time.sleep(0.2)
    n = len(states)
    time.sleep(0.5)
    assert len(states) == n, 'paused bridge must not publish states'
    t_before = messages.stamp_to_ns(latest(states).header.stamp)
    assert ros_client.call(Trigger, '/bridge/step', Trigger.Request()).success
    ros_client.wait_for(lambda: len(states) == n + 1, 5, 'one state after ~/step')
    assert messages.stamp_to_ns(latest(states).header.stamp) > t_before
    assert ros_client.call(SetBool, '/bridge/set_paused', SetBool.Request(data=False)).success
    ros_client.wait_for(lambda: len(states) > n + 20, 5, 'states after resuming')
    # single-stepping a running realtime bridge is refused with a reason
    res = ros_client.call(Trigger, '/bridge/step', Trigger.Request())
    assert not res.success and 'paused' in res.message


def unpause_once_heard(ros_client, pub, ns: str, ready: threading.Event) -> None:
    """Set ``ready`` and unpause a bridge started paused once its subscription matched
    ``pub``: an answer published before that is lost (seen in CI: a bridge waited 60 s for
    one), so the test answers only once ``ready``; the bridge re-sends its state meanwhile."""
    ros_client.wait_for_subscribers(pub, timeout=30)
    ready.set()
    assert ros_client.call(SetBool, f'{ns}/sim_bridge/set_paused',
                           SetBool.Request(data=False)).success


def lockstep_run(ros_client, start_node, ns: str, ticks: int, clock: bool,
                 engine: str) -> np.ndarray:
    """Drive a lockstep bridge in namespace ``ns`` with one command per state.

    Each command carries the stamp of the state it answers, and a re-sent state is answered
    again with the same command, as the policy node does (but tick 0's: stamp 0 reads as an
    unstamped command, which the bridge cannot tell from a new answer).
    """
    pub = ros_client.publisher(JointState, f'/{ns}/joint_commands')
    rng = np.random.default_rng(5)
    plan = ROBOT.home + rng.uniform(-0.3, 0.3, size=(ticks + 1, ROBOT.n))
    received: list = []
    stamps: list = []
    answered: set = set()
    ready = threading.Event()

    def answer(msg: JointState) -> None:
        stamp = messages.stamp_to_ns(msg.header.stamp)
        if not stamps or stamp != stamps[-1]:
            stamps.append(stamp)
            received.append(list(msg.position))
        k = len(received) - 1
        if ready.is_set() and k < ticks and (stamp or stamp not in answered):
            answered.add(stamp)
            pub.publish(messages.joint_state(ROBOT.joint_names, stamp, plan[k]))

    ros_client.collect(JointState, f'/{ns}/joint_states', callback=answer)
    start_node('sim_bridge', namespace=f'/{ns}', timing_mode='lockstep', publish_rate_hz=50.0,
               publish_clock=clock, scene='tabletop', randomization='default', seed=11,
               engine=engine, start_paused=True)
    unpause_once_heard(ros_client, pub, f'/{ns}', ready)
    ros_client.wait_for(lambda: len(received) > ticks, 60, f'{ticks} lockstep ticks in {ns}')
    time.sleep(0.3)
    assert len(received) == ticks + 1, 'lockstep must not advance without a command'
    return np.array(received)


@pytest.mark.parametrize('engine', ENGINES)
def test_lockstep_is_deterministic_and_waits_for_the_controller(start_node, ros_client,
                                                                engine):
    clock = ros_client.collect(Clock, '/clock')
    a = lockstep_run(ros_client, start_node, 'a', 60, True, engine)
    b = lockstep_run(ros_client, start_node, 'b', 60, False, engine)
    assert np.array_equal(a, b)
    assert np.abs(a[-1] - a[0]).max() > 0.05  # it really moved
    stamps = [messages.stamp_to_ns(m.clock) for _t, m in clock]
    assert stamps[-1] == 60 * 20_000_000  # 60 ticks of 20 ms sim time, then it waits


def test_lockstep_a_repeated_answer_releases_no_second_tick(start_node, ros_client):
    """An answer that arrives twice (late, then re-sent; or duplicated) advances one tick."""
    pub = ros_client.publisher(JointState, '/r/joint_commands')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    stamps: list = []  # one per state received, re-sent ones included
    answered: list = []
    ready = threading.Event()

    def answer(msg: JointState) -> None:
        stamps.append(messages.stamp_to_ns(msg.header.stamp))
        ticks = sorted(set(stamps))
        if not ready.is_set() or ticks[-1] in answered:
            return
        if len(ticks) < 3:  # ticks 0 and 1: answered once each
            pub.publish(messages.joint_state(ROBOT.joint_names, ticks[-1], ROBOT.home))
        else:  # tick 2 is out, so tick 1's answer released it: answer tick 1 once more
            pub.publish(messages.joint_state(ROBOT.joint_names, ticks[1], ROBOT.home))
        answered.append(ticks[-1])

    ros_client.collect(JointState, '/r/joint_states', callback=answer)
    start_node('sim_bridge', namespace='/r', timing_mode='lockstep', publish_rate_hz=50.0,
               diagnostics_period_s=0.2, start_paused=True)
    unpause_once_heard(ros_client, pub, '/r', ready)
    ros_client.wait_for(lambda: values(bridge_status(diags))['lockstep_repeated_answers']
                        == '1', 30, 'the repeated answer counted')
    ros_client.wait_for(lambda: stamps.count(40_000_000) > 1, 5, 'tick 2 re-sent: no answer yet')
    assert sorted(set(stamps)) == [0, 20_000_000, 40_000_000]


def test_bad_parameters_exit_with_a_one_line_reason(start_node):
    err = start_up_error(start_node('sim_bridge', timing_mode='bogus'))
    assert 'timing_mode' in err and "'bogus'" in err
    err = start_up_error(start_node('sim_bridge', name='b2', robot='/nonexistent/robot.yaml'))
    assert '/nonexistent/robot.yaml' in err
    err = start_up_error(start_node('sim_bridge', name='b3', overlay='no_such_overlay'))
    assert 'no_such_overlay' in err and 'worn_arm' in err


def test_twin_resync_snaps_to_the_real_state_and_marks_it(start_node, ros_client):
    # a stand-in "real robot" holds elbow_pitch 0.5 rad away from the twin's home target
    real = np.array(ROBOT.home, float)
    real[2] += 0.5
    marks = ros_client.collect(JointState, '/twin/sim_bridge/resync')
    states = ros_client.collect(JointState, '/twin/joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge', namespace='/twin', resync_topic='/real/joint_states',
               resync_period_s=0.5, diagnostics_period_s=0.3)
    pub = ros_client.publisher(JointState, '/real/joint_states')
    ros_client.wait_for(lambda: len(states) > 10, 20, 'twin joint_states')
    for _ in range(150):  # 1.5 s at 100 Hz, names in another order than the spec's
        pub.publish(messages.joint_state(ROBOT.joint_names[::-1], time.time_ns(), real[::-1]))
        time.sleep(0.01)
    ros_client.wait_for(lambda: len(marks) >= 2, 10, 'two re-sync marks')
    mark = marks[-1][1]
    assert list(mark.name) == ROBOT.joint_names
    np.testing.assert_allclose(mark.position, real, atol=1e-12)
    t_mark = messages.stamp_to_ns(mark.header.stamp)
    ros_client.wait_for(lambda: any(messages.stamp_to_ns(m.header.stamp) > t_mark
                                    for _t, m in states), 5, 'a state after the mark')
    after = [m for _t, m in states if messages.stamp_to_ns(m.header.stamp) > t_mark]
    # right after the snap the twin is at the real pose; its servo then pulls it home
    assert abs(after[0].position[2] - real[2]) < 0.05
    before = [m for _t, m in states if messages.stamp_to_ns(m.header.stamp) < t_mark]
    assert abs(before[-1].position[2] - real[2]) > 0.2
    # /diagnostics lags the marks by up to a period (it read 1 re-sync under load)
    ros_client.wait_for(lambda: int(values(bridge_status(diags))['resyncs']) >= 2, 5,
                        'two re-syncs on /diagnostics')
    v = values(bridge_status(diags))
    assert float(v['resync_error_before_max_rad']) > 0.2
    # the real robot goes silent: no snap to a stale state
    skipped = int(v['resyncs_skipped_stale_source'])
    ros_client.wait_for(lambda: int(values(bridge_status(diags))['resyncs_skipped_stale_source'])
                        >= skipped + 2, 10, 'stale source skipped')
    n_marks = len(marks)
    time.sleep(0.6)
    assert len(marks) == n_marks


def test_resync_needs_a_source_topic(start_node):
    assert 'resync_topic' in start_up_error(start_node('sim_bridge', resync_period_s=1.0))


def test_objects_position_places_the_ball_where_the_camera_sees_it(start_node, ros_client):
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image

    from simreal_ros.policy.images import frame_from_buffer
    from simreal_ros.policy.visual_task import camera_pixel
    frames = ros_client.collect(Image, 'camera/image_raw')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    start_node('sim_bridge', scene='reach_target', cameras=True, diagnostics_period_s=0.3)
    ros_client.wait_for(lambda: frames, 30, 'a camera frame')
    cam = ROBOT.cameras[0]

    def set_position(value: list) -> object:
        req = SetParameters.Request()
        req.parameters = [Parameter('objects.target.position', Parameter.Type.DOUBLE_ARRAY,
                                    value).to_parameter_msg()]
        return ros_client.call(SetParameters, '/sim_bridge/set_parameters', req).results[0]

    def red_at(point: np.ndarray, after_ns: int) -> bool:
        u, v, _z = camera_pixel(cam, point)
        news = [m for _t, m in list(frames) if messages.stamp_to_ns(m.header.stamp) > after_ns]
        if not news:
            return False
        m = news[-1]
        img = frame_from_buffer(m.data, m.height, m.width, m.step, m.encoding)
        r, g, b = (int(c) for c in img[int(round(v)), int(round(u))])
        return r > 150 and g < 90 and b < 90

    for point in (np.array([0.22, -0.12, 0.02]), np.array([0.2, 0.18, 0.02])):
        t0 = time.time_ns()
        res = set_position(list(point))
        assert res.successful, res.reason
        ros_client.wait_for(lambda p=point, t=t0: red_at(p, t), 10, f'the ball at {point}')
    assert not red_at(np.array([0.22, -0.12, 0.02]), t0)  # it left the first place
    bad = set_position([0.2, 0.1])
    assert (bad.successful, bad.reason) == (False, 'target: expected [x, y, z] in m (3 numbers), '
                                                   'got 2: [0.2, 0.1]')
    ros_client.wait_for(lambda: values(bridge_status(diags)).get('object_placements') == '2',
                        5, 'two placements counted')
