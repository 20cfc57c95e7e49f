"""The built-in launcher: start a plan's nodes as processes and supervise them.

What ``ros2 launch`` does for this package, without needing it installed: every node runs as
``python -m <module> --ros-args ...`` with the network-safe environment, its output lines are
prefixed with ``[name]``, Ctrl-C/SIGTERM are forwarded, and the launch stops everything and
exits non-zero when a required node dies. A node marked ``exit_ends_launch`` (the excitation
source) ends the launch successfully when it finishes with code 0. :class:`NodeProcess` starts
one spec on its own, output in a log file (tests, benchmarks, ``simreal eval``).

Every node starts with SIGINT blocked (:func:`sigint_held`): a Ctrl-C or a launch stop that
lands while its interpreter starts and imports stays pending until ``node_main`` has installed
its handler and unblocks it, and is then a clean stop (exit 0). Unblocked, a SIGINT in the
first ~0.1 s killed the node (exit -2) and one during the imports raised KeyboardInterrupt
inside them (traceback): every node kind, every time (test/nodes/test_clean_stops.py).
"""

from __future__ import annotations

from contextlib import contextmanager
import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Callable, Iterator, Mapping, Sequence

import yaml

from simreal_ros.bringup.planner import NodeSpec
from simreal_ros.errors import LaunchError


@contextmanager
def sigint_held() -> Iterator[None]:
    """Block SIGINT in the calling thread for the block; processes started in it inherit that.

    A child keeps the signal mask across fork and exec, so a node started here receives a
    SIGINT only once ``node_main`` unblocks it, after installing its handler. In this process a
    SIGINT that arrives meanwhile stays pending and is handled when the block ends.
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def node_command(spec: NodeSpec, params_file: Path, python: str | None = None) -> list[str]:
    """Return the argv that starts ``spec`` (with this interpreter, or ``python``)."""
    cmd = [python or sys.executable, '-u', '-m', 'simreal_ros.bringup.node_main', spec.module,
           '--ros-args', '-r', f'__node:={spec.name}']
    if spec.namespace:
        cmd += ['-r', f'__ns:={spec.namespace}']
    cmd += ['--params-file', str(params_file)]
    for src, dst in spec.remappings:
        cmd += ['-r', f'{src}:={dst}']
    return cmd


def signal_node(pid: int, sig: int) -> None:
    """Send ``sig`` to a node: SIGINT and SIGUSR1 to its process, SIGTERM and SIGKILL to its group.

    A stop request is the node's to handle: its children either ignore SIGINT (the bag writer
    process) or are not its to stop. One was glfw's library probe, a ``python -c`` child that
    ``import mujoco`` starts without ``MUJOCO_GL``: a group-wide SIGINT during the probe's
    start-up printed its KeyboardInterrupt traceback into the node's output (Jazzy CI, stop
    35), and SIGUSR1 (stacks) would kill a child that has no handler for it. The escalations
    reach every process of the group, so nothing the node started outlives a failed stop.
    """
    if sig in (signal.SIGINT, signal.SIGUSR1):
        os.kill(pid, sig)
    else:
        os.killpg(pid, sig)


def write_params_file(spec: NodeSpec, directory: Path) -> Path:
    """Write the node's parameters as a ROS 2 parameter YAML file."""
    path = directory / f'{spec.fqn.strip("/").replace("/", "__")}.yaml'
    path.write_text(yaml.safe_dump({spec.fqn: {'ros__parameters': spec.parameters}}),
                    encoding='utf-8')
    return path


class Launcher:
    """Start and supervise the nodes of a plan."""

    def __init__(self, nodes: Sequence[NodeSpec], env: Mapping[str, str],
                 echo: Callable[[str], None] | None = None, grace_s: float = 5.0) -> None:
        if not nodes:
            raise LaunchError('the plan has no nodes to start')
        self.nodes = list(nodes)
        self.env = dict(env)
        self.grace_s = grace_s
        self._echo = echo or (lambda line: print(line, flush=True))
        self._out_lock = threading.Lock()
        self.procs: list[tuple[NodeSpec, subprocess.Popen[bytes]]] = []
        self._readers: list[threading.Thread] = []
        self._stop_reason: str | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix='simreal_launch_')
        self.label_width = max(len(self._label(n)) for n in self.nodes)

    @staticmethod
    def _label(spec: NodeSpec) -> str:
        return spec.fqn.lstrip('/')

    def echo(self, line: str) -> None:
        """Print one line atomically."""
        with self._out_lock:
            self._echo(line)

    def _pump(self, label: str, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b''):
            self.echo(f'[{label.ljust(self.label_width)}] '
                      f'{raw.decode("utf-8", "replace").rstrip()}')
        stream.close()

    def start(self) -> None:
        """Start every node, in plan order."""
        directory = Path(self._tmp.name)
        for spec in self.nodes:
            env = {**self.env, **spec.env}
            cmd = node_command(spec, write_params_file(spec, directory))
            try:
                with sigint_held():
                    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
            except OSError as exc:
                self.stop('start failure')
                raise LaunchError(f'could not start {spec.fqn}: {exc}') from None
            self.procs.append((spec, proc))
            assert proc.stdout is not None
            t = threading.Thread(target=self._pump, args=(self._label(spec), proc.stdout),
                                 daemon=True)
            t.start()
            self._readers.append(t)
            self.echo(f'[launch] started {spec.fqn} (pid {proc.pid})')

    def request_stop(self, reason: str) -> None:
        """Ask :meth:`wait` to stop all nodes (safe from a signal handler)."""
        if self._stop_reason is None:
            self._stop_reason = reason

    def wait(self, poll_s: float = 0.05) -> int:
        """Supervise until a stop request or a node exit; return the launch exit code."""
        code = 0
        while self._stop_reason is None:
            for spec, proc in self.procs:
                rc = proc.poll()
                if rc is None:
                    continue
                if spec.exit_ends_launch and rc == 0:
                    self.request_stop(f'{spec.fqn} finished')
                elif spec.required:
                    self.request_stop(f'required node {spec.fqn} exited with code {rc}')
                    code = rc if rc > 0 else 1
                break
            else:
                time.sleep(poll_s)
        self.echo(f'[launch] stopping: {self._stop_reason}')
        failed = self.stop(self._stop_reason or '')
        if code == 0 and failed:
            self.echo(f'[launch] did not stop cleanly: {", ".join(failed)}')
        return code or (1 if failed else 0)

    def stop(self, reason: str = '') -> list[str]:
        """Stop all nodes: SIGINT, then SIGTERM, then SIGKILL; return those that failed.

        Before the SIGKILL, a node still alive gets SIGUSR1: node_main prints the Python stack
        of its every thread, so the launch output says where its shutdown was stuck.
        """
        last_signal: dict[str, str] = {}
        for sig, wait_s in ((signal.SIGINT, self.grace_s), (signal.SIGTERM, 2.0),
                            (signal.SIGUSR1, 0.5), (signal.SIGKILL, 2.0)):
            alive = [(s, p) for s, p in self.procs if p.poll() is None]
            if not alive:
                break
            for spec, proc in alive:
                last_signal[spec.fqn] = signal.Signals(sig).name
                try:
                    signal_node(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and any(p.poll() is None for _, p in alive):
                time.sleep(0.02)
        for t in self._readers:
            t.join(timeout=1.0)
        failed = []
        for spec, proc in self.procs:
            rc = proc.wait()
            how = last_signal.get(spec.fqn, '')
            if rc not in (0, -signal.SIGINT):
                failed.append(spec.fqn)
            self.echo(f'[launch] {spec.fqn} exited with code {rc}'
                      + (f' (after {how})' if how and how != 'SIGINT' else ''))
        self._tmp.cleanup()
        return failed

    def run(self) -> int:
        """Start, supervise with SIGINT/SIGTERM forwarding, and return the exit code."""
        previous = {}

        def handler(signum: int, _frame: object) -> None:
            self.request_stop(f'received {signal.Signals(signum).name}')

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, handler)
        try:
            self.start()
            return self.wait()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)


class NodeProcess:
    """A node started as a subprocess from a NodeSpec; output kept in a log file."""

    def __init__(self, spec: NodeSpec, env: dict[str, str], directory: Path,
                 python: str | None = None) -> None:
        self.spec = spec
        self.log_path = directory / f'{spec.fqn.strip("/").replace("/", "__")}_{id(self)}.log'
        self._log = open(self.log_path, 'wb')  # noqa: SIM115 - closed in stop()
        cmd = node_command(spec, write_params_file(spec, directory), python)
        with sigint_held():  # a stop during its start-up waits for node_main's handler
            self.proc = subprocess.Popen(cmd, env=env, stdout=self._log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def output(self) -> str:
        """Everything the node printed so far."""
        self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait(self, timeout: float = 20.0) -> int:
        """Wait for the node to exit and return its code."""
        return self.proc.wait(timeout=timeout)

    def stop(self) -> int:
        """SIGINT the node (SIGUSR1 for its stacks, then SIGKILL, after 10 s); return its code."""
        if self.proc.poll() is None:
            signal_node(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                signal_node(self.proc.pid, signal.SIGUSR1)
                time.sleep(0.5)
                signal_node(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
