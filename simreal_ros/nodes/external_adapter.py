"""``simreal_external_adapter``: a robot that already has a ROS 2 driver, mapped onto the contract.

For ``backend:=real real_driver:=external``: an existing driver (typically ros2_control's
``joint_state_broadcaster`` plus a ``forward_position_controller`` or a
``joint_trajectory_controller``) keeps running, and this node translates:

* ``source_states`` (any joint order, extra joints ignored) -> ``joint_states`` in robot order,
  with the source's stamp (its time of measurement);
* ``joint_commands`` (validated and clamped like every backend) -> ``command_topic``, either a
  ``std_msgs/Float64MultiArray`` in ``command_joints`` order or a one-point
  ``trajectory_msgs/JointTrajectory`` reaching the target after ``trajectory_time_s``.

A command that names only some joints is completed from the last target, or, before the
first target, from the last complete source state. Until both are missing (no complete state
received yet, no full command sent yet) such a partial command is rejected with a warning: the
adapter does not know where the other joints are, and filling in home positions would send
them there.

The adapter does not subscribe ``forward_position_controller/commands`` itself: in this mode
that topic belongs to the existing driver.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from builtin_interfaces.msg import Duration
from diagnostic_msgs.msg import DiagnosticArray
import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from simreal_ros.core.commands import CommandIntake, JointTarget
from simreal_ros.core.robot import load_robot
from simreal_ros.core.timing import PeriodStats
from simreal_ros.errors import CommandError, ConfigError
from simreal_ros.hardware.driver_config import ExternalAdapterConfig
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node

STALE_S = 1.0


class ExternalAdapter(Node):
    """Translate an existing driver's topics to and from the contract."""

    def __init__(self) -> None:
        super().__init__('external_adapter')
        self.cfg = ExternalAdapterConfig.from_mapping(
            declare_dataclass(self, ExternalAdapterConfig),
            f'{self.get_fully_qualified_name()} params')
        cfg = self.cfg
        self.robot = load_robot(cfg.robot)
        self.names = self.robot.joint_names
        self.command_joints = ([n.strip() for n in cfg.command_joints.split(',') if n.strip()]
                               or list(self.names))
        unknown = sorted(set(self.command_joints) - set(self.names))
        if unknown or len(set(self.command_joints)) != len(self.command_joints):
            raise ConfigError('external_adapter', 'command_joints',
                              f'a comma-separated list of distinct joints of '
                              f'{self.robot.name} {self.names}', cfg.command_joints)
        self.command_index = [self.names.index(n) for n in self.command_joints]
        self.intake = CommandIntake(self.robot, self._log_rejection)
        self.lock = threading.Lock()
        self.last_target: JointTarget | None = None
        self.last_position: np.ndarray | None = None  # the last complete source state
        self.last_state_mono = 0.0
        self.stats: dict[str, Any] = {'states_in': 0, 'states_incomplete': 0,
                                      'last_incomplete': '', 'commands_out': 0}
        self.state_stats = PeriodStats(5_000_000)
        self.pub_state = self.create_publisher(JointState, 'joint_states', qos.STATE)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        if cfg.command_mode == 'forward_position':
            self.pub_cmd = self.create_publisher(Float64MultiArray, cfg.command_topic,
                                                 qos.COMMAND)
        else:
            self.pub_cmd = self.create_publisher(JointTrajectory, cfg.command_topic,
                                                 qos.COMMAND)
        self.create_subscription(JointState, cfg.source_states, self._on_source, qos.STATE)
        self.create_subscription(JointState, 'joint_commands', self._on_command, qos.COMMAND)
        self.create_timer(cfg.diagnostics_period_s, self._publish_diagnostics)
        self.get_logger().info(f'{cfg.source_states} -> joint_states; joint_commands -> '
                               f'{cfg.command_topic} ({cfg.command_mode})')

    def _on_source(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        missing = [n for n in self.names if n not in index]
        if missing or len(msg.position) != len(msg.name):
            with self.lock:
                self.stats['states_incomplete'] += 1
                self.stats['last_incomplete'] = (f'missing joints {missing}' if missing else
                                                 f'{len(msg.name)} names, '
                                                 f'{len(msg.position)} positions')
            return
        order = [index[n] for n in self.names]

        def pick(values: Any) -> list[float]:
            return [float(values[i]) for i in order] if len(values) == len(msg.name) else []

        out = messages.joint_state(self.names, messages.stamp_to_ns(msg.header.stamp),
                                   pick(msg.position), pick(msg.velocity), pick(msg.effort))
        self.pub_state.publish(out)
        with self.lock:
            self.last_position = np.array(out.position)
            self.last_state_mono = time.monotonic()
            self.stats['states_in'] += 1
        self.state_stats.tick(time.monotonic_ns())

    def _on_command(self, msg: JointState) -> None:
        names = list(msg.name)

        def previous() -> JointTarget:
            if self.last_target is not None:
                return self.last_target
            if self.last_position is not None:
                return JointTarget.hold(self.last_position)
            if not names or set(names) >= set(self.names):
                return JointTarget.hold(self.robot.home)  # every joint is overwritten
            raise CommandError(
                f'partial command for {names} before the first complete state on '
                f'{self.cfg.source_states}: the positions of the other joints are '
                f'unknown; send every joint of {self.robot.name} or wait for the joint '
                f'states of the existing driver')

        with self.lock:
            target = self.intake.merge(previous, names, msg.position, msg.velocity,
                                       msg.effort, messages.stamp_to_ns(msg.header.stamp))
            if target is None:
                return
            self.last_target = self.intake.accept(target)
        positions = [float(target.position[i]) for i in self.command_index]
        if self.cfg.command_mode == 'forward_position':
            self.pub_cmd.publish(Float64MultiArray(data=positions))
        else:
            traj = JointTrajectory()
            traj.header.stamp = msg.header.stamp
            traj.joint_names = list(self.command_joints)
            point = JointTrajectoryPoint()
            point.positions = positions
            if len(msg.velocity):
                point.velocities = [float(target.velocity[i]) for i in self.command_index]
            sec, nsec = divmod(int(self.cfg.trajectory_time_s * 1e9), 1_000_000_000)
            point.time_from_start = Duration(sec=sec, nanosec=nsec)
            traj.points = [point]
            self.pub_cmd.publish(traj)
        with self.lock:
            self.stats['commands_out'] += 1

    def _log_rejection(self, exc: Exception) -> None:
        self.get_logger().warning(f'rejected joint command: {exc}', throttle_duration_sec=1.0)

    def _publish_diagnostics(self) -> None:
        with self.lock:
            # the adapter's own names for the intake's counters (it clamps, but reports no
            # clamp count, and has no rejection window)
            st = dict(self.stats)
            st['commands_in'] = self.intake.received
            st['commands_rejected'] = self.intake.rejected
            st['last_rejection'] = self.intake.last_rejection
            age = time.monotonic() - self.last_state_mono if self.last_state_mono else None
        level, message = 'ok', 'relaying'
        if st['states_incomplete'] and not st['states_in']:
            level, message = 'error', f'{self.cfg.source_states}: {st["last_incomplete"]}'
        elif age is None:
            level, message = 'warn', f'waiting for {self.cfg.source_states}'
        elif age > STALE_S:
            level, message = 'error', f'{self.cfg.source_states} silent for {age:.1f} s'
        values = {**st, 'source_states': self.cfg.source_states,
                  'command_topic': self.cfg.command_topic,
                  **{f'state_{k}': v for k, v in self.state_stats.summary().items()}}
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: external adapter', self.robot.name, level,
            message, values)]
        self.pub_diag.publish(arr)


def main(args: list[str] | None = None) -> int:
    """Run the external adapter node."""
    return run_node(ExternalAdapter, args)


if __name__ == '__main__':
    raise SystemExit(main())
