"""Benchmark source: publish JointState on several topics at a fixed rate, stamped at send.

Usage: _source.py RATE_HZ COUNT TOPIC [TOPIC ...]. position[0] is the message index; every
topic gets the same message, so a direct topic and a relayed one are compared per message.
Exits after COUNT messages (and a short drain).
"""

import sys
import time

import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from simreal_ros.core.netenv import apply_to_current_process
from simreal_ros.core.timing import PreciseRate


def main() -> None:
    apply_to_current_process()
    rate, count, topics = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
    rclpy.init()
    node = rclpy.create_node('bench_source')
    deep = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    pubs = [node.create_publisher(JointState, t, deep) for t in topics]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(p.get_subscription_count() == 0 for p in pubs):
        time.sleep(0.05)
    time.sleep(0.5)
    sys.setswitchinterval(0.0002)
    msg = JointState(name=[f'j{i}' for i in range(6)], position=[0.0] * 6)
    pacer = PreciseRate(int(1e9 / rate))
    for i in range(count):
        pacer.sleep()
        msg.position[0] = float(i)
        t = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = t // 1_000_000_000, t % 1_000_000_000
        for p in pubs:
            p.publish(msg)
    time.sleep(1.0)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
