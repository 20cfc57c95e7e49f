"""`simreal bench camera` as a smoke test in `make bench` only (it measures, asserts no time)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench]
REPO = Path(__file__).resolve().parents[1]


def test_camera_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'camera', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['sim']['render_ms']['n'] > 0
    assert figures['real']['capture_to_read']['n'] > 0
    assert figures['visual_reality']['optics_total']['n'] == 10
    assert set(figures['physics_loop']) >= {'alone', 'render_thread', 'render_process'}
