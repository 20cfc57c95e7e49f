"""Sub-commands of ``simreal`` for recording and analysing bags.

``record`` (the recorder node standalone), ``gap`` (JSON + HTML gap report), ``check``
(data-quality verdict, exit 1 on failure) and ``bag repair`` / ``bag info``. A bag that is
corrupt, truncated or was not closed cleanly is one ``error:`` line and exit 3; joint gap
metrics over dropped or stalled streams are one ``error:`` line and exit 4.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simreal_ros.errors import (
    EXIT_BAD_DATA,
    EXIT_CORRUPT_INPUT,
    BadDataError,
    BagCorruptError,
    ConfigError,
    SimrealError,
)


def cmd_record(ns: argparse.Namespace) -> int:
    """Run the recorder node in this process until Ctrl-C (or --duration)."""
    from pathlib import Path

    from simreal_ros.bag.recorder_config import RecorderConfig
    from simreal_ros.nodes import recorder
    out = Path(ns.out).expanduser()
    if out.exists():
        raise SimrealError(f'{out} exists already; simreal never overwrites a bag: choose a '
                           f'new --out directory')
    p: dict[str, Any] = {
        'bag': str(out), 'topics': ns.topics or ['*'], 'storage': ns.storage,
        'compression': ns.compression, 'split_size_mb': float(ns.split_size_mb),
        'split_duration_s': float(ns.split_duration_s), 'flush_period_s': float(ns.flush_period),
        'duration_s': float(ns.duration), 'gap_primary': ns.gap_primary or '',
        'gap_secondary': ns.gap_secondary or '',
    }
    if ns.exclude:
        p['exclude'] = ns.exclude
    if ns.embed:
        p['embed'] = ns.embed
    try:  # the node's own settings class: a bad value fails here, not in the node
        RecorderConfig.from_mapping(p)
    except ConfigError as exc:
        raise SimrealError(str(exc)) from None
    if ns.use_sim_time:
        p['use_sim_time'] = True
    ros_args: list[str] = []
    for key, value in p.items():
        if value == '':
            continue  # the default; rcl cannot parse an empty override
        if isinstance(value, list):
            value = '[' + ','.join(f"'{v}'" for v in value) + ']'
        elif isinstance(value, bool):
            value = 'true' if value else 'false'
        ros_args += ['-p', f'{key}:={value}']
    return recorder.main(['simreal_recorder', '--ros-args', *ros_args])


def cmd_gap(ns: argparse.Namespace) -> int:
    """Write the gap report of a bag."""
    from simreal_ros.gap.host_stalls import STALL_LIMIT_NS
    from simreal_ros.gap.validity import MAX_DROPPED_FRACTION
    from simreal_ros.report.gap_report import side_label, write_report
    m = write_report(ns.bag, ns.out, ns.primary, ns.secondary, ns.max_lag, ns.resync_topic,
                     progress=not ns.quiet, allow_bad_data=ns.allow_bad_data,
                     max_dropped_fraction=(MAX_DROPPED_FRACTION if ns.threshold is None
                                           else ns.threshold),
                     stall_limit_ms=(STALL_LIMIT_NS / 1e6 if ns.stall_limit_ms is None
                                     else ns.stall_limit_ms), against=ns.against)
    if ns.json:
        print(json.dumps(m, allow_nan=False))
        return 0
    gap = m.get('gap')
    if gap:
        p = m['pairing']
        mark = '' if gap['valid'] else '  INVALID (--allow-bad-data)'
        print(f'{side_label(p, "primary")} vs {side_label(p, "secondary")}: {gap["pairs"]} pairs, '
              f'lag {gap["lag_ms"]} ms{mark}')
        for n, j in gap['per_joint'].items():
            print(f'  {n:<16} rmse {j["rmse_rad"]:.5f} rad  max {j["max_abs_rad"]:.5f} rad'
                  + ('' if j['valid'] else '  INVALID'))
        for c, g in m['cameras'].items():
            if not g['valid']:
                print(f'  camera {c}: INVALID: {g["invalid_reason"]}')
        for t, v in m['data_quality']['streams'].items():
            print(f'  data quality {t}: {v["status"]}'
                  + (f': {"; ".join(v["problems"])}' if v['problems'] else ''))
    elif not m.get('legged'):
        print('no primary/secondary pair found: stream statistics only')
    legged = m.get('legged')
    if legged:
        print(f'legged: {legged["compared"]} against {legged["reference"]}: '
              f'{legged["paired_samples"]} samples, height {legged["base_height_error_m"]:.4f} m, '
              f'orientation {legged["orientation_error_rad"]:.4f} rad, velocity '
              f'{legged["velocity_error_m_s"]:.4f} m/s RMS')
        for name, e in legged['episodes'].items():
            track = e['velocity_tracking_error_m_s']
            print(f'  {name}: {e["falls"]} falls, velocity tracking '
                  + ('-' if track is None else f'{track:.4f} m/s')
                  + ', duty factor ' + ' '.join(f'{d:.2f}' for d in e['duty_factor']))
        for note in legged['notes']:
            print(f'  {note}')
    print(f'wrote {ns.out}/gap.json, {ns.out}/report.html ({len(m["images"])} plots)')
    return 0


def cmd_check(ns: argparse.Namespace) -> int:
    """Print the data-quality verdict of a bag; exit 1 when it fails."""
    from simreal_ros.gap.episode import load_episode
    from simreal_ros.gap.quality import check_episode, robot_for, thresholds_from
    from simreal_ros.report.gap_report import ProgressBar
    th = thresholds_from(ns.threshold or [])
    ep = load_episode(ns.bag, progress=ProgressBar('reading', enabled=not ns.json))
    robot = robot_for(ep, ns.robot)
    verdict = check_episode(ep, robot, th)
    print(json.dumps(verdict.as_dict(), allow_nan=False) if ns.json else verdict.text())
    return 0 if verdict.passed else 1


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def recorder_summary(custom: dict[str, str]) -> dict[str, Any]:
    """Return the recorder's own ``recorder.*`` entries of ``custom_data``, grouped.

    ``recorder.missed`` is ``missed.total``, ``recorder.missed.<topic>`` is
    ``missed.<topic>``, ``recorder.unattributed.<topic>`` is ``unattributed.<topic>``.
    """
    out: dict[str, Any] = {}
    for key, value in sorted(custom.items()):
        if not key.startswith('recorder.'):
            continue
        rest = key[len('recorder.'):]
        group, _, topic = rest.partition('.')
        if group in ('missed', 'unattributed'):
            out.setdefault(group, {})[topic or 'total'] = _number(value)
        else:
            out[rest] = _number(value)
    return out


def cmd_bag(ns: argparse.Namespace) -> int:
    """``bag repair`` and ``bag info``."""
    from simreal_ros.bag import BagReader, repair_bag
    if ns.action == 'repair':
        r = repair_bag(ns.bag)
        if r.was_clean:
            print(f'{r.path} is complete; nothing to repair')
        elif r.salvaged:
            print(f'salvaged {r.path}: {r.message_count} messages readable in '
                  f'{len(r.files)} file(s), {r.lost_messages} lost')
        else:
            print(f'repaired {r.path}: {r.message_count} messages readable in '
                  f'{len(r.files)} file(s); {r.truncated_bytes} bytes of an unfinished '
                  f'chunk dropped')
        for line in r.lost:
            print(f'  {line}')
        return 0
    with BagReader(ns.bag) as b:
        info = b.info
        out = {'path': str(info.path), 'storage': info.storage, 'ros_distro': info.ros_distro,
               'files': info.files,
               'messages': info.message_count,
               'duration_s': (info.end_ns - info.start_ns) / 1e9,
               'topics': {t: {'type': ty, 'count': n} for t, (ty, n) in info.topics.items()},
               'custom_data_keys': sorted(info.custom_data)}
        recorder = recorder_summary(info.custom_data)
        if recorder:
            out['recorder'] = recorder
    print(json.dumps(out, indent=2))
    return 0


def add_commands(sub: Any) -> None:
    """Add record, gap, check and bag to the ``simreal`` sub-command parser."""
    p = sub.add_parser('record', help='record topics into a rosbag2 bag (MCAP by default)',
                       description='Record topics (raw CDR) into a new rosbag2 bag until '
                       'Ctrl-C or --duration; optionally measure the live gap.')
    p.add_argument('--out', required=True, help='bag directory to create (must not exist)')
    p.add_argument('--topics', nargs='+', metavar='TOPIC',
                   help='names or glob patterns (default: all, "*")')
    p.add_argument('--exclude', nargs='+', metavar='TOPIC',
                   help='names or patterns not to record (default /rosout /parameter_events)')
    p.add_argument('--storage', default='mcap', help='mcap (default) or sqlite3')
    p.add_argument('--compression', default='none', help='none (default) or zstd')
    p.add_argument('--split-size-mb', type=float, default=0.0, help='split at this size (MB)')
    p.add_argument('--split-duration-s', type=float, default=0.0,
                   help='split after this many seconds')
    p.add_argument('--flush-period', type=float, default=0.05,
                   help='seconds between flushes, at most 1 (default 0.05)')
    p.add_argument('--duration', type=float, default=0.0, help='stop after S seconds (0: run '
                   'until Ctrl-C)')
    p.add_argument('--gap-primary', help='live gap: primary joint_states topic')
    p.add_argument('--gap-secondary', help='live gap: secondary joint_states topic')
    p.add_argument('--embed', nargs='+', metavar='KEY=PATH',
                   help='files to embed in custom_data (robot spec, overlays, ...)')
    p.add_argument('--use-sim-time', action='store_true', help='bag timestamps from /clock')
    p.set_defaults(func=cmd_record)

    p = sub.add_parser('gap', help='gap metrics (JSON) and an HTML report of a bag',
                       description='Gap metrics (gap.json) and a self-contained report.html of '
                       'a bag. The streams a metric pairs are judged first, as simreal check '
                       'does: joint metrics over a dropped or stalled stream are refused with '
                       'exit code 4 unless --allow-bad-data, which marks them invalid.')
    p.add_argument('bag', help='bag directory')
    p.add_argument('--out', required=True, help='report directory (created if needed)')
    p.add_argument('--primary', help='primary joint_states topic (default: sim_a/ or root)')
    p.add_argument('--secondary', help='secondary joint_states topic (default: sim_b/, twin/)')
    p.add_argument('--max-lag', type=float, default=0.2, help='lag search range (s)')
    p.add_argument('--resync-topic', default='',
                   help='topic whose messages mark twin re-syncs (default: '
                        '<secondary ns>/sim_bridge/resync if recorded, else detected from '
                        'the error)')
    p.add_argument('--against', metavar='BAG2',
                   help="legged gap of this bag's floating-base robot against BAG2's (odom, "
                        'foot_contacts, imu/data, cmd_vel; e.g. the same run in another engine); '
                        'without it, a sim2sim bag gives the legged gap of its pair')
    p.add_argument('--json', action='store_true', help='print the metrics as JSON')
    p.add_argument('--quiet', action='store_true', help='no progress bar')
    # defaults as text: the parser imports nothing heavy (validity reads bags); test_gap_data_
    # quality checks that they are validity's
    p.add_argument('--threshold', type=float, default=None, metavar='FRACTION',
                   help='largest fraction of a paired stream that may be dropped (default '
                        '0.01, as simreal check)')
    p.add_argument('--stall-limit-ms', type=float, default=None, metavar='MS',
                   help="longest stop of a paired stream's stamps beyond its median interval "
                        '(default 40 ms)')
    p.add_argument('--allow-bad-data', action='store_true',
                   help='compute joint metrics over dropped or stalled streams anyway, marked '
                        'invalid (default: refuse, exit code 4)')
    p.set_defaults(func=cmd_gap)

    p = sub.add_parser('check', help='data-quality verdict of a bag (exit 1 on failure)')
    p.add_argument('bag', help='bag directory')
    p.add_argument('--robot', help='robot spec (default: the one embedded in the bag)')
    p.add_argument('--json', action='store_true', help='print the verdict as JSON')
    p.add_argument('--threshold', nargs='+', metavar='NAME=VALUE',
                   help='override thresholds, e.g. max_dropped_fraction=0.05 gap_factor=10')
    p.set_defaults(func=cmd_check)

    p = sub.add_parser('bag', help='bag tools: repair (after a crash; salvages the intact '
                       'chunks of a corrupt or truncated bag), info',
                       description='bag repair BAG: make a killed recording readable, or '
                       'rewrite a corrupt or truncated bag from its intact chunks (the '
                       'original kept as <file>.damaged) and say what was lost. bag info BAG: '
                       'topics, counts, duration (JSON). A corrupt bag is exit code 3.')
    p.add_argument('action', choices=['repair', 'info'])
    p.add_argument('bag', help='bag directory')
    p.set_defaults(func=cmd_bag)


def main(argv: list[str] | None = None) -> int:
    """Run one of these sub-commands alone (``python -m simreal_ros.cli.report``)."""
    parser = argparse.ArgumentParser(prog='simreal')
    add_commands(parser.add_subparsers(dest='command', required=True))
    ns = parser.parse_args(argv)
    try:
        return int(ns.func(ns))
    except BadDataError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return EXIT_BAD_DATA
    except BagCorruptError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return EXIT_CORRUPT_INPUT
    except SimrealError as exc:
        print(f'simreal {ns.command}: error: {exc}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    raise SystemExit(main())
