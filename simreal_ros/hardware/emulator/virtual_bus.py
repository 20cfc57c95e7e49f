"""Start ``simreal emulate`` as a subprocess: the virtual servo bus for tests, eval and demos.

::

    with EmulatorProcess(link=tmp / 'ttyDXL', reality='worn_arm') as emu:
        ...  # emu.link is the port to give the driver (port:=...)

The process is started, ``ready <link>`` is awaited (with the emulator's output in the error
if it fails), and on exit it gets SIGINT (SIGKILL after a grace period). Every line it prints
is kept in :attr:`EmulatorProcess.lines` (``unplugged``, ``replugged <link>`` ...), with the
wall-clock time (``time.time_ns()``, the clock of ROS stamps) it was read at in
:attr:`EmulatorProcess.line_times_ns`: the emulator prints with a flush and a thread reads
at once, so that is the event's time to within the pipe's latency.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import tempfile
import threading
import time
from types import TracebackType

from simreal_ros.errors import EmulatorError


class EmulatorProcess:
    """``simreal emulate`` in a subprocess (context manager)."""

    def __init__(self, link: str | Path | None = None, robot: str = 'simreal_arm',
                 reality: str = '', baud: int = 1_000_000, faults: str = '', seed: int = 0,
                 env: dict[str, str] | None = None, start_timeout_s: float = 30.0,
                 rt_priority: int = 0, trace: str | Path = '', role: str = 'follower',
                 operator: str = '', eeprom: str | Path = '',
                 imu_link: str | Path = '', camera: bool = False, scene: str = '',
                 world: bool = False, imu_rate_hz: float = 0.0) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if link is None:
            self._tmp = tempfile.TemporaryDirectory(prefix='simreal_bus_')
            link = Path(self._tmp.name) / 'ttyDXL'
        self.link = Path(link)
        self.cmd = [sys.executable, '-u', '-m', 'simreal_ros', 'emulate', '--robot', robot,
                    '--link', str(self.link), '--baud', str(baud), '--seed', str(seed)]
        if reality:
            self.cmd += ['--reality', reality]
        if faults:
            self.cmd += ['--faults', faults]
        if rt_priority:
            self.cmd += ['--rt-priority', str(rt_priority)]
        if trace:
            self.cmd += ['--trace', str(trace)]
        self.role = role
        if role != 'follower':
            self.cmd += ['--role', role]
        if operator:
            self.cmd += ['--operator', operator]
        if eeprom:
            self.cmd += ['--eeprom', str(eeprom)]
        if imu_link:
            self.cmd += ['--imu-link', str(imu_link)]
        if imu_rate_hz:  # 0: the emulator's default (200 Hz)
            self.cmd += ['--imu-rate', f'{imu_rate_hz:g}']
        if camera:
            self.cmd += ['--camera']
        if scene:
            self.cmd += ['--scene', scene]
        self.scene = scene
        #: a floating-base robot's hidden world is driven through stdin (:meth:`send`)
        self.world = world
        self.env = dict(env if env is not None else os.environ)
        self.start_timeout_s = start_timeout_s
        self.lines: list[str] = []
        self.line_times_ns: list[int] = []
        self.proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def port(self) -> str:
        """The port path to hand to the driver."""
        return str(self.link)

    def start(self) -> 'EmulatorProcess':
        """Start the emulator and wait for ``ready``."""
        # a scene's objects are placed and a legged robot pushed through stdin
        # (hardware/emulator/placer.py, hidden_world.py)
        # and a leader's operator on cue started (hardware/emulator/operator.py; a leader not
        # on cue reads no stdin)
        piped = bool(self.scene) or self.world or self.role == 'leader'
        self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if piped else subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True, name='emulator-out')
        self._reader.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise EmulatorError(f'simreal emulate did not become ready: '
                                    f'{" | ".join(self.lines[-10:]) or "no output"}')
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip()
            self.line_times_ns.append(time.time_ns())
            self.lines.append(line)
            if line == f'ready {self.link}':
                self._ready.set()

    def wait_for_line(self, text: str, timeout: float = 10.0, after_ns: int = 0) -> None:
        """Wait until the emulator printed a line starting with ``text``.

        Only lines read at ``after_ns`` (``time.time_ns()``) or later count: an event of this
        moment, not an earlier one alike.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.line_time_ns(text, after_ns)
                return
            except EmulatorError:
                time.sleep(0.01)
        raise EmulatorError(f'emulator did not print {text!r} within {timeout} s: '
                            f'{self.lines[-5:]}')

    @property
    def camera_urls(self) -> list[str]:
        """The stream URLs of the virtual cameras (``--camera``), in the robot spec's order."""
        return [line.split(' ', 1)[1] for line in list(self.lines)
                if line.startswith('camera http')]

    def send(self, line: str, answer: str, timeout: float = 10.0, what: str = '') -> str:
        """Write ``line`` to the emulator's stdin; return the answer line, starting ``answer``.

        EmulatorError with the emulator's ``error:`` line when it refuses the line (``what``:
        what the line does, in the message; its first word by default).
        """
        what = what or line.split()[0]
        assert self.proc is not None and self.proc.stdin is not None, \
            'start it with a scene, world=True or role=leader'
        k = len(self.lines)
        self.proc.stdin.write(line.rstrip('\n') + '\n')
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for got in list(self.lines)[k:]:
                if got.startswith(answer):
                    return got
                if got.startswith('error: '):
                    raise EmulatorError(f'the emulator refused {what}: {got}')
            if self.proc.poll() is not None:
                break
            time.sleep(0.005)
        raise EmulatorError(f'the emulator did not answer {line.split()[0]!r} within {timeout} s: '
                            f'{self.lines[-5:]}')

    def start_operator(self, timeout: float = 10.0) -> int:
        """Start a leader's operator on cue; return when its motion counts from.

        The leader's ``operator`` needs ``cue=1`` (without it the emulator reads no stdin and
        this times out). The time is the wall-clock time (ns) of the emulator's physics state
        at the start.
        """
        line = self.send('start', 'started ', timeout, 'to start the operator')
        return int(line.split()[1])

    def place(self, name: str, xyz: tuple[float, float, float] | list[float],
              timeout: float = 10.0) -> None:
        """Place scene object ``name`` at ``xyz`` (m) and wait for the emulator's answer.

        EmulatorError with the emulator's ``error:`` line when it refuses the placement.
        """
        x, y, z = (float(v) for v in xyz)  # repr of a numpy float is not a number
        self.send(f'place {name} {x!r} {y!r} {z!r}', f'placed {name} ', timeout,
                  f'to place {name}')

    def line_time_ns(self, text: str, after_ns: int = 0) -> int:
        """Return when the first line starting with ``text`` was read (``time.time_ns()``).

        Only lines read at ``after_ns`` or later count.
        """
        # the two snapshots may differ in length (a line arriving): index k is one line
        for t, line in zip(list(self.line_times_ns), list(self.lines), strict=False):
            if t >= after_ns and line.startswith(text):
                return t
        raise EmulatorError(f'emulator did not print {text!r}: {self.lines[-5:]}')

    def stop(self) -> int:
        """SIGINT the emulator (SIGKILL after 5 s); return its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            # the emulator alone: a child still starting up in its group (glfw's probe after
            # `import mujoco`) would print its KeyboardInterrupt; SIGKILL takes the group
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=2)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return int(self.proc.returncode)

    def __enter__(self) -> 'EmulatorProcess':
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
