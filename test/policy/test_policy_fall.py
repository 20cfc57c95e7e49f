"""Fall detection and the damping hand-over (policy/safety.py, policy/control.py), no ROS."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.policy.control import DAMPING, DISABLED, RAMPING, RUNNING, PolicyController
from simreal_ros.policy.safety import FallDetector, FallSpec, tilt_from_quat
from simreal_ros.policy.spec import load_policy_spec

QUAD = load_robot('simreal_quad')
NAMES = QUAD.joint_names
LEVEL = (1.0, 0.0, 0.0, 0.0)


def roll_quat(angle_rad: float) -> tuple[float, float, float, float]:
    return (math.cos(angle_rad / 2), math.sin(angle_rad / 2), 0.0, 0.0)


def quad_spec(tmp_path, **extra):
    data = {'policy': 'quad_probe', 'robot': 'simreal_quad', 'model': 'zero.pt',
            'control_rate_hz': 50.0,
            'observation': [{'term': 'projected_gravity'}, {'term': 'joint_pos_rel'}],
            'action': {'scale': 0.25, 'clip': 4.0},
            'safety': {'ramp_s': 0.1}, **extra}
    path = tmp_path / 'quad_probe.yaml'
    path.write_text(yaml.safe_dump(data))
    return path


def test_fall_detection_is_on_by_default_for_a_floating_base(tmp_path):
    spec = load_policy_spec(quad_spec(tmp_path))
    assert spec.fall == FallSpec(1.0, 0.2)
    spec = load_policy_spec(quad_spec(tmp_path, fall={'tilt_rad': 0.6, 'after_s': 0.05}))
    assert spec.fall == FallSpec(0.6, 0.05)
    assert load_policy_spec(quad_spec(tmp_path, fall={'enabled': False})).fall is None
    assert load_policy_spec('simreal_arm_reach').fall is None  # a fixed base: off


@pytest.mark.parametrize('fall, key, expected', [
    ({'tilt_rad': -0.1}, 'fall.tilt_rad', '> 0'),
    ({'tilt_rad': 4.0}, 'fall.tilt_rad', '3.14'),
    ({'after_s': 'long'}, 'fall.after_s', 'number'),
    ({'tilt': 1.0}, 'fall.tilt', 'known keys'),
    ({'enabled': 'yes'}, 'fall.enabled', 'true or false'),
])
def test_bad_fall_keys_name_file_key_and_expectation(tmp_path, fall, key, expected):
    path = quad_spec(tmp_path, fall=fall)
    with pytest.raises(ConfigError) as err:
        load_policy_spec(path)
    assert err.value.source == str(path) and err.value.key == key
    assert expected in str(err.value)


def test_fall_detection_needs_an_imu(tmp_path):
    """so101 has no IMU in its robot spec: enabling fall detection is one ConfigError."""
    assert load_robot('so101').imu is None
    data = yaml.safe_load(load_policy_spec('so101_reach').source.read_text())
    data.update(model='zero.pt', fall={'enabled': True})
    path = tmp_path / 'so101_fall.yaml'
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_policy_spec(path)
    assert err.value.source == str(path) and err.value.key == 'fall.enabled'
    assert 'so101 has no imu' in err.value.expected


def test_tilt_is_the_angle_of_the_z_axis_from_the_vertical():
    assert tilt_from_quat(np.array(LEVEL)) == 0.0
    assert tilt_from_quat(np.array(roll_quat(0.7))) == pytest.approx(0.7)
    # yaw does not tilt; pitch does
    assert tilt_from_quat(np.array([math.cos(0.5), 0, 0, math.sin(0.5)])) == pytest.approx(0)
    assert tilt_from_quat(np.array([math.cos(0.6), 0, math.sin(0.6), 0])) == pytest.approx(1.2)
    assert tilt_from_quat(np.array(roll_quat(math.pi))) == pytest.approx(math.pi)


def test_the_detector_needs_the_tilt_to_last_after_s():
    d = FallDetector(FallSpec(1.0, 0.2))
    ms = 1_000_000
    d.update(np.array(roll_quat(1.2)), 0)
    d.update(np.array(roll_quat(1.2)), 190 * ms)
    assert d.tilted and not d.fallen
    d.update(np.array(roll_quat(0.9)), 195 * ms)  # back within: the timer stops
    d.update(np.array(roll_quat(1.2)), 200 * ms)
    d.update(np.array(roll_quat(1.3)), 399 * ms)
    assert not d.fallen
    d.update(np.array(roll_quat(1.3)), 400 * ms)
    assert d.fallen and '1.30 rad > 1 rad for 0.20 s' in d.reason()


class Zero:
    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def __call__(self, obs):
        self.calls += 1
        return np.zeros(self.n)


def test_a_fall_hands_over_to_damping_until_re_enabled(tmp_path):
    spec = load_policy_spec(quad_spec(tmp_path, fall={'tilt_rad': 1.0, 'after_s': 0.1}))
    model = Zero(spec.act_dim)
    c = PolicyController(spec, QUAD, model)
    P = spec.period_ns
    q = QUAD.home.copy()

    def tick(k, quat, pos=q):
        t = k * P
        c.set_state(NAMES, pos, np.zeros(QUAD.n), t)
        c.set_imu(quat, (0.0, 0.0, 0.0), t)
        return c.step(t)

    tick(1, LEVEL)
    assert c.enable(P)[0]
    results = [tick(k, LEVEL) for k in range(2, 12)]
    assert c.mode == RUNNING and model.calls > 0
    # tilted 1.2 rad: the network keeps running for the first 0.1 s (5 periods at 50 Hz)
    results = [tick(k, roll_quat(1.2)) for k in range(12, 17)]
    assert [r.mode for r in results] == [RUNNING] * 5
    calls = model.calls
    fallen_pose = q + 0.3
    r = tick(17, roll_quat(1.2), fallen_pose)
    assert r.mode == DAMPING and r.event.startswith('fall detected: base tilt 1.20 rad')
    assert 'until re-enabled' in r.event and c.counts['falls'] == 1
    np.testing.assert_allclose(r.command, np.clip(fallen_pose, c.lower, c.upper))
    # damping: the goal follows the measured pose, the network is not called, one event only
    later = [tick(k, roll_quat(1.5), q - 0.2) for k in range(18, 25)]
    assert all(x.mode == DAMPING and x.event == '' for x in later)
    np.testing.assert_allclose(later[-1].command, np.clip(q - 0.2, c.lower, c.upper))
    assert model.calls == calls
    # a level IMU does not end it: only an enable does, refused while still tilted
    ok, why = c.enable(25 * P)
    assert not ok and 'tilted 1.50 rad' in why and 'on its feet' in why
    assert tick(26, LEVEL).mode == DAMPING
    ok, why = c.enable(26 * P)
    assert ok and c.mode == RAMPING
    r = tick(27, LEVEL)
    assert r.mode == RAMPING
    assert c.disable().startswith('disabled') and c.mode == DISABLED


def test_fall_detection_makes_the_imu_part_of_the_freshness_check(tmp_path):
    spec = load_policy_spec(quad_spec(tmp_path, observation=[{'term': 'joint_pos_rel'}]))
    c = PolicyController(spec, QUAD, Zero(spec.act_dim))
    assert c.needs_imu
    c.set_state(NAMES, QUAD.home, np.zeros(QUAD.n), spec.period_ns)
    ok, why = c.enable(spec.period_ns)
    assert not ok and 'no imu/data' in why
