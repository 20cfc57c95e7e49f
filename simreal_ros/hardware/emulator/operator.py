"""The leader arm of the virtual servo bus: servos moved by a scripted operator, not by motors.

``simreal emulate --role leader --operator chirp|waypoints`` serves the same servos and control
table as the follower bus, but the joints go where a (scripted) human hand puts them: a GELLO
leader is read with torque off, so its servos only measure. :class:`LeaderArm` replaces the
physics of :class:`~simreal_ros.hardware.emulator.reality.VirtualArm` with an
:class:`Operator`'s trajectory of time (seconds since the emulator's first step); the encoder
model (quantization to ``ticks_per_rev``, ``encoder_noise_rad`` of the reality file) is the
follower's. Torque enable is accepted and ignored: the scripted hand is stronger than the servo.

Operators (all start at ``home + offset_rad`` on every joint and hold it for ``start_s``):

* ``chirp``: joint ``k`` moves by ``amplitude * (sin(phase + s_k) - sin(s_k))`` (so up to
  twice ``amplitude`` from the start pose), the phase of a sine whose frequency sweeps
  ``f_min_hz`` to ``f_max_hz`` over ``period_s``, then again; ``s_k = 2 pi k / n`` so the joints
  do not move in lockstep; the amplitude ramps in over ``ramp_s`` so the leader starts still;
* ``waypoints``: a loop of poses (home, then each joint in turn out by ``amplitude`` and back,
  two joints together), each reached with a cosine move of ``move_s`` and held ``hold_s``:
  the stop-and-go of a human demonstration, with idle pauses.

Options (``--operator NAME,key=value,...``): ``amplitude`` (0.3), ``offset_rad`` (0),
``start_s`` (0), ``f_min_hz`` (0.1), ``f_max_hz`` (0.8), ``period_s`` (10), ``ramp_s`` (1),
``move_s`` (1.5), ``hold_s`` (0.5), ``cue`` (0). Positions are clamped to the joint limits.

**On cue** (``cue=1``): the operator holds the start pose until a ``start`` line arrives on the
emulator's standard input, and ``start_s`` counts from then, as a person who starts moving the
leader when told to. The emulator's loop answers ``started <time_ns>`` (the wall-clock time,
``time.time_ns()``, of the physics state the motion counts from); a second ``start`` is
answered ``error: the operator started already``. A test or a recording script starts the
motion when the stack is ready for it, instead of after a fixed ``start_s`` guessed to cover
the stack's start-up (:meth:`~simreal_ros.hardware.emulator.virtual_bus.EmulatorProcess.
start_operator`). The button's cycle still counts from the emulator's start.

The operator's thumb on a **button** (GELLO style, wired to a servo's register):
``button_id`` (0 = no button) names the servo whose Indirect Data 1 (address 224) reads 1
while the button is pressed and 0 while it is released. The operator presses it for
``button_press_s`` (5), releases it for ``button_release_s`` (0 = never), and again, from the
emulator's start; the joints move on while it is released (the hand keeps moving the leader).

The hand's grip: ``hand_stiffness_nm_rad`` (0 = rigid, the default: the joints are exactly where
the script puts them) makes the hand a spring around the scripted pose, so the arm sags under
its own weight (the MuJoCo model's holding torque at the pose) unless its motors help: in
current mode (Operating Mode 0) with torque on, a servo adds ``goal_current`` (limited to
``current_limit``) times the motor constant, and reports that current as its present current.
The joints rest where the spring balances them, ``q = q_script + (tau_motor - tau_hold) /
stiffness`` (quasi-static, evaluated at the scripted pose): the observable of a leader's
gravity compensation is how far it drifts from where the hand holds it.

A **Feetech STS leader** (:class:`StsLeaderArm`, a spec whose ``bus.family`` is ``feetech``:
LeRobot's SO-101 leader, STS3215 servos read with torque off) is the STS bus's arm
(:class:`~simreal_ros.hardware.emulator.sts_servo.StsArm`: its memory table, Homing Offset,
Lock and flash) with the same operators. The STS has no current-control mode, so its motors
never push: with ``hand_stiffness_nm_rad`` the arm sags by its holding torque over the
stiffness, whatever the servos are told; Torque Enable is accepted and the hand still wins.
It has no Indirect Data register to wire a button to: ``button_id`` is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
import math
from typing import Callable, TextIO

import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import Overlay
from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import key_numbers
from simreal_ros.errors import ConfigError
from simreal_ros.hardware.dynamixel import control_table as ct
from simreal_ros.hardware.emulator.placer import LineDevice
from simreal_ros.hardware.emulator.reality import VirtualArm
from simreal_ros.hardware.emulator.sts_servo import StsArm

FloatArray = npt.NDArray[np.float64]
OPERATORS = ('chirp', 'waypoints')
ROLES = ('follower', 'leader')


@dataclass(frozen=True)
class OperatorConfig:
    """The scripted operator's trajectory (see the module docstring)."""

    name: str = 'chirp'
    amplitude: float = 0.3
    offset_rad: float = 0.0
    start_s: float = 0.0
    f_min_hz: float = 0.1
    f_max_hz: float = 0.8
    period_s: float = 10.0
    ramp_s: float = 1.0
    move_s: float = 1.5
    hold_s: float = 0.5
    button_id: float = 0.0
    button_press_s: float = 5.0
    button_release_s: float = 0.0
    hand_stiffness_nm_rad: float = 0.0
    cue: float = 0.0

    @classmethod
    def parse(cls, text: str) -> 'OperatorConfig':
        """Parse ``chirp`` or ``waypoints,amplitude=0.2,offset_rad=0.8``."""
        src = '--operator'
        name, *parts = [s.strip() for s in text.split(',')]
        if name not in OPERATORS:
            raise ConfigError(src, 'name', f'one of {list(OPERATORS)}', name)
        known = [f.name for f in fields(cls) if f.name != 'name']
        values = key_numbers(parts, known, src, finite=True)
        button = values.get('button_id', 0.0)
        if button != int(button) or not 0 <= button <= 252:
            raise ConfigError(src, 'button_id', 'a servo ID 1..252 (0 = no button)', button)
        if values.get('cue', 0.0) not in (0.0, 1.0):
            raise ConfigError(src, 'cue', '0 or 1 (1: start on a `start` line on stdin)',
                              values['cue'])
        for key in ('period_s', 'move_s', 'f_max_hz', 'button_press_s'):
            if values.get(key, 1.0) <= 0:
                raise ConfigError(src, key, 'a number > 0', values[key])
        for key in ('amplitude', 'start_s', 'ramp_s', 'hold_s', 'f_min_hz',
                    'button_release_s', 'hand_stiffness_nm_rad'):
            if values.get(key, 0.0) < 0:
                raise ConfigError(src, key, 'a number >= 0', values[key])
        return cls(name, **values)


class Operator:
    """Joint positions of the scripted operator as a function of time."""

    def __init__(self, robot: RobotSpec, cfg: OperatorConfig) -> None:
        self.cfg = cfg
        self.n = robot.n
        self.lower, self.upper = robot.lower, robot.upper
        self.start: FloatArray = np.clip(robot.home + cfg.offset_rad, self.lower, self.upper)
        a = cfg.amplitude
        poses = [self.start]
        for k in range(self.n):  # each joint out and back, then pairs: stop-and-go
            out = self.start.copy()
            out[k] += a if k % 2 == 0 else -a
            poses += [out, self.start]
        pair = self.start.copy()
        pair[1] += a
        pair[2] -= a
        poses += [pair]
        self.poses = [np.clip(p, self.lower, self.upper) for p in poses]
        #: with ``cue``: the emulator time (s) of the ``start`` line, None before it
        self.cued_s: float | None = None

    def cue(self, t_s: float) -> None:
        """Start the motion at emulator time ``t_s`` (``cue=1``); ValueError if started."""
        if not self.cfg.cue:
            raise ValueError('this operator is not on cue (cue=1 in --operator)')
        if self.cued_s is not None:
            raise ValueError('the operator started already')
        self.cued_s = t_s

    def position(self, t_s: float) -> FloatArray:
        """Return the joint angles at ``t_s`` seconds after the emulator's start."""
        cfg = self.cfg
        if cfg.cue and self.cued_s is None:
            held_for_cue: FloatArray = self.start.copy()
            return held_for_cue
        t = t_s - (self.cued_s or 0.0) - cfg.start_s
        if t <= 0:
            held: FloatArray = self.start.copy()
            return held
        if cfg.name == 'chirp':
            tc = t % cfg.period_s
            k = (cfg.f_max_hz - cfg.f_min_hz) / cfg.period_s
            phase = 2 * math.pi * (cfg.f_min_hz * tc + 0.5 * k * tc * tc)
            ramp = min(1.0, t / cfg.ramp_s) if cfg.ramp_s > 0 else 1.0
            shifts = 2 * math.pi * np.arange(self.n) / self.n
            q = self.start + ramp * cfg.amplitude * (np.sin(phase + shifts) - np.sin(shifts))
        else:
            seg = cfg.move_s + cfg.hold_s
            i = int(t // seg)
            u = min(1.0, (t - i * seg) / cfg.move_s)
            a, b = self.poses[i % len(self.poses)], self.poses[(i + 1) % len(self.poses)]
            q = np.asarray(a + (b - a) * 0.5 * (1 - math.cos(math.pi * u)), dtype=np.float64)
        out: FloatArray = np.clip(q, self.lower, self.upper)
        return out

    def button_pressed(self, t_s: float) -> bool:
        """Return whether the operator holds the button down at ``t_s`` seconds."""
        cfg = self.cfg
        if cfg.button_release_s <= 0:
            return True
        return t_s % (cfg.button_press_s + cfg.button_release_s) < cfg.button_press_s


class LeaderArm(VirtualArm):
    """A :class:`VirtualArm` whose joints follow an :class:`Operator`.

    Position control is ignored (the hand is stronger); current mode acts against a compliant
    hand (``hand_stiffness_nm_rad``, see the module).
    """

    def __init__(self, robot: RobotSpec, operator: Operator, overlay: Overlay | None = None,
                 seed: int = 0) -> None:
        self.operator = operator
        self._q = operator.position(0.0)
        self._qd = np.zeros(robot.n)
        self._current = np.zeros(robot.n, dtype=np.int64)  # present current registers
        ids = [j.servo.servo_id for j in robot.joints]
        button = int(operator.cfg.button_id)
        if button and button not in ids:
            raise ConfigError('--operator', 'button_id', f'a servo ID of {robot.name} {ids}',
                              button)
        self._button = ids.index(button) if button else None
        super().__init__(robot, overlay, seed)
        for i, reg in enumerate(self.servos):
            reg.set('goal_position', self.q_to_ticks(i, self._q[i]))
        self.update_present()

    def step(self, n: int = 1) -> None:
        """Advance ``n`` steps: the joints are where the operator's hand is."""
        self.step_count += n
        q = self.operator.position(self.step_count * self.dt)
        motor = self._motor_torque()
        k = self.operator.cfg.hand_stiffness_nm_rad
        if k > 0:
            q = np.clip(q + (motor - self.sim.probe(q).gravity) / k, self.operator.lower,
                        self.operator.upper)
        self._qd = (q - self._q) / (n * self.dt)
        self._q = q

    def _motor_torque(self) -> FloatArray:
        """Return the joint torques of the servos in current mode with torque on (N*m)."""
        for i, reg in enumerate(self.servos):
            # mode 0 exists only on models with current control (an XL430 refuses it)
            on = reg.get('torque_enable') == 1 and reg.get('operating_mode') == ct.MODE_CURRENT
            limit = reg.get('current_limit') if on else 0
            self._current[i] = max(-limit, min(limit, reg.get('goal_current'))) if on else 0
        out: FloatArray = self.direction * self._current * self.effort_unit
        return out

    def update_present(self) -> None:
        """Write the present-value registers from the operator's pose (and motor current)."""
        if not hasattr(self, '_q'):
            return
        meas = self._measure(self._q, noise=True)
        tick_ms = self.step_count * self.dt * 1000.0
        for i, reg in enumerate(self.servos):
            vel = int(round(self.direction[i] * self._qd[i] / self.vel_unit[i]))
            reg.set('present_position', self.q_to_ticks(i, meas[i]))
            reg.set('present_velocity', vel)
            reg.set('present_current' if reg.has('present_current') else 'present_load',
                    int(self._current[i]))
            reg.set('present_temperature', int(round(self.temperature[i])))
            reg.set('present_input_voltage', reg.model.item('present_input_voltage').default)
            reg.set('realtime_tick', int(tick_ms) % 32768)
            reg.set('moving', int(abs(vel) > reg.get('moving_threshold')))
        if self._button is not None:
            pressed = self.operator.button_pressed(self.step_count * self.dt)
            self.servos[self._button].set('indirect_data_1', int(pressed))

    def true_position(self) -> FloatArray:
        """Return the operator's pose (ground truth)."""
        out: FloatArray = self._q.copy()
        return out


class StsLeaderArm(StsArm):
    """An STS :class:`StsArm` whose joints follow an :class:`Operator` (see the module).

    No motor acts (the STS3215 has no current mode); Present Load and Present Current read 0,
    as a servo with torque off does.
    """

    def __init__(self, robot: RobotSpec, operator: Operator, overlay: Overlay | None = None,
                 seed: int = 0) -> None:
        if operator.cfg.button_id:
            raise ConfigError('--operator', 'button_id', f'0: the {robot.name} leader has '
                              f'STS servos, which have no Indirect Data register to wire a '
                              f'button to (leave out button_id)', int(operator.cfg.button_id))
        self.operator = operator
        self._q = operator.position(0.0)
        self._qd = np.zeros(robot.n)
        super().__init__(robot, overlay, seed)
        self.update_present()

    def step(self, n: int = 1) -> None:
        """Advance ``n`` steps: the joints are where the operator's hand is."""
        self.step_count += n
        q = self.operator.position(self.step_count * self.dt)
        k = self.operator.cfg.hand_stiffness_nm_rad
        if k > 0:  # nothing holds the arm up but the hand
            q = np.clip(q - self.sim.probe(q).gravity / k, self.operator.lower,
                        self.operator.upper)
        self._qd = (q - self._q) / (n * self.dt)
        self._q = q

    def update_present(self) -> None:
        """Write the present-value registers from the operator's pose (no load, no current)."""
        if not hasattr(self, '_q'):
            return  # the base class's constructor, before the operator is set
        self._write_present(self._q, self._qd, np.zeros(self.n))

    def true_position(self) -> FloatArray:
        """Return the operator's pose (ground truth)."""
        out: FloatArray = self._q.copy()
        return out


class OperatorCue(LineDevice):
    """Reads ``start`` lines on a thread; the loop starts the operator in :meth:`tick`.

    The start is made between two physics steps and answered ``started <time_ns>``. One of
    the bus emulator's devices (:class:`~simreal_ros.hardware.emulator.pty.Device`), added
    for a leader whose operator has ``cue=1``; it has no port.
    """

    def __init__(self, arm: 'LeaderArm | StsLeaderArm', echo: Callable[[str], None],
                 clock_ns: Callable[[], int], stream: TextIO | None = None) -> None:
        self.arm = arm
        self.clock_ns = clock_ns
        super().__init__(parse_cue_line, echo, stream, True, 'operator_cue')

    def apply(self, item: str) -> None:
        """Start the operator and answer ``started <time_ns>``, or ``error: ...``."""
        try:
            self.arm.operator.cue(self.arm.step_count * self.arm.dt)
        except ValueError as exc:
            self.echo(f'error: {exc}')
            return
        self.echo(f'started {self.clock_ns()}')


def parse_cue_line(line: str) -> str:
    """Return ``'start'`` for a ``start`` line; ValueError naming what was expected."""
    if line.strip() != 'start':
        raise ValueError(f"expected 'start' (the operator is on cue), got {line.strip()!r}")
    return 'start'
