"""``simreal zoo`` and ``simreal eval-gap``: the shipped zoo, a tiny zoo end to end, bad input."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys

import pytest

from simreal_ros.cli import main
from simreal_ros.policy.train import load_train_config
from simreal_ros.sweep import ranking
from simreal_ros.sweep.zoo import check_built, load_zoo

REPO = Path(__file__).resolve().parents[2]
ZOO_DIR = REPO / 'config' / 'policies' / 'zoo'


def tiny_zoo(tmp_path: Path, names: list[str], policies: Path = ZOO_DIR) -> Path:
    p = tmp_path / 'zoo.yaml'
    p.write_text('base: simreal_arm_reach\n'
                 f'policies: {policies}\n'
                 'entries:\n' + ''.join(f'  - {{name: {n}}}\n' for n in names),
                 encoding='utf-8')
    return p


def one_error(capsys, argv: list[str]) -> str:
    """Run ``simreal ARGV`` in-process; return its one ``error:`` line (exit 2, no traceback)."""
    rc = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if 'error:' in x]
    assert (rc, len(lines)) == (2, 1), err
    return lines[0]


def test_the_shipped_zoo_has_ten_distinct_built_policies():
    zoo = load_zoo('simreal_arm')
    assert len(zoo.entries) == 10
    cfgs = {e.name: load_train_config(zoo.base, **e.train) for e in zoo.entries}
    keys = {(c.randomization, tuple(p.preset for p in c.latency_presets), c.iterations,
             c.overlay, tuple(c.hidden)) for c in cfgs.values()}
    assert len(keys) == 10  # no two entries train the same way
    assert {c.randomization for c in cfgs.values()} == {'default', ''}
    assert {c.overlay for c in cfgs.values()} == {'', 'weak_servo_reality_identified'}
    assert {len(c.latency_presets) for c in cfgs.values()} == {1, 5}
    specs = check_built(zoo)
    assert sorted(specs) == sorted(e.name for e in zoo.entries)
    for name in specs:
        summary = json.loads((ZOO_DIR / name / 'simreal_arm_reach.training.json')
                             .read_text(encoding='utf-8'))
        assert summary['config']['iterations'] == cfgs[name].iterations


@pytest.mark.e2e
def test_eval_gap_on_a_tiny_zoo(tmp_path):
    zoo = tiny_zoo(tmp_path, ['rand_lat_14', 'rand_lat_5', 'rand_lat_2'])
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'eval-gap', str(zoo), '--out',
                        str(out), '--episodes', '4', '--pilot', '3', '--resamples', '200',
                        '--json'], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report == json.loads((out / 'gap.json').read_text(encoding='utf-8'))
    pols = report['policies']
    assert [p['policy'] for p in pols] == ['rand_lat_14', 'rand_lat_5', 'rand_lat_2']
    for p in pols:
        assert {b: len(p[b]['success']) for b in ('sim', 'identified', 'real')} == \
            {'sim': 4, 'identified': 4, 'real': 4}
    # 14 DAgger rounds reach every goal, 2 rounds none, on every backend
    assert [pols[0][b]['successes'] for b in ('sim', 'identified', 'real')] == [4, 4, 4]
    assert [pols[2][b]['successes'] for b in ('sim', 'identified', 'real')] == [0, 0, 0]
    # the statistics are those of the per-policy rates in the report
    for sim in ('sim', 'identified'):
        rates = [p[sim]['success_rate'] for p in pols]
        real = [p['real']['success_rate'] for p in pols]
        su = report['agreement'][sim]['success']
        assert su['srcc']['estimate'] == pytest.approx(ranking.srcc(rates, real))
        assert su['mmrv']['estimate'] == pytest.approx(ranking.mmrv(rates, real))
        assert su['srcc']['resamples'] == 200
    assert report['real_episodes']['pilot_episodes'] == 3
    page = (out / 'gap.html').read_text(encoding='utf-8')
    assert page.count('<svg') == 3
    assert 'rand_lat_5' in page
    assert report['run'] == {**report['run'], 'ran': 9, 'failed': 0}


def test_missing_zoo_file(capsys, tmp_path):
    line = one_error(capsys, ['eval-gap', str(tmp_path / 'nope.yaml'), '--out',
                              str(tmp_path / 'o')])
    assert 'nope.yaml' in line and 'no such file' in line


def test_a_zoo_entry_naming_a_policy_that_is_not_built(capsys, tmp_path):
    zoo = tiny_zoo(tmp_path, ['rand_lat_14', 'not_built_yet'])
    line = one_error(capsys, ['eval-gap', str(zoo), '--out', str(tmp_path / 'o')])
    assert 'entries[1]' in line and 'not_built_yet' in line and 'zoo build' in line
    assert not (tmp_path / 'o').exists()


def test_a_zoo_entry_with_an_unknown_training_key(capsys, tmp_path):
    zoo = tmp_path / 'zoo.yaml'
    zoo.write_text('base: simreal_arm_reach\nentries:\n  - {name: a, train: {iteratons: 3}}\n'
                   '  - {name: b}\n', encoding='utf-8')
    line = one_error(capsys, ['zoo', 'build', str(zoo), '--out', str(tmp_path / 'o')])
    assert 'entries[0].train.iteratons' in line


@pytest.mark.parametrize('extra, words', [
    (['--pilot', '0'], '--pilot 0'),
    (['--episodes', '1'], '--episodes 1'),
    (['--reality', 'no_such_reality'], "--reality 'no_such_reality'"),
    (['--real-latency', 'carrier_pigeon'], "--real-latency 'carrier_pigeon'"),
])
def test_bad_options(capsys, tmp_path, extra, words):
    zoo = tiny_zoo(tmp_path, ['rand_lat_14', 'rand_lat_5'])
    line = one_error(capsys, ['eval-gap', str(zoo), '--out', str(tmp_path / 'o'), *extra])
    assert words in line


@pytest.mark.e2e
def test_zoo_build_trains_each_entry_once(tmp_path):
    tiny = '{iterations: 1, envs: 2, episode_s: 0.5, epochs: 1, eval_episodes: 2'
    zoo = tmp_path / 'zoo.yaml'
    zoo.write_text('base: simreal_arm_reach\nentries:\n'
                   f'  - {{name: a, train: {tiny}}}}}\n'
                   f"  - {{name: b, train: {tiny}, randomization: ''}}}}\n", encoding='utf-8')
    out = tmp_path / 'built'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'zoo', 'build', str(zoo), '--out',
                        str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    specs = check_built(load_zoo(zoo), out)
    assert sorted(specs) == ['a', 'b']
    cfg_b = json.loads((out / 'b' / 'simreal_arm_reach.training.json').read_text())['config']
    assert (cfg_b['randomization'], cfg_b['iterations'], cfg_b['envs']) == ('', 1, 2)
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'zoo', 'build', str(zoo), '--out',
                        str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('built before, skipped') == 2


@pytest.mark.e2e
@pytest.mark.ros
def test_eval_gap_real_on_the_virtual_servo_bus(tmp_path):
    """``--real emulator``: the real episodes come from simreal eval on the emulator."""
    zoo = tiny_zoo(tmp_path, ['rand_lat_14', 'rand_lat_2'])
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'eval-gap', str(zoo), '--out',
                        str(out), '--episodes', '2', '--pilot', '2', '--resamples', '50',
                        '--identified', '', '--real', 'emulator', '--json'],
                       cwd=REPO, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    pols = report['policies']
    assert [p['policy'] for p in pols] == ['rand_lat_14', 'rand_lat_2']
    lines = [json.loads(x) for x in (out / 'emulator.jsonl').read_text().splitlines()]
    assert [x['policy'] for x in lines] == ['rand_lat_14', 'rand_lat_2']
    cells = {c['cell_id']: c for c in (json.loads(x) for x in
                                       (out / 'results.jsonl').read_text().splitlines())}
    assert len(cells) == 4  # sim and the stand-in per policy; no identified sim
    for p, line in zip(pols, lines, strict=True):
        assert {b: p[b]['episodes'] for b in ('sim', 'real', 'standin')} == \
            {'sim': 2, 'real': 2, 'standin': 2}
        # the real results are the emulator run's, by provenance, on the stand-in's goals
        assert (p['real']['source'], line['source']) == ('emulator', 'emulator')
        assert p['real']['worker'] == line['worker'] and line['worker'].startswith('emulator:')
        assert line['command'] == 'simreal eval --backend real'
        assert line['reality'] == 'weak_servo_reality'
        standin = cells[p['standin']['cell_id']]
        assert standin['overlay'] == 'weak_servo_reality' and standin['latency'] == 'usb_serial'
        assert line['seed'] == standin['goal_seed']
        assert [e['goal'] for e in line['episode_results']] == \
            [e['goal'] for e in standin['episode_results']]
        assert p['real']['success'] == [int(e['success']) for e in line['episode_results']]
    # two DAgger rounds reach no goal on the virtual robot either
    assert pols[1]['real']['successes'] == 0
    sv = report['standin_vs_emulator']
    assert sv['episodes'] == 4
    assert set(report['agreement']) == {'sim', 'standin'}
    assert set(report['agreement_standin']) == {'sim'}
