"""Gravity feed-forward on the goal of a P/D position loop: the goal offset that cancels the sag.

The servos this stack drives run their position loop with P and D only (the driver writes
I = 0: Dynamixel Position I Gain, Feetech I coefficient), so a joint loaded by gravity settles
where the loop's spring balances the load: ``q = goal - tau_hold / kp``, ``tau_hold`` the
torque that holds the pose (MuJoCo's ``qfrc_bias`` at rest) and ``kp`` the loop's stiffness
(N*m/rad, the spec's ``gains.kp``, which the driver writes to the servo's P gain register).
On the SO-101 follower (``so101_worn`` reality, shoulder_lift at home: 0.757 N*m over 12.6
N*m/rad) that is 0.06 rad, the whole of what the leader-follower tracking missed its 0.05 rad
target by.

:class:`GravityFeedForward` writes ``goal + fraction * tau_hold(goal) / kp`` instead of the
goal: at the goal the loop then pushes exactly the holding torque, so the joint rests at the
goal when the model's masses and the servo's stiffness are right, and ``fraction`` of the sag
is removed when they are not (a heavier tool, a softer servo than the spec: the error left
is the model's error, not the whole sag). ``tau_hold`` is evaluated at the commanded pose, not
the measured one: the pose to hold is the one asked for, and the offset then does not feed
the measurement back into the loop (no new dynamics). The offset goal is clamped into the
joint limits.

The nominal robot model (no reality overlay: the driver does not know it) is built with
:func:`simreal_ros.sim.engines.make_sim` (MuJoCo), as the leader's gravity compensation
builds its own; a call costs one ``mj_forward`` (about 12 us here).

Used by the servo driver (``simreal_dynamixel_driver``, parameter ``gravity_ff``: the
fraction, 0 = off) on every goal it writes; ``simreal launch ... gravity_ff:=`` (``auto`` = on
with ``teleop:=leader``: a leader's pose is a pose to reach, while a policy trained in
simulation learned the sag of its simulated servos). docs/hardware.md.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec

FloatArray = npt.NDArray[np.float64]


class GravityFeedForward:
    """The goal that a P/D loop of stiffness ``kp`` holds at the commanded pose under gravity."""

    def __init__(self, robot: RobotSpec, fraction: float = 1.0) -> None:
        """Build the robot's nominal model in MuJoCo.

        ``robot``: the spec (masses from its model, ``kp`` from its gains, limits);
        ``fraction``: the share of the modelled sag to cancel, in (0, 1].
        """
        from simreal_ros.sim.engines import make_sim  # MuJoCo: only a driver that uses it
        self.sim = make_sim(robot)
        self.fraction = float(fraction)
        self.kp = np.array([j.kp for j in robot.joints], dtype=np.float64)
        self.lower, self.upper = robot.lower, robot.upper

    def offset(self, goal: FloatArray) -> FloatArray:
        """Return the goal offset (rad): ``fraction * tau_hold(goal) / kp`` per joint."""
        hold = np.asarray(self.sim.probe(np.asarray(goal, dtype=np.float64)).gravity)
        return self.fraction * hold / self.kp

    def goal(self, goal: FloatArray) -> FloatArray:
        """Return the goal to write for ``goal``: offset, then clamped into the joint limits."""
        return np.clip(np.asarray(goal, dtype=np.float64) + self.offset(goal),
                       self.lower, self.upper)
