"""What the ``simreal`` sub-commands share: the launch-argument parser and the plan + env."""

from __future__ import annotations

import argparse
from typing import Any


def launch_parser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    """Add sub-command ``name`` taking ``name:=value`` launch arguments (listed in --help)."""
    from simreal_ros.bringup.planner import ARGUMENTS
    epilog = 'launch arguments (name:=value):\n' + '\n'.join(
        f'  {k:<17} {a.description}' + (f' {{{"|".join(c for c in a.choices if c)}}}'
                                          if a.choices else '')
        + f' [default: {a.default!r}]' for k, a in ARGUMENTS.items())
    p = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('args', nargs='*', metavar='name:=value')
    p.add_argument('--discovery', default=None,
                   help='ROS_AUTOMATIC_DISCOVERY_RANGE for the nodes: localhost (default '
                        'unless already set) or subnet for a multi-machine robot')
    p.add_argument('--domain-id', type=int, default=None, help='ROS_DOMAIN_ID for the nodes')
    parser: argparse.ArgumentParser = p
    return parser


def plan_and_env(ns: argparse.Namespace, defaults: dict[str, str] | None = None
                 ) -> tuple[list[Any], dict[str, str]]:
    """Return the plan of ``ns.args`` (over ``defaults``) and the environment of its nodes."""
    from simreal_ros.bringup.planner import parse_cli_args, plan
    from simreal_ros.core.netenv import ros_env
    args = {**(defaults or {}), **parse_cli_args(ns.args)}
    return plan(args), ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
