"""Policy node benchmark: overhead over the bare model call, and loop timing vs a plain timer.

* overhead: the node in ``sync_to_states`` mode answers every joint_states message the bench
  publishes (200 Hz); the node measures, per cycle, observation received -> command published
  and subtracts its own model call (``overhead_p50/p99_ms`` on /diagnostics). Next to it, the
  bare model call (same weights, same thread count) timed in this process, and the topic round
  trip (state published here -> command received here).
* loop_50hz / loop_500hz: the node's own control loop (wall clock) at 50 and 500 Hz, fed
  joint_states at 100 Hz, against ``_plain_timer.py`` (an rclpy timer publishing JointState) at
  the same rate, both running at the same time (so both see the same machine load). Period
  error p99 = 99th percentile of |period - nominal|, from the command stamps (creation
  instants) and from the receive instants at a subscriber in this process. Target: policy
  p99 <= 0.5 ms and below the plain timer. Each loop reports the policy/timer ratios of the
  p99s (< 1: the policy loop is the more regular one) and ``target_met`` (on the stamp p99,
  the like-for-like figure); the top level ``target_met`` is true when it holds at both rates.

``--load N`` runs N CPU-bound processes during the benchmark. ``--rt`` adds, in each loop
measurement, a second policy node at ``realtime:=true``'s priority (SCHED_FIFO 70) running at the
same time as the default one and the plain timer, so all three see the same load:
``rt_policy_*`` figures, ``rt_to_default_stamp_p99_ratio`` and ``rt_target_met``.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from sensor_msgs.msg import JointState
import yaml

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import RT_PRIORITIES, NodeSpec
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.core.robot import load_robot
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.ros import messages
from simreal_ros.ros.client import RosClient

# bench/_load.py, also when this file is run by path (runpy in simreal bench, tests)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import context, cpu_load  # noqa: E402

DOMAIN = bench_domain(2)
ROBOT = load_robot('simreal_arm')


def _p99_err_ms(ns: list[int], nominal_ms: float) -> float:
    if len(ns) < 3:
        return float('nan')
    periods = np.diff(np.asarray(ns, dtype=np.int64)) / 1e6
    return float(np.percentile(np.abs(periods - nominal_ms), 99))


def _diag(diags: list[tuple[int, Any]], prefix: str) -> dict[str, str]:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.startswith(prefix) and st.name.endswith(': policy'):
                return {kv.key: kv.value for kv in st.values}
    return {}


TARGET_P99_MS = 0.5


def _ratio(a: float, b: float) -> float:
    """Return ``a / b``, NaN when either is undefined or ``b`` is zero."""
    if not (np.isfinite(a) and np.isfinite(b)) or b <= 0.0:
        return float('nan')
    return float(a / b)


def compare_with_timer(figures: dict[str, Any], target_ms: float = TARGET_P99_MS
                       ) -> dict[str, Any]:
    """Return the policy/timer ratios of one loop's p99s and whether the target is met.

    The target: policy stamp p99 <= ``target_ms`` and below the plain timer's stamp p99
    (both measured in the same run, so both saw the same load).
    """
    pol, tim = figures['policy_stamp_p99_ms'], figures['plain_timer_stamp_p99_ms']
    return {
        'policy_to_timer_stamp_p99_ratio': _ratio(pol, tim),
        'policy_to_timer_receive_p99_ratio': _ratio(figures['policy_receive_p99_ms'],
                                                    figures['plain_timer_receive_p99_ms']),
        'target_p99_ms': target_ms,
        'target_met': bool(np.isfinite(pol) and np.isfinite(tim) and pol <= target_ms
                           and pol < tim),
    }


def _bench_spec(tmp: Path) -> Path:
    """The shipped spec, tolerant of 100 Hz states at a 500 Hz loop (stale after 0.1 s)."""
    spec = load_policy_spec('simreal_arm_reach')
    data = yaml.safe_load(spec.source.read_text(encoding='utf-8'))
    data['model'] = str(spec.model)
    data['safety'] = {'ramp_s': 0.2, 'stale_after_periods': 50}
    path = tmp / 'bench_policy.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    return path


def bare_model(calls: int) -> dict[str, float]:
    from simreal_ros.policy.model import load_model
    spec = load_policy_spec('simreal_arm_reach')
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1)
    x = np.zeros(spec.obs_dim)
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        model(x)
        ts.append(time.perf_counter_ns() - t0)
    a = np.asarray(ts[20:], dtype=np.float64) / 1e6
    return {'p50_ms': float(np.percentile(a, 50)), 'p99_ms': float(np.percentile(a, 99))}


def overhead(client: RosClient, env: dict[str, str], tmp: Path, spec_path: Path,
             seconds: float) -> dict[str, float]:
    ns = '/ov'
    diags = client.collect(DiagnosticArray, '/diagnostics')
    sent: dict[int, int] = {}
    rtt: list[int] = []

    def on_cmd(msg: JointState) -> None:
        now = time.monotonic_ns()
        if sent:
            rtt.append(now - sent.pop(max(sent)))
            sent.clear()

    client.collect(JointState, f'{ns}/joint_commands', callback=on_cmd)
    pub = client.publisher(JointState, f'{ns}/joint_states')
    node = NodeProcess(NodeSpec('policy', 'policy', ns, {
        'policy': str(spec_path), 'sync_to_states': True, 'enable_on_start': True,
        'rate_hz': 1000.0, 'diagnostics_period_s': 0.5}), env, tmp)
    zeros = np.zeros(ROBOT.n)

    def publish() -> None:
        stamp = time.time_ns()
        sent[stamp] = time.monotonic_ns()
        pub.publish(messages.joint_state(ROBOT.joint_names, stamp, ROBOT.home, zeros))

    deadline = time.monotonic() + 60
    while _diag(diags, ns).get('mode') != 'running':
        if time.monotonic() > deadline:
            raise RuntimeError(f'policy node did not start: {node.output()[-2000:]}')
        publish()
        time.sleep(0.005)
    rtt.clear()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        publish()
        time.sleep(0.005)
    time.sleep(0.7)
    d = _diag(diags, ns)
    node.stop()
    r = np.asarray(rtt, dtype=np.float64) / 1e6
    return {'cycles': len(rtt),
            'node_overhead_p50_ms': float(d['overhead_p50_ms']),
            'node_overhead_p99_ms': float(d['overhead_p99_ms']),
            'node_obs_to_cmd_p50_ms': float(d['obs_to_cmd_p50_ms']),
            'node_model_call_p50_ms': float(d['model_p50_ms']),
            'round_trip_p50_ms': float(np.percentile(r, 50)) if r.size else float('nan'),
            'round_trip_p99_ms': float(np.percentile(r, 99)) if r.size else float('nan')}


def loop(client: RosClient, env: dict[str, str], tmp: Path, spec_path: Path, rate: float,
         seconds: float, rt: bool = False) -> dict[str, float]:
    """The policy loop and a plain timer at ``rate``, running at the same time (same load)."""
    nominal_ms = 1000.0 / rate
    tag = f'{int(rate)}'
    diags = client.collect(DiagnosticArray, '/diagnostics')
    pol_rx = client.collect(JointState, f'/pl{tag}/joint_commands')
    rt_rx = client.collect(JointState, f'/plrt{tag}/joint_commands')
    timer_rx = client.collect(JointState, f'/timer{tag}/joint_states')
    pubs = [client.publisher(JointState, f'/pl{tag}/joint_states'),
            client.publisher(JointState, f'/plrt{tag}/joint_states')]
    zeros = np.zeros(ROBOT.n)

    def feed_states() -> None:
        msg = messages.joint_state(ROBOT.joint_names, time.time_ns(), ROBOT.home, zeros)
        for pub in pubs:
            pub.publish(msg)

    feed = client.node.create_timer(0.01, feed_states)
    params = {'policy': str(spec_path), 'enable_on_start': True, 'rate_hz': rate,
              'diagnostics_period_s': seconds}
    node = NodeProcess(NodeSpec('policy', 'policy', f'/pl{tag}', params), env, tmp)
    rt_node = NodeProcess(NodeSpec('policy', 'policy', f'/plrt{tag}', {
        **params, 'rt_priority': RT_PRIORITIES['policy']}), env, tmp) if rt else None
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name('_plain_timer.py')),
                             str(rate), '--ros-args', '-r', f'__ns:=/timer{tag}'], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while _diag(diags, f'/pl{tag}').get('mode') != 'running' or len(timer_rx) < 20 or (
                rt and _diag(diags, f'/plrt{tag}').get('mode') != 'running'):
            if time.monotonic() > deadline:
                raise RuntimeError(f'policy node or timer did not start: '
                                   f'{node.output()[-2000:]}')
            time.sleep(0.05)
        time.sleep(0.5)
        i0, j0, k0 = len(pol_rx), len(timer_rx), len(rt_rx)
        misses0 = int(_diag(diags, f'/pl{tag}').get('deadline_misses', 0))
        rt_misses0 = int(_diag(diags, f'/plrt{tag}').get('deadline_misses', 0))
        time.sleep(seconds)
        window, twindow, rwindow = pol_rx[i0:], timer_rx[j0:], rt_rx[k0:]
        time.sleep(0.3)
        d = _diag(diags, f'/pl{tag}')
        rd = _diag(diags, f'/plrt{tag}')
    finally:
        node.stop()
        if rt_node is not None:
            rt_node.stop()
        proc.terminate()
        proc.wait()
        client.node.destroy_timer(feed)
    figures: dict[str, Any] = {
        'rate_hz': rate, 'seconds': seconds, 'commands': len(window),
        'timer_messages': len(twindow),
        'policy_stamp_p99_ms': _p99_err_ms([messages.stamp_to_ns(m.header.stamp)
                                            for _t, m in window], nominal_ms),
        'policy_receive_p99_ms': _p99_err_ms([t for t, _m in window], nominal_ms),
        'policy_inside_p99_ms': float(d.get('period_err_p99_ms', 'nan')),
        'policy_deadline_misses': int(d.get('deadline_misses', -1)) - misses0,
        'plain_timer_stamp_p99_ms': _p99_err_ms([messages.stamp_to_ns(m.header.stamp)
                                                 for _t, m in twindow], nominal_ms),
        'plain_timer_receive_p99_ms': _p99_err_ms([t for t, _m in twindow], nominal_ms),
    }
    out = {**figures, **compare_with_timer(figures)}
    if rt:
        rt_fig = {
            'rt_policy_stamp_p99_ms': _p99_err_ms([messages.stamp_to_ns(m.header.stamp)
                                                   for _t, m in rwindow], nominal_ms),
            'rt_policy_receive_p99_ms': _p99_err_ms([t for t, _m in rwindow], nominal_ms),
            'rt_policy_inside_p99_ms': float(rd.get('period_err_p99_ms', 'nan')),
            'rt_policy_deadline_misses': int(rd.get('deadline_misses', -1)) - rt_misses0,
            'rt_policy_commands': len(rwindow),
            'rt_policy_thread': f'{rd.get("rt.policy_loop.policy")} '
                                f'{rd.get("rt.policy_loop.priority")}'}
        rt_fig['rt_to_default_stamp_p99_ratio'] = _ratio(rt_fig['rt_policy_stamp_p99_ms'],
                                                         figures['policy_stamp_p99_ms'])
        rt_fig['rt_to_timer_stamp_p99_ratio'] = _ratio(rt_fig['rt_policy_stamp_p99_ms'],
                                                       figures['plain_timer_stamp_p99_ms'])
        rt_fig['rt_target_met'] = bool(rt_fig['rt_policy_stamp_p99_ms'] <= TARGET_P99_MS)
        out.update(rt_fig)
    return out


def run(quick: bool = False, load: int = 0, rt: bool = False,
        loops_only: bool = False) -> dict[str, Any]:
    """Run the overhead and loop-timing measurements and return the figures."""
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    os.environ.update(env)
    seconds = 1.0 if quick else 8.0
    client = RosClient(DOMAIN, 'bench_policy_client')
    try:
        with cpu_load(load), tempfile.TemporaryDirectory() as tmp:
            spec_path = _bench_spec(Path(tmp))
            out: dict[str, Any] = {} if loops_only else {
                'bare_model_call': bare_model(500 if quick else 5000),
                'overhead': overhead(client, env, Path(tmp), spec_path, seconds)}
            out['loop_50hz'] = loop(client, env, Path(tmp), spec_path, 50.0, seconds, rt)
            out['loop_500hz'] = loop(client, env, Path(tmp), spec_path, 500.0, seconds, rt)
            out['target_met'] = all(out[k]['target_met'] for k in ('loop_50hz', 'loop_500hz'))
            if rt:
                out['rt_target_met'] = all(out[k]['rt_target_met']
                                           for k in ('loop_50hz', 'loop_500hz'))
            out.update(context(load, rt))
            return out
    finally:
        client.close()


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--load', type=int, default=0)
    ap.add_argument('--rt', action='store_true')
    ap.add_argument('--loops-only', action='store_true')
    a = ap.parse_args()
    print(json.dumps(run(a.quick, a.load, a.rt, a.loops_only), indent=2))
