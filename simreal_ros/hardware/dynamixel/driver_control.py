"""The Dynamixel driver's state machine: watchdog, torque, reset, reconnect; no ROS, no bus I/O.

The driver node owns the bus and does every transaction; this class decides what to do and
records what was confirmed. Per bus cycle the node calls :meth:`DriverControl.step` with the
measured position and the time, performs the returned :class:`Cycle` (switch torque first,
then write the goal) and reports each success (:meth:`torque_switched`, :meth:`goal_written`);
a transaction that fails leaves the machine as it was, so the next cycle decides again.

States and transitions (``now`` is monotonic ns)::

    tracking --no command for command_timeout_s (after the first)--> watchdog
        watchdog=hold: the goal freezes where it is (a loaded joint would sag again if the
        measured position were held instead); watchdog=torque_off: torque off
    watchdog --a new command--> tracking (torque off: hold the present position, torque on,
        then track the command)
    any --~/reset--> reset: the goal moves to home at reset_speed (torque on if it was off);
        commands are dropped until home, then reset ends and the goal holds home
    any --port lost--> disconnected: reconnect attempts with back-off reconnect_min_s,
        doubling to reconnect_max_s; torque stays off on reconnect if it was off or the
        watchdog would switch it off now (stale commands): only a command sent after the
        reconnect enables it
    any --no state read for give_up_after_s (> 0)--> dead: the node stops (fatal)
    any --a servo's own Bus Watchdog expired (the bus was silent)--> the servos stopped where
        they were: the goal becomes the measured position (:meth:`servos_stopped`), so
        clearing their watchdog never sends them on toward a goal they had not reached
    (torque_off confirmed) --servo reconfigured (REBOOT / power loss)--> torque on, tracking

With ``goal_rate_limit`` every goal moves at most ``velocity limit * dt`` from the last goal
written, so a jump in the commands becomes a ramp at the joints' velocity limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import RobotSpec

FloatArray = npt.NDArray[np.float64]
WATCHDOG_HOLD, WATCHDOG_TORQUE_OFF = 'hold', 'torque_off'
#: failed state reads above this share of a diagnostics period's reads make the bus WARN: at
#: 1 % CRC errors, timeouts and late answers each, 3-7 % of the reads fail (one bad answer
#: fails the sync read of all servos); at 5 % each, 32 % fail
READ_FAILURE_WARN = 0.10


def read_failure_level(reads: int, failures: int) -> tuple[str, str] | None:
    """Return the (level, message) the failed reads of one diagnostics period call for.

    ``reads`` state reads were attempted in the period and ``failures`` of them failed:
    ERROR when none got through, WARN when more than :data:`READ_FAILURE_WARN` of them
    failed, else None (nothing to say).
    """
    if reads <= 0 or failures <= 0:
        return None
    if failures >= reads:
        return 'error', f'bus not answering: all {reads} state reads of the period failed'
    if failures > READ_FAILURE_WARN * reads:
        return 'warn', (f'{failures} of {reads} state reads failed '
                        f'({100.0 * failures / reads:.0f} % > {100 * READ_FAILURE_WARN:g} %)')
    return None


def clamp_step(previous: FloatArray, target: FloatArray, max_step: FloatArray) -> FloatArray:
    """Move from ``previous`` toward ``target`` by at most ``max_step`` per joint."""
    return previous + np.clip(target - previous, -max_step, max_step)


@dataclass
class Cycle:
    """What one bus cycle must do, in order: switch torque, then write ``goal``."""

    goal: FloatArray | None = None
    #: True: set every goal to the present position, then enable torque; False: disable it
    torque: bool | None = None
    #: (level, message) lines for the node's log: level 'info' or 'warning'
    events: list[tuple[str, str]] = field(default_factory=list)


class DriverControl:
    """Watchdog, torque, reset and reconnect decisions of one servo bus."""

    def __init__(self, robot: RobotSpec, position: FloatArray, *, dt_s: float,
                 command_timeout_s: float, watchdog: str, goal_rate_limit: bool,
                 reset_speed: float, reconnect_min_s: float, reconnect_max_s: float,
                 give_up_after_s: float = 0.0, now_ns: int = 0) -> None:
        if watchdog not in (WATCHDOG_HOLD, WATCHDOG_TORQUE_OFF):
            raise ValueError(f'watchdog must be {WATCHDOG_HOLD!r} or {WATCHDOG_TORQUE_OFF!r}, '
                             f'got {watchdog!r}')
        self.robot = robot
        self.timeout_ns = int(command_timeout_s * 1e9)
        self.watchdog = watchdog
        self.goal_rate_limit = goal_rate_limit
        self.max_step = robot.velocity_limit * dt_s
        self.reset_step = np.full(robot.n, reset_speed * dt_s)
        self.reconnect_min_ns = int(reconnect_min_s * 1e9)
        self.reconnect_max_ns = int(reconnect_max_s * 1e9)
        self.goal = np.array(position, dtype=np.float64)  # the last goal written
        self.command: JointTarget | None = None
        self.command_ns = 0
        self.command_seq = 0
        self.used_seq = 0
        self.reset_active = False
        self.watchdog_active = False
        self.watchdog_trips = 0
        self.hold_target: FloatArray | None = None
        self.torque_on = True
        self.connected = True
        self.backoff_ns = self.reconnect_min_ns
        self.next_attempt_ns = 0
        self.give_up_ns = int(give_up_after_s * 1e9)
        self.last_read_ns = now_ns  # the last successful state read (start-up read one)

    # ---- liveness -----------------------------------------------------------------------------
    def state_read(self, now_ns: int) -> None:
        """Record a successful state read."""
        self.last_read_ns = now_ns

    def dead(self, now_ns: int) -> bool:
        """Return whether no state was read for ``give_up_after_s`` (never, when it is 0)."""
        return self.give_up_ns > 0 and now_ns - self.last_read_ns > self.give_up_ns

    # ---- commands (the executor's side) -------------------------------------------------------
    def merge_base(self) -> JointTarget:
        """Return the target a (partial) command merges onto: the last command, else the goal."""
        return self.command or JointTarget.hold(self.goal)

    def take_command(self, target: JointTarget, now_ns: int) -> bool:
        """Accept a validated command; False (dropped) while the move home runs."""
        if self.reset_active:
            return False
        self.command = target
        self.command_ns = now_ns
        self.command_seq += 1
        return True

    def commands_stale(self, now_ns: int) -> bool:
        """Return whether commands came, but none for ``command_timeout_s``."""
        return self.command is not None and now_ns - self.command_ns > self.timeout_ns

    # ---- the bus cycle ------------------------------------------------------------------------
    def step(self, position: FloatArray, now_ns: int) -> Cycle:
        """Decide this cycle's torque switch and goal from the measured ``position``."""
        cycle = Cycle()
        cmd, reset = self.command, self.reset_active
        fresh = self.command_seq != self.used_seq
        self.used_seq = self.command_seq
        base = self.goal
        if not self.torque_on:
            if not (reset or (fresh and cmd is not None)):
                return cycle
            cycle.torque = True  # re-enable where the arm is, then track the command
            base = np.array(position, dtype=np.float64)
            cycle.events.append(('info', f'{"reset" if reset else "command"}: '
                                         f'torque enabled again'))
        if reset:
            cycle.goal = clamp_step(base, self.robot.home, self.reset_step)
            return cycle
        if cmd is not None and now_ns - self.command_ns > self.timeout_ns:
            if not self.watchdog_active:
                self.watchdog_active = True
                self.watchdog_trips += 1
                cycle.events.append(('warning', f'no joint command for '
                                                f'{self.timeout_ns / 1e9:g} s: {self.watchdog}'))
                if self.watchdog == WATCHDOG_TORQUE_OFF:
                    cycle.torque = False
                    return cycle
                self.hold_target = base.copy()  # freeze the goal: no sag-on-hold drift
            target = self.hold_target if self.hold_target is not None else base
        elif cmd is not None:
            if self.watchdog_active and cycle.torque is None:
                cycle.events.append(('info', 'joint commands resumed'))
            if cycle.torque is None:
                self.watchdog_active = False
            self.hold_target = None
            target = cmd.position
        else:
            target = base
        if self.goal_rate_limit:
            cycle.goal = clamp_step(base, target, self.max_step)
        else:
            cycle.goal = np.array(target, dtype=np.float64)
        return cycle

    def torque_switched(self, on: bool, position: FloatArray) -> None:
        """Record a confirmed torque switch of every servo; ``position`` as measured."""
        self.torque_on = on
        if on:
            self.watchdog_active = False
            self.goal = np.array(position, dtype=np.float64)

    def goal_written(self, goal: FloatArray) -> list[tuple[str, str]]:
        """Record that the cycle's goal went out; return the events it completes (at home)."""
        self.goal = goal
        if self.reset_active and np.allclose(goal, self.robot.home, atol=1e-9):
            self.reset_active = False
            return [('info', 'reset: at home')]
        return []

    def servos_stopped(self, position: FloatArray) -> None:
        """Record that the servos' Bus Watchdog stopped them at the measured ``position``."""
        self.goal = np.array(position, dtype=np.float64)
        if self.hold_target is not None:
            self.hold_target = self.goal.copy()

    # ---- ~/reset ------------------------------------------------------------------------------
    def reconfigured(self, position: FloatArray) -> None:
        """Record a fresh configure of the servos (after REBOOT or power loss): torque on here."""
        self.goal = np.array(position, dtype=np.float64)
        self.torque_on = True
        self.watchdog_active = False
        self.hold_target = None

    def start_reset(self) -> None:
        """Start the move home; the last command is forgotten."""
        self.reset_active = True
        self.command = None

    # ---- reconnect ----------------------------------------------------------------------------
    def port_lost(self, now_ns: int) -> None:
        """Record that the port vanished: first reconnect attempt after ``reconnect_min_s``."""
        self.connected = False
        self.backoff_ns = self.reconnect_min_ns
        self.next_attempt_ns = now_ns + self.backoff_ns

    def wait_ns(self, now_ns: int) -> int:
        """Return the time until the next reconnect attempt (0: attempt now)."""
        return max(0, self.next_attempt_ns - now_ns)

    def keep_torque_off(self, now_ns: int) -> bool:
        """Return whether a reconnect now must leave torque off."""
        return not self.torque_on or (self.watchdog == WATCHDOG_TORQUE_OFF
                                      and self.commands_stale(now_ns))

    def reconnect_failed(self, now_ns: int) -> None:
        """Record a failed attempt: double the back-off (up to ``reconnect_max_s``)."""
        self.backoff_ns = min(self.backoff_ns * 2, self.reconnect_max_ns)
        self.next_attempt_ns = now_ns + self.backoff_ns

    def reconnected(self, position: FloatArray, torque_off: bool, seq: int) -> None:
        """Record that the port is back and configured (torque off if ``torque_off``).

        ``seq`` is :attr:`command_seq` as read before the attempt: commands from before (or
        during) the outage are not fresh, so they do not enable torque.
        """
        self.goal = np.array(position, dtype=np.float64)
        self.hold_target = None if self.hold_target is None else self.goal.copy()
        self.used_seq = seq
        if torque_off and not self.watchdog_active:
            self.watchdog_active = True
            self.watchdog_trips += 1
        self.torque_on = not torque_off
        self.connected = True
