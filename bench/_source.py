"""Benchmark source: publish JointState on several topics at a fixed rate, stamped at send.

One process serves every measurement of a benchmark run, one command line on stdin each:
``RATE_HZ COUNT TOPIC [TOPIC ...]``. For each it creates the topics' publishers, waits until
every one has a subscriber (then 0.5 s more, for the subscribers' side of the match), sends
COUNT messages at RATE_HZ and prints one JSON line with the achieved send rate; it keeps the
publishers until the next stdin line (any text: the benchmark writes it once its
subscriptions hold every message, or none arrived for a while), then destroys them. End of
stdin ends the process. position[0] is the message index; every topic gets the same bytes
(serialized once, so no topic pays a second serialization), and the order of the topics
alternates from one message to the next, so a direct topic and a relayed one are compared
per message without a systematic head start.

Before 2026-12-07 each measurement started a process of its own and it slept 1 s after its
last message: at a load average of 10-16 a process took 3.7-6.9 s for 500 messages at 1 kHz
(start-up and imports ~1.2 s, discovery 0.2-3.2 s, the 1 s drain), and at a load average of
16 only 3303 of 4000 messages reached the direct topic at 4 kHz within that drain and the
benchmark's 0.5 s after it. Waiting for the acknowledgements instead of the drain took
2.0-2.4 s (readers acknowledge on the writer's periodic heartbeat). With
``SIMREAL_BENCH_RT`` > 0 (``--rt`` benchmarks) its publishing thread (only) runs under
SCHED_FIFO at that priority.
"""

import json
import sys
import time

from _load import helper_rt_from_env
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.serialization import serialize_message
from sensor_msgs.msg import JointState

from simreal_ros.core.netenv import apply_to_current_process
from simreal_ros.core.timing import PreciseRate

DEEP = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
#: how long a command waits for its topics' subscribers
MATCH_TIMEOUT_S = 20.0


def send(node: Node, rate: float, count: int, topics: list[str]) -> dict[str, float]:
    """Publish ``count`` messages on ``topics`` at ``rate``; return the achieved rate.

    The publishers stay until the caller destroys them (returned through ``node``).
    """
    pubs = [node.create_publisher(JointState, t, DEEP) for t in topics]
    deadline = time.monotonic() + MATCH_TIMEOUT_S
    while time.monotonic() < deadline and any(p.get_subscription_count() == 0 for p in pubs):
        time.sleep(0.05)
    time.sleep(0.5)
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
    return {'sent': count, 'seconds': elapsed,
            'rate_hz': count / elapsed if elapsed > 0 else 0.0}


def main() -> None:
    apply_to_current_process()
    rclpy.init()
    node = rclpy.create_node('bench_source')
    sys.setswitchinterval(0.0002)
    helper_rt_from_env()  # --rt: this publishing thread only, after rclpy's threads exist
    for line in sys.stdin:
        rate, count, *topics = line.split()
        before = set(node.publishers)
        print(json.dumps(send(node, float(rate), int(count), topics)), flush=True)
        sys.stdin.readline()  # the benchmark has every message (or EOF): the publishers go
        for pub in set(node.publishers) - before:
            node.destroy_publisher(pub)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
