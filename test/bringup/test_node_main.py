"""How the launcher starts a node: ``python -m simreal_ros.bringup.node_main <module>``."""

import os
from pathlib import Path
import signal
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_module(tmp_path: Path, body: str, base_env: dict | None = None
               ) -> subprocess.CompletedProcess:
    (tmp_path / 'some_node.py').write_text(body)
    env = dict(base_env or os.environ, PYTHONPATH=f'{tmp_path}{os.pathsep}{REPO}')
    return subprocess.run([sys.executable, '-m', 'simreal_ros.bringup.node_main', 'some_node',
                           '--ros-args'], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


def test_the_node_modules_main_gets_the_arguments_and_its_code_is_the_exit_code(tmp_path):
    r = run_module(tmp_path, 'def main(args):\n    print(args)\n    return 3\n')
    assert r.returncode == 3
    assert r.stdout == "['some_node', '--ros-args']\n"


def test_a_node_killed_by_a_segfault_prints_where_every_thread_was(tmp_path):
    r = run_module(tmp_path, 'import ctypes\n\n\ndef main(args):\n'
                             '    return ctypes.string_at(0)\n')
    assert r.returncode == -signal.SIGSEGV
    assert 'Fatal Python error: Segmentation fault' in r.stderr
    assert 'some_node.py", line 5 in main' in r.stderr, r.stderr


def test_a_stop_during_a_c_extensions_import_is_a_clean_stop(tmp_path):
    """pybind11 turns a SIGINT during a module's init into ImportError from KeyboardInterrupt
    (seen with ``import mujoco`` in a launch stopped during start-up): exit 0, no traceback."""
    r = run_module(tmp_path, "raise ImportError('initialization failed') "
                             'from KeyboardInterrupt()\n')
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''


def test_a_stop_inside_code_a_c_extension_runs_is_a_clean_stop(tmp_path):
    """A KeyboardInterrupt raised in code run through the C API (``PyRun_String``, as
    pybind11's ``py::exec`` runs it) sets CPython's "unhandled KeyboardInterrupt" flag even
    when it is caught; an interpreter started with ``-m`` that then exits normally kills itself
    with SIGINT: a launch stopped during start-up saw its node exit -2, silently."""
    r = run_module(tmp_path, 'import ctypes\n\n'
                             'run = ctypes.pythonapi.PyRun_String\n'
                             'run.restype = ctypes.py_object\n'
                             'run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object,\n'
                             '                ctypes.py_object]\n'
                             "scope = {'__builtins__': __builtins__}\n"
                             "run(b'raise KeyboardInterrupt', 257, scope, scope)  # file input\n")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''


def test_an_import_error_without_a_stop_is_not_a_clean_stop(tmp_path):
    r = run_module(tmp_path, "raise ImportError('initialization failed') "
                             "from OSError('libGL.so.1: cannot open shared object file')\n")
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == 'ImportError: initialization failed', r.stderr


@pytest.mark.ros
def test_a_stop_whose_keyboard_interrupt_was_swallowed_still_stops_the_node(tmp_path, ros_env):
    """A library that drops the KeyboardInterrupt (an optional import's ``except``) during
    start-up: the node stops anyway (it spun on for good before), exit 0."""
    body = ('import os\nimport signal\nimport time\n\n'
            'try:  # an optional import that was interrupted\n'
            '    os.kill(os.getpid(), signal.SIGINT)\n'
            '    time.sleep(30)\n'
            'except (ImportError, KeyboardInterrupt):\n'
            '    pass\n\n\n'
            'def main(args):\n'
            '    from rclpy.node import Node\n\n'
            '    from simreal_ros.ros.runtime import run_node\n'
            "    run_node(lambda: Node('spins_until_stopped'), args)\n")
    r = run_module(tmp_path, body, ros_env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''
