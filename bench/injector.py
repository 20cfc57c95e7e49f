"""Latency injector benchmark: accuracy, overhead and throughput, measured side by side.

A source process serializes each JointState once (stamped at send) and publishes the same
bytes on a direct topic and on the injector's input, alternating which goes first; this process
receives both. Receive times are the middleware's reception stamps (``received_timestamp`` of
the message info), not this process's callbacks. Per message:

* floor = direct receive - stamp (publisher -> subscriber over DDS, no injector);
* accuracy: error = |(relayed receive - stamp) - target delay| (target from the injector's
  ground-truth events), for a constant 5 ms route and a jittered route at 1 kHz; the figure
  of merit is the error above the floor (target: p99 <= 0.5 ms above the floor's p99);
* overhead: a zero-delay route's latency minus the floor, p50 (target <= 0.15 ms);
* throughput: the highest rate of a zero-delay route and of a 5 ms route with every message
  delivered, next to the direct topic at the same rate, with the rate the source achieved.

Every measurement subscribes anew and destroys its subscriptions afterwards, and the source
process (one for the run, bench/_source.py) creates its publishers anew: a measurement starts
once the relayed topic's subscription has matched the injector and ends once both
subscriptions hold every message sent, or when neither received anything for
:data:`QUIET_S` (a lossy rate); only then the source drops its publishers.
``--quick`` sends 500 messages per accuracy figure (10 000 in full) and each throughput rate
for 0.25 s (2 s in full). Per message the
``excess`` = relayed latency - target - the same message's direct latency (the injector's own
contribution: one more hop, its receive path, its lateness); ``excess_p99_ms`` is the figure
closest to "p99 above the floor" that pairs messages instead of percentiles.

``--load N`` runs N CPU-bound processes during the whole benchmark; ``--rt`` measures twice,
side by side under that load: ``default`` (top-level keys, the injector on the default
scheduler) and ``rt`` (the injector at ``realtime:=true``'s priority), with the source's
publishing thread under SCHED_FIFO 60 in both, so that only the injector differs;
``rt_over_default`` holds the ratios.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import deserialize_message
from sensor_msgs.msg import JointState
from std_msgs.msg import Int64MultiArray
import yaml

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import RT_PRIORITIES, NodeSpec
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.latency.injection import decode_events, lateness_summary
from simreal_ros.ros.client import RosClient

# bench/_load.py, also when this file is run by path (runpy in simreal bench, tests)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import (  # noqa: E402
    context,
    cpu_load,
    env_rt,
    harness,
    ratio,
    steal_ms,
    steal_since,
    variants,
)

DOMAIN = bench_domain(1)
DEEP = QoSProfile(depth=20000, reliability=ReliabilityPolicy.RELIABLE)
SOURCE = Path(__file__).with_name('_source.py')
#: a measurement ends when no message arrived for this long (or when every one did)
QUIET_S = 1.0
ROUTES = {
    'zero': {'input': 'in/zero', 'output': 'out/zero', 'type': 'sensor_msgs/msg/JointState'},
    'const5': {'input': 'in/const5', 'output': 'out/const5', 'delay': 0.005,
               'type': 'sensor_msgs/msg/JointState'},
    'jitter': {'input': 'in/jitter', 'output': 'out/jitter', 'order': 'free',
               'type': 'sensor_msgs/msg/JointState',
               'delay': {'distribution': 'lognormal', 'median': 0.004, 'sigma': 0.5,
                         'max_s': 0.05}},
}


class Sink:
    """Raw subscription: reception time (middleware stamp) and the bytes, decoded after."""

    def __init__(self, client: RosClient, topic: str) -> None:
        self.rx: list[tuple[int, bytes]] = []
        self.client = client
        self.sub = client.node.create_subscription(JointState, topic, self._on, DEEP, raw=True)

    def _on(self, data: bytes, info: Any) -> None:
        self.rx.append((int(info['received_timestamp']) or time.time_ns(), data))

    def close(self) -> None:
        """Destroy the subscription (sinks of earlier measurements must not keep receiving)."""
        self.client.node.destroy_subscription(self.sub)

    def latencies(self) -> dict[int, int]:
        out = {}
        for t, data in self.rx:
            m = deserialize_message(data, JointState)
            out[int(m.position[0])] = t - (m.header.stamp.sec * 1_000_000_000
                                           + m.header.stamp.nanosec)
        return out


def _matched(client: RosClient, sink: Sink) -> None:
    """Wait until ``sink``'s subscription has matched a publisher (the injector's route)."""
    client.wait_for(lambda: sink.sub.get_publisher_count() > 0, 30,
                    f'the injector on {sink.sub.topic_name}')


def _drained(sinks: tuple[Sink, ...], count: int, deadline_s: float = 30.0) -> None:
    """Wait until every sink received ``count`` messages, or none received any for QUIET_S."""
    end = time.monotonic() + deadline_s
    seen, since = -1, time.monotonic()
    while time.monotonic() < end:
        got = [len(s.rx) for s in sinks]
        if min(got) >= count:
            return
        if sum(got) != seen:
            seen, since = sum(got), time.monotonic()
        elif time.monotonic() - since >= QUIET_S:
            return
        time.sleep(0.01)


def _ms(values: Any, q: float) -> float:
    return float(np.percentile(np.asarray(list(values), dtype=float), q) / 1e6)


class Source:
    """bench/_source.py: one process sends every measurement's messages (its docstring)."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.log = tmp / 'source.log'
        with open(self.log, 'w', encoding='utf-8') as err:
            self.proc = subprocess.Popen([sys.executable, str(SOURCE)], env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True)

    def run(self, rate: float, count: int, sinks: tuple[Sink, ...], *topics: str
            ) -> dict[str, Any]:
        """Send ``count`` messages at ``rate`` on ``topics``; return once ``sinks`` are
        drained, with the source's report (``sent``, ``seconds``, ``rate_hz``)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        watchdog = threading.Timer(120.0, self.proc.kill)
        watchdog.start()
        try:
            self.proc.stdin.write(f'{rate} {count} {" ".join(topics)}\n')
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()  # its report once it sent everything
        finally:
            watchdog.cancel()
        if not line.startswith('{'):
            raise RuntimeError(f'the benchmark source stopped: '
                               f'{self.log.read_text(errors="replace")[-2000:]}')
        _drained(sinks, count)
        self.proc.stdin.write('drained\n')  # it may drop this measurement's publishers now
        self.proc.stdin.flush()
        return dict(json.loads(line))

    def close(self) -> None:
        """End the source (end of its stdin)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _rate_hz(rx: list[tuple[int, bytes]]) -> float:
    """Rate at which a sink received (messages over the span of their reception)."""
    if len(rx) < 2:
        return 0.0
    times = sorted(t for t, _d in rx)
    return (len(times) - 1) / ((times[-1] - times[0]) / 1e9) if times[-1] > times[0] else 0.0


def _targets(events: list[tuple[int, Any]], route: str) -> dict[int, int]:
    out: dict[int, int] = {}
    for _t, m in events:
        names, rows = decode_events(m.layout.dim[0].label, m.data)
        for r in rows[rows[:, 0] == names.index(route)]:
            out[int(r[1])] = int(r[3])
    return out


def accuracy(client: RosClient, source: Source, events: list, route: str,
             count: int) -> dict[str, float]:
    direct, relayed = Sink(client, f'direct/{route}'), Sink(client, f'out/{route}')
    try:
        _matched(client, relayed)
        steal0 = steal_ms()
        sent = source.run(1000.0, count, (direct, relayed), f'direct/{route}', f'in/{route}')
        steal = steal_since(steal0)
    finally:
        direct.close()
        relayed.close()
    floor = direct.latencies()
    lat = relayed.latencies()
    targets = _targets(events, route)
    common = sorted(set(floor) & set(lat) & set(targets))
    err = [abs(lat[i] - targets[i]) for i in common]              # |delivered - target|
    excess = [lat[i] - targets[i] - floor[i] for i in common]     # per message, vs direct
    out = {'messages': count, 'delivered': len(lat),
           'source_rate_hz': sent.get('rate_hz', float('nan')),
           'floor_p50_ms': _ms(floor.values(), 50), 'floor_p99_ms': _ms(floor.values(), 99),
           'error_p50_ms': _ms(err, 50), 'error_p99_ms': _ms(err, 99),
           'excess_p50_ms': _ms(excess, 50), 'excess_p90_ms': _ms(excess, 90),
           'excess_p99_ms': _ms(excess, 99), 'vcpu_steal_ms': steal}
    out['error_p99_above_floor_ms'] = out['error_p99_ms'] - out['floor_p99_ms']
    if route == 'zero':
        over = [lat[i] - floor[i] for i in common]
        out = {**out, 'overhead_p50_ms': _ms(over, 50), 'overhead_p99_ms': _ms(over, 99),
               'target_overhead_p50_ms': 0.15}
    else:
        out['target_p99_above_floor_ms'] = 0.5
    return out


def own_lateness(events: list[tuple[int, Any]], diags: list[tuple[int, Any]]
                 ) -> dict[str, Any]:
    """The injector's own lateness (sent - scheduled) over the accuracy runs, from its events,
    and its real-time state from its diagnostics."""
    rows = [decode_events(m.layout.dim[0].label, m.data) for _t, m in events]
    if not rows:
        return {}
    names = rows[0][0]
    orders = {i: ROUTES[n].get('order', 'fifo') for i, n in enumerate(names)}
    out: dict[str, Any] = lateness_summary(np.concatenate([r for _n, r in rows]), orders)
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name == '/injector: timing':
                out.update({kv.key: kv.value for kv in st.values
                            if kv.key.startswith('rt.') and kv.key.endswith(('policy',
                                                                              'priority'))})
                return out
    return out


def throughput(client: RosClient, source: Source, route: str, seconds: float
               ) -> dict[str, Any]:
    best: dict[str, Any] = {'route': route, 'lossless_rate_hz': 0.0}
    for rate in (2000.0, 4000.0, 8000.0, 16000.0):
        n = int(rate * seconds)
        direct, relayed = Sink(client, f'direct/{route}'), Sink(client, f'out/{route}')
        try:
            _matched(client, relayed)
            sent = source.run(rate, n, (direct, relayed), f'direct/{route}', f'in/{route}')
        finally:
            direct.close()
            relayed.close()
        best[f'{int(rate)}_hz'] = {'sent': n, 'relayed': len(relayed.rx),
                                   'direct': len(direct.rx),
                                   'source_rate_hz': sent.get('rate_hz', float('nan')),
                                   'relayed_rate_hz': _rate_hz(relayed.rx),
                                   'direct_rate_hz': _rate_hz(direct.rx)}
        if len(relayed.rx) < n:
            break
        best['lossless_rate_hz'] = rate
        best['lossless_achieved_rate_hz'] = sent.get('rate_hz', float('nan'))
    return best


def measure(client: RosClient, env: dict[str, str], tmp: Path, count: int, quick: bool,
            params: dict[str, Any]) -> dict[str, Any]:
    """Start the injector with ``params`` and run every measurement against it."""
    prof = tmp / 'bench.yaml'
    prof.write_text(yaml.safe_dump({'description': 'bench', 'routes': ROUTES}))
    events = client.collect(Int64MultiArray, '/injector/events', DEEP)
    diags = client.collect(DiagnosticArray, '/diagnostics')
    node = NodeProcess(NodeSpec('injector', 'injector', '', {'profile': str(prof),
                                                             'diagnostics_period_s': 0.5,
                                                             **params}), env, tmp)
    source = Source(env, tmp)  # starts while the injector does
    try:
        client.wait_for(lambda: all(client.node.count_publishers(f'out/{r}')
                                    for r in ROUTES), 30, 'the injector')
        result: dict[str, Any] = {f'accuracy_{r}': accuracy(client, source, events, r, count)
                                  for r in ('const5', 'jitter')}
        result['overhead_zero'] = accuracy(client, source, events, 'zero', count)
        result['own_lateness'] = own_lateness(events, diags)
        secs = 0.25 if quick else 2.0
        result['throughput_zero'] = throughput(client, source, 'zero', secs)
        result['throughput_const5'] = throughput(client, source, 'const5', secs)
        result['injector_params'] = params
        return result
    finally:
        source.close()
        node.stop()


COMPARED = (('accuracy_const5', 'excess_p99_ms'), ('accuracy_const5', 'error_p99_ms'),
            ('accuracy_jitter', 'excess_p99_ms'), ('accuracy_jitter', 'error_p99_ms'),
            ('overhead_zero', 'overhead_p50_ms'), ('overhead_zero', 'overhead_p99_ms'))


def run(quick: bool = False, load: int = 0, rt: bool = False,
        params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run every measurement in one session and return the figures."""
    env = env_rt(ros_env(discovery='localhost', domain_id=DOMAIN), rt)
    os.environ.update(env)
    count = 500 if quick else 10000
    client = RosClient(DOMAIN, 'bench_injector')
    out: dict[str, Any] = {}
    try:
        with cpu_load(load), tempfile.TemporaryDirectory() as tmp:
            for variant in variants(rt):
                p = dict(params or {})
                if variant == 'rt':
                    p['rt_priority'] = RT_PRIORITIES['injector']
                figures = measure(client, env, Path(tmp), count, quick, p)
                if variant == 'default':
                    out.update(figures)
                else:
                    out[variant] = figures
    finally:
        client.close()
    if rt:
        out['rt_over_default'] = {f'{a}.{b}': ratio(out['rt'][a][b], out[a][b])
                                  for a, b in COMPARED}
    out['harness'] = harness(rt)
    out.update(context(load, rt))
    return out


if __name__ == '__main__':
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--load', type=int, default=0)
    ap.add_argument('--rt', action='store_true')
    ap.add_argument('--param', action='append', default=[], help='injector param k=v (int)')
    a = ap.parse_args()
    extra = {k: yaml.safe_load(v) for k, v in (x.split('=', 1) for x in a.param)}
    print(json.dumps(run(quick=a.quick, load=a.load, rt=a.rt, params=extra), indent=2))
