"""`simreal gap`: metrics against a bag with known gap, lag and injector truth; the report."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import sys

from episode_bags import NAMES, make_episode_bag
import matplotlib.image
import numpy as np
import pytest
from startup import cli_error_line


def test_gap_report_metrics_and_images(tmp_path):
    bag = tmp_path / 'bag'
    truth = make_episode_bag(bag, seconds=5.0, lag_s=0.020, offset=0.05)
    out = tmp_path / 'report'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'gap', str(bag), '--out', str(out),
                        '--json'], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert '100.0 %' in r.stderr  # the progress bar
    m = json.loads(r.stdout)
    assert m == json.loads((out / 'gap.json').read_text())
    assert m['pairing'] == {'primary': '/sim_a/joint_states', 'secondary': '/sim_b/joint_states',
                            'primary_engine': '', 'secondary_engine': ''}  # no engines recorded
    gap = m['gap']
    assert abs(gap['lag_ms'] - 20.0) < 1.0
    assert gap['per_joint'][NAMES[0]]['mean_rad'] == pytest.approx(-0.05, abs=0.01)
    assert gap['per_joint'][NAMES[0]]['max_abs_rad'] > 0.04
    for name in NAMES:
        assert abs(gap['per_joint'][name]['lag_ms'] - 20.0) < 1.0
    inj = m['injector']['routes']
    for route, lat in truth['latency_ms'].items():
        assert inj[route]['delivered'] == len(lat)
        assert inj[route]['latency_ms_p50'] == pytest.approx(float(np.percentile(lat, 50)),
                                                             abs=1e-6)
    assert inj['observation']['fates']['lost'] == 20
    assert m['topics']['/sim_a/joint_states']['count'] == 1000

    assert sorted(m['images']) == ['error.png', 'latency.png', 'overlay.png', 'rates.png']
    for name in m['images']:
        png = (out / name).read_bytes()
        assert png.startswith(b'\x89PNG') and len(png) > 5000
        img = matplotlib.image.imread(io.BytesIO(png))
        assert img.shape[0] > 100 and float(np.std(img)) > 0.01  # not blank
    html = (out / 'report.html').read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(embedded) == 4
    assert all(base64.b64decode(e).startswith(b'\x89PNG') for e in embedded)
    assert not re.findall(r'src="(?!data:)', html)  # self-contained: nothing linked


def test_gap_without_pair_and_bad_inputs(tmp_path, simreal_cli):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=1.0, injector=False)
    # the refusals in-process (nothing is read before them), the --quiet run in a real process
    r = simreal_cli('gap', str(bag), '--out', str(tmp_path / 'o'), '--primary',
                    '/joint_commands', '--secondary', '/nope')
    assert r.returncode == 2 and 'not a sensor_msgs/msg/JointState topic' in r.stderr
    assert 'not a sensor_msgs/msg/JointState topic' in cli_error_line(r)
    r = simreal_cli('gap', str(tmp_path / 'missing'), '--out', str(tmp_path / 'o'))
    assert r.returncode == 2 and 'does not exist' in cli_error_line(r)
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'gap', str(bag), '--out',
                        str(tmp_path / 'o2'), '--primary', '/joint_commands', '--secondary',
                        '/sim_b/joint_states', '--quiet'], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''


def test_twin_resync_marks_give_k_step_errors(tmp_path):
    # a twin at 100 Hz that drifts 1 mrad per sample on joint 0 and is snapped back every
    # 0.5 s onto a state 0.2 mrad off (the real state it snaps to is a few ms old), its snaps
    # marked on /twin/sim_bridge/resync as the bridge does: the error alone never shows them
    from episode_bags import T0, joint_state

    from simreal_ros.bag import BagWriter, QosSpec
    from simreal_ros.report.gap_report import write_report
    bag = tmp_path / 'bag'
    js = 'sensor_msgs/msg/JointState'
    with BagWriter(bag) as w:
        hp = w.add_topic('/joint_states', js, [QosSpec()])
        ht = w.add_topic('/twin/joint_states', js, [QosSpec()])
        hm = w.add_topic('/twin/sim_bridge/resync', js, [QosSpec()])
        for i in range(400):
            t = T0 + i * 10_000_000
            q = 0.2 * np.sin(np.linspace(0, 1, len(NAMES)) + i / 50)
            drift = np.zeros(len(NAMES))
            drift[0] = 1e-3 * (i % 50) + 2e-4
            w.write(hp, t, joint_state(t, q))
            if i % 50 == 0 and i:
                w.write(hm, t - 1000, joint_state(t - 1000, q))
            w.write(ht, t + 1, joint_state(t, q + drift))
    m = write_report(str(bag), str(tmp_path / 'report'), '/joint_states', '/twin/joint_states',
                     progress=False)
    gap = m['gap']
    assert gap['resyncs'] == 7
    for k in (1, 5, 10, 20):
        assert gap['k_step_rmse_rad'][str(k)][NAMES[0]] == pytest.approx(1e-3 * k + 2e-4,
                                                                         abs=1e-9)
        assert gap['k_step_rmse_rad'][str(k)][NAMES[1]] == pytest.approx(0.0, abs=1e-9)
