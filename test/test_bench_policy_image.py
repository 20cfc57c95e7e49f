"""The image policy benchmark's quick form: it reports its figures (it never asserts a time)."""

import json
import math
from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.bench
def test_policy_image_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'policy_image', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['image_input'] == [1, 6, 64, 64] and figures['torch_threads'] == 1
    for fmt in ('torchscript', 'onnx'):
        f = figures[fmt]
        assert f['steps'] == 100
        for part in ('preprocess', 'network', 'inference'):
            assert 0 < f[part]['p50_ms'] <= f[part]['p99_ms'], (fmt, part, f[part])
        assert math.isclose(f['p99_fraction_of_period'], f['inference']['p99_ms'] / 20.0)
