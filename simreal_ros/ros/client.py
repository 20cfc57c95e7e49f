"""In-process ROS clients and node subprocesses, for tests, benchmarks and tools.

:class:`RosClient` is an rclpy node on a private context (its own domain id) spun in a
background thread; :class:`NodeProcess` starts a planner :class:`NodeSpec` as a subprocess with
its output in a log file.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import threading
import time
from typing import Any, Callable

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile

from simreal_ros.bringup.launcher import node_command, write_params_file
from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.ros import qos as contract_qos


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
        """Subscribe; every message lands in the returned list as (receive monotonic ns, msg)."""
        out: list[tuple[int, Any]] = []

        def on_msg(msg: Any) -> None:
            with self.lock:
                out.append((time.monotonic_ns(), msg))
            if callback is not None:
                callback(msg)

        self.node.create_subscription(msg_type, topic, on_msg, qos or contract_qos.STATE)
        return out

    def publisher(self, msg_type: type, topic: str) -> Any:
        """Create a publisher with the contract's command QoS."""
        return self.node.create_publisher(msg_type, topic, contract_qos.COMMAND)

    def call(self, srv_type: type, name: str, request: Any, timeout: float = 10.0) -> Any:
        """Call a service and return its response; fail after ``timeout``."""
        cli = self.node.create_client(srv_type, name)
        if not cli.wait_for_service(timeout_sec=timeout):
            raise AssertionError(f'service {name} not available within {timeout} s')
        future = cli.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not future.done():
            raise AssertionError(f'service {name} did not answer within {timeout} s')
        return future.result()

    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 10.0,
                 what: str = 'condition') -> None:
        """Poll ``predicate`` until true; AssertionError/LookupError inside count as false."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except (AssertionError, LookupError):
                pass
            time.sleep(0.01)
        raise AssertionError(f'timed out after {timeout} s waiting for {what}')

    def close(self) -> None:
        """Stop spinning and shut the private context down."""
        self._running = False
        self.thread.join(timeout=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


class NodeProcess:
    """A node started as a subprocess from a NodeSpec; output kept in a log file."""

    def __init__(self, spec: NodeSpec, env: dict[str, str], directory: Path) -> None:
        self.spec = spec
        self.log_path = directory / f'{spec.fqn.strip("/").replace("/", "__")}_{id(self)}.log'
        self._log = open(self.log_path, 'wb')  # noqa: SIM115 - closed in stop()
        cmd = node_command(spec, write_params_file(spec, directory))
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        """Everything the node printed so far."""
        self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait(self, timeout: float = 20.0) -> int:
        """Wait for the node to exit and return its code."""
        return self.proc.wait(timeout=timeout)

    def stop(self) -> int:
        """SIGINT the node (SIGKILL after 10 s) and return its exit code."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
