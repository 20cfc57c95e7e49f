"""run_node's exit codes: only a shutdown's own errors are a clean stop (real rclpy)."""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys
from rclpy.node import Node
from simreal_ros.errors import ConfigError
from simreal_ros.ros.runtime import run_node
"""


def run(ros_env: dict[str, str], body: str) -> subprocess.CompletedProcess[str]:
    """Run ``PRELUDE + body`` (which ends by exiting with run_node's code) in a subprocess."""
    env = {**ros_env, 'PYTHONPATH': str(REPO)}
    return subprocess.run([sys.executable, '-c', PRELUDE + textwrap.dedent(body)], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def test_a_node_that_finishes_exits_0(ros_env):
    r = run(ros_env, """
        class Done(Node):
            def __init__(self):
                super().__init__('done')
                self.create_timer(0.01, self.finish)

            def finish(self):
                self.finished = True

        sys.exit(run_node(Done, []))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''


def test_an_error_raised_after_the_context_was_shut_down_is_not_a_clean_stop(ros_env):
    r = run(ros_env, """
        class Buggy(Node):
            def __init__(self):
                super().__init__('buggy')
                self.create_timer(0.01, self.fail)

            def fail(self):
                self.context.shutdown()  # as Ctrl-C does, then a bug in the same callback
                raise ZeroDivisionError('a bug during shutdown')

        sys.exit(run_node(Buggy, []))
    """)
    assert r.returncode != 0, r.stderr
    assert 'ZeroDivisionError: a bug during shutdown' in r.stderr


TAKE_RACE = ("RuntimeError('Unable to convert call argument \\'0\\' to Python object "
             "(#define PYBIND11_DETAILED_ERROR_MESSAGES or compile in debug mode for details)')")


def test_a_ctrl_c_inside_a_take_is_a_clean_stop(ros_env):
    """A SIGINT landing in take_message() raises pybind11's RuntimeError, then rclpy's signal
    handler shuts the context down (from its own thread, a moment later): exit 0."""
    r = run(ros_env, f"""
        import threading

        class Interrupted(Node):
            def __init__(self):
                super().__init__('interrupted')
                self.create_timer(0.01, self.take)

            def take(self):
                threading.Timer(0.05, self.context.shutdown).start()
                raise {TAKE_RACE}

        sys.exit(run_node(Interrupted, []))
    """)
    assert r.returncode == 0, r.stderr
    assert 'Traceback' not in r.stderr


def test_the_same_runtime_error_without_a_shutdown_is_not_a_clean_stop(ros_env):
    r = run(ros_env, f"""
        class Buggy(Node):
            def __init__(self):
                super().__init__('buggy')
                self.create_timer(0.01, self.take)

            def take(self):
                raise {TAKE_RACE}

        sys.exit(run_node(Buggy, []))
    """)
    assert r.returncode == 1, r.stderr
    assert 'RuntimeError: Unable to convert call argument' in r.stderr


def test_an_error_in_close_makes_the_exit_code_2(ros_env):
    r = run(ros_env, """
        class BadClose(Node):
            def __init__(self):
                super().__init__('bad_close')
                self.create_timer(0.01, self.finish)

            def finish(self):
                self.finished = True

            def close(self):
                raise OSError('port already closed')

        sys.exit(run_node(BadClose, []))
    """)
    assert r.returncode == 2, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith('error: ')]
    assert errors == ["error: shutdown failed: OSError('port already closed')"], r.stderr


def test_a_context_shut_down_under_a_node_being_built_is_a_clean_stop(ros_env):
    """Ctrl-C/SIGTERM during start-up: rclpy's errors about the invalid context exit 0."""
    r = run(ros_env, """
        from std_msgs.msg import String

        class Interrupted(Node):
            def __init__(self):
                super().__init__('interrupted')
                self.context.shutdown()  # what rclpy's signal handler does
                self.create_publisher(String, 'x', 10)

        sys.exit(run_node(Interrupted, []))
    """)
    assert r.returncode == 0, r.stderr
    assert 'Traceback' not in r.stderr


def test_a_stop_while_the_node_imports_a_c_extension_is_a_clean_stop(ros_env):
    """What pybind11 (``import mujoco`` in the node's constructor) raises for a SIGINT that lands
    during the module's init: exit 0, no traceback."""
    r = run(ros_env, """
        def build():
            raise ImportError('initialization failed') from KeyboardInterrupt()

        sys.exit(run_node(build, []))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''


def test_an_import_error_without_a_stop_propagates(ros_env):
    r = run(ros_env, """
        def build():
            import no_such_module_anywhere

        sys.exit(run_node(build, []))
    """)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == \
        "ModuleNotFoundError: No module named 'no_such_module_anywhere'", r.stderr


def test_a_config_error_is_one_line_and_exit_1(ros_env):
    r = run(ros_env, """
        def refuse():
            raise ConfigError('params.yaml', 'rate_hz', 'a number > 0', -1)

        sys.exit(run_node(refuse, []))
    """)
    assert r.returncode == 1, r.stderr
    assert [line for line in r.stderr.splitlines() if line.startswith('error: ')] == \
        r.stderr.strip().splitlines()
    assert 'Traceback' not in r.stderr


def test_a_sigint_while_the_executor_is_built_is_a_clean_stop(ros_env):
    """rclpy's Executor sets what its ``__del__`` reads last in ``__init__``: a SIGINT landing
    in between left a half-built executor whose finalizer printed a traceback (seen on Jazzy: a
    camera driver stopped right after its first log line). Exit 0, nothing on stderr."""
    r = run(ros_env, """
        import os
        import signal
        import time
        from rclpy.executors import SingleThreadedExecutor
        from simreal_ros.ros.runtime import note_stop_requests

        class Interrupted(SingleThreadedExecutor):
            def __init__(self):
                os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode
                time.sleep(0.05)
                super().__init__()

        note_stop_requests()  # as node_main does
        sys.exit(run_node(lambda: Node('interrupted'), [], executor_factory=Interrupted))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''
