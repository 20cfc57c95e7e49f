"""``sysid`` and ``replay`` sweeps: fits and replays of recorded bags as cells, and their table.

The bag is recorded in-process on the bridge physics with a known overlay (every joint's
damping changed), so the fit's outcome is known: the held-out error falls to the solver's
floor (measured 2e-13 rad from 1.8e-3 rad with the nominal model, 3 s of fit) and the fitted
overlay replays the bag where the nominal model does not.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
import subprocess
import sys

import pytest
from startup import cli_error_line

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.excitation import ExcitationConfig
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError
from simreal_ros.sweep.config import ReplayCell, SysidCell, load_sweep
from simreal_ros.sweep.outputs import columns, write_outputs
from simreal_ros.sweep.runner import RESULTS, read_results, run_cell
from simreal_ros.sysid.synth import record_sim_bag

REPO = Path(__file__).resolve().parents[2]
PROVENANCE = {'git_commit': 'abc', 'package_version': 'x', 'sweep': 's', 'sweep_file': 'f'}
TRUTH = """robot: simreal_arm
joints:
  base_yaw: {damping: 0.16}
  shoulder_pitch: {damping: 0.22}
  elbow_pitch: {damping: 0.09}
  forearm_roll: {damping: 0.13}
  wrist_pitch: {damping: 0.05}
  wrist_roll: {damping: 0.10}
"""


@pytest.fixture(scope='module')
def bags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``bags/damped``: 8 s of pattern:=sysid on the physics with :data:`TRUTH`."""
    d = tmp_path_factory.mktemp('fit_cells')
    (d / 'truth.yaml').write_text(TRUTH, encoding='utf-8')
    (d / 'bags').mkdir()
    record_sim_bag(d / 'bags' / 'damped', load_robot('simreal_arm'),
                   load_overlay(str(d / 'truth.yaml')),
                   ExcitationConfig(pattern='sysid', duration_s=8.0, seed=2))
    return d


def write(d: Path, text: str, name: str = 'sweep.yaml') -> Path:
    p = d / name
    p.write_text(text, encoding='utf-8')
    return p


def run_all(sweep, out: Path) -> list[dict]:
    """Run every cell in this process, as a worker does, into ``out``'s results."""
    out.mkdir()
    with open(out / RESULTS, 'w', encoding='utf-8') as f:
        for cell in sweep.cells:
            f.write(json.dumps({**run_cell(cell, {'ROS_DOMAIN_ID': '51'}, PROVENANCE),
                                'attempt': 1}) + '\n')
    return write_outputs(sweep, out)


def test_a_sysid_sweep_fits_each_bag_and_a_replay_sweep_scores_the_fit(bags, tmp_path):
    sweep = load_sweep(write(bags, 'kind: sysid\nsysid: {holdout: 0.25}\n'
                                   'grid: {bag: [bags/damped], fit: [damping, [kp]]}\n'))
    assert sweep.kind == 'sysid'
    assert [c.fit for c in sweep.cells] == ['damping', 'kp']
    assert all(isinstance(c, SysidCell) and c.robot == 'simreal_arm' and c.holdout == 0.25
               and c.bag == str(bags / 'bags' / 'damped') for c in sweep.cells)
    rows = run_all(sweep, tmp_path / 'fit')
    assert [r['status'] for r in rows] == ['ok', 'ok'], [r['error'] for r in rows]
    damping, kp = rows
    # the damping fit recovers the truth: the held-out error falls to the solver's floor
    assert damping['heldout_before_rad'] > 1e-3
    assert damping['heldout_after_rad'] < 1e-9
    assert damping['parameters_fitted'] == damping['parameters_identifiable'] == 6
    # a fit of the wrong parameter leaves most of it: more than half the error stays
    assert kp['after_over_before'] > 0.5
    overlay = tmp_path / 'fit' / damping['overlay_file']
    assert overlay == tmp_path / 'fit' / 'overlays' / f'{sweep.cells[0].cell_id}.yaml'
    fitted = load_overlay(str(overlay))
    assert fitted.robot == 'simreal_arm'
    line = read_results(tmp_path / 'fit')[0]
    est = {p['key']: p['estimate'] for p in line['parameters']}
    assert est['joints.shoulder_pitch.damping'] == pytest.approx(0.22, rel=1e-6)
    assert len(line['bag_sha256']) == 64
    with open(tmp_path / 'fit' / 'results.csv', encoding='utf-8') as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(columns(sweep))
    assert 'policy_model_sha256' not in table[0] and table[0]['bag_sha256'] == line['bag_sha256']
    page = (tmp_path / 'fit' / 'report.html').read_text(encoding='utf-8')
    assert page.count('<svg') == 2

    # the fitted overlay against the nominal model, replayed on the same bag
    replay = load_sweep(write(bags, f'kind: replay\nreplay: {{horizons_s: [0.1, 0.5]}}\n'
                                    f"grid: {{bag: [bags/damped], overlay: ['', {overlay}]}}\n",
                              'replay.yaml'))
    assert all(isinstance(c, ReplayCell) for c in replay.cells)
    nominal, identified = run_all(replay, tmp_path / 'replay')
    assert nominal['status'] == identified['status'] == 'ok', nominal['error']
    assert nominal['open_loop_rad'] > 1e-3
    assert identified['open_loop_rad'] < 1e-9
    assert nominal['k_step_0.1_rad'] < nominal['k_step_0.5_rad'] < nominal['open_loop_rad']
    assert nominal['horizons_s'] == '0.1,0.5'
    import pyarrow.parquet as pq
    pt = pq.read_table(tmp_path / 'replay' / 'results.parquet').to_pylist()
    assert [r['open_loop_rad'] for r in pt] == [nominal['open_loop_rad'],
                                                identified['open_loop_rad']]


BAD = [
    ('kind: fit\ngrid: {bag: [bags/damped]}\n', 'kind',
     "expected one of ['eval', 'sysid', 'replay'], got 'fit'"),
    ('kind: sysid\ngrid: {bag: [bags/missing]}\n', 'grid.bag[0]',
     'expected a bag directory that exists'),
    ('kind: sysid\ngrid: {bag: [bags/damped], fit: [damping, stiffness]}\n', 'grid.fit[1]',
     "got 'stiffness'"),
    ('kind: sysid\ngrid: {bag: [bags/damped], fit: [""]}\n', 'grid.fit[0]',
     'expected parameters from'),
    ('kind: sysid\nsysid: {holdout: 0.9}\ngrid: {bag: [bags/damped]}\n', 'sysid.holdout',
     'got 0.9'),
    ('kind: sysid\neval: {episodes: 3}\ngrid: {bag: [bags/damped]}\n', 'eval',
     'expected one of the known keys'),
    ('kind: sysid\ngrid: {fit: [damping]}\n', 'grid.bag', 'the grid needs one'),
    ('kind: sysid\ngrid: {bag: [bags/damped], policy: [simreal_arm_reach]}\n', 'grid.policy',
     'expected one of the known keys'),
    ('kind: sysid\ngrid: {bag: [bags]}\n', 'grid.bag[0]', 'expected a bag sysid reads'),
    ('kind: replay\nreplay: {horizons_s: [0.2, -1]}\ngrid: {bag: [bags/damped]}\n',
     'replay.horizons_s[1]', 'expected a horizon in seconds > 0, got -1'),
    ('kind: replay\ngrid: {bag: [bags/damped], overlay: [so101_worn]}\n', 'grid.overlay[0]',
     "expected an overlay of robot 'simreal_arm'"),
    ('kind: replay\ncells: [{overlay: ""}]\n', 'cells[0].bag', 'missing'),
]


@pytest.mark.parametrize('text,key,detail', BAD, ids=[b[1] for b in BAD])
def test_a_bad_fit_sweep_is_one_error_naming_file_and_key(bags, text, key, detail):
    path = write(bags, text, 'bad.yaml')
    with pytest.raises(ConfigError) as e:
        load_sweep(path)
    assert f'{path}: {key}: ' in str(e.value)
    assert detail in str(e.value)


@pytest.mark.e2e
def test_a_replay_sweep_on_two_workers_in_a_real_process(bags, tmp_path):
    """The command as a user runs it: spawned workers, the table; then one error line."""
    sweep = write(bags, "kind: replay\ngrid: {bag: [bags/damped], overlay: ['', truth.yaml]}\n",
                  'two.yaml')
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'sweep', str(sweep), '--out',
                        str(out), '--workers', '2'], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert '2/2 cells ok' in r.stdout
    with open(out / 'results.csv', encoding='utf-8') as f:
        table = list(csv.DictReader(f))
    assert [row['overlay'] for row in table] == ['', str(bags / 'truth.yaml')]
    assert float(table[1]['open_loop_rad']) < 1e-9 < float(table[0]['open_loop_rad'])
    bad = write(bags, 'kind: replay\ngrid: {bag: [bags/none]}\n', 'none.yaml')
    line = cli_error_line(subprocess.run(
        [sys.executable, '-m', 'simreal_ros', 'sweep', str(bad), '--out', str(tmp_path / 'n')],
        cwd=REPO, capture_output=True, text=True, timeout=120))
    assert f'{bad}: grid.bag[0]: expected a bag directory that exists' in line
    assert not (tmp_path / 'n').exists()
