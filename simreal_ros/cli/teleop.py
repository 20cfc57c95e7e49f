"""``simreal calibrate-leader``: measure a leader arm's joint offsets in a known pose.

The operator holds the leader in a pose whose follower joint angles are known (the robot
spec's ``home``, or a YAML/JSON list of angles), the command reads the leader's servos
(torque off) ``--samples`` times, and writes the offsets that map the mean reading onto that
pose (``follower = sign * scale * (leader - offset_rad)``, see docs/teleop.md) to ``--out``.
Signs and scales come from ``--sign``/``--scale`` (``joint=value``, repeatable) or an
existing ``--out`` file, so a recalibration keeps them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys
from typing import Any

import numpy as np
import yaml

from simreal_ros.errors import SimrealError


def _joint_values(entries: list[str], names: list[str], what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for entry in entries:
        name, sep, raw = entry.partition('=')
        if not sep or name not in names:
            raise SimrealError(f'--{what} {entry!r}: expected JOINT=VALUE with a joint among '
                               f'{names}')
        try:
            out[name] = float(raw)
        except ValueError:
            raise SimrealError(f'--{what} {entry!r}: {raw!r} is not a number') from None
    return out


def _pose(text: str, robot: Any) -> np.ndarray:
    if text == 'home':
        return np.asarray(robot.home, dtype=np.float64)
    try:
        values = yaml.safe_load(Path(text).read_text(encoding='utf-8'))
    except (OSError, yaml.YAMLError) as exc:
        raise SimrealError(f'--pose {text}: cannot read it ({exc})') from None
    if not isinstance(values, list) or len(values) != robot.n or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise SimrealError(f'--pose {text}: expected a list of {robot.n} joint angles (rad) in '
                           f'the order {robot.joint_names}')
    return np.asarray(values, dtype=np.float64)


def cmd_calibrate_leader(ns: argparse.Namespace) -> int:
    """Read the leader in a known pose and write its calibration file."""
    from simreal_ros.core.robot import load_robot
    from simreal_ros.hardware.family import bus_class
    from simreal_ros.teleop.control import (
        JointMap,
        LeaderMapping,
        calibration_text,
        load_calibration,
    )
    robot = load_robot(ns.robot)
    leader_robot = load_robot(ns.leader_robot) if ns.leader_robot else robot
    if leader_robot.n != robot.n:
        raise SimrealError(f'leader robot {leader_robot.name} has {leader_robot.n} joints, the '
                           f'follower {robot.name} {robot.n}')
    if ns.samples < 1:
        raise SimrealError(f'--samples {ns.samples}: expected at least 1')
    pose = _pose(ns.pose, robot)
    out = Path(ns.out)
    base = load_calibration(out, robot) if out.exists() else LeaderMapping.identity(robot)
    signs = _joint_values(ns.sign, robot.joint_names, 'sign')
    scales = _joint_values(ns.scale, robot.joint_names, 'scale')
    for name, v in signs.items():
        if v not in (1.0, -1.0):
            raise SimrealError(f'--sign {name}={v:g}: expected 1 or -1')
    for name, v in scales.items():
        if not v > 0:
            raise SimrealError(f'--scale {name}={v:g}: expected a number > 0')
    maps = tuple(JointMap(j.offset_rad, int(signs.get(n, j.sign)), scales.get(n, j.scale))
                 for n, j in zip(robot.joint_names, base.joints, strict=True))
    mapping = LeaderMapping(robot, maps)
    bus = bus_class(leader_robot)(leader_robot, ns.port, ns.baud or leader_robot.bus_baud)
    readings: list[np.ndarray] = []
    try:
        bus.open()
        bus.check_servos(2.0)
        bus.set_torque(False)
        failures = 0
        while len(readings) < ns.samples:
            try:
                readings.append(bus.read_state().position)
            except SimrealError:
                failures += 1
                if failures > 10 + ns.samples:
                    raise
            if len(readings) % 20 == 0:
                print(f'\rread {len(readings)}/{ns.samples}', end='', file=sys.stderr,
                      flush=True)
    finally:
        bus.close()
    print(file=sys.stderr)
    samples = np.array(readings)
    spread = float(np.max(samples.max(axis=0) - samples.min(axis=0)))
    if spread > ns.max_spread:
        raise SimrealError(f'the leader moved during calibration ({spread:.4f} rad between '
                           f'readings, --max-spread {ns.max_spread:g}): hold it still in the '
                           f'pose and run again')
    offsets = mapping.offsets_for_pose(samples.mean(axis=0), pose)
    final = LeaderMapping(robot, tuple(JointMap(float(o), j.sign, j.scale)
                                       for o, j in zip(offsets, maps, strict=True)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(calibration_text(final, ns.pose, leader_robot.name), encoding='utf-8')
    worst = robot.joint_names[int(np.argmax(np.abs(offsets)))]
    print(f'wrote {out}: {len(readings)} readings, spread {spread:.4f} rad, largest offset '
          f'{float(np.max(np.abs(offsets))):.4f} rad ({worst})')
    return 0


def cmd_export(ns: argparse.Namespace) -> int:
    """Export checked teleop episodes as a LeRobot dataset."""
    from simreal_ros.core.robot import load_robot
    from simreal_ros.gap.quality import thresholds_from
    from simreal_ros.report import lerobot_export as lx
    from simreal_ros.teleop.quality import TeleopThresholds
    if ns.format != 'lerobot':
        raise SimrealError(f'--format {ns.format}: only lerobot is supported')
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise SimrealError("the LeRobot export needs pyarrow and pandas: pip install "
                           "'simreal_ros[lerobot]' (or pip install pyarrow pandas)") from None
    robot = load_robot(ns.robot)
    sources = lx.find_sources(ns.bags, robot, thresholds_from([]), TeleopThresholds())
    lx.check_robot(sources, robot)
    fps = ns.fps or lx.default_fps(sources, ns.action_topic)
    summary = lx.export_lerobot(
        sources, Path(ns.out), robot, fps, include_rejected=ns.all, task=ns.task,
        state_topic=ns.state_topic, action_topic=ns.action_topic,
        progress=lambda line: print(line, file=sys.stderr, flush=True))
    for item in summary['skipped']:
        print(f'skipped {item["episode"]} (rejected: {"; ".join(item["reasons"])})',
              file=sys.stderr)
    print(json.dumps(summary) if ns.json else
          f'wrote {summary["out"]}: {len(summary["episodes"])} episodes, {summary["frames"]} '
          f'frames at {fps} fps, {len(summary["skipped"])} skipped'
          + (f', videos {", ".join(summary["videos"])}' if summary['videos'] else ''))
    return 0


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = sub.add_parser('calibrate-leader', help="measure a teleop leader arm's joint offsets",
                       description=__doc__.splitlines()[0] + ' (docs/teleop.md)')
    p.add_argument('--port', required=True, help="the leader arm's serial port")
    p.add_argument('--out', required=True, help='calibration file to write (YAML)')
    p.add_argument('--robot', default='simreal_arm', help='the follower robot spec')
    p.add_argument('--leader-robot', default='', help='the leader arm spec ("" = --robot)')
    p.add_argument('--baud', type=int, default=0, help="bus baud (0 = the spec's)")
    p.add_argument('--pose', default='home', help='the pose the leader is held in: home (the '
                   "robot spec's) or a YAML file with a list of joint angles (rad)")
    p.add_argument('--samples', type=int, default=100, help='readings averaged')
    p.add_argument('--max-spread', type=float, default=0.01, help='largest joint motion '
                   '(rad) allowed between readings')
    p.add_argument('--sign', action='append', default=[], metavar='JOINT=1|-1',
                   help='a reversed leader joint (repeatable)')
    p.add_argument('--scale', action='append', default=[], metavar='JOINT=S',
                   help='a leader joint geared S:1 (repeatable)')
    p.set_defaults(func=cmd_calibrate_leader)
    p = sub.add_parser('export', help='export teleop episodes as a LeRobot dataset',
                       description='export episodes (directories of simreal_episodes, '
                       'directories of them, or bags) as a LeRobot v3.0 dataset; only '
                       'accepted episodes unless --all (docs/teleop.md)')
    p.add_argument('bags', nargs='+', metavar='BAG', help='episode, episodes directory or bag')
    p.add_argument('--format', default='lerobot', help='output format (lerobot)')
    p.add_argument('--out', required=True, help='dataset directory to create')
    p.add_argument('--fps', type=int, default=0, help='frames per second (0 = the rate of '
                   'the commands)')
    p.add_argument('--all', action='store_true', help='export rejected episodes too')
    p.add_argument('--task', default='', help='task label for episodes without one')
    p.add_argument('--robot', default='simreal_arm', help='robot spec of the episodes')
    p.add_argument('--state-topic', default='/joint_states', help='observation.state source')
    p.add_argument('--action-topic', default='/joint_commands', help='action source')
    p.add_argument('--json', action='store_true', help='print the summary as JSON')
    p.set_defaults(func=cmd_export)
