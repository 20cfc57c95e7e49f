"""Run eval-gap's real episodes on the virtual servo bus: ``simreal eval --backend real``.

:func:`run_emulator` is what ``simreal eval-gap --real emulator`` hands to
:func:`simreal_ros.sweep.gap_eval.run_eval_gap`: for each zoo policy without a line in
``OUT/emulator.jsonl`` (:mod:`simreal_ros.sweep.gap_real`), :func:`simreal_ros.jobs.eval.run_eval`
with ``backend='real'`` (the emulator with the reality, the servo driver and the policy node
over ROS, in wall-clock time) on the stand-in cell's goals (``seed`` = its ``goal_seed``),
tolerance, dwell, timeout and goal margin; one policy at a time; each line appended and
flushed the moment its run ends, with its provenance.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import socket
import time
from typing import Any, Callable

from simreal_ros.sweep.config import Cell
from simreal_ros.sweep.gap_real import EMULATOR_RESULTS, read_emulator_lines


def emulator_settings(cell: Cell) -> Any:
    """Return the ``simreal eval`` settings that run ``cell``'s episodes on the virtual robot."""
    from simreal_ros.jobs.eval import EvalSettings
    return EvalSettings(backend='real', engine=cell.engine, policy=cell.policy,
                        episodes=cell.episodes, seed=cell.goal_seed,
                        tolerance_rad=cell.tolerance_rad, dwell_s=cell.dwell_s,
                        goal_timeout_s=cell.goal_timeout_s, goal_margin_rad=cell.goal_margin_rad,
                        reality=cell.overlay)


def run_emulator(real_cells: dict[str, Cell], out_dir: Path, log: Callable[[str], None]
                 ) -> dict[str, dict[str, Any]]:
    """Run every policy of ``real_cells`` (name -> its stand-in cell) without a line yet.

    Returns every policy's line (the earlier ones included). A run that fails raises (the
    lines written so far stay; a rerun resumes).
    """
    from simreal_ros import __version__
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.jobs.eval import run_eval
    from simreal_ros.sweep.runner import _utc, git_commit
    env = ros_env(dict(os.environ))
    provenance = {'git_commit': git_commit(), 'package_version': __version__}
    done = read_emulator_lines(out_dir)
    todo = [n for n in real_cells if n not in done]
    log(f'eval-gap: {len(todo)} of {len(real_cells)} policies to run on the virtual servo bus '
        f'(simreal eval --backend real), one at a time')
    for i, name in enumerate(todo):
        cell = real_cells[name]
        settings = emulator_settings(cell)
        start_ns, t0 = time.time_ns(), time.monotonic()
        result = run_eval(settings, env, log=lambda _line: None)
        line = {'policy': name, 'cell_id': cell.cell_id, 'source': 'emulator',
                'command': 'simreal eval --backend real', 'reality': cell.overlay,
                'seed': settings.seed, 'episodes': settings.episodes,
                'metrics': result['metrics'], 'episode_results': result['episodes'],
                'policy_diagnostics': result['policy_diagnostics'], 'status': 'ok',
                **provenance, 'host': socket.gethostname(),
                'worker': f'emulator:{socket.gethostname()}:{os.getpid()}',
                'start_utc': _utc(start_ns), 'end_utc': _utc(time.time_ns()),
                'wall_time_s': round(time.monotonic() - t0, 3)}
        with open(out_dir / EMULATOR_RESULTS, 'a', encoding='utf-8') as f:
            f.write(json.dumps(line, allow_nan=True) + '\n')
            f.flush()
            os.fsync(f.fileno())
        done[name] = line
        k = sum(bool(e['success']) for e in result['episodes'])
        log(f'eval-gap: emulator {i + 1}/{len(todo)} {name}: {k}/{settings.episodes} goals, '
            f'{line["wall_time_s"]:.0f} s')
    return {n: done[n] for n in real_cells}
