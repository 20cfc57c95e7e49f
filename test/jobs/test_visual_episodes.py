"""The visual eval's episodes (jobs/visual_episodes.py): placements and scoring."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.jobs.visual_episodes import (
    MIN_MOVE_M,
    ReachScore,
    episode_placements,
    summarize_visual,
)


@pytest.fixture(scope='module')
def task():
    from simreal_ros.policy.visual_task import ReachTask
    return ReachTask(load_robot('simreal_arm'))


def test_placements_are_seeded_in_view_and_move_the_goal(task):
    a = episode_placements(task, 3, 12)
    b = episode_placements(task, 3, 12)
    c = episode_placements(task, 4, 12)
    for (oa, ga), (ob, gb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(oa, ob)
        np.testing.assert_array_equal(ga, gb)
    assert not np.array_equal(a[0][0], c[0][0])
    last = task.tool_position(task.robot.home)
    for obj, goal in a:
        assert task.in_view(obj)
        assert task.error_m(goal, obj) < 1e-4  # the goal puts tool0 on the reach point
        point = task.reach_point(obj)
        assert np.linalg.norm(point - last) >= MIN_MOVE_M
        last = point


@dataclass
class Line:
    """A task whose error is q[0] (m): scoring without kinematics."""

    def error_m(self, q, _obj):
        return float(q[0])


def feed(score, samples):
    for t_s, err in samples:
        if score.add(int(t_s * 1e9), np.array([err])):
            return


def test_a_dwell_inside_the_tolerance_is_a_success_timed_from_the_first_state():
    score = ReachScore(Line(), np.zeros(3), timeout_s=4.0)
    feed(score, [(10.0, 0.2), (10.5, 0.02), (10.6, 0.05), (11.0, 0.029), (11.1, 0.01),
                 (11.2, 0.01), (11.3, 0.0)])
    row = score.result(np.zeros(6))
    assert row['success'] is True
    assert row['time_to_goal_s'] == pytest.approx(1.0)  # inside since 11.0, left at 10.6
    assert row['final_error_m'] == 0.01
    assert row['states'] == 6  # decided at 11.2: 0.2 s inside


def test_no_dwell_by_the_timeout_is_a_miss_with_the_last_error():
    score = ReachScore(Line(), np.zeros(3), timeout_s=1.0)
    feed(score, [(0.0, 0.3), (0.5, 0.02), (0.6, 0.04), (1.0, 0.05), (1.1, 0.0)])
    row = score.result(np.zeros(6))
    assert (row['success'], row['time_to_goal_s'], row['final_error_m'], row['states']) == \
        (False, None, 0.05, 4)


def test_the_summary_has_the_wilson_interval():
    eps = [{'success': s, 'time_to_goal_s': 1.0 if s else None, 'final_error_m': e}
           for s, e in [(True, 0.01), (True, 0.02), (False, 0.2), (True, 0.015)]]
    m = summarize_visual(eps)
    assert (m['episodes'], m['successes'], m['success_rate']) == (4, 3, 0.75)
    assert m['success_wilson95'] == pytest.approx([0.3006, 0.9544], abs=1e-4)
    assert m['final_error_median_m'] == pytest.approx(0.0175)
    assert m['final_error_max_m'] == 0.2
