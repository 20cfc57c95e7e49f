"""In-process evaluation of a locomotion policy: seeded 20 s episodes with pushes, per engine.

``simreal eval --policy <spec with robot: simreal_quad>`` (:mod:`simreal_ros.jobs.eval`) and
the trainer's check run :func:`evaluate` on a
:class:`~simreal_ros.policy.locomotion_task.LocoWorld` (nominal dynamics, no latency,
the engine asked for), the network called as the policy node
calls it (:func:`simreal_ros.policy.model.load_model`, the spec's ObservationBuilder and
ActionProcessor), at the spec's rate, with the servos' PD at every physics step.

**Episodes** (:func:`command_schedule`): ``duration_s`` (20 s) from standing at home; the
first half commands forward 0.4 m/s, the second half forward 0.3 m/s turning at 0.5 rad/s
(left in even episodes, right in odd ones). Pushes: a horizontal force of 50-100 % of
``push_force_n`` (8 N; simreal_quad weighs 1.8 kg) on the base for 0.15 s every 2-4 s, in a
random direction, seeded per episode (:mod:`simreal_ros.core.pushes`, the draw of the training
world and of the sim bridge's reset; :func:`episode_pushes` lists them for another backend).

**Metrics** (per episode, then over episodes):

* ``fall``: the base below 0.08 m or tilted beyond 1.0 rad (the legged gap's thresholds);
  the episode ends there; ``success_rate`` the share of episodes without one;
* ``velocity_tracking_error_mps``: the mean over the ticks of ``|mean(v_xy) - cmd_xy|``,
  where ``mean(v_xy)`` is the base's true planar velocity (base frame) averaged over one gait
  period (the spec's ``phase`` period, 0.4 s: a trot's body speed swings within every
  stride, the command is a mean speed), leaving out the first second after each command
  change (the acceleration); ``velocity_tracking_error_instant_mps`` the same without the
  averaging; ``yaw_rate_error_rad_s`` the averaged yaw rate's mean absolute error;
* ``distance_m``: the base's path length in the plane; ``energy_per_m``: the mechanical
  energy the servos spent (``sum |tau * qdot|`` integrated at 200 Hz, J) over the distance.
"""

from __future__ import annotations

from collections import deque
import math
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from simreal_ros.core.pushes import push_sequence
from simreal_ros.core.robot import load_robot
from simreal_ros.policy.locomotion_task import LocoWorld, WorldSettings, fallen
from simreal_ros.policy.spec import PolicySpec
from simreal_ros.sim.backend import BaseState

FloatArray = npt.NDArray[np.float64]
Act = Callable[[FloatArray], FloatArray]

EPISODE_S = 20.0
SETTLE_S = 1.0


def command_schedule(episode: int, duration_s: float) -> list[tuple[float, FloatArray]]:
    """Return ``(start_s, command)`` of one episode: forward 0.4 m/s, then turning (module doc)."""
    turn = 0.5 if episode % 2 == 0 else -0.5
    return [(0.0, np.array([0.4, 0.0, 0.0])), (duration_s / 2, np.array([0.3, 0.0, turn]))]


def gait_period_s(spec: PolicySpec) -> float:
    """Return the spec's ``phase`` period (the window of the tracking error); 0.4 s without one."""
    for t in spec.observation:
        if t.name == 'phase':
            return float(t.options['period_s'])
    return 0.4


class EpisodeScore:
    """The metrics of one episode from the base's ground truth, one sample per control tick.

    The one scoring of every backend: :func:`run_episode` feeds it a :class:`LocoWorld`'s base,
    ``simreal eval --backend real`` the virtual legged robot's hidden world
    (:mod:`simreal_ros.jobs.locomotion_real`). ``tick_s`` is the samples' period (the spec's
    control period); the gait-period window and the settling after a command change are the
    module docstring's.
    """

    def __init__(self, spec: PolicySpec, tick_s: float) -> None:
        self.tick_s = tick_s
        self.win = max(1, int(round(gait_period_s(spec) / tick_s)))
        self.window: deque[FloatArray] = deque(maxlen=self.win)
        self.command: FloatArray | None = None
        self.changed_at = 0.0
        self.err: list[float] = []
        self.err_inst: list[float] = []
        self.yaw_err: list[float] = []
        self.fell_at: float | None = None

    def add(self, t_s: float, base: BaseState, command: FloatArray) -> bool:
        """Score the base at ``t_s`` (episode seconds) under ``command``; False once fallen."""
        if self.command is None or not np.array_equal(command, self.command):
            self.command = np.asarray(command, dtype=np.float64).copy()
            self.changed_at = t_s
            self.window.clear()
        if fallen(base):
            self.fell_at = t_s
            return False
        v = np.array([*base.linear_velocity_in_base()[:2], base.angular_velocity[2]])
        self.window.append(v)
        if t_s - self.changed_at >= SETTLE_S and len(self.window) == self.win:
            mean = np.mean(self.window, axis=0)
            c = self.command
            self.err.append(float(np.linalg.norm(mean[:2] - c[:2])))
            self.err_inst.append(float(np.linalg.norm(v[:2] - c[:2])))
            self.yaw_err.append(abs(float(mean[2] - c[2])))
        return True

    def result(self, path_m: float, energy_j: float) -> dict[str, Any]:
        """Return the episode's metrics, given the base's path length and the servos' energy."""
        def mean(xs: list[float]) -> float:
            return float(np.mean(xs)) if xs else float('nan')
        return {'fall': self.fell_at is not None, 'fall_time_s': self.fell_at,
                'velocity_tracking_error_mps': mean(self.err),
                'velocity_tracking_error_instant_mps': mean(self.err_inst),
                'yaw_rate_error_rad_s': mean(self.yaw_err),
                'distance_m': path_m, 'energy_j': energy_j,
                'energy_per_m': energy_j / path_m if path_m > 0.05 else float('nan')}


def command_at(schedule: list[tuple[float, FloatArray]], t_s: float, tick_s: float
               ) -> FloatArray:
    """Return the command of ``schedule`` at ``t_s`` (a change counts from half a tick early)."""
    cmd = schedule[0][1]
    for start, c in schedule:
        if t_s >= start - 0.5 * tick_s:
            cmd = c
    return cmd


def episode_pushes(seed: int, duration_s: float, tick_s: float,
                   cfg: WorldSettings | None = None) -> list[tuple[float, FloatArray]]:
    """Return ``(start_s, force_n)`` of the pushes of a nominal :class:`LocoWorld` seeded ``seed``.

    The world's generator (seeded ``seed + 7919``) through
    :func:`~simreal_ros.core.pushes.push_sequence` on the grid of control ticks: the draws of
    ``LocoWorld(..., randomize=False)`` in their order, each push starting at the first tick
    at or after its time, so another backend can push the same episodes.
    """
    cfg = cfg or WorldSettings()
    rng = np.random.default_rng(seed + 7919)
    ticks = int(round(duration_s / tick_s))
    out = []
    for p in push_sequence(cfg.push_ranges(), rng, tick_s):
        if p.start_tick >= ticks:
            break
        out.append((p.start_s, p.force_n))
    return out


def run_episode(world: LocoWorld, act: Act, episode: int, duration_s: float) -> dict[str, Any]:
    """Run one episode under ``act(observation) -> raw action``; its metrics."""
    schedule = command_schedule(episode, duration_s)
    world.reset(schedule[0][1])
    score = EpisodeScore(world.spec, world.tick_s)
    ticks = int(round(duration_s / world.tick_s))
    for _k in range(ticks):
        world.command = command_at(schedule, world.t, world.tick_s)
        if not score.add(world.t, world.base(), world.command):
            break
        world.apply(act(world.observation()))
    return score.result(world.path_m, world.energy_j)


def summarize(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Metrics over episodes (means over the episodes that have them)."""
    def mean(key: str) -> float:
        vals = [e[key] for e in episodes if not math.isnan(e[key])]
        return float(np.mean(vals)) if vals else float('nan')
    falls = sum(1 for e in episodes if e['fall'])
    return {'episodes': len(episodes), 'falls': falls,
            'success_rate': 1.0 - falls / len(episodes),
            'velocity_tracking_error_mps': mean('velocity_tracking_error_mps'),
            'velocity_tracking_error_instant_mps': mean('velocity_tracking_error_instant_mps'),
            'yaw_rate_error_rad_s': mean('yaw_rate_error_rad_s'),
            'distance_m': mean('distance_m'), 'energy_per_m': mean('energy_per_m')}


def evaluate(spec: PolicySpec, act: Act, engine: str = 'mujoco', episodes: int = 10,
             seed: int = 0, duration_s: float = EPISODE_S, push_force_n: float = 8.0,
             log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``episodes`` seeded episodes on ``engine``; ``{'metrics', 'episodes'}``."""
    robot = load_robot(spec.robot)
    out = []
    for k in range(episodes):
        world = LocoWorld(spec, robot, WorldSettings(push_force_n=push_force_n), seed + k,
                          randomize=False, engine=engine, pushes=push_force_n > 0)
        ep = run_episode(world, act, k, duration_s)
        out.append(ep)
        if log is not None:
            log(f'  {engine} episode {k + 1}/{episodes}: '
                + (f'fell at {ep["fall_time_s"]:.1f} s' if ep['fall'] else 'no fall')
                + f', tracking error {ep["velocity_tracking_error_mps"]:.3f} m/s, '
                f'{ep["distance_m"]:.1f} m')
    return {'metrics': summarize(out), 'episodes': out}


def network_policy(spec: PolicySpec) -> Act:
    """Return the spec's model as the node calls it (1 thread)."""
    from simreal_ros.policy.model import load_model
    model = load_model(spec.model, spec.obs_dim, spec.act_dim, threads=1)

    def act(obs: FloatArray) -> FloatArray:
        return np.asarray(model(obs), dtype=np.float64).reshape(-1)
    return act
