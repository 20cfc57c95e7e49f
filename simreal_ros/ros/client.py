"""In-process ROS clients for tests, benchmarks and tools.

:class:`RosClient` is an rclpy node on a private context (its own domain id) spun in a
background thread. Waits that run out raise :class:`TimeoutError` naming what was awaited.
The ``simreal`` ROS tools (``policy enable``, ``goal``, ``topic``, ``episode``) run on it, so
a pip install without the ``ros2`` command can do what ``ros2 service call`` / ``topic pub``
/ ``topic list`` / ``topic echo`` do. (Node subprocesses:
:class:`simreal_ros.bringup.launcher.NodeProcess`.)
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

from simreal_ros.ros import qos as contract_qos

#: a collector's subscription: the contract's reliable, volatile STATE profile with depth 1000
#: instead of 10. With depth 10 a collector whose spin thread is starved for one of this host's
#: ~100 ms vCPU-steal bursts loses the oldest of a 100 Hz stream: a CI run missed the one
#: joint_commands message that started a teleop blend (test_leader, the next one was already a
#: 0.176 rad blend step further)
#: how long close() waits for the spinning thread to leave the executor (s)
CLOSE_WAIT_S = 30.0
COLLECT = QoSProfile(depth=1000, history=contract_qos.STATE.history,
                     reliability=contract_qos.STATE.reliability,
                     durability=contract_qos.STATE.durability)


class RosClient:
    """An rclpy node on a private context, spun in a background thread."""

    def __init__(self, domain_id: int | None = None, name: str = 'simreal_client',
                 namespace: str = '') -> None:
        self.context = Context()
        kwargs: dict[str, Any] = {'context': self.context, 'args': []}  # not our argv
        if domain_id is not None:
            kwargs['domain_id'] = domain_id
        rclpy.init(**kwargs)
        self.node = Node(name, namespace=namespace or None, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self._running = True
        self.thread = threading.Thread(target=self._spin, daemon=True, name=name)
        self.thread.start()

    def _spin(self) -> None:
        while self._running and self.context.ok():
            self.executor.spin_once(timeout_sec=0.02)

    def collect(self, msg_type: type, topic: str, qos: QoSProfile | None = None,
                callback: Callable[[Any], None] | None = None) -> list[tuple[int, Any]]:
        """Subscribe; every message lands in the returned list as (receive monotonic ns, msg).

        The default QoS is the contract's reliable, volatile profile with a deep history
        (``COLLECT``), so a collector starved for a while loses nothing.
        """
        out: list[tuple[int, Any]] = []

        def on_msg(msg: Any) -> None:
            with self.lock:
                out.append((time.monotonic_ns(), msg))
            if callback is not None:
                callback(msg)

        self.node.create_subscription(msg_type, topic, on_msg, qos or COLLECT)
        return out

    def publisher(self, msg_type: type, topic: str) -> Any:
        """Create a publisher with the contract's command QoS."""
        return self.node.create_publisher(msg_type, topic, contract_qos.COMMAND)

    def call(self, srv_type: type, name: str, request: Any, timeout: float = 10.0) -> Any:
        """Call a service and return its response; fail after ``timeout``."""
        cli: Any = self.node.create_client(srv_type, name)
        if not cli.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f'service {name} not available within {timeout} s')
        future = cli.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not future.done():
            raise TimeoutError(f'service {name} did not answer within {timeout} s')
        return future.result()

    def wait_for_subscribers(self, publisher: Any, timeout: float = 10.0,
                             count: int = 1) -> None:
        """Wait until ``publisher`` has matched ``count`` subscriptions, else TimeoutError."""
        self.wait_for(lambda: publisher.get_subscription_count() >= count, timeout,
                      f'a subscriber of {publisher.topic_name}')

    def topic_types(self, settle_s: float = 0.3, min_s: float = 0.0, max_s: float = 10.0
                    ) -> dict[str, list[str]]:
        """Return {topic: [types]} of the graph once it has not changed for ``settle_s``.

        Discovery has no "done" event: a graph that stayed the same for ``settle_s`` (and at
        least ``min_s`` after the call) is taken as complete, as ``ros2 topic list`` does with
        its ``--spin-time`` when no daemon runs; a graph still changing after ``max_s`` is
        returned as it is then.
        """
        start = time.monotonic()
        last: dict[str, list[str]] = {}
        since = start
        while True:
            now = time.monotonic()
            graph = {name: sorted(types)
                     for name, types in self.node.get_topic_names_and_types()}
            if graph != last:
                last, since = graph, now
            if now - start >= max_s or (now - since >= settle_s and now - start >= min_s):
                return last
            time.sleep(0.02)

    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 10.0,
                 what: str = 'condition') -> None:
        """Poll ``predicate`` until true, else raise TimeoutError naming ``what``.

        A predicate raises LookupError (IndexError, KeyError, ...) while what it looks at has
        not arrived yet; that counts as false.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except LookupError:
                pass
            time.sleep(0.01)
        raise TimeoutError(f'timed out after {timeout} s waiting for {what}')

    def close(self) -> None:
        """Stop spinning and shut the private context down.

        The node is destroyed only once the spinning thread has left the executor: destroying
        it while ``spin_once`` may be inside it crashed a CI test worker with a segmentation
        fault in ``destroy_node``, after a join that gave up at 2 s (one core busy). A thread still
        inside after ``CLOSE_WAIT_S`` (a callback that never returns) keeps its node; the
        process's exit takes it.
        """
        self._running = False
        self.thread.join(timeout=CLOSE_WAIT_S)
        if self.thread.is_alive():
            return
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
