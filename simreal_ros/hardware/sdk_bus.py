"""What a servo bus driven through a vendor SDK does the same for every family.

Both vendor SDKs (``dynamixel_sdk``, ``scservo_sdk``) have the same shape: a ``PortHandler``
on the serial port, a ``PacketHandler`` whose transactions return ``(..., result, error)``
with ``COMM_SUCCESS == 0``, and ``ping`` returning ``(model_number, result, error)``.
:class:`SdkBus` holds what the family buses build on that shape, identically:

* the port's life: :attr:`is_open`, :meth:`close`, and :meth:`_guard`, which turns a port
  that fails under an SDK call (unplugged adapter: ``OSError``, ``termios.error``, pyserial's
  errors, and the ``TypeError``/``AttributeError`` the SDKs raise on a closed handle) into
  :class:`~simreal_ros.errors.PortLostError` and a short (late, foreign) answer that an SDK
  indexes as if complete into a ``stale`` :class:`~simreal_ros.errors.BusError`;
* the count of failed transactions by kind (:attr:`comm_errors`, ``/diagnostics``);
* :meth:`check_servos`: ping every servo of the spec until a deadline and name every missing
  ID and every wrong model in one BusError;
* :meth:`_retried`: a single-servo set-up transaction tried at least 5 times and for 0.5 s,
  the input dropped before each retry;
* :meth:`hardware_errors`: the latched error bits of every servo (:attr:`error_register`);
* :func:`check_spec_registers`: a spec value that does not fit its register is one
  ConfigError naming the spec key, the joint and the range in SI units.

A family bus sets :attr:`ph`, :attr:`port`, :attr:`port_name`, :attr:`baud`, :attr:`robot`,
:attr:`ids`, :attr:`family`, :attr:`comm_names` and :attr:`error_register`, says how its port
drops received bytes (:meth:`_drop_input`) and reads a register (:meth:`read_register`).
"""

from __future__ import annotations

import errno
import termios
import time
from typing import Any, Callable

import serial

from simreal_ros.core.robot import JointSpec, RobotSpec
from simreal_ros.errors import BusError, ConfigError, PortLostError
from simreal_ros.hardware.family import ServoFamily

#: what an SDK call raises when the port went away under it
PORT_FAILURES = (serial.SerialException, OSError, termios.error, TypeError, AttributeError)
#: not an SDK code: an answer of the wrong length (late, from another request)
STALE = -9901
COMM_SUCCESS = 0  # both SDKs

PERMISSION_HINT = ('add your user to the dialout group (sudo usermod -aG dialout $USER, then '
                   'log out and in again) or give the device a udev rule with MODE="0666"')


def open_error_message(port: str, exc: BaseException) -> str:
    """Return why ``port`` could not be opened, with the fix for a permission problem."""
    text = f'cannot open {port}: {exc}'
    if getattr(exc, 'errno', None) in (errno.EACCES, errno.EPERM) or \
            'Permission denied' in str(exc):
        text += f'; permission denied: {PERMISSION_HINT}'
    return text


def check_spec_registers(src: str, joint: JointSpec, model_name: str, regs: dict[str, int],
                         per_unit: dict[str, tuple[str, float, float, str]],
                         item: Callable[[str], Any]) -> None:
    """Check the register values ``regs`` computed from ``joint``'s spec against their items.

    ``per_unit`` maps a register to (spec key, spec value, SI value of one register unit, SI
    unit); ``item(name)`` is the register's item (its ``minimum``/``maximum``). A value outside
    the register is a ConfigError naming the spec key, the joint, its servo ID and the range the
    spec value must lie in.
    """
    for name, (key, got, unit, si) in per_unit.items():
        it = item(name)
        lo = 0 if it.minimum is None else max(0, it.minimum)
        hi = it.maximum
        value = regs[name]
        if hi is not None and not lo <= value <= hi:
            raise ConfigError(
                src, f'{key} ({joint.name}, servo ID {joint.servo.servo_id})',
                f'a value in [{lo * unit:.4g}, {hi * unit:.4g}] {si}: it becomes the '
                f'{name} register ({lo}..{hi}) of the {model_name}, which would be '
                f'{value}; change it in the robot spec', got)


class SdkBus:
    """The family-independent part of a servo bus over a vendor SDK (module docstring)."""

    ph: Any
    port: Any
    port_name: str
    baud: int
    robot: RobotSpec
    ids: list[int]
    family: ServoFamily
    comm_names: dict[int, str]
    comm_errors: dict[str, int]
    #: the register whose bits are a servo's latched errors
    error_register: str

    # ---- port --------------------------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        """Whether the port is open."""
        return self.port is not None

    def close(self) -> None:
        """Close the port (errors ignored: it may be gone already)."""
        if self.port is not None:
            try:
                self.port.closePort()
            except Exception:  # noqa: BLE001 - a vanished port fails to close; that is fine
                pass
        self.port = None

    def _port(self) -> Any:
        if self.port is None:
            raise PortLostError(f'{self.port_name} is not open')
        return self.port

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Call an SDK function; a failing port becomes PortLostError."""
        port = self._port()
        try:
            return fn(*args)
        except IndexError:  # the SDK indexes a short (late, foreign) answer as if complete
            port.is_using = False
            raise BusError(f'{self.port_name}: {self._count(STALE)} answer') from None
        except PORT_FAILURES as exc:
            port.is_using = False
            self.close()
            raise PortLostError(f'{self.port_name}: {exc or type(exc).__name__}') from None

    def _count(self, result: int) -> str:
        name = self.comm_names.get(result, f'result {result}')
        self.comm_errors[name] = self.comm_errors.get(name, 0) + 1
        return name

    def _drop_input(self) -> None:
        """Drop what the port has received (a late answer must not answer the next request)."""
        raise NotImplementedError

    def read_register(self, sid: int, name: str) -> int:
        """Read one register of servo ``sid`` (the family's encoding decoded)."""
        raise NotImplementedError

    def hardware_errors(self) -> dict[int, int]:
        """:attr:`error_register` of every servo: ``{servo ID: bits}`` of those with bits set."""
        out = {}
        for sid in self.ids:
            bits = self.read_register(sid, self.error_register)
            if bits:
                out[sid] = bits
        return out

    # ---- set-up ------------------------------------------------------------------------------
    def check_servos(self, timeout_s: float = 1.0) -> None:
        """Ping every servo; BusError naming every missing or wrong-model ID.

        Servos that did not answer are pinged again until ``timeout_s`` (servos boot slowly
        after power-on; a loaded host can miss an answer), the input dropped after each miss.
        A stale answer (a late one to an earlier request, cut short) is such a miss: "stale
        answer" stopped the Feetech driver of the virtual legged robot at start-up once (under
        SCHED_FIFO, load 6), and the ping was the one start-up transaction not retried on it.
        """
        found: dict[int, int] = {}
        deadline = time.monotonic() + timeout_s
        while True:
            for sid in self.ids:
                if sid not in found:
                    try:
                        model, result, _err = self._guard(self.ph.ping, self._port(), sid)
                    except PortLostError:
                        raise
                    except BusError:  # stale (counted): ask again
                        result = None
                    if result == COMM_SUCCESS:
                        found[sid] = model
                    else:
                        self._drop_input()
            if len(found) == len(self.ids) or time.monotonic() >= deadline:
                break
        missing, wrong = [], []
        for j in self.robot.joints:
            sid = j.servo.servo_id
            if sid not in found:
                missing.append(f'{sid} ({j.name})')
            elif found[sid] != j.servo.model_number:
                got = self.family.by_number(found[sid])
                wrong.append(f'{sid} ({j.name}): expected {j.servo.model} (model number '
                             f'{j.servo.model_number}), got model number {found[sid]} '
                             f'({got.name if got else "a model this stack does not know"})')
        problems = []
        if missing:
            problems.append(f'no answer from servo ID {", ".join(missing)}')
        if wrong:
            problems.append('wrong servo at ID ' + '; '.join(wrong))
        if problems:
            raise BusError(f'{self.port_name} at {self.baud} baud: {"; ".join(problems)} '
                           f'(check wiring, power, IDs and baud rate of the robot spec '
                           f'{self.robot.source})')

    def _retried(self, fn: Callable[..., Any], *args: Any, attempts: int = 5,
                 budget_s: float = 0.5) -> Any:
        """Run a single-servo transaction, retried on comm errors and stale answers.

        It is tried at least ``attempts`` times and until ``budget_s`` has passed: five quick
        tries all fell inside one scheduling stall of a loaded host (``write goal_current:
        timeout`` at driver start-up with both cores busy), while the set-up transactions that
        use this path can afford to wait. Before a retry the port's input is dropped, so a
        late answer to the failed request cannot be taken for the answer to the retry.
        """
        deadline = time.monotonic() + budget_s
        attempt = 0
        while True:
            attempt += 1
            last = attempt >= attempts and time.monotonic() >= deadline
            try:
                out = self._guard(fn, self._port(), *args)
            except PortLostError:
                raise
            except BusError:
                if last:
                    raise
            else:
                if out[-2 if len(out) == 3 else 0] == COMM_SUCCESS or last:
                    return out
            self._drop_input()
