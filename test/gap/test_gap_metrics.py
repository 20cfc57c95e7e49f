"""Gap metrics on synthetic signals with known offset and lag; stream statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simreal_ros.gap.live import LiveGap
from simreal_ros.gap.metrics import Series, estimate_lag_ns, pair, summarize
from simreal_ros.gap.stream_stats import StreamStats


def sig(t: np.ndarray) -> np.ndarray:
    return np.stack([0.3 * np.sin(2 * np.pi * 0.7 * t) + 0.1 * np.sin(2 * np.pi * 2.3 * t + 1),
                     0.2 * np.sin(2 * np.pi * 1.1 * t + 0.4)], axis=1)


def streams(rate: float, lag_s: float, offset: float, seconds: float = 8.0, noise: float = 1e-3,
            phase_s: float = 0.0003, seed: int = 0) -> tuple[Series, Series]:
    """Primary at ``rate``; secondary = primary delayed by ``lag_s`` plus ``offset`` on j1,
    sampled at other instants (``phase_s`` later), joints in the other order, with noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(0, seconds, 1 / rate)
    ts = t + phase_s
    a = Series.from_samples(['j1', 'j2'], (t * 1e9).astype(np.int64) + 10**9, sig(t))
    qb = sig(ts - lag_s) + np.array([offset, 0.0]) + rng.normal(0, noise, (len(t), 2))
    b = Series.from_samples(['j2', 'j1'], (ts * 1e9).astype(np.int64) + 10**9, qb[:, ::-1])
    return a, b


@pytest.mark.parametrize('rate,lag_ms', [(1000, 7.3), (500, 0.0), (200, 12.4), (200, 0.6),
                                         (100, -20.0), (100, 45.0)])
def test_lag_recovered_within_1ms(rate, lag_ms):
    a, b = streams(rate, lag_ms / 1e3, offset=0.05)
    lag = estimate_lag_ns(a, b) / 1e6
    assert abs(lag - lag_ms) < 1.0, (lag, lag_ms)


def test_offset_rmse_and_max_of_a_pure_offset():
    a, b = streams(500, 0.0, offset=0.05, noise=0.0, phase_s=0.0)
    s = summarize(a, b)
    assert s.names == ('j1', 'j2')  # primary order, matched by name
    assert s.joints['j1'].mean == pytest.approx(-0.05, abs=1e-9)
    assert s.joints['j1'].rmse == pytest.approx(0.05, abs=1e-9)
    assert s.joints['j1'].max_abs == pytest.approx(0.05, abs=1e-9)
    assert s.joints['j2'].rmse < 1e-12
    assert abs(s.lag_ms) < 0.05


def test_interpolation_pairs_only_inside_the_secondary_range():
    t = np.arange(0, 1, 0.01)
    a = Series.from_samples(['j'], (t * 1e9).astype(np.int64), (2 * t)[:, None])
    tb = np.arange(0.2, 0.8, 0.03)
    b = Series.from_samples(['j'], (tb * 1e9).astype(np.int64), (2 * tb)[:, None])
    p = pair(a, b)
    assert p.stamps.min() >= int(0.2e9) and p.stamps.max() <= int(tb[-1] * 1e9)
    assert np.max(np.abs(p.position_error)) < 1e-8  # linear: exact up to ns rounding of stamps


def test_k_step_error_after_resyncs():
    rate = 100
    t = np.arange(0, 6, 1 / rate)
    q = sig(t)[:, :1]
    drift = np.zeros_like(q)
    resyncs = []
    for k in range(len(t)):
        since = k % 100  # re-synced every second: error grows 1 mrad per step since then
        drift[k] = 1e-3 * since
        if since == 0:
            resyncs.append(int(t[k] * 1e9))
    a = Series.from_samples(['j'], (t * 1e9).astype(np.int64), q)
    b = Series.from_samples(['j'], (t * 1e9).astype(np.int64), q - drift)
    s = summarize(a, b, ks=(1, 10, 50))
    assert s.resyncs == 5  # detected from the error (the first sample has no predecessor)
    assert s.k_step[10]['j'] == pytest.approx(0.010)
    assert s.k_step[50]['j'] == pytest.approx(0.050)
    given = summarize(a, b, ks=(1, 10), resync_ns=resyncs)
    assert given.resyncs == 6 and given.k_step[1]['j'] == pytest.approx(0.001)


def test_live_gap_windowed_error_and_lag():
    a, b = streams(200, 0.015, offset=0.02, seconds=6.0, noise=0.0)
    live = LiveGap(window_ns=3 * 10**9)
    errors = []
    ib = 0
    for i in range(len(a)):
        live.add_primary(int(a.stamps[i]), a.names, a.position[i])
        while ib < len(b) and b.stamps[ib] <= a.stamps[i]:
            live.add_secondary(int(b.stamps[ib]), b.names, b.position[ib])
            ib += 1
        errors += live.new_errors()
    assert len(errors) > 0.9 * len(a)
    assert [e[0] for e in errors] == sorted(e[0] for e in errors)
    assert len({e[0] for e in errors}) == len(errors)  # each primary sample once
    s = live.summary()
    assert s is not None
    assert s.joints['j1'].mean == pytest.approx(-0.02, abs=0.01)
    assert abs(s.lag_ms - 15.0) < 1.0
    before = live.summary()
    live.add_primary(0, a.names, [math.nan, 0.0])  # out of order: ignored
    assert live.new_errors() == []
    assert live.summary() == before


def test_live_error_for_every_primary_sample_once_the_slow_secondary_covers_it():
    # primary at 1 kHz, secondary at 100 Hz in bursts of 10: every primary sample inside the
    # secondary's span gets an error, exactly the linear interpolation of the secondary
    live = LiveGap(window_ns=2 * 10**9)
    tp = np.arange(1000, 4000) * 10**6
    ts = np.arange(100, 400) * 10**7 + 3 * 10**5
    sec = lambda t: np.array([1e-9 * t, -2e-9 * t])  # noqa: E731 - linear: exact interp
    out = []
    ip = 0
    for k in range(0, 300, 10):  # a burst of 10 secondary samples every 100 ms
        while ip < len(tp) and tp[ip] <= ts[min(k + 9, 299)]:
            live.add_primary(int(tp[ip]), ['a', 'b'], [0.0, 0.0])
            ip += 1
        for j in range(k, k + 10):
            live.add_secondary(int(ts[j]), ['b', 'a'], sec(int(ts[j]))[::-1])
        out += live.new_errors()
    stamps = np.array([e[0] for e in out])
    covered = tp[(tp >= ts[0]) & (tp <= ts[-1])]
    assert np.array_equal(stamps, covered)
    want = -np.stack([sec(int(t)) for t in covered])
    np.testing.assert_allclose(np.stack([e[1] for e in out]), want, atol=1e-9)
    assert live.new_errors() == []


def test_stream_stats_counts_gaps_order_duplicates_and_skew():
    st = StreamStats()
    for i in range(1000):
        if 500 < i < 520:
            continue  # a 20 ms hole
        stamp = i * 10**6
        if i == 700:
            stamp = 698 * 10**6  # out of order
        if i == 800:
            stamp = 799 * 10**6  # duplicate of the previous one
        st.add(stamp, i * 10**6 + 300_000)
    s = st.summary()
    assert s.gaps == 1 and s.max_gap_ms == pytest.approx(20.0)
    assert s.out_of_order == 1 and s.duplicates == 1
    assert s.skew_mean_ms == pytest.approx(0.3, abs=0.01)
    assert s.rate_hz == pytest.approx(1000, rel=0.03)
    assert StreamStats().summary().count == 0
