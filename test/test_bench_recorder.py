"""Recorder benchmark smoke test (`make bench` only: it measures, it does not assert time)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.ros]
REPO = Path(__file__).resolve().parents[1]


def test_recorder_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'recorder', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['ingest']['lossless'] and figures['ingest']['ratio_recorder_over_bare'] > 0
    assert figures['ingest']['ratio_recorder_over_bare_draining'] > 0
    assert figures['image_30hz']['lossless'] and figures['image_30hz']['recorded_mb_per_s'] > 0
