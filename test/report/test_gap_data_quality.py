"""`simreal gap` carries the data-quality verdict of the streams it pairs (real bags).

A joint gap over a dropped or stalled stream is refused (one error line, exit 4, nothing
written); ``--allow-bad-data`` computes it marked invalid in gap.json and report.html; camera
metrics over dropped frames are marked, never refused; a clean bag is valid throughout.
"""

from __future__ import annotations

import json

from episode_bags import NAMES, T0, TS, _time, joint_state, make_episode_bag
import numpy as np
import pytest
from startup import cli_error_line

from simreal_ros.bag import BagOptions, BagWriter, QosSpec
from simreal_ros.errors import EXIT_BAD_DATA
from simreal_ros.gap.host_stalls import STALL_LIMIT_NS
from simreal_ros.gap.quality import Thresholds
from simreal_ros.report.gap_report import write_report

PAIR = ('/sim_a/joint_states', '/sim_b/joint_states')


def test_a_bag_with_dropped_joint_states_is_one_error_line_exit_4_and_nothing_written(
        tmp_path, simreal_cli):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=4.0, defects=('dropped',))  # 40 of 800 sim_a samples gone
    out = tmp_path / 'report'
    # in-process: `simreal gap` starts real processes in test_gap_report.py
    r = simreal_cli('gap', str(bag), '--out', str(out), '--quiet')
    assert EXIT_BAD_DATA == 4
    line = cli_error_line(r, code=4)
    assert line.startswith('simreal gap: error: 5.0 % of /sim_a/joint_states dropped (40 of '
                           '800 expected at 200 Hz; limit 1 %): the joint gap')
    assert '--allow-bad-data' in line and f'simreal check {bag}' in line
    assert r.stdout == ''
    assert not out.exists()


def test_allow_bad_data_marks_every_joint_metric_invalid(tmp_path, simreal_cli):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=4.0, defects=('dropped',))
    out = tmp_path / 'report'
    r = simreal_cli('gap', str(bag), '--out', str(out), '--quiet', '--json', '--allow-bad-data')
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m == json.loads((out / 'gap.json').read_text())
    reason = '5.0 % of /sim_a/joint_states dropped (40 of 800 expected at 200 Hz; limit 1 %)'
    assert (m['gap']['valid'], m['gap']['invalid_reason']) == (False, reason)
    assert {n: (j['valid'], j['invalid_reason']) for n, j in m['gap']['per_joint'].items()} == {
        n: (False, reason) for n in NAMES}
    dq = m['data_quality']
    assert (dq['valid'], dq['allow_bad_data'], dq['max_dropped_fraction']) == (False, True, 0.01)
    assert set(dq['streams']) == set(PAIR)
    a, b = dq['streams'][PAIR[0]], dq['streams'][PAIR[1]]
    assert (a['status'], a['missing'], a['expected'], a['messages']) == ('dropped', 40, 800, 760)
    assert (b['status'], b['missing'], b['problems']) == ('ok', 0, [])
    html = (out / 'report.html').read_text()
    assert 'Data quality of the paired streams' in html and '<b>INVALID</b>' in html


def test_a_stalled_stream_is_refused_and_the_limits_are_options(tmp_path, simreal_cli):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=4.0, defects=('gap',))  # sim_b: 100 ms without a sample
    # 20 of 800 missing (2.5 %) is allowed at --threshold 0.05; the 100 ms stall is not
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'r1'), '--quiet',
                    '--threshold', '0.05')
    line = cli_error_line(r, code=4)
    assert ('error: /sim_b/joint_states: stamps stop for 100.0 ms at 1.99 s beyond its median '
            'interval (stalled; limit 40 ms): the joint gap') in line
    # both limits raised: a valid report, the limits recorded
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'r2'), '--quiet', '--json',
                    '--threshold', '0.05', '--stall-limit-ms', '150')
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m['gap']['valid'] is True and m['gap']['invalid_reason'] == ''
    assert (m['data_quality']['max_dropped_fraction'], m['data_quality']['stall_limit_ms']) == (
        0.05, 150.0)
    assert m['data_quality']['streams'][PAIR[1]]['status'] == 'ok'
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'r3'), '--threshold', '1.5')
    assert 'error: --threshold is the largest dropped fraction' in cli_error_line(r)


def test_a_clean_bag_is_valid_with_the_documented_defaults(tmp_path, simreal_cli):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=4.0)
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'r'), '--quiet')
    assert r.returncode == 0, r.stderr
    assert 'INVALID' not in r.stdout
    assert f'  data quality {PAIR[0]}: ok\n' in r.stdout
    m = json.loads((tmp_path / 'r' / 'gap.json').read_text())
    assert m['gap']['valid'] is True
    assert all(j['valid'] for j in m['gap']['per_joint'].values())
    dq = m['data_quality']
    assert dq['valid'] is True and [s['status'] for s in dq['streams'].values()] == ['ok', 'ok']
    # the CLI's defaults (given as text in its help) are simreal check's and host_stalls'
    assert dq['max_dropped_fraction'] == Thresholds().max_dropped_fraction
    assert dq['stall_limit_ms'] == STALL_LIMIT_NS / 1e6


H, W, PERIOD = 24, 32, 33_333_333


def _image(stamp_ns: int, level: int) -> bytes:
    msg = TS.types['sensor_msgs/msg/Image'](
        TS.types['std_msgs/msg/Header'](_time(stamp_ns), 'camera_optical_frame'), H, W,
        'rgb8', 0, W * 3, np.full(H * W * 3, level, np.uint8))
    return bytes(TS.serialize_cdr(msg, 'sensor_msgs/msg/Image'))


def test_camera_metrics_over_dropped_frames_are_marked_not_refused(tmp_path):
    bag = tmp_path / 'bag'
    n = 60  # frames at 30 Hz; sim_b's camera loses 3 of them (5 %)
    with BagWriter(bag, BagOptions(), {'backend': 'sim2sim'}) as w:
        ja, jb = (w.add_topic(t, 'sensor_msgs/msg/JointState', [QosSpec()]) for t in PAIR)
        ia, ib = (w.add_topic(f'/sim_{s}/camera/image_raw', 'sensor_msgs/msg/Image',
                              [QosSpec()]) for s in 'ab')
        msgs = []
        for k in range(n * 10):  # joint states at 300 Hz
            t = T0 + k * PERIOD // 10
            q = 0.1 * np.sin(np.arange(len(NAMES)) + k / 30)
            msgs += [(t, ja, joint_state(t, q)), (t + 1, jb, joint_state(t, q + 0.01))]
        for k in range(n):
            t = T0 + k * PERIOD
            msgs.append((t + 5, ia, _image(t, 100)))
            if k not in (20, 21, 40):
                msgs.append((t + 9, ib, _image(t, 110)))
        for recv, h, data in sorted(msgs, key=lambda m: m[0]):
            w.write(h, recv, data)
    m = write_report(str(bag), str(tmp_path / 'out'), progress=False)  # refuses nothing
    assert m['gap']['valid'] is True
    cam = m['cameras']['camera']
    assert cam['pairs'] == n - 3 and cam['valid'] is False
    assert cam['invalid_reason'].startswith('5.0 % of /sim_b/camera/image_raw dropped (3 of 60 '
                                            'expected at 30 Hz; limit 1 %)')
    assert m['data_quality']['valid'] is False
    assert m['data_quality']['streams']['/sim_a/camera/image_raw']['status'] == 'ok'


@pytest.mark.parametrize('defect', ['dropped', 'gap'])
def test_the_verdict_agrees_with_simreal_check(tmp_path, defect, simreal_cli):
    """The dropped counts of gap's verdict are those of simreal check's dropped finding."""
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=4.0, defects=(defect,))
    r = simreal_cli('check', str(bag), '--json')
    found = {f['subject']: f for f in json.loads(r.stdout)['findings']
             if f['check'] == 'dropped' and f['subject'] in PAIR}
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'r'), '--quiet', '--json',
                    '--allow-bad-data')
    streams = json.loads(r.stdout)['data_quality']['streams']
    for topic in PAIR:
        assert streams[topic]['dropped_fraction'] == found[topic]['value']
        assert ('dropped' in streams[topic]['status']) == (not found[topic]['passed'])
