"""Settings of the policy node (``simreal_policy``), validated without ROS or torch."""

from __future__ import annotations

from dataclasses import dataclass

from simreal_ros.core.realtime import RtSettings, settings_from
from simreal_ros.core.validate import FromMapping, check_count, check_number
from simreal_ros.errors import ConfigError


@dataclass(frozen=True)
class PolicyNodeConfig(FromMapping):
    """Parameters of ``simreal_policy``.

    * ``policy``: a policy spec name (``config/policies/<name>.yaml``) or path; ``robot``: the
      robot it runs on ('' = the spec's own, which must match).
    * ``rate_hz``: control rate (0 = the spec's); the spec's filters are rebuilt for it.
    * ``sync_to_states``: one decision per received ``joint_states`` (lockstep) instead of a
      clock-paced loop.
    * ``enable_on_start``: start enabled instead of waiting for ``~/enable``.
    * ``spin_wait_us``: the loop sleeps to this long before a deadline (at most a tenth of the
      period), then polls the clock.
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
    spin_wait_us: int = 500
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
        check_count(self.spin_wait_us, src, 'spin_wait_us', 0)
        check_count(self.threads, src, 'threads', 1)
        _ = self.rt  # validates the real-time fields

    def spin_ns(self, period_ns: int) -> int:
        """Return how long (ns) the loop polls the clock before a deadline.

        ``spin_wait_us``, at most a tenth of the period: a 500 Hz loop polls 0.2 ms, not 0.5 ms
        (25 % of a CPU).
        """
        return min(self.spin_wait_us * 1000, period_ns // 10)

    @property
    def rt(self) -> RtSettings:
        """Real-time settings of the control thread."""
        return settings_from(self.rt_priority, self.cpu_affinity, self.SOURCE, self.lock_memory)
