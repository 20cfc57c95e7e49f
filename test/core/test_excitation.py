"""Tests of the seeded excitation trajectories (pure numpy, no ROS)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from simreal_ros.core.excitation import PATTERNS, Excitation, ExcitationConfig
from simreal_ros.core.robot import RobotSpec, load_robot
from simreal_ros.errors import ConfigError

RATE_HZ = 1000.0
DURATION_S = 12.0


@pytest.fixture(scope='module')
def robot() -> RobotSpec:
    """Load the shipped simreal_arm spec."""
    return load_robot('simreal_arm')


def _traj(robot: RobotSpec, pattern: str, **kw: Any
          ) -> tuple[Excitation, np.ndarray, np.ndarray, np.ndarray]:
    exc = Excitation(robot, ExcitationConfig(pattern, kw.pop('duration_s', DURATION_S), **kw))
    t, q, v = exc.trajectory(RATE_HZ)
    return exc, t, q, v


BOUND_CASES = [
    {},
    {'amplitude': 10.0, 'f_max_hz': 20.0},
    {'amplitude': 10.0, 'f_min_hz': 5.0, 'f_max_hz': 20.0, 'step_hold_s': 0.2, 'ramp_s': 0.1},
    {'amplitude': 2.0, 'velocity_margin': 0.3, 'position_margin': 0.4, 'seed': 7},
]


@pytest.mark.parametrize('pattern', PATTERNS)
@pytest.mark.parametrize('kw', BOUND_CASES)
def test_limits_and_velocity_bounds(robot: RobotSpec, pattern: str, kw: dict[str, Any]) -> None:
    cfg = ExcitationConfig(pattern, DURATION_S, **kw)
    _, _, q, v = _traj(robot, pattern, **kw)
    lo = robot.lower + cfg.position_margin
    hi = robot.upper - cfg.position_margin
    vmax = cfg.velocity_margin * robot.velocity_limit
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
    assert np.all(q >= lo) and np.all(q <= hi)
    assert np.all(np.abs(v) <= vmax)
    # The trajectory actually moves.
    assert np.max(np.abs(q - robot.home)) > 0.01


@pytest.mark.parametrize('pattern', PATTERNS)
def test_absurd_request_uses_but_respects_bounds(robot: RobotSpec, pattern: str) -> None:
    _, _, q, v = _traj(robot, pattern, amplitude=10.0, f_max_hz=20.0)
    vmax = 0.8 * robot.velocity_limit
    assert np.all(q >= robot.lower + 0.05) and np.all(q <= robot.upper - 0.05)
    assert np.all(np.abs(v) <= vmax)
    # Amplitudes are reduced, not zeroed: the trajectory still uses a good part of the budget.
    assert np.max(np.abs(v)) > 0.3 * vmax.min()


@pytest.mark.parametrize('pattern', PATTERNS)
@pytest.mark.parametrize('kw', BOUND_CASES[:2])
def test_velocity_is_derivative_of_position(robot: RobotSpec, pattern: str,
                                            kw: dict[str, Any]) -> None:
    _, t, q, v = _traj(robot, pattern, **kw)
    numeric = np.gradient(q, t, axis=0)
    # Central differences at 1 kHz: the error is O(dt^2 * jerk), tiny next to the 3.6 rad/s
    # velocity bound, whereas a wrong analytic derivative would be off by O(1).
    assert np.max(np.abs(numeric - v)) < 2e-2
    # Position and velocity are continuous (no jumps between consecutive samples).
    assert np.max(np.abs(np.diff(q, axis=0))) <= 0.8 * robot.velocity_limit.max() / RATE_HZ + 1e-9


@pytest.mark.parametrize('pattern', PATTERNS)
def test_velocity_continuous_at_ramp_boundaries(robot: RobotSpec, pattern: str) -> None:
    exc = Excitation(robot, ExcitationConfig(pattern, DURATION_S, ramp_s=1.5))
    eps = 1e-7
    for tb in (0.0, 1.5, DURATION_S - 1.5, DURATION_S):
        q_a, v_a = exc.sample(tb - eps)
        q_b, v_b = exc.sample(tb + eps)
        np.testing.assert_allclose(q_a, q_b, atol=1e-5)
        np.testing.assert_allclose(v_a, v_b, atol=1e-4)


@pytest.mark.parametrize('pattern', PATTERNS)
def test_starts_and_ends_at_home(robot: RobotSpec, pattern: str) -> None:
    exc, t, q, v = _traj(robot, pattern)
    assert t[0] == 0.0 and t[-1] == pytest.approx(DURATION_S)
    np.testing.assert_allclose(q[0], robot.home, atol=1e-12)
    np.testing.assert_allclose(q[-1], robot.home, atol=1e-12)
    np.testing.assert_allclose(v[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(v[-1], 0.0, atol=1e-12)
    for tt in (-5.0, -1e-9, 0.0, DURATION_S, DURATION_S + 3.0, float('inf')):
        qs, vs = exc.sample(tt)
        assert qs.shape == (robot.n,) and vs.shape == (robot.n,)
        np.testing.assert_allclose(qs, robot.home, atol=1e-12)
        np.testing.assert_allclose(vs, 0.0, atol=1e-12)
    with pytest.raises(ValueError):
        exc.sample(float('nan'))


@pytest.mark.parametrize('pattern', PATTERNS)
def test_sample_matches_trajectory(robot: RobotSpec, pattern: str) -> None:
    exc, t, q, v = _traj(robot, pattern)
    for i in (0, 1, 777, 5000, len(t) // 2, len(t) - 2):
        qs, vs = exc.sample(float(t[i]))
        np.testing.assert_allclose(qs, q[i], atol=1e-12)
        np.testing.assert_allclose(vs, v[i], atol=1e-12)


@pytest.mark.parametrize('pattern', PATTERNS)
def test_same_seed_same_trajectory_other_seed_differs(robot: RobotSpec, pattern: str) -> None:
    _, _, q1, v1 = _traj(robot, pattern, seed=3)
    _, _, q2, v2 = _traj(robot, pattern, seed=3)
    _, _, q3, _ = _traj(robot, pattern, seed=4)
    np.testing.assert_array_equal(q1, q2)
    np.testing.assert_array_equal(v1, v2)
    assert np.max(np.abs(q1 - q3)) > 1e-3


@pytest.mark.parametrize('pattern', PATTERNS)
def test_joint_subset_holds_others_at_home(robot: RobotSpec, pattern: str) -> None:
    chosen = ('shoulder_pitch', 'wrist_roll')
    exc, _, q, v = _traj(robot, pattern, joints=chosen)
    idx = [robot.index(name) for name in chosen]
    others = [i for i in range(robot.n) if i not in idx]
    np.testing.assert_array_equal(q[:, others], np.broadcast_to(robot.home[others], (len(q),
                                                                                     len(others))))
    np.testing.assert_array_equal(v[:, others], 0.0)
    assert np.all(np.max(np.abs(q[:, idx] - robot.home[idx]), axis=0) > 0.01)
    assert np.all(exc.amplitudes[others] == 0.0)
    # An excited joint moves the same whether or not other joints are excited too.
    _, _, q_all, _ = _traj(robot, pattern)
    np.testing.assert_allclose(q[:, idx], q_all[:, idx], atol=1e-12)


def test_list_of_joints_is_stored_as_tuple() -> None:
    cfg = ExcitationConfig('chirp', 5.0, joints=['base_yaw'])  # type: ignore[arg-type]
    assert cfg.joints == ('base_yaw',)


def test_unknown_joint_names_it_and_the_valid_ones(robot: RobotSpec) -> None:
    with pytest.raises(ConfigError) as info:
        Excitation(robot, ExcitationConfig('steps', 5.0, joints=('base_yaw', 'elbw_pitch')))
    msg = str(info.value)
    assert 'joints' in msg and 'elbw_pitch' in msg
    for name in robot.joint_names:
        assert name in msg


def test_home_outside_margin_band_is_rejected(robot: RobotSpec) -> None:
    # elbow_pitch: home 1.2, upper 2.1 -> a 1.0 rad margin leaves home outside the band.
    with pytest.raises(ConfigError, match='position_margin') as info:
        Excitation(robot, ExcitationConfig('chirp', 5.0, position_margin=1.0))
    assert 'elbow_pitch' in str(info.value)


def test_zero_amplitude_holds_home(robot: RobotSpec) -> None:
    for pattern in PATTERNS:
        _, _, q, v = _traj(robot, pattern, amplitude=0.0)
        np.testing.assert_allclose(q, np.broadcast_to(robot.home, q.shape), atol=1e-12)
        np.testing.assert_allclose(v, 0.0, atol=1e-12)


def test_chirp_and_multisine_amplitude_reduced_for_velocity(robot: RobotSpec) -> None:
    slow = Excitation(robot, ExcitationConfig('chirp', 20.0, amplitude=0.2, f_max_hz=0.5))
    fast = Excitation(robot, ExcitationConfig('chirp', 20.0, amplitude=0.2, f_max_hz=20.0))
    np.testing.assert_allclose(slow.amplitudes, 0.2)
    vmax = 0.8 * robot.velocity_limit
    assert np.all(2.0 * np.pi * 20.0 * fast.amplitudes <= vmax + 1e-12)
    ms = Excitation(robot, ExcitationConfig('multisine', 20.0, amplitude=0.2, f_max_hz=0.5))
    _, q, _ = ms.trajectory(RATE_HZ)
    # Normalised to the amplitude: the peak deviation is close to (and never above) it.
    peak = np.max(np.abs(q - robot.home), axis=0)
    assert np.all(peak <= 0.2 + 1e-12) and np.all(peak > 0.15)


def test_trajectory_rate_and_shapes(robot: RobotSpec) -> None:
    exc = Excitation(robot, ExcitationConfig('waypoints', 2.5, ramp_s=0.5))
    t, q, v = exc.trajectory(100.0)
    assert t.shape == (251,) and q.shape == (251, robot.n) and v.shape == (251, robot.n)
    np.testing.assert_allclose(np.diff(t), 0.01)
    with pytest.raises(ConfigError, match='rate_hz'):
        exc.trajectory(0.0)


INVALID = [
    ({'pattern': 'sweep'}, 'pattern'),
    ({'pattern': 3}, 'pattern'),
    ({'duration_s': 0.0}, 'duration_s'),
    ({'duration_s': -1.0}, 'duration_s'),
    ({'duration_s': float('nan')}, 'duration_s'),
    ({'duration_s': float('inf')}, 'duration_s'),
    ({'duration_s': '10'}, 'duration_s'),
    ({'amplitude': -0.1}, 'amplitude'),
    ({'amplitude': float('nan')}, 'amplitude'),
    ({'f_min_hz': 0.0}, 'f_min_hz'),
    ({'f_min_hz': -1.0}, 'f_min_hz'),
    ({'f_max_hz': 0.05}, 'f_max_hz'),
    ({'f_max_hz': float('inf')}, 'f_max_hz'),
    ({'step_hold_s': 0.0}, 'step_hold_s'),
    ({'velocity_margin': 0.0}, 'velocity_margin'),
    ({'velocity_margin': 1.5}, 'velocity_margin'),
    ({'velocity_margin': -0.2}, 'velocity_margin'),
    ({'position_margin': -0.01}, 'position_margin'),
    ({'ramp_s': 0.0}, 'ramp_s'),
    ({'ramp_s': 6.0}, 'ramp_s'),
    ({'seed': -1}, 'seed'),
    ({'seed': 1.5}, 'seed'),
    ({'seed': True}, 'seed'),
    ({'joints': ()}, 'joints'),
    ({'joints': 'base_yaw'}, 'joints'),
    ({'joints': ('base_yaw', 'base_yaw')}, 'joints'),
    ({'joints': ('base_yaw', '')}, 'joints'),
]


@pytest.mark.parametrize('change,field', INVALID)
def test_invalid_config_raises_naming_field(change: dict[str, Any], field: str) -> None:
    base: dict[str, Any] = {'pattern': 'chirp', 'duration_s': 10.0}
    base.update(change)
    with pytest.raises(ConfigError) as info:
        ExcitationConfig(**base)
    assert info.value.key == field
    assert field in str(info.value)
    assert str(info.value).startswith('excite: ')


def test_unknown_pattern_lists_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        ExcitationConfig('sweep', 10.0)
    for name in PATTERNS:
        assert name in str(info.value)


def test_config_is_frozen() -> None:
    cfg = ExcitationConfig('steps', 10.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 2  # type: ignore[misc]
