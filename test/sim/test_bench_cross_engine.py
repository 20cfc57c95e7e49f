"""`simreal bench cross_engine` as a smoke test in `make bench` and `make bench-quick`."""

import json
import math
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench]
REPO = Path(__file__).resolve().parents[2]


def test_cross_engine_benchmark_reports_its_figures():
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'cross_engine', '--quick',
                        '--json'], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert set(figures) >= {'nominal', 'mujoco_euler'}
    rmse = figures['nominal']['cross_engine_rmse_rad']
    assert len(rmse) == 6
    # two engines integrating the same chirp never agree to the last bit: 0 means not measured
    assert all(math.isfinite(v) and v > 0 for v in rmse.values()), rmse
