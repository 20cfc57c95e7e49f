"""An in-process observer of the topic contract, used by ``simreal demo``."""

from __future__ import annotations

from collections import defaultdict
import time

from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import Imu, JointState

from simreal_ros.ros import messages, qos
from simreal_ros.ros.client import RosClient


class TopicMonitor(RosClient):
    """Collect joint_states / joint_commands / imu / diagnostics in a background thread.

    joint_commands is subscribed only once the first joint_states message has arrived: the
    demo's excitation waits for this subscriber before it starts, so it starts only after the
    monitor receives the states. Subscribed up front, the monitor matched the excitation while
    it had not yet discovered the bridge: in 3 of 6 demo runs of 3 s (Kilted, idle host) the
    bridge's publisher was seen 3.9 s after the start, and 5-21 of 1200 states were observed.
    """

    def __init__(self, namespace: str = '', domain_id: int | None = None) -> None:
        super().__init__(domain_id, 'simreal_monitor', namespace)
        self.states: list[tuple[int, list[float]]] = []
        self.commands: list[tuple[int, list[str], list[float]]] = []
        self.counts: dict[str, int] = defaultdict(int)
        self.first_ns: dict[str, int] = {}
        self.last_ns: dict[str, int] = {}
        self.diagnostics: dict[str, dict[str, str]] = {}
        n = self.node
        n.create_subscription(JointState, 'joint_states', self._on_state, qos.STATE)
        self._commands_subscribed = False
        n.create_subscription(Imu, 'imu/data', lambda _m: self._count('imu/data'), qos.STATE)
        n.create_subscription(DiagnosticArray, '/diagnostics', self._on_diag, qos.DIAGNOSTICS)

    def _count(self, topic: str) -> None:
        now = time.monotonic_ns()
        with self.lock:
            self.counts[topic] += 1
            self.first_ns.setdefault(topic, now)
            self.last_ns[topic] = now

    def _on_state(self, msg: JointState) -> None:
        if not self._commands_subscribed:
            self._commands_subscribed = True
            self.node.create_subscription(JointState, 'joint_commands', self._on_command,
                                          qos.COMMAND)
        self._count('joint_states')
        with self.lock:
            self.states.append((messages.stamp_to_ns(msg.header.stamp), list(msg.position)))

    def _on_command(self, msg: JointState) -> None:
        self._count('joint_commands')
        with self.lock:
            self.commands.append((messages.stamp_to_ns(msg.header.stamp), list(msg.name),
                                  list(msg.position)))

    def _on_diag(self, msg: DiagnosticArray) -> None:
        with self.lock:
            for st in msg.status:
                self.diagnostics[st.name] = {kv.key: kv.value for kv in st.values}

    def rate_hz(self, topic: str) -> float:
        """Mean receive rate of ``topic`` (wall clock)."""
        with self.lock:
            n = self.counts.get(topic, 0)
            if n < 2:
                return 0.0
            return (n - 1) * 1e9 / max(1, self.last_ns[topic] - self.first_ns[topic])
