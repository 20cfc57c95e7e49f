"""Settings of the excitation, policy, recorder and injector nodes, validated without ROS.

Each class is the node's whole parameter set: the node declares every field as a read-only
ROS parameter of the same name (``ros.params.declare_dataclass``) and builds the class from
what it read back; the planner builds the same class from the parameters it is about to pass,
so a bad launch argument fails before any process starts. Construction validates every field
and raises :class:`ConfigError` naming the node, the key, what was expected and what was got.
A field with a tuple default is a string-array parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from simreal_ros.core.bag.options import BagOptions
from simreal_ros.core.excitation import PATTERNS, ExcitationConfig
from simreal_ros.core.realtime import RtSettings, check_priority, settings_from
from simreal_ros.core.validate import check_number, dataclass_from_mapping
from simreal_ros.errors import ConfigError

C = TypeVar('C')


def _count(v: object, source: str, key: str, minimum: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(source, key, f'an integer >= {minimum}', v)
    return v


class _FromMapping:
    """``from_mapping``: build from a mapping, rejecting unknown keys and wrong types."""

    SOURCE = ''

    @classmethod
    def from_mapping(cls: type[C], values: Mapping[str, Any]) -> C:
        return dataclass_from_mapping(cls, values, cls.SOURCE)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ExciteConfig(_FromMapping):
    """Parameters of ``simreal_excite``.

    * ``pattern`` .. ``seed``: the trajectory (see :class:`ExcitationConfig`), sampled at
      ``rate_hz`` or, with ``sync_to_states``, once per received ``joint_states``.
    * ``wait_for_states``: start when the first ``joint_states`` arrives, not while the robot
      is still booting.
    * ``wait_for_subscribers``: before the first command, wait until this many subscribers of
      ``joint_commands`` are connected (the plan's backend or injector, and the recorder), at
      most ``wait_timeout_s``; at the end, wait as long for them to acknowledge the last one.
    """

    SOURCE = 'excite'

    robot: str = 'simreal_arm'
    pattern: str = 'chirp'
    duration_s: float = 10.0
    amplitude: float = 0.3
    rate_hz: float = 100.0
    seed: int = 0
    f_min_hz: float = 0.1
    f_max_hz: float = 2.0
    step_hold_s: float = 1.0
    ramp_s: float = 1.0
    sync_to_states: bool = False
    wait_for_states: bool = False
    wait_for_subscribers: int = 0
    wait_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        src = self.SOURCE
        if self.pattern not in PATTERNS:
            raise ConfigError(src, 'pattern', f'one of {PATTERNS}', self.pattern)
        check_number(self.rate_hz, src, 'rate_hz', positive=True)
        check_number(self.wait_timeout_s, src, 'wait_timeout_s', positive=True)
        _count(self.wait_for_subscribers, src, 'wait_for_subscribers', 0)
        if not self.robot:
            raise ConfigError(src, 'robot', 'a robot name or spec path', self.robot)
        _ = self.excitation  # validates the trajectory's own fields

    @property
    def excitation(self) -> ExcitationConfig:
        """The trajectory these parameters describe."""
        return ExcitationConfig(
            pattern=self.pattern, duration_s=self.duration_s, amplitude=self.amplitude,
            f_min_hz=self.f_min_hz, f_max_hz=self.f_max_hz, step_hold_s=self.step_hold_s,
            ramp_s=self.ramp_s, seed=self.seed)


@dataclass(frozen=True)
class PolicyNodeConfig(_FromMapping):
    """Parameters of ``simreal_policy``.

    * ``policy``: a policy spec name (``config/policies/<name>.yaml``) or path; ``robot``: the
      robot it runs on ('' = the spec's own, which must match).
    * ``rate_hz``: control rate (0 = the spec's); the spec's filters are rebuilt for it.
    * ``sync_to_states``: one decision per received ``joint_states`` (lockstep) instead of a
      clock-paced loop.
    * ``enable_on_start``: start enabled instead of waiting for ``~/enable``.
    * ``spin_wait_us``: the loop sleeps to this long before a deadline, then polls the clock.
    * ``threads``: torch intra-op threads.
    * ``rt_priority`` / ``cpu_affinity`` / ``lock_memory``: real-time scheduling of the control
      thread (see docs/realtime.md).
    """

    SOURCE = 'policy'

    policy: str = ''
    robot: str = ''
    rate_hz: float = 0.0
    sync_to_states: bool = False
    enable_on_start: bool = False
    diagnostics_period_s: float = 1.0
    spin_wait_us: int = 100
    threads: int = 1
    rt_priority: int = 0
    cpu_affinity: str = ''
    lock_memory: bool = False

    def __post_init__(self) -> None:
        src = self.SOURCE
        if not self.policy:
            raise ConfigError(src, 'policy', 'a policy spec name (e.g. simreal_arm_reach) or '
                              'path', self.policy)
        check_number(self.rate_hz, src, 'rate_hz', minimum=0.0)
        check_number(self.diagnostics_period_s, src, 'diagnostics_period_s', positive=True)
        _count(self.spin_wait_us, src, 'spin_wait_us', 0)
        _count(self.threads, src, 'threads', 1)
        _ = self.rt  # validates the real-time fields

    @property
    def rt(self) -> RtSettings:
        """Real-time settings of the control thread."""
        return settings_from(self.rt_priority, self.cpu_affinity, self.SOURCE, self.lock_memory)


@dataclass(frozen=True)
class RecorderConfig(_FromMapping):
    """Parameters of ``simreal_recorder``.

    * ``bag``: output directory (must not exist; '' = ``./bags/simreal_<date>_<time>``).
    * ``topics`` / ``exclude``: names or glob patterns recorded / never recorded.
    * ``storage`` .. ``flush_period_s``: how the bag is written (see :class:`BagOptions`).
    * ``discovery_period_s``: how often the graph is searched for new matching topics.
    * ``queue_limit``: messages held for the writer before new ones are dropped (counted).
    * ``duration_s``: stop after this long (0 = until stopped).
    * ``gap_primary`` / ``gap_secondary``: the joint_states pair of the live gap (both or
      neither); ``gap_window_s``: its window; ``gap_max_lag_s``: the largest stamp difference
      still paired.
    * ``depth``: subscription history (0 = keep all: lossless, back-pressure on reliable
      publishers; N = keep the last N).
    * ``embed``: ``key=path`` files embedded in the bag's custom_data; ``custom_data``:
      ``key=value`` entries added to it.
    * ``writer_process``: write the bag in a child process instead of a thread of the node
      (see docs/recording.md for what each measured).
    * ``camera_gap_period_s``: with a gap pair, how often one pair of the two robots' frames
      of each camera is compared live (PSNR, SSIM, ...; 0 = never).
    """

    SOURCE = 'recorder'

    bag: str = ''
    topics: tuple[str, ...] = ('*',)
    exclude: tuple[str, ...] = ('/rosout', '/parameter_events')
    storage: str = 'mcap'
    compression: str = 'none'
    split_size_mb: float = 0.0
    split_duration_s: float = 0.0
    flush_period_s: float = 0.05
    discovery_period_s: float = 0.5
    queue_limit: int = 200_000
    duration_s: float = 0.0
    gap_primary: str = ''
    gap_secondary: str = ''
    gap_window_s: float = 5.0
    gap_max_lag_s: float = 0.2
    diagnostics_period_s: float = 1.0
    depth: int = 0
    embed: tuple[str, ...] = ()
    custom_data: tuple[str, ...] = ()
    writer_process: bool = False
    camera_gap_period_s: float = 1.0

    def __post_init__(self) -> None:
        src = self.SOURCE
        _ = self.bag_options  # validates the storage fields
        check_number(self.camera_gap_period_s, src, 'camera_gap_period_s', minimum=0.0)
        for key in ('discovery_period_s', 'diagnostics_period_s', 'gap_window_s',
                    'gap_max_lag_s'):
            check_number(getattr(self, key), src, key, positive=True)
        check_number(self.duration_s, src, 'duration_s', minimum=0.0)
        _count(self.queue_limit, src, 'queue_limit', 1)
        _count(self.depth, src, 'depth', 0)
        if bool(self.gap_primary) != bool(self.gap_secondary):
            raise ConfigError(src, 'gap_secondary' if self.gap_primary else 'gap_primary',
                              'both gap_primary and gap_secondary set, or neither',
                              self.gap_secondary or self.gap_primary)
        if not [t for t in self.topics if t]:
            raise ConfigError(src, 'topics', 'at least one topic name or pattern',
                              list(self.topics))

    @property
    def bag_options(self) -> BagOptions:
        """How the bag is written."""
        return BagOptions(storage=self.storage, compression=self.compression,
                          split_size_mb=self.split_size_mb,
                          split_duration_s=self.split_duration_s,
                          flush_period_s=self.flush_period_s, source=self.SOURCE)


#: default: the last 0.3 ms before a delivery deadline the injector polls the clock
INJECTOR_SPIN_US = 300


@dataclass(frozen=True)
class InjectorConfig(_FromMapping):
    """Parameters of ``simreal_injector``.

    * ``profile``: a latency profile name (``config/latency/<name>.yaml``) or path.
    * ``bindings``: ``route:input>output`` entries that bind the profile's routes to topics.
    * ``seed``: seed of every random draw (delays, losses, perturbations).
    * ``events_period_s``: how often the per-message events are published;
      ``diagnostics_period_s``: the diagnostics period.
    * ``rt_priority`` / ``cpu_affinity`` / ``lock_memory``: real-time scheduling of the
      delivery thread; ``receive_rt_priority``: of the receiving executor (-1 = the same as
      delivery); ``spin_us``: the delivery thread polls the clock this long before a deadline
      (0..1000 us). See docs/realtime.md.
    """

    SOURCE = 'injector'

    profile: str = 'none'
    bindings: tuple[str, ...] = ()
    seed: int = 0
    events_period_s: float = 0.02
    diagnostics_period_s: float = 1.0
    rt_priority: int = 0
    receive_rt_priority: int = -1
    cpu_affinity: str = ''
    lock_memory: bool = False
    spin_us: int = INJECTOR_SPIN_US

    def __post_init__(self) -> None:
        src = self.SOURCE
        for key in ('events_period_s', 'diagnostics_period_s'):
            check_number(getattr(self, key), src, key, positive=True)
        if self.receive_rt_priority != -1:
            check_priority(self.receive_rt_priority, src, 'receive_rt_priority')
        s = self.spin_us
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 1000:
            raise ConfigError(src, 'spin_us', 'an integer in [0, 1000] (us)', s)
        _ = self.rt  # validates the real-time fields

    @property
    def rt(self) -> RtSettings:
        """Real-time settings of the delivery thread."""
        return settings_from(self.rt_priority, self.cpu_affinity, self.SOURCE, self.lock_memory)
