"""Cross-engine sim2sim without ROS: the same commands into two engines, per-joint RMSE.

:func:`chirp_rmse` drives every engine with the same :mod:`simreal_ros.core.excitation` chirp
(position targets with velocity feed-forward at ``rate_hz``, zero-order hold, the engines'
own physics step) and returns the per-joint RMSE of each engine against the first, and of
each against its commands. ``variant`` removes one passive effect from both engines at once
(``no_friction``: frictionloss 0; ``no_passive``: damping and frictionloss 0), so that the
share of each effect in the gap can be measured (docs/sim_bridge.md, "Engines").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import RobotSpec
from simreal_ros.sim.backend import FloatArray, SimBackend
from simreal_ros.sim.engines import ENGINES, make_sim

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
