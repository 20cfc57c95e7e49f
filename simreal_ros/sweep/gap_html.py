"""The page of ``simreal eval-gap``: ``gap.html``, one file, figures as inline SVG (matplotlib).

Figures: sim vs real success rate per policy (one panel per sim, Wilson 95 % intervals as error
bars, the diagonal), the rank plot (each policy's rank in each sim joined to its rank in
reality: crossing lines are rank violations), the agreement statistics with their bootstrap
intervals (before and after sysid), and the real episodes needed. Tables: per policy, and the
episode plan.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from scipy import stats as _st

_COLORS = {'sim': '#c0504d', 'identified': '#4878a8'}


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt
    buf = io.StringIO()
    fig.tight_layout()
    fig.savefig(buf, format='svg')
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index('<svg'):]


def _scatter(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt
    rows = report['policies']
    sims = list(report['agreement'])
    fig, axes = plt.subplots(1, len(sims), figsize=(5 * len(sims), 4.6), squeeze=False)
    for ax, sim in zip(axes[0], sims, strict=True):
        for r in rows:
            x, y = r[sim]['success_rate'], r['real']['success_rate']
            xl, xh = r[sim]['wilson95']
            yl, yh = r['real']['wilson95']
            # max(0, .): the Wilson bound of 10/10 is 1 - 1e-16 (matplotlib refuses < 0)
            ax.errorbar(x, y, xerr=[[max(0.0, x - xl)], [max(0.0, xh - x)]],
                        yerr=[[max(0.0, y - yl)], [max(0.0, yh - y)]], fmt='o',
                        color=_COLORS.get(sim, 'k'), ecolor='#bbbbbb', capsize=2)
            ax.annotate(r['policy'], (x, y), fontsize=6, xytext=(3, 3),
                        textcoords='offset points')
        ax.plot([0, 1], [0, 1], '--', color='#888888', lw=0.8)
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(f'{sim} success rate')
        ax.set_ylabel('real success rate')
        su = report['agreement'][sim]['success']
        ax.set_title(f'{report["agreement"][sim]["label"]}\nSRCC {su["srcc"]["estimate"]:.2f}, '
                     f'MMRV {su["mmrv"]["estimate"]:.3f}', fontsize=9)
    return _svg(fig)


def _ranks(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt
    rows = report['policies']
    cols = [*report['agreement'], 'real']
    # rank 1 = best (highest success rate; tied policies share their mean rank)
    ranks = {c: _st.rankdata([-r[c]['success_rate'] for r in rows], method='average')
             for c in cols}
    fig, ax = plt.subplots(figsize=(2.6 * len(cols) + 1.5, 0.35 * len(rows) + 1.8))
    for i in range(len(rows)):
        ax.plot(range(len(cols)), [ranks[c][i] for c in cols], '-o', lw=1)
    tied: dict[float, list[str]] = {}  # policies tied in reality share one label
    for i, r in enumerate(rows):
        tied.setdefault(float(ranks['real'][i]), []).append(r['policy'])
    for rank, names in tied.items():
        ax.annotate(', '.join(names), (len(cols) - 1, rank), fontsize=7, xytext=(6, 0),
                    textcoords='offset points', va='center')
    ax.set_xticks(range(len(cols)), cols)
    ax.invert_yaxis()
    ax.set_ylabel('rank by success rate (1 = best; ties share the mean rank)')
    ax.set_xlim(-0.2, len(cols) - 0.2 + 1.6)
    ax.set_title('rank plot: crossing lines are rank violations', fontsize=9)
    return _svg(fig)


def _intervals(report: dict[str, Any]) -> str:
    import matplotlib.pyplot as plt
    stats = (('success', 'srcc'), ('success', 'mmrv'), ('success', 'pearson'),
             ('tracking_rmse_rad', 'srcc'), ('tracking_rmse_rad', 'pearson'))
    fig, axes = plt.subplots(1, len(stats), figsize=(3.0 * len(stats), 3.0))
    for ax, (metric, st) in zip(axes, stats, strict=True):
        for k, (sim, ag) in enumerate(report['agreement'].items()):
            d = ag[metric][st]
            est = d['estimate']
            if math.isnan(est):
                continue
            color = _COLORS.get(sim, 'k')
            # a percentile interval need not contain the estimate: drawn as its own line
            if not math.isnan(d['low']):
                ax.vlines(k, d['low'], d['high'], color=color, lw=2)
            ax.plot([k], [est], 'o', color=color)
        ax.set_xticks(range(len(report['agreement'])), list(report['agreement']))
        ax.set_xlim(-0.5, len(report['agreement']) - 0.5)
        ax.set_title(f'{st.upper()} of {"success" if metric == "success" else "tracking"}',
                     fontsize=9)
    return _svg(fig)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return 'nan' if math.isnan(v) else f'{v:.4g}'
    return html.escape(str(v))


def _table(head: list[str], body: list[list[Any]]) -> str:
    h = ''.join(f'<th>{html.escape(c)}</th>' for c in head)
    b = ''.join('<tr>' + ''.join(f'<td>{_fmt(v)}</td>' for v in row) + '</tr>' for row in body)
    return f'<table><tr>{h}</tr>{b}</table>'


def write_gap_html(report: dict[str, Any], path: Path) -> None:
    """Write the page of an eval-gap report (see :func:`gap_eval.analyse`)."""
    import matplotlib
    matplotlib.use('Agg')
    s = report['settings']
    rows = report['policies']
    backs = [b for b in ('sim', 'identified', 'real') if b in rows[0]]
    pol = _table(['policy', 'train overrides', *[f'{b} success' for b in backs],
                  *[f'{b} tracking rmse (rad)' for b in backs],
                  *[f'{b} median final error (rad)' for b in backs]],
                 [[r['policy'], r['train'] or '(base)',
                   *[f'{r[b]["success_rate"]:.0%} ({r[b]["wilson95"][0]:.2f}-'
                     f'{r[b]["wilson95"][1]:.2f})' for b in backs],
                   *[r[b]['tracking_rmse_mean_rad'] for b in backs],
                   *[r[b]['final_error_median_rad'] for b in backs]] for r in rows])
    agree_rows = []
    for ag in report['agreement'].values():
        for metric, stats in ag.items():
            if metric == 'label':
                continue
            for st, d in stats.items():
                agree_rows.append([ag['label'], metric, st.upper(), d['estimate'], d['low'],
                                   d['high'], d['undefined']])
    agree = _table(['sim', 'score', 'statistic', 'estimate', 'low', 'high',
                    'undefined resamples'], agree_rows)
    ep = report['real_episodes']
    sims = [x for x in ('sim', 'identified') if x in ep]
    ep_rows = []
    for i, x in enumerate(ep['per_policy']):
        ep_rows.append([x['policy'], f'{x["pilot_successes"]}/{ep["pilot_episodes"]}',
                        x['true_rate'], x['episodes_plain'], x['episodes_plain_truth'],
                        *[x[sm]['factor_pilot'] for sm in sims],
                        *[x[sm]['episodes_control_variate'] for sm in sims],
                        *[x[sm]['episodes_control_variate_truth'] for sm in sims],
                        *[ep[sm]['episodes_beta_prior'][i] for sm in sims]])
    ep_table = _table(['policy', 'pilot successes', 'true real rate', 'episodes (pilot plan)',
                       'episodes (truth)', *[f'variance factor {sm}' for sm in sims],
                       *[f'episodes, {sm} paired (pilot plan)' for sm in sims],
                       *[f'episodes, {sm} paired (truth)' for sm in sims],
                       *[f'episodes, {sm} Beta prior' for sm in sims]], ep_rows)
    rk = ep['ranking']
    rank_line = (f'To rank the zoo (every adjacent pair in order with probability '
                 f'{ep["rank_confidence"]:.0%}, gaps below {ep["min_gap"]} at that resolution): '
                 f'{rk["episodes_per_policy"]} real episodes per policy planned from the pilot, '
                 f'{rk["episodes_per_policy_truth"]} from the true rates'
                 + ''.join(f'; {ep[sm]["ranking_episodes_control_variate"]} with the {sm} sim '
                           f'in the difference estimator '
                           f'({ep[sm]["ranking_episodes_control_variate_truth"]} from the '
                           f'truth; Beta prior strength n0 = '
                           f'{ep[sm]["beta_prior"]["strength"]:.1f})' for sm in sims) + '.')
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>eval-gap {html.escape(report['zoo'])}</title>
<style>body{{font-family:sans-serif;max-width:1400px}} table{{border-collapse:collapse;
font-size:12px}} td,th{{border:1px solid #ccc;padding:2px 6px}}</style></head><body>
<h1>sim vs real: zoo {html.escape(report['zoo'])}</h1>
<p>{len(rows)} policies x {len(backs)} backends ({', '.join(backs)}), {s['episodes']} episodes
each on the same seeded goals (seed {s['seed']}). Reality: overlay {html.escape(s['reality'])}
with the {html.escape(s['real_latency'])} latency routes; identified sim:
{html.escape(s['identified'] or 'none')}. Intervals: {s['confidence']:.0%} percentile
bootstrap ({s['resamples']} resamples of the episodes within each policy). Everything:
gap.json.</p>
<h2>sim vs real success</h2>{_scatter(report)}
<h2>ranks</h2>{_ranks(report)}
<h2>agreement over the zoo</h2>{_intervals(report)}{agree}
<h2>per policy</h2>{pol}
<h2>how many real episodes</h2>
<p>Planned from a pilot of the first {ep['pilot_episodes']} real episodes per policy, for a
success rate within +-{ep['half_width']} at {ep['confidence']:.0%} (Wilson), and checked
against the truth (all {s['episodes']} real episodes).</p>{ep_table}
<p>{html.escape(rank_line)}</p>
</body></html>
"""
    path.write_text(page, encoding='utf-8')
