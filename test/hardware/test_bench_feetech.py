"""The raw bus benchmark (Dynamixel and Feetech side by side) as a smoke test in `make bench`.

It measures and asserts no time: only that every figure is there and none beats the wire.
"""

import json
from pathlib import Path
import subprocess
import sys

import pytest

# timing: alone in `make bench-quick` (the bus loops poll the pty; beside another benchmark the
# SDK-default case, a busy poll with no read timeout, got a stale answer and stopped)
pytestmark = [pytest.mark.bench, pytest.mark.timing]
REPO = Path(__file__).resolve().parents[2]


def test_sts_bus_benchmark_reports_its_figures_beside_the_dynamixel_bus():
    r = subprocess.run([sys.executable, str(REPO / 'bench' / 'bus.py'), '--quick',
                        '--buses-only'], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    figures = json.loads(r.stdout)
    for key in ('bus_1mbps', 'sts_bus_1mbps', 'sts_bus_1mbps_one_read',
                'sts_bus_1mbps_sdk_default'):
        assert 0 < figures[key]['ratio_to_limit'] <= 1.0, figures[key]  # nothing beats the wire
    # 6 servos: 14 + 6 x 21 + 26 = 166 bytes of 10 bits at 1 Mbps
    assert figures['sts_bus_1mbps']['byte_time_limit_hz'] == pytest.approx(1e6 / 1660)
    assert figures['sts_bus_1mbps']['target_ratio'] == 0.7
    assert 'driver_250hz' not in figures  # --buses-only starts no ROS node
