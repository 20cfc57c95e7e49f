"""Random pushes: the ``pushes:`` section, its one draw, and who refuses it (core/pushes.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simreal_ros.core.dynamics import load_randomization
from simreal_ros.core.pushes import (
    PushRanges,
    draw_force_n,
    draw_wait_s,
    first_tick_at,
    parse_pushes,
    push_sequence,
)
from simreal_ros.errors import ConfigError

GOOD = {'interval_s': [2.0, 4.0], 'force_n': 8.0, 'duration_s': 0.15}


def test_a_peak_force_is_50_to_100_percent_of_it_and_a_range_is_itself():
    peak = parse_pushes(GOOD, 'f.yaml')
    assert peak == PushRanges((2.0, 4.0), (4.0, 8.0), 0.15, peak=True)
    rng = parse_pushes({**GOOD, 'force_n': [3, 5]}, 'f.yaml')
    assert rng == PushRanges((2.0, 4.0), (3.0, 5.0), 0.15, peak=False)
    assert peak.describe() == 'every 2-4 s, 4-8 N for 0.15 s'


@pytest.mark.parametrize('change,key,expected,got', [
    ({'interval_s': [0.0, 1.0]}, 'pushes.interval_s', 'a [low, high] wait with low > 0 (s)',
     [0.0, 1.0]),
    ({'interval_s': 3.0}, 'pushes.interval_s', 'a [low, high] pair', 3.0),
    ({'interval_s': [4.0, 2.0]}, 'pushes.interval_s', 'low <= high', [4.0, 2.0]),
    ({'force_n': 'strong'}, 'pushes.force_n',
     'a peak force (N, a number >= 0) or a [low, high] range', 'strong'),
    ({'force_n': True}, 'pushes.force_n',
     'a peak force (N, a number >= 0) or a [low, high] range', True),
    ({'force_n': [-1.0, 2.0]}, 'pushes.force_n[0]', 'a number >= 0.0', -1.0),
    ({'duration_s': 0.0}, 'pushes.duration_s', 'a duration in (0, 5] s', 0.0),
    ({'duration_s': 6.0}, 'pushes.duration_s', 'a duration in (0, 5] s', 6.0),
    ({'every_s': 1.0}, 'pushes.every_s', None, None),
])
def test_a_bad_pushes_section_names_file_key_expected_and_got(change, key, expected, got):
    with pytest.raises(ConfigError) as err:
        parse_pushes({**GOOD, **change}, 'r.yaml')
    e = err.value
    assert (e.source, e.key) == ('r.yaml', key)
    if expected is not None:
        assert (e.expected, e.got) == (expected, got)
        assert str(e) == f'r.yaml: {key}: expected {expected}, got {got!r}'


def test_a_missing_key_is_named():
    with pytest.raises(ConfigError, match=r'r\.yaml: pushes\.duration_s: expected this key'):
        parse_pushes({'interval_s': [1, 2], 'force_n': 3}, 'r.yaml')


def test_a_randomization_file_carries_its_pushes_and_names_itself_in_errors(tmp_path: Path):
    path = tmp_path / 'quad.yaml'
    path.write_text(yaml.safe_dump({'friction_scale': [0.5, 1.0], 'pushes': GOOD}))
    r = load_randomization(path)
    assert r.pushes == PushRanges((2.0, 4.0), (4.0, 8.0), 0.15, peak=True)
    assert load_randomization('legged').pushes is None
    path.write_text(yaml.safe_dump({'pushes': {**GOOD, 'duration_s': -1}}))
    with pytest.raises(ConfigError) as err:
        load_randomization(path)
    assert (err.value.source, err.value.key) == (str(path), 'pushes.duration_s')


def test_a_seed_gives_one_sequence_on_the_grid_within_the_ranges():
    ranges = PushRanges((0.5, 1.5), (2.0, 6.0), 0.1)
    seq = push_sequence(ranges, np.random.default_rng(5), 0.02)
    pushes = [next(seq) for _ in range(2000)]
    again = push_sequence(ranges, np.random.default_rng(5), 0.02)
    for p in pushes[:50]:
        q = next(again)
        assert (q.start_tick, q.start_s) == (p.start_tick, p.start_s)
        np.testing.assert_array_equal(q.force_n, p.force_n)
    other = next(push_sequence(ranges, np.random.default_rng(6), 0.02))
    assert other.start_s != pushes[0].start_s
    ticks = np.array([p.start_tick for p in pushes])
    assert all(p.start_s == p.start_tick * 0.02 for p in pushes)
    gaps = np.diff(ticks) * 0.02
    # each wait is drawn in [0.5, 1.5] s from the last start and rounded up to the next tick
    assert gaps.min() >= 0.5 - 1e-9 and gaps.max() <= 1.5 + 0.02 + 1e-9
    assert gaps.min() < 0.55 and gaps.max() > 1.45  # the whole range is drawn
    f = np.array([p.force_n for p in pushes])
    size = np.linalg.norm(f, axis=1)
    assert np.all(f[:, 2] == 0.0)  # horizontal
    assert size.min() >= 2.0 and size.max() <= 6.0
    assert size.min() < 2.05 and size.max() > 5.95
    ang = np.arctan2(f[:, 1], f[:, 0])
    counts = np.histogram(ang, bins=4, range=(-math.pi, math.pi))[0]
    assert counts.min() > 400  # uniform over the four quadrants (500 each expected)
    assert {p.duration_s for p in pushes} == {0.1}


def test_the_sequence_is_the_two_draws_in_the_training_worlds_order():
    """First wait; then per push: direction, size (x the peak), the next wait from its tick."""
    ranges = PushRanges.from_peak((2.0, 4.0), 8.0, 0.15)
    seq = push_sequence(ranges, np.random.default_rng(11), 0.02)
    rng = np.random.default_rng(11)
    nxt = float(rng.uniform(2.0, 4.0))
    for _ in range(5):
        p = next(seq)
        assert p.start_tick == first_tick_at(nxt, 0.02) and p.start_s >= nxt > p.start_s - 0.02
        ang = float(rng.uniform(0.0, 2.0 * math.pi))
        size = float(rng.uniform(0.5, 1.0)) * 8.0
        np.testing.assert_array_equal(p.force_n, [size * math.cos(ang), size * math.sin(ang),
                                                  0.0])
        nxt = p.start_s + float(rng.uniform(2.0, 4.0))
    rng2 = np.random.default_rng(3)
    assert draw_wait_s(ranges, rng2) == np.random.default_rng(3).uniform(2.0, 4.0)
    assert np.linalg.norm(draw_force_n(ranges, rng2)) <= 8.0


def test_first_tick_at_is_the_first_tick_at_or_after():
    assert first_tick_at(0.0, 0.02) == 0
    assert first_tick_at(0.06, 0.02) == 3  # 3 * 0.02 == 0.06 in floats
    assert first_tick_at(0.0600001, 0.02) == 4
    assert first_tick_at(2.4801, 0.001) == 2481
