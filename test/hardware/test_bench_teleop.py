"""The teleop benchmark as a smoke test in `make bench` only (it measures, asserts no time)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.ros]
REPO = Path(__file__).resolve().parents[2]


def test_teleop_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'teleop', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['commands'] > 0
    assert 0 < figures['matched_fraction'] <= 1.0
    lat = figures['latency_ms']
    assert 0 < lat['p50'] <= lat['p99'] <= lat['max']  # a goal is written after its read
    so101 = figures['so101']  # the SO-101 leader -> a worn SO-101 follower
    assert so101['commands'] > 0 and so101['reality'] == 'so101_worn'
    assert set(so101['tracking_rms_rad']) == {'shoulder_pan', 'shoulder_lift', 'elbow_flex',
                                              'wrist_flex', 'wrist_roll', 'gripper'}
    assert all(r > 0 for r in so101['tracking_rms_rad'].values())
    assert so101['lag_ms'] > 0  # the follower behind the leader
    # the plan's driver offsets its goals with a leader; the comparison run does not
    assert so101['gravity_ff'] == 1.0 and figures['so101_no_gravity_ff']['gravity_ff'] == 0.0
    assert so101['gravity_ff_offset_rms_rad']['shoulder_lift'] > 0.02
