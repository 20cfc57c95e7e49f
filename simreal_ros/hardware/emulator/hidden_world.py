"""The hidden world of the virtual legged robot: pushes and ground truth, from standard input.

A real legged robot has no odometry and nobody pushes it on cue; an evaluation of a walking
policy on it still needs both. ``simreal emulate --robot <floating-base robot>`` therefore adds
:class:`HiddenWorld` to its loop (one of the bus emulator's devices,
:class:`~simreal_ros.hardware.emulator.pty.Device`, without a port). It reads lines on standard
input (:class:`~simreal_ros.hardware.emulator.virtual_bus.EmulatorProcess` ``.send``), applies
them from the emulator's own loop between two physics steps (never from the reading thread,
which would race ``mj_step``) and answers on standard output:

* ``push FX FY FZ DURATION_S``: a force (N, world frame) on the base's centre of mass for
  ``DURATION_S`` of physics time (``ceil(duration / dt)`` steps, (0, 5] s; a new push replaces
  the running one), as a hand or a kick does; answered ``pushed FX FY FZ DURATION_S TIME_NS``
  (``TIME_NS`` the wall-clock time of the physics state the push starts at);
* ``truth RATE_HZ``: stream the base's ground truth every ``1 / RATE_HZ`` of physics time
  (0 stops; at most 200 Hz): ``truth TIME_NS PHYSICS_S x y z qw qx qy qz vx vy vz wx wy wz
  ENERGY_J``, ``PHYSICS_S`` the physics time since the emulator started (next to ``TIME_NS``
  it tells how far the emulator fell behind real time on a busy CPU), the base frame's
  position (m) and orientation in the world, its linear velocity (m/s, world frame) and
  angular velocity (rad/s, base frame), exactly the sim's
  :class:`~simreal_ros.sim.backend.BaseState`, and ``ENERGY_J`` the mechanical energy the
  servos spent since streaming started, ``sum |tau * qdot|`` sampled every 5 ms of physics
  time (200 Hz, the in-process evaluation's rate);
  answered ``streaming truth RATE_HZ`` (``streaming truth 0`` when stopped);
* ``stand``: put the robot back on its feet at its home pose, at rest, where it started (the
  physics' home keyframe; the servos keep their registers and go on driving to their goals),
  as a person stands a fallen robot up; answered ``stood TIME_NS``;
* ``place <object> X Y Z``: a scene object, when the scene has one
  (:mod:`~simreal_ros.hardware.emulator.placer`, which reads no line of its own then).

A line it cannot use is answered ``error: <reason>`` and changes nothing. ``TIME_NS`` is on the
clock of ROS stamps (:meth:`~simreal_ros.hardware.emulator.emulator.BusEmulator.state_time_ns`),
so a client can line the truth up with the topics. ``simreal eval --backend real`` for a
locomotion policy pushes the robot and scores its walk this way
(:mod:`simreal_ros.jobs.locomotion_real`): the ground truth is the emulator's, which a real
robot does not have.
"""

from __future__ import annotations

import math
from typing import Any, Callable, TextIO

import numpy as np

from simreal_ros.hardware.emulator.placer import LineDevice
from simreal_ros.sim.backend import BaseState
from simreal_ros.sim.placement import parse_place_line
from simreal_ros.sim.push import check_push

MAX_TRUTH_HZ = 200.0
#: the energy integral's sampling period in physics time (the in-process evaluation's 200 Hz)
ENERGY_PERIOD_S = 0.005


def parse_world_line(line: str, movable: Any = ()) -> tuple[str, Any]:
    """Return ``(kind, argument)`` of a line: push, truth, stand or place (module docstring).

    ``('push', Push)``, ``('truth', rate_hz)``, ``('stand', None)``, ``('place', (name,
    xyz))``; ValueError naming what is wrong with a line.
    """
    words = line.split()
    if not words:
        raise ValueError('an empty line')
    if words[0] == 'place' and movable:
        return 'place', parse_place_line(line, movable)
    try:
        nums = [float(w) for w in words[1:]]
    except ValueError:
        nums = []
        bad = True
    else:
        bad = False
    if words[0] == 'push':
        if bad or len(nums) != 4:
            raise ValueError(f'expected push FX FY FZ DURATION_S (4 numbers), got '
                             f'{line.strip()!r}')
        return 'push', check_push(nums[:3], nums[3])
    if words[0] == 'truth':
        if bad or len(nums) != 1 or not (0.0 <= nums[0] <= MAX_TRUTH_HZ):
            raise ValueError(f'expected truth RATE_HZ (0 to stop, at most {MAX_TRUTH_HZ:g}), '
                             f'got {line.strip()!r}')
        return 'truth', nums[0]
    if words[0] == 'stand':
        if len(words) != 1:
            raise ValueError(f'expected stand (no arguments), got {line.strip()!r}')
        return 'stand', None
    known = 'push, truth, stand' + (', place' if movable else '')
    raise ValueError(f'unknown command {words[0]!r}: expected one of {known}')


def format_truth(time_ns: int, physics_s: float, base: Any, energy_j: float) -> str:
    """Return one ``truth`` line (module docstring)."""
    vals = [*base.position, *base.orientation_wxyz, *base.linear_velocity,
            *base.angular_velocity]
    return f'truth {time_ns} {physics_s:.4f} ' + ' '.join(f'{float(v):.6f}' for v in vals) + \
        f' {energy_j:.4f}'


def parse_truth(line: str) -> tuple[int, float, BaseState, float]:
    """Return ``(time_ns, physics_s, base, energy_j)`` of a ``truth`` line.

    ValueError for another line.
    """
    words = line.split()
    if len(words) != 17 or words[0] != 'truth':
        raise ValueError(f'not a truth line: {line!r}')
    v = np.array([float(w) for w in words[3:16]])
    return (int(words[1]), float(words[2]), BaseState(v[0:3], v[3:7], v[7:10], v[10:13]),
            float(words[16]))


class HiddenWorld(LineDevice):
    """Pushes and ground truth of a floating-base robot (see the module docstring)."""

    def __init__(self, arm: Any, echo: Callable[[str], None], clock_ns: Callable[[], int],
                 placer: Any = None, stream: TextIO | None = None) -> None:
        self.arm = arm
        self.clock_ns = clock_ns
        self.placer = placer
        self.movable = placer.movable if placer is not None else ()
        self.push_end_step: int | None = None
        self.truth_every = 0          # physics steps between truth lines (0: off)
        self.next_truth = 0
        self.energy_every = max(1, int(round(ENERGY_PERIOD_S / arm.dt)))
        self.next_energy = 0
        self.last_energy = 0
        self.energy_j = 0.0
        self.pushes = 0
        super().__init__(lambda line: parse_world_line(line, self.movable), echo, stream, True,
                         'hidden_world')

    def apply(self, item: tuple[str, Any]) -> None:
        """Carry out one push, truth, stand or place line (in the emulator's loop)."""
        kind, arg = item
        arm = self.arm
        if kind == 'place':
            self.placer.apply(arg)
        elif kind == 'push':
            arm.sim.push_base(arg.force_n)
            steps = max(1, math.ceil(round(arg.duration_s * 1e9) / round(arm.dt * 1e9)))
            self.push_end_step = arm.step_count + steps
            self.pushes += 1
            f = arg.force_n
            self.echo(f'pushed {f[0]:.4f} {f[1]:.4f} {f[2]:.4f} {arg.duration_s:g} '
                      f'{self.clock_ns()}')
        elif kind == 'stand':
            arm.sim.reset_state()  # home keyframe at rest; clears the push's force too
            self.push_end_step = None
            arm.motor_side = arm.sim.joint_positions()  # backlash: the gears at rest there
            arm.integral[:] = 0.0
            self.echo(f'stood {self.clock_ns()}')
        else:
            every = int(round(1.0 / (arg * arm.dt))) if arg > 0 else 0
            self.truth_every = max(1, every) if arg > 0 else 0
            self.next_truth = arm.step_count
            self.next_energy = self.last_energy = arm.step_count
            self.energy_j = 0.0
            self.echo(f'streaming truth {arg:g}')  # not 'truth ...': no sample line

    def tick(self, now: float) -> float:
        """Apply what was asked, end a push that is due, sample the truth."""
        super().tick(now)
        arm = self.arm
        step = arm.step_count
        if self.push_end_step is not None and step >= self.push_end_step:
            arm.sim.push_base(np.zeros(3))
            self.push_end_step = None
        if self.truth_every:
            if step >= self.next_energy:
                # the power now times the steps since the last sample (a batch of steps after
                # a stall counts as its whole span)
                _q, qd, tau = arm.sim.joint_state()
                self.energy_j += float(np.sum(np.abs(tau * qd))) * (step - self.last_energy) \
                    * arm.dt
                self.last_energy = step
                self.next_energy = step + self.energy_every
            if step >= self.next_truth:
                base = arm.sim.observe().base
                self.echo(format_truth(self.clock_ns(), step * arm.dt, base, self.energy_j))
                self.next_truth = step + self.truth_every
        return math.inf  # the loop ticks its devices after every physics step
