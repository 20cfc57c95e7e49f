"""``simreal gap BAG --out DIR``: gap metrics as JSON and a self-contained HTML report.

``DIR/gap.json`` holds the metrics (per-joint RMSE, max and mean error, lag, k-step error
after twin re-syncs, per-topic stream statistics, injector latency statistics, and per camera
of the pair PSNR, SSIM, mean intensity and colour-histogram intersection of the frames paired
by stamp, with a strip of paired frames, ``camera_<name>.png``); ``DIR/
report.html`` embeds every plot as a base64 PNG (no other files needed); the PNGs are also
written next to it.

**Data quality.** Before it computes anything, the report judges the streams it pairs (both
joint_states topics, and each camera's two image topics) with :mod:`simreal_ros.gap.validity`,
the analysis of ``simreal check``: ``data_quality`` in gap.json holds each stream's verdict.
Joint metrics over a dropped or stalled stream are refused
(:class:`~simreal_ros.errors.BadDataError`, nothing written) unless ``allow_bad_data``; then
``gap``, each ``gap.per_joint.<joint>`` and each ``cameras.<camera>`` carry ``valid`` and
``invalid_reason``. Camera metrics are marked, never refused: a camera stream that drops frames
under load is common, and the joint gap stays worth reading.

**Legged robots.** ``legged`` in gap.json (and a table in the report) is the legged gap of a
floating-base robot from its ``odom``, ``foot_contacts``, ``imu/data`` and ``cmd_vel``
(:func:`simreal_ros.gap.legged_bag.legged_section`): the primary's namespace against the
secondary's in one bag (a ``sim2sim`` bag), or with ``against`` this bag's robot against
another bag's; None when the bag has no legged pair.
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path
import sys
import time
from typing import Any, Sequence

import numpy as np

from simreal_ros.errors import BadDataError, BagError, SimrealError
from simreal_ros.gap.episode import Episode, default_pairing, load_episode
from simreal_ros.gap.host_stalls import STALL_LIMIT_NS
from simreal_ros.gap.image_metrics import CameraGap, camera_gap, camera_pairs
from simreal_ros.gap.legged_bag import legged_section
from simreal_ros.gap.metrics import GapSummary, pair, summarize
from simreal_ros.gap.validity import MAX_DROPPED_FRACTION, StreamVerdict, judge_streams, validity
from simreal_ros.report.figures import pyplot, to_png


class ProgressBar:
    """A one-line progress bar on stderr (redrawn at most every 0.2 s)."""

    def __init__(self, label: str, stream: Any = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self._last = 0.0

    def __call__(self, done: int, total: int) -> None:
        """Show ``done`` of ``total``."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2 and done < total:
            return
        self._last = now
        frac = done / total if total else 1.0
        bar = '#' * int(30 * frac)
        self.stream.write(f'\r{self.label} [{bar:<30}] {100 * frac:5.1f} % '
                          f'({done}/{total} messages)')
        if done >= total:
            self.stream.write('\n')
        self.stream.flush()


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def _latency_stats(ep: Episode) -> dict[str, Any] | None:
    if ep.injector is None:
        return None
    lat = ep.injector.latency_ms()
    fates = ep.injector.fate_counts()
    out: dict[str, Any] = {'malformed_messages': ep.injector.malformed, 'routes': {}}
    for route in ep.injector.routes:
        x = lat.get(route, np.zeros(0))
        stats: dict[str, Any] = {'events': int(sum(fates[route].values())),
                                 'fates': fates[route], 'delivered': int(x.size)}
        if x.size:
            stats.update({'latency_ms_mean': float(x.mean()),
                          'latency_ms_p50': float(np.percentile(x, 50)),
                          'latency_ms_p99': float(np.percentile(x, 99)),
                          'latency_ms_max': float(x.max()), 'latency_ms_min': float(x.min())})
        out['routes'][route] = stats
    return out


def analyse(ep: Episode, primary: str | None, secondary: str | None,
            max_lag_s: float = 0.2, resync_topic: str = '') -> dict[str, Any]:
    """Compute the metrics of an episode (the content of gap.json)."""
    out: dict[str, Any] = {
        'bag': str(ep.info.path), 'duration_s': (ep.info.end_ns - ep.info.start_ns) / 1e9,
        'message_count': ep.info.message_count,
        'topics': {t: {'type': ty, 'count': n, **ep.stats[t].as_dict()}
                   for t, (ty, n) in sorted(ep.info.topics.items()) if t in ep.stats},
        'custom_data_keys': sorted(ep.info.custom_data),
    }
    out['pairing'] = None
    out['gap'] = None
    if primary and secondary:
        for t in (primary, secondary):
            if t not in ep.joints:
                raise BagError(f'{t} is not a sensor_msgs/msg/JointState topic of the bag; '
                               f'joint_states topics: {sorted(ep.joints)}')
        pa, se = ep.joints[primary].series(), ep.joints[secondary].series()
        resync = None
        if not resync_topic:  # a twin launched with twin_resync:= marks its snaps here
            marker = f'{secondary.rpartition("/")[0]}/sim_bridge/resync'
            resync_topic = marker if marker in ep.receive else ''
        if resync_topic:
            if resync_topic not in ep.receive:
                raise BagError(f'--resync-topic {resync_topic} is not in the bag')
            stamps = ep.stamps.get(resync_topic)
            resync = (stamps if stamps is not None else ep.receive[resync_topic]).tolist()
        summary = summarize(pa, se, max_lag_ns=int(max_lag_s * 1e9), resync_ns=resync)
        cd = ep.info.custom_data
        out['pairing'] = {'primary': primary, 'secondary': secondary,
                          'primary_engine': cd.get('engine_a', ''),
                          'secondary_engine': cd.get('engine_b', cd.get('engine', ''))}
        out['gap'] = summary.as_dict()
    out['injector'] = _latency_stats(ep)
    return out


def _plots(ep: Episode, primary: str | None, secondary: str | None,
           summary: dict[str, Any]) -> list[tuple[str, str, bytes]]:
    plt = pyplot()
    figs: list[tuple[str, str, bytes]] = []
    t0 = ep.info.start_ns
    if primary and secondary:
        pa, se = ep.joints[primary].series(), ep.joints[secondary].series()
        paired = pair(pa, se)
        names = paired.names
        n = len(names)
        tt = (paired.stamps - t0) / 1e9
        fig, axes = plt.subplots(n, 1, figsize=(10, 1.9 * n + 0.5), sharex=True, squeeze=False)
        for j, name in enumerate(names):
            ax = axes[j, 0]
            ax.plot((pa.stamps - t0) / 1e9, pa.select([name]).position[:, 0], lw=1.0,
                    label=f'primary {primary}')
            ax.plot((se.stamps - t0) / 1e9, se.select([name]).position[:, 0], lw=1.0,
                    ls='--', label=f'secondary {secondary}')
            ax.set_ylabel(f'{name}\n[rad]', fontsize=8)
            ax.grid(alpha=0.3)
        axes[0, 0].legend(fontsize=7, loc='upper right')
        axes[-1, 0].set_xlabel('time [s]')
        fig.suptitle('joint positions: primary vs secondary')
        figs.append(('overlay.png', 'Per-joint primary vs secondary', to_png(fig)))

        fig, ax = plt.subplots(figsize=(10, 3.5))
        for j, name in enumerate(names):
            ax.plot(tt, paired.position_error[:, j], lw=0.9, label=name)
        ax.set_xlabel('time [s]')
        ax.set_ylabel('primary - secondary [rad]')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=min(n, 6))
        lag = summary['gap']['lag_ms']
        ax.set_title('position error over time' + (f' (lag {lag:.2f} ms)' if lag is not None
                                                   else ''))
        figs.append(('error.png', 'Error over time', to_png(fig)))

    if ep.injector is not None and ep.injector.rows:
        lat = ep.injector.latency_ms()
        routes = [r for r in ep.injector.routes if lat.get(r, np.zeros(0)).size]
        if routes:
            fig, axes = plt.subplots(1, len(routes), figsize=(5 * len(routes), 3.2),
                                     squeeze=False)
            for i, r in enumerate(routes):
                ax = axes[0, i]
                ax.hist(lat[r], bins=50, color='tab:purple', alpha=0.8)
                ax.set_title(f'{r}: p50 {np.percentile(lat[r], 50):.2f} ms, '
                             f'p99 {np.percentile(lat[r], 99):.2f} ms', fontsize=9)
                ax.set_xlabel('deliver - receive [ms]')
                ax.set_ylabel('events')
                ax.grid(alpha=0.3)
            fig.suptitle('injected latency (injector ground truth)')
            figs.append(('latency.png', 'Latency histograms (injector ground truth)',
                         to_png(fig)))

    rates = {t: rx for t, rx in ep.receive.items() if rx.size > 2}
    if rates:
        fig, ax = plt.subplots(figsize=(10, 3.5))
        for topic, received in sorted(rates.items()):
            whole_s = (received - t0) // 1_000_000_000
            counts = np.bincount(whole_s - whole_s.min())
            ax.step(np.arange(len(counts)) + whole_s.min(), counts, where='post', label=topic)
        ax.set_xlabel('time [s]')
        ax.set_ylabel('messages / s')
        ax.set_yscale('log')
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        ax.set_title('receive rates per topic')
        figs.append(('rates.png', 'Rates per topic', to_png(fig)))
    return figs


def _strip(gap: CameraGap) -> bytes:
    """PNG of the kept pairs side by side: primary frames on top, secondary below."""
    import cv2
    top = np.hstack([a for a, _b in gap.strip])
    bottom = np.hstack([b for _a, b in gap.strip])
    both = np.vstack([top, bottom])
    if both.ndim == 3 and both.shape[2] >= 3:
        both = both[:, :, 2::-1]  # RGB -> OpenCV's BGR
    ok, png = cv2.imencode('.png', both)
    if not ok:
        raise SimrealError('could not encode the camera strip as PNG')
    return bytes(png.tobytes())


def _table(rows: Sequence[Sequence[Any]], head: Sequence[str]) -> str:
    def cell(x: Any) -> str:
        if isinstance(x, float):
            return f'{x:.4g}'
        return html.escape('' if x is None else str(x))
    th = ''.join(f'<th>{html.escape(h)}</th>' for h in head)
    body = ''.join('<tr>' + ''.join(f'<td>{cell(c)}</td>' for c in r) + '</tr>' for r in rows)
    return f'<table><tr>{th}</tr>{body}</table>'


def _valid_cell(m: dict[str, Any]) -> str:
    valid = m.get('valid', True)
    return 'yes' if valid else f'NO: {m.get("invalid_reason", "")}'


def side_label(pairing: dict[str, Any], role: str) -> str:
    """``topic`` or ``topic (engine)`` when the bag names the engine of that side."""
    engine = pairing.get(f'{role}_engine', '')
    return f'{pairing[role]} ({engine})' if engine else str(pairing[role])


def _html(metrics: dict[str, Any], figs: list[tuple[str, str, bytes]]) -> str:
    parts = [f'<h1>simreal gap report</h1><p>bag <code>{html.escape(metrics["bag"])}</code>, '
             f'{metrics["duration_s"]:.2f} s, {metrics["message_count"]} messages</p>']
    gap = metrics.get('gap')
    if gap:
        p = metrics['pairing']
        parts.append(f'<h2>Gap: {html.escape(side_label(p, "primary"))} vs '
                     f'{html.escape(side_label(p, "secondary"))}</h2>'
                     f'<p>{gap["pairs"]} paired samples; lag '
                     f'{gap["lag_ms"] if gap["lag_ms"] is None else round(gap["lag_ms"], 3)} '
                     f'ms (secondary behind primary); {gap["resyncs"]} re-syncs</p>')
        if gap.get('valid') is False:
            parts.append('<p class="invalid"><b>INVALID</b>: computed over bad data: '
                         f'{html.escape(gap["invalid_reason"])}</p>')
        parts.append(_table([[n, m['rmse_rad'], m['max_abs_rad'], m['mean_rad'],
                              m['velocity_rmse'], m['lag_ms'], _valid_cell(m)]
                             for n, m in gap['per_joint'].items()],
                            ['joint', 'RMSE [rad]', 'max |err| [rad]', 'mean [rad]',
                             'vel RMSE [rad/s]', 'lag [ms]', 'valid']))
        if gap['k_step_rmse_rad']:
            ks = sorted(gap['k_step_rmse_rad'], key=int)
            joints = list(gap['per_joint'])
            parts.append('<h3>k-step error after re-sync (RMSE, rad)</h3>' + _table(
                [[k] + [gap['k_step_rmse_rad'][k].get(j) for j in joints] for k in ks],
                ['k'] + joints))
    else:
        parts.append('<p>No primary/secondary pair in this bag (give --primary and '
                     '--secondary): stream statistics only.</p>')
    legged = metrics.get('legged')
    if legged:
        parts.append(_legged_html(legged))
    inj = metrics.get('injector')
    if inj:
        parts.append('<h2>Injected latency</h2>' + _table(
            [[r, s['events'], s['delivered'], s.get('latency_ms_p50'), s.get('latency_ms_p99'),
              s.get('latency_ms_max'), ', '.join(f'{k}: {v}' for k, v in s['fates'].items()
                                                  if v)]
             for r, s in inj['routes'].items()],
            ['route', 'events', 'delivered', 'p50 [ms]', 'p99 [ms]', 'max [ms]', 'fates']))
    cams = metrics.get('cameras')
    if cams:
        parts.append('<h2>Cameras (frames paired by stamp)</h2>' + _table(
            [[c, g['pairs'], g['psnr_db']['mean'], g['psnr_db']['min'], g['ssim']['mean'],
              g['ssim']['min'], g['mean_intensity_primary'], g['mean_intensity_secondary'],
              ', '.join(f'{h:.3f}' for h in g['histogram_intersection_per_channel'] or []),
              _valid_cell(g)]
             for c, g in cams.items()],
            ['camera', 'pairs', 'PSNR mean [dB]', 'PSNR min [dB]', 'SSIM mean', 'SSIM min',
             'mean I primary', 'mean I secondary', 'histogram intersection R, G, B', 'valid']))
    dq = metrics.get('data_quality')
    if dq and dq['streams']:
        parts.append('<h2>Data quality of the paired streams</h2>'
                     f'<p>verdict: <b>{"valid" if dq["valid"] else "INVALID"}</b> (dropped limit '
                     f'{100 * dq["max_dropped_fraction"]:g} %, stall limit '
                     f'{dq["stall_limit_ms"]:g} ms)</p>' + _table(
                         [[t, v['status'], v['messages'], v['expected'],
                           100 * v['dropped_fraction'], v['stall_ms'], '; '.join(v['problems'])]
                          for t, v in dq['streams'].items()],
                         ['stream', 'verdict', 'messages', 'expected', 'dropped [%]',
                          'stall [ms]', 'why']))
    parts.append('<h2>Topics</h2>' + _table(
        [[t, s['type'], s['count'], s['rate_hz'], s['gaps'], s['out_of_order'],
          s['duplicates'], s['skew_mean_ms']] for t, s in metrics['topics'].items()],
        ['topic', 'type', 'count', 'rate [Hz]', 'gaps', 'out of order', 'duplicates',
         'skew mean [ms]']))
    for _name, title, png in figs:
        b64 = base64.b64encode(png).decode('ascii')
        parts.append(f'<h2>{html.escape(title)}</h2><img alt="{html.escape(title)}" '
                     f'src="data:image/png;base64,{b64}">')
    style = ('body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}'
             'table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;'
             'padding:3px 8px;font-size:13px;text-align:right}th{background:#f3f3f3}'
             'td:first-child{text-align:left}img{max-width:100%}'
             '.invalid{color:#a00}')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>simreal gap report'
            f'</title><style>{style}</style></head><body>{"".join(parts)}</body></html>\n')


def _legged_html(g: dict[str, Any]) -> str:
    """Return the legged gap table: the pair's errors, then each episode's own metrics."""
    ref, cmp_ = g['reference'], g['compared']
    out = (f'<h2>Legged gap: {html.escape(cmp_)} against {html.escape(ref)}</h2>'
           f'<p>{g["paired_samples"]} paired samples'
           + (f'; the compared run moved by {g["shift_s"]:.3f} s' if g['shift_s'] else '')
           + '</p>' + _table([[g['base_height_error_m'], g['orientation_error_rad'],
                              g['velocity_error_m_s'], g['gyro_error_rad_s'],
                              g['acc_error_m_s2']]],
                             ['height RMS [m]', 'orientation RMS [rad]',
                              'velocity RMS [m/s]', 'gyro RMS [rad/s]', 'acc RMS [m/s²]']))
    rows = [[name, m['falls'], m['first_fall_s'], m['velocity_tracking_error_m_s'],
             m['yaw_rate_error_rad_s'], m['mean_height_m'], m['mean_tilt_rad'],
             ', '.join(f'{d:.2f}' for d in m['duty_factor'])]
            for name, m in g['episodes'].items()]
    out += _table(rows, ['episode', 'falls', 'first fall [s]', 'velocity tracking [m/s]',
                         'yaw rate error [rad/s]', 'mean height [m]', 'mean tilt [rad]',
                         'duty factor per foot'])
    return out + ''.join(f'<p>{html.escape(n)}</p>' for n in g['notes'])


def _refusal(bag: str, primary: str, secondary: str, problems: Sequence[str]) -> str:
    """Return the one line of a refused joint gap: what is wrong, what to run or pass."""
    first = problems[0]
    more = f' (and {len(problems) - 1} more problem(s))' if len(problems) > 1 else ''
    return (f'{first}{more}: the joint gap {primary} vs {secondary} would be computed over '
            f'missing data; record again with less load on the host (camera images are left '
            f'out by default, record_images:=auto), see `simreal check {bag}`, raise the limit '
            f'(--threshold FRACTION, --stall-limit-ms MS) or pass --allow-bad-data to compute '
            f'it marked invalid')


def write_report(bag: str, out_dir: str, primary: str | None = None,
                 secondary: str | None = None, max_lag_s: float = 0.2,
                 resync_topic: str = '', progress: bool = True, *,
                 allow_bad_data: bool = False,
                 max_dropped_fraction: float = MAX_DROPPED_FRACTION,
                 stall_limit_ms: float = STALL_LIMIT_NS / 1e6,
                 against: str | None = None) -> dict[str, Any]:
    """Analyse ``bag`` and write gap.json, report.html and the PNGs into ``out_dir``.

    Joint metrics over a paired stream with more than ``max_dropped_fraction`` missing, or whose
    stamps stop for more than ``stall_limit_ms`` beyond their median interval, raise
    BadDataError before anything is written, unless ``allow_bad_data`` (then they are marked
    invalid; see the module doc).
    """
    if (primary is None) != (secondary is None):
        raise SimrealError('give both --primary and --secondary, or neither')
    if not max_lag_s > 0:
        raise SimrealError(f'--max-lag must be > 0 s, got {max_lag_s}')
    if not 0 <= max_dropped_fraction < 1:
        raise SimrealError(f'--threshold is the largest dropped fraction of a paired stream, '
                           f'in [0, 1); got {max_dropped_fraction}')
    if not (math.isfinite(stall_limit_ms) and stall_limit_ms > 0):
        raise SimrealError(f'--stall-limit-ms must be > 0 ms, got {stall_limit_ms}')
    ep = load_episode(bag, progress=ProgressBar('reading', enabled=progress))
    if primary is None:
        found = default_pairing(ep.info)
        primary, secondary = found if found else (None, None)
    cams = camera_pairs(list(ep.images), primary, secondary) if primary and secondary else []
    verdicts: dict[str, StreamVerdict] = {}
    if primary and secondary and primary in ep.joints and secondary in ep.joints:
        verdicts = judge_streams(ep, [primary, secondary] + [t for p in cams for t in p],
                                 max_dropped_fraction, int(stall_limit_ms * 1e6))
        problems = [p for t in (primary, secondary) if t in verdicts
                    for p in verdicts[t].problems]
        if problems and not allow_bad_data:
            raise BadDataError(_refusal(bag, primary, secondary, problems))
    metrics = analyse(ep, primary, secondary, max_lag_s, resync_topic)
    metrics['legged'] = legged_section(bag, primary, secondary, against)
    metrics['data_quality'] = {
        'max_dropped_fraction': max_dropped_fraction, 'stall_limit_ms': stall_limit_ms,
        'allow_bad_data': allow_bad_data,
        'valid': all(v.ok for v in verdicts.values()),
        'streams': {t: v.as_dict() for t, v in verdicts.items()}}
    if metrics['gap'] is not None and primary and secondary:
        valid, reason = validity(verdicts, [primary, secondary])
        metrics['gap'].update({'valid': valid, 'invalid_reason': reason})
        for per in metrics['gap']['per_joint'].values():
            per.update({'valid': valid, 'invalid_reason': reason})
    out = Path(out_dir).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimrealError(f'cannot create the report directory {out}: {exc}') from None
    figs = _plots(ep, primary, secondary, metrics)
    metrics['cameras'] = {}
    if primary and secondary:
        for pa, sb in cams:
            gap = camera_gap(bag, pa, sb, (ep.images[pa].stamps, ep.images[sb].stamps),
                             int(max_lag_s * 1e9))
            camera = pa[len(primary.rpartition('/')[0]):].strip('/').rpartition('/')[0]
            valid, reason = validity(verdicts, [pa, sb])
            metrics['cameras'][camera or pa] = {**gap.as_dict(), 'valid': valid,
                                                'invalid_reason': reason}
            if gap.strip:
                figs.append((f'camera_{(camera or "image").replace("/", "_")}.png',
                             f'Camera {camera}: {pa} (top) vs {sb} (bottom)', _strip(gap)))
    for name, _title, png in figs:
        (out / name).write_bytes(png)
    metrics['images'] = [name for name, _t, _p in figs]
    (out / 'gap.json').write_text(json.dumps(metrics, indent=2, allow_nan=False) + '\n',
                                  encoding='utf-8')
    (out / 'report.html').write_text(_html(metrics, figs), encoding='utf-8')
    return metrics


__all__ = ['GapSummary', 'ProgressBar', 'analyse', 'write_report']
