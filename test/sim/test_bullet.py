"""What the PyBullet engine does its own way (sim/bullet/), against the law it stands for.

The servo law runs as Bullet's ``PD_CONTROL`` in C, falling back to the same law in Python
(``TORQUE_CONTROL``) where ``PD_CONTROL`` cannot carry a feed-forward (``kd = 0``): the two
must be the same physics.
"""

from __future__ import annotations

import numpy as np
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.engines import make_sim

pytest.importorskip('pybullet')

ROBOT = load_robot('simreal_arm')
OFFSET = np.array([0.3, -0.2, 0.2, 0.4, -0.3, 0.5])


def _python_law(sim):
    """Force the Python fallback of the servo law (as a kd = 0 feed-forward would)."""
    sim.world.python_law = True
    sim.world.push_servo()
    return sim


def test_the_servo_law_in_c_and_in_python_is_the_same_motion():
    native = make_sim(ROBOT, engine='pybullet')
    python = _python_law(make_sim(ROBOT, engine='pybullet'))
    assert native.world.native and not python.world.native
    target = JointTarget(ROBOT.home + OFFSET, np.full(ROBOT.n, 0.5), np.full(ROBOT.n, 0.05))
    for sim in (native, python):
        sim.set_target(target)
    for _ in range(60):
        for sim in (native, python):
            sim.step(5)
        a, b = native.joint_state(), python.joint_state()
        # the same law; kd * (ff / kd) rounds once in C: 1e-17 rad measured over 300 steps
        np.testing.assert_allclose(a[0], b[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(a[2], b[2], rtol=0, atol=1e-9)
    assert np.abs(native.joint_positions() - ROBOT.home).max() > 0.1  # it moved


def test_a_feedforward_on_a_joint_without_kd_uses_the_python_law():
    sim = make_sim(ROBOT, engine='pybullet')
    sim.set_servo(0, 20.0, 0.0, 4.0)
    sim.actuate(ROBOT.home, np.r_[0.5, np.zeros(ROBOT.n - 1)])
    assert not sim.world.native
    sim.step(1)
    assert sim.joint_state()[2][0] == pytest.approx(0.5, abs=1e-12)  # kp * 0 - 0 * 0 + 0.5
    sim.actuate(ROBOT.home, np.zeros(ROBOT.n))
    assert sim.world.native  # no feed-forward: PD_CONTROL carries it again


def test_the_imu_reads_the_same_as_resetting_to_the_previous_state():
    """The accelerometer: site velocity now minus before the last step, over dt, minus g."""
    sim = make_sim(ROBOT, engine='pybullet')
    sim.set_target(JointTarget.hold(ROBOT.home + OFFSET))
    sim.step(40)
    w = sim.world
    q, qd = w.q.copy(), w.qd.copy()
    obs = sim.observe()
    # rebuild the previous state by stepping a copy one step short
    ref = make_sim(ROBOT, engine='pybullet')
    ref.set_target(JointTarget.hold(ROBOT.home + OFFSET))
    ref.step(39)
    prev_v = ref.world._site_motion(ref.world._link_state())[0]
    now_v = w._site_motion(w._link_state())[0]
    acc_world = (np.asarray(now_v) - prev_v) / ROBOT.timestep_s - np.array([0, 0, -9.81])
    rot = np.asarray(__import__('pybullet').getMatrixFromQuaternion(
        w._link_state()[5])).reshape(3, 3)
    np.testing.assert_allclose(obs.imu_acc, rot.T @ acc_world, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(w.q, q)  # observing left the state alone
    np.testing.assert_array_equal(w.qd, qd)
    assert np.linalg.norm(obs.imu_acc) > 10.0  # it is accelerating, not at rest
