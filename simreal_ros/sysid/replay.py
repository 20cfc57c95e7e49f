"""Replay a bag's commands through the bridge's physics, batched, from measured states.

The model is the sim bridge's own (a :class:`simreal_ros.sim.backend.SimBackend` from
:func:`simreal_ros.sim.engines.make_sim`: position servo ``kp (target - q) - kd qdot`` plus the
feed-forward torque, effort clamp), each parameter set is written as the bridge's reset writes
it, and the command delay line is a whole number of physics steps as in the backend's. The
replay builds its control rows itself and hands them to :meth:`SimBackend.rollout` rather than
stepping the environment (:class:`simreal_ros.policy.env.World`) or the backend's delay line:
a fit replays every segment under dozens of parameter sets at once, which the engine runs
batched (MuJoCo: ``mujoco.rollout``, C, one thread per core), and a bag's commands are already
timed, so the injector routes a World adds have no place here. What reaches the servo at
physics step ``i`` (time ``t_i = t0 + i dt``) is:

* sim bridge bags: the last command that reached the backend at or before ``t_i - delay``, with
  the feed-forward ``kd v + tau`` of the command (the bridge applies it);
* servo-bus bags (``backend`` real or twin): the driver writes the goal once per bus cycle,
  right after the read whose stamp is the ``joint_states`` stamp, and the servos ignore the
  feed-forward (their profile is off, so the servo law is ``kp (goal - q) - kd qdot``). The goal
  at ``t_i`` is the last command received before the last cycle stamp at or before
  ``t_i - delay``, moved toward it by at most ``velocity limit * cycle`` per cycle as the
  driver's ``goal_rate_limit`` does; the fitted delay is then what lies between the driver's
  write and the actuation (the servo side), not the bus cycle phase.

Before the first command acts, a servo bus holds the measured start position and the bridge the
first command (it holds home from its start, and excitations start at home). Predictions are
linearly interpolated from the physics steps onto the measured stamps.

Backlash (``backlash_rad`` of :meth:`Replayer.predict`, the total play; 0 or None: none) is
the virtual bus's (:mod:`simreal_ros.hardware.emulator.backlash`, the same code): the servo
closes its loop on the motor side of the play and every measured position is the motor side.
A replay then steps all its jobs together (:meth:`SimBackend.rollout` with a feedback), the
play's torque ``kp (q - m)`` added in every step, and predicts the motor side. A replay starts
from a measured (motor side) position ``m0``; the link is put at ``m0 + h d`` (``h`` half the
play) with ``d`` the direction the link last moved: the sign of the measured velocity when it
moves faster than ``MOVING_RAD_S``, else the direction of the set-point's last motion
(a play of ``SETPOINT_PLAY_RAD`` over the ``HISTORY_NS`` of set-points before the start).
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from typing import Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import DynamicsParams
from simreal_ros.core.residual_model import ResidualModel, play_feature, play_over
from simreal_ros.core.robot import RobotSpec
from simreal_ros.hardware.emulator.backlash import (
    play_step,
    play_trajectory,
    servo_offset_torque,
)
from simreal_ros.sim.backend import RolloutJob, SimBackend
from simreal_ros.sim.engines import DEFAULT_ENGINE, make_sim
from simreal_ros.sysid.data import SysidData

FloatArray = npt.NDArray[np.float64]
#: a joint faster than this at a replay's start has its link at the leading end of the play
MOVING_RAD_S = 0.02
#: half-width of the play whose output tells the set-point's last direction (a replay's start)
SETPOINT_PLAY_RAD = 0.0005
#: set-points a replay starting mid-bag shows a residual's history feature first: the play
#: operator forgets its start once the set-point has moved twice its width (mrad), so 0.5 s
#: of an excitation settles it
HISTORY_NS = 500_000_000
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Segment:
    """A replayed stretch: ``steps`` physics steps from ``start_ns``, scored on ``states``."""

    start_ns: int
    steps: int
    states: IntArray  # indices into SysidData.state_ns inside the segment


class Replayer:
    """Batched replays of one bag's commands under many parameter sets and delays."""

    def __init__(self, robot: RobotSpec, data: SysidData, nthread: int | None = None,
                 engine: str = DEFAULT_ENGINE) -> None:
        self.robot = robot
        self.data = data
        self.sim: SimBackend = make_sim(robot, engine=engine)
        self.nominal: DynamicsParams = self.sim.nominal
        self.dt_ns = self.sim.dt_ns
        self.nthread = max(1, min(nthread or (os.cpu_count() or 1), 8))
        self._ctrl_cache: dict[tuple[int, int, int], FloatArray] = {}
        self._direction_cache: dict[tuple[int, int], FloatArray] = {}
        self._cycle_goal = self._driver_goals() if data.is_hardware else None

    def _driver_goals(self) -> FloatArray:
        """Return the goal the driver wrote at each bus cycle (one per state), rate-limited.

        The driver moves its goal toward the last command by at most ``velocity limit * dt``
        per cycle (``goal_rate_limit``, its default), ``dt`` = its cycle period, taken here as
        the median state period. Without this, the first command after start-up (home, while
        the arm hung 1 rad lower) replayed as a step: 445 mrad of error on the shoulder where
        the driver had ramped.
        """
        d = self.data
        period_s = float(np.median(np.diff(d.state_ns))) / 1e9 if d.state_ns.size > 1 else 0.0
        max_step = self.robot.velocity_limit * period_s
        idx = np.searchsorted(d.cmd_ns, d.state_ns, side='right') - 1
        goals = np.empty((d.state_ns.size, self.robot.n))
        g, _ = d.state_at(d.window_ns[0])
        for k, c in enumerate(idx):
            if c >= 0:
                g = g + np.clip(d.cmd_pos[c] - g, -max_step, max_step)
            goals[k] = g
        return goals

    # ---- segments ----------------------------------------------------------------------------
    def segments(self, start_ns: int, end_ns: int, length_ns: int | None) -> list[Segment]:
        """Equal segments of ``length_ns`` tiling [start, end) (one segment if None)."""
        total = end_ns - start_ns
        length = total if length_ns is None else min(int(length_ns), total)
        count = max(1, total // length)
        steps = int(length // self.dt_ns)
        out = []
        t = self.data.state_ns
        for k in range(count):
            s0 = start_ns + k * steps * self.dt_ns
            s1 = s0 + steps * self.dt_ns
            idx = np.nonzero((t > s0) & (t <= s1))[0].astype(np.int64)
            out.append(Segment(s0, steps, idx))
        return out

    # ---- controls ----------------------------------------------------------------------------
    def _command_index(self, times_ns: IntArray, delay_steps: int) -> IntArray:
        """Index of the command in force at each time (-1: none yet), sim bridge bags."""
        t = times_ns - delay_steps * self.dt_ns
        return (np.searchsorted(self.data.cmd_ns, t, side='right') - 1).astype(np.int64)

    def controls(self, seg: Segment, delay_steps: float) -> FloatArray:
        """Return the (steps, 3 n) targets of ``seg``: position | velocity | effort (robot order).

        A fractional ``delay_steps`` blends the sequences of the two neighbouring whole delays
        linearly (a smooth stand-in the fit can differentiate; replays that must match the
        bridge use whole steps).
        """
        lo = int(np.floor(delay_steps))
        frac = float(delay_steps) - lo
        if frac < 1e-9:
            return self._controls(seg, lo)
        return (1.0 - frac) * self._controls(seg, lo) + frac * self._controls(seg, lo + 1)

    def _controls(self, seg: Segment, delay_steps: int) -> FloatArray:
        key = (seg.start_ns, seg.steps, delay_steps)
        base = self._ctrl_cache.get(key)
        if base is None:
            d = self.data
            # control i acts during step i: from t_start + i dt to t_start + (i + 1) dt
            times = seg.start_ns + np.arange(seg.steps, dtype=np.int64) * self.dt_ns
            q0, _ = d.state_at(seg.start_ns)
            if self._cycle_goal is not None:
                t = times - delay_steps * self.dt_ns
                idx = np.searchsorted(d.state_ns, t, side='right') - 1
                goals = self._cycle_goal
            else:
                idx = self._command_index(times, delay_steps)
                goals = d.cmd_pos
            none = idx < 0
            safe = np.clip(idx, 0, None)
            # before the first command acts: the driver holds the measured position; the bridge
            # holds its last target, taken as the first command (it starts holding home, and
            # so do excitations): holding the sagged position instead cost 6.6e-4 rad RMSE
            # over 5 s with a 30 ms delay
            hold = q0 if self._cycle_goal is not None or not d.cmd_ns.size else d.cmd_pos[0]
            pos = np.where(none[:, None], hold[None, :], goals[safe])
            if d.is_hardware:
                vel = np.zeros_like(pos)
                eff = np.zeros_like(pos)
            else:
                vel = np.where(none[:, None], 0.0, d.cmd_vel[safe])
                eff = np.where(none[:, None], 0.0, d.cmd_eff[safe])
            base = np.concatenate([pos, vel, eff], axis=1)
            if len(self._ctrl_cache) > 4096:
                self._ctrl_cache.clear()
            self._ctrl_cache[key] = base
        return base

    # ---- rollouts ----------------------------------------------------------------------------
    def start_direction(self, start_ns: int, delay_steps: float) -> FloatArray:
        """Direction in [-1, 1] the link last moved at ``start_ns``, per joint (module doc)."""
        key = (start_ns, int(round(delay_steps)))
        d = self._direction_cache.get(key)
        if d is None:
            _q, v = self.data.state_at(start_ns)
            rows = self.history_rows(start_ns, key[1])
            width = np.full(self.robot.n, SETPOINT_PLAY_RAD)
            p = play_over(None, rows, width)
            setpoint = play_feature(rows[-1], p, width) if p is not None and len(rows) \
                else np.zeros(self.robot.n)
            d = np.where(np.abs(v) > MOVING_RAD_S, np.sign(v), setpoint)
            self._direction_cache[key] = d
        return d

    def predict(self, params: Sequence[DynamicsParams], delays: Sequence[float],
                segments: Sequence[Segment], backlash_rad: Sequence[float] | None = None
                ) -> list[list[FloatArray]]:
        """Predicted positions at each segment's measured stamps, per parameter set.

        Returns ``out[p][s]``: an array (len(segments[s].states), n) for parameter set ``p``
        (with command delay ``delays[p]`` physics steps, see :meth:`controls`, and the total
        play ``backlash_rad[p]`` if given, see the module docstring) on segment ``s``.
        """
        if not params:
            return []
        steps = segments[0].steps
        if any(s.steps != steps for s in segments):
            raise ValueError('segments of one batch must have the same length')
        jobs = []
        half = [] if backlash_rad is None else [0.5 * float(b) for b in backlash_rad]
        motor0, halves, kps = [], [], []
        for pi in range(len(params)):
            kp = np.array([params[pi].joints[j].kp for j in self.robot.joint_names])
            for seg in segments:
                q, v = self.data.state_at(seg.start_ns)
                link = q
                if half:
                    link = q + half[pi] * self.start_direction(seg.start_ns, delays[pi])
                    motor0.append(q)
                    halves.append(np.full(self.robot.n, half[pi]))
                    kps.append(kp)
                jobs.append(RolloutJob(pi, link, v, self.controls(seg, float(delays[pi]))))
        if half:
            qpos = self._rollout_backlash(params, jobs, np.array(motor0), np.array(halves),
                                          np.array(kps))
        else:
            qpos = self.sim.rollout(params, jobs, self.nthread)      # (batch, steps, n)
        out: list[list[FloatArray]] = []
        b = 0
        for _ in params:
            per: list[FloatArray] = []
            for seg in segments:
                # state after step i is at t_start + (i + 1) dt
                t_steps = (np.arange(1, steps + 1) * self.dt_ns).astype(np.float64)
                t_meas = (self.data.state_ns[seg.states] - seg.start_ns).astype(np.float64)
                q = qpos[b]
                per.append(np.stack([np.interp(t_meas, t_steps, q[:, j])
                                     for j in range(q.shape[1])], axis=1))
                b += 1
            out.append(per)
        return out

    def _rollout_backlash(self, params: Sequence[DynamicsParams], jobs: list[RolloutJob],
                          motor0: FloatArray, half: FloatArray, kp: FloatArray) -> FloatArray:
        """Rollout with the servo closed on the play's motor side; returns the motor side."""
        motor = motor0.copy()

        def feedback(_k: int, q: FloatArray) -> FloatArray:
            nonlocal motor
            motor = play_step(motor, q, half)
            return servo_offset_torque(kp, q, motor)

        links = self.sim.rollout(params, jobs, self.nthread, feedback=feedback)
        # the motor side after each step: the play over the links from the start (what the
        # feedback computed before the next step, and once more after the last)
        steps_first = play_trajectory(motor0, links.transpose(1, 0, 2), half)
        motor_side: FloatArray = steps_first.transpose(1, 0, 2)
        return motor_side

    def _on_stamps(self, seg: Segment, q: FloatArray) -> FloatArray:
        """Interpolate the positions after each step of ``seg`` onto its measured stamps."""
        t_steps = (np.arange(1, seg.steps + 1) * self.dt_ns).astype(np.float64)
        t_meas = (self.data.state_ns[seg.states] - seg.start_ns).astype(np.float64)
        return np.stack([np.interp(t_meas, t_steps, q[:, j]) for j in range(q.shape[1])],
                        axis=1)

    def predict_residual(self, params: DynamicsParams, delay_steps: int,
                         segments: Sequence[Segment], residual: ResidualModel
                         ) -> list[FloatArray]:
        """Predicted positions at each segment's stamps with ``residual`` in every step.

        Steps the replayer's own backend one physics step at a time, as
        :meth:`SimBackend.step` does with a residual (the batched native rollout cannot call
        the residual between steps): per step the residual sees the joint state and the
        control row, and its output is applied torque or a set-point offset.
        """
        sim, n = self.sim, self.robot.n
        sim.write_params(params)
        kd = np.array([params.joints[j].kd for j in self.robot.joint_names])
        torque = residual.kind == 'torque'
        out = []
        for seg in segments:
            sim.reset_state()
            q0, v0 = self.data.state_at(seg.start_ns)
            sim.set_joint_state(q0, v0)
            self.warm_history(residual, seg.start_ns, delay_steps)
            rows = self.controls(seg, float(delay_steps))
            qs = np.empty((seg.steps, n))
            for i, row in enumerate(rows):
                qt, vt = row[:n], row[n:2 * n]
                ff = kd * vt + row[2 * n:]
                q, qd, _ = sim.joint_state()
                y = residual(residual.features(q, qd, qt, vt))
                if torque:
                    sim.actuate(qt, ff)
                    sim.apply_torque(y)
                else:
                    sim.actuate(qt + y, ff)
                sim.advance(1)
                qs[i] = sim.joint_positions()
            out.append(self._on_stamps(seg, qs))
        return out

    def history_rows(self, start_ns: int, delay_steps: int) -> FloatArray:
        """Return the set-points (robot order) of the ``HISTORY_NS`` before ``start_ns``.

        One row per physics step: what a residual's history feature has seen when a replay
        starts mid-bag; the bag's data window bounds it.
        """
        lo = max(int(self.data.window_ns[0]), start_ns - HISTORY_NS)
        steps = (start_ns - lo) // self.dt_ns
        if steps <= 0:
            return np.zeros((0, self.robot.n))
        seg = Segment(start_ns - steps * self.dt_ns, int(steps), np.zeros(0, dtype=np.int64))
        return self.controls(seg, float(delay_steps))[:, :self.robot.n]

    def warm_history(self, residual: ResidualModel, start_ns: int, delay_steps: int) -> None:
        """Start ``residual``'s history feature (if any) from the set-points before a replay."""
        residual.reset_history()
        if residual.width is not None:
            residual.warm_history(self.history_rows(start_ns, delay_steps))

    def max_gap_ns(self, seg: Segment) -> int:
        """Longest interval without a command or a state inside ``seg`` (edges included)."""
        end = seg.start_ns + seg.steps * self.dt_ns
        worst = 0
        for t in (self.data.cmd_ns, self.data.state_ns):
            inside = t[(t >= seg.start_ns) & (t <= end)]
            edges = np.concatenate([[seg.start_ns], inside, [end]])
            worst = max(worst, int(np.max(np.diff(edges))))
        return worst

    def measured(self, segments: Sequence[Segment]) -> list[FloatArray]:
        """Measured positions at each segment's stamps."""
        return [self.data.state_pos[s.states] for s in segments]
