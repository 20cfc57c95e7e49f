"""The policy benchmark: a smoke test in `make bench` only (it measures, never asserts time),
and its pure comparison with the plain timer, which runs with the unit tests."""

import json
import math
from pathlib import Path
import runpy
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bench():
    return runpy.run_path(str(REPO / 'bench' / 'policy.py'))


def test_policy_to_timer_ratios_and_target():
    compare = _bench()['compare_with_timer']
    figures = {'policy_stamp_p99_ms': 0.2, 'plain_timer_stamp_p99_ms': 0.8,
               'policy_receive_p99_ms': 0.3, 'plain_timer_receive_p99_ms': 0.6}
    c = compare(figures)
    assert c['policy_to_timer_stamp_p99_ratio'] == pytest.approx(0.25)
    assert c['policy_to_timer_receive_p99_ratio'] == pytest.approx(0.5)
    assert c['target_met'] is True and c['target_p99_ms'] == 0.5
    assert compare({**figures, 'policy_stamp_p99_ms': 0.6, 'plain_timer_stamp_p99_ms': 0.9}
                   )['target_met'] is False  # beats the timer, misses 0.5 ms
    assert compare({**figures, 'plain_timer_stamp_p99_ms': 0.1})['target_met'] is False
    c = compare({**figures, 'policy_stamp_p99_ms': float('nan'),
                 'plain_timer_receive_p99_ms': 0.0})
    assert c['target_met'] is False and math.isnan(c['policy_to_timer_stamp_p99_ratio'])
    assert math.isnan(c['policy_to_timer_receive_p99_ratio'])


def test_the_bench_feeds_each_policy_the_inputs_its_node_reads():
    from simreal_ros.core.robot import load_robot
    from simreal_ros.policy.spec import load_policy_spec
    bench = _bench()
    feed = {}
    for name in ('simreal_arm_reach', 'simreal_quad_walk'):
        spec = load_policy_spec(name)
        feed[name] = bench['feed_for'](spec, load_robot(spec.robot))
    # the arm reads joint_states only: the bench's figures of before, 100 Hz
    assert feed['simreal_arm_reach'] == bench['Feed'](100.0, 0.0, 0.0)
    # the quadruped: joint_states and imu/data at the sim bridge's 200 Hz, cmd_vel at 10 Hz
    assert feed['simreal_quad_walk'] == bench['Feed'](200.0, 200.0, 10.0)
    assert bench['loop_rates']('simreal_arm_reach') == (50.0, 500.0)
    assert bench['loop_rates']('simreal_quad_walk') == (50.0,)


def test_an_unknown_policy_is_one_error_line(capsys):
    with pytest.raises(SystemExit) as stop:
        _bench()['main'](['--policy', 'no_such_policy'])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: --policy: '), err
    assert 'no_such_policy' in lines[0]


@pytest.mark.bench
@pytest.mark.ros
def test_legged_policy_benchmark_runs_the_network_on_every_input(ros_env):
    r = subprocess.run([sys.executable, str(REPO / 'bench' / 'policy.py'), '--quick',
                        '--policy', 'simreal_quad_walk'], env=ros_env, cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert (figures['policy'], figures['robot']) == ('simreal_quad_walk', 'simreal_quad')
    assert figures['feed_hz'] == {'joint_states_hz': 200.0, 'imu_hz': 200.0,
                                  'cmd_vel_hz': 10.0}
    assert figures['overhead']['cycles'] > 0
    assert 'loop_500hz' not in figures  # its own control rate only
    loop = figures['loop_50hz']
    assert loop['commands'] > 0
    # the network ran inside the node (a model time is only taken when it is called) and
    # every observation built: imu/data and cmd_vel reached it
    assert loop['policy_model_p50_ms'] > 0
    assert loop['policy_observation_faults'] == 0
    assert figures['target_met'] == loop['target_met']


@pytest.mark.bench
@pytest.mark.ros
def test_policy_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'policy', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['overhead']['cycles'] > 0
    assert figures['bare_model_call']['p50_ms'] > 0
    for key in ('loop_50hz', 'loop_500hz'):
        assert figures[key]['commands'] > 0
        loop = figures[key]
        # a period error measured on a real clock is never exactly 0; 0 or nan means not measured
        for figure in ('policy_stamp_p99_ms', 'plain_timer_stamp_p99_ms'):
            assert math.isfinite(loop[figure]) and loop[figure] > 0, (key, figure, loop[figure])
        assert loop['policy_to_timer_stamp_p99_ratio'] == pytest.approx(
            loop['policy_stamp_p99_ms'] / loop['plain_timer_stamp_p99_ms'])
        assert loop['target_met'] is (loop['policy_stamp_p99_ms'] <= loop['target_p99_ms']
                                      and loop['policy_stamp_p99_ms']
                                      < loop['plain_timer_stamp_p99_ms'])
    assert figures['target_met'] == (figures['loop_50hz']['target_met']
                                     and figures['loop_500hz']['target_met'])
