"""Cross-engine sim2sim: MuJoCo and PyBullet on the same chirp, per-joint RMSE and its causes.

* ``nominal`` / ``no_friction`` / ``no_passive``: both engines with their nominal dynamics, then
  without Coulomb friction, then without friction and viscous damping (the passive effects'
  share of the gap);
* ``mujoco_folded_armature``: MuJoCo with PyBullet's armature approximation (armature added to
  the child link's inertia about the joint axis, armature 0) against PyBullet, in MuJoCo's
  ``implicitfast`` and in its ``Euler`` integrator (explicit actuator damping, as PyBullet's
  servo law): what is left when the armature model is the same.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import mujoco
import numpy as np

from simreal_ros.core.excitation import Excitation, ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.cross_engine import VARIANTS, chirp_rmse, drive
from simreal_ros.sim.engines import make_sim


def _folded(robot: Any, euler: bool) -> Any:
    sim = make_sim(robot, engine='mujoco')
    m = sim.model
    if euler:
        m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    for js in robot.joints:
        j = m.joint(js.name).id
        b = int(m.jnt_bodyid[j])
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, m.body_iquat[b])
        axis = rot.reshape(3, 3).T @ m.jnt_axis[j]  # into the body's principal frame
        m.body_inertia[b] += js.armature * axis * axis
    sim.built.nominal_inertia[:] = m.body_inertia
    sim.base = replace(sim.base, joints={n: replace(j, armature=0.0)
                                         for n, j in sim.base.joints.items()})
    sim.reset()
    return sim


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
    for euler in (False, True):
        err = drive(_folded(robot, euler), q, v, 10) - bullet
        key = 'mujoco_folded_armature_' + ('euler' if euler else 'implicitfast')
        out[key] = {n: float(np.sqrt(np.mean(err[:, i] ** 2)))
                    for i, n in enumerate(robot.joint_names)}
    out['duration_s'] = duration
    return out


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
