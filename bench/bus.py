"""Servo bus benchmark on the virtual bus, through the real SDK and the real driver node.

* bus cycles/s for 6 servos (group sync read of Realtime Tick + present current, velocity and
  position, 16 bytes a servo; group sync write of goal position) at 1 Mbps and 4 Mbps, as a
  ratio to the byte-time limit of exactly those packets at that baud (Return Delay Time 0);
* the driver node's achieved ``joint_states`` rate at 250 Hz and 500 Hz (1 Mbps), as a ratio
  to the configured rate: the states a subscriber got whose stamps lie in a window of wall
  time, counted once every state of the window has arrived (a count of arrivals within the
  window, ``received_in_window_hz``, also shows how late the starved subscriber is); and at
  30 Hz, the rate LeRobot records at, on the SO-101's STS bus (``driver_30hz_so101``) and
  on the Dynamixel arm (``driver_30hz``), target >= 0.95;
* the time from the port coming back (emulator ``replugged``) to the first fresh
  ``joint_states`` (target < 1 s);
* the same raw cycle on the virtual Feetech STS bus (6 STS3215, SYNC READ of present position
  .. present current, 15 bytes a servo; SYNC WRITE of goal position, 2 bytes) through the
  vendor's ``scservo_sdk`` at 1 Mbps, as a ratio to its byte-time limit (target >= 0.7),
  measured right after the Dynamixel bus at 1 Mbps in the same run, with the host's CPU time
  per cycle; once more with the SYNC READ's answers taken in one read instead of the SDK's
  per-packet receive (``sts_bus_1mbps_one_read``); and once more
  with the SDK's own serial settings (``sts_bus_1mbps_sdk_default``: a busy-polling read,
  timeout 0) to show where the time goes (docs/feetech.md); with ``--rt`` both 1 Mbps buses
  once more with the emulator and the bus loop under SCHED_FIFO (``*_rt``), out of the way of
  whatever else the host runs.

``--buses-only`` measures the raw bus cycles only (no ROS nodes).
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
from simreal_ros.bringup.planner import EMULATOR_RT_PRIORITY, NodeSpec, plan
from simreal_ros.core.netenv import bench_domain, ros_env
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.dynamixel.bus import DynamixelBus
from simreal_ros.hardware.dynamixel.wire import byte_time_limit_hz
from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
from simreal_ros.hardware.feetech.bus import FeetechBus
from simreal_ros.hardware.feetech.wire import byte_time_limit_hz as sts_byte_time_limit_hz
from simreal_ros.ros import messages
from simreal_ros.ros.client import RosClient

# bench/_load.py, also when this file is run by path (runpy in simreal bench, tests)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import context, cpu_load, ratio, variants  # noqa: E402

DOMAIN = bench_domain(0)
RT_LOOP_PRIORITY = 80  # the raw bus loops under --rt (the driver's bus thread has 80 too)
LEROBOT_FPS = 30.0  # the rate LeRobot records (and its SO-101 datasets hold) frames at


def driver_spec(args: dict[str, str]) -> NodeSpec:
    """The plan's Dynamixel driver node for ``args``: the benchmark measures it alone.

    The plan of ``backend:=real`` also holds the robot's state publisher (bringup/plan_tf.py),
    which takes no part in the bus timing.
    """
    (spec,) = [n for n in plan(args) if n.kind == 'dynamixel_driver']
    return spec


def raw_cycles(tmp: Path, env: dict[str, str], baud: int, seconds: float,
               rt: bool = False) -> dict[str, float]:
    robot = load_robot('simreal_arm')
    with EmulatorProcess(link=tmp / f'raw_{baud}_{rt}', baud=baud, env=env,
                         rt_priority=EMULATOR_RT_PRIORITY if rt else 0) as emu, \
            _Fifo(RT_LOOP_PRIORITY if rt else 0):
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
            'failed_cycles': failures, 'load_average_1min': os.getloadavg()[0]}


def sts_spec(tmp: Path) -> Path:
    """simreal_arm on a Feetech bus: STS3215 servos, efforts within their stall torque."""
    import yaml
    base = load_robot('simreal_arm')
    data = yaml.safe_load(base.source.read_text())
    data.update(robot='simreal_arm_sts', urdf=str(base.urdf),
                bus={'family': 'feetech', 'baud': 1_000_000},
                servo_defaults={'model': 'STS3215', 'model_number': 777, 'ticks_per_rev': 4096,
                                'zero_tick': 2048, 'torque_per_amp': 0.71})
    data.pop('cameras', None)
    for joint in data['joints']:
        joint['limits']['effort'] = 1.8
    path = tmp / 'simreal_arm_sts.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


class _Fifo:
    """This thread under SCHED_FIFO ``priority`` while inside (``0``: left as it is)."""

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.old: tuple[int, int] | None = None

    def __enter__(self) -> None:
        if self.priority:
            self.old = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))

    def __exit__(self, *_exc: object) -> None:
        if self.old is not None:
            os.sched_setscheduler(0, self.old[0], os.sched_param(self.old[1]))


def sts_raw_cycles(tmp: Path, env: dict[str, str], seconds: float,
                   read_timeout_s: float = 0.002, rt: bool = False,
                   one_read_sync: bool = False) -> dict[str, float]:
    """Raw cycles of FeetechBus at 1 Mbps; ``read_timeout_s`` 0 is the SDK's own busy poll.

    ``rt``: the emulator (90) and this loop (80) under SCHED_FIFO, out of the other work's way.
    ``one_read_sync``: the SYNC READ's answers in one read, not the SDK's per-packet receive.
    ``host_cpu_per_cycle_us_p50``: this thread's CPU time per cycle (``time.thread_time``).
    """
    spec = sts_spec(tmp)
    robot = load_robot(spec)
    baud = 1_000_000
    with EmulatorProcess(link=tmp / f'sts_{read_timeout_s}_{rt}_{one_read_sync}',
                         robot=str(spec), baud=baud,
                         env=env, rt_priority=EMULATOR_RT_PRIORITY if rt else 0) as emu, \
            _Fifo(RT_LOOP_PRIORITY if rt else 0):
        bus = FeetechBus(robot, emu.port, baud, read_timeout_s=read_timeout_s,
                         one_read_sync=one_read_sync)
        bus.open()
        bus.check_servos()
        bus.configure()
        n = failures = 0
        cpu_s = []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            c0 = time.thread_time()
            try:
                state = bus.read_state()
                bus.write_goal(state.position)
                n += 1
            except Exception:  # noqa: BLE001 - counted; the benchmark keeps going
                failures += 1
            cpu_s.append(time.thread_time() - c0)
        elapsed = time.perf_counter() - t0
        bus.set_torque(False)
        bus.close()
    limit = sts_byte_time_limit_hz(robot.n, baud)
    rate = n / elapsed
    return {'cycles_per_s': rate, 'byte_time_limit_hz': limit, 'ratio_to_limit': rate / limit,
            'failed_cycles': failures, 'target_ratio': 0.7,
            'load_average_1min': os.getloadavg()[0],
            'host_cpu_per_cycle_us_p50': float(np.median(cpu_s)) * 1e6 if cpu_s else 0.0}


def driver_rate(client: RosClient, tmp: Path, env: dict[str, str], rate_hz: float,
                seconds: float, rt: bool = False, robot: str = 'simreal_arm'
                ) -> dict[str, float]:
    """The driver node's joint_states rate; ``rt``: driver and emulator under SCHED_FIFO.

    ``robot``: the arm on the virtual bus (``so101``: its STS bus, the plan's driver for it).
    """
    from diagnostic_msgs.msg import DiagnosticArray
    ns = f'rate{int(rate_hz)}{"rt" if rt else ""}{robot}'
    states = client.collect(JointState, f'/{ns}/joint_states')
    diags = client.collect(DiagnosticArray, '/diagnostics')
    with EmulatorProcess(link=tmp / f'drv_{ns}', env=env, robot=robot,
                         rt_priority=EMULATOR_RT_PRIORITY if rt else 0) as emu:
        spec = driver_spec({'backend': 'real', 'port': emu.port, 'namespace': ns,
                            'robot': robot, 'driver_rate': str(rate_hz),
                            'realtime': str(rt).lower()})
        node = NodeProcess(spec, env, tmp)

        def stamps() -> list[int]:
            return [messages.stamp_to_ns(m.header.stamp) for _t, m in list(states)]

        try:
            client.wait_for(lambda: len(states) > 50, 60, f'{ns} joint_states')
            n0, t0 = len(states), time.monotonic()
            a_ns = time.time_ns()  # the window, on the clock of the stamps
            time.sleep(seconds)
            n1, t1 = len(states), time.monotonic()
            b_ns = a_ns + int(seconds * 1e9)
            # every state stamped in the window, however late this (starved) subscriber
            # takes it in: the next one stamped after the window has arrived
            client.wait_for(lambda: stamps()[-1] >= b_ns, 30, f'{ns} joint_states after')
            d = next(({kv.key: kv.value for kv in st.values} for _t, a in reversed(diags)
                      for st in a.status if st.name.startswith(f'/{ns}/')), {})
        finally:
            node.stop()
    in_window = np.array([t for t in stamps() if a_ns <= t < b_ns])
    periods = np.diff(in_window) / 1e6
    achieved = in_window.size / seconds
    received = (n1 - n0) / (t1 - t0)
    cycle = float(d.get('cycle_rate_hz', 'nan'))
    return {'configured_hz': rate_hz, 'achieved_hz': achieved,
            'ratio_to_configured': achieved / rate_hz, 'load_average_1min': os.getloadavg()[0],
            # what a count of arrivals over the same wall-clock time gave (before 2026-12-07:
            # the benchmark's own subscriber, starved, took states in late and undercounted)
            'received_in_window_hz': received,
            # the driver's own count of bus cycles over its last diagnostics period
            'driver_cycle_rate_hz': cycle, 'driver_cycle_ratio': cycle / rate_hz,
            'bus_thread': f'{d.get("rt.bus.policy")} {d.get("rt.bus.priority")}',
            # since the node started: a state read that failed (timeout, stale, ...) is a
            # state not published; the last one's message says which
            'read_failures': int(d.get('read_failures', -1)),
            'last_error': str(d.get('last_error', '')),
            'stamp_period_p99_ms': float(np.percentile(periods, 99)) if periods.size else 0.0}


def recovery(client: RosClient, tmp: Path, env: dict[str, str]) -> dict[str, float]:
    states = client.collect(JointState, '/replug/joint_states')
    with EmulatorProcess(link=tmp / 'replug', env=env,
                         faults='unplug_at=6.0,replug_at=7.0') as emu:
        spec = driver_spec({'backend': 'real', 'port': emu.port, 'namespace': 'replug'})
        node = NodeProcess(spec, env, tmp)
        try:
            client.wait_for(lambda: len(states) > 20, 60, 'replug joint_states')
            emu.wait_for_line('replugged', 20)
            # event times on one clock: the emulator's line as read, the state's stamp
            t_replug = emu.line_time_ns('replugged')

            def stamps() -> list[int]:
                return [messages.stamp_to_ns(m.header.stamp) for _t, m in list(states)]

            client.wait_for(lambda: stamps()[-1] > t_replug, 20, 'joint_states after replug')
            first = next(t for t in stamps() if t > t_replug)
        finally:
            node.stop()
    return {'recovery_after_replug_s': (first - t_replug) / 1e9, 'target_s': 1.0}


def run(quick: bool = False, load: int = 0, rt: bool = False,
        drivers_only: bool = False, buses_only: bool = False) -> dict[str, Any]:
    """Run the measurements and return the figures.

    ``load``: CPU-bound processes meanwhile; ``rt``: the driver rates are measured a second
    time with the driver (80) and the emulator (90) under SCHED_FIFO (``*_rt`` keys, and
    ``rt_over_default`` ratios of the achieved/asked rates). ``buses_only``: the raw bus
    cycles only (Dynamixel and Feetech, side by side), no ROS nodes.
    """
    env = ros_env(discovery='localhost', domain_id=DOMAIN)
    os.environ.update(env)
    seconds = 0.75 if quick else 5.0
    client = None if buses_only else RosClient(DOMAIN, 'bench_bus_client')
    try:
        started = context(load, rt)  # its load average is the one before the first figure
        with cpu_load(load), tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            out: dict[str, Any] = {} if drivers_only else {
                'bus_1mbps': raw_cycles(tmp, env, 1_000_000, seconds),
                'bus_4mbps': raw_cycles(tmp, env, 4_000_000, seconds)}
            if not drivers_only:
                out['sts_bus_1mbps'] = sts_raw_cycles(tmp, env, seconds)
                out['sts_bus_1mbps_one_read'] = sts_raw_cycles(tmp, env, seconds,
                                                               one_read_sync=True)
                out['sts_bus_1mbps_sdk_default'] = sts_raw_cycles(tmp, env, seconds, 0.0)
                out['sts_over_dynamixel'] = {'ratio_to_limit': ratio(
                    out['sts_bus_1mbps']['ratio_to_limit'],
                    out['bus_1mbps']['ratio_to_limit'])}
            if rt and not drivers_only:  # the same two buses, both ends under SCHED_FIFO
                out['bus_1mbps_rt'] = raw_cycles(tmp, env, 1_000_000, seconds, True)
                out['sts_bus_1mbps_rt'] = sts_raw_cycles(tmp, env, seconds, rt=True)
                out['sts_over_dynamixel_rt'] = {'ratio_to_limit': ratio(
                    out['sts_bus_1mbps_rt']['ratio_to_limit'],
                    out['bus_1mbps_rt']['ratio_to_limit'])}
            if buses_only:
                out.update(started)
                out['load_average_1min'] = os.getloadavg()[0]
                return out
            assert client is not None
            for variant in variants(rt):
                sfx = '_rt' if variant == 'rt' else ''
                for hz in (250.0, 500.0):
                    out[f'driver_{int(hz)}hz{sfx}'] = driver_rate(client, tmp, env, hz,
                                                                  seconds, variant == 'rt')
            # the rate LeRobot records its datasets at (30 fps): target >= 0.95 of it, on the
            # SO-101's STS bus and on the Dynamixel arm; twice as long (a count of 30 Hz
            # messages is coarse)
            for robot, key in (('so101', 'driver_30hz_so101'), ('simreal_arm', 'driver_30hz')):
                out[key] = {**driver_rate(client, tmp, env, LEROBOT_FPS, 2 * seconds,
                                          robot=robot), 'target_ratio': 0.95}
            if rt:
                out['rt_over_default'] = {
                    f'driver_{hz}hz.ratio_to_configured': ratio(
                        out[f'driver_{hz}hz_rt']['ratio_to_configured'],
                        out[f'driver_{hz}hz']['ratio_to_configured']) for hz in (250, 500)}
            if not drivers_only:
                out['replug'] = recovery(client, tmp, env)
            out.update(started)
            out['load_average_1min'] = os.getloadavg()[0]
            return out
    finally:
        if client is not None:
            client.close()


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--load', type=int, default=0)
    ap.add_argument('--rt', action='store_true')
    ap.add_argument('--drivers-only', action='store_true')
    ap.add_argument('--buses-only', action='store_true')
    a = ap.parse_args()
    print(json.dumps(run(a.quick, a.load, a.rt, a.drivers_only, a.buses_only), indent=2))
