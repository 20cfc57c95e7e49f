"""An open-loop trot for a servo quadruped: joint targets from time and a forward speed.

Not a controller (no feedback from the IMU or the feet): a fixed gait to drive two engines
with the same commands, so that their legged gap (simreal_ros/gap/legged.py) shows in foot
timing, height, orientation and the speed the gait makes. Legs follow the robot spec's leg
order and joint order per leg (``hip_abd``, ``hip_flex``, ``knee``: simreal_quad's).

Per leg, phase ``phi = 2 pi f t + offset`` (diagonal pairs in phase: front-left with rear-right
at 0, front-right with rear-left at pi):

* ``hip_flex = home - stride_rad * cos(phi)``: the foot moves back (hip_flex grows, positive
  swings the foot backward) over ``phi`` in (0, pi), the stance, forward over (pi, 2 pi);
* ``knee = home - lift_rad * max(0, -sin(phi))``: the knee folds (shorter leg, foot up) in the
  second half only, the swing;
* ``hip_abd = home``.

``stride_rad`` comes from the speed wanted: a foot ``h`` below its hip moves ``h * 2 s`` per
stance of ``1 / (2 f)``, so the body would go ``v = 4 f h s`` with no slip: ``s = v / (4 f h)``,
clipped to ``MAX_STRIDE_RAD``; ``h`` is ``base.height_m`` (the hips are at the base's height).
"""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec

FloatArray = npt.NDArray[np.float64]

#: the leg phase offsets, rad, in the robot's leg order fl, fr, rl, rr: a trot
TROT_OFFSETS_RAD = (0.0, math.pi, math.pi, 0.0)
MAX_STRIDE_RAD = 0.3


@dataclass(frozen=True)
class Trot:
    """The gait's parameters: step frequency (Hz), knee lift (rad), forward speed (m/s)."""

    frequency_hz: float = 2.0
    #: 0.2 rad: at 0.3 and 0.4 simreal_quad's body pitched and yawed twice as much (mean
    #: tilt 0.09 and 0.18 rad against 0.05 in MuJoCo) and the front feet touched down late
    lift_rad: float = 0.2
    speed_m_s: float = 0.1

    def stride_rad(self, robot: RobotSpec) -> float:
        """Return the hip swing amplitude for ``speed_m_s`` (module docstring)."""
        assert robot.base is not None
        s = self.speed_m_s / (4.0 * self.frequency_hz * robot.base.height_m)
        return float(np.clip(s, -MAX_STRIDE_RAD, MAX_STRIDE_RAD))

    def targets(self, robot: RobotSpec, t_s: float) -> FloatArray:
        """Return the joint position targets at ``t_s`` (robot order, 3 joints per leg)."""
        if robot.n != 3 * len(TROT_OFFSETS_RAD):
            raise ValueError(f'{robot.name}: an open-loop trot needs 4 legs of 3 joints, '
                             f'the robot has {robot.n} joints')
        q = robot.home.copy()
        s = self.stride_rad(robot)
        for leg, offset in enumerate(TROT_OFFSETS_RAD):
            phi = 2.0 * math.pi * self.frequency_hz * t_s + offset
            q[3 * leg + 1] -= s * math.cos(phi)
            q[3 * leg + 2] -= self.lift_rad * max(0.0, -math.sin(phi))
        out: FloatArray = np.clip(q, robot.lower, robot.upper)
        return out
