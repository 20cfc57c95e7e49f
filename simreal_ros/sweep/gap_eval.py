"""``simreal eval-gap``: does the sim rank a policy zoo like reality, before and after sysid.

Every policy of a built zoo (:mod:`simreal_ros.sweep.zoo`) is evaluated, as sweep cells
(:mod:`simreal_ros.sweep.evaluate`: in-process, lockstep, no ROS; local workers or Ray through
:func:`simreal_ros.sweep.runner.run_sweep`, resumable), on three backends with the same seeded
goals (one ``goal_seed`` for all cells, so episode ``k`` is the same goal everywhere):

=========== =================================================================================
backend     the world
=========== =================================================================================
sim         the nominal sim: no overlay, no delay, no latency route (what ``simreal train``
            and ``simreal eval --backend sim`` start from)
identified  the nominal sim with the sysid-fitted overlay (``--identified``; the flywheel's
            ``overlay:=identified.yaml``), its identified ``command_delay_s`` kept (the cell
            runs with the pass-through ``none`` latency preset, which keeps the delay line)
real        the hidden reality (``--reality``, an overlay: dynamics, masses, command delay)
            with the ``--real-latency`` preset's command and observation routes: the
            in-process stand-in for the virtual robot. Not modelled in-process: the servo-bus
            emulator's imperfections (backlash, encoder quantization and noise, thermal).
            With ``--real emulator`` (:mod:`simreal_ros.jobs.gap_real`) ``real`` is the
            virtual robot itself (``simreal eval --backend real``, the emulator with the
            reality, over ROS) on the same goals, and the stand-in is reported as ``standin``
            with its agreement with the emulator.
=========== =================================================================================

Per policy: success rate (with its Wilson 95 % interval), median final error and mean tracking
RMSE on each backend. Over the zoo, for each of ``sim`` (before sysid) and ``identified``
(after) against ``real``: SRCC, MMRV and Pearson r of the success rates, and SRCC and Pearson
of the mean tracking RMSE, each with a bootstrap interval (:func:`ranking.bootstrap`, episodes
resampled within each policy, seeded by ``--seed``).

How many real episodes (:mod:`simreal_ros.sweep.ranking`), planned from a pilot of the first
``pilot`` real episodes per policy, and checked against the truth (all ``episodes`` real
episodes, which only a virtual robot affords): per policy the Wilson episodes for
``+-half_width``; the same with each sim's paired episodes in the difference estimator
(``n f``, ``f`` of :func:`ranking.control_variate` from the pilot pairs) and with the
sim-calibrated Beta prior (``n - n0``); episodes per policy to rank the zoo (adjacent pairs in
the planned order at ``rank_confidence``), plain and with the difference estimator.

Outputs in ``OUT``: the cells' ``results.jsonl`` (resume), ``gap.json`` (everything above) and
``gap.html`` (:mod:`simreal_ros.sweep.gap_html`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
import json
import math
from pathlib import Path
import time
from typing import Any, Callable

import numpy as np

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.sweep import ranking
from simreal_ros.sweep.config import Cell, EvalSettings, Sweep
from simreal_ros.sweep.gap_real import REAL_KINDS, standin_agreement
from simreal_ros.sweep.runner import read_results, run_sweep
from simreal_ros.sweep.zoo import Zoo, check_built

BACKENDS = ('sim', 'identified', 'real')
#: The sims compared with reality: (backend, label in the report).
SIMS = (('sim', 'before sysid (nominal sim)'), ('identified', 'after sysid (identified sim)'))


@dataclass(frozen=True)
class GapSettings:
    """What ``simreal eval-gap`` runs (the CLI's options)."""

    reality: str = 'weak_servo_reality'
    identified: str = 'weak_servo_reality_identified'   # '' = no identified sim
    real_latency: str = 'usb_serial'
    engine: str = 'mujoco'
    episodes: int = 40
    seed: int = 0
    pilot: int = 10
    resamples: int = 2000
    confidence: float = 0.95
    half_width: float = 0.1
    rank_confidence: float = 0.9
    min_gap: float = 0.05
    real: str = 'standin'   # or 'emulator': the virtual servo bus (gap_real)


def check_settings(s: GapSettings) -> None:
    """Fail with the option's name on a value no run can use."""
    def bad(flag: str, v: Any, expected: str) -> SimrealError:
        return SimrealError(f'--{flag} {v!r}: expected {expected}')

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not is_int(s.episodes) or s.episodes < 2:
        raise bad('episodes', s.episodes, 'an integer >= 2')
    if not is_int(s.pilot) or not 1 <= s.pilot <= s.episodes:
        raise bad('pilot', s.pilot, f'an integer in [1, --episodes = {s.episodes}]')
    if not is_int(s.seed) or s.seed < 0:
        raise bad('seed', s.seed, 'an integer >= 0')
    if not is_int(s.resamples) or s.resamples < 10:
        raise bad('resamples', s.resamples, 'an integer >= 10')
    for flag, v in (('confidence', s.confidence), ('rank-confidence', s.rank_confidence)):
        if not isinstance(v, float) or not 0.0 < v < 1.0:
            raise bad(flag, v, 'a number in (0, 1)')
    if not isinstance(s.half_width, float) or not 0.0 < s.half_width < 0.5:
        raise bad('half-width', s.half_width, 'a number in (0, 0.5)')
    if not isinstance(s.min_gap, float) or not 0.0 < s.min_gap <= 1.0:
        raise bad('min-gap', s.min_gap, 'a number in (0, 1]')
    if s.real not in REAL_KINDS:
        raise bad('real', s.real, f'one of {list(REAL_KINDS)}')
    if not s.reality:
        raise bad('reality', s.reality, 'an overlay name or path (the hidden reality)')


def plan_cells(zoo: Zoo, s: GapSettings, policies_dir: Path | None = None
               ) -> tuple[Sweep, dict[tuple[str, str], Cell]]:
    """Return the in-memory sweep of every (entry, backend) cell and the cells by key."""
    from simreal_ros.sweep.config import _Checker
    specs = check_built(zoo, policies_dir)
    robot = load_policy_spec(str(next(iter(specs.values())))).robot
    check = _Checker(zoo.source, Path(zoo.source).parent)
    overlays = {'real': s.reality, 'identified': s.identified}
    for backend, key in (('real', 'reality'), ('identified', 'identified')):
        if not overlays[backend]:
            continue
        try:
            ov = load_overlay(overlays[backend])
        except ConfigError as exc:
            raise SimrealError(f'--{key} {overlays[backend]!r}: expected a model overlay name '
                               f'or path ({exc})') from None
        if ov.robot not in (None, robot):
            raise SimrealError(f'--{key} {overlays[backend]!r}: an overlay of robot '
                               f'{ov.robot!r}, the zoo is of {robot!r}')
    try:
        check.axis('latency', s.real_latency, 'real_latency')
    except ConfigError as exc:
        raise SimrealError(f'--real-latency {s.real_latency!r}: expected {exc.expected}'
                           ) from None
    ev = EvalSettings(episodes=s.episodes)
    cells: dict[tuple[str, str], Cell] = {}
    worlds = {'sim': ('', ''), 'identified': (s.identified, 'none'),
              'real': (s.reality, s.real_latency)}
    for e in zoo.entries:
        for backend in BACKENDS:
            overlay, latency = worlds[backend]
            if backend == 'identified' and not s.identified:
                continue
            cells[(e.name, backend)] = Cell(
                kind='eval', policy=str(specs[e.name]), robot=robot, overlay=overlay,
                engine=s.engine, latency=latency, randomization='', seed=0,
                **asdict(ev), sweep_seed=s.seed)
    sweep = Sweep(zoo.source, f'eval-gap {zoo.name}', s.seed, 2, ev, tuple(cells.values()))
    return sweep, cells


def _backend_row(line: dict[str, Any], cell_id: str) -> dict[str, Any]:
    eps = line['episode_results']
    k = sum(bool(x['success']) for x in eps)
    lo, hi = ranking.wilson_interval(k, len(eps))
    m = line['metrics']
    return {'success_rate': k / len(eps), 'successes': k, 'episodes': len(eps),
            'wilson95': [lo, hi], 'final_error_median_rad': m['final_error_median_rad'],
            'tracking_rmse_mean_rad': m['tracking_rmse_mean_rad'],
            'success': [int(bool(x['success'])) for x in eps],
            'tracking_rmse_rad': [float(x['tracking_rmse_rad']) for x in eps],
            'cell_id': cell_id, 'source': line.get('source', 'cell'),
            'worker': line.get('worker', ''), 'wall_time_s': line.get('wall_time_s')}


def _policy_rows(zoo: Zoo, cells: dict[tuple[str, str], Cell], lines: dict[str, Any],
                 emulator: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    rows = []
    for e in zoo.entries:
        row: dict[str, Any] = {'policy': e.name, 'train': e.train}
        for backend in BACKENDS:
            c = cells.get((e.name, backend))
            if c is not None:
                row[backend] = _backend_row(lines[c.cell_id], c.cell_id)
        if emulator is not None:  # the emulator is the reality; the stand-in is reported
            row['standin'] = row['real']
            row['real'] = _backend_row(emulator[e.name], row['standin']['cell_id'])
        rows.append(row)
    return rows


def _agreement(rows: list[dict[str, Any]], sim: str, s: GapSettings, real: str = 'real'
               ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric, stats in (('success', ('srcc', 'mmrv', 'pearson')),
                          ('tracking_rmse_rad', ('srcc', 'pearson'))):
        se = [r[sim][metric] for r in rows]
        re_ = [r[real][metric] for r in rows]
        out[metric] = {st: ranking.bootstrap(se, re_, st, resamples=s.resamples,
                                             confidence=s.confidence, seed=s.seed).as_dict()
                       for st in stats}
    return out


def _episode_plan(rows: list[dict[str, Any]], s: GapSettings) -> dict[str, Any]:
    """Real episodes needed, planned from the pilot and from the truth (all real episodes)."""
    m = s.pilot
    per: list[dict[str, Any]] = []
    for r in rows:
        real = r['real']['success']
        k_pilot = sum(real[:m])
        p_plan = ranking.planning_rate(k_pilot, m)
        p_true = r['real']['success_rate']
        n_plain = ranking.episodes_for_success_rate(p_plan, s.half_width, s.confidence)
        item: dict[str, Any] = {
            'policy': r['policy'], 'pilot_successes': k_pilot, 'pilot_rate': k_pilot / m,
            'planning_rate': p_plan, 'true_rate': p_true,
            'pilot_error': abs(k_pilot / m - p_true),
            'episodes_plain': n_plain,
            'episodes_plain_truth': ranking.episodes_for_success_rate(
                p_true, s.half_width, s.confidence)}
        for sim, _label in SIMS:
            if sim not in r:
                continue
            cv = ranking.control_variate(r[sim]['success'][:m], real[:m])
            cv_all = ranking.control_variate(r[sim]['success'], real)
            item[sim] = {'rho_pilot': cv.rho, 'rho_truth': cv_all.rho,
                         'factor_pilot': cv.variance_factor,
                         'factor_truth': cv_all.variance_factor,
                         'episodes_control_variate': math.ceil(n_plain * cv.variance_factor),
                         'episodes_control_variate_truth': math.ceil(
                             item['episodes_plain_truth'] * cv_all.variance_factor)}
        per.append(item)
    out: dict[str, Any] = {'pilot_episodes': m, 'half_width': s.half_width,
                           'confidence': s.confidence, 'rank_confidence': s.rank_confidence,
                           'min_gap': s.min_gap, 'per_policy': per}
    plan = ranking.episodes_for_ranking([x['planning_rate'] for x in per], s.rank_confidence,
                                        s.min_gap)
    truth = ranking.episodes_for_ranking([x['true_rate'] for x in per], s.rank_confidence,
                                         s.min_gap)
    out['ranking'] = {'episodes_per_policy': plan.episodes_per_policy,
                      'episodes_per_policy_truth': truth.episodes_per_policy,
                      'order': [per[i]['policy'] for i in plan.order],
                      'order_truth': [per[i]['policy'] for i in truth.order]}
    for sim, _label in SIMS:
        if sim not in rows[0]:
            continue
        f = [x[sim]['factor_pilot'] for x in per]
        cvp = ranking.episodes_for_ranking([x['planning_rate'] for x in per],
                                           s.rank_confidence, s.min_gap, variance_factors=f)
        bp = ranking.beta_prior([r[sim]['success_rate'] for r in rows],
                                [x['pilot_successes'] for x in per], [m] * len(per),
                                max_strength=float(s.episodes))
        cvt = ranking.episodes_for_ranking([x['true_rate'] for x in per], s.rank_confidence,
                                           s.min_gap,
                                           variance_factors=[x[sim]['factor_truth']
                                                             for x in per])
        out[sim] = {
            'ranking_episodes_control_variate': cvp.episodes_per_policy,
            'ranking_episodes_control_variate_truth': cvt.episodes_per_policy,
            'beta_prior': {'offset': bp.offset, 'tau2': bp.tau2, 'strength': bp.strength},
            'episodes_beta_prior': [max(0, x['episodes_plain'] - int(bp.strength))
                                    for x in per]}
    return out


def analyse(zoo: Zoo, cells: dict[tuple[str, str], Cell], out_dir: Path, s: GapSettings,
            emulator: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Turn the finished cells into the report (every cell must have an ``ok`` line).

    ``emulator``: the virtual robot's runs by policy (``--real emulator``), then ``real``.
    """
    lines: dict[str, Any] = {}
    for line in read_results(out_dir):
        if line.get('status') == 'ok':
            lines[str(line['cell_id'])] = line
    missing = [f'{e}/{b}' for (e, b), c in cells.items() if c.cell_id not in lines]
    if missing:
        raise SimrealError(f'{len(missing)} cells have no result ({", ".join(missing[:4])}); '
                           f'see {out_dir / "results.jsonl"}')
    rows = _policy_rows(zoo, cells, lines, emulator)
    report: dict[str, Any] = {'zoo': zoo.name, 'zoo_file': zoo.source,
                              'settings': asdict(s), 'policies': rows, 'agreement': {}}
    for sim, label in SIMS:
        if sim in rows[0]:
            report['agreement'][sim] = {'label': label, **_agreement(rows, sim, s)}
    if emulator is not None:
        # the stand-in as one more sim of the emulator, and the sims against the stand-in
        report['agreement']['standin'] = {'label': 'in-process stand-in',
                                          **_agreement(rows, 'standin', s)}
        report['agreement_standin'] = {
            sim: {'label': label, **_agreement(rows, sim, s, 'standin')}
            for sim, label in SIMS if sim in rows[0]}
        report['standin_vs_emulator'] = standin_agreement(rows)
    report['real_episodes'] = _episode_plan(rows, s)
    report['cells_wall_time_s'] = sum(float(line.get('wall_time_s') or 0.0)
                                      for line in lines.values())
    return report


def run_eval_gap(zoo: Zoo, s: GapSettings, out_dir: Path, *, policies_dir: Path | None = None,
                 workers: int = 1, ray_address: str | None = None,
                 log: Callable[[str], None] = print,
                 real_runner: Callable[..., dict[str, dict[str, Any]]] | None = None
                 ) -> dict[str, Any]:
    """Run the cells not finished in ``out_dir``, then write ``gap.json`` and ``gap.html``.

    ``real_runner``: with ``--real emulator``, what runs the reality's episodes on the virtual
    robot (:func:`simreal_ros.jobs.gap_real.run_emulator`; a layer above this one).
    """
    from simreal_ros.sweep.gap_html import write_gap_html
    check_settings(s)
    sweep, cells = plan_cells(zoo, s, policies_dir)
    outcome = run_sweep(sweep, out_dir, workers=workers, ray_address=ray_address, log=log)
    emulator = None
    if s.real == 'emulator':
        if real_runner is None:
            raise SimrealError('--real emulator: no runner of the virtual robot given '
                               '(simreal_ros.jobs.gap_real.run_emulator)')
        t0 = time.monotonic()
        emulator = real_runner({e.name: cells[(e.name, 'real')] for e in zoo.entries},
                               out_dir, log)
        outcome.wall_time_s += time.monotonic() - t0
    report = analyse(zoo, cells, out_dir, s, emulator)
    report['run'] = {'ran': outcome.ran, 'skipped': outcome.skipped, 'failed': outcome.failed,
                     'wall_time_s': outcome.wall_time_s}
    (out_dir / 'gap.json').write_text(json.dumps(report, indent=1, default=_json) + '\n',
                                      encoding='utf-8')
    write_gap_html(report, out_dir / 'gap.html')
    return report


def _json(v: Any) -> Any:
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    raise TypeError(type(v).__name__)


def _iv(d: dict[str, Any]) -> str:
    return f'{d["estimate"]:.3f} [{d["low"]:.3f}, {d["high"]:.3f}]'


def _agreement_lines(ags: dict[str, Any], real: str) -> list[str]:
    lines = []
    for sim, ag in ags.items():
        su = ag['success']
        lines.append(f'{ag["label"]}: success SRCC {_iv(su["srcc"])}, MMRV {_iv(su["mmrv"])}, '
                     f'Pearson {_iv(su["pearson"])}; tracking SRCC '
                     f'{_iv(ag["tracking_rmse_rad"]["srcc"])}  ({sim} vs {real}, '
                     f'{su["srcc"]["confidence"]:.0%} bootstrap)')
    return lines


def format_summary(report: dict[str, Any]) -> str:
    """Return a terminal table: per policy success on each backend, then the agreement lines."""
    rows = report['policies']
    backs = [b for b in (*BACKENDS, 'standin') if b in rows[0]]
    lines = [f'{"policy":<20}' + ''.join(f'{b:>12}' for b in backs)
             + ''.join(f'{b + " rmse":>16}' for b in backs)]
    for r in rows:
        lines.append(f'{r["policy"]:<20}' + ''.join(f'{r[b]["success_rate"]:>12.0%}'
                                                    for b in backs)
                     + ''.join(f'{r[b]["tracking_rmse_mean_rad"]:>16.4f}' for b in backs))
    if rows[0]['real']['source'] == 'emulator':
        lines.append('real: the virtual servo bus (simreal eval --backend real); standin: the '
                     'in-process stand-in')
    blocks = [(report['agreement'], 'real')]
    if 'agreement_standin' in report:
        blocks.append((report['agreement_standin'], 'standin'))
        sv = report['standin_vs_emulator']
        lines.append(f'stand-in vs emulator: the same outcome on {sv["same_outcome"]} of '
                     f'{sv["episodes"]} paired episodes')
    for ags, real in blocks:
        lines.extend(_agreement_lines(ags, real))
    ep = report['real_episodes']
    rk = ep['ranking']
    lines.append(f'real episodes per policy to rank the zoo at {ep["rank_confidence"]:.0%}: '
                 f'{rk["episodes_per_policy"]} planned from a pilot of {ep["pilot_episodes"]} '
                 f'({rk["episodes_per_policy_truth"]} from the truth)'
                 + ''.join(f'; with {sim} as control variate '
                           f'{ep[sim]["ranking_episodes_control_variate"]} '
                           f'({ep[sim]["ranking_episodes_control_variate_truth"]})'
                           for sim, _l in SIMS if sim in ep))
    return '\n'.join(lines)
