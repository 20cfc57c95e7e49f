"""``simreal robot check NAME|FILE``: a robot spec checked against its model, every problem.

Prints each problem as one line ``<file>: <what> — <what to fix>`` and exits 1 when there is
any; prints one summary line and exits 0 when there is none. The checks:
simreal_ros/core/robot_check.py; the guide that uses it: docs/robots.md.
"""

from __future__ import annotations

import argparse
from typing import Any

EXIT_PROBLEMS = 1


def cmd_robot_check(ns: argparse.Namespace) -> int:
    """Check a robot spec and its model; print the problems or the summary."""
    from simreal_ros.core.robot_check import check_robot, summary
    robot, problems = check_robot(ns.robot)
    for problem in problems:
        print(problem)
    if problems or robot is None:
        print(f'{len(problems)} problem{"s" if len(problems) != 1 else ""} found')
        return EXIT_PROBLEMS
    print(summary(robot))
    return 0


def add_commands(sub: Any) -> None:
    """Add ``robot check`` to the ``simreal`` parser."""
    p = sub.add_parser('robot', help='robot specs: check one against its model',
                       description='robot specs and their models (docs/robots.md)')
    rsub = p.add_subparsers(dest='robot_command', metavar='SUBCOMMAND', required=True)
    c = rsub.add_parser('check', help='check a robot spec against its URDF/MJCF model',
                        description=__doc__.splitlines()[0])
    c.add_argument('robot', metavar='NAME|FILE', help='robot spec: a shipped name '
                   '(simreal_arm) or a path to its YAML file')
    c.set_defaults(func=cmd_robot_check)
