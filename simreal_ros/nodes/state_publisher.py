"""``simreal_state_publisher``: ``/robot_description``, ``/tf_static`` and ``/tf`` of one robot.

What ``robot_state_publisher`` does, on every backend alike (the planner starts one next to
every node that publishes ``joint_states``):

* ``robot_description`` (std_msgs/String, latched): the robot's URDF text, read from the robot
  spec's ``urdf`` file;
* ``/tf_static`` (latched, one message): ``world`` -> base link (a floating base: ``world`` ->
  ``odom``, the bridge publishing ``odom`` -> base link), every fixed joint, and each camera of
  the spec (``cameras:``) as ``<parent>`` -> ``<name>_optical_frame``;
* ``/tf``: parent -> child of every moving joint for a ``joint_states`` message, stamped with
  that message's stamp (the time of measurement), at most ``max_rate_hz`` by stamp.

The kinematics are :mod:`simreal_ros.core.tf_tree`. Joints that ``joint_states`` does not
name keep their last published transform; a state with NaN positions is skipped and counted.
"""

from __future__ import annotations

import math
import threading

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from simreal_ros.core.robot import load_robot
from simreal_ros.core.tf_config import StatePublisherConfig
from simreal_ros.core.tf_tree import TfTree, parse_urdf
from simreal_ros.errors import ConfigError
from simreal_ros.ros import messages, qos
from simreal_ros.ros.params import declare_dataclass
from simreal_ros.ros.runtime import run_node
from simreal_ros.ros.tf import tf_message


class StatePublisher(Node):
    """Publish a robot's URDF and its transform tree from its joint states."""

    def __init__(self) -> None:
        super().__init__('state_publisher')
        self.cfg = StatePublisherConfig.from_mapping(
            declare_dataclass(self, StatePublisherConfig),
            f'{self.get_fully_qualified_name()} params')
        self.robot = load_robot(self.cfg.robot)
        try:
            urdf = self.robot.urdf.read_text()
        except OSError as exc:
            raise ConfigError(str(self.robot.source), 'urdf', 'a readable URDF file',
                              f'{self.robot.urdf} ({exc.strerror})') from None
        self.tree = TfTree(parse_urdf(urdf, self.robot.urdf), self.robot.base_frame,
                           getattr(self.robot, 'cameras', ()), self.cfg.frame_prefix,
                           floating=self.robot.floating)
        self.period_ns = (int(1e9 / self.cfg.max_rate_hz) if self.cfg.max_rate_hz > 0 else 0)
        self.last_ns: int | None = None
        self.lock = threading.Lock()
        self.stats = {'states_in': 0, 'tf_out': 0, 'states_nan': 0}
        self.pub_description = self.create_publisher(String, 'robot_description', qos.LATCHED)
        self.pub_static = self.create_publisher(TFMessage, '/tf_static', qos.LATCHED)
        self.pub_tf = self.create_publisher(TFMessage, '/tf', qos.TF)
        self.pub_diag = self.create_publisher(DiagnosticArray, '/diagnostics', qos.DIAGNOSTICS)
        self.pub_description.publish(String(data=urdf))
        self.pub_static.publish(tf_message(self.tree.static(),
                                           self.get_clock().now().nanoseconds))
        self.create_subscription(JointState, 'joint_states', self._on_state, qos.STATE)
        self.create_timer(1.0, self._publish_diagnostics)
        self.get_logger().info(f'{self.robot.name}: {len(self.tree.static())} static and '
                               f'{len(self.tree.moving_joints)} moving transforms, frame '
                               f'prefix {self.cfg.frame_prefix!r}')

    def _on_state(self, msg: JointState) -> None:
        stamp = messages.stamp_to_ns(msg.header.stamp)
        with self.lock:
            self.stats['states_in'] += 1
            if (self.last_ns is not None and self.period_ns
                    and 0 <= stamp - self.last_ns < self.period_ns):
                return
            if len(msg.position) != len(msg.name) or not all(map(math.isfinite, msg.position)):
                self.stats['states_nan'] += 1
                return
            self.last_ns = stamp
            self.stats['tf_out'] += 1
        positions = dict(zip(msg.name, msg.position, strict=True))
        self.pub_tf.publish(tf_message(self.tree.moving(positions), stamp))

    def _publish_diagnostics(self) -> None:
        with self.lock:
            st = dict(self.stats)
        level, text = ('ok', 'publishing') if st['tf_out'] else ('warn', 'waiting for '
                                                                  'joint_states')
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        arr.status = [messages.diagnostic_status(
            f'{self.get_fully_qualified_name()}: state publisher', self.robot.name, level, text,
            {**st, 'frame_prefix': self.cfg.frame_prefix})]
        self.pub_diag.publish(arr)


def main(args: list[str] | None = None) -> int:
    """Run the state publisher node."""
    return run_node(StatePublisher, args)


if __name__ == '__main__':
    raise SystemExit(main())
