"""Sim bridge benchmark: ratios and comparisons measured side by side in one run.

* free mode: bridge physics steps/s while publishing joint_states at 200 Hz sim time, as a
  ratio to the engine's raw steps/s of the same model (``mj_step``; PyBullet:
  ``stepSimulation``) (target >= 0.5);

``engine`` (``simreal bench sim_bridge --engine pybullet``) picks the engine of every bridge.
* realtime mode at 500 Hz: p99 publish-period error, inside the bridge and as seen by a
  subscriber, next to a plain rclpy timer at 500 Hz measured the same way (target <= 0.5 ms);
* lockstep with a 50 Hz stand-in controller doing a real topic round trip each tick:
  real-time factor (target >= 20).
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import RT_PRIORITIES, NodeSpec
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.core.robot import load_robot
from simreal_ros.ros import messages
from simreal_ros.ros.client import RosClient
from simreal_ros.sim.engines import make_sim

# bench/_load.py, also when this file is run by path (runpy in simreal bench, tests)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import context, cpu_load  # noqa: E402

DOMAIN = bench_domain(4)


def _period_error_p99_ms(receive_ns: list[int], nominal_ms: float) -> float:
    periods = np.diff(np.asarray(receive_ns, dtype=np.int64)) / 1e6
    return float(np.percentile(np.abs(periods - nominal_ms), 99))


def _diag_values(diags: list[tuple[int, Any]], prefix: str = '') -> dict[str, str]:
    for _t, arr in reversed(diags):
        for st in arr.status:
            if st.name.endswith('sim bridge') and st.name.startswith(prefix):
                return {kv.key: kv.value for kv in st.values}
    raise RuntimeError('the bridge published no diagnostics')


ENGINE = ['mujoco']  # set by run(engine=...)


def _bridge(tmp: Path, env: dict[str, str], ns: str, **params: Any) -> NodeProcess:
    return NodeProcess(NodeSpec('sim_bridge', 'sim_bridge', ns, {'engine': ENGINE[0], **params}),
                       env, tmp)


def free_mode(client: RosClient, env: dict[str, str], tmp: Path, seconds: float
              ) -> dict[str, float]:
    from diagnostic_msgs.msg import DiagnosticArray
    sim = make_sim(load_robot('simreal_arm'), engine=ENGINE[0])
    raw_before = sim.raw_step_rate(20000)
    diags = client.collect(DiagnosticArray, '/diagnostics')
    p = _bridge(tmp, env, '/free', timing_mode='free', publish_rate_hz=200.0,
                publish_clock=False, diagnostics_period_s=1.0)
    client.wait_for(lambda: len(diags) > 1, 30, 'free-mode diagnostics')
    time.sleep(seconds)  # nobody subscribes joint_states: this measures the bridge itself
    rates = [float(v['step_rate_hz']) for v in
             ({kv.key: kv.value for kv in st.values}
              for _t, a in diags for st in a.status if st.name.startswith('/free/'))]
    p.stop()
    raw_after = sim.raw_step_rate(20000)
    raw = (raw_before + raw_after) / 2
    bridge = float(np.median(rates[1:])) if len(rates) > 1 else float('nan')
    return {'engine': ENGINE[0], 'raw_step_per_s': raw, 'bridge_steps_per_s': bridge,
            'ratio_bridge_over_raw': bridge / raw, 'target_ratio': 0.5}


def realtime_mode(client: RosClient, env: dict[str, str], tmp: Path, seconds: float,
                  rt: bool = False) -> dict[str, float]:
    """The 500 Hz bridge; with ``rt`` a second one under SCHED_FIFO at the same time."""
    from diagnostic_msgs.msg import DiagnosticArray
    diags = client.collect(DiagnosticArray, '/diagnostics')
    bridge_rx = client.collect(JointState, '/rt/joint_states')
    fifo_rx = client.collect(JointState, '/fifo/joint_states')
    p = _bridge(tmp, env, '/rt', timing_mode='realtime', publish_rate_hz=500.0,
                diagnostics_period_s=seconds)
    q = _bridge(tmp, env, '/fifo', timing_mode='realtime', publish_rate_hz=500.0,
                diagnostics_period_s=seconds, publish_clock=False,
                rt_priority=RT_PRIORITIES['sim_bridge']) if rt else None
    client.wait_for(lambda: len(bridge_rx) > 100 and (not rt or len(fifo_rx) > 100), 30,
                    'realtime states')
    start, fstart = len(bridge_rx), len(fifo_rx)
    time.sleep(seconds + 0.2)
    inside = float(_diag_values(diags, '/rt/')['publish_period_err_p99_ms'])
    rx = [t for t, _m in bridge_rx[start:]]
    frx = [t for t, _m in fifo_rx[fstart:]]
    fifo = _diag_values(diags, '/fifo/') if rt else {}
    p.stop()
    if q is not None:
        q.stop()
    timer_rx = client.collect(JointState, '/timer/joint_states')
    timer = subprocess.Popen([sys.executable, str(Path(__file__).with_name('_plain_timer.py')),
                              '500', '--ros-args', '-r', '__ns:=/timer'], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client.wait_for(lambda: len(timer_rx) > 100, 30, 'plain timer messages')
    start = len(timer_rx)
    time.sleep(seconds)
    trx = [t for t, _m in timer_rx[start:]]
    timer_stamps = [messages.stamp_to_ns(m.header.stamp) for _t, m in timer_rx[start:]]
    timer.terminate()
    timer.wait()
    out = {'bridge_publish_p99_ms_inside': inside,
           'bridge_receive_p99_ms': _period_error_p99_ms(rx, 2.0),
           'plain_timer_publish_p99_ms': _period_error_p99_ms(timer_stamps, 2.0),
           'plain_timer_receive_p99_ms': _period_error_p99_ms(trx, 2.0),
           'target_p99_ms': 0.5}
    if rt:
        f_inside = float(fifo['publish_period_err_p99_ms'])
        out.update({'rt_bridge_publish_p99_ms_inside': f_inside,
                    'rt_bridge_receive_p99_ms': _period_error_p99_ms(frx, 2.0),
                    'rt_physics_thread': f'{fifo.get("rt.physics.policy")} '
                                         f'{fifo.get("rt.physics.priority")}',
                    'rt_to_default_publish_p99_ratio': f_inside / inside if inside else
                    float('nan')})
    return out


def lockstep_mode(client: RosClient, env: dict[str, str], tmp: Path, seconds: float
                  ) -> dict[str, float]:
    pub = client.publisher(JointState, '/ls/joint_commands')
    home = load_robot('simreal_arm').home
    names = load_robot('simreal_arm').joint_names

    def controller(msg: JointState) -> None:  # the stand-in 50 Hz policy
        # a re-sent state is answered again, as the policy node does: the first answer is lost
        # when published before the bridge's subscription matched; the bridge steps once a stamp
        stamp = messages.stamp_to_ns(msg.header.stamp)
        q = home + 0.2 * np.sin(stamp / 1e9)
        pub.publish(messages.joint_state(names, stamp, q))

    client.collect(JointState, '/ls/joint_states', callback=controller)
    clock = client.collect(Clock, '/clock')
    p = _bridge(tmp, env, '/ls', timing_mode='lockstep', publish_rate_hz=50.0)
    client.wait_for(lambda: len(clock) > 50, 30, 'lockstep ticks')
    i0 = len(clock)
    w0, s0 = clock[i0 - 1][0], messages.stamp_to_ns(clock[i0 - 1][1].clock)
    time.sleep(seconds)
    w1, s1 = clock[-1][0], messages.stamp_to_ns(clock[-1][1].clock)
    p.stop()
    ticks = len(clock) - i0
    return {'ticks': ticks, 'real_time_factor': (s1 - s0) / (w1 - w0),
            'round_trip_ms_per_tick': (w1 - w0) / 1e6 / max(1, ticks), 'target_rtf': 20.0}


def run(quick: bool = False, load: int = 0, rt: bool = False, engine: str = 'mujoco'
        ) -> dict[str, Any]:
    """Run the three measurements and return the figures.

    ``load``: CPU-bound processes meanwhile; ``rt``: the realtime measurement also runs a
    SCHED_FIFO bridge next to the default one (``rt_*`` figures); ``engine``: of the bridges.
    """
    ENGINE[0] = engine
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    os.environ.update(env)
    seconds = 1.0 if quick else 6.0
    client = RosClient(DOMAIN, 'bench_client')
    try:
        with cpu_load(load), tempfile.TemporaryDirectory() as tmp:
            return {'free': free_mode(client, env, Path(tmp), seconds),
                    'realtime_500hz': realtime_mode(client, env, Path(tmp), seconds, rt),
                    'lockstep_50hz': lockstep_mode(client, env, Path(tmp), seconds),
                    **context(load, rt)}
    finally:
        client.close()


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--load', type=int, default=0)
    ap.add_argument('--rt', action='store_true')
    ap.add_argument('--engine', default='mujoco')
    a = ap.parse_args()
    print(json.dumps(run(a.quick, a.load, a.rt, a.engine), indent=2))
