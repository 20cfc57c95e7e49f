"""The fitted overlay loads into the bridge's SimRobot and the virtual bus's reality."""

from __future__ import annotations

import numpy as np

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.robot import load_robot
from simreal_ros.hardware.emulator.reality import VirtualArm
from simreal_ros.sim.mujoco.physics import MujocoSim as SimRobot
from simreal_ros.sysid.api import validate

ROBOT = load_robot('simreal_arm')


def _rows(summary):
    return {r['key']: r['estimate'] for r in summary['parameters']}


def test_bridge_and_emulator_take_the_fitted_values(fitted):
    summary, out = fitted
    est = _rows(summary)
    ov = load_overlay(out)
    for world in (SimRobot(ROBOT, overlay=ov), VirtualArm(ROBOT, ov).sim):
        m, b = world.model, world.built
        for i, j in enumerate(ROBOT.joint_names):
            d = int(b.dof_adr[i])
            assert np.isclose(m.dof_damping[d], est[f'joints.{j}.damping'], rtol=1e-5)
            assert np.isclose(m.dof_frictionloss[d], est[f'joints.{j}.frictionloss'],
                              rtol=1e-5)
            assert np.isclose(m.dof_armature[d], est[f'joints.{j}.armature'], rtol=1e-5)
        assert np.isclose(m.body_mass[m.body('wrist_flange_link').id],
                          est['bodies.wrist_flange_link.mass'], rtol=1e-5)
        assert world.delay_steps == 6
    assert VirtualArm(ROBOT, ov).delay_steps == 6


def test_fitted_overlay_replays_the_bag_like_the_truth(fitted, truth_bag, truth_overlay):
    _, out = fitted
    nominal = validate(truth_bag, 'simreal_arm', None, horizons_s=(1.0,))
    fit = validate(truth_bag, 'simreal_arm', out, horizons_s=(1.0,))
    truth = validate(truth_bag, 'simreal_arm', truth_overlay, horizons_s=(1.0,))
    assert fit['open_loop']['total_rad'] < 0.1 * nominal['open_loop']['total_rad']
    assert fit['open_loop']['total_rad'] < 3 * truth['open_loop']['total_rad'] + 2e-4
