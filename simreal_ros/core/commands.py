"""Validation of joint commands against the robot spec, shared by every backend.

A command names a subset of the robot's joints (or all of them, in order, when names are
empty). It is rejected as a whole when it names an unknown joint, repeats a joint, has arrays
of the wrong length, or carries NaN/inf: the caller then holds the last valid target. Finite
positions outside the joint limits are clamped, and the clamp is reported.

:class:`CommandIntake` is the one command intake of every backend (sim bridge, Dynamixel
driver, external adapter): it merges each command onto the target the backend holds, and
counts what came in, what was rejected (with the last reason, and per diagnostics window)
and what was clamped, for ``/diagnostics``. :func:`map_names` puts a message's named values
(a state, a leader reading, a goal) in a given joint order, every joint required.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.robot import RobotSpec
from simreal_ros.core.validate import bounded
from simreal_ros.errors import CommandError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class JointTarget:
    """A full-robot target in robot order: position, velocity and effort feed-forward."""

    position: FloatArray
    velocity: FloatArray
    effort: FloatArray
    stamp_ns: int = 0
    clamped: bool = False

    @classmethod
    def hold(cls, position: FloatArray, stamp_ns: int = 0) -> 'JointTarget':
        """Return a target that holds ``position`` with no feed-forward."""
        z = np.zeros_like(position, dtype=np.float64)
        return cls(np.array(position, dtype=np.float64), z, z.copy(), stamp_ns)


class CommandValidator:
    """Merge partial commands into full targets, rejecting malformed ones."""

    def __init__(self, robot: RobotSpec) -> None:
        self.robot = robot
        self._index = {n: i for i, n in enumerate(robot.joint_names)}
        self._lower = robot.lower
        self._upper = robot.upper
        self._effort = robot.effort_limit
        self._vel = robot.velocity_limit

    def merge(self, previous: JointTarget, names: Sequence[str], position: Sequence[float],
              velocity: Sequence[float] = (), effort: Sequence[float] = (),
              stamp_ns: int = 0) -> JointTarget:
        """Return ``previous`` updated with a (partial) command, or raise CommandError."""
        n = self.robot.n
        if not names:
            if len(position) != n:
                raise CommandError(
                    f'command without joint names must carry all {n} positions in robot '
                    f'order {self.robot.joint_names}; got {len(position)}')
            idx = list(range(n))
        else:
            idx = []
            for name in names:
                i = self._index.get(name)
                if i is None:
                    raise CommandError(f'unknown joint {name!r}; {self.robot.name} has '
                                       f'{self.robot.joint_names}')
                idx.append(i)
            if len(set(idx)) != len(idx):
                raise CommandError(f'joint named twice in {list(names)}')
            if len(position) != len(idx):
                raise CommandError(f'{len(idx)} names but {len(position)} positions')
        for label, arr in (('velocity', velocity), ('effort', effort)):
            if len(arr) not in (0, len(idx)):
                raise CommandError(f'{label} has {len(arr)} entries; expected 0 or {len(idx)}')
        pos_in = np.asarray(position, dtype=np.float64)
        vel_in = np.asarray(velocity, dtype=np.float64)
        eff_in = np.asarray(effort, dtype=np.float64)
        for label, values in (('position', pos_in), ('velocity', vel_in), ('effort', eff_in)):
            if values.size and not np.all(np.isfinite(values)):
                raise CommandError(f'{label} contains NaN or inf: {values.tolist()}')
        pos = previous.position.copy()
        vel = np.zeros(n)
        eff = np.zeros(n)
        pos[idx] = pos_in
        if vel_in.size:
            vel[idx] = vel_in
        if eff_in.size:
            eff[idx] = eff_in
        clamped_pos = np.clip(pos, self._lower, self._upper)
        clamped_vel = np.clip(vel, -self._vel, self._vel)
        clamped_eff = np.clip(eff, -self._effort, self._effort)
        clamped = bool(np.any(clamped_pos != pos) or np.any(clamped_vel != vel)
                       or np.any(clamped_eff != eff))
        return JointTarget(clamped_pos, clamped_vel, clamped_eff, stamp_ns, clamped)


class CommandIntake:
    """Validate and merge a backend's commands, and count the outcomes.

    Not thread-safe: the node calls it under the lock that guards its target.
    """

    def __init__(self, robot: RobotSpec,
                 on_reject: Callable[[CommandError], None] | None = None) -> None:
        self.validator = CommandValidator(robot)
        self.on_reject = on_reject
        self.received = 0
        self.rejected = 0
        self.clamped = 0
        self.last_rejection = ''
        self._rejected_window = 0

    def merge(self, previous: JointTarget | Callable[[], JointTarget], names: Sequence[str],
              position: Sequence[float], velocity: Sequence[float] = (),
              effort: Sequence[float] = (), stamp_ns: int = 0) -> JointTarget | None:
        """Count a command and return ``previous`` updated with it, or None if rejected.

        ``previous`` is the target the command is merged onto, or a function returning it,
        called once; a CommandError it raises is a rejection like a malformed command's.
        The caller passes the target it applies to :meth:`accept` (which counts a clamp).
        """
        self.received += 1
        try:
            base = previous() if callable(previous) else previous
            return self.validator.merge(base, names, position, velocity, effort, stamp_ns)
        except CommandError as raw:
            # the reason quotes the command, which may be any size: bounded once, here, for
            # the log line and /diagnostics of every backend
            exc = CommandError(bounded(str(raw)))
            self.rejected += 1
            self._rejected_window += 1
            self.last_rejection = str(exc)
            if self.on_reject is not None:
                self.on_reject(exc)
            return None

    def accept(self, target: JointTarget) -> JointTarget:
        """Count ``target`` as applied (a clamped one as clamped) and return it."""
        if target.clamped:
            self.clamped += 1
        return target

    def take_rejected_window(self) -> int:
        """Return the rejections since the last call (one diagnostics period) and restart."""
        n, self._rejected_window = self._rejected_window, 0
        return n

    def values(self) -> dict[str, object]:
        """Return the counters as every backend's ``/diagnostics`` names them."""
        return {'commands_received': self.received, 'commands_rejected': self.rejected,
                'commands_clamped': self.clamped, 'last_rejection': self.last_rejection}


def map_names(names: Sequence[str], values: Sequence[float], order: Sequence[str],
              what: str) -> FloatArray:
    """Reorder named values into ``order``; every name of ``order`` must be present.

    Empty ``names`` means the values are already in ``order``. Raises ValueError naming what
    is missing, unknown or malformed.
    """
    vals = np.asarray(values, dtype=np.float64)
    if not names:
        if vals.size != len(order):
            raise ValueError(f'{what} without names must carry {len(order)} values in the '
                             f'order {list(order)}; got {vals.size}')
        out = vals.copy()
    else:
        if len(names) != vals.size:
            raise ValueError(f'{what}: {len(names)} names but {vals.size} values')
        lookup = {n: i for i, n in enumerate(names)}
        missing = [n for n in order if n not in lookup]
        if missing:
            raise ValueError(f'{what} lacks joints {missing}')
        out = vals[[lookup[n] for n in order]]
    if not np.all(np.isfinite(out)):
        raise ValueError(f'{what} contains NaN or inf: {out.tolist()}')
    return np.asarray(out, dtype=np.float64)
