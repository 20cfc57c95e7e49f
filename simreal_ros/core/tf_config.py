"""Settings of the state publisher node (``/robot_description``, ``/tf``, ``/tf_static``)."""

from __future__ import annotations

from dataclasses import dataclass
import math

from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError


@dataclass(frozen=True)
class StatePublisherConfig(FromMapping):
    """Parameters of ``simreal_state_publisher`` (the ROS parameters have the same names).

    * ``robot``: robot spec name or path; its URDF is published and its kinematics used.
    * ``frame_prefix``: prepended to every frame but ``world`` (``twin/`` for the twin, so
      the two arms of ``backend:=twin`` form one tree under ``world``).
    * ``max_rate_hz``: ``/tf`` is published for a joint state at most this often, by header
      stamp (0 = for every joint state). A 1 kHz backend would otherwise put 1000 TF messages
      a second on the graph and into every bag; 50 Hz is smooth in a viewer.
    """

    SOURCE = 'state_publisher'

    robot: str = 'simreal_arm'
    frame_prefix: str = ''
    max_rate_hz: float = 50.0

    def __post_init__(self) -> None:
        r = self.max_rate_hz
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r)
                                                                         and r >= 0):
            raise ConfigError('state_publisher', 'max_rate_hz', 'a rate >= 0 Hz (0: every '
                              'joint state)', r)
        if self.frame_prefix and not self.frame_prefix.endswith('/'):
            raise ConfigError('state_publisher', 'frame_prefix', "'' or a prefix ending in '/'",
                              self.frame_prefix)

