"""Timed pushes on a floating base, for the sim bridge's ``push`` topic (no ROS).

A push is a force (N, world frame) at the base's centre of mass for ``duration_s`` of sim time
(the engines' :meth:`~simreal_ros.sim.backend.SimBackend.push_base`). :class:`PushSchedule`
holds the one running push: :meth:`PushSchedule.request` (any thread, under the caller's lock)
replaces it; :meth:`PushSchedule.step` advances the sim by some physics steps, applying the
force from the first of them and removing it after exactly ``ceil(duration_s / dt)`` steps,
splitting the block of steps there. The impulse is therefore ``force * ceil(duration / dt) *
dt``: a 0.1 s push at dt = 1 ms is 100 steps whether the bridge publishes every step or every
ten. A reset clears the push (the engines forget it; :meth:`PushSchedule.clear` forgets the
schedule). The expected change of the base's velocity is ``impulse / total mass`` plus what
gravity and the contacts add over the same time.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Protocol, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
#: the longest push accepted (s): longer is a steady force, not a push
MAX_PUSH_S = 5.0


class Pushable(Protocol):
    """What a push needs of the sim: its step, its clock and its base force."""

    dt_ns: int

    def step(self, n: int = 1) -> None:
        """Advance ``n`` physics steps."""

    def push_base(self, force_world_n: Sequence[float] | FloatArray) -> None:
        """Apply ``force_world_n`` from the next step until changed."""


@dataclass
class Push:
    """One push: its force and the physics steps it still lasts (None: not started yet)."""

    force_n: FloatArray
    duration_s: float
    steps_left: int | None = None


def check_push(force_n: Sequence[float], duration_s: float) -> Push:
    """Return a Push; ValueError naming what is wrong with a force or duration."""
    f = np.asarray(force_n, dtype=np.float64)
    if f.shape != (3,) or not np.all(np.isfinite(f)):
        raise ValueError(f'a push force is 3 finite numbers (N, world frame), got {f.tolist()}')
    if not (math.isfinite(duration_s) and 0.0 < duration_s <= MAX_PUSH_S):
        raise ValueError(f'a push lasts (0, {MAX_PUSH_S:g}] s, got {duration_s!r}')
    return Push(f, float(duration_s))


class PushSchedule:
    """The running push of one sim (see the module docstring)."""

    def __init__(self) -> None:
        self.pending: Push | None = None
        self.active: Push | None = None
        self.count = 0

    def request(self, push: Push) -> None:
        """Replace the running push with ``push`` from the next :meth:`step`."""
        self.pending = push

    def clear(self) -> None:
        """Forget every push (after a reset, which clears the engine's force)."""
        self.pending = self.active = None

    def step(self, sim: Pushable, steps: int) -> None:
        """Advance ``sim`` by ``steps`` physics steps with the push on for its duration."""
        if self.pending is not None:
            p, self.pending = self.pending, None
            p.steps_left = max(1, math.ceil(round(p.duration_s * 1e9) / sim.dt_ns))
            sim.push_base(p.force_n)
            self.active = p
            self.count += 1
        p_on = self.active
        if p_on is None or p_on.steps_left is None:
            sim.step(steps)
            return
        if p_on.steps_left > steps:
            sim.step(steps)
            p_on.steps_left -= steps
            return
        sim.step(p_on.steps_left)
        rest = steps - p_on.steps_left
        sim.push_base(np.zeros(3))
        self.active = None
        if rest:
            sim.step(rest)
