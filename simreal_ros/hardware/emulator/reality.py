"""The physics behind the virtual servo bus: a simulated arm driven by servos with registers.

Each joint of the robot spec is one servo of its model (its ``servo_id``; XM430-W350 unless the
spec names another, :mod:`simreal_ros.hardware.dynamixel.family`), with that model's control
table, Model Number and register units. Every physics step (the robot's ``timestep_s``, 1 kHz
for simreal_arm) each servo with torque on runs its position controller on ticks::

    current = P/128 * E + I/65536 * sum(E) - D/16 * W       (mA; E error ticks, W ticks/ms)

clamped to the current limit (Goal Current in mode 5, Current Limit otherwise) and applied as
joint torque ``current * torque_per_amp``. A model without current sensing (XL430-W250) runs
the same law with PWM units as output (``stall torque / 885`` N*m each), clamped to Goal PWM
and PWM Limit, and reports Present Load (0.1 % of the stall torque) where the others report
Present Current. The P and D parts use the backend's position servo
(:meth:`SimBackend.set_servo`: the same one the sim bridge uses, integrated implicitly by
MuJoCo), the rest its feed-forward torque, so with the register values the driver writes and
a nominal reality this is the sim bridge's servo law. The hidden reality is a model overlay
(docs/configuration.md): joint damping/friction/armature, masses, ``command_delay_s`` (goal
writes reach the controller late) and ``imperfections``:

* ``backlash_rad``: play between the link and the servo's measurement (hysteresis; the servo
  closes its loop on the measured side), :mod:`simreal_ros.hardware.emulator.backlash`, the
  code the sysid replay identifies it with;
* ``encoder_noise_rad``: Gaussian noise on every position measurement (seeded);
* encoder quantization to ``ticks_per_rev`` ticks is always on (it is what the servo reads);
* ``ambient_temp_c``, ``thermal_rise_c_per_a2``, ``thermal_time_constant_s``: winding
  temperature ``dT/dt = (rise * I^2 - (T - ambient)) / tau``; at Temperature Limit the
  overheating bit is set;
* ``overload_s``: output saturated at the current limit this long sets the overload bit;
* torques no model overlay can express (a joint's damping is linear in speed and its friction
  a constant Coulomb force; MuJoCo has nothing else), applied to the link in every step:
  ``drag_nm_s2_per_rad2`` ``c``: speed-squared loss ``-c v|v|`` on every joint (gear and
  grease churning); ``stribeck_nm`` ``s`` and ``stribeck_velocity_rad_s`` ``vs``: breakaway
  friction above the Coulomb level that fades with speed,
  ``-s tanh(4 v / vs) exp(-(v / vs)^2)``; ``cable_spring_nm_per_rad`` ``k``: a cable harness
  winding on the first joint (the base), ``-k (q - home)`` on it only;
* the IMU device of a floating-base robot (``simreal emulate --imu-link``,
  :mod:`simreal_ros.hardware.emulator.virtual_imu`): ``imu_gyro_noise_rad_s`` and
  ``imu_accel_noise_m_s2`` (white noise std per sample), ``imu_gyro_bias_rad_s`` and
  ``imu_accel_bias_m_s2`` (turn-on bias: each axis +/- this, the sign drawn from the seed),
  ``imu_yaw_drift_rad_s`` (the attitude filter's heading drift without a magnetometer),
  ``imu_latency_s`` (each output is the state this long before it was sent).

The overlay's per-joint ``kp``/``kd`` (relative to the robot spec's) scale the servo's output
against its registers: the hidden difference between what the gains say and what the motor
delivers. A hardware error whose bit is in the Shutdown register turns torque off until a
reboot.

Homing Offset (register 20, EEPROM) is added to every position register, as the e-Manual
says (``Present Position = actual position + Homing Offset``): Present Position and Position
Trajectory read the encoder plus the offset, and a Goal Position is the encoder target plus the
offset. The EEPROM can outlive the process (:meth:`VirtualArm.attach_eeprom`, ``simreal
emulate --eeprom FILE``): the writable EEPROM items other than ID and Baud Rate (which come
from the robot spec and ``--baud``) are loaded from the file at start and saved on every write
that changes one, so a restarted emulator is a power-cycled arm. A servo in
``drop_eeprom_ids`` (``--faults eeprom_drop=ID``) acknowledges EEPROM writes without keeping
them, as a servo whose EEPROM is locked or worn out does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
from pathlib import Path

import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import Overlay
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import load_yaml_mapping
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.dynamixel.family import PWM_FULL_SCALE, gain_torque_per_amp
from simreal_ros.hardware.emulator.backlash import (
    check_backlash,
    play_step,
    servo_offset_torque,
)
from simreal_ros.hardware.family import ServoModel, resolve_robot, resolve_servos
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.scene import Scene

FloatArray = npt.NDArray[np.float64]

IMPERFECTION_DEFAULTS = {
    'backlash_rad': 0.0, 'encoder_noise_rad': 0.0, 'ambient_temp_c': 25.0,
    'thermal_rise_c_per_a2': 11.0, 'thermal_time_constant_s': 60.0, 'overload_s': 1.0,
    'drag_nm_s2_per_rad2': 0.0, 'stribeck_nm': 0.0, 'stribeck_velocity_rad_s': 0.2,
    'cable_spring_nm_per_rad': 0.0,
    # the IMU device on its own port (hardware/emulator/virtual_imu.py)
    'imu_gyro_noise_rad_s': 0.0, 'imu_accel_noise_m_s2': 0.0, 'imu_gyro_bias_rad_s': 0.0,
    'imu_accel_bias_m_s2': 0.0, 'imu_yaw_drift_rad_s': 0.0, 'imu_latency_s': 0.0,
}
#: EEPROM items an EEPROM file does not hold: they come from the robot spec and ``--baud``
NOT_PERSISTED = ('id', 'baud_rate')


@dataclass(frozen=True)
class Imperfections:
    """Actuator and sensor imperfections of the virtual bus (see the module docstring)."""

    backlash_rad: float = 0.0
    encoder_noise_rad: float = 0.0
    ambient_temp_c: float = 25.0
    thermal_rise_c_per_a2: float = 11.0
    thermal_time_constant_s: float = 60.0
    overload_s: float = 1.0
    drag_nm_s2_per_rad2: float = 0.0
    stribeck_nm: float = 0.0
    stribeck_velocity_rad_s: float = 0.2
    cable_spring_nm_per_rad: float = 0.0
    imu_gyro_noise_rad_s: float = 0.0
    imu_accel_noise_m_s2: float = 0.0
    imu_gyro_bias_rad_s: float = 0.0
    imu_accel_bias_m_s2: float = 0.0
    imu_yaw_drift_rad_s: float = 0.0
    imu_latency_s: float = 0.0

    @classmethod
    def from_overlay(cls, overlay: Overlay | None) -> 'Imperfections':
        """Read ``imperfections`` of an overlay; unknown keys fail with the known ones."""
        if overlay is None:
            return cls()
        for key in overlay.imperfections:
            if key not in IMPERFECTION_DEFAULTS:
                raise ConfigError(overlay.source, f'imperfections.{key}',
                                  f'one of {sorted(IMPERFECTION_DEFAULTS)}', 'unknown key')
        values = {**IMPERFECTION_DEFAULTS, **overlay.imperfections}
        values['backlash_rad'] = check_backlash(overlay.source, values['backlash_rad'])
        for key, what in (('thermal_time_constant_s', 'a time > 0'),
                          ('stribeck_velocity_rad_s', 'a speed > 0')):
            if values[key] <= 0:
                raise ConfigError(overlay.source, f'imperfections.{key}', what, values[key])
        return cls(**values)

    @property
    def unmodelled(self) -> bool:
        """Whether any torque no overlay can express is on."""
        return bool(self.drag_nm_s2_per_rad2 or self.stribeck_nm or self.cable_spring_nm_per_rad)

    def unmodelled_torque(self, q: FloatArray, qd: FloatArray, home: FloatArray) -> FloatArray:
        """Return the drag, Stribeck and cable torques (N·m per joint) at ``q``, speeds ``qd``."""
        vs = self.stribeck_velocity_rad_s
        tau: FloatArray = (-self.drag_nm_s2_per_rad2 * qd * np.abs(qd)
                           - self.stribeck_nm * np.tanh(4.0 * qd / vs) * np.exp(-(qd / vs) ** 2))
        tau[0] -= self.cable_spring_nm_per_rad * (q[0] - home[0])
        return tau


class ServoRegisters:
    """One servo's control table as bytes, with Protocol 2.0 access rules.

    ``model``: the servo model (its items, defaults, ranges, operating modes; XM430-W350 if
    None); ``model_number`` overrides what its Model Number register reads.
    """

    def __init__(self, servo_id: int, model_number: int | None = None,
                 model: ServoModel | None = None) -> None:
        if model is None:
            from simreal_ros.hardware.dynamixel.family import XM430_W350
            model = XM430_W350
        self.model = model
        self.size = max(ct.TABLE_SIZE, model.table_size)
        self.mem = bytearray(self.size)
        self.owner: list[ct.Item | None] = [None] * self.size
        # name -> (address, end, sign bit or 0, 2 ** bits): get and set run thousands of times
        # a second in the emulator's one loop (the watchdog check, every packet's present
        # values); through ``model.item`` and ``to_signed`` a get took 0.41 us here, this 0.28
        self._layout = {it.name: (it.address, it.address + it.size,
                                  1 << (8 * it.size - 1) if it.signed else 0, 1 << (8 * it.size))
                        for it in model.items}
        for it in model.items:
            for a in range(it.address, it.address + it.size):
                self.owner[a] = it
            self.set(it.name, it.default)
        self.set('model_number', model.model_number if model_number is None else model_number)
        self.set('id', servo_id)

    def has(self, name: str) -> bool:
        """Whether the model has item ``name``."""
        return name in self.model.by_name

    def get(self, name: str) -> int:
        """Value of item ``name`` (signed items as signed ints)."""
        try:
            a, b, sign, span = self._layout[name]
        except KeyError:
            raise KeyError(f'the {self.model.name} has no {name} register') from None
        raw = int.from_bytes(self.mem[a:b], 'little')
        return raw - span if raw & sign else raw

    def set(self, name: str, value: int) -> None:
        """Store ``value`` into item ``name`` (no access checks: the device itself writes)."""
        try:
            a, b, _sign, span = self._layout[name]
        except KeyError:
            raise KeyError(f'the {self.model.name} has no {name} register') from None
        self.mem[a:b] = (int(value) & (span - 1)).to_bytes(b - a, 'little')

    def read(self, address: int, length: int) -> tuple[int, bytes]:
        """Return (error number, data) of a READ of ``length`` bytes at ``address``."""
        if length <= 0 or address < 0 or address + length > self.size:
            return ct_err('access'), b''
        return 0, bytes(self.mem[address:address + length])

    def check_write(self, address: int, data: bytes) -> tuple[int, list[tuple[ct.Item, int]]]:
        """Validate a WRITE; return (error number, [(item, value), ...]) without applying it."""
        if not data or address < 0 or address + len(data) > self.size:
            return ct_err('access'), []
        torque_on = self.get('torque_enable') == 1
        out: list[tuple[ct.Item, int]] = []
        a = address
        end = address + len(data)
        while a < end:
            it = self.owner[a]
            if it is None or not it.writable:
                return ct_err('access'), []
            if it.address != a or a + it.size > end:
                return ct_err('length'), []
            if it.eeprom and torque_on:
                return ct_err('access'), []
            raw = int.from_bytes(data[a - address:a - address + it.size], 'little')
            value = ct.to_signed(raw, it.size) if it.signed else raw
            if (it.minimum is not None and value < it.minimum) or \
                    (it.maximum is not None and value > it.maximum):
                return ct_err('limit'), []
            if it.name == 'operating_mode' and value not in self.model.modes:
                return ct_err('limit'), []
            out.append((it, value))
            a += it.size
        return 0, out


def ct_err(kind: str) -> int:
    """Protocol error number for an access problem."""
    from simreal_ros.hardware.dynamixel import protocol as p
    return {'access': p.ERR_ACCESS, 'length': p.ERR_DATA_LENGTH, 'limit': p.ERR_DATA_LIMIT,
            'fail': p.ERR_RESULT_FAIL, 'range': p.ERR_DATA_RANGE}[kind]


class VirtualArm:
    """The robot of the virtual bus: servos (register files) + simulated physics + reality."""

    def __init__(self, robot: RobotSpec, overlay: Overlay | None = None, seed: int = 0,
                 scene: Scene | None = None) -> None:
        robot = resolve_robot(robot)  # each joint's model: its table, number and units
        self.robot = robot
        #: what surrounds the robot (``simreal emulate --scene``): its cameras see it
        self.scene = scene
        self.sim = make_sim(robot, scene=scene, overlay=overlay, seed=seed)
        self.imp = Imperfections.from_overlay(overlay)
        self.rng = np.random.default_rng(seed + 7919)
        self.dt = robot.timestep_s
        self.n = robot.n
        self.models = resolve_servos(robot)
        self.servos = [self._registers(j.servo.servo_id, j.servo.model_number, m)
                       for j, m in zip(robot.joints, self.models, strict=True)]
        # N*m per unit of the position PID's output x 1000 (mA, or PWM on XL430)
        self.gain_kt = np.array([gain_torque_per_amp(m, j.servo.torque_per_amp)
                                 for j, m in zip(robot.joints, self.models, strict=True)])
        self.vel_unit = np.array([m.velocity_unit_rad_s for m in self.models])
        self.effort_unit = np.array([m.effort_per_unit(j.servo.torque_per_amp)
                                     for j, m in zip(robot.joints, self.models, strict=True)])
        self.by_id = {j.servo.servo_id: i for i, j in enumerate(robot.joints)}
        self.kt = np.array([j.servo.torque_per_amp for j in robot.joints])
        self.tpr = np.array([j.servo.ticks_per_rev for j in robot.joints], dtype=np.float64)
        self.direction = np.array([j.servo.direction for j in robot.joints], dtype=np.float64)
        # constants of the 1 kHz step, computed once (the same values the step computed)
        self._ticks_per_rad_signed = self.direction * self.tpr / (2 * np.pi)
        self._rad_per_tick = 2 * np.pi / self.tpr
        self._dir2 = self.direction ** 2
        self.zero = np.array([j.servo.zero_tick for j in robot.joints], dtype=np.float64)
        self.offset = np.array([j.servo.offset_rad for j in robot.joints])
        self.homing = np.zeros(self.n)   # Homing Offset registers (ticks), mirrored
        self.eeprom_path: Path | None = None
        self.drop_eeprom_ids: frozenset[int] = frozenset()
        self.step_count = 0
        self.delay_steps = int(round(self.sim.params.command_delay_s / self.dt))
        self._pending: deque[tuple[int, int, float]] = deque()
        q = self.sim.joint_positions()
        self.goal = q.copy()             # joint-space goal the controller sees (after delay)
        self.desired = q.copy()          # profile output
        self.desired_vel = np.zeros(self.n)
        self.motor_side = q.copy()       # backlash: where the servo's measurement sits
        self.integral = np.zeros(self.n)  # sum of tick errors
        self.temperature = np.full(self.n, self.imp.ambient_temp_c)
        self.saturated_s = np.zeros(self.n)
        self.kp = np.zeros(self.n)
        self.kd = np.zeros(self.n)
        self.ki = np.zeros(self.n)
        self.limit = np.zeros(self.n)
        self.torque_on = np.zeros(self.n, dtype=bool)
        self.temperature_limit = np.full(self.n, 80.0)
        # kp/kd of the reality overlay relative to the spec: how much stronger (or weaker) the
        # real servo's output is than its registers say (motor constant, supply, wear)
        self.p_scale = np.array([self.sim.params.joints[j.name].kp / j.kp for j in robot.joints])
        self.d_scale = np.array([self.sim.params.joints[j.name].kd / j.kd if j.kd > 0 else 1.0
                                 for j in robot.joints])
        for i, reg in enumerate(self.servos):
            reg.set('goal_position', self.q_to_ticks(i, q[i]))
            reg.set('present_temperature', int(round(self.temperature[i])))
            self.refresh_servo(i)
        self.update_present()

    def _registers(self, servo_id: int, model_number: int, model: ServoModel) -> ServoRegisters:
        """One servo's register file (another servo family's arm returns its own)."""
        return ServoRegisters(servo_id, model_number, model)

    # ---- conversions -------------------------------------------------------------------------
    def q_to_ticks(self, i: int, q: float) -> int:
        """Joint angle -> position register ticks (encoder + Homing Offset; nearest tick)."""
        return int(round(self.zero[i] + self.direction[i] * (q - self.offset[i])
                         * self.tpr[i] / (2 * math.pi))) + int(self.homing[i])

    def encoder_ticks(self, q: FloatArray) -> FloatArray:
        """Every servo's encoder reading of angles ``q``: unrounded ticks, no Homing Offset."""
        out: FloatArray = self.zero + self.direction * (q - self.offset) * self.tpr / (2 * np.pi)
        return out

    def ticks_of(self, q: FloatArray) -> list[int]:
        """Every servo's :meth:`q_to_ticks` of joint angles ``q``."""
        homing = self.homing.astype(int).tolist()
        return [round(x) + h for x, h in zip(self.encoder_ticks(q).tolist(), homing, strict=True)]

    def ticks_to_q(self, i: int, ticks: float) -> float:
        """Position register ticks (encoder + Homing Offset) -> joint angle."""
        return float(self.direction[i] * (ticks - self.homing[i] - self.zero[i]) * 2 * math.pi
                     / self.tpr[i] + self.offset[i])

    # ---- EEPROM --------------------------------------------------------------------------------
    def _persisted(self, i: int) -> dict[str, int]:
        reg = self.servos[i]
        return {it.name: reg.get(it.name) for it in reg.model.items
                if it.eeprom and it.writable and it.name not in NOT_PERSISTED}

    def attach_eeprom(self, path: str | Path) -> None:
        """Keep the servos' EEPROM in ``path`` (YAML ``servos: {ID: {item: value}}``).

        An existing file is loaded first (ConfigError naming the key on an unknown servo ID,
        item, or a value outside the item's range); from then on every write that changes a
        persisted item saves the whole file.
        """
        p = Path(path)
        if p.is_file():
            data = load_yaml_mapping(p)
            src = str(p)
            servos = data.get('servos', {})
            if not isinstance(servos, dict):
                raise ConfigError(src, 'servos', 'a mapping of servo ID to items', servos)
            for sid, items in servos.items():
                if sid not in self.by_id:
                    raise ConfigError(src, f'servos.{sid}', f'a servo ID of {self.robot.name} '
                                      f'({sorted(self.by_id)})', sid)
                i = self.by_id[sid]
                allowed = self._persisted(i)
                if not isinstance(items, dict):
                    raise ConfigError(src, f'servos.{sid}', 'a mapping of item to value', items)
                for name, value in items.items():
                    key = f'servos.{sid}.{name}'
                    if name not in allowed:
                        raise ConfigError(src, key, f'one of {sorted(allowed)}', name)
                    it = self.servos[i].model.item(name)
                    if isinstance(value, bool) or not isinstance(value, int) or (
                            it.minimum is not None and value < it.minimum) or (
                            it.maximum is not None and value > it.maximum):
                        raise ConfigError(src, key, f'an integer in [{it.minimum}, '
                                          f'{it.maximum}]', value)
                    self.servos[i].set(name, value)
                self._eeprom_changed(i)
        self.eeprom_path = p

    def save_eeprom(self) -> None:
        """Write the EEPROM file (no-op without one)."""
        if self.eeprom_path is None:
            return
        lines = ['# EEPROM of the virtual servos (simreal emulate --eeprom)', 'servos:']
        for j in self.robot.joints:
            items = self._persisted(self.by_id[j.servo.servo_id])
            lines.append(f'  {j.servo.servo_id}: {{'
                         + ', '.join(f'{k}: {v}' for k, v in items.items()) + '}')
        tmp = self.eeprom_path.with_name(self.eeprom_path.name + '.tmp')
        tmp.write_text('\n'.join(lines) + '\n', encoding='utf-8')
        tmp.replace(self.eeprom_path)  # a kill mid-write never leaves half a file

    def _eeprom_changed(self, i: int) -> None:
        """Mirror what the physics reads of servo ``i``'s EEPROM (its Homing Offset)."""
        reg = self.servos[i]
        if reg.has('homing_offset'):
            self.homing[i] = reg.get('homing_offset')

    # ---- register side effects ----------------------------------------------------------------
    def refresh_servo(self, i: int) -> None:
        """Re-read gains, limits, torque enable of servo ``i`` from its registers."""
        reg = self.servos[i]
        tpr, kt = int(self.tpr[i]), float(self.gain_kt[i])
        self.kp[i] = ct.register_to_kp(reg.get('position_p_gain'), tpr, kt) * self.p_scale[i]
        self.kd[i] = ct.register_to_kd(reg.get('position_d_gain'), tpr, kt) * self.d_scale[i]
        self.ki[i] = ct.ki_from_register(reg.get('position_i_gain'), tpr, kt, self.dt) \
            * self.p_scale[i]
        model = self.models[i]
        if model.current_unit_a is not None:
            limit_reg = reg.get('current_limit')
            if reg.get('operating_mode') == ct.MODE_CURRENT_BASED_POSITION:
                limit_reg = min(limit_reg, abs(reg.get('goal_current')))
            self.limit[i] = limit_reg * model.current_unit_a * float(self.kt[i])
        else:  # PWM output: Goal PWM limits it in every mode, PWM Limit above that
            pwm = min(reg.get('pwm_limit'), abs(reg.get('goal_pwm')))
            self.limit[i] = pwm / PWM_FULL_SCALE * model.stall_torque_nm
        self.temperature_limit[i] = reg.get('temperature_limit')
        on = reg.get('torque_enable') == 1
        if on and not self.torque_on[i]:  # torque switched on: the profile starts from here
            q = float(self.sim.joint_positions()[i])
            self.desired[i] = q
            self.desired_vel[i] = 0.0
            self.integral[i] = 0.0
        self.torque_on[i] = on
        kp, kd = (self.kp[i], self.kd[i]) if on else (0.0, 0.0)
        self.sim.set_servo(i, kp, kd, self.limit[i] if on else 0.0)

    def write(self, i: int, items: list[tuple[ct.Item, int]]) -> int:
        """Apply validated writes to servo ``i``; return an error number (0 = done)."""
        reg = self.servos[i]
        for it, value in items:
            if it.name == 'torque_enable' and value == 1 and \
                    reg.get('hardware_error_status') & reg.get('shutdown'):
                return ct_err('fail')  # shut down: only a reboot clears it
            if it.name in ct.GOAL_ITEMS and \
                    reg.get('bus_watchdog') == ct.BUS_WATCHDOG_EXPIRED:
                return ct_err('range')  # stopped by the Bus Watchdog until it is written 0
            if it.name == 'goal_position':
                mode = reg.get('operating_mode')
                if mode in (ct.MODE_POSITION, ct.MODE_CURRENT_BASED_POSITION) and not (
                        reg.get('min_position_limit') <= value <= reg.get('max_position_limit')):
                    return ct_err('limit')
        eeprom = False
        for it, value in items:
            if it.eeprom:
                if reg.get('id') in self.drop_eeprom_ids:
                    continue  # acknowledged, not kept (the eeprom_drop fault)
                eeprom = eeprom or reg.get(it.name) != value
            reg.set(it.name, value)
            if it.name == 'goal_position':
                q = self.ticks_to_q(i, value)
                if self.delay_steps:
                    self._pending.append((self.step_count + self.delay_steps, i, q))
                else:
                    self.goal[i] = q
        if eeprom:
            self._eeprom_changed(i)
            self.save_eeprom()
        if any(it.name != 'goal_position' for it, _value in items):  # the goal stream at the
            self.refresh_servo(i)  # control rate leaves gains, limits and torque as they were
        return 0

    def reboot(self, i: int) -> None:
        """REBOOT: clear hardware errors, torque off, goal = present position."""
        reg = self.servos[i]
        reg.set('hardware_error_status', 0)
        reg.set('torque_enable', 0)
        self.saturated_s[i] = 0.0
        q = float(self.sim.joint_positions()[i])
        reg.set('goal_position', self.q_to_ticks(i, q))
        self.goal[i] = q
        self.refresh_servo(i)

    def expire_watchdog(self, i: int) -> None:
        """Bus Watchdog expiry of servo ``i``: it stops where its profile is and holds there.

        Bus Watchdog reads -1, the Goal Position register keeps the last goal written, goal
        writes are refused (Data Range Error) until the host writes Bus Watchdog 0; torque
        stays on: the servo holds the point its profile had reached (the pending delayed goals
        are dropped), so it no longer follows its last goal.
        """
        self.servos[i].set('bus_watchdog', ct.BUS_WATCHDOG_EXPIRED)
        self.goal[i] = self.desired[i]
        self.desired_vel[i] = 0.0
        self._pending = deque(e for e in self._pending if e[1] != i)

    # ---- physics ----------------------------------------------------------------------------
    def _measure(self, q: FloatArray, noise: bool) -> FloatArray:
        """Return the servos' position measurement in joint space (backlash, noise, ticks)."""
        half = self.imp.backlash_rad / 2.0
        if half > 0:  # the play, as the sysid replay applies it (hardware/emulator/backlash.py)
            self.motor_side = play_step(self.motor_side, q, half)
            m = self.motor_side
        else:
            m = q
        if noise and self.imp.encoder_noise_rad > 0:
            m = m + self.rng.normal(0.0, self.imp.encoder_noise_rad, self.n)
        ticks = self.encoder_ticks(m).round()
        q_meas: FloatArray = self.direction * (ticks - self.zero) * 2 * np.pi / self.tpr \
            + self.offset
        return q_meas

    def _profile(self, i: int) -> None:
        reg = self.servos[i]
        vmax = reg.get('profile_velocity') * self.vel_unit[i]
        goal = self.goal[i]
        if vmax <= 0:
            self.desired_vel[i] = 0.0
            self.desired[i] = goal
            return
        acc = reg.get('profile_acceleration') * ct.PROFILE_ACC_UNIT_RAD_S2
        err = goal - self.desired[i]
        if acc > 0:
            v_target = math.copysign(min(vmax, math.sqrt(2 * acc * abs(err))), err)
            dv = max(-acc * self.dt, min(acc * self.dt, v_target - self.desired_vel[i]))
            v = self.desired_vel[i] + dv
        else:
            v = math.copysign(min(vmax, abs(err) / self.dt), err)
        nxt = self.desired[i] + v * self.dt
        if (goal - nxt) * err <= 0:  # reached or passed the goal
            nxt, v = goal, 0.0
        self.desired[i], self.desired_vel[i] = nxt, v

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps (servo control + physics + thermal and overload)."""
        sim = self.sim
        pending = self._pending
        q, qd, _ = sim.joint_state()
        unmodelled = self.imp.unmodelled
        for _ in range(n):
            while pending and pending[0][0] <= self.step_count:
                _, i, goal = pending.popleft()
                self.goal[i] = goal
            # only the servos whose profile point is not at rest on its goal: for the others
            # _profile changes nothing (6 calls of it were ~15 us of each 1 kHz step)
            for i in np.flatnonzero(self.torque_on & ((self.desired != self.goal)
                                                      | (self.desired_vel != 0.0))).tolist():
                self._profile(i)
            meas = self._measure(q, noise=True)
            on = self.torque_on
            err_ticks = (self.desired - meas) * self._ticks_per_rad_signed
            self.integral = np.where(on, self.integral + err_ticks, 0.0)
            ff = servo_offset_torque(self.kp, q, meas) \
                + self.ki * self.integral * self._rad_per_tick * self.dt \
                + self.kd * self.desired_vel * self._dir2
            sim.actuate(np.where(on, self.desired, q), np.where(on, ff, 0.0))
            if unmodelled:
                sim.apply_torque(self.imp.unmodelled_torque(q, qd, self.robot.home))
            sim.advance(1)
            self.step_count += 1
            q, qd, tau = sim.joint_state()
            current = np.abs(tau) / self.kt
            imp = self.imp
            self.temperature += self.dt * (imp.thermal_rise_c_per_a2 * current ** 2
                                           - (self.temperature - imp.ambient_temp_c)) \
                / imp.thermal_time_constant_s
            sat = on & (self.limit > 0) & (np.abs(tau) >= 0.98 * self.limit)
            self.saturated_s = np.where(sat, self.saturated_s + self.dt, 0.0)
            if (self.saturated_s >= imp.overload_s).any() or \
                    (self.temperature >= self.temperature_limit).any():
                self._check_faults()
        while pending and pending[0][0] <= self.step_count:  # due now: as the sim bridge does
            _, i, goal = pending.popleft()
            self.goal[i] = goal

    def _check_faults(self) -> None:
        for i, reg in enumerate(self.servos):
            bits = reg.get('hardware_error_status')
            if self.saturated_s[i] >= self.imp.overload_s:
                bits |= ct.HW_OVERLOAD
            if self.temperature[i] >= reg.get('temperature_limit'):
                bits |= ct.HW_OVERHEATING
            if bits != reg.get('hardware_error_status'):
                reg.set('hardware_error_status', bits)
                if bits & reg.get('shutdown'):
                    reg.set('torque_enable', 0)
                    self.refresh_servo(i)

    def update_present(self) -> None:
        """Write the present-value registers from the physics state (before a read).

        The conversions run over all servos at once: this runs for every packet the host sends,
        in the emulator's one loop. Servo by servo (numpy scalars) it took 158 us a packet there
        beside a 100 Hz driver (simreal_arm, 6 servos), this 96 us; the registers it
        writes are the same bytes.
        """
        q, qd, tau = self.sim.joint_state()
        meas = self._measure(q, noise=True)
        tick = int(self.step_count * self.dt * 1000.0) % 32768
        d = self.direction
        pos, traj = self.ticks_of(meas), self.ticks_of(self.desired)
        vel = (d * qd / self.vel_unit).tolist()
        cur = (d * tau / self.effort_unit).tolist()
        dvel = (d * self.desired_vel / self.vel_unit).tolist()
        temp = self.temperature.tolist()
        for i, reg in enumerate(self.servos):
            v, c = round(vel[i]), round(cur[i])
            reg.set('present_position', pos[i])
            reg.set('present_velocity', v)
            if reg.has('present_current'):
                reg.set('present_current', max(-32768, min(32767, c)))
            else:  # XL430: Present Load, 0.1 % of the stall torque
                reg.set('present_load', max(-1000, min(1000, c)))
            reg.set('present_temperature', round(temp[i]))
            reg.set('present_input_voltage', reg.model.item('present_input_voltage').default)
            reg.set('realtime_tick', tick)
            reg.set('moving', int(abs(v) > reg.get('moving_threshold')))
            reg.set('position_trajectory', traj[i])
            reg.set('velocity_trajectory', round(dvel[i]))

    def true_position(self) -> FloatArray:
        """Return the link angles (ground truth, not what the servos measure)."""
        return self.sim.joint_positions()
