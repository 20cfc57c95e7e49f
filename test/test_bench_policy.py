"""The policy benchmark as a smoke test in `make bench` only (it measures, never asserts time)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.ros]
REPO = Path(__file__).resolve().parents[1]


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
        assert figures[key]['policy_stamp_p99_ms'] >= 0
        assert figures[key]['plain_timer_stamp_p99_ms'] >= 0
