"""Settings of the latency injector node (``simreal_injector``), validated without ROS."""

from __future__ import annotations

from dataclasses import dataclass

from simreal_ros.core.realtime import RtSettings, check_priority, settings_from
from simreal_ros.core.validate import FromMapping, check_number
from simreal_ros.errors import ConfigError

#: default: the last 0.3 ms before a delivery deadline the injector polls the clock
INJECTOR_SPIN_US = 300


@dataclass(frozen=True)
class InjectorConfig(FromMapping):
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
