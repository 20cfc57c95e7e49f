"""The teleop episode checks on real bags: idle, jerk, lag, tracking, duration, thresholds."""

from __future__ import annotations

from episode_bags import NAMES, ROBOT, T0, joint_state
import numpy as np
import pytest

from simreal_ros.bag import BagWriter, QosSpec
from simreal_ros.errors import ConfigError
from simreal_ros.gap.episode import load_episode
from simreal_ros.gap.quality import Thresholds
from simreal_ros.teleop.quality import (
    EpisodesConfig,
    TeleopThresholds,
    check_teleop_episode,
    parse_thresholds,
    rms_jerk,
)

TICK = 2 * np.pi / 4096


def demo(t: np.ndarray, tremor_rad: float = 0.0) -> np.ndarray:
    """A slow demonstration (0.4 Hz, 0.3 rad), optionally with an 8 Hz hand tremor."""
    q = ROBOT.home + 0.3 * np.sin(2 * np.pi * 0.4 * t)[:, None] * np.ones(len(NAMES))
    q = q + tremor_rad * np.sin(2 * np.pi * 8.0 * t)[:, None]
    return np.round(q / TICK) * TICK  # encoder ticks, as the leader reads them


def bag(path, q_cmd: np.ndarray, lag_s: float, follower_offset: float = 0.0,
        rate: float = 100.0) -> str:
    n = len(q_cmd)
    lag = int(round(lag_s * rate))
    with BagWriter(path) as w:
        hc = w.add_topic('/joint_commands', 'sensor_msgs/msg/JointState', [QosSpec()])
        hs = w.add_topic('/joint_states', 'sensor_msgs/msg/JointState', [QosSpec()])
        for k in range(n):
            stamp = T0 + int(k * 1e9 / rate)
            w.write(hc, stamp, joint_state(stamp, q_cmd[k]))
            follower = q_cmd[max(0, k - lag)] + follower_offset
            w.write(hs, stamp + 1000, joint_state(stamp + 1000, follower))
    return str(path)


def verdict(path, tth: TeleopThresholds | None = None):
    ep = load_episode(path)
    return check_teleop_episode(ep, ROBOT, Thresholds(), tth or TeleopThresholds())


def failed(v) -> set[str]:
    return {f.check for f in v.failures}


def test_a_clean_demonstration_passes_with_its_lag(tmp_path) -> None:
    t = np.arange(500) / 100.0
    v = verdict(bag(tmp_path / 'b', demo(t), lag_s=0.06))
    assert v.passed, v.text()
    lag = next(f for f in v.findings if f.check == 'lag')
    assert lag.value == pytest.approx(0.06, abs=0.005)
    assert max(f.value for f in v.findings if f.check == 'tracking') < 1e-3


def test_a_shaking_hand_fails_jerk_and_a_lagging_follower_fails_lag(tmp_path) -> None:
    t = np.arange(500) / 100.0
    assert failed(verdict(bag(tmp_path / 'a', demo(t, tremor_rad=0.01), 0.06))) == {'jerk'}
    assert failed(verdict(bag(tmp_path / 'b', demo(t), lag_s=0.4))) == {'lag'}
    assert failed(verdict(bag(tmp_path / 'c', demo(t), 0.06, follower_offset=0.2))) == {
        'tracking'}


def test_an_idle_or_short_episode_is_rejected(tmp_path) -> None:
    t = np.arange(300) / 100.0
    still = np.tile(ROBOT.home, (len(t), 1))
    v = verdict(bag(tmp_path / 'a', still, 0.0))
    assert failed(v) == {'idle'}
    assert 'lag: /joint_states: no motion to correlate' in v.skipped
    assert failed(verdict(bag(tmp_path / 'b', demo(t[:50]), 0.0))) == {'duration'}


def test_rms_jerk_bins_keep_the_tick_quantization_far_below_the_limit() -> None:
    t = np.arange(1000) / 100.0
    t_ns = (t * 1e9).astype(np.int64)
    q = demo(t)[:, :1]  # true jerk: 0.3 (2 pi 0.4)^3 / sqrt 2 = 3.4 rad/s^3 RMS
    raw = np.sqrt(np.mean((np.diff(q[:, 0], 3) * 100.0 ** 3) ** 2))
    binned = rms_jerk(t_ns, q)[0]
    # raw 100 Hz third differences of one-tick steps read thousands; 50 ms bins leave a
    # quantization floor of ~9 rad/s^3 (measured 9.2), an order below the 100 limit
    assert raw > 1000
    assert 3.4 < binned < 20


def test_thresholds_split_over_both_sets_and_unknown_keys_fail() -> None:
    th, tth = parse_thresholds(['max_gaps=3', 'max_lag_s=0.5'], 'episodes')
    assert (th.max_gaps, tth.max_lag_s) == (3, 0.5)
    with pytest.raises(ConfigError, match='episodes: thresholds: expected key=value with a key'):
        parse_thresholds(['max_speed=1'], 'episodes')
    with pytest.raises(ConfigError, match='thresholds.max_lag_s: expected a number'):
        EpisodesConfig(thresholds=('max_lag_s=soon',))
