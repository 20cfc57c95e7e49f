"""A floating base in PyBullet: simreal_quad standing as in MuJoCo, its IMU, base and reset.

In-process (no ROS). The contract is test/sim/test_quadruped.py's (MuJoCo): ``BaseState`` is
``base_frame``'s origin (PyBullet reports the base's centre of mass; simreal_ros/sim/bullet/
floating.py converts), the IMU reads orientation, the body-frame angular velocity and the
specific force, the feet their contact normal forces.
"""

from __future__ import annotations

import numpy as np
import pybullet as pb
import pytest
from transforms3d import euler, quaternions

from simreal_ros.core.robot import load_robot
from simreal_ros.sim.backend import Observation
from simreal_ros.sim.bullet.physics import BulletSim
from simreal_ros.sim.engines import make_sim

G = 9.81
ROBOT = load_robot('simreal_quad')
MASS_KG = 1.84  # the URDF's links summed
WHEELBASE_M = 0.20  # hips at x = ±0.10 (docs/legged.md)


def tilt_rad(quat_wxyz: np.ndarray) -> float:
    """Angle between the frame's z axis and the world's."""
    return float(np.arccos(np.clip(quaternions.quat2mat(quat_wxyz)[2, 2], -1.0, 1.0)))


def angle_between(a: np.ndarray, b: np.ndarray) -> float:
    return float(2.0 * np.arccos(np.clip(abs(np.dot(a, b)), 0.0, 1.0)))


@pytest.fixture(scope='module')
def stood() -> dict[str, list[Observation]]:
    """Each engine's quadruped after 1 s and 3 s at its home pose."""
    out = {}
    for engine in ('mujoco', 'pybullet'):
        sim = make_sim(ROBOT, engine=engine)
        sim.step(1000)
        first = sim.observe()
        sim.step(2000)
        out[engine] = [first, sim.observe()]
    return out


def test_pybullet_stands_at_its_home_pose(stood) -> None:
    first, last = stood['pybullet']
    # the weight on the feet: at rest (IMU < 0.01 m/s^2 off g below) the vertical contact
    # forces balance m g to the residual acceleration's share, < 0.1 %
    assert last.foot_force.sum() == pytest.approx(MASS_KG * G, rel=0.005)
    assert np.all(last.foot_force > 0.2 * MASS_KG * G / 4)
    # kinematic height 0.165 m less the servos' sag: ~0.3 N*m on a knee at kp 12 N*m/rad is
    # 0.025 rad, ~2.5 mm of leg length; 5 mm bounds it as in MuJoCo's test
    assert abs(last.base.position[2] - ROBOT.base.height_m) < 0.005
    assert np.linalg.norm(last.base.position[:2]) < 0.01
    assert tilt_rad(last.base.orientation_wxyz) < 0.01
    # no creep: every foot's tangential load (< 0.1 N) is far inside its friction cone
    # (mu 1 x 4 N); what moves between 1 s and 3 s is solver noise
    assert angle_between(first.base.orientation_wxyz, last.base.orientation_wxyz) < 1e-3
    assert np.linalg.norm(last.base.position - first.base.position) < 1e-3
    np.testing.assert_allclose(last.imu_acc, G * quaternions.quat2mat(
        last.imu_quat_wxyz).T @ [0.0, 0.0, 1.0], atol=0.01)
    np.testing.assert_allclose(last.imu_gyro, 0.0, atol=1e-3)
    np.testing.assert_allclose(last.imu_quat_wxyz, last.base.orientation_wxyz, atol=1e-9)


def test_the_two_engines_stand_alike(stood) -> None:
    """Standing, the engines differ only where their contact models do.

    Same URDF, servo law and weight; MuJoCo's contact is soft (solref 0.02 s, solimp 0.9-0.95
    over 1 mm: a loaded foot sinks up to ~1 mm), Bullet's feet are springs of 5,200 N/m
    (simreal_ros/sim/bullet/floating.py: 4-5 N sink them 0.8-1.0 mm). Besides the sinks'
    difference (< 1 mm), the servos' sag is the same law under the same load (the load per leg
    is fixed by statics, below), so the heights differ by at most 1 mm plus 1 mm for the servo
    angles' share: 2 mm. The front/rear split of the weight
    is statics (moments about the feet: COM 3 mm behind the hips' centre, wheelbase 0.20 m),
    the same in both to the feet's position difference (< 2 mm of 0.20 m, 1 % of the weight:
    0.18 N); the pitch is the front/rear sag difference over the wheelbase (< 1 mm / 0.2 m).
    """
    mj, pyb = stood['mujoco'][-1], stood['pybullet'][-1]
    assert abs(pyb.base.position[2] - mj.base.position[2]) < 0.002
    front = [(o.foot_force[0] + o.foot_force[1]) for o in (mj, pyb)]
    rear = [(o.foot_force[2] + o.foot_force[3]) for o in (mj, pyb)]
    weight = MASS_KG * G
    assert abs(front[1] - front[0]) < 0.01 * weight
    assert abs(rear[1] - rear[0]) < 0.01 * weight
    assert rear[0] > front[0] and rear[1] > front[1]  # the legs' mass sits behind the hips
    assert angle_between(mj.base.orientation_wxyz, pyb.base.orientation_wxyz) < 0.001 / 0.2
    np.testing.assert_allclose(pyb.position, mj.position, atol=0.02)  # sag: ~0.025 rad


def _in_the_air(sim: BulletSim, quat: np.ndarray, omega_body: np.ndarray,
                v_world: np.ndarray) -> None:
    fb = sim.world.floating
    fb.set_pose(np.array([0.0, 0.0, 1.0]), quat)
    w_world = quaternions.quat2mat(quat) @ omega_body
    # the base's COM is its origin in this URDF, so the origin's velocity is the COM's
    pb.resetBaseVelocity(sim.world.body, v_world.tolist(), w_world.tolist(),
                         physicsClientId=sim.world.client)
    sim.world._prev_site = None


def test_the_imu_and_base_state_of_a_rotated_base_in_the_air() -> None:
    sim = make_sim(ROBOT, engine='pybullet')
    assert isinstance(sim, BulletSim)
    quat = euler.euler2quat(0.4, -0.3, 1.0, 'sxyz')
    omega = np.array([0.7, -0.2, 0.5])
    v = np.array([0.3, -0.1, 0.2])
    _in_the_air(sim, quat, omega, v)
    o = sim.observe()
    # Bullet renormalises the quaternion it is given (5e-9 seen): 1e-7, not MuJoCo's 1e-12
    np.testing.assert_allclose(o.base.position, [0.0, 0.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(o.imu_quat_wxyz, quat, atol=1e-7)
    np.testing.assert_allclose(o.imu_gyro, omega, atol=1e-7)  # the body frame's rates
    np.testing.assert_allclose(o.base.angular_velocity, omega, atol=1e-7)
    np.testing.assert_allclose(o.base.linear_velocity_in_base(),
                               quaternions.quat2mat(quat).T @ v, atol=1e-7)
    np.testing.assert_allclose(o.foot_force, 0.0)

    # free fall, not spinning, joints at their targets (no servo torque): specific force 0
    _in_the_air(sim, quat, np.zeros(3), v)
    sim.step(1)
    np.testing.assert_allclose(sim.observe().imu_acc, 0.0, atol=1e-6)

