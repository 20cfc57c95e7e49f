"""``simreal demo``: the launch plan plus an observer that summarises what happened."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

from simreal_ros.bringup.launcher import Launcher
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.core.robot import load_robot
from simreal_ros.core.tracking import tracking_summary


def summarize(monitor: Any, robot_names: list[str]) -> dict[str, Any]:
    """Build the demo summary from a :class:`simreal_ros.ros.monitor.TopicMonitor`."""
    with monitor.lock:
        states = list(monitor.states)
        commands = [c for c in monitor.commands if list(c[1]) == robot_names]
        diag = dict(monitor.diagnostics)
    tracking = tracking_summary(robot_names, [s[0] for s in states], [s[1] for s in states],
                                [c[0] for c in commands], [c[2] for c in commands], skip_s=0.5)
    bridge = next((v for k, v in diag.items() if k.endswith('sim bridge')), {})
    return {
        'topics': {t: {'messages': monitor.counts.get(t, 0),
                       'rate_hz': round(monitor.rate_hz(t), 2)}
                   for t in ('joint_states', 'joint_commands', 'imu/data')},
        'real_time_factor': float(bridge.get('real_time_factor', 'nan')),
        'commands_rejected': int(bridge.get('commands_rejected', '0')),
        'tracking': tracking,
    }


def format_summary(s: Mapping[str, Any]) -> str:
    """Render the summary for a terminal."""
    lines = ['', 'simreal demo summary']
    for topic, v in s['topics'].items():
        lines.append(f'  {topic:<15} {v["messages"]:>6} messages  {v["rate_hz"]:8.1f} Hz')
    lines.append(f'  real-time factor {s["real_time_factor"]:.3f}, '
                 f'rejected commands {s["commands_rejected"]}')
    lines.append(f'  tracking error, state - command held at the state stamp '
                 f'({s["tracking"]["samples"]} samples):')
    lines.append(f'    {"joint":<16}{"rmse [rad]":>12}{"max [rad]":>12}')
    for name, e in s['tracking']['joints'].items():
        lines.append(f'    {name:<16}{e["rmse"]:>12.4f}{e["max"]:>12.4f}')
    return '\n'.join(lines)


def run_demo(nodes: Sequence[NodeSpec], env: Mapping[str, str], as_json: bool = False) -> int:
    """Start ``nodes``, observe the root topics, and print the summary; return the exit code."""
    os.environ.update(env)
    from simreal_ros.ros.monitor import TopicMonitor
    bridge = next(n for n in nodes if n.kind == 'sim_bridge')
    robot = load_robot(str(bridge.parameters['robot']))
    monitor = TopicMonitor(namespace=bridge.namespace, domain_id=int(env['ROS_DOMAIN_ID']))
    try:
        code = Launcher(nodes, env).run()
    finally:
        summary = summarize(monitor, robot.joint_names)
        monitor.close()
    print(json.dumps(summary) if as_json else format_summary(summary), flush=True)
    if code == 0 and summary['tracking']['samples'] == 0:
        print('simreal demo: error: no joint_states/joint_commands were observed', flush=True)
        return 1
    return code
