"""``simreal check``: a data-quality verdict for a recorded episode.

Every check has a threshold (:class:`Thresholds`, all overridable) and yields a
:class:`Finding` per topic or joint it looked at. The episode fails when any finding fails.

========================  =======================================================================
check                     what it measures (per stamped topic unless said otherwise)
========================  =======================================================================
``dropped``               messages missing against the publisher's rate: the rate is
                          1 / median header-stamp period; expected = span x rate + 1
``non_monotonic``         header stamps earlier than (out of order) or equal to (duplicate) the
                          previous one
``gaps``                  intervals between stamps longer than ``gap_factor`` x median period
``clock_skew``            spread between topics of the median (receive time - header stamp):
                          publishers stamping with different clocks, or a clock jump
``commands_at_limits``    joint command positions at or beyond the robot spec's limits
                          (per joint, fraction of samples)
``saturated_effort``      joint_states efforts at the robot spec's effort limit (per joint;
                          for servo buses that report current, effort = current x torque/amp)
``frozen_frames``         image topics: frames byte-identical to the previous frame (a camera
                          driver re-sending its last buffer, a renderer that stopped)
``black_frames``          image topics: frames whose mean luma is below 8 of 255 (lens cap, an
                          exposure failure, a renderer without a light)
``recorder_missed``       per recorded topic: messages its publishers sent that the recorder
                          never got (``recorder.missed.<topic>`` in ``custom_data``: gaps in the
                          publishers' sequence numbers); any is a failure
``recorder_dropped``      bags of the older recorder with a queue: messages it dropped
========================  =======================================================================

Dropped image frames are the ``dropped`` check of the image topic, as for any stamped stream.

Topics that many nodes publish to by design (``/diagnostics``, ``/rosout``, ``/tf``, ...) are no
one publisher's stream: their merged stamps interleave several rates (a sim2sim run's
``/diagnostics`` read as one 7 Hz stream with 54 % "missing" and 700 ms "gaps"), so the per-topic
stream checks skip them and say so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
import math
from pathlib import Path
import tempfile
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError, SimrealError

if TYPE_CHECKING:  # an annotation only: validating thresholds (the launch planner) reads no bag
    from simreal_ros.gap.episode import Episode
    from simreal_ros.gap.stream_stats import StreamSummary

# topics with several publishers by contract; the stream checks do not apply to them
MULTI_PUBLISHER_TOPICS = frozenset({'/diagnostics', '/rosout', '/tf', '/tf_static',
                                    '/parameter_events'})


@dataclass(frozen=True)
class Thresholds:
    """Limits of :func:`check_episode` (fractions are 0..1)."""

    max_dropped_fraction: float = 0.01
    max_non_monotonic: int = 0
    gap_factor: float = 5.0
    max_gaps: int = 0
    max_clock_skew_ms: float = 20.0
    max_at_limit_fraction: float = 0.01
    limit_tolerance_rad: float = 1e-3
    max_saturated_fraction: float = 0.01
    saturation_level: float = 0.98
    min_messages: int = 10
    max_frozen_fraction: float = 0.0
    max_black_fraction: float = 0.0

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ValueError(f'threshold {k} must be a finite number >= 0, got {v!r}')


@dataclass
class Finding:
    """One check on one subject (topic or joint)."""

    check: str
    subject: str
    value: float
    limit: float
    passed: bool
    detail: str


@dataclass
class Verdict:
    """All findings of one episode; ``passed`` when none failed."""

    bag: str
    findings: list[Finding] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every finding passed."""
        return all(f.passed for f in self.findings)

    @property
    def failures(self) -> list[Finding]:
        """The findings that failed."""
        return [f for f in self.findings if not f.passed]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        def clean(x: float) -> float | None:
            return None if not math.isfinite(x) else x
        return {'bag': self.bag, 'passed': self.passed,
                'failed_checks': sorted({f.check for f in self.failures}),
                'findings': [{**asdict(f), 'value': clean(f.value), 'limit': clean(f.limit)}
                             for f in self.findings],
                'skipped': self.skipped}

    def text(self) -> str:
        """Human-readable report."""
        lines = [f'{"PASS" if self.passed else "FAIL"}  {self.bag}']
        width = max((len(f.check) for f in self.findings), default=5)
        for f in self.findings:
            mark = 'ok  ' if f.passed else 'FAIL'
            lines.append(f'  {mark} {f.check:<{width}}  {f.subject}: {f.detail}')
        for s in self.skipped:
            lines.append(f'  skip {s}')
        n_fail = len(self.failures)
        lines.append(f'{len(self.findings)} findings, {n_fail} failed'
                     + (f': {", ".join(sorted({f.check for f in self.failures}))}'
                        if n_fail else ''))
        return '\n'.join(lines)


def dropped_count(s: StreamSummary) -> tuple[int, int]:
    """Return (missing, expected) messages of a stream at its rate (the ``dropped`` check).

    Rate = 1 / median header-stamp period; expected = span x rate + 1; missing = expected -
    unique stamps (never negative). ``(0, 0)`` for a stream without a finite period.
    """
    if not math.isfinite(s.median_period_ms) or s.median_period_ms <= 0:
        return 0, 0
    expected = int(round(s.span_s * 1e9 / (s.median_period_ms * 1e6))) + 1
    return max(0, expected - (s.count - s.duplicates)), expected


def check_episode(ep: Episode, robot: RobotSpec | None, th: Thresholds | None = None
                  ) -> Verdict:
    """Run every check on ``ep``; checks needing the robot spec are skipped without one."""
    th = th or Thresholds()
    v = Verdict(str(ep.info.path))
    medians: dict[str, float] = {}
    for topic, s in sorted(ep.stats.items()):
        if topic in MULTI_PUBLISHER_TOPICS:
            v.skipped.append(f'{topic}: several publishers by design, not one stream')
            continue
        if s.count < th.min_messages or not math.isfinite(s.median_period_ms) \
                or not math.isfinite(s.skew_mean_ms):
            if s.count and not math.isfinite(s.skew_mean_ms):
                continue  # no header: nothing stamped to judge
            v.skipped.append(f'{topic}: only {s.count} messages')
            continue
        period_ns = s.median_period_ms * 1e6
        dropped, expected = dropped_count(s)
        frac = dropped / expected if expected else 0.0
        v.findings.append(Finding(
            'dropped', topic, frac, th.max_dropped_fraction, frac <= th.max_dropped_fraction,
            f'{dropped} of {expected} expected at {1e9 / period_ns:.1f} Hz missing '
            f'({100 * frac:.2f} %, limit {100 * th.max_dropped_fraction:.2f} %)'))
        bad = s.out_of_order + s.duplicates
        v.findings.append(Finding(
            'non_monotonic', topic, bad, th.max_non_monotonic, bad <= th.max_non_monotonic,
            f'{s.out_of_order} out-of-order, {s.duplicates} duplicate stamps'))
        d = np.diff(np.unique(ep.stamps[topic])).astype(np.float64)
        limit = th.gap_factor * period_ns
        gaps = int(np.sum(d > limit))
        worst = float(d.max()) / 1e6 if d.size else 0.0
        v.findings.append(Finding(
            'gaps', topic, gaps, th.max_gaps, gaps <= th.max_gaps,
            f'{gaps} gaps longer than {limit / 1e6:.1f} ms ({th.gap_factor:g} periods); '
            f'longest interval {worst:.1f} ms'))
        medians[topic] = s.skew_mean_ms
    _check_recorder(ep, v)
    _check_images(ep, th, v)
    if len(medians) >= 2:
        lo = min(medians, key=lambda t: medians[t])
        hi = max(medians, key=lambda t: medians[t])
        spread = medians[hi] - medians[lo]
        v.findings.append(Finding(
            'clock_skew', 'between topics', spread, th.max_clock_skew_ms,
            spread <= th.max_clock_skew_ms,
            f'mean receive-minus-stamp from {medians[lo]:.2f} ms ({lo}) to '
            f'{medians[hi]:.2f} ms ({hi}): spread {spread:.2f} ms'))
    elif medians:
        v.skipped.append('clock_skew: fewer than two stamped topics')
    if robot is None:
        v.skipped.append('commands_at_limits, saturated_effort: no robot spec (give --robot)')
        return v
    _check_limits(ep, robot, th, v)
    return v


def _check_images(ep: Episode, th: Thresholds, v: Verdict) -> None:
    """Frozen and black frames of every image topic."""
    for topic, img in sorted(ep.images.items()):
        n = len(img.stamps)
        if n < th.min_messages:
            v.skipped.append(f'frozen_frames, black_frames: {topic}: only {n} frames')
            continue
        for check, count, limit in (('frozen_frames', img.frozen, th.max_frozen_fraction),
                                    ('black_frames', img.black, th.max_black_fraction)):
            frac = count / n
            what = 'identical to the previous one' if check == 'frozen_frames' else (
                f'with mean luma < {img.black_level:g}')
            v.findings.append(Finding(check, topic, frac, limit, frac <= limit,
                                      f'{count} of {n} frames {what} ({100 * frac:.2f} %, '
                                      f'limit {100 * limit:.2f} %)'))


def _check_recorder(ep: Episode, v: Verdict) -> None:
    """Check what the recorder says it missed (sequence gaps) or dropped (older bags)."""
    custom = ep.info.custom_data
    if 'recorder.missed' not in custom and 'recorder.dropped_queue_full' not in custom:
        v.skipped.append('recorder_missed: the bag does not say (not recorded by the simreal '
                         'recorder)')
        return
    if 'recorder.dropped_queue_full' in custom:  # bags of the recorder that had a queue
        _check_count(v, custom, 'recorder.dropped_queue_full', 'recorder_dropped', 'recorder',
                     'messages dropped inside the recorder (queue full)')
    prefix = 'recorder.missed.'
    per_topic = sorted(k for k in custom if k.startswith(prefix))
    for key in per_topic:
        _check_count(v, custom, key, 'recorder_missed', key[len(prefix):],
                     'messages the publishers sent never reached the recorder (gaps in '
                     'their sequence numbers)')
    if 'recorder.missed' in custom and not per_topic:
        _check_count(v, custom, 'recorder.missed', 'recorder_missed', 'recorder',
                     'messages the publishers sent never reached the recorder')


def _check_count(v: Verdict, custom: dict[str, str], key: str, check: str, subject: str,
                 what: str) -> None:
    """One finding that passes when the count under ``key`` is 0."""
    try:
        n = int(custom[key])
    except ValueError:
        v.skipped.append(f'{check}: {subject}: unreadable count {custom[key]!r} ({key})')
        return
    v.findings.append(Finding(check, subject, n, 0, n == 0, f'{n} {what}'))


def _check_limits(ep: Episode, robot: RobotSpec, th: Thresholds, v: Verdict) -> None:
    from simreal_ros.bag.arrays import JOINT_STATE
    cmd = ep.joints.get(ep.commands_topic) if ep.commands_topic else None
    if cmd is None or len(cmd.stamps) == 0:
        v.skipped.append('commands_at_limits: no joint_commands in the bag')
    else:
        q = np.asarray(cmd.position, dtype=np.float64)
        for j, name in enumerate(cmd.names):
            try:
                k = robot.index(name)
            except KeyError:
                v.skipped.append(f'commands_at_limits: joint {name} is not in {robot.name}')
                continue
            lo, hi = robot.lower[k], robot.upper[k]
            col = q[:, j]
            at = (col <= lo + th.limit_tolerance_rad) | (col >= hi - th.limit_tolerance_rad)
            frac = float(np.mean(at)) if len(col) else 0.0
            beyond = int(np.sum((col < lo) | (col > hi)))
            v.findings.append(Finding(
                'commands_at_limits', f'{ep.commands_topic} {name}', frac,
                th.max_at_limit_fraction, frac <= th.max_at_limit_fraction,
                f'{100 * frac:.2f} % of commands at the limits [{lo:.3f}, {hi:.3f}] rad'
                + (f', {beyond} beyond' if beyond else '')))
    states = [t for t, js in ep.joints.items() if t != ep.commands_topic
              and ep.info.topics[t][0] == JOINT_STATE and t.endswith('joint_states')]
    found = False
    for topic in sorted(states):
        js = ep.joints[topic]
        eff = js.efforts()
        if eff.size == 0 or not np.any(np.isfinite(eff)):
            continue
        found = True
        for j, name in enumerate(js.names):
            try:
                k = robot.index(name)
            except KeyError:
                continue
            limit = robot.effort_limit[k]
            col = eff[:, j]
            col = col[np.isfinite(col)]
            frac = float(np.mean(np.abs(col) >= th.saturation_level * limit)) if col.size \
                else 0.0
            v.findings.append(Finding(
                'saturated_effort', f'{topic} {name}', frac, th.max_saturated_fraction,
                frac <= th.max_saturated_fraction,
                f'{100 * frac:.2f} % of samples at >= {100 * th.saturation_level:.0f} % of '
                f'the {limit:g} N*m limit'))
    if not found:
        v.skipped.append('saturated_effort: no joint_states with efforts')


def thresholds_from(entries: Sequence[str], base: Thresholds | None = None) -> Thresholds:
    """Apply ``name=value`` overrides (``--threshold``) to ``base``; SimrealError on bad ones."""
    th = base or Thresholds()
    known = {f.name: f.type for f in fields(Thresholds)}
    changes: dict[str, Any] = {}
    for e in entries:
        name, sep, value = e.partition('=')
        if not sep or name not in known:
            raise SimrealError(f'threshold {e!r}: expected NAME=VALUE with NAME one of '
                               f'{sorted(known)}')
        try:
            changes[name] = int(value) if isinstance(getattr(th, name), int) else float(value)
        except ValueError:
            raise SimrealError(f'threshold {name}={value!r} is not a number') from None
    try:
        return replace(th, **changes)
    except ValueError as exc:
        raise SimrealError(str(exc)) from None


def robot_for(ep: Episode, robot: str | None) -> RobotSpec | None:
    """Return the robot spec for the limit checks: ``robot``, else the one in the bag."""
    if robot:
        return load_robot(robot)
    cd = ep.info.custom_data
    path = cd.get('robot_spec.path', '')
    if path and Path(path).is_file():
        try:
            return load_robot(path)
        except ConfigError:
            pass
    text = cd.get('robot_spec', '')
    if text:
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / 'robot_spec.yaml'
            p.write_text(text, encoding='utf-8')
            try:
                return load_robot(p)
            except ConfigError:
                pass
    name = cd.get('robot_spec.argument', '')
    if name:
        try:
            return load_robot(name)
        except ConfigError:
            return None
    return None
