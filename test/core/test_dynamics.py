"""Tests of model overlays and domain randomization (pure data, no MuJoCo)."""

from __future__ import annotations

import math
from pathlib import Path
import re
from typing import Any

import numpy as np
import pytest
import yaml

from simreal_ros.core.dynamics import (
    DynamicsParams,
    JointDynamics,
    Overlay,
    Randomization,
    load_overlay,
    load_randomization,
)
from simreal_ros.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
WORN_FILE = REPO / 'config' / 'overlays' / 'worn_arm.yaml'
RAND_FILE = REPO / 'config' / 'randomization' / 'default.yaml'

JOINTS = ('base_yaw', 'shoulder_pitch', 'elbow_pitch', 'forearm_roll', 'wrist_pitch',
          'wrist_roll')
BODIES = {'base_link': 0.35, 'shoulder_link': 0.12, 'upper_arm_link': 0.16,
          'forearm_link': 0.13, 'wrist_roll_link': 0.09, 'wrist_pitch_link': 0.09,
          'wrist_flange_link': 0.06}
ROBOT = 'simreal_arm'


def nominal(command_delay_s: float = 0.0, friction_scale: float = 1.0) -> DynamicsParams:
    """Hand-built nominal parameters of simreal_arm: distinct values per joint."""
    joints = {name: JointDynamics(damping=0.10 + 0.01 * i, frictionloss=0.03 + 0.002 * i,
                                  armature=0.012 - 0.0005 * i, kp=20.0 - i, kd=0.6 - 0.05 * i)
              for i, name in enumerate(JOINTS)}
    return DynamicsParams(joints, dict(BODIES), command_delay_s, friction_scale)


def _write(tmp_path: Path, data: Any, name: str = 'bad.yaml') -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
    return path


def _message(path: Path | str, key: str, expected: str) -> str:
    return re.escape(f'{path}: {key}: expected {expected}')


# ---------------------------------------------------------------------------------------------
# DynamicsParams


def test_flat_and_with_joint() -> None:
    p = nominal(0.004, 1.5)
    flat = p.flat()
    assert flat['joint.elbow_pitch.kp'] == 18.0
    assert flat['body.forearm_link.mass'] == 0.13
    assert flat['command_delay_s'] == 0.004
    assert flat['friction_scale'] == 1.5
    assert len(flat) == 6 * 5 + len(BODIES) + 2
    q = p.with_joint('elbow_pitch', kp=3.0, damping=0.5)
    assert q.joints['elbow_pitch'].kp == 3.0
    assert q.joints['elbow_pitch'].damping == 0.5
    assert q.joints['elbow_pitch'].kd == p.joints['elbow_pitch'].kd
    assert p.joints['elbow_pitch'].kp == 18.0


# ---------------------------------------------------------------------------------------------
# overlays: shipped


def test_load_worn_arm_values() -> None:
    ov = load_overlay('worn_arm')
    assert Path(ov.source).resolve() == WORN_FILE.resolve()
    assert ov.robot == ROBOT
    assert ov.joints['base_yaw'] == {'damping': 0.15, 'frictionloss': 0.05, 'armature': 0.014}
    assert ov.joints['shoulder_pitch'] == {'damping': 0.20, 'frictionloss': 0.07,
                                           'armature': 0.015}
    assert ov.joints['elbow_pitch'] == {'damping': 0.18, 'frictionloss': 0.06,
                                        'armature': 0.014}
    for name in ('forearm_roll', 'wrist_pitch', 'wrist_roll'):
        assert ov.joints[name] == {'damping_scale': 1.3, 'frictionloss': 0.03}
    assert set(ov.joints) == set(JOINTS)
    assert ov.bodies == {'wrist_flange_link': {'mass_scale': 1.8},
                         'forearm_link': {'mass_scale': 1.1}}
    assert ov.command_delay_s == 0.008
    assert ov.imperfections == {'backlash_rad': 0.003, 'encoder_noise_rad': 0.0005}
    assert ov.metadata == {'description': 'worn gearboxes, heavier tool, 8 ms command latency'}


def test_load_overlay_by_path() -> None:
    assert load_overlay(WORN_FILE).joints == load_overlay('worn_arm').joints
    assert load_overlay(str(WORN_FILE)).command_delay_s == 0.008


def test_apply_worn_arm() -> None:
    base = nominal()
    out = load_overlay('worn_arm').apply(base, ROBOT)
    # absolute keys replace the value
    by = out.joints['base_yaw']
    assert (by.damping, by.frictionloss, by.armature) == (0.15, 0.05, 0.014)
    assert (by.kp, by.kd) == (base.joints['base_yaw'].kp, base.joints['base_yaw'].kd)
    assert out.joints['elbow_pitch'].damping == 0.18
    # _scale keys multiply the nominal value
    for name in ('forearm_roll', 'wrist_pitch', 'wrist_roll'):
        assert out.joints[name].damping == pytest.approx(base.joints[name].damping * 1.3)
        assert out.joints[name].frictionloss == 0.03
        assert out.joints[name].armature == base.joints[name].armature
        assert out.joints[name].kp == base.joints[name].kp
    # mass_scale multiplies the body mass; other bodies stay
    assert out.body_mass['wrist_flange_link'] == pytest.approx(0.06 * 1.8)
    assert out.body_mass['forearm_link'] == pytest.approx(0.13 * 1.1)
    for name in set(BODIES) - {'wrist_flange_link', 'forearm_link'}:
        assert out.body_mass[name] == BODIES[name]
    assert out.command_delay_s == 0.008
    assert out.friction_scale == base.friction_scale
    # the input is left untouched
    assert base == nominal()


def test_apply_nominal_overlay_is_identity() -> None:
    base = nominal(0.002, 1.2)
    ov = load_overlay('nominal')
    assert ov.robot == ROBOT
    assert ov.command_delay_s is None
    assert ov.apply(base, ROBOT) == base


def test_apply_scale_and_absolute_on_same_joint() -> None:
    ov = Overlay('inline', joints={'wrist_roll': {'kp_scale': 0.5, 'kd': 0.1}},
                 bodies={'base_link': {'mass': 1.0}})
    out = ov.apply(nominal(0.003), 'any_robot')
    assert out.joints['wrist_roll'].kp == pytest.approx(15.0 * 0.5)
    assert out.joints['wrist_roll'].kd == 0.1
    assert out.body_mass['base_link'] == 1.0
    assert out.command_delay_s == 0.003


def test_apply_twice_scales_twice() -> None:
    ov = Overlay('inline', bodies={'forearm_link': {'mass_scale': 2.0}})
    out = ov.apply(ov.apply(nominal(), ROBOT), ROBOT)
    assert out.body_mass['forearm_link'] == pytest.approx(0.52)


def test_apply_unknown_joint(tmp_path: Path) -> None:
    path = _write(tmp_path, {'robot': ROBOT, 'joints': {'elbow': {'damping': 0.2}}})
    ov = load_overlay(path)
    with pytest.raises(ConfigError, match=_message(path, 'joints.elbow',
                                                   'a joint of simreal_arm (base_yaw, ')):
        ov.apply(nominal(), ROBOT)


def test_apply_unknown_body(tmp_path: Path) -> None:
    path = _write(tmp_path, {'bodies': {'gripper_link': {'mass_scale': 1.5}}})
    ov = load_overlay(path)
    with pytest.raises(ConfigError, match=_message(path, 'bodies.gripper_link',
                                                   'a body with mass in simreal_arm')) as info:
        ov.apply(nominal(), ROBOT)
    assert 'wrist_flange_link' in str(info.value)


def test_apply_wrong_robot(tmp_path: Path) -> None:
    path = _write(tmp_path, {'robot': 'other_arm', 'command_delay_s': 0.01})
    ov = load_overlay(path)
    with pytest.raises(ConfigError, match=_message(
            path, 'robot', "'simreal_arm' (the robot being loaded), got 'other_arm'")):
        ov.apply(nominal(), ROBOT)


# ---------------------------------------------------------------------------------------------
# overlays: bad files

BAD_OVERLAYS = [
    ({'joints': {'base_yaw': {'damping': -0.1}}}, 'joints.base_yaw.damping', 'a number >= 0.0'),
    ({'joints': {'base_yaw': {'damping_scale': -1.3}}}, 'joints.base_yaw.damping_scale',
     'a number >= 0.0'),
    ({'joints': {'base_yaw': {'dampingg': 0.1}}}, 'joints.base_yaw.dampingg',
     'one of damping, damping_scale, frictionloss'),
    ({'joints': {'base_yaw': {'mass_scale': 1.1}}}, 'joints.base_yaw.mass_scale',
     'one of damping, damping_scale'),
    ({'joints': {'base_yaw': {'damping': 'high'}}}, 'joints.base_yaw.damping', 'a number'),
    ({'joints': {'base_yaw': {'kp': '20'}}}, 'joints.base_yaw.kp', 'a number'),
    ({'joints': {'base_yaw': {'kd': True}}}, 'joints.base_yaw.kd', 'a number'),
    ({'joints': {'base_yaw': {'armature': math.nan}}}, 'joints.base_yaw.armature',
     'a finite number'),
    ({'joints': {'base_yaw': {'frictionloss': math.inf}}}, 'joints.base_yaw.frictionloss',
     'a finite number'),
    ({'joints': {'base_yaw': 0.15}}, 'joints.base_yaw', 'a mapping'),
    ({'joints': ['base_yaw']}, 'joints', 'a mapping'),
    ({'bodies': {'forearm_link': {'mass': -0.1}}}, 'bodies.forearm_link.mass',
     'a number >= 0.0'),
    ({'bodies': {'forearm_link': {'mass': 'heavy'}}}, 'bodies.forearm_link.mass', 'a number'),
    ({'bodies': {'forearm_link': {'inertia_scale': 2.0}}}, 'bodies.forearm_link.inertia_scale',
     'one of mass, mass_scale'),
    ({'bodies': {'forearm_link': 1.1}}, 'bodies.forearm_link', 'a mapping'),
    ({'command_delay_s': -0.001}, 'command_delay_s', 'a number >= 0.0'),
    ({'command_delay_s': 2.0}, 'command_delay_s', 'a number <= 1.0'),
    ({'command_delay_s': '8ms'}, 'command_delay_s', 'a number'),
    ({'command_delay_s': math.nan}, 'command_delay_s', 'a finite number'),
    ({'imperfections': {'backlash_rad': 'some'}}, 'imperfections.backlash_rad', 'a number'),
    ({'imperfections': {'backlash_rad': [0.003]}}, 'imperfections.backlash_rad', 'a number'),
    ({'imperfections': {'backlash_rad': True}}, 'imperfections.backlash_rad', 'a number'),
    ({'imperfections': {'encoder_noise_rad': -0.1}}, 'imperfections.encoder_noise_rad',
     'a number >= 0.0'),
    ({'imperfections': {'encoder_noise_rad': math.inf}}, 'imperfections.encoder_noise_rad',
     'a finite number'),
    ({'imperfections': 0.003}, 'imperfections', 'a mapping'),
    ({'robot': 5}, 'robot', 'a non-empty string'),
    ({'comand_delay_s': 0.008}, 'comand_delay_s', 'one of the known keys'),
    ({'joint': {}}, 'joint', 'one of the known keys'),
]


@pytest.mark.parametrize('data, key, expected', BAD_OVERLAYS,
                         ids=[f'{c[1]}' for c in BAD_OVERLAYS])
def test_bad_overlay(tmp_path: Path, data: dict[str, Any], key: str, expected: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=_message(path, key, expected)) as info:
        load_overlay(path)
    assert info.value.source == str(path)
    assert info.value.key == key


def test_bad_overlay_file_itself(tmp_path: Path) -> None:
    path = tmp_path / 'broken.yaml'
    path.write_text('joints: {base_yaw: [\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=re.escape(f'{path}: expected valid YAML')):
        load_overlay(path)
    path.write_text('- robot: simreal_arm\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=re.escape(f'{path}: expected a mapping at the top')):
        load_overlay(path)
    with pytest.raises(ConfigError, match='expected a file path or one of the shipped names'):
        load_overlay('no_such_overlay')


# ---------------------------------------------------------------------------------------------
# randomization: shipped


@pytest.fixture(scope='module')
def rand() -> Randomization:
    return load_randomization('default')


def test_load_default_randomization(rand: Randomization) -> None:
    assert Path(rand.source).resolve() == RAND_FILE.resolve()
    assert rand.joints == {'*': {'damping_scale': (0.7, 1.5), 'frictionloss_scale': (0.5, 2.0),
                                 'armature_scale': (0.8, 1.3), 'kp_scale': (0.9, 1.1)}}
    assert rand.bodies == {'*': {'mass_scale': (0.9, 1.2)}}
    assert rand.friction_scale == (0.7, 1.3)
    assert rand.command_delay_s == (0.0, 0.012)
    assert load_randomization(RAND_FILE) == rand


def test_sample_is_deterministic_per_seed(rand: Randomization) -> None:
    base = nominal()
    a = rand.sample(base, np.random.default_rng(42))
    b = rand.sample(base, np.random.default_rng(42))
    assert a == b
    assert a != base
    c = rand.sample(base, np.random.default_rng(43))
    assert c != a
    for name in JOINTS:
        assert c.joints[name].damping != a.joints[name].damping
    assert c.body_mass['forearm_link'] != a.body_mass['forearm_link']
    assert c.friction_scale != a.friction_scale
    assert c.command_delay_s != a.command_delay_s


def test_sample_advances_the_rng(rand: Randomization) -> None:
    rng = np.random.default_rng(7)
    first = rand.sample(nominal(), rng)
    second = rand.sample(nominal(), rng)
    assert first != second


def test_sample_leaves_input_untouched(rand: Randomization) -> None:
    base = nominal()
    rand.sample(base, np.random.default_rng(0))
    assert base == nominal()


@pytest.mark.parametrize('seed', range(25))
def test_sampled_values_within_ranges(rand: Randomization, seed: int) -> None:
    base = nominal(command_delay_s=0.5, friction_scale=2.0)
    out = rand.sample(base, np.random.default_rng(seed))
    eps = 1e-12
    for name in JOINTS:
        b, s = base.joints[name], out.joints[name]
        assert 0.7 * b.damping - eps <= s.damping <= 1.5 * b.damping + eps
        assert 0.5 * b.frictionloss - eps <= s.frictionloss <= 2.0 * b.frictionloss + eps
        assert 0.8 * b.armature - eps <= s.armature <= 1.3 * b.armature + eps
        assert 0.9 * b.kp - eps <= s.kp <= 1.1 * b.kp + eps
        assert s.kd == b.kd
    for name, m in BODIES.items():
        assert 0.9 * m - eps <= out.body_mass[name] <= 1.2 * m + eps
    assert set(out.body_mass) == set(BODIES)
    # friction_scale multiplies the base; command_delay_s is an absolute range
    assert 0.7 * 2.0 - eps <= out.friction_scale <= 1.3 * 2.0 + eps
    assert 0.0 <= out.command_delay_s <= 0.012


def test_sample_absolute_ranges_and_patterns(tmp_path: Path) -> None:
    path = _write(tmp_path, {'joints': {'wrist_*': {'damping': [0.2, 0.3]},
                                        'elbow_pitch': {'kd_scale': [2.0, 2.0]}},
                             'bodies': {'forearm_link': {'mass': [1.0, 1.5]}}}, 'r.yaml')
    r = load_randomization(path)
    r.check_targets(list(JOINTS), list(BODIES))
    base = nominal(command_delay_s=0.004, friction_scale=1.1)
    for seed in range(10):
        out = r.sample(base, np.random.default_rng(seed))
        for name in ('wrist_pitch', 'wrist_roll'):
            assert 0.2 <= out.joints[name].damping <= 0.3
        assert out.joints['elbow_pitch'].kd == pytest.approx(2.0 * base.joints['elbow_pitch'].kd)
        for name in ('base_yaw', 'shoulder_pitch', 'forearm_roll'):
            assert out.joints[name] == base.joints[name]
        assert 1.0 <= out.body_mass['forearm_link'] <= 1.5
        assert out.body_mass['base_link'] == BODIES['base_link']
        # ranges not given keep the base values
        assert out.command_delay_s == 0.004
        assert out.friction_scale == 1.1


def test_check_targets_default_passes(rand: Randomization) -> None:
    rand.check_targets(list(JOINTS), list(BODIES))


@pytest.mark.parametrize('data, key', [
    ({'joints': {'elbw_pitch': {'damping_scale': [0.9, 1.1]}}}, 'joints.elbw_pitch'),
    ({'joints': {'wrist_*_link': {'kp_scale': [0.9, 1.1]}}}, 'joints.wrist_*_link'),
    ({'bodies': {'gripper*': {'mass_scale': [0.9, 1.1]}}}, 'bodies.gripper*'),
])
def test_check_targets_pattern_matching_nothing(tmp_path: Path, data: dict[str, Any],
                                                key: str) -> None:
    path = _write(tmp_path, data, 'r.yaml')
    r = load_randomization(path)
    with pytest.raises(ConfigError, match=_message(path, key, 'a name or pattern matching one '
                                                              'of [')):
        r.check_targets(list(JOINTS), list(BODIES))


# ---------------------------------------------------------------------------------------------
# randomization: bad files

BAD_RANDOMIZATIONS = [
    ({'joints': {'*': {'damping_scale': [1.5, 0.7]}}}, 'joints.*.damping_scale', 'low <= high'),
    ({'joints': {'*': {'damping_scale': [1.0]}}}, 'joints.*.damping_scale',
     'a [low, high] pair'),
    ({'joints': {'*': {'damping_scale': [0.7, 1.0, 1.5]}}}, 'joints.*.damping_scale',
     'a [low, high] pair'),
    ({'joints': {'*': {'damping_scale': 1.2}}}, 'joints.*.damping_scale', 'a [low, high] pair'),
    ({'joints': {'*': {'damping_scale': {'low': 0.7}}}}, 'joints.*.damping_scale',
     'a [low, high] pair'),
    ({'joints': {'*': {'damping_scale': [-0.1, 1.0]}}}, 'joints.*.damping_scale[0]',
     'a number >= 0.0'),
    ({'joints': {'*': {'kp': [-2.0, -1.0]}}}, 'joints.*.kp[0]', 'a number >= 0.0'),
    ({'joints': {'*': {'damping_scale': ['a', 1.0]}}}, 'joints.*.damping_scale[0]',
     'a number'),
    ({'joints': {'*': {'damping_scale': [0.5, math.inf]}}}, 'joints.*.damping_scale[1]',
     'a finite number'),
    ({'joints': {'*': {'damping_scal': [0.5, 1.0]}}}, 'joints.*.damping_scal',
     'one of damping, damping_scale'),
    ({'joints': {'*': [0.5, 1.0]}}, 'joints.*', 'a mapping'),
    ({'bodies': {'*': {'mass_scale': [1.2, 0.9]}}}, 'bodies.*.mass_scale', 'low <= high'),
    ({'bodies': {'*': {'mass': [-1.0, 1.0]}}}, 'bodies.*.mass[0]', 'a number >= 0.0'),
    ({'friction_scale': [1.3, 0.7]}, 'friction_scale', 'low <= high'),
    ({'friction_scale': 1.0}, 'friction_scale', 'a [low, high] pair'),
    ({'friction_scale': [0.7, math.nan]}, 'friction_scale[1]', 'a finite number'),
    ({'command_delay_s': [-0.01, 0.01]}, 'command_delay_s[0]', 'a number >= 0.0'),
    ({'command_delay_s': [0.01, 0.0]}, 'command_delay_s', 'low <= high'),
    ({'command_delay_s': ['0', '0.01']}, 'command_delay_s[0]', 'a number'),
    ({'frction_scale': [0.7, 1.3]}, 'frction_scale', 'one of the known keys'),
    ({'joints': 0.5}, 'joints', 'a mapping'),
]


@pytest.mark.parametrize('data, key, expected', BAD_RANDOMIZATIONS,
                         ids=[f'{c[1]}-{c[2]}' for c in BAD_RANDOMIZATIONS])
def test_bad_randomization(tmp_path: Path, data: dict[str, Any], key: str,
                           expected: str) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=_message(path, key, expected)) as info:
        load_randomization(path)
    assert info.value.source == str(path)
    assert info.value.key == key


def test_bad_randomization_file_itself(tmp_path: Path) -> None:
    path = tmp_path / 'broken.yaml'
    path.write_text('[1, 2]\n', encoding='utf-8')
    with pytest.raises(ConfigError, match=re.escape(f'{path}: expected a mapping at the top')):
        load_randomization(path)
    with pytest.raises(ConfigError, match=re.escape(f'{tmp_path / "nope.yaml"}: expected an '
                                                    'existing file')):
        load_randomization(tmp_path / 'nope.yaml')
