"""The excite, policy, recorder and injector settings: every field validated without ROS."""

from __future__ import annotations

import pytest

from simreal_ros.bag.recorder_config import RecorderConfig
from simreal_ros.core.excite_config import ExciteConfig
from simreal_ros.errors import ConfigError
from simreal_ros.latency.injector_config import InjectorConfig
from simreal_ros.policy.node_config import PolicyNodeConfig

CONFIGS = (ExciteConfig, PolicyNodeConfig, RecorderConfig, InjectorConfig)


def build(cls, **values):
    base = {'policy': 'simreal_arm_reach'} if cls is PolicyNodeConfig else {}
    return cls.from_mapping({**base, **values})


@pytest.mark.parametrize('cls', CONFIGS, ids=lambda c: c.__name__)
def test_defaults_are_valid_and_unknown_keys_are_named(cls):
    build(cls)
    with pytest.raises(ConfigError) as err:
        build(cls, no_such_key=1)
    assert str(err.value).startswith(f'{cls.SOURCE}: no_such_key: expected one of [')
    assert str(err.value).endswith("got 'unknown key'")


BAD = [
    (ExciteConfig, 'pattern', 'zigzag', "expected one of ('chirp'"),
    (ExciteConfig, 'rate_hz', 0.0, 'expected a number > 0'),
    (ExciteConfig, 'rate_hz', 'fast', 'expected a float'),
    (ExciteConfig, 'wait_timeout_s', -1.0, 'expected a number > 0'),
    (ExciteConfig, 'wait_for_subscribers', -1, 'expected an integer >= 0'),
    (ExciteConfig, 'duration_s', 0.0, 'expected a number > 0'),
    (ExciteConfig, 'seed', 1.5, 'expected a int'),
    (ExciteConfig, 'robot', '', 'expected a robot name or spec path'),
    (PolicyNodeConfig, 'policy', '', 'expected a policy spec name'),
    (PolicyNodeConfig, 'rate_hz', -1.0, 'expected a number >= 0.0'),
    (PolicyNodeConfig, 'threads', 0, 'expected an integer >= 1'),
    (PolicyNodeConfig, 'spin_wait_us', -5, 'expected an integer >= 0'),
    (PolicyNodeConfig, 'diagnostics_period_s', 0.0, 'expected a number > 0'),
    (PolicyNodeConfig, 'rt_priority', 99, 'expected an integer in [0, 98]'),
    (PolicyNodeConfig, 'sync_to_states', 'yes', 'expected a bool'),
    (RecorderConfig, 'storage', 'zip', "expected one of ['mcap'"),
    (RecorderConfig, 'split_size_mb', 0.5, 'expected at least 1 MB'),
    (RecorderConfig, 'topics', [], 'expected at least one topic name or pattern'),
    (RecorderConfig, 'topics', ['ok', 3], 'expected a list of strings'),
    (RecorderConfig, 'gap_primary', 'a/joint_states',
     'gap_secondary: expected both gap_primary and gap_secondary set, or neither'),
    (RecorderConfig, 'discovery_period_s', 0.0, 'expected a number > 0'),
    (RecorderConfig, 'duration_s', -1.0, 'expected a number >= 0.0'),
    (RecorderConfig, 'depth', -1, 'expected an integer >= 0'),
    (InjectorConfig, 'events_period_s', 0.0, 'expected a number > 0'),
    (InjectorConfig, 'diagnostics_period_s', float('nan'), 'expected a finite number'),
    (InjectorConfig, 'receive_rt_priority', 120, 'expected an integer in [0, 98]'),
    (InjectorConfig, 'spin_us', 5000, 'expected an integer in [0, 1000] (us)'),
    (InjectorConfig, 'cpu_affinity', 'x', 'cpu_affinity: expected'),
    (InjectorConfig, 'bindings', 'command:a>b', 'expected a list of strings'),
]


@pytest.mark.parametrize('cls,key,value,expected', BAD,
                         ids=[f'{c.__name__}.{k}={v!r}' for c, k, v, _ in BAD])
def test_a_bad_value_is_one_error_naming_node_key_and_expectation(cls, key, value, expected):
    with pytest.raises(ConfigError) as err:
        build(cls, **{key: value})
    text = str(err.value)
    assert text.startswith(f'{cls.SOURCE}: ')
    assert expected in text, text


def test_string_arrays_become_tuples_and_carry_their_parts():
    cfg = RecorderConfig.from_mapping({'topics': ['joint_states', '/imu/*'],
                                       'embed': ['robot_spec=/x.yaml']})
    assert cfg.topics == ('joint_states', '/imu/*') and cfg.embed == ('robot_spec=/x.yaml',)
    assert cfg.bag_options.storage == 'mcap' and cfg.bag_options.source == 'recorder'
    excite = ExciteConfig.from_mapping({'pattern': 'steps', 'duration_s': 3.0, 'seed': 4})
    assert (excite.excitation.pattern, excite.excitation.duration_s,
            excite.excitation.seed) == ('steps', 3.0, 4)
    inj = InjectorConfig.from_mapping({'rt_priority': 85, 'receive_rt_priority': -1})
    assert inj.rt.priority == 85 and inj.receive_rt_priority == -1


def test_policy_loop_polls_spin_wait_us_at_most_a_tenth_of_the_period():
    cfg = build(PolicyNodeConfig)
    assert cfg.spin_wait_us == 500
    assert cfg.spin_ns(20_000_000) == 500_000  # 50 Hz: the default
    assert cfg.spin_ns(2_000_000) == 200_000  # 500 Hz: a tenth of 2 ms
    assert build(PolicyNodeConfig, spin_wait_us=0).spin_ns(20_000_000) == 0
