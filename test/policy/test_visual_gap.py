"""The closed-loop perception-gap curves of the shipped visuomotor policy, and bad input.

``simreal_ros.report.visual_gap`` on the shipped model with a tiny setting (1 episode, 2 noise
levels): the table's rows, the clean row equal to the in-process nominal run of the same
seeds, the JSON written (into a directory it creates); an unknown perturbation or a missing
model is one ``error:`` line.
``simreal train`` on a spec of the visual reach task names the visual trainer's command.
"""

import json

import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.report import visual_gap

SPEC = load_policy_spec('simreal_arm_visual_reach')
PROG = 'python -m simreal_ros.report.visual_gap'


def error_lines(err):
    return [line for line in err.splitlines() if line.strip()]


@pytest.mark.e2e
def test_clean_row_is_the_nominal_run_and_each_level_is_a_row(tmp_path, capsys):
    torch = pytest.importorskip('torch')
    from simreal_ros.policy.visual_task import ReachTask, TargetCamera
    from simreal_ros.policy.visual_train import EXPERT, evaluate, make_worlds, node_policy
    out = tmp_path / 'sub' / 'gap.json'
    rc = visual_gap.main(['--out', str(out), str(SPEC.model), '--episodes', '1',
                          '--seed', '7001', '--axis', 'noise_std', '--levels', '40', '80'])
    assert rc == 0
    result = json.loads(out.read_text(encoding='utf-8'))
    assert (result['episodes'], result['seed']) == (1, 7001)
    assert list(result['models']) == [str(SPEC.model)]
    rows = result['models'][str(SPEC.model)]
    assert [(r['axis'], r['level'], r['episodes']) for r in rows] == [
        ('baseline', 0.0, 1), ('noise_std', 40.0, 1), ('noise_std', 80.0, 1)]
    # one printed line per row
    assert len(capsys.readouterr().out.splitlines()) == 3

    torch.set_num_threads(1)
    robot = load_robot(SPEC.robot)
    camera = TargetCamera(robot)
    try:
        worlds = make_worlds(SPEC, load_policy_spec(EXPERT), camera, ReachTask(robot),
                             [7001], False, False)
        nominal = evaluate(worlds, node_policy(SPEC, SPEC.model, 1), 1)
    finally:
        camera.close()
    assert nominal['successes'] == 1, nominal         # 40/40 nominal in the model card
    clean = rows[0]
    assert clean['successes'] == nominal['successes']
    assert clean['final_error_median_m'] == nominal['final_error_median_m']


def test_an_unknown_perturbation_is_one_error_line(tmp_path, capsys):
    out = tmp_path / 'gap.json'
    rc = visual_gap.main(['--out', str(out), str(SPEC.model), '--axis', 'jpeg_quality'])
    lines = error_lines(capsys.readouterr().err)
    assert rc == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f'{PROG}: error: visual_gap: axis: expected one of exposure_ev')
    assert "got 'jpeg_quality'" in lines[0]
    assert not out.exists()


def test_levels_without_an_axis_are_one_error_line(tmp_path, capsys):
    rc = visual_gap.main(['--out', str(tmp_path / 'g.json'), str(SPEC.model),
                          '--levels', '1'])
    lines = error_lines(capsys.readouterr().err)
    assert rc == 2
    assert lines == [f'{PROG}: error: visual_gap: levels: expected an --axis to apply them '
                     'to, got [1.0]']


def test_a_missing_model_is_one_error_line(tmp_path, capsys):
    missing = tmp_path / 'nope.pt'
    out = tmp_path / 'gap.json'
    rc = visual_gap.main(['--out', str(out), str(SPEC.model), str(missing)])
    lines = error_lines(capsys.readouterr().err)
    assert rc == 2
    assert lines == [f'{PROG}: error: {missing}: model file not found']
    assert not out.exists()


def test_simreal_train_names_the_visual_trainer_for_the_visual_spec(tmp_path, capsys):
    from simreal_ros.cli import main
    from simreal_ros.policy.train import VISUAL_POLICY
    from simreal_ros.policy.visual_train import POLICY
    assert POLICY == VISUAL_POLICY == SPEC.name
    shipped = (SPEC.source.parent.parent / 'training' / 'simreal_arm_reach.yaml')
    text = shipped.read_text(encoding='utf-8')
    assert text.count('\npolicy: simreal_arm_reach ') == 1
    cfg = tmp_path / 'visual.yaml'
    cfg.write_text(text.replace('\npolicy: simreal_arm_reach ',
                                f'\npolicy: {VISUAL_POLICY} '), encoding='utf-8')
    rc = main(['train', str(cfg), '--out', str(tmp_path / 'out')])
    captured = capsys.readouterr()
    lines = error_lines(captured.err)
    assert rc == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith('simreal train: error: ')
    assert ('train simreal_arm_visual_reach with '
            '`simreal train simreal_arm_visual_reach` (the visual trainer)') in lines[0]
    assert 'Traceback' not in captured.err + captured.out
    assert not (tmp_path / 'out').exists()
