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

Drawn pushes (:meth:`PushSchedule.plan`, the sim bridge's reset with a randomization's
``pushes:``): a sequence of :class:`~simreal_ros.core.pushes.DrawnPush` on the grid of physics
steps (``start_tick`` counted from the step the plan was made at) starts each push at exactly
its step, splitting the block of steps there, and draws the next one (lazily, the sequence is
endless) when it starts. A push from :meth:`~PushSchedule.request` replaces a running drawn one
and the reverse, as two requests do.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Iterator, Protocol, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.pushes import MAX_PUSH_S, DrawnPush, PushRanges, push_sequence

__all__ = ['MAX_PUSH_S', 'Push', 'PushSchedule', 'Pushable', 'check_push']

FloatArray = npt.NDArray[np.float64]


class Pushable(Protocol):
    """What a push needs of the sim: its step, its clock and its base force."""

    dt_ns: int
    step_count: int

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
    """The running push of one sim, and its drawn pushes (see the module docstring)."""

    def __init__(self) -> None:
        self.pending: Push | None = None
        self.active: Push | None = None
        self.count = 0
        self.drawn: Iterator[DrawnPush] | None = None
        self.next_drawn: DrawnPush | None = None
        self.origin_step = 0
        self.drawn_count = 0

    def request(self, push: Push) -> None:
        """Replace the running push with ``push`` from the next :meth:`step`."""
        self.pending = push

    def clear(self) -> None:
        """Forget every push (after a reset, which clears the engine's force)."""
        self.pending = self.active = None
        self.drawn = self.next_drawn = None

    def plan(self, pushes: Iterator[DrawnPush], origin_step: int) -> DrawnPush | None:
        """Push at the steps of ``pushes`` (counted from ``origin_step``); the first of them."""
        self.drawn, self.origin_step = pushes, origin_step
        self.next_drawn = next(pushes, None)
        return self.next_drawn

    def draw(self, ranges: PushRanges, rng: np.random.Generator, sim: Pushable) -> str:
        """Plan the pushes of ``ranges`` from ``rng`` on ``sim``'s steps from now; a report."""
        first = self.plan(push_sequence(ranges, rng, sim.dt_ns / 1e9), sim.step_count)
        assert first is not None  # the sequence is endless
        f = first.force_n
        at_s = (self.origin_step + first.start_tick) * sim.dt_ns / 1e9
        return (f'random pushes {ranges.describe()}: the first at sim time {at_s:.3f} s '
                f'({first.start_s:.3f} s after the reset), force [{f[0]:.4f}, {f[1]:.4f}, '
                f'{f[2]:.4f}] N for {first.duration_s:g} s')

    def _due_step(self) -> int | None:
        d = self.next_drawn
        return None if d is None else self.origin_step + d.start_tick

    def _start(self, sim: Pushable, p: Push) -> None:
        p.steps_left = max(1, math.ceil(round(p.duration_s * 1e9) / sim.dt_ns))
        sim.push_base(p.force_n)
        self.active = p
        self.count += 1

    def step(self, sim: Pushable, steps: int) -> None:
        """Advance ``sim`` by ``steps`` physics steps with each push on for its duration."""
        if self.pending is not None:
            p, self.pending = self.pending, None
            self._start(sim, p)
        end = sim.step_count + steps
        while True:
            now = sim.step_count
            due = self._due_step()
            if due is not None and due <= now and now < end:
                d = self.next_drawn
                assert d is not None and self.drawn is not None
                self._start(sim, Push(np.asarray(d.force_n, dtype=np.float64), d.duration_s))
                self.drawn_count += 1
                self.next_drawn = next(self.drawn, None)
                due = self._due_step()
            if now >= end:
                return
            stop = end
            if due is not None:
                stop = min(stop, max(due, now + 1))
            p_on = self.active
            if p_on is not None and p_on.steps_left is not None:
                stop = min(stop, now + p_on.steps_left)
            sim.step(stop - now)
            if p_on is not None and p_on.steps_left is not None:
                p_on.steps_left -= stop - now
                if p_on.steps_left <= 0:
                    sim.push_base(np.zeros(3))
                    self.active = None
