"""Cross-engine sim2sim: MuJoCo and PyBullet on the same chirp, per-joint RMSE and its causes.

* ``nominal`` / ``no_friction`` / ``no_passive``: both engines with their nominal dynamics, then
  without Coulomb friction, then without friction and viscous damping (the passive effects'
  share of the gap);
* ``mujoco_euler``: MuJoCo in its ``Euler`` integrator (explicit actuator damping, as
  PyBullet's servo law) against PyBullet: the integrators' share of what is left. Both engines
  model the armature (PyBullet with a geared rotor per joint, docs/sim_bridge.md).
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.cross_engine import VARIANTS, chirp_rmse, drive
from simreal_ros.sim.engines import make_sim


def run(quick: bool = False) -> dict[str, Any]:
    """Measure the per-joint RMSE of every comparison (rad)."""
    robot = load_robot('simreal_arm')
    duration = 6.0 if quick else 20.0
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        r = chirp_rmse(robot, duration, variant=variant)
        out[variant] = {'cross_engine_rmse_rad': r['cross_engine_rmse_rad']['pybullet'],
                        'tracking_rmse_rad': r['tracking_rmse_rad']}
    exc = Excitation(robot, ExcitationConfig('chirp', duration, amplitude=0.4, f_min_hz=0.1,
                                             f_max_hz=2.0))
    _t, q, v = exc.trajectory(100.0)
    bullet = drive(make_sim(robot, engine='pybullet'), q, v, 10)
    euler = make_sim(robot, engine='mujoco')
    euler.model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    err = drive(euler, q, v, 10) - bullet
    out['mujoco_euler'] = {n: float(np.sqrt(np.mean(err[:, i] ** 2)))
                           for i, n in enumerate(robot.joint_names)}
    out['duration_s'] = duration
    return out


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
