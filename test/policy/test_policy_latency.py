"""Training under the latency injector's presets: sampling, delays, queues, stale hold, config.

Fast, no ROS: the routes are the injector's own model (``RouteState``) in a queue.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.latency.injection import load_profile, parse_route
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.train import DEFAULT_PRESETS, World, load_train_config
from simreal_ros.policy.train_delays import (
    COMMAND,
    LatencyPreset,
    RouteQueue,
    draw_preset,
    parse_latency_presets,
    shipped_presets,
)

REPO = Path(__file__).resolve().parents[2]
MS = 1_000_000


def route(**data: object):
    return parse_route('command', data, 'test.yaml')


def write_profile(tmp_path: Path, name: str, routes: dict) -> str:
    p = tmp_path / f'{name}.yaml'
    p.write_text(yaml.safe_dump({'description': 'test', 'routes': routes}))
    return str(p)


@pytest.fixture(scope='module')
def spec_robot():
    spec = load_policy_spec('simreal_arm_reach')
    return spec, load_robot(spec.robot)


# ---- preset sampling ---------------------------------------------------------------------

def test_preset_draws_are_seeded_and_follow_the_weights():
    presets = parse_latency_presets(['none', {'preset': 'wifi', 'weight': 3}], 't.yaml')
    a = [draw_preset(presets, np.random.default_rng(7)).preset for _ in range(1)]
    seq = [[draw_preset(presets, rng).preset for _ in range(4000)]
           for rng in (np.random.default_rng(7), np.random.default_rng(7))]
    assert seq[0] == seq[1] and a[0] == seq[0][0]
    other = [draw_preset(presets, np.random.default_rng(8)).preset for _ in range(50)]
    assert other != seq[0][:50]
    share = Counter(seq[0])['wifi'] / 4000
    assert 0.72 < share < 0.78, share


def test_worlds_draw_presets_and_route_faults_reproducibly(spec_robot):
    spec, robot = spec_robot
    cfg = load_train_config('simreal_arm_reach')
    runs = []
    for _ in range(2):
        w = World(spec, robot, cfg, seed=11)
        episodes = []
        for _e in range(6):
            w.reset()
            for _k in range(10):
                w.observation()
                w.apply(w.teacher_action)
            episodes.append((w.preset_name, w.commands.lost, w.states.lost,
                             w.measured.stamp_ns - w.sim.time_ns, w.stale))
        runs.append(episodes)
    assert runs[0] == runs[1]
    assert len({e[0] for e in runs[0]}) > 1, 'presets are drawn per episode'
    assert {e[0] for e in runs[0]} <= {p.preset for p in DEFAULT_PRESETS}


def test_world_routes_are_the_presets_routes(spec_robot):
    spec, robot = spec_robot
    cfg = load_train_config('simreal_arm_reach')
    w = World(spec, robot, cfg, seed=3, preset='wifi')
    wifi = load_profile('wifi')
    assert w.commands.state.config == wifi.route('command')
    assert w.states.state.config == wifi.route('observation')
    nominal = World(spec, robot, cfg, seed=3, randomize=False)
    assert nominal.preset_name == '' and nominal.commands.state.config.passthrough


# ---- delays follow the preset --------------------------------------------------------------

@pytest.mark.parametrize('preset,name', [('wifi', 'command'), ('usb_serial', 'command'),
                                         ('congested_wifi', 'observation'),
                                         ('ethercat', 'observation')])
def test_delivered_delays_follow_the_preset_distribution(preset, name):
    cfg = LatencyPreset(preset).route(name)
    q: RouteQueue[int] = RouteQueue(cfg, seed=5)
    sent = {}
    for i in range(3000):         # 1 s apart: FIFO never queues (every max_s is below 1 s)
        sent[i] = i * 1000 * MS
        q.send(i, sent[i])
    got = []
    while q.next_ns is not None:
        at = q.next_ns
        got += [(at - sent[item]) / 1e9 for item in q.due(at)]
    assert len(got) == 3000 - q.lost
    ks = stats.kstest(got, cfg.delay.cdf)
    assert ks.statistic < 0.05, (preset, name, ks)
    if cfg.loss.model == 'none':
        assert q.lost == 0


@pytest.mark.parametrize('preset,name', [('wifi', 'command'),
                                         ('congested_wifi', 'observation')])
def test_bursty_loss_rate_follows_the_preset(preset, name):
    cfg = LatencyPreset(preset).route(name)
    loss = cfg.loss
    assert loss.model == 'gilbert_elliott'
    n = 60_000
    q: RouteQueue[int] = RouteQueue(cfg, seed=5)
    for i in range(n):
        q.send(i, i * 1000 * MS)
    while q.next_ns is not None:
        q.due(q.next_ns)
    # variance of the mean of a two-state Markov loss process: the state's autocorrelation
    # decays as lam**k, which inflates the Bernoulli variance by (1 + lam) / (1 - lam)
    p_bad = loss.p_good_to_bad / (loss.p_good_to_bad + loss.p_bad_to_good)
    lam = 1 - loss.p_good_to_bad - loss.p_bad_to_good
    var = (p_bad * (1 - p_bad) * (loss.loss_bad - loss.loss_good) ** 2 * (1 + lam) / (1 - lam)
           + p_bad * loss.loss_bad * (1 - loss.loss_bad)
           + (1 - p_bad) * loss.loss_good * (1 - loss.loss_good)) / n
    z = (q.lost / n - loss.expected_rate) / var ** 0.5
    assert abs(z) < 4, (q.lost, loss.expected_rate, z)


# ---- the command queue -------------------------------------------------------------------

def test_fifo_queue_keeps_send_order_and_delivers_when_due():
    q: RouteQueue[int] = RouteQueue(route(delay={'distribution': 'uniform', 'low': 0.0,
                                                 'high': 0.05}), seed=1)
    for i in range(200):
        q.send(i, i * MS)                # 1 ms apart, up to 50 ms of jitter
    out, times, now = [], [], 0
    while q.next_ns is not None:
        now = q.next_ns
        got = q.due(now)
        out += got
        times += [now] * len(got)
    assert out == list(range(200)), 'fifo never reorders'
    assert times == sorted(times)
    assert q.due(now + 10**12) == [] and len(q) == 0


def test_free_order_may_reorder_and_constant_delay_is_exact():
    q: RouteQueue[int] = RouteQueue(route(order='free', delay={
        'distribution': 'uniform', 'low': 0.0, 'high': 0.05}), seed=1)
    for i in range(200):
        q.send(i, i * MS)
    out = q.due(10**12)
    assert sorted(out) == list(range(200)) and out != list(range(200))
    c: RouteQueue[str] = RouteQueue(route(delay=0.02), seed=1)
    c.send('a', 0)
    c.send('b', 5 * MS)
    assert c.due(20 * MS - 1) == [] and c.due(20 * MS) == ['a']
    assert c.next_ns == 25 * MS and c.due(25 * MS) == ['b']


def test_lost_commands_are_dropped_and_duplicates_delivered_twice():
    lossy: RouteQueue[int] = RouteQueue(route(loss={'model': 'bernoulli', 'p': 0.3}), seed=2)
    for i in range(1000):
        lossy.send(i, i * MS)
    got = lossy.due(10**12)
    assert len(got) + lossy.lost == 1000 and 230 < lossy.lost < 370
    assert got == sorted(got), 'the survivors keep their order'
    assert set(got).isdisjoint(set(range(1000)) - set(got))
    dup: RouteQueue[int] = RouteQueue(route(duplicate_p=1.0), seed=2)
    assert dup.send(7, 0) == 2 and dup.due(0) == [7, 7]


def test_world_commands_wait_in_the_queue_and_stale_observations_hold(tmp_path, spec_robot):
    spec, robot = spec_robot
    cfg = load_train_config('simreal_arm_reach')
    slow_cmd = write_profile(tmp_path, 'slow_cmd', {'command': {'delay': 0.05}})
    w = World(spec, robot, cfg, seed=4, preset=slow_cmd)
    w.sim.params = replace(w.sim.params, command_delay_s=0.0)    # only the route's delay
    before = w.sim.target.position.copy()
    w.observation()
    w.apply(w.teacher_action)                       # sent at t0, arrives at t0 + 50 ms
    sent = w.last_target.copy()
    assert np.allclose(w.sim.target.position, before) and len(w.commands) == 1
    w.observation()
    w.apply(w.teacher_action)
    assert np.allclose(w.sim.target.position, before), 'still in flight after 40 ms'
    w.observation()
    w.apply(w.teacher_action)                       # t0 + 60 ms: the first one has arrived
    assert np.allclose(w.sim.target.position, sent)
    assert not w.stale and w.holds == 0

    s = World(spec, robot, cfg, seed=4, preset=outage_profile(tmp_path))
    limit_ticks = int(spec.safety.stale_after_periods)     # 60 ms old is still fresh
    for _ in range(limit_ticks):
        s.observation()
        s.apply(s.teacher_action)
    assert not s.stale
    s.observation()
    s.apply(s.teacher_action)
    assert s.stale, 'nothing newer than 80 ms arrived: the node holds'
    held = s.last_target.copy()
    assert not np.any(s.observation()), 'no observation is built while holding'
    s.apply(np.full(spec.act_dim, 3.0))             # ignored: the last command is re-sent
    assert s.holds == 1 and np.array_equal(s.last_target, held)
    assert len(s.commands) == 0 and s.commands.sent == limit_ticks + 2
    assert s.stale, 'at 100 ms the first state after the outage is not out yet'
    s.observation()
    s.apply(s.teacher_action)                       # held again; at 120 ms fresh states again
    assert not s.stale and s.sim.time_ns - s.measured.stamp_ns <= 20 * MS
    assert s.holds == 2


def outage_profile(tmp_path: Path) -> str:
    """joint_states lost for the first 100 ms of route time, then passed through."""
    return write_profile(tmp_path, 'outage', {'observation': {'schedule': [
        {'fault': 'outage', 'start_s': 0.0, 'end_s': 0.1}]}})


def test_training_uses_no_stale_steps(tmp_path):
    from simreal_ros.policy.train import train
    cfg = load_train_config('simreal_arm_reach', iterations=1, envs=1, episode_s=0.4, epochs=1,
                            eval_episodes=0, latency_presets=[outage_profile(tmp_path)])
    s = train(cfg, tmp_path / 'out', log=lambda _l: None)
    # 20 ticks: fresh until 60 ms, held at 80 and 100 ms, fresh again from 120 ms
    assert s['stale_hold_fraction'] == 2 / 20
    assert s['rounds'][0]['samples'] == 18


# ---- config ------------------------------------------------------------------------------

def shipped_config() -> dict:
    return yaml.safe_load((REPO / 'config/training/simreal_arm_reach.yaml').read_text())


@pytest.mark.parametrize('value,key,expected', [
    (['none', 'wfii'], r'latency_presets\[1\]', 'one of .*wifi'),
    ([], 'latency_presets', 'non-empty list'),
    ('wifi', 'latency_presets', 'non-empty list'),
    ([{'preset': 'wifi', 'weight': 0}], r'latency_presets\[0\]\.weight', '> 0'),
    ([{'preset': 'wifi', 'wieght': 2}], r'latency_presets\[0\]', 'preset: NAME'),
    ([7], r'latency_presets\[0\]', 'a latency preset'),
])
def test_bad_latency_presets_fail_naming_the_key_and_choices(tmp_path, value, key, expected):
    data = shipped_config()
    data['latency_presets'] = value
    p = tmp_path / 't.yaml'
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=f'{key}: expected .*{expected}') as exc:
        load_train_config(p)
    assert '\n' not in str(exc.value)


def test_the_replaced_constant_delay_keys_say_what_to_write(tmp_path):
    data = shipped_config()
    data['action_delay_s'] = [0.0, 0.02]
    p = tmp_path / 't.yaml'
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match='action_delay_s: expected latency_presets'):
        load_train_config(p)


def test_presets_by_path_weights_and_overrides(tmp_path):
    path = write_profile(tmp_path, 'lab', {'command': {'delay': 0.01}})
    data = shipped_config()
    data['latency_presets'] = ['usb_serial', {'preset': path, 'weight': 2.5}]
    p = tmp_path / 't.yaml'
    p.write_text(yaml.safe_dump(data))
    cfg = load_train_config(p)
    assert cfg.latency_presets == (LatencyPreset('usb_serial'), LatencyPreset(path, 2.5))
    assert cfg.latency_presets[1].route('observation').passthrough, 'missing route: direct'
    assert load_train_config('simreal_arm_reach').latency_presets == DEFAULT_PRESETS
    assert set(shipped_presets()) >= {p.preset for p in DEFAULT_PRESETS}
    with pytest.raises(ConfigError, match=r'^override: latency_presets: expected'):
        load_train_config('simreal_arm_reach', latency_presets=[LatencyPreset('nope')])
    with pytest.raises(ConfigError, match='state_rate_hz'):
        load_train_config('simreal_arm_reach', state_rate_hz=0.0)
    assert COMMAND == 'command'
