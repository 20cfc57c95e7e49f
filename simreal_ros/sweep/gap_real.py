"""eval-gap's ``real`` backend on the virtual robot: the results file and the agreement.

``simreal eval-gap --real emulator`` runs (:mod:`simreal_ros.jobs.gap_real`, a layer above
this one: ``sweep/`` runs no ROS) each zoo policy's real episodes through
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
a line (resume). Measured: 26-64 s per policy for 10 episodes of 4 s at most on the 2-core
development machine at a load average of 10-14, most of it the stack's start and the episodes'
real time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
