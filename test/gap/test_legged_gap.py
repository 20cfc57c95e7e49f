"""Legged gap metrics (simreal_ros/gap/legged.py) on synthetic episodes, answers by hand.

Eleven samples 0.1 s apart (t = 0 .. 1 s), two feet.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simreal_ros.errors import ConfigError
from simreal_ros.gap.legged import (
    LeggedEpisode,
    LeggedGapConfig,
    episode_metrics,
    legged_gap,
)

N = 11
T_NS = [k * 100_000_000 for k in range(N)]
LEVEL = [1.0, 0.0, 0.0, 0.0]


def about_z(angle: float) -> list[float]:
    return [math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)]


def about_x(angle: float) -> list[float]:
    return [math.cos(angle / 2), math.sin(angle / 2), 0.0, 0.0]


def episode(name: str, height=0.16, quat=None, v=(0.3, 0.0, 0.0), feet=None,
            stamps=None, **kw) -> LeggedEpisode:
    stamps = T_NS if stamps is None else stamps
    n = len(stamps)
    h = np.broadcast_to(np.asarray(height, dtype=float), (n,))
    pos = np.stack([np.zeros(n), np.zeros(n), h], axis=1)
    q = np.tile(LEVEL, (n, 1)) if quat is None else np.asarray(quat, dtype=float)
    feet = np.full((n, 2), 5.0) if feet is None else np.asarray(feet, dtype=float)
    args = dict(cmd_stamps_ns=[0], cmd_linear_m_s=[[0.4, 0.0, 0.0]],
                cmd_angular_rad_s=[[0.0, 0.0, 0.5]])
    args.update(kw)
    return LeggedEpisode.from_arrays(name, stamps, pos, q, np.tile(v, (n, 1)), np.zeros((n, 3)),
                                     feet, **args)


A_FOOT0 = [5, 5, 0, 0, 5, 5, 0, 0, 5, 5, 0]  # touch-downs at 0.4 s and 0.8 s, 6 of 11 in contact
B_FOOT0 = [5, 5, 5, 0, 0, 5, 5, 0, 0, 5, 5]  # one sample later: 0.5 s and 0.9 s, 7 of 11


def test_two_episodes_gap_by_hand() -> None:
    a = episode('mujoco', feet=np.stack([A_FOOT0, [5] * N], axis=1))
    b = episode('pybullet', height=0.15, quat=np.tile(about_z(0.2), (N, 1)), v=(0.3, 0.4, 0.0),
                feet=np.stack([B_FOOT0, [5] * N], axis=1))
    gap = legged_gap(a, b)
    assert gap['paired_samples'] == N
    assert gap['base_height_error_m'] == pytest.approx(0.01)
    assert gap['orientation_error_rad'] == pytest.approx(0.2)
    assert gap['velocity_error_m_s'] == pytest.approx(0.4)
    assert gap['gyro_error_rad_s'] is None  # no IMU given
    ma, mb = gap['episodes']['mujoco'], gap['episodes']['pybullet']
    # |(0.3, 0) - (0.4, 0)| and |(0.3, 0.4) - (0.4, 0)| = sqrt(0.17); yaw rate 0 vs 0.5
    assert ma['velocity_tracking_error_m_s'] == pytest.approx(0.1)
    assert mb['velocity_tracking_error_m_s'] == pytest.approx(math.sqrt(0.17))
    assert ma['yaw_rate_error_rad_s'] == pytest.approx(0.5)
    assert mb['mean_velocity_m_s'] == pytest.approx([0.3, 0.4])
    assert (ma['falls'], mb['falls'], ma['first_fall_s']) == (0, 0, None)
    assert ma['duty_factor'] == pytest.approx([6 / 11, 1.0])
    assert mb['duty_factor'] == pytest.approx([7 / 11, 1.0])
    assert ma['onsets_s'] == [pytest.approx([0.4, 0.8]), []]
    foot0, foot1 = gap['contact_onset_offset_s']
    assert foot0 == {'mean_s': pytest.approx(0.1), 'mean_abs_s': pytest.approx(0.1),
                     'paired': 2}
    assert foot1 == {'mean_s': None, 'mean_abs_s': None, 'paired': 0}  # it never lifted
    assert gap['duty_factor_difference'] == pytest.approx([1 / 11, 0.0])


def test_falls_by_height_and_by_tilt_and_tracking_only_while_up() -> None:
    quat = np.tile(LEVEL, (N, 1))
    quat[6:8] = about_x(1.2)        # tilted beyond 1.0 rad at 0.6 and 0.7 s
    height = np.full(N, 0.16)
    height[9:] = 0.05               # below 0.08 m from 0.9 s
    ep = episode('fallen', height=height, quat=quat)
    m = episode_metrics(ep)
    assert (m['falls'], m['first_fall_s']) == (2, pytest.approx(0.6))
    assert m['tracked_samples'] == N - 4
    assert m['mean_tilt_rad'] == pytest.approx(2 * 1.2 / N)
    # a looser tilt threshold leaves the height fall alone
    m = episode_metrics(ep, LeggedGapConfig(fall_tilt_rad=1.3))
    assert (m['falls'], m['first_fall_s']) == (1, pytest.approx(0.9))


def test_a_bounce_is_not_a_touch_down_with_min_swing() -> None:
    foot = [5, 0, 5, 5, 0, 0, 0, 5, 5, 5, 5]  # 0.1 s off the ground at 0.1 s, 0.3 s at 0.4 s
    ep = episode('bounce', feet=np.stack([foot, [5] * N], axis=1))
    assert episode_metrics(ep)['onsets_s'][0] == pytest.approx([0.2, 0.7])
    m = episode_metrics(ep, LeggedGapConfig(min_swing_s=0.2))
    assert m['onsets_s'][0] == pytest.approx([0.7])
    assert m['duty_factor'][0] == pytest.approx(7 / 11)


def test_skip_and_a_held_command_and_a_command_that_starts_late() -> None:
    ep = episode('late', cmd_stamps_ns=[450_000_000, 750_000_000],
                 cmd_linear_m_s=[[0.3, 0.0, 0.0], [0.0, 0.0, 0.0]],
                 cmd_angular_rad_s=[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    m = episode_metrics(ep, LeggedGapConfig(skip_s=0.25))
    assert m['samples'] == 8  # t = 0.3 .. 1.0 s
    # commanded from 0.5 s (the first sample after 0.45 s): 0.5-0.7 s error 0, 0.8-1.0 s 0.3
    assert m['tracked_samples'] == 6
    assert m['velocity_tracking_error_m_s'] == pytest.approx(0.15)


def test_the_second_episode_is_interpolated_onto_the_first_stamps() -> None:
    ramp = 0.16 + 0.01 * np.arange(N) * 0.1  # height grows 0.01 m/s
    a = episode('a', height=ramp)
    shifted = [t + 50_000_000 for t in T_NS]  # half a period later, 0.05 .. 1.05 s
    b = episode('b', height=ramp + 0.0005, stamps=shifted)  # = the ramp 0.05 s later
    gap = legged_gap(a, b)
    assert gap['paired_samples'] == N - 1  # 0.1 .. 1.0 s
    assert gap['base_height_error_m'] == pytest.approx(0.0, abs=1e-12)


def test_imu_errors() -> None:
    gyro = np.zeros((N, 3))
    acc = np.tile([0.0, 0.0, 9.81], (N, 1))
    a = episode('a', imu_gyro_rad_s=gyro, imu_acc_m_s2=acc)
    b = episode('b', imu_gyro_rad_s=gyro + [0.03, 0.04, 0.0], imu_acc_m_s2=acc + [0.3, 0.0, 0.0])
    gap = legged_gap(a, b)
    assert gap['gyro_error_rad_s'] == pytest.approx(0.05)
    assert gap['acc_error_m_s2'] == pytest.approx(0.3)


def test_bad_episodes_are_one_clear_error() -> None:
    with pytest.raises(ValueError) as info:
        episode('short', feet=np.full((N - 1, 2), 5.0))
    assert str(info.value) == ('short: foot_force_n: expected shape (11, feet) (one row per '
                               'stamp), got (10, 2)')
    bad = np.full((N, 2), 5.0)
    bad[4, 1] = np.nan
    with pytest.raises(ValueError) as info:
        episode('nan', feet=bad)
    assert str(info.value) == 'nan: foot_force_n: NaN or inf at row 4 (1 values)'
    with pytest.raises(ValueError) as info:
        episode('quat', quat=np.tile([1.0, 0.1, 0.0, 0.0], (N, 1)))
    assert str(info.value) == ('quat: orientation_wxyz: expected unit quaternions, got norm '
                               '1.005 at row 0')
    with pytest.raises(ValueError) as info:
        episode('order', stamps=T_NS[::-1])
    assert str(info.value) == 'order: stamps_ns: expected strictly increasing stamps'
    late = episode('late', stamps=[t + 2_000_000_000 for t in T_NS])
    with pytest.raises(ValueError, match='^a and late do not overlap in time'):
        legged_gap(episode('a'), late)
    three = LeggedEpisode.from_arrays('three', T_NS, np.zeros((N, 3)), np.tile(LEVEL, (N, 1)),
                                      np.zeros((N, 3)), np.zeros((N, 3)), np.zeros((N, 3)),
                                      [0], [0, 0, 0], [0, 0, 0])
    with pytest.raises(ValueError) as info:
        legged_gap(episode('a'), three)
    assert str(info.value) == 'a has 2 feet, three 3: not the same robot'


def test_config_in_units_and_bad_values() -> None:
    cfg = LeggedGapConfig.from_mapping({'fall_height_m': 0.1, 'skip_s': 1})
    assert (cfg.fall_height_m, cfg.skip_s) == (0.1, 1.0)
    with pytest.raises(ConfigError) as info:
        LeggedGapConfig.from_mapping({'fall_height': 0.1})
    assert str(info.value).startswith('legged gap: fall_height: expected one of ')
    with pytest.raises(ConfigError) as info:
        LeggedGapConfig(fall_tilt_rad=float('nan'))
    assert str(info.value) == 'legged gap: fall_tilt_rad: expected a finite number > 0, got nan'
