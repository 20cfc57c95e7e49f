"""The ``simreal`` command (also ``python -m simreal_ros``).

Sub-commands take ``name:=value`` arguments like ``ros2 launch``; every one has ``--help`` and
exits non-zero with a one-line reason on bad input: 2, or 3 when an input bag is unreadable or
corrupt (``simreal bag repair BAG`` recovers its intact chunks).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from simreal_ros.errors import (
    EXIT_BAD_DATA,
    EXIT_CORRUPT_INPUT,
    BadDataError,
    BagCorruptError,
    SimrealError,
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``simreal``: one ``add_commands(sub)`` per group."""
    from simreal_ros import __version__
    from simreal_ros.cli import (
        calibrate,
        demo,
        launch,
        policy,
        robot,
        ros_tools,
        sweep,
        teleop,
        tools,
    )
    from simreal_ros.cli.report import add_commands as add_report_commands
    from simreal_ros.cli.sysid import add_commands as add_sysid_commands
    parser = argparse.ArgumentParser(prog='simreal', description=__doc__.splitlines()[0])
    parser.add_argument('--version', action='version', version=f'simreal_ros {__version__}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)
    for add in (launch.add_commands, demo.add_commands, policy.add_commands, tools.add_commands,
                ros_tools.add_commands, teleop.add_commands, calibrate.add_commands,
                robot.add_commands, sweep.add_commands, sweep.add_zoo_commands,
                add_report_commands, add_sysid_commands):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``simreal``."""
    ns = build_parser().parse_args(argv)
    try:
        return int(ns.func(ns))
    except BadDataError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return EXIT_BAD_DATA
    except BagCorruptError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return EXIT_CORRUPT_INPUT
    except SimrealError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    os.environ.setdefault('PYTHONUNBUFFERED', '1')
    raise SystemExit(main())
