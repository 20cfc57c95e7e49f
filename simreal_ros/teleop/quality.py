"""Quality of a teleoperated demonstration: the checks run on every episode at its stop.

An episode is accepted when every finding of :func:`simreal_ros.gap.quality.check_episode`
(dropped samples, gaps, stamps, clock skew, commands at the joint limits, saturated effort,
frozen and black camera frames) and every teleop finding below passes; the failed ones are the
reasons it was rejected.

===================  ==============================================================================
check                what it measures
===================  ==============================================================================
``duration``         the episode's ``joint_commands`` span: at least ``min_duration_s``
``lag``              leader-follower lag: the cross-correlation peak between ``joint_commands``
                     (the mapped leader) and the follower's ``joint_states``
                     (:func:`simreal_ros.gap.metrics.estimate_lag_ns`), at most ``max_lag_s``
``tracking``         RMS of follower minus command after removing that lag, per joint, at most
                     ``max_tracking_rms_rad`` (a follower that could not follow: blocked,
                     saturated, commands too fast)
``jerk``             RMS jerk of the commands per joint, from 20 Hz bin means (bins of 50 ms
                     average the encoder's tick quantization down: raw 100 Hz third
                     differences of a tick-quantized 0.4 Hz, 0.3 rad motion read 2010
                     rad/s^3 RMS, its bin means 9.2 against 3.4 true, an 8 Hz 0.01 rad tremor
                     on it 299), at most ``max_rms_jerk_rad_s3``: a shaking hand
``idle``             fraction of the episode in which no joint's command moves faster than
                     ``idle_speed_rad_s``, at most ``max_idle_fraction``
===================  ==============================================================================
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import yaml

from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError, SimrealError
from simreal_ros.gap.metrics import Series, estimate_lag_ns, pair
from simreal_ros.gap.quality import Finding, Thresholds, Verdict, check_episode, thresholds_from

if TYPE_CHECKING:  # an annotation only: the planner validates EpisodesConfig without bag code
    from simreal_ros.gap.episode import Episode

FloatArray = npt.NDArray[np.float64]
JERK_BIN_NS = 50_000_000


@dataclass(frozen=True)
class TeleopThresholds:
    """Limits of :func:`check_teleop` (see the module docstring)."""

    min_duration_s: float = 1.0
    max_lag_s: float = 0.25
    max_tracking_rms_rad: float = 0.1
    max_rms_jerk_rad_s3: float = 100.0
    idle_speed_rad_s: float = 0.02
    max_idle_fraction: float = 0.5

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ConfigError('episodes', k, 'a finite number >= 0', v)


def parse_thresholds(entries: Sequence[str], source: str
                     ) -> tuple[Thresholds, TeleopThresholds]:
    """Split ``key=value`` entries over both threshold sets; ConfigError on unknown or bad."""
    teleop_keys = {f.name for f in fields(TeleopThresholds)}
    base_keys = {f.name for f in fields(Thresholds)}
    teleop: dict[str, float] = {}
    rest: list[str] = []
    for entry in entries:
        key, sep, raw = entry.partition('=')
        if not sep or key not in base_keys | teleop_keys:
            raise ConfigError(source, 'thresholds', f'key=value with a key among '
                              f'{sorted(base_keys | teleop_keys)}', entry)
        if key in teleop_keys:
            try:
                teleop[key] = float(raw)
            except ValueError:
                raise ConfigError(source, f'thresholds.{key}', 'a number', raw) from None
        else:
            rest.append(entry)
    try:
        th = thresholds_from(rest)
    except SimrealError as exc:
        raise ConfigError(source, 'thresholds', 'finite numbers >= 0', str(exc)) from None
    return th, TeleopThresholds(**teleop)


def _series(ep: Episode, topic: str, names: Sequence[str]) -> Series | None:
    stream = ep.joints.get(topic)
    if stream is None or len(stream.stamps) < 4:
        return None
    return stream.series().select(names)


def bin_means(t_ns: npt.NDArray[np.int64], q: FloatArray, bin_ns: int
              ) -> tuple[FloatArray, FloatArray]:
    """Return (bin centers in s, mean of each joint per bin) over consecutive bins."""
    k = ((t_ns - t_ns[0]) // bin_ns).astype(np.int64)
    counts = np.bincount(k)
    keep = counts > 0
    sums = np.stack([np.bincount(k, weights=q[:, j]) for j in range(q.shape[1])], axis=1)
    means: FloatArray = sums[keep] / counts[keep][:, None]
    centers = np.asarray((np.nonzero(keep)[0] + 0.5) * bin_ns / 1e9, dtype=np.float64)
    return centers, means


def rms_jerk(t_ns: npt.NDArray[np.int64], q: FloatArray, bin_ns: int = JERK_BIN_NS
             ) -> FloatArray:
    """RMS jerk per joint (rad/s^3) of ``q`` from bin means (see the module docstring)."""
    t, m = bin_means(t_ns, q, bin_ns)
    if len(t) < 5:
        return np.zeros(q.shape[1])
    dt = bin_ns / 1e9
    # consecutive bins only (a gap would fake a jump); bins missing mark a gap
    steps = np.round(np.diff(t) / dt).astype(np.int64)
    jerk = np.diff(m, 3, axis=0) / dt ** 3
    ok = (steps[:-2] == 1) & (steps[1:-1] == 1) & (steps[2:] == 1)
    if not np.any(ok):
        return np.zeros(q.shape[1])
    out = np.sqrt(np.mean(jerk[ok] ** 2, axis=0))
    return np.asarray(out, dtype=np.float64)


def lag_and_tracking(commands: Series, follower: Series, max_lag_s: float = 0.25
                     ) -> tuple[float, FloatArray]:
    """Return the follower's lag (ns; NaN without motion) and per-joint RMS after removing it.

    The lag is the cross-correlation peak of the commands and the follower's positions
    (:func:`~simreal_ros.gap.metrics.estimate_lag_ns`, searched up to twice ``max_lag_s``, at
    least 0.5 s); the RMS is of follower minus command, the follower's stamps moved back by the
    lag (by none when it is NaN), per joint in the commands' order (NaN where nothing paired).
    """
    lag_ns = estimate_lag_ns(commands, follower, max_lag_ns=int(max(2 * max_lag_s, 0.5) * 1e9))
    shift = int(lag_ns) if math.isfinite(lag_ns) else 0
    aligned = Series(follower.names, follower.stamps - shift, follower.position,
                     follower.velocity)
    err = pair(commands, aligned).position_error
    rms: FloatArray = np.sqrt(np.nanmean(err ** 2, axis=0)) if len(err) else \
        np.full(len(commands.names), np.nan)
    return float(lag_ns), rms


def check_teleop(ep: Episode, robot: RobotSpec, th: TeleopThresholds, commands: str,
                 states: str, v: Verdict) -> None:
    """Add the teleop findings of ``ep`` to ``v`` (``commands``/``states``: topic names)."""
    names = robot.joint_names
    cmd = _series(ep, commands, names)
    if cmd is None:
        v.findings.append(Finding('duration', commands, 0.0, th.min_duration_s, False,
                                  'no joint commands: the follower was never driven'))
        return
    span = (int(cmd.stamps[-1]) - int(cmd.stamps[0])) / 1e9
    v.findings.append(Finding('duration', commands, span, th.min_duration_s,
                              span >= th.min_duration_s,
                              f'{span:.2f} s of commands (at least {th.min_duration_s:g} s)'))
    speed = np.abs(np.diff(cmd.position, axis=0)) / (np.diff(cmd.stamps)[:, None] / 1e9)
    idle = float(np.mean(np.max(speed, axis=1) < th.idle_speed_rad_s)) if len(speed) else 1.0
    v.findings.append(Finding('idle', commands, idle, th.max_idle_fraction,
                              idle <= th.max_idle_fraction,
                              f'{100 * idle:.1f} % of the episode without motion (every joint '
                              f'< {th.idle_speed_rad_s:g} rad/s)'))
    jerk = rms_jerk(cmd.stamps, cmd.position)
    for name, j in zip(names, jerk, strict=True):
        v.findings.append(Finding('jerk', name, float(j), th.max_rms_jerk_rad_s3,
                                  bool(j <= th.max_rms_jerk_rad_s3),
                                  f'RMS jerk {j:.1f} rad/s^3 of the commands'))
    follower = _series(ep, states, names)
    if follower is None:
        v.findings.append(Finding('lag', states, math.nan, th.max_lag_s, False,
                                  f'no follower {states} in the episode'))
        return
    lag_ns, rms = lag_and_tracking(cmd, follower, th.max_lag_s)
    lag = lag_ns / 1e9
    if math.isfinite(lag):
        v.findings.append(Finding('lag', states, lag, th.max_lag_s, abs(lag) <= th.max_lag_s,
                                  f'follower {1e3 * lag:.1f} ms behind the commands (cross-'
                                  f'correlation)'))
    else:  # commands without motion correlate with nothing: the idle check speaks for them
        v.skipped.append(f'lag: {states}: no motion to correlate')
    for name, r in zip(names, rms, strict=True):
        v.findings.append(Finding('tracking', name, float(r), th.max_tracking_rms_rad,
                                  bool(r <= th.max_tracking_rms_rad),
                                  f'RMS follower - command {r:.4f} rad after the lag'))


def check_teleop_episode(ep: Episode, robot: RobotSpec, th: Thresholds,
                         tth: TeleopThresholds, commands: str = '/joint_commands',
                         states: str = '/joint_states') -> Verdict:
    """Run :func:`check_episode` and :func:`check_teleop` on one episode."""
    v = check_episode(ep, robot, th)
    check_teleop(ep, robot, tth, commands, states, v)
    return v


def reasons(v: Verdict) -> list[str]:
    """One line per failed finding: ``check subject: detail``."""
    return [f'{f.check} {f.subject}: {f.detail}' for f in v.failures]


@dataclass(frozen=True)
class EpisodesConfig(FromMapping):
    """Parameters of ``simreal_episodes`` (the episode recorder of teleop).

    * ``directory``: where episodes go, one bag per episode ``episode_NNNN`` with its
      ``episode.yaml`` ('' = ``./episodes/simreal_<date>_<time>``); it may exist (a session
      continued: numbering goes on after the last episode in it).
    * ``topics``: recorded topics (relative names resolve in the node's namespace); a name
      ending in ``image_raw`` is a sensor_msgs/Image, every other a sensor_msgs/JointState.
    * ``task``, ``operator``, ``calibration``: written into each episode's metadata (the
      task label is what LeRobot's ``task`` column gets); ``robot``: the follower.
    * ``check``: run the quality checks at stop and mark the episode accepted or rejected;
      ``thresholds``: ``key=value`` over :class:`~simreal_ros.gap.quality.Thresholds` and
      :class:`TeleopThresholds`.
    """

    SOURCE = 'episodes'

    robot: str = 'simreal_arm'
    directory: str = ''
    topics: tuple[str, ...] = ('joint_states', 'leader/joint_states', 'joint_commands')
    task: str = ''
    operator: str = ''
    calibration: str = ''
    check: bool = True
    thresholds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not [t for t in self.topics if t]:
            raise ConfigError('episodes', 'topics', 'at least one topic', list(self.topics))
        self.parsed_thresholds()

    def parsed_thresholds(self) -> tuple[Thresholds, TeleopThresholds]:
        """Return the thresholds of both check sets."""
        return parse_thresholds(self.thresholds, 'episodes')



EPISODE_META = 'episode.yaml'


def next_episode_index(directory: Path) -> int:
    """Return the index after the last ``episode_NNNN`` in ``directory`` (0 when there is none)."""
    taken = [int(p.name.split('_')[1]) for p in directory.glob('episode_[0-9]*')
             if p.name.split('_')[1].isdigit()]
    return max(taken, default=-1) + 1


def plain(x: Any) -> Any:
    """Return ``x`` with numpy scalars as Python ones and NaN/inf as None (for YAML/JSON)."""
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_meta(path: Path, meta: Mapping[str, Any]) -> None:
    """Write an episode's metadata (YAML) atomically next to its bag."""
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(yaml.safe_dump(plain(meta), sort_keys=False), encoding='utf-8')
    os.replace(tmp, path)


def read_meta(episode_dir: Path) -> dict[str, Any]:
    """Read ``episode.yaml`` of an episode directory (ConfigError naming it if broken)."""
    path = episode_dir / EPISODE_META
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise ConfigError(str(path), '', 'an episode written by simreal_episodes (its '
                          'episode.yaml is missing)', has_got=False) from None
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), '', 'valid YAML', str(exc).splitlines()[0]) from None
    if not isinstance(data, dict) or 'accepted' not in data:
        raise ConfigError(str(path), 'accepted', 'episode metadata with accepted: true/false',
                          data)
    return data
