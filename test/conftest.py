"""Test fixtures: every ROS process of a test run stays on loopback with its own domain id."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
import sys
import tempfile

import pytest

# Before anything imports rclpy: loopback only, a domain id of this run, a writable log dir.
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
_BASE_DOMAIN = 100 + os.getpid() % 60  # 100..159; each test needing ROS takes the next id
os.environ['ROS_DOMAIN_ID'] = str(_BASE_DOMAIN)
os.environ.setdefault('ROS_LOG_DIR', str(Path(tempfile.gettempdir()) / 'simreal_test_logs'))
os.environ.setdefault('HOME', tempfile.gettempdir())
if sys.prefix != sys.base_prefix:
    os.environ.setdefault('AMENT_PREFIX_PATH', sys.prefix)

_domains = itertools.count(0)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def domain_id() -> int:
    """A ROS domain id no other test of this run uses (0..232, skipping 160..231 clashes)."""
    return (_BASE_DOMAIN + next(_domains)) % 200 + 1


@pytest.fixture
def ros_env(domain_id: int) -> dict[str, str]:
    """Environment for node subprocesses of one test: LOCALHOST discovery, own domain."""
    from simreal_ros.core.netenv import ros_env as make_env
    return make_env(discovery='localhost', domain_id=domain_id)


class RosClient:
    """An in-process rclpy node on a private context, spun in a background thread."""

    def __init__(self, domain: int) -> None:
        import threading

        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        self.context = Context()
        rclpy.init(context=self.context, domain_id=domain)
        self.node = Node('test_client', context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self._running = True
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while self._running and self.context.ok():
            self.executor.spin_once(timeout_sec=0.02)

    def collect(self, msg_type: type, topic: str, qos: object = None,
                callback: object = None) -> list:
        """Subscribe and append every message (with its receive time) to the returned list."""
        import time

        from simreal_ros.ros import qos as contract_qos
        out: list = []

        def on_msg(msg: object) -> None:
            with self.lock:
                out.append((time.monotonic_ns(), msg))
            if callback is not None:
                callback(msg)  # type: ignore[operator]

        self.node.create_subscription(msg_type, topic, on_msg, qos or contract_qos.STATE)
        return out

    def publisher(self, msg_type: type, topic: str) -> object:
        from simreal_ros.ros import qos as contract_qos
        return self.node.create_publisher(msg_type, topic, contract_qos.COMMAND)

    def call(self, srv_type: type, name: str, request: object, timeout: float = 10.0) -> object:
        cli = self.node.create_client(srv_type, name)
        assert cli.wait_for_service(timeout_sec=timeout), f'service {name} not available'
        future = cli.call_async(request)
        import time
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert future.done(), f'service {name} did not answer within {timeout} s'
        return future.result()

    @staticmethod
    def wait_for(predicate: object, timeout: float = 10.0, what: str = 'condition') -> None:
        import time
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if predicate():  # type: ignore[operator]
                    return
            except (AssertionError, LookupError):  # nothing received yet
                pass
            time.sleep(0.01)
        raise AssertionError(f'timed out after {timeout} s waiting for {what}')

    def close(self) -> None:
        import rclpy
        self._running = False
        self.thread.join(timeout=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def ros_client(domain_id: int):
    """A RosClient on this test's domain."""
    client = RosClient(domain_id)
    yield client
    client.close()


class NodeProcess:
    """A node started as a subprocess from a planner NodeSpec; output kept in a log file."""

    def __init__(self, spec: object, env: dict[str, str], directory: Path) -> None:
        import subprocess

        from simreal_ros.bringup.launcher import node_command, write_params_file
        self.spec = spec
        self.log_path = directory / f'{spec.name}_{id(self)}.log'  # type: ignore[attr-defined]
        self._log = open(self.log_path, 'wb')
        cmd = node_command(spec, write_params_file(spec, directory))  # type: ignore[arg-type]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> int:
        import signal
        import subprocess
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def start_node(ros_env: dict[str, str], tmp_path: Path):
    """Start planner NodeSpecs as subprocesses on this test's domain; stopped at teardown."""
    procs: list[NodeProcess] = []

    def start(kind: str, name: str | None = None, namespace: str = '',
              remappings: tuple = (), **parameters: object) -> NodeProcess:
        from simreal_ros.bringup.planner import NodeSpec
        spec = NodeSpec(kind, name or kind, namespace, dict(parameters), tuple(remappings))
        p = NodeProcess(spec, ros_env, tmp_path)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()
