"""Benchmark source: publish JointState on several topics at a fixed rate, stamped at send.

Usage: _source.py RATE_HZ COUNT TOPIC [TOPIC ...]. position[0] is the message index; every
topic gets the same bytes (serialized once, so no topic pays a second serialization), and the
order of the topics alternates from one message to the next, so a direct topic and a relayed
one are compared per message without a systematic head start. Prints one JSON line with the
achieved send rate and exits after COUNT messages (and a short drain). With
``SIMREAL_BENCH_RT`` > 0 (``--rt`` benchmarks) its publishing thread (only) runs under
SCHED_FIFO at that priority.
"""

import json
import sys
import time

from _load import helper_rt_from_env
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
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
    helper_rt_from_env()  # --rt: this publishing thread only, after rclpy's threads exist
    msg = JointState(name=[f'j{i}' for i in range(6)], position=[0.0] * 6)
    pacer = PreciseRate(int(1e9 / rate))
    reverse = pubs[::-1]
    start = time.monotonic()
    for i in range(count):
        pacer.sleep()
        msg.position[0] = float(i)
        t = time.time_ns()
        msg.header.stamp.sec, msg.header.stamp.nanosec = t // 1_000_000_000, t % 1_000_000_000
        data = serialize_message(msg)
        for p in (reverse if i % 2 else pubs):
            p.publish(data)
    elapsed = time.monotonic() - start
    print(json.dumps({'sent': count, 'seconds': elapsed,
                      'rate_hz': count / elapsed if elapsed > 0 else 0.0}), flush=True)
    time.sleep(1.0)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
