"""Settings of the hardware driver nodes (Dynamixel bus, external adapter), without ROS."""

from __future__ import annotations

from dataclasses import dataclass
import math

from simreal_ros.core.realtime import RtSettings, settings_from
from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError

WATCHDOG_ACTIONS = ('hold', 'torque_off')
EXTERNAL_COMMAND_MODES = ('forward_position', 'trajectory')
#: the unit of the servos' Bus Watchdog register (XM430 control table address 98)
BUS_WATCHDOG_UNIT_MS = 20.0



def _positive(src: str, obj: object, *keys: str) -> None:
    for key in keys:
        v = getattr(obj, key)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ConfigError(src, key, 'a number > 0', v)


@dataclass(frozen=True)
class DriverConfig(FromMapping):
    """Parameters of ``simreal_dynamixel_driver`` (the ROS parameters have the same names).

    * ``port``, ``baud``: the serial device and its rate (0: ``bus.baud`` of the robot spec).
    * ``rate_hz``: bus cycles per second (one sync read + one sync write each); every cycle
      whose read succeeded publishes one ``joint_states``.
    * ``health_every``: read hardware error status and temperature every this many cycles.
    * ``command_timeout_s``: after the first command, this long without one triggers the
      watchdog: ``watchdog`` = ``hold`` (freeze the goal where it is) or ``torque_off``.
    * ``goal_rate_limit``: the goal moves at most ``velocity limit * dt`` per cycle (a jump
      in the commands becomes a ramp at the joint's velocity limit). Without it the servos'
      Profile Velocity is set to the velocity limit instead, a guard on the servo side.
    * ``reset_speed``: speed (rad/s) of the move to home on ``~/reset``.
    * ``return_delay_us``: Return Delay Time written at configure (0 = answer at once).
    * ``latency_timer_ms``: the adapter's latency timer, used by the SDK's packet timeout.
    * ``reconnect_min_s``/``reconnect_max_s``: back-off between reconnection attempts.
    * ``give_up_after_s``: with no state read for this long (port gone, servos silent), the
      bus is taken as dead for good: FATAL, torque off attempted, exit 2, so a supervisor can
      act (default 10 s; 0 = keep reconnecting forever).
    * ``bus_watchdog_ms``: the servos' own Bus Watchdog (register 98, 20 ms units, rounded
      up; 0 = off): a servo that hears nothing from the driver for this long stops and holds
      where it is, refusing goals until the driver clears it, so a dead driver (SIGKILL, a
      crash, a pulled cable) does not leave the arm following its last goal. At least 4 bus
      cycles, at most 2540 ms.
    * ``startup_timeout_s``: how long start-up pings servos that did not answer yet.
    * ``reboot_on_error``: servos in a hardware-error state (overload, overheating, voltage)
      are sent REBOOT at configure and on ``~/reset`` instead of failing start-up (or the
      reset) with the servos and bits named.
    * ``rt_priority`` / ``cpu_affinity`` / ``lock_memory``: real-time scheduling of the bus
      thread (SCHED_FIFO 1..98, 0 = off; CPUs such as "1"; mlockall), see docs/realtime.md.
    * ``calibration``: a joint calibration file (``simreal calibrate``, docs/calibration.md;
      '' = none): the driver uses the calibrated spec (zero, direction, limits from it) and,
      at connect, checks every servo's Homing Offset against it and writes those that differ.
    * ``gravity_ff``: gravity feed-forward on every goal written, as a fraction (0 = off, 1 =
      the whole modelled sag): the goal is offset by ``gravity_ff * tau_hold(goal) / kp``
      from the robot model (:mod:`simreal_ros.hardware.gravity_ff`), so the P/D position loop
      holds the commanded pose instead of sagging below it.
    * ``sysfs_root``: where the kernel's sysfs is (the adapter's ``latency_timer`` is read
      below it; tests point it at a fake tree).
    """

    SOURCE = 'dynamixel_driver'

    robot: str = 'simreal_arm'
    port: str = ''
    baud: int = 0
    rate_hz: float = 250.0
    health_every: int = 25
    command_timeout_s: float = 0.5
    watchdog: str = 'hold'
    goal_rate_limit: bool = True
    reset_speed: float = 0.5
    return_delay_us: int = 0
    latency_timer_ms: float = 16.0
    reconnect_min_s: float = 0.05
    reconnect_max_s: float = 0.4
    give_up_after_s: float = 10.0
    bus_watchdog_ms: float = 200.0
    diagnostics_period_s: float = 1.0
    startup_timeout_s: float = 2.0
    reboot_on_error: bool = False
    rt_priority: int = 0
    cpu_affinity: str = ''
    lock_memory: bool = False
    sysfs_root: str = '/sys'
    calibration: str = ''
    gravity_ff: float = 0.0

    def __post_init__(self) -> None:
        src = 'dynamixel_driver'
        settings_from(self.rt_priority, self.cpu_affinity, src, self.lock_memory)
        if not self.port:
            raise ConfigError(src, 'port', 'the serial device of the bus (e.g. /dev/ttyUSB0 '
                              'or the link printed by simreal emulate)', self.port)
        if self.watchdog not in WATCHDOG_ACTIONS:
            raise ConfigError(src, 'watchdog', f'one of {WATCHDOG_ACTIONS}', self.watchdog)
        _positive(src, self, 'rate_hz', 'command_timeout_s', 'reset_speed', 'latency_timer_ms',
                  'reconnect_min_s', 'reconnect_max_s', 'diagnostics_period_s',
                  'startup_timeout_s')
        if self.rate_hz > 2000:
            raise ConfigError(src, 'rate_hz', 'a rate <= 2000 Hz', self.rate_hz)
        if self.reconnect_max_s < self.reconnect_min_s:
            raise ConfigError(src, 'reconnect_max_s', f'>= reconnect_min_s '
                              f'({self.reconnect_min_s})', self.reconnect_max_s)
        if not (math.isfinite(self.give_up_after_s) and self.give_up_after_s >= 0):
            raise ConfigError(src, 'give_up_after_s', 'a time >= 0 s (0 = never give up)',
                              self.give_up_after_s)
        if not (math.isfinite(self.bus_watchdog_ms) and (
                self.bus_watchdog_ms == 0 or 4000.0 / self.rate_hz <= self.bus_watchdog_ms
                <= 127 * BUS_WATCHDOG_UNIT_MS)):
            raise ConfigError(src, 'bus_watchdog_ms', f'0 (off) or a time in ms from 4 bus '
                              f'cycles ({4000.0 / self.rate_hz:g} ms) to '
                              f'{127 * BUS_WATCHDOG_UNIT_MS:g} ms', self.bus_watchdog_ms)
        if self.health_every < 1:
            raise ConfigError(src, 'health_every', 'an integer >= 1', self.health_every)
        if not 0 <= self.return_delay_us <= 508:
            raise ConfigError(src, 'return_delay_us', 'an integer in [0, 508]',
                              self.return_delay_us)
        if not (isinstance(self.gravity_ff, (int, float)) and 0.0 <= self.gravity_ff <= 1.0):
            raise ConfigError(src, 'gravity_ff', 'a fraction in [0, 1] (0 = off)',
                              self.gravity_ff)
        if self.baud < 0:
            raise ConfigError(src, 'baud', '0 (from the robot spec) or a baud rate', self.baud)

    @property
    def bus_watchdog_units(self) -> int:
        """Bus Watchdog register value: ``bus_watchdog_ms`` in 20 ms units, rounded up."""
        return math.ceil(self.bus_watchdog_ms / BUS_WATCHDOG_UNIT_MS - 1e-9)

    @property
    def rt(self) -> RtSettings:
        """Real-time settings of the bus thread."""
        return settings_from(self.rt_priority, self.cpu_affinity, 'dynamixel_driver',
                             self.lock_memory)



@dataclass(frozen=True)
class ExternalAdapterConfig(FromMapping):
    """Parameters of ``simreal_external_adapter``.

    The adapter maps an existing ROS 2 driver (ros2_control) onto the contract:
    ``source_states`` (its ``sensor_msgs/JointState``, any joint order, extra joints ignored)
    -> ``joint_states`` in robot order; ``joint_commands`` -> ``command_topic`` as a
    ``std_msgs/Float64MultiArray`` in ``command_joints`` order (``forward_position``) or as a
    one-point ``trajectory_msgs/JointTrajectory`` reaching the target after
    ``trajectory_time_s`` (``trajectory``).
    """

    SOURCE = 'external_adapter'

    robot: str = 'simreal_arm'
    source_states: str = '/joint_states_raw'
    command_mode: str = 'forward_position'
    command_topic: str = '/forward_position_controller/commands'
    command_joints: str = ''
    trajectory_time_s: float = 0.02
    diagnostics_period_s: float = 1.0

    def __post_init__(self) -> None:
        src = 'external_adapter'
        if self.command_mode not in EXTERNAL_COMMAND_MODES:
            raise ConfigError(src, 'command_mode', f'one of {EXTERNAL_COMMAND_MODES}',
                              self.command_mode)
        _positive(src, self, 'trajectory_time_s', 'diagnostics_period_s')
        for key in ('source_states', 'command_topic'):
            if not getattr(self, key):
                raise ConfigError(src, key, 'a topic name', getattr(self, key))

