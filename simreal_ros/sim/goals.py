"""Seeded random reachable joint-space goals (training and ``simreal eval`` share them).

A goal is reachable when it lies ``margin_rad`` inside every joint limit, the robot (and the
scene, when the model has one) is free of contacts there, and holding it statically needs at
most ``max_effort_fraction`` of each joint's effort limit. Contacts and gravity torques come
from the engine (:meth:`SimBackend.probe`), with the dynamics the backend has now: a training
world's randomized masses change what holds a goal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.backend import SimBackend
from simreal_ros.sim.engines import make_sim

FloatArray = npt.NDArray[np.float64]


class GoalSampler:
    """Draw reachable goals (robot joint order) from a seeded generator."""

    def __init__(self, robot: RobotSpec, margin_rad: float = 0.25,
                 max_effort_fraction: float = 0.6, sim: SimBackend | None = None,
                 range_fraction: float = 1.0) -> None:
        self.robot = robot
        self.sim = sim or make_sim(robot)
        centre = 0.5 * (robot.lower + robot.upper)
        half = 0.5 * (robot.upper - robot.lower) - margin_rad
        if np.any(half <= 0):
            raise ValueError(f'margin_rad={margin_rad} leaves no range for some joint')
        self.low = centre - half * range_fraction
        self.high = centre + half * range_fraction
        self.max_effort = max_effort_fraction * robot.effort_limit

    def reachable(self, q: FloatArray) -> bool:
        """Whether ``q`` is inside the sampling box, contact-free and statically holdable."""
        if np.any(q < self.low) or np.any(q > self.high):
            return False
        probe = self.sim.probe(q)
        if probe.contacts > 0:
            return False
        return bool(np.all(np.abs(probe.gravity) <= self.max_effort))

    def sample(self, rng: np.random.Generator, n: int = 1, max_tries: int = 1000
               ) -> FloatArray:
        """Return ``n`` reachable goals, shape (n, joints)."""
        out: list[FloatArray] = []
        tries = 0
        while len(out) < n:
            tries += 1
            if tries > max_tries * n:
                raise RuntimeError('could not find reachable goals: the margin or the scene '
                                   'leaves no free space')
            q = rng.uniform(self.low, self.high)
            if self.reachable(q):
                out.append(q)
        return np.array(out)

    def holding_command(self, q: FloatArray, kp: FloatArray) -> FloatArray:
        """Return the servo target that holds ``q`` against gravity (static P servo)."""
        return np.asarray(q + self.sim.probe(q).gravity / kp, dtype=np.float64)
