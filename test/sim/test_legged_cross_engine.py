"""Legged sim2sim across engines without ROS: simreal_quad standing and trotting open loop in
MuJoCo and PyBullet (simreal_ros/sim/cross_engine.py), compared by simreal_ros/gap/legged.py.

The bounds come from where the engines may differ, not from this run's figures:

* standing, after 0.5 s of settling: the heights differ by MuJoCo's soft-contact sink and
  the servos' sag share, < 2 mm (test_quadruped_bullet.py says why); the attitudes by the
  front/rear sag difference over the 0.2 m wheelbase, < 5 mrad; both bodies are at rest
  (velocity and gyro ~0) and the IMUs read g along their own up axes, which differ by that
  tilt: < 0.005 rad x 9.81 = 0.05 m/s^2;
* trotting (2 Hz, open loop): the gait's schedule sets when a foot comes down (the swing
  ends at phase 2 pi), an engine only when it meets the ground, so each touch-down of one
  engine has its match in the other within a quarter period (0.125 s), and MuJoCo's feet
  come down once per period: 2 x 3 s = 6 times in the 3 s compared. Neither falls; both
  walk forward, at most about the gait's no-slip speed.
"""

from __future__ import annotations

from simreal_ros.core.robot import load_robot
from simreal_ros.gap.legged import LeggedGapConfig, legged_gap
from simreal_ros.sim.cross_engine import Push, legged_episode, legged_sim2sim
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.gait import Trot

ROBOT = load_robot('simreal_quad')
#: the trot's touch-downs fall at multiples of 0.25 s (the diagonal pairs alternate): a window
#: from 0.875 s to 3.875 s has its edges 0.125 s from any, and 6 per foot. A swing lasts about
#: a quarter period (0.125 s); shorter flights (10-40 ms seen) are bounces, not steps.
CFG = LeggedGapConfig(skip_s=0.875, contact_force_n=1.0, min_swing_s=0.05)


def test_standing_in_both_engines_is_the_same_standing():
    r = legged_sim2sim(ROBOT, duration_s=2.0, cfg=LeggedGapConfig(skip_s=0.5))
    gap = r['gap']['pybullet']
    assert gap['paired_samples'] == 76  # 0.5 .. 2.0 s at 50 Hz
    assert gap['base_height_error_m'] < 0.002
    assert gap['orientation_error_rad'] < 0.005
    assert gap['velocity_error_m_s'] < 0.01
    assert gap['gyro_error_rad_s'] < 0.01
    assert gap['acc_error_m_s2'] < 0.05
    for engine in ('mujoco', 'pybullet'):
        ep = gap['episodes'][engine]
        assert ep['falls'] == 0
        assert ep['duty_factor'] == [1.0] * 4  # all four feet down throughout
        assert ep['velocity_tracking_error_m_s'] < 0.01  # cmd_vel 0, and it stands still


def test_an_open_loop_trot_touches_down_alike_in_both_engines():
    r = legged_sim2sim(ROBOT, duration_s=3.875, gait=Trot(), cfg=CFG)
    gap = r['gap']['pybullet']
    assert r['gait'] == {'kind': 'trot', 'frequency_hz': 2.0, 'lift_rad': 0.2,
                         'speed_m_s': 0.1}
    for engine in ('mujoco', 'pybullet'):
        assert [len(o) for o in gap['episodes'][engine]['onsets_s']] == [6] * 4
    for foot in gap['contact_onset_offset_s']:
        assert foot['paired'] == 6
        assert foot['mean_abs_s'] < 0.125
    for engine in ('mujoco', 'pybullet'):
        ep = gap['episodes'][engine]
        assert ep['falls'] == 0
        assert all(0.2 < d < 0.9 for d in ep['duty_factor'])  # feet lift and land
        # the gait's no-slip speed is 0.1 m/s: forward, and not much faster (feet slip back)
        assert 0.02 < ep['mean_velocity_m_s'][0] < 0.15
    # the stance legs follow the same targets; heights differ by the contact sink (1 mm) and
    # the servos' sag under the changing load (each leg carries 0 to half the weight)
    assert gap['base_height_error_m'] < 0.005


def test_a_push_that_cannot_tip_it_sways_both_and_both_stand_again():
    """8 N sideways on the base for 0.1 s: an impulse J = 0.8 N*s.

    Momentum: the base moves sideways at most J/m = 0.43 m/s (the feet's friction takes some),
    so its kinetic energy is at most J^2/2m = 0.17 J; tipping over the right feet (0.06 m out,
    the COM 0.16 m up) needs m g (sqrt(0.06^2 + 0.16^2) - 0.16) = 0.20 J: neither engine can
    let it fall. It comes to rest again on four feet, and the heights differ as standing.
    """
    pushes = [Push(0.5, 0.1, (0.0, 8.0, 0.0))]
    eps = {e: legged_episode(make_sim(ROBOT, engine=e), None, 2.0, pushes=pushes)
           for e in ('mujoco', 'pybullet')}
    for ep in eps.values():
        vy = ep.linear_velocity_m_s[:, 1]
        assert 0.0 < vy.max() < 0.8 / 1.84  # pushed towards +y, within the momentum bound
        assert abs(ep.position_m[-1, 2] - ep.position_m[20, 2]) < 0.002  # height as before
        assert abs(vy[-1]) < 0.01 and ep.foot_force_n[-1].min() > 1.0  # at rest, 4 feet
    gap = legged_gap(eps['mujoco'], eps['pybullet'], LeggedGapConfig(skip_s=0.5))
    assert [gap['episodes'][e]['falls'] for e in ('mujoco', 'pybullet')] == [0, 0]
    assert gap['base_height_error_m'] < 0.002
