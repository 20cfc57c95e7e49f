"""The shipped arms (so101, koch, openmanipulator_x) on both engines: real MuJoCo and PyBullet.

Each arm loads, holds its home pose under gravity with its spec's gains, moves its gripper
like any other joint, and the OpenManipulator-X's mimic fingers follow the gripper servo.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest

from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import load_robot
from simreal_ros.sim.engines import ENGINES, make_sim

ARMS = ('so101', 'koch', 'openmanipulator_x')
#: the fingers of the OpenManipulator-X: 0.015 m per rad of the gripper servo (its URDF)
FINGERS = ('gripper_left_joint', 'gripper_right_joint')
FINGER_M_PER_RAD = 0.015


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
def test_arm_settles_at_home_under_gravity(arm: str, engine: str) -> None:
    robot = load_robot(arm)
    sim = make_sim(robot, engine=engine)
    sim.reset()
    sim.set_target(JointTarget.hold(robot.home))
    sim.step(3000)  # 3 s: the slowest joint (kd/kp ~ 0.03 s) has long settled
    q, qd, _ = sim.joint_state()
    # the sag is the gravity torque over kp: 45 mrad at the SO-101's shoulder, the most
    assert np.abs(q - robot.home).max() < 0.05, (q - robot.home).round(4)
    assert np.abs(qd).max() < 0.01
    assert sim.divergences() == 0


@pytest.mark.parametrize('engine', ENGINES)
@pytest.mark.parametrize('arm', ARMS)
def test_gripper_is_a_joint_like_any_other(arm: str, engine: str) -> None:
    robot = load_robot(arm)
    assert robot.joint_names[-1] == 'gripper'
    sim = make_sim(robot, engine=engine)
    sim.reset()
    sim.set_target(JointTarget.hold(robot.home))
    sim.step(1500)
    arm_before = sim.joint_positions()[:-1]
    target = robot.home.copy()
    target[-1] = 1.0  # open
    sim.set_target(JointTarget.hold(target))
    sim.step(1500)
    q = sim.joint_positions()
    assert q[-1] == pytest.approx(1.0, abs=0.02)
    # the arm held: the jaw's swing moves the other joints by its reaction only
    assert np.abs(q[:-1] - arm_before).max() < 0.005
    target[-1] = 0.0
    sim.set_target(JointTarget.hold(target))
    sim.step(1500)
    assert sim.joint_positions()[-1] == pytest.approx(0.0, abs=0.02)


def _finger_positions(sim, engine: str) -> list[float]:
    if engine == 'mujoco':
        m, d = sim.model, sim.data
        return [float(d.qpos[m.joint(f).qposadr[0]]) for f in FINGERS]
    w = sim.world
    return [pb.getJointState(w.body, f, physicsClientId=w.client)[0] for f, *_ in w.mimics]


@pytest.mark.parametrize('engine', ENGINES)
def test_openmanipulator_fingers_mimic_the_gripper_servo(engine: str) -> None:
    robot = load_robot('openmanipulator_x')
    sim = make_sim(robot, engine=engine)
    sim.reset()
    assert _finger_positions(sim, engine) == pytest.approx([0.0, 0.0], abs=1e-6)
    for angle in (1.0, -0.5):
        target = robot.home.copy()
        target[-1] = angle
        sim.set_target(JointTarget.hold(target))
        sim.step(1500)
        q = sim.joint_positions()[-1]
        assert q == pytest.approx(angle, abs=0.02)
        assert _finger_positions(sim, engine) == pytest.approx(
            [FINGER_M_PER_RAD * q] * 2, abs=2e-4)
    # a re-sync (twin) puts the fingers where the servo angle says, at once
    q = robot.home.copy()
    q[-1] = 0.8
    sim.set_joint_state(q, np.zeros(robot.n))
    assert _finger_positions(sim, engine) == pytest.approx([0.012, 0.012], abs=1e-9)
