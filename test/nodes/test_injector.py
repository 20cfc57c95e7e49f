"""The latency injector over real DDS: distributions, loss, order, types, schedules, sim time."""

from __future__ import annotations

from pathlib import Path
import signal
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from plans import plan_without_tf as plan
import pytest
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock
from scipy import stats
from sensor_msgs.msg import Image, Imu, JointState
from startup import start_up_error
from std_msgs.msg import Int64MultiArray, String
import yaml

from simreal_ros.latency.injection import (
    DELIVERED,
    DUPLICATE,
    LOST,
    REPEATED,
    Loss,
    decode_events,
    parse_profile,
)
from simreal_ros.ros import messages, qos

pytestmark = pytest.mark.ros
DEEP = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)  # no loss in the test

# executor lateness a delayed message may have on a loaded 2-core machine (see the tests)
LATENESS_ALLOWANCE_S = 0.004
# median delay of a zero-delay route through the injector (see the heavy-tailed test)
FLOOR_MEDIAN_BUDGET_S = 0.005


def profile(tmp_path: Path, routes: dict[str, Any]) -> str:
    path = tmp_path / 'profile.yaml'
    path.write_text(yaml.safe_dump({'description': 'test', 'routes': routes}))
    return str(path)


class Receiver:
    """Everything that arrives on an output topic, with the system-clock receive time.

    The receive time is the middleware's reception stamp (not the later callback of the test
    process's executor), so receiver-side delays are what the transport delivered.
    """

    def __init__(self, client, msg_type: type, topic: str, raw: bool = False) -> None:
        self.items: list[tuple[int, Any]] = []
        self.client = client
        client.node.create_subscription(msg_type, topic, self._on, DEEP, raw=raw)

    def _on(self, msg: Any, info: Any) -> None:
        t = int(info['received_timestamp']) or time.time_ns()
        with self.client.lock:
            self.items.append((t, msg))

    def __len__(self) -> int:
        return len(self.items)


def deep_publisher(client, msg_type: type, topic: str) -> Any:
    return client.node.create_publisher(msg_type, topic, DEEP)


def events(collected: list) -> np.ndarray:
    rows = [decode_events(m.layout.dim[0].label, m.data)[1] for _t, m in collected]
    return np.concatenate(rows) if rows else np.zeros((0, 6), dtype=np.int64)


def connect(client, pub, out_topic: str, timeout: float = 20.0) -> None:
    client.wait_for(lambda: pub.get_subscription_count() > 0
                    and client.node.count_publishers(out_topic) > 0, timeout, 'the injector')
    time.sleep(0.3)  # let the output's publisher match our subscription too


def send_states(pub, n: int, rate_hz: float, stamp: bool = True) -> None:
    period = 1.0 / rate_hz
    t0 = time.monotonic()
    for i in range(n):
        msg = messages.joint_state(['j'], time.time_ns() if stamp else 0, [float(i)])
        pub.publish(msg)
        delay = t0 + (i + 1) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def wait_events(client, collected: list, n: int, rx: Receiver | None = None,
                diags: list | None = None) -> np.ndarray:
    """Wait until the fate of ``n`` messages is known and every delivery was logged (and, with
    ``rx``, received): lost messages are logged at once, deliveries when they are sent.

    With ``diags`` (the injector's /diagnostics), a message that never reached the injector
    (its ``missed`` count) fails the wait at once, naming it: such a message has no fate.
    """
    def settled() -> bool:
        missed = route_values(diags, 'r').get('missed', '0') if diags else '0'
        assert missed == '0', f'{missed} of {n} messages never reached the injector'
        rows = events(collected)
        if len(set(rows[:, 1].tolist())) < n:
            return False
        sent = int(np.isin(rows[:, 5], (DELIVERED, DUPLICATE, REPEATED)).sum())
        time.sleep(0.3)                  # nothing new for a while: the queue is drained
        again = events(collected)
        return len(again) == len(rows) and (rx is None or len(rx) >= sent)
    # polled, so a generous deadline costs nothing: 30 s ran out once on a host loaded by a
    # demo run beside the suite
    try:
        client.wait_for(settled, 120, f'the outcome of {n} messages')
    except TimeoutError as exc:
        known = len(set(events(collected)[:, 1].tolist()))
        raise TimeoutError(f'{exc}: {known} known, {len(rx) if rx else 0} received') from None
    return events(collected)


def route_values(diags: list, route: str) -> dict[str, str]:
    """The latest /diagnostics values of the injector's route ``route`` ({} before any)."""
    with_route = [st for _t, arr in diags for st in arr.status if st.name == f'/injector: {route}']
    return {kv.key: kv.value for kv in with_route[-1].values} if with_route else {}


def relay_states(start_node, client, path: str, n: int, rate_hz: float, seed: int
                 ) -> tuple[np.ndarray, Receiver, Any]:
    """Start the injector on ``path``, send ``n`` JointStates (position = index) into route
    ``in`` at ``rate_hz`` and wait for every outcome: (event rows, receiver of ``out``, node)."""
    rx = Receiver(client, JointState, 'out')
    ev = client.collect(Int64MultiArray, '/injector/events', DEEP)
    diags = client.collect(DiagnosticArray, '/diagnostics')
    pub = deep_publisher(client, JointState, 'in')
    node = start_node('injector', profile=path, seed=seed, diagnostics_period_s=0.25)
    connect(client, pub, 'out')
    send_states(pub, n, rate_hz)
    rows = wait_events(client, ev, n, rx, diags)
    client.wait_for(lambda: int(route_values(diags, 'r')['received']) == n, 10,
                    'diagnostics counting every message')
    assert route_values(diags, 'r')['missed'] == '0'
    return rows, rx, node


# timing: the lateness of every delivery, message by message, held to a median allowance
@pytest.mark.timing
def test_delivered_delays_follow_the_distribution(start_node, ros_client, tmp_path):
    # wide against the scheduling noise of a loaded 2-core CI machine (a few ms at p99)
    spec = {'distribution': 'uniform', 'low': 0.005, 'high': 0.055}
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'delay': spec,
                                    'order': 'free', 'type': 'sensor_msgs/msg/JointState'}})
    target = parse_profile(yaml.safe_load(Path(path).read_text()), path).routes[0].delay
    n = 2000
    rows, rx, node = relay_states(start_node, ros_client, path, n, 1000.0, seed=3)
    assert node.proc.poll() is None
    # ground truth: every message delivered once, and the receiver saw exactly those
    assert rows.shape[0] == n and set(rows[:, 5]) == {DELIVERED}
    received = [int(m.position[0]) for _t, m in rx.items]
    assert sorted(received) == list(range(n))
    # the sampled targets follow the configured distribution
    assert stats.kstest(rows[:, 3] / 1e9, target.cdf).pvalue > 0.01
    # the delays the injector applied (its publish time - the message's reception, both ROS
    # clock): never early, message by message, and late by less than the 4 ms allowance at the
    # median, where a systematic extra delay shows (5 ms more on every message puts the median
    # above 5 ms). Not the tail: a host that starves the injector for a while makes a minority
    # of messages late by tens of ms, which says nothing of the injector (a CI run with the
    # other core busy: lateness p50 1.1 ms, p99 77 ms). The tail is a performance figure,
    # measured by `simreal bench injector` (own_lateness).
    late_s = (rows[:, 4] - rows[:, 2] - rows[:, 3]) / 1e9
    assert np.all(late_s >= 0)                                  # never early
    assert np.median(late_s) < LATENESS_ALLOWANCE_S, np.percentile(late_s, [50, 99])
    # free order: jitter of 50 ms at 1 kHz reorders
    assert sum(b < a for a, b in zip(received, received[1:], strict=False)) > 100


def test_loss_duplicates_and_fifo_order(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {'r': {
        'input': 'in', 'output': 'out', 'order': 'fifo',
        'delay': {'distribution': 'normal', 'mean': 0.004, 'std': 0.002},
        'loss': {'model': 'bernoulli', 'p': 0.2}, 'duplicate_p': 0.1}})
    n = 1500   # no type in the route: learnt from the graph
    rows, rx, _node = relay_states(start_node, ros_client, path, n, 1000.0, seed=11)
    fates = {f: set(rows[rows[:, 5] == f][:, 1].tolist()) for f in (DELIVERED, LOST, DUPLICATE)}
    expected = len(fates[DELIVERED]) + len(fates[DUPLICATE])
    received = [int(m.position[0]) for _t, m in rx.items]
    assert len(received) == expected
    assert all(b >= a for a, b in zip(received, received[1:], strict=False))   # FIFO
    assert not fates[LOST] & set(received)
    counts = np.bincount(received, minlength=n)
    assert {i for i in range(n) if counts[i] == 2} == fates[DUPLICATE]
    lost = len(fates[LOST])
    assert abs(lost - 0.2 * n) < 4 * np.sqrt(n * 0.2 * 0.8)


def test_arbitrary_types_pass_byte_identical(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {
        's': {'input': 'str_in', 'output': 'str_out', 'delay': 0.001},
        'i': {'input': 'img_in', 'output': 'img_out', 'type': 'sensor_msgs/msg/Image'},
        'j': {'input': 'js_in', 'output': 'js_out', 'delay': 0.002}})
    types = (('str', String), ('img', Image), ('js', JointState))
    outs = {k: Receiver(ros_client, t, f'{k}_out', raw=True) for k, t in types}
    # DDS pads payloads to 4 bytes on the wire: compare with what a direct subscriber gets
    ins = {k: Receiver(ros_client, t, f'{k}_in', raw=True) for k, t in types}
    pubs = {'str': deep_publisher(ros_client, String, 'str_in'),
            'img': deep_publisher(ros_client, Image, 'img_in'),
            'js': deep_publisher(ros_client, JointState, 'js_in')}
    start_node('injector', profile=path)
    for k, pub in pubs.items():
        connect(ros_client, pub, f'{k}_out')
    rng = np.random.default_rng(0)
    for i in range(20):
        img = Image(height=48, width=64, encoding='rgb8', step=192,
                    data=rng.integers(0, 256, 48 * 192, dtype=np.uint8).tobytes())
        msgs = {'str': String(data=f'message {i} ünïcode'), 'img': img,
                'js': messages.joint_state(['a', 'b'], time.time_ns(), [i, -i], [0.5], [])}
        for k, m in msgs.items():
            pubs[k].publish(m)
        time.sleep(0.01)
    for k, rx in outs.items():
        ros_client.wait_for(lambda rx=rx, k=k: len(rx) >= 20 and len(ins[k]) >= 20, 10,
                            f'{k} messages')
        for (_t, out), (_t2, sent) in zip(rx.items, ins[k].items, strict=True):
            out, sent = bytes(out), bytes(sent)   # equal up to the transport's 4-byte padding
            assert out[:len(sent)] == sent and not out[len(sent):].strip(b'\0')
            assert len(out) - len(sent) < 4
        decoded = deserialize_message(bytes(rx.items[-1][1]), dict(types)[k])
        assert decoded == msgs[k]


def test_outage_and_freeze_schedules(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'delay': 0.001,
                                    'schedule': [
                                        {'fault': 'outage', 'start_s': 0.5, 'end_s': 1.0},
                                        {'fault': 'freeze', 'start_s': 1.3, 'duration_s': 0.2}]}})
    n = 400
    rows, rx, _node = relay_states(start_node, ros_client, path, n, 200.0, seed=1)
    t_rel = (rows[:, 2] - rows[0, 2]) / 1e9
    lost = rows[rows[:, 5] == LOST]
    assert len(lost) and set(rows[(t_rel >= 0.5) & (t_rel < 1.0), 5]) == {LOST}
    assert np.all((t_rel[rows[:, 5] == LOST] >= 0.5) & (t_rel[rows[:, 5] == LOST] < 1.0))
    repeated = rows[rows[:, 5] == REPEATED]
    assert set(rows[(t_rel >= 1.3) & (t_rel < 1.5), 5]) == {REPEATED} and len(repeated)
    received = [int(m.position[0]) for _t, m in rx.items]
    frozen_at = int(repeated[0, 1]) - 1            # the last message before the freeze
    assert received.count(frozen_at) == 1 + len(repeated)
    assert not set(lost[:, 1].tolist()) & set(received)
    assert received[-1] == n - 1


def test_sim_time_is_honoured(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'delay': 0.5,
                                    'type': 'sensor_msgs/msg/JointState'}})
    clock = ros_client.node.create_publisher(Clock, '/clock', qos.CLOCK)
    rx = Receiver(ros_client, JointState, 'out')
    ev = ros_client.collect(Int64MultiArray, '/injector/events', DEEP)
    pub = deep_publisher(ros_client, JointState, 'in')

    def tick(ns: int) -> None:
        clock.publish(Clock(clock=messages.stamp_from_ns(ns)))

    start_node('injector', profile=path, use_sim_time=True)
    connect(ros_client, pub, 'out')
    ros_client.wait_for(lambda: clock.get_subscription_count() > 0, 10, 'clock subscriber')
    for _ in range(5):
        tick(100_000_000_000)
        time.sleep(0.05)
    pub.publish(messages.joint_state(['j'], 100_000_000_000, [1.0]))
    time.sleep(1.0)                     # a wall-clock second: sim time has not moved
    assert len(rx) == 0
    tick(100_400_000_000)
    time.sleep(0.3)
    assert len(rx) == 0
    tick(100_600_000_000)
    ros_client.wait_for(lambda: len(rx) == 1, 5, 'the delayed message')
    rows = wait_events(ros_client, ev, 1)
    assert rows[0, 2] == 100_000_000_000 and rows[0, 3] == 500_000_000
    assert rows[0, 4] >= 100_500_000_000


def test_value_perturbation_of_joint_states_and_images(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {
        'j': {'input': 'js_in', 'output': 'js_out', 'perturb': {
            'position': {'bias': 0.5, 'quantization': 0.25}}},
        'i': {'input': 'img_in', 'output': 'img_out', 'perturb': {
            'image': {'gain': 2.0, 'jpeg_quality': 40}}}})
    js = Receiver(ros_client, JointState, 'js_out')
    img = Receiver(ros_client, Image, 'img_out')
    pj = deep_publisher(ros_client, JointState, 'js_in')
    pi = deep_publisher(ros_client, Image, 'img_in')
    start_node('injector', profile=path)
    connect(ros_client, pj, 'js_out')
    connect(ros_client, pi, 'img_out')
    pj.publish(messages.joint_state(['a', 'b'], 1, [0.1, 1.0], [2.0]))
    ramp = np.tile(np.arange(64, dtype=np.uint8), (32, 1))
    pi.publish(Image(height=32, width=64, encoding='mono8', step=64, data=ramp.tobytes()))
    ros_client.wait_for(lambda: len(js) and len(img), 10, 'perturbed messages')
    m = js.items[0][1]
    np.testing.assert_allclose(m.position, [0.5, 1.5])      # bias then 0.25 steps
    assert list(m.velocity) == [2.0]
    out = np.frombuffer(bytes(img.items[0][1].data), np.uint8).reshape(32, 64)
    assert img.items[0][1].step == 64
    assert abs(out.astype(int) - 2 * ramp.astype(int)).mean() < 3      # gain 2, JPEG-lossy
    assert not np.array_equal(out, 2 * ramp)


@pytest.mark.parametrize('routes,expected', [
    ({'r': {'input': 'a', 'output': 'b', 'delay': {'distribution': 'weibull'}}},
     'routes.r.delay.distribution'),
    ({'r': {'input': 'a', 'output': 'b', 'delay': -0.01}}, 'routes.r.delay'),
    ({'r': {'input': 'a', 'output': 'b', 'loss': {'model': 'bernoulli', 'p': 3}}},
     'routes.r.loss.p'),
    ({'r': {'input': 'a', 'output': 'b', 'type': 'foo_msgs/msg/Bar'}}, 'pip install ros-foo-msgs'),
    ({'r': {'input': 'a', 'delay': 0.01}}, 'bindings parameter'),
    ({'r': {'input': 'a', 'output': 'a'}}, 'loops forever'),
    ({'r': {'input': 'a', 'output': 'b', 'type': 'sensor_msgs/msg/JointState',
            'perturb': {'image': {'gain': 2}}}}, 'routes.r.perturb.image'),
])
def test_bad_profile_fails_start_up_naming_route_and_key(start_node, tmp_path, routes, expected):
    assert expected in start_up_error(start_node('injector', profile=profile(tmp_path, routes)))


def test_planned_graph_relays_the_sim_through_the_injector(start_node, ros_client):
    nodes = plan({'latency': 'usb_serial', 'seed': '2'})
    assert [n.kind for n in nodes] == ['sim_bridge', 'injector']
    states = ros_client.collect(JointState, 'joint_states')
    raw = ros_client.collect(JointState, 'backend/joint_states')
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    for n in nodes:
        start_node(n.kind, n.name, n.namespace, n.remappings, **n.parameters)
    pub = deep_publisher(ros_client, JointState, 'joint_commands')
    ros_client.wait_for(lambda: len(states) > 100 and len(raw) > 100, 30, 'relayed states')
    # the backend receives the commands through the injector
    target = [0.3, 0.4, 1.2, 0.0, 0.3, 0.0]
    names = nodes[0].parameters and ['base_yaw', 'shoulder_pitch', 'elbow_pitch',
                                     'forearm_roll', 'wrist_pitch', 'wrist_roll']
    for _ in range(100):
        pub.publish(messages.joint_state(names, time.time_ns(), target))
        time.sleep(0.01)
    ros_client.wait_for(lambda: abs(states[-1][1].position[0] - 0.3) < 0.05, 10, 'tracking')
    ros_client.wait_for(lambda: int(route_values(diags, 'command')['received']) > 50, 5, 'diags')
    assert route_values(diags, 'observation')['input'] == '/backend/joint_states'
    assert int(route_values(diags, 'imu')['received']) > 0


def test_a_type_from_the_graph_that_does_not_fit_the_route_fails_like_start_up(
        start_node, ros_client, tmp_path):
    # the route learns its type from the graph; JointState perturbation on an Imu topic
    path = profile(tmp_path, {'obs': {'input': 'in', 'output': 'out',
                                      'perturb': {'position': {'noise_std': 0.01}}}})
    pub = deep_publisher(ros_client, Imu, 'in')
    p = start_node('injector', profile=path)
    for _ in range(300):                 # keep the publisher there until the node decided
        pub.publish(Imu())
        if p.proc.poll() is not None:
            break
        time.sleep(0.05)
    err = start_up_error(p, timeout=20)
    assert 'routes.obs.perturb.position' in err and 'sensor_msgs/msg/Imu' in err
    assert 'angular_velocity' in err                       # what the type does have: the fix


def test_sim_time_holds_messages_until_the_clock_starts(start_node, ros_client, tmp_path):
    # zero delay, but not a pass-through (the loss model sends it through the scheduler); the
    # outage is at route time [2 s, 3 s), measured from the first message, not from sim time 0
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out',
                                    'type': 'sensor_msgs/msg/JointState',
                                    'loss': {'model': 'bernoulli', 'p': 0.0},
                                    'schedule': [{'fault': 'outage', 'start_s': 2.0,
                                                  'end_s': 3.0}]}})
    clock = ros_client.node.create_publisher(Clock, '/clock', qos.CLOCK)
    rx = Receiver(ros_client, JointState, 'out')
    ev = ros_client.collect(Int64MultiArray, '/injector/events', DEEP)
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    pub = deep_publisher(ros_client, JointState, 'in')
    start_node('injector', profile=path, use_sim_time=True, diagnostics_period_s=0.1)
    connect(ros_client, pub, 'out')
    ros_client.wait_for(lambda: clock.get_subscription_count() > 0, 10, 'clock subscriber')

    def held() -> int:
        for _t, arr in reversed(diags):
            for st in arr.status:
                if st.name == '/injector: r':
                    return int({kv.key: kv.value for kv in st.values}['held_for_clock'])
        raise LookupError('r')

    pub.publish(messages.joint_state(['j'], 0, [0.0]))      # before any /clock: time is 0
    ros_client.wait_for(lambda: held() == 1, 10, 'the message held for the clock')
    assert len(rx) == 0 and len(events(ev)) == 0
    clock.publish(Clock(clock=messages.stamp_from_ns(5_000_000_000)))
    ros_client.wait_for(lambda: len(rx) == 1, 10, 'the held message')
    def injector_clock_ns() -> int:                         # diagnostics are stamped by it
        stamp = diags[-1][1].header.stamp
        return stamp.sec * 1_000_000_000 + stamp.nanosec

    for i, t_ns in ((1, 7_500_000_000), (2, 8_500_000_000)):  # route time 2.5 s and 3.5 s
        clock.publish(Clock(clock=messages.stamp_from_ns(t_ns)))
        ros_client.wait_for(lambda t_ns=t_ns: injector_clock_ns() >= t_ns, 10, 'the clock')
        pub.publish(messages.joint_state(['j'], t_ns, [float(i)]))
        # the fate is decided on the clock of the callback: let it run before the next tick
        ros_client.wait_for(lambda i=i: i in events(ev)[:, 1], 10, f'the fate of message {i}')
    rows = wait_events(ros_client, ev, 3, rx)
    rows = rows[np.argsort(rows[:, 1])]
    assert rows[:, 2].tolist() == [5_000_000_000, 7_500_000_000, 8_500_000_000], rows
    assert rows[:, 5].tolist() == [DELIVERED, LOST, DELIVERED]
    assert rows[0, 4] >= 5_000_000_000
    assert [int(m.position[0]) for _t, m in rx.items] == [0, 2]


def send_alternating(pubs: list, n: int, rate_hz: float) -> None:
    """Publish message ``i`` (stamped at send) on ``pubs[i % len(pubs)]`` at ``rate_hz``."""
    period = 1.0 / rate_hz
    t0 = time.monotonic()
    for i in range(n):
        pubs[i % len(pubs)].publish(messages.joint_state(['j'], time.time_ns(), [float(i)]))
        delay = t0 + (i + 1) * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def test_gilbert_elliott_bursts_seen_at_the_receiver(start_node, ros_client, tmp_path):
    loss = {'model': 'gilbert_elliott', 'p_good_to_bad': 0.02, 'p_bad_to_good': 0.25,
            'loss_good': 0.0, 'loss_bad': 1.0}
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'loss': loss,
                                    'type': 'sensor_msgs/msg/JointState'}})
    n = 5000
    rows, rx, _node = relay_states(start_node, ros_client, path, n, 1000.0, seed=21)
    received = [int(m.position[0]) for _t, m in rx.items]
    assert len(received) == len(set(received))
    lost = np.ones(n, dtype=bool)
    lost[received] = False
    # the receiver misses exactly what the ground truth says was lost
    assert set(np.flatnonzero(lost).tolist()) == set(rows[rows[:, 5] == LOST][:, 1].tolist())
    edges = np.diff(np.concatenate([[0], lost.astype(int), [0]]))
    bursts = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    # loss rate: the standard error of a two-state Markov chain's mean is inflated by
    # (1 + lambda) / (1 - lambda), lambda = 1 - p_gb - p_bg (positively correlated losses)
    expected = Loss('gilbert_elliott', p_good_to_bad=0.02, p_bad_to_good=0.25).expected_rate
    lam = 1.0 - 0.02 - 0.25
    se_rate = np.sqrt(expected * (1 - expected) / n * (1 + lam) / (1 - lam))
    assert abs(lost.mean() - expected) < 4 * se_rate, (lost.mean(), expected)
    # with loss_bad = 1, loss_good = 0 a burst is a stay in the bad state: geometric, mean 4
    mean_burst, sd_burst = 1 / 0.25, np.sqrt(1 - 0.25) / 0.25
    assert len(bursts) > 30
    assert abs(bursts.mean() - mean_burst) < 4 * sd_burst / np.sqrt(len(bursts)), bursts.mean()


# timing: receiver-side delays; the zero-delay route's median is held to a 5 ms budget (17.6 ms
# measured beside another test worker, 0.9-1.4 ms alone with both cores busy)
@pytest.mark.timing
def test_heavy_tailed_delays_seen_at_the_receiver_pass_ks(start_node, ros_client, tmp_path):
    """Receiver-side delays (reception minus the send stamp) of a lognormal route, KS-tested
    against the target up to an additive latency floor measured in the same run.

    A receiver sees ``target + extra`` with ``0 <= extra``; a zero-delay route on every other
    message of the same stream measures the floor ``E`` (transport both ways, the injector's
    executor backlog, delivery lateness), which is at least the delayed route's ``extra``
    (a backlog shorter than the target delay does not delay that route). So the receiver's
    distribution lies between the target and the target convolved with ``E``: two one-sided
    Kolmogorov-Smirnov tests, each at alpha = 0.001.
    """
    spec = {'distribution': 'lognormal', 'median': 0.02, 'sigma': 0.8, 'max_s': 0.3}
    path = profile(tmp_path, {
        'heavy': {'input': 'in_heavy', 'output': 'out_heavy', 'order': 'free', 'delay': spec,
                  'type': 'sensor_msgs/msg/JointState'},
        'floor': {'input': 'in_floor', 'output': 'out_floor', 'order': 'free',
                  'loss': {'model': 'bernoulli', 'p': 0.0},     # scheduled like 'heavy'
                  'type': 'sensor_msgs/msg/JointState'}})
    heavy = Receiver(ros_client, JointState, 'out_heavy')
    floor = Receiver(ros_client, JointState, 'out_floor')
    pubs = [deep_publisher(ros_client, JointState, 'in_heavy'),
            deep_publisher(ros_client, JointState, 'in_floor')]
    start_node('injector', profile=path, seed=5)
    connect(ros_client, pubs[0], 'out_heavy')
    connect(ros_client, pubs[1], 'out_floor')
    n = 2000                                          # per route: 4 s at 1 kHz in all
    send_alternating(pubs, 2 * n, 1000.0)
    ros_client.wait_for(lambda: len(heavy) >= n and len(floor) >= n, 30, 'every message')

    def delays_s(rx: Receiver) -> np.ndarray:
        return np.sort([t - (m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec)
                        for t, m in rx.items]) / 1e9

    d_rx, d_floor = delays_s(heavy), delays_s(floor)
    assert d_rx.size == n and d_floor.size == n
    # the floor goes through the injector's scheduler too, so it is held to a fixed budget: a
    # constant extra delay on every route shows here (measured median 0.9-1.4 ms with both
    # cores busy: transport both ways plus the executor)
    assert np.median(d_floor) < FLOOR_MEDIAN_BUDGET_S, np.percentile(d_floor, [50, 99])
    rng = np.random.default_rng(0)
    m = 40_000
    ecdf = np.arange(1, n + 1) / n

    def never_early(spec: dict) -> float:
        """sup (F_rx - F_target): the receiver's delays are not shorter than the target's."""
        target = parse_profile({'routes': {'r': {'delay': spec}}}, 'p').routes[0].delay
        return float(np.max(ecdf - target.cdf(d_rx)))

    def not_later_than_floor(spec: dict) -> float:
        """sup (F_{target + E} - F_rx): not later than the target plus the measured floor."""
        target = parse_profile({'routes': {'r': {'delay': spec}}}, 'p').routes[0].delay
        model = np.sort(target.sample(rng, m) + rng.choice(d_floor, m))
        grid = np.concatenate([d_rx, model])
        f_rx = np.searchsorted(d_rx, grid, side='right') / n
        return float(np.max(np.searchsorted(model, grid, side='right') / m - f_rx))

    alpha = 0.001
    crit_1 = np.sqrt(-np.log(alpha) / (2 * n))
    crit_2 = np.sqrt(-np.log(alpha) / 2 * (n + m) / (n * m))
    detail = (np.percentile(d_floor, [50, 99]), never_early(spec), not_later_than_floor(spec))
    assert never_early(spec) < crit_1, detail
    assert not_later_than_floor(spec) < crit_2, detail


def test_scheduled_loss_starts_and_stops_on_time(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'delay': 0.001,
                                    'type': 'sensor_msgs/msg/JointState',
                                    'schedule': [{'fault': 'loss', 'start_s': 0.5,
                                                  'end_s': 1.5, 'loss': {'model': 'bernoulli',
                                                                         'p': 0.5}}]}})
    n = 2000
    rows, rx, _node = relay_states(start_node, ros_client, path, n, 1000.0, seed=8)
    rows = rows[np.argsort(rows[:, 1], kind='stable')]
    t_route = (rows[:, 2] - rows[0, 2]) / 1e9               # route time of each message
    received = {int(m.position[0]) for _t, m in rx.items}
    missing = np.array(sorted(set(range(n)) - received))
    inside = (t_route >= 0.5) & (t_route < 1.5)
    # nothing is lost outside the window, at the receiver
    assert set(missing.tolist()) <= set(rows[inside, 1].tolist())
    # inside, about half; and losses among the first and the last 30 messages of the window
    # (a p = 0.5 fault that started late or ended early would miss them: P = 2^-30)
    k = int(inside.sum())
    assert abs(len(missing) - 0.5 * k) < 4 * np.sqrt(k * 0.25), (len(missing), k)
    window = rows[inside, 1]
    assert set(window[:30].tolist()) & set(missing.tolist())
    assert set(window[-30:].tolist()) & set(missing.tolist())
    assert set(missing.tolist()) == set(rows[rows[:, 5] == LOST][:, 1].tolist())


def test_imu_noise_and_bias_through_the_node(start_node, ros_client, tmp_path):
    path = profile(tmp_path, {'imu': {'input': 'imu_in', 'output': 'imu_out', 'perturb': {
        'angular_velocity': {'noise_std': 0.01, 'bias': 0.002},
        'linear_acceleration': {'bias': -0.5, 'quantization': 0.01}}}})
    rx = Receiver(ros_client, Imu, 'imu_out')
    pub = deep_publisher(ros_client, Imu, 'imu_in')
    start_node('injector', profile=path, seed=4)         # type learnt from the graph
    connect(ros_client, pub, 'imu_out')
    n = 800
    gyro = np.random.default_rng(1).normal(0.0, 0.5, (n, 3))
    for i in range(n):
        msg = Imu()
        msg.orientation.x = float(i)                       # index (not perturbed)
        msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z = gyro[i]
        msg.linear_acceleration.z = 9.81 + i * 1e-3
        pub.publish(msg)
        time.sleep(0.002)
    ros_client.wait_for(lambda: len(rx) >= n, 20, 'perturbed Imu messages')
    idx = np.array([int(m.orientation.x) for _t, m in rx.items])
    assert sorted(idx.tolist()) == list(range(n))
    out = np.array([[m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]
                    for _t, m in rx.items])
    err = out - gyro[idx]
    assert abs(err.mean() - 0.002) < 4 * 0.01 / np.sqrt(err.size)
    assert abs(err.std() - 0.01) < 4 * 0.01 / np.sqrt(2 * err.size)
    acc = np.array([m.linear_acceleration.z for _t, m in rx.items])
    np.testing.assert_allclose(acc, np.round((9.81 + idx * 1e-3 - 0.5) / 0.01) * 0.01,
                               atol=1e-9)
    assert all(m.orientation.w == 1.0 for _t, m in rx.items)          # untouched field


def test_messages_that_never_reach_the_injector_are_counted(start_node, ros_client, tmp_path):
    """A stopped injector (SIGSTOP: its middleware threads too) cannot take what a publisher
    with a 10-deep keep-last history sends meanwhile: the writer drops those unacknowledged
    samples. They have no fate in the events; the publisher's sequence gap counts them."""
    path = profile(tmp_path, {'r': {'input': 'in', 'output': 'out', 'delay': 0.001,
                                    'type': 'sensor_msgs/msg/JointState'}})
    diags = ros_client.collect(DiagnosticArray, '/diagnostics')
    rx = Receiver(ros_client, JointState, 'out')
    pub = ros_client.node.create_publisher(
        JointState, 'in', QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
    node = start_node('injector', profile=path, diagnostics_period_s=0.1)
    connect(ros_client, pub, 'out')
    pub.publish(messages.joint_state(['j'], time.time_ns(), [0.0]))
    ros_client.wait_for(lambda: len(rx) == 1, 10, 'the first message')
    # more than the shared-memory port holds for a stopped reader (200 all arrived)
    n = 3000
    node.proc.send_signal(signal.SIGSTOP)
    try:
        for i in range(1, n - 1):
            pub.publish(messages.joint_state(['j'], time.time_ns(), [float(i)]))
    finally:
        node.proc.send_signal(signal.SIGCONT)
    pub.publish(messages.joint_state(['j'], time.time_ns(), [float(n - 1)]))  # closes the gap

    def accounted() -> bool:
        v = route_values(diags, 'r')
        return int(v['received']) + int(v['missed']) == n
    ros_client.wait_for(accounted, 20, f'{n} messages received or counted as missed')
    v = route_values(diags, 'r')
    assert int(v['missed']) > 0, v
    # what reached it is relayed, and nothing else
    ros_client.wait_for(lambda: len(rx) == int(v['received']), 10, 'the received relayed')
    got = [int(m.position[0]) for _t, m in rx.items]
    assert got[0] == 0 and got[-1] == n - 1 and len(set(got)) == len(got)
