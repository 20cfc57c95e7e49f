"""A visuomotor policy's step: preprocessing a camera frame plus a small CNN, against 50 Hz.

One process, no ROS: :class:`simreal_ros.policy.control.PolicyController`, the policy node's
controller, steps a spec with the arm's vector terms and one image term (the simreal_arm
camera's 640x480 rgb8 frames, center crop 480x480, resized to 64x64 RGB, 2 frames stacked:
image input (1, 6, 64, 64)), and every step gets a new frame, so every step preprocesses one
(the worst case; a 30 fps camera under a 50 Hz loop gives a new frame every 1.7 steps).
The network: 4 conv layers (16, 32, 32, 32 channels, stride 2, 2, 2, 1) and a 2-layer head
on the conv features and the 24-value observation vector, random weights (the cost does not
depend on what it learned); TorchScript with ``torch.set_num_threads(1)`` and the same
network exported to ONNX, run in onnxruntime with one intra-op thread.

Figures per format, from the controller's own timing of each step (``StepResult``):
``preprocess`` (crop, resize, channel order, normalization, the stack), ``network`` (the
model call) and ``inference`` (their sum, what the node reports as ``inference_p50/p99_ms``),
p50 / p99 in ms, and ``p99_fraction_of_period`` (inference p99 / the 20 ms period).
"""

from __future__ import annotations

from pathlib import Path
import tempfile
from typing import Any

import numpy as np
import torch
import yaml

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.control import RUNNING, PolicyController
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import load_policy_spec

SIZE = 64
HISTORY = 2


class Cnn(torch.nn.Module):
    """4 conv layers and a 2-layer head on (conv features, observation vector)."""

    # runpy (simreal bench) names this module '<run_path>', which TorchScript cannot save
    __module__ = 'bench_policy_image'

    def __init__(self, channels: int, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.convs = torch.nn.Sequential(
            torch.nn.Conv2d(channels, 16, 5, stride=2), torch.nn.ReLU(),   # 30x30
            torch.nn.Conv2d(16, 32, 3, stride=2), torch.nn.ReLU(),         # 14x14
            torch.nn.Conv2d(32, 32, 3, stride=2), torch.nn.ReLU(),         # 6x6
            torch.nn.Conv2d(32, 32, 3, stride=1), torch.nn.ReLU(),         # 4x4
            torch.nn.Flatten())
        self.head = torch.nn.Sequential(torch.nn.Linear(32 * 4 * 4 + obs_dim, 128),
                                        torch.nn.ReLU(), torch.nn.Linear(128, act_dim))

    def forward(self, obs: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat([self.convs(images), obs], dim=1))


def _spec(d: Path, model: str) -> Path:
    reach = load_policy_spec('simreal_arm_reach')
    data = yaml.safe_load(reach.source.read_text())
    data.update(policy='bench_image', model=model, safety={'ramp_s': 0.0})
    data['observation'].append({'term': 'image', 'camera': 'camera', 'size': [SIZE, SIZE],
                                'crop': [480, 480], 'history': HISTORY, 'max_age_s': 1.0,
                                'mean': [0.485, 0.456, 0.406], 'std': [0.229, 0.224, 0.225]})
    path = d / f'{Path(model).stem}.yaml'
    path.write_text(yaml.safe_dump(data), encoding='utf-8')
    return path


def _pcts(ns: list[int]) -> dict[str, float]:
    a = np.asarray(ns, dtype=np.float64) / 1e6
    return {'p50_ms': float(np.percentile(a, 50)), 'p99_ms': float(np.percentile(a, 99))}


def _measure(spec_path: Path, steps: int) -> dict[str, Any]:
    robot = load_robot('simreal_arm')
    spec = load_policy_spec(spec_path, robot)
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1,
                       image_shape=spec.image_shape)
    c = PolicyController(spec, robot, model)
    period = spec.period_ns
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 256, (480, 640, 3), dtype=np.uint8) for _ in range(4)]
    q, v = robot.home.copy(), np.zeros(robot.n)
    t = period
    c.set_state(robot.joint_names, q, v, t)
    c.set_image(0, frames[0], 'rgb8', t)
    ok, why = c.enable(t)
    assert ok, why
    pre: list[int] = []
    net: list[int] = []
    total: list[int] = []
    for k in range(steps + 10):
        t += period
        c.set_state(robot.joint_names, q, v, t)
        c.set_image(0, frames[k % len(frames)], 'rgb8', t)
        r = c.step(t)
        if k < 10 or r.mode != RUNNING:  # warm-up: the ramp's end, the first calls
            continue
        assert r.model_ns > 0, r
        pre.append(r.preprocess_ns)
        net.append(r.model_ns)
        total.append(r.preprocess_ns + r.model_ns)
    inference = _pcts(total)
    return {'preprocess': _pcts(pre), 'network': _pcts(net), 'inference': inference,
            'p99_fraction_of_period': inference['p99_ms'] / (period / 1e6), 'steps': len(total)}


def run(quick: bool = False) -> dict[str, Any]:
    """Measure preprocessing + network per step, TorchScript and ONNX (see the docstring)."""
    torch.set_num_threads(1)
    steps = 100 if quick else 2000
    out: dict[str, Any] = {'image_input': [1, 3 * HISTORY, SIZE, SIZE], 'camera': '640x480 rgb8',
                           'period_ms': 20.0, 'torch_threads': 1}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        reach = load_policy_spec('simreal_arm_reach')
        torch.manual_seed(0)
        net = Cnn(3 * HISTORY, reach.obs_dim, reach.act_dim).eval()
        torch.jit.script(net).save(str(d / 'cnn.pt'))
        out['torchscript'] = _measure(_spec(d, 'cnn.pt'), steps)
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            out['onnx'] = 'onnxruntime not installed'
        else:
            torch.onnx.export(net, (torch.zeros(1, reach.obs_dim),
                                    torch.zeros(1, 3 * HISTORY, SIZE, SIZE)),
                              str(d / 'cnn.onnx'), dynamo=False, input_names=['obs', 'images'])
            out['onnx'] = _measure(_spec(d, 'cnn.onnx'), steps)
    return out


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
