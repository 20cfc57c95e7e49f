"""Settings of the recorder node (``simreal_recorder``), validated without ROS."""

from __future__ import annotations

from dataclasses import dataclass

from simreal_ros.bag.options import BagOptions
from simreal_ros.core.validate import FromMapping, check_count, check_number
from simreal_ros.errors import ConfigError


@dataclass(frozen=True)
class RecorderConfig(FromMapping):
    """Parameters of ``simreal_recorder``.

    * ``bag``: output directory (must not exist; '' = ``./bags/simreal_<date>_<time>``).
    * ``topics`` / ``exclude``: names or glob patterns recorded / never recorded.
    * ``storage`` .. ``flush_period_s``: how the bag is written (see :class:`BagOptions`).
    * ``discovery_period_s``: how often the graph is searched for new matching topics.
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
        check_count(self.depth, src, 'depth', 0)
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
