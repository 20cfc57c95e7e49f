"""``simreal demo``: the launch plan plus an observer that summarises what happened."""

from __future__ import annotations

from dataclasses import replace
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from simreal_ros.bringup.launcher import Launcher
from simreal_ros.bringup.planner import NodeSpec, plan
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import SimrealError
from simreal_ros.gap.tracking import tracking_summary


def summarize(monitor: Any, robot_names: list[str]) -> dict[str, Any]:
    """Build the demo summary from a :class:`simreal_ros.ros.monitor.TopicMonitor`."""
    with monitor.lock:
        states = list(monitor.states)
        commands = [c for c in monitor.commands if list(c[1]) == robot_names]
        diag = dict(monitor.diagnostics)
    tracking = tracking_summary(robot_names, [s[0] for s in states], [s[1] for s in states],
                                [c[0] for c in commands], [c[2] for c in commands], skip_s=0.5)
    bridge: dict[str, str] = next((v for k, v in diag.items() if k.endswith('sim bridge')),
                                  {})
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


def format_gap(metrics: Mapping[str, Any], out_dir: Path) -> str:
    """Render the gap part of the demo for a terminal."""
    gap = metrics.get('gap') or {}
    pair = metrics.get('pairing') or {}
    lag = gap.get('lag_ms')
    lines = ['', f'  sim-to-real gap, {pair.get("primary")} - {pair.get("secondary")} '
             f'({gap.get("pairs", 0)} pairs, lag '
             f'{"unknown" if lag is None else f"{lag:.1f}"} ms):',
             f'    {"joint":<16}{"rmse [rad]":>12}{"max [rad]":>12}']
    if gap.get('valid') is False:
        lines.insert(2, f'  INVALID, computed over bad data: {gap.get("invalid_reason")}')
    for name, e in (gap.get('per_joint') or {}).items():
        lines.append(f'    {name:<16}{e["rmse_rad"] or 0:>12.4f}{e["max_abs_rad"] or 0:>12.4f}')
    for route, st in ((metrics.get('injector') or {}).get('routes') or {}).items():
        if st.get('delivered'):
            lines.append(f'  injected latency {route:<12} p50 {st["latency_ms_p50"]:.2f} ms, '
                         f'p99 {st["latency_ms_p99"]:.2f} ms, {st["delivered"]} delivered of '
                         f'{st["events"]} events')
    lines += [f'  bag:    {out_dir / "bag"}', f'  report: {out_dir / "report" / "report.html"}']
    return '\n'.join(lines)


def run_demo(nodes: Sequence[NodeSpec], env: Mapping[str, str], as_json: bool = False,
             out_dir: Path | None = None) -> int:
    """Start ``nodes``, observe the root topics, and print the summary; return the exit code.

    With ``out_dir`` (the plan records into ``out_dir/bag``), the gap report of the bag is
    written to ``out_dir/report`` and summarised too.
    """
    os.environ.update(env)
    from simreal_ros.ros.monitor import TopicMonitor
    # the observer below also subscribes joint_commands: the excitation waits for one more
    nodes = [replace(n, parameters={**n.parameters, 'wait_for_subscribers':
                                    int(n.parameters.get('wait_for_subscribers', 0)) + 1})
             if n.kind == 'excite' else n for n in nodes]
    backend = next(n for n in nodes if n.kind in ('sim_bridge', 'dynamixel_driver'))
    robot = load_robot(str(backend.parameters['robot']))
    monitor = TopicMonitor(namespace=backend.namespace, domain_id=int(env['ROS_DOMAIN_ID']))
    try:
        code = Launcher(nodes, env).run()
    finally:
        summary = summarize(monitor, robot.joint_names)
        monitor.close()
    metrics: dict[str, Any] | None = None
    if out_dir is not None and (out_dir / 'bag').exists():
        from simreal_ros.report.gap_report import write_report
        rec = next(n for n in nodes if n.kind == 'recorder')
        primary = str(rec.parameters.get('gap_primary', '')) or None
        secondary = str(rec.parameters.get('gap_secondary', '')) or None
        # the demo shows its gap whatever the host did to the data: marked invalid, not refused
        metrics = write_report(str(out_dir / 'bag'), str(out_dir / 'report'),
                               _abs(primary), _abs(secondary), progress=False,
                               allow_bad_data=True)
        summary['gap'] = {'pairing': metrics.get('pairing'), **(metrics.get('gap') or {})}
        summary['bag'] = str(out_dir / 'bag')
        summary['report'] = str(out_dir / 'report' / 'report.html')
    if as_json:
        print(json.dumps(summary), flush=True)
    else:
        print(format_summary(summary), flush=True)
        if metrics is not None:
            print(format_gap(metrics, out_dir or Path('.')), flush=True)
    if code == 0 and summary['tracking']['samples'] == 0:
        print('simreal demo: error: no joint_states/joint_commands were observed', flush=True)
        return 1
    return code


def _abs(topic: str | None) -> str | None:
    return None if topic is None else '/' + topic.lstrip('/')


def run_live_demo(args: dict[str, str], out: Path, reality: str, env: Mapping[str, str],
                  as_json: bool = False) -> int:
    """Run the live demo's plan (``args``) into ``out``; return the exit code.

    Without ``port:=``, a real or twin backend gets the virtual servo bus with ``reality`` as
    its hidden model, its link in ``out``. With ``record:=true`` the bag goes to ``out/bag``.
    """
    import contextlib

    if out.exists() and any(out.iterdir()):
        raise SimrealError(f'--out {out} exists and is not empty; the demo never overwrites')
    record = args.get('record') == 'true'
    if record:
        args.setdefault('bag', str(out / 'bag'))
    with contextlib.ExitStack() as stack:
        if args['backend'] in ('real', 'twin') and not args.get('port'):
            from simreal_ros.hardware.emulator.virtual_bus import EmulatorProcess
            out.mkdir(parents=True, exist_ok=True)
            emu = stack.enter_context(EmulatorProcess(link=out / 'ttyDXL', reality=reality,
                                                      seed=int(args.get('seed', 0))))
            print(f'[demo] virtual servo bus (reality {reality!r}) on {emu.port}', flush=True)
            args['port'] = emu.port
        return run_demo(plan(args), dict(env), as_json=as_json,
                        out_dir=out if record else None)
