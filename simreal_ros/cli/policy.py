"""``simreal train`` and ``simreal eval``: the example policy, trained in MuJoCo, run over ROS."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from simreal_ros.cli.common import launch_parser
from simreal_ros.errors import SimrealError


def cmd_train(ns: argparse.Namespace) -> int:
    """Train a policy spec's network (seeded); write the model, spec copy and summary."""
    from pathlib import Path

    from simreal_ros.errors import ConfigError
    from simreal_ros.policy.train import OVERRIDE, QUICK, load_train_config, train
    overrides = {'seed': ns.seed, 'iterations': ns.iterations, 'envs': ns.envs,
                 'overlay': ns.overlay}
    if ns.quick:
        overrides.update(QUICK)
    try:
        cfg = load_train_config(ns.config, **overrides)
    except ConfigError as exc:
        if exc.source != OVERRIDE:
            raise
        raise SimrealError(f'--{exc.key.replace("_", "-")} {exc.got!r}: expected '
                           f'{exc.expected}') from None
    out = Path(ns.out or f'trained/{cfg.policy}')
    summary = train(cfg, out, log=lambda line: print(line, flush=True))
    if ns.json:
        print(json.dumps(summary))
    return 0


def cmd_eval(ns: argparse.Namespace) -> int:
    """Run seeded goal episodes through the ROS stack and report success, times, errors."""
    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.jobs.eval import EvalSettings, run_eval
    from simreal_ros.report.eval_results import compare, format_report, load_result
    extra = parse_cli_args(ns.args)
    for key in ('backend', 'engine', 'policy', 'policy_autostart', 'excite'):
        if key in extra:
            raise SimrealError(f'{key}:= is set by simreal eval itself; use '
                               f'--backend/--engine/--policy')
    settings = EvalSettings(backend=ns.backend, engine=ns.engine, policy=ns.policy,
                            episodes=ns.episodes, seed=ns.seed, tolerance_rad=ns.tolerance,
                            goal_timeout_s=ns.timeout, reality=ns.reality,
                            launch_args=extra)
    other = load_result(ns.compare) if ns.compare else None
    env = ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
    os.environ.update(env)
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if ns.json else \
        (lambda line: print(line, flush=True))
    result = run_eval(settings, env, log=log)
    gap = compare(result, other) if other is not None else None
    if gap is not None:
        result['gap'] = gap
    print(json.dumps(result) if ns.json else format_report(result, gap), flush=True)
    return 0


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = sub.add_parser('train', help='train a policy in MuJoCo (seeded, reproducible)',
                       description='train the network of a policy spec with the settings of '
                       'config/training/<name>.yaml (DAgger from a privileged teacher under '
                       "domain randomization and the latency presets' command/observation "
                       'routes)')
    p.add_argument('config', nargs='?', default='simreal_arm_reach',
                   help='training config: shipped name or path [default: simreal_arm_reach]')
    p.add_argument('--out', default=None, help='output directory [default: trained/<policy>]')
    p.add_argument('--seed', type=int, default=None, help='override the config seed')
    p.add_argument('--iterations', type=int, default=None, help='override the DAgger rounds')
    p.add_argument('--envs', type=int, default=None, help='override the parallel worlds')
    p.add_argument('--overlay', default=None, help='train on this model overlay (an '
                   "identified sim, with its residual if it names one) [default: the config's]")
    p.add_argument('--quick', action='store_true', help='a seconds-long smoke run')
    p.add_argument('--json', action='store_true', help='print the summary as JSON at the end')
    p.set_defaults(func=cmd_train)
    p = launch_parser(sub, 'eval', 'run seeded goal episodes of a policy through the ROS '
                       'stack and report success rate, time to goal and tracking error; '
                       'extra name:=value arguments go to the planner (timing:=, overlay:=, '
                       'port:=, ...)')
    p.add_argument('--backend', default='sim', choices=['sim', 'sim2sim', 'real', 'twin'],
                   help='what the robot is [default: sim]')
    p.add_argument('--engine', default='mujoco', choices=['mujoco', 'pybullet'],
                   help='physics engine of the sim bridges [default: mujoco]')
    p.add_argument('--policy', default='simreal_arm_reach',
                   help='policy spec name or path [default: simreal_arm_reach]')
    p.add_argument('--episodes', type=int, default=20, help='goal episodes [default: 20]')
    p.add_argument('--seed', type=int, default=0, help='seed of the goals [default: 0]')
    p.add_argument('--tolerance', type=float, default=0.05,
                   help='success: every joint within this many rad for 0.2 s [default: 0.05]')
    p.add_argument('--timeout', type=float, default=5.0,
                   help='seconds (ROS clock) per goal before it counts as missed [default: 5]')
    p.add_argument('--reality', default='', metavar='OVERLAY',
                   help='hidden reality of the virtual servo bus that --backend real/twin '
                   'starts without port:= (overlay name or path) [default: nominal]')
    p.add_argument('--compare', default=None, metavar='RESULT.json',
                   help='a previous --json result of the same episodes: report |J - J_other|')
    p.add_argument('--json', action='store_true', help='print the result as JSON')
    p.set_defaults(func=cmd_eval)
