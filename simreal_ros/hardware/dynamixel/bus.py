"""A Dynamixel Protocol 2.0 bus of X-series servos, over the official ``dynamixel_sdk``.

:class:`DynamixelBus` is the hardware half of the driver node, without ROS, and the Dynamixel
family's implementation of :class:`~simreal_ros.hardware.family.ServoBus`. Each joint's servo
model (:mod:`simreal_ros.hardware.dynamixel.family`: XM430-W350/W210, XL430-W250, XL330-M288)
gives its control table and units. Open the port, ping and model-check every servo of the
robot spec, configure them (the spec's operating mode: current-based position where the model
has current control, position otherwise; Return Delay Time, position PID gains from the spec's
kp/kd, Goal Current (or, without current control, Goal PWM) from the effort limit, no
profile), then cycle: :meth:`read_state` (one group sync read of present
current, velocity and position) and :meth:`write_goal` (one group sync write of goal position).
All values in and out are SI in robot (joint) order; the register conversions follow
:mod:`simreal_ros.hardware.dynamixel.control_table` and the spec's ``zero_tick``/``direction``/
``offset_rad``/``torque_per_amp``. The register values derived from the spec (gains, goal
current, profile velocity) are checked against the registers' ranges when the bus is created,
so a spec the servos would refuse fails early with a :class:`~simreal_ros.errors.ConfigError`
naming the spec key.

Servos in a hardware-error state (overload, overheating, input voltage, ...) have shut their
torque off and refuse to enable it again until rebooted: :meth:`DynamixelBus.configure` reads
Hardware Error Status first and either fails naming the servos and the bits, or (with
``reboot_on_error``) sends REBOOT to them and configures them afresh.

Failures are typed: :class:`~simreal_ros.errors.BusError` for a bus that answers wrongly
(missing servo, wrong model, timeout, CRC) and :class:`~simreal_ros.errors.PortLostError`
when the port itself fails (adapter unplugged), after which the bus must be reopened.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import dynamixel_sdk as sdk
import dynamixel_sdk.port_handler as sdk_port
import dynamixel_sdk.protocol2_packet_handler as sdk_p2
import numpy as np
import numpy.typing as npt
import serial

from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import BusError, PortLostError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel.family import (
    FAMILY,
    MODE_REGISTER,
    PWM_FULL_SCALE,
    gain_torque_per_amp,
)
from simreal_ros.hardware.dynamixel.wire import (
    CURRENT_OFF,
    POSITION_OFF,
    STATE_ADDR,
    STATE_LEN,
    TICK_OFF,
    VELOCITY_OFF,
    is_stale,
)
from simreal_ros.hardware.family import (
    BusState,
    ServoHealth,
    ServoModel,
    require_current_control,
    resolve_robot,
    resolve_servos,
)
from simreal_ros.hardware.sdk_bus import (  # noqa: F401 - PORT_FAILURES etc. re-exported
    PERMISSION_HINT,
    PORT_FAILURES,
    STALE,
    SdkBus,
    check_spec_registers,
    open_error_message,
)

FloatArray = npt.NDArray[np.float64]

_A = ct.BY_NAME
GOAL_ADDR = _A['goal_position'].address
TORQUE_ADDR = _A['torque_enable'].address
HW_ERROR_ADDR = _A['hardware_error_status'].address
HEALTH_LEN = HW_ERROR_ADDR + 1 - TORQUE_ADDR           # 64..70: torque enable .. hardware error
TEMPERATURE_ADDR = _A['present_temperature'].address
BUS_WATCHDOG_ADDR = _A['bus_watchdog'].address

#: the SDK's result codes by name, as counted in comm_errors
COMM_NAMES = {STALE: 'stale', sdk.COMM_RX_TIMEOUT: 'timeout', sdk.COMM_RX_CORRUPT: 'corrupt (CRC)',
              sdk.COMM_TX_FAIL: 'tx failed', sdk.COMM_PORT_BUSY: 'port busy',
              sdk.COMM_RX_FAIL: 'rx failed', sdk.COMM_TX_ERROR: 'bad packet',
              sdk.COMM_NOT_AVAILABLE: 'not available'}


#: what to do about a servo hardware error (the servo shut its torque off and stays off)
HARDWARE_ERROR_FIX = ('remove the cause (mechanical load or blocked joint, heat, supply voltage), '
                      'then power-cycle the servos, or launch with reboot_on_error:=true '
                      '(REBOOT at start-up and on ~/reset)')

def describe_servo_errors(robot: RobotSpec, errors: dict[int, int]) -> str:
    """``servo ID 2 (shoulder_pitch): overload (0x20)`` for every servo in ``errors``."""
    parts = []
    for j in robot.joints:
        bits = errors.get(j.servo.servo_id, 0)
        if bits:
            parts.append(f'servo ID {j.servo.servo_id} ({j.name}): '
                         f'{ct.describe_hardware_error(bits)} (0x{bits:02x})')
    return '; '.join(parts)


class DynamixelBus(SdkBus):
    """The servos of one robot spec on one serial port."""

    def __init__(self, robot: RobotSpec, port: str, baud: int, *,
                 return_delay_us: int = 0, latency_timer_ms: float = 16.0,
                 read_timeout_s: float = 0.002, servo_velocity_limit: bool = False) -> None:
        """Prepare the bus (nothing is opened yet).

        ``servo_velocity_limit``: write Profile Velocity from the spec's velocity limits, so
        the servos themselves move no faster than the limit (a guard for drivers that do not
        ramp the goal); otherwise 0 (no profile). Raises ConfigError (one line) when a joint's
        model is unknown or cannot do what the spec asks, or a value derived from the spec does
        not fit its register.
        """
        robot = resolve_robot(robot)  # model_number, torque_per_amp, mode from the models
        self.robot = robot
        self.models: tuple[ServoModel, ...] = resolve_servos(robot)
        self._model_of = {j.servo.servo_id: m
                          for j, m in zip(robot.joints, self.models, strict=True)}
        self.port_name = port
        self.baud = baud
        self.return_delay_us = return_delay_us
        self.read_timeout_s = read_timeout_s
        self.servo_velocity_limit = servo_velocity_limit
        sdk_port.LATENCY_TIMER = latency_timer_ms  # the SDK's packet timeout margin
        self.ids = [j.servo.servo_id for j in robot.joints]
        self.servos = [j.servo for j in robot.joints]
        self.direction = np.array([s.direction for s in self.servos], dtype=np.float64)
        self.kt = np.array([s.torque_per_amp for s in self.servos])
        self.velocity_unit = np.array([m.velocity_unit_rad_s for m in self.models])
        # N*m per unit of Present Current (Present Load on a model without current sensing)
        self.effort_unit = np.array([m.effort_per_unit(s.torque_per_amp)
                                     for m, s in zip(self.models, self.servos, strict=True)])
        self.ph = sdk.PacketHandler(2.0)
        self.port: sdk.PortHandler | None = None
        self.comm_errors: dict[str, int] = {}
        self.comm_names = COMM_NAMES
        self.family = FAMILY
        self.error_register = 'hardware_error_status'
        self._sync_read: sdk.GroupSyncRead | None = None
        self._sync_write: sdk.GroupSyncWrite | None = None
        self._registers = self._spec_registers()
        self._last_tick: dict[int, int] = {}  # Realtime Tick of the last accepted state
        self._last_tick_mono = 0.0

    def open(self) -> None:
        """Open the port at the baud rate; BusError naming the port if it cannot be."""
        if not os.path.exists(self.port_name):
            raise PortLostError(f'serial port {self.port_name} does not exist: plug in the '
                                f'adapter (or start simreal emulate --link {self.port_name})')
        port = sdk.PortHandler(self.port_name)
        try:
            ok = port.openPort() and port.setBaudRate(self.baud)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PortLostError(open_error_message(self.port_name, exc)) from None
        if not ok:
            raise BusError(f'{self.port_name}: baud rate {self.baud} is not supported by the '
                           f'SDK; use one of 57600, 115200, 1000000, 2000000, 3000000, 4000000')
        # A blocking read with a short timeout instead of the SDK's busy poll (timeout=0):
        # read(n) still returns as soon as n bytes are there.
        if port.ser is not None:
            port.ser.timeout = self.read_timeout_s
        self.port = port
        self._last_tick = {}
        self._sync_read = sdk.GroupSyncRead(port, self.ph, STATE_ADDR, STATE_LEN)
        for sid in self.ids:
            self._sync_read.addParam(sid)
        self._sync_write = sdk.GroupSyncWrite(port, self.ph, GOAL_ADDR, 4)

    def _drop_input(self) -> None:
        self._port().clearPort()

    def _check(self, sid: int, what: str, result: int, error: int) -> None:
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'servo {sid}: {what}: {self._count(result)}')
        if error & 0x7F:
            raise BusError(f'servo {sid}: {what}: {self.ph.getRxPacketError(error)}')

    def item(self, sid: int, name: str) -> ct.Item:
        """Control-table item ``name`` of servo ``sid``'s model (KeyError if it has none)."""
        return self._model_of[sid].item(name)

    def read_register(self, sid: int, name: str) -> int:
        """Read one control-table item of servo ``sid``."""
        it = self.item(sid, name)
        value, result, error = self._retried(self._read_answer, sid, it.address, it.size)
        self._check(sid, f'read {name}', result, error)
        return ct.to_signed(value, it.size) if it.signed else int(value)

    def read_address(self, sid: int, address: int, size: int) -> int:
        """Read ``size`` (1, 2, 4) bytes at ``address`` of servo ``sid`` once, unsigned.

        Not retried: a cycle's extra read (the leader's button) that fails fails the cycle
        (BusError), and the next cycle reads again. The answer's length is checked: the SDK
        takes the first status packet with the servo's ID, and a late answer of that servo to
        an earlier sync read (16 bytes) would otherwise be cut to ``size`` bytes and read as
        the value (a leader button seen released for one cycle while held, on a loaded host).
        """
        value, result, error = self._guard(self._read_answer, self._port(), sid, address, size)
        self._check(sid, f'read address {address}', result, error)
        return int(value)

    def _read_answer(self, port: Any, sid: int, address: int, size: int) -> tuple[int, int, int]:
        """One READ of ``size`` bytes: ``(value, result, error)`` as the SDK's readTxRx gives.

        The SDK takes the first status packet with the servo's ID and cuts it to ``size``
        bytes; an answer of any other length is a late answer to an earlier request, and its
        result is :data:`STALE` (a late 16-byte sync-read answer was read as Hardware Error
        Status 0xfc at connect, and the driver refused to start, with 5 % late answers
        injected on a loaded host).
        """
        tx = [0] * 14
        tx[sdk_p2.PKT_ID] = sid
        tx[sdk_p2.PKT_LENGTH_L] = 7
        tx[sdk_p2.PKT_INSTRUCTION] = sdk.INST_READ
        tx[sdk_p2.PKT_PARAMETER0:sdk_p2.PKT_PARAMETER0 + 4] = [
            address & 0xFF, address >> 8, size & 0xFF, size >> 8]
        rx, result, error = self.ph.txRxPacket(port, tx)
        if result != sdk.COMM_SUCCESS:
            return 0, result, error
        if rx[sdk_p2.PKT_LENGTH_L] + (rx[sdk_p2.PKT_LENGTH_H] << 8) != size + 4:
            return 0, STALE, 0
        data = rx[sdk_p2.PKT_PARAMETER0 + 1:sdk_p2.PKT_PARAMETER0 + 1 + size]
        return int.from_bytes(bytes(data), 'little'), result, error

    def write_register(self, sid: int, name: str, value: int) -> None:
        """Write one control-table item of servo ``sid`` (retried on comm errors)."""
        it = self.item(sid, name)
        fn = {1: self.ph.write1ByteTxRx, 2: self.ph.write2ByteTxRx,
              4: self.ph.write4ByteTxRx}[it.size]
        raw = ct.to_unsigned(int(value), it.size)
        result, error = self._retried(fn, sid, it.address, raw)
        self._check(sid, f'write {name}={value}', result, error)

    def gains(self) -> list[dict[str, int]]:
        """Return the register values written at configure, per servo (robot order)."""
        return [dict(regs) for regs in self._registers]

    def _spec_registers(self) -> list[dict[str, int]]:
        """Register values from the spec, each checked against its register's range.

        The effort limit becomes Goal Current on a model with current control and Goal PWM
        (``effort / stall torque * 885``) on one without; the gains convert through
        :func:`~simreal_ros.hardware.dynamixel.family.gain_torque_per_amp`.
        """
        src = str(self.robot.source)
        out = []
        for k, (j, model) in enumerate(zip(self.robot.joints, self.models, strict=True)):
            s = j.servo
            tpr = s.ticks_per_rev
            kt = gain_torque_per_amp(model, s.torque_per_amp)
            profile = 0
            if self.servo_velocity_limit:  # never 0: that would mean "no limit"
                profile = max(1, math.ceil(j.limits.velocity / model.velocity_unit_rad_s
                                           - 1e-9))
            if model.current_unit_a is not None:
                limit_name = 'goal_current'
                limit_unit = model.current_unit_a * s.torque_per_amp
            else:
                limit_name = 'goal_pwm'
                limit_unit = model.stall_torque_nm / PWM_FULL_SCALE
            regs = {
                'position_p_gain': ct.kp_to_register(j.kp, tpr, kt),
                'position_i_gain': 0,
                'position_d_gain': ct.kd_to_register(j.kd, tpr, kt),
                limit_name: int(round(j.limits.effort / limit_unit)),
                'profile_velocity': profile, 'profile_acceleration': 0,
            }
            # register: (spec key, spec value, SI value of one register unit, SI unit)
            per_unit = {
                'position_p_gain': (f'joints[{k}].gains.kp', j.kp,
                                    ct.register_to_kp(1, tpr, kt), 'N*m/rad'),
                'position_d_gain': (f'joints[{k}].gains.kd', j.kd,
                                    ct.register_to_kd(1, tpr, kt), 'N*m*s/rad'),
                limit_name: (f'joints[{k}].limits.effort', j.limits.effort, limit_unit, 'N*m'),
                'profile_velocity': (f'joints[{k}].limits.velocity', j.limits.velocity,
                                     model.velocity_unit_rad_s, 'rad/s'),
            }
            check_spec_registers(src, j, model.name, regs, per_unit, model.item)
            out.append(regs)
        return out

    def reboot(self, ids: list[int], timeout_s: float = 2.0) -> None:
        """Send REBOOT to ``ids`` (clears hardware errors; RAM, torque off) and wait for them.

        A rebooted servo has lost its RAM settings (gains, goal current, goal, torque): call
        :meth:`configure` afterwards.
        """
        for sid in ids:
            result, error = self._retried(self.ph.reboot, sid)
            self._check(sid, 'reboot', result, error)
        self.check_servos(timeout_s)  # answers again once it has booted

    def clear_hardware_errors(self, reboot: bool) -> list[int]:
        """Check Hardware Error Status; REBOOT the servos in error if ``reboot``.

        Returns the rebooted IDs. Raises BusError naming the servos and the bits when a servo
        is in error and ``reboot`` is false, or still is after the reboot.
        """
        errors = self.hardware_errors()
        if not errors:
            return []
        where = describe_servo_errors(self.robot, errors)
        if not reboot:
            raise BusError(f'{self.port_name}: hardware error: {where}; the servo has shut its '
                           f'torque off and will not enable it again: {HARDWARE_ERROR_FIX}')
        self.reboot(sorted(errors))
        still = self.hardware_errors()
        if still:
            raise BusError(f'{self.port_name}: hardware error after REBOOT: '
                           f'{describe_servo_errors(self.robot, still)}; {HARDWARE_ERROR_FIX}')
        return sorted(errors)

    def configure(self, torque: bool = True, reboot_on_error: bool = False) -> None:
        """Check hardware errors; write mode, return delay, gains and limits; hold; torque.

        Hardware Error Status is read first: a servo in error fails with a BusError naming it
        and the bits (or is rebooted first with ``reboot_on_error``). EEPROM items are written
        only when they differ (each write needs torque off, which would let the arm sag); the
        goal is set to the present position before torque on, so enabling never makes the arm
        jump. With ``torque`` false torque is written off instead (e.g. a reconnect while the
        watchdog has switched torque off). Bus Watchdog is written 0 first: it clears an expired
        one (which refuses goal writes) and leaves it off; :meth:`arm_watchdog` arms it.
        """
        self.clear_hardware_errors(reboot_on_error)
        rdt = int(round(self.return_delay_us / 2))
        for j, regs in zip(self.robot.joints, self.gains(), strict=True):
            sid = j.servo.servo_id
            self.write_register(sid, 'bus_watchdog', 0)
            mode = MODE_REGISTER[j.servo.operating_mode]
            for reg_name, value in (('operating_mode', mode),
                                    ('return_delay_time', rdt)):
                if self.read_register(sid, reg_name) != value:
                    self.write_register(sid, 'torque_enable', 0)
                    self.write_register(sid, reg_name, value)
            for reg_name, value in regs.items():
                self.write_register(sid, reg_name, value)
            present = self.read_register(sid, 'present_position')
            self.write_register(sid, 'goal_position', present)
            self.write_register(sid, 'torque_enable', 1 if torque else 0)

    def read_homing_offsets(self) -> tuple[int, ...]:
        """Homing Offset (register 20, ticks, signed) of every servo, robot order."""
        return tuple(self.read_register(sid, 'homing_offset') for sid in self.ids)

    def write_homing_offsets(self, ticks: tuple[int, ...] | list[int]) -> None:
        """Write Homing Offset ``ticks`` (robot order, absolute values) to every servo.

        Homing Offset is EEPROM: each servo's torque is switched off first (the caller
        configures again, which turns it back on where the arm is). The value is written as
        given, never added to what the register holds. Only the servos whose offset differs
        are written; the caller reads back (:meth:`read_homing_offsets`) to check they kept it.
        """
        current = self.read_homing_offsets()
        for sid, want, have in zip(self.ids, ticks, current, strict=True):
            if int(want) != have:
                self.write_register(sid, 'torque_enable', 0)
                self.write_register(sid, 'homing_offset', int(want))

    def arm_watchdog(self, units: int, ids: list[int] | None = None) -> None:
        """Write Bus Watchdog ``units`` (20 ms each, 0 = off) to ``ids`` (default: all).

        An expired one (-1) is cleared with 0 first, as the e-Manual asks.
        """
        for sid in self.ids if ids is None else ids:
            self.write_register(sid, 'bus_watchdog', 0)
            if units:
                self.write_register(sid, 'bus_watchdog', units)

    # ---- cycle -------------------------------------------------------------------------------
    def read_state(self) -> BusState:
        """One group sync read of current, velocity, position; BusError if any servo failed.

        A status packet carries no request number: after a timeout, the late answers to the
        timed-out request can arrive after the next request was sent and be taken for its
        answers. Each answer's Realtime Tick must therefore have advanced since the last
        accepted state of that servo; otherwise the read fails as ``stale`` (never published).
        """
        gsr = self._sync_read
        assert gsr is not None
        result = self._guard(gsr.txRxPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'sync read: {self._count(result)}')
        n = len(self.ids)
        cur = np.empty(n)
        vel = np.empty(n)
        pos = np.empty(n)
        ticks = []
        clock: dict[int, int] = {}
        now = time.monotonic()
        since = now - self._last_tick_mono
        for k, (sid, s) in enumerate(zip(self.ids, self.servos, strict=True)):
            if not gsr.isAvailable(sid, STATE_ADDR, STATE_LEN):
                raise BusError(f'sync read: no data from servo {sid}')
            if len(gsr.data_dict[sid]) != STATE_LEN:
                # a late answer to an earlier request (after its timeout) with this ID
                raise BusError(f'sync read: {self._count(STALE)} answer from servo {sid}')
            clock[sid] = gsr.getData(sid, STATE_ADDR + TICK_OFF, 2)
            last = self._last_tick.get(sid)
            if is_stale(clock[sid], last, since):
                raise BusError(f'sync read: {self._count(STALE)} answer from servo {sid} '
                               f'(realtime tick {clock[sid]}, last {last})')
            c = ct.to_signed(gsr.getData(sid, STATE_ADDR + CURRENT_OFF, 2), 2)
            v = ct.to_signed(gsr.getData(sid, STATE_ADDR + VELOCITY_OFF, 4), 4)
            t = ct.to_signed(gsr.getData(sid, STATE_ADDR + POSITION_OFF, 4), 4)
            ticks.append(t)
            pos[k] = s.ticks_to_rad(t)
            vel[k] = v
            cur[k] = c
        vel *= self.direction * self.velocity_unit
        eff = cur * self.direction * self.effort_unit
        self._last_tick = clock
        self._last_tick_mono = now
        return BusState(pos, vel, eff, tuple(ticks))

    def write_goal(self, position: FloatArray) -> tuple[int, ...]:
        """Group sync write of goal positions (rad, robot order); return the ticks sent."""
        assert self._sync_write is not None
        ticks = [s.rad_to_ticks(float(q))
                 for s, q in zip(self.servos, position, strict=True)]
        return self._send_sync(self._sync_write, ticks, 4, 'sync write')

    def _send_sync(self, gsw: Any, values: list[int], size: int, what: str
                   ) -> tuple[int, ...]:
        """Send one signed register value per servo (robot order) in one sync write."""
        gsw.clearParam()
        for sid, v in zip(self.ids, values, strict=True):
            gsw.addParam(sid, list(ct.to_unsigned(v, size).to_bytes(size, 'little')))
        result = self._guard(gsw.txPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'{what}: {self._count(result)}')
        return tuple(values)

    def set_torque(self, enable: bool) -> None:
        """Enable or disable torque of every servo (one sync write, then verified per servo)."""
        gsw = sdk.GroupSyncWrite(self._port(), self.ph, TORQUE_ADDR, 1)
        for sid in self.ids:
            gsw.addParam(sid, [1 if enable else 0])
        self._guard(gsw.txPacket)
        for sid in self.ids:  # a lost sync write must not leave a servo on: confirm each
            self.write_register(sid, 'torque_enable', 1 if enable else 0)

    def set_current_mode(self) -> None:
        """Torque off, Operating Mode 0 (current control), goal current 0, torque on.

        For a leader arm's gravity compensation: the servos then only push with the goal
        current written by :meth:`write_current`; :meth:`set_torque` (False) ends it.
        ConfigError (one line) if a joint's model has no current control (XL430).
        """
        require_current_control(self.robot, 'current mode (gravity compensation)')
        self.set_torque(False)  # Operating Mode is EEPROM: written with torque off
        for sid in self.ids:
            self.write_register(sid, 'operating_mode', ct.MODE_CURRENT)
            self.write_register(sid, 'goal_current', 0)
        self.set_torque(True)

    def write_current(self, current_a: FloatArray) -> tuple[int, ...]:
        """Group sync write of goal currents (A, joint direction, robot order).

        Returns the registers sent; the caller clamps (the servo clamps to its Current Limit).
        """
        gsw = sdk.GroupSyncWrite(self._port(), self.ph, _A['goal_current'].address, 2)
        regs = [int(round(float(d * a) / (m.current_unit_a or ct.CURRENT_UNIT_A)))
                for d, a, m in zip(self.direction, current_a, self.models, strict=True)]
        return self._send_sync(gsw, regs, 2, 'sync write goal current')

    def hold_present(self) -> BusState:
        """Set every goal to the present position (before enabling torque)."""
        state = self.read_state()
        gsw = self._sync_write
        assert gsw is not None
        gsw.clearParam()
        for sid, t in zip(self.ids, state.ticks, strict=True):
            gsw.addParam(sid, list(ct.to_unsigned(t, 4).to_bytes(4, 'little')))
        self._guard(gsw.txPacket)
        return state

    def read_health(self) -> ServoHealth:
        """Torque Enable .. Hardware Error Status (bulk read) and Present Temperature (sync)."""
        port = self._port()
        gbr = sdk.GroupBulkRead(port, self.ph)
        for sid in self.ids:
            gbr.addParam(sid, TORQUE_ADDR, HEALTH_LEN)
        result = self._guard(gbr.txRxPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'bulk read of hardware errors: {self._count(result)}')
        if any(len(gbr.data_dict[sid][0]) != HEALTH_LEN for sid in self.ids):  # [data, a, n]
            raise BusError(f'bulk read of hardware errors: {self._count(STALE)} answer')
        bits = tuple(int(gbr.getData(sid, HW_ERROR_ADDR, 1)) for sid in self.ids)
        torque = tuple(int(gbr.getData(sid, TORQUE_ADDR, 1)) for sid in self.ids)
        gsr = sdk.GroupSyncRead(port, self.ph, TEMPERATURE_ADDR, 1)
        for sid in self.ids:
            gsr.addParam(sid)
        result = self._guard(gsr.txRxPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'sync read of temperatures: {self._count(result)}')
        if any(len(gsr.data_dict[sid]) != 1 for sid in self.ids):
            raise BusError(f'sync read of temperatures: {self._count(STALE)} answer')
        temps = tuple(int(gsr.getData(sid, TEMPERATURE_ADDR, 1)) for sid in self.ids)
        gsr = sdk.GroupSyncRead(port, self.ph, BUS_WATCHDOG_ADDR, 1)
        for sid in self.ids:
            gsr.addParam(sid)
        result = self._guard(gsr.txRxPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'sync read of bus watchdogs: {self._count(result)}')
        if any(len(gsr.data_dict[sid]) != 1 for sid in self.ids):
            raise BusError(f'sync read of bus watchdogs: {self._count(STALE)} answer')
        watchdogs = tuple(ct.to_signed(int(gsr.getData(sid, BUS_WATCHDOG_ADDR, 1)), 1)
                          for sid in self.ids)
        return ServoHealth(bits, temps, torque, watchdogs)


__all__ = ['BusState', 'DynamixelBus', 'ServoHealth', 'describe_servo_errors',
           'open_error_message']  # BusState, ServoHealth: from hardware.family, kept here
