"""A floating base in MuJoCo: simreal_quad standing, its IMU, odometry, feet and reset.

In-process (no ROS). The IMU's contract: orientation of the IMU frame in the world,
angular velocity and specific force (acceleration minus gravity) in the IMU frame, so a robot
at rest reads +9.81 m/s^2 along its up axis and one in free fall reads 0.
"""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from transforms3d import euler, quaternions

from simreal_ros.bringup.planner import plan
from simreal_ros.core.commands import JointTarget
from simreal_ros.core.robot import load_robot
from simreal_ros.core.tf_tree import ODOM, TfTree, Transform, compose, parse_urdf
from simreal_ros.errors import ConfigError
from simreal_ros.sim.backend import Observation, RolloutJob
from simreal_ros.sim.bridge_config import check_floating_base
from simreal_ros.sim.engines import make_sim
from simreal_ros.sim.mujoco.physics import MujocoSim

G = 9.81
ROBOT = load_robot('simreal_quad')
MASS_KG = 1.84  # the URDF's links summed


def quad() -> MujocoSim:
    sim = make_sim(ROBOT)
    assert isinstance(sim, MujocoSim)
    return sim


def up_in(quat_wxyz: np.ndarray) -> np.ndarray:
    """The world's +z axis in the frame of orientation ``quat_wxyz``."""
    return quaternions.quat2mat(quat_wxyz).T @ np.array([0.0, 0.0, 1.0])


@pytest.fixture(scope='module')
def stood() -> tuple[MujocoSim, list[Observation]]:
    """The quadruped after 5 s at its home pose, sampled every 0.1 s."""
    sim = quad()
    samples = []
    for _ in range(50):
        sim.step(100)  # 0.1 s at 1 ms
        samples.append(sim.observe())
    return sim, samples


def test_it_stands_at_its_home_pose_for_5_s(stood) -> None:
    sim, samples = stood
    assert sim.model.body_subtreemass[sim.model.body('base_link').id] == pytest.approx(MASS_KG)
    heights = np.array([o.base.position[2] for o in samples])
    # servo compliance (kp 12 N*m/rad) and contact softness: measured 2.7 mm below the
    # kinematic standing height, still after 1 s
    assert np.all(np.abs(heights - ROBOT.base.height_m) < 0.005), heights
    last = samples[-1]
    assert np.linalg.norm(last.base.position[:2]) < 0.01  # it did not walk or slide away
    assert np.arccos(up_in(last.base.orientation_wxyz)[2]) < 0.01  # level within 0.01 rad
    assert np.abs(last.position - ROBOT.home).max() < 0.05
    assert np.all(last.foot_force > 0.2 * MASS_KG * G / 4)  # all four feet carry weight
    assert last.foot_force.sum() == pytest.approx(MASS_KG * G, rel=0.01)


def test_the_imu_at_rest_reads_gravity_up_in_its_own_frame(stood) -> None:
    _sim, samples = stood
    o = samples[-1]
    assert o.imu_acc[2] == pytest.approx(G, abs=0.01)
    # the tilted standing pose's gravity, as the IMU's own orientation says
    np.testing.assert_allclose(o.imu_acc, G * up_in(o.imu_quat_wxyz), atol=0.01)
    np.testing.assert_allclose(o.imu_gyro, 0.0, atol=1e-3)
    np.testing.assert_allclose(o.imu_quat_wxyz, o.base.orientation_wxyz, atol=1e-12)


def _rotated_in_the_air(sim: MujocoSim, quat: np.ndarray, omega_body: np.ndarray,
                        v_world: np.ndarray) -> None:
    d, qa, da = sim.data, sim.built.base_qpos_adr, sim.built.base_dof_adr
    d.qpos[qa:qa + 3] = [0.0, 0.0, 1.0]
    d.qpos[qa + 3:qa + 7] = quat
    d.qvel[:] = 0.0
    d.qvel[da:da + 3] = v_world
    d.qvel[da + 3:da + 6] = omega_body


def test_the_imu_of_a_rotated_base_exactly() -> None:
    sim = quad()
    quat = euler.euler2quat(0.4, -0.3, 1.0, 'sxyz')
    omega = np.array([0.7, -0.2, 0.5])
    v = np.array([0.3, -0.1, 0.2])
    _rotated_in_the_air(sim, quat, omega, v)
    o = sim.observe()
    np.testing.assert_allclose(o.imu_quat_wxyz, quat, atol=1e-12)
    np.testing.assert_allclose(o.imu_gyro, omega, atol=1e-12)  # the body frame's rates
    np.testing.assert_allclose(o.base.angular_velocity, omega, atol=1e-12)
    np.testing.assert_allclose(o.base.linear_velocity_in_base(),
                               quaternions.quat2mat(quat).T @ v, atol=1e-12)
    np.testing.assert_allclose(o.foot_force, 0.0)  # in the air

    # In free fall, not spinning, every body falls with g: specific force 0.
    _rotated_in_the_air(sim, quat, np.zeros(3), v)
    np.testing.assert_allclose(sim.observe().imu_acc, 0.0, atol=1e-9)

    # Held still (acceleration 0, as a support would hold it): gravity's reaction, +9.81
    # along the world's up axis, in the IMU frame. MuJoCo's own acceleration stage, run on the
    # held state.
    _rotated_in_the_air(sim, quat, np.zeros(3), np.zeros(3))
    m, d = sim.model, sim.data
    mujoco.mj_forward(m, d)
    d.qacc[:] = 0.0
    mujoco.mj_rnePostConstraint(m, d)
    mujoco.mj_sensorAcc(m, d)
    adr = sim.built.imu_adr['imu_acc']
    expected = G * up_in(quat)
    np.testing.assert_allclose(d.sensordata[adr:adr + 3], expected, atol=1e-9)
    assert expected[2] > 0 and not np.allclose(expected, [0.0, 0.0, G], atol=0.1)


def test_the_tf_tree_odom_to_base_and_the_joints_is_where_mujoco_has_every_link() -> None:
    sim = quad()
    _rotated_in_the_air(sim, euler.euler2quat(0.3, 0.2, -0.8, 'sxyz'), np.zeros(3), np.zeros(3))
    q = np.random.default_rng(1).uniform(ROBOT.lower, ROBOT.upper)
    sim.data.qpos[sim.built.qpos_adr] = q
    o = sim.observe()
    tree = TfTree(parse_urdf(ROBOT.urdf.read_text(), ROBOT.urdf), ROBOT.base_frame,
                  floating=True)
    assert [(t.parent, t.child) for t in tree.static()][0] == ('world', ODOM)
    # what the bridge publishes on /tf: odom -> base from the ground truth
    base = Transform(ODOM, ROBOT.base_frame, tuple(o.base.position),
                     tuple(o.base.orientation_wxyz))
    poses = compose([*tree.static(), base,
                     *tree.moving(dict(zip(ROBOT.joint_names, q, strict=True)))])
    m, d = sim.model, sim.data
    links = [m.body(b).name for b in range(1, m.nbody)]
    assert len(links) == 1 + 4 * 4  # body, and hip, thigh, shank, foot per leg
    for name in links:
        b = m.body(name).id
        np.testing.assert_allclose(poses[name][:3, 3], d.xpos[b], atol=1e-9, err_msg=name)
        np.testing.assert_allclose(poses[name][:3, :3], quaternions.quat2mat(d.xquat[b]),
                                   atol=1e-9, err_msg=name)


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_reset_puts_it_back_on_its_feet(engine: str) -> None:
    sim = make_sim(ROBOT, engine=engine)
    sim.set_joint_state(ROBOT.lower, np.ones(ROBOT.n))  # it collapses, legs folded
    sim.set_target(JointTarget.hold(ROBOT.lower))
    sim.step(300)
    fallen = sim.observe().base
    assert fallen.position[2] < ROBOT.base.height_m - 0.05
    sim.reset()
    o = sim.observe()
    np.testing.assert_allclose(o.base.position, [0.0, 0.0, ROBOT.base.height_m], atol=1e-7)
    np.testing.assert_allclose(o.base.orientation_wxyz, [1.0, 0.0, 0.0, 0.0], atol=1e-7)
    np.testing.assert_allclose(o.base.linear_velocity, 0.0)
    np.testing.assert_allclose(o.base.angular_velocity, 0.0)
    np.testing.assert_allclose(o.position, ROBOT.home, atol=1e-12)
    sim.step(1000)
    o = sim.observe()
    assert abs(o.base.position[2] - ROBOT.base.height_m) < 0.005
    assert np.all(o.foot_force > 0)


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_a_push_moves_the_base_until_a_reset_clears_it(engine: str) -> None:
    sim = make_sim(ROBOT, engine=engine)
    sim.push_base([0.0, 0.0, 2.0 * MASS_KG * G])  # twice its weight, up: it flies
    sim.step(100)
    assert sim.observe().base.position[2] > ROBOT.base.height_m + 0.02
    sim.reset()
    sim.step(300)  # no push any more: it stands
    assert abs(sim.observe().base.position[2] - ROBOT.base.height_m) < 0.005
    with pytest.raises(ValueError, match=r'^a push is 3 finite numbers \(N, world frame\), '
                                         r'got \[1.0, nan, 0.0\]$'):
        sim.push_base([1.0, float('nan'), 0.0])
    arm = make_sim(load_robot('simreal_arm'), engine=engine)
    with pytest.raises(ValueError, match='^simreal_arm has a fixed base: nothing to push$'):
        arm.push_base([1.0, 0.0, 0.0])


@pytest.mark.parametrize('engine', ['mujoco', 'pybullet'])
def test_every_rollout_job_starts_standing_at_the_home_pose(engine: str) -> None:
    """Each job from the base's home pose, whatever the job before it did to the base."""
    sim = make_sim(ROBOT, engine=engine)
    hold = np.zeros((300, 3 * ROBOT.n))
    hold[:, :ROBOT.n] = ROBOT.home
    fold = hold.copy()
    fold[:, :ROBOT.n] = ROBOT.lower  # it collapses
    jobs = [RolloutJob(0, ROBOT.home.copy(), np.zeros(ROBOT.n), t) for t in (hold, fold, hold)]
    out = sim.rollout([sim.params], jobs)
    np.testing.assert_array_equal(out[2], out[0])
    assert np.abs(out[0][-1] - ROBOT.home).max() < 0.05  # standing: the servos' sag only


def test_an_engine_without_a_floating_base_refuses_it_in_one_line() -> None:
    """Both engines simulate one now (test_quadruped_bullet.py); a third might not."""
    line = (f"{ROBOT.source}: base.type: expected 'fixed' for engine:=newton: the newton "
            'engine does not simulate a floating base yet (engines that do: mujoco, pybullet; '
            "docs/legged.md), got 'floating'")
    with pytest.raises(ConfigError) as info:
        check_floating_base(ROBOT, 'newton')
    assert str(info.value) == line
    bridges = [n.parameters['engine'] for n in plan({'backend': 'sim', 'engine': 'pybullet',
                                                     'robot': 'simreal_quad'})
               if n.kind == 'sim_bridge']
    assert bridges == ['pybullet']


def test_a_second_quadruped_names_its_frames_with_its_prefix() -> None:
    """sim2sim's sim_b and the twin publish sim_b/odom -> sim_b/base_link (twin/...)."""
    prefixes = {(n.kind, n.namespace): n.parameters.get('frame_prefix')
                for n in plan({'backend': 'sim2sim', 'robot': 'simreal_quad'})}
    assert prefixes == {('sim_bridge', '/sim_a'): '', ('sim_bridge', '/sim_b'): 'sim_b/',
                        ('state_publisher', ''): '', ('state_publisher', '/sim_b'): 'sim_b/'}
    twin = [n for n in plan({'backend': 'twin', 'robot': 'simreal_quad', 'port': '/tmp/q',
                          'imu_port': '/tmp/imu'})
            if n.kind == 'sim_bridge']
    assert [n.parameters['frame_prefix'] for n in twin] == ['twin/']
