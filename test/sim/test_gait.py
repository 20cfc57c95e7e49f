"""The open-loop trot (simreal_ros/sim/gait.py): joint targets by hand."""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.robot import load_robot
from simreal_ros.sim.gait import Trot

QUAD = load_robot('simreal_quad')
S = 0.1 / (4 * 2.0 * 0.165)  # v / (4 f h): 0.0758 rad


def test_trot_targets_by_hand() -> None:
    gait = Trot()
    assert gait.stride_rad(QUAD) == pytest.approx(S)
    # t = 0: fl and rr at phase 0 (foot forward, on the ground), fr and rl at pi (back)
    q = gait.targets(QUAD, 0.0).reshape(4, 3)
    np.testing.assert_allclose(q[:, 0], 0.0)
    np.testing.assert_allclose(q[:, 1], [0.7 - S, 0.7 + S, 0.7 + S, 0.7 - S])
    np.testing.assert_allclose(q[:, 2], -1.4, atol=1e-12)
    # t = 0.375 s: fl and rr at 1.5 pi, mid-swing (knee folded by the full lift), fr and rl
    # at 2.5 pi, mid-stance
    q = gait.targets(QUAD, 0.375).reshape(4, 3)
    np.testing.assert_allclose(q[:, 1], 0.7, atol=1e-12)
    np.testing.assert_allclose(q[:, 2], [-1.6, -1.4, -1.4, -1.6], atol=1e-12)


def test_a_fast_command_is_clipped_and_an_arm_cannot_trot() -> None:
    assert Trot(speed_m_s=5.0).stride_rad(QUAD) == 0.3
    with pytest.raises(ValueError, match='^simreal_arm: an open-loop trot needs 4 legs of 3 '
                                         'joints, the robot has 6 joints$'):
        Trot().targets(load_robot('simreal_arm'), 0.0)
