"""The ``simreal`` command (also ``python -m simreal_ros``).

Sub-commands take ``name:=value`` arguments like ``ros2 launch``; every one has ``--help`` and
exits non-zero with a one-line reason on bad input.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import runpy
import sys
from typing import Any, Sequence

from simreal_ros.errors import SimrealError


def _launch_parser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
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
    return p


def _plan_and_env(ns: argparse.Namespace, defaults: dict[str, str] | None = None
                  ) -> tuple[list[Any], dict[str, str]]:
    from simreal_ros.bringup.planner import parse_cli_args, plan
    from simreal_ros.core.netenv import ros_env
    args = {**(defaults or {}), **parse_cli_args(ns.args)}
    return plan(args), ros_env(discovery=ns.discovery, domain_id=ns.domain_id)


def cmd_launch(ns: argparse.Namespace) -> int:
    """Plan and start (or with --dry-run, print) the node graph."""
    from simreal_ros.bringup.launcher import Launcher, node_command
    nodes, env = _plan_and_env(ns)
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
    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.nodes import excite
    allowed = set(excite.PARAMETERS) | {'duration', 'rate', 'use_sim_time'}
    ros_args: list[str] = []
    for key, value in parse_cli_args(ns.args).items():
        if key not in allowed:
            raise SimrealError(f'unknown excite argument {key!r}; known: {sorted(allowed)}')
        key = {'duration': 'duration_s', 'rate': 'rate_hz'}.get(key, key)
        ros_args += ['-p', f'{key}:={value}']
    return excite.main(['simreal_excite', '--ros-args', *ros_args])


DEMO_HELP = 'the sim-to-real flywheel on the virtual servo bus: record, identify, compare'
DEMO_DESCRIPTION = """\
The sim-to-real flywheel, end to end, on the virtual servo bus (no hardware, no arguments,
a few minutes on 2 cores). Stages, with a progress line each:

  1 fit data       the virtual servo bus with a hidden reality (--reality), the Dynamixel
                   driver, the latency injector (usb_serial) and the sysid excitation,
                   recorded to RUN/bags/fit
  2 held-out data  a different excitation (--holdout-pattern, seed + 1) -> RUN/bags/holdout
  3 identify       simreal sysid on the fit bag: damping, frictionloss, armature and the
                   command delay -> RUN/identified.yaml (a model overlay)
  4 replay gap     the held-out commands replayed open loop on the nominal sim and on the
                   identified sim, from the measured initial state, over the excitation window
                   only (--settle s after the first command to the last): RMSE per joint
                   against the virtual arm, before and after
  5 policy gap     the example policy on the nominal sim, the identified sim and the virtual
                   arm, the same seeded episodes: success, time to goal, final error
  6 summary        RUN/summary.json, RUN/summary.html (plots embedded), RUN/reports/*.json,
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
    from simreal_ros.bringup.flywheel import check_out_dir, default_settings, run_flywheel
    from simreal_ros.bringup.flywheel_report import format_table
    from simreal_ros.core.netenv import ros_env
    settings = default_settings(reality=ns.reality, fit_s=ns.fit_s, holdout_s=ns.holdout_s,
                                episodes=ns.episodes, seed=ns.seed, settle_s=ns.settle,
                                fit_pattern=ns.fit_pattern, holdout_pattern=ns.holdout_pattern)
    check_out_dir(out)
    env = ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
    stream = sys.stderr if ns.json else sys.stdout  # bound now: the fit's prints go to a log
    summary = run_flywheel(settings, out, env,
                           log=lambda line: print(line, file=stream, flush=True))
    print(json.dumps(summary) if ns.json else format_table(summary, out), flush=True)
    return 0


def _live_demo(ns: argparse.Namespace, out: Any) -> int:
    """Run the live demo: the launch plan plus an observer, a bag and its gap report."""
    import contextlib

    from simreal_ros.bringup.demo import run_demo
    from simreal_ros.bringup.planner import parse_cli_args
    args = {**LIVE_DEMO_DEFAULTS, **parse_cli_args(ns.args)}
    if out.exists() and any(out.iterdir()):
        raise SimrealError(f'--out {out} exists and is not empty; the demo never overwrites')
    reality = ns.reality or 'worn_arm'
    record = args.get('record') == 'true'
    if record:
        args.setdefault('bag', str(out / 'bag'))
    with contextlib.ExitStack() as stack:
        if args['backend'] in ('real', 'twin') and not args.get('port'):
            from simreal_ros.hardware.virtual_bus import EmulatorProcess
            out.mkdir(parents=True, exist_ok=True)
            emu = stack.enter_context(EmulatorProcess(link=out / 'ttyDXL', reality=reality,
                                                      seed=int(args.get('seed', 0))))
            print(f'[demo] virtual servo bus (reality {reality!r}) on {emu.port}', flush=True)
            args['port'] = emu.port
        ns.args = [f'{k}:={v}' for k, v in args.items()]
        nodes, env = _plan_and_env(ns)
        return run_demo(nodes, env, as_json=ns.json, out_dir=out if record else None)


def cmd_train(ns: argparse.Namespace) -> int:
    """Train a policy spec's network (seeded); write the model, spec copy and summary."""
    from pathlib import Path

    from simreal_ros.errors import ConfigError
    from simreal_ros.policy.train import OVERRIDE, QUICK, load_train_config, train
    overrides = {'seed': ns.seed, 'iterations': ns.iterations, 'envs': ns.envs}
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
    from simreal_ros.bringup.eval import (
        EvalSettings,
        compare,
        format_report,
        load_result,
        run_eval,
    )
    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.core.netenv import ros_env
    extra = parse_cli_args(ns.args)
    for key in ('backend', 'policy', 'policy_autostart', 'excite'):
        if key in extra:
            raise SimrealError(f'{key}:= is set by simreal eval itself; use --backend/--policy')
    settings = EvalSettings(backend=ns.backend, policy=ns.policy, episodes=ns.episodes,
                            seed=ns.seed, tolerance_rad=ns.tolerance, goal_timeout_s=ns.timeout,
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


def cmd_bench(ns: argparse.Namespace) -> int:
    """Run one benchmark from bench/ (or all) and print its JSON."""
    from simreal_ros.core.paths import share_dir
    bench_dir = share_dir() / 'bench'
    names = sorted(p.stem for p in bench_dir.glob('*.py') if not p.stem.startswith('_'))
    if ns.name not in names + ['all']:
        raise SimrealError(f'unknown benchmark {ns.name!r}; available: {names + ["all"]}')
    from simreal_ros.core.netenv import apply_to_current_process
    apply_to_current_process()
    results = {}
    for name in names if ns.name == 'all' else [ns.name]:
        module = runpy.run_path(str(bench_dir / f'{name}.py'))
        # --load / --rt go to the timing benchmarks, whose run() takes them
        timing = {'load', 'rt'} <= set(inspect.signature(module['run']).parameters)
        if (ns.load or ns.rt) and not timing and ns.name != 'all':
            raise SimrealError(f'benchmark {name!r} takes no --load/--rt (not a timing '
                               f'benchmark)')
        kwargs = {'load': ns.load, 'rt': ns.rt} if timing else {}
        results[name] = module['run'](quick=ns.quick, **kwargs)
    out = results if ns.name == 'all' else results[ns.name]
    print(json.dumps(out, indent=None if ns.json else 2))
    return 0


def cmd_emulate(ns: argparse.Namespace) -> int:
    """Serve the virtual servo bus on a pseudo-terminal until stopped."""
    from simreal_ros.hardware import emulator
    return emulator.main(ns.robot, ns.reality, ns.link, ns.baud, ns.faults, ns.seed,
                         ns.duration, ns.rt_priority, ns.cpu_affinity)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``simreal``."""
    from simreal_ros import __version__
    parser = argparse.ArgumentParser(prog='simreal', description=__doc__.splitlines()[0])
    parser.add_argument('--version', action='version', version=f'simreal_ros {__version__}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)
    p = _launch_parser(sub, 'launch', 'start the node graph of a backend (sim, sim2sim, ...)')
    p.add_argument('--dry-run', action='store_true', help='print the plan, start nothing')
    p.set_defaults(func=cmd_launch)
    p = sub.add_parser('excite', help='publish an excitation trajectory on joint_commands',
                       description='publish an excitation trajectory on joint_commands; '
                       'arguments: pattern:=chirp|multisine|steps|waypoints|sysid duration:=S '
                       'robot:= rate:= amplitude:= seed:= f_min_hz:= f_max_hz:= '
                       'sync_to_states:=true|false use_sim_time:=true|false')
    p.add_argument('args', nargs='*', metavar='name:=value')
    p.set_defaults(func=cmd_excite)
    p = _launch_parser(sub, 'demo', DEMO_HELP)
    p.description = DEMO_DESCRIPTION
    p.add_argument('--out', default=None, help='run folder; must not exist or be empty '
                   '[default: simreal_demo/<date>_<time>]')
    p.add_argument('--json', action='store_true', help='print the summary as JSON (progress '
                   'on stderr)')
    p.add_argument('--reality', default=None, help='overlay the virtual arm really has '
                   '[default: sysid_reality; --live: worn_arm]')
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
    p.add_argument('--quick', action='store_true', help='a seconds-long smoke run')
    p.add_argument('--json', action='store_true', help='print the summary as JSON at the end')
    p.set_defaults(func=cmd_train)
    p = _launch_parser(sub, 'eval', 'run seeded goal episodes of a policy through the ROS '
                       'stack and report success rate, time to goal and tracking error; '
                       'extra name:=value arguments go to the planner (timing:=, overlay:=, '
                       'port:=, ...)')
    p.add_argument('--backend', default='sim', choices=['sim', 'sim2sim', 'real', 'twin'],
                   help='what the robot is [default: sim]')
    p.add_argument('--policy', default='simreal_arm_reach',
                   help='policy spec name or path [default: simreal_arm_reach]')
    p.add_argument('--episodes', type=int, default=20, help='goal episodes [default: 20]')
    p.add_argument('--seed', type=int, default=0, help='seed of the goals [default: 0]')
    p.add_argument('--tolerance', type=float, default=0.05,
                   help='success: every joint within this many rad for 0.2 s [default: 0.05]')
    p.add_argument('--timeout', type=float, default=5.0,
                   help='seconds (ROS clock) per goal before it counts as missed [default: 5]')
    p.add_argument('--compare', default=None, metavar='RESULT.json',
                   help='a previous --json result of the same episodes: report |J - J_other|')
    p.add_argument('--json', action='store_true', help='print the result as JSON')
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser('emulate', help='serve a virtual Dynamixel bus (MuJoCo arm) on a pty',
                       description='serve a virtual Dynamixel Protocol 2.0 bus of XM430-W350 '
                       'servos on a pseudo-terminal; prints "ready LINK" (see docs/hardware.md)')
    p.add_argument('--robot', default='simreal_arm', help='robot spec: name or path')
    p.add_argument('--reality', default='', help='overlay with the hidden reality (name or '
                   'path; default: the nominal model)')
    p.add_argument('--link', required=True, help='symlink to create to the pty (the port)')
    p.add_argument('--baud', type=int, default=1_000_000, help='bus baud rate')
    p.add_argument('--faults', default='', help='e.g. crc=0.01,timeout=0.005,unplug_at=5,'
                   'replug_at=6,seed=1')
    p.add_argument('--seed', type=int, default=0, help='seed of the encoder noise')
    p.add_argument('--duration', type=float, default=None, help='stop after this many s')
    p.add_argument('--rt-priority', type=int, default=0, help='SCHED_FIFO priority of the '
                   'emulator loop (1-98, 0 = off; docs/realtime.md)')
    p.add_argument('--cpu-affinity', default='', help='CPUs of the emulator loop, e.g. "1"')
    p.set_defaults(func=cmd_emulate)
    p = sub.add_parser('bench', help='run a benchmark of bench/ and print JSON figures')
    p.add_argument('name', help='benchmark name (e.g. sim_bridge) or all')
    p.add_argument('--json', action='store_true', help='one-line JSON')
    p.add_argument('--quick', action='store_true', help='shorter runs (smoke test)')
    p.add_argument('--load', type=int, default=0, metavar='N', help='timing benchmarks: run '
                   'N CPU-bound processes meanwhile')
    p.add_argument('--rt', action='store_true', help='timing benchmarks: measure with the '
                   'nodes on the default scheduler and under SCHED_FIFO, side by side')
    p.set_defaults(func=cmd_bench)
    from simreal_ros.report.commands import add_commands
    add_commands(sub)
    from simreal_ros.sysid.cli import add_commands as add_sysid_commands
    add_sysid_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``simreal``."""
    ns = build_parser().parse_args(argv)
    try:
        return int(ns.func(ns))
    except SimrealError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    os.environ.setdefault('PYTHONUNBUFFERED', '1')
    raise SystemExit(main())
