"""``simreal bench sysid --quick``: a smoke test, in `make bench` only (measures, no timing)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench]
REPO = Path(__file__).resolve().parents[2]


def test_sysid_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'sysid', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert set(figures) == {'sim_5s', 'sim_10s'}
    for case in figures.values():
        assert set(case['per_kind']) == {'damping', 'frictionloss', 'armature', 'mass'}
        assert case['delay_error_ms'] == 0.0
        assert case['heldout_rmse_after_over_before'] < 1e-3
        assert case['fit_time_s'] > 0
