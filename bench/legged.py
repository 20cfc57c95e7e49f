"""Legged sim2sim: simreal_quad in MuJoCo and PyBullet, the legged gap and the step rates.

* ``standing`` / ``trot``: :func:`simreal_ros.sim.cross_engine.legged_sim2sim`, PyBullet
  against MuJoCo (docs/legged.md, "sim2sim across engines"), the trot's window and thresholds
  as test/sim/test_legged_cross_engine.py's;
* ``step_rate``: bare steps/s of each engine on the standing quadruped, measured side by side
  (alternating, three rounds, the median of each), and their ratio, which moves less with the
  host's load than either figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simreal_ros.core.robot import load_robot
from simreal_ros.gap.legged import LeggedGapConfig
from simreal_ros.sim.cross_engine import legged_sim2sim
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.gait import Trot

KEYS = ('base_height_error_m', 'orientation_error_rad', 'velocity_error_m_s',
        'gyro_error_rad_s', 'acc_error_m_s2', 'contact_onset_offset_s',
        'duty_factor_difference')
EPISODE_KEYS = ('falls', 'velocity_tracking_error_m_s', 'mean_velocity_m_s', 'mean_height_m',
                'mean_tilt_rad', 'duty_factor')


def _summary(gap: dict[str, Any]) -> dict[str, Any]:
    out = {k: gap[k] for k in KEYS}
    out['episodes'] = {e: {k: m[k] for k in EPISODE_KEYS} for e, m in gap['episodes'].items()}
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Measure the legged gap (standing, trot) and the engines' step rates."""
    robot = load_robot('simreal_quad')
    stand = legged_sim2sim(robot, 2.0, cfg=LeggedGapConfig(skip_s=0.5))
    trot_s = 3.875 if quick else 9.875  # the window's edges 0.125 s from any touch-down
    trot = legged_sim2sim(robot, trot_s, Trot(), cfg=LeggedGapConfig(
        skip_s=0.875, contact_force_n=1.0, min_swing_s=0.05))
    sims = {e: make_sim(robot, engine=e) for e in ('mujoco', 'pybullet')}
    for s in sims.values():
        s.step(500)  # standing, feet loaded
    steps = 1000 if quick else 5000
    rates: dict[str, list[float]] = {e: [] for e in sims}
    for _ in range(3):
        for e, s in sims.items():
            rates[e].append(s.raw_step_rate(steps))
    med = {e: float(np.median(r)) for e, r in rates.items()}
    return {
        'standing': _summary(stand['gap']['pybullet']),
        'trot': _summary(trot['gap']['pybullet']), 'trot_s': trot_s,
        'step_rate': {'mujoco_steps_s': med['mujoco'], 'pybullet_steps_s': med['pybullet'],
                      'pybullet_over_mujoco': med['pybullet'] / med['mujoco']},
    }


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
