"""The flywheel's figures: replay gap and policy gap before/after, the table and the HTML page.

``replay_gap``, ``residual_gap`` and ``eval_gap`` turn the ``simreal sysid validate`` results,
the residual's fit and the ``simreal eval`` runs into the summary's numbers; ``format_table``
renders them in at most :data:`WIDTH` columns; ``write_html`` writes one self-contained page
(PNGs embedded as base64) and returns the figure names. Nothing here runs anything.
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from simreal_ros.report.figures import pyplot, to_png

#: Widest line of the terminal table (columns).
WIDTH = 100

#: Policy metrics compared: key, label, factor shown, decimals.
EVAL_ROWS = (('success_rate', 'success rate [%]', 100.0, 0),
             ('time_to_goal_mean_s', 'time to goal, mean [s]', 1.0, 2),
             ('final_error_median_rad', 'final error, median [rad]', 1.0, 4),
             ('tracking_rmse_mean_rad', 'tracking rmse [rad]', 1.0, 4))

#: The learned residual pays off when, on the held-out bag, its k-step RMSE at
#: RESIDUAL_KSTEP_S is at most RESIDUAL_KSTEP_MAX of the identified sim's and its open-loop RMSE
#: is not worse: the targets a residual must reach to be worth a call in every physics step
#: (14-18 us a call measured here). Measured on the virtual bus (docs/residual.md): 0.96-1.39x
#: where the overlay expresses the reality's terms, 0.46-0.65x with a cable spring it cannot.
RESIDUAL_KSTEP_S = 0.2
RESIDUAL_KSTEP_MAX = 0.7


def replay_gap(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """Per-joint open-loop (and k-step) RMSE on the held-out bag, nominal vs identified sim.

    ``before`` and ``after`` are ``simreal sysid validate`` results (nominal, identified).
    """
    b = before['open_loop']['per_joint_rad']
    a = after['open_loop']['per_joint_rad']
    joints = {j: {'nominal_rad': float(b[j]), 'identified_rad': float(a[j]),
                  'ratio': _div(a[j], b[j])} for j in b if j in a}
    k_step = {h: {'nominal_rad': float(v['total_rad']),
                  'identified_rad': float(after['k_step'][h]['total_rad'])}
              for h, v in before.get('k_step', {}).items() if h in after.get('k_step', {})}
    tb, ta = float(before['open_loop']['total_rad']), float(after['open_loop']['total_rad'])
    return {'window_ns': list(before['window_ns']), 'topics': before.get('topics', {}),
            'per_joint': joints,
            'all_joints': {'nominal_rad': tb, 'identified_rad': ta, 'ratio': _div(ta, tb)},
            'k_step': k_step}


def _div(a: float, b: float) -> float:
    return float(a) / float(b) if float(b) > 0 else float('nan')


def against_reality(parameters: Sequence[Mapping[str, Any]], robot: str, reality: str
                    ) -> dict[str, Any]:
    """Compare the estimates with the virtual arm's hidden reality (known on the virtual bus).

    Returns ``per_parameter`` (key -> reality value and relative error of the estimate) and
    ``median_relative_error`` per kind (damping, frictionloss, armature, mass, command_delay,
    backlash: the reality's ``imperfections.backlash_rad``).
    """
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    from simreal_ros.sim.engines import make_sim
    spec = load_robot(robot)
    reality_ov = load_overlay(reality)
    truth = reality_ov.apply(make_sim(spec).nominal, spec.name)
    per: dict[str, dict[str, float]] = {}
    kinds: dict[str, list[float]] = {}
    for row in parameters:
        key = str(row['key'])
        part = key.split('.')
        if key == 'command_delay_s':
            value = truth.command_delay_s
        elif part[0] == 'imperfections':
            value = float(reality_ov.imperfections.get(part[1], 0.0))
        elif part[0] == 'bodies':
            value = truth.body_mass[part[1]]
        else:
            value = float(getattr(truth.joints[part[1]], part[2]))
        err = abs(float(row['estimate']) - value) / abs(value) if value else float('nan')
        per[key] = {'reality': float(value), 'relative_error': err}
        kinds.setdefault(str(row['kind']), []).append(err)
    return {'reality': reality, 'per_parameter': per,
            'median_relative_error': {k: float(np.median(v)) for k, v in kinds.items()}}


def one_line_pipeline(pipe: Mapping[str, Any]) -> str:
    """Return a line: the fitted delay next to the servo's own and the pipeline latency."""
    s2s = pipe.get('sample_to_stamp', {}).get('median_ms')
    s2w = pipe.get('stamp_to_write', {}).get('median_ms')
    if s2s is None or s2w is None or pipe.get('expected_delay_s') is None:
        return 'pipeline latency: not measured (no reads or writes matched in the bus trace)'
    fitted = pipe.get('fitted_delay_s')
    head = (f'command delay fitted {fitted * 1e3:.0f} ms' if fitted is not None
            else 'command delay not fitted')
    return (f'{head}; servo {pipe["servo_delay_s"] * 1e3:.0f} ms + measured pipeline '
            f'{pipe["unmodelled_ms"]:.1f} ms (state sample to stamp {s2s:.1f}, stamp to goal '
            f'write {s2w:.1f}) = {pipe["expected_delay_s"] * 1e3:.1f} ms')


def injector_timing(bag: Path, latency: str) -> dict[str, dict[str, float]]:
    """Return, per route of the bag's injector events, injected latency and own lateness.

    Injected latency is deliver - receive, own lateness deliver - scheduled (p50/p99, ms). The
    lateness is the part of the delivered delay the profile did not ask for: the error of
    the injection itself, which real-time scheduling exists to keep small.
    """
    from simreal_ros.gap.episode import load_episode
    from simreal_ros.latency.injection import lateness_summary, load_profile, percentiles_ms
    ep = load_episode(str(bag))
    if ep.injector is None or not ep.injector.rows:
        return {}
    orders = {r.name: r.order for r in load_profile(latency).routes}
    ev = ep.injector.array()
    injected_ms = ep.injector.latency_ms()
    out = {}
    for k, route in enumerate(ep.injector.routes):
        rows = ev[ev[:, 0] == k]
        injected = percentiles_ms(list(injected_ms[route] * 1e6))  # ns, as the events count
        late = lateness_summary(rows, {k: orders.get(route, 'fifo')})
        out[route] = {'injected_p50_ms': injected[0], 'injected_p99_ms': injected[1],
                      'lateness_p50_ms': late['lateness_p50_ms'],
                      'lateness_p99_ms': late['lateness_p99_ms'],
                      'deliveries': late['deliveries']}
    return out


def one_line_injector(t: Mapping[str, Mapping[str, float]]) -> str:
    """One progress line: injected latency and the injector's own lateness per route."""
    if not t:
        return 'no injector events in the fit bag'
    return '; '.join(f'{route} injected p50/p99 {v["injected_p50_ms"]:.2f}/'
                     f'{v["injected_p99_ms"]:.2f} ms, own lateness {v["lateness_p50_ms"]:.2f}/'
                     f'{v["lateness_p99_ms"]:.2f} ms' for route, v in t.items())


def one_line_replay(r: Mapping[str, Any]) -> str:
    """One progress line: the all-joint RMSE before and after."""
    a = r['all_joints']
    return (f'open-loop rmse over all joints: nominal {a["nominal_rad"]:.4f} rad, identified '
            f'{a["identified_rad"]:.4f} rad ({a["ratio"]:.0%} of before)')


def residual_gap(fit: Mapping[str, Any], heldout: Mapping[str, Any]) -> dict[str, Any]:
    """Score the residual on the held-out bag and decide whether it pays off.

    ``fit`` is ``fit_residual``'s summary, ``heldout`` the ``simreal sysid validate`` result of
    the held-out bag with the overlay that names the residual (its ``comparison`` holds the
    identified sim with and without it). Returns the k-step and open-loop RMSE of both, their
    ratios, ``pays_off`` and the ``reason`` in words, the residual's compute time per call
    and its share of held-out steps outside the training range, and the fit's own figures.
    """
    c = heldout['comparison']
    h = f'{RESIDUAL_KSTEP_S:g}'
    k = {'fit_rad': float(c['fit']['k_step_rad'][h]),
         'fit_residual_rad': float(c['fit_residual']['k_step_rad'][h])}
    o = {'fit_rad': float(c['fit']['open_loop_rad']),
         'fit_residual_rad': float(c['fit_residual']['open_loop_rad'])}
    for v in (k, o):
        v['ratio'] = _div(v['fit_residual_rad'], v['fit_rad'])
    k_ok = k['ratio'] <= RESIDUAL_KSTEP_MAX  # False for NaN
    o_ok = o['ratio'] <= 1.0
    reason = (f'k-step {RESIDUAL_KSTEP_S:g} s {k["ratio"]:.0%} of identified '
              f'({"<=" if k_ok else ">"} {RESIDUAL_KSTEP_MAX:.0%}), open loop {o["ratio"]:.0%} '
              f'({"not worse" if o_ok else "worse"})')
    r = heldout['residual']
    return {'pays_off': bool(k_ok and o_ok), 'reason': reason, 'kind': str(fit['kind']),
            'k_step_s': RESIDUAL_KSTEP_S, 'k_step': k, 'open_loop': o,
            'per_joint_open_loop_rad': dict(heldout['open_loop']['per_joint_rad']),
            'compute_us': float(r['residual_compute_ns']) / 1e3,
            'ood_fraction': float(r['residual_ood_fraction']),
            'max_abs_output': float(r['residual_max_abs_output']),
            'output_bound': list(fit['output_bound']), 'windows': int(fit['windows']),
            'losses': dict(fit['losses']), 'fit_wall_s': float(fit['fit_time_s']),
            'own_holdout': [{m: float(part[m]['ratio']) for m in ('k_step', 'open_loop')}
                            for part in fit['heldout']]}


def one_line_residual(g: Mapping[str, Any]) -> str:
    """One progress line: the held-out score of the residual and what the demo does with it."""
    return f'held out: {g["reason"]}: {"pays off" if g["pays_off"] else "does not pay off"}'


def eval_gap(nominal: Mapping[str, Any], identified: Mapping[str, Any],
             real: Mapping[str, Any], corrected: Mapping[str, Any] | None = None
             ) -> dict[str, Any]:
    """Return the runs' metrics and the gaps ``|J_sim - J_real|`` before and after.

    With ``corrected`` (the run on the identified sim + residual), also its metrics
    (``residual_sim``) and gap (``gap_residual``).
    """
    from simreal_ros.report.eval_results import compare
    before, after = compare(nominal, real), compare(identified, real)
    out = {'episodes': int(real['metrics']['episodes']), 'seed': int(real['settings']['seed']),
           'policy': str(real['settings']['policy']),
           'metrics': {'nominal_sim': nominal['metrics'], 'identified_sim':
                       identified['metrics'], 'virtual_arm': real['metrics']},
           'gap_before': before['gap'], 'gap_after': after['gap'],
           'same_outcome_before': before['episodes_with_same_outcome'],
           'same_outcome_after': after['episodes_with_same_outcome']}
    if corrected is not None:
        res = compare(corrected, real)
        out['metrics']['residual_sim'] = corrected['metrics']
        out['gap_residual'] = res['gap']
        out['same_outcome_residual'] = res['episodes_with_same_outcome']
    return out


def _f(x: Any, digits: int = 4) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return '-'
    return f'{v:.{digits}f}' if math.isfinite(v) else '-'


def _window_text(window_ns: Sequence[int]) -> str:
    if len(window_ns) != 2:
        return 'unknown window'
    dur = (window_ns[1] - window_ns[0]) / 1e9
    return f'{dur:.2f} s from {window_ns[0]} ns to {window_ns[1]} ns (bag clock)'


def format_table(s: Mapping[str, Any], out: Path) -> str:
    """Render the summary for a terminal, no line longer than :data:`WIDTH`."""
    st = s['settings']
    r, e = s['replay'], s['eval']
    robot = st.get('robot', 'simreal_arm')
    bus = 'servo bus' if robot == 'simreal_arm' else robot
    lines = ['', f'simreal demo: real -> bag -> fit -> sim on the virtual {bus} '
                 f'(reality {st["reality"]}), {s["wall_s"]:.0f} s',
             f'held-out {st["holdout_pattern"]}: open-loop replay from the measured state, '
             f'{_window_s(r["window_ns"])} excitation window:',
             f'  {"joint":<20}{"nominal [rad]":>13}{"identified [rad]":>18}{"after/before":>14}']
    for j, v in r['per_joint'].items():
        lines.append(f'  {j:<20}{_f(v["nominal_rad"]):>13}{_f(v["identified_rad"]):>18}'
                     f'{_pct(v["ratio"]):>14}')
    a = r['all_joints']
    lines.append(f'  {"all (rms)":<20}{_f(a["nominal_rad"]):>13}{_f(a["identified_rad"]):>18}'
                 f'{_pct(a["ratio"]):>14}')
    for h, v in r['k_step'].items():
        lines.append(f'  {f"k-step {h} s (rms)":<20}{_f(v["nominal_rad"]):>13}'
                     f'{_f(v["identified_rad"]):>18}{_pct(_ratio(v)):>14}')
    m = e.get('metrics') or {}
    if 'skipped' in e:
        lines.append(f'policy gap skipped: {e["skipped"]}')
    else:
        lines += [f'policy {e["policy"]}, {e["episodes"]} episodes (seed {e["seed"]}); '
                  f'gap = |sim - virtual arm|:',
                  f'  {"metric":<27}{"nominal":>9}{"identified":>12}{"virtual":>9}'
                  f'{"gap before":>12}{"gap after":>11}',
                  f'  {"":<27}{"sim":>9}{"sim":>12}{"arm":>9}']
    for key, label, k, d in EVAL_ROWS if m else ():
        lines.append(f'  {label:<27}{_f(m["nominal_sim"][key] * k, d):>9}'
                     f'{_f(m["identified_sim"][key] * k, d):>12}'
                     f'{_f(m["virtual_arm"][key] * k, d):>9}'
                     f'{_f(e["gap_before"][key] * k, d):>12}{_f(e["gap_after"][key] * k, d):>11}')
    if 'residual_sim' in m:
        lines += ['  on the corrected sim (identified + residual), same episodes:',
                  f'  {"metric":<27}{"corrected sim":>14}{"gap":>9}']
        lines += [f'  {label:<27}{_f(m["residual_sim"][key] * k, d):>14}'
                  f'{_f(e["gap_residual"][key] * k, d):>9}' for key, label, k, d in EVAL_ROWS]
    g = s.get('residual')
    if g and 'k_step' not in g:
        lines.append(f'learned residual: {g["reason"]}')
    elif g:
        lines += [f'learned residual ({g["kind"]}, fit in {g["fit_wall_s"]:.0f} s) on the '
                  f'held-out bag:',
                  f'  {"rmse":<20}{"identified [rad]":>17}{"+ residual [rad]":>18}'
                  f'{"after/before":>14}']
        for label, v in ((f'k-step {g["k_step_s"]:g} s', g['k_step']),
                         ('open loop', g['open_loop'])):
            lines.append(f'  {label:<20}{_f(v["fit_rad"]):>17}{_f(v["fit_residual_rad"]):>18}'
                         f'{_pct(v["ratio"]):>14}')
        lines += [f'  {"pays off" if g["pays_off"] else "does not pay off"}: '
                  f'{g["reason"]}',
                  f'  {g["compute_us"]:.1f} us a call; {_pct(g["ood_fraction"])} of the held-out '
                  f'steps outside its training range']
    inj = s.get('injector') or {}
    if inj:
        lines += [f'latency injector {st["latency"]} on the fit data, p50 / p99 [ms]:',
                  f'  {"route":<20}{"injected":>17}{"own lateness":>17}']
        for route, v in inj.items():
            lines.append(f'  {route:<20}{_f(v["injected_p50_ms"], 2):>8} /'
                         f'{_f(v["injected_p99_ms"], 2):>7}{_f(v["lateness_p50_ms"], 2):>8} /'
                         f'{_f(v["lateness_p99_ms"], 2):>7}')
    ident = s.get('identify') or {}
    lines.append(f'identified in {ident.get("wall_s", float("nan")):.0f} s; median error '
                 f'against the hidden reality (per joint in summary.html):')
    med = (s.get('against_reality') or {}).get('median_relative_error') or {}
    lines.append('  ' + ', '.join(f'{k} {_pct(v)}' for k, v in med.items()))
    model = 'identified_residual.yaml' if (g or {}).get('pays_off') else 'identified.yaml'
    lines += [f'run folder: {out}',  # the only line whose width is the user's (the path)
              '  summary.html (one page, plots), bags/, reports/, logs/',
              f'  the model to use: {model} (overlay:= of simreal launch, eval and train)']
    return '\n'.join(lines)


def _window_s(window_ns: Sequence[int]) -> str:
    return f'{(window_ns[1] - window_ns[0]) / 1e9:.1f} s' if len(window_ns) == 2 else 'the'


def _ratio(v: Mapping[str, float]) -> float:
    return _div(v['identified_rad'], v['nominal_rad'])


def _pct(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return '-'
    return f'{v:.0%}' if math.isfinite(v) else '-'


# -- HTML ---------------------------------------------------------------------------------


def replay_traces(bag: Path, robot: str, overlay: Path, window_ns: Sequence[int],
                  residual_overlay: Path | None = None) -> dict[str, Any]:
    """Return the measured and the simulated positions of the held-out open-loop replay.

    The same replay as ``validate`` (its data, window and :class:`Replayer`), kept as time
    series for the figure: ``t_ns`` (measured stamps), ``measured``, ``nominal``,
    ``identified`` (arrays stamps x joints, rad), ``cmd_ns``, ``cmd`` (the commands replayed);
    with ``residual_overlay`` (an overlay naming a residual) also ``corrected``.
    """
    from simreal_ros.core.dynamics import load_overlay
    from simreal_ros.core.robot import load_robot
    from simreal_ros.sysid.data import load_sysid_data
    from simreal_ros.sysid.replay import Replayer
    spec = load_robot(robot)
    data = load_sysid_data(bag, spec, (int(window_ns[0]), int(window_ns[1])))
    rp = Replayer(spec, data)
    seg = rp.segments(data.window_ns[0], data.window_ns[1], None)
    out: dict[str, Any] = {'joints': list(spec.joint_names),
                           't_ns': data.state_ns[seg[0].states], 'measured': rp.measured(seg)[0],
                           'cmd_ns': data.cmd_ns, 'cmd': data.cmd_pos}
    for label, ov in (('nominal', None), ('identified', overlay)):
        params = load_overlay(ov).apply(rp.nominal, spec.name) if ov else rp.nominal
        delay = int(round(params.command_delay_s * 1e9 / rp.dt_ns))
        out[label] = rp.predict([params], [delay], seg)[0][0]
    if residual_overlay is not None:
        corr = load_overlay(residual_overlay)
        params = corr.apply(rp.nominal, spec.name)
        assert corr.residual is not None, residual_overlay
        delay = int(round(params.command_delay_s * 1e9 / rp.dt_ns))
        out['corrected'] = rp.predict_residual(params, delay, seg, corr.residual)[0]
    return out


def _fig_replay_bars(r: Mapping[str, Any]) -> bytes:
    plt = pyplot()
    joints = list(r['per_joint'])
    x = np.arange(len(joints))
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.bar(x - 0.2, [r['per_joint'][j]['nominal_rad'] for j in joints], 0.4, label='nominal sim')
    ax.bar(x + 0.2, [r['per_joint'][j]['identified_rad'] for j in joints], 0.4,
           label='identified sim')
    ax.set_xticks(x, joints, rotation=20)
    ax.set_ylabel('open-loop rmse [rad]')
    ax.set_title('held-out replay: sim - virtual arm, before and after the fit')
    ax.legend()
    return to_png(fig)


def _fig_replay_traces(tr: Mapping[str, Any]) -> bytes:
    plt = pyplot()
    joints = list(tr['joints'])
    t0 = int(tr['t_ns'][0])
    t = (np.asarray(tr['t_ns'], dtype=np.int64) - t0) / 1e9
    tc = (np.asarray(tr['cmd_ns'], dtype=np.int64) - t0) / 1e9
    keep = (tc >= 0) & (tc <= t[-1])
    fig, axes = plt.subplots(len(joints), 1, figsize=(9, 1.5 * len(joints)), sharex=True)
    for k, ax in enumerate(np.atleast_1d(axes)):
        ax.plot(tc[keep], np.asarray(tr['cmd'])[keep, k], color='0.7', lw=0.8,
                label='command')
        ax.plot(t, tr['measured'][:, k], color='k', lw=1.3, label='virtual arm (measured)')
        ax.plot(t, tr['nominal'][:, k], color='tab:red', lw=0.9, label='nominal sim')
        ax.plot(t, tr['identified'][:, k], color='tab:green', lw=0.9, ls='--',
                label='identified sim')
        if 'corrected' in tr:
            ax.plot(t, tr['corrected'][:, k], color='tab:blue', lw=0.9, ls=':',
                    label='identified + residual')
        ax.set_ylabel(f'{joints[k]}\n[rad]', fontsize=8)
    np.atleast_1d(axes)[0].legend(fontsize=7, ncol=5, loc='upper right')
    np.atleast_1d(axes)[-1].set_xlabel('time in the comparison window [s]')
    fig.suptitle('held-out commands replayed open loop from the measured state')
    return to_png(fig)


def _fig_replay_error(tr: Mapping[str, Any]) -> bytes:
    """Sim minus arm per joint: at 0.01-0.02 rad the traces overlap, the errors do not."""
    plt = pyplot()
    joints = list(tr['joints'])
    t = (np.asarray(tr['t_ns'], dtype=np.int64) - int(tr['t_ns'][0])) / 1e9
    fig, axes = plt.subplots(len(joints), 1, figsize=(9, 1.3 * len(joints)), sharex=True)
    for k, ax in enumerate(np.atleast_1d(axes)):
        ax.axhline(0.0, color='0.6', lw=0.6)
        ax.plot(t, tr['nominal'][:, k] - tr['measured'][:, k], color='tab:red', lw=0.8,
                label='nominal sim - arm')
        ax.plot(t, tr['identified'][:, k] - tr['measured'][:, k], color='tab:green', lw=0.8,
                label='identified sim - arm')
        if 'corrected' in tr:
            ax.plot(t, tr['corrected'][:, k] - tr['measured'][:, k], color='tab:blue', lw=0.8,
                    label='identified + residual - arm')
        ax.set_ylabel(f'{joints[k]}\n[rad]', fontsize=8)
    np.atleast_1d(axes)[0].legend(fontsize=7, ncol=3, loc='upper right')
    np.atleast_1d(axes)[-1].set_xlabel('time in the comparison window [s]')
    fig.suptitle('held-out replay error, before (nominal) and after (identified)')
    return to_png(fig)


def _fig_eval(e: Mapping[str, Any]) -> bytes:
    plt = pyplot()
    m = e['metrics']
    cols = [('nominal_sim', 'nominal', 'tab:red'), ('identified_sim', 'identified', 'tab:green')]
    if 'residual_sim' in m:
        cols.append(('residual_sim', '+ residual', 'tab:blue'))
    cols.append(('virtual_arm', 'virtual arm', 'k'))
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.8))
    for ax, (key, label, k, _d) in zip(axes, EVAL_ROWS[:3], strict=False):
        vals = [float(m[c][key]) * k for c, _l, _c in cols]
        ax.bar(range(len(cols)), [v if math.isfinite(v) else 0 for v in vals],
               color=[c for _k, _l, c in cols])
        ax.set_xticks(range(len(cols)), [lab for _k, lab, _c in cols], fontsize=8)
        ax.set_title(label, fontsize=9)
    fig.suptitle(f'policy {e["policy"]}, {e["episodes"]} episodes')
    return to_png(fig)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = ''.join(f'<th>{html.escape(str(h))}</th>' for h in head)
    body = ''.join('<tr>' + ''.join(f'<td>{html.escape(str(c))}</td>' for c in r) + '</tr>'
                   for r in rows)
    return f'<table><tr>{th}</tr>{body}</table>'


def _params_rows(ident: Mapping[str, Any], truth: Mapping[str, Any]) -> list[list[str]]:
    rows = []
    per = truth.get('per_parameter') or {}
    for p in ident.get('parameters') or []:
        t = per.get(p.get('key'), {})
        rows.append([str(p.get('key', '')), _f(p.get('nominal'), 5), _f(p.get('estimate'), 5),
                     _f(p.get('stddev'), 5), _f(t.get('reality'), 5),
                     _pct(t.get('relative_error')), 'yes' if p.get('identifiable', True)
                     else f'no: {p.get("reason", "")}'])
    return rows


def _residual_html(g: Mapping[str, Any] | None) -> list[str]:
    """Return the learned residual's section: held-out RMSE with and without it, the verdict."""
    if not g:
        return []
    if 'k_step' not in g:
        return ['<h2>Learned residual</h2>', f'<p>{html.escape(g["reason"])}</p>']
    rows = [[f'k-step {g["k_step_s"]:g} s', _f(g['k_step']['fit_rad']),
             _f(g['k_step']['fit_residual_rad']), _pct(g['k_step']['ratio'])],
            ['open loop', _f(g['open_loop']['fit_rad']), _f(g['open_loop']['fit_residual_rad']),
             _pct(g['open_loop']['ratio'])]]
    verdict = ('It pays off: <code>identified_residual.yaml</code> (the identified overlay '
               'naming <code>residual.pt</code>) is the model to use.' if g['pays_off'] else
               'It does not pay off: <code>identified.yaml</code> stays the model.')
    return [
        '<h2>Learned residual</h2>',
        f'<p>A {html.escape(g["kind"])} residual trained on the fit bag against the identified '
        f'sim ({g["windows"]} windows, {_f(g["fit_wall_s"], 1)} s), scored on the held-out bag '
        f'over the same window: {html.escape(g["reason"])}. {verdict} '
        f'{g["compute_us"]:.1f} us a call; {_pct(g["ood_fraction"])} of the held-out steps '
        f'had inputs outside the training range (clamped to it).</p>',
        _table(['rmse (all joints)', 'identified sim [rad]', '+ residual [rad]',
                'after / before'], rows)]


def write_html(s: Mapping[str, Any], traces: Mapping[str, Any], path: Path) -> list[str]:
    """Write the one-page summary at ``path``; return the names of the figures it embeds.

    ``traces`` is :func:`replay_traces` of the held-out bag; the PNGs go to ``plots/`` too.
    """
    figs: list[tuple[str, str, bytes]] = [
        ('replay_error', 'Held-out replay error: sim - virtual arm', _fig_replay_error(traces)),
        ('replay_traces', 'Held-out replay: measured and simulated', _fig_replay_traces(traces)),
        ('replay_rmse', 'Held-out replay RMSE per joint', _fig_replay_bars(s['replay']))]
    skipped = s['eval'].get('skipped')
    if not skipped:
        figs.append(('policy', 'Policy evaluation', _fig_eval(s['eval'])))
    for name, _title, png in figs:
        (path.parent / 'plots').mkdir(parents=True, exist_ok=True)
        (path.parent / 'plots' / f'{name}.png').write_bytes(png)
    st, r, e = s['settings'], s['replay'], s['eval']
    replay_rows = [[j, _f(v['nominal_rad']), _f(v['identified_rad']), _pct(v['ratio'])]
                   for j, v in r['per_joint'].items()]
    a = r['all_joints']
    replay_rows.append(['all (rms)', _f(a['nominal_rad']), _f(a['identified_rad']),
                        _pct(a['ratio'])])
    for h, v in r['k_step'].items():
        replay_rows.append([f'k-step {h} s (rms)', _f(v['nominal_rad']),
                            _f(v['identified_rad']),
                            _pct(_ratio(v))])
    m = e.get('metrics') or {}
    corrected = 'residual_sim' in m
    eval_rows = [[label, _f(m['nominal_sim'][k] * f, d), _f(m['identified_sim'][k] * f, d)]
                 + ([_f(m['residual_sim'][k] * f, d)] if corrected else [])
                 + [_f(m['virtual_arm'][k] * f, d), _f(e['gap_before'][k] * f, d),
                    _f(e['gap_after'][k] * f, d)]
                 + ([_f(e['gap_residual'][k] * f, d)] if corrected else [])
                 for k, label, f, d in (() if skipped else EVAL_ROWS)]
    ident = s.get('identify') or {}
    win = s.get('windows_ns') or {}
    parts = [
        '<!doctype html><html><head><meta charset="utf-8"><title>simreal demo</title><style>'
        'body{font-family:sans-serif;max-width:960px;margin:1em auto}'
        'table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;'
        'padding:2px 8px;text-align:right}img{max-width:100%}</style></head><body>',
        '<h1>simreal demo: the sim-to-real flywheel</h1>',
        f'<p>Virtual servo bus with the hidden reality <code>{html.escape(st["reality"])}'
        f'</code> of {html.escape(st.get("robot", "simreal_arm"))}, the servo driver, '
        f'latency injector <code>{html.escape(st["latency"])}</code>. '
        f'Fit data: <code>{html.escape(st["fit_pattern"])}</code>, {st["fit_s"]:g} s; held-out '
        f'data: <code>{html.escape(st["holdout_pattern"])}</code>, {st["holdout_s"]:g} s, '
        f'another seed. Wall time {s["wall_s"]:.0f} s.</p>',
        '<h2>Comparison window</h2>',
        f'<p>The sims start from the measured state at the window start, and only the '
        f'excitation window is compared: from {st["settle_s"]:g} s after the first command, '
        f'or later when the arm is first back within 0.2 rad of the command on every joint '
        f'(the unpowered arm sags until torque is on and the first commands pull it back), '
        f'to the last command. Held-out window: '
        f'{html.escape(_window_text(win.get("holdout", [])))}; fit window: '
        f'{html.escape(_window_text(win.get("fit", [])))}.</p>',
        '<h2>Held-out replay gap (open loop, sim - virtual arm)</h2>',
        _table(['joint', 'nominal sim [rad]', 'identified sim [rad]', 'after / before'],
               replay_rows),
        '<h2>Policy gap</h2>',
        *([f'<p>Skipped: {html.escape(skipped)}.</p>'] if skipped else [
            f'<p>{html.escape(e["policy"])}, {e["episodes"]} seeded episodes (seed '
            f'{e["seed"]}); gap = |J<sub>sim</sub> - J<sub>virtual arm</sub>|.</p>',
            _table(['metric', 'nominal sim', 'identified sim']
                   + (['identified + residual'] if corrected else [])
                   + ['virtual arm', 'gap before', 'gap after']
                   + (['gap with residual'] if corrected else []), eval_rows)]),
        *_residual_html(s.get('residual')),
        '<h2>Identified parameters</h2>',
        f'<p>{html.escape(", ".join(st["fit"]))}; fit wall time '
        f'{_f(ident.get("wall_s"), 1)} s. Overlay: <code>identified.yaml</code>.</p>',
        _table(['parameter', 'nominal', 'estimate', 'stddev', 'hidden reality',
                'error', 'identifiable'], _params_rows(ident, s.get('against_reality') or {})),
    ]
    for _name, title, png in figs:
        parts.append(f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" '
                     f'src="data:image/png;base64,{base64.b64encode(png).decode()}">')
    parts.append('</body></html>')
    path.write_text('\n'.join(parts), encoding='utf-8')
    return [name for name, _t, _p in figs]
