"""Servo bus benchmark on the virtual bus, through the real SDK and the real driver node.

* bus cycles/s for 6 servos (group sync read of Realtime Tick + present current, velocity and
  position, 16 bytes a servo; group sync write of goal position) at 1 Mbps and 4 Mbps, as a
  ratio to the byte-time limit of exactly those packets at that baud (Return Delay Time 0);
* the driver node's achieved ``joint_states`` rate at 250 Hz and 500 Hz (1 Mbps), measured by
  a subscriber, as a ratio to the configured rate;
* the time from the port coming back (emulator ``replugged``) to the first fresh
  ``joint_states`` (target < 1 s).
"""

from __future__ import annotations

import os
from pathlib import Path
import sys
import tempfile
import time
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState

from simreal_ros.bringup.launcher import NodeProcess
from simreal_ros.bringup.planner import plan
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.dynamixel_bus import DynamixelBus, byte_time_limit_hz
from simreal_ros.hardware.virtual_bus import EmulatorProcess
from simreal_ros.ros import messages
from simreal_ros.ros.client import RosClient

DOMAIN = bench_domain(0)


def raw_cycles(tmp: Path, env: dict[str, str], baud: int, seconds: float) -> dict[str, float]:
    robot = load_robot('simreal_arm')
    with EmulatorProcess(link=tmp / f'raw_{baud}', baud=baud, env=env) as emu:
        bus = DynamixelBus(robot, emu.port, baud, return_delay_us=0)
        bus.open()
        bus.check_servos()
        bus.configure()
        goal = robot.home.copy()
        n = failures = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            try:
                state = bus.read_state()
                goal = state.position
                bus.write_goal(goal)
                n += 1
            except Exception:  # noqa: BLE001 - counted; the benchmark keeps going
                failures += 1
        elapsed = time.perf_counter() - t0
        bus.set_torque(False)
        bus.close()
    limit = byte_time_limit_hz(robot.n, baud)
    rate = n / elapsed
    return {'cycles_per_s': rate, 'byte_time_limit_hz': limit, 'ratio_to_limit': rate / limit,
            'failed_cycles': failures}


def driver_rate(client: RosClient, tmp: Path, env: dict[str, str], rate_hz: float,
                seconds: float) -> dict[str, float]:
    ns = f'rate{int(rate_hz)}'
    states = client.collect(JointState, f'/{ns}/joint_states')
    with EmulatorProcess(link=tmp / f'drv_{ns}', env=env) as emu:
        (spec,) = plan({'backend': 'real', 'port': emu.port, 'namespace': ns,
                        'driver_rate': str(rate_hz)})
        node = NodeProcess(spec, env, tmp)
        try:
            client.wait_for(lambda: len(states) > 50, 60, f'{ns} joint_states')
            n0, t0 = len(states), time.monotonic()
            time.sleep(seconds)
            n1, t1 = len(states), time.monotonic()
        finally:
            node.stop()
    stamps = np.array([messages.stamp_to_ns(m.header.stamp) for _t, m in states[n0:n1]])
    periods = np.diff(stamps) / 1e6
    achieved = (n1 - n0) / (t1 - t0)
    return {'configured_hz': rate_hz, 'achieved_hz': achieved,
            'ratio_to_configured': achieved / rate_hz,
            'stamp_period_p99_ms': float(np.percentile(periods, 99)) if periods.size else 0.0}


def recovery(client: RosClient, tmp: Path, env: dict[str, str]) -> dict[str, float]:
    states = client.collect(JointState, '/replug/joint_states')
    with EmulatorProcess(link=tmp / 'replug', env=env,
                         faults='unplug_at=6.0,replug_at=7.0') as emu:
        (spec,) = plan({'backend': 'real', 'port': emu.port, 'namespace': 'replug'})
        node = NodeProcess(spec, env, tmp)
        try:
            client.wait_for(lambda: len(states) > 20, 60, 'replug joint_states')
            emu.wait_for_line('replugged', 20)
            t_replug = time.monotonic_ns()
            n = len(states)
            client.wait_for(lambda: len(states) > n and states[-1][0] > t_replug, 20,
                            'joint_states after replug')
            first = next(t for t, _m in states[n:] if t > t_replug)
        finally:
            node.stop()
    return {'recovery_after_replug_s': (first - t_replug) / 1e9, 'target_s': 1.0}


def run(quick: bool = False) -> dict[str, Any]:
    """Run the measurements and return the figures."""
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    os.environ.update(env)
    seconds = 1.5 if quick else 5.0
    client = RosClient(DOMAIN, 'bench_bus_client')
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            return {
                'bus_1mbps': raw_cycles(tmp, env, 1_000_000, seconds),
                'bus_4mbps': raw_cycles(tmp, env, 4_000_000, seconds),
                'driver_250hz': driver_rate(client, tmp, env, 250.0, seconds),
                'driver_500hz': driver_rate(client, tmp, env, 500.0, seconds),
                'replug': recovery(client, tmp, env),
                'cpu_count': os.cpu_count(),
                'load_average_1min': os.getloadavg()[0],
            }
    finally:
        client.close()


if __name__ == '__main__':
    import json
    print(json.dumps(run(quick='--quick' in sys.argv), indent=2))
