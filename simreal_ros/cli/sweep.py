"""``simreal sweep``: a grid of policy evaluations, sysid fits or replays, local or on Ray."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from simreal_ros.errors import SimrealError


def cmd_sweep(ns: argparse.Namespace) -> int:
    """Check the sweep file, then print its cells (--dry-run) or run them and write the table."""
    from pathlib import Path

    from simreal_ros.sweep.config import load_sweep
    if ns.workers < 1:
        raise SimrealError(f'--workers {ns.workers}: expected an integer >= 1')
    if ns.ray is not None and not ns.ray:
        raise SimrealError("--ray '': expected auto, local or a cluster address HOST:PORT")
    sweep = load_sweep(ns.sweep)  # every error before any cell runs
    if ns.dry_run:
        for c in sweep.cells:
            seeds = ''.join(f' {k}={v}' for k, v in c.seeds.items())
            print(f'{c.cell_id}  {c.label()} {seeds}'.rstrip())
        print(f'{len(sweep.cells)} cells', flush=True)
        return 0
    if ns.out is None:
        raise SimrealError('--out DIR: expected an output directory (only --dry-run runs '
                           'without one)')
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.sweep.outputs import write_outputs
    from simreal_ros.sweep.runner import run_sweep
    os.environ.update(ros_env())  # the workers inherit LOCALHOST and this domain id
    out = Path(ns.out)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    outcome = run_sweep(sweep, out, workers=ns.workers, ray_address=ns.ray, log=log)
    rows = write_outputs(sweep, out)
    ok = sum(r['status'] == 'ok' for r in rows)
    print(f'sweep {sweep.name}: ran {outcome.ran} cells ({outcome.failed} failed, '
          f'{outcome.retries} retried), {outcome.skipped} finished before, in '
          f'{outcome.wall_time_s:.1f} s; {ok}/{len(sweep.cells)} cells ok; table: '
          f'{out / "results.csv"}, {out / "results.parquet"}, {out / "report.html"}',
          flush=True)
    return 0 if ok == len(sweep.cells) else 1


def add_commands(sub: Any) -> None:
    """Add ``simreal sweep`` to the ``simreal`` parser."""
    p = sub.add_parser('sweep', help='run a grid of policy evaluations, sysid fits or replays '
                       '(local workers or Ray)',
                       description='run every cell of a sweep file (kind eval: policies x '
                       'robots x overlays x engines x latency presets x randomization x seeds, '
                       'an in-process lockstep evaluation each; kind sysid: bags x robots x '
                       'fitted parameters, a fit each; kind replay: bags x robots x overlays, '
                       'a replay each), on local worker processes or on Ray; results appended '
                       'to OUT/results.jsonl as cells finish (a rerun '
                       'resumes), then OUT/results.csv, results.parquet and report.html')
    p.add_argument('sweep', metavar='SWEEP.yaml', help='the sweep file (see docs/sweeps.md)')
    p.add_argument('--out', default=None, metavar='DIR', help='output directory (required '
                   'unless --dry-run); a rerun with the same DIR skips finished cells')
    p.add_argument('--workers', type=int, default=1,
                   help='local worker processes, or CPUs of a local Ray instance [default: 1]')
    p.add_argument('--ray', default=None, metavar='auto|local|ADDRESS',
                   help='run the cells as Ray tasks: local = a private instance on 127.0.0.1, '
                   'auto = the cluster Ray finds on this machine, else local; ADDRESS = a '
                   'cluster (HOST:PORT)')
    p.add_argument('--dry-run', action='store_true', help='print the cells and stop')
    p.set_defaults(func=cmd_sweep)


def cmd_zoo_build(ns: argparse.Namespace) -> int:
    """Train every entry of a zoo file not built yet into OUT/NAME/."""
    from pathlib import Path

    from simreal_ros.sweep.zoo import build_zoo, load_zoo
    zoo = load_zoo(ns.zoo)
    out = Path(ns.out) if ns.out else zoo.policies_dir
    build_zoo(zoo, out, log=lambda line: print(line, flush=True))
    return 0


def cmd_eval_gap(ns: argparse.Namespace) -> int:
    """Evaluate a built zoo on the nominal sim, the identified sim and the reality; rank them."""
    import json
    from pathlib import Path

    from simreal_ros.sweep.gap_eval import (
        GapSettings,
        check_settings,
        format_summary,
        run_eval_gap,
    )
    from simreal_ros.sweep.zoo import load_zoo
    if ns.workers < 1:
        raise SimrealError(f'--workers {ns.workers}: expected an integer >= 1')
    s = GapSettings(reality=ns.reality, identified=ns.identified,
                    real_latency=ns.real_latency, episodes=ns.episodes, seed=ns.seed,
                    pilot=min(10, ns.episodes) if ns.pilot is None else ns.pilot,
                    resamples=ns.resamples, confidence=ns.confidence,
                    half_width=ns.half_width, rank_confidence=ns.rank_confidence,
                    real=ns.real)
    check_settings(s)
    zoo = load_zoo(ns.zoo)
    from simreal_ros.core.netenv import ros_env
    os.environ.update(ros_env())  # the workers inherit LOCALHOST and this domain id

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    from simreal_ros.jobs.gap_real import run_emulator
    report = run_eval_gap(zoo, s, Path(ns.out), workers=ns.workers, ray_address=ns.ray,
                          policies_dir=Path(ns.policies) if ns.policies else None, log=log,
                          real_runner=run_emulator)
    if ns.json:
        print(json.dumps(report, default=str), flush=True)
    else:
        print(format_summary(report), flush=True)
        print(f'report: {Path(ns.out) / "gap.html"}, {Path(ns.out) / "gap.json"}', flush=True)
    return 0 if report['run']['failed'] == 0 else 1


def _fraction(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not a number') from None


def add_zoo_commands(sub: Any) -> None:
    """Add ``simreal zoo build`` and ``simreal eval-gap``."""
    p = sub.add_parser('zoo', help='policy zoos: build (train) every entry of a zoo file',
                       description='a zoo file names variants of one training recipe (see '
                       'docs/sweeps.md); `simreal zoo build ZOO --out DIR` trains each entry '
                       'not built yet into DIR/NAME/')
    zsub = p.add_subparsers(dest='zoo_command', metavar='ACTION', required=True)
    b = zsub.add_parser('build', help='train every entry not built yet')
    b.add_argument('zoo', metavar='ZOO.yaml', help='zoo file: shipped name (config/zoo/) or '
                   'path')
    b.add_argument('--out', default=None, metavar='DIR',
                   help="output directory [default: the zoo's policies: directory]")
    b.set_defaults(func=cmd_zoo_build)
    p = sub.add_parser('eval-gap', help='does the sim rank a policy zoo like reality? '
                       'SRCC, MMRV, Pearson with intervals, before and after sysid',
                       description='evaluate every policy of a built zoo on the nominal sim, '
                       'the identified sim and a hidden reality (in-process cells, same '
                       'seeded goals); report per policy success and tracking error, over the '
                       'zoo SRCC / MMRV / Pearson with bootstrap intervals, and how many real '
                       'episodes a success estimate or a ranking needs, with and without the '
                       'sim; OUT/gap.json and OUT/gap.html (see docs/sweeps.md)')
    p.add_argument('zoo', metavar='ZOO.yaml', help='zoo file: shipped name or path')
    p.add_argument('--out', required=True, metavar='DIR', help='output directory (a rerun '
                   'with the same DIR skips finished cells)')
    p.add_argument('--policies', default=None, metavar='DIR',
                   help="the built zoo [default: the zoo file's policies: directory]")
    p.add_argument('--reality', default='weak_servo_reality', metavar='OVERLAY',
                   help='the hidden reality [default: weak_servo_reality]')
    p.add_argument('--identified', default='weak_servo_reality_identified', metavar='OVERLAY',
                   help="the sysid-fitted overlay ('' = no identified sim) "
                   '[default: weak_servo_reality_identified]')
    p.add_argument('--real-latency', default='usb_serial', metavar='PRESET',
                   help='latency routes of the reality [default: usb_serial]')
    p.add_argument('--real', default='standin', metavar='standin|emulator',
                   help="the reality's runs: standin (in-process, lockstep; fast) or emulator "
                        '(simreal eval --backend real on the virtual servo bus, over ROS, one '
                        'policy at a time in real time) [default: standin]')
    p.add_argument('--episodes', type=int, default=40,
                   help='goal episodes per policy and backend [default: 40]')
    p.add_argument('--pilot', type=int, default=None, help='real pilot episodes the episode '
                   'plan starts from [default: 10, at most --episodes]')
    p.add_argument('--seed', type=int, default=0, help='goal and bootstrap seed [default: 0]')
    p.add_argument('--resamples', type=int, default=2000, help='bootstrap resamples '
                   '[default: 2000]')
    p.add_argument('--confidence', type=_fraction, default=0.95,
                   help='interval confidence [default: 0.95]')
    p.add_argument('--half-width', type=_fraction, default=0.1,
                   help='success-rate half-width the episode plan aims at [default: 0.1]')
    p.add_argument('--rank-confidence', type=_fraction, default=0.9,
                   help='probability of the right order per adjacent pair [default: 0.9]')
    p.add_argument('--workers', type=int, default=1, help='local worker processes [default: 1]')
    p.add_argument('--ray', default=None, metavar='auto|local|ADDRESS',
                   help='run the cells on Ray (as simreal sweep --ray)')
    p.add_argument('--json', action='store_true', help='print the report as JSON')
    p.set_defaults(func=cmd_eval_gap)
