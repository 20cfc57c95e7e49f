"""The bound on a node's middleware teardown: a teardown stuck in C with the GIL held still ends.

``ctypes.PyDLL`` calls keep the GIL, so ``PyDLL(None).sleep(600)`` blocks like Fast DDS's
teardown deadlock does: no Python thread or signal handler runs again. The subprocess timeout
(60 s) is far below the 600 s block: a process that exits at all was ended by the watchdog.
"""

from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[2]
BLOCK = 'ctypes.PyDLL(None).sleep(600)'


def run(tmp_path: Path, body: str, env: dict | None = None) -> subprocess.CompletedProcess:
    (tmp_path / 'stuck.py').write_text(body)
    return subprocess.run([sys.executable, str(tmp_path / 'stuck.py')], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_last_arm_sets_the_code_and_the_stacks_come_first(tmp_path):
    r = run(tmp_path, 'import ctypes\nfrom simreal_ros.ros import teardown\n'
                      'assert teardown.arm(4, 30.0)\nassert teardown.arm(6, 0.5)\n'
                      f'{BLOCK}\n')
    assert r.returncode == 6, r.stderr
    assert r.stderr.startswith('Timeout (0:00:00.200000)!\n'), r.stderr
    assert 'stuck.py", line 5 in <module>' in r.stderr


def test_a_process_that_finishes_in_time_exits_with_its_own_code(tmp_path):
    r = run(tmp_path, 'import sys\nfrom simreal_ros.ros import teardown\n'
                      'teardown.arm(0, 5.0)\nsys.exit(7)\n')
    assert r.returncode == 7
    assert r.stderr == ''


@pytest.mark.ros
@pytest.mark.parametrize('code', [0, 3])
def test_a_node_whose_destroy_node_deadlocks_exits_with_the_nodes_code(tmp_path, ros_env, code):
    body = f"""import ctypes
from rclpy.node import Node
from simreal_ros.ros.runtime import run_node


class Stuck(Node):
    def __init__(self):
        super().__init__('stuck')
        self.finished, self.exit_code = True, {code}

    def close(self):
        print('closed', flush=True)

    def destroy_node(self):
        {BLOCK}


raise SystemExit(run_node(Stuck, []))
"""
    r = run(tmp_path, body, env=ros_env)
    assert r.returncode == code, r.stdout + r.stderr
    assert r.stdout == 'closed\n'
    assert r.stderr.count('Timeout (') == 1, r.stderr
    assert 'in destroy_node' in r.stderr and 'in run_node' in r.stderr, r.stderr


@pytest.mark.ros
def test_after_its_teardown_a_node_exits_finalizing_nothing(tmp_path, ros_env):
    """Neither atexit handlers nor object finalizers run after run_node's teardown (both would
    print), and what the node printed is not lost."""
    body = """import atexit
from rclpy.node import Node
from simreal_ros.ros.runtime import run_node


class Finalized:
    def __del__(self):
        print('finalized', flush=True)


KEEP = Finalized()
atexit.register(print, 'atexit ran')


class Done(Node):
    def __init__(self):
        super().__init__('done')
        self.finished, self.exit_code = True, 5
        print('last words', end='')


run_node(Done, [])
print('after run_node')
"""
    r = run(tmp_path, body, env=ros_env)
    assert r.returncode == 5, r.stderr
    assert r.stdout == 'last words'
    assert r.stderr == ''
