"""Cross-engine sim2sim without ROS: MuJoCo and PyBullet on the same chirp (sim/cross_engine.py).

The bound is the gap's cause, not this run's figure: with PyBullet's geared rotors for the
armature the measured gap is 0.2-0.3 mrad per joint (docs/sim_bridge.md: the integrators and
the constraint solvers); the former armature approximation (rotor inertia folded into the child
link) left 6-13 mrad, and a servo law, delay line or feed-forward that differed between the
engines gives tens of mrad or more.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.sim.cross_engine import chirp_rmse
from simreal_ros.sim.engines import make_sim

ROBOT = load_robot('simreal_arm')


def test_the_same_chirp_gives_the_same_motion_in_both_engines():
    r = chirp_rmse(ROBOT, duration_s=4.0)
    gap = r['cross_engine_rmse_rad']['pybullet']
    assert set(gap) == set(ROBOT.joint_names)
    assert max(gap.values()) < 0.002, gap
    for engine, tracking in r['tracking_rmse_rad'].items():
        assert max(tracking.values()) < 0.06, (engine, tracking)
        assert min(tracking.values()) > 1e-4, (engine, tracking)  # it really moved


def test_an_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="variant 'bogus'"):
        chirp_rmse(ROBOT, duration_s=1.0, variant='bogus')


def test_pybullet_reports_its_armature_approximation_and_mujoco_none():
    bullet = make_sim(ROBOT, engine='pybullet')
    assert bullet.capabilities.armature is True
    (note,) = bullet.approximations()
    assert note.startswith('armature: a rotor link per joint geared 100:1 to it')
    bullet.base = replace(bullet.base, joints={n: replace(j, armature=0.0)
                                               for n, j in bullet.base.joints.items()})
    bullet.reset()
    assert bullet.approximations() == ()
    assert make_sim(ROBOT, engine='mujoco').approximations() == ()
