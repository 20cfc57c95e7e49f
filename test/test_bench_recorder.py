"""The recorder benchmark: its quick form (`make bench-quick`: it measures, it asserts no time)
and its verdicts on fixed figures (pure)."""

import json
from pathlib import Path
import subprocess
import sys

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.bench
@pytest.mark.ros
@pytest.mark.timing  # alone in `make bench-quick`: it asserts its full-rate rounds lossless
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
    assert image['recorded_mb_per_s'] > 1.0  # a 640x480 rgb8 image at 30 Hz alone is 27.6 MB/s
    # the stack's layout and the shared participant, each with its own bare comparison
    shared = figures['image_30hz_shared_participant']
    assert (image['image_participant'], shared['image_participant']) == ('own', 'shared')
    assert figures['image_30hz_writer_process']['writer'] == 'process'
    for run in (image, shared, figures['image_30hz_writer_process']):
        assert run['write_lag_max_ms'] > 0 and run['max_delay_ms'] > 0, run
        assert run['bare_subscriber']['max_delay_ms'] > 0, run
        assert isinstance(run['target_met'], bool), run


def _verdicts():
    import runpy
    return runpy.run_path(str(REPO / 'bench' / 'recorder.py'))


@pytest.mark.parametrize('ratios, met', [((0.9, 0.85), True), ((0.8, 0.8), True),
                                         ((0.79, 0.95), False), ((0.95, 0.5), False)])
def test_the_ingest_target_is_both_ratios_at_least_0_8(ratios, met):
    assert _verdicts()['ingest_target_met'](*ratios) is met


@pytest.mark.parametrize('figures, met', [
    ((True, 0.05, 0.15, 0.2), True),
    ((False, 0.05, 0.15, 0.1), False),  # a frame lost
    ((True, 0.21, 0.1, 0.1), False),    # the last frame later than 0.2 s
    ((True, 0.1, 0.25, 0.1), False),    # a frame delayed beyond 0.2 s
    ((True, 0.1, 0.1, 0.3), False),     # the writer behind by more than 0.2 s
])
def test_the_image_target_is_lossless_within_0_2_s(figures, met):
    assert _verdicts()['image_target_met'](*figures) is met

