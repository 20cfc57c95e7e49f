"""The STS3215 servos of the virtual Feetech bus: their memory table and their behaviour.

:class:`StsRegisters` is one servo's memory table as bytes
(:mod:`simreal_ros.hardware.feetech.control_table`): multi-byte items little-endian, signed
items sign-magnitude as written (a homing offset written with bits above its sign bit keeps
them, and reads back as the wrapped value a real servo reports). The EEPROM part (below 40)
has a flash copy: a write with Lock (55) = 0 goes to both, a write while locked to the working
copy only, and :meth:`StsRegisters.power_cycle` reloads the working copy from flash (the RAM
items from their defaults, Torque Limit from Max Torque Limit). Writes to read-only or
unlisted bytes, and unsigned values outside an item's range, are ignored without an error
(an STS reports no access errors; the bus reads back what matters).

:class:`StsArm` is the :class:`~simreal_ros.hardware.emulator.reality.VirtualArm` (MuJoCo +
hidden reality) with STS servos: the position loop is ``current [6.5 mA] = P/8 * E + D * W``
(E error in steps, W steps/ms; docs/feetech.md), its output clamped to Torque Limit (48, 0.1 %
of the model's stall torque); Goal Velocity (46) and Acceleration (41) shape a profile
(0 = none); Present Position = encoder - Homing Offset (31); Torque Enable 128 makes the
present position 2048 by writing Homing Offset. Protections, each acted on when its Status bit
is set in Unloading Condition (19):

* overload: load at or above Overload Torque (36, %) for Protection Time (35, 10 ms) sets
  Status 0x20 and the output falls to Protective Torque (34, %);
* over-current: current at or above Protection Current (28, 6.5 mA) for Over-current
  Protection Time (38, 10 ms) sets 0x08 and the servo unloads (torque off);
* overheating: temperature at Max Temperature Limit (13) sets 0x04 and the servo unloads.

Writing Torque Enable clears Status and the protection (a real servo recovers the same way
or by a power cycle). The STS has no Bus Watchdog: a servo keeps its last goal forever.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from simreal_ros.core.dynamics import Overlay
from simreal_ros.core.robot import RobotSpec
from simreal_ros.hardware.emulator.reality import FloatArray, VirtualArm
from simreal_ros.hardware.family import ServoModel
from simreal_ros.hardware.feetech import control_table as ct
from simreal_ros.hardware.feetech.protocol import decode_sm, encode_sm
from simreal_ros.sim.scene import Scene

_A = ct.BY_NAME
LOCK_ADDR = _A['lock'].address


class StsRegisters:
    """One STS servo's memory table as bytes, with a flash copy of its EEPROM part."""

    def __init__(self, servo_id: int, model_number: int) -> None:
        self.mem = bytearray(ct.TABLE_SIZE)
        self.owner: list[ct.Item | None] = [None] * ct.TABLE_SIZE
        for it in ct.ITEMS:
            for a in range(it.address, it.address + it.size):
                self.owner[a] = it
            self.set(it.name, it.default)
        self.set('model_number', model_number)
        self.set('id', servo_id)
        self.flash = bytes(self.mem[:ct.EEPROM_END])
        self.defaults = bytes(self.mem)

    def raw(self, name: str) -> int:
        """Return the unsigned bytes of item ``name``."""
        it = _A[name]
        return int.from_bytes(self.mem[it.address:it.address + it.size], 'little')

    def get(self, name: str) -> int:
        """Value of item ``name`` (sign-magnitude items decoded)."""
        it = _A[name]
        raw = self.raw(name)
        return decode_sm(raw, it.sign_bit) if it.sign_bit is not None else raw

    def set(self, name: str, value: int) -> None:
        """Store ``value`` into item ``name`` (no checks: the device itself writes)."""
        it = _A[name]
        v = int(value)
        if it.sign_bit is not None:
            lim = (1 << it.sign_bit) - 1
            v = encode_sm(max(-lim, min(lim, v)), it.sign_bit)
        self.mem[it.address:it.address + it.size] = (v & ((1 << 8 * it.size) - 1)) \
            .to_bytes(it.size, 'little')

    def read(self, address: int, length: int) -> bytes | None:
        """Return the data of a READ, or None when it reaches past the table (no answer)."""
        if length <= 0 or address < 0 or address + length > ct.TABLE_SIZE:
            return None
        return bytes(self.mem[address:address + length])

    def check_write(self, address: int, data: bytes) -> list[tuple[ct.Item, int]]:
        """Return the items a WRITE of ``data`` at ``address`` sets, as ``(item, raw value)``."""
        out: list[tuple[ct.Item, int]] = []
        a, end = address, address + len(data)
        while 0 <= a < min(end, ct.TABLE_SIZE):
            it = self.owner[a]
            if it is None or it.address != a or a + it.size > end:
                a += 1
                continue
            raw = int.from_bytes(data[a - address:a - address + it.size], 'little')
            a += it.size
            if not it.writable:
                continue
            if it.sign_bit is None and it.maximum is not None and \
                    not (it.minimum or 0) <= raw <= it.maximum:
                continue
            out.append((it, raw))
        return out

    def store(self, it: ct.Item, raw: int) -> None:
        """Store a written raw value; into flash too for EEPROM items while unlocked."""
        self.mem[it.address:it.address + it.size] = raw.to_bytes(it.size, 'little')
        if it.eeprom and self.mem[LOCK_ADDR] == 0:
            f = bytearray(self.flash)
            f[it.address:it.address + it.size] = raw.to_bytes(it.size, 'little')
            self.flash = bytes(f)

    def power_cycle(self) -> None:
        """Power off and on: EEPROM from flash, RAM from defaults, Torque Limit from 16."""
        self.mem[:] = self.defaults
        self.mem[:ct.EEPROM_END] = self.flash
        self.set('torque_limit', self.get('max_torque_limit'))


class StsArm(VirtualArm):
    """The virtual arm driven by STS servos (see the module docstring)."""

    servos: list[StsRegisters]  # type: ignore[assignment]

    def __init__(self, robot: RobotSpec, overlay: Overlay | None = None, seed: int = 0,
                 scene: Scene | None = None) -> None:
        n = robot.n
        self.stall = np.array([(ct.find_model(j.servo.model) or ct.MODELS['STS3215'])
                               .stall_torque_nm for j in robot.joints])
        self.protected = np.zeros(n, dtype=bool)
        self.overload_s = np.zeros(n)
        self.overcurrent_s = np.zeros(n)
        # the protection settings of the registers, cached by refresh_servo
        self.overload_nm = np.zeros(n)
        self.protection_time_s = np.zeros(n)
        self.protection_a = np.zeros(n)
        self.overcurrent_time_s = np.zeros(n)
        self.status_bits = np.zeros(n, dtype=np.int64)
        super().__init__(robot, overlay, seed, scene)

    def _registers(self, servo_id: int, model_number: int,  # type: ignore[override]
                   model: ServoModel) -> StsRegisters:
        return StsRegisters(servo_id, model_number)

    # ---- register side effects ----------------------------------------------------------------
    def refresh_servo(self, i: int) -> None:
        """Re-read coefficients, torque limit, torque enable of servo ``i``."""
        reg = self.servos[i]
        tpr, kt = int(self.tpr[i]), float(self.kt[i])
        self.kp[i] = ct.register_to_kp(reg.get('p_coefficient'), tpr, kt) * self.p_scale[i]
        self.kd[i] = ct.register_to_kd(reg.get('d_coefficient'), tpr, kt) * self.d_scale[i]
        self.ki[i] = ct.ki_from_register(reg.get('i_coefficient'), tpr, kt, self.dt) \
            * self.p_scale[i]
        frac = reg.get('torque_limit') * ct.TORQUE_UNIT
        if self.protected[i]:
            frac = min(frac, reg.get('protective_torque') / 100.0)
        self.limit[i] = frac * self.stall[i]
        self.temperature_limit[i] = reg.get('max_temperature_limit')
        self.overload_nm[i] = reg.get('overload_torque') / 100.0 * self.stall[i]
        self.protection_time_s[i] = reg.get('protection_time') * ct.PROTECTION_TIME_UNIT_S
        self.protection_a[i] = reg.get('protection_current') * ct.CURRENT_UNIT_A
        self.overcurrent_time_s[i] = reg.get('over_current_protection_time') \
            * ct.PROTECTION_TIME_UNIT_S
        self.status_bits[i] = reg.get('status')
        on = reg.get('torque_enable') == 1
        if on and not self.torque_on[i]:  # torque switched on: the profile starts from here
            self.desired[i] = float(self.sim.joint_positions()[i])
            self.desired_vel[i] = 0.0
            self.integral[i] = 0.0
        self.torque_on[i] = on
        kp, kd = (self.kp[i], self.kd[i]) if on else (0.0, 0.0)
        self.sim.set_servo(i, kp, kd, self.limit[i] if on else 0.0)

    def write(self, i: int, items: list[tuple[ct.Item, int]]) -> int:  # type: ignore[override]
        """Apply the items of a write (raw values) to servo ``i``; always 0 (no errors)."""
        reg = self.servos[i]
        refresh = False
        for it, raw in items:
            refresh = refresh or it.name not in _NO_REFRESH
            if it.name == 'torque_enable':
                self.protected[i] = False  # written: protection and Status cleared
                self.overload_s[i] = self.overcurrent_s[i] = 0.0
                reg.set('status', 0)
                if raw == ct.TORQUE_CALIBRATE:
                    enc = self.q_to_ticks(i, float(self._measure(
                        self.true_position(), noise=False)[i]))
                    offset = enc - 2048
                    if abs(offset) <= 2047:
                        reg.set('homing_offset', offset)
                    continue
            reg.store(it, raw)
            if it.name == 'goal_position':
                ticks = reg.get('goal_position')
                lo, hi = reg.get('min_position_limit'), reg.get('max_position_limit')
                if hi > lo:  # angle limits on (0, 0 = multi-turn): the goal is clamped
                    ticks = max(lo, min(hi, ticks))
                q = self.ticks_to_q(i, ticks + reg.get('homing_offset'))
                if self.delay_steps:
                    self._pending.append((self.step_count + self.delay_steps, i, q))
                else:
                    self.goal[i] = q
        if refresh:  # a goal alone changes no gain or limit (6 refreshes took ~100 us)
            self.refresh_servo(i)
        return 0

    def power_cycle(self, i: int) -> None:
        """Servo ``i`` loses power and comes back: registers as after power-on, torque off."""
        reg = self.servos[i]
        reg.power_cycle()
        self.protected[i] = False
        self.overload_s[i] = self.overcurrent_s[i] = 0.0
        q = float(self.sim.joint_positions()[i])
        self.goal[i] = q
        reg.set('goal_position', self.q_to_ticks(i, q) - reg.get('homing_offset'))
        self.refresh_servo(i)

    def _profile(self, i: int) -> None:
        reg = self.servos[i]
        vmax = abs(reg.get('goal_velocity')) * ct.VELOCITY_UNIT_RAD_S
        goal = self.goal[i]
        if vmax <= 0:
            self.desired_vel[i] = 0.0
            self.desired[i] = goal
            return
        acc = reg.get('acceleration') * ct.ACCELERATION_UNIT_RAD_S2
        err = goal - self.desired[i]
        if acc > 0:
            v_target = math.copysign(min(vmax, math.sqrt(2 * acc * abs(err))), err)
            dv = max(-acc * self.dt, min(acc * self.dt, v_target - self.desired_vel[i]))
            v = self.desired_vel[i] + dv
        else:
            v = math.copysign(min(vmax, abs(err) / self.dt), err)
        nxt = self.desired[i] + v * self.dt
        if (goal - nxt) * err <= 0:
            nxt, v = goal, 0.0
        self.desired[i], self.desired_vel[i] = nxt, v

    # ---- physics and protections --------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps, then run the servos' protections over that time."""
        super().step(n)
        self._protect(n * self.dt)

    def _check_faults(self) -> None:
        """Skip the Dynamixel rules: :meth:`_protect` is the STS's."""

    def _protect(self, dt: float) -> None:
        """Advance the protection timers by ``dt``; set Status bits and act on them.

        Vectorized over the servos with the settings cached by :meth:`refresh_servo`: this
        runs after every physics step (1 kHz), in the emulator's one loop.
        """
        _q, _qd, tau = self.sim.joint_state()
        on = self.torque_on
        torque = np.abs(tau)
        over = on & (torque >= 0.98 * self.overload_nm)
        self.overload_s = np.where(over, self.overload_s + dt, 0.0)
        amps = on & (torque / self.kt >= self.protection_a)
        self.overcurrent_s = np.where(amps, self.overcurrent_s + dt, 0.0)
        trip = ((self.overload_s >= self.protection_time_s) * ct.ST_OVERLOAD
                | (self.overcurrent_s >= self.overcurrent_time_s) * ct.ST_OVERCURRENT
                | (on & (self.temperature >= self.temperature_limit)) * ct.ST_OVERHEAT)
        if not (trip & ~self.status_bits).any():
            return
        for i in np.flatnonzero(trip & ~self.status_bits):
            reg = self.servos[i]
            bits = int(self.status_bits[i] | trip[i])
            reg.set('status', bits)
            self.status_bits[i] = bits
            acted = bits & reg.get('unloading_condition')
            if acted & ct.ST_OVERLOAD:
                self.protected[i] = True
            if acted & (ct.ST_OVERCURRENT | ct.ST_OVERHEAT):
                reg.set('torque_enable', 0)
            self.refresh_servo(int(i))

    def update_present(self) -> None:
        """Write the present-value registers from the physics state (before a read).

        Packed into the memory bytes directly, in plain Python over the few servos: this runs
        for every read the host sends, in the emulator's one loop, and the per-register path
        (``reg.set`` of each item) took 240 us for 6 servos here, the numpy-per-item one
        156 us, this one about 60 us.
        """
        q, qd, tau = self.sim.joint_state()
        self._write_present(q, qd, tau)

    def _write_present(self, q: FloatArray, qd: FloatArray, tau: FloatArray) -> None:
        """Pack the present values of link angles ``q``, speeds ``qd``, torques ``tau``."""
        meas = self._measure(q, noise=True)
        d = self.direction
        enc = self.encoder_ticks(meas).tolist()
        vel = (d * qd / ct.VELOCITY_UNIT_RAD_S).tolist()
        load = (d * tau / self.stall / ct.TORQUE_UNIT).tolist()
        cur = (d * tau / self.kt / ct.CURRENT_UNIT_A).tolist()
        temp = self.temperature.tolist()
        for i, reg in enumerate(self.servos):
            mem = reg.mem
            h = mem[_HOMING] | (mem[_HOMING + 1] << 8)
            h = -(h & 0x7FF) if h & 0x800 else h & 0x7FF
            v = round(vel[i])
            mem[_PRESENT:_PRESENT + 6] = _PACK3(_sm(round(enc[i]) - h, 15), _sm(v, 15),
                                                _sm(round(load[i]), 10))
            mem[_TEMP] = max(0, min(255, round(temp[i])))
            mem[_MOVING] = int(abs(v) > 10)
            mem[_CURRENT:_CURRENT + 2] = _PACK1(_sm(round(cur[i]), 15))


#: items whose write leaves gains, limits and torque as they were
_NO_REFRESH = ('goal_position', 'goal_time', 'lock')
_PRESENT = _A['present_position'].address
_HOMING = _A['homing_offset'].address
_TEMP = _A['present_temperature'].address
_MOVING = _A['moving'].address
_CURRENT = _A['present_current'].address
_PACK3 = struct.Struct('<HHH').pack
_PACK1 = struct.Struct('<H').pack


def _sm(value: int, sign_bit: int) -> int:
    """Sign-magnitude register value of ``value``, the magnitude saturated below the bit."""
    mag = min(abs(value), (1 << sign_bit) - 1)
    return mag | (1 << sign_bit) if value < 0 and mag else mag
