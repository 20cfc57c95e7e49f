"""Settings of the sim bridge node, validated without ROS."""

from __future__ import annotations

from dataclasses import dataclass
import math

from simreal_ros.core.realtime import RtSettings, settings_from
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError
from simreal_ros.sim.push import MAX_PUSH_S

TIMING_MODES = ('realtime', 'lockstep', 'free')
#: the physics engines (simreal_ros.sim.engines builds them; the first is the default)
ENGINES = ('mujoco', 'pybullet')
#: the engines that render the robot spec's cameras (their ``capabilities.cameras``)
RENDERING_ENGINES = ('mujoco',)
#: the engines that simulate a floating base (``base.type: floating``, docs/legged.md)
FLOATING_BASE_ENGINES = ('mujoco', 'pybullet')


def check_floating_base(robot: RobotSpec, engine: str) -> None:
    """Refuse a floating-base robot on an engine without one: one ConfigError line."""
    if robot.floating and engine not in FLOATING_BASE_ENGINES:
        raise ConfigError(str(robot.source), 'base.type',
                          f"'fixed' for engine:={engine}: the {engine} engine does not "
                          f"simulate a floating base yet (engines that do: "
                          f"{', '.join(FLOATING_BASE_ENGINES)}; docs/legged.md)", 'floating')


@dataclass(frozen=True)
class SimBridgeConfig(FromMapping):
    """Parameters of ``simreal_sim_bridge`` (the ROS parameters have the same names).

    * ``engine``: the physics engine, one of :data:`ENGINES` (docs/sim_bridge.md: what
      PyBullet approximates).
    * ``timing_mode``: ``realtime`` paces physics to the wall clock; ``lockstep`` advances
      ``steps_per_tick`` physics steps only after a command answered the last published
      state; ``free`` runs as fast as the CPU allows. Lockstep and free imply ``sim_time``.
    * ``publish_clock``: publish ``/clock`` when in sim time (off for the second bridge of
      ``sim2sim``, so that one clock drives the graph).
    * ``publish_rate_hz``: joint_states (and imu/data) rate in sim time.
    * ``lockstep_timeout_s``: 0 waits for the controller forever; > 0 advances anyway after
      that long and counts a missed tick.
    * ``resync_topic`` / ``resync_period_s``: a twin snaps its joints to the latest state on
      ``resync_topic`` (the real robot's joint_states) every ``resync_period_s`` and marks
      each snap on ``~/resync``; the gap report turns that into k-step prediction errors.
    * ``cameras``: render and publish the robot spec's cameras (``NAME/image_raw``,
      ``NAME/camera_info``) at their ``fps_hz`` in stamp time, off the physics thread. Off by
      default for the node itself (a 640x480 software render takes a CPU core); the launch
      turns it on for a robot with cameras (``cameras:=``).
    * ``frame_prefix``: prefix of the frames a floating base's ``odom`` and ``/tf`` name
      (``odom``, the base link): '' for the primary robot, ``twin/`` or ``sim_b/`` for the
      second, as its state publisher's (docs/legged.md).
    * ``push_duration_s``: how long (sim time) a floating base's ``push`` (geometry_msgs/Wrench,
      :mod:`simreal_ros.sim.push`) acts, in (0, 5] s.
    * ``rt_priority`` / ``cpu_affinity`` / ``lock_memory``: real-time scheduling of the physics
      thread (SCHED_FIFO 1..98, 0 = off; CPUs such as "1"; mlockall), see docs/realtime.md.
    """

    SOURCE = 'sim_bridge'

    robot: str = 'simreal_arm'
    engine: str = ENGINES[0]
    scene: str = ''
    overlay: str = ''
    randomization: str = ''
    randomize_on_reset: bool = True
    seed: int = 0
    timing_mode: str = 'realtime'
    publish_rate_hz: float = 200.0
    sim_time: bool = False
    publish_clock: bool = True
    steps_per_tick: int = 0
    lockstep_timeout_s: float = 0.0
    start_paused: bool = False
    spin_wait_us: int = 300
    diagnostics_period_s: float = 1.0
    resync_topic: str = ''
    resync_period_s: float = 0.0
    cameras: bool = False
    frame_prefix: str = ''
    push_duration_s: float = 0.1
    rt_priority: int = 0
    cpu_affinity: str = ''
    lock_memory: bool = False

    def __post_init__(self) -> None:
        src = 'sim_bridge'
        settings_from(self.rt_priority, self.cpu_affinity, src, self.lock_memory)
        r = self.resync_period_s
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not (math.isfinite(r)
                                                                         and r >= 0):
            raise ConfigError(src, 'resync_period_s', 'a number of seconds >= 0 (0: never)', r)
        if r > 0 and not self.resync_topic:
            raise ConfigError(src, 'resync_topic', 'the joint_states topic to re-sync to when '
                              'resync_period_s > 0', self.resync_topic)
        if self.engine not in ENGINES:
            raise ConfigError(src, 'engine', f'one of {ENGINES}', self.engine)
        if self.cameras and self.engine not in RENDERING_ENGINES:
            raise ConfigError(src, 'cameras', f'false: the {self.engine} engine does not render '
                              f'cameras (engines that do: {", ".join(RENDERING_ENGINES)})',
                              self.cameras)
        if self.timing_mode not in TIMING_MODES:
            raise ConfigError(src, 'timing_mode', f'one of {TIMING_MODES}', self.timing_mode)
        for key in ('publish_rate_hz', 'diagnostics_period_s'):
            v = getattr(self, key)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(src, key, 'a number > 0', v)
        d = self.push_duration_s
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not (
                math.isfinite(d) and 0 < d <= MAX_PUSH_S):
            raise ConfigError(src, 'push_duration_s', f'a duration in (0, {MAX_PUSH_S:g}] s', d)
        if self.publish_rate_hz > 10_000:
            raise ConfigError(src, 'publish_rate_hz', 'a rate <= 10000 Hz', self.publish_rate_hz)
        t = self.lockstep_timeout_s
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t)
                                                                         and t >= 0):
            raise ConfigError(src, 'lockstep_timeout_s', 'a number >= 0 (0: wait forever)',
                              self.lockstep_timeout_s)
        for key in ('steps_per_tick', 'spin_wait_us', 'seed'):
            if getattr(self, key) < 0:
                raise ConfigError(src, key, 'an integer >= 0', getattr(self, key))
        if not self.robot:
            raise ConfigError(src, 'robot', 'a robot name or spec path', self.robot)
        p = self.frame_prefix
        if p and (not p.endswith('/') or p.startswith('/') or ' ' in p):
            raise ConfigError(src, 'frame_prefix', "'' or a relative prefix ending in '/' "
                              "(twin/)", p)

    @property
    def rt(self) -> RtSettings:
        """Real-time settings of the physics thread."""
        return settings_from(self.rt_priority, self.cpu_affinity, 'sim_bridge', self.lock_memory)

    @property
    def uses_sim_time(self) -> bool:
        """Whether stamps and /clock follow sim time."""
        return self.sim_time or self.timing_mode != 'realtime'

    def steps_per_publish(self, timestep_s: float) -> int:
        """Physics steps between two published states."""
        if self.steps_per_tick > 0:
            return self.steps_per_tick
        return max(1, int(round(1.0 / (self.publish_rate_hz * timestep_s))))

