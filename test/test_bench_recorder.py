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
    ingest, image = figures['ingest'], figures['image_30hz']
    # every message sent is in the bag, counted from the bag itself
    assert ingest['recorded_per_round'] == [ingest['messages_per_round']] * ingest['rounds']
    assert ingest['lossless'] is True and image['lossless'] is True
    # each ratio is its two measured rates divided, both rates real
    for rate in ('recorder_msgs_per_s', 'bare_subscriber_msgs_per_s',
                 'bare_draining_subscriber_msgs_per_s'):
        assert ingest[rate] > 100, (rate, ingest)
    assert ingest['ratio_recorder_over_bare'] == pytest.approx(
        ingest['recorder_msgs_per_s'] / ingest['bare_subscriber_msgs_per_s'])
    assert ingest['target_met'] is (min(ingest['ratio_recorder_over_bare'],
                                        ingest['ratio_recorder_over_bare_draining']) >= 0.8)
    assert image['recorded_mb_per_s'] > 1.0  # a 640x480 rgb8 image at 30 Hz alone is 27.6 MB/s
    # the stack's layout and the shared participant, each with its own bare comparison
    shared = figures['image_30hz_shared_participant']
    assert (image['image_participant'], shared['image_participant']) == ('own', 'shared')
    assert figures['image_30hz_writer_process']['writer'] == 'process'
    for run in (image, shared, figures['image_30hz_writer_process']):
        assert run['write_lag_max_ms'] > 0 and run['max_delay_ms'] > 0, run
        assert run['bare_subscriber']['max_delay_ms'] > 0, run
        # the verdict follows from its figures
        assert run['target_met'] is (run['lossless']
                                     and run['last_receive_after_publisher_s'] <= 0.2
                                     and run['max_delay_ms'] <= 200.0
                                     and run['write_lag_max_ms'] <= 200.0), run
