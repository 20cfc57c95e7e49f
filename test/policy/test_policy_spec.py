"""Policy spec parsing (every bad spec), observation building and action processing."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.policy.codec import ActionProcessor, ObservationBuilder, ramp_duration, ramp_point
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.terms import (
    SOURCES,
    TERMS,
    ObsInputs,
    TermDef,
    projected_gravity,
    register_term,
)

ROBOT = load_robot('simreal_arm')
N = ROBOT.n


def base_spec() -> dict:
    return {
        'policy': 'test_policy', 'robot': 'simreal_arm', 'model': 'net.pt',
        'control_rate_hz': 50,
        'observation': [{'term': 'joint_pos_rel'}, {'term': 'joint_vel', 'scale': 0.1},
                        {'term': 'goal'}, {'term': 'last_action'}],
        'action': {'scale': 0.5, 'clip': 6.0},
    }


def write(tmp_path: Path, data: dict, name: str = 'spec.yaml') -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data), encoding='utf-8')
    return p


def load(tmp_path: Path, data: dict):
    return load_policy_spec(write(tmp_path, data))


def test_shipped_spec_parses_with_its_interface():
    spec = load_policy_spec('simreal_arm_reach')
    assert spec.robot == 'simreal_arm' and spec.joints == tuple(ROBOT.joint_names)
    assert [t.name for t in spec.observation] == ['joint_pos_rel', 'joint_vel', 'goal',
                                                  'last_action']
    assert spec.obs_dim == 4 * N and spec.act_dim == N
    assert spec.model.is_file() and spec.model.suffix == '.pt'
    assert spec.period_ns == 20_000_000
    np.testing.assert_allclose(spec.default, ROBOT.home)
    np.testing.assert_allclose(spec.lower, ROBOT.lower + 0.02)
    assert spec.layout()[1] == ('joint_vel', N, 2 * N)


def test_defaults_and_model_relative_to_the_spec(tmp_path):
    spec = load(tmp_path, base_spec())
    assert spec.model == tmp_path / 'net.pt'
    assert spec.action.mode == 'offset' and spec.action.reject_abs == 100.0
    assert spec.safety.ramp_s == 2.0 and spec.safety.stale_after_periods == 3.0
    assert spec.topics.joint_states == 'joint_states' and spec.topics.goal == 'goal'
    assert spec.needs == {'joint_states', 'goal'}


def mutate(path: str, value):
    def apply(d: dict) -> dict:
        keys = path.split('.')
        target = d
        for k in keys[:-1]:
            target = target[int(k)] if isinstance(target, list) else target.setdefault(k, {})
        last = keys[-1]
        if value is DELETE:
            del target[last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
        return d
    return apply


class _Delete:
    """The key is removed; a stable repr keeps the test ids equal in every pytest-xdist worker."""

    def __repr__(self) -> str:
        return '<deleted>'


DELETE = _Delete()

BAD = [
    ('robot', DELETE, 'robot', 'present'),
    ('robot', 'no_such_robot', 'no_such_robot', 'shipped names'),
    ('model', DELETE, 'model', 'present'),
    ('model', 'net.pkl', 'model', '.onnx'),
    ('control_rate_hz', 0, 'control_rate_hz', '> 0'),
    ('control_rate_hz', 'fast', 'control_rate_hz', 'a number'),
    ('control_rate_hz', 5000, 'control_rate_hz', '<= 2000'),
    ('observation', [], 'observation', 'non-empty'),
    ('observation', 'joint_pos_rel', 'observation', 'a list'),
    ('observation.0.term', 'joint_posn', 'observation[0].term', 'registered terms'),
    ('observation.1.term', 'joint_pos_rel', 'observation[1].term', 'not listed before'),
    ('observation.0.scale', [1.0, 2.0], 'observation[0].scale', 'list of 6 numbers'),
    ('observation.0.scale', float('nan'), 'observation[0].scale', 'finite'),
    ('observation.0.offset', 'x', 'observation[0].offset', 'a number'),
    ('observation.0.clip', -1.0, 'observation[0].clip', '> 0'),
    ('observation.0.history', 0, 'observation[0].history', 'integer in [1, 100]'),
    ('observation.0.history', 1.5, 'observation[0].history', 'an integer'),
    ('observation.0.sclae', 1.0, 'observation[0].sclae', 'known keys'),
    ('action', DELETE, 'action', 'present'),
    ('action.mode', 'velocity', 'action.mode', "('offset', 'absolute')"),
    ('action.scale', 0.0, 'action.scale', '> 0'),
    ('action.scale', [0.5] * 5, 'action.scale', 'list of 6'),
    ('action.clip', 0, 'action.clip', '> 0'),
    ('action.reject_abs', 3.0, 'action.reject_abs', '> clip'),
    ('action.rate_limit_rad', -0.1, 'action.rate_limit_rad', '>= 0'),
    ('action.low_pass_hz', 'x', 'action.low_pass_hz', 'a number'),
    ('action.limit_margin_rad', 3.0, 'action.limit_margin_rad', 'half of every joint range'),
    ('action.gain', 1.0, 'action.gain', 'known keys'),
    ('joints', ['base_yaw', 'nope'], 'joints[1]', 'a joint of simreal_arm'),
    ('joints', ['base_yaw', 'base_yaw'], 'joints[1]', 'not listed before'),
    ('joints', [], 'joints', 'non-empty list'),
    ('default_pose', {'elbow_pitch': 9.0}, 'default_pose.elbow_pitch', 'within'),
    ('default_pose', {'nope': 0.0}, 'default_pose.nope', 'a joint of the policy'),
    ('default_pose', 'zero', 'default_pose', "'home' or a mapping"),
    ('safety.stale_after_periods', 0.5, 'safety.stale_after_periods', '>= 1'),
    ('safety.ramp_max_velocity', 0, 'safety.ramp_max_velocity', '> 0'),
    ('safety.ramp', 1.0, 'safety.ramp', 'known keys'),
    ('topics.goal', '', 'topics.goal', 'non-empty string'),
    ('topics.commands', 'x', 'topics.commands', 'known keys'),
    ('extra_key', 1, 'extra_key', 'known keys'),
]


@pytest.mark.parametrize('path,value,key,expected', BAD, ids=[f'{b[0]}={b[1]!r}'[:40]
                                                              for b in BAD])
def test_bad_specs_name_the_key_and_the_expectation(tmp_path, path, value, key, expected):
    data = mutate(path, value)(base_spec())
    with pytest.raises(ConfigError) as err:
        load(tmp_path, data)
    msg = str(err.value)
    assert key in msg and expected in msg, msg
    # an unknown robot name is an error of the robots' lookup; every other names the spec file
    where = 'config/robots' if value == 'no_such_robot' else str(tmp_path / 'spec.yaml')
    assert msg.startswith(f'{where}: '), msg


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match='shipped names'):
        load_policy_spec('no_such_policy')
    with pytest.raises(ConfigError, match='an existing file'):
        load_policy_spec(str(tmp_path / 'missing.yaml'))
    p = tmp_path / 'bad.yaml'
    p.write_text('observation: [unclosed', encoding='utf-8')
    with pytest.raises(ConfigError, match='valid YAML'):
        load_policy_spec(p)


def test_imu_terms_need_a_robot_with_an_imu(tmp_path):
    data = base_spec()
    data['observation'].append({'term': 'projected_gravity'})
    spec = load(tmp_path, data)  # simreal_arm has a wrist IMU
    assert 'imu' in spec.needs and spec.obs_dim == 4 * N + 3
    robot_yaml = yaml.safe_load(ROBOT.source.read_text())
    del robot_yaml['imu']
    robot_yaml['urdf'] = str(ROBOT.urdf)
    rp = tmp_path / 'no_imu.yaml'
    rp.write_text(yaml.safe_dump(robot_yaml))
    data['robot'] = 'simreal_arm'
    from simreal_ros.core.robot import load_robot as lr
    with pytest.raises(ConfigError, match='no imu'):
        load_policy_spec(write(tmp_path, data), robot=lr(rp))


def test_spec_for_another_robot_is_refused(tmp_path):
    robot_yaml = yaml.safe_load(ROBOT.source.read_text())
    robot_yaml['robot'] = 'other_arm'
    robot_yaml['urdf'] = str(ROBOT.urdf)
    rp = tmp_path / 'other.yaml'
    rp.write_text(yaml.safe_dump(robot_yaml))
    with pytest.raises(ConfigError, match="'other_arm'"):
        load_policy_spec(write(tmp_path, base_spec()), robot=load_robot(rp))


def inputs(spec, **kw) -> ObsInputs:
    n = spec.n
    d = dict(position=spec.default + np.arange(n) * 0.1, velocity=np.arange(n) * 1.0,
             default=spec.default, last_action=np.full(n, 0.5),
             goal=spec.default + 0.2, time_s=0.25)
    d.update(kw)
    return ObsInputs(**d)


def test_observation_order_scaling_offset_and_clip(tmp_path):
    data = base_spec()
    data['observation'] = [
        {'term': 'joint_vel', 'scale': 0.1, 'offset': 1.0, 'clip': 0.3},
        {'term': 'joint_pos_rel', 'scale': [1, 2, 3, 4, 5, 6]},
        {'term': 'phase', 'period_s': 1.0},
        {'term': 'goal'},
    ]
    spec = load(tmp_path, data)
    obs = ObservationBuilder(spec).build(inputs(spec))
    assert obs.shape == (spec.obs_dim,) == (3 * N + 2,)
    np.testing.assert_allclose(obs[:N], np.clip(0.1 * (np.arange(N) - 1.0), -0.3, 0.3))
    np.testing.assert_allclose(obs[N:2 * N], np.arange(N) * 0.1 * np.arange(1, N + 1))
    np.testing.assert_allclose(obs[2 * N:2 * N + 2], [1.0, 0.0], atol=1e-12)  # sin, cos(pi/2)
    np.testing.assert_allclose(obs[2 * N + 2:], np.full(N, 0.2))


def test_history_is_oldest_first_and_filled_at_start(tmp_path):
    data = base_spec()
    data['observation'] = [{'term': 'joint_pos_rel', 'history': 3}, {'term': 'last_action'}]
    spec = load(tmp_path, data)
    b = ObservationBuilder(spec)
    q = [spec.default + k for k in (0.1, 0.2, 0.3, 0.4)]
    first = b.build(inputs(spec, position=q[0]))
    np.testing.assert_allclose(first[:3 * N], np.full(3 * N, 0.1))
    b.build(inputs(spec, position=q[1]))
    b.build(inputs(spec, position=q[2]))
    out = b.build(inputs(spec, position=q[3], last_action=np.full(N, -1.0)))
    np.testing.assert_allclose(out[:N], 0.2)
    np.testing.assert_allclose(out[N:2 * N], 0.3)
    np.testing.assert_allclose(out[2 * N:3 * N], 0.4)
    np.testing.assert_allclose(out[3 * N:], -1.0)
    b.reset()
    np.testing.assert_allclose(b.build(inputs(spec, position=q[0]))[:3 * N], 0.1)


def test_policy_joint_order_is_its_own(tmp_path):
    data = base_spec()
    data['joints'] = ['wrist_roll', 'base_yaw']
    data['default_pose'] = {'base_yaw': 0.5}
    spec = load(tmp_path, data)
    assert spec.n == 2 and list(spec.joint_index) == [5, 0]
    np.testing.assert_allclose(spec.default, [ROBOT.home[5], 0.5])
    assert spec.obs_dim == 8


def test_projected_gravity():
    np.testing.assert_allclose(projected_gravity(np.array([1.0, 0, 0, 0])), [0, 0, -1])
    # rolled 90 degrees about x: gravity along -y of the body... +y? check by rotation
    c = math.cos(math.pi / 4)
    g = projected_gravity(np.array([c, c, 0, 0]))
    np.testing.assert_allclose(g, [0, -1, 0], atol=1e-12)
    assert abs(np.linalg.norm(projected_gravity(np.array([0.3, 0.1, -0.5, 0.8]) / np.linalg.norm(
        [0.3, 0.1, -0.5, 0.8]))) - 1.0) < 1e-12


def test_imu_terms_without_imu_data_fail_clearly(tmp_path):
    data = base_spec()
    data['observation'] = [{'term': 'base_ang_vel'}]
    spec = load(tmp_path, data)
    with pytest.raises(ValueError, match='no imu/data'):
        ObservationBuilder(spec).build(inputs(spec))
    out = ObservationBuilder(spec).build(inputs(spec, imu_gyro=np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(out, [1, 2, 3])


def test_a_new_term_is_registered_in_one_place(tmp_path):
    name = 'test_joint_pos_abs'
    if name not in TERMS:
        register_term(TermDef(name, lambda n: n, ('joint_states',),
                              lambda i, _o: i.position.copy()))
    with pytest.raises(ValueError, match='already registered'):
        register_term(TermDef(name, lambda n: n, (), lambda i, _o: i.position))
    data = base_spec()
    data['observation'] = [{'term': name, 'offset': 1.0}]
    spec = load(tmp_path, data)
    i = inputs(spec)
    np.testing.assert_allclose(ObservationBuilder(spec).build(i), i.position - 1.0)


def processor(tmp_path, **action):
    data = base_spec()
    data['action'] = {'scale': 0.5, 'clip': 2.0, **action}
    spec = load(tmp_path, data)
    return spec, ActionProcessor(spec)


def test_offset_action_scale_and_clip(tmp_path):
    spec, ap = processor(tmp_path)
    res = ap.process(np.array([0.2, 3.0, -3.0, 0.0, 0.0, 0.0]))
    assert res.ok and res.clipped
    np.testing.assert_allclose(res.action, [0.2, 2.0, -2.0, 0, 0, 0])
    np.testing.assert_allclose(res.target, spec.default + 0.5 * res.action)
    np.testing.assert_allclose(ap.neutral_action(), 0.0)


def test_absolute_action(tmp_path):
    spec, ap = processor(tmp_path, mode='absolute', scale=1.0, clip=None)
    res = ap.process(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]))
    np.testing.assert_allclose(res.target, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    np.testing.assert_allclose(ap.process(ap.neutral_action()).target, spec.default)


def test_targets_are_clamped_to_the_joint_limits(tmp_path):
    spec, ap = processor(tmp_path, scale=2.0, clip=None, limit_margin_rad=0.1)
    res = ap.process(np.full(N, 40.0))
    assert res.ok and res.clipped
    np.testing.assert_allclose(res.target, ROBOT.upper - 0.1)
    res = ap.process(np.full(N, -40.0))
    np.testing.assert_allclose(res.target, ROBOT.lower + 0.1)


def test_rate_limit_and_low_pass(tmp_path):
    spec, ap = processor(tmp_path, rate_limit_rad=0.05)
    res = ap.process(np.full(N, 2.0))
    np.testing.assert_allclose(res.target, spec.default + 0.05)
    res = ap.process(np.full(N, 2.0))
    np.testing.assert_allclose(res.target, spec.default + 0.10)
    spec, ap = processor(tmp_path, low_pass_hz=5.0)
    alpha = 1 - math.exp(-2 * math.pi * 5.0 / 50.0)
    res = ap.process(np.full(N, 1.0))
    np.testing.assert_allclose(res.target, spec.default + alpha * 0.5)
    ap.reset(spec.default + 0.3)
    res = ap.process(np.full(N, 0.6))
    np.testing.assert_allclose(res.target, spec.default + 0.3)


@pytest.mark.parametrize('raw,reason', [
    ([float('nan')] + [0.0] * 5, 'NaN or inf'),
    ([float('inf')] + [0.0] * 5, 'NaN or inf'),
    ([0.0] * 5, '5 values, expected 6'),
    ([0.0, 0.0, 500.0, 0.0, 0.0, 0.0], 'elbow_pitch is beyond action.reject_abs=100'),
])
def test_bad_outputs_are_rejected_and_the_previous_target_kept(tmp_path, raw, reason):
    spec, ap = processor(tmp_path)
    good = ap.process(np.full(N, 0.4))
    res = ap.process(np.array(raw))
    assert not res.ok and reason in res.reason
    np.testing.assert_allclose(res.target, good.target)
    np.testing.assert_allclose(ap.previous, good.target)


def test_ramp_duration_respects_the_speed_and_the_minimum(tmp_path):
    spec = load(tmp_path, base_spec())
    start = spec.default.copy()
    assert ramp_duration(spec, start, spec.default) == 2.0
    start[1] += 1.0
    t = ramp_duration(spec, start, spec.default)
    assert t == pytest.approx(0.5 * math.pi * 1.0 / 0.5)
    np.testing.assert_allclose(ramp_point(start, spec.default, 0.0, t), start)
    np.testing.assert_allclose(ramp_point(start, spec.default, t, t), spec.default)
    ts = np.linspace(0, t, 400)
    pts = np.array([ramp_point(start, spec.default, x, t) for x in ts])
    speed = np.abs(np.diff(pts[:, 1])) / (ts[1] - ts[0])
    assert speed.max() <= 0.5 * 1.001


def test_register_term_validates_needs_and_options():
    compute = lambda i, _o: i.position.copy()  # noqa: E731
    with pytest.raises(ValueError, match=r"unknown sources \['imu_data'\].*docs/policy.md"):
        register_term(TermDef('typo_needs_term', lambda n: n, ('imu_data',), compute))
    with pytest.raises(ValueError, match='needs must be a tuple'):
        register_term(TermDef('str_needs_term', lambda n: n, 'imu', compute))  # type: ignore
    with pytest.raises(ValueError, match="option 'period_s'"):
        register_term(TermDef('bad_option_term', lambda n: n, (), compute, {'period_s': -1.0}))
    with pytest.raises(ValueError, match='identifier'):
        register_term(TermDef('bad name', lambda n: n, (), compute))
    assert not {'typo_needs_term', 'str_needs_term', 'bad_option_term', 'bad name'} & set(TERMS)
    assert all(set(t.needs) <= set(SOURCES) for t in TERMS.values())


def test_at_rate_rebuilds_what_depends_on_the_period(tmp_path):
    data = base_spec()
    data['action'] = {'scale': 0.5, 'clip': 2.0, 'rate_limit_rad': 0.06, 'low_pass_hz': 5.0}
    spec = load(tmp_path, data)
    assert spec.at_rate(50.0) is spec and spec.declared_rate_hz == 50.0
    fast = spec.at_rate(200.0)
    assert fast.control_rate_hz == 200.0 and fast.period_ns == 5_000_000
    assert fast.declared_rate_hz == 50.0 and fast.at_rate(100.0).declared_rate_hz == 50.0
    # the rate limit keeps its speed (3 rad/s), the low-pass its cutoff (5 Hz)
    assert fast.action.rate_limit_rad == pytest.approx(0.015)
    ap = ActionProcessor(fast)
    assert ap.alpha == pytest.approx(1 - math.exp(-2 * math.pi * 5.0 / 200.0))
    ap = ActionProcessor(replace_low_pass(fast))
    res = ap.process(np.full(N, 2.0))
    np.testing.assert_allclose(res.target, fast.default + 0.015)
    with pytest.raises(ValueError, match='rate in'):
        spec.at_rate(0.0)
    with pytest.raises(ValueError, match='rate in'):
        spec.at_rate(5000.0)


def replace_low_pass(spec):
    import dataclasses
    return dataclasses.replace(spec, action=dataclasses.replace(spec.action, low_pass_hz=0.0))
