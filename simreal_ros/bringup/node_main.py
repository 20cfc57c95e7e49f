"""``python -m simreal_ros.bringup.node_main <module> [args]``: how the launcher starts nodes.

A stop request (SIGINT) can arrive while a node is still importing rclpy and MuJoCo, before
rclpy installs its own signal handling; this wrapper turns that into a quiet exit 0 instead of
a KeyboardInterrupt traceback, so "stopped during start-up" reads as the clean stop it is. The
launcher starts it with SIGINT blocked (:func:`~simreal_ros.bringup.launcher.sigint_held`),
so a SIGINT sent while the interpreter itself starts stays pending; it is unblocked once the
handler is installed, and a pending one then stops the node before its module is imported.
The ImportError a pybind11 extension raises from a KeyboardInterrupt is a clean stop too
(:func:`~simreal_ros.ros.runtime.interrupted`). A SIGINT whose KeyboardInterrupt a library
swallowed during start-up still stops the node
(:func:`~simreal_ros.ros.runtime.note_stop_requests`).

A node that dies of a fatal signal (SIGSEGV in a C extension: GL, DDS) prints the Python stack
of every thread first (``faulthandler``), so the launch output says where it died. SIGUSR1
prints the same stacks and lets the node run on: the launcher sends it to a node that ignored
SIGINT and SIGTERM, before its SIGKILL, so a node stuck in shutdown says where it is stuck.

The process ends with :func:`~simreal_ros.ros.teardown.exit_now` (flush, ``_exit``), as
``run_node`` ends it, never through the interpreter's own exit: a KeyboardInterrupt that passed
through code a C extension runs with the C API (``PyRun_String``: pybind11's ``py::exec``)
sets CPython's "unhandled KeyboardInterrupt" flag even when caught, and an interpreter started
with ``-m`` that then exits normally re-raises SIGINT on itself with the default action. A
stop during start-up that node_main had handled (exit 0) then died of SIGINT, exit -2 with no
output: 1 of 40 sim bridges sent SIGINT 0-4 s after their start on a loaded host, and a launch
test in CI (the dying required node of test/bringup/test_launcher.py).
"""

from __future__ import annotations

import faulthandler
import importlib
import signal
import sys

from simreal_ros.ros.runtime import interrupted, note_stop_requests
from simreal_ros.ros.teardown import exit_now


def main(argv: list[str] | None = None) -> int:
    """Import ``argv[0]`` (a node module) and run its ``main()`` with the remaining args."""
    note_stop_requests()
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print('usage: python -m simreal_ros.bringup.node_main <module> [args]', file=sys.stderr)
        return 2
    try:
        # a SIGINT held pending since the launcher forked us is delivered here
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        module = importlib.import_module(args[0])
        return int(module.main([args[0], *args[1:]]))
    except KeyboardInterrupt:
        return 0
    except ImportError as exc:
        if not interrupted(exc):
            raise
        return 0


if __name__ == '__main__':
    exit_now(main())
