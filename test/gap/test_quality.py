"""`simreal check` catches each defect it claims to catch, in a bag made to have it."""

from __future__ import annotations

import json
import subprocess
import sys

from episode_bags import DEFECTS, make_episode_bag
import pytest
from startup import cli_error_line

from simreal_ros.errors import SimrealError
from simreal_ros.gap.episode import load_episode
from simreal_ros.gap.quality import Thresholds, check_episode, robot_for, thresholds_from


@pytest.fixture(scope='module')
def clean_bag(tmp_path_factory):
    path = tmp_path_factory.mktemp('clean') / 'bag'
    make_episode_bag(path, seconds=3.0)
    return path


def test_clean_episode_passes_every_check(clean_bag):
    ep = load_episode(str(clean_bag))
    robot = robot_for(ep, None)  # from the bag's custom_data
    assert robot is not None and robot.name == 'simreal_arm'
    v = check_episode(ep, robot)
    assert v.passed, v.text()
    checks = {f.check for f in v.findings}
    assert checks == {'dropped', 'non_monotonic', 'gaps', 'clock_skew', 'commands_at_limits',
                      'saturated_effort', 'recorder_dropped', 'recorder_missed'}


def test_diagnostics_of_several_nodes_are_not_judged_as_one_stream(tmp_path):
    path = tmp_path / 'bag'
    make_episode_bag(path, seconds=4.0, diagnostics_topic='/diagnostics')
    v = check_episode(load_episode(str(path)), robot_for(load_episode(str(path)), None))
    assert v.passed, v.text()
    assert '/diagnostics: several publishers by design, not one stream' in v.skipped
    assert not [f for f in v.findings if f.subject == '/diagnostics']
    # the same two interleaved rates on a topic of one publisher are a broken stream
    other = tmp_path / 'other'
    make_episode_bag(other, seconds=4.0, diagnostics_topic='/arm/status')
    v = check_episode(load_episode(str(other)), None)
    assert sorted(f.check for f in v.failures if f.subject == '/arm/status') == ['dropped',
                                                                                 'gaps']


CHECK_OF = {'dropped': 'dropped', 'out_of_order': 'non_monotonic',
            'duplicate': 'non_monotonic', 'gap': 'gaps', 'clock_skew': 'clock_skew',
            'commands_at_limits': 'commands_at_limits', 'saturated_effort': 'saturated_effort',
            'recorder_dropped': 'recorder_dropped', 'recorder_missed': 'recorder_missed'}
SUBJECT_OF = {'dropped': '/sim_a/joint_states', 'out_of_order': '/sim_a/joint_states',
              'duplicate': '/sim_a/joint_states', 'gap': '/sim_b/joint_states',
              'clock_skew': 'between topics', 'commands_at_limits': 'elbow_pitch',
              'saturated_effort': '/sim_a/joint_states shoulder_pitch',
              'recorder_dropped': 'recorder', 'recorder_missed': '/sim_b/joint_states'}


@pytest.mark.parametrize('defect', DEFECTS)
def test_each_defect_is_caught(tmp_path, defect):
    path = tmp_path / 'bag'
    make_episode_bag(path, seconds=3.0, defects=(defect,))
    ep = load_episode(str(path))
    v = check_episode(ep, robot_for(ep, None))
    assert not v.passed
    failed = [f for f in v.failures if f.check == CHECK_OF[defect]]
    assert failed, v.text()
    assert any(SUBJECT_OF[defect] in f.subject for f in failed), v.text()
    if defect == 'duplicate':
        assert 'duplicate' in failed[0].detail and failed[0].value == 1
    if defect == 'recorder_missed':  # the one topic that missed, with the recorder's count
        assert [(f.subject, f.value) for f in failed] == [('/sim_b/joint_states', 7)]


def test_cli_exit_codes_and_json(clean_bag, tmp_path, simreal_cli):
    ok = subprocess.run([sys.executable, '-m', 'simreal_ros', 'check', str(clean_bag),
                         '--json'], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)['passed'] is True
    bad = tmp_path / 'bad'
    make_episode_bag(bad, seconds=2.0, defects=('gap', 'commands_at_limits'))
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'check', str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert r.stdout.startswith('FAIL') and 'FAIL gaps' in r.stdout
    relaxed = subprocess.run([sys.executable, '-m', 'simreal_ros', 'check', str(bad), '--json',
                              '--threshold', 'max_gaps=5', 'max_at_limit_fraction=0.5',
                              'max_dropped_fraction=0.05'],
                             capture_output=True, text=True, timeout=120)
    assert relaxed.returncode == 0, relaxed.stdout
    missing = simreal_cli('check', str(tmp_path / 'nope'))  # in-process: refused at once
    assert missing.returncode == 2 and 'does not exist' in cli_error_line(missing)


def test_bad_thresholds_are_named():
    with pytest.raises(SimrealError, match='NAME one of'):
        thresholds_from(['nope=1'])
    with pytest.raises(SimrealError, match='not a number'):
        thresholds_from(['gap_factor=wide'])
    with pytest.raises(SimrealError, match='gap_factor'):
        thresholds_from(['gap_factor=-1'])
    assert thresholds_from(['max_gaps=3']).max_gaps == 3
    with pytest.raises(ValueError):
        Thresholds(max_dropped_fraction=float('nan'))
