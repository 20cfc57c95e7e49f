"""One ``eval`` cell: a policy's goal episodes, in-process and in lockstep, no ROS.

``simreal eval`` runs its episodes only through the ROS stack (the launched nodes); a sweep
cell runs them in :class:`simreal_ros.policy.env.World` instead, the one environment the
training uses: the sim bridge's physics (either engine, with the cell's overlay as the model
and its randomization drawn once from ``cell_seed``) wired to the policy through the latency
injector's routes (the cell's preset forced, seeded) and the policy spec's own observation
builder and action processor, stepped in lockstep with the network (one control period per
``apply``). What differs from ``simreal eval --backend sim``: no DDS, no separate processes, no
wall-clock timing (so no deadline misses); everything else is the same model of the graph.

Episodes follow ``simreal eval``: the goals are drawn by the same
:class:`simreal_ros.sim.goals.GoalSampler` (``goal_seed``, ``goal_margin_rad``), chained (each
starts where the previous one ended, the first at the spec's default pose), a success is every
policy joint within ``tolerance_rad`` for ``dwell_s``, before ``goal_timeout_s`` of simulated
time; per episode the time to goal, the final error and the tracking RMSE (position minus the
commanded target of the policy joints, over the episode's control periods); the cell's metrics
are :func:`simreal_ros.report.eval_results.summarize` of its episodes, as ``simreal eval``'s.

The result depends only on the cell's configuration: the same cell gives the same numbers in
any process, on a local worker and on Ray alike (one torch thread).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from simreal_ros.core.robot import load_robot
from simreal_ros.policy.env import World
from simreal_ros.policy.model import load_model
from simreal_ros.policy.spec import load_policy_spec
from simreal_ros.policy.train_delays import LatencyPreset
from simreal_ros.report.eval_results import summarize
from simreal_ros.sim.goals import GoalSampler
from simreal_ros.sweep.config import Cell


@dataclass(frozen=True)
class _WorldSettings:
    """The :class:`simreal_ros.policy.env.EnvSettings` of a cell."""

    randomization: str
    overlay: str
    latency_presets: tuple[LatencyPreset, ...]
    state_rate_hz: float
    noise_pos_rad: float
    noise_vel_rad_s: float
    goal_interval_s: tuple[float, float]
    goal_margin_rad: float


def cell_goals(cell: Cell) -> np.ndarray:
    """Return the goals (robot joint order) of the cell's episodes, drawn as eval's are."""
    sampler = GoalSampler(load_robot(cell.robot), margin_rad=cell.goal_margin_rad)
    return sampler.sample(np.random.default_rng(cell.goal_seed), cell.episodes)


def run_eval_cell(cell: Cell) -> dict[str, Any]:
    """Run the cell's episodes; return its metrics and episodes (no provenance)."""
    spec = load_policy_spec(cell.policy)
    robot = load_robot(spec.robot)
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1)
    preset = cell.latency or 'none'  # the shipped pass-through preset
    presets = (LatencyPreset(preset),)
    settings = _WorldSettings(cell.randomization, cell.overlay, presets, cell.state_rate_hz,
                              cell.noise_pos_rad, cell.noise_vel_rad_s,
                              (1e9, 1e9), cell.goal_margin_rad)  # goals are set
    # nominal (no draw, no delay, no noise) unless the cell randomizes or delays something
    randomize = bool(cell.randomization or cell.latency)
    world = World(spec, robot, settings, cell.cell_seed, randomize=randomize,
                  preset=preset, engine=cell.engine)
    ticks = int(math.ceil(cell.goal_timeout_s / world.tick_s - 1e-9))
    dwell = max(1, int(math.ceil(cell.dwell_s / world.tick_s - 1e-9)))
    idx = spec.joint_index
    episodes = []
    for goal in cell_goals(cell):
        world.new_goal(goal)
        inside = 0
        reached: float | None = None
        sq: list[float] = []
        for k in range(ticks):
            world.apply(model(world.observation()))
            q = world.sim.joint_positions()[idx]
            sq.append(float(np.mean(np.square(q - world.last_target[idx]))))
            inside = inside + 1 if world.goal_error() < cell.tolerance_rad else 0
            if inside >= dwell:
                reached = (k + 1 - dwell) * world.tick_s
                break
        episodes.append({'goal': [round(float(x), 6) for x in goal],
                         'success': reached is not None, 'time_to_goal_s': reached,
                         'final_error_rad': world.goal_error(),
                         'tracking_rmse_rad': float(np.sqrt(np.mean(sq)))})
    return {'metrics': summarize(episodes), 'episode_results': episodes,
            'stale_holds': world.holds, 'control_periods': world.ticks}
