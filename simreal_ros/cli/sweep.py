"""``simreal sweep``: a grid of in-process policy evaluations on local workers or on Ray."""

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
            print(f'{c.cell_id}  {c.label()}  goal_seed={c.goal_seed} cell_seed={c.cell_seed}')
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
    p = sub.add_parser('sweep', help='run a grid of policy evaluations (local workers or Ray)',
                       description='run every cell of a sweep file (policies x robots x '
                       'overlays x engines x latency presets x randomization x seeds): an '
                       'in-process lockstep evaluation each, on local worker processes or on '
                       'Ray; results appended to OUT/results.jsonl as cells finish (a rerun '
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
