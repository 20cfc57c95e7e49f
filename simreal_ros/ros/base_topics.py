"""A floating base's ground truth on ROS topics: ``odom``, ``foot_contacts`` and ``/tf``.

What a simulated floating base publishes next to its joint states (the sim bridge, once per
published state): ``odom`` (nav_msgs/Odometry: the base's pose in the ``odom`` frame, its twist
in the base frame), ``foot_contacts`` (sensor_msgs/JointState: one name per foot, the normal
contact force in N as ``effort``) and the ``odom`` -> base transform on ``/tf`` at most
``TF_RATE_HZ`` by stamp (a state published every physics step would otherwise put 1000
transforms a second on ``/tf``). Frame names carry the bridge's ``frame_prefix``, so two robots
share one ``/tf``. The messages are built once and refilled in place on every publish.
"""

from __future__ import annotations

from typing import Sequence

from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage

from simreal_ros.core.tf_tree import ODOM, Transform
from simreal_ros.ros import qos
from simreal_ros.ros.tf import tf_message
from simreal_ros.sim.backend import Observation

#: the most often (by stamp) the odom -> base transform goes on /tf (Hz): the state
#: publisher's default rate for the joints' transforms
TF_RATE_HZ = 50.0


class BaseTopics:
    """The publishers of a floating base's ``odom``, ``foot_contacts`` and ``/tf``."""

    def __init__(self, node: Node, feet: Sequence[str], base_frame: str,
                 frame_prefix: str = '') -> None:
        self.pub_odom = node.create_publisher(Odometry, 'odom', qos.STATE)
        self.pub_feet = node.create_publisher(JointState, 'foot_contacts', qos.STATE)
        self.pub_tf = node.create_publisher(TFMessage, '/tf', qos.TF)
        self.odom_frame, self.base_frame = f'{frame_prefix}{ODOM}', f'{frame_prefix}{base_frame}'
        self._odom = Odometry()
        self._odom.header.frame_id = self.odom_frame
        self._odom.child_frame_id = self.base_frame
        self._feet = JointState()
        self._feet.name = list(feet)
        self._tf_period_ns = int(1e9 / TF_RATE_HZ)
        self._tf_last_ns: int | None = None

    def publish(self, obs: Observation, sec: int, nanosec: int) -> None:
        """Publish ``obs``'s base and feet stamped ``sec``/``nanosec``; /tf when one is due."""
        base, forces = obs.base, obs.foot_force
        assert base is not None and forces is not None
        od = self._odom
        od.header.stamp.sec, od.header.stamp.nanosec = sec, nanosec
        p, q = base.position, base.orientation_wxyz
        pose = od.pose.pose
        pose.position.x, pose.position.y, pose.position.z = float(p[0]), float(p[1]), float(p[2])
        o = pose.orientation
        o.w, o.x, o.y, o.z = float(q[0]), float(q[1]), float(q[2]), float(q[3])
        v, w = base.linear_velocity_in_base(), base.angular_velocity
        tw = od.twist.twist
        tw.linear.x, tw.linear.y, tw.linear.z = float(v[0]), float(v[1]), float(v[2])
        tw.angular.x, tw.angular.y, tw.angular.z = float(w[0]), float(w[1]), float(w[2])
        self.pub_odom.publish(od)
        feet = self._feet
        feet.header.stamp.sec, feet.header.stamp.nanosec = sec, nanosec
        feet.effort = forces.tolist()
        self.pub_feet.publish(feet)
        stamp = sec * 1_000_000_000 + nanosec
        last = self._tf_last_ns
        if last is None or not 0 <= stamp - last < self._tf_period_ns:
            self._tf_last_ns = stamp
            t = Transform(self.odom_frame, self.base_frame,
                          (float(p[0]), float(p[1]), float(p[2])),
                          (float(q[0]), float(q[1]), float(q[2]), float(q[3])))
            self.pub_tf.publish(tf_message([t], stamp))
