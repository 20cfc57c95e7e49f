"""Sweep benchmark: how fast sweep cells run, next to their floors, measured side by side.

* ``cell_kinds``: one eval cell of ``simreal_arm_reach`` (nominal, MuJoCo) run in this process
  as a sweep cell runs (:func:`simreal_ros.sweep.evaluate.run_eval_cell`: in-process, lockstep
  with the network, no ROS): episodes per second per core (on the process's CPU time) and its
  real-time factor (simulated over wall seconds), next to the **raw physics floor**: MuJoCo
  stepping the same robot with nothing else (``raw_step_rate``), turned into the episodes/s
  and real-time factor the same simulated time would take with physics alone; the ratio is
  what the policy, the latency model and the observation building cost (alternating, three
  rounds, the medians). And the ``lockstep``
  kind, the ROS sim bridge in ``timing_mode:=lockstep`` at 50 Hz with a stand-in controller
  doing one topic round trip per tick (bench/sim_bridge.py's measurement): real-time factor
  and round trip per tick.
* ``workers``: a grid of 64 cells of 10 episodes (8 of 2 in ``--quick``) on 2 local worker
  processes against 1, alternating, three rounds (one in ``--quick``): the whole command's
  wall time (spawn and imports included, what a user waits for) and the steady throughput
  (cells per second between the first and the last cell's end), the ratio of each round's
  pair and their median (target >= 1.7 on 2 cores), with the 1-minute load average.
* ``ray``: 24 cells of 10 episodes (6 of 2) on a loopback-only local Ray instance with 1 CPU
  against 1 local worker, alternating, twice each (once): on one worker the span between
  the first and the last cell's end is the later cells' own times plus the gaps between them
  (dispatch, result transfer); the per-cell overhead is Ray's gap minus the local gap, over
  the local path's per-cell period (target <= 5 %). Measured as a gap because the cells' own
  times move with the host's load (by 1.3x between two runs) more than the paths differ. The
  ratio of the plain periods and the instance's start-up are reported apart.

Every run of a path is in a fresh output directory (no resume). Figures move with the host's
load (the machine is shared): ratios are measured in one run, back to back.
"""

from __future__ import annotations

from dataclasses import asdict
import datetime as dt
import os
from pathlib import Path
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _load import context, ratio  # noqa: E402

from simreal_ros.core.robot import load_robot  # noqa: E402
from simreal_ros.sweep.config import Cell, EvalSettings, Sweep  # noqa: E402
from simreal_ros.sweep.runner import Outcome, run_sweep  # noqa: E402

POLICY = 'simreal_arm_reach'


def grid(n: int, episodes: int) -> Sweep:
    """``n`` cells of the reach policy: no latency and ``usb_serial``, replicates 0..n/2-1."""
    ev = EvalSettings(episodes=episodes)
    robot = load_robot('simreal_arm').name
    cells = tuple(Cell(kind='eval', policy=POLICY, robot=robot, overlay='', engine='mujoco',
                       latency=lat, randomization='', seed=i, **asdict(ev), sweep_seed=0)
                  for i in range((n + 1) // 2) for lat in ('', 'usb_serial'))[:n]
    return Sweep(__file__, 'bench', 0, 0, ev, cells)


def _end_s(row: dict[str, Any]) -> float:
    return dt.datetime.fromisoformat(row['end_utc']).timestamp()


def _run(sweep: Sweep, tmp: Path, tag: str, **kw: Any) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix=tag, dir=tmp))
    with open(os.devnull, 'w', encoding='utf-8') as devnull:
        t0 = time.monotonic()
        o: Outcome = run_sweep(sweep, out, progress_stream=devnull, **kw)
        wall = time.monotonic() - t0
    if o.failed:
        raise RuntimeError(f'{o.failed} cells failed: {o.rows[0].get("error")}')
    rows = sorted(o.rows, key=_end_s)
    period = (_end_s(rows[-1]) - _end_s(rows[0])) / (len(rows) - 1)
    own = sum(r['wall_time_s'] for r in rows[1:]) / (len(rows) - 1)
    # on one worker the span from the first cell's end to the last's is the later cells' own
    # times plus what lies between them (dispatch, result transfer): the per-cell gap
    return {'wall_s': wall, 'cells': len(rows), 'steady_period_s': period,
            'cell_own_time_mean_s': own, 'per_cell_gap_s': period - own}


def cell_kinds(quick: bool) -> dict[str, Any]:
    """One in-process cell next to the raw physics floor; the ROS lockstep bridge."""
    from simreal_ros.policy.spec import load_policy_spec
    from simreal_ros.sim.engines import make_sim
    from simreal_ros.sweep.evaluate import run_eval_cell
    episodes = 4 if quick else 10
    cell = grid(1, episodes).cells[0]
    run_eval_cell(grid(1, 1).cells[0])  # imports, torch and MuJoCo warm
    robot = load_robot(cell.robot)
    spec = load_policy_spec(POLICY)
    tick_s = max(1, round(1.0 / (spec.control_rate_hz * robot.timestep_s))) * robot.timestep_s
    sim = make_sim(robot)
    rounds: list[dict[str, float]] = []
    # alternating, three rounds, the median: the host's load moved the floor 2.6x between runs
    for _ in range(3):
        c0, w0 = time.process_time(), time.monotonic()
        res = run_eval_cell(cell)
        cpu, wall = time.process_time() - c0, time.monotonic() - w0
        steps_s = sim.raw_step_rate(2000 if quick else 20000)
        sim_s = res['control_periods'] * tick_s
        floor_eps_s = steps_s * robot.timestep_s / (sim_s / episodes)
        rounds.append({'wall_s': wall, 'cpu_s': cpu, 'simulated_s': sim_s,
                       'mujoco_steps_s': steps_s,
                       'episodes_per_s_per_core': episodes / cpu,
                       'floor_episodes_per_s_per_core': floor_eps_s,
                       'over_floor': episodes / cpu / floor_eps_s})

    def med(key: str) -> float:
        return float(np.median([r[key] for r in rounds]))

    sim_s = rounds[0]['simulated_s']
    out: dict[str, Any] = {
        'in_process': {'episodes': episodes, 'simulated_s': sim_s, 'wall_s': med('wall_s'),
                       'cpu_s': med('cpu_s'),
                       'episodes_per_s_per_core': med('episodes_per_s_per_core'),
                       'real_time_factor': sim_s / med('wall_s'),
                       'real_time_factor_cpu': sim_s / med('cpu_s')},
        'physics_floor': {'mujoco_steps_s': med('mujoco_steps_s'),
                          'timestep_s': robot.timestep_s,
                          'episodes_per_s_per_core': med('floor_episodes_per_s_per_core'),
                          'real_time_factor': med('mujoco_steps_s') * robot.timestep_s},
        'in_process_over_floor': med('over_floor'), 'rounds': rounds,
    }
    out['lockstep_ros'] = _lockstep(2.0 if quick else 6.0)
    return out


def _lockstep(seconds: float) -> dict[str, Any]:
    """bench/sim_bridge.py's lockstep measurement (a 50 Hz controller over a topic)."""
    import runpy
    sb = runpy.run_path(str(Path(__file__).resolve().parent / 'sim_bridge.py'))
    from simreal_ros.core.netenv import bench_domain, ros_env
    from simreal_ros.ros.client import RosClient
    domain = bench_domain(9)
    env = ros_env(discovery='localhost', domain_id=domain)
    client = RosClient(domain, 'bench_sweep')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return dict(sb['lockstep_mode'](client, env, Path(tmp), seconds))
    finally:
        client.close()


def workers(quick: bool, tmp: Path) -> dict[str, Any]:
    """The grid on 1 and on 2 local workers (1, 2, 1, 2 in the full form)."""
    sweep = grid(8 if quick else 64, 2 if quick else 10)
    runs: dict[str, list[dict[str, Any]]] = {'1': [], '2': []}
    load = [os.getloadavg()[0]]
    for _ in range(1 if quick else 3):
        for w in ('1', '2'):
            runs[w].append(_run(sweep, tmp, f'w{w}', workers=int(w)))
            load.append(os.getloadavg()[0])
    # the ratio of each round's back-to-back pair; the median over the rounds (the host's
    # load moves between rounds: 1-worker runs of this grid took 36 and 55 s in one run)
    wall = [ratio(a['wall_s'], b['wall_s']) for a, b in zip(runs['1'], runs['2'], strict=True)]
    steady = [ratio(a['steady_period_s'], b['steady_period_s'])
              for a, b in zip(runs['1'], runs['2'], strict=True)]
    return {'cells': len(sweep.cells), 'episodes_per_cell': sweep.eval.episodes, 'runs': runs,
            'speedup_wall_per_round': wall, 'speedup_wall': float(np.median(wall)),
            'speedup_steady_per_round': steady, 'speedup_steady': float(np.median(steady)),
            'target_speedup': 1.7, 'load_average_1min': load}


def ray_overhead(quick: bool, tmp: Path) -> dict[str, Any]:
    """Per-cell period on a 1-CPU loopback Ray instance against 1 local worker."""
    from simreal_ros.sweep.runner import start_local_ray
    sweep = grid(6 if quick else 24, 2 if quick else 10)
    t0 = time.monotonic()
    start_local_ray(1)
    startup = time.monotonic() - t0
    import ray
    runs: dict[str, list[dict[str, Any]]] = {'local': [], 'ray': []}
    try:
        for _ in range(1 if quick else 2):
            runs['local'].append(_run(sweep, tmp, 'local', workers=1))
            runs['ray'].append(_run(sweep, tmp, 'ray', workers=1, ray_address='local'))
    finally:
        ray.shutdown()
    def mean(key: str, path: str) -> float:
        return float(np.mean([r[key] for r in runs[path]]))

    own = mean('cell_own_time_mean_s', 'local')
    gap = {k: mean('per_cell_gap_s', k) for k in runs}
    return {'cells': len(sweep.cells), 'episodes_per_cell': sweep.eval.episodes,
            'ray_startup_s': startup, 'runs': runs, 'per_cell_gap_s': gap,
            # Ray's extra time between cells over the local path's whole per-cell period: the
            # cells' own times move with the host's load (by 1.3x between these runs), the
            # time between them is the path's
            'per_cell_overhead': (gap['ray'] - gap['local']) / (own + gap['local']),
            'period_ratio_minus_1': ratio(mean('steady_period_s', 'ray'),
                                          mean('steady_period_s', 'local')) - 1.0,
            'target_overhead': 0.05}


def run(quick: bool = False) -> dict[str, Any]:
    """Measure the three figures; return them with the load they ran under."""
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    ctx = context(0, False)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        out = {'cell_kinds': cell_kinds(quick), 'workers': workers(quick, tmp),
               'ray': ray_overhead(quick, tmp)}
    return {**out, **ctx, 'load_average_1min_at_end': os.getloadavg()[0]}


if __name__ == '__main__':
    import argparse
    import json
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    print(json.dumps(run(ap.parse_args().quick), indent=2))
