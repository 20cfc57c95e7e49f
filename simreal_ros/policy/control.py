"""The policy controller: enable, ramp, run, hold; no ROS, no torch.

The node feeds measurements in (:meth:`PolicyController.set_state`, ``set_goal``, ``set_imu``,
``set_image``) and calls :meth:`PolicyController.step` once per control period with the current
time; the controller answers with the full-robot command to publish (or ``None``: publish nothing).

Modes::

    disabled --enable--> ramping (cosine ramp from the measured pose to the default pose)
             --ramp done--> running (the network drives)
    ramping/running --observation older than stale_after_periods--> hold (last safe command)
                    (joint_states, and imu/data when a term needs the IMU)
                    --a camera frame older than its image term's max_age_s--> hold
    ramping/running/hold --a fall (spec ``fall:``, policy/safety.py)--> damping
                    (the network stops; every period the command is the measured joint
                    positions: a position servo's damper) --enable--> ramping
                    (refused while the base is still tilted)
    any --disable--> disabled (publishes nothing; the backend holds its last target)

A network output that is NaN/inf, of the wrong size or beyond ``action.reject_abs`` is
rejected: the last safe command is held and the fault is counted and reported. Every command
returned is finite and inside the joint limits. An observation that cannot be built (e.g. a
term's input is malformed) also holds the last safe command and is counted
(``observation_faults``).

Image terms: ``set_image`` keeps each camera's newest frame (uint8, as received); the step that
first sees it preprocesses it (:func:`simreal_ros.policy.images.preprocess`) into the term's
frame history, so a frame is preprocessed once however often the loop runs, and the network is
called as ``model(obs_vector, image_stack)``. ``StepResult.preprocess_ns`` is that step's
preprocessing time. No frame yet, or a newest frame older than the term's ``max_age_s`` (by its
header stamp), holds like a stale joint_states.
"""

from __future__ import annotations

from dataclasses import dataclass
import time
from typing import Callable, NoReturn, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import map_names
from simreal_ros.core.robot import RobotSpec
from simreal_ros.policy.codec import ActionProcessor, ObservationBuilder, ramp_duration, ramp_point
from simreal_ros.policy.images import (
    ENCODING_CHANNELS,
    FrameHistory,
    U8Array,
    image_stack,
    preprocess,
)
from simreal_ros.policy.safety import FallDetector
from simreal_ros.policy.spec import PolicySpec
from simreal_ros.policy.terms import ObsInputs

FloatArray = npt.NDArray[np.float64]
F32Array = npt.NDArray[np.float32]
#: ``model(obs)``, or ``model(obs, image_stack)`` for a spec with image terms
Model = Callable[..., FloatArray]

DISABLED, RAMPING, RUNNING, HOLD = 'disabled', 'ramping', 'running', 'hold'
#: after a fall: goals follow the measured positions until re-enabled (policy/safety.py)
DAMPING = 'damping'


@dataclass(frozen=True)
class StepResult:
    """What one control step decided."""

    command: FloatArray | None
    mode: str
    event: str = ''
    model_ns: int = 0
    compute_ns: int = 0
    preprocess_ns: int = 0


class PolicyController:
    """Safety state machine around observation building, the network and action processing."""

    def __init__(self, spec: PolicySpec, robot: RobotSpec, model: Model) -> None:
        if robot.name != spec.robot:
            raise ValueError(f'policy {spec.name} is for {spec.robot}, not {robot.name}')
        self.spec = spec
        self.robot = robot
        self.model = model
        self.obs = ObservationBuilder(spec)
        self.actions = ActionProcessor(spec)
        self.idx = spec.joint_index
        self.full_default = robot.home.copy()
        self.full_default[self.idx] = spec.default
        self.lower = robot.lower.copy()
        self.upper = robot.upper.copy()
        self.lower[self.idx] = spec.lower
        self.upper[self.idx] = spec.upper
        self.mode = DISABLED
        self.position: FloatArray | None = None
        self.velocity: FloatArray | None = None
        self.state_stamp_ns = 0
        self.goal = spec.default.copy()
        self.imu_gyro: FloatArray | None = None
        self.imu_quat: FloatArray | None = None
        self.imu_stamp_ns: int | None = None
        self.fall = FallDetector(spec.fall) if spec.fall is not None else None
        #: the fall that put the controller in damping ('' = none yet)
        self.fall_reason = ''
        # fall detection reads imu/data too, so it must then be fresh as well
        self.needs_imu = 'imu' in spec.needs or self.fall is not None
        #: the latest cmd_vel (vx, vy, wz) and when it was received (node clock, ns)
        self.cmd_vel: FloatArray | None = None
        self.cmd_vel_ns: int | None = None
        self.image_terms = spec.images
        self.frame_histories = [FrameHistory(t) for t in spec.images]
        #: per image term: the newest frame received (pixels, encoding, stamp) or None
        self.frames: list[tuple[U8Array, str, int] | None] = [None] * len(spec.images)
        self._frames_used: list[int | None] = [None] * len(spec.images)
        self.last_action = self.actions.neutral_action()
        self.last_command: FloatArray | None = None
        self.ramp_start: FloatArray | None = None
        self.ramp_elapsed_s = 0.0
        self.ramp_s = 0.0
        self.run_start_ns = 0
        self.last_step_ns: int | None = None
        self.held_mode = RUNNING
        self.counts = {'steps': 0, 'rejected_outputs': 0, 'stale_holds': 0,
                       'rejected_states': 0, 'rejected_goals': 0, 'rejected_imu': 0,
                       'observation_faults': 0, 'clipped_actions': 0}
        if self.fall is not None:
            self.counts['falls'] = 0
        if spec.images:
            self.counts.update(images_received=0, rejected_images=0)
        self.last_fault = ''

    # ---- inputs --------------------------------------------------------------------------
    def set_state(self, names: Sequence[str], position: Sequence[float],
                  velocity: Sequence[float], stamp_ns: int) -> None:
        """Store a joint_states measurement; ValueError (state kept) when it is malformed."""
        try:
            q = map_names(names, position, self.robot.joint_names, 'joint_states position')
            if len(velocity) == 0 and 'joint_vel' in {t.name for t in self.spec.observation}:
                raise ValueError('joint_states has no velocity, which the joint_vel term needs')
            v = (map_names(names, velocity, self.robot.joint_names, 'joint_states velocity')
                 if len(velocity) else np.zeros(self.robot.n))
        except ValueError as exc:
            self.counts['rejected_states'] += 1
            self.last_fault = str(exc)
            raise
        self.position, self.velocity, self.state_stamp_ns = q, v, int(stamp_ns)

    def set_goal(self, names: Sequence[str], position: Sequence[float]) -> bool:
        """Set the goal (policy joints); clamps into the limits (returns True when clamped)."""
        try:
            g = map_names(names, position, self.spec.joints, 'goal')
        except ValueError as exc:
            self.counts['rejected_goals'] += 1
            self.last_fault = str(exc)
            raise
        clamped = np.clip(g, self.spec.lower, self.spec.upper)
        self.goal = clamped
        return bool(np.any(clamped != g))

    def set_imu(self, quat_wxyz: Sequence[float], gyro: Sequence[float], stamp_ns: int
                ) -> None:
        """Store an IMU reading measured at ``stamp_ns``; ValueError when it has NaN/inf."""
        q = np.asarray(quat_wxyz, dtype=np.float64)
        g = np.asarray(gyro, dtype=np.float64)
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(g))):
            self.counts['rejected_imu'] += 1
            self.last_fault = f'imu/data contains NaN or inf: {q.tolist()} {g.tolist()}'
            raise ValueError(self.last_fault)
        if self.fall is not None:
            try:
                self.fall.update(q, stamp_ns)
            except ValueError as exc:
                self.counts['rejected_imu'] += 1
                self.last_fault = f'imu/data: {exc}'
                raise ValueError(self.last_fault) from None
        self.imu_quat, self.imu_gyro, self.imu_stamp_ns = q, g, int(stamp_ns)

    def set_cmd_vel(self, linear_x: float, linear_y: float, angular_z: float,
                    received_ns: int) -> None:
        """Store a velocity command received at ``received_ns`` (node clock; no stamp).

        ValueError (command kept) when it has NaN/inf. The ``velocity_command`` term reads it
        as zero once it is older than the term's ``timeout_s``.
        """
        c = np.array([linear_x, linear_y, angular_z], dtype=np.float64)
        if not np.all(np.isfinite(c)):
            self.last_fault = f'cmd_vel contains NaN or inf: {c.tolist()}'
            raise ValueError(self.last_fault)
        self.cmd_vel, self.cmd_vel_ns = c, int(received_ns)

    def set_image(self, index: int, frame: U8Array, encoding: str, stamp_ns: int) -> None:
        """Store the newest frame of image term ``index``, measured at ``stamp_ns``.

        ``frame`` is uint8 (h, w, c); ValueError (frame not kept, counted) on an encoding the
        node does not convert or pixels that do not match it.
        """
        channels = ENCODING_CHANNELS.get(encoding)
        if channels is None or frame.ndim != 3 or frame.shape[2] != channels:
            self.reject_image(index, f'encoding {encoding!r} with pixels of shape '
                              f'{frame.shape}: expected rgb8, bgr8 or mono8')
        self.frames[index] = (frame, encoding, int(stamp_ns))
        self.counts['images_received'] += 1

    def reject_image(self, index: int, reason: str) -> NoReturn:
        """Count a frame of image term ``index`` that cannot be used; raise ValueError."""
        self.counts['rejected_images'] += 1
        self.last_fault = f'{self.image_terms[index].topic}: {reason}'
        raise ValueError(self.last_fault)

    def image_ages_ns(self, now_ns: int) -> list[int | None]:
        """Age of each image term's newest frame at ``now_ns`` (None: none yet)."""
        return [None if f is None else now_ns - f[2] for f in self.frames]

    # ---- mode changes --------------------------------------------------------------------
    @property
    def stale_after_ns(self) -> int:
        """Observations older than this are stale (``stale_after_periods`` control periods)."""
        return self.spec.stale_after_ns

    def staleness(self, now_ns: int) -> str:
        """Why the observation is not fresh enough to act on at ``now_ns`` ('' = fresh).

        joint_states always counts; imu/data too when an observation term needs the IMU.
        """
        if self.position is None:
            return 'no joint_states received yet'
        limit = self.stale_after_ns
        age = now_ns - self.state_stamp_ns
        if age > limit:
            return f'joint_states is {age / 1e6:.1f} ms old'
        if self.needs_imu:
            if self.imu_stamp_ns is None:
                return 'no imu/data received yet (an observation term needs it)'
            age = now_ns - self.imu_stamp_ns
            if age > limit:
                return f'imu/data is {age / 1e6:.1f} ms old'
        for term, frame in zip(self.image_terms, self.frames, strict=True):
            if frame is None:
                return f'no frames on {term.topic} yet (an image term needs them)'
            age = now_ns - frame[2]
            if age > term.max_age_ns:
                return (f'the newest frame on {term.topic} is {age / 1e6:.1f} ms old '
                        f'(max_age_s {term.max_age_s:g})')
        return ''

    def is_fresh(self, now_ns: int) -> bool:
        """Whether every measurement the observation needs is recent enough to act on."""
        return not self.staleness(now_ns)

    def enable(self, now_ns: int) -> tuple[bool, str]:
        """Start the ramp from the measured pose; refused without a fresh measurement."""
        if self.mode in (RAMPING, RUNNING, HOLD):
            return True, f'already enabled ({self.mode})'
        if self.position is None:
            return False, 'no joint_states received yet: cannot ramp from an unknown pose'
        why = self.staleness(now_ns)
        if why:
            return False, (f'{why} (stale after {self.spec.safety.stale_after_periods:g} '
                           'periods): is the backend running, and do both sides use the same '
                           'clock (sim time)?')
        if self.fall is not None and self.fall.tilted:
            return False, (f'the base is tilted {self.fall.tilt_rad:.2f} rad (> '
                           f'{self.fall.spec.tilt_rad:g} rad, imu/data): set the robot on its '
                           'feet, then enable')
        if self.fall is not None:
            self.fall.reset()
        self.ramp_start = np.clip(self.position, self.lower, self.upper)
        self.ramp_s = ramp_duration(self.spec, self.ramp_start, self.full_default)
        self.ramp_elapsed_s = 0.0
        self.last_step_ns = None
        self.mode = RAMPING
        return True, (f'ramping to the default pose over {self.ramp_s:.2f} s, then '
                      f'{self.spec.name} takes over')

    def disable(self) -> str:
        """Stop commanding; the backend holds its last target."""
        was = self.mode
        self.mode = DISABLED
        self.last_step_ns = None
        return f'disabled (was {was})'

    def _reset_history(self) -> None:
        self.obs.reset()
        for h in self.frame_histories:
            h.reset()
        self._frames_used = [None] * len(self.frame_histories)

    def _images(self) -> tuple[F32Array, int]:
        """Preprocess the frames not seen yet into the histories; the stack and the time."""
        t0 = time.perf_counter_ns()
        for k, (term, frame) in enumerate(zip(self.image_terms, self.frames, strict=True)):
            if frame is None:
                raise ValueError(f'no frame from {term.topic} yet')
            if self._frames_used[k] != frame[2]:
                self.frame_histories[k].push(preprocess(term, frame[0], frame[1]))
                self._frames_used[k] = frame[2]
        return image_stack(self.frame_histories), time.perf_counter_ns() - t0

    def _start_running(self, now_ns: int) -> None:
        self._reset_history()
        self.actions.reset(self.spec.default)
        self.last_action = self.actions.neutral_action()
        self.run_start_ns = now_ns
        self.mode = RUNNING

    # ---- the control step ----------------------------------------------------------------
    def step(self, now_ns: int) -> StepResult:
        """Decide the command for this period."""
        t0 = time.perf_counter_ns()
        self.counts['steps'] += 1
        dt_s = 0.0 if self.last_step_ns is None else max(0, now_ns - self.last_step_ns) / 1e9
        self.last_step_ns = now_ns
        if self.mode == DISABLED:
            return StepResult(None, DISABLED)
        event = ''
        if self.mode != DAMPING and self.fall is not None and self.fall.fallen:
            self.mode = DAMPING
            self.counts['falls'] += 1
            self.fall_reason = self.fall.reason()
            self.last_fault = f'fall: {self.fall_reason}'
            event = (f'fall detected: {self.fall_reason}; the policy stops and hands over to '
                     'damping (goals follow the measured positions) until re-enabled '
                     '(simreal policy enable)')
        if self.mode == DAMPING:
            return StepResult(self._damping_command(), DAMPING, event,
                              compute_ns=time.perf_counter_ns() - t0)
        why = self.staleness(now_ns)
        if why:
            if self.mode != HOLD:
                self.held_mode = self.mode
                self.mode = HOLD
                self.counts['stale_holds'] += 1
            self.last_fault = f'{why}: holding the last command'
            return StepResult(self._hold_command(), HOLD, self.last_fault,
                              compute_ns=time.perf_counter_ns() - t0)
        if self.mode == HOLD:
            self.mode = self.held_mode
            if self.mode == RUNNING:  # the history has a gap: start it again
                self._reset_history()
        if self.mode == RAMPING:
            assert self.ramp_start is not None
            self.ramp_elapsed_s += dt_s
            cmd = ramp_point(self.ramp_start, self.full_default, self.ramp_elapsed_s,
                             self.ramp_s)
            if self.ramp_elapsed_s >= self.ramp_s:
                self._start_running(now_ns)
            return StepResult(self._safe(cmd), RAMPING, compute_ns=time.perf_counter_ns() - t0)
        return self._run(now_ns, t0)

    def _run(self, now_ns: int, t0: int) -> StepResult:
        assert self.position is not None and self.velocity is not None
        inputs = ObsInputs(
            position=self.position[self.idx], velocity=self.velocity[self.idx],
            default=self.spec.default, last_action=self.last_action, goal=self.goal,
            time_s=(now_ns - self.run_start_ns) / 1e9, imu_gyro=self.imu_gyro,
            imu_quat_wxyz=self.imu_quat, cmd_vel=self.cmd_vel,
            cmd_vel_age_s=None if self.cmd_vel_ns is None else (now_ns - self.cmd_vel_ns) / 1e9)
        images: F32Array | None = None
        pre_ns = 0
        try:
            obs = self.obs.build(inputs)
            if self.image_terms:
                images, pre_ns = self._images()
        except ValueError as exc:
            self.counts['observation_faults'] += 1
            self.last_fault = f'observation: {exc}; holding the last command'
            return StepResult(self._hold_command(), RUNNING, self.last_fault,
                              compute_ns=time.perf_counter_ns() - t0)
        m0 = time.perf_counter_ns()
        try:
            raw = self.model(obs) if images is None else self.model(obs, images)
        except Exception as exc:  # noqa: BLE001 - a failing network is a fault, never a crash
            raw = None
            reason = f'model call failed: {exc}'
        model_ns = time.perf_counter_ns() - m0
        if raw is None:
            res = None
        else:
            res = self.actions.process(raw)
            reason = res.reason
        if res is None or not res.ok:
            self.counts['rejected_outputs'] += 1
            self.last_fault = f'rejected: {reason}; holding the last command'
            return StepResult(self._hold_command(), RUNNING, self.last_fault, model_ns,
                              time.perf_counter_ns() - t0, pre_ns)
        if res.clipped:
            self.counts['clipped_actions'] += 1
        self.last_action = res.action
        cmd = self.full_default.copy()
        cmd[self.idx] = res.target
        return StepResult(self._safe(cmd), RUNNING, '', model_ns, time.perf_counter_ns() - t0,
                          pre_ns)

    def _damping_command(self) -> FloatArray | None:
        """Return the measured positions, clamped into the limits (see policy/safety.py)."""
        if self.position is None:
            return self._hold_command()
        return self._safe(np.array(self.position, dtype=np.float64))

    def _hold_command(self) -> FloatArray | None:
        if self.last_command is None:
            return None
        return np.array(self.last_command, dtype=np.float64)

    def _safe(self, cmd: FloatArray) -> FloatArray:
        out: FloatArray = np.clip(cmd, self.lower, self.upper)
        if not np.all(np.isfinite(out)):  # cannot happen: inputs are checked; belt and braces
            raise AssertionError(f'non-finite command {out.tolist()}')
        self.last_command = out
        return np.array(out, dtype=np.float64)
