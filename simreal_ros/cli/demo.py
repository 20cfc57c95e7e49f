"""``simreal demo``: the flywheel (default) or, with ``--live``, the live twin demo."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simreal_ros.cli.common import launch_parser
from simreal_ros.errors import SimrealError

DEMO_HELP = 'the sim-to-real flywheel on the virtual servo bus: record, identify, compare'


DEMO_DESCRIPTION = """\
The sim-to-real flywheel, end to end, on the virtual servo bus (no hardware, no arguments,
a few minutes on 2 cores). Stages, with a progress line each:

  1 fit data       the virtual servo bus of --robot with a hidden reality (--reality), the
                   servo driver, the latency injector (usb_serial) and the sysid excitation
                   within the robot spec's limits, recorded to RUN/bags/fit
  2 held-out data  a different excitation (--holdout-pattern, seed + 1) -> RUN/bags/holdout
  3 identify       simreal sysid on the fit bag: damping, frictionloss, armature and the
                   command delay (so101: kp too, no tool mass) -> RUN/identified.yaml
  4 replay gap     the held-out commands replayed open loop on the nominal sim and on the
                   identified sim, from the measured initial state, over the excitation window
                   only (--settle s after the first command to the last): RMSE per joint
                   against the virtual arm, before and after
  5 policy gap     the example policy on the nominal sim, the identified sim and the virtual
                   arm, the same seeded episodes: success, time to goal, final error (skipped,
                   with the reason, for a robot without a policy: so101)
  6 residual       simreal residual fit on the fit bag against the identified overlay ->
                   RUN/residual.pt, RUN/identified_residual.yaml; scored on the held-out bag.
                   It pays off when its k-step (0.2 s) RMSE is <= 70 % of the identified
                   sim's and the open loop is not worse: then the policy runs on it too
  7 summary        RUN/summary.json, RUN/summary.html (plots embedded), RUN/reports/*.json,
                   RUN/logs/*.log and a table on the terminal

The run folder must not exist or be empty (the demo never overwrites). Ctrl-C stops every
process it started. With --live, the former demo: a MuJoCo twin next to the virtual arm, live
gap, bag and gap report, with the launch arguments below."""


#: Launch arguments of the live demo (``simreal demo --live``): the twin next to the virtual arm.
LIVE_DEMO_DEFAULTS = {'backend': 'twin', 'excite': 'chirp', 'duration': '8',
                      'latency': 'usb_serial', 'record': 'true'}


def cmd_demo(ns: argparse.Namespace) -> int:
    """Run the flywheel (default) or, with --live, the live twin demo; see the parser's help."""
    from pathlib import Path
    import time
    out = Path(ns.out or f'simreal_demo/{time.strftime("%Y%m%d_%H%M%S")}').expanduser()
    if ns.live:
        return _live_demo(ns, out)
    if ns.args:
        raise SimrealError(f'{ns.args[0]!r}: name:=value launch arguments belong to the live '
                           f'demo (simreal demo --live {" ".join(ns.args)}); the flywheel takes '
                           f'the options of simreal demo --help')
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.jobs.flywheel import (
        check_inputs,
        check_out_dir,
        default_settings,
        describe,
        run_flywheel,
    )
    from simreal_ros.report.flywheel import format_table
    settings = default_settings(robot=ns.robot, reality=ns.reality, fit_s=ns.fit_s,
                                holdout_s=ns.holdout_s, episodes=ns.episodes, seed=ns.seed,
                                settle_s=ns.settle, fit_pattern=ns.fit_pattern,
                                holdout_pattern=ns.holdout_pattern)
    if ns.dry_run:
        check_inputs(settings)
        print('\n'.join(describe(settings)), flush=True)
        return 0
    check_out_dir(out)
    env = ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
    stream = sys.stderr if ns.json else sys.stdout  # bound now: the fit's prints go to a log
    summary = run_flywheel(settings, out, env,
                           log=lambda line: print(line, file=stream, flush=True))
    print(json.dumps(summary) if ns.json else format_table(summary, out), flush=True)
    return 0


def _live_demo(ns: argparse.Namespace, out: Any) -> int:
    """Run the live demo: the launch plan plus an observer, a bag and its gap report."""
    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.jobs.demo import run_live_demo
    from simreal_ros.jobs.flywheel import ROBOT_DEFAULTS
    args = {**LIVE_DEMO_DEFAULTS, **({'robot': ns.robot} if ns.robot else {}),
            **parse_cli_args(ns.args)}
    robot = args.get('robot', 'simreal_arm')
    reality = ROBOT_DEFAULTS.get(robot, {}).get('reality', 'worn_arm')
    return run_live_demo(args, out, ns.reality or reality,
                         ros_env(discovery=ns.discovery, domain_id=ns.domain_id), ns.json)


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = launch_parser(sub, 'demo', DEMO_HELP)
    p.description = DEMO_DESCRIPTION
    p.add_argument('--out', default=None, help='run folder; must not exist or be empty '
                   '[default: simreal_demo/<date>_<time>]')
    p.add_argument('--json', action='store_true', help='print the summary as JSON (progress '
                   'on stderr)')
    p.add_argument('--robot', default=None, help='robot of the virtual bus: simreal_arm '
                   '(Dynamixel) or so101 (Feetech STS3215; no policy yet, stage 5 is skipped) '
                   '[default: simreal_arm]')
    p.add_argument('--reality', default=None, help='overlay the virtual arm really has '
                   '[default: sysid_reality, so101: so101_reality; --live: worn_arm]')
    p.add_argument('--dry-run', action='store_true', help='print what the demo would run '
                   '(robot, reality, stages, excitation limits) and exit; starts nothing')
    p.add_argument('--fit-s', type=float, default=None, metavar='S',
                   help='length of the fit excitation [default: 30]')
    p.add_argument('--holdout-s', type=float, default=None, metavar='S',
                   help='length of the held-out excitation [default: 15]')
    p.add_argument('--fit-pattern', default=None, help='fit excitation [default: sysid]')
    p.add_argument('--holdout-pattern', default=None,
                   help='held-out excitation, seed + 1 [default: multisine]')
    p.add_argument('--settle', type=float, default=None, metavar='S', help='skipped after the '
                   'first command of each excitation (start-up) [default: 1.0]')
    p.add_argument('--episodes', type=int, default=None, help='policy episodes per backend '
                   '[default: 8]')
    p.add_argument('--seed', type=int, default=None, help='seed of the excitations and the '
                   'episodes [default: 0]')
    p.add_argument('--live', action='store_true', help='instead: the live demo (twin next to '
                   'the virtual arm, a chirp, a bag and its gap report) with name:=value launch '
                   'arguments (defaults: ' + ' '.join(f'{k}:={v}' for k, v in
                                                      LIVE_DEMO_DEFAULTS.items()) + ')')
    p.set_defaults(func=cmd_demo)
