"""The locomotion task of ``simreal_quad``: commands, the privileged gait expert, the world.

Everything the trainer (:mod:`simreal_ros.policy.locomotion_train`) and the in-process
evaluation (:mod:`simreal_ros.jobs.locomotion_eval`) share; numpy only, no ROS.

**Commands** (:class:`CommandSampler`): ``(vx, vy, wz)`` in the base frame (m/s, m/s, rad/s),
as ``cmd_vel`` carries them; a new one every ``interval_s``. Training draws vx in
[-0.2, 0.5], vy in [-0.15, 0.15], wz in [-0.8, 0.8] (one in ten a zero command, one in four a
straight forward 0.3-0.5 m/s: the targets' commands).

**The expert** (:class:`GaitExpert`) is a trot whose stride follows the command, with
feedback. It is the teacher, so it may use ground truth. Per leg ``l`` (fl, fr, rl, rr; the
diagonals in phase, :data:`TROT_OFFSETS_RAD`) at phase ``phi = 2 pi t / period_s + offset``::

    hip_flex = home - (sx + side_l * d) * cos(phi) + pitch feedback
    hip_abd  = home + sy * cos(phi)                + roll feedback
    knee     = home - lift * max(0, -sin(phi))

the stance is ``phi`` in (0, pi) (the foot moves back under the body), the swing (pi, 2 pi)
(the knee folds). ``sx = vx_ref / GAIN_M_S_PER_RAD`` with ``vx_ref = vx + k_v (vx - v_x)``
(``v_x`` the base's true forward speed, averaged over the last gait period) and the same
for ``sy`` from vy; ``d`` (``side_l`` = +1 right legs, -1 left legs) turns:
``d = (wz + k_w (wz - w_z)) / YAW_GAIN``, ``w_z`` the yaw rate averaged the same way
(k_v = k_w = 0.5). The gains were measured here in MuJoCo with the gait: 1.45 m/s per rad of
stride and 6 rad/s per rad of differential stride at 2.5 Hz (with them the expert makes
0.38 m/s at a 0.4 m/s command and 0.58 rad/s at 0.5 rad/s while walking at 0.3 m/s, nominal,
no pushes). Pitch and roll (from the base's orientation) add a proportional-derivative
correction to hip_flex and hip_abd that levels the body after a push.

**The world** (:class:`LocoWorld`) is one simulated ``simreal_quad`` wired to the policy as
the running graph: physics at the model's 1 kHz with the servos' PD at every step, the policy
at the spec's rate (50 Hz), commands through the latency preset's ``command`` route and the
joint state plus IMU through its ``observation`` route
(:class:`~simreal_ros.policy.train_delays.RouteQueue`), the randomization's
``command_delay_s`` on top; per episode: the dynamics randomization (friction, masses, servo
gains), motor strength (effort limit x ``strength_range``) and pushes (a force on the base
every ``push_interval_s``, ``push_duration_s`` long, 50-100 % of ``push_force_n``, drawn by
:func:`~simreal_ros.core.pushes.draw_wait_s` and :func:`~simreal_ros.core.pushes.draw_force_n`,
the draws of the sim bridge's and the virtual robot's pushes; each push starts at the first
control tick at or after its time). A nominal world (``randomize=False``) has none of them but
the pushes, which are the eval's.

The world draws a push when its tick comes, not at the reset, because the same generator also
draws the observation noise between two pushes: drawing them all at the reset would shift every
draw after it, so a seed would not give the pushes (nor the noise) ``simreal_quad_walk`` was
trained with. A nominal world draws nothing else, so its pushes are exactly
:func:`~simreal_ros.core.pushes.push_sequence`'s on the grid of ticks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace
import math
from typing import Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.dynamics import load_randomization
from simreal_ros.core.legged import tilt_rad as tilt_of
from simreal_ros.core.pushes import PushRanges, draw_force_n, draw_wait_s
from simreal_ros.core.robot import RobotSpec
from simreal_ros.latency.injection import RouteConfig
from simreal_ros.policy.codec import ActionProcessor, ObservationBuilder
from simreal_ros.policy.spec import PolicySpec
from simreal_ros.policy.terms import ObsInputs, projected_gravity
from simreal_ros.policy.train_delays import (
    COMMAND,
    OBSERVATION,
    LatencyPreset,
    RouteQueue,
    draw_preset,
)
from simreal_ros.sim.backend import BaseState, Observation
from simreal_ros.sim.engines import DEFAULT_ENGINE, make_sim
from simreal_ros.sim.gait import TROT_OFFSETS_RAD

FloatArray = npt.NDArray[np.float64]

#: +1 for the right legs, -1 for the left (differential stride turns left for d > 0)
SIDES = (-1.0, 1.0, -1.0, 1.0)
#: forward speed per rad of stride amplitude at 2.5 Hz (measured, MuJoCo)
GAIN_M_S_PER_RAD = 1.45
#: yaw rate per rad of differential stride at 2.5 Hz while walking (measured, MuJoCo)
YAW_GAIN = 6.0


@dataclass(frozen=True)
class ExpertGains:
    """The expert gait's parameters (module docstring)."""

    period_s: float = 0.4
    lift_rad: float = 0.25
    max_stride_rad: float = 0.45
    max_lateral_rad: float = 0.2
    max_turn_rad: float = 0.15
    k_v: float = 0.5
    k_w: float = 0.5
    k_pitch: float = 0.6
    k_pitch_rate: float = 0.04
    k_roll: float = 0.6
    k_roll_rate: float = 0.04


class GaitExpert:
    """The privileged trot (module docstring); :meth:`targets` gives joint targets."""

    def __init__(self, robot: RobotSpec, gains: ExpertGains | None = None) -> None:
        if robot.n != 12 or robot.base is None:
            raise ValueError(f'{robot.name}: the gait expert needs a floating base with 4 '
                             f'legs of 3 joints, got {robot.n} joints')
        self.robot = robot
        self.g = gains or ExpertGains()
        self.reset()

    def reset(self) -> None:
        """Forget the filtered measurements."""
        self.window: deque[FloatArray] = deque()
        self.v_filt = np.zeros(2)
        self.wz_filt = 0.0

    def targets(self, t_s: float, command: FloatArray, base: BaseState, dt_s: float
                ) -> FloatArray:
        """Joint targets (robot order) at gait time ``t_s`` for ``command`` (vx, vy, wz)."""
        g = self.g
        w = base.angular_velocity
        # the mean over one gait period: the stride's own oscillation cancels, lag period/2
        self.window.append(np.array([*base.linear_velocity_in_base()[:2], w[2]]))
        while len(self.window) > max(1, int(round(g.period_s / dt_s))):
            self.window.popleft()
        mean = np.mean(self.window, axis=0)
        self.v_filt, self.wz_filt = mean[:2], float(mean[2])
        vx, vy, wz = (float(c) for c in command)
        sx = np.clip((vx + g.k_v * (vx - self.v_filt[0])) / GAIN_M_S_PER_RAD,
                     -g.max_stride_rad, g.max_stride_rad)
        sy = np.clip((vy + g.k_v * (vy - self.v_filt[1])) / GAIN_M_S_PER_RAD,
                     -g.max_lateral_rad, g.max_lateral_rad)
        d = np.clip((wz + g.k_w * (wz - self.wz_filt)) / YAW_GAIN, -g.max_turn_rad,
                    g.max_turn_rad)
        grav = projected_gravity(base.orientation_wxyz)  # what the IMU term gives the policy
        pitch = math.atan2(-grav[0], -grav[2])   # > 0: nose down
        roll = math.atan2(grav[1], -grav[2])     # > 0: left side up
        moving = abs(vx) + abs(vy) + 0.2 * abs(wz) > 0.02
        lift = g.lift_rad if moving else 0.0
        q = self.robot.home.copy()
        for leg, off in enumerate(TROT_OFFSETS_RAD):
            phi = 2.0 * math.pi * t_s / g.period_s + off
            c = math.cos(phi)
            front = leg < 2
            # nose down: extend the front legs (hip back), fold the rear ones
            q[3 * leg + 1] += -(sx + SIDES[leg] * d) * c \
                + (1.0 if front else -1.0) * (g.k_pitch * pitch + g.k_pitch_rate * w[1])
            q[3 * leg] += sy * c - (g.k_roll * roll + g.k_roll_rate * w[0])
            q[3 * leg + 2] -= lift * max(0.0, -math.sin(phi))
        out: FloatArray = np.clip(q, self.robot.lower, self.robot.upper)
        return out


@dataclass(frozen=True)
class CommandRanges:
    """The commands training draws (module docstring)."""

    vx_m_s: tuple[float, float] = (-0.2, 0.5)
    vy_m_s: tuple[float, float] = (-0.15, 0.15)
    wz_rad_s: tuple[float, float] = (-0.8, 0.8)
    zero_fraction: float = 0.1
    forward_fraction: float = 0.25


class CommandSampler:
    """Draw velocity commands from :class:`CommandRanges` with a seeded generator."""

    def __init__(self, ranges: CommandRanges | None = None) -> None:
        self.r = ranges or CommandRanges()

    def sample(self, rng: np.random.Generator) -> FloatArray:
        """One command ``(vx, vy, wz)``."""
        r = self.r
        u = rng.random()
        if u < r.zero_fraction:
            return np.zeros(3)
        if u < r.zero_fraction + r.forward_fraction:
            return np.array([rng.uniform(0.3, 0.5), 0.0, rng.uniform(-0.1, 0.1)])
        return np.array([rng.uniform(*r.vx_m_s), rng.uniform(*r.vy_m_s),
                         rng.uniform(*r.wz_rad_s)])


@dataclass(frozen=True)
class WorldSettings:
    """What a :class:`LocoWorld` randomizes and how it is wired (trainer config fields)."""

    randomization: str = 'legged'
    latency_presets: tuple[LatencyPreset, ...] = (LatencyPreset('none'),)
    state_rate_hz: float = 200.0
    noise_pos_rad: float = 0.001
    noise_vel_rad_s: float = 0.05
    noise_gyro_rad_s: float = 0.02
    strength_range: tuple[float, float] = (0.75, 1.2)
    push_interval_s: tuple[float, float] = (2.0, 4.0)
    push_force_n: float = 8.0
    push_duration_s: float = 0.15

    def push_ranges(self) -> PushRanges:
        """Return the pushes as a randomization file's ``pushes:`` gives them (a peak force)."""
        return PushRanges.from_peak(self.push_interval_s, self.push_force_n,
                                    self.push_duration_s)


class LocoWorld:
    """One ``simreal_quad`` in an engine, driven through the policy spec (module docstring)."""

    def __init__(self, spec: PolicySpec, robot: RobotSpec, cfg: WorldSettings, seed: int,
                 randomize: bool = True, engine: str = DEFAULT_ENGINE,
                 pushes: bool = True) -> None:
        rand = load_randomization(cfg.randomization) if cfg.randomization and randomize \
            else None
        self.spec, self.robot, self.cfg = spec, robot, cfg
        self.randomize, self.pushes = randomize, pushes
        self.sim = make_sim(robot, randomization=rand, seed=seed, engine=engine)
        self.rng = np.random.default_rng(seed + 7919)
        self.obs = ObservationBuilder(spec)
        self.act = ActionProcessor(spec)
        self.idx = spec.joint_index
        self.full_default = robot.home.copy()
        self.full_default[self.idx] = spec.default
        self.steps_per_tick = max(1, int(round(1.0 / (spec.control_rate_hz
                                                      * robot.timestep_s))))
        self.steps_per_state = max(1, int(round(1.0 / (cfg.state_rate_hz * robot.timestep_s))))
        self.tick_s = self.steps_per_tick * robot.timestep_s
        self.dt_s = robot.timestep_s
        self.push_ranges = cfg.push_ranges()
        self.reset()

    def reset(self, command: Sequence[float] | FloatArray = (0.0, 0.0, 0.0)) -> None:
        """Draw new dynamics, strength, latency preset; the robot standing at home, at rest."""
        cfg, sim = self.cfg, self.sim
        params = sim.reset(randomize=self.randomize)
        if self.randomize:
            self.preset: LatencyPreset | None = draw_preset(cfg.latency_presets, self.rng)
            route_seed = int(self.rng.integers(0, 2**63 - 1))
            self.state_phase = int(self.rng.integers(0, self.steps_per_state))
            strength = float(self.rng.uniform(*cfg.strength_range))
        else:
            sim.params = params = replace(params, command_delay_s=0.0)
            self.preset, route_seed, self.state_phase, strength = None, 0, 0, 1.0
        for j, name in enumerate(self.robot.joint_names):
            jd = params.joints[name]
            sim.set_servo(j, jd.kp, jd.kd, strength * float(self.robot.effort_limit[j]))
        self.strength = strength
        cmd_route = self.preset.route(COMMAND) if self.preset else RouteConfig(COMMAND)
        obs_route = self.preset.route(OBSERVATION) if self.preset else RouteConfig(OBSERVATION)
        self.commands: RouteQueue[FloatArray] = RouteQueue(cmd_route, route_seed)
        self.states: RouteQueue[Observation] = RouteQueue(obs_route, route_seed)
        sim.set_target(JointTarget.hold(self.full_default))
        self.last_target = self.full_default.copy()
        self.t = 0.0
        self.obs.reset()
        self.act.reset(self.spec.default)
        self.last_action = self.act.neutral_action()
        self.command = np.asarray(command, dtype=np.float64)
        self.measured = sim.observe()
        self.stale = False
        self.energy_j = 0.0
        self.path_m = 0.0
        self.push_force = np.zeros(3)
        self.push_end = 0.0
        self.next_push = draw_wait_s(self.push_ranges, self.rng)

    @property
    def preset_name(self) -> str:
        """The latency preset of this episode ('' for a nominal world)."""
        return self.preset.preset if self.preset else ''

    def base(self) -> BaseState:
        """Return the base's ground truth now (the expert's and the metrics' input)."""
        b = self.sim.observe().base
        assert b is not None
        return b

    def observation(self) -> FloatArray:
        """Return the policy's observation of the newest joint state and IMU that have arrived."""
        if self.stale:
            return np.zeros(self.spec.obs_dim)
        m = self.measured
        q, v = m.position.copy(), m.velocity.copy()
        gyro = None if m.imu_gyro is None else m.imu_gyro.copy()
        if self.randomize:
            q += self.rng.normal(0.0, self.cfg.noise_pos_rad, q.shape)
            v += self.rng.normal(0.0, self.cfg.noise_vel_rad_s, v.shape)
            if gyro is not None:
                gyro += self.rng.normal(0.0, self.cfg.noise_gyro_rad_s, 3)
        return self.obs.build(ObsInputs(
            position=q[self.idx], velocity=v[self.idx], default=self.spec.default,
            last_action=self.last_action, goal=self.spec.default, time_s=self.t,
            imu_gyro=gyro, imu_quat_wxyz=m.imu_quat_wxyz, cmd_vel=self.command,
            cmd_vel_age_s=0.0))

    def label(self, target: FloatArray) -> FloatArray:
        """Return the raw action that commands ``target`` (robot order) through the action spec."""
        a = self.spec.action
        base = self.spec.default if a.mode == 'offset' else 0.0
        raw = (target[self.idx] - base) / a.scale
        out: FloatArray = raw if a.clip is None else np.clip(raw, -a.clip, a.clip)
        return out

    def _push(self) -> None:
        if not self.pushes:
            return
        if self.t >= self.next_push:
            self.push_force = draw_force_n(self.push_ranges, self.rng)
            self.push_end = self.t + self.push_ranges.duration_s
            self.next_push = self.t + draw_wait_s(self.push_ranges, self.rng)
            self.sim.push_base(self.push_force)
        elif self.t >= self.push_end and np.any(self.push_force):
            self.push_force = np.zeros(3)
            self.sim.push_base(self.push_force)

    def apply(self, raw_action: FloatArray) -> None:
        """Publish one command (re-send the last one when stale) and run one control period.

        Energy (``energy_j``, the integral of sum |tau * qdot| sampled at the state rate) and
        the base's path length (``path_m``, xy) accumulate over the episode.
        """
        sim = self.sim
        if not self.stale:
            res = self.act.process(raw_action)
            if res.ok:
                self.last_action = res.action
            target = self.full_default.copy()
            target[self.idx] = res.target
            self.last_target = target
        self._push()
        self.commands.send(self.last_target, sim.time_ns)
        end = sim.step_count + self.steps_per_tick
        per, dt = self.steps_per_state, sim.dt_ns
        p0 = self.base().position[:2]
        while True:
            for cmd in self.commands.due(sim.time_ns):
                sim.set_target(JointTarget.hold(cmd))
            step = sim.step_count
            if step >= end:
                break
            since = (step - self.state_phase) % per
            if since == 0:
                o = sim.observe()
                self.states.send(o, sim.time_ns)
                self.energy_j += float(np.sum(np.abs(o.effort * o.velocity))) * per * self.dt_s
            nxt = min(end, step + per - since)
            arrive = self.commands.next_ns
            if arrive is not None:
                nxt = min(nxt, max(step + 1, -(-arrive // dt)))
            sim.step(nxt - step)
        self.t += self.tick_s
        self.path_m += float(np.linalg.norm(self.base().position[:2] - p0))
        arrived = self.states.due(sim.time_ns)
        if arrived:
            self.measured = arrived[-1]
        stale = sim.time_ns - self.measured.stamp_ns > self.spec.stale_after_ns
        if self.stale and not stale:
            self.obs.reset()
        self.stale = stale


def fallen(base: BaseState, height_m: float = 0.08, tilt_rad: float = 1.0) -> bool:
    """Return True when the base is below ``height_m`` or its z axis tilted beyond ``tilt_rad``.

    The thresholds of :class:`simreal_ros.gap.legged.LeggedGapConfig`.
    """
    return bool(base.position[2] < height_m or tilt_of(base.orientation_wxyz) > tilt_rad)
