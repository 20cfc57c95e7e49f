"""A Feetech STS bus (STS3215 servos), over the vendor's ``scservo_sdk`` (feetech-servo-sdk).

:class:`FeetechBus` has :class:`~simreal_ros.hardware.dynamixel.bus.DynamixelBus`'s public API
(same methods, same :class:`BusState`/:class:`ServoHealth` objects), so the driver node can
drive either family: open the port, ping and model-check every servo of the robot spec
(model number read at address 3), configure them, then cycle: :meth:`read_state` (one SYNC READ
of Present Position .. Present Current, 15 bytes a servo) and :meth:`write_goal` (one SYNC WRITE
of Goal Position). Values in and out are SI in robot order, through the spec's ``zero_tick``/
``direction``/``offset_rad``/``torque_per_amp``; registers are sign-magnitude
(:mod:`simreal_ros.hardware.feetech.protocol`).

Configuration (docs/feetech.md):

* EEPROM items are written only when they differ, each as unlock (Lock 55 = 0) -> write ->
  lock (Lock = 1): a write while locked changes the servo only until its next power cycle;
* protection from the spec's effort limit: Max Torque Limit (16) and Torque Limit (48) in
  0.1 % of the model's stall torque, Protection Current (28) in 6.5 mA at 1.2 times the
  current of the effort limit, Overload Torque (36) in % at the torque limit; Protection
  Time (35) and Protective Torque (34, the output the servo falls back to once overloaded)
  from the constructor; Unloading Condition (19) gets the over-current,
  overheat and overload bits, so the servo itself acts on them (an SO-101 gripper squeezing an
  object at its limit otherwise burns out);
* position loop P/D/I coefficients (21-23) from the spec's kp/kd, checked against the
  registers' range when the bus is created (ConfigError naming the spec key).

What the STS has not: no Bus Watchdog (:meth:`FeetechBus.arm_watchdog` can only accept 0: a
driver that dies leaves the servos holding their last goal with torque on, see
docs/feetech.md), no current-control mode (:meth:`FeetechBus.set_current_mode` raises
BusError), no REBOOT instruction (:meth:`FeetechBus.reboot` clears a latched protection by
torque off instead). A status packet carries the Status bits in its ERROR byte; they are
read from Status (65), never treated as a failed transaction.

Failures are typed as on the Dynamixel bus: :class:`~simreal_ros.errors.BusError`,
:class:`~simreal_ros.errors.PortLostError` (port gone; reopen).
"""

from __future__ import annotations

import math
import os
import select
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import scservo_sdk as sdk
import scservo_sdk.port_handler as sdk_port
import serial

from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import BusError, PortLostError
from simreal_ros.hardware.family import (
    BusState,
    ServoHealth,
    ServoModel,
    resolve_robot,
    resolve_servos,
)
from simreal_ros.hardware.feetech import control_table as ct
from simreal_ros.hardware.feetech.family import FAMILY
from simreal_ros.hardware.feetech.port import BufferedPort
from simreal_ros.hardware.feetech.protocol import decode_sm, encode_sm
from simreal_ros.hardware.feetech.sync_read import (
    PKT_ERROR,
    PKT_ID,
    PKT_INSTRUCTION,
    PKT_LENGTH,
    PKT_PARAMETER0,
    sync_txrx,
)
from simreal_ros.hardware.sdk_bus import (
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
LOCK_ADDR = _A['lock'].address
#: the health block: Torque Enable (40) .. Status (65)
HEALTH_ADDR = TORQUE_ADDR
HEALTH_LEN = _A['status'].address + 1 - HEALTH_ADDR
_POS, _VEL, _CUR = (_A[n].address - ct.STATE_ADDR
                    for n in ('present_position', 'present_velocity', 'present_current'))


#: packet layout (the SDK's protocol_packet_handler): FF FF ID LEN INSTRUCTION PARAMS.. SUM
#: for a request, FF FF ID LEN ERROR PARAMS.. SUM for a status packet
COMM_NAMES = {STALE: 'stale', sdk.COMM_RX_TIMEOUT: 'timeout',
              sdk.COMM_RX_CORRUPT: 'corrupt (checksum)', sdk.COMM_TX_FAIL: 'tx failed',
              sdk.COMM_PORT_BUSY: 'port busy', sdk.COMM_RX_FAIL: 'rx failed',
              sdk.COMM_TX_ERROR: 'bad packet', sdk.COMM_NOT_AVAILABLE: 'not available'}

#: what to do about a latched protection (the servo unloaded or fell to Protective Torque)
PROTECTION_FIX = ('remove the cause (blocked joint, a gripper squeezing at its limit, heat, '
                  'supply voltage), then power-cycle the servos or launch with '
                  'reboot_on_error:=true (torque off and on clears the protection)')

#: Unloading Condition: the protections the servo acts on by itself
UNLOADING = ct.ST_OVERCURRENT | ct.ST_OVERHEAT | ct.ST_OVERLOAD

PROTECTION_CURRENT_MARGIN = 1.2

SDK_BAUDS = (38_400, 57_600, 115_200, 128_000, 250_000, 500_000, 1_000_000)


def describe_servo_status(robot: RobotSpec, errors: dict[int, int]) -> str:
    """``servo ID 6 (gripper): overload (0x20)`` for every servo in ``errors``."""
    return '; '.join(f'servo ID {j.servo.servo_id} ({j.name}): '
                     f'{ct.describe_status(errors[j.servo.servo_id])} '
                     f'(0x{errors[j.servo.servo_id]:02x})'
                     for j in robot.joints if errors.get(j.servo.servo_id))


class FeetechBus(SdkBus):
    """The STS servos of one robot spec on one serial port."""

    def __init__(self, robot: RobotSpec, port: str, baud: int, *,
                 return_delay_us: int = 0, latency_timer_ms: float = 16.0,
                 read_timeout_s: float = 0.002, servo_velocity_limit: bool = False,
                 one_read_sync: bool = False,
                 protection_time_s: float = 2.0, protective_torque_pct: int = 20) -> None:
        """Prepare the bus (nothing is opened yet).

        ``latency_timer_ms``: the SDK's packet-timeout margin (its ``LATENCY_TIMER``; a
        request times out after its bytes plus twice this plus 2 ms). ``read_timeout_s``: the
        blocking read of :class:`BufferedPort`; 0 = the SDK's own PortHandler (busy poll).
        ``one_read_sync``: receive a SYNC READ's answers in one read of all their bytes
        (:func:`~simreal_ros.hardware.feetech.sync_read.sync_receive`) instead of the SDK's
        per-packet receive (``bench/bus.py`` compares the two: a fifth less CPU a cycle, no
        higher rate; docs/feetech.md).
        ``servo_velocity_limit``: write Goal Velocity (the servo's profile speed) from the
        spec's velocity limits. The spec's servos are resolved through the family layer
        (:func:`~simreal_ros.hardware.family.resolve_robot`: model number, torque per amp and
        mode from the model where the spec leaves them out). Raises ConfigError when the spec
        names an unknown model or a value derived from it does not fit its register.
        """
        robot = resolve_robot(robot)  # model_number, torque_per_amp, mode from the models
        self.robot = robot
        self.models: tuple[ServoModel, ...] = resolve_servos(robot)
        self.port_name = port
        self.baud = baud
        self.return_delay_us = return_delay_us
        self.read_timeout_s = read_timeout_s
        self.one_read_sync = one_read_sync
        self.servo_velocity_limit = servo_velocity_limit
        self.protection_time_s = protection_time_s
        self.protective_torque_pct = protective_torque_pct
        sdk_port.LATENCY_TIMER = latency_timer_ms
        self.ids = [j.servo.servo_id for j in robot.joints]
        self.servos = [j.servo for j in robot.joints]
        self.direction = np.array([s.direction for s in self.servos], dtype=np.float64)
        self.kt = np.array([s.torque_per_amp for s in self.servos])
        self.ph = sdk.PacketHandler(0)  # protocol_end 0: STS, little-endian
        self.port: sdk.PortHandler | None = None
        self.comm_errors: dict[str, int] = {}
        self.comm_names = COMM_NAMES
        self.family = FAMILY
        self.error_register = 'status'  # Status (65): the STS's latched protection bits
        self._sync_read: sdk.GroupSyncRead | None = None
        self._sync_write: sdk.GroupSyncWrite | None = None
        self._registers = self._spec_registers()

    def open(self) -> None:
        """Open the port at the baud rate; BusError naming the port if it cannot be."""
        if not os.path.exists(self.port_name):
            raise PortLostError(f'serial port {self.port_name} does not exist: plug in the '
                                f'adapter (or start simreal emulate --link {self.port_name})')
        port: sdk.PortHandler = BufferedPort(self.port_name) if self.read_timeout_s > 0 \
            else sdk.PortHandler(self.port_name)
        port.read_timeout_s = self.read_timeout_s
        port.baudrate = self.baud
        try:
            ok = port.setBaudRate(self.baud)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise PortLostError(open_error_message(self.port_name, exc)) from None
        if not ok:
            raise BusError(f'{self.port_name}: baud rate {self.baud} is not supported by the '
                           f'SDK; use one of {", ".join(map(str, SDK_BAUDS))}')
        self.port = port
        self._sync_read = sdk.GroupSyncRead(port, self.ph, ct.STATE_ADDR, ct.STATE_LEN)
        for sid in self.ids:
            self._sync_read.addParam(sid)
        self._sync_write = sdk.GroupSyncWrite(port, self.ph, GOAL_ADDR, 2)

    def _drop_input(self) -> None:
        """Drop what the port has received (a late answer must not answer the next request)."""
        port = self._port()
        try:
            if isinstance(port, BufferedPort):
                port.clearPort()
            elif port.ser is not None:
                port.ser.reset_input_buffer()
        except PORT_FAILURES as exc:
            self.close()
            raise PortLostError(f'{self.port_name}: {exc or type(exc).__name__}') from None

    def read_register(self, sid: int, name: str) -> int:
        """Read one memory-table item of servo ``sid`` (sign-magnitude items decoded)."""
        it = _A[name]
        data, result, _error = self._retried(self._read_checked, sid, it.address, it.size)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'servo {sid}: read {name}: {self._count(result)}')
        raw = int.from_bytes(bytes(data), 'little')
        return decode_sm(raw, it.sign_bit) if it.sign_bit is not None else raw

    def _read_checked(self, port: Any, sid: int, address: int, size: int
                      ) -> tuple[list[int], int, int]:
        """One READ of ``size`` bytes at ``address``, its answer checked against the request.

        The input is dropped before the request; the answer must carry the servo's ID (other
        IDs are skipped, as the SDK does), a valid checksum (the SDK's ``rxPacket``) and the
        LENGTH of ``size`` parameters, else the result is STALE. The SDK's ``readTxRx``
        copies the first ``size`` bytes of whatever packet of the ID comes first: the late
        15-byte answer to a state sync read was read as Status (its first byte Present
        Position's low byte, 0x7c/0x96/0x61 per leg: "servo protection" on every servo of
        simreal_quad on a loaded host), and the late answer to a write (no data) made the
        checksum byte the data. An answer of the same length to an earlier request passes
        these checks: :meth:`hardware_errors` confirms what it finds.
        """
        if not isinstance(port, BufferedPort) and port.ser is not None:
            port.ser.reset_input_buffer()  # BufferedPort.clearPort does it in txPacket
        tx = [0] * 8
        tx[PKT_ID], tx[PKT_LENGTH], tx[PKT_INSTRUCTION] = sid, 4, sdk.INST_READ
        tx[PKT_PARAMETER0:PKT_PARAMETER0 + 2] = [address, size]
        result = self.ph.txPacket(port, tx)
        if result != sdk.COMM_SUCCESS:
            return [], int(result), 0
        port.setPacketTimeout(size + 6)
        while True:
            packet, result = self.ph.rxPacket(port)
            if result != sdk.COMM_SUCCESS:
                return [], int(result), 0
            if packet[PKT_ID] == sid:
                break
        if packet[PKT_LENGTH] != size + 2:  # parameters + ERROR + CHECKSUM
            return [], STALE, 0
        return list(packet[PKT_PARAMETER0:PKT_PARAMETER0 + size]), int(sdk.COMM_SUCCESS), \
            int(packet[PKT_ERROR])

    def read_address(self, sid: int, address: int, size: int) -> int:
        """Read ``size`` bytes at ``address`` of servo ``sid`` once (not retried), unsigned."""
        data, result, _error = self._guard(self._read_checked, self._port(), sid, address, size)
        if result != sdk.COMM_SUCCESS:
            self._drop_input()
            raise BusError(f'servo {sid}: read address {address}: {self._count(result)}'
                           + (' answer' if result == STALE else ''))
        return int.from_bytes(bytes(data), 'little')

    def hardware_errors(self) -> dict[int, int]:
        """Status (65) of every servo: ``{servo ID: bits}`` of those with bits set.

        Bits found are confirmed: once the line has been quiet for :attr:`quiet_s` (late
        answers drained and dropped), Status is read again and the second value is reported
        (0: not a protection). A late 1-byte answer to an earlier READ of the same servo
        (Present Temperature 25, say) passes every check of the packet; a latched protection
        stays set until torque off.
        """
        first = super().hardware_errors()
        if not first:
            return {}
        self._drain_input()
        out = {}
        for sid in first:
            bits = self.read_register(sid, self.error_register)
            if bits:
                out[sid] = bits
        return out

    #: how long the line must stay silent before a confirming read (late answers seen: 20-50
    #: ms after a timed-out request on a loaded host)
    quiet_s = 0.1

    def _drain_input(self, budget_s: float = 1.0) -> None:
        """Drop input until none has arrived for :attr:`quiet_s` (at most ``budget_s``)."""
        port = self._port()
        deadline = time.monotonic() + budget_s
        try:
            while True:
                self._drop_input()
                fd = port.ser.fileno()
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], min(self.quiet_s, left))[0]:
                    break
        except PORT_FAILURES as exc:
            self.close()
            raise PortLostError(f'{self.port_name}: {exc or type(exc).__name__}') from None
        self._drop_input()

    def write_register(self, sid: int, name: str, value: int) -> None:
        """Write one item of servo ``sid`` (retried on comm errors); EEPROM items stay locked.

        An EEPROM item written this way changes the servo until its next power cycle only;
        :meth:`write_eeprom` keeps it.
        """
        it = _A[name]
        if it.minimum is not None and it.maximum is not None and \
                not it.minimum <= int(value) <= it.maximum:
            raise BusError(f'servo {sid}: write {name}={value}: outside the register '
                           f'({it.minimum}..{it.maximum})')
        raw = encode_sm(int(value), it.sign_bit) if it.sign_bit is not None else int(value)
        data = list(raw.to_bytes(it.size, 'little'))
        result, _error = self._retried(self.ph.writeTxRx, sid, it.address, it.size, data)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'servo {sid}: write {name}={value}: {self._count(result)}')

    def write_eeprom(self, sid: int, values: dict[str, int]) -> None:
        """Write EEPROM items so that they survive a power cycle: unlock, write, lock."""
        self.write_register(sid, 'lock', 0)
        try:
            for name, value in values.items():
                self.write_register(sid, name, value)
        finally:
            self.write_register(sid, 'lock', 1)

    def read_homing_offsets(self) -> tuple[int, ...]:
        """Homing Offset (address 31, ticks, sign-magnitude) of every servo, robot order."""
        return tuple(self.read_register(sid, 'homing_offset') for sid in self.ids)

    def write_homing_offsets(self, ticks: tuple[int, ...] | list[int]) -> None:
        """Write Homing Offset ``ticks`` (robot order, absolute values) to every servo.

        As DynamixelBus's: torque off first, the value written as given (never added to what
        the register holds), only where it differs; and, the STS's Homing Offset being EEPROM
        behind the Lock register, unlocked and locked again (:meth:`write_eeprom`) so that it
        survives a power cycle. The caller reads back to check.
        """
        current = self.read_homing_offsets()
        for sid, want, have in zip(self.ids, ticks, current, strict=True):
            if int(want) != have:
                self.write_register(sid, 'torque_enable', 0)
                self.write_eeprom(sid, {'homing_offset': int(want)})

    def gains(self) -> list[dict[str, int]]:
        """Return the register values written at configure, per servo (robot order)."""
        return [dict(regs) for regs in self._registers]

    def _spec_registers(self) -> list[dict[str, int]]:
        """Register values from the spec, each checked against its register's range."""
        src = str(self.robot.source)
        out = []
        for k, (j, m) in enumerate(zip(self.robot.joints, self.models, strict=True)):
            s = j.servo
            tpr, kt = s.ticks_per_rev, s.torque_per_amp
            torque = ct.effort_to_torque_register(j.limits.effort, m.stall_torque_nm)
            speed = 0
            if self.servo_velocity_limit:  # never 0: that would mean "as fast as it can"
                speed = max(1, math.ceil(j.limits.velocity / ct.VELOCITY_UNIT_RAD_S - 1e-9))
            regs = {
                'p_coefficient': ct.kp_to_register(j.kp, tpr, kt),
                'd_coefficient': ct.kd_to_register(j.kd, tpr, kt),
                'i_coefficient': 0,
                'max_torque_limit': torque,
                # 20 % above the current of the effort limit: the torque limit caps the
                # output there, so over-current (torque off) is the backstop for a fault
                'protection_current': ct.effort_to_current_register(
                    PROTECTION_CURRENT_MARGIN * j.limits.effort, kt),
                # at or below the torque limit: an output held at the limit for Protection
                # Time is an overload (the servo falls to Protective Torque)
                'overload_torque': max(1, min(100, torque // 10)),
                'protection_time': int(round(self.protection_time_s
                                             / ct.PROTECTION_TIME_UNIT_S)),
                'protective_torque': int(self.protective_torque_pct),
                'unloading_condition': UNLOADING,
                'torque_limit': torque,
                'goal_velocity': speed,
            }
            # register: (spec key, spec value, SI value of one unit, SI unit)
            per_unit = {
                'p_coefficient': (f'joints[{k}].gains.kp', j.kp,
                                  ct.register_to_kp(1, tpr, kt), 'N*m/rad'),
                'd_coefficient': (f'joints[{k}].gains.kd', j.kd,
                                  ct.register_to_kd(1, tpr, kt), 'N*m*s/rad'),
                'max_torque_limit': (f'joints[{k}].limits.effort', j.limits.effort,
                                     ct.TORQUE_UNIT * m.stall_torque_nm, 'N*m'),
                'protection_current': (f'joints[{k}].limits.effort', j.limits.effort,
                                       ct.CURRENT_UNIT_A * kt, 'N*m'),
                'goal_velocity': (f'joints[{k}].limits.velocity', j.limits.velocity,
                                  ct.VELOCITY_UNIT_RAD_S, 'rad/s'),
                'protection_time': ('protection_time_s', self.protection_time_s,
                                    ct.PROTECTION_TIME_UNIT_S, 's'),
                'protective_torque': ('protective_torque_pct', self.protective_torque_pct,
                                      1, '%'),
            }
            check_spec_registers(src, j, m.name, regs, per_unit, _A.__getitem__)
            out.append(regs)
        return out

    def reboot(self, ids: list[int], timeout_s: float = 2.0) -> None:
        """Clear a latched protection of ``ids``: torque off (the STS has no REBOOT).

        Torque is off afterwards: call :meth:`configure` again.
        """
        for sid in ids:
            self.write_register(sid, 'torque_enable', 0)
        self.check_servos(timeout_s)

    def clear_hardware_errors(self, reboot: bool) -> list[int]:
        """Check Status; clear the servos in error (torque off) if ``reboot``.

        Returns the cleared IDs. Raises BusError naming the servos and the bits when a servo
        is in error and ``reboot`` is false, or still is afterwards.
        """
        errors = self.hardware_errors()
        if not errors:
            return []
        where = describe_servo_status(self.robot, errors)
        if not reboot:
            raise BusError(f'{self.port_name}: servo protection: {where}; {PROTECTION_FIX}')
        self.reboot(sorted(errors))
        still = self.hardware_errors()
        if still:
            raise BusError(f'{self.port_name}: servo protection after torque off: '
                           f'{describe_servo_status(self.robot, still)}; {PROTECTION_FIX}')
        return sorted(errors)

    def configure(self, torque: bool = True, reboot_on_error: bool = False) -> None:
        """Check Status; write mode, return delay, gains and protections; hold; torque.

        EEPROM items are written only when they differ, unlocked and locked again (flash
        wears, and each write while locked would be lost at the next power cycle). The goal is
        set to the present position before torque on, so enabling never makes the arm jump.
        """
        self.clear_hardware_errors(reboot_on_error)
        rdt = int(round(self.return_delay_us / 2))
        for sid, regs in zip(self.ids, self.gains(), strict=True):
            wanted = {'operating_mode': ct.MODE_POSITION, 'return_delay_time': rdt}
            wanted.update({k: v for k, v in regs.items() if _A[k].eeprom})
            changed = {k: v for k, v in wanted.items() if self.read_register(sid, k) != v}
            if changed:
                self.write_register(sid, 'torque_enable', 0)
                self.write_eeprom(sid, changed)
            for name in ('torque_limit', 'goal_velocity'):
                self.write_register(sid, name, regs[name])
            self.write_register(sid, 'acceleration', 0)
            self.write_register(sid, 'goal_position',
                                self.read_register(sid, 'present_position'))
            self.write_register(sid, 'torque_enable', 1 if torque else 0)

    def arm_watchdog(self, units: int, ids: list[int] | None = None) -> None:
        """Do nothing: the STS has no Bus Watchdog (docs/feetech.md says what that means).

        Accepted and ignored, so a driver configured for it runs; :attr:`has_watchdog` says
        so to a caller that wants to know.
        """

    has_watchdog = False

    # ---- cycle -------------------------------------------------------------------------------
    def read_state(self) -> BusState:
        """One SYNC READ of position, speed, load .. current; BusError if any servo failed."""
        gsr = self._sync_read
        assert gsr is not None
        result = self._guard(sync_txrx, self.ph, gsr, self.one_read_sync)
        if result != sdk.COMM_SUCCESS:
            self._drop_input()
            raise BusError(f'sync read: {self._count(result)}')
        n = len(self.ids)
        cur = np.empty(n)
        vel = np.empty(n)
        pos = np.empty(n)
        ticks = []
        for k, (sid, s) in enumerate(zip(self.ids, self.servos, strict=True)):
            d = gsr.data_dict.get(sid)
            if d is None or len(d) != ct.STATE_LEN:
                self._drop_input()
                raise BusError(f'sync read: {self._count(STALE)} answer from servo {sid}')
            t = decode_sm(d[_POS] | (d[_POS + 1] << 8), 15)
            ticks.append(t)
            pos[k] = s.ticks_to_rad(t)
            vel[k] = decode_sm(d[_VEL] | (d[_VEL + 1] << 8), 15)
            cur[k] = decode_sm(d[_CUR] | (d[_CUR + 1] << 8), 15)
        vel *= self.direction * ct.VELOCITY_UNIT_RAD_S
        eff = cur * self.direction * ct.CURRENT_UNIT_A * self.kt
        return BusState(pos, vel, eff, tuple(ticks))

    def write_goal(self, position: FloatArray) -> tuple[int, ...]:
        """SYNC WRITE of goal positions (rad, robot order); return the ticks sent."""
        assert self._sync_write is not None
        ticks = [s.rad_to_ticks(float(q)) for s, q in zip(self.servos, position, strict=True)]
        return self._send_sync(self._sync_write, ticks, 15, 'sync write')

    def _send_sync(self, gsw: Any, values: list[int], sign_bit: int | None, what: str
                   ) -> tuple[int, ...]:
        gsw.clearParam()
        for sid, v in zip(self.ids, values, strict=True):
            try:
                raw = encode_sm(v, sign_bit) if sign_bit is not None else v
            except ValueError as exc:
                raise BusError(f'{what}: servo {sid}: {exc}') from None
            gsw.addParam(sid, list(raw.to_bytes(gsw.data_length, 'little')))
        result = self._guard(gsw.txPacket)
        if result != sdk.COMM_SUCCESS:
            raise BusError(f'{what}: {self._count(result)}')
        return tuple(values)

    def set_torque(self, enable: bool) -> None:
        """Enable or disable torque of every servo (one sync write, then verified per servo)."""
        gsw = sdk.GroupSyncWrite(self._port(), self.ph, TORQUE_ADDR, 1)
        self._send_sync(gsw, [1 if enable else 0] * len(self.ids), None, 'sync write torque')
        for sid in self.ids:  # a lost sync write must not leave a servo on: confirm each
            self.write_register(sid, 'torque_enable', 1 if enable else 0)

    def set_current_mode(self) -> None:
        """Not offered: the STS has no current-control mode (mode 2 is open-loop PWM)."""
        raise BusError(f'{self.port_name}: Feetech STS servos have no current-control mode '
                       f'(gravity compensation of a leader arm needs Dynamixel servos)')

    def write_current(self, current_a: FloatArray) -> tuple[int, ...]:
        """Not offered: see :meth:`set_current_mode`."""
        self.set_current_mode()
        return ()

    def hold_present(self) -> BusState:
        """Set every goal to the present position (before enabling torque)."""
        state = self.read_state()
        assert self._sync_write is not None
        self._send_sync(self._sync_write, list(state.ticks), 15, 'sync write')
        return state

    def read_health(self) -> ServoHealth:
        """Torque Enable (40) .. Status (65) of every servo in one SYNC READ.

        ``bus_watchdog`` is all 0 (off): the STS has none.
        """
        gsr = sdk.GroupSyncRead(self._port(), self.ph, HEALTH_ADDR, HEALTH_LEN)
        for sid in self.ids:
            gsr.addParam(sid)
        result = self._guard(sync_txrx, self.ph, gsr, self.one_read_sync)
        if result != sdk.COMM_SUCCESS:
            self._drop_input()
            raise BusError(f'sync read of servo status: {self._count(result)}')
        if any(len(gsr.data_dict[sid]) != HEALTH_LEN for sid in self.ids):
            self._drop_input()
            raise BusError(f'sync read of servo status: {self._count(STALE)} answer')
        at = {n: _A[n].address - HEALTH_ADDR
              for n in ('status', 'present_temperature', 'torque_enable')}
        d = gsr.data_dict
        return ServoHealth(tuple(int(d[s][at['status']]) for s in self.ids),
                           tuple(int(d[s][at['present_temperature']]) for s in self.ids),
                           tuple(int(d[s][at['torque_enable']]) for s in self.ids),
                           tuple(0 for _ in self.ids))


__all__ = ['BusState', 'FeetechBus', 'ServoHealth', 'describe_servo_status']
