"""``simreal launch`` and ``simreal excite``: start a graph, or the excitation node alone."""

from __future__ import annotations

import argparse
import json
from typing import Any

from simreal_ros.cli.common import launch_parser, plan_and_env
from simreal_ros.errors import SimrealError


def cmd_launch(ns: argparse.Namespace) -> int:
    """Plan and start (or with --dry-run, print) the node graph."""
    from simreal_ros.bringup.launcher import Launcher, node_command
    nodes, env = plan_and_env(ns)
    if ns.dry_run:
        from pathlib import Path
        print(f'# ROS_AUTOMATIC_DISCOVERY_RANGE={env["ROS_AUTOMATIC_DISCOVERY_RANGE"]} '
              f'ROS_DOMAIN_ID={env["ROS_DOMAIN_ID"]}')
        for spec in nodes:
            print(json.dumps({'node': spec.fqn, 'executable': spec.executable,
                              'parameters': spec.parameters,
                              'remappings': [list(r) for r in spec.remappings],
                              'required': spec.required,
                              'exit_ends_launch': spec.exit_ends_launch}))
            print('  ' + ' '.join(node_command(spec, Path('<params.yaml>'))))
        return 0
    return Launcher(nodes, env).run()


def cmd_excite(ns: argparse.Namespace) -> int:
    """Run the excitation node in this process."""
    from dataclasses import fields

    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.core.excite_config import ExciteConfig
    from simreal_ros.nodes import excite
    allowed = {f.name for f in fields(ExciteConfig)} | {'duration', 'rate', 'use_sim_time'}
    ros_args: list[str] = []
    for key, value in parse_cli_args(ns.args).items():
        if key not in allowed:
            raise SimrealError(f'unknown excite argument {key!r}; known: {sorted(allowed)}')
        key = {'duration': 'duration_s', 'rate': 'rate_hz'}.get(key, key)
        ros_args += ['-p', f'{key}:={value}']
    return excite.main(['simreal_excite', '--ros-args', *ros_args])


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = launch_parser(sub, 'launch', 'start the node graph of a backend (sim, sim2sim, ...)')
    p.add_argument('--dry-run', action='store_true',
                   help='check every argument and the files they name, print the plan, start '
                        'nothing (a bad one: one error line, exit code 2, as without it)')
    p.set_defaults(func=cmd_launch)
    p = sub.add_parser('excite', help='publish an excitation trajectory on joint_commands',
                       description='publish an excitation trajectory on joint_commands; '
                       'arguments: pattern:=chirp|multisine|steps|waypoints|sysid duration:=S '
                       'robot:= rate:= amplitude:= seed:= f_min_hz:= f_max_hz:= '
                       'sync_to_states:=true|false use_sim_time:=true|false')
    p.add_argument('args', nargs='*', metavar='name:=value')
    p.set_defaults(func=cmd_excite)
