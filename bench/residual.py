"""The learned residual's per-step cost, side by side with the plain physics step.

One run, one process, interleaved rounds (so a loaded host slows every variant alike):

* ``plain``: ``SimBackend.step(1)`` of simreal_arm without a residual (MuJoCo, 1 kHz);
* ``residual_numpy``: the same with a torque residual named in the overlay (the sim's path:
  the numpy MLP of :mod:`simreal_ros.core.residual_model`, evaluated before every step);
* ``torchscript``: the residual file's TorchScript module called on one feature row under
  ``torch.no_grad`` with one thread (the alternative per-step path), without the step;
* ``numpy_call``: the numpy MLP alone on one row.

Figures: microseconds per step or call, the residual's added cost per step
(``residual_numpy - plain``), and the ratios ``residual_over_plain`` and
``torchscript_over_numpy``. The residual has random weights of the trained size; its cost
does not depend on what it learned.
"""

from __future__ import annotations

from pathlib import Path
import tempfile
import time
from typing import Any

import numpy as np
import torch

from simreal_ros.core.dynamics import load_overlay
from simreal_ros.core.residual_model import load_residual
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.engines import make_sim
from simreal_ros.sysid.residual_fit import HIDDEN, ResidualNet, make_header, save_residual


def _residual(d: Path) -> Path:
    robot = load_robot('simreal_arm')
    (d / 'nominal.yaml').write_text('robot: simreal_arm\n', encoding='utf-8')
    n = robot.n
    torch.manual_seed(0)
    net = ResidualNet(torch.zeros(4 * n), torch.ones(4 * n), torch.full((4 * n,), -10.0),
                      torch.full((4 * n,), 10.0), torch.full((n,), 0.05), HIDDEN)
    save_residual(d / 'res.pt', net, make_header(robot, load_overlay(d / 'nominal.yaml'),
                                                 'torque', net, 0, {}))
    (d / 'with.yaml').write_text('robot: simreal_arm\nresidual: res.pt\n', encoding='utf-8')
    return d / 'res.pt'


def _per_call_us(fn: Any, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def run(quick: bool = False) -> dict[str, Any]:
    """Measure the per-step cost of the residual against the plain step (see the docstring)."""
    torch.set_num_threads(1)
    robot = load_robot('simreal_arm')
    calls = 500 if quick else 3000
    rounds = 3 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        path = _residual(d)
        plain = make_sim(robot, overlay=load_overlay(d / 'nominal.yaml'))
        with_r = make_sim(robot, overlay=load_overlay(d / 'with.yaml'))
        model = load_residual(path)
        ts = torch.jit.load(str(path))  # type: ignore[no-untyped-call]
        row = np.zeros(4 * robot.n)
        row_t = torch.zeros(1, 4 * robot.n)

        def torch_call() -> None:
            with torch.no_grad():
                ts(row_t)

        variants = {'plain': lambda: plain.step(1), 'residual_numpy': lambda: with_r.step(1),
                    'torchscript': torch_call, 'numpy_call': lambda: model.predict(row)}
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(rounds):
            for name, fn in variants.items():
                samples[name].append(_per_call_us(fn, calls))
    us = {k: float(np.median(v)) for k, v in samples.items()}
    return {
        'us_per_step': {'plain': us['plain'], 'residual_numpy': us['residual_numpy']},
        'us_per_call': {'numpy_call': us['numpy_call'], 'torchscript': us['torchscript']},
        'residual_added_us_per_step': us['residual_numpy'] - us['plain'],
        'residual_over_plain': us['residual_numpy'] / us['plain'],
        'torchscript_over_numpy': us['torchscript'] / us['numpy_call'],
        'hidden': HIDDEN, 'calls': calls, 'rounds': rounds,
        'physics_step_budget_us': robot.timestep_s * 1e6,
    }


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
