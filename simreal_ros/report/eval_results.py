"""Results of ``simreal eval``: the metrics J of a run, the gap between two runs, the text.

A run's result (``simreal eval --json``) holds ``settings``, ``metrics`` and ``episodes``;
:func:`compare` gives ``|J_a - J_b|`` per metric of two runs of the same seeded episodes.
Pure data: the flywheel's report and the eval job both read it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from simreal_ros.errors import SimrealError
from simreal_ros.sim.bridge_config import ENGINES

METRICS = ('success_rate', 'time_to_goal_mean_s', 'final_error_median_rad',
           'tracking_rmse_mean_rad')
#: the metrics of a visuomotor run (jobs/visual_episodes.py: tool0's distance in m)
VISUAL_METRICS = ('success_rate', 'time_to_goal_mean_s', 'final_error_median_m')


def metric_names(r: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the metrics J of result ``r`` (a visual run has its own)."""
    return VISUAL_METRICS if 'final_error_median_m' in r['metrics'] else METRICS


def summarize(episodes: list[dict[str, Any]]) -> dict[str, float]:
    """Return the metrics J of a run (see :data:`METRICS`)."""
    n = len(episodes)
    times = [e['time_to_goal_s'] for e in episodes if e['success']]
    finals = [e['final_error_rad'] for e in episodes]
    tracks = [e['tracking_rmse_rad'] for e in episodes if not math.isnan(e['tracking_rmse_rad'])]
    return {'episodes': n, 'successes': sum(e['success'] for e in episodes),
            'success_rate': sum(e['success'] for e in episodes) / n if n else float('nan'),
            'time_to_goal_mean_s': float(np.mean(times)) if times else float('nan'),
            'time_to_goal_p90_s': float(np.percentile(times, 90)) if times else float('nan'),
            'final_error_median_rad': float(np.median(finals)) if finals else float('nan'),
            'final_error_max_rad': float(np.max(finals)) if finals else float('nan'),
            'tracking_rmse_mean_rad': float(np.mean(tracks)) if tracks else float('nan')}


def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Return the gap ``|J_a - J_b|`` per metric of two runs of the same episodes."""
    for key in ('policy', 'seed', 'episodes'):
        if a['settings'][key] != b['settings'][key]:
            raise SimrealError(f'the runs differ in {key} ({a["settings"][key]!r} vs '
                               f'{b["settings"][key]!r}): the gap needs the same episodes')
    names = metric_names(a)
    if metric_names(b) != names:
        raise SimrealError('one run is of a visuomotor policy, the other not: the gap needs '
                           'the same episodes')
    gap = {m: abs(float(a['metrics'][m]) - float(b['metrics'][m])) for m in names}
    pairs = zip(a['episodes'], b['episodes'], strict=False)
    agree = sum(x['success'] == y['success'] for x, y in pairs)
    def label(r: Mapping[str, Any]) -> str:
        extra = ' '.join(f'{k}:={v}' for k, v in (r['settings'].get('launch_args') or {}).items())
        backend = r['settings']['backend']
        if backend != 'real':  # results from before --engine ran in MuJoCo
            backend += f' ({r["settings"].get("engine", ENGINES[0])})'
        return f'{backend} {extra}'.strip()

    return {'backends': [label(a), label(b)], 'gap': gap,
            'values': {m: [float(a['metrics'][m]), float(b['metrics'][m])] for m in names},
            'episodes_with_same_outcome': agree}


def format_report(r: Mapping[str, Any], gap: Mapping[str, Any] | None = None) -> str:
    """Render an evaluation for a terminal."""
    m, st = r['metrics'], r['settings']
    on = f'{st["backend"]} ({st.get("engine", ENGINES[0])})'
    if 'final_error_median_m' in m:  # a visuomotor run: the ball's reach point, in m
        low, high = m['success_wilson95']
        lines = ['', f'simreal eval: {st["policy"]} on {on}, {m["episodes"]} episodes '
                 f'(seed {st["seed"]}, ball placed per episode; tool0 within 3 cm of the reach '
                 f'point for {st["dwell_s"]} s)',
                 f'  success rate        {m["success_rate"]:.1%} ({m["successes"]}/'
                 f'{m["episodes"]}; 95 % Wilson {low:.1%}-{high:.1%})',
                 f'  time to goal        mean {m["time_to_goal_mean_s"]:.2f} s, '
                 f'p90 {m["time_to_goal_p90_s"]:.2f} s',
                 f'  final error         median {m["final_error_median_m"] * 100:.2f} cm, '
                 f'max {m["final_error_max_m"] * 100:.2f} cm']
    else:
        lines = ['', f'simreal eval: {st["policy"]} on {on}, {m["episodes"]} episodes '
                 f'(seed {st["seed"]}, tolerance {st["tolerance_rad"]} rad for '
                 f'{st["dwell_s"]} s)',
                 f'  success rate        {m["success_rate"]:.1%} ({m["successes"]}/'
                 f'{m["episodes"]})',
                 f'  time to goal        mean {m["time_to_goal_mean_s"]:.2f} s, '
                 f'p90 {m["time_to_goal_p90_s"]:.2f} s',
                 f'  final error         median {m["final_error_median_rad"]:.4f} rad, '
                 f'max {m["final_error_max_rad"]:.4f} rad',
                 f'  tracking rmse       {m["tracking_rmse_mean_rad"]:.4f} rad (state - command)']
    d = r.get('policy_diagnostics') or {}
    if d:
        lines.append(f'  policy node         compute p99 {d.get("compute_p99_ms")} ms, deadline '
                     f'misses {d.get("deadline_misses")}, rejected outputs '
                     f'{d.get("rejected_outputs")}')
        if d.get('inference_p99_ms') is not None:
            lines.append(f'  image path          inference p50 {d["inference_p50_ms"]} ms, '
                         f'p99 {d["inference_p99_ms"]} ms, last image age '
                         f'{d.get("image_age_ms")} ms, stale holds {d.get("stale_holds")}')
    if gap is not None:
        a, b = gap['backends']
        lines += ['', f'  A: {a}', f'  B: {b}',
                  f'  {"metric":<24} {"A":>10} {"B":>10} {"|J_A - J_B|":>12}']
        for k, v in gap['gap'].items():
            ja, jb = gap['values'][k]
            lines.append(f'  {k:<24} {ja:>10.4g} {jb:>10.4g} {v:>12.4g}')
        lines.append(f'  episodes with the same outcome: {gap["episodes_with_same_outcome"]}'
                     f'/{m["episodes"]}')
    return '\n'.join(lines)


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a previous ``simreal eval --json`` output."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding='utf-8'))
    except (OSError, json.JSONDecodeError) as exc:
        raise SimrealError(f'{p}: not a simreal eval --json result ({exc})') from None
    if not isinstance(data, dict) or 'metrics' not in data or 'settings' not in data:
        raise SimrealError(f'{p}: not a simreal eval --json result (no metrics/settings)')
    return data
