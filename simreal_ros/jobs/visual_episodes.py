"""The episodes of ``simreal eval`` for a visuomotor policy: where the ball goes, what counts.

A policy with image terms (``simreal_arm_visual_reach``) gets no goal vector: it finds the
ball of the visual reach task (:mod:`simreal_ros.policy.visual_task`) through the camera. So
an episode of its evaluation is a *placement*, not a goal message:

    placements  ``episode_placements(task, seed, n)``: n ball positions drawn by the task's
                own sampler (:meth:`ReachTask.sample`: reachable, contact-free, in the nominal
                camera's view) from ``numpy.random.default_rng(seed)``, so the same seed
                places the same balls on every backend; each reach point at least
                ``MIN_MOVE_M`` (6 cm) from the last one; each with the joint vector that puts
                tool0 on its reach point (kept in the results, never given to the policy)
    placing     in the scene the camera renders: the sim bridge's ``objects.target.position``
                parameter, or ``place target X Y Z`` to ``simreal emulate --scene`` (the
                virtual robot); :mod:`simreal_ros.sim.placement`
    scoring     :class:`ReachScore`, fed every ``joint_states`` message received after the
                placement was confirmed: tool0's distance from the reach point (forward
                kinematics of the robot spec's MuJoCo model) within ``tolerance_m`` (3 cm) for
                ``dwell_s`` (0.2 s) by ``timeout_s`` of stamp time = success, with the time to
                goal from the first state to the first of the dwell; the final error is the
                distance at the last state scored (m)

Episodes are chained, as in training (the ball moves while the arm is still at the last
goal): each starts where the previous one ended. The time to goal includes everything a real
evaluation would: the frame showing the new ball has to be rendered, (on the virtual robot)
encoded, served ``latency_s`` late and decoded, then the policy must act on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

#: the visual reach task's scene and the ball in it (config/scenes/reach_target.yaml)
SCENE = 'reach_target'
OBJECT = 'target'
#: the least distance between the reach points of two consecutive episodes (m): twice the
#: task's 3 cm tolerance, so no episode starts inside its goal
MIN_MOVE_M = 0.06


def episode_placements(task: Any, seed: int, episodes: int, min_move_m: float = MIN_MOVE_M,
                       max_tries: int = 1000) -> list[tuple[F64, F64]]:
    """Return ``episodes`` (ball centre m, goal joints rad) drawn from ``default_rng(seed)``.

    A draw whose reach point lies within ``min_move_m`` of the previous one's (the first:
    of tool0 at the home pose, where the policy's ramp leaves the arm) is drawn again: the arm
    would start inside the tolerance and the episode would score a success in 0 s.
    """
    rng = np.random.default_rng(seed)
    last = task.tool_position(task.robot.home)
    out: list[tuple[F64, F64]] = []
    for _ in range(episodes):
        for _try in range(max_tries):
            obj, goal = task.sample(rng)
            point = task.reach_point(obj)
            if float(np.linalg.norm(point - last)) >= min_move_m:
                break
        else:
            raise RuntimeError(f'no ball position {min_move_m} m away from the last one')
        out.append((obj, goal))
        last = point
    return out


@dataclass
class ReachScore:
    """Scores one episode from the joint states that follow the placement (module doc)."""

    task: Any
    obj: F64
    timeout_s: float
    tolerance_m: float = 0.03
    dwell_s: float = 0.2
    start_ns: int | None = None
    inside_since_ns: int | None = None
    reached_ns: int | None = None
    final_error_m: float = float('nan')
    states: int = 0
    done: bool = False

    def add(self, stamp_ns: int, q: F64) -> bool:
        """Score one state (joint positions in robot order); return True once decided."""
        if self.done:
            return True
        self.states += 1
        if self.start_ns is None:
            self.start_ns = stamp_ns
        err = self.task.error_m(np.asarray(q, dtype=np.float64), self.obj)
        self.final_error_m = err
        if err <= self.tolerance_m:
            if self.inside_since_ns is None:
                self.inside_since_ns = stamp_ns
            if stamp_ns - self.inside_since_ns >= self.dwell_s * 1e9:
                self.reached_ns = self.inside_since_ns
                self.done = True
        else:
            self.inside_since_ns = None
        if stamp_ns - self.start_ns >= self.timeout_s * 1e9:
            self.done = True
        return self.done

    @property
    def success(self) -> bool:
        """Whether tool0 held the reach point for the dwell within the timeout."""
        return self.reached_ns is not None

    def result(self, goal: F64) -> dict[str, Any]:
        """Return the episode's row of ``simreal eval``'s results."""
        t = ((self.reached_ns - self.start_ns) / 1e9
             if self.reached_ns is not None and self.start_ns is not None else None)
        return {'object_m': [round(float(x), 6) for x in self.obj],
                'goal': [round(float(x), 6) for x in goal], 'success': self.success,
                'time_to_goal_s': t, 'final_error_m': self.final_error_m,
                'states': self.states}


def summarize_visual(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the metrics of a visual run, with the success rate's 95 % Wilson interval."""
    from simreal_ros.sweep.ranking import wilson_interval
    n = len(episodes)
    wins = sum(bool(e['success']) for e in episodes)
    times = [e['time_to_goal_s'] for e in episodes if e['success']]
    finals = [e['final_error_m'] for e in episodes]
    low, high = wilson_interval(wins, n)
    return {'episodes': n, 'successes': wins,
            'success_rate': wins / n if n else float('nan'),
            'success_wilson95': [low, high],
            'time_to_goal_mean_s': float(np.mean(times)) if times else float('nan'),
            'time_to_goal_p90_s': float(np.percentile(times, 90)) if times else float('nan'),
            'final_error_median_m': float(np.median(finals)) if finals else float('nan'),
            'final_error_max_m': float(np.max(finals)) if finals else float('nan')}
