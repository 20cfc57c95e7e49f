"""A load generator for recorder tests and benchmarks: N topics at R Hz, counted exactly.

A tool of the benchmarks and tests, not of the stack (so it lives in bench/, not in
``simreal_ros.ros``). ``python bench/_loadgen.py --topics 4 --rate 1000 --duration 10`` waits
until every
topic has ``--subscribers`` subscribers, publishes JointState messages whose header stamp is
the publish time (wall clock) and whose ``position[0]`` is the sequence number, then prints one
JSON line: ``{"sent": {topic: n}, "first_ns": ..., "last_ns": ...}``. ``--image`` adds a
640x480 rgb8 image stream at ``--image-rate``, published from a participant of its own as the
stack's cameras are (:mod:`simreal_ros.ros.image_participant`), or with ``--image-participant
shared`` from the one the JointState topics use. Publishers are reliable with a deep history
(``--depth``), so a subscriber that keeps up receives every message.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time

from simreal_ros.core.timing import PreciseRate


def _publish(pub: object, msg: object) -> int:
    """Publish; while a keep-all history is full (the reader is behind), wait and retry.

    Returns how many times the publisher was blocked.
    """
    from rclpy._rclpy_pybind11 import RCLError
    blocked = 0
    while True:
        try:
            pub.publish(msg)  # type: ignore[attr-defined]
            return blocked
        except RCLError:
            blocked += 1
            if blocked > 10_000:
                raise
            time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    """Publish the load; print what was sent as JSON."""
    ap = argparse.ArgumentParser(prog='loadgen')
    ap.add_argument('--topics', type=int, default=1)
    ap.add_argument('--prefix', default='load/t')
    ap.add_argument('--rate', type=float, default=1000.0)
    ap.add_argument('--duration', type=float, default=1.0)
    ap.add_argument('--joints', type=int, default=6)
    ap.add_argument('--depth', type=int, default=5000, help='history depth; 0 = keep all')
    ap.add_argument('--count', type=int, default=0,
                    help='with --rate 0: publish this many messages as fast as possible')
    ap.add_argument('--subscribers', type=int, default=1)
    ap.add_argument('--settle', type=float, default=1.0, help='wait after subscribers match')
    ap.add_argument('--image', action='store_true')
    ap.add_argument('--image-rate', type=float, default=30.0)
    ap.add_argument('--image-participant', choices=('own', 'shared'), default='own',
                    help="images from a participant of their own (as the stack's cameras) or "
                         "from the JointState topics' one")
    ap.add_argument('--ack-timeout', type=float, default=60.0,
                    help='at the end, wait at most this long [s] for every subscriber to '
                         'acknowledge; a subscriber killed with SIGKILL holds the wait until '
                         "its participant's lease runs out (Fast DDS's 20 s)")
    ap.add_argument('--stamps-file', default='',
                    help='write, for each k, when message k was published on every topic (ns)')
    ns = ap.parse_args(argv)

    from simreal_ros.core.netenv import apply_to_current_process
    apply_to_current_process()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import Image, JointState

    from simreal_ros.ros.image_participant import ImageParticipant
    from simreal_ros.ros.messages import stamp_from_ns

    rclpy.init()
    node = Node('loadgen')
    profile = QoSProfile(depth=ns.depth or 1000,
                         history=HistoryPolicy.KEEP_LAST if ns.depth else HistoryPolicy.KEEP_ALL,
                         reliability=ReliabilityPolicy.RELIABLE)
    names = [f'{ns.prefix}{i}' for i in range(ns.topics)]
    pubs = [node.create_publisher(JointState, n, profile) for n in names]
    own: ImageParticipant | None = None
    img_pub = None
    if ns.image and ns.image_participant == 'own':
        own = ImageParticipant(node)
        img_pub = own.create_publisher(Image, 'load/image_raw', profile)
    elif ns.image:
        img_pub = node.create_publisher(Image, 'load/image_raw', profile)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    stop = threading.Event()

    def _spin() -> None:
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)

    spin = threading.Thread(target=_spin, daemon=True)
    spin.start()
    deadline = time.monotonic() + 60
    all_pubs = pubs + ([img_pub] if img_pub is not None else [])
    while any(p.get_subscription_count() < ns.subscribers for p in all_pubs):
        if time.monotonic() > deadline:
            print('loadgen: no subscriber matched within 60 s', file=sys.stderr)
            stop.set()
            spin.join()
            return 1
        time.sleep(0.01)
    time.sleep(ns.settle)

    msg = JointState()
    msg.name = [f'j{i}' for i in range(ns.joints)]
    msg.position = [0.0] * ns.joints
    msg.velocity = [0.0] * ns.joints
    image = None
    if img_pub is not None:
        image = Image(height=480, width=640, encoding='rgb8', step=640 * 3)
        image.data = bytes(640 * 480 * 3)
    flat_out = ns.rate <= 0
    period_ns = int(1e9 / ns.rate) if not flat_out else 1
    img_every = (max(1, int(round(ns.rate / ns.image_rate))) if image is not None
                 and not flat_out else 0)
    total = ns.count if flat_out else int(round(ns.duration * ns.rate))
    rate = PreciseRate(period_ns, 0)
    sent = [0] * len(pubs)
    stamps: list[int] = []
    frames = 0
    blocked = 0
    first = time.time_ns()
    for k in range(total):
        if not flat_out:
            rate.sleep()
        now = time.time_ns()
        msg.header.stamp = stamp_from_ns(now)
        msg.position[0] = float(k)
        for i, p in enumerate(pubs):
            blocked += _publish(p, msg)
            sent[i] += 1
        stamps.append(time.time_ns())  # when message k was published on every topic
        if image is not None and img_every and k % img_every == 0:
            image.header.stamp = msg.header.stamp
            blocked += _publish(img_pub, image)
            frames += 1
    last = time.time_ns()
    from rclpy.duration import Duration
    acked = all(p.wait_for_all_acked(Duration(nanoseconds=int(ns.ack_timeout * 1e9)))
                for p in all_pubs)
    sent_by_topic = dict(zip(names, sent, strict=True))
    out = {'sent': sent_by_topic, 'first_ns': first, 'last_ns': last,
           'overruns': rate.overruns, 'acked': acked, 'blocked': blocked}
    if image is not None:
        sent_by_topic['load/image_raw'] = frames
    if ns.stamps_file:
        with open(ns.stamps_file, 'w', encoding='utf-8') as f:
            json.dump(stamps, f)
    print(json.dumps(out), flush=True)
    stop.set()
    spin.join()
    executor.shutdown()
    if own is not None:
        own.close()
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
