"""eval-gap's ``real`` backend on the virtual robot: ``simreal eval --backend real`` per policy.

``simreal eval-gap --real emulator`` runs each zoo policy's real episodes through
:func:`simreal_ros.jobs.eval.run_eval` (``--backend real``): the virtual servo bus emulator of
the zoo's robot with ``--reality`` as its hidden reality (dynamics, masses, command delay, and
what the in-process stand-in does not model: backlash, encoder quantization and noise, thermal
effects), the servo driver and the policy node over ROS, in wall-clock time. Its episodes are
the stand-in cell's: the same goals (``seed`` = the cell's ``goal_seed``, the same goal margin),
tolerance, dwell and per-goal timeout, so episode ``k`` pairs with episode ``k`` of every sim.

The in-process stand-in still runs (it is cheap) and is reported as the ``standin`` backend
next to ``real`` (now the emulator), with their agreement per policy (paired episodes with the
same outcome) and over the zoo.

The runs are sequential, after the in-process cells (a wall-clock run next to busy workers
would measure their load). Each finished policy is one line of ``OUT/emulator.jsonl``, appended
and flushed at once, with its provenance (``source: emulator``, the emulator's reality, the
git commit, host, process, UTC start and end, wall time); a rerun skips the policies that have
a line (resume). Measured: 20-45 s per policy for 10 episodes of 4 s at most on the 2-core
development machine, most of it the stack's start and the episodes' real time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import socket
import time
from typing import Any, Callable, Mapping

from simreal_ros.sweep.config import Cell

EMULATOR_RESULTS = 'emulator.jsonl'
#: The kinds of eval-gap's ``real`` backend (``--real``).
REAL_KINDS = ('standin', 'emulator')


def read_emulator_lines(out_dir: Path) -> dict[str, dict[str, Any]]:
    """Return the finished emulator runs by policy name (a torn last line skipped)."""
    path = out_dir / EMULATOR_RESULTS
    lines: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return lines
    for text in path.read_text(encoding='utf-8').splitlines():
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        lines[str(line['policy'])] = line
    return lines


def emulator_settings(cell: Cell) -> Any:
    """Return the ``simreal eval`` settings that run ``cell``'s episodes on the virtual robot."""
    from simreal_ros.jobs.eval import EvalSettings
    return EvalSettings(backend='real', engine=cell.engine, policy=cell.policy,
                        episodes=cell.episodes, seed=cell.goal_seed,
                        tolerance_rad=cell.tolerance_rad, dwell_s=cell.dwell_s,
                        goal_timeout_s=cell.goal_timeout_s, goal_margin_rad=cell.goal_margin_rad,
                        reality=cell.overlay)


def run_emulator(real_cells: dict[str, Cell], out_dir: Path, env: Mapping[str, str],
                 provenance: Mapping[str, str], log: Callable[[str], None]
                 ) -> dict[str, dict[str, Any]]:
    """Run every policy of ``real_cells`` (name -> its stand-in cell) without a line yet.

    Returns every policy's line (the earlier ones included). A run that fails raises (the
    lines written so far stay; a rerun resumes).
    """
    from simreal_ros.jobs.eval import run_eval
    from simreal_ros.sweep.runner import _utc
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


def standin_agreement(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per policy: how often the stand-in and the emulator give an episode the same outcome."""
    per = []
    for r in rows:
        a, b = r['standin']['success'], r['real']['success']
        same = sum(int(x == y) for x, y in zip(a, b, strict=True))
        per.append({'policy': r['policy'], 'episodes': len(a), 'same_outcome': same,
                    'standin_rate': r['standin']['success_rate'],
                    'emulator_rate': r['real']['success_rate'],
                    'standin_rmse_rad': r['standin']['tracking_rmse_mean_rad'],
                    'emulator_rmse_rad': r['real']['tracking_rmse_mean_rad']})
    n = sum(p['episodes'] for p in per)
    return {'per_policy': per, 'same_outcome': sum(p['same_outcome'] for p in per),
            'episodes': n}
