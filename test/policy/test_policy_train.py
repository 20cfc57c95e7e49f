"""Training: a seconds-long smoke run through the CLI is seeded and reproducible."""

from __future__ import annotations

from dataclasses import replace
import json
from pathlib import Path
import re
import subprocess
import sys

import pytest
from startup import cli_error_line
import torch
import yaml

from simreal_ros.errors import ConfigError
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.train import QUICK, load_train_config, train

REPO = Path(__file__).resolve().parents[2]


def weights(path: Path) -> dict:
    return {k: v.clone() for k, v in torch.jit.load(str(path)).state_dict().items()}


@pytest.mark.e2e
def test_train_smoke_run_is_reproducible_and_loadable(tmp_path):
    cli = subprocess.run([sys.executable, '-m', 'simreal_ros', 'train', '--quick', '--out',
                          str(tmp_path / 'a'), '--json'], capture_output=True, text=True,
                         timeout=180, cwd=REPO)
    assert cli.returncode == 0, cli.stderr
    assert 'round 1/1' in cli.stdout
    summary = json.loads(cli.stdout.strip().splitlines()[-1])
    assert [p['preset'] for p in summary['config']['latency_presets']] == [
        'none', 'usb_serial', 'ethercat', 'wifi', 'congested_wifi']
    assert summary['check_randomized']['by_preset']
    cfg = load_train_config('simreal_arm_reach', **QUICK)
    train(cfg, tmp_path / 'b', log=lambda _l: None)
    wa, wb = weights(tmp_path / 'a' / 'simreal_arm_reach.pt'), \
        weights(tmp_path / 'b' / 'simreal_arm_reach.pt')
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa), 'same seed must give the same weights'
    # the written spec points at the new weights and loads through the normal path
    spec = load_policy_spec(tmp_path / 'a' / 'simreal_arm_reach.yaml')
    assert spec.model == tmp_path / 'a' / 'simreal_arm_reach.pt'
    load_model(spec.model, spec.obs_dim, spec.act_dim)
    c = load_train_config('simreal_arm_reach', **QUICK, seed=1)
    train(c, tmp_path / 'c', log=lambda _l: None)
    wc = weights(tmp_path / 'c' / 'simreal_arm_reach.pt')
    assert not all(torch.equal(wa[k], wc[k]) for k in wa), 'another seed, other weights'


@pytest.mark.parametrize('key,value,expected', [
    ('envs', 0, 'envs'), ('network', {'hidden': []}, 'network.hidden'),
    ('latency_presets', ['wfii'], r'latency_presets\[0\]'), ('lr', 0.1, 'known keys'),
    ('goal_interval_s', [0.0, 1.0], 'goal_interval_s'), ('policy', 7, 'non-empty string'),
])
def test_bad_training_configs(tmp_path, key, value, expected):
    data = yaml.safe_load((REPO / 'config/training/simreal_arm_reach.yaml').read_text())
    data[key] = value
    p = tmp_path / 't.yaml'
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=expected):
        load_train_config(p)


def tiny_config(tmp_path: Path) -> Path:
    """A training config that finishes in seconds even when an override is not refused."""
    data = yaml.safe_load((REPO / 'config/training/simreal_arm_reach.yaml').read_text())
    data.update(envs=1, iterations=1, episode_s=0.1, epochs=1, eval_episodes=0)
    p = tmp_path / 'tiny.yaml'
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize('flag,value', [('--envs', '0'), ('--seed', '-1'),
                                        ('--iterations', '0')])
def test_bad_cli_overrides_fail_with_a_one_line_reason(tmp_path, flag, value, simreal_cli):
    out = tmp_path / 'out'
    r = simreal_cli('train', str(tiny_config(tmp_path)), '--out', str(out), flag, value)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert 'expected an integer' in cli_error_line(r)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'simreal train: error: {flag} {value}'), \
        r.stderr
    assert 'expected an integer' in lines[0]
    assert not out.exists(), 'nothing is written for refused settings'


def test_a_bad_cli_override_in_a_real_process_is_one_line(tmp_path):
    out = tmp_path / 'out'
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'train', str(tiny_config(tmp_path)),
                        '--out', str(out), '--envs', '0'], capture_output=True, text=True,
                       timeout=180, cwd=REPO)
    assert r.stderr.strip().splitlines() == [cli_error_line(r)]
    assert cli_error_line(r).startswith('simreal train: error: --envs 0: expected an integer')
    assert not out.exists(), 'nothing is written for refused settings'


def test_overrides_are_validated_like_the_file():
    from simreal_ros.policy.train import OVERRIDE, validate_train_config
    with pytest.raises(ConfigError, match=f'^{OVERRIDE}: epochs: expected an integer >= 1'):
        load_train_config('simreal_arm_reach', epochs=0)
    with pytest.raises(ConfigError, match='hidden'):
        load_train_config('simreal_arm_reach', hidden=())
    with pytest.raises(ConfigError, match='goal_interval_s'):
        load_train_config('simreal_arm_reach', goal_interval_s=(2.0, 1.0))
    with pytest.raises(ConfigError, match='a TrainConfig field'):
        load_train_config('simreal_arm_reach', source='elsewhere.yaml')
    cfg = load_train_config('simreal_arm_reach', seed=3, envs=None)
    assert cfg.seed == 3 and cfg.envs == 16 and validate_train_config(cfg) is cfg


def test_shipped_weights_reach_seeded_random_goals_in_process():
    """The committed network, loaded like the node loads it, in randomized worlds with delays.

    Uses training's own success check (chained random reachable goals, every joint within
    ``tolerance_rad`` for ``dwell_s`` before ``goal_timeout_s``), on seeded worlds that cycle
    through the training config's latency presets (two worlds each for the five presets).
    """
    import numpy as np

    from simreal_ros.core.robot import load_robot
    from simreal_ros.policy.train import World, _success_rates
    torch.set_num_threads(1)
    cfg = load_train_config('simreal_arm_reach')
    spec = load_policy_spec(cfg.policy)
    robot = load_robot(spec.robot)
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1)
    names = [p.preset for p in cfg.latency_presets]
    worlds = [World(spec, robot, cfg, seed=1000 + k, preset=names[k % len(names)])
              for k in range(10)]
    result = _success_rates(worlds, lambda obs: np.stack([model(o) for o in obs]), 3)
    assert result['goals'] == 30
    assert result['success_rate'] >= 0.9, result


def test_image_terms_are_refused_before_training(tmp_path):
    spec = load_policy_spec('simreal_arm_reach')
    data = yaml.safe_load(spec.source.read_text())
    data['observation'].append({'term': 'image', 'camera': 'camera', 'size': [8, 8]})
    (tmp_path / 'seeing.yaml').write_text(yaml.safe_dump(data))
    cfg = load_train_config('simreal_arm_reach', **QUICK)
    cfg = replace(cfg, policy=str(tmp_path / 'seeing.yaml'))
    # not the visual reach spec: no trainer for it, the visual one named for what it trains
    with pytest.raises(ConfigError, match=re.escape(
            'simreal train does not train image terms; `python -m '
            'simreal_ros.policy.visual_train` trains simreal_arm_visual_reach only')) as info:
        train(cfg, tmp_path / 'out', log=lambda _l: None)
    assert info.value.key == 'observation' and info.value.got == ['image: camera']
    assert not (tmp_path / 'out').exists()


@pytest.mark.e2e
def test_simreal_train_runs_the_visual_trainer_for_the_visual_spec(tmp_path, simreal_cli):
    out = tmp_path / 'vis'
    r = simreal_cli('train', 'simreal_arm_visual_reach', '--quick', '--out', str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == [
        'simreal_arm_visual_reach.pt', 'simreal_arm_visual_reach.training.json',
        'simreal_arm_visual_reach.yaml']
    record = json.loads((out / 'simreal_arm_visual_reach.training.json').read_text())
    assert (record['config']['rounds'], record['config']['envs']) == (1, 2)
    spec = load_policy_spec(out / 'simreal_arm_visual_reach.yaml')
    model = load_model(out / 'simreal_arm_visual_reach.pt', spec.obs_dim, spec.act_dim,
                       image_shape=spec.image_shape)
    assert model.image_shape == (3, 48, 64)


@pytest.mark.parametrize(('flag', 'value', 'line'), [
    ('--overlay', 'worn_arm', '--overlay: the visual trainer trains on the nominal arm under '
     'domain randomization; it takes no overlay'),
    ('--envs', '0', '--envs 0: expected an integer >= 1'),
])
def test_bad_visual_train_options_are_one_line(tmp_path, simreal_cli, flag, value, line):
    r = simreal_cli('train', 'simreal_arm_visual_reach', '--out', str(tmp_path / 'o'), flag,
                    value)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f'simreal train: error: {line}'], r.stderr
    assert not (tmp_path / 'o').exists()
