"""The sweep's table, one row per cell: ``results.csv``, ``results.parquet`` and ``report.html``.

Built from ``results.jsonl`` (see :mod:`simreal_ros.sweep.runner`): for every cell of the sweep
its newest ``ok`` line, else its newest ``failed`` line; cells never run have no row. Columns
(:func:`columns`): ``cell_id``, ``status``, ``label``, the configuration (every axis and shared
setting, the sweep seed), then per kind:

* ``eval``: ``goal_seed`` and ``cell_seed``, the metrics of ``simreal eval`` (successes,
  success_rate, time_to_goal_mean_s, time_to_goal_p90_s, final_error_median_rad,
  final_error_max_rad, tracking_rmse_mean_rad), ``stale_holds`` and ``control_periods``; the
  per-episode results (``episode_results``) stay in ``results.jsonl``;
* ``sysid``: the held-out RMSE before and after, their ratio, the parameters fitted and
  identifiable, iterations, final cost, the fit's CPU seconds, and ``overlay_file``: the fitted
  overlay, written as ``overlays/<cell_id>.yaml`` next to the table (each estimate with its
  stddev is in ``results.jsonl``, ``parameters``);
* ``replay``: the open-loop RMSE, one ``k_step_<h>_rad`` per horizon, the window, the command
  delay and the backlash replayed;

then the provenance (git_commit, package_version, sweep, sweep_file, the policy spec's and
model's SHA-256 or the bag's, host, worker, start_utc, end_utc, wall_time_s, attempt) and
``error``.

The HTML page has the table and two figures (per kind: success rate and median final error;
held-out RMSE after the fit and its ratio to before; open-loop and the first k-step RMSE),
drawn with matplotlib as inline SVG.
"""

from __future__ import annotations

import csv
from dataclasses import fields
import html
import io
import math
from pathlib import Path
from typing import Any

from simreal_ros.sweep.config import Cell, ReplayCell, Sweep, SysidCell
from simreal_ros.sweep.fit_cells import horizon_column
from simreal_ros.sweep.runner import read_results

METRICS = ('successes', 'success_rate', 'time_to_goal_mean_s', 'time_to_goal_p90_s',
           'final_error_median_rad', 'final_error_max_rad', 'tracking_rmse_mean_rad')
SYSID_METRICS = ('heldout_before_rad', 'heldout_after_rad', 'after_over_before',
                 'parameters_fitted', 'parameters_identifiable', 'iterations', 'cost_end',
                 'fit_cpu_s')
REPLAY_METRICS = ('open_loop_rad', 'window_s', 'command_delay_s', 'backlash_rad')
PROVENANCE = ('git_commit', 'package_version', 'sweep', 'sweep_file', 'policy_spec_sha256',
              'policy_model_sha256', 'host', 'worker', 'start_utc', 'end_utc', 'wall_time_s',
              'attempt')
COLUMNS = ('cell_id', 'status', 'label', *(f.name for f in fields(Cell)), 'goal_seed',
           'cell_seed', *METRICS, 'stale_holds', 'control_periods', *PROVENANCE, 'error')
#: Columns that are numbers (float; NaN when missing) or integers in every row.
_INTS = {'seed', 'episodes', 'sweep_seed', 'goal_seed', 'cell_seed', 'successes',
         'stale_holds', 'control_periods', 'attempt', 'parameters_fitted',
         'parameters_identifiable', 'iterations'}
#: The two figures of the page per kind: (column, title).
FIGURES = {
    'eval': (('success_rate', 'success rate per cell'),
             ('final_error_median_rad', 'median final error (rad)')),
    'sysid': (('heldout_after_rad', 'held-out open-loop RMSE after the fit (rad)'),
              ('after_over_before', 'held-out RMSE, fitted / nominal')),
}


def metrics_of(sweep: Sweep) -> tuple[str, ...]:
    """Return the metric columns of the sweep's kind."""
    if sweep.kind == 'sysid':
        return SYSID_METRICS
    if sweep.kind == 'replay':
        hs = sorted({h for c in sweep.cells if isinstance(c, ReplayCell) for h in c.horizons_s})
        return (REPLAY_METRICS[0], *(horizon_column(h) for h in hs), *REPLAY_METRICS[1:])
    return METRICS


def columns(sweep: Sweep) -> tuple[str, ...]:
    """Return the table's columns for the sweep's kind (:data:`COLUMNS` for ``eval``)."""
    if sweep.kind == 'eval':
        return COLUMNS
    cls = SysidCell if sweep.kind == 'sysid' else ReplayCell
    extra = ('overlay_file',) if sweep.kind == 'sysid' else ()
    prov = tuple('bag_sha256' if c == 'policy_spec_sha256' else c for c in PROVENANCE
                 if c != 'policy_model_sha256')
    return ('cell_id', 'status', 'label', *(f.name for f in fields(cls)), *metrics_of(sweep),
            *extra, *prov, 'error')


def figures_of(sweep: Sweep) -> tuple[tuple[str, str], ...]:
    """Return the page's two figures for the sweep's kind."""
    if sweep.kind == 'replay':
        first = horizon_column(min(h for c in sweep.cells if isinstance(c, ReplayCell)
                                   for h in c.horizons_s))
        return (('open_loop_rad', 'open-loop RMSE (rad)'), (first, f'{first} (rad)'))
    return FIGURES[sweep.kind]


def overlay_path(out_dir: Path, cell_id: str) -> Path:
    """Where a sysid cell's fitted overlay is written."""
    return out_dir / 'overlays' / f'{cell_id}.yaml'


def newest_results(out_dir: Path) -> dict[str, dict[str, Any]]:
    """Per cell id, its newest ``ok`` result line (else its newest line)."""
    newest: dict[str, dict[str, Any]] = {}
    for line in read_results(out_dir):
        cid = str(line.get('cell_id'))
        old = newest.get(cid)
        if old is None or line.get('status') == 'ok' or old.get('status') != 'ok':
            newest[cid] = line
    return newest


def table_rows(sweep: Sweep, newest: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat row per cell with a result line (``newest``), in the sweep's cell order.

    A sysid cell's ``overlay_file`` is its :func:`overlay_path` relative to the output
    directory (:func:`write_overlays` writes it).
    """
    cols = columns(sweep)
    metric_cols = set(metrics_of(sweep))
    rows = []
    for cell in sweep.cells:
        line = newest.get(cell.cell_id)
        if line is None:
            continue
        metrics = line.get('metrics') or {}
        row: dict[str, Any] = {}
        for col in cols:
            if col == 'label':
                row[col] = cell.label()
            elif col in metric_cols:
                row[col] = metrics.get(col)
            elif col == 'horizons_s':
                row[col] = ','.join(f'{h:g}' for h in line.get(col) or ())
            elif col == 'overlay_file':
                row[col] = (str(overlay_path(Path(), cell.cell_id))
                            if line.get('overlay_yaml') else '')
            else:
                row[col] = line.get(col)
        for col in cols:
            if row[col] is None:
                row[col] = None if col in _INTS or col not in metric_cols else math.nan
        rows.append(row)
    return rows


def write_overlays(sweep: Sweep, newest: dict[str, dict[str, Any]], out_dir: Path) -> None:
    """Write each sysid cell's fitted overlay (its result line's text) to :func:`overlay_path`."""
    for cell in sweep.cells:
        text = (newest.get(cell.cell_id) or {}).get('overlay_yaml')
        if text:
            path = overlay_path(out_dir, cell.cell_id)
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding='utf-8')


def write_csv(rows: list[dict[str, Any]], path: Path, cols: tuple[str, ...] = COLUMNS) -> None:
    """Write the table as CSV (a header row of ``cols``)."""
    with open(path, 'w', encoding='utf-8', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(cols))
        w.writeheader()
        w.writerows(rows)


def write_parquet(rows: list[dict[str, Any]], path: Path, cols: tuple[str, ...] = COLUMNS
                  ) -> None:
    """Write the table as Parquet, through pyarrow (types inferred per column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pylist(rows) if rows else pa.table({c: [] for c in cols})
    pq.write_table(table, str(path))


def _figure_svg(rows: list[dict[str, Any]], column: str, title: str) -> str:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    ok = [r for r in rows if r['status'] == 'ok']
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(ok) + 1.2))
    ax.barh([r['label'] for r in ok], [float(r[column]) for r in ok], color='#4878a8')
    ax.invert_yaxis()
    ax.set_xlabel(column)
    ax.set_title(title)
    ax.tick_params(axis='y', labelsize=7)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format='svg')
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index('<svg'):]


def write_html(sweep: Sweep, rows: list[dict[str, Any]], path: Path) -> None:
    """Write the page: the sweep's name, two figures and the table."""
    metrics = metrics_of(sweep)
    shown = ('label', 'status', *(metrics[1:] if sweep.kind == 'eval' else metrics),
             *(('overlay_file',) if sweep.kind == 'sysid' else ()), 'wall_time_s', 'worker',
             'cell_id', 'error')

    def cell_text(v: Any) -> str:
        if isinstance(v, float):
            return 'nan' if math.isnan(v) else f'{v:.4g}'
        return html.escape('' if v is None else str(v))

    head = ''.join(f'<th>{html.escape(c)}</th>' for c in shown)
    body = ''.join('<tr>' + ''.join(f'<td>{cell_text(r[c])}</td>' for c in shown) + '</tr>'
                   for r in rows)
    figures = ''
    if any(r['status'] == 'ok' for r in rows):
        figures = ''.join(_figure_svg(rows, col, title) for col, title in figures_of(sweep))
    n_ok = sum(r['status'] == 'ok' for r in rows)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>sweep {html.escape(sweep.name)}</title>
<style>body{{font-family:sans-serif}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px}}</style></head><body>
<h1>sweep {html.escape(sweep.name)}</h1>
<p>{html.escape(sweep.source)}: {len(sweep.cells)} cells, {n_ok} ok, {len(rows) - n_ok} failed,
{len(sweep.cells) - len(rows)} not run. Every column: results.csv / results.parquet.</p>
{figures}
<table><tr>{head}</tr>{body}</table></body></html>
"""
    path.write_text(page, encoding='utf-8')


def write_outputs(sweep: Sweep, out_dir: Path) -> list[dict[str, Any]]:
    """Write the table (CSV, Parquet), ``report.html`` and ``overlays/``; return the rows."""
    newest = newest_results(out_dir)
    write_overlays(sweep, newest, out_dir)
    rows = table_rows(sweep, newest)
    cols = columns(sweep)
    write_csv(rows, out_dir / 'results.csv', cols)
    write_parquet(rows, out_dir / 'results.parquet', cols)
    write_html(sweep, rows, out_dir / 'report.html')
    return rows
