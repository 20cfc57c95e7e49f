"""``simreal eval`` for a locomotion policy (a spec whose robot has a floating base).

A locomotion policy is evaluated in-process on ``sim`` (one engine, ``--engine``) or
``sim2sim`` (MuJoCo and PyBullet side by side,
:func:`~simreal_ros.policy.locomotion_eval.evaluate`), or on ``real``: the virtual legged robot
over ROS (:mod:`simreal_ros.jobs.locomotion_real`). Seeded 20 s episodes with pushes, forward
0.4 m/s then turning; the figures are :mod:`simreal_ros.policy.locomotion_eval`'s. The settings
are the arm evaluation's :class:`~simreal_ros.jobs.eval.EvalSettings`; this module sits beside
:mod:`simreal_ros.jobs.eval` (which evaluates goal-reaching policies over ROS) so that the
ROS-side locomotion evaluation can use that module's stack without an import cycle.
"""

from __future__ import annotations

from dataclasses import asdict
import math
import time
from typing import Any, Callable, Mapping

from simreal_ros.core.robot import load_robot
from simreal_ros.errors import SimrealError
from simreal_ros.jobs.eval import EvalSettings
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.sim.bridge_config import ENGINES


def is_locomotion(policy: str) -> bool:
    """Return True when ``policy``'s robot has a floating base (a locomotion policy).

    A spec that does not load is not one: the planner then names the reason, as ``policy:=``.
    """
    try:
        return load_robot(load_policy_spec(policy).robot).floating
    except SimrealError:
        return False


def run_locomotion_eval(s: EvalSettings, log: Callable[[str], None] = print,
                        env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Evaluate a locomotion policy on sim, sim2sim or real (the module docstring).

    ``real``: on the virtual legged robot over ROS in ``env`` (:mod:`.locomotion_real`).
    """
    from simreal_ros.policy.locomotion_eval import evaluate, network_policy
    if s.backend not in ('sim', 'sim2sim', 'real'):
        raise SimrealError(f'--backend {s.backend}: a locomotion policy ({s.policy}) is '
                           'evaluated on sim, sim2sim or real (the virtual legged robot)')
    if not (math.isfinite(s.episode_s) and s.episode_s > 0):
        raise SimrealError(f'--episode-s {s.episode_s!r}: expected a number of seconds > 0')
    if not (math.isfinite(s.push_force_n) and s.push_force_n >= 0):
        raise SimrealError(f'--push-force {s.push_force_n!r}: expected a force >= 0 (N)')
    if s.backend == 'real':
        from simreal_ros.jobs.locomotion_real import run_locomotion_real
        if env is None:
            raise SimrealError('a locomotion evaluation on real needs a ROS environment')
        return run_locomotion_real(s, env, log)
    if s.launch_args:
        raise SimrealError(f'{sorted(s.launch_args)[0]}:= has no effect on a locomotion '
                           f'evaluation on {s.backend} (it runs in-process, without the ROS '
                           f'stack)')
    spec = load_policy_spec(s.policy)
    engines = list(ENGINES) if s.backend == 'sim2sim' else [s.engine]
    t0 = time.monotonic()
    by_engine = {}
    for engine in engines:
        log(f'{spec.name} on {engine}: {s.episodes} episodes of {s.episode_s:g} s, pushes '
            f'up to {s.push_force_n:g} N')
        by_engine[engine] = evaluate(spec, network_policy(spec), engine, s.episodes, s.seed,
                                     s.episode_s, s.push_force_n, log)
    ref = by_engine[engines[0]]
    out: dict[str, Any] = {'settings': asdict(s), 'metrics': ref['metrics'],
                           'episodes': ref['episodes']}
    if len(engines) > 1:
        from simreal_ros.jobs.locomotion_real import ratios
        out['by_engine'] = {e: r['metrics'] for e, r in by_engine.items()}
        out['episodes_by_engine'] = {e: r['episodes'] for e, r in by_engine.items()}
        out['sim2sim'] = {'reference': engines[0], 'other': engines[1],
                          **ratios(ref['metrics'], by_engine[engines[1]]['metrics'])}
    out['wall_time_s'] = time.monotonic() - t0
    return out


def format_locomotion(result: dict[str, Any]) -> str:
    """Return the locomotion evaluation as a short table, one row per engine or backend."""
    rows = result.get('by_engine') or {result['settings']['engine']: result['metrics']}
    lines = [f'{"engine":<10} {"success":>8} {"falls":>6} {"track m/s":>10} '
             f'{"instant m/s":>12} {"yaw rad/s":>10} {"dist m":>7} {"J/m":>7}']
    for e, m in rows.items():
        lines.append(f'{e:<10} {m["success_rate"]:>8.0%} {m["falls"]:>6d} '
                     f'{m["velocity_tracking_error_mps"]:>10.3f} '
                     f'{m["velocity_tracking_error_instant_mps"]:>12.3f} '
                     f'{m["yaw_rate_error_rad_s"]:>10.3f} {m["distance_m"]:>7.2f} '
                     f'{m["energy_per_m"]:>7.1f}')
    for key in ('sim2sim', 'real_vs_sim'):
        if key not in result:
            continue
        r = result[key]
        lines.append(f'{r["other"]} / {r["reference"]}: success x{r["success_ratio"]:.2f}, '
                     f'tracking error x{r["tracking_error_ratio"]:.2f}')
    if 'ground_truth' in result:
        m = result['metrics']
        lines.append(f'real: the virtual legged robot over ROS; velocities, distance and energy '
                     f'from {result["ground_truth"]}'
                     + (f'; stood up {m["stand_ups"]} times after a fall' if m['stand_ups']
                        else ''))
    return '\n'.join(lines)
