"""Teleop benchmark: a scripted leader arm drives the follower over two virtual buses.

The leader node reads the leader bus (``simreal emulate --role leader --operator chirp``) at
100 Hz and publishes ``joint_commands`` stamped with the time its read completed; the driver
(200 Hz, ``goal_rate_limit`` off so the goal written is the command itself) writes it to the
follower bus, whose ``--trace`` records when each SYNC WRITE of Goal Position arrived. Each
command is matched to the first goal write after its stamp carrying exactly its ticks:

* ``latency_ms`` p50 / p99 / max: leader read completed -> follower goal on the bus, and as a
  ratio to the driver's cycle period (the wait for the next bus cycle is the floor);
* ``matched_fraction``: commands whose goal reached the bus (a command overtaken by the next
  one before a driver cycle is never written: the driver writes only its latest target);
* ``leader_rate_hz`` achieved against the 100 Hz asked (ratio), and the driver's goal writes
  per second against its 200 Hz.
"""

from __future__ import annotations

from pathlib import Path
import sys
import tempfile
import time
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.ros import messages
from simreal_ros.ros.client import RosClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import context, ratio  # noqa: E402

DOMAIN = bench_domain(7)
LEADER_HZ = 100.0
DRIVER_HZ = 200.0
GOAL = ct.BY_NAME['goal_position'].address


def goal_writes(trace: Path, ids: list[int]) -> list[tuple[int, tuple[int, ...]]]:
    """(arrival ns, goal ticks in robot order) of every SYNC WRITE of Goal Position."""
    out = []
    for line in trace.read_text(encoding='utf-8').splitlines():
        kind, addr, length, *rest = line.split(' ')
        if kind != 'sync_write' or int(addr) != GOAL or int(length) != 4:
            continue
        t = int(rest[0])
        data = {int(sid): bytes.fromhex(h) for sid, h in (a.split(':') for a in rest[1:])}
        out.append((t, tuple(ct.to_signed(int.from_bytes(data[s], 'little'), 4)
                             for s in ids)))
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Measure leader read -> follower goal written; return the figures."""
    robot = load_robot('simreal_arm')
    ids = [j.servo.servo_id for j in robot.joints]
    seconds = 5.0 if quick else 20.0
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    out: dict[str, Any] = {'seconds': seconds, 'leader_rate_asked_hz': LEADER_HZ,
                           'driver_rate_hz': DRIVER_HZ, **context(0, False)}
    with tempfile.TemporaryDirectory(prefix='simreal_bench_teleop_') as d:
        tmp = Path(d)
        trace = tmp / 'follower.trace'
        client = RosClient(DOMAIN, 'bench_teleop')
        commands = client.collect(JointState, 'joint_commands')
        with EmulatorProcess(link=tmp / 'follower', env=env, trace=trace) as follower, \
                EmulatorProcess(link=tmp / 'leader', env=env, role='leader',
                                operator='chirp,amplitude=0.25,start_s=3') as leader:
            drv = NodeProcess(NodeSpec('dynamixel_driver', 'dynamixel_driver', '', {
                'port': follower.port, 'rate_hz': DRIVER_HZ, 'goal_rate_limit': False}),
                env, tmp)
            lead = NodeProcess(NodeSpec('leader', 'leader', '', {
                'port': leader.port, 'rate_hz': LEADER_HZ, 'start_mode': 'blend',
                'blend_speed_rad_s': 2.0}), env, tmp)
            try:
                client.wait_for(lambda: len(commands) > 0, 60, 'the first joint command')
                # measure once the blend is over (the chirp starts 3 s after the emulator)
                t_start = leader.line_time_ns('ready') + int(4e9)
                client.wait_for(lambda: time.time_ns() > t_start + seconds * 1e9,
                                seconds + 90, 'the measurement window')
            finally:
                lead.stop()
                drv.stop()
                client.close()
        writes = goal_writes(trace, ids)
    cmds = [(messages.stamp_to_ns(m.header.stamp),
             tuple(j.servo.rad_to_ticks(float(q)) for j, q in zip(robot.joints, m.position,
                                                                 strict=True)))
            for _t, m in commands]
    cmds = [c for c in cmds if t_start <= c[0] <= t_start + seconds * 1e9]
    w_times = np.array([t for t, _ in writes], dtype=np.int64)
    latencies = []
    for stamp, ticks in cmds:
        k = int(np.searchsorted(w_times, stamp))
        for t, w in writes[k:k + 20]:  # within the next 20 goal writes
            if w == ticks:
                latencies.append((t - stamp) / 1e6)
                break
    lat = np.array(latencies)
    in_window = [t for t in w_times if t_start <= t <= t_start + seconds * 1e9]
    period_ms = 1e3 / DRIVER_HZ
    out.update({
        'commands': len(cmds), 'matched_fraction': ratio(len(lat), len(cmds)),
        'latency_ms': {'p50': float(np.percentile(lat, 50)), 'p99': float(np.percentile(lat, 99)),
                       'max': float(lat.max())} if lat.size else None,
        'latency_p50_per_driver_period': ratio(float(np.percentile(lat, 50)), period_ms)
        if lat.size else None,
        'leader_rate_hz': len(cmds) / seconds,
        'leader_rate.ratio_to_asked': ratio(len(cmds) / seconds, LEADER_HZ),
        'driver_goal_writes_hz': len(in_window) / seconds,
        'driver_goal_writes.ratio_to_asked': ratio(len(in_window) / seconds, DRIVER_HZ)})
    return out


if __name__ == '__main__':
    import json
    print(json.dumps(run(quick='--quick' in sys.argv)))
