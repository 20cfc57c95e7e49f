"""``simreal sysid BAG ...`` and ``simreal sysid validate BAG ...`` (see docs/sysid.md).

Progress goes to stderr, the table (or with ``--json`` the summary) to stdout. Bad input is one
``simreal sysid: error: ...`` line and exit 2, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys
from typing import Any

from simreal_ros.errors import SimrealError
from simreal_ros.sysid import DEFAULT_FIT, FIT_NAMES


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(',') if t.strip()]


def _window(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        a, b = (int(p) for p in text.split(','))
    except ValueError:
        raise SimrealError(f'--window-ns {text!r}: expected START_NS,END_NS') from None
    return a, b


#: options of the fit only / of validate only (default None: "not given")
FIT_ONLY = ('fit', 'joints', 'bodies', 'holdout', 'out', 'quiet')
VALIDATE_ONLY = ('overlay', 'horizons')


def _table(summary: dict[str, Any]) -> str:
    rows = [f'{"parameter":<34} {"estimate":>10} {"stddev":>9} {"nominal":>9}  note']
    hints: dict[str, str] = {}
    for r in summary['parameters']:
        why, _, hint = r['reason'].partition('; needs ')
        if hint:
            hints[r['kind']] = hint
        note = '' if r['identifiable'] else 'not identifiable: ' + why
        line = (f'{r["key"]:<34} {r["estimate"]:>10.5g} {r["stddev"]:>9.2g} '
                f'{r["nominal"]:>9.5g}  {note}')
        rows.append(line if len(line) <= 100 else line[:97] + '...')
    for kind, hint in hints.items():
        line = f'to identify {kind}: {hint}'
        rows.append(line if len(line) <= 100 else line[:97] + '...')
    h = summary.get('heldout')
    if h:
        b, a = h['before']['total_rad'], h['after']['total_rad']
        rows.append(f'held-out open-loop RMSE: nominal {b:.5f} rad, fitted {a:.5f} rad '
                    f'({100 * a / b:.0f} % of before)' if b > 0 else '')
    rows.append(f'fit {summary["fit_time_s"]:.1f} s (cpu {summary["cpu_time_s"]:.1f} s); '
                f'window {summary["source_bag"]["window_s"]:.1f} s of '
                f'{summary["source_bag"]["command_topic"]} -> '
                f'{summary["source_bag"]["state_topic"]}')
    return '\n'.join(rows)


def _validate_table(res: dict[str, Any]) -> str:
    names = list(res['open_loop']['per_joint_rad'])
    hs = list(res['k_step'])
    head = f'{"joint":<16} {"open loop":>10}' + ''.join(f' {"k " + h + " s":>10}' for h in hs)
    rows = [f'{res["bag"]} with {res["overlay"] or "the nominal model"}: window '
            f'{res["window_s"]:.1f} s ({res["topics"]["commands"]} -> '
            f'{res["topics"]["states"]}), RMSE in rad', head]
    def get(block: dict[str, Any], n: str) -> float:
        return float(block['total_rad'] if n == 'total' else block['per_joint_rad'][n])

    for n in names + ['total']:
        rows.append(f'{n:<16} {get(res["open_loop"], n):>10.5f}'
                    + ''.join(f' {get(res["k_step"][h], n):>10.5f}' for h in hs))
    comp = res.get('comparison')
    if comp:
        r = res['residual']
        rows.append(f'total RMSE (rad) by model; residual {r["path"]} ({r["kind"]}): '
                    f'{100 * r["residual_ood_fraction"]:.1f} % of steps outside its training '
                    f'range, {r["residual_compute_ns"] / 1e3:.1f} us a step')
        for name, c in comp.items():
            rows.append(f'{name:<16} {c["open_loop_rad"]:>10.5f}'
                        + ''.join(f' {c["k_step_rad"][h]:>10.5f}' for h in hs))
    return '\n'.join(rows)


def _residual_table(s: dict[str, Any]) -> str:
    rows = [f'{s["out"]}: {s["kind"]} residual of {s["robot"]} against {s["overlay"]} '
            f'(overlay sha256 {s["overlay_sha256"][:12]}), {s["windows"]} training windows',
            f'{"held-out part of":<40} {"k 0.2 s fit":>12} {"+residual":>10} {"open fit":>10} '
            f'{"+residual":>10} {"OOD":>6}']
    for h in s['heldout']:
        k, o = h['k_step'], h['open_loop']
        rows.append(f'{Path(h["bag"]).name[:40]:<40} {k["fit_rad"]:>12.5f} '
                    f'{k["fit_residual_rad"]:>10.5f} {o["fit_rad"]:>10.5f} '
                    f'{o["fit_residual_rad"]:>10.5f} {100 * h["ood_fraction"]:>5.1f}%')
    rows.append('pays off on the held-out parts: ' + ('yes' if s['pays_off'] else
                                                      'NO (keep the overlay without it)'))
    rows.append(f'output bound {", ".join(f"{b:.3g}" for b in s["output_bound"])}; '
                f'fit {s["fit_time_s"]:.1f} s (cpu {s["cpu_time_s"]:.1f} s)')
    return '\n'.join(rows)


def cmd_residual(ns: argparse.Namespace) -> int:
    """``residual fit BAG... --overlay FIT.yaml --out RES.pt``."""
    from simreal_ros.sysid.residual_fit import fit_residual
    if ns.action != 'fit':
        raise SimrealError(f'residual {ns.action!r}: the only action is fit '
                           f'(simreal residual fit BAG... --overlay FIT.yaml --out RES.pt)')
    if not ns.bags:
        raise SimrealError('residual fit needs at least one bag')
    if not ns.overlay:
        raise SimrealError('--overlay FIT.yaml is required: the identified overlay the '
                           'residual corrects')
    if not ns.out:
        raise SimrealError('--out RES.pt is required: where to write the residual')
    quiet = bool(ns.quiet)

    def say(line: str) -> None:
        if not quiet:
            print(f'[residual] {line}', file=sys.stderr, flush=True)

    summary = fit_residual(ns.bags, ns.robot, ns.overlay, ns.out, kind=ns.kind,
                           holdout=ns.holdout, horizon_s=ns.horizon, stride_s=ns.stride,
                           epochs=ns.epochs, seed=ns.seed, history_width_rad=ns.history,
                           window_ns=_window(ns.window_ns), progress=say)
    print(json.dumps(summary) if ns.json else _residual_table(summary))
    return 0


def cmd_sysid(ns: argparse.Namespace) -> int:
    """Dispatch ``sysid BAG`` / ``sysid validate BAG``."""
    from simreal_ros.sysid.api import identify, validate
    given = {k for k in FIT_ONLY + VALIDATE_ONLY if getattr(ns, k) not in (None, False)}
    if ns.target == 'validate':
        if not ns.bag:
            raise SimrealError('sysid validate needs the bag: simreal sysid validate BAG')
        wrong = sorted(given & set(FIT_ONLY))
        if wrong:
            raise SimrealError(f'--{wrong[0]} is an option of the fit, not of sysid validate')
        try:
            horizons = [float(h) for h in _csv(ns.horizons or '0.05,0.2,1.0')]
        except ValueError:
            raise SimrealError(f'--horizons {ns.horizons!r}: expected seconds, comma-separated '
                               f'(e.g. 0.05,0.2,1.0)') from None
        res = validate(ns.bag, ns.robot, ns.overlay or None,
                       horizons_s=horizons, window_ns=_window(ns.window_ns))
        print(json.dumps(res) if ns.json else _validate_table(res))
        return 0
    if ns.bag:
        raise SimrealError(f'one bag per fit; got {ns.target!r} and {ns.bag!r}')
    wrong = sorted(given & set(VALIDATE_ONLY))
    if wrong:
        raise SimrealError(f'--{wrong[0]} is an option of sysid validate, not of the fit')
    if not ns.out:
        raise SimrealError('--out FIT.yaml is required: where to write the overlay')
    quiet = bool(ns.quiet)

    def say(line: str) -> None:
        if not quiet:
            print(f'[sysid] {line}', file=sys.stderr, flush=True)

    holdout = 0.2 if ns.holdout is None else ns.holdout
    summary = identify(ns.target, ns.robot, _csv(ns.fit or DEFAULT_FIT), ns.out,
                       joints=_csv(ns.joints or '') or None,
                       bodies=_csv(ns.bodies or '') or None, holdout=holdout,
                       window_ns=_window(ns.window_ns), progress=say)
    print(json.dumps(summary) if ns.json else _table(summary))
    return 0




def add_commands(sub: Any) -> None:
    """Add ``sysid`` (and its ``validate`` form) to the ``simreal`` sub-command parser."""
    p = sub.add_parser(
        'sysid', help='identify a model overlay from a bag; `sysid validate` scores one',
        description='simreal sysid BAG --out FIT.yaml [--fit ...]: identify joint damping, '
        'friction, armature, servo kp, body masses and the command delay from the commands '
        'and measured states of a bag (any backend) and write a model overlay. '
        'simreal sysid validate BAG [--overlay FIT.yaml] [--horizons ...]: replay the bag in '
        'the sim from the measured initial state; open-loop and k-step RMSE per joint. '
        'See docs/sysid.md.')
    p.add_argument('target', metavar='BAG|validate', help='the bag to fit, or validate')
    p.add_argument('bag', nargs='?', default=None, metavar='BAG', help='(validate) the bag')
    p.add_argument('--robot', default='simreal_arm', help='robot spec [default: simreal_arm]')
    p.add_argument('--fit', default=None,
                   help=f'comma-separated, from {",".join(FIT_NAMES)} [default: {DEFAULT_FIT}]')
    p.add_argument('--joints', default=None, help='comma-separated joints [default: all]')
    p.add_argument('--bodies', default=None, help='bodies whose mass to fit (with mass in '
                   '--fit) [default: the last link]')
    p.add_argument('--holdout', type=float, default=None,
                   help='fraction of the window held out for the before/after check, '
                        '0..0.5 [default: 0.2]')
    p.add_argument('--out', default=None, help='overlay YAML to write (must not exist)')
    p.add_argument('--quiet', action='store_true', default=None, help='no progress lines')
    p.add_argument('--overlay', default=None, help='(validate) overlay name or path '
                   '[default: nominal]')
    p.add_argument('--horizons', default=None, help='(validate) k-step horizons in s, '
                   'comma-separated [default: 0.05,0.2,1.0]')
    p.add_argument('--window-ns', default=None, metavar='START,END',
                   help='limit the window (header-stamp ns)')
    p.add_argument('--json', action='store_true', help='print the summary as JSON')
    p.set_defaults(func=cmd_sysid)
    r = sub.add_parser(
        'residual', help='learn a residual (what the fitted overlay cannot express) from bags',
        description='simreal residual fit BAG... --overlay FIT.yaml --out RES.pt: train a small '
        'network on the bags that predicts the joint torque (or, --kind delta_action, the '
        'set-point offset) the identified sim lacks; name it in the overlay (residual: RES.pt) '
        'to use it in the sim bridge, sim2sim, the twin, training and sysid validate. '
        'See docs/residual.md.')
    from simreal_ros.core import residual_model as res
    r.add_argument('action', metavar='fit', help='the action (fit)')
    r.add_argument('bags', nargs='*', metavar='BAG', help='bags to learn from')
    r.add_argument('--robot', default='simreal_arm', help='robot spec [default: simreal_arm]')
    r.add_argument('--overlay', default=None, help='the identified overlay to correct')
    r.add_argument('--out', default=None, help='residual file to write (.pt, must not exist)')
    r.add_argument('--kind', default='torque', choices=('torque', 'delta_action'),
                   help='torque: added in the physics step; delta_action: a set-point offset '
                   '[default: torque]')
    r.add_argument('--holdout', type=float, default=0.2,
                   help='fraction of each bag held out for the check, (0, 0.5] [default: 0.2]')
    r.add_argument('--horizon', type=float, default=res.DEFAULT_HORIZON_S,
                   help=f'replay window of each target (s) [default: {res.DEFAULT_HORIZON_S}]')
    r.add_argument('--stride', type=float, default=res.DEFAULT_STRIDE_S,
                   help=f'spacing of the windows (s) [default: {res.DEFAULT_STRIDE_S}]')
    r.add_argument('--epochs', type=int, default=res.DEFAULT_EPOCHS,
                   help=f'training epochs [default: {res.DEFAULT_EPOCHS}]')
    r.add_argument('--seed', type=int, default=0, help='training seed [default: 0]')
    r.add_argument('--history', type=float, default=None, metavar='WIDTH',
                   help="add a history feature: the set-point's last direction of motion "
                   '(a play operator of this half-width, rad; for backlash) [default: off]')
    r.add_argument('--window-ns', default=None, metavar='START,END',
                   help='limit the window of the (one) bag (header-stamp ns)')
    r.add_argument('--quiet', action='store_true', help='no progress lines')
    r.add_argument('--json', action='store_true', help='print the summary as JSON')
    r.set_defaults(func=cmd_residual)
