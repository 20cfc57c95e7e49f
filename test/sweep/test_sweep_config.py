"""Sweep files, cells, seeds and the table, in-process (no cell runs here but one, in-process)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from startup import cli_error_line

from simreal_ros.errors import ConfigError
from simreal_ros.sweep.config import load_sweep
from simreal_ros.sweep.evaluate import cell_goals
from simreal_ros.sweep.outputs import COLUMNS, write_outputs
from simreal_ros.sweep.runner import RESULTS, Progress, read_results, run_cell

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / 'config' / 'sweeps' / 'smoke.yaml'


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / 'sweep.yaml'
    p.write_text(text, encoding='utf-8')
    return p


def test_smoke_sweep_is_the_grid_of_its_axes():
    sweep = load_sweep(SMOKE)
    assert len(sweep.cells) == 16
    combos = {(c.policy, c.engine, c.latency, c.seed) for c in sweep.cells}
    assert combos == {(p, e, lat, s) for p in ('simreal_arm_reach', 'so101_reach')
                      for e in ('mujoco', 'pybullet') for lat in ('', 'wifi') for s in (0, 1)}
    assert {c.robot for c in sweep.cells} == {'simreal_arm', 'so101'}
    assert len({c.cell_id for c in sweep.cells}) == 16


def test_seeds_follow_the_configuration_not_the_position(tmp_path):
    a = load_sweep(write(tmp_path, 'grid: {policy: [simreal_arm_reach, so101_reach], '
                                   'engine: [mujoco, pybullet], seed: [0, 1]}\n'))
    b = load_sweep(write(tmp_path, 'cells:\n'
                                   '  - {policy: so101_reach, engine: pybullet, seed: 1}\n'
                                   '  - {policy: simreal_arm_reach, seed: 0}\n'))
    by_id = {c.cell_id: c for c in a.cells}
    for c in b.cells:  # same cell, other position and file: same id and seeds
        assert (by_id[c.cell_id].goal_seed, by_id[c.cell_id].cell_seed) == (c.goal_seed,
                                                                            c.cell_seed)
    # one robot and replicate: the same goals on every engine; the rest of the draws differ
    arm0 = [c for c in a.cells if c.robot == 'simreal_arm' and c.seed == 0]
    assert len({c.goal_seed for c in arm0}) == 1
    assert len({c.cell_seed for c in arm0}) == 2
    assert len({c.goal_seed for c in a.cells}) == 4
    c0 = load_sweep(write(tmp_path, 'cells: [{policy: simreal_arm_reach}]\n')).cells[0]
    c7 = load_sweep(write(tmp_path, 'seed: 7\ncells: [{policy: simreal_arm_reach}]\n')).cells[0]
    assert c0.cell_seed != c7.cell_seed and c0.goal_seed != c7.goal_seed  # the sweep seed


def test_a_cell_in_the_grid_and_the_list_runs_once(tmp_path):
    s = load_sweep(write(tmp_path, 'grid: {policy: [simreal_arm_reach]}\n'
                                   'cells: [{policy: simreal_arm_reach, engine: mujoco}]\n'))
    assert len(s.cells) == 1


def test_paths_are_relative_to_the_sweep_file(tmp_path):
    (tmp_path / 'sub').mkdir()
    spec = (REPO / 'config/policies/simreal_arm_reach.yaml').read_text(encoding='utf-8')
    model = (REPO / 'config/policies/simreal_arm_reach.pt').resolve()
    (tmp_path / 'sub' / 'mine.yaml').write_text(
        spec.replace('model: simreal_arm_reach.pt', f'model: {model}'), encoding='utf-8')
    s = load_sweep(write(tmp_path, 'cells: [{policy: sub/mine.yaml}]\n'))
    assert s.cells[0].policy == str(tmp_path / 'sub' / 'mine.yaml')


BAD = [
    ('grid: {policy: [simreal_arm_reach]}\nepisodes: 3\n', 'episodes',
     'expected one of the known keys'),
    ('grid: {policy: [simreal_arm_reach]}\neval: {episodes: many}\n', 'eval.episodes',
     "expected an integer, got 'many'"),
    ('grid: {policy: [simreal_arm_reach, no_such_policy]}\n', 'grid.policy[1]',
     "got 'no_such_policy'"),
    ('grid: {policy: simreal_arm_reach}\n', 'grid.policy',
     "expected a list, got 'simreal_arm_reach'"),
    ('grid: {policy: [simreal_arm_reach], engine: [mujoco, gazebo]}\n', 'grid.engine[1]',
     "expected one of ['mujoco', 'pybullet'], got 'gazebo'"),
    ('grid: {policy: [simreal_arm_reach], overlay: [no_such_overlay]}\n', 'grid.overlay[0]',
     "got 'no_such_overlay'"),
    ('grid: {policy: [simreal_arm_reach], overlay: [so101_worn]}\n', 'grid.overlay[0]',
     "expected an overlay of robot 'simreal_arm'"),
    ('grid: {policy: [simreal_arm_reach], robot: [so101]}\n', 'grid.robot[0]',
     "expected the robot of policy 'simreal_arm_reach' ('simreal_arm'), got 'so101'"),
    ('grid: {policy: [simreal_arm_reach], latency: [dialup]}\n', 'grid.latency[0]',
     "got 'dialup'"),
    ('grid: {policy: [simreal_arm_reach], seed: [0, -1]}\n', 'grid.seed[1]',
     'expected an integer >= 0, got -1'),
    ('grid: {policy: [simreal_arm_reach], speed: [1]}\n', 'grid.speed',
     'expected one of the known keys'),
    ('cells: [{engine: mujoco}]\n', 'cells[0].policy', 'missing'),
    ('cells: [{policy: simreal_arm_reach, randomisation: default}]\n',
     'cells[0].randomisation', 'expected one of the known keys'),
    ('name: empty\n', 'grid', 'the sweep has no cell'),
]


@pytest.mark.parametrize('text,key,detail', BAD, ids=[b[1] for b in BAD])
def test_a_bad_sweep_file_is_one_error_naming_file_and_key(simreal_cli, tmp_path, text, key,
                                                          detail):
    path = write(tmp_path, text)
    line = cli_error_line(simreal_cli('sweep', str(path), '--out', str(tmp_path / 'out')))
    assert f'{path.absolute()}: {key}: ' in line
    assert detail in line
    assert not (tmp_path / 'out').exists()  # nothing ran, nothing written


def test_bad_options_are_one_error(simreal_cli, tmp_path):
    assert '--workers 0' in cli_error_line(simreal_cli('sweep', str(SMOKE), '--workers', '0',
                                                       '--out', str(tmp_path)))
    assert '--out DIR' in cli_error_line(simreal_cli('sweep', str(SMOKE)))
    missing = tmp_path / 'nope.yaml'
    assert f'{missing}: expected an existing file' in cli_error_line(
        simreal_cli('sweep', str(missing), '--dry-run'))


def test_a_ray_address_that_nobody_answers_is_one_error_before_anything_runs(simreal_cli,
                                                                               tmp_path):
    out = tmp_path / 'out'
    line = cli_error_line(simreal_cli('sweep', str(SMOKE), '--out', str(out), '--ray',
                                      '127.0.0.1:1'))  # nothing listens on port 1: refused
    assert '--ray 127.0.0.1:1: no Ray cluster answers there (Connection refused)' in line
    assert "--ray 'cluster': expected auto, local or a cluster address HOST:PORT" in \
        cli_error_line(simreal_cli('sweep', str(SMOKE), '--out', str(out), '--ray', 'cluster'))
    assert not out.exists()


def test_dry_run_prints_every_cell_and_runs_none(simreal_cli, tmp_path):
    r = simreal_cli('sweep', 'smoke', '--dry-run')  # a shipped sweep by name
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == '16 cells'
    ids = [c.cell_id for c in load_sweep(SMOKE).cells]
    assert [ln.split()[0] for ln in lines[:-1]] == ids


def test_progress_lines_without_a_tty():
    out = io.StringIO()
    p = Progress(2, out)
    p.update({'status': 'ok'})
    p.update({'status': 'failed'})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('sweep: 1/2 cells, ') and ', ETA ' in lines[0]
    assert lines[1].startswith('sweep: 2/2 cells, 1 failed, ') and lines[1].endswith('ETA 0 s')


def test_one_cell_in_process_and_its_table(tmp_path):
    """The worker's entry point on a one-episode cell; the table from its line (and a stale
    failed line of the same cell, which the ok line replaces)."""
    sweep = load_sweep(write(tmp_path, 'eval: {episodes: 1, goal_timeout_s: 2.0}\n'
                                       'cells: [{policy: simreal_arm_reach}, '
                                       '{policy: so101_reach}]\n'))
    cell = sweep.cells[0]
    row = run_cell(cell, {'ROS_DOMAIN_ID': '51'}, {'git_commit': 'abc', 'package_version': 'x',
                                                   'sweep': 'sweep', 'sweep_file': 'f'})
    assert row['status'] == 'ok', row['error']
    assert row['episodes'] == row['metrics']['episodes'] == len(row['episode_results']) == 1
    assert row['episode_results'][0]['goal'] == pytest.approx(cell_goals(cell)[0], abs=1e-6)
    assert len(row['policy_model_sha256']) == 64
    out = tmp_path / 'out'
    out.mkdir()
    stale = {**row, 'status': 'failed', 'error': 'earlier', 'metrics': None}
    with open(out / RESULTS, 'w', encoding='utf-8') as f:
        for line in (json.dumps({**row, 'attempt': 1}), json.dumps({**stale, 'attempt': 1}),
                     '{"torn'):
            f.write(line + '\n')
    rows = write_outputs(sweep, out)
    assert [r['cell_id'] for r in rows] == [cell.cell_id]  # the other cell never ran
    # a line appended after the torn one is whole: the sink ends the torn line first
    from simreal_ros.sweep.runner import Outcome, _Sink
    sink = _Sink(out, Progress(1, io.StringIO()), Outcome())
    sink.add({**row, 'cell_id': 'appended'}, 1)
    sink.close()
    assert [r['cell_id'] for r in read_results(out)] == [cell.cell_id] * 2 + ['appended']
    with open(out / 'results.csv', encoding='utf-8') as f:
        table = list(csv.DictReader(f))
    assert list(table[0]) == list(COLUMNS)
    assert table[0]['status'] == 'ok'
    assert float(table[0]['success_rate']) == row['metrics']['success_rate']
    import pyarrow.parquet as pq
    pt = pq.read_table(out / 'results.parquet').to_pylist()
    assert len(pt) == 1 and pt[0]['policy_model_sha256'] == row['policy_model_sha256']
    assert pt[0]['cell_seed'] == cell.cell_seed
    assert not math.isnan(pt[0]['final_error_median_rad'])
    page = (out / 'report.html').read_text(encoding='utf-8')
    assert page.count('<svg') == 2 and cell.cell_id in page


def test_a_config_error_names_the_sweep_file_not_the_policy_file(tmp_path):
    bad = tmp_path / 'broken.yaml'
    bad.write_text('policy: x\nrobot: simreal_arm\n', encoding='utf-8')
    with pytest.raises(ConfigError) as e:
        load_sweep(write(tmp_path, f'cells: [{{policy: {bad}}}]\n'))
    assert e.value.source == str(tmp_path / 'sweep.yaml')
    assert e.value.key == 'cells[0].policy'
    assert 'a policy spec that loads' in e.value.expected


def test_a_cell_that_raises_is_a_failed_line_with_the_reason(tmp_path):
    """Checked up front: the spec and that its model file exists; a model that does not load
    fails in the worker, as a ``failed`` line (the sweep goes on, the exit code says so)."""
    spec = (REPO / 'config/policies/simreal_arm_reach.yaml').read_text(encoding='utf-8')
    (tmp_path / 'junk.pt').write_bytes(b'not a TorchScript archive')
    (tmp_path / 'junk.yaml').write_text(
        spec.replace('model: simreal_arm_reach.pt', 'model: junk.pt'), encoding='utf-8')
    sweep = load_sweep(write(tmp_path, 'cells: [{policy: junk.yaml}]\n'))
    row = run_cell(sweep.cells[0], {}, {})
    assert row['status'] == 'failed'
    assert 'junk.pt' in row['error']
    assert 'metrics' not in row and row['wall_time_s'] >= 0
