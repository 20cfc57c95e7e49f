"""`simreal bench legged` as a smoke test in `make bench` and `make bench-quick`."""

import json
import math
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench]
REPO = Path(__file__).resolve().parents[2]


def test_legged_benchmark_reports_its_figures():
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'legged', '--quick',
                        '--json'], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert set(figures) == {'standing', 'trot', 'trot_s', 'step_rate'}
    assert figures['trot']['episodes']['pybullet']['falls'] == 0
    ratio = figures['step_rate']['pybullet_over_mujoco']
    assert math.isfinite(ratio) and ratio > 0  # both engines stepped: a rate, not a zero
