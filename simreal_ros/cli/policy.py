"""``simreal train``, ``simreal eval`` and ``simreal perception-gap``.

The example policy, trained in MuJoCo, run over ROS; an image model's perception-gap curves.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from simreal_ros.cli.common import launch_parser
from simreal_ros.errors import SimrealError


def cmd_train(ns: argparse.Namespace) -> int:
    """Train a policy spec's network (seeded); write the model, spec copy and summary."""
    from pathlib import Path

    from simreal_ros.errors import ConfigError
    from simreal_ros.policy import locomotion_train as loco
    from simreal_ros.policy.train import (
        OVERRIDE,
        QUICK,
        VISUAL_POLICY,
        load_train_config,
        train,
    )
    if ns.config == VISUAL_POLICY:
        return _train_visual(ns)
    if loco.is_locomotion(ns.config):  # a floating-base robot: the gait expert's DAgger
        return _train_locomotion(ns)
    overrides = {'seed': ns.seed, 'iterations': ns.iterations, 'envs': ns.envs,
                 'overlay': ns.overlay}
    if ns.quick:
        overrides.update(QUICK)
    try:
        cfg = load_train_config(ns.config, **overrides)
    except ConfigError as exc:
        if exc.source != OVERRIDE:
            raise
        raise SimrealError(f'--{exc.key.replace("_", "-")} {exc.got!r}: expected '
                           f'{exc.expected}') from None
    out = Path(ns.out or f'trained/{cfg.policy}')
    summary = train(cfg, out, log=lambda line: print(line, flush=True))
    if ns.json:
        print(json.dumps(summary))
    return 0


def _train_visual(ns: argparse.Namespace) -> int:
    """``simreal train simreal_arm_visual_reach``: the visual trainer (policy/visual_train.py).

    Its settings are :class:`VisualTrainConfig`'s (no training config file); ``--seed``,
    ``--iterations`` (DAgger rounds) and ``--envs`` override them, ``--quick`` is a 1-round,
    2-world run without the in-process check.
    """
    from dataclasses import replace
    from pathlib import Path

    from simreal_ros.policy.visual_train import VisualTrainConfig, train
    if ns.overlay is not None:
        raise SimrealError('--overlay: the visual trainer trains on the nominal arm under '
                           'domain randomization; it takes no overlay')
    for flag, v, least in (('--seed', ns.seed, 0), ('--iterations', ns.iterations, 1),
                           ('--envs', ns.envs, 1)):
        if v is not None and v < least:
            raise SimrealError(f'{flag} {v}: expected an integer >= {least}')
    cfg = VisualTrainConfig()
    if ns.quick:
        cfg = replace(cfg, rounds=1, envs=2, episode_s=0.5, epochs=1, polish_epochs=1,
                      eval_episodes=0)
    cfg = replace(cfg, seed=ns.seed if ns.seed is not None else cfg.seed,
                  rounds=ns.iterations or cfg.rounds, envs=ns.envs or cfg.envs)
    out = Path(ns.out or f'trained/{cfg.policy}')
    summary = train(cfg, out, log=lambda line: print(line, flush=True))
    if ns.json:
        print(json.dumps(summary))
    return 0


def _train_locomotion(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from simreal_ros.errors import ConfigError
    from simreal_ros.policy import locomotion_train as loco
    from simreal_ros.policy.train import OVERRIDE
    if ns.overlay is not None:
        raise SimrealError('--overlay: the locomotion trainer trains on the nominal model')
    overrides = {'seed': ns.seed, 'rounds': ns.iterations, 'envs': ns.envs}
    if ns.quick:
        overrides.update(loco.QUICK)
    try:
        cfg = loco.load_loco_config(ns.config, **overrides)
    except ConfigError as exc:
        if exc.source != OVERRIDE:
            raise
        flag = {'rounds': 'iterations'}.get(exc.key, exc.key).replace('_', '-')
        raise SimrealError(f'--{flag} {exc.got!r}: expected {exc.expected}') from None
    out = Path(ns.out or f'trained/{cfg.policy}')
    summary = loco.train(cfg, out, log=lambda line: print(line, flush=True))
    if ns.json:
        print(json.dumps(summary))
    return 0


def cmd_eval(ns: argparse.Namespace) -> int:
    """Run seeded goal episodes through the ROS stack and report success, times, errors."""
    from simreal_ros.bringup.planner import parse_cli_args
    from simreal_ros.core.netenv import ros_env
    from simreal_ros.jobs import locomotion as job
    from simreal_ros.jobs.eval import EvalSettings, run_eval
    from simreal_ros.report.eval_results import compare, format_report, load_result
    extra = parse_cli_args(ns.args)
    if job.is_locomotion(ns.policy):  # in-process per engine, or on the virtual legged robot
        settings = EvalSettings(backend=ns.backend, engine=ns.engine, policy=ns.policy,
                                episodes=ns.episodes, seed=ns.seed, launch_args=extra,
                                episode_s=ns.episode_s, push_force_n=ns.push_force,
                                reality=ns.reality)
        log = (lambda line: print(line, file=sys.stderr, flush=True)) if ns.json else \
            (lambda line: print(line, flush=True))
        env = None
        if settings.backend == 'real':  # over ROS on the virtual legged robot
            env = ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
            os.environ.update(env)
        result = job.run_locomotion_eval(settings, log, env)
        print(json.dumps(result) if ns.json else job.format_locomotion(result), flush=True)
        return 0
    for key in ('backend', 'engine', 'policy', 'policy_autostart', 'excite'):
        if key in extra:
            raise SimrealError(f'{key}:= is set by simreal eval itself; use '
                               f'--backend/--engine/--policy')
    settings = EvalSettings(backend=ns.backend, engine=ns.engine, policy=ns.policy,
                            episodes=ns.episodes, seed=ns.seed, tolerance_rad=ns.tolerance,
                            goal_timeout_s=ns.timeout, reality=ns.reality,
                            launch_args=extra)
    other = load_result(ns.compare) if ns.compare else None
    env = ros_env(discovery=ns.discovery, domain_id=ns.domain_id)
    os.environ.update(env)
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if ns.json else \
        (lambda line: print(line, flush=True))
    result = run_eval(settings, env, log=log)
    gap = compare(result, other) if other is not None else None
    if gap is not None:
        result['gap'] = gap
    print(json.dumps(result) if ns.json else format_report(result, gap), flush=True)
    return 0


def cmd_perception_gap(ns: argparse.Namespace) -> int:
    """Perception-gap curves of an image model: one HTML report (and JSON rows)."""
    from pathlib import Path

    from simreal_ros.core.robot import load_robot
    from simreal_ros.report.perception_gap import (
        AXES,
        render_target_episodes,
        run_curves,
        table,
        torchscript_model,
        write_html,
    )
    from simreal_ros.sim.scene import load_scene
    if ns.episodes < 1:
        raise SimrealError(f'--episodes {ns.episodes}: expected an integer >= 1')
    if not ns.tolerance_px > 0:
        raise SimrealError(f'--tolerance-px {ns.tolerance_px}: expected a number of px > 0')
    axes = ns.axes or list(AXES)
    for a in axes:
        if a not in AXES:
            raise SimrealError(f'--axes {a!r}: expected some of {", ".join(AXES)}')
    size = None
    if ns.size:
        w, sep, h = ns.size.partition('x')
        if not (sep and w.isdigit() and h.isdigit() and int(w) > 0 and int(h) > 0):
            raise SimrealError(f'--size {ns.size!r}: expected WIDTHxHEIGHT in px, e.g. 160x120')
        size = (int(w), int(h))
    if not Path(ns.model).is_file():
        raise SimrealError(f'--model {ns.model}: no such file')
    model = torchscript_model(ns.model)
    robot = load_robot(ns.robot)
    longest = max(AXES['latency_s'][0]) if 'latency_s' in axes else 0.0
    fps = robot.cameras[0].fps_hz if robot.cameras else 30.0
    steps = max(ns.steps, int(round(longest * fps)) + 1)
    print(f'rendering {ns.episodes} episodes x {steps} frames', file=sys.stderr, flush=True)
    eps = render_target_episodes(robot, load_scene(ns.scene), ns.object, ns.episodes, steps,
                                 ns.seed, size)
    points = run_curves(model, eps, ns.tolerance_px,
                        {a: AXES[a][0] for a in axes}, seed=ns.seed)
    h, w = eps.frames.shape[2:4]
    out = write_html(ns.out, points, ns.tolerance_px, {
        'model': ns.model, 'robot': ns.robot, 'camera': f'{eps.camera} at {w}x{h}',
        'scene / object': f'{ns.scene} / {ns.object}', 'episodes': ns.episodes,
        'seed': ns.seed})
    rows = table(points)
    if ns.json:
        print(json.dumps({'report': str(out), 'rows': rows}))
    else:
        for r in rows:
            print(f'{r["axis"]:>14} {r["level"]:>7g}  success {r["successes"]}/'
                  f'{r["episodes"]}  final error mean {r["final_error_mean_px"]:.2f} px')
        print(f'report: {out}')
    return 0


def add_commands(sub: Any) -> None:
    """Add this group's sub-commands to the ``simreal`` parser."""
    p = sub.add_parser('train', help='train a policy in MuJoCo (seeded, reproducible)',
                       description='train the network of a policy spec with the settings of '
                       'config/training/<name>.yaml (DAgger from a privileged teacher under '
                       "domain randomization and the latency presets' command/observation "
                       'routes)')
    p.add_argument('config', nargs='?', default='simreal_arm_reach',
                   help='training config: shipped name or path [default: simreal_arm_reach]; '
                   'simreal_arm_visual_reach runs the visual trainer (docs/policy.md)')
    p.add_argument('--out', default=None, help='output directory [default: trained/<policy>]')
    p.add_argument('--seed', type=int, default=None, help='override the config seed')
    p.add_argument('--iterations', type=int, default=None, help='override the DAgger rounds')
    p.add_argument('--envs', type=int, default=None, help='override the parallel worlds')
    p.add_argument('--overlay', default=None, help='train on this model overlay (an '
                   "identified sim, with its residual if it names one) [default: the config's]")
    p.add_argument('--quick', action='store_true', help='a seconds-long smoke run')
    p.add_argument('--json', action='store_true', help='print the summary as JSON at the end')
    p.set_defaults(func=cmd_train)
    p = launch_parser(sub, 'eval', 'run seeded goal episodes of a policy through the ROS '
                       'stack and report success rate, time to goal and tracking error; '
                       'a policy with image terms gets a ball placed per episode in the scene '
                       'its camera renders instead of a goal (sim, or real on the virtual '
                       'robot); extra name:=value arguments go to the planner (timing:=, '
                       'overlay:=, port:=, realtime:=true, ...)')
    p.add_argument('--backend', default='sim', choices=['sim', 'sim2sim', 'real', 'twin'],
                   help='what the robot is [default: sim]')
    p.add_argument('--engine', default='mujoco', choices=['mujoco', 'pybullet'],
                   help='physics engine of the sim bridges [default: mujoco]')
    p.add_argument('--policy', default='simreal_arm_reach',
                   help='policy spec name or path [default: simreal_arm_reach]')
    p.add_argument('--episodes', type=int, default=20, help='goal episodes [default: 20]')
    p.add_argument('--seed', type=int, default=0, help='seed of the goals [default: 0]')
    p.add_argument('--tolerance', type=float, default=0.05,
                   help='success: every joint within this many rad for 0.2 s [default: 0.05]; '
                   "a visuomotor policy uses its task's 3 cm around the ball's reach point")
    p.add_argument('--timeout', type=float, default=5.0,
                   help='seconds (ROS clock) per goal before it counts as missed [default: 5]')
    p.add_argument('--episode-s', type=float, default=20.0,
                   help='locomotion: seconds per episode [default: 20]')
    p.add_argument('--push-force', type=float, default=8.0,
                   help='locomotion: peak push force on the base, N (0: none) [default: 8]')
    p.add_argument('--reality', default='', metavar='OVERLAY',
                   help='hidden reality of the virtual servo bus that --backend real/twin '
                   'starts without port:= (overlay name or path) [default: nominal]')
    p.add_argument('--compare', default=None, metavar='RESULT.json',
                   help='a previous --json result of the same episodes: report |J - J_other|')
    p.add_argument('--json', action='store_true', help='print the result as JSON')
    p.set_defaults(func=cmd_eval)
    p = sub.add_parser('perception-gap', help="an image model's success against each image "
                       'perturbation of the injector at increasing strength (HTML curves)',
                       description='Render seeded episodes of a moving scene object on the '
                       "robot's camera and run a TorchScript image model (RGB (1, 3, H, W) in "
                       '[0, 1] -> (1, 2) pixel position) on them under blur, noise, exposure, '
                       'JPEG quality and image latency at increasing strength; success = the '
                       'final error within --tolerance-px. See docs/policy.md.')
    p.add_argument('--model', required=True, help='TorchScript file of the image model')
    p.add_argument('--robot', default='simreal_arm', help='robot spec [default: simreal_arm]')
    p.add_argument('--scene', default='tabletop', help='scene name or path [default: tabletop]')
    p.add_argument('--object', default='cube', help='free scene object the model must find '
                   '[default: cube]')
    p.add_argument('--episodes', type=int, default=10, help='episodes [default: 10]')
    p.add_argument('--steps', type=int, default=9, help='frames per episode (at least the '
                   'longest latency + 1) [default: 9]')
    p.add_argument('--seed', type=int, default=0, help='seed of the episodes [default: 0]')
    p.add_argument('--size', default='', metavar='WxH', help="render size (the camera's lens "
                   "scaled) [default: the camera's]")
    p.add_argument('--tolerance-px', type=float, default=2.0,
                   help='success: final error within this many px [default: 2]')
    p.add_argument('--axes', nargs='+', metavar='AXIS', help='blur_sigma_px noise_std '
                   'exposure_ev jpeg_quality latency_s [default: all]')
    p.add_argument('--out', default='perception_gap.html', help='the HTML report to write')
    p.add_argument('--json', action='store_true', help='print the rows as JSON')
    p.set_defaults(func=cmd_perception_gap)
