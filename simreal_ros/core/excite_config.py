"""Settings of the excitation node (``simreal_excite``), validated without ROS."""

from __future__ import annotations

from dataclasses import dataclass

from simreal_ros.core.excitation import PATTERNS, ExcitationConfig
from simreal_ros.core.validate import FromMapping, check_count, check_number
from simreal_ros.errors import ConfigError


@dataclass(frozen=True)
class ExciteConfig(FromMapping):
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
        check_count(self.wait_for_subscribers, src, 'wait_for_subscribers', 0)
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
