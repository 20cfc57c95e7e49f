"""Reference for the bridge benchmark: a plain rclpy timer publishing JointState."""

import sys

import rclpy
from rclpy.executors import ExternalShutdownException
from sensor_msgs.msg import JointState

from simreal_ros.core.netenv import apply_to_current_process
from simreal_ros.ros import qos


def main() -> None:
    apply_to_current_process()
    rate = float(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node('plain_timer')
    pub = node.create_publisher(JointState, 'joint_states', qos.STATE)
    msg = JointState(name=[f'j{i}' for i in range(6)], position=[0.0] * 6)

    def tick() -> None:
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)

    node.create_timer(1.0 / rate, tick)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
