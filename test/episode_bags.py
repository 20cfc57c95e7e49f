"""Synthetic episodes written as real bags: known gap, known lag, injector truth, and defects."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from rosbags.typesys import Stores, get_typestore

from simreal_ros.bag import BagOptions, BagWriter, QosSpec
from simreal_ros.core.robot import load_robot

TS = get_typestore(Stores.ROS2_KILTED)
ROBOT = load_robot('simreal_arm')
NAMES = ROBOT.joint_names
T0 = 1_700_000_000 * 10**9
DEFECTS = ('dropped', 'out_of_order', 'duplicate', 'gap', 'clock_skew', 'commands_at_limits',
           'saturated_effort', 'recorder_dropped', 'recorder_missed')


def signal(t: np.ndarray) -> np.ndarray:
    """Smooth multi-sine joint trajectories inside the limits (n x joints)."""
    cols = [0.3 * np.sin(2 * np.pi * (0.4 + 0.13 * j) * t + j)
            + 0.1 * np.sin(2 * np.pi * (1.7 + 0.2 * j) * t) for j in range(len(NAMES))]
    return np.stack(cols, axis=1)


def _time(ns: int):
    return TS.types['builtin_interfaces/msg/Time'](int(ns // 10**9), int(ns % 10**9))


def joint_state(stamp_ns: int, q, v=(), e=(), names=NAMES) -> bytes:
    msg = TS.types['sensor_msgs/msg/JointState'](
        TS.types['std_msgs/msg/Header'](_time(stamp_ns), ''), list(names),
        np.asarray(q, float), np.asarray(v, float), np.asarray(e, float))
    return bytes(TS.serialize_cdr(msg, 'sensor_msgs/msg/JointState'))


def injector_events(routes: list[str], rows: list[list[int]]) -> bytes:
    dim = TS.types['std_msgs/msg/MultiArrayDimension']
    layout = TS.types['std_msgs/msg/MultiArrayLayout'](
        [dim(f'routes={",".join(routes)}', len(rows), len(rows) * 6),
         dim('route,seq,receive_ns,target_delay_ns,deliver_ns,fate', 6, 6)], 0)
    msg = TS.types['std_msgs/msg/Int64MultiArray'](
        layout, np.asarray(rows, dtype=np.int64).reshape(-1))
    return bytes(TS.serialize_cdr(msg, 'std_msgs/msg/Int64MultiArray'))


def diagnostics(stamp_ns: int, name: str) -> bytes:
    st = TS.types['diagnostic_msgs/msg/DiagnosticStatus'](0, name, 'ok', '', [])
    msg = TS.types['diagnostic_msgs/msg/DiagnosticArray'](
        TS.types['std_msgs/msg/Header'](_time(stamp_ns), ''), [st])
    return bytes(TS.serialize_cdr(msg, 'diagnostic_msgs/msg/DiagnosticArray'))


def make_episode_bag(path: Path, *, seconds: float = 4.0, rate: float = 200.0,
                     lag_s: float = 0.02, offset: float = 0.05, defects: tuple[str, ...] = (),
                     injector: bool = True, seed: int = 0,
                     injector_topic: str = '/injector/events',
                     diagnostics_topic: str | None = None) -> dict:
    """Write a sim2sim-like bag; return the ground truth (lag, offset, injector latencies).

    ``diagnostics_topic`` adds three nodes' DiagnosticArrays on that topic, each at 1 Hz, 50 ms
    apart (as a launch that starts them one after another publishes them).
    """
    rng = np.random.default_rng(seed)
    n = int(seconds * rate)
    t = np.arange(n) / rate
    q_a = signal(t)
    q_b = signal(t - lag_s)
    q_b[:, 0] += offset
    v_a = np.gradient(q_a, t, axis=0)
    v_b = np.gradient(q_b, t, axis=0)
    eff = 0.2 * np.ones_like(q_a)
    keep_a = np.ones(n, bool)
    keep_b = np.ones(n, bool)
    stamps_a = T0 + (t * 1e9).astype(np.int64)
    stamps_b = stamps_a.copy()
    skew_b = 0
    if 'dropped' in defects:
        keep_a[rng.choice(np.arange(10, n - 10), size=n // 20, replace=False)] = False
    if 'gap' in defects:
        keep_b[n // 2:n // 2 + int(0.1 * rate)] = False
    if 'out_of_order' in defects:
        stamps_a[n // 3], stamps_a[n // 3 + 1] = stamps_a[n // 3 + 1], stamps_a[n // 3]
    if 'duplicate' in defects:
        stamps_a[n // 4 + 1] = stamps_a[n // 4]
    if 'clock_skew' in defects:
        skew_b = 80_000_000  # sim_b stamps with a clock 80 ms behind
    if 'saturated_effort' in defects:
        eff[n // 5:n // 5 + n // 10, 1] = ROBOT.effort_limit[1]
    truth: dict = {'lag_ms': lag_s * 1e3, 'offset': offset, 'latency_ms': {}}
    opts = BagOptions()
    custom = {'robot_spec.argument': 'simreal_arm', 'backend': 'sim2sim',
              'recorder.dropped_queue_full': '12' if 'recorder_dropped' in defects else '0'}
    missed = 7 if 'recorder_missed' in defects else 0
    custom.update({'recorder.missed': str(missed), 'recorder.missed./sim_a/joint_states': '0',
                   'recorder.missed./sim_b/joint_states': str(missed)})
    with BagWriter(path, opts, custom) as w:
        ha = w.add_topic('/sim_a/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        hb = w.add_topic('/sim_b/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        hc = w.add_topic('/joint_commands', 'sensor_msgs/msg/JointState', [QosSpec()])
        hi = w.add_topic(injector_topic, 'std_msgs/msg/Int64MultiArray', [QosSpec()])
        msgs: list[tuple[int, int, bytes]] = []
        for k in range(n):
            recv = int(T0 + t[k] * 1e9) + 500_000
            if keep_a[k]:
                msgs.append((recv, ha, joint_state(int(stamps_a[k]), q_a[k], v_a[k], eff[k])))
            if keep_b[k]:
                msgs.append((recv + 100_000, hb, joint_state(int(stamps_b[k]) - skew_b,
                                                             q_b[k], v_b[k], eff[k])))
            if k % 2 == 0:
                cmd = q_a[k].copy()
                if 'commands_at_limits' in defects and k % 10 == 0:
                    cmd[2] = ROBOT.upper[2]
                msgs.append((recv - 200_000, hc, joint_state(int(stamps_a[k]) - 700_000, cmd)))
        if injector:
            routes = ['command', 'observation']
            delays = {'command': rng.uniform(5.0, 15.0, n // 2),
                      'observation': np.full(n, 2.0)}
            rows: list[list[int]] = []
            for r, route in enumerate(routes):
                for s, d in enumerate(delays[route]):
                    rx = int(T0 + s * 1e9 / (rate if route == 'observation' else rate / 2))
                    fate = 1 if route == 'observation' and s % 50 == 0 else 0
                    deliver = 0 if fate == 1 else rx + int(d * 1e6)
                    rows.append([r, s, rx, int(d * 1e6), deliver, fate])
                truth['latency_ms'][route] = [float(d) for s, d in enumerate(delays[route])
                                              if not (route == 'observation' and s % 50 == 0)]
            rows.sort(key=lambda row: row[2])
            for b in range(0, len(rows), 8):
                batch = rows[b:b + 8]
                msgs.append((batch[-1][2] + 20_000_000, hi, injector_events(routes, batch)))
        if diagnostics_topic:
            hd = w.add_topic(diagnostics_topic, 'diagnostic_msgs/msg/DiagnosticArray',
                             [QosSpec()])
            for k, name in enumerate(('sim_a: sim bridge', 'sim_b: sim bridge', 'recorder')):
                for stamp in range(T0 + k * 50_000_000, T0 + int(seconds * 1e9), 10**9):
                    msgs.append((stamp + 300_000, hd, diagnostics(stamp, name)))
        msgs.sort(key=lambda m: m[0])
        for recv, h, data in msgs:
            w.write(h, recv, data)
    return truth
