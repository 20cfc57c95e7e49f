"""`simreal bench sweep` as a smoke test in `make bench` and `make bench-quick`."""

import json
import math
from pathlib import Path
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.bench]
REPO = Path(__file__).resolve().parents[2]


def test_sweep_benchmark_reports_its_figures():
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'bench', 'sweep', '--quick',
                        '--json'], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    assert {'cell_kinds', 'workers', 'ray'} <= set(figures)
    kinds = figures['cell_kinds']
    assert kinds['in_process']['episodes'] == 4
    assert kinds['lockstep_ros']['ticks'] > 0
    w = figures['workers']
    assert (w['cells'], [len(w['runs'][k]) for k in ('1', '2')]) == (8, [1, 1])
    assert all(run['cells'] == 8 for k in ('1', '2') for run in w['runs'][k])
    ray = figures['ray']
    assert [run['cells'] for run in ray['runs']['ray']] == [6]
    for x in (kinds['in_process_over_floor'], w['speedup_wall'], ray['per_cell_overhead']):
        assert math.isfinite(x)  # every path ran its cells: a figure, not a nan
