"""Injector model without ROS: distributions, loss, order, rate, schedules, config errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
import yaml

from simreal_ros.core.validate import Section
from simreal_ros.errors import ConfigError
from simreal_ros.latency.delays import NS, Delay, load_samples_file, parse_delay
from simreal_ros.latency.injection import (
    DELIVERED,
    DUPLICATE,
    LOST,
    RATE_DROPPED,
    REPEATED,
    EventLog,
    RouteState,
    decode_events,
    load_profile,
    parse_profile,
    parse_route,
)

PRESETS = ('none', 'usb_serial', 'wifi', 'congested_wifi', 'ethercat')
DISTRIBUTIONS = {
    'constant': {'value': 0.004},
    'uniform': {'low': 0.002, 'high': 0.012},
    'normal': {'mean': 0.005, 'std': 0.002},
    'lognormal': {'median': 0.004, 'sigma': 0.6},
    'pareto': {'scale': 0.003, 'shape': 1.5, 'max_s': 0.2},
    'laplace': {'loc': 0.006, 'scale': 0.001},
    'empirical': {'histogram': {'edges_s': [0.0, 0.002, 0.005, 0.02], 'counts': [5, 3, 1]}},
}


def delay(spec: dict) -> Delay:
    return parse_delay(Section(spec, 'test.yaml', 'routes.r.delay'))


def route(spec: dict, name: str = 'r'):
    return parse_route(name, spec, 'test.yaml')


@pytest.mark.parametrize('name', PRESETS)
def test_presets_load_with_command_and_observation_routes(name: str) -> None:
    p = load_profile(name)
    assert {'command', 'observation'} <= {r.name for r in p.routes}
    assert p.description
    data = yaml.safe_load(Path(p.source).read_text())
    assert data.get('sources'), f'preset {name} must say where its numbers come from'


def test_none_preset_is_pass_through_and_others_are_not() -> None:
    assert all(r.passthrough for r in load_profile('none').routes)
    for name in PRESETS[1:]:
        assert not any(r.passthrough for r in load_profile(name).routes)


@pytest.mark.parametrize('kind', sorted(DISTRIBUTIONS))
def test_samples_follow_the_cdf(kind: str) -> None:
    d = delay({'distribution': kind, **DISTRIBUTIONS[kind]})
    x = d.sample(np.random.default_rng(7), 4000)
    assert x.min() >= 0.0
    if kind == 'constant':
        assert np.all(x == 0.004) and d.cdf(0.0039) == 0.0 and d.cdf(0.004) == 1.0
        return
    assert stats.kstest(x, d.cdf).pvalue > 0.01


def test_ks_rejects_the_wrong_distribution() -> None:
    a = delay({'distribution': 'lognormal', 'median': 0.004, 'sigma': 0.6})
    b = delay({'distribution': 'lognormal', 'median': 0.0045, 'sigma': 0.6})
    x = a.sample(np.random.default_rng(1), 4000)
    assert stats.kstest(x, b.cdf).pvalue < 1e-3


def test_clipping_is_part_of_the_cdf() -> None:
    d = delay({'distribution': 'normal', 'mean': 0.001, 'std': 0.002, 'max_s': 0.003})
    x = d.sample(np.random.default_rng(3), 20000)
    assert x.min() == 0.0 and x.max() == 0.003
    assert abs(np.mean(x == 0.0) - d.cdf(0.0)) < 0.01        # point mass at 0
    assert d.cdf(0.003) == 1.0 and d.cdf(-1e-9) == 0.0


def test_offset_shifts_and_pareto_is_heavy_tailed() -> None:
    d = delay({'distribution': 'pareto', 'scale': 0.002, 'shape': 1.2, 'offset_s': 0.001})
    x = d.sample(np.random.default_rng(5), 20000)
    assert x.min() >= 0.003
    assert np.percentile(x, 99.9) > 50 * np.median(x) / 10   # tail far beyond the median


def test_seeded_and_independent_streams() -> None:
    cfg = route({'delay': {'distribution': 'uniform', 'low': 0.0, 'high': 0.01},
                 'loss': {'model': 'bernoulli', 'p': 0.3}, 'order': 'free'})

    def run(seed: int) -> list:
        st = RouteState(cfg, seed, 0)
        return [st.decide(i * 1_000_000)[1] for i in range(300)]

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_adding_or_reordering_routes_keeps_each_routes_faults() -> None:
    spec = {'delay': {'distribution': 'lognormal', 'median': 0.004, 'sigma': 0.6},
            'loss': {'model': 'gilbert_elliott', 'p_good_to_bad': 0.05, 'p_bad_to_good': 0.3},
            'duplicate_p': 0.05, 'order': 'free'}

    def fates(routes: dict, name: str) -> list:
        p = parse_profile({'routes': routes}, 'p.yaml')
        states = [RouteState(r, 7, i) for i, r in enumerate(p.routes)]   # as the node does
        st = next(s for s in states if s.config.name == name)
        values = st.rng_values.random(5).tolist()
        return [st.decide(1 + i * 1_000_000)[1] for i in range(500)] + [values]

    alone = fates({'command': spec}, 'command')
    assert fates({'imu': spec, 'command': spec, 'extra': spec}, 'command') == alone
    assert fates({'a': {}, 'b': spec, 'command': spec}, 'command') == alone
    assert fates({'command': spec, 'imu': spec}, 'imu') != alone      # own streams per name


def test_empirical_samples_file_and_npy(tmp_path: Path) -> None:
    txt = tmp_path / 'lat.txt'
    txt.write_text('# measured\n0.001\n0.002, extra\n\n0.004\n')
    sec = Section({'file': str(txt)}, 'x.yaml')
    assert load_samples_file(txt, sec) == [0.001, 0.002, 0.004]
    np.save(tmp_path / 'lat.npy', np.array([0.003, 0.005]))
    d = delay({'distribution': 'empirical', 'file': str(tmp_path / 'lat.npy')})
    assert set(d.sample(np.random.default_rng(0), 100)) == {0.003, 0.005}
    (tmp_path / 'bad.txt').write_text('0.001\nfast\n')
    with pytest.raises(ConfigError, match='line 2'):
        delay({'distribution': 'empirical', 'file': str(tmp_path / 'bad.txt')})


def test_empirical_from_a_bag(tmp_path: Path) -> None:
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore
    ts = get_typestore(Stores.ROS2_KILTED if hasattr(Stores, 'ROS2_KILTED')
                       else Stores.LATEST)
    JointState = ts.types['sensor_msgs/msg/JointState']
    Header = ts.types['std_msgs/msg/Header']
    Time = ts.types['builtin_interfaces/msg/Time']
    bag = tmp_path / 'real'
    lat_ms = [1, 2, 2, 3, 7]
    with Writer(bag, version=9) as w:
        conn = w.add_connection('/joint_states', JointState.__msgtype__, typestore=ts)
        for i, ms in enumerate(lat_ms):
            stamp = 10 * NS + i * 10_000_000
            msg = JointState(Header(Time(stamp // NS, stamp % NS), ''), ['j'],
                             np.array([0.0]), np.array([]), np.array([]))
            w.write(conn, stamp + ms * 1_000_000, ts.serialize_cdr(msg, JointState.__msgtype__))
    d = delay({'distribution': 'empirical', 'bag': {'path': str(bag), 'topic': '/joint_states'}})
    assert sorted(round(v * 1e3, 6) for v in d.samples) == lat_ms
    with pytest.raises(ConfigError, match=r'bag.topic.*/joint_states'):
        delay({'distribution': 'empirical', 'bag': {'path': str(bag), 'topic': '/nope'}})
    with pytest.raises(ConfigError, match='existing rosbag2 bag'):
        delay({'distribution': 'empirical', 'bag': {'path': str(tmp_path / 'x'),
                                                    'topic': '/j'}})


def _deliveries(cfg, n: int, period_ns: int = 1_000_000, seed: int = 0):
    st = RouteState(cfg, seed, 0)
    return st, [st.decide(i * period_ns)[1] for i in range(n)]


def test_fifo_never_reorders_and_free_does() -> None:
    jitter = {'distribution': 'normal', 'mean': 0.005, 'std': 0.003}
    _, fifo = _deliveries(route({'delay': jitter, 'order': 'fifo'}), 3000)
    t = [d[0].deliver_ns for d in fifo]
    assert all(b >= a for a, b in zip(t, t[1:], strict=False))
    _, free = _deliveries(route({'delay': jitter, 'order': 'free'}), 3000)
    t = [d[0].deliver_ns for d in free]
    assert sum(b < a for a, b in zip(t, t[1:], strict=False)) > 100


def test_bernoulli_loss_and_duplication_rates() -> None:
    cfg = route({'loss': {'model': 'bernoulli', 'p': 0.1}, 'duplicate_p': 0.05})
    st, out = _deliveries(cfg, 20000)
    n = 20000
    lost = sum(d[0].fate == LOST for d in out)
    dups = sum(len(d) == 2 and d[1].fate == DUPLICATE for d in out)
    assert abs(lost - 0.1 * n) < 4 * math.sqrt(n * 0.1 * 0.9)
    assert abs(dups - 0.05 * 0.9 * n) < 4 * math.sqrt(n * 0.045)
    assert st.stats.lost == lost and st.stats.duplicated == dups
    assert st.stats.delivered == n - lost + dups


def test_gilbert_elliott_bursts() -> None:
    cfg = route({'loss': {'model': 'gilbert_elliott', 'p_good_to_bad': 0.01,
                          'p_bad_to_good': 0.25, 'loss_good': 0.0, 'loss_bad': 1.0}})
    _, out = _deliveries(cfg, 60000)
    lost = np.array([d[0].fate == LOST for d in out])
    bursts, run = [], 0
    for x in lost:
        if x:
            run += 1
        elif run:
            bursts.append(run)
            run = 0
    assert abs(np.mean(bursts) - 1 / 0.25) < 0.4                 # mean burst = 1 / p_bg
    assert abs(lost.mean() - cfg.loss.expected_rate) < 0.01      # 0.01 / 0.26


def test_rate_limit_and_decimation() -> None:
    _, out = _deliveries(route({'rate': {'max_hz': 100}}), 2000)   # 1 kHz in
    kept = sum(d[0].fate == DELIVERED for d in out)
    assert kept == 200 and sum(d[0].fate == RATE_DROPPED for d in out) == 1800
    _, out = _deliveries(route({'rate': {'decimate': 3}}), 30)
    assert [i for i, d in enumerate(out) if d[0].fate == DELIVERED] == list(range(0, 30, 3))


def test_schedule_outage_freeze_and_delay_override() -> None:
    cfg = route({'delay': 0.001, 'schedule': [
        {'fault': 'outage', 'start_s': 1.0, 'duration_s': 0.5},
        {'fault': 'freeze', 'start_s': 2.0, 'end_s': 2.2},
        {'fault': 'delay', 'start_s': 3.0, 'end_s': 3.1, 'delay': 0.05}]})
    _, out = _deliveries(cfg, 4000)
    fates = [d[0].fate for d in out]
    assert all(f == LOST for f in fates[1000:1500])
    assert fates[999] == DELIVERED and fates[1500] == DELIVERED
    assert all(f == REPEATED and d[0].repeat_previous for f, d in zip(fates[2000:2200],
                                                                      out[2000:2200], strict=True))
    assert fates[2200] == DELIVERED
    assert {d[0].target_delay_ns for d in out[3000:3100]} == {50_000_000}
    assert out[3100][0].target_delay_ns == 1_000_000


def test_event_log_round_trip() -> None:
    log = EventLog(['command', 'observation'])
    st = RouteState(route({'delay': 0.002}), 0, 1)
    seq, ds = st.decide(5_000)
    log.add(1, seq, 5_000, ds[0])
    rows = log.take()
    names, arr = decode_events(log.routes_label, np.ravel(rows).tolist())
    assert names == ['command', 'observation']
    assert arr.tolist() == [[1, 0, 5_000, 2_000_000, 2_005_000, DELIVERED]]
    assert len(log) == 0


BAD = [
    ({'delay': {'distribution': 'gamma', 'k': 1}}, 'routes.r.delay.distribution',
     'one of'),
    ({'delay': -0.001}, 'routes.r.delay', '>= 0'),
    ({'delay': {'distribution': 'uniform', 'low': -0.01, 'high': 0.01}},
     'routes.r.delay.low', '>= 0'),
    ({'delay': {'distribution': 'normal', 'mean': -0.001, 'std': 0.002}},
     'routes.r.delay.mean', 'clipped to min_s'),
    ({'delay': {'distribution': 'laplace', 'loc': -0.002, 'scale': 0.001}},
     'routes.r.delay.loc', 'clipped to min_s'),
    ({'delay': {'distribution': 'pareto', 'scale': 0.003, 'shape': 1.5, 'offset_s': -0.001}},
     'routes.r.delay.offset_s', 'clipped to min_s'),
    ({'delay': {'distribution': 'uniform', 'low': 0.02, 'high': 0.01}},
     'routes.r.delay.high', '>= low'),
    ({'delay': {'distribution': 'normal', 'mean': 0.01, 'std': 0}}, 'routes.r.delay.std',
     '> 0'),
    ({'delay': {'distribution': 'lognormal', 'median': 0.01}}, 'routes.r.delay.sigma',
     'present'),
    ({'delay': {'distribution': 'constant', 'value': 0.01, 'valu': 2}}, 'routes.r.delay.valu',
     'known keys'),
    ({'delay': {'distribution': 'empirical'}}, 'routes.r.delay', 'exactly one of'),
    ({'delay': {'distribution': 'empirical', 'samples_s': [0.001, -0.002]}},
     'routes.r.delay.samples_s', '>= 0'),
    ({'delay': {'distribution': 'empirical',
                'histogram': {'edges_s': [0, 0.01], 'counts': [1, 2]}}},
     'routes.r.delay.histogram.edges_s', 'edges'),
    ({'delay': {'distribution': 'empirical', 'file': '/no/such/file.txt'}},
     'routes.r.delay.file', 'existing samples file'),
    ({'loss': {'model': 'bernoulli', 'p': 1.5}}, 'routes.r.loss.p', '<= 1.0'),
    ({'loss': {'model': 'gilbert_elliott', 'p_good_to_bad': -0.1}},
     'routes.r.loss.p_good_to_bad', '>= 0'),
    ({'loss': {'model': 'gilbert_elliott', 'p_good_to_bad': 0.1, 'p_bad_to_good': 0}},
     'routes.r.loss.p_bad_to_good', 'never leaves'),
    ({'loss': {'model': 'burst'}}, 'routes.r.loss.model', 'bernoulli'),
    ({'duplicate_p': 2}, 'routes.r.duplicate_p', '<= 1.0'),
    ({'order': 'lifo'}, 'routes.r.order', 'fifo'),
    ({'rate': {'max_hz': -5}}, 'routes.r.rate.max_hz', '>= 0'),
    ({'rate': {'decimate': 0}}, 'routes.r.rate.decimate', 'integer in'),
    ({'schedule': [{'fault': 'meteor', 'start_s': 1, 'end_s': 2}]},
     r'routes.r.schedule\[0\].fault', 'outage'),
    ({'schedule': [{'fault': 'outage', 'start_s': 1}]}, r'routes.r.schedule\[0\]',
     'exactly one of end_s, duration_s'),
    ({'schedule': [{'fault': 'outage', 'start_s': 2, 'end_s': 1}]},
     r'routes.r.schedule\[0\].end_s', '> start_s'),
    ({'schedule': [{'fault': 'delay', 'start_s': 0, 'end_s': 1}]},
     r'routes.r.schedule\[0\].delay', 'the delay during the fault'),
    ({'type': 'JointState'}, 'routes.r.type', 'sensor_msgs/msg/JointState'),
    ({'perturb': {'positon': {'noise_std': 0.1}}}, 'routes.r.perturb.positon', 'known keys'),
    ({'perturb': {'image': {'jpeg_quality': 101}}}, 'routes.r.perturb.image.jpeg_quality',
     'integer in'),
    ({'delayy': 0.1}, 'routes.r.delayy', 'known keys'),
]


@pytest.mark.parametrize('spec,key,expected', BAD, ids=[b[1] + ':' + b[2] for b in BAD])
def test_bad_route_config_names_route_and_key(spec: dict, key: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=key) as info:
        route(spec)
    assert expected in str(info.value)
    assert str(info.value).startswith('test.yaml')


def test_bad_profiles(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='routes'):
        parse_profile({'description': 'x', 'routes': {}}, 'p.yaml')
    with pytest.raises(ConfigError, match='routes'):
        parse_profile({'description': 'x'}, 'p.yaml')
    with pytest.raises(ConfigError, match='shipped names'):
        load_profile('no_such_preset')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('routes: [1, 2')
    with pytest.raises(ConfigError, match='valid YAML'):
        load_profile(str(bad))
    p = parse_profile({'routes': {'a': {'delay': 0.001}}}, 'p.yaml')
    with pytest.raises(ConfigError, match='routes.b'):
        p.route('b')


def test_injector_lateness_from_events_rebuilds_the_fifo_schedule():
    from simreal_ros.latency.injection import (
        DUPLICATE,
        LOST,
        injector_lateness_ns,
        lateness_summary,
        scheduled_ns,
    )
    # route 0 fifo: seq 1 has a short target and is due at seq 0's time (FIFO), sent 10 late;
    # seq 2 lost; seq 3 and its duplicate. Route 1 free: due at receive + target.
    rows = [(0, 0, 1000, 500, 1500, 0),
            (0, 1, 1100, 100, 1510, 0),
            (0, 2, 1200, 300, 0, LOST),
            (0, 3, 2000, 50, 2100, 0),
            (0, 3, 2000, 20, 2100, DUPLICATE),     # the duplicate's schedule is after 2050
            (1, 0, 1000, 900, 1950, 0),
            (1, 1, 1010, 100, 1115, 0)]
    due = scheduled_ns(rows, {1: 'free'})
    assert due.tolist() == [1500, 1500, -1, 2050, 2050, 1900, 1110]
    assert injector_lateness_ns(rows, {1: 'free'}).tolist() == [0, 10, 50, 50, 50, 5]
    s = lateness_summary(rows, {1: 'free'})
    assert s['deliveries'] == 6 and s['lateness_max_ms'] == 50 / 1e6
