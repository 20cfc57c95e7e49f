"""Benchmarks run as smoke tests in `make bench` only (they measure, they do not assert time)."""

import json
import math
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench, pytest.mark.ros]
REPO = Path(__file__).resolve().parents[1]


def test_sim_bridge_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'sim_bridge', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['free']['ratio_bridge_over_raw'] > 0
    rt = figures['realtime_500hz']
    # a period error measured on a real clock is never exactly 0; 0 or nan means not measured
    assert math.isfinite(rt['bridge_publish_p99_ms_inside'])
    assert rt['bridge_publish_p99_ms_inside'] > 0
    assert rt['bridge_receive_p99_ms'] > 0 and math.isfinite(rt['bridge_receive_p99_ms'])
    assert figures['lockstep_50hz']['ticks'] > 0


def test_injector_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'injector', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    for key in ('accuracy_const5', 'accuracy_jitter', 'overhead_zero'):
        assert figures[key]['delivered'] == figures[key]['messages']
    assert figures['throughput_zero']['lossless_rate_hz'] > 0


def test_residual_benchmark_reports_its_figures(ros_env):
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'residual', '--quick',
                        '--json'], env=ros_env, cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert figures['us_per_step']['plain'] > 0 and figures['us_per_call']['torchscript'] > 0
    assert math.isfinite(figures['residual_over_plain'])
    assert math.isfinite(figures['torchscript_over_numpy'])
