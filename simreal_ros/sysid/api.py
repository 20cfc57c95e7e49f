"""``identify`` (fit an overlay to a bag) and ``validate`` (score any overlay on any bag).

Both read the bag with :func:`simreal_ros.sysid.data.load_sysid_data` (topic and window rules
there) and replay with :class:`simreal_ros.sysid.replay.Replayer` (the bridge's physics).

``identify`` splits the window in time: the first ``1 - holdout`` is for fitting (segments of
``fit.SEGMENT_NS``), the last ``holdout`` is held out and replayed open loop from the measured
state at its start, with the nominal model ("before") and the fitted one ("after"). Every input
is checked before any work, and the overlay is written only when the fit finished, so bad input
leaves nothing behind.

``validate`` replays the whole window open loop from the measured state at its start, and for
each horizon ``h`` re-syncs the sim to the measured state every ``h`` seconds (k-step
prediction: segments of ``h`` from measured states, the error at every stamp inside).
"""

from __future__ import annotations

import math
from pathlib import Path
import time
from typing import Any, Callable, Sequence

import numpy as np
import yaml

from simreal_ros.core.dynamics import DynamicsParams, load_overlay
from simreal_ros.core.residual_model import ResidualModel
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.emulator.backlash import check_backlash
from simreal_ros.sysid import FIT_NAMES
from simreal_ros.sysid import fit as fitmod
from simreal_ros.sysid.data import SysidData, SysidInputError, load_sysid_data
from simreal_ros.sysid.replay import Replayer, Segment

#: shortest held-out part (s) when holdout > 0
MIN_HOLDOUT_NS = 1_000_000_000
MAX_HOLDOUT = 0.5
OVERLAY_FORMAT = 1


def _rmse(pred: Sequence[np.ndarray], meas: Sequence[np.ndarray], names: Sequence[str]
          ) -> dict[str, Any]:
    err = np.concatenate([p - m for p, m in zip(pred, meas, strict=True)])
    per = np.sqrt(np.mean(err ** 2, axis=0)) if err.size else np.full(len(names), np.nan)
    return {'per_joint_rad': {n: float(v) for n, v in zip(names, per, strict=True)},
            'total_rad': float(np.sqrt(np.mean(err ** 2))) if err.size else float('nan'),
            'samples': int(err.shape[0])}


def _check_fit(fit: Sequence[str]) -> list[str]:
    names = [str(f).strip() for f in fit if str(f).strip()]
    if not names:
        raise SysidInputError(f'--fit is empty; choose from {",".join(FIT_NAMES)}')
    bad = [f for f in names if f not in FIT_NAMES]
    if bad:
        raise SysidInputError(f'--fit {bad[0]!r} is not a parameter sysid fits; choose from '
                              f'{",".join(FIT_NAMES)}')
    return list(dict.fromkeys(names))


def _movable_bodies(rp: Replayer) -> list[str]:
    return rp.sim.moving_bodies()


def _check_targets(robot: RobotSpec, rp: Replayer, fit: Sequence[str],
                   joints: Sequence[str] | None, bodies: Sequence[str] | None
                   ) -> tuple[list[str], list[str]]:
    names = robot.joint_names
    js = list(names) if not joints else [str(j) for j in joints]
    for j in js:
        if j not in names:
            raise SysidInputError(f'--joints {j!r} is not a joint of {robot.name} '
                                  f'({", ".join(names)})')
    movable = _movable_bodies(rp)
    if bodies and 'mass' not in fit:
        raise SysidInputError('--bodies names bodies whose mass to fit: add mass to --fit')
    if 'mass' in fit:
        bs = [str(b) for b in bodies] if bodies else [movable[-1]]
        for b in bs:
            if b not in movable:
                raise SysidInputError(f'--bodies {b!r} is not a moving body with mass of '
                                      f'{robot.name} ({", ".join(movable)})')
    else:
        bs = []
    return list(dict.fromkeys(js)), list(dict.fromkeys(bs))


def _load(bag: str | Path, robot: str | RobotSpec, window_ns: tuple[int, int] | None
          ) -> tuple[RobotSpec, SysidData]:
    try:
        spec = robot if isinstance(robot, RobotSpec) else load_robot(robot)
    except ConfigError as exc:
        raise SysidInputError(f'--robot {robot}: {exc}') from None
    return spec, load_sysid_data(bag, spec, window_ns)


def identify(bag: str | Path, robot: str, fit: Sequence[str], out: str | Path, *,
             joints: Sequence[str] | None = None, bodies: Sequence[str] | None = None,
             holdout: float = 0.2, window_ns: tuple[int, int] | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fit ``fit`` to ``bag``, write the overlay YAML at ``out``, return a JSON-able summary.

    The summary has per parameter the estimate, stddev, nominal, identifiable flag and reason;
    the held-out open-loop RMSE before (nominal) and after (fitted); the fit time (s).
    """
    say = progress or (lambda _line: None)
    names = _check_fit(fit)
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or \
            not math.isfinite(holdout) or not 0.0 <= holdout <= MAX_HOLDOUT:
        raise SysidInputError(f'--holdout {holdout!r}: expected a fraction in [0, '
                              f'{MAX_HOLDOUT}] of the window to hold out')
    out_path = Path(out).expanduser()
    if out_path.exists():
        raise SysidInputError(f'--out {out_path} exists already; sysid never overwrites: '
                              f'choose a new file name')
    if not out_path.parent.is_dir():
        raise SysidInputError(f'--out {out_path}: the directory {out_path.parent} does not '
                              f'exist')
    t_wall = time.perf_counter()
    t_cpu = time.process_time()
    spec, data = _load(bag, robot, window_ns)
    rp = Replayer(spec, data)
    js, bs = _check_targets(spec, rp, names, joints, bodies)
    lo, hi = data.window_ns
    split = hi - int(round((hi - lo) * holdout))
    if holdout > 0 and hi - split < MIN_HOLDOUT_NS:
        raise SysidInputError(f'--holdout {holdout}: the held-out part would be '
                              f'{(hi - split) / 1e9:.2f} s of a {data.duration_s:.1f} s window; '
                              f'it needs {MIN_HOLDOUT_NS / 1e9:g} s (record longer or lower '
                              f'--holdout)')
    if split - lo < 2 * MIN_HOLDOUT_NS:
        raise SysidInputError(f'the fitting part is only {(split - lo) / 1e9:.2f} s; record '
                              f'longer or lower --holdout')
    say(f'{data.bag}: {data.command_topic} -> {data.state_topic}, window '
        f'{data.duration_s:.1f} s (fit {(split - lo) / 1e9:.1f} s, hold out '
        f'{(hi - split) / 1e9:.1f} s), backend {data.backend or "unknown"}')
    specs = fitmod.build_specs(rp.nominal, names, js, bs)
    all_train = rp.segments(lo, split, fitmod.SEGMENT_NS)
    train = [s for s in all_train if rp.max_gap_ns(s) <= fitmod.MAX_GAP_NS]
    dropped = len(all_train) - len(train)
    if dropped:
        say(f'{dropped} of {len(all_train)} segments of {fitmod.SEGMENT_NS / 1e9:g} s left out: '
            f'a gap of more than {fitmod.MAX_GAP_NS / 1e6:g} ms in the commands or states')
    if not train:
        raise SysidInputError(f'{data.bag}: every fitting segment has a gap of more than '
                              f'{fitmod.MAX_GAP_NS / 1e6:g} ms in {data.command_topic} or '
                              f'{data.state_topic}; record on a less loaded host')
    fitter = fitmod.Fitter(rp, specs, rp.nominal, train, 'command_delay' in names, say)
    result = fitter.run()
    heldout: dict[str, Any] = {}
    if holdout > 0:
        say('held-out replay: nominal vs fitted')
        seg = rp.segments(split, hi, None)
        delay_nom = int(round(rp.nominal.command_delay_s * 1e9 / rp.dt_ns))
        plays = None if result.backlash_rad is None else [0.0, result.backlash_rad]
        pred = rp.predict([rp.nominal, result.params], [delay_nom, result.delay_steps], seg,
                          plays)
        meas = rp.measured(seg)
        before = _rmse(pred[0], meas, spec.joint_names)
        after = _rmse(pred[1], meas, spec.joint_names)
        heldout = {'window_ns': [int(split), int(hi)], 'before': before, 'after': after,
                   'after_over_before': after['total_rad'] / before['total_rad']
                   if before['total_rad'] > 0 else float('nan')}
    summary: dict[str, Any] = {
        'robot': spec.name, 'overlay': str(out_path), 'fit': names, 'joints': js,
        'bodies': bs, 'holdout': float(holdout), 'source_bag': data.summary(),
        'fit_window_ns': [int(lo), int(split)],
        'segments': {'length_s': fitmod.SEGMENT_NS / 1e9, 'used': len(train),
                     'dropped_for_gaps': dropped},
        'parameters': _parameter_rows(result, specs),
        'heldout': heldout, 'iterations': result.iterations,
        'cost': {'start': result.cost_start, 'end': result.cost_end},
        'fit_time_s': round(time.perf_counter() - t_wall, 2),
        'cpu_time_s': round(time.process_time() - t_cpu, 2),
    }
    write_overlay(out_path, spec, rp.nominal, result, specs, summary)
    say(f'wrote {out_path}')
    return summary


def _parameter_rows(result: fitmod.FitResult, specs: Sequence[fitmod.FitParam]
                    ) -> list[dict[str, Any]]:
    rows = []
    kinds = {p.key: (p.kind, p.target) for p in specs}
    kinds['command_delay_s'] = ('command_delay', '')
    for key, value in result.values.items():
        kind, target = kinds[key]
        corr = result.correlation.get(key)
        rows.append({
            'key': key, 'kind': kind, 'target': target, 'estimate': value,
            'stddev': result.stddev[key], 'nominal': result.nominal[key],
            'identifiable': key not in result.flags, 'reason': result.flags.get(key, ''),
            'most_correlated_with': corr[0] if corr else '',
            'correlation': corr[1] if corr else 0.0})
    return rows


def _num(v: float) -> float:
    return float(f'{v:.6g}')


def write_overlay(path: Path, robot: RobotSpec, nominal: DynamicsParams,
                  result: fitmod.FitResult, specs: Sequence[fitmod.FitParam],
                  summary: dict[str, Any]) -> None:
    """Write the fitted overlay (docs/configuration.md format plus a ``sysid:`` section)."""
    joints: dict[str, dict[str, float]] = {}
    bodies: dict[str, dict[str, float]] = {}
    for p in specs:
        v = result.values[p.key]
        if p.kind == 'mass':
            bodies.setdefault(p.target, {})['mass_scale'] = _num(v / nominal.body_mass[p.target])
        else:
            joints.setdefault(p.target, {})[p.kind] = _num(v)
    lines = ['# Identified by simreal sysid; load with overlay:=<this file> or as the',
             '# virtual bus reality (simreal emulate --reality <this file>).',
             f'robot: {robot.name}',
             f'description: identified from {Path(summary["source_bag"]["path"]).name} '
             f'(sha256 {summary["source_bag"]["sha256"][:12]})']
    if joints:
        lines.append('joints:')
        for j in robot.joint_names:
            if j in joints:
                vals = ', '.join(f'{k}: {v}' for k, v in joints[j].items())
                lines.append(f'  {j}: {{{vals}}}')
    if bodies:
        lines.append('bodies:')
        for b, body in bodies.items():
            lines.append(f'  {b}: {{{", ".join(f"{k}: {v}" for k, v in body.items())}}}')
    if 'command_delay_s' in result.values:
        lines.append(f'command_delay_s: {_num(result.params.command_delay_s)}')
    if result.backlash_rad is not None:
        lines += ['imperfections:  # the sim bridge ignores them; sysid validate replays them',
                  f'  backlash_rad: {_num(result.backlash_rad)}']
    meta = {
        'format': OVERLAY_FORMAT, 'fit': summary['fit'], 'holdout': summary['holdout'],
        'source_bag': summary['source_bag'], 'fit_window_ns': summary['fit_window_ns'],
        'estimates': {r['key']: {'value': _num(r['estimate']), 'stddev': _num(r['stddev']),
                                 'nominal': _num(r['nominal']),
                                 'identifiable': r['identifiable'],
                                 **({'reason': r['reason']} if r['reason'] else {})}
                      for r in summary['parameters']},
        'fit_time_s': summary['fit_time_s'],
    }
    if summary['heldout']:
        h = summary['heldout']
        meta['heldout'] = {
            'window_ns': h['window_ns'],
            'rmse_before_rad': {k: _num(v) for k, v in h['before']['per_joint_rad'].items()},
            'rmse_after_rad': {k: _num(v) for k, v in h['after']['per_joint_rad'].items()},
            'total_before_rad': _num(h['before']['total_rad']),
            'total_after_rad': _num(h['after']['total_rad'])}
    text = '\n'.join(lines) + '\n' + yaml.safe_dump({'sysid': meta}, sort_keys=False,
                                                    width=99)
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(text, encoding='utf-8')
    tmp.replace(path)


def validate(bag: str | Path, robot: str, overlay: str | Path | None = None, *,
             horizons_s: Sequence[float] = (0.05, 0.2, 1.0),
             window_ns: tuple[int, int] | None = None) -> dict[str, Any]:
    """Replay ``bag``'s commands with ``overlay`` (or nominal); open-loop and k-step RMSE."""
    hs = []
    for h in horizons_s:
        if isinstance(h, bool) or not isinstance(h, (int, float)) or not math.isfinite(h) \
                or h <= 0:
            raise SysidInputError(f'--horizons {h!r}: expected horizons in seconds > 0')
        hs.append(float(h))
    spec, data = _load(bag, robot, window_ns)
    rp = Replayer(spec, data)
    params = rp.nominal
    residual = None
    play: list[float] | None = None
    if overlay:
        try:
            ov = load_overlay(overlay)
            params = ov.apply(rp.nominal, spec.name)
            if ov.imperfections.get('backlash_rad'):
                play = [check_backlash(ov.source, ov.imperfections['backlash_rad'])]
            if ov.residual is not None:
                ov.residual.check(spec.name, ov.physics_sha256)
                residual = ov.residual
        except ConfigError as exc:
            raise SysidInputError(f'--overlay {overlay}: {exc}') from None
    delay = int(round(params.command_delay_s * 1e9 / rp.dt_ns))
    delay_nom = int(round(rp.nominal.command_delay_s * 1e9 / rp.dt_ns))
    lo, hi = data.window_ns
    for h in hs:
        if int(round(h * 1e9)) > hi - lo:
            raise SysidInputError(f'--horizons {h:g}: longer than the {data.duration_s:.2f} s '
                                  f'window')
    cases: list[tuple[str, DynamicsParams, int, ResidualModel | None]] = [
        ('overlay', params, delay, residual)]
    if residual is not None:
        cases += [('fit', params, delay, None), ('nominal', rp.nominal, delay_nom, None)]
    scored: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for name, p, d, r in cases:
        def pred(segs: list[Segment], p: DynamicsParams = p, d: int = d,
                 r: ResidualModel | None = r) -> list[np.ndarray]:
            if r is None:
                return rp.predict([p], [d], segs, play)[0]
            return rp.predict_residual(p, d, segs, r)
        seg = rp.segments(lo, hi, None)
        open_loop = _rmse(pred(seg), rp.measured(seg), spec.joint_names)
        kstep: dict[str, Any] = {}
        for h in hs:
            segs: list[Segment] = rp.segments(lo, hi, int(round(h * 1e9)))
            kstep[f'{h:g}'] = {**_rmse(pred(segs), rp.measured(segs), spec.joint_names),
                               'resyncs': len(segs)}
        scored[name] = (open_loop, kstep)
    open_loop, kstep = scored['overlay']
    out: dict[str, Any] = {
        'robot': spec.name, 'overlay': str(overlay) if overlay else '',
        'bag': str(data.bag), 'bag_sha256': data.bag_sha256, 'backend': data.backend,
        'topics': {'commands': data.command_topic, 'states': data.state_topic},
        'window_ns': [int(lo), int(hi)], 'window_s': data.duration_s,
        'command_delay_s': delay * rp.dt_ns / 1e9,
        'backlash_rad': play[0] if play else 0.0,
        'open_loop': open_loop, 'k_step': kstep}
    if residual is not None:
        st = residual.stats
        out['residual'] = {'path': residual.source, 'kind': residual.kind, **st.values()}
        out['comparison'] = {
            name: {'open_loop_rad': scored[key][0]['total_rad'],
                   'k_step_rad': {h: v['total_rad'] for h, v in scored[key][1].items()}}
            for name, key in (('nominal', 'nominal'), ('fit', 'fit'),
                              ('fit_residual', 'overlay'))}
    return out


__all__ = ['identify', 'validate', 'write_overlay', 'SysidInputError']
