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
    assert m['pairing'] == {'primary': '/sim_a/joint_states', 'secondary': '/sim_b/joint_states'}
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


def test_gap_without_pair_and_bad_inputs(tmp_path):
    bag = tmp_path / 'bag'
    make_episode_bag(bag, seconds=1.0, injector=False)
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'gap', str(bag), '--out',
                        str(tmp_path / 'o'), '--primary', '/joint_commands', '--secondary',
                        '/nope'], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and 'not a sensor_msgs/msg/JointState topic' in r.stderr
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'gap', str(tmp_path / 'missing'),
                        '--out', str(tmp_path / 'o')], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and 'does not exist' in r.stderr
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'gap', str(bag), '--out',
                        str(tmp_path / 'o2'), '--primary', '/joint_commands', '--secondary',
                        '/sim_b/joint_states', '--quiet'], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ''
