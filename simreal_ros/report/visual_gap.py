"""Closed-loop perception-gap curves of a visuomotor policy: task success against image harm.

``python -m simreal_ros.report.visual_gap --out FILE.json MODEL.pt [MODEL.pt ...]
[--episodes N] [--seed S] [--axis AXIS [--levels L ...]]`` runs each
TorchScript network of the ``simreal_arm_visual_reach`` spec (the node's preprocess and model
loader) on the reach task of :mod:`simreal_ros.policy.visual_task` while every frame it sees
is harmed by one of the latency injector's image perturbations at increasing strength, and
reports the task's success rate and final error per level (the open-loop counterpart for an
image model is ``simreal perception-gap``).

Levels are given for the camera's 640x480 frame, as a user writes them in a latency preset;
the task renders at 128x96 (the lens binned 5x) and harms that frame, so a blur sigma and a
noise std are divided by 5 there (a 5x5 bin averages 25 pixels: independent noise falls by
5); the exposure gain is the same at any size; image latency delays the frames by
``round(latency_s / 0.02)`` more control periods. JPEG is left out: its artefacts do not
scale with the resolution. The worlds are nominal (no domain, latency or visual
randomization), the same seeded episodes at every level, so a curve differs only by the
perturbation. Blur, noise and exposure are the injector's own code
(:func:`simreal_ros.report.perception_gap.perturb_frame`).

The JSON holds, per model path, one row per point: the baseline (axis ``baseline``, level 0)
and then each level of each axis (all of :data:`AXES`, or ``--axis`` alone, at its own levels
or ``--levels``), each with :func:`simreal_ros.policy.visual_train.evaluate`'s figures and
``time_s``. An unknown axis, a level list without an axis, fewer than one episode or a
missing model file is one ``error:`` line (exit status 2) before anything runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys
import time
from typing import Any, Sequence

import numpy as np

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError, PolicyError, SimrealError
from simreal_ros.latency.injection import ImageEffects
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.visual_task import ReachTask, TargetCamera
from simreal_ros.policy.visual_train import EXPERT, POLICY, evaluate, make_worlds, node_policy
from simreal_ros.report.perception_gap import perturb_frame

#: axis -> levels at 640x480 (the first is the unharmed baseline, shared by every axis)
AXES: dict[str, tuple[float, ...]] = {
    'exposure_ev': (-2.0, -1.0, 1.0, 2.0),
    'noise_std': (20.0, 40.0, 80.0),
    'blur_sigma_px': (4.0, 8.0, 16.0),
    'latency_s': (0.1, 0.2),
}
#: 640x480 -> the task's 128x96 render
BIN = 5.0


def effects(axis: str, level: float) -> ImageEffects | None:
    """Return the injector's effect of ``level`` on the 128x96 render (module doc)."""
    if axis == 'exposure_ev':
        return ImageEffects(gain=2.0 ** level)
    if axis == 'noise_std':
        return ImageEffects(noise_std=level / BIN)
    if axis == 'blur_sigma_px':
        return ImageEffects(blur_sigma_px=level / BIN)
    return None


def curves(model_paths: Sequence[Path], episodes: int = 8, seed: int = 9000,
           axes: dict[str, tuple[float, ...]] | None = None) -> dict[str, Any]:
    """Run every model at the baseline and every level of every axis (module doc).

    Raises :class:`ConfigError` for an axis not in :data:`AXES` or ``episodes < 1`` and
    :class:`PolicyError` for a model file that does not exist, before any episode runs.
    """
    for axis in (axes or {}):
        if axis not in AXES:
            raise ConfigError('visual_gap', 'axis', f'one of {", ".join(AXES)}', axis)
    if episodes < 1:
        raise ConfigError('visual_gap', 'episodes', 'at least 1', episodes)
    for path in model_paths:
        if not Path(path).is_file():
            raise PolicyError(f'{path}: model file not found')
    spec = load_policy_spec(POLICY)
    expert = load_policy_spec(EXPERT)
    robot = load_robot(spec.robot)
    task = ReachTask(robot)
    camera = TargetCamera(robot)
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {'episodes': episodes, 'seed': seed, 'models': {}}
    points = [('baseline', 0.0)] + [(a, lv) for a, levels in (axes or AXES).items()
                                    for lv in levels]
    try:
        for path in model_paths:
            rows = []
            for axis, level in points:
                fx = effects(axis, level) if axis != 'baseline' else None

                def harmed(img: Any, _fx: ImageEffects | None = fx) -> Any:
                    return img if _fx is None else perturb_frame(img, _fx, rng)
                camera.harm = harmed
                worlds = make_worlds(spec, expert, camera, task,
                                     [seed + i for i in range(episodes)], False, False)
                delay = int(round(level / 0.02)) if axis == 'latency_s' else 0
                for w in worlds:
                    w.extra_delay_periods = delay
                t0 = time.monotonic()
                res = evaluate(worlds, node_policy(spec, Path(path), episodes), episodes)
                rows.append({'axis': axis, 'level': level, **res,
                             'time_s': time.monotonic() - t0})
                print(f'{Path(path).name} {axis} {level:g}: {res["successes"]}/{episodes}, '
                      f'final error median {res["final_error_median_m"] * 100:.1f} cm',
                      flush=True)
            out['models'][str(path)] = rows
    finally:
        camera.close()
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line (module doc)."""
    p = argparse.ArgumentParser(prog='python -m simreal_ros.report.visual_gap')
    p.add_argument('models', nargs='+', type=Path)
    p.add_argument('--out', required=True, type=Path)
    p.add_argument('--episodes', type=int, default=8)
    p.add_argument('--seed', type=int, default=9000, help='first episode seed [default: 9000]')
    p.add_argument('--axis', default=None, help=f'one perturbation only ({", ".join(AXES)}) '
                   '[default: all]')
    p.add_argument('--levels', type=float, nargs='+', default=None,
                   help="the axis' levels at 640x480 [default: the built-in ones]")
    a = p.parse_args(argv)
    try:
        if a.levels is not None and a.axis is None:
            raise ConfigError('visual_gap', 'levels', 'an --axis to apply them to', a.levels)
        axes = None if a.axis is None else {a.axis: tuple(a.levels or AXES.get(a.axis, ()))}
        import torch
        torch.set_num_threads(1)
        result = curves(a.models, a.episodes, a.seed, axes)
    except SimrealError as exc:
        print(f'{p.prog}: error: {exc}', file=sys.stderr)
        return 2
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + '\n', encoding='utf-8')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
