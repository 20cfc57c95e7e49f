"""Perception-gap curves (simreal_ros/report/perception_gap.py) with a hand-made CNN.

The model is built here, deterministically: a 1x1 convolution scores each pixel by
R - 2G - 2B (red, not the arm's orange 1.0/0.5/0.0 nor the grey floor), a threshold keeps the
pixels scoring over 0.1 and the image moments of that mask give its centroid (u, v) in px;
exported to TorchScript and loaded as a user's model is. The expectations follow from that
construction and the perturbations, not from a run.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.report.perception_gap import (
    render_target_episodes,
    run_curves,
    table,
    torchscript_model,
    write_html,
)
from simreal_ros.sim.scene import load_scene

TOL_PX = 1.5
SIZE = (160, 120)
STEPS = 5  # latency up to 4 frames (0.133 s at 30 Hz)


def _localizer(path: Path) -> None:
    import torch

    class Localizer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.score = torch.nn.Conv2d(3, 1, 1)
            with torch.no_grad():
                self.score.weight[:] = torch.tensor([1.0, -2.0, -2.0]).reshape(1, 3, 1, 1)
                self.score.bias[:] = -0.1

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            m = (self.score(x) > 0).float()[0, 0]
            h, w = m.shape
            us = torch.arange(w, dtype=torch.float32)[None, :]
            vs = torch.arange(h, dtype=torch.float32)[:, None]
            n = m.sum()
            return torch.stack([(m * us).sum() / n, (m * vs).sum() / n])[None]

    torch.jit.script(Localizer()).save(str(path))


@pytest.fixture(scope='module')
def episodes(tmp_path_factory: pytest.TempPathFactory):
    scene = tmp_path_factory.mktemp('scene') / 'ball.yaml'
    scene.write_text(yaml.safe_dump({'floor': True, 'light': True, 'objects': [
        {'name': 'target', 'type': 'sphere', 'size': [0.02], 'pos': [0.22, 0.0, 0.02],
         'mass': 0.05, 'free': True, 'rgba': [0.9, 0.1, 0.1, 1.0]}]}))
    return render_target_episodes(load_robot('simreal_arm'), load_scene(scene), 'target',
                                  episodes=6, steps=STEPS, seed=3, size=SIZE)


def test_curves_break_where_the_model_says(episodes, tmp_path: Path) -> None:
    _localizer(tmp_path / 'localizer.pt')
    model = torchscript_model(tmp_path / 'localizer.pt')
    axes = {'noise_std': (0.0, 5.0, 40.0), 'exposure_ev': (0.0, 3.0),
            'blur_sigma_px': (0.0, 1.0), 'latency_s': (0.0, 0.033, 0.133)}
    points = run_curves(model, episodes, TOL_PX, axes, seed=1)
    by = {(p.axis, p.level): p for p in points}
    n = 6
    for axis in axes:  # unperturbed, the moments of the mask are the ball's projection
        assert by[(axis, 0.0)].successes == n, by[(axis, 0.0)].errors_px
    # 5 grey levels: the black sky needs R > 0.1 + ... = 5 sigma to score; 40: one sky pixel
    # in ~16 scores (G, B clipped to 0 and R > 0.1), hundreds against the ball's ~40
    assert by[('noise_std', 5.0)].successes == n
    assert by[('noise_std', 40.0)].successes == 0
    # +3 EV: the ball's green (~33) saturates with its red: no pixel scores, nothing found
    assert by[('exposure_ev', 3.0)].not_found == n
    # a blur of 1 px keeps the mask's centre (a symmetric kernel on a symmetric blob)
    assert by[('blur_sigma_px', 1.0)].successes == n
    # latency d frames: the model answers where the ball was d frames before the truth
    truth = episodes.truth_px
    for level, d in ((0.033, 1), (0.133, 4)):
        moved = np.hypot(*(truth[:, -1] - truth[:, -1 - d]).T)
        got = np.asarray(by[('latency_s', level)].errors_px)
        np.testing.assert_allclose(got, moved, atol=0.5)  # the clean error is under 0.5 px
    rows = table(points)
    assert [r['axis'] for r in rows][:3] == ['noise_std'] * 3
    out = write_html(tmp_path / 'gap.html', points, TOL_PX, {'model': 'localizer.pt'})
    text = out.read_text()
    assert text.count('<tr>') == len(points) + 1 and 'data:image/png;base64,' in text


def test_truth_is_the_pinhole_projection(episodes) -> None:
    # the ball moves 0.15 m/s: 5 mm a frame at 30 Hz, about 0.7 px at 160x120 and ~1 m
    step = np.hypot(*np.diff(episodes.truth_px, axis=1).reshape(-1, 2).T)
    assert step.min() > 0.3 and step.max() < 1.2
    assert math.isclose(episodes.fps_hz, 30.0)


@pytest.mark.parametrize('args, line', [
    (['--size', '16-12'], "--size '16-12': expected WIDTHxHEIGHT in px, e.g. 160x120"),
    (['--axes', 'fog'], "--axes 'fog': expected some of blur_sigma_px, noise_std"),
    (['--tolerance-px', '0'], '--tolerance-px 0.0: expected a number of px > 0'),
    (['--object', 'ball'], "--object 'ball': the scene has no free object 'ball'"),
])
def test_bad_perception_gap_input_is_one_line(simreal_cli, tmp_path: Path, args, line) -> None:
    from startup import cli_error_line
    _localizer(tmp_path / 'm.pt')
    r = simreal_cli('perception-gap', '--model', str(tmp_path / 'm.pt'), '--size', '32x24',
                    '--out', str(tmp_path / 'x.html'), *args)
    assert line in cli_error_line(r)


def test_missing_model_is_one_line_from_a_real_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    from startup import cli_error_line
    r = subprocess.run([sys.executable, '-m', 'simreal_ros', 'perception-gap', '--model',
                        str(tmp_path / 'none.pt')], capture_output=True, text=True,
                       timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert f'--model {tmp_path / "none.pt"}: no such file' in cli_error_line(r)
