"""Replay a bag's commands through the bridge's physics, batched, from measured states.

The model is the sim bridge's own (:func:`simreal_ros.sim.model.build_model`: position servo
``kp (ctrl - q) - kd qdot`` plus a feed-forward motor, effort clamp), parameters are written
with the same :meth:`BuiltModel.write_params` followed by ``mj_setConst`` as
:meth:`SimRobot.reset` does, and the command delay line is a whole number of physics steps as in
:class:`SimRobot`. What reaches the servo at physics step ``i`` (time ``t_i = t0 + i dt``) is:

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
first command (it holds home from its start, and excitations start at home). Rollouts go
through ``mujoco.rollout`` (C, one thread per core) for many segments and parameter sets at
once; predictions are linearly interpolated from the physics steps onto the measured stamps.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
import os
from typing import Sequence

import mujoco
from mujoco import rollout as mj_rollout
import numpy as np
import numpy.typing as npt

from simreal_ros.core.dynamics import DynamicsParams
from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.model import BuiltModel, build_model
from simreal_ros.sysid.data import SysidData

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


@dataclass(frozen=True)
class Segment:
    """A replayed stretch: ``steps`` physics steps from ``start_ns``, scored on ``states``."""

    start_ns: int
    steps: int
    states: IntArray  # indices into SysidData.state_ns inside the segment


class Replayer:
    """Batched replays of one bag's commands under many parameter sets and delays."""

    def __init__(self, robot: RobotSpec, data: SysidData, nthread: int | None = None) -> None:
        self.robot = robot
        self.data = data
        self.built: BuiltModel = build_model(robot)
        self.nominal: DynamicsParams = self.built.nominal_params(robot)
        self.dt_ns = int(round(self.built.model.opt.timestep * 1e9))
        self.nthread = max(1, min(nthread or (os.cpu_count() or 1), 8))
        self._datas = [mujoco.MjData(self.built.model) for _ in range(self.nthread)]
        self._scratch = mujoco.MjData(self.built.model)
        self._ctrl_cache: dict[tuple[int, int, int], FloatArray] = {}
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

    # ---- models ------------------------------------------------------------------------------
    def model_for(self, params: DynamicsParams) -> mujoco.MjModel:
        """Return a copy of the model with ``params`` written as the sim bridge writes them."""
        m = copy.copy(self.built.model)
        replace(self.built, model=m).write_params(self.robot, params)
        mujoco.mj_setConst(m, self._scratch)
        return m

    def _initial_state(self, model: mujoco.MjModel, seg: Segment) -> FloatArray:
        d = self._scratch
        mujoco.mj_resetData(model, d)
        q, v = self.data.state_at(seg.start_ns)
        d.qpos[self.built.qpos_adr] = q
        d.qvel[self.built.dof_adr] = v
        mujoco.mj_forward(model, d)
        state = np.empty(mujoco.mj_stateSize(model, STATE_SPEC))
        mujoco.mj_getState(model, d, state, STATE_SPEC)
        return state

    # ---- controls ----------------------------------------------------------------------------
    def _command_index(self, times_ns: IntArray, delay_steps: int) -> IntArray:
        """Index of the command in force at each time (-1: none yet), sim bridge bags."""
        t = times_ns - delay_steps * self.dt_ns
        return (np.searchsorted(self.data.cmd_ns, t, side='right') - 1).astype(np.int64)

    def controls(self, seg: Segment, delay_steps: float, params: DynamicsParams) -> FloatArray:
        """Return the (steps, nu) control sequence of ``seg`` (servo targets, feed-forward).

        A fractional ``delay_steps`` blends the sequences of the two neighbouring whole delays
        linearly (a smooth stand-in the fit can differentiate; replays that must match the
        bridge use whole steps).
        """
        lo = int(np.floor(delay_steps))
        frac = float(delay_steps) - lo
        if frac < 1e-9:
            return self._controls(seg, lo, params)
        return (1.0 - frac) * self._controls(seg, lo, params) + \
            frac * self._controls(seg, lo + 1, params)

    def _controls(self, seg: Segment, delay_steps: int, params: DynamicsParams) -> FloatArray:
        key = (seg.start_ns, seg.steps, delay_steps)
        kd = np.array([params.joints[n].kd for n in self.robot.joint_names])
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
        n = self.robot.n
        ctrl = np.zeros((seg.steps, self.built.model.nu))
        ctrl[:, self.built.servo_act] = base[:, :n]
        ctrl[:, self.built.ff_act] = kd[None, :] * base[:, n:2 * n] + base[:, 2 * n:]
        return ctrl

    # ---- rollouts ----------------------------------------------------------------------------
    def predict(self, params: Sequence[DynamicsParams], delays: Sequence[float],
                segments: Sequence[Segment]) -> list[list[FloatArray]]:
        """Predicted positions at each segment's measured stamps, per parameter set.

        Returns ``out[p][s]``: an array (len(segments[s].states), n) for parameter set ``p``
        (with command delay ``delays[p]`` physics steps, see :meth:`controls`) on segment
        ``s``.
        """
        if not params:
            return []
        steps = segments[0].steps
        if any(s.steps != steps for s in segments):
            raise ValueError('segments of one batch must have the same length')
        models = [self.model_for(p) for p in params]
        batch_models = []
        init = []
        ctrl = []
        for pi, (m, p) in enumerate(zip(models, params, strict=True)):
            for seg in segments:
                batch_models.append(m)
                init.append(self._initial_state(m, seg))
                ctrl.append(self.controls(seg, float(delays[pi]), p))
        state, _ = mj_rollout.rollout(batch_models, self._datas, np.asarray(init),
                                      np.asarray(ctrl))
        qpos = state[:, :, 1 + self.built.qpos_adr]            # (batch, steps, n)
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
