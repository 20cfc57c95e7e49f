"""Reading a serial IMU: the port (raw, at its baud rate) and the settings of the IMU driver.

:class:`SerialImu` opens the device (``/dev/ttyUSB1`` or the link ``simreal emulate
--imu-link`` printed) raw at ``baud``, drops what was buffered before it was opened (so the first
sample is a fresh one), and :meth:`SerialImu.read` waits up to ``timeout_s`` for bytes and
returns the samples they complete (:class:`~simreal_ros.hardware.imu.witmotion.Parser`), each
with the ``time.time_ns()`` at which its last byte was read: the driver's stamp. A vanished
port raises :class:`~simreal_ros.errors.PortLostError`. :class:`ImuDriverConfig` holds the
node's parameters (``simreal_imu_driver``).
"""

from __future__ import annotations

from dataclasses import dataclass
import os
import select
import termios
import time
import tty

from simreal_ros.core.validate import FromMapping
from simreal_ros.errors import ConfigError, PortLostError
from simreal_ros.hardware.imu import witmotion as wit

PROTOCOLS = ('witmotion',)


@dataclass(frozen=True)
class ImuDriverConfig(FromMapping):
    """Parameters of ``simreal_imu_driver`` (the ROS parameters have the same names).

    * ``robot``: the robot spec; its ``base.imu`` gives ``frame_id`` and the covariances.
    * ``port``, ``baud``: the IMU's serial device and rate (a WT901 at 200 Hz: 115200).
    * ``protocol``: the device's protocol (``witmotion``: the WT901 family).
    * ``expected_rate_hz``: the output rate the device was set to; ``/diagnostics`` warns
      when the measured rate is under 80 % of it.
    * ``give_up_after_s``: with no sample for this long the driver stops with exit 2
      (0 = keep trying forever); ``reconnect_s``: the pause between attempts to reopen.
    """

    SOURCE = 'imu_driver'

    robot: str = 'simreal_quad'
    port: str = ''
    baud: int = 115_200
    protocol: str = 'witmotion'
    expected_rate_hz: float = 200.0
    give_up_after_s: float = 10.0
    reconnect_s: float = 0.2
    diagnostics_period_s: float = 1.0

    def __post_init__(self) -> None:
        src = 'imu_driver'
        if not self.port:
            raise ConfigError(src, 'port', 'the serial device of the IMU (e.g. /dev/ttyUSB1 or '
                              'the link printed by simreal emulate --imu-link)', self.port)
        if self.baud not in wit.BAUDS:
            raise ConfigError(src, 'baud', f'one of {list(wit.BAUDS)}', self.baud)
        if self.protocol not in PROTOCOLS:
            raise ConfigError(src, 'protocol', f'one of {list(PROTOCOLS)}', self.protocol)
        for key in ('expected_rate_hz', 'reconnect_s', 'diagnostics_period_s'):
            if not getattr(self, key) > 0:
                raise ConfigError(src, key, 'a number > 0', getattr(self, key))
        if not self.give_up_after_s >= 0:
            raise ConfigError(src, 'give_up_after_s', 'a time >= 0 s (0 = never)',
                              self.give_up_after_s)


class SerialImu:
    """A WitMotion IMU on a serial port (see the module docstring)."""

    def __init__(self, port: str, baud: int) -> None:
        self.port = port
        self.baud = baud
        self.fd: int | None = None
        self.parser = wit.Parser()

    def open(self) -> None:
        """Open the port raw at ``baud``; PortLostError when it cannot be opened."""
        try:
            fd = os.open(self.port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as exc:
            raise PortLostError(f'{self.port}: {exc.strerror}') from None
        try:
            tty.setraw(fd)
            attrs = termios.tcgetattr(fd)
            speed = getattr(termios, f'B{self.baud}')
            attrs[4] = attrs[5] = speed
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
            termios.tcflush(fd, termios.TCIFLUSH)  # what waited in the buffer is stale
        except (termios.error, OSError) as exc:
            os.close(fd)
            raise PortLostError(f'{self.port}: not a serial port ({exc})') from None
        self.fd = fd
        self.parser.clear()

    def close(self) -> None:
        """Close the port (no-op when closed)."""
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

    def read(self, timeout_s: float) -> list[tuple[int, wit.Sample]]:
        """Return the samples completed by the bytes of up to ``timeout_s``, with their stamps.

        PortLostError when the port is closed or gone (EIO, hang-up).
        """
        if self.fd is None:
            raise PortLostError(f'{self.port}: not open')
        try:
            readable, _, _ = select.select([self.fd], [], [], timeout_s)
            if not readable:
                return []
            data = os.read(self.fd, 4096)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError as exc:
            raise PortLostError(f'{self.port}: {exc.strerror}') from None
        if not data:
            raise PortLostError(f'{self.port}: hang-up')
        now_ns = time.time_ns()
        return [(now_ns, s) for s in self.parser.feed(data)]
