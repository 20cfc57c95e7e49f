"""The serial port of a Feetech bus: the SDK's PortHandler with a blocking read.

:class:`BufferedPort` is what :class:`~simreal_ros.hardware.feetech.bus.FeetechBus` opens
(unless ``read_timeout_s`` is 0); its docstring gives the measurement behind it.
:meth:`BufferedPort.read_count` is the one-wake-up read of a whole SYNC READ answer: the
terminal's ``VMIN`` set to the bytes still missing makes the kernel report the port readable
only once they have all arrived (the n_tty line discipline's poll counts ``VMIN`` when
``VTIME`` is 0; a pseudo-terminal and a USB serial adapter both use it), so a 6-servo answer
costs the host one wait instead of one or two per status packet (measured: 2.00 ``select``
calls a cycle, the second returning at once because a read of the pty hands over at most 64
bytes, against 4.45 with the SDK's per-packet receive; docs/feetech.md).
"""

from __future__ import annotations

import os
import select
import termios
import time

import scservo_sdk as sdk
import serial


class BufferedPort(sdk.PortHandler):  # type: ignore[misc]
    """The SDK's PortHandler with a greedy, blocking read and an input-flushing clearPort.

    Measured on the loaded 2-core host (docs/feetech.md): the SDK's own read polls the port
    with ``timeout=0`` in a busy loop, taking the CPU the emulator (or the adapter's driver)
    needs, and asks for one packet's bytes at a time (6, then the rest), so every status
    packet of a SYNC READ costs two wake-ups. :meth:`readPort` here waits in ``select`` (up
    to ``read_timeout_s``) and then takes everything that has arrived into a buffer, so the
    SDK's packet loop runs from memory for packets that came together. :meth:`clearPort`,
    which the SDK calls before sending each request, drops stale input (``TCIFLUSH``, what
    Feetech's C++ SDK does there) instead of the Python SDK's ``flush()`` of the output
    (``tcdrain``, a wait for the other end to read the request).
    """

    read_timeout_s = 0.002

    def __init__(self, port_name: str) -> None:
        super().__init__(port_name)
        self._rx = bytearray()

    def readPort(self, length: int) -> bytes:  # noqa: N802 - the SDK's name
        """Up to ``length`` bytes: from the buffer, else waited for up to read_timeout_s."""
        rx = self._rx
        if len(rx) < length:
            fd = self.ser.fileno()
            deadline = time.monotonic() + self.read_timeout_s
            while len(rx) < length:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    break
                rx += self._read_some(fd)
        out = bytes(rx[:length])
        del rx[:length]
        return out

    def read_count(self, length: int, deadline_s: float) -> bytes:
        """``length`` bytes, or fewer if the ``time.monotonic()`` ``deadline_s`` passes first.

        One ``select`` for all of them: ``VMIN`` is the count still missing (at most 255,
        the field's range) while it waits, and the port's own value again after. After the
        deadline, what has arrived is taken without waiting (a read of a non-blocking port
        returns what is there, whatever ``VMIN`` says).
        """
        rx = self._rx
        if len(rx) < length:
            fd = self.ser.fileno()
            attrs = termios.tcgetattr(fd)
            vmin = attrs[6][termios.VMIN]
            try:
                while len(rx) < length:
                    attrs[6][termios.VMIN] = min(255, length - len(rx))
                    termios.tcsetattr(fd, termios.TCSANOW, attrs)
                    left = deadline_s - time.monotonic()
                    if left <= 0 or not select.select([fd], [], [], left)[0]:
                        rx += self._read_nowait(fd)
                        break
                    rx += self._read_some(fd)
            finally:
                attrs[6][termios.VMIN] = vmin
                termios.tcsetattr(fd, termios.TCSANOW, attrs)
        out = bytes(rx[:length])
        del rx[:length]
        return out

    @staticmethod
    def _read_some(fd: int) -> bytes:
        """Read what a readable port holds; SerialException if it is readable but empty."""
        data = os.read(fd, 4096)
        if not data:  # readable but empty: the device is gone (pyserial says so too)
            raise serial.SerialException('device reports readiness to read but returned no '
                                         'data (disconnected?)')
        return data

    @staticmethod
    def _read_nowait(fd: int) -> bytes:
        """Read what has arrived, without waiting (``b''`` if nothing)."""
        try:
            return os.read(fd, 4096)
        except BlockingIOError:
            return b''

    def getBytesAvailable(self) -> int:  # noqa: N802 - the SDK's name
        """Bytes buffered plus bytes waiting in the port."""
        return len(self._rx) + int(self.ser.in_waiting)

    def clearPort(self) -> None:  # noqa: N802 - the SDK's name
        """Drop all received input (the buffer and the port's)."""
        self._rx.clear()
        termios.tcflush(self.ser.fileno(), termios.TCIFLUSH)


__all__ = ['BufferedPort']
