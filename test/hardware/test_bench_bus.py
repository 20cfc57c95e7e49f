"""The bus benchmark as a smoke test in `make bench` only (it measures, asserts no time)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

# timing: alone in `make bench-quick`, as the STS bus benchmark (test_bench_feetech.py)
pytestmark = [pytest.mark.bench, pytest.mark.ros, pytest.mark.timing]
REPO = Path(__file__).resolve().parents[2]


def test_bus_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'bus', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    for key in ('bus_1mbps', 'bus_4mbps'):
        assert 0 < figures[key]['ratio_to_limit'] <= 1.0  # nothing beats the wire
    assert figures['driver_250hz']['achieved_hz'] > 0
    # LeRobot's 30 Hz on the SO-101's STS bus and on the Dynamixel arm
    for key in ('driver_30hz_so101', 'driver_30hz'):
        assert figures[key]['configured_hz'] == 30.0 and figures[key]['achieved_hz'] > 0
        assert figures[key]['target_ratio'] == 0.95
    replug = figures['replug']
    # the target (the node test asserts it too, with the margin measured there)
    assert 0 < replug['recovery_after_replug_s'] <= replug['target_s'] == 1.0, replug
