"""Cross-engine sim2sim without ROS: the same commands into two engines, per-joint RMSE.

:func:`chirp_rmse` drives every engine with the same :mod:`simreal_ros.core.excitation` chirp
(position targets with velocity feed-forward at ``rate_hz``, zero-order hold, the engines'
own physics step) and returns the per-joint RMSE of each engine against the first, and of
each against its commands. ``variant`` removes one passive effect from both engines at once
(``no_friction``: frictionloss 0; ``no_passive``: damping and frictionloss 0), so that the
share of each effect in the gap can be measured (docs/sim_bridge.md, "Engines").

:func:`legged_sim2sim` is the floating-base counterpart: every engine stands, or trots open
loop (:class:`simreal_ros.sim.gait.Trot`) under a constant ``cmd_vel``, from its reset
state, pushed on the base (:class:`Push`) where asked; :func:`legged_episode` samples what
the bridge would publish (odom, imu/data, foot_contacts) at the command rate, and
:func:`simreal_ros.gap.legged.legged_gap` compares each engine with the first
(docs/legged.md, "sim2sim across engines").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import RobotSpec
from simreal_ros.gap.legged import LeggedEpisode, LeggedGapConfig, legged_gap
from simreal_ros.sim.backend import FloatArray, Observation, SimBackend
from simreal_ros.sim.engines import ENGINES, make_sim
from simreal_ros.sim.gait import Trot

VARIANTS = ('nominal', 'no_friction', 'no_passive')


def _without(sim: SimBackend, variant: str) -> None:
    if variant == 'nominal':
        return
    keep_damping = variant == 'no_friction'
    sim.base = replace(sim.base, joints={
        n: replace(j, frictionloss=0.0, damping=j.damping if keep_damping else 0.0)
        for n, j in sim.base.joints.items()})
    sim.reset()


def drive(sim: SimBackend, positions: FloatArray, velocities: FloatArray,
          steps_per_command: int) -> FloatArray:
    """Send one target per row, step ``steps_per_command`` after each; joint angles then."""
    out = np.empty_like(positions)
    for k in range(positions.shape[0]):
        sim.set_target(JointTarget(positions[k], velocities[k], np.zeros(sim.robot.n)))
        sim.step(steps_per_command)
        out[k] = sim.joint_positions()
    return out


def chirp_rmse(robot: RobotSpec, duration_s: float = 20.0, rate_hz: float = 100.0,
               engines: tuple[str, ...] = ENGINES, variant: str = 'nominal',
               amplitude: float = 0.4) -> dict[str, Any]:
    """Per-joint RMSE (rad) between the engines on one chirp, and of each against the command."""
    if variant not in VARIANTS:
        raise ValueError(f'variant {variant!r}: expected one of {VARIANTS}')
    exc = Excitation(robot, ExcitationConfig('chirp', duration_s, amplitude=amplitude,
                                             f_min_hz=0.1, f_max_hz=2.0))
    _t, q_cmd, v_cmd = exc.trajectory(rate_hz)
    runs = {}
    for engine in engines:
        sim = make_sim(robot, engine=engine)
        _without(sim, variant)
        spc = int(round(1e9 / rate_hz / sim.dt_ns))
        runs[engine] = drive(sim, q_cmd, v_cmd, spc)

    def per_joint(err: FloatArray) -> dict[str, float]:
        return {n: float(np.sqrt(np.mean(err[:, i] ** 2)))
                for i, n in enumerate(robot.joint_names)}

    ref = engines[0]
    return {
        'variant': variant, 'duration_s': duration_s, 'rate_hz': rate_hz,
        'reference': ref,
        'cross_engine_rmse_rad': {e: per_joint(runs[e] - runs[ref]) for e in engines[1:]},
        'tracking_rmse_rad': {e: per_joint(runs[e] - q_cmd) for e in engines},
    }


@dataclass(frozen=True)
class Push:
    """A force (N, world frame) on the base's COM from ``start_s`` for ``duration_s``."""

    start_s: float
    duration_s: float
    force_n: tuple[float, float, float]


def legged_episode(sim: SimBackend, gait: Trot | None, duration_s: float,
                   rate_hz: float = 50.0, pushes: Sequence[Push] = ()) -> LeggedEpisode:
    """Run ``gait`` (None: stand at home) open loop; sample the legged topics at ``rate_hz``.

    The commands change at ``rate_hz`` (a policy's rate), the servo law runs at every physics
    step; ``cmd_vel`` is the gait's speed, constant from the start (0 standing). The episode
    holds what the bridge publishes: the base's pose and twist (base frame), the feet's
    forces and the IMU, the first sample at t = 0 (the reset state). Each push starts and
    ends at the first command tick at or after its start and end.
    """
    robot = sim.robot
    spc = int(round(1e9 / rate_hz / sim.dt_ns))
    n = int(round(duration_s * rate_hz)) + 1
    rows: list[Observation] = []
    period_s = spc * sim.dt_ns * 1e-9
    for k in range(n):
        if k:
            sim.step(spc)
        rows.append(sim.observe())
        t_now = k * period_s + 1e-9  # the tick's time, rounding on the tick's side
        on = [p.force_n for p in pushes if p.start_s <= t_now < p.start_s + p.duration_s]
        if pushes:
            sim.push_base(np.sum(on, axis=0) if on else np.zeros(3))
        if gait is not None:
            t_s = (sim.time_ns + sim.dt_ns - rows[0].stamp_ns) * 1e-9
            sim.set_target(JointTarget(gait.targets(robot, t_s), np.zeros(robot.n),
                                       np.zeros(robot.n)))
    bases = [o.base for o in rows]
    if any(b is None for b in bases):
        raise ValueError(f'{robot.name} has no floating base: no legged episode')
    speed = 0.0 if gait is None else gait.speed_m_s
    return LeggedEpisode.from_arrays(
        sim.engine, [o.stamp_ns - rows[0].stamp_ns for o in rows],
        [b.position for b in bases if b], [b.orientation_wxyz for b in bases if b],
        [b.linear_velocity_in_base() for b in bases if b],
        [b.angular_velocity for b in bases if b], [o.foot_force for o in rows], [0],
        [speed, 0.0, 0.0], [0.0, 0.0, 0.0], [o.imu_gyro for o in rows],
        [o.imu_acc for o in rows])


def legged_sim2sim(robot: RobotSpec, duration_s: float = 4.0, gait: Trot | None = None,
                   engines: tuple[str, ...] = ENGINES, cfg: LeggedGapConfig | None = None,
                   rate_hz: float = 50.0, pushes: Sequence[Push] = ()) -> dict[str, Any]:
    """Return the legged gap of every engine against the first (same gait, commands, pushes)."""
    runs = {e: legged_episode(make_sim(robot, engine=e), gait, duration_s, rate_hz, pushes)
            for e in engines}
    ref = engines[0]
    return {
        'duration_s': duration_s, 'rate_hz': rate_hz, 'reference': ref,
        'gait': None if gait is None else {'kind': 'trot', 'frequency_hz': gait.frequency_hz,
                                           'lift_rad': gait.lift_rad,
                                           'speed_m_s': gait.speed_m_s},
        'pushes': [{'start_s': p.start_s, 'duration_s': p.duration_s,
                    'force_n': list(p.force_n)} for p in pushes],
        'gap': {e: legged_gap(runs[ref], runs[e], cfg) for e in engines[1:]},
    }
