"""Tests of SimBridgeConfig validation and of the command-tracking metrics."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from simreal_ros.errors import ConfigError
from simreal_ros.gap.tracking import held_commands, tracking_summary
from simreal_ros.sim.bridge_config import TIMING_MODES, SimBridgeConfig

# ---------------------------------------------------------------------------------------------
# SimBridgeConfig


def test_defaults() -> None:
    c = SimBridgeConfig()
    assert c.robot == 'simreal_arm'
    assert c.timing_mode == 'realtime'
    assert c.publish_rate_hz == 200.0
    assert not c.uses_sim_time
    assert TIMING_MODES == ('realtime', 'lockstep', 'free')


@pytest.mark.parametrize('mode, sim_time, expected', [
    ('realtime', False, False), ('realtime', True, True), ('lockstep', False, True),
    ('free', False, True)])
def test_uses_sim_time(mode: str, sim_time: bool, expected: bool) -> None:
    assert SimBridgeConfig(timing_mode=mode, sim_time=sim_time).uses_sim_time is expected


@pytest.mark.parametrize('kwargs, key, expected', [
    ({'timing_mode': 'slow'}, 'timing_mode', "one of ('realtime', 'lockstep', 'free')"),
    ({'timing_mode': 'Realtime'}, 'timing_mode', 'one of'),
    ({'timing_mode': ''}, 'timing_mode', 'one of'),
    ({'engine': 'bullet'}, 'engine', "one of ('mujoco', 'pybullet')"),
    ({'publish_rate_hz': 0.0}, 'publish_rate_hz', 'a number > 0'),
    ({'publish_rate_hz': -200.0}, 'publish_rate_hz', 'a number > 0'),
    ({'publish_rate_hz': math.nan}, 'publish_rate_hz', 'a number > 0'),
    ({'publish_rate_hz': math.inf}, 'publish_rate_hz', 'a number > 0'),
    ({'publish_rate_hz': '200'}, 'publish_rate_hz', 'a number > 0'),
    ({'publish_rate_hz': 20_000.0}, 'publish_rate_hz', 'a rate <= 10000 Hz'),
    ({'diagnostics_period_s': 0.0}, 'diagnostics_period_s', 'a number > 0'),
    ({'diagnostics_period_s': math.nan}, 'diagnostics_period_s', 'a number > 0'),
    ({'lockstep_timeout_s': -0.1}, 'lockstep_timeout_s', 'a number >= 0 (0: wait forever)'),
    ({'lockstep_timeout_s': math.nan}, 'lockstep_timeout_s', 'a number >= 0'),
    ({'lockstep_timeout_s': math.inf}, 'lockstep_timeout_s', 'a number >= 0'),
    ({'steps_per_tick': -1}, 'steps_per_tick', 'an integer >= 0'),
    ({'spin_wait_us': -5}, 'spin_wait_us', 'an integer >= 0'),
    ({'seed': -1}, 'seed', 'an integer >= 0'),
    ({'robot': ''}, 'robot', 'a robot name or spec path'),
    ({'push_duration_s': 0.0}, 'push_duration_s', 'a duration in (0, 5] s'),
    ({'push_duration_s': 6.0}, 'push_duration_s', 'a duration in (0, 5] s'),
    ({'push_duration_s': math.nan}, 'push_duration_s', 'a duration in (0, 5] s'),
])
def test_invalid_values(kwargs: dict[str, Any], key: str, expected: str) -> None:
    message = re.escape(f'sim_bridge: {key}: expected {expected}')
    with pytest.raises(ConfigError, match=f'^{message}') as info:
        SimBridgeConfig(**kwargs)
    assert info.value.source == 'sim_bridge'
    assert info.value.key == key


@pytest.mark.parametrize('rate, dt, steps', [(200.0, 0.001, 5), (1000.0, 0.001, 1),
                                             (300.0, 0.001, 3), (10_000.0, 0.001, 1),
                                             (50.0, 0.002, 10), (1.0, 0.001, 1000)])
def test_steps_per_publish_from_rate(rate: float, dt: float, steps: int) -> None:
    assert SimBridgeConfig(publish_rate_hz=rate).steps_per_publish(dt) == steps


def test_steps_per_publish_from_steps_per_tick() -> None:
    c = SimBridgeConfig(publish_rate_hz=200.0, steps_per_tick=7)
    assert c.steps_per_publish(0.001) == 7
    assert c.steps_per_publish(0.01) == 7


def test_from_mapping_good() -> None:
    c = SimBridgeConfig.from_mapping({'robot': 'simreal_arm', 'timing_mode': 'lockstep',
                                      'publish_rate_hz': 100, 'seed': 3, 'sim_time': True,
                                      'lockstep_timeout_s': 0, 'overlay': 'worn_arm'})
    assert c.timing_mode == 'lockstep'
    assert c.publish_rate_hz == 100.0
    assert isinstance(c.publish_rate_hz, float)
    assert isinstance(c.lockstep_timeout_s, float)
    assert c.seed == 3
    assert c.sim_time is True
    assert c.overlay == 'worn_arm'
    assert SimBridgeConfig.from_mapping({}) == SimBridgeConfig()


def test_from_mapping_unknown_key() -> None:
    with pytest.raises(ConfigError, match=r"^bridge.yaml: publish_rate: expected one of \[.*"
                                          r"'publish_rate_hz'.*\], got 'unknown key'$"):
        SimBridgeConfig.from_mapping({'publish_rate': 100.0}, source='bridge.yaml')


@pytest.mark.parametrize('key, value, expected', [
    ('seed', True, 'a int'),
    ('seed', 1.0, 'a int'),
    ('seed', '1', 'a int'),
    ('steps_per_tick', False, 'a int'),
    ('spin_wait_us', 300.0, 'a int'),
    ('publish_rate_hz', True, 'a float'),
    ('publish_rate_hz', '200', 'a float'),
    ('publish_rate_hz', None, 'a float'),
    ('lockstep_timeout_s', False, 'a float'),
    ('sim_time', 1, 'a bool'),
    ('sim_time', 'true', 'a bool'),
    ('publish_clock', 0, 'a bool'),
    ('timing_mode', 1, 'a str'),
    ('robot', None, 'a str'),
    ('overlay', ['worn_arm'], 'a str'),
])
def test_from_mapping_wrong_type(key: str, value: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=rf'^sim_bridge: {key}: expected {expected}, got ') \
            as info:
        SimBridgeConfig.from_mapping({key: value})
    assert info.value.got == value


def test_from_mapping_validates_values() -> None:
    with pytest.raises(ConfigError, match=r'publish_rate_hz: expected a number > 0'):
        SimBridgeConfig.from_mapping({'publish_rate_hz': 0})
    with pytest.raises(ConfigError, match=r'timing_mode: expected one of'):
        SimBridgeConfig.from_mapping({'timing_mode': 'slow'})


# ---------------------------------------------------------------------------------------------
# tracking

NAMES = ['a', 'b', 'c']
MS = 1_000_000


def test_constant_offset_rmse_equals_offset() -> None:
    t = np.arange(0, 2000) * MS
    cmd = np.stack([np.sin(t / 1e9), np.cos(t / 1e9), 0.1 * t / 1e9], axis=1)
    offsets = np.array([0.05, -0.02, 0.0])
    summary = tracking_summary(NAMES, t, cmd + offsets, t, cmd)
    assert summary['samples'] == len(t)
    for name, off in zip(NAMES, offsets, strict=True):
        assert summary['joints'][name]['rmse'] == pytest.approx(abs(off), abs=1e-12)
        assert summary['joints'][name]['max'] == pytest.approx(abs(off), abs=1e-12)


def test_zero_order_hold() -> None:
    cmd_ns = [0, 1000 * MS]
    cmd_q = [[0.0], [1.0]]
    state_ns = [0, 500 * MS, 999 * MS, 1000 * MS, 1500 * MS]
    held = held_commands(np.asarray(state_ns), np.asarray(cmd_ns), np.asarray(cmd_q))
    np.testing.assert_array_equal(held[:, 0], [0.0, 0.0, 0.0, 1.0, 1.0])
    # measured state 0.5 everywhere: error 0.5 against both held commands
    summary = tracking_summary(['j'], state_ns, [[0.5]] * 5, cmd_ns, cmd_q)
    assert summary['samples'] == 5
    assert summary['joints']['j']['rmse'] == pytest.approx(0.5)
    assert summary['joints']['j']['max'] == pytest.approx(0.5)


def test_hold_with_unsorted_commands() -> None:
    held = held_commands(np.array([5, 15, 25]), np.array([20, 0, 10]),
                         np.array([[2.0], [0.0], [1.0]]))
    np.testing.assert_array_equal(held[:, 0], [0.0, 1.0, 2.0])


def test_states_before_first_command_are_dropped() -> None:
    held = held_commands(np.array([0, 5, 10]), np.array([6]), np.array([[1.0, 2.0]]))
    assert np.isnan(held[0]).all() and np.isnan(held[1]).all()
    np.testing.assert_array_equal(held[2], [1.0, 2.0])
    summary = tracking_summary(['x', 'y'], [0, 5, 10, 20], [[9, 9], [9, 9], [1, 2], [1.5, 2]],
                               [6], [[1.0, 2.0]])
    assert summary['samples'] == 2
    assert summary['joints']['x']['max'] == pytest.approx(0.5)
    assert summary['joints']['x']['rmse'] == pytest.approx(math.sqrt(0.125))
    assert summary['joints']['y']['rmse'] == 0.0


def test_skip_s() -> None:
    t = np.arange(0, 100) * 10 * MS  # 0 .. 0.99 s
    cmd = np.zeros((100, 1))
    state = np.where(t < 300 * MS, 1.0, 0.1).reshape(-1, 1)  # a transient in the first 0.3 s
    full = tracking_summary(['j'], t, state, t, cmd)
    assert full['joints']['j']['max'] == pytest.approx(1.0)
    skipped = tracking_summary(['j'], t, state, t, cmd, skip_s=0.3)
    assert skipped['samples'] == 70
    assert skipped['joints']['j']['rmse'] == pytest.approx(0.1)
    assert skipped['joints']['j']['max'] == pytest.approx(0.1)
    # skip_s counts from the first command, not from the first state
    late = tracking_summary(['j'], t, state, t[50:], cmd[50:], skip_s=0.2)
    assert late['samples'] == 30


@pytest.mark.parametrize('state_ns, cmd_ns', [([], [0, 1]), ([0, 1], []), ([], [])])
def test_no_data(state_ns: list[int], cmd_ns: list[int]) -> None:
    summary = tracking_summary(NAMES, state_ns, np.zeros((len(state_ns), 3)), cmd_ns,
                               np.zeros((len(cmd_ns), 3)))
    assert summary == {'samples': 0, 'joints': {}}


def test_no_overlap_gives_nan() -> None:
    summary = tracking_summary(['j'], [0, 1, 2], [[0.0]] * 3, [10], [[0.0]])
    assert summary['samples'] == 0
    assert math.isnan(summary['joints']['j']['rmse'])
    assert math.isnan(summary['joints']['j']['max'])
    summary = tracking_summary(['j'], [10, 11], [[0.0]] * 2, [10], [[0.0]], skip_s=1.0)
    assert summary['samples'] == 0
    assert math.isnan(summary['joints']['j']['rmse'])


def test_flat_inputs_are_reshaped() -> None:
    summary = tracking_summary(['a', 'b'], [0, 1], [0.1, 0.2, 0.1, 0.2], [0], [0.0, 0.0])
    assert summary['samples'] == 2
    assert summary['joints']['a']['rmse'] == pytest.approx(0.1)
    assert summary['joints']['b']['rmse'] == pytest.approx(0.2)
